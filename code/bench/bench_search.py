"""search_code against grep, and the cold index against its floor, side by side in one run (issue 29).

    python bench/bench_search.py                 # from code/; Django 5.1.4 from ../shared/corpus + hostile trees
    python bench/bench_search.py --tree DIR      # also (or, without the corpus, only) this unpacked tree

Per tree, the median of --repeat rounds (5), each round running every contender in turn so that all
see the same machine (the load average is printed before and after):
  search   tools.search_code for a string found nowhere, and for a rare one, vs `grep -rI` and
           `grep -rIi` (search_code is case-insensitive, so -rIi is the like-for-like one)  [<= 3x]
  index    context_selector's cold index (context_index.build_index, no cache) vs the floor:
           reading the same files and splitting them into identifiers with one regex         [<= 3x]
The hostile trees are those of bench_hostile.py: 128 files of 2 MB, and 1,024 of 128 KB (search only:
the index skips files over 500 KB and stops at its budget, so its floor would not be comparable).
Timings move with the machine's load: compare the ratios of one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
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
import context_selector as cs  # noqa: E402
import tools  # noqa: E402

CORPUS = CODE_DIR.parent.parent / "shared" / "corpus" / "Django-5.1.4.tar.gz"
NO_HIT = "zq_no_such_identifier_xj"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def medians(fns, repeat: int) -> list[float]:
    """The median time of each function over ``repeat`` rounds, run in turn within each round (a
    burst of load on the shared machine then hits all of them, not one)."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, taken in zip(fns, times):
            started = time.perf_counter()
            fn()
            taken.append(time.perf_counter() - started)
    return [statistics.median(taken) for taken in times]


def grep(args, root) -> None:
    subprocess.run(["grep", *args, str(root)], capture_output=True)


def floor(root: Path, listing) -> None:
    """What any lexical index pays at least: read the files it indexes, split them with one regex."""
    for path, rel, size, _ in listing:
        if ci.indexable(rel, size):
            with open(path, "rb") as fh:
                IDENTIFIER.findall(fh.read().decode("utf-8", "replace"))


def cold_index(root: Path) -> None:
    cs._terms_memo.clear()  # as in a new process: the terms of each identifier are not known yet
    ci.build_index(root, ci.list_repo(root), cs.RECIPE)


def measure(name: str, root: Path, rare: str, repeat: int, index: bool = True) -> None:
    listing = ci.list_repo(root)
    mb = sum(size for *_, size, _ in listing) / 1e6
    print(f"\n{name}: {len(listing):,} files, {mb:.0f} MB")
    for query in (NO_HIT, rare):
        ours, plain, folded = medians([lambda: tools.search_code(root, query), lambda: grep(["-rI", query], root),
                                       lambda: grep(["-rIi", query], root)], repeat)
        print(f"  search_code({query!r:<28}) {ours:6.2f} s   grep -rI {plain:5.2f} s ({ours / plain:4.1f}x)   "
              f"grep -rIi {folded:5.2f} s ({ours / folded:4.1f}x)   [goal <= 3x]")
    if not index:  # files over the index's size or total budget: it reads few of them, the floor all
        return
    base, cold = medians([lambda: floor(root, listing), lambda: cold_index(root)], repeat)
    print(f"  cold index {cold:6.2f} s   floor (read + regex split) {base:5.2f} s   {cold / base:4.1f}x   [goal <= 3x]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], help="an unpacked source tree to measure too")
    parser.add_argument("--corpus", default=str(CORPUS), help="the Django 5.1.4 sdist")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-hostile", action="store_true")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "")
    work = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        if Path(args.corpus).is_file():
            with tarfile.open(args.corpus) as tar:
                tar.extractall(work / "django", filter="data")
            measure("Django 5.1.4", (work / "django" / "Django-5.1.4").resolve(), "get_absolute_url", args.repeat)
        else:
            print(f"(no {args.corpus}: Django skipped)")
        for tree in args.tree:
            measure(Path(tree).name, Path(tree).resolve(), "__version__", args.repeat)
        if not args.no_hostile:
            big = work / "big"
            big.mkdir()
            block = ("x = 1  # a line with an x\n" * (1_999_000 // 26)).encode() + b"marker = 1\n"
            for i in range(128):
                (big / f"f{i:03}.py").write_bytes(block)
            measure("hostile: 128 x 2 MB", big, "marker", args.repeat, index=False)
            many = work / "many"
            many.mkdir()
            text = "".join(f"def f{i}(a, b):\n    return a + b * {i}\n\n" for i in range(128_000 // 40)).encode()
            for i in range(1024):
                (many / f"m{i:04}.py").write_bytes(text)
            measure("hostile: 1,024 x 128 KB", many, "def f3199(", args.repeat, index=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if hasattr(os, "getloadavg"):
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
