"""A grade result as Gradescope's results.json (the autograder specification's output format).

One test per rubric criterion (name, number, score, max_score, output, visibility); a criterion on
HOLD scores 0 and says an instructor will review it, so the suggested level never reaches the
learner as a grade. The criteria inherit the assignment-wide ``visibility``, by default
``after_published``: learners see nothing until the instructor has reviewed and published. One
more test, always ``hidden`` and without a score, carries the flags and the report for the
instructor. Test outputs are Markdown (``md``) whose learner text went
through safe_text.md; the top-level output is plain ``text`` (Gradescope's default there renders
HTML, so it is set explicitly).
"""

from __future__ import annotations

from grading import feedback, report
from grading.safe_text import md, terminal

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
HOLD_OUTPUT = ("An instructor will review this criterion before it is graded; until then it counts 0 points. "
               "Your instructor will talk with you about it.")


def results(r: dict, visibility: str = "after_published") -> dict:
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}, not {visibility!r}")
    tests = []
    for c in r["criteria"]:
        held = report.mark(c) == "HOLD"
        tests.append({"name": f"C{c['number']} {c['title']}", "number": str(c["number"]),
                      "score": 0 if held else c["points"], "max_score": c["weight"],
                      "output": HOLD_OUTPUT if held else _output(r, c), "output_format": "md",
                      "visibility": visibility, "tags": [c["level"]] if not held else ["HOLD"]})
    notes = report.flags(r)
    tests.append({"name": "Instructor notes (hidden from learners)", "status": "failed" if notes else "passed",
                  "output": "Flags: " + ("; ".join(map(md, notes)) if notes else "none") + "\n\n" + report.markdown(r),
                  "output_format": "md", "visibility": "hidden"})
    score = sum(t["score"] for t in tests if "score" in t)
    return {"score": score, "execution_time": int(r.get("seconds") or 0), "output": _top(r, score), "output_format": "text",
            "visibility": visibility, "stdout_visibility": "hidden", "tests": tests,
            "extra_data": {"levels": {f"C{c['number']}": c["level"] for c in r["criteria"]},
                           "marks": {f"C{c['number']}": report.mark(c) for c in r["criteria"] if report.mark(c)},
                           "sandbox": r.get("sandbox", "")}}


def could_not_grade(why: str, visibility: str = "after_published") -> dict:
    """What run_autograder writes when grading itself failed: no points, and the reason for the instructor."""
    return {"score": 0, "output": "The autograder could not grade this submission; your instructor will look at it.",
            "output_format": "text", "visibility": visibility, "stdout_visibility": "hidden",
            "tests": [{"name": "Instructor notes (hidden from learners)", "status": "failed", "output": terminal(why),
                       "output_format": "text", "visibility": "hidden"}]}


def _top(r: dict, score) -> str:
    held = [f"C{c['number']}" for c in r["criteria"] if report.mark(c) == "HOLD"]
    return (f"Suggested by the autograder: {score} / {r['max_total']}. Your instructor reviews every level before it "
            "counts" + (f"; {', '.join(held)} will be discussed with you first" if held else "") + ".")


def _output(r: dict, c: dict) -> str:
    """The learner's feedback about one criterion (feedback.py's words, Markdown with learner text escaped)."""
    return f"**{c['level']}, {c['points']} of {c['weight']} points.**\n\n" + "\n".join(feedback.criterion(r, c))
