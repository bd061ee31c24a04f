"""Benchmark for rubric/grade.py (a measurement, not a test): grade a synthetic class.

    python rubric/bench_grade.py              20 submissions, full grading (goal: < 20 s each)
    python rubric/bench_grade.py --count 5 --quick
    python rubric/bench_grade.py --jobs 1     one learner at a time (grade.py's default: one per CPU)

Builds the class in a temporary folder from this lab (stubs, the reference with template or filled
documents, planted mistakes from rubric/checks/mutants.py, a mismatching evidence block), runs
the folder mode exactly as an instructor would, and prints seconds per submission with the load
average before and after, because other work on the machine changes the number.
"""

from __future__ import annotations

import argparse
import itertools
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


def main() -> int:
    p = argparse.ArgumentParser(prog="bench_grade.py")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="pass --quick to grade.py (M1-M4 tests only)")
    p.add_argument("--jobs", type=int, help="pass --jobs to grade.py (default: grade.py's, one per CPU)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        subs = Path(tmp) / "class"
        for i, (kind, options) in zip(range(args.count), itertools.cycle(kinds())):
            safe = "".join(c if c.isalnum() else "-" for c in kind)
            synthetic.make(subs / f"{i:02d}-{safe}", **options)
        command = [sys.executable, str(RUBRIC / "grade.py"), str(subs), "--csv", str(Path(tmp) / "grades.csv"),
                   "--out", str(Path(tmp) / "reports")] + (["--quick"] if args.quick else []) + (
                   ["--jobs", str(args.jobs)] if args.jobs else [])
        before = load()
        started, cpu_before = time.monotonic(), _children_cpu()
        proc = subprocess.run(command, capture_output=True, text=True)
        seconds, cpu = time.monotonic() - started, _children_cpu() - cpu_before
        print(proc.stderr.strip())
        rows = (Path(tmp) / "grades.csv").read_text().count("\n") - 1 if (Path(tmp) / "grades.csv").exists() else 0
    print(f"\n{rows} of {args.count} submissions graded{' (--quick)' if args.quick else ''} in {seconds:.0f} s: "
          f"{seconds / max(args.count, 1):.1f} s per submission on {os.cpu_count()} CPUs, "
          f"{args.jobs or os.cpu_count()} at once "
          f"(load average before {before}, after {load()}); CPU time (user + system, all processes) "
          f"{cpu / max(args.count, 1):.1f} s per submission")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
