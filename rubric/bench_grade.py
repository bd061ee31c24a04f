"""Benchmark for rubric/grade.py (a measurement, not a test): grade a synthetic class.

    python rubric/bench_grade.py              20 submissions, full grading (goal: < 20 s each)
    python rubric/bench_grade.py --count 5 --quick
    python rubric/bench_grade.py --jobs 1     one learner at a time (grade.py's default: one per CPU)
    python rubric/bench_grade.py --compare    the same class in the sandbox, then with --no-sandbox
    python rubric/bench_grade.py --count 10 --hostile 240   the class alone, then with one more learner
                                              whose tools.py forks 240 busy processes at import: the
                                              honest learners' totals must not change

Builds the class in a temporary folder from this lab (stubs, the reference with template or filled
documents, planted mistakes from rubric/checks/mutants.py, a mismatching evidence block), runs
the folder mode exactly as an instructor would, and prints seconds per submission with the load
average before and after, because other work on the machine changes the number.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUBRIC = Path(__file__).resolve().parent
sys.path.insert(0, str(RUBRIC))
sys.path.insert(0, str(RUBRIC / "checks"))

from grading import synthetic  # noqa: E402
from mutants import MUTANTS  # noqa: E402


def kinds():
    yield "stub", {}
    yield "reference-template", {"code": "reference"}
    yield "reference-filled", {"code": "reference", "docs": "filled"}
    yield "mismatch", {"code": "reference", "docs": "filled", "mismatch": True}
    for m in MUTANTS:
        yield f"mutant-{m.name}", {"code": "reference", "docs": "filled", "mutant": m}


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (OSError, AttributeError):
        return "n/a"


def _children_cpu() -> float:
    """CPU seconds of finished child processes: what the grading costs, whatever else runs."""
    try:
        import resource
    except ImportError:  # Windows: wall time only
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


HOSTILE = """
import os as _o
def _burn(n):
    for _ in range(n):
        try:
            if _o.fork() == 0:
                try:
                    _o.setsid()
                except OSError:
                    pass
                while True:
                    pass
        except OSError:
            return
_burn(%d)
"""


def add_hostile(subs: Path, processes: int) -> Path:
    """One more learner: the reference, whose tools.py forks ``processes`` busy processes at import."""
    sub = synthetic.make(subs / "zz-hostile", code="reference", docs="filled")
    tools = sub / "code" / "tools.py"
    text = tools.read_text(encoding="utf-8")
    cut = text.index("\n", text.index("from __future__")) + 1
    tools.write_text(text[:cut] + HOSTILE % processes + text[cut:], encoding="utf-8")
    return sub


def totals(out: Path) -> dict:
    """learner -> (suggested total, the level or HOLD and mark of each criterion), from the reports."""
    found = {}
    for path in (out / "reports").glob("*.json"):
        try:
            r = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and "learner" in r:
            found[r["learner"]] = (r.get("total"), tuple(f"C{c['number']} {c['level']} {c.get('mark') or ''}".strip()
                                                      for c in r.get("criteria", [])))
    return found


def grade_class(subs: Path, tmp: Path, args, extra: list) -> tuple[str, int]:
    """One folder-mode run of grade.py over ``subs``: (summary line, exit code)."""
    out = tmp / ("out-" + "-".join(x.strip("-") for x in extra) if extra else "out-sandbox")
    out = out.with_name(out.name + getattr(args, "_suffix", ""))
    command = [sys.executable, str(RUBRIC / "grade.py"), str(subs), "--csv", str(out / "grades.csv"),
               "--out", str(out / "reports")] + (["--quick"] if args.quick else []) + (
               ["--jobs", str(args.jobs)] if args.jobs else []) + extra
    out.mkdir(parents=True, exist_ok=True)
    before = load()
    started, cpu_before = time.monotonic(), _children_cpu()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds, cpu = time.monotonic() - started, _children_cpu() - cpu_before
    print(proc.stderr.strip())
    rows = (out / "grades.csv").read_text().count("\n") - 1 if (out / "grades.csv").exists() else 0
    mode = " ".join(extra) or "sandbox (default)"
    # learner commands' CPU as their cgroups counted it (a sandbox's processes are not all waited for
    # by grade.py, so RUSAGE_CHILDREN misses some); grade.py's own CPU is in ``cpu``
    counted = [json.loads(p.read_text()).get("learner_cpu_seconds") for p in (out / "reports").glob("*.json")]
    learners_cpu = sum(c for c in counted if c)
    args._last_out = out
    return (f"{mode}: {rows} of {args.count} submissions graded{' (--quick)' if args.quick else ''} in {seconds:.0f} s: "
            f"{seconds / max(args.count, 1):.1f} s per submission on {os.cpu_count()} CPUs, "
            f"{args.jobs or os.cpu_count()} at once (load average before {before}, after {load()}); "
            f"CPU time: grade.py and the children it waited for {cpu:.0f} s; learner commands (cgroup) "
            f"{learners_cpu:.0f} s, {learners_cpu / max(args.count, 1):.1f} s per submission"), \
        proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(prog="bench_grade.py")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="pass --quick to grade.py (M1-M4 tests only)")
    p.add_argument("--jobs", type=int, help="pass --jobs to grade.py (default: grade.py's, one per CPU)")
    p.add_argument("--no-sandbox", action="store_true", help="pass --no-sandbox to grade.py")
    p.add_argument("--compare", action="store_true", help="grade the class in the sandbox, then with --no-sandbox")
    p.add_argument("--hostile", type=int, metavar="N", help="grade the class alone, then with one more learner "
                   "forking N busy processes at import, and compare the honest learners' totals")
    args = p.parse_args()
    if args.hostile:
        return hostile_run(args)
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        subs = Path(tmp) / "class"
        for i, (kind, options) in zip(range(args.count), itertools.cycle(kinds())):
            safe = "".join(c if c.isalnum() else "-" for c in kind)
            synthetic.make(subs / f"{i:02d}-{safe}", **options)
        modes = [[], ["--no-sandbox"]] if args.compare else [["--no-sandbox"] if args.no_sandbox else []]
        lines, code = [], 0
        for extra in modes:
            line, rc = grade_class(subs, Path(tmp), args, extra)
            lines.append(line)
            code = code or rc
    print("\n" + "\n".join(lines))
    return code


def hostile_run(args) -> int:
    from classroom import own_bodies   # the learners' own functions: C1-C3 are judged, not held for a reference match
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        subs = Path(tmp) / "class"
        for i, (kind, options) in zip(range(args.count), itertools.cycle(kinds())):
            safe = "".join(c if c.isalnum() else "-" for c in kind)
            own = {"functions": own_bodies()} if options.get("code") == "reference" else {}
            synthetic.make(subs / f"{i:02d}-{safe}", **options, **own)
        args._suffix = "-alone"
        alone_line, rc1 = grade_class(subs, Path(tmp), args, [])
        alone = totals(args._last_out)
        add_hostile(subs, args.hostile)
        args._suffix, args.count = "-with-hostile", args.count + 1
        with_line, rc2 = grade_class(subs, Path(tmp), args, [])
        together = totals(args._last_out)
    changed = {k: (v, together.get(k)) for k, v in alone.items() if together.get(k) != v}
    print(f"\nalone: {alone_line}\nwith the hostile learner: {with_line}")
    print(f"hostile learner ({args.hostile} busy processes at import): {together.get('zz-hostile')}")
    print(f"honest learners: {len(alone)} graded alone, totals {sum(v[0] for v in alone.values())}; with the hostile "
          f"learner {sum(together.get(k, (0,))[0] for k in alone)}; "
          + ("every total, level and mark equal" if not changed else f"CHANGED: {changed}"))
    return rc1 or (0 if not changed else 1)


if __name__ == "__main__":
    sys.exit(main())
