"""Benchmark for rubric/grade.py (a measurement, not a test): grade a synthetic class.

    python rubric/bench_grade.py              20 submissions, full grading (goal: < 20 s each)
    python rubric/bench_grade.py --count 5 --quick
    python rubric/bench_grade.py --jobs 1     one learner at a time (grade.py's default: one per CPU)
    python rubric/bench_grade.py --compare    the same class in the sandbox, then with --no-sandbox
    python rubric/bench_grade.py --count 10 --hostile 240   the class alone, then with one more learner
                                              whose tools.py forks 240 busy processes at import: the
                                              honest learners' totals must not change
    python rubric/bench_grade.py --count 30 --per-learner   ... and each learner's wall and CPU by command

Builds the class in a temporary folder from this lab (stubs, the reference with template or filled
documents, planted mistakes from rubric/checks/mutants.py, a mismatching evidence block), runs
the folder mode exactly as an instructor would, and prints the wall time with the load average
(before, sampled during, after), because other work on the machine changes it, and the CPU time,
which it does not: of the learner commands (each counted by its cgroup, per kind of command) and
of grade.py itself. From the CPU time it estimates the wall time on an idle machine.
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


class LoadSampler:
    """The 1-minute load average every few seconds while the class is graded: its mean and peak say
    how busy the machine was (the wall time follows it; the CPU time does not)."""

    def __init__(self, every: float = 5.0):
        import threading
        self.samples: list = []
        self._stop, self.every = threading.Event(), every
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while True:
            try:
                self.samples.append(os.getloadavg()[0])
            except (OSError, AttributeError):
                return
            if self._stop.wait(self.every):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def describe(self) -> str:
        if not self.samples:
            return "n/a"
        return f"mean {sum(self.samples) / len(self.samples):.1f}, peak {max(self.samples):.1f}"


def reports(out: Path) -> list:
    found = []
    for path in sorted((out / "reports").glob("*.json")):
        try:
            r = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and "learner" in r:
            found.append(r)
    return found


def cost_table(graded: list) -> list:
    """Lines: per kind of learner command, how often it ran and what it cost (cgroup CPU, wall)."""
    kinds: dict = {}
    for r in graded:
        for c in r.get("learner_commands") or []:
            k = kinds.setdefault(c["command"], {"runs": 0, "cpu": 0.0, "counted": 0, "wall": 0.0})
            k["runs"] += 1
            k["wall"] += c.get("seconds") or 0.0
            if c.get("cpu_seconds") is not None:
                k["cpu"] += c["cpu_seconds"]
                k["counted"] += 1
    lines = [f"  {'learner command':36} {'runs':>5} {'CPU s':>8} {'CPU/run':>8} {'wall/run':>9}"]
    for name, k in sorted(kinds.items(), key=lambda kv: -kv[1]["cpu"]):
        per = f"{k['cpu'] / k['counted']:.2f}" if k["counted"] else "n/a"
        lines.append(f"  {name[:36]:36} {k['runs']:>5} {k['cpu']:>8.1f} {per:>8} {k['wall'] / k['runs']:>9.1f}")
    return lines


def per_learner(graded: list) -> list:
    lines = [f"  {'learner':40} {'wall s':>7} {'grader CPU':>10} {'learner CPU':>11}  by command (CPU s)"]
    for r in sorted(graded, key=lambda r: r["learner"]):
        by = ", ".join(f"{c['command']} {c['cpu_seconds'] if c.get('cpu_seconds') is not None else '?'}"
                       for c in r.get("learner_commands") or [])
        lines.append(f"  {r['learner'][:40]:40} {r.get('seconds', 0):>7.1f} {r.get('grader_cpu_seconds') or 0:>10.2f} "
                     f"{r.get('learner_cpu_seconds') or 0:>11.1f}  {by}")
    return lines


def idle_estimate(graded: list, workers: int, serial: float) -> float:
    """Wall seconds on an idle machine if each learner took exactly its CPU time (commands and its
    grading thread), learners handed out in name order as grade.py does, plus ``serial``: a lower
    estimate (a command that waits without using CPU, e.g. for a test's time limit, takes longer)."""
    import heapq
    free = [0.0] * max(1, workers)
    for r in sorted(graded, key=lambda r: r["learner"]):
        start = heapq.heappop(free)
        heapq.heappush(free, start + (r.get("learner_cpu_seconds") or 0) + (r.get("grader_cpu_seconds") or 0))
    return max(free) + serial


def grade_class(subs: Path, tmp: Path, args, extra: list) -> tuple[str, int]:
    """One folder-mode run of grade.py over ``subs``: (summary lines, exit code)."""
    out = tmp / ("out-" + "-".join(x.strip("-") for x in extra) if extra else "out-sandbox")
    out = out.with_name(out.name + getattr(args, "_suffix", ""))
    command = [sys.executable, str(RUBRIC / "grade.py"), str(subs), "--csv", str(out / "grades.csv"),
               "--out", str(out / "reports")] + (["--quick"] if args.quick else []) + (
               ["--jobs", str(args.jobs)] if args.jobs else []) + extra
    out.mkdir(parents=True, exist_ok=True)
    before = load()
    with LoadSampler() as sampler:
        started, cpu_before = time.monotonic(), _children_cpu()
        proc = subprocess.run(command, capture_output=True, text=True)
        seconds, waited = time.monotonic() - started, _children_cpu() - cpu_before
    print(proc.stderr.strip())
    rows = (out / "grades.csv").read_text().count("\n") - 1 if (out / "grades.csv").exists() else 0
    mode = " ".join(extra) or "sandbox (default)"
    graded = reports(out)
    # learner commands' CPU as their cgroups counted it (a sandbox's processes are not all waited for by
    # grade.py, so RUSAGE_CHILDREN misses most of it); the grader's own from its process (class.json)
    # and, per learner, from the thread that graded it
    learners_cpu = sum(r.get("learner_cpu_seconds") or 0 for r in graded)
    uncounted = sum(1 for r in graded for c in r.get("learner_commands") or [] if c.get("cpu_seconds") is None)
    try:
        grader_cpu = json.loads((out / "reports" / "class.json").read_text()).get("grader_cpu_seconds")
    except (OSError, ValueError):
        grader_cpu = None
    threads_cpu = sum(r.get("grader_cpu_seconds") or 0 for r in graded)
    n, cpus = max(args.count, 1), os.cpu_count() or 1
    at_once = min(args.jobs or cpus, cpus)
    total_cpu = learners_cpu + (grader_cpu if grader_cpu is not None else waited)
    args._last_out = out
    # start-up, the threads reading the commands' output, the class-wide comparisons: counted as if serial
    serial = max(0.0, (grader_cpu or 0) - threads_cpu)
    lines = [
        f"{mode}: {rows} of {args.count} submissions graded{' (--quick)' if args.quick else ''} in {seconds:.0f} s wall: "
        f"{seconds / n:.1f} s per submission on {cpus} CPUs, {args.jobs or cpus} at once",
        f"  load average (1 min): before {before.split()[0] if before != 'n/a' else before}, during {sampler.describe()}, "
        f"after {load().split()[0]}",
        f"  CPU: learner commands {learners_cpu:.0f} s ({learners_cpu / n:.1f} s per submission, counted by their cgroups"
        + (f"; {uncounted} command(s) not counted" if uncounted else "") + "); grade.py itself "
        + (f"{grader_cpu:.0f} s" if grader_cpu is not None else "n/a")
        + f" (of which grading each learner {threads_cpu:.0f} s, {threads_cpu / n:.2f} s per submission); "
        f"RUSAGE_CHILDREN of grade.py {waited:.0f} s",
        f"  on an idle machine with {cpus} CPUs, {at_once} at once, the wall time is at least the CPU time / {at_once}: "
        f"{total_cpu / at_once:.0f} s ({total_cpu / at_once / n:.1f} s per submission; "
        f"{total_cpu / at_once / n * 30 / 60:.1f} min for a class of 30); learners handed out in name order to "
        f"{at_once} workers, each taking its CPU time, then grade.py's other {serial:.0f} s: {idle_estimate(graded, at_once, serial):.0f} s",
    ] + cost_table(graded) + (per_learner(graded) if args.per_learner else [])
    return "\n".join(lines), proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(prog="bench_grade.py")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="pass --quick to grade.py (M1-M4 tests only)")
    p.add_argument("--jobs", type=int, help="pass --jobs to grade.py (default: grade.py's, one per CPU)")
    p.add_argument("--no-sandbox", action="store_true", help="pass --no-sandbox to grade.py")
    p.add_argument("--per-learner", action="store_true", help="also print each learner's wall time and CPU by command")
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
