"""A pytest plugin the grader loads (-p grading.pytest_timer): a time limit per test, and a log.

A learner's ``while True: pass`` would otherwise hold the whole run until the grader's outer
timeout, and with it every outcome. On POSIX each test gets GRADE_TEST_SECONDS (SIGALRM); once a
test has timed out, the rest get GRADE_TEST_SECONDS_AFTER, since the loop is already on record.
The timeout is a BaseException, so a learner's ``except Exception`` cannot swallow it.
Every report is also written as a JSON line to GRADE_LOG_FD, a pipe the grader reads while the
session runs (so a later rewrite of any file, from atexit or a daemon, changes nothing it read),
or appended to the file GRADE_LOG where no descriptor can be passed (a container).
"""

from __future__ import annotations

import json
import os
import signal

import pytest


class GraderTimeout(BaseException):
    pass


_state = {"timeouts": 0}


def _budget() -> float:
    first = float(os.environ.get("GRADE_TEST_SECONDS", "60"))
    later = float(os.environ.get("GRADE_TEST_SECONDS_AFTER", "2"))
    return later if _state["timeouts"] else first


def _log(record: dict, _fd=os.environ.get("GRADE_LOG_FD"), _write=os.write, _dumps=json.dumps) -> None:
    # bound at import, before any learner code: a later patch of os.write or json does not reach here
    if _fd:
        data = (_dumps(record) + "\n").encode()
        while data:
            data = data[_write(int(_fd), data):]
        return
    path = os.environ.get("GRADE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(_dumps(record) + "\n")


def pytest_collectreport(report, _log=_log):
    if report.failed:
        _log({"nodeid": report.nodeid or "collection", "event": "collect", "outcome": "failed",
              "message": str(report.longrepr)[:1500]})


def _alarm(signum, frame):
    raise GraderTimeout(f"GRADER TIMEOUT: the test ran longer than {_budget():g} s (an endless loop?)")


# Each hook holds the logger as a default argument (pluggy never passes those): patching this
# module's _log from a learner function does not silence the reports that follow.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem, _log=_log):
    _log({"nodeid": item.nodeid, "event": "start"})
    usable = hasattr(signal, "setitimer")
    if usable:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, _budget())
    try:
        yield
    finally:
        if usable:
            signal.setitimer(signal.ITIMER_REAL, 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call, _log=_log):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(GraderTimeout):
        _state["timeouts"] += 1
        report.outcome = "failed"
        report.longrepr = str(call.excinfo.value)
    if report.when == "call" or report.outcome != "passed":
        _log({"nodeid": item.nodeid, "event": report.when, "outcome": report.outcome,
              "message": str(report.longrepr)[:1500] if report.longrepr else ""})
