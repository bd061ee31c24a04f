"""The lab's own guiding tests, pristine, run on the learner's code: outcomes per test and milestone.

Outcomes come from pytest's built-in --junitxml (the milestone plugin is left alone); when the run
had to be killed, from the grader's own per-test log (grading/pytest_timer.py).
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from grading import runner
from grading.workspace import LAB_ROOT

if str(LAB_ROOT / "code") not in sys.path:  # appended: never ahead of an implementation pytest chose
    sys.path.append(str(LAB_ROOT / "code"))
from harness.milestones import ALL, milestone_of_test_file  # noqa: E402  (the course as data)
from harness.plugin import NOT_DONE_PREFIX, REPEATED_MESSAGE  # noqa: E402  (the words the board prints)

PYTEST_TIMEOUT = 420        # the whole run; each test has its own, shorter, limit


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
    source: str = "junit"     # junit | log (the session was killed) | none
    collection_error: str = ""

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


def run_board(lab: Path, home: Path, stretch: bool, memory_mb: int, limits: tuple, quick: bool = False) -> Board:
    """limits: (seconds per test, seconds per test after a first timeout).
    quick: only the M1-M4 tests (no litellm import): seconds instead of tens of seconds."""
    xml, log = home / "junit.xml", home / "tests.jsonl"
    files = sorted(str(p.relative_to(lab)) for pattern in CORE_FILES for p in lab.glob(pattern)) if quick else ["code/tests"]
    args = ["-m", "pytest", "-p", "no:cacheprovider", "-p", "grading.pytest_timer", "--unlock-all",
            f"--junitxml={xml}", "-o", "junit_family=xunit1", "-q", "--tb=short", *files]
    if stretch and not quick:
        args.insert(-1, "--stretch")
    env = runner.child_env(home, PYTHONPATH=str(lab / "rubric"), GRADE_LOG=str(log),
                           GRADE_TEST_SECONDS=str(limits[0]), GRADE_TEST_SECONDS_AFTER=str(limits[1]))
    ran = runner.run(args, cwd=lab, env=env, timeout=PYTEST_TIMEOUT, memory_mb=memory_mb)
    board = Board(ran=ran)
    if xml.exists():
        board.tests = _resolve_repeats(_from_junit(xml))
    else:
        board.source = "log" if log.exists() else "none"
        board.tests = _resolve_repeats(_from_log(log)) if log.exists() else []
    errors = [t for t in board.tests if t.milestone is None and t.outcome == "failed"]
    if errors:
        board.collection_error = errors[0].message[:1500]
    if not board.tests and not ran.timed_out:
        board.collection_error = (ran.stdout[-1500:] + ran.stderr[-1500:]).strip()
    return board


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


def _from_junit(path: Path) -> list:
    tests = []
    for case in ET.parse(path).iter("testcase"):
        file = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        nodeid = f"{file}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", (child.get("message") or "") + "\n" + (child.text or "")
                break
            if child.tag == "skipped":
                outcome, message = "skipped", child.get("message") or ""
        tests.append(_test(nodeid, outcome, message.strip()))
    return tests


def _from_log(path: Path) -> list:
    """The tests that finished before the session was killed, and the one it was killed in."""
    done: dict[str, Test] = {}
    started = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec["event"] == "start":
            started = rec["nodeid"]
            continue
        prior = done.get(rec["nodeid"])
        if prior is None or prior.outcome == "passed":
            done[rec["nodeid"]] = _test(rec["nodeid"], rec["outcome"], rec.get("message", ""))
        started = None
    if started and started not in done:
        done[started] = _test(started, "timeout", "GRADER TIMEOUT: the whole test session was killed here")
    return list(done.values())


def milestones(stretch: bool) -> list:
    return [m for m in ALL if stretch or not m.stretch]
