"""Findings on a learner's write-up: each kind in one place, with its proof and its words for the learner.

A finding is proven or it is not made. Each kind below says what proves it; where the proof is
missing (a line that shares no name with the sentence, a run made with other flags) the check
gives a note for the instructor (``proven`` False: a READ question, never a cap), not a finding.
The honest write-ups in rubric/checks/honest/ must produce no proven finding of any kind
(rubric/checks/test_findings.py), and the true cases there must still be caught.

Not claims, never checked: hypotheses and predictions (the Hypothesis part, "I predict", "I expect",
"I guessed", conditionals), projections and counterfactual runs ("would", "per day", "with the cap
in place", the block's own `projection` line quoted), the templates' own labels, and sentences
about another metric than the one a number is compared with.

    KINDS                           kind -> Kind(title, proof, criterion, caps)
    count_claims, leak_claims,      a break's Evidence prose against its pasted blocks and a rerun
    ending_claims
    line_claims                     `file.py:N` or `file.py:A-B` against those lines of the submission
    evaluation_claims               the evaluation reading against its pasted table
    my_case_label                   the "My case" label against the scripted shop-total-bug case
    repeated_sentences, lifted      boilerplate across sections; sentences verbatim from the lesson
    unparsed_blocks                 fenced blocks in an Evidence part the grader cannot read
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Kind:
    title: str
    proof: str          # what makes it true, in one sentence (shown to the instructor)
    caps: bool          # a proven finding of this kind caps its criterion at Developing


KINDS = {
    "count": Kind("a number of calls the evidence does not show",
                  "the Evidence part states, as what happened, a count of calls or steps that is in no field of the "
                  "pasted block and not the fresh run's (within the tolerance its hedge allows)", True),
    "leak": Kind("'nothing leaked' beside a block that says it leaked",
                 "the Evidence part says nothing got out while its own pasted block says leaked: YES", True),
    "ending": Kind("an ending the evidence does not show",
                   "the Evidence part says how the run ended, and the pasted block's `ended` line says otherwise", True),
    "line": Kind("a file:line that does not hold what the sentence names",
                 "the code the sentence names (in backticks) is nowhere in the function that holds the cited lines, "
                 "nor anywhere in that file", False),
    "line_unchecked": Kind("a file:line the grader could not check",
                           "the cited lines exist but share no name with the sentence (or the file is not in the "
                           "submission): read it", False),
    "evaluation": Kind("a reading its own table contradicts",
                       "a clause names one component of the pasted table and calls it the same for both runs (or "
                       "separating them) where the table's two columns say otherwise", True),
    "my_case": Kind("the scripted bad run called a boundary failure",
                    "'My case' is the scripted shop-total-bug run, where every limit held and both files were read, "
                    "and the learner's own label (not the template's) calls it a boundary failure", True),
    "repeated": Kind("the same sentence in several sections",
                     "a sentence of 8 or more words appears word for word in two or more sections", True),
    "lifted": Kind("sentences copied from the lesson or the template",
                   "a sentence of 10 or more words appears word for word (case and punctuation aside) in lesson/ or "
                   "in the shipped template (no Exemplary on C5-C7; UNDERSTANDING's answers: see C4)", False),
    "unparsed": Kind("an evidence block the grader could not read",
                     "a fenced block in an Evidence part has no `scenario : name` line the grader can parse", False),
    "simulated": Kind("evidence from the simulated break on the reference only",
                      "every evidence block of the break says `ran: simulated break on reference`", False),
}


@dataclass
class Finding:
    kind: str
    where: str                 # "Q3", "runaway Evidence", "Evaluation", "My case", ...
    instructor: str            # what the grader saw, with the quote it rests on
    learner: str               # plain words for the learner: what to look at, no rule names
    quote: str = ""
    proven: bool = True        # False: a question for the instructor (READ), never a cap
    id: str = ""               # F1, F2... per submission, assigned by number()

    @property
    def caps(self) -> bool:
        return self.proven and KINDS[self.kind].caps

    def as_dict(self) -> dict:
        return {**asdict(self), "caps": self.caps, "title": KINDS[self.kind].title, "criterion": criterion_of(self.where)}


def criterion_of(where: str) -> int:
    """The rubric criterion a finding counts for, from the part of the write-up it is in."""
    if where == "StarcallOS":
        return 7
    if where in ("Evaluation", "What the numbers say"):
        return 6
    if where.startswith("Q") or where == "UNDERSTANDING.md":
        return 4
    return 5


def number(findings: list) -> list:
    for i, f in enumerate(findings, 1):
        f.id = f"F{i}"
    return findings


# --------------------------------------------------------------------------- sentences that claim

def sentences(text: str) -> list:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(`\-\"'*_])", text) if s.strip()]


def sentence_with(text: str, needle: str) -> str:
    return next((s for s in sentences(text) if needle in s), needle)[:300]


# Sentences that predict, project or imagine another run: never checked against the block.
NOT_A_CLAIM = re.compile(
    r"\b(predict\w*|prediction|hypothes\w+|expect\w*|guess\w*|i think|i thought|i assumed?|assum\w+|would|will|"
    r"might|may|should|could|estimate\w*|projection|projected|if|unless|per (?:day|month|hour|user|question)|"
    r"a (?:day|month|week)|with (?:the|my|its|a) (?:cap|check|sandbox|fix|limit)|with it in place|in place|unbroken|"
    r"restored|once fixed|after the fix|before the break|normally|default run|the fix)\b|~", re.I)
HEDGE = re.compile(r"\b(about|around|roughly|approximately|approx\.?|nearly|almost|some|circa|close to|on the order of|"
                   r"more or less)\s*$|~\s*$", re.I)
BOUND = re.compile(r"\b(over|more than|at least|above|under|fewer than|less than|at most|up to|below)\s*$", re.I)
WORD_NUMBERS = {"a dozen": 12, "dozen": 12, "a hundred": 100, "hundred": 100, "a thousand": 1000, "dozens": 24,
                "hundreds": 200, "thousands": 2000}
PART = re.compile(r"\b(first|last|within|every|each|per|next|another|other|extra|those|these|the same)\s*$", re.I)
FLAGS = re.compile(r"--(max-calls|max-tokens|max-steps|model)\b(?:[= ]+(\d+))?|\bmax_steps\s*=\s*(\d+)")


def claims_in(text: str) -> list:
    """The sentences of ``text`` that state what happened (predictions and projections left out)."""
    return [s for s in sentences(text) if not NOT_A_CLAIM.search(s)]


def _value(token: str) -> float | None:
    t = token.lower().replace(",", "").strip()
    if t in WORD_NUMBERS:
        return float(WORD_NUMBERS[t])
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([km]?)", t)
    if not m:
        return None
    return float(m.group(1)) * {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2)]


def block_numbers(blocks) -> list:
    """Every number in every field of every block given (pasted and fresh)."""
    out = []
    for b in blocks:
        for v in (b or {}).values():
            out += [x for x in (_value(n) for n in re.findall(r"\d[\d,]*(?:\.\d+)?\s*[km]?\b", str(v), re.I)) if x is not None]
    return out


def _agrees(value: float, known: list, hedged: bool, bound: str) -> bool:
    if bound:
        low = bound.lower()
        above = low in ("over", "more than", "at least", "above")
        return any(k >= value if above else k <= value for k in known)
    tolerance = 0.25 if hedged else 0.0
    return any(abs(value - k) <= max(tolerance * max(k, value), 0.5 if not hedged else 1) for k in known)


COUNT = re.compile(r"(?<![\w.$])(\d[\d,]*(?:\.\d+)?\s*[kK]?|a dozen|dozens|hundreds|thousands)\s+"
                   r"(?:more\s+|model\s+|tool\s+|api\s+|llm\s+)?(calls?|steps?|tool calls|requests|turns)\b", re.I)


def count_claims(scenario: str, evidence: str, pasted: list, fresh: dict | None) -> list:
    """Counts of calls stated as what happened in a break's Evidence part, against every field of its
    pasted blocks and the fresh rerun. A learner who says they ran with their own flags (`--max-calls
    300`) is compared with their own block only."""
    blocks = [b for b in pasted if b]
    flagged = bool(FLAGS.search(evidence))
    known = block_numbers(blocks + ([] if flagged or not fresh else [fresh]))
    if not known:
        return []
    out = []
    for s in claims_in(evidence):
        for m in COUNT.finditer(s):
            value = _value(m.group(1))
            before = s[:m.start()]
            hedged, bound = bool(HEDGE.search(before)) or "k" in m.group(1).lower() or not m.group(1)[0].isdigit(), \
                (BOUND.search(before).group(1) if BOUND.search(before) else "")
            if value is None or _agrees(value, known, hedged, bound) or PART.search(before):
                continue
            b = blocks[0] if blocks else fresh or {}
            out.append(Finding(
                "count", f"{scenario} Evidence",
                f"{scenario}: says {m.group(0)!r}; the evidence block says steps {b.get('steps', '?')!r}, tool calls "
                f"{b.get('tool calls', '?')!r}: {s[:300]}",
                f"In your {scenario} write-up you say {m.group(0)!r}, but the evidence block you pasted shows "
                f"{b.get('steps', '?')}. Look at the block again and say what it shows.", s[:300]))
            break
    return out


# The whole run's outcome only: "the symlink ones did not get out" or "nothing leaked through .env" is a part.
NO_LEAK = re.compile(r"\b(nothing|no file|no secret|none of them|no probes?)\b[^.]{0,30}\b(leak|escap|got out|got through)\w*"
                     r"|\b(it|the run|the sentinel|the agent|the model|my run|my code)\s+(did not|didn't|never|could not|"
                     r"couldn't)\s+(leak|escape|get out|get through)", re.I)


def leak_claims(scenario: str, evidence: str, pasted: list) -> list:
    """'Nothing leaked' stated as what happened, beside a pasted block of the same run that says leaked: YES."""
    leaked = [b for b in pasted if b and str(b.get("leaked", "")).strip().lower().startswith("yes")]
    if not leaked:
        return []
    for s in claims_in(evidence):
        said = NO_LEAK.search(s)
        partial = said and (re.match(r"\s*(all|every|each|both|\d|through|via|from|by|into|in|out of)\b", s[said.end():], re.I)
                            or re.search(r"\b\d+\s+(?:of\s+\d+\s+)?(?:leaks?|leaked|got out|got through|escaped)\b", s, re.I))
        if said and not partial and not re.search(r"\b(without|when|had|than)\b", s[:said.start()], re.I):
            return [Finding("leak", f"{scenario} Evidence",
                            f"{scenario}: says {said.group(0)!r}; the evidence block says leaked "
                            f"{leaked[0].get('leaked')!r}: {s[:300]}",
                            f"In your {scenario} write-up you say {said.group(0)!r}, but your own evidence block says "
                            f"leaked: {str(leaked[0].get('leaked'))[:80]}. Which is right?", s[:300])]
    return []


ENDINGS = ((r"\b(stopped|ended|returned|stops)\b[^.]{0,40}\b(MAX_STEPS_REACHED|at max_steps|its own cap)", "max_steps"),
           (r"\b(harness ceiling|never stopped by itself|only the harness)", "harness ceiling"))


def ending_claims(scenario: str, evidence: str, pasted: list) -> list:
    """How the run ended, stated in the Evidence part, against the pasted block's `ended` line."""
    ended = next((str(b.get("ended", "")) for b in pasted if b and b.get("ended")), "")
    if not ended:
        return []
    for s in claims_in(evidence):
        for claim, kind in ENDINGS:
            said = re.search(claim, s, re.I)
            if said and not ended.strip().lower().startswith(kind):
                return [Finding("ending", f"{scenario} Evidence",
                                f"{scenario}: the reading says {said.group(0)!r}; the evidence block says ended "
                                f"{ended[:80]!r}: {s[:300]}",
                                f"In your {scenario} write-up you say {said.group(0)!r}, but your evidence block says "
                                f"it ended with {ended[:80]!r}.", s[:300])]
    return []


# --------------------------------------------------------------------------- file:line claims

LINE_CLAIM = re.compile(r"\b([\w/.-]+\.py):(\d+)(?:\s*[-–]\s*(\d+))?\b")
MAX_CLAIMS = 40


def _defined(source: str):
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _code_text(tree, source: str, number: int) -> str:
    """The code (docstrings and comments aside) of the function or class holding line ``number``."""
    if tree is None:
        return ""
    inner = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.lineno <= number <= (n.end_lineno or n.lineno)]
    node = min(inner, key=lambda n: (n.end_lineno or n.lineno) - n.lineno) if inner else None
    if node is None:
        return ""
    try:
        body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(getattr(b, "value", None), ast.Constant))]
        return "\n".join(ast.unparse(b) for b in body)
    except (ValueError, RecursionError, AttributeError):
        return ""


def _named(sentence: str) -> set:
    """Code the sentence names: backticked spans and dotted or snake_case identifiers."""
    spans = re.findall(r"`([^`]{1,120})`", sentence)
    names = set()
    for span in spans:
        names |= {w for w in re.findall(r"[A-Za-z_][\w.]*", span) if len(w) >= 3}
    bare = re.sub(r"`[^`]*`", " ", sentence)
    names |= {w.rstrip(".") for w in re.findall(r"[A-Za-z_][\w.]*\(?", bare)
              if ("_" in w.strip("_(") or "." in w.strip(".(")) and not re.search(r"\.(py|md|json|txt)$", w.rstrip("(."))}
    return {n.rstrip("(") for n in names if n and not n.endswith(".py")}


def line_claims(text: str, resolve) -> tuple:
    """([check dicts], [findings]) for each `file.py:N` or `file.py:A-B`. ``resolve(rel)`` gives the
    submission's file or None. The whole range (and 2 lines either side, for an edit that moved it)
    is read; the claim checks out when a name of the sentence is there. A claim whose lines share no
    name with the sentence is only a note; it is false only when the code the sentence names in
    backticks is nowhere in the file's code at all (the line exists, the name does not)."""
    checks, found = [], []
    for m in itertools.islice(LINE_CLAIM.finditer(text), MAX_CLAIMS):
        rel, start = m.group(1), int(m.group(2))
        end = max(start, int(m.group(3))) if m.group(3) else start
        end = min(end, start + 200)
        sentence = sentence_with(text, m.group(0))
        path = resolve(rel)
        if path is None:
            checks.append({"claim": m.group(0), "sentence": sentence, "line": "", "ok": None})
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        lines = source.splitlines()
        shown = "\n".join(x.strip() for x in lines[max(start - 1, 0):end])
        window = "\n".join(lines[max(start - 3, 0):end + 2])
        named = _named(sentence.replace(m.group(0), " "))
        if not 0 < start <= len(lines):
            checks.append({"claim": m.group(0), "sentence": sentence, "line": "", "ok": None})
            found.append(Finding("line_unchecked", "", f"{m.group(0)} is past the end of {rel} ({len(lines)} lines): "
                                 f"{sentence}", "", sentence, proven=False))
            continue
        tail = {n.split(".")[-1] for n in named}
        hit = [n for n in named | tail if n and re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", window)]
        tree = _defined(source) if path.suffix == ".py" else None
        holder = _holder(tree, start)
        code = _code_text(tree, source, start)
        calls = {n for n in named if "." in n or n + "(" in sentence}
        absent = sorted(n for n in calls if not re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", code))
        if (hit or not named) and not (code and absent and len(absent) == len(calls)):
            checks.append({"claim": m.group(0), "sentence": sentence, "line": shown[:160], "ok": bool(hit) or None})
            continue
        if code and absent and len(absent) == len(calls):
            checks.append({"claim": m.group(0), "sentence": sentence, "line": shown[:160], "ok": False})
            found.append(Finding("line", "", f"{m.group(0)} reads {shown[:120]!r}; the sentence names {', '.join(absent)}, "
                                 f"which {holder or 'the function there'} does not use: {sentence}",
                                 f"You point at {m.group(0)} for {', '.join(absent)}, but that line reads "
                                 f"{shown[:100]!r}. Where does your code do it?", sentence, proven=False))
        elif holder and holder in named:
            checks.append({"claim": m.group(0), "sentence": sentence, "line": shown[:160], "ok": True})
        else:
            checks.append({"claim": m.group(0), "sentence": sentence, "line": shown[:160], "ok": None})
            found.append(Finding("line_unchecked", "", f"{m.group(0)} reads {shown[:120]!r}, which shares no name with "
                                 f"the sentence: read it: {sentence}", "", sentence, proven=False))
    return checks, found


def _holder(tree, number: int) -> str:
    if tree is None:
        return ""
    inner = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             and n.lineno <= number <= (n.end_lineno or n.lineno)]
    return min(inner, key=lambda n: (n.end_lineno or n.lineno) - n.lineno).name if inner else ""


# --------------------------------------------------------------------------- the evaluation reading

def table(text: str) -> dict:
    """component -> (scripted good, scripted bad), from a pasted evaluate.py summary."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"\s{2,}|\|", line.strip()) if c.strip()]
        if len(cells) == 3 and re.match(r"[a-z]", cells[0]) and cells[0] != "component":
            out[cells[0]] = (cells[1], cells[2])
    return out


SAME = re.compile(r"\b(is the same|are the same|identical|does not differ|doesn't differ|cannot separate|can't separate|"
                  r"no difference)\b")
SEPARATES = re.compile(r"\b(separates|is the difference|differs)\b")


def evaluation_claims(text: str, table_text: str) -> list:
    """A clause that names exactly one component of the pasted table, and calls it the same for both
    runs (or separating them) where the table says otherwise. Clauses are split at , ; : and
    'but/while/whereas', so a sentence about context hit is never read as one about evidence read."""
    found, rows = [], table(table_text)
    for s in claims_in(text):
        for clause in re.split(r"[;:,]|\b(?:but|while|whereas|although|though)\b", s.lower()):
            present = [c for c in rows if c not in ("wall time",) and c in clause]
            if len(present) != 1 or re.search(r"\bnot\b|\bn't\b", clause):
                continue
            component = present[0]
            good, bad = rows[component]
            after = clause.split(component, 1)[1]
            if SAME.search(after) and good != bad:
                why = f"says {component} is the same for both runs; the pasted table says {good} against {bad}"
            elif SEPARATES.search(after) and not SAME.search(after) and good == bad:
                why = f"says {component} separates the runs; the pasted table says {good} for both"
            else:
                continue
            found.append(Finding("evaluation", "Evaluation", f"{why}: {s[:300]}",
                                 f"Your reading {why.replace('says', 'says that', 1)}. Check that row again.", s[:300]))
    return found + row_claims(text, table_text)


COLUMNS = ("context", "read", "tools", "cited", "grounded", "expect", "symbols", "root")
CELL = re.compile(r"\b(context|read|tools|cited|grounded|expect|symbols|root)\b\s*(?:is|was|says|shows|of|=|:)?\s*"
                  r"(yes|no|\d+/\d+)\b", re.I)


def question_rows(table_text: str) -> dict:
    """(run, question) -> {column: first word of the cell}, from evaluate.py's per-question table."""
    out, header = {}, None
    for line in table_text.splitlines():
        cells = line.split()
        if cells[:2] == ["run", "question"]:
            header = cells
            continue
        if header and len(cells) >= len(COLUMNS) and cells[0] in ("good", "bad"):
            # "NO (1 err, 1 rep)" spans several words: read the row by the columns it has before that cell
            words, values = cells[2:], []
            while words and len(values) < len(header) - 2:
                w = words.pop(0)
                if w.startswith("(") and values:
                    while words and not values[-1].endswith(")") and not w.endswith(")"):
                        w = words.pop(0)
                    continue
                values.append(w)
            out[(cells[0], cells[1])] = {h: v.lower() for h, v in zip(header[2:], values)}
    return out


def row_claims(text: str, table_text: str) -> list:
    """A sentence that names one question and one run (good or bad) and gives a column's value
    (`root NO`, `symbols 2/3`) the pasted table's row does not hold."""
    rows, found = question_rows(table_text), []
    questions = {q for _, q in rows}
    for s in claims_in(re.sub(r"[`*]", "", text)):
        named = [q for q in questions if re.search(rf"(?<![\w-]){re.escape(q)}(?![\w-])", s)]
        if len(named) != 1:
            continue
        whole = set(re.findall(r"\b(good|bad)\b", s.lower()))
        wrong = None
        for clause in re.split(r"[;,]|\bso\b|\bbut\b|\bwhile\b|\bwhereas\b", s):
            runs = set(re.findall(r"\b(good|bad)\b", clause.lower())) or whole
            row = rows.get((next(iter(runs)), named[0])) if len(runs) == 1 else None
            for m in CELL.finditer(clause) if row else ():
                column, said = m.group(1).lower(), m.group(2).lower()
                real = row.get(column, "")
                if real and real != "-" and said != real and not re.search(r"\bnot\b|n't\b", clause):
                    wrong = (m.group(0), column, real)
                    break
            if wrong:
                break
        if wrong:
            found.append(Finding("evaluation", "Evaluation",
                                 f"says {wrong[0]!r} for that row; the pasted table says {wrong[1]} {wrong[2]}: {s[:300]}",
                                 f"Your reading says {wrong[0]!r}, but the row of your own table says "
                                 f"{wrong[1]} {wrong[2]}. Check that row again.", s[:300]))
    return found


# --------------------------------------------------------------------------- My case

SCRIPTED_CASE = re.compile(r"shop-total-bug|order_total|scripted bad", re.I)
LABEL = re.compile(r"^[\s\-*_]*boundary failure or reasoning failure(?:, and why)?[\s_*]*:?", re.I | re.M)


def my_case_label(text: str) -> list:
    """The scripted bad run (shop-total-bug) read both files and cited them: a reasoning failure.
    The learner's label is the first one they wrote, the template's own label line left out."""
    own = LABEL.sub(" ", text)
    own = re.sub(r"\b(not|never|rather than|instead of|isn't|is not)\s+(a\s+)?(boundary|reasoning)\s+failure", " ", own, flags=re.I)
    own = re.sub(r"\b(boundary|reasoning)\s+failure\s+or\s+(a\s+)?(boundary|reasoning)\s+failure", " ", own, flags=re.I)
    labels = [(m.group(1).lower(), m.group(0)) for s in claims_in(own)
              for m in re.finditer(r"\b(boundary|reasoning)\s+failure", s, re.I)]
    if SCRIPTED_CASE.search(text) and "--model" not in text and labels and labels[0][0] == "boundary":
        s = re.sub(r"^[\s\-*_:]+", "", sentence_with(own, labels[0][1]))
        return [Finding("my_case", "My case",
                        "calls the scripted shop-total-bug run a boundary failure; every boundary held in it and both "
                        "files were read (a reasoning failure): " + s,
                        "Your 'My case' calls the scripted shop-total-bug run a boundary failure. In that run every "
                        "limit held and both files were read: ask the two questions of the section again.", s)]
    return []


# --------------------------------------------------------------------------- boilerplate and copies

def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def repeated_sentences(texts: dict, min_words: int = 8) -> dict:
    """sentence -> the sections it appears in, for sentences of 8+ words found in two or more."""
    seen: dict = {}
    for key, text in texts.items():
        for s in sentences(text):
            n = _words(s)
            if len(n.split()) >= min_words and key not in seen.setdefault(n, []):
                seen[n].append(key)
    return {n: keys for n, keys in seen.items() if len(keys) >= 2}


def repeated(texts: dict, where: str) -> list:
    return [Finding("repeated", where, f"the same sentence in {len(keys)} sections ({', '.join(keys[:4])}): {s[:200]}",
                    f"The same sentence appears in {len(keys)} sections ({', '.join(keys[:4])}); say what is "
                    "particular to each one instead.", s[:200]) for s, keys in repeated_sentences(texts).items()]


def lifted_sentences(text: str, source: str, limit: int = 3) -> list:
    """Sentences of 10+ words found word for word (case and punctuation aside) in ``source``
    (already passed through _words)."""
    out = []
    for s in sentences(text):
        n = _words(s)
        if len(n.split()) >= 10 and f" {n} " in f" {source} ":
            out.append(s)
    return out[:limit]


def lifted(text: str, source: str, where: str) -> list:
    return [Finding("lifted", where, f"found word for word in the lesson or the template ({where}): {s[:200]}",
                    f"This sentence in {where} is the lesson's or the template's, word for word: say it in your own "
                    "words, about your own run.", s[:200]) for s in lifted_sentences(text, source)]


# --------------------------------------------------------------------------- fenced blocks

FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]{0,3}\1[`~]*[ \t]*$", re.S | re.M)


def fenced(text: str) -> list:
    """(label, body) of every fenced block, ``` or ~~~ of any length, any label case."""
    return [(m.group(2).lower(), m.group(3)) for m in FENCE.finditer(text)]


def block_fields(body: str) -> dict:
    out = {}
    for line in body.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and len(key.strip()) <= 30:
            out.setdefault(key.strip().lower(), value.strip())
    return out


def unparsed_blocks(scenario: str, evidence_raw: str) -> list:
    """Fenced blocks of an Evidence part that are not a command and have no scenario line: a note."""
    out = []
    unclosed = len(re.findall(r"^[ \t]{0,3}(?:`{3,}|~{3,})", evidence_raw, re.M)) % 2
    for label, body in fenced(evidence_raw):
        if label in ("bash", "sh", "shell", "console", "python", "py", "diff") or not body.strip():
            continue
        if "scenario" not in block_fields(body):
            out.append(Finding("unparsed", f"{scenario} Evidence",
                               f"{scenario}: a fenced block in Evidence has no `scenario :` line, so it was not compared "
                               f"with a rerun: {' '.join(body.split())[:160]}", "", body[:160], proven=False))
    if unclosed:
        out.append(Finding("unparsed", f"{scenario} Evidence", f"{scenario}: a fence in Evidence is never closed; "
                           "what follows it was read as a block", "", "", proven=False))
    return out


def own_block(fields: dict) -> bool:
    """Did the learner's own code print this block? As the learner's board (harness/progress.py) has
    it: a `ran` line saying `simulated break on ...` (--simulate) or `reference ...` (--reference) is
    the lab's break, not theirs; a block without a `ran` line counts (older harness output had none)."""
    return not str(fields.get("ran", "")).strip().lower().startswith(("simulated", "reference"))


def simulated_only(scenario: str, blocks: list) -> list:
    if blocks and not any(own_block(b) for b in blocks):
        return [Finding("simulated", f"{scenario} Evidence",
                        f"{scenario}: every evidence block is the break on the reference (`--simulate` or "
                        "`--reference`), none from the learner's own code", "", "", proven=False)]
    return []
