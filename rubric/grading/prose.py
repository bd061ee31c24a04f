"""The learner's prose checked against their own evidence and code, never counted.

review() runs every kind of finding of grading/findings.py on the parts it applies to (each kind,
its proof and its words for the learner live there) and numbers them F1, F2... for the report and
the CSV's drop_findings. Specificity, which draws a level when nothing is proven against the
write-up: the learner's own `file:line` references that check out, names from their code, their own
numbers, and an answer that shares the words of the question it answers rather than another's.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from grading import findings

LEARNER_MODULES = ("tools.py", "agent_loop.py")
STOP = set("""about above after again also an and any are because been before being below both but by can
could does doing down each few for from further had has have having here how into its itself just more most
must not now off once only other our out over own same should some such than that the their them then there
these they this those through under until very was were what when where which while who why will with would
you your yours""".split())
MAX_TEXT = 20_000       # characters of one part read; a submission's prose is untrusted input
MAX_CLAIMS = findings.MAX_CLAIMS   # file:line claims checked per part
MAX_NAMES = 400


# --------------------------------------------------------------------------- the learner's code

def code_names(code_dir: Path) -> set:
    """Names a learner would cite: functions, names and attributes in their two modules, 4+ letters,
    with an underscore or a capital inside (``max_steps``, ``TOOL_FUNCTIONS``, ``assistant_turn``)."""
    names = set()
    for module in LEARNER_MODULES:
        try:
            tree = ast.parse((code_dir / module).read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            name = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None)
            if isinstance(name, str) and len(name) >= 4 and ("_" in name.strip("_") or name.isupper()):
                names.add(name)
    return names


def _file(sub: Path, rel: str):
    """The submission's file a prose or transcript names, never one outside it (names are untrusted)."""
    try:
        top = sub.resolve()
    except (OSError, RuntimeError):
        return None
    for base in (sub / "code", sub, sub / "code" / "fixture_repo"):
        try:
            candidate = (base / rel).resolve()
            if candidate.is_relative_to(top) and candidate.is_file() and candidate.stat().st_size < 2_000_000:
                return candidate
        except (OSError, RuntimeError, ValueError):
            continue
    return None


def file_line_claims(text: str, sub: Path) -> list:
    """[{claim, sentence, line, ok}] for each `name.py:N` or `name.py:A-B` in prose: ok True when a
    name of the sentence is in those lines, False when the code it names in backticks is nowhere in
    the file, None when it cannot be checked (findings.line_claims says how)."""
    return findings.line_claims(text, lambda rel: _file(sub, rel))[0]


def specific(text: str, names: set) -> list:
    """What makes an answer the learner's own: their code's names, numbers, file references."""
    found = sorted({n for n in names if re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text)})[:6]
    found += sorted(set(re.findall(r"\b[\w/-]+\.py(?::\d+)?\b", text)))[:4]
    found += sorted(set(re.findall(r"(?<![\w.])\d[\d,./]*(?![\w])", text)))[:4]
    return found


def engages(answer: str, question: str, others: list) -> bool:
    """The answer shares more of its own question's words than of any other question's."""
    def bag(t):
        return {w for w in re.findall(r"[a-z_]{4,}", t.lower()) if w not in STOP}
    mine = bag(answer)
    own = len(mine & bag(question))
    return own >= 2 and all(own >= len(mine & bag(q)) for q in others)


def repeated(texts: dict, min_words: int = 8) -> dict:
    """sentence -> the sections it appears in, for sentences of 8+ words found in two or more."""
    return findings.repeated_sentences(texts, min_words)


# --------------------------------------------------------------------------- against the evidence

def against_block(scenario: str, text: str, pasted: dict, fresh: dict, reading: str = "") -> list:
    """Contradictions (as text) between a break's Evidence prose (``reading``, else ``text``) and its
    pasted block or the fresh one (findings.count_claims, leak_claims, ending_claims)."""
    evidence = reading or text
    blocks = [pasted] if pasted else []
    found = findings.count_claims(scenario, evidence, blocks or [fresh or {}], fresh)
    found += findings.leak_claims(scenario, evidence, blocks or [fresh or {}])
    found += findings.ending_claims(scenario, evidence, blocks or [fresh or {}])
    return [f.instructor for f in found]


def _table(text: str) -> dict:
    return findings.table(text)


def evaluation_reading(text: str, table_text: str) -> list:
    """The reading says a component is the same for both runs (or separates them) where the pasted
    table says otherwise (findings.evaluation_claims), as text."""
    return [f.instructor for f in findings.evaluation_claims(text, table_text)]


def my_case_label(text: str) -> list:
    return [f.instructor for f in findings.my_case_label(text)]


# --------------------------------------------------------------------------- one submission

def review(sub: Path, understanding: dict, failure: dict, fresh_blocks: dict) -> dict:
    """Findings (each a findings.Finding as a dict, numbered F1, F2...) and specificity per part.
    The *_findings lists keep the text of the proven ones, per document part, for the report."""
    names = set(sorted(code_names(sub / "code"))[:MAX_NAMES])
    source = _lesson_and_templates()
    resolve = lambda rel: _file(sub, rel)  # noqa: E731
    out = {"answers": {}, "breaks": {}, "evaluation_specific": []}
    found: list = []
    answers = [a for a in understanding.get("answers", []) if a.get("answered")]
    for a in answers:
        where = "StarcallOS" if a["key"] == "StarcallOS" else f"Q{a['key']}"
        text = f"{a['text']} {a['after_text']}".strip()[:MAX_TEXT]
        others = [b["question"] for b in understanding.get("answers", []) if b["key"] != a["key"]]
        claims, notes = findings.line_claims(text, resolve)
        out["answers"][a["key"]] = {"specific": specific(text, names), "engages": engages(text, a["question"], others),
                                    "claims": claims}
        for f in notes:
            f.where = where
        found += notes + _after_m6_claims(where, a.get("after_text", "")[:MAX_TEXT], failure.get("breaks", {}))
    for f in findings.repeated({a["key"]: a["text"][:MAX_TEXT] for a in answers}, "UNDERSTANDING.md"):
        f.where = "StarcallOS" if f.instructor.split("(", 1)[-1].startswith("StarcallOS") else "UNDERSTANDING.md"
        f.instructor = f.instructor.replace("sections (", "answers (", 1)
        found.append(f)
    texts = {}
    for scenario, b in failure.get("breaks", {}).items():
        parts = {p: t[:MAX_TEXT] for p, t in b.get("prose", {}).items()}
        text = " ".join(parts.values())
        evidence = parts.get("Evidence", "")
        blocks = b.get("blocks") or ([b["pasted"]] if b.get("pasted") else [])
        here = findings.count_claims(scenario, evidence, blocks, None if b.get("flags") else fresh_blocks.get(scenario))
        here += findings.leak_claims(scenario, evidence, blocks)
        here += findings.ending_claims(scenario, evidence, blocks)
        claims, notes = [], []
        for part, t in parts.items():
            c, n = findings.line_claims(t, resolve)
            claims, notes = claims + c, notes + n
        for f in notes:
            f.where = f"{scenario} write-up"
        here += notes + findings.unparsed_blocks(scenario, b.get("evidence_raw", "")) \
            + findings.simulated_only(scenario, blocks)
        for part, t in parts.items():
            here += findings.lifted(t, source, f"{scenario} {part}")
        out["breaks"][scenario] = {"specific": specific(text, names), "findings": [f.instructor for f in here if f.caps],
                                   "claims_ok": [c["claim"] for c in claims if c["ok"]]}
        found += here
        texts.update({f"{scenario} {p.split()[0].lower()}": t for p, t in parts.items()})
    found += findings.repeated(texts, "FAILURE_ANALYSIS.md")
    e = failure.get("evaluation") or {}
    if e:
        said = e.get("interpretation_text", "")[:MAX_TEXT]
        found += findings.evaluation_claims(said, e.get("table_text", "")[:MAX_TEXT])
        found += findings.lifted(said, source, "What the numbers say")
        table = _table(e.get("table_text", "")[:MAX_TEXT])
        said = said.lower()
        out["evaluation_specific"] = [c for c in table if c in said] + \
            [v for c in table for v in table[c] if re.search(rf"(?<![\w/]){re.escape(v)}(?![\w/])", said) and "/" in v][:6]
    mine = (failure.get("my_case") or {}).get("text", "")[:MAX_TEXT]
    found += findings.my_case_label(mine) + findings.lifted(mine, source, "My case")
    star = next((a for a in answers if a["key"] == "StarcallOS"), None)
    if star:  # the other answers: documents.understanding checks them against the lesson
        found += findings.lifted(f"{star['text']} {star['after_text']}"[:MAX_TEXT], source, "StarcallOS")
    findings.number(found)
    out["findings"] = [f.as_dict() for f in found]
    proven = [f for f in found if f.caps]
    out["understanding_findings"] = [f.instructor for f in proven if f.where.startswith(("Q", "UNDERSTANDING"))
                                     and f.kind != "lifted"]
    out["failure_findings"] = [f.instructor for f in proven if f.where not in ("Evaluation", "What the numbers say",
                                                                                "My case", "StarcallOS")
                               and not f.where.startswith(("Q", "UNDERSTANDING"))]
    out["evaluation_findings"] = [f.instructor for f in proven if f.where in ("Evaluation", "What the numbers say")]
    out["my_case_findings"] = [f.instructor for f in proven if f.where == "My case"]
    return out


SCENARIO_NAMES = re.compile(r"\b(runaway|escape|amnesia|raw-arguments|vague-tools)\b", re.I)


def _after_m6_claims(where: str, text: str, breaks: dict) -> list:
    """An After M6 note that says what one break showed, against that break's own pasted blocks:
    the text from one scenario's name to the next is checked like that break's Evidence part."""
    out = []
    marks = list(SCENARIO_NAMES.finditer(text))
    for m, nxt in zip(marks, marks[1:] + [None]):
        b = breaks.get(m.group(1).lower()) or {}
        blocks = [x for x in b.get("blocks") or ([b["pasted"]] if b.get("pasted") else []) if x]
        if not blocks:
            continue
        piece = text[m.start():nxt.start() if nxt else len(text)]
        here = findings.count_claims(m.group(1).lower(), piece, blocks, None)[:1] + \
            findings.leak_claims(m.group(1).lower(), piece, blocks)
        for f in here:
            f.where = where
            f.learner = f.learner.replace(f"In your {m.group(1).lower()} write-up",
                                          f"In your After M6 note to question {where.lstrip('Q')}, about the "
                                          f"{m.group(1).lower()} break,")
        out += here
    return out


@functools.lru_cache(maxsize=1)
def _lesson_and_templates() -> str:
    """The lesson and every shipped version of the two templates, as plain lower-case words."""
    from grading import history
    from grading.workspace import LAB_ROOT
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((LAB_ROOT / "lesson").glob("*.md"))]
    for name in ("UNDERSTANDING.md", "FAILURE_ANALYSIS.md"):
        texts += list(history.versions(name))
    return " ".join(findings._words(t) for t in texts)
