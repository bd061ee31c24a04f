"""The parts of M5 and M6 no test can judge, and UNDERSTANDING.md: what the board says about them.

The board shows such a milestone as pending (◐: tests pass, the rest not done) until:
  - M5: copilot.py has finished one run of THIS checkout's code with a real model. The copilot
    records each run in its cache folder (config.default_cache_dir), in a file named after the
    checkout's absolute path, so two clones on one machine never read each other's run. A run whose
    replies came from the lab's own fake server (harness/fake_server.py signs them) is recorded as
    scripted and keeps M5 pending. A passing live test (`python -m pytest -m live`) counts too.
  - M6: every section of FAILURE_ANALYSIS.md that the learner fills in holds their own words (and,
    under Evidence, the scenario's evidence block from their own code: a --simulate block does not
    count), and no placeholder in _italics_ is left. Labels may keep the template's italics or not.
UNDERSTANDING.md gets a line of its own: ◐ while answers are missing. It never locks a milestone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from harness.paths import CODE_DIR, REPO_ROOT

LAST_RUN_FILE = "last_run.json"
ANALYSIS = REPO_ROOT / "FAILURE_ANALYSIS.md"
UNDERSTANDING = REPO_ROOT / "UNDERSTANDING.md"
RUN_ONCE = ('run the copilot once with your provider (code/.env): '
            'cd code && python copilot.py "why does config default to Groq?"')
SCRIPTED_ONLY = ("your last run answered from the lab's fake server (scripted replies, not a model): run it once "
                 'with your provider (code/.env): cd code && python copilot.py "why does config default to Groq?"')


# --------------------------------------------------------------------------- M5: the recorded run

def record_name(code_dir: Path = CODE_DIR) -> str:
    """The record's file name for one checkout: last_run-<hash of code/'s absolute path>.json."""
    digest = hashlib.sha256(str(Path(code_dir).resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{Path(LAST_RUN_FILE).stem}-{digest}.json"


def last_run_path(env=None, code_dir: Path = CODE_DIR) -> Path:
    """Where copilot.py records the last finished run of ``code_dir`` (beside its vector cache)."""
    import config  # provided, cheap (no LiteLLM)

    if env is None:
        try:
            env = config.read_environment()  # code/.env may set COPILOT_CACHE_DIR
        except Exception:  # noqa: BLE001  (an unreadable .env must not break the board)
            env = os.environ
    return config.default_cache_dir(env) / record_name(code_dir)


def last_run(code_dir: Path = CODE_DIR, env=None) -> dict | None:
    """The recorded run of this checkout's own code (not --reference), or None."""
    try:
        record = json.loads(last_run_path(env, code_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("implementation") != "code":
        return None
    try:
        same = Path(record.get("code_dir", "")).resolve() == Path(code_dir).resolve()
    except (OSError, TypeError, ValueError):
        return None
    return record if same else None


# --------------------------------------------------------------------------- M6: FAILURE_ANALYSIS.md

ITALIC = re.compile(r"^[_*](?![_*\s]).*[^\s_*][_*]$", re.S)
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# A list item's label in front of its answer, as the template has it ("_Question:_ "), in bold, or
# plain ("Question: "): the learner may keep or drop the template's italics.
LABEL = re.compile(r"^(?:[_*]{1,2}[^_*]+[_*]{1,2}|[A-Z][\w ,()/'-]{0,60}:(?=\s|$))\s*")
# The parts the learner writes, under each "## Break N: <scenario>" and the last two sections.
BREAK_PARTS = ("Hypothesis", "What I changed", "Evidence", "Design decision that prevents it", "Production cost")
OTHER_PARTS = {"Evaluation": ("Component table", "What the numbers say"), "Right evidence, wrong answer": ("My case",)}
MIN_WORDS = 5          # "TODO" is not an answer; one real sentence is
SCENARIO_ROW = re.compile(r"^scenario\s+:\s+([\w-]+)", re.M)
RAN_ROW = re.compile(r"^ran\s+:\s+(.*)$", re.M)
# Step 3 asks for the block from the learner's own broken code; a --simulate block, or one run on
# the reference, shows the lab's break, not theirs (harness/evidence.py writes these words).
NOT_OWN = ("simulated break", "reference")


def placeholders(path: Path = ANALYSIS) -> int:
    """How many placeholders (paragraphs or list items wholly in _italics_) are left outside code
    blocks; -1 when the file is missing. ``- _Question:_ my question`` is filled in."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return -1
    return placeholders_in(text)


def _blocks(text: str):
    """(paragraphs and list items outside code, the code blocks' text) of a piece of Markdown."""
    blocks, current, code, fenced = [], [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            blocks.append(current)
            current = []
            code.append("")
        elif fenced:
            code[-1] += line + "\n"
        elif not line.strip() or LIST_ITEM.match(line) or line.lstrip().startswith("#"):
            blocks.append(current)
            current = [LIST_ITEM.sub("", line).strip()] if line.strip() and not line.lstrip().startswith("#") else []
        else:
            current.append(line.strip())
    blocks.append(current)
    return [" ".join(b) for b in blocks if b], [c for c in code if c.strip()]


def placeholders_in(text: str) -> int:
    return sum(bool(ITALIC.match(b)) for b in _blocks(text)[0])


def own_words(text: str) -> int:
    """Words outside code blocks that are not placeholders (and not a list item's italic label)."""
    prose, _ = _blocks(text)
    return sum(len(LABEL.sub("", b).split()) for b in prose if not ITALIC.match(b))


def sections(text: str, level: int) -> dict[str, str]:
    """{heading: body} for the headings of exactly ``level`` #'s outside code blocks."""
    out, title, fenced = {}, None, False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        heading = None if fenced else re.match(r"^(#+)\s+(.*)", line)
        if heading and len(heading[1]) <= level:
            title = heading[2].strip() if len(heading[1]) == level else None
            if title is not None:
                out[title] = ""
        elif title is not None:
            out[title] += line + "\n"
    return out


def unwritten(path: Path = ANALYSIS) -> list[str] | None:
    """The parts of FAILURE_ANALYSIS.md still without the learner's own text ("Break 2 Evidence"),
    in order; None when the file is missing. Evidence needs the scenario's pasted evidence block."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    missing = []
    for title, body in sections(text, 2).items():
        parts = sections(body, 3)
        scenario = re.match(r"Break (\d+): ([\w-]+)", title)
        wanted = BREAK_PARTS if scenario else OTHER_PARTS.get(title, ())
        for part in wanted:
            content = parts.get(part, "")
            if scenario and part == "Evidence":
                ran = [own_block(code) for code in _blocks(content)[1] if scenario[2] in SCENARIO_ROW.findall(code)]
                done = True in ran
                if ran and not done:
                    missing.append(f"Break {scenario[1]} Evidence (only a --simulate or reference block: paste "
                                   "the one your own broken code printed)")
                    continue
            elif part == "Component table":
                done = any("|" in c or len(c.splitlines()) > 2 for c in _blocks(content)[1]) or \
                    sum("|" in line for line in content.splitlines()) > 2
            elif part == "My case":
                items = [b for b in _blocks(content)[0] if LABEL.match(b)]
                done = bool(items) and all(len(LABEL.sub("", b).split()) >= 1 for b in items) \
                    and own_words(content) >= MIN_WORDS
            else:
                done = own_words(content) >= MIN_WORDS
            if not done:
                missing.append(f"Break {scenario[1]} {part}" if scenario else f"{title}: {part}")
    return missing


def own_block(code: str) -> bool:
    """Was this evidence block printed by a run of the learner's own code (not --simulate, not the
    reference)? A block without a ``ran`` line counts (older harness output had none)."""
    ran = RAN_ROW.search(code)
    return ran is None or not ran[1].strip().startswith(NOT_OWN)


# --------------------------------------------------------------------------- UNDERSTANDING.md

def answers(path: Path = UNDERSTANDING) -> tuple[int, int] | None:
    """(questions answered, questions) in UNDERSTANDING.md: an answer is own words under
    **Your answer:**. None when the file is missing."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    questions = [body for title, body in sections(text, 2).items() if "**Your answer:**" in body]
    done = sum(own_words(body.split("**Your answer:**", 1)[1].split("**After M6:**", 1)[0]) >= MIN_WORDS
               for body in questions)
    return done, len(questions)


def understanding_line() -> tuple[bool, str] | None:
    """(all answered, what the board says) about UNDERSTANDING.md; it never locks a milestone."""
    counted = answers()
    if counted is None:
        return None
    done, total = counted
    if done == total:
        return True, f"{done} of {total} answered (revise them after M6)"
    return False, (f"{total - done} of {total} answers still to write: your own words under **Your answer:** "
                   "(graded; it locks no milestone)")


# --------------------------------------------------------------------------- the board's question

def pending(passed: dict[str, int], failed: dict[str, int], copilot_ran: bool = False) -> dict[str, tuple[str, str]]:
    """Milestones whose tests all pass but whose untestable part is not done:
    {milestone: (what is left, in a few words; how to do it, for the board)}.
    ``copilot_ran``: the live test (-m live) just ran the copilot with the learner's provider."""
    out = {}
    if passed.get("M5") and not failed.get("M5") and not copilot_ran:
        record = last_run()
        if record is None:
            out["M5"] = ("run the copilot once", RUN_ONCE)
        elif record.get("scripted"):
            out["M5"] = ("run the copilot once with a real model", SCRIPTED_ONLY)
    if passed.get("M6") and not failed.get("M6"):
        left, missing = placeholders(), unwritten()
        if left < 0 or missing is None:
            out["M6"] = ("write FAILURE_ANALYSIS.md", "FAILURE_ANALYSIS.md is missing")
        elif left or missing:
            said = [f"{left} placeholder{'s' * (left != 1)} (in _italics_) left"] if left else []
            if missing:
                shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
                said.append(f"{len(missing)} part{'s' * (len(missing) != 1)} without your own text or evidence "
                            f"({shown})")
            out["M6"] = ("write FAILURE_ANALYSIS.md", "FAILURE_ANALYSIS.md: " + "; ".join(said))
    return out
