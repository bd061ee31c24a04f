"""Fixtures shared by the guiding tests. Every tree a test changes is built in tmp_path."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.offline import go_offline
from harness.paths import FIXTURE_REPO


@pytest.fixture
def tree(tmp_path):
    """<tmp>/repo (the sandbox root), <tmp>/outside (must stay unreachable), <tmp>/repo_evil."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "sub").mkdir()
    (repo / "src" / "config.py").write_text("DEFAULT = 'groq'\n")
    (repo / "README.md").write_text("# demo\n")
    (repo / "sub" / "file.py").write_text("x = 1\n")
    (repo / "file.py").write_text("y = 2\n")
    (repo / "..foo.py").write_text("z = 3\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SENTINEL\n")
    evil = tmp_path / "repo_evil"
    evil.mkdir()
    (evil / "x.py").write_text("stolen = True\n")
    return SimpleNamespace(root=repo, outside=outside, evil=evil, tmp=tmp_path)


@pytest.fixture
def symlink():
    """make(link, target): create a symlink, or skip where this OS or user cannot."""

    def make(link: Path, target: Path):
        try:
            os.symlink(target, link, target_is_directory=Path(target).is_dir())
        except (OSError, NotImplementedError, AttributeError) as exc:
            pytest.skip(f"cannot create symlinks here ({exc}); the case is covered on Linux and macOS")
        return link

    return make


@pytest.fixture
def fixture_repo():
    """The read-only fixture repository shipped in code/fixture_repo/."""
    return FIXTURE_REPO


@pytest.fixture
def repo_copy(tmp_path):
    """A private copy of the fixture repository, for tests that add files to it."""
    target = tmp_path / "fixture_repo"
    shutil.copytree(FIXTURE_REPO, target)
    return target


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No provider keys, no .env files, a private cache: the tests never touch your settings."""
    return go_offline(monkeypatch, tmp_path / "cache")


@pytest.fixture
def copilot(offline):
    """copilot.py, imported with offline settings (it imports litellm only when it calls a model)."""
    return importlib.import_module("copilot")
