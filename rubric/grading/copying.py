"""Copying, on evidence an instructor would act on: of rubric/reference/ by one learner, and between
the learners of a class.

    reference_copy(code_dir)     -> {"functions", "texts", "hold", "lines", "notes"}: which of the four
                                    learner functions are the reference's after canonicalising, which
                                    distinctive texts of the reference the learner's code contains,
                                    whether that earns a HOLD, and the matching lines side by side
    peer_pairs(submissions)      -> [{"learners", "score", "code", "prose", "shared", "hold"}], pairs that
                                    share what the reference, the hints and the templates do not
                                    explain, most unusual first

A function written from its docstring or from hint M4:3 often comes out as the reference's, so one
matching function is a note; two or more, or the reference's own wording (its comments, its
messages), is a HOLD. Canonicalising removes what a copier adds or changes to hide a copy: names,
docstrings, comments, `pass`, dead code, string wording and the order of statements.

Between learners, every shared line or sentence is weighted by how rare it is in the class (shared
by two of thirty weighs more than shared by twenty) and counts nothing when the reference, the
provided code, the hints or the lesson already contain it: learners who wrote the obvious code are
not a pair. Standard library only; reads the submissions' text, never runs it.
"""

from __future__ import annotations

import ast
import copy
import io
import itertools
import re
import tokenize
from collections import Counter
from functools import lru_cache
from pathlib import Path

from grading import similarity
from grading.workspace import LAB_ROOT

FUNCTIONS = similarity.FUNCTIONS
HOLD_FUNCTIONS = 2          # reference functions matched before a HOLD
SHORT_TEXT = 12             # characters: a reference text shorter than this is not distinctive
TEXT_WORDS = 4              # words, likewise ("cannot resolve path" is anyone's wording)
LONG_TEXT = 8               # words: one reference text this long found in the learner's code is a HOLD
HOLD_TEXTS = 3              # distinct reference texts found before a HOLD (two short messages can be anyone's)
PEER_CODE = 6.0             # weighted rare statements two learners share before a HOLD
PEER_PROSE = 3.0            # weighted rare sentences two learners share before a HOLD
SAME_MISTAKES = 2.0         # added to the code score when two learners, and only they, fail the same way
MIN_SENTENCE_WORDS = 8
SENTENCE_ALIKE = 0.5        # share of a sentence's own word triples found in the other's sentence
OWN_TRIPLES = 4             # word triples of a sentence no provided text has, before it can count
PEER_SHARE = 0.15           # of the smaller write-up's own sentences, shared before a HOLD


# --------------------------------------------------------------------------- canonical code

class _Canon(ast.NodeTransformer):
    """Every local name (parameters and assigned names) becomes ``v``; strings become ``S``."""

    def __init__(self, local: set):
        self.local = local

    def visit_arg(self, node):
        node.arg, node.annotation = "v", None
        return node

    def visit_Name(self, node):
        if node.id in self.local:
            node.id = "v"
        return node

    def visit_Constant(self, node):
        return ast.Constant("S") if isinstance(node.value, str) and node.value != "\x00" else node

    def visit_JoinedStr(self, node):
        return ast.Constant("S")


def _locals(fn) -> set:
    names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names |= {n.name for n in ast.walk(fn) if isinstance(n, ast.ExceptHandler) and n.name}
    return names


def _live(body: list) -> list:
    """Statements that can run and do something: no docstring-like strings, no `pass`, nothing after a
    return/raise/continue/break in the same block, no `if False:` block."""
    out = []
    for stmt in body:
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Constant) and not stmt.test.value:
            out += _live(stmt.orelse)
            continue
        out.append(stmt)
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
            break
    return out


def _header(stmt) -> str:
    """One statement as one line: a compound statement's header only (its body comes as its own lines)."""
    node = copy.copy(stmt)
    for part in ("body", "orelse", "finalbody", "handlers"):
        if isinstance(getattr(node, part, None), list):
            setattr(node, part, [])
    if isinstance(node, ast.Try):
        return "try:"
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError, AttributeError):
        return type(stmt).__name__
    return " ".join(text.split())[:200]


def _lines(body: list, depth: int, src_lines: list, out: list) -> None:
    for stmt in _live(body):
        out.append((depth, _header(stmt), _src(stmt, src_lines)))
        for part in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, part, None)
            if isinstance(inner, list) and inner:
                if part == "orelse" and not isinstance(stmt, (ast.For, ast.While, ast.Try)):
                    out.append((depth, "else:", ""))
                _lines(inner, depth + 1, src_lines, out)
        for h in getattr(stmt, "handlers", []) or []:
            kind = " ".join(ast.unparse(h.type).split()) if h.type else ""
            out.append((depth, f"except {kind}{' as v' if h.name else ''}:", _src(h, src_lines)))
            _lines(h.body, depth + 1, src_lines, out)


def _src(node, src_lines: list) -> str:
    i = getattr(node, "lineno", 0)
    return f"{i}: {src_lines[i - 1].strip()[:120]}" if 0 < i <= len(src_lines) else ""


def canonical(fn, source: str = "") -> list:
    """[(depth, canonical line, 'N: the source line')] of a function, in order."""
    node = copy.deepcopy(fn)
    node = _Canon(_locals(fn)).visit(node)
    out: list = []
    _lines(node.body, 0, source.splitlines(), out)
    # line numbers survive the transform (copied nodes keep their attributes)
    return out


def _functions(code_dir: Path) -> dict:
    """'module.function' -> (FunctionDef, source text of the module), learner functions that parse."""
    out = {}
    for module, names in FUNCTIONS.items():
        source = similarity._read(code_dir / module, code_dir.parent)
        if not source:
            continue
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in names and not similarity._stub(node):
                out[f"{module[:-3]}.{node.name}"] = (node, source)
    return out


def _same(a: list, b: list) -> bool:
    """The same statements at the same depths, whatever their order."""
    return bool(a) and Counter((d, t) for d, t, _ in a) == Counter((d, t) for d, t, _ in b)


def side_by_side(ref: list, theirs: list, limit: int = 8) -> list:
    """'reference N: ... | learner M: ...' for statements both have (their canonical form)."""
    mine = {}
    for d, t, s in theirs:
        mine.setdefault((d, t), []).append(s)
    out = []
    for d, t, s in ref:
        if mine.get((d, t)) and s and len(t) > 12:
            out.append(f"reference {s}  |  learner {mine[(d, t)].pop(0)}")
        if len(out) >= limit:
            break
    return out


# --------------------------------------------------------------------------- distinctive text

def _texts(fn, source: str) -> list:
    """The comments and string pieces of a function body (docstring aside), each with its line."""
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else fn.body
    out = []
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.append((n.lineno, n.value))
    lines = source.splitlines()
    first, last = (body[0].lineno, fn.end_lineno) if body else (0, -1)
    chunk = "\n".join(lines[first - 1:last])
    try:
        for tok in tokenize.generate_tokens(io.StringIO(chunk).readline):
            if tok.type == tokenize.COMMENT:
                out.append((first + tok.start[0] - 1, tok.string.lstrip("#")))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return [(i, _norm(t)) for i, t in out if len(_norm(t)) >= SHORT_TEXT and len(_norm(t).split()) >= TEXT_WORDS]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", str(text).lower()).split())


@lru_cache(maxsize=1)
def explained_text() -> str:
    """What a learner may have read before writing: the shipped stubs (their docstrings), the tests,
    the hints, the lesson and the READMEs, as one normalised text."""
    parts = []
    for pattern in ("code/*.py", "code/tests/*.py", "code/harness/*.py", "lesson/*.md", "*.md", "code/*.md",
                    "code/eval/*", "code/fixture_repo/**/*"):
        for p in sorted(LAB_ROOT.glob(pattern)):
            try:
                if p.is_file():
                    parts.append(p.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
    return " " + _norm(" ".join(parts)) + " "


@lru_cache(maxsize=1)
def _reference() -> dict:
    return _functions(LAB_ROOT / "rubric" / "reference")


def distinctive_texts() -> list:
    """[(qualified function, line, text)]: the reference's own wording no provided file contains."""
    explained = explained_text()
    out = []
    for q, (fn, source) in _reference().items():
        for line, text in _texts(fn, source):
            if f" {text} " not in explained:
                out.append((q, line, text))
    return out


def reference_copy(code_dir: Path) -> dict:
    """The evidence of copying rubric/reference/, and whether it earns a HOLD."""
    ref, theirs = _reference(), _functions(code_dir)
    canon_ref = {q: canonical(*ref[q]) for q in ref}
    matched, lines, notes = [], [], []
    for q, (fn, source) in sorted(theirs.items()):
        mine = canonical(fn, source)
        if q in canon_ref and _same(canon_ref[q], mine):
            matched.append(q)
            lines += [f"{q}: {x}" for x in side_by_side(canon_ref[q], mine, 6)]
    texts, found = [], []
    learner_text = {q: [(i, t) for i, t in _texts(fn, src)] for q, (fn, src) in theirs.items()}
    for q, rline, text in distinctive_texts():
        for lq, items in learner_text.items():
            hit = next(((i, t) for i, t in items if text in t), None)
            if hit:
                texts.append(text)
                ref_lines, their_lines = ref[q][1].splitlines(), theirs[lq][1].splitlines()
                found.append(f"the reference's words \"{text[:80]}\": reference {q} {_at(ref_lines, rline)}  |  "
                             f"learner {lq} {_at(their_lines, hit[0])}")
                break
    kept = [q for q in matched if _surface(ref[q], theirs[q])]
    hold = len(kept) >= HOLD_FUNCTIONS or len(set(texts)) >= HOLD_TEXTS or any(len(t.split()) >= LONG_TEXT for t in texts)
    if matched and not hold:
        notes.append(f"{', '.join(matched)}: the reference's statements after canonicalising (names, wording and order "
                     "aside); code written from the docstrings' hints often is: information only")
    return {"functions": matched if hold else [], "alike": matched, "texts": sorted(set(texts)), "hold": hold,
            "lines": (found[:3] + lines[:3] + found[3:] + lines[3:])[:16] if hold else [], "notes": notes}


def _at(lines: list, i: int) -> str:
    return f"{i}: {lines[i - 1].strip()[:120]}" if 0 < i <= len(lines) else str(i)


def _surface(ref, theirs) -> bool:
    """Beyond the structure the docstring's hint dictates: the reference's own local names (two thirds
    of them) or its own strings (half of them) kept."""
    def names(fn):
        params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        return _locals(fn) - params

    def strings(fn):
        return {_norm(n.value) for s in fn.body[1:] for n in ast.walk(s) if isinstance(n, ast.Constant)
                and isinstance(n.value, str) and len(n.value) > 3}
    rn, tn, rs, ts = names(ref[0]), names(theirs[0]), strings(ref[0]), strings(theirs[0])
    return bool(rn) and len(rn & tn) * 3 >= len(rn) * 2 or bool(rs) and len(rs & ts) * 2 >= len(rs)


# --------------------------------------------------------------------------- between learners

def _statements(code_dir: Path) -> dict:
    """canonical statement ('module.function|depth|line') -> 'function N: source line', for every
    learner function, skipping what the reference or the hints' pseudo-code already say."""
    explained = _explained_statements()
    out = {}
    for q, (fn, source) in _functions(code_dir).items():
        for d, t, s in canonical(fn, source):
            if t in explained or len(t) < 16 or t.endswith(":") and len(t) < 24:
                continue
            out.setdefault(f"{q}|{t}", f"{q} {s}")
    return out


@lru_cache(maxsize=1)
def _explained_statements() -> frozenset:
    """Canonical lines the reference or any provided code has, and the lines of hint pseudo-code that parse."""
    out = set()
    for q, (fn, source) in _reference().items():
        out |= {t for _, t, _ in canonical(fn, source)}
    for module in FUNCTIONS:
        try:
            tree = ast.parse((LAB_ROOT / "code" / module).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                out |= {t for _, t, _ in canonical(node)}
    for snippet in _hint_snippets():
        try:
            tree = ast.parse(snippet)
        except (SyntaxError, ValueError):
            continue
        fn = ast.FunctionDef(name="h", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                         defaults=[]), body=tree.body, decorator_list=[])
        out |= {t for _, t, _ in canonical(fn)}
    return frozenset(out)


def _hint_snippets() -> list:
    """Single lines of code from the hints and the stubs' docstrings (`...` spans, pseudo-code lines)."""
    texts = []
    try:
        from harness.milestones import MILESTONES
        texts += [h for m in MILESTONES for h in m.hints]
    except ImportError:
        pass
    for module in FUNCTIONS:
        try:
            texts.append((LAB_ROOT / "code" / module).read_text(encoding="utf-8"))
        except OSError:
            pass
    out = []
    for text in texts:
        out += re.findall(r"``?([^`\n]+)``?", text)
        out += [line.strip() for line in text.splitlines() if line.strip()]
    return out


def _sentences(sub: Path) -> list:
    """The learner's own sentences (template and pasted output removed): (text, word triples that
    neither the lesson, the templates, the provided code nor the lab's data contain)."""
    text = similarity.prose_text(sub)
    lesson = _lesson_triples()
    out = []
    for s in re.split(r"(?<=[.!?])\s+|\n+", text):
        words = re.findall(r"[a-z0-9_']+", s.lower())
        own = _triples(words) - lesson
        if len(words) >= MIN_SENTENCE_WORDS and len(own) >= OWN_TRIPLES:
            out.append((s.strip()[:240], own))
    return out[:2000]


def _triples(words: list) -> set:
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def _alike(a: set, b: set) -> bool:
    both = len(a & b)
    return both >= OWN_TRIPLES and both / min(len(a), len(b)) >= SENTENCE_ALIKE


@lru_cache(maxsize=1)
def _lesson_triples() -> frozenset:
    """Word triples of the lesson, the templates, the READMEs, the code and the lab's data."""
    return frozenset(_triples(explained_text().split()))


def _safely(read, path: Path):
    """A submission whose text defeats the parser (nested too deep, too big) shares nothing."""
    try:
        return read(path)
    except (RecursionError, MemoryError, ValueError, OSError, UnicodeError, SyntaxError):
        return {} if read is _statements else []


def _candidates(index: dict, tri: set) -> list:
    return sorted({j for t in tri for j in index.get(t, ())})


def failure_signature(result: dict) -> frozenset:
    """What a graded learner got wrong, as names only: failing tests, probes judged wrong, attack
    classes that leaked. Two learners with the same rare set made the same mistakes."""
    out = {f"test {t.get('nodeid', '?')}" for t in result.get("tests", [])
           if t.get("outcome") in ("failed", "timeout") and not t.get("not_done")}
    for key in ("parse_observed", "loop_observed"):
        out |= {f"probe {str(w).split(':', 1)[0]}" for w in (result.get(key) or {}).get("wrong", [])}
    out |= {f"leaked {name}" for name, info in (result.get("battery") or {}).items()
            if isinstance(info, dict) and info.get("status") == "leaked"}
    return frozenset(out)


def peer_pairs(submissions, failures: dict | None = None) -> list:
    """Pairs of learners sharing unusual material, most unusual first, with the shared passages.
    ``failures``: folder name -> failure_signature, when the learners were graded."""
    subs = {}
    for p in submissions:
        try:
            subs[Path(p).name] = similarity.workspace.find_lab_root(Path(p))
        except OSError:
            subs[Path(p).name] = Path(p)
    code = {n: _safely(_statements, path / "code") for n, path in subs.items()}
    prose = {n: _safely(_sentences, path) for n, path in subs.items()}
    common = max(3, len(subs) / 3)     # held by more learners than this: the class's common stock, not a pair's
    index = {}
    for n, kept in prose.items():
        index[n] = {}
        for j, (_, tri) in enumerate(kept):
            for t in tri:
                index[n].setdefault(t, set()).add(j)
    code_count = Counter(k for n in code for k in code[n])
    out = []
    for a, b in itertools.combinations(sorted(subs), 2):
        shared = sorted(set(code[a]) & set(code[b]))
        code_score = sum(1 / (code_count[k] - 1) for k in shared if code_count[k] <= common)
        passages = [f"{code[a][k]}  |  {code[b][k]}" for k in sorted(shared, key=lambda k: code_count[k])[:6]]
        prose_hits = []
        for text_a, ta in prose[a]:
            match = next((prose[b][j][0] for j in _candidates(index[b], ta) if _alike(ta, prose[b][j][1])), None)
            if match:
                holders = sum(1 for n in subs if n not in (a, b)
                              and any(_alike(ta, prose[n][j][1]) for j in _candidates(index[n], ta)))
                if holders + 2 <= common:
                    prose_hits.append((1 / (holders + 1), text_a, match))
        prose_score = sum(w for w, _, _ in prose_hits)
        share = len(prose_hits) / max(1, min(len(prose[a]), len(prose[b])))
        passages += [f"\"{x[:160]}\"  |  \"{y[:160]}\"" for _, x, y in sorted(prose_hits, key=lambda h: -h[0])[:4]]
        same = (failures or {}).get(a)
        if same and same == (failures or {}).get(b) and sum(1 for f in (failures or {}).values() if f == same) == 2:
            code_score += SAME_MISTAKES   # the same failures and nobody else's: evidence, never enough alone
            passages.insert(0, "the same failures, shared with nobody else in the class: " + ", ".join(sorted(same)[:4]))
        hold = code_score >= PEER_CODE or prose_score >= PEER_PROSE and share >= PEER_SHARE
        if hold or code_score >= PEER_CODE / 2 or prose_score >= PEER_PROSE / 2:
            out.append({"a": a, "b": b, "learners": [a, b], "kind": "peers", "score": round(code_score + prose_score, 1),
                        "code": round(code_score, 1), "prose": round(prose_score, 1), "prose_share": round(share, 2),
                        "hold": hold,
                        "what": f"{len(shared)} unusual statement(s), {len(prose_hits)} sentence(s) shared",
                        "shared": passages})
    return sorted(out, key=lambda p: (-p["score"], p["a"], p["b"]))


def hold_peers(results: dict, pairs: list) -> list:
    """Put both learners of each held pair on HOLD (results: folder name -> result, changed in place):
    C1-C3 for shared code, C4-C7 for shared prose; returns the folder names changed."""
    changed = []
    for p in pairs:
        if not p.get("hold"):
            continue
        numbers = ([1, 2, 3] if p["code"] >= PEER_CODE else []) + \
            ([4, 5, 6, 7] if p["prose"] >= PEER_PROSE and p.get("prose_share", 1) >= PEER_SHARE else [])
        for me, other in ((p["a"], p["b"]), (p["b"], p["a"])):
            r = results.get(me)
            if not r or r.get("could_not_grade"):
                continue
            for c in r.get("criteria", []):
                if c["number"] not in numbers or c.get("level") == "HOLD":
                    continue
                before = f"before this hold the suggestion was {c['level']} ({c.get('rule', '')})"
                c.update(level="HOLD", points=0, mark="HOLD", rule="HOLD.peer_copy", confidence="high",
                         reasons=[f"shares with {other} what the reference, the hints and the lab do not explain: "
                                  f"{p['what']}; talk to both learners before any level"]
                         + [f"shared: {x}" for x in p["shared"][:4]] + [before])
            flags = r.setdefault("integrity", {}).setdefault("flags", {})
            flags["shares_work_with"] = sorted(set(flags.get("shares_work_with", [])) | {other})
            r["total"] = sum(c.get("points", 0) for c in r.get("criteria", []))
            changed.append(me)
    return sorted(set(changed))
