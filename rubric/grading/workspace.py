"""Copies: the submission (read once, never modified) and a pristine lab around the learner's code.

The lab copy comes from the grader's own repository (the one holding rubric/grade.py): the files
it ships (`git ls-files`, or lab-manifest.txt where there is no git), never reports, submissions,
keys or caches that happen to sit in its root. It is made once per grader process and copied
for each learner. Only the learner-owned modules are taken from the submission, so a test edited
to pass changes nothing here (integrity reports the edit). Every walk here is iterative, so a
1,000-deep folder chain in a submission is copied (or refused) and removed like any other.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

LAB_ROOT = Path(__file__).resolve().parents[2]
LEARNER_MODULES = ("tools.py", "agent_loop.py", "stretch.py")   # code/<name>, learner functions inside
DOCUMENTS = ("UNDERSTANDING.md", "FAILURE_ANALYSIS.md")
SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "env", "node_modules", "__pycache__", ".pytest_cache",
             ".mypy_cache", ".ruff_cache", ".tox", ".idea", ".vscode", ".ipynb_checkpoints"}
# Module names a learner's extra file must not take: it would change how the tests themselves run.
SHADOWING = {"pytest", "_pytest", "pluggy", "litellm", "numpy", "dotenv", "sitecustomize", "usercustomize", "harness"}
MAX_FILES = 5000
MAX_BYTES = 50 << 20              # a submission bigger than this is copied only up to here
MAX_DEPTH = 64                    # folders deeper than this are not copied (noted)
MAX_SOURCE_BYTES = 512 << 10      # a .py file the grader parses (ast): 6 MB of source took 2.4 GB and 17 s
MAX_FOLDERS = 2000                # a million empty folders would otherwise cost a million mkdirs
MAX_PATH_CHARS = 1000             # a longer relative path is not copied (PATH_MAX is 4096 on Linux)
MANIFEST = "lab-manifest.txt"     # the shipped files, one per line, where the lab has no git


@functools.lru_cache(maxsize=1)
def installed_modules() -> frozenset:
    """Top-level module names of the installed distributions (a learner file must not shadow one)."""
    try:
        return frozenset(importlib.metadata.packages_distributions())
    except Exception:  # noqa: BLE001  (a broken distribution's metadata must not stop the grader)
        return frozenset()


def shadows(filename: str) -> str:
    """Why a file in a learner's code/ would change how the lab runs, or ""."""
    stem = filename.split(".", 1)[0]
    if filename.endswith(".pth"):
        return "a .pth file runs code when Python starts"
    if stem in ("__init__", "__main__"):   # code/ as a package takes the standard library's `code` (pdb imports it)
        return f"{stem}.py would change how code/ itself is imported"
    if stem in SHADOWING or stem in ("sitecustomize", "usercustomize"):
        return f"{stem} would replace a module the lab or Python loads"
    if stem in sys.stdlib_module_names:
        return f"{stem} is a standard-library module"
    if stem in installed_modules():
        return f"{stem} is an installed package's module"
    return ""


def walk(root: Path):
    """(folder, [sub-folder names], [file names]) top-down, iteratively, links never followed;
    prune by editing the sub-folder list as with os.walk."""
    stack = [root]
    while stack:
        here = stack.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        files = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
        yield here, dirs, files
        stack.extend(here / d for d in reversed(dirs))


def remove_tree(root: Path) -> None:
    """rmtree that survives any depth (shutil.rmtree recurses) and read-only folders."""
    root = Path(root)
    if not os.path.lexists(root):
        return
    if root.is_symlink() or not root.is_dir():
        root.unlink(missing_ok=True)
        return
    order = []
    for folder, dirs, files in walk(root):
        try:
            os.chmod(folder, 0o700)
        except OSError:
            pass
        for name in files + [d for d in dirs if (folder / d).is_symlink()]:
            try:
                os.unlink(folder / name)
            except OSError:
                pass
        order.append(folder)
    for folder in reversed(order):
        try:
            os.rmdir(folder)
        except OSError:
            pass


@dataclass
class CopyNotes:
    files: int = 0
    bytes: int = 0
    folders: int = 0
    skipped: list = field(default_factory=list)    # (relative path, why)

    def skip(self, rel: str, why: str) -> None:
        if len(self.skipped) < 50:
            self.skipped.append((rel, why))


def copy_submission(src: Path, dst: Path) -> CopyNotes:
    """Regular files and folders only; symlinks kept only when they stay inside the submission.

    Never follows a link, never opens a FIFO or device, never copies .env files (keys stay where
    they are) or virtualenvs and caches.
    """
    notes = CopyNotes()
    src = src.resolve()
    dst.mkdir(parents=True)
    for here, dirs, files in walk(src):
        rel_dir = here.relative_to(src)
        kept = []
        for d in sorted(dirs):
            if d in SKIP_DIRS:
                continue
            if len(rel_dir.parts) >= MAX_DEPTH:
                notes.skip(str(rel_dir / d)[:200], f"deeper than {MAX_DEPTH} folders, not copied")
                continue
            if len(str(rel_dir / d)) > MAX_PATH_CHARS or notes.folders >= MAX_FOLDERS:
                notes.skip(str(rel_dir / d)[:200], "path too long or too many folders, not copied")
                continue
            try:
                if (here / d).is_symlink():
                    _keep_link(src, here / d, rel_dir / d, dst, notes)
                    continue
                (dst / rel_dir / d).mkdir(exist_ok=True)
            except OSError as exc:   # a name the file system here refuses: that folder only
                notes.skip(str(rel_dir / d)[:200], f"not copied ({exc.strerror})")
                continue
            kept.append(d)
            notes.folders += 1
        dirs[:] = kept
        for name in sorted(files):
            rel = rel_dir / name
            path = here / name
            if len(str(rel)) > MAX_PATH_CHARS:
                notes.skip(str(rel)[:200], "path too long, not copied")
                continue
            if name == ".env" or (name.startswith(".env.") and name != ".env.example"):
                notes.skip(str(rel), "secrets file, not copied")
                continue
            try:
                info = path.lstat()
            except OSError as exc:
                notes.skip(str(rel), f"unreadable ({exc.strerror})")
                continue
            if stat.S_ISLNK(info.st_mode):
                _keep_link(src, path, rel, dst, notes)
                continue
            if not stat.S_ISREG(info.st_mode):
                notes.skip(str(rel), "not a regular file")
                continue
            if name.endswith(".py") and info.st_size > MAX_SOURCE_BYTES:
                notes.skip(str(rel), f"a Python file over {MAX_SOURCE_BYTES >> 10} KB, not copied (the lab's largest is 42 KB)")
                continue
            if notes.files >= MAX_FILES or notes.bytes + info.st_size > MAX_BYTES:
                notes.skip(str(rel), "size limit reached")
                continue
            try:
                why = _copy_regular(path, dst / rel)
            except OSError as exc:
                why = f"not copied ({exc.strerror})"
            if why:
                notes.skip(str(rel), why)
                continue
            notes.files += 1
            notes.bytes += info.st_size
    return notes


def _copy_regular(path: Path, to: Path) -> str:
    """Copy one file through a descriptor checked after opening: a name swapped for a link or FIFO
    since the listing is not followed (nor blocks), and a hard link (on a shared machine, a name
    for a file its learner may not read, such as the instructor's key) is not copied. "" = copied."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)   # O_BINARY: Windows would otherwise translate line ends
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if info.st_nlink > 1 and os.name == "posix":
            return "a hard link (another name for a file that may not be the learner's), not copied"
        with open(to, "xb") as out:
            left = min(info.st_size, MAX_BYTES)
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
    finally:
        os.close(fd)
    return ""


def read_back(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of a file learner code could write: never through a link, never
    blocking on a FIFO or device (opened non-blocking, checked to be a regular file); b"" otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _keep_link(src: Path, link: Path, rel: Path, dst: Path, notes: CopyNotes) -> None:
    """Recreate a symlink whose target is inside the submission; skip (and note) any other."""
    try:
        target = os.readlink(link)
        resolved = (link.parent / target).resolve()
    except (OSError, RuntimeError):
        notes.skip(str(rel), "symlink that cannot be resolved")
        return
    if not resolved.is_relative_to(src) or os.path.isabs(target):
        notes.skip(str(rel), f"symlink leading out of the submission ({target})")
        return
    try:
        os.symlink(target, dst / rel, target_is_directory=resolved.is_dir())
    except OSError as exc:
        notes.skip(str(rel), f"symlink not recreated ({exc.strerror})")
    # never walked into: its target is copied where it really lives


def find_lab_root(submission: Path) -> Path:
    """A learner may hand in the lab root or a folder holding exactly one lab: find code/tools.py."""
    if (submission / "code" / "tools.py").exists() or (submission / "code").is_dir():
        return submission
    inner = [p for p in submission.iterdir() if p.is_dir() and (p / "code" / "tools.py").exists()]
    return inner[0] if len(inner) == 1 else submission


def shipped_files() -> list:
    """The lab's shipped files, relative: `git ls-files`, else lab-manifest.txt, else code/ and
    rubric/ without keys and caches."""
    try:
        proc = subprocess.run(["git", "-C", str(LAB_ROOT), "ls-files", "-z"], capture_output=True, timeout=60)
        if proc.returncode == 0 and proc.stdout:
            return [p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p]
    except (OSError, subprocess.SubprocessError):
        pass
    manifest = LAB_ROOT / MANIFEST
    if manifest.is_file():
        return [line.strip() for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    found = []
    for top in ("code", "rubric"):
        for here, dirs, files in walk(LAB_ROOT / top):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
            found += [(here / f).relative_to(LAB_ROOT).as_posix() for f in files
                      if f != ".env" or here.name == "fixture_repo"]
    return found


@functools.lru_cache(maxsize=1)
def pristine_lab() -> Path:
    """One copy of the shipped lab per grader process; every learner's lab is copied from it."""
    dst = Path(tempfile.mkdtemp(prefix="grade-lab-")) / "lab"
    for rel in shipped_files():
        src = LAB_ROOT / rel
        if src.is_symlink() or not src.is_file():
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst / rel)
    import atexit
    atexit.register(remove_tree, dst.parent)
    return dst


def splice(pristine: str, theirs: str, names) -> str:
    """The pristine module with the learner's versions of ``names`` put in, plus every top-level
    definition or import the learner added. Provided code the learner changed stays pristine, so
    neither a rewritten tool nor a lab that moved on since the learner cloned it changes a grade.
    Raises SyntaxError when the learner's module does not parse."""
    ours_tree, their_tree = ast.parse(pristine), ast.parse(theirs)
    ours_lines, their_lines = pristine.splitlines(keepends=True), theirs.splitlines(keepends=True)

    def segment(lines, node):
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return first, node.end_lineno, "".join(lines[first - 1:node.end_lineno])

    def key(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.name
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            return ",".join(t.id for t in targets if isinstance(t, ast.Name)) or None
        return ast.dump(node)  # imports and the rest: the same statement or a new one

    theirs_by_key = {key(n): n for n in their_tree.body}
    ours_keys = {key(n) for n in ours_tree.body}
    replace = [(segment(ours_lines, n), segment(their_lines, theirs_by_key[n.name])[2]) for n in ours_tree.body
               if isinstance(n, ast.FunctionDef) and n.name in names and isinstance(theirs_by_key.get(n.name), ast.FunctionDef)]
    out = list(ours_lines)
    for (first, last, _), text in sorted(replace, reverse=True):
        out[first - 1:last] = [text if text.endswith("\n") else text + "\n"]
    added = [segment(their_lines, n)[2] for n in their_tree.body if key(n) is not None and key(n) not in ours_keys
             and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if added:
        out.append("\n\n# --- added by the learner (kept so their functions can use it) ---\n" + "\n".join(added) + "\n")
    return "".join(out)


def build_lab(dst: Path, learner_code: Path, as_submitted: bool = False) -> list[str]:
    """The grader's lab copied to ``dst``, with the learner's functions put into its code/.

    The learner functions are spliced into the pristine modules (see ``splice``); with
    ``as_submitted`` the learner's whole files are used instead. A module that does not parse is
    used as it is, so the import error becomes evidence. Returns the learner modules that were
    missing (those keep the shipped stub).
    """
    shutil.copytree(pristine_lab(), dst, symlinks=True)
    missing = []
    for extra in sorted(learner_code.glob("*.py")) if learner_code.is_dir() else []:
        # a helper module the learner added (imported by their tools.py?); never one the lab ships
        if extra.is_file() and not extra.is_symlink() and not (dst / "code" / extra.name).exists() \
                and not shadows(extra.name) and not extra.stem.startswith(("test_", "conftest")):
            shutil.copyfile(extra, dst / "code" / extra.name)
    for name in LEARNER_MODULES:
        theirs, ours = learner_code / name, dst / "code" / name
        if not theirs.is_file() or theirs.is_symlink():
            missing.append(name)
            continue
        if as_submitted:
            shutil.copyfile(theirs, ours)
            continue
        text = theirs.read_text(encoding="utf-8", errors="replace")
        functions = [q.split(".")[1] for q in learner_functions() if q.split(".")[0] + ".py" == name]
        try:
            ours.write_text(splice(ours.read_text(encoding="utf-8"), text, functions), encoding="utf-8")
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deep or broken: run it as it is
            shutil.copyfile(theirs, ours)
    return missing


def learner_functions():
    from harness.milestones import LEARNER_FUNCTIONS  # board.py put the lab's code/ on sys.path
    return LEARNER_FUNCTIONS


def put_learner_code_in_reference(lab: Path) -> None:
    """So `break_and_observe.py --simulate` applies each break to the learner's functions."""
    for name in ("tools.py", "agent_loop.py"):
        shutil.copyfile(lab / "code" / name, lab / "rubric" / "reference" / name)


def restore_reference(lab: Path) -> None:
    for name in ("tools.py", "agent_loop.py"):
        shutil.copyfile(pristine_lab() / "rubric" / "reference" / name, lab / "rubric" / "reference" / name)
