"""Failure messages that teach: which milestone, which function, what was called, what was
expected, what came back, and where in the lesson to look.

Tests use ``learner()`` to fetch a learner-owned function (a friendly message if it was renamed
or its file does not import) and ``check()`` / ``fail()`` to report.
"""

from __future__ import annotations

import importlib
import pytest

from harness.milestones import LEARNER_FUNCTIONS, Milestone


class CannotRun(pytest.fail.Exception):
    """The function under test cannot be reached (renamed, deleted, or its module does not import):
    the board shows this once and the milestone's other tests wait for it."""


def learner(qualified: str):
    """Return the function ``module.name`` from the implementation under test.

    A missing module, a syntax error or a renamed function becomes one readable failure
    instead of a collection error.
    """
    module_name, func_name = qualified.split(".")
    try:
        module = importlib.import_module(module_name)
    except SyntaxError as exc:
        raise CannotRun(
            f"code/{module_name}.py does not import: SyntaxError on line {exc.lineno}: {exc.msg}.\n"
            f"  Fix that line, then run the tests again.",
            pytrace=False,
        ) from None
    except ImportError as exc:
        raise CannotRun(f"code/{module_name}.py does not import: {exc}.", pytrace=False) from None
    fn = getattr(module, func_name, None)
    if not callable(fn):
        milestone = LEARNER_FUNCTIONS.get(qualified)
        where = f" ({milestone.id})" if milestone else ""
        raise CannotRun(
            f"code/{module_name}.py has no function {func_name}{where}.\n"
            f"  The tests, copilot.py and the lesson all call {qualified} by that name.\n"
            f"  Did you rename or delete it? `git diff code/{module_name}.py` shows what changed.",
            pytrace=False,
        )
    return fn


def show(value, limit: int = 300) -> str:
    """repr() for a failure message, shortened and with the temp directory hidden."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 15] + " ...[cut]"


def fail(milestone: Milestone, function: str, called: str, expected: str, got: str, hint: str):
    lines = [
        f"{milestone.id} ({milestone.title}) - {function}",
        f"  called:   {called}",
        f"  expected: {expected}",
        f"  got:      {got}",
        f"  hint:     {hint}",
        f"  lesson:   {milestone.section}   |   hints: python -m pytest --hint {milestone.id}",
    ]
    pytest.fail("\n".join(lines), pytrace=False)


def check(ok: bool, milestone: Milestone, function: str, called: str, expected: str, got: str, hint: str):
    if not ok:
        fail(milestone, function, called, expected, got, hint)
