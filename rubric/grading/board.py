"""The lab's own guiding tests, pristine, run on the learner's code: outcomes per test and milestone.

Outcomes come from the grader's own per-test stream (grading/pytest_timer.py writes each report
to a pipe the grader reads while the session runs), never from a file the session could rewrite
afterwards (a junit file forged from atexit, or by a daemon, changes nothing). A test reported
twice keeps its worse outcome. These outcomes are information: the tests run in the same process
as the learner's code, so the points for C1-C3 also rest on the battery, judged outside.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from grading import runner
from grading.workspace import LAB_ROOT

if str(LAB_ROOT / "code") not in sys.path:  # appended: never ahead of an implementation pytest chose
    sys.path.append(str(LAB_ROOT / "code"))
from harness.milestones import ALL, milestone_of_test_file  # noqa: E402  (the course as data)
from harness.plugin import NOT_DONE_PREFIX, REPEATED_MESSAGE  # noqa: E402  (the words the board prints)

PYTEST_TIMEOUT = 420        # the whole run; each test has its own, shorter, limit
FIRST_RECORD_SECONDS = 120  # no test started by then: the session is ended (an import that stalls)


@dataclass
class Test:
    nodeid: str               # code/tests/test_m1_sandbox.py::test_name[param]
    milestone: str | None
    outcome: str              # passed, failed, skipped, timeout, not run
    message: str = ""
    not_done: bool = False    # failed because the learner function still raises NotImplementedError

    @property
    def name(self) -> str:
        return self.nodeid.split("::", 1)[-1]


@dataclass
class Board:
    tests: list = field(default_factory=list)
    ran: object = None        # runner.Ran of the pytest process
    source: str = "stream"    # stream (read live by the grader) | log (a file: containers only)
    collection_error: str = ""
    expected: list = field(default_factory=list)   # "file::test" the lab defines in the files that were run

    def missing(self) -> list:
        """Tests the lab defines that the stream never mentioned (not even as a file that failed to
        collect): not observed, never passed."""
        if any(t.nodeid == "collection" for t in self.tests):
            return []
        failed_files = {t.nodeid for t in self.tests if "::" not in t.nodeid}
        return [n for n in self.expected if n.split("::")[0] not in failed_files and not self.named(n)]

    def cause(self) -> str:
        """Whose doing the missing tests are: "learner" when the session ended by itself, was skipped
        after the learner's import stalled, or never reported a single test before its deadline;
        "grader" when its deadline cut a session short that was reporting tests."""
        ran = self.ran
        if ran is None or getattr(ran, "skipped", ""):
            return "learner"
        if ran.timed_out and self.tests:
            return "grader"
        return "learner"

    def of(self, milestone: str) -> list:
        return [t for t in self.tests if t.milestone == milestone]

    def named(self, name: str) -> list:
        """Tests whose name is ``name`` or a parametrization of it; test file optional."""
        file, _, test = name.rpartition("::")
        return [t for t in self.tests if (t.name == test or t.name.startswith(test + "["))
                and (not file or t.nodeid.startswith(file))]

    def summary(self, milestone: str) -> dict:
        tests = self.of(milestone)
        count = {k: sum(t.outcome == k for t in tests) for k in ("passed", "failed", "skipped", "timeout")}
        count["not_done"] = sum(t.not_done for t in tests)
        count["total"] = len(tests)
        return count

    def state(self, milestone: str) -> str:
        """passing | failing | not started | timeout | no tests."""
        s = self.summary(milestone)
        if not s["total"]:
            return "no tests"
        if s["timeout"]:
            return "timeout"
        if s["not_done"] and not s["passed"]:
            return "not started"
        if s["failed"]:
            return "failing"
        return "passing" if s["passed"] else "skipped"

    def line(self, milestone: str) -> str:
        s, state = self.summary(milestone), self.state(milestone)
        extra = f", {s['timeout']} timed out" if s["timeout"] else ""
        return f"{state}: {s['passed']} passed, {s['failed']} failed{extra}, {s['skipped']} skipped of {s['total']}"


CORE_FILES = ("code/tests/test_m1_*.py", "code/tests/test_m2_*.py", "code/tests/test_m3_*.py", "code/tests/test_m4_*.py")


def run_board(lab: Path, home: Path, stretch: bool, memory_mb: int, limits: tuple, quick: bool = False,
              box=None) -> Board:
    """limits: (seconds per test, seconds per test after a first timeout).
    quick: only the M1-M4 tests (no litellm import): seconds instead of tens of seconds."""
    # containers only (no descriptor crosses into one): a single file outside the work folder, bound
    # into the container as itself, so it cannot be swapped for a FIFO or a link; read back bounded
    log = home.parent / f"tests-{os.getpid()}-{threading.get_ident()}.jsonl"
    files = sorted(str(p.relative_to(lab)) for pattern in CORE_FILES for p in lab.glob(pattern)) if quick else ["code/tests"]
    args = ["-m", "pytest", "-p", "no:cacheprovider", "-p", "grading.pytest_timer", "--unlock-all",
            "-q", "--tb=short", *files]
    if stretch and not quick:
        args.insert(-1, "--stretch")
    streamed = runner.POSIX and getattr(box, "kind", "none") in ("bubblewrap", "none", "user")
    if not streamed:
        log.write_bytes(b"")
        os.chmod(log, 0o666)    # the container's unprivileged user appends to it
        if box is not None:
            import dataclasses
            box = dataclasses.replace(box, writable=[*box.writable, log])
    read_fd, write_fd = os.pipe() if streamed else (None, None)
    channel = {"GRADE_LOG_FD": str(write_fd)} if streamed else {"GRADE_LOG": str(log)}
    env = runner.child_env(home, PYTHONPATH=str(lab / "rubric"), GRADE_TEST_SECONDS=str(limits[0]),
                           GRADE_TEST_SECONDS_AFTER=str(limits[1]), **channel)
    lines: list = []
    if streamed:
        reader = threading.Thread(target=_drain, args=(read_fd, lines), daemon=True)
        reader.start()
    try:
        with runner.Child(args, cwd=lab, env=env, timeout=PYTEST_TIMEOUT, memory_mb=memory_mb, box=box,
                          pass_fds=(write_fd,) if streamed else ()) as child:
            if streamed:
                os.close(write_fd)
                write_fd = None
                child.wait(child.started + FIRST_RECORD_SECONDS)
                if child.timed_out and not lines:   # not one test started: the import stalls (the learner's)
                    child.end()
                else:
                    child.timed_out = False
            ran = child.finish()
    finally:
        if write_fd is not None:
            os.close(write_fd)
    if streamed:
        reader.join(timeout=5)    # everything is dead by now; a descriptor held elsewhere cannot hold us
    else:
        lines = _read_lines(log)
        try:
            log.unlink()
        except OSError:
            pass
    board = Board(ran=ran, source="stream" if streamed else "log", expected=[n for n in defined_tests(lab, files)
                                                                           if stretch or not _is_stretch(n)])
    board.tests = _resolve_repeats(_from_log(lines))
    errors = [t for t in board.tests if t.outcome == "failed" and (t.milestone is None or "::" not in t.nodeid)]
    if errors:
        board.collection_error = errors[0].message[:1500]
    if not board.tests and not ran.timed_out:
        board.collection_error = (ran.stdout[-1500:] + ran.stderr[-1500:]).strip()
    return board


def skipped_board(lab: Path, stretch: bool, quick: bool, why: str) -> Board:
    """The board of a session not run (the learner's import already stalled): every test not observed."""
    files = sorted(str(p.relative_to(lab)) for pattern in CORE_FILES for p in lab.glob(pattern)) if quick else ["code/tests"]
    return Board(ran=runner.Ran(["pytest"], None, "", why, 0.0, skipped=why),
                 expected=[n for n in defined_tests(lab, files) if stretch or not _is_stretch(n)])


def _is_stretch(nodeid: str) -> bool:
    m = milestone_of_test_file(nodeid.split("::", 1)[0])
    return bool(m and m.stretch)


def defined_tests(lab: Path, run: list) -> list:
    """"code/tests/test_x.py::test_name" for every test function in the files (or folders) ``run``."""
    import ast
    out = []
    for item in run:
        path = lab / item
        for f in sorted(path.glob("test_*.py")) if path.is_dir() else [path]:
            try:
                tree = ast.parse(f.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                continue
            rel = f.relative_to(lab).as_posix()
            out += [f"{rel}::{n.name}" for n in tree.body
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_")]
    return out


LINE_BYTES = 64 << 10       # a real record is a few KB (its message is cut at 1,500 characters)
KEEP_BYTES = 32 << 20       # all records kept from one session: 100,000 lines of 1 MB would be 100 GB


def _drain(fd: int, lines: list) -> None:
    """A learner flooding the channel is kept reading (so it never blocks), not kept in memory."""
    kept = 0
    with open(fd, "rb", closefd=True) as fh:
        pending = b""
        for chunk in iter(lambda: fh.read1(65536), b""):
            pending += chunk
            *done, pending = pending.split(b"\n")
            for x in done:
                if len(x) <= LINE_BYTES and kept + len(x) <= KEEP_BYTES and len(lines) < 100_000:
                    lines.append(x.decode("utf-8", "replace"))
                    kept += len(x)
            if len(pending) > LINE_BYTES:
                pending = b""


def _read_lines(path: Path) -> list:
    """The log's lines, read without following a link or blocking on a FIFO (a learner's atexit hook
    may have replaced it), regular files only, at most KEEP_BYTES."""
    from grading.workspace import read_back
    return read_back(path, KEEP_BYTES).decode("utf-8", "replace").splitlines()[:100_000]


def _milestone(nodeid: str) -> str | None:
    m = milestone_of_test_file(nodeid.split("::", 1)[0])
    return m.id if m else None


def _test(nodeid: str, outcome: str, message: str) -> Test:
    timeout = "GRADER TIMEOUT" in message
    not_done = outcome == "failed" and (NOT_DONE_PREFIX in message or "NotImplementedError" in message)
    return Test(nodeid, _milestone(nodeid), "timeout" if timeout else outcome, message[:1500], not_done)


REPEATED = re.compile(re.escape(REPEATED_MESSAGE).replace(re.escape("{}"), "(.+?)"))


def _resolve_repeats(tests: list) -> list:
    """The lab's plugin prints a repeated message once, then "(the same message as X above)" for
    the next tests: give those X's message, so they are judged as X is (not started, failed)."""
    by_name = {t.name: t for t in tests}
    for t in tests:
        said = REPEATED.match(t.message)
        first = by_name.get(said.group(1)) if said else None
        if first is not None and first is not t:
            t.message, t.not_done = first.message, first.not_done
    return tests


WORSE = {"passed": 0, "skipped": 1, "failed": 2, "timeout": 3}   # a test reported twice keeps its worse outcome


def _from_log(lines: list) -> list:
    """The tests that finished before the session was killed, and the one it was killed in."""
    done: dict[str, Test] = {}
    started = None
    for line in lines:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("nodeid"), str) or rec.get("event") not in (
                "start", "setup", "call", "teardown", "collect") or not isinstance(rec.get("outcome", ""), str):
            continue
        if rec["event"] == "start":
            started = rec["nodeid"]
            continue
        prior, new = done.get(rec["nodeid"]), _test(rec["nodeid"], rec.get("outcome", "failed"), str(rec.get("message", "")))
        if prior is None or WORSE.get(new.outcome, 3) > WORSE.get(prior.outcome, 3):   # a forged line cannot hide a failure
            done[rec["nodeid"]] = new
        started = None
    if started and started not in done:
        done[started] = _test(started, "timeout", "GRADER TIMEOUT: the whole test session was killed here")
    return list(done.values())


def milestones(stretch: bool) -> list:
    return [m for m in ALL if stretch or not m.stretch]
