"""UNDERSTANDING.md and FAILURE_ANALYSIS.md: what the learner wrote, told apart from the template.

A line counts as the learner's when it appears in no shipped version of the template (the
grader's copy and its git history), so a template that changed since the learner cloned still
reads as template. Evidence blocks are parsed the same way break_and_observe.py prints them, and
compared with a fresh run of the same scenario.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from grading import findings, history
from grading.workspace import LAB_ROOT

FACTUAL_ERRORS = (
    (re.compile(r"arguments?\W+(?:is|are|arrives?|comes?)\W+(?:already\W+)?(?:a\W+)?(?:python\W+)?dict", re.I),
     "says the arguments arrive as a dict (on the wire they are a JSON string)"),
)
SCENARIOS = ("runaway", "escape", "amnesia", "raw-arguments", "vague-tools")
CORE = ("runaway", "escape", "amnesia")
PARTS = ("Hypothesis", "What I changed", "Evidence", "Design decision that prevents it", "Production cost")
STEP_TOLERANCE = 0.2        # a pasted block's steps and tool calls may differ from a rerun by 20 % (at least 2)


def norm(line: str) -> str:
    return " ".join(line.split()).strip()


def template_lines(name: str) -> set:
    return {norm(line) for text in history.versions(name) for line in text.splitlines() if norm(line)}


def own_lines(lines, template: set) -> list:
    """The lines the learner wrote: not in any template, not a placeholder in _italics_."""
    out = []
    for line in lines:
        n = norm(line)
        if not n or n in template or n in ("---", "```", "```text", "```bash"):
            continue
        if re.fullmatch(r"[-*]?\s*_[^_].*_\s*", n) and n.strip("-* ") in template:
            continue
        out.append(line.rstrip())
    return out


def words(lines) -> int:
    return sum(len(re.findall(r"[\w'`.-]+", line)) for line in lines)


def sections(text: str, level: int) -> list:
    """[(title, [lines])] for headings of exactly ``level`` #'s (fenced code is not a heading)."""
    out, fenced = [], False
    for line in text.splitlines():
        if re.match(r"[ \t]{0,3}(```|~~~)", line):
            fenced = not fenced
        m = None if fenced else re.match(r"^(#{1,6})\s+(.*)", line)
        if m and len(m.group(1)) == level:
            out.append((m.group(2).strip(), []))
        elif m and len(m.group(1)) < level:
            out.append((None, []))
        elif out:
            out[-1][1].append(line)
    return [(t, ls) for t, ls in out if t is not None]


def excerpt(lines, limit: int = 400) -> str:
    text = " ".join(norm(line) for line in lines if norm(line))
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + " ..."


@dataclass
class Answer:
    key: str                  # "1".."7" or "StarcallOS"
    title: str
    answer: list = field(default_factory=list)
    after: list = field(default_factory=list)
    question: str = ""        # the question's own words (prompt and note), for checking the answer engages it
    lifted: list = field(default_factory=list)        # sentences found verbatim in the lesson
    errors: list = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return words(self.answer) >= 5

    def as_dict(self) -> dict:
        return {"key": self.key, "title": self.title, "answered": self.answered, "words": words(self.answer),
                "after_m6_words": words(self.after), "lifted_from_lesson": self.lifted,
                "factual_errors": self.errors, "excerpt": excerpt(self.answer), "after_m6_excerpt": excerpt(self.after, 250),
                "text": " ".join(norm(x) for x in self.answer), "after_text": " ".join(norm(x) for x in self.after),
                "question": self.question}


def _lesson_text() -> str:
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in (LAB_ROOT / "lesson").glob("*.md")]
    return norm(" ".join(texts)).lower()


def _lifted(lines, lesson: str) -> list:
    text = " ".join(norm(line) for line in lines)
    sentences = re.split(r"(?<=[.!?])\s+", text)
    return [s for s in sentences if len(s.split()) >= 10 and norm(s).lower().rstrip(".") in lesson][:3]


def _question_lines(lines, template: set) -> list:
    """The template's own words above **Your answer:** (the prompt and its note)."""
    out = []
    for line in lines:
        if norm(line) == "**Your answer:**":
            break
        if norm(line) in template:
            out.append(norm(line).lstrip("> ").strip("*_"))
    return out


def understanding(path: Path) -> dict:
    if not path.is_file():
        return {"exists": False, "answers": []}
    template = template_lines("UNDERSTANDING.md")
    lesson = _lesson_text()
    answers = []
    for title, lines in sections(path.read_text(encoding="utf-8", errors="replace"), 2):
        m = re.match(r"(\d+)\.", title)
        key = m.group(1) if m else ("StarcallOS" if "starcallos" in title.lower() else None)
        if key is None:
            continue
        body = "\n".join(lines)
        answer_part, _, after_part = body.partition("**After M6:**")
        answer_part = answer_part.split("**Your answer:**", 1)[-1]
        a = Answer(key, title, own_lines(answer_part.splitlines(), template), own_lines(after_part.splitlines(), template))
        a.question = " ".join([title] + _question_lines(lines, template))
        a.lifted = _lifted(a.answer + a.after, lesson)
        a.errors = [why for pattern, why in FACTUAL_ERRORS if pattern.search(" ".join(a.answer + a.after))]
        answers.append(a)
    return {"exists": True, "answers": [a.as_dict() for a in answers]}


# --------------------------------------------------------------------------- evidence blocks

def all_blocks(text: str) -> list:
    """(scenario name, {field: value}) for every fenced block (``` or ~~~, any length, any label)
    with a `scenario :` line, in order."""
    out = []
    for _, block in findings.fenced(text):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip():
                fields.setdefault(key.strip().lower(), value.strip())
        name = fields.get("scenario", "").split(":", 1)[0].strip().lower()
        if name:
            out.append((name, fields))
    return out


def own_run(block: dict) -> bool:
    return findings.own_block(block)


def parse_blocks(text: str) -> dict:
    """scenario name -> {field: value}: the first block of each scenario run on the learner's own code,
    else its first block (a `--simulate` one)."""
    out = {}
    for name, fields in all_blocks(text):
        if name not in out or own_run(fields) and not own_run(out[name]):
            out[name] = fields
    return out


def _number(value: str):
    m = re.search(r"\d[\d,]*", value or "")
    return int(m.group().replace(",", "")) if m else None


def compare_block(pasted: dict, fresh: dict) -> list:
    """(field, pasted, fresh, agrees) for the fields the rubric compares that both blocks hold (a
    field the learner left out, or the rerun did not print, proves nothing)."""
    rows = []
    for key in [k for k in ("steps", "tool calls") if pasted.get(k, "").strip() and fresh.get(k, "").strip()]:
        a, b = _number(pasted.get(key, "")), _number(fresh.get(key, ""))
        ok = a is not None and b is not None and abs(a - b) <= max(2, STEP_TOLERANCE * b)
        rows.append((key, pasted.get(key, "(absent)"), fresh.get(key, "?"), ok))
    for key in [k for k in ("ended", "leaked") if pasted.get(k, "").strip() and fresh.get(k, "").strip()]:
        a = pasted.get(key, "").split(":", 1)[0].strip().lower()
        b = fresh.get(key, "").split(":", 1)[0].strip().lower()
        rows.append((key, pasted.get(key, "(absent)")[:80], fresh.get(key, "?")[:80], bool(a) and a == b))
    return rows


def failure_analysis(path: Path, fresh_blocks: dict, fresh_eval: str) -> dict:
    if not path.is_file():
        return {"exists": False}
    template = template_lines("FAILURE_ANALYSIS.md")
    text = path.read_text(encoding="utf-8", errors="replace")
    out = {"exists": True, "breaks": {}, "evaluation": {}, "my_case": {}}
    for title, lines in sections(text, 2):
        lower = title.lower()
        subs = {_part(t): own_lines(ls, template) for t, ls in sections("\n".join(lines), 3)}
        raw_subs = {_part(t): "\n".join(ls) for t, ls in sections("\n".join(lines), 3)}
        scenario = next((s for s in SCENARIOS if lower.startswith("break") and s in lower), None)
        if scenario:
            blocks = parse_blocks(raw_subs.get("Evidence", ""))
            pasted = blocks.get(scenario)
            mine = [b for n, b in all_blocks(raw_subs.get("Evidence", "")) if n == scenario]
            flagged = findings.FLAGS.search(" ".join(own_lines((raw_subs.get("Evidence", "") + "\n"
                                                                 + raw_subs.get("Command", "")).splitlines(), template)))
            entry = {"parts": {p: words(subs.get(p, [])) for p in PARTS}, "evidence_block": pasted is not None,
                     "excerpts": {p: excerpt(subs.get(p, []), 200) for p in ("Hypothesis", "Design decision that prevents it")},
                     "prose": {p: prose(raw_subs.get(p, ""), template) for p in PARTS}, "pasted": pasted or {},
                     "blocks": mine[:4], "own_evidence": any(own_run(b) for b in mine),
                     "evidence_raw": raw_subs.get("Evidence", "")[:20000],
                     "flags": flagged.group(0) if flagged else ""}
            if pasted is not None:
                entry["pasted_ran"] = pasted.get("ran", "")
            # A run the learner says they made with their own flags is not a default rerun's twin.
            if pasted is not None and scenario in fresh_blocks and not flagged:
                entry["comparison"] = compare_block(pasted, fresh_blocks[scenario])
            filled = [p for p in PARTS if entry["parts"][p] or (p == "Evidence" and entry["evidence_block"])]
            entry["filled"] = filled
            entry["complete"] = len(filled) == len(PARTS)
            out["breaks"][scenario] = entry
        elif lower.startswith("evaluation"):
            table = subs.get("Component table", [])
            pasted_rows = _table_rows(table)
            fresh_rows = _table_rows(fresh_eval.splitlines())
            out["evaluation"] = {
                "table_words": words(table), "table_rows": len(pasted_rows),
                "rows_matching_fresh_run": len(pasted_rows & fresh_rows), "fresh_rows": len(fresh_rows),
                "differing_rows": sorted(pasted_rows - fresh_rows)[:5],
                "command_given": "evaluate.py" in "\n".join(table) or "evaluate.py" in raw_subs.get("Component table", ""),
                "interpretation_words": words(subs.get("What the numbers say", [])),
                "interpretation": excerpt(subs.get("What the numbers say", []), 500),
                "interpretation_text": prose(raw_subs.get("What the numbers say", ""), template),
                "table_text": raw_subs.get("Component table", "")[:20000],
            }
        elif "right evidence" in lower:
            mine = subs.get("My case", [])
            out["my_case"] = {"words": words(mine), "excerpt": excerpt(mine, 500), "text": " ".join(norm(x) for x in mine)}
    return out


def prose(text: str, template: set) -> str:
    """The learner's own sentences in a section: fenced blocks (pasted output, commands) left out."""
    return " ".join(norm(x) for x in own_lines(re.sub(r"(`{3,}|~{3,}).*?(\1|$)", "", text, flags=re.S).splitlines(), template))


def _part(title: str) -> str:
    """A sub-heading by its first word, so small rewordings of the template still match."""
    first = title.split()[0].lower() if title.split() else ""
    known = {p.split()[0].lower(): p for p in PARTS + ("Component table", "What the numbers say", "My case")}
    known["what"] = "What the numbers say" if "numbers" in title.lower() else "What I changed"
    return known.get(first, title)


def _table_rows(lines) -> set:
    """Rows of a component table, normalised; wall times dropped (they differ on every run)."""
    rows = set()
    for line in lines:
        cells = [c for c in re.split(r"\s{2,}|\|", line.strip()) if c.strip()]
        if len(cells) < 3 or set(line.strip()) <= set("-| :"):
            continue
        cells = [c.strip() for c in cells if not re.fullmatch(r"\d+(\.\d+)?s", c.strip())]
        if cells and cells[0] not in ("wall time",):
            rows.add(" | ".join(cells))
    return rows


# --------------------------------------------------------------------------- saved copilot runs

def saved_runs(sub: Path, limit: int = 200) -> list:
    """JSON files in the submission that look like `copilot.py --json` output or a saved transcript."""
    import json
    found = []
    for path in sorted(sub.rglob("*.json"))[:limit]:
        rel = path.relative_to(sub).as_posix()
        if rel.startswith(("code/tests/", "code/eval/", "code/fixture_repo/", "code/bench/")) or path.is_symlink():
            continue
        try:
            if path.stat().st_size > 5_000_000:
                continue
            data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "answer" not in data or "citations" not in data:
            continue
        cites = [c for c in data.get("citations") or [] if isinstance(c, dict)]
        calls = data.get("tool_calls") or []
        messages = data.get("messages") or []
        first_answer = next((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"
                             and not m.get("tool_calls")), None)
        first_call = next((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("tool_calls")), None)
        found.append({
            "path": rel, "model": str(data.get("model", ""))[:80], "termination": data.get("termination"),
            "question": str(data.get("question", ""))[:160], "tool_calls": len(calls) if isinstance(calls, list) else 0,
            "citations": len(cites), "grounded": sum(bool(c.get("grounded")) for c in cites),
            "has_transcript": bool(messages),
            "tools_before_answer": (first_call is not None and (first_answer is None or first_call < first_answer))
            if messages else (len(calls) > 0 if isinstance(calls, list) else False),
            "answer": str(data.get("answer", ""))[:300],
            **_checks_out(messages, sub),
        })
    return found


def _checks_out(messages, sub: Path) -> dict:
    """A saved run is the learner's own only if what its tools returned is what the files say:
    every read_file result's numbered lines are compared with that file in the submission."""
    from grading.prose import _file
    checked, wrong = 0, []
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) and m.get("role") == "tool" else None
        head = re.match(r"\[File: (\S+) ", content or "")
        if not head:
            continue
        path = _file(sub, head.group(1))
        real = path.read_text(encoding="utf-8", errors="replace").splitlines() if path else []
        for n, text in re.findall(r"^\s*(\d+)\| ?(.*)$", content, re.M)[:400]:
            checked += 1
            if not (0 < int(n) <= len(real)) or real[int(n) - 1].rstrip() != text.rstrip():
                wrong.append(f"{head.group(1)}:{n}")
    why = (f"{len(wrong)} of {checked} read_file lines differ from the files ({', '.join(wrong[:3])})" if wrong
           else f"{checked} read_file lines match the files" if checked else "no read_file result to check it against")
    return {"checks_out": checked > 0 and not wrong, "check_note": why}

