"""Milestone runner for pytest: locks later milestones, teaches on failure, ends with a board.

Loaded by the repository's top-level conftest.py. Options (see `python -m pytest --help`):
    --reference    test rubric/reference/ instead of code/
    --unlock-all   run every milestone even if an earlier one fails
    --stretch      also run the stretch milestones S1-S3
    --hint [M1][:TIER]   print the hints for your current milestone and exit
    --wire         rerun M5's two LiteLLM wire tests even where they already passed on this code
    --outcomes FILE      (course checks) write every test's outcome as JSON
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.milestones import ALL, BY_ID, LEARNER_FUNCTIONS, MILESTONES, Milestone, milestone_of_test_file
from harness.teach import CannotRun
from harness.paths import CODE_DIR, REFERENCE_DIR, REPO_ROOT
from harness import platform_sim, progress, wire

MILESTONE_KEY = pytest.StashKey[Milestone]()
NOT_DONE_PREFIX = "NOT DONE YET"
REPEATED_MESSAGE = "(the same message as {} above)"  # rubric/grading/board.py reads both back
CACHE_KEY = "lesson06/current"
CHECKS_DIR = REPO_ROOT / "rubric" / "checks"
# The learner's modules, in import order; stretch.py is only needed by S1-S3.
CORE_MODULES = ("tools", "agent_loop")


def pytest_addoption(parser):
    group = parser.getgroup("lesson06", "Lesson 06 milestones")
    group.addoption("--reference", action="store_true", help="test the reference solution in rubric/reference/ instead of code/")
    group.addoption("--unlock-all", action="store_true", help="run every milestone, even those locked behind a failing one")
    group.addoption("--stretch", action="store_true", help="also run the stretch milestones (S1-S3)")
    group.addoption("--hint", nargs="?", const="", default=None, metavar="M1[:TIER]",
                    help="print the hints for your current milestone (or M1..M6, tier 1-3) and exit")
    group.addoption("--wire", action="store_true",
                    help="rerun M5's LiteLLM wire tests (~10-30 s) even if they already passed on this exact code")
    group.addoption("--outcomes", default=None, metavar="FILE", help="write every test's outcome to FILE as JSON (course checks)")
    group.addoption("--impl-dir", default=None, metavar="DIR", help="test the modules in DIR (course checks: known-wrong variants)")


@dataclass
class Broken:
    """A learner module that does not import: no test can run until it does."""

    module: str                 # "tools"
    line: int | None
    problem: str                # "SyntaxError: '(' was never closed"
    function: str | None        # the learner function the problem lies in, if any
    milestone: Milestone | None
    source_line: str = ""
    summary: str = ""           # for the board; default "code/<module>.py does not import"

    def __post_init__(self):
        self.summary = self.summary or f"code/{self.module}.py does not import"

    @property
    def where(self) -> str:
        at = f" line {self.line}" if self.line else ""
        inside = f" (in {self.function}, {self.milestone.id})" if self.function and self.milestone else ""
        return f"code/{self.module}.py{at}{inside}"

    def message(self) -> str:
        shown = f"\n  {self.line:>5} | {self.source_line.rstrip()}" if self.line and self.source_line.strip() else ""
        return (f"{self.summary}: {self.problem}.{shown}\n"
                f"  where:  {self.where}\n"
                f"  next:   fix it, then run the tests again. Until it imports, no milestone can run"
                f" (shown once; the other tests wait).")


class Board:
    """What happened to each milestone's tests in this session."""

    def __init__(self, milestones):
        self.order = [m for m in ALL if m in milestones]
        self.passed = {m.id: 0 for m in self.order}
        self.failed = {m.id: 0 for m in self.order}
        self.locked = {m.id: 0 for m in self.order}
        self.waiting = {m.id: 0 for m in self.order}
        self.skipped: dict[str, str] = {}   # milestone -> the first skip reason
        self.not_done: set[str] = set()  # milestones whose function still raises NotImplementedError
        self.halted: set[str] = set()    # milestones whose function cannot be reached (renamed, ...)
        self.shown: dict[str, str] = {}  # failure text -> the test that showed it in full
        self.broken: Broken | None = None
        self.broken_shown = False
        self.live_passed = False  # the opt-in live test ran the copilot with the learner's provider
        self.recorded = {m.id: 0 for m in self.order}  # wire tests not rerun: they passed on this code before
        self.outcomes = []

    def predecessors(self, milestone: Milestone):
        core = [m for m in self.order if not m.stretch]
        if milestone.stretch:  # stretch milestones open once the copilot (M5) works
            return [m for m in core if m.id <= "M5"]
        return core[: core.index(milestone)]

    def blocker(self, milestone: Milestone) -> Milestone | None:
        return next((m for m in self.predecessors(milestone) if self.failed[m.id] or self.locked[m.id]), None)

    def current(self) -> Milestone | None:
        return next((m for m in self.order if self.failed[m.id]), None)

    def blocked_by_broken(self, milestone: Milestone) -> bool:
        return self.broken is not None and (self.broken.module != "stretch" or milestone.stretch)


def pytest_configure(config):
    platform_sim.apply()  # CI only: LESSON06_SIMULATE_PLATFORM=no-dirfd, before any lab module is imported
    config.addinivalue_line("markers", "live: calls a real provider with your key (opt-in: python -m pytest -m live)")
    config.addinivalue_line("markers", "wire: a slow M5 test through real LiteLLM; once it passed on your code, "
                                       "it is not rerun until code/ changes (--wire reruns it)")
    impl = REFERENCE_DIR if config.getoption("reference") else CODE_DIR
    if config.getoption("impl_dir"):
        impl = Path(config.getoption("impl_dir")).resolve()
    sys.path.insert(0, str(impl))  # ahead of code/, so `import tools` picks the implementation under test
    os.environ["LESSON06_IMPL"] = "reference" if impl == REFERENCE_DIR else "code" if impl == CODE_DIR else str(impl)
    config.stash[IMPL_KEY] = impl
    config.stash[BOARD_KEY] = None
    # The teaching message is printed in full once, above; the closing summary keeps one line per
    # test even where pytest would repeat it whole (on CI, or with -vv).
    if hasattr(config.option, "force_short_summary"):
        config.option.force_short_summary = True


def pytest_report_header(config):
    if platform_sim.requested():
        return f"{platform_sim.ENV}={platform_sim.MODE}: simulated platform, {platform_sim.DESCRIPTION}"
    return None


BOARD_KEY = pytest.StashKey["Board | None"]()
IMPL_KEY = pytest.StashKey[Path]()
STRETCH_HIDDEN_KEY = pytest.StashKey[int]()
CHECKS_SKIPPED_KEY = pytest.StashKey[bool]()


def pytest_cmdline_main(config):
    value = config.getoption("hint")
    if value is None:
        return None
    text, ok = render_hints(config, value)
    print(text, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else pytest.ExitCode.USAGE_ERROR


def render_hints(config, value: str) -> tuple[str, bool]:
    wanted, _, tier_text = value.partition(":")
    if wanted.isdigit():  # "--hint 2": tier 2 of the current milestone
        wanted, tier_text = "", wanted
    milestone = BY_ID.get(wanted.upper()) if wanted else None
    if wanted and milestone is None:
        return f"No milestone {wanted!r}. Choose one of {', '.join(BY_ID)}, e.g. python -m pytest --hint M2:2", False
    if milestone is None:
        current = read_current_milestone(config)
        milestone = BY_ID.get(current or "M1", MILESTONES[0])
    tier = min(max(int(tier_text), 1), 3) if tier_text.isdigit() else 1
    names = ("a nudge", "the approach", "pseudo-code")
    out = [f"{milestone.id} - {milestone.title}: {milestone.target}", f"lesson: {milestone.section}", ""]
    for number in range(1, tier + 1):
        out.append(f"Hint {number} of 3 ({names[number - 1]}):")
        for line in milestone.hints[number - 1].splitlines():
            out.extend(textwrap.wrap(line, 92, initial_indent="    ", subsequent_indent="    ") or [""])
        out.append("")
    if tier < 3:
        out.append(f"Still stuck? python -m pytest --hint {milestone.id}:{tier + 1}")
    return "\n".join(out), True


def read_current_milestone(config) -> str | None:
    """The milestone the last test run stopped at (the cache plugin is not up yet here)."""
    try:
        return json.loads((config.rootpath / ".pytest_cache" / "v" / CACHE_KEY).read_text())
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- collection

def pytest_ignore_collect(collection_path, config):
    """The course checks (rubric/checks) run only when named: `python -m pytest .` or an IDE that
    collects the whole tree must not run the maintainers' checks on a learner's work in progress."""
    path = Path(collection_path).resolve()
    if path != CHECKS_DIR and CHECKS_DIR not in path.parents:
        return None
    if checks_requested(config):
        return None
    config.stash[CHECKS_SKIPPED_KEY] = True
    return True


def checks_requested(config) -> bool:
    start = Path(config.invocation_params.dir)
    for arg in config.args:
        path = (start / arg.split("::", 1)[0]).resolve()
        if path == CHECKS_DIR or CHECKS_DIR in path.parents or path == CHECKS_DIR.parent:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    keep, dropped = [], []
    for item in items:
        milestone = milestone_of_test_file(item.path.name)
        if milestone is not None:
            item.stash[MILESTONE_KEY] = milestone
        if milestone is not None and milestone.stretch and not config.getoption("stretch"):
            dropped.append(item)  # opt-in: stretch milestones stay out of the learner's way
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        config.stash[STRETCH_HIDDEN_KEY] = len(dropped)
    rank = {m.id: i for i, m in enumerate(ALL)}
    keep.sort(key=lambda it: rank.get(it.stash[MILESTONE_KEY].id, -1) if MILESTONE_KEY in it.stash else -1)
    items[:] = keep


def pytest_collection_finish(session):
    """The board is built from what will really run (after -m/-k deselection)."""
    config = session.config
    milestones = {it.stash[MILESTONE_KEY] for it in session.items if MILESTONE_KEY in it.stash}
    board = Board(milestones)
    if milestones:
        board.broken = find_broken(config.stash[IMPL_KEY], any(m.stretch for m in milestones))
    config.stash[BOARD_KEY] = board


def find_broken(impl: Path, stretch: bool) -> Broken | None:
    """Import each learner module once, before any test: a module that does not import is
    reported once, in the words of the function it broke, instead of once per test."""
    for module in CORE_MODULES + (("stretch",) if stretch else ()):
        path = impl / f"{module}.py"
        try:
            source = path.read_text(encoding="utf-8")
        except OSError:
            continue  # a missing file is reported by the tests that need it
        try:
            compile(source, str(path), "exec")
            if module in CORE_MODULES:  # stretch.py imports the copilot (and numpy): compiled only
                importlib.import_module(module)
        except SyntaxError as exc:
            return broken_at(module, exc.lineno, f"{type(exc).__name__} on line {exc.lineno}: {exc.msg}", source)
        except Exception as exc:  # noqa: BLE001  (whatever the learner's module raises while importing)
            return import_failure(module, path, source, exc)
    return None


def import_failure(module: str, path: Path, source: str, exc: Exception) -> Broken:
    problem = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ImportError):  # `from tools import dispatch_tool` after a rename
        for qualified, milestone in LEARNER_FUNCTIONS.items():
            owner, name = qualified.split(".")
            if exc.name == owner and f"cannot import name {name!r}" in str(exc):
                return Broken(owner, None, f"code/{module}.py imports {qualified} by that name. Did you rename or delete "
                              f"it? `git diff code/{owner}.py` shows what changed", qualified, milestone,
                              summary=f"code/{owner}.py has no function {name}")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return broken_at(module, frames[-1].lineno if frames else None, problem, source)


def broken_at(module: str, line: int | None, problem: str, source: str) -> Broken:
    """Which learner function (and so which milestone) holds ``line``: the top-level def above it."""
    function = None
    for number, text in enumerate(source.splitlines(), 1):
        if line is None or number > line:
            break
        if text[:1].strip() and not text.startswith(("#", "@", ")", "]", "}")):
            found = re.match(r"(?:async\s+)?def\s+(\w+)", text)
            function = found[1] if found else None
    qualified = f"{module}.{function}" if function else None
    milestone = LEARNER_FUNCTIONS.get(qualified) if qualified else None
    lines = source.splitlines()
    text = lines[line - 1] if line and 0 < line <= len(lines) else ""
    return Broken(module, line, problem, qualified if milestone else None, milestone, text)


# --------------------------------------------------------------------------- running

def testing_code(config) -> bool:
    """The learner's own code/ is under test (not --reference, not a course check's --impl-dir)."""
    return config.stash[IMPL_KEY] == CODE_DIR


def pytest_runtest_setup(item):
    if "live" in item.keywords and "live" not in (item.config.getoption("markexpr") or ""):
        pytest.skip("live test: opt in with `python -m pytest -m live` and a key in code/.env")
    board = item.config.stash[BOARD_KEY]
    milestone = item.stash.get(MILESTONE_KEY, None)
    if board is None or milestone is None:
        return
    if board.blocked_by_broken(milestone):
        if not board.broken_shown:
            board.broken_shown = True
            pytest.fail(board.broken.message(), pytrace=False)
        board.waiting[milestone.id] += 1
        pytest.skip(f"waiting: {board.broken.summary} (see the first failure)")
    if item.config.getoption("unlock_all"):
        return
    blocker = board.blocker(milestone)
    if blocker is None and "wire" in item.keywords and wire.recorded(item.config, item.nodeid, testing_code(item.config)):
        board.recorded[milestone.id] += 1
        pytest.skip(wire.SKIP_REASON)
    if blocker is not None:
        board.locked[milestone.id] += 1
        pytest.skip(f"locked: finish {blocker.id} first")
    if milestone.id in board.not_done:  # one "not done yet" says it all; spare the wall of red
        board.waiting[milestone.id] += 1
        pytest.skip(f"waiting: {milestone.id} is not started yet (see its first failure)")
    if milestone.id in board.halted:  # so does one "has no function ..."
        board.waiting[milestone.id] += 1
        pytest.skip(f"waiting: {milestone.id} cannot run yet (see its first failure)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    board = item.config.stash[BOARD_KEY]
    milestone = item.stash.get(MILESTONE_KEY, None)
    if board is None or milestone is None:
        return
    not_done = None
    if report.failed and call.excinfo is not None:
        if call.excinfo.errisinstance(NotImplementedError):
            not_done = BY_ID.get(str(call.excinfo.value).split(":", 1)[0].strip())
            if not_done is not None:
                report.longrepr = not_done_message(not_done, item)
                board.not_done.add(milestone.id)
        elif isinstance(call.excinfo.value, pytest.fail.Exception) and not call.excinfo.value.pytrace:
            # A teaching message alone: no "During handling of the above exception" chain before it.
            report.longrepr = call.excinfo.value.msg
            if call.excinfo.errisinstance(CannotRun):
                board.halted.add(milestone.id)
    if report.failed:
        text = str(report.longrepr)
        if text in board.shown:  # the same message again (a syntax error, a renamed function): once is enough
            report.longrepr = REPEATED_MESSAGE.format(board.shown[text])
        elif board.failed[milestone.id]:  # only the first failure of a milestone is shown in full
            report.longrepr = shorten(text, not_done)
        board.shown.setdefault(text, item.name)
        if board.broken is None or not board.blocked_by_broken(milestone):
            board.failed[milestone.id] += 1
    elif report.when == "call" and report.passed:
        board.passed[milestone.id] += 1
        board.live_passed |= "live" in item.keywords
        if "wire" in item.keywords:
            wire.record(item.config, item.nodeid, testing_code(item.config))
    elif report.skipped and milestone.id not in board.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        board.skipped[milestone.id] = reason.removeprefix("Skipped: ")
    if report.when == "call" or report.outcome != "passed":
        board.outcomes.append({
            "nodeid": item.nodeid, "milestone": milestone.id, "when": report.when,
            "outcome": report.outcome, "not_done": not_done.id if not_done else None,
            "message": str(report.longrepr)[:2000] if report.longrepr else "",
        })


def not_done_message(milestone: Milestone, item) -> str:
    purpose = (item.function.__doc__ or item.name).strip().splitlines()[0]
    return (
        f"{NOT_DONE_PREFIX}: {milestone.id} ({milestone.title}). "
        f"{', '.join(milestone.functions)} still raises NotImplementedError.\n"
        f"  this test checks: {purpose}\n"
        f"  next:   open {milestone.file}, find TODO({milestone.id}), read the docstring above it, implement it.\n"
        f"  lesson: {milestone.section}   |   hints: python -m pytest --hint {milestone.id}"
    )


def shorten(text: str, not_done: Milestone | None) -> str:
    if not_done is not None:
        return f"{NOT_DONE_PREFIX}: {not_done.id} (same as the first failure above)"
    keep = [line for line in text.splitlines() if line.strip().startswith(("called:", "expected:", "got:"))]
    return "\n".join(keep) if keep else text


# --------------------------------------------------------------------------- the board

def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tr = terminalreporter
    board = config.stash.get(BOARD_KEY, None)
    if board is not None and board.order and not config.getoption("collectonly"):
        lines, current = board_lines(board, config, symbols(tr))
        tr.section("Lesson 06 milestones", sep="-")
        for line in lines:
            tr.write_line(line)
        if getattr(config, "cache", None) is not None:  # absent with -p no:cacheprovider
            config.cache.set(CACHE_KEY, current.id if current else None)
    if config.stash.get(CHECKS_SKIPPED_KEY, False):
        tr.write_line("rubric/checks not collected: those are the maintainers' course checks "
                      "(name the folder to run them; README.md, For maintainers)")


def board_lines(board: Board, config, marks) -> tuple[list[str], Milestone | None]:
    """The board's lines, and the milestone the learner is on (remembered for --hint)."""
    ok, bad, arrow, half = marks
    width = max(len(m.title) for m in board.order) + 2
    ours = testing_code(config)
    where = "rubric/reference/ (--reference)" if config.getoption("reference") else "code/"
    broken = board.broken
    current = board.current()
    if broken is not None:
        blocked = [m for m in board.order if board.blocked_by_broken(m)]
        remembered = BY_ID.get(read_current_milestone(config) or "")
        current = next((m for m in (broken.milestone, remembered) if m in blocked), blocked[0])
    pending = {} if not ours or broken else progress.pending(board.passed, board.failed, board.live_passed)
    lines, first_pending = [], None
    for m in board.order:
        p, f, locked = board.passed[m.id], board.failed[m.id], board.locked[m.id]
        label = f"{m.id}  {m.title:<{width}}"
        if broken is not None and board.blocked_by_broken(m):
            if m is current:
                lines.append(f"{label}{bad} cannot run: {broken.summary}  "
                             f"{arrow} you are here: fix {broken.where}")
            else:
                lines.append(f"{label}not run ({broken.summary})")
        elif f:
            extra = f"  {arrow} you are here: {m.target}" if m is current else ""
            if m.id in board.not_done and not p:
                state = f"not started ({board.waiting[m.id] + f} tests wait for it)"
            elif m.id in board.halted and not p:
                state = f"cannot run yet: see the first failure ({board.waiting[m.id] + f} tests wait for it)"
            else:
                state = f"{f} failing, {p} passing"
            lines.append(f"{label}{bad} {state}{extra}")
        elif locked:
            blocker = board.blocker(m)
            lines.append(f"{label}locked (finish {blocker.id if blocker else 'earlier milestones'} first)")
        elif m.id in pending:
            extra = ""
            if first_pending is None and current is None:
                first_pending = m
                extra = f"  {arrow} you are here"
            again = f" (+{board.recorded[m.id]} passed earlier)" if board.recorded[m.id] else ""
            lines.append(f"{label}{half} {p} passing{again}; still to do: {pending[m.id][1]}{extra}")
        elif p:
            again = board.recorded[m.id]
            lines.append(f"{label}{ok} {p} passing" + (f" (+{again} passed earlier on this code; --wire reruns)" if again else ""))
        else:
            reason = board.skipped.get(m.id, "no test ran")
            lines.append(f"{label}{reason if 'skipped' in reason else 'skipped: ' + reason}")
    hidden = config.stash.get(STRETCH_HIDDEN_KEY, 0)
    if hidden and not config.getoption("markexpr") and not config.getoption("keyword"):
        m5_passes = board.passed.get("M5") and not board.failed.get("M5") and not board.locked.get("M5")
        lines.append(f"S1-S3  stretch milestones: {hidden} tests; M5's tests pass, so opt in with `python -m pytest "
                     "--stretch`" if m5_passes else f"S1-S3  stretch milestones: {hidden} tests, unlocked once M5's tests pass")
    understanding = progress.understanding_line() if ours and not broken else None
    if understanding is not None and len(board.order) > 1:  # the whole board, not one file's tests
        done, text = understanding
        lines.append(f"{'UNDERSTANDING.md':<{width + 4}}{ok if done else half} {text}")
    if broken is not None:
        lines.append(f"next: fix that first (the message above says where)   [testing {where}]")
    elif current is not None:
        lines.append(f"next: fix the first failure above; stuck? python -m pytest --hint   [testing {where}]")
    elif pending:
        todo = ", ".join(f"{short} ({mid})" for mid, (short, _) in pending.items())
        lines.append(f"next: the tests pass; still to do: {todo}   [testing {where}]")
        current = first_pending
    elif not any(board.passed.values()):
        lines.append(f"nothing was checked: every selected test was skipped (reasons above)   [testing {where}]")
    else:
        lines.append(f"all selected milestones pass   [testing {where}]")
    return lines, current


def symbols(terminalreporter):
    encoding = getattr(terminalreporter._tw, "_file", sys.stdout).encoding or "ascii"
    try:
        "\u2713\u2717\u2190\u25d0".encode(encoding)
        return "\u2713", "\u2717", "\u2190", "\u25d0"
    except (UnicodeEncodeError, LookupError):
        return "ok", "FAIL", "<-", "..."


def pytest_sessionfinish(session):
    path = session.config.getoption("outcomes")
    board = session.config.stash.get(BOARD_KEY, None)
    if path and board is not None:
        Path(path).write_text(json.dumps({
            "implementation": os.environ.get("LESSON06_IMPL"),
            "litellm_imported": "litellm" in sys.modules,
            "tests": board.outcomes,
        }, indent=1))
