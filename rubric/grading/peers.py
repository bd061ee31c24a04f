"""Copying between the learners of a class (folder mode), on evidence an instructor would act on.

    peer_pairs(submissions, failures)  -> [{"learners", "score", "code", "prose", "shared", "hold"}]:
                                          pairs that share what the reference, the hints and the lab
                                          do not explain, most unusual first, with the passages
    hold_peers(results, pairs)         -> both learners of each held pair put on HOLD
    failure_signature(result)          -> what a graded learner got wrong, as names

Every shared statement (names and wording aside, as copying.canonical reads it) or near-identical
sentence is weighted by how rare it is in the class (shared by two of thirty weighs more than by
twenty), and counts nothing when the reference, the provided code, the hints, the lesson or the
lab's data contain it, or when more than a third of the class has it: learners who wrote the obvious
code, or a class that shares a template, are not a pair. Renaming, reordering functions or sentences
and swapping a few words does not hide a shared submission. Reads text, never runs it.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

from grading import similarity
from grading.copying import FUNCTIONS, _functions, _reference, canonical, explained_text
from grading.workspace import LAB_ROOT

PEER_CODE = 6.0             # weighted rare statements two learners share before a HOLD
PEER_PROSE = 3.0            # weighted rare sentences two learners share before a HOLD
SAME_MISTAKES = 2.0         # added to the code score when two learners, and only they, fail the same way
MIN_SENTENCE_WORDS = 8
SENTENCE_ALIKE = 0.5        # share of a sentence's own word triples found in the other's sentence
OWN_TRIPLES = 4             # word triples of a sentence no provided text has, before it can count
PEER_SHARE = 0.15           # of the smaller write-up's own sentences, shared before a HOLD


def _statements(code_dir: Path) -> dict:
    """canonical statement ('module|line') -> 'function N: source line', for every learner function and
    every helper the learner added to the module, skipping what the reference or the hints' pseudo-code
    already say. Keyed by module, not function: code moved into a helper, or out of a nested one, is
    still the same code."""
    explained = _explained_statements()
    out = {}
    for q, (fn, source) in _learner_functions(code_dir).items():
        module = q.split(".", 1)[0]
        for d, t, s in canonical(fn, source):
            if t in explained or len(t) < 16 or t.endswith(":") and len(t) < 24:
                continue
            out.setdefault(f"{module}|{t}", f"{q} {s}")
    return out


def _learner_functions(code_dir: Path) -> dict:
    """'module.function' -> (FunctionDef, module source): the four learner functions (copying._functions)
    and the module-level functions the learner added (names the lab's own module does not define)."""
    out = dict(_functions(code_dir))
    for module in FUNCTIONS:
        provided = _provided_names(module)
        source = similarity._read(code_dir / module, code_dir.parent)
        try:
            tree = ast.parse(source) if source else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        for node in tree.body if tree else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in provided:
                out.setdefault(f"{module[:-3]}.{node.name}", (node, source))
    return out


@lru_cache(maxsize=4)
def _provided_names(module: str) -> frozenset:
    """Top-level names the lab's own copy of ``module`` defines (its helpers are not the learner's)."""
    try:
        tree = ast.parse((LAB_ROOT / "code" / module).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    return frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


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
        # Rare sentences alone are held only in bulk (a class may share a voice or a source); beside
        # shared code beyond the obvious they corroborate it, and the write-ups are held too.
        code_held = p["code"] >= PEER_CODE
        numbers = ([1, 2, 3] if code_held else []) + \
            ([4, 5, 6, 7] if p["prose"] >= PEER_PROSE and (p.get("prose_share", 1) >= PEER_SHARE or code_held) else [])
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
