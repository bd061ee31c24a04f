"""Copying of rubric/reference/, held only on evidence an instructor would act on.

    reference_copy(code_dir)     -> {"functions", "texts", "hold", "lines", "notes"}: which of the four
                                    learner functions are the reference's after canonicalising, which
                                    distinctive texts of the reference the learner's code contains,
                                    whether that earns a HOLD, and the matching lines side by side

Between learners: grading/peers.py, which reads code with ``canonical`` and text with
``explained_text`` from here.

A function written from its docstring or from hint M4:3 often comes out as the reference's, so one
matching function is a note; two or more, or the reference's own wording (its comments, its
messages), is a HOLD. Canonicalising removes what a copier adds or changes to hide a copy: names,
docstrings, comments, `pass`, dead code, string wording and the order of statements.
Standard library only; reads the submissions' text, never runs it.
"""

from __future__ import annotations

import ast
import copy
import io
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
