"""A plain-language feedback file per learner: what went well, and each failure with how to see it.

Written for the learner, so it holds observations they can reproduce (a test and its
called/expected/got lines, a sandbox probe, a pasted number a fresh run contradicts) and never the
instructor's notes: no integrity flags, no "check that..." reasons, no similarity, and a criterion
on HOLD says only that the instructor will talk with them.

    render(result, decided=None, note="", dropped=())
        the Markdown text; ``decided`` maps a criterion number to (level, points) the instructor chose
        (grade.py --finalize); ``dropped`` names findings (F1, F2...) the instructor struck out

Reasons follow the final level: where the instructor chose another level than the suggestion, the
file gives the rubric's description of that level, never the tool's reasons for the old one. A
finding reaches the learner in its plain words (grading/findings.py), unless it was dropped or is
only a question for the instructor.
"""

from __future__ import annotations

import re

from grading.report import broken_probes, differing_evidence, failures, mark, quotes, rule_reasons
from grading.safe_text import md, md_code

GOOD = ("Exemplary", "Proficient")
# Reasons written to the instructor (what to read or confirm) are left out of the learner's file.
FOR_INSTRUCTOR = re.compile(r"\b(check|confirm|read the|instructor|red flag|HOLD|reference|Exemplary needs|"
                            r"Exemplary also needs|similar|talk to|to decide|caps? this|at most Developing)\b|--quick"
                            r"|^\[F\d+\]|\bC\d\.\w+", re.I)
PYTEST = 'python -m pytest --unlock-all "{}"'
# Which milestones' failing tests are shown under which criterion (each test once).
MILESTONES_OF = {1: ("M3", "M5", "M6"), 2: ("M2", "M4"), 3: ("M1",)}


def render(r: dict, decided: dict | None = None, note: str = "", dropped=()) -> str:
    final = decided is not None
    levels = {c["number"]: (decided or {}).get(c["number"], (c["level"], c["points"])) for c in r["criteria"]}
    r = dict(r, _levels=levels, _dropped={str(x).strip().upper() for x in dropped})
    total = sum(points for _, points in levels.values())
    out = [f"# Feedback on your Lesson 06 submission ({md(r['learner'])})", ""]
    held = [c for c in r["criteria"] if mark(c) == "HOLD" and not final]
    if final:
        out += [f"**Your grade: {total} / {r['max_total']}**, decided by your instructor from the evidence below.", ""]
    else:
        out += [f"**Suggested so far: {total} / {r['max_total']}.** Your instructor reviews every level before it "
                "counts" + (", and will talk with you about " + ", ".join(f"criterion {c['number']}" for c in held)
                            + " first" if held else "") + ".", ""]
    if note.strip():
        out += ["## From your instructor", "", md(note), ""]
    well = [c for c in r["criteria"] if levels[c["number"]][0] in GOOD and c not in held
            and (_changed(r, c) or not _contradicted(r, c))]
    out += ["## What you did well", ""]
    out += [f"- **{md(c['title'])}** ({md(levels[c['number']][0])}): {_why(c, r)}" for c in well] or \
        ["- Nothing reached Proficient yet; the sections below say where to start."]
    out += ["", "## What to work on, and how to see it yourself", ""]
    todo = [c for c in r["criteria"] if c not in well]
    for c in todo:
        level, points = levels[c["number"]]
        out += [f"### {c['number']}. {md(c['title'])}: " + ("to be discussed" if c in held else f"{md(level)} ({points} / "
                f"{c['weight']})"), ""] + criterion(r, c, held=c in held) + [""]
    if not todo:
        out += ["Nothing: every criterion reached Proficient or better.", ""]
    out += ["Run these commands from the root of your repository, with the lab's packages installed; "
            "`python -m pytest` shows your board.", ""]
    return "\n".join(out)


def criterion(r: dict, c: dict, held: bool = False) -> list:
    """The Markdown lines about one criterion: its failures to reproduce, else why it got its level."""
    if held:
        return ["Your instructor will talk with you about this criterion before it is graded."]
    return _observations(r, c) or [f"- {_why(c, r)}"]


def _changed(r: dict, c: dict) -> bool:
    """The instructor chose another level than the tool suggested."""
    level = r.get("_levels", {}).get(c["number"], (c["level"], 0))[0]
    return level != c["level"]


def _rubric_row(c: dict, level: str) -> str:
    from grading import criteria
    row = criteria.load_rubric().get(c["number"])
    text = row.rows.get(level, "") if row else ""
    return f"your instructor chose {level}; the rubric describes it as: {text}" if text else \
        f"your instructor chose {level}"


def learner_findings(r: dict, number: int) -> list:
    """The proven findings of one criterion the instructor kept, in the learner's words."""
    gone = r.get("_dropped") or set()
    return [f for f in r.get("findings") or [] if isinstance(f, dict) and f.get("criterion") == number
            and f.get("caps") and f.get("learner") and str(f.get("id", "")).upper() not in gone]


def _contradicted(r: dict, c: dict) -> bool:
    return bool(c.get("contradictions") or learner_findings(r, c["number"]))


def _why(c: dict, r: dict | None = None) -> str:
    if r is not None and _changed(r, c):
        return md(_rubric_row(c, r["_levels"][c["number"]][0]))
    said = [text for _, text in rule_reasons(c) if not FOR_INSTRUCTOR.search(text)]
    return md(said[0]) if said else "see the rubric's row for this level"


def _observations(r: dict, c: dict) -> list:
    """Each failure the learner can reproduce, for the criterion it counts for."""
    n, out = c["number"], []
    if n == 3:
        out += [f"- Sandbox probe \"{md(p.get('probe', ''))}\" ({md(name)}): `safe_resolve` was given "
                f"{md_code(p.get('argument', ''), 120)} in a scratch repository with a secret beside it; the result "
                f"was **{md(p.get('result', ''))}** ({md_code(p.get('detail', ''), 140)}), where it should be refused "
                "or stay inside the repository." for name, p in broken_probes(r)[:4]]
    for nodeid, lines in [f for m in MILESTONES_OF.get(n, ()) for f in failures(r, m, limit=3)][:3]:
        out.append(f"- The test {md_code(nodeid.split('::')[-1])} fails. See it with {md_code(PYTEST.format(nodeid))}:")
        out += [f"    - {md_code(line, 200)}" for line in lines[:3]]
    if n == 5:
        out += [f"- Your evidence for the {md(b)} break says {md(field)} {md_code(pasted, 100)}; a fresh run of "
                f"{md_code('python break_and_observe.py ' + b + ' --simulate')} (in `code/`) shows "
                f"{md_code(fresh, 100)}. If your own run differed, say why in your write-up."
                for b, field, pasted, fresh in differing_evidence(r)]
    for text in c.get("contradictions") or []:
        out.append(f"- {md(text)}")
    for f in learner_findings(r, n)[:4]:
        out.append(f"- {md(f['learner'])}" + (f"\n    > {md(str(f.get('quote', ''))[:240])}" if f.get("quote") else ""))
    if _changed(r, c):   # the tool's reasons were for another level: the rubric's words for this one
        return out + [f"- {_why(c, r)}"]
    said = [text for _, text in rule_reasons(c) if not FOR_INSTRUCTOR.search(text)]
    used = [] if out else said[:3]
    out += [f"- {md(text)}" for text in used]
    # The learner's own sentences the level rests on, unless a reason above already quotes them.
    out += [f"    > {md(q[:240])}" for q in quotes(c)[:2] if out and n >= 4 and not any(q[:80] in t for t in used)
            and not learner_findings(r, n)]
    return out
