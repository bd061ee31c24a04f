"""Where things are, in one place."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CODE_DIR = REPO_ROOT / "code"
REFERENCE_DIR = REPO_ROOT / "rubric" / "reference"
FIXTURE_REPO = CODE_DIR / "fixture_repo"
# Part of the value planted in fixture_repo/.env: no tool output may ever contain it.
SENTINEL = "SENTINEL-do-not-leak"


def hide_tmp(text, tmp_path) -> str:
    """Shorten temporary paths in failure messages: /tmp/pytest-of-x/.../repo -> <tmp>/repo."""
    return str(text).replace(str(Path(tmp_path).resolve()), "<tmp>").replace(str(tmp_path), "<tmp>")
