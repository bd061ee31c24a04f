"""Copies: the submission (read once, never modified) and a pristine lab around the learner's code.

The lab copy comes from the grader's own repository (the one holding rubric/grade.py): its tests,
harness, fixture repository and provided modules. Only the learner-owned modules are taken from
the submission, so a test edited to pass changes nothing here (integrity reports the edit).
"""

from __future__ import annotations

import ast
import os
import shutil
import stat
import sys
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


@dataclass
class CopyNotes:
    files: int = 0
    bytes: int = 0
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
    for folder, dirs, files in os.walk(src, followlinks=False):
        here = Path(folder)
        rel_dir = here.relative_to(src)
        kept = []
        for d in sorted(dirs):
            if d in SKIP_DIRS:
                continue
            if (here / d).is_symlink():
                _keep_link(src, here / d, rel_dir / d, dst, notes)
            else:
                kept.append(d)
                (dst / rel_dir / d).mkdir(exist_ok=True)
        dirs[:] = kept
        for name in sorted(files):
            rel = rel_dir / name
            path = here / name
            if name == ".env" or (name.startswith(".env.") and name != ".env.example"):
                notes.skip(str(rel), "secrets file, not copied")
                continue
            if path.is_symlink():
                _keep_link(src, path, rel, dst, notes)
                continue
            try:
                info = path.lstat()
            except OSError as exc:
                notes.skip(str(rel), f"unreadable ({exc.strerror})")
                continue
            if not stat.S_ISREG(info.st_mode):
                notes.skip(str(rel), "not a regular file")
                continue
            if notes.files >= MAX_FILES or notes.bytes + info.st_size > MAX_BYTES:
                notes.skip(str(rel), "size limit reached")
                continue
            shutil.copyfile(path, dst / rel, follow_symlinks=False)
            notes.files += 1
            notes.bytes += info.st_size
    return notes


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


def _ignore_for_lab(folder, names):
    return [n for n in names if n in SKIP_DIRS or n == ".env" and not folder.endswith("fixture_repo")]


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
    shutil.copytree(LAB_ROOT, dst, ignore=_ignore_for_lab, symlinks=True)
    missing = []
    for extra in sorted(learner_code.glob("*.py")) if learner_code.is_dir() else []:
        # a helper module the learner added (imported by their tools.py?); never one the lab ships
        if extra.is_file() and not extra.is_symlink() and not (dst / "code" / extra.name).exists() \
                and extra.stem not in SHADOWING and extra.stem not in sys.stdlib_module_names \
                and not extra.stem.startswith(("test_", "conftest")):
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
        except SyntaxError:
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
        shutil.copyfile(LAB_ROOT / "rubric" / "reference" / name, lab / "rubric" / "reference" / name)
