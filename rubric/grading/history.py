"""Every shipped version of a lab file: the grader's copy now, plus its git history when there is one.

A learner who cloned the lab last month has last month's tests and templates: an unedited file is
one whose content matches ANY version the lab shipped, not just today's.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess

from grading.workspace import LAB_ROOT


def blob_id(data: bytes) -> str:
    """git's object id for this content (so no git is needed to compare with the history)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _git(*args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(LAB_ROOT), *args], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else ""


@functools.lru_cache(maxsize=1)
def _blobs_by_path() -> dict:
    """path -> set of blob ids it has had in any commit."""
    out: dict[str, set] = {}
    for line in _git("log", "--format=", "--raw", "--no-abbrev", "--no-renames").splitlines():
        if not line.startswith(":"):
            continue
        meta, _, path = line.partition("\t")
        fields = meta.split()
        if len(fields) >= 4:
            out.setdefault(path, set()).update(b for b in fields[2:4] if set(b) != {"0"})
    return out


def known_ids(path: str) -> set:
    """Blob ids of every shipped version of ``path`` (repository-relative, forward slashes)."""
    ids = set(_blobs_by_path().get(path, set()))
    current = LAB_ROOT / path
    if current.is_file():
        ids.add(blob_id(current.read_bytes()))
    return ids


def is_shipped(path: str, data: bytes) -> bool:
    """True when ``data`` is a version of ``path`` the lab shipped (CRLF checkouts count too)."""
    ids = known_ids(path)
    return blob_id(data) in ids or blob_id(data.replace(b"\r\n", b"\n")) in ids


MANIFEST = LAB_ROOT / "rubric" / "grading" / "shipped_templates.txt"


def shipped_template_ids() -> dict:
    """path -> blob ids of every template version the lab shipped (the learner fills these files in)."""
    out: dict[str, set] = {}
    text = MANIFEST.read_text(encoding="utf-8") if MANIFEST.is_file() else ""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and not line.startswith("#"):
            out.setdefault(fields[1], set()).add(fields[0])
    return out


@functools.lru_cache(maxsize=64)
def versions(path: str) -> tuple:
    """The text of every shipped version of ``path``, newest (the grader's copy) first.

    For a template the learner fills in, only the versions in the manifest count: run from inside
    a learner's own clone, the working copy and the learner's commits hold their answers.
    """
    listed = shipped_template_ids().get(path)
    if listed is not None:
        current = LAB_ROOT / path
        texts = [current.read_text(encoding="utf-8", errors="replace")] if current.is_file() and \
            is_listed(current.read_bytes(), listed) else []
        for blob in sorted(listed):
            text = _git("cat-file", "-p", blob)
            if text and text not in texts:
                texts.append(text)
        return tuple(texts)
    texts = []
    current = LAB_ROOT / path
    if current.is_file():
        texts.append(current.read_text(encoding="utf-8", errors="replace"))
    for blob in sorted(_blobs_by_path().get(path, set())):
        text = _git("cat-file", "-p", blob)
        if text and text not in texts:
            texts.append(text)
    return tuple(texts)


def is_listed(data: bytes, ids: set) -> bool:
    return blob_id(data) in ids or blob_id(data.replace(b"\r\n", b"\n")) in ids


def shipped_paths(prefix: str) -> set:
    """Every path under ``prefix`` that some version of the lab shipped."""
    found = {p for p in _blobs_by_path() if p.startswith(prefix)}
    root = LAB_ROOT / prefix
    if root.is_dir():
        found |= {p.relative_to(LAB_ROOT).as_posix() for p in root.rglob("*") if p.is_file()
                  and "__pycache__" not in p.parts}
    return found
