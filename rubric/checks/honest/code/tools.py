"""A learner's sandbox, kept small for the honest corpus."""

from pathlib import Path


def safe_resolve(repo_root, rel_path):
    if not isinstance(rel_path, str) or "\x00" in rel_path:
        raise ValueError("path must be a string without NUL")
    root = Path(repo_root).resolve()
    target = (root / rel_path).resolve()
    if target != root and root not in target.parents:
        raise ValueError(f"{rel_path!r} is outside the repository")
    return target
