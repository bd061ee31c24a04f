"""How far the grader agrees with instructors' hand grades, and whether its confidence means something.

    python rubric/agreement.py                         the course's class and ../shared/classes/class3
    python rubric/agreement.py --class3 PATH           another hand-graded class of git bundles + key.json
    python rubric/agreement.py --work DIR --reuse      read the reports a previous run left in DIR

Two classes are graded with rubric/grade.py (folder mode, in the sandbox where there is one):
  - the course's own class, built from rubric/checks/class/ (classroom.py) with its key.json;
  - a class of git bundles on top of a commit of this repository (class3's README.md says how one is
    restored), graded by an instructor outside the team (its key.json: a letter per criterion, and
    ``hold`` for the criteria that instructor would not grade before talking to the learner; or, as in
    rubric/checks/class4/key.json, one entry per learner with level names and a ``hold`` list).

Printed per class: an instructor x tool table per criterion, exact-level agreement overall and on
C1-C3, and confidence: how many cells get a confident level (no READ or HOLD mark: the evidence
decided) and how often a confident level is the instructor's. A HOLD agrees with the key where the
key holds that criterion; elsewhere a HOLD is wrong. A READ cell counts its suggested level.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

RUBRIC = Path(__file__).resolve().parent
ROOT = RUBRIC.parent
sys.path.insert(0, str(RUBRIC))
sys.path.insert(0, str(RUBRIC / "checks"))

LEVELS = ("Exemplary", "Proficient", "Developing", "Missing")
LETTER = {"E": "Exemplary", "P": "Proficient", "D": "Developing", "M": "Missing"}
CRITERIA = [f"C{n}" for n in range(1, 8)]
COLUMNS = LEVELS + ("HOLD",)


def course_key() -> dict:
    """learner -> {C1: (level, held)} from rubric/checks/class/key.json (HOLD there is held, no level)."""
    data = json.loads((RUBRIC / "checks" / "class" / "key.json").read_text(encoding="utf-8"))
    return {name: {c: (None, True) if v == "HOLD" else (v, False) for c, v in entry["key"].items()}
            for name, entry in data.items() if not name.startswith("_")}


def bundle_key(folder: Path) -> dict:
    """learner -> {C1: (level, held)} from a bundle class's key.json. Two shapes are read: class3's
    (``levels``: a letter per criterion, ``hold``: criterion numbers per learner) and one entry per
    learner (``key``: {C1: level name, letter or HOLD}, ``hold``: criterion names or numbers)."""
    data = json.loads((folder / "key.json").read_text(encoding="utf-8"))

    def level(v: str):
        v = str(v).strip()
        return None if v.upper() == "HOLD" else LETTER.get(v.upper(), v.capitalize())

    def crit(c) -> str:
        return f"C{c}" if isinstance(c, int) or str(c).isdigit() else str(c).upper()

    if "levels" in data:
        held = data.get("hold", {})
        return {name: {f"C{i}": (LETTER[letter], i in held.get(name, [])) for i, letter in enumerate(letters, 1)}
                for name, letters in data["levels"].items()}
    out = {}
    for name, entry in data.items():
        if name.startswith("_") or not isinstance(entry, dict) or "key" not in entry:
            continue
        held = {crit(c) for c in entry.get("hold", [])}
        out[name] = {c: (level(entry["key"][c]), level(entry["key"][c]) is None or c in held) for c in CRITERIA}
    return out


def build_course(dst: Path) -> None:
    import classroom
    for name in classroom.KEY:
        classroom.build(name, dst / name)


def restore_bundles(folder: Path, dst: Path, names) -> None:
    """Each learner: a clone of this repository with the learner's bundle checked out on top."""
    for name in names:
        target = dst / name
        steps = [["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(target)],
                 ["git", "-C", str(target), "fetch", "-q", str((folder / f"{name}.bundle").resolve()), "HEAD"],
                 ["git", "-C", str(target), "checkout", "-q", "FETCH_HEAD"]]
        for step in steps:
            proc = subprocess.run(step, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"agreement: restoring {name} failed at {' '.join(step[:4])}: {proc.stderr.strip()[:300]}")


def grade(subs: Path, reports: Path, jobs: int) -> None:
    from grading import sandbox
    no_sandbox = [] if sandbox.choose("auto")[0] else ["--no-sandbox"]
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    proc = subprocess.run([sys.executable, str(RUBRIC / "grade.py"), str(subs), "--csv", str(reports / "grades.csv"),
                           "--out", str(reports), "--jobs", str(jobs), *no_sandbox], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"agreement: grade.py failed on {subs}: {proc.stderr.strip()[-600:]}")


def tool_cells(reports: Path, names) -> dict:
    """learner -> {C1: (level or HOLD, mark, confidence)} from grade.py's JSON reports."""
    out = {}
    for name in names:
        r = json.loads((reports / f"{name}.json").read_text(encoding="utf-8"))
        out[name] = {}
        for c in r["criteria"]:
            mark = str(c.get("mark") or "").upper()
            level = "HOLD" if mark == "HOLD" or c["level"] == "HOLD" else c["level"]
            out[name][f"C{c['number']}"] = (level, mark, str(c.get("confidence") or ""))
    return out


def agrees(key_cell, tool_cell) -> bool:
    level, held = key_cell
    return tool_cell[0] == "HOLD" if level is None else (tool_cell[0] == level or held and tool_cell[0] == "HOLD")


def measure(key: dict, tool: dict) -> dict:
    cells = [(n, c, key[n][c], tool[n][c]) for n in key for c in CRITERIA]
    core = [x for x in cells if x[1] in ("C1", "C2", "C3")]
    confident = [x for x in cells if not x[3][1]]
    high = [x for x in confident if x[3][2] == "high"]
    read = [x for x in cells if x[3][1] == "READ"]
    hold = [x for x in cells if x[3][0] == "HOLD"]
    count = lambda xs: sum(agrees(k, t) for _, _, k, t in xs)  # noqa: E731
    prose = [x for x in confident if x[1] not in ("C1", "C2", "C3")]
    return {"cells": len(cells), "exact": count(cells), "core_cells": len(core), "core_exact": count(core),
            "confident_core": len(confident) - len(prose), "confident_core_right": count(confident) - count(prose),
            "confident_prose": len(prose), "confident_prose_right": count(prose),
            "confident": len(confident), "confident_right": count(confident),
            "confident_high": len(high), "confident_high_right": count(high),
            "read": len(read), "read_right": count(read), "hold": len(hold), "hold_right": count(hold),
            "false_high": [(n, c, t[0]) for n, c, k, t in cells
                           if (k[0] in (None, "Missing") or k[1]) and t[0] in ("Exemplary", "Proficient")],
            "wrong": [(n, c, "HOLD" if k[0] is None else k[0] + (" (hold)" if k[1] else ""), t[0], t[1] or "-")
                      for n, c, k, t in cells if not agrees(k, t)]}


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f} %)" if b else "0/0"


def tables(key: dict, tool: dict) -> list:
    """One instructor x tool table per criterion, then all criteria together."""
    out = []
    for label, crits in [(c, [c]) for c in CRITERIA] + [("all", CRITERIA)]:
        counts = Counter(("HOLD" if key[n][c][0] is None else key[n][c][0], tool[n][c][0]) for n in key for c in crits)
        out.append(f"{label}: instructor \\ tool".ljust(22) + "".join(t[:4].rjust(6) for t in COLUMNS))
        out += [f"  {h}".ljust(22) + "".join(str(counts.get((h, t), "")).rjust(6) or "" for t in COLUMNS)
                for h in COLUMNS if any(counts.get((h, t)) for t in COLUMNS)]
    return out


def report(title: str, key: dict, tool: dict) -> list:
    m = measure(key, tool)
    out = [f"== {title}: {len(key)} learners, {m['cells']} cells", ""] + tables(key, tool) + [""]
    out += [f"exact level agreement: {pct(m['exact'], m['cells'])}; on C1-C3: {pct(m['core_exact'], m['core_cells'])}",
            f"confidence: {pct(m['confident'], m['cells'])} cells get a confident level (no READ/HOLD); "
            f"right {pct(m['confident_right'], m['confident'])}; of those marked high: "
            f"{pct(m['confident_high_right'], m['confident_high'])}; on C1-C3 "
            f"{pct(m['confident_core_right'], m['confident_core'])}, on C4-C7 "
            f"{pct(m['confident_prose_right'], m['confident_prose'])}",
            f"READ cells: {m['read']}, suggested level right {pct(m['read_right'], m['read'])}; HOLD cells: "
            f"{m['hold']}, where the instructor holds too {pct(m['hold_right'], m['hold'])}",
            f"Exemplary/Proficient where the key says Missing or holds: {m['false_high'] or 'none'}", "",
            "disagreements (learner criterion: instructor, tool, mark):"]
    out += [f"  {n} {c}: {k}, {t} {mk}" for n, c, k, t, mk in m["wrong"]]
    return out + [""]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="agreement.py", description=__doc__.splitlines()[0])
    default = next((d for d in (ROOT.parent / "shared" / "classes" / "class3",
                                ROOT.parent.parent / "shared" / "classes" / "class3") if d.is_dir()),
                   ROOT.parent / "shared" / "classes" / "class3")   # a worktree sits one level deeper
    p.add_argument("--class3", type=Path, default=default,
                   help="a folder of LEARNER.bundle files and key.json (default: ../shared/classes/class3)")
    p.add_argument("--work", type=Path, help="where submissions and reports go (default: a temporary folder, removed)")
    p.add_argument("--reuse", action="store_true", help="read the reports already in --work instead of grading again")
    p.add_argument("--jobs", type=int, default=2, help="learners graded at once (default 2)")
    p.add_argument("--only", choices=("course", "class3"), help="measure one class only")
    args = p.parse_args(argv)
    if args.reuse and not args.work:
        p.error("--reuse needs --work")
    work = args.work or Path(tempfile.mkdtemp(prefix="agreement-"))
    try:
        out = []
        for name in ("course", "class3"):
            if args.only and args.only != name:
                continue
            if name == "class3" and not (args.class3 / "key.json").is_file():
                out.append(f"== class3: no key.json in {args.class3} (pass --class3 PATH); skipped\n")
                continue
            key = course_key() if name == "course" else bundle_key(args.class3)
            subs, reports = work / name / "submissions", work / name / "reports"
            if not args.reuse:
                shutil.rmtree(work / name, ignore_errors=True)
                subs.mkdir(parents=True)
                reports.mkdir(parents=True)
                build_course(subs) if name == "course" else restore_bundles(args.class3, subs, key)
                grade(subs, reports, args.jobs)
            out += report("the course's class (rubric/checks/class)" if name == "course" else f"{args.class3}",
                          key, tool_cells(reports, key))
        print("\n".join(out))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
