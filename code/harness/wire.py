"""M5's two wire tests (through real LiteLLM, seconds each) run once per version of the code.

Once such a test has passed on the learner's code, the board does not rerun it until a file in
code/ or code/harness/ changes; `python -m pytest --wire` reruns it anyway. The record lives in the
checkout's pytest cache (.pytest_cache, git-ignored). Only the learner's own runs use it: with
--reference, --unlock-all or -p no:cacheprovider (the course checks and the grader) every test runs.
"""

from __future__ import annotations

import hashlib

from harness.paths import CODE_DIR

KEY = "lesson06/wire"
SKIP_REASON = "recorded: it passed on this exact code/ before (--wire runs it again)"


def code_fingerprint() -> str:
    """A hash of code/*.py and code/harness/*.py: the wire tests' outcome changes only with them."""
    digest = hashlib.sha256()
    for path in sorted([*CODE_DIR.glob("*.py"), *CODE_DIR.glob("harness/*.py")]):
        digest.update(path.relative_to(CODE_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def recorded(config, nodeid: str, testing_code: bool) -> bool:
    """Whether this wire test already passed on exactly this code (and may be skipped)."""
    if config.getoption("wire") or not testing_code or getattr(config, "cache", None) is None:
        return False
    return config.cache.get(KEY, {}).get(nodeid) == code_fingerprint()


def record(config, nodeid: str, testing_code: bool) -> None:
    if testing_code and getattr(config, "cache", None) is not None:
        config.cache.set(KEY, {**config.cache.get(KEY, {}), nodeid: code_fingerprint()})
