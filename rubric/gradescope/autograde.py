"""What run_autograder runs on Gradescope: one submission in, results.json out, whatever happens.

Every path can be moved with an environment variable, so the same script runs on a laptop or in a
test (rubric/checks/test_grade_delivery.py):

    GRADESCOPE_SUBMISSION   the learner's files             (default /autograder/submission)
    GRADESCOPE_RESULTS      the results.json to write       (default /autograder/results/results.json)
    GRADESCOPE_WORK         a scratch folder for the copy and the reports (default /autograder/work)
    GRADESCOPE_VISIBILITY   when learners see the criteria  (default after_published)
    GRADESCOPE_GRADE_ARGS   extra grade.py flags, e.g. "--quick" (default none)
    GRADESCOPE_TIMEOUT      seconds for the whole grading   (default 1500)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.insert(0, str(RUBRIC))

from grading import gradescope, runner, sandbox  # noqa: E402
from grading.safe_text import file_stem  # noqa: E402


def setting(name: str, default: str) -> str:
    return os.environ.get(f"GRADESCOPE_{name}") or default


class NotSafe(RuntimeError):
    """Neither bubblewrap nor a separate user can run learner code here."""


def sandbox_flags() -> tuple:
    """(flags for grade.py, a note): bubblewrap where the container allows its namespaces, else a
    separate unprivileged user (setup.sh creates it); never --no-sandbox."""
    kind, why = sandbox.choose("auto")
    if kind:
        return [], ""
    why_user = sandbox.user_works()
    if why_user:
        raise NotSafe(f"no bubblewrap ({why}) and no separate user ({why_user})")
    return ["--sandbox", "user"], (f"no bubblewrap in this container ({why}): learner code ran as the unprivileged "
                                   f"user {sandbox.SANDBOX_USER}, without namespaces (its network was not cut)")


def grade(submission: Path, work: Path, extra: list) -> dict:
    """The JSON report grade.py wrote for a copy of ``submission``."""
    if not submission.is_dir():
        raise RuntimeError(f"no submission folder at {submission}")
    shutil.rmtree(work, ignore_errors=True)
    learner = work / "learner"
    shutil.copytree(submission, learner, symlinks=True)
    grade_py = RUBRIC / "grade.py"
    flags, note = sandbox_flags()
    log = work / "grade.log"
    try:
        with open(log, "w", encoding="utf-8") as out:  # a file, not a pipe: nothing learner code holds can block us
            proc = subprocess.run([sys.executable, str(grade_py), str(learner), "--out", str(work / "reports"), "--json",
                                   *flags, *extra], stdout=subprocess.DEVNULL, stderr=out,
                                  timeout=float(setting("TIMEOUT", "1500")), cwd=work)
    finally:
        if flags:   # before anything is read or written: no process of the learner's user is left
            sandbox.kill_user(sandbox.SANDBOX_USER)
    report = work / "reports" / f"{file_stem(learner.name)}.json"
    if proc.returncode != 0 or not report.is_file():
        tail = log.read_text(encoding="utf-8", errors="replace")[-1500:]
        raise RuntimeError(f"grade.py exited with {proc.returncode}: {tail}")
    result = json.loads(report.read_text(encoding="utf-8"))
    if note:
        result.setdefault("integrity", {}).setdefault("flags", {})["no_sandbox_in_container"] = note
    return result


def main() -> int:
    results = Path(setting("RESULTS", "/autograder/results/results.json"))
    visibility = setting("VISIBILITY", "after_published")
    runner.drop_own_secrets()   # and not dumpable: no process of another user reads this one's environ
    try:
        data = gradescope.results(grade(Path(setting("SUBMISSION", "/autograder/submission")),
                                        Path(setting("WORK", "/autograder/work")),
                                        shlex.split(setting("GRADE_ARGS", ""))), visibility)
    except NotSafe as exc:   # never a silent --no-sandbox: a valid results.json that says why
        data = gradescope.could_not_grade(f"could not be graded safely: {exc}", visibility)
    except Exception as exc:  # a results.json in every case: Gradescope shows an error page without one
        data = gradescope.could_not_grade(f"{type(exc).__name__}: {exc}", visibility)
    sandbox.kill_user(sandbox.SANDBOX_USER)   # whatever happened above: results.json is written last, by root
    results.parent.mkdir(parents=True, exist_ok=True)
    tmp = results.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, results)
    print(f"autograde: {data['score']} points written to {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
