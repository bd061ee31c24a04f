"""Similarity across a class: learner functions (normalised AST) and prose (word shingles).

    similar_pairs(submissions)  -> [{"a", "b", "kind", "score", "shared"}], every pair above its
                                   threshold, the reference solution ("rubric/reference") included
    reference_matches(code_dir) -> learner functions whose normalised AST is the reference's

Normalising a function drops its docstring, comments and layout, renames its parameters and
local names in order of appearance, and blanks string constants, so renaming variables or
rewording messages does not hide a copy. Prose is the learner's own lines only: the template,
pasted evidence blocks and commands (harness output) are removed before comparing.
"""

from __future__ import annotations

import ast
import copy
import difflib
import itertools
import re
from pathlib import Path

from grading import documents, workspace
from grading.workspace import LAB_ROOT

FUNCTIONS = {"tools.py": ("safe_resolve", "dispatch_tool"), "agent_loop.py": ("parse_tool_calls", "run_agent")}
FUNCTION_THRESHOLD = 0.97   # difflib ratio of the normalised dumps; 1.0 is the same function
PROSE_THRESHOLD = 0.5       # share of the smaller write-up's shingles found in the other
SHINGLE = 6                 # words per shingle
MAX_WORDS = 20_000          # of one learner's prose (both documents) compared
MAX_SOURCE = 2_000_000


class _Normalise(ast.NodeTransformer):
    def __init__(self):
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_arg(self, node):
        node.arg, node.annotation = self._name(node.arg), None
        return node

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store) or node.id in self.names:
            node.id = self._name(node.id)
        return node

    def visit_Constant(self, node):
        return ast.Constant("S") if isinstance(node.value, str) and node.value != "\x00" else node

    def visit_JoinedStr(self, node):
        return ast.Constant("S")


def normalised(fn: ast.FunctionDef) -> str:
    node = copy.deepcopy(fn)
    if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
        node.body = node.body[1:] or [ast.Pass()]
    node.decorator_list, node.returns = [], None
    return ast.dump(_Normalise().visit(node), include_attributes=False)


def _read(path: Path, top: Path) -> str:
    """A submission's file, read in the grader: never through a link, never a huge one."""
    try:
        if path.is_symlink() or not path.resolve().is_relative_to(top.resolve()) or not path.is_file() \
                or path.stat().st_size > MAX_SOURCE:
            return ""
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, RuntimeError, ValueError):
        return ""


def functions(code_dir: Path) -> dict:
    """'module.function' -> normalised dump, for the learner functions that parse."""
    out = {}
    for module, names in FUNCTIONS.items():
        try:
            source = _read(code_dir / module, code_dir.parent)
            if not source:
                continue
            tree = ast.parse(source)
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name in names and not _stub(node):
                    out[f"{module[:-3]}.{node.name}"] = normalised(node)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return out


def _stub(fn) -> bool:
    return any(isinstance(n, ast.Raise) and "NotImplementedError" in ast.dump(n) for n in ast.walk(fn))


def reference_matches(code_dir: Path) -> list:
    ref = functions(LAB_ROOT / "rubric" / "reference")
    return sorted(q for q, dump in functions(code_dir).items() if ref.get(q) == dump)


def prose_text(sub: Path) -> str:
    """The learner's own sentences from both documents, template and pasted output removed."""
    parts = []
    for name in ("UNDERSTANDING.md", "FAILURE_ANALYSIS.md"):
        text = _read(sub / name, sub)
        if text:
            parts.append(documents.prose(text, documents.template_lines(name)))
    return " ".join(parts)


def _shingles(words: list) -> set:
    return {tuple(words[i:i + SHINGLE]) for i in range(max(0, len(words) - SHINGLE + 1))}


def shared_passages(a: list, b: list, limit: int = 3) -> list:
    """The longest runs of words the two texts share (at least one shingle long)."""
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    blocks = sorted((blk for blk in m.get_matching_blocks() if blk.size >= SHINGLE), key=lambda x: -x.size)
    return [" ".join(a[blk.a:blk.a + blk.size])[:300] for blk in blocks[:limit]]


def similar_pairs(submissions) -> list:
    """Every pair of submissions (and each with the reference) above a threshold, as plain data."""
    subs = {}
    for p in submissions:
        try:
            subs[Path(p).name] = workspace.find_lab_root(Path(p))
        except OSError:
            subs[Path(p).name] = Path(p)
    funcs = {name: functions(path / "code") for name, path in subs.items()}
    funcs["rubric/reference"] = functions(LAB_ROOT / "rubric" / "reference")
    words = {name: re.findall(r"[\w'.-]+", prose_text(path).lower())[:MAX_WORDS] for name, path in subs.items()}
    out = []
    for a, b in itertools.combinations(sorted(funcs), 2):
        same = []
        for q in sorted(set(funcs[a]) & set(funcs[b])):
            ratio = 1.0 if funcs[a][q] == funcs[b][q] else difflib.SequenceMatcher(None, funcs[a][q], funcs[b][q]).ratio()
            if ratio >= FUNCTION_THRESHOLD:
                same.append((q, round(ratio, 2)))
        if same:
            out.append({"a": a, "b": b, "kind": "functions", "score": min(r for _, r in same),
                        "shared": [f"{q} ({'identical' if r == 1.0 else f'{r:.0%} alike'} after normalising)" for q, r in same]})
    for a, b in itertools.combinations(sorted(words), 2):
        sa, sb = _shingles(words[a]), _shingles(words[b])
        if not sa or not sb:
            continue
        score = len(sa & sb) / min(len(sa), len(sb))
        if score >= PROSE_THRESHOLD:
            out.append({"a": a, "b": b, "kind": "prose", "score": round(score, 2),
                        "shared": shared_passages(words[a], words[b])})
    return sorted(out, key=lambda p: (-p["score"], p["a"], p["b"]))
