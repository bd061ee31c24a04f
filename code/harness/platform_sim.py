"""Pretend to run where ``dir_fd``, ``O_NOFOLLOW`` and symlink creation are missing, as on Windows.

CI runs the guiding tests once more with LESSON06_SIMULATE_PLATFORM=no-dirfd (.ci/run), to show
that they still pass on the reference and fail on the stubs for the same reasons on such a
platform: repo_files.py falls back to its path-by-path opener, and every symlink case is skipped
with its reason instead of failing. Applied by harness/plugin.py before any lab module is imported
(repo_files.py reads these flags once, when it is imported).
"""

from __future__ import annotations

import errno
import os
import sys

ENV = "LESSON06_SIMULATE_PLATFORM"
MODE = "no-dirfd"
# Open flags Windows does not have (repo_files.py and report.py read each with getattr(os, ..., 0)).
MISSING_FLAGS = ("O_NOFOLLOW", "O_DIRECTORY", "O_PATH", "O_CLOEXEC", "O_NONBLOCK")
DESCRIPTION = "no dir_fd, no O_NOFOLLOW/O_DIRECTORY, no symlink creation, no FIFOs (as on Windows)"


def _no_symlinks(*args, **kwargs):
    raise OSError(errno.EPERM, "A required privilege is not held by the client (simulated: no symlinks here)")


def requested() -> bool:
    return os.environ.get(ENV) == MODE


def apply() -> bool:
    """Remove the features from ``os`` for this process when LESSON06_SIMULATE_PLATFORM asks for it."""
    if not requested():
        if os.environ.get(ENV):
            raise ValueError(f"{ENV}={os.environ[ENV]!r}: the only mode is {MODE!r}")
        return False
    late = [name for name in ("repo_files", "tools") if name in sys.modules]
    if late:
        raise RuntimeError(f"{ENV}: {', '.join(late)} already imported; the simulation must come first")
    os.supports_dir_fd = set()
    for name in MISSING_FLAGS:
        if hasattr(os, name):
            delattr(os, name)
    if hasattr(os, "mkfifo"):  # without O_NONBLOCK a FIFO would block; Windows has neither
        del os.mkfifo
    os.symlink = _no_symlinks
    return True
