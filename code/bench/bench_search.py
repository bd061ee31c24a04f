"""search_code against grep, and the cold index against its floor, in one table from one run (issue 29).

    python bench/bench_search.py                       # from code/; Django 5.1.4 from ../shared/corpus + hostile trees
    python bench/bench_search.py --tree DIR            # also (or, without the corpus, only) this unpacked tree
    python bench/bench_search.py --against OLD_CHECKOUT   # the same, for this code and an older checkout side by side

Per case, the median of --repeat rounds (5); each round runs every contender in turn, so that a burst
of load on a shared machine hits all of them, not one (the load average is printed before and after):
  search   tools.search_code for a string found nowhere, and for a rare one, vs `grep -rI` and
           `grep -rIi` (search_code is case-insensitive, so -rIi is the like-for-like one)  [<= 3x]
  index    context_selector's cold index (context_index.build_index, no cache) vs the floor:
           reading the same files and splitting them into identifiers with one regex         [<= 3x]
Each code tree (this one, and with --against a checkout of another commit: its code/ and
rubric/reference/) runs in its own Python process, started once, so both are measured the same way.
The hostile trees are those of bench_hostile.py: 128 files of 2 MB, and 1,024 of 128 KB (search only:
the index skips files over 500 KB and stops at its budget, so its floor would not be comparable).
Timings move with the machine's load: compare the ratios of one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

CODE_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CODE_DIR.parent / "rubric" / "reference"))  # the finished tools (safe_resolve)
sys.path.insert(1, str(CODE_DIR))

import context_index as ci  # noqa: E402

CORPUS = CODE_DIR.parent.parent / "shared" / "corpus" / "Django-5.1.4.tar.gz"
NO_HIT = "zq_no_such_identifier_xj"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# A contender: a Python process importing one checkout's tools, timing what it is asked to run.
CONTENDER = r"""
import json, sys, time
checkout = sys.argv[1]
sys.path[:0] = [checkout + "/rubric/reference", checkout + "/code"]
import context_index as ci, context_selector as cs, tools
listings = {}
for request in sys.stdin:
    what, root, query = json.loads(request)
    if what == "index" and root not in listings:
        listings[root] = ci.list_repo(root)
    started = time.perf_counter()
    if what == "search":
        tools.search_code(root, query)
    else:
        cs._terms_memo.clear()  # as in a new process: the terms of each identifier are not known yet
        ci.build_index(root, listings[root], cs.RECIPE)
    print(time.perf_counter() - started, flush=True)
"""


class Contender:
    def __init__(self, checkout: Path):
        self.name = "this code" if checkout == CODE_DIR.parent else checkout.name
        self.process = subprocess.Popen([sys.executable, "-c", CONTENDER, str(checkout)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def run(self, what: str, root: Path, query: str = "") -> float:
        self.process.stdin.write(json.dumps([what, str(root), query]) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise SystemExit(f"the contender for {self.name} stopped (run it by hand to see why)")
        return float(answer)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def medians(runs, repeat: int) -> list[float]:
    """The median time of each run (a function returning seconds) over ``repeat`` rounds, run in
    turn within each round."""
    times = [[] for _ in runs]
    for _ in range(repeat):
        for run, taken in zip(runs, times):
            taken.append(run())
    return [statistics.median(taken) for taken in times]


def grep(args, root) -> float:
    return timed(lambda: subprocess.run(["grep", *args, str(root)], capture_output=True))


def floor(listing) -> None:
    """What any lexical index pays at least: read the files it indexes, split them with one regex."""
    for path, rel, size, _ in listing:
        if ci.indexable(rel, size):
            with open(path, "rb") as fh:
                IDENTIFIER.findall(fh.read().decode("utf-8", "replace"))


def measure(name: str, root: Path, rare: str, contenders, repeat: int, index: bool = True) -> list[str]:
    listing = ci.list_repo(root)
    mb = sum(size for *_, size, _ in listing) / 1e6
    rows = [f"{name}: {len(listing):,} files, {mb:.0f} MB"]
    for label, query in ((", no hit", NO_HIT), (f"({rare!r})", rare)):
        runs = [lambda: grep(["-rI", query], root), lambda: grep(["-rIi", query], root)]
        runs += [lambda c=c: c.run("search", root, query) for c in contenders]
        plain, folded, *ours = medians(runs, repeat)
        cells = "".join(f"  {t:6.2f} s {t / plain:4.1f}x {t / folded:4.1f}x    " for t in ours)
        rows.append(f"{'  search_code' + label:<34} grep -rI {plain:5.2f} s, -rIi {folded:5.2f} s |{cells}")
    if index:  # the hostile trees' files are over the index's size or total budget: it reads few of them
        base, *cold = medians([lambda: timed(lambda: floor(listing))]
                              + [lambda c=c: c.run("index", root) for c in contenders], repeat)
        cells = "".join(f"  {t:6.2f} s {t / base:4.1f}x          " for t in cold)
        rows.append(f"{'  cold index':<34} floor (read + split) {base:5.2f} s   |{cells}")
    return rows


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], help="an unpacked source tree to measure too")
    parser.add_argument("--corpus", default=str(CORPUS), help="the Django 5.1.4 sdist")
    parser.add_argument("--against", help="a checkout of another commit (holding code/ and rubric/reference/)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-hostile", action="store_true")
    args = parser.parse_args()
    if args.against and not (Path(args.against) / "code" / "tools.py").is_file():
        parser.error(f"{args.against} holds no code/tools.py")
    checkouts = [CODE_DIR.parent] + ([Path(args.against).resolve()] if args.against else [])
    started_load = load()
    work = Path(tempfile.mkdtemp(prefix="bench-search-"))
    contenders = [Contender(checkout) for checkout in checkouts]
    rows = []
    try:
        if Path(args.corpus).is_file():
            with tarfile.open(args.corpus) as tar:
                tar.extractall(work / "django", filter="data")
            rows += measure("Django 5.1.4", (work / "django" / "Django-5.1.4").resolve(), "get_absolute_url",
                            contenders, args.repeat)
        else:
            print(f"(no {args.corpus}: Django skipped)")
        for tree in args.tree:
            rows += measure(Path(tree).name, Path(tree).resolve(), "__version__", contenders, args.repeat)
        if not args.no_hostile:
            big = work / "big"
            big.mkdir()
            block = ("x = 1  # a line with an x\n" * (1_999_000 // 26)).encode() + b"marker = 1\n"
            for i in range(128):
                (big / f"f{i:03}.py").write_bytes(block)
            rows += measure("hostile: 128 x 2 MB", big, "marker", contenders, args.repeat, index=False)
            many = work / "many"
            many.mkdir()
            text = "".join(f"def f{i}(a, b):\n    return a + b * {i}\n\n" for i in range(128_000 // 40)).encode()
            for i in range(1024):
                (many / f"m{i:04}.py").write_bytes(text)
            rows += measure("hostile: 1,024 x 128 KB", many, "def f3199(", contenders, args.repeat, index=False)
    finally:
        for contender in contenders:
            contender.close()
        shutil.rmtree(work, ignore_errors=True)
    head = "".join(f"  {c.name[:24]:<24}" for c in contenders)
    print(f"{os.cpu_count()} CPUs; load average {started_load} at the start, {load()} at the end; "
          f"medians of {args.repeat} rounds")
    print(f"{'':<66}|{head}")
    print(f"{'ratios: to grep -rI, to grep -rIi; the cold index: to its floor':<66}|"
          + f"  {'time':>6}   {'/-rI':>5} {'/-rIi':>5}    " * len(contenders) + "[goal <= 3x]")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
