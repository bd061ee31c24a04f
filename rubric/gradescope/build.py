"""Build the Gradescope autograder zip: setup.sh and run_autograder at its root, this lab under lab/.

    python rubric/gradescope/build.py --out bundle.zip

The lab is the files git tracks (no .env, no reports, no caches); outside a git checkout, every
file except those the grader never copies (workspace.SKIP_DIRS) and .env files. Their list goes
in lab/lab-manifest.txt, which the grader reads where there is no git (workspace.shipped_files).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAB = HERE.parents[1]
if str(LAB / "rubric") not in sys.path:
    sys.path.insert(0, str(LAB / "rubric"))

from grading.workspace import MANIFEST, SKIP_DIRS  # noqa: E402

ROOT_FILES = ("setup.sh", "run_autograder")


def lab_files() -> list:
    try:
        out = subprocess.run(["git", "-C", str(LAB), "ls-files", "-z"], capture_output=True, timeout=60, check=True).stdout
        files = [f for f in out.decode("utf-8", "surrogateescape").split("\0") if f]
    except (OSError, subprocess.SubprocessError):
        files = [str(p.relative_to(LAB)) for p in LAB.rglob("*") if p.is_file()
                 and not SKIP_DIRS.intersection(p.relative_to(LAB).parts)]
    return sorted(f for f in files if Path(f).name != ".env" and (LAB / f).is_file() and not (LAB / f).is_symlink())


def build(out: Path) -> int:
    files = lab_files()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ROOT_FILES:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16  # executable, as Gradescope runs them
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, (HERE / name).read_bytes())
        for f in files:
            zf.write(LAB / f, f"lab/{Path(f).as_posix()}")
        # Without git in the container, the grader copies exactly these files into each learner's lab.
        zf.writestr(f"lab/{MANIFEST}", "".join(f"{Path(f).as_posix()}\n" for f in files))
    return len(files)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="build.py", description="Build the Gradescope autograder zip for this lab.")
    p.add_argument("--out", type=Path, default=Path("autograder.zip"), help="the zip to write (default %(default)s)")
    args = p.parse_args(argv)
    count = build(args.out)
    print(f"build.py: {args.out} ({os.path.getsize(args.out) // 1024} KB): setup.sh, run_autograder and {count} lab files"
          " under lab/; upload it as the assignment's autograder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
