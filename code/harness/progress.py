"""The parts of M5 and M6 no test can judge: did the learner run the copilot, and write the analysis?

The board shows such a milestone as pending (neither passed nor failed) until:
  - M5: copilot.py has finished one run on the learner's code with a real model. The copilot records
    it in ``last_run.json`` in its cache folder (config.default_cache_dir); tests never write there.
    A passing live test (`python -m pytest -m live`) counts too.
  - M6: FAILURE_ANALYSIS.md has no placeholder left. A placeholder is a paragraph written wholly in
    _italics_, the template's convention ("Replace every line in _italics_").
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from harness.paths import CODE_DIR, REPO_ROOT

LAST_RUN_FILE = "last_run.json"
ANALYSIS = REPO_ROOT / "FAILURE_ANALYSIS.md"
RUN_ONCE = ('run the copilot once with your provider (code/.env): '
            'cd code && python copilot.py "why does config default to Groq?"')


def last_run_path(env=None) -> Path:
    """Where copilot.py records its last finished run (the same folder as its vector cache)."""
    import config  # provided, cheap (no LiteLLM)

    if env is None:
        try:
            env = config.read_environment()  # code/.env may set COPILOT_CACHE_DIR
        except Exception:  # noqa: BLE001  (an unreadable .env must not break the board)
            env = os.environ
    return config.default_cache_dir(env) / LAST_RUN_FILE


def last_run(code_dir: Path = CODE_DIR, env=None) -> dict | None:
    """The recorded run of this checkout's own code (not --reference), or None."""
    try:
        record = json.loads(last_run_path(env).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("implementation") != "code":
        return None
    try:
        same = Path(record.get("code_dir", "")).resolve() == Path(code_dir).resolve()
    except (OSError, TypeError, ValueError):
        return None
    return record if same else None


ITALIC = re.compile(r"^[_*](?![_*\s]).*[^\s_*][_*]$", re.S)
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def placeholders(path: Path = ANALYSIS) -> int:
    """How many placeholders (paragraphs or list items wholly in _italics_) are left outside code
    blocks; -1 when the file is missing. ``- _Question:_ my question`` is filled in."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return -1
    return placeholders_in(text)


def placeholders_in(text: str) -> int:
    blocks, current, fenced = [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            blocks.append(current)
            current = []
        elif fenced:
            continue
        elif not line.strip() or LIST_ITEM.match(line):
            blocks.append(current)
            current = [LIST_ITEM.sub("", line).strip()] if line.strip() else []
        else:
            current.append(line.strip())
    blocks.append(current)
    return sum(bool(ITALIC.match(" ".join(b))) for b in blocks if b)


def pending(passed: dict[str, int], failed: dict[str, int], copilot_ran: bool = False) -> dict[str, tuple[str, str]]:
    """Milestones whose tests all pass but whose untestable part is not done:
    {milestone: (what is left, in a few words; how to do it, for the board)}.
    ``copilot_ran``: the live test (-m live) just ran the copilot with the learner's provider."""
    out = {}
    if passed.get("M5") and not failed.get("M5") and not copilot_ran and last_run() is None:
        out["M5"] = ("run the copilot once", RUN_ONCE)
    if passed.get("M6") and not failed.get("M6"):
        left = placeholders()
        if left:
            detail = ("FAILURE_ANALYSIS.md is missing" if left < 0 else
                      f"{left} placeholder{'s' * (left != 1)} (in _italics_) left in FAILURE_ANALYSIS.md")
            out["M6"] = ("write FAILURE_ANALYSIS.md", detail)
    return out
