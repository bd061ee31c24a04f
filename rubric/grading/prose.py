"""The learner's prose checked against their own evidence and code, never counted.

Deterministic cross-checks (each finding quotes the sentence it rests on):
  - numbers of calls stated beside a pasted evidence block, against that block and the fresh run;
  - "nothing leaked" beside a block that says `leaked: YES`;
  - `file.py:N` claims against the text of line N in the submission;
  - the evaluation reading against the pasted component table;
  - the "My case" label against the known scripted case (its bad run is a reasoning failure);
  - sentences repeated across sections (boilerplate).
Specificity, which draws a level when nothing contradicts: the learner's own `file:line`
references that check out, names from their code, their own numbers, and an answer that shares
the words of the question it answers rather than another's.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

LEARNER_MODULES = ("tools.py", "agent_loop.py")
STOP = set("""about above after again also an and any are because been before being below both but by can
could does doing down each few for from further had has have having here how into its itself just more most
must not now off once only other our out over own same should some such than that the their them then there
these they this those through under until very was were what when where which while who why will with would
you your yours""".split())
MAX_TEXT = 20_000       # characters of one part read; a submission's prose is untrusted input
MAX_CLAIMS = 40         # file:line claims checked per part
MAX_NAMES = 400


def sentences(text: str) -> list:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(`\-])", text) if s.strip()]


def _sentence_with(text: str, needle: str) -> str:
    return next((s for s in sentences(text) if needle in s), needle)[:300]


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


def _enclosing(source: str, number: int) -> str:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return ""
    return next((n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                 and n.lineno <= number <= (n.end_lineno or n.lineno)), "")


def file_line_claims(text: str, sub: Path) -> list:
    """[{claim, sentence, line, ok}] for each `name.py:N` in prose: ok when line N exists and holds
    (or sits in the function named) one of the code names of the sentence; None when unverifiable."""
    out = []
    for m in itertools.islice(re.finditer(r"\b([\w/.-]+\.py):(\d+)(?:-\d+)?\b", text), MAX_CLAIMS):
        rel, number = m.group(1), int(m.group(2))
        sentence = _sentence_with(text, m.group(0))
        path = _file(sub, rel)
        if path is None:
            out.append({"claim": m.group(0), "sentence": sentence, "line": "", "ok": None})
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        lines = source.splitlines()
        line = lines[number - 1].strip() if 0 < number <= len(lines) else ""
        named = {w for w in re.findall(r"[A-Za-z_][\w.]*", sentence.replace(m.group(0), ""))
                 if "_" in w.strip("_") or "." in w.strip(".") or w.isupper() and len(w) > 3}
        named |= {w.split(".")[-1] for w in named} | {w.rstrip("()") for w in re.findall(r"`([^`]+)`", sentence)}
        inside = _enclosing(source, number) if path.suffix == ".py" else ""
        ok = bool(line) and (not named or any(w and w in line for w in named) or inside in named)
        out.append({"claim": m.group(0), "sentence": sentence, "line": line[:160], "ok": ok})
    return out


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
    seen: dict[str, list] = {}
    for key, text in texts.items():
        for s in sentences(text):
            n = " ".join(re.findall(r"\w+", s.lower()))
            if len(n.split()) >= min_words and key not in seen.setdefault(n, []):
                seen[n].append(key)
    return {n: keys for n, keys in seen.items() if len(keys) >= 2}


# --------------------------------------------------------------------------- against the evidence

def _calls(value: str):
    m = re.search(r"(\d[\d,]*)", value or "")
    return int(m.group(1).replace(",", "")) if m else None


def against_block(scenario: str, text: str, pasted: dict, fresh: dict, reading: str = "") -> list:
    """Contradictions between a break's prose and its pasted (or the fresh) evidence block;
    ``reading`` (the sentences beside the block) is also checked for how the run ended."""
    found = []
    block = pasted or fresh or {}
    if not block:
        return found
    known = {n for f in (pasted, fresh) for v in (f or {}).values() for n in re.findall(r"\d[\d,]*", v)}
    known = {k.replace(",", "") for k in known}
    for m in re.finditer(r"(\d[\d,]*)\s+(?:model\s+)?(calls|steps|tool calls)\b", text):
        if m.group(1).replace(",", "") not in known:
            found.append(f"{scenario}: says {m.group(0)!r}; the evidence block says steps "
                         f"{block.get('steps', '?')!r}, tool calls {block.get('tool calls', '?')!r}: "
                         + _sentence_with(text, m.group(0)))
    leaked = block.get("leaked", "").strip().lower()
    no_leak = re.search(r"\b(nothing|no file|no secret|none of them)\b[^.]{0,30}\b(leak|escap|got out|got through)"
                        r"|\b(did not|didn't|never|could not)\s+(leak|escape|get out|get through)", text, re.I)
    if no_leak and leaked.startswith("yes"):
        found.append(f"{scenario}: says {no_leak.group(0)!r}; the evidence block says leaked "
                     f"{block.get('leaked')!r}: " + _sentence_with(text, no_leak.group(0)))
    ended = block.get("ended", "").strip().lower()
    for claim, kind in ((r"\b(stopped|ended|returned|stops)\b[^.]{0,40}\b(MAX_STEPS_REACHED|at max_steps|its own cap)", "max_steps"),
                        (r"\b(harness ceiling|never stopped by itself|only the harness)", "harness ceiling")):
        said = re.search(claim, reading, re.I)
        if said and ended and not ended.startswith(kind):
            found.append(f"{scenario}: the reading says {said.group(0)!r}; the evidence block says ended "
                         f"{block.get('ended', '')[:80]!r}: " + _sentence_with(reading, said.group(0)))
    return found


def _table(text: str) -> dict:
    """component -> (scripted good, scripted bad), from a pasted evaluate.py summary."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"\s{2,}|\|", line.strip()) if c.strip()]
        if len(cells) == 3 and re.match(r"[a-z]", cells[0]) and cells[0] != "component":
            out[cells[0]] = (cells[1], cells[2])
    return out


def evaluation_reading(text: str, table_text: str) -> list:
    """The reading says a component is the same for both runs (or separates them) where the
    pasted table says otherwise."""
    found, table = [], _table(table_text)
    for s in sentences(text):
        low = s.lower()
        for component, (good, bad) in table.items():
            if component not in low or component in ("wall time",):
                continue
            same = re.search(rf"{re.escape(component)}[^.]*\b(is the same|are the same|identical|does not differ|"
                             r"cannot separate|no difference)", low)
            separates = re.search(rf"{re.escape(component)}[^.]*\b(separates|is the difference|differs)", low) \
                and not same
            if same and good != bad:
                found.append(f"says {component} is the same for both runs; the pasted table says {good} against {bad}: {s[:300]}")
            elif separates and good == bad:
                found.append(f"says {component} separates the runs; the pasted table says {good} for both: {s[:300]}")
    return found


SCRIPTED_CASE = re.compile(r"shop-total-bug|order_total|scripted bad", re.I)


def my_case_label(text: str) -> list:
    """The scripted bad run (shop-total-bug) read both files and cited them: a reasoning failure."""
    plain = re.sub(r"\bnot\s+a\s+(boundary|reasoning)\s+failure", "", text, flags=re.I)
    labels = re.findall(r"\b(boundary|reasoning)\s+failure", plain, re.I)
    if SCRIPTED_CASE.search(text) and "--model" not in text and labels and labels[0].lower() == "boundary":
        return ["calls the scripted shop-total-bug run a boundary failure; every boundary held in it and both "
                "files were read (a reasoning failure): " + _sentence_with(text, "boundary failure")]
    return []


# --------------------------------------------------------------------------- one submission

def review(sub: Path, understanding: dict, failure: dict, fresh_blocks: dict) -> dict:
    """Findings (contradictions, boilerplate) and specificity, per document part."""
    names = set(sorted(code_names(sub / "code"))[:MAX_NAMES])
    out = {"answers": {}, "understanding_findings": [], "breaks": {}, "failure_findings": [],
           "evaluation_findings": [], "evaluation_specific": [], "my_case_findings": []}
    answers = [a for a in understanding.get("answers", []) if a.get("answered")]
    for a in answers:
        text = f"{a['text']} {a['after_text']}".strip()[:MAX_TEXT]
        others = [b["question"] for b in understanding.get("answers", []) if b["key"] != a["key"]]
        claims = file_line_claims(text, sub)
        out["answers"][a["key"]] = {"specific": specific(text, names), "engages": engages(text, a["question"], others),
                                    "claims": claims}
        out["understanding_findings"] += [f"Q{a['key']}: {c['claim']} is line {c['line']!r}, not what the sentence "
                                          f"says: {c['sentence']}" for c in claims if c["ok"] is False]
    for sentence, keys in repeated({a["key"]: a["text"][:MAX_TEXT] for a in answers}).items():
        out["understanding_findings"].append(f"the same sentence in answers {', '.join(keys)}: {sentence[:200]}")
    texts = {}
    for scenario, b in failure.get("breaks", {}).items():
        parts = {p: t[:MAX_TEXT] for p, t in b.get("prose", {}).items()}
        text = " ".join(parts.values())
        claims = file_line_claims(text, sub)
        found = against_block(scenario, text, b.get("pasted"), fresh_blocks.get(scenario), parts.get("Evidence", ""))
        found += [f"{scenario}: {c['claim']} is line {c['line']!r}, not what the sentence says: {c['sentence']}"
                  for c in claims if c["ok"] is False]
        out["breaks"][scenario] = {"specific": specific(text, names), "findings": found,
                                   "claims_ok": [c["claim"] for c in claims if c["ok"]]}
        out["failure_findings"] += found
        texts.update({f"{scenario} {p.split()[0].lower()}": t for p, t in parts.items()})
    for sentence, keys in repeated(texts).items():
        out["failure_findings"].append(f"the same sentence in {len(keys)} sections ({', '.join(keys[:4])}): {sentence[:200]}")
    e = failure.get("evaluation") or {}
    if e:
        said = e.get("interpretation_text", "")[:MAX_TEXT]
        out["evaluation_findings"] = evaluation_reading(said, e.get("table_text", "")[:MAX_TEXT])
        table = _table(e.get("table_text", "")[:MAX_TEXT])
        said = said.lower()
        out["evaluation_specific"] = [c for c in table if c in said] + \
            [v for c in table for v in table[c] if re.search(rf"(?<![\w/]){re.escape(v)}(?![\w/])", said) and "/" in v][:6]
    out["my_case_findings"] = my_case_label((failure.get("my_case") or {}).get("text", "")[:MAX_TEXT])
    return out
