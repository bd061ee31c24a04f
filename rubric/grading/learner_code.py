"""Read the learner's code without running it: AST signals and the integrity comparisons.

A signal is a fact about the source with the lines it came from ("json.loads is inside a try,
line 12"); it is shown beside the test outcomes and never decides a level on its own.
"""

from __future__ import annotations

import ast
import copy
import difflib
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from grading import history
from grading.workspace import LAB_ROOT, LEARNER_MODULES

from harness.milestones import LEARNER_FUNCTIONS  # the course as data (board.py put code/ on sys.path)

GUARDED = ("code/tests/", "code/harness/", "code/eval/", "code/fixture_repo/")
GUARDED_FILES = ("conftest.py", "pytest.ini", "code/pytest.ini", "code/conftest.py")


@dataclass
class Signal:
    criterion: int
    function: str
    label: str
    found: bool
    good: bool                  # True: the rubric's pattern; False: a red flag when found
    lines: list = field(default_factory=list)   # [(line number, source line)]


def parse(path: Path):
    """(tree, source, error message)."""
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return None, "", f"cannot read {path.name}: {exc.strerror}"
    try:
        return ast.parse(source), source, ""
    except SyntaxError as exc:
        return None, source, f"{path.name} does not parse: SyntaxError on line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:   # nested too deep for the parser
        return None, source, f"{path.name} cannot be read by the grader: {type(exc).__name__}"


def function(tree, name: str):
    return next((n for n in getattr(tree, "body", []) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _lines(source: str, nodes) -> list:
    text = source.splitlines()
    seen = sorted({n.lineno for n in nodes if getattr(n, "lineno", None)})
    return [(i, text[i - 1].strip()[:140]) for i in seen if 0 < i <= len(text)]


def _calls(node, attr: str):
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and
            (isinstance(n.func, ast.Attribute) and n.func.attr == attr or isinstance(n.func, ast.Name) and n.func.id == attr)]


def _mentions(node, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name or isinstance(n, ast.Attribute) and n.attr == name
               for n in ast.walk(node))


def _inside_try(fn, target) -> list:
    """The Try nodes whose body (not handlers) contains ``target``."""
    return [t for t in ast.walk(fn) if isinstance(t, ast.Try)
            and any(target is n for stmt in t.body for n in ast.walk(stmt))]


def signals(code_dir: Path) -> list:
    out = []
    for module in ("agent_loop.py", "tools.py"):
        tree, source, _ = parse(code_dir / module)
        if tree is None:
            continue
        for name, make in RULES.get(module, {}).items():
            fn = function(tree, name)
            if fn is not None:
                out += make(fn, source)
    return out


def _run_agent(fn, src):
    S = lambda *a: Signal(2, "run_agent", *a)  # noqa: E731
    fors = [n for n in ast.walk(fn) if isinstance(n, ast.For) and _calls(n.iter, "range") and _mentions(n.iter, "max_steps")]
    fors += [n for n in ast.walk(fn) if isinstance(n, ast.While) and _counted(n)]
    whiles = [n for n in ast.walk(fn) if isinstance(n, ast.While)]
    forever = [n for n in whiles if isinstance(n.test, ast.Constant) and n.test.value]
    loops = [i for i, s in enumerate(fn.body) if isinstance(s, (ast.For, ast.While))]
    after = [s for s in fn.body[loops[-1] + 1:] if isinstance(s, ast.Return) and _mentions(s, "MAX_STEPS_REACHED")] if loops else []
    turn = [c for c in _calls(fn, "append") if c.args and _calls(c.args[0], "assistant_turn")]
    results = [c for c in _calls(fn, "append") + _calls(fn, "extend") if c.args and _calls(c.args[0], "tool_result")]
    raw = [c for c in _calls(fn, "append") if c.args and isinstance(c.args[0], ast.Name) and c.args[0].id in ("message", "msg", "response")]
    finish = [n for n in ast.walk(fn) if isinstance(n, ast.Attribute) and n.attr == "finish_reason"
              or isinstance(n, ast.Constant) and n.value == "finish_reason"]
    wrapping = [t for t in ast.walk(fn) if isinstance(t, ast.Try) and any(isinstance(n, (ast.For, ast.While)) for s in t.body for n in ast.walk(s))]
    ordered = bool(turn and results and min(c.lineno for c in turn) < min(c.lineno for c in results))
    # the one certain red flag read from the text: nothing in the body reads max_steps, so no bound
    # on model calls exists at all (decides only when the loop could not be observed running)
    reads_cap = [n for s in fn.body for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == "max_steps"]
    return [
        S("counted loop bounded by max_steps (`for ... in range(max_steps)`, `while steps < max_steps`, ...)",
          bool(fors), True, _lines(src, fors)),
        S("`while True` loop", bool(forever), False, _lines(src, forever)),
        S("returns MAX_STEPS_REACHED after the loop", bool(after), True, _lines(src, after)),
        S("assistant_turn(...) appended before tool_result(...)", ordered, True, _lines(src, turn + results)),
        S("the model's Message object appended as it is", bool(raw), False, _lines(src, raw)),
        S("finish_reason used", bool(finish), False, _lines(src, finish)),
        S("try/except around the whole loop", bool(wrapping), False, _lines(src, wrapping)),
        S(UNBOUNDED, not reads_cap and not _is_stub(fn), False, _lines(src, forever or whiles)),
    ]


UNBOUNDED = "no bound on model calls: run_agent never reads max_steps"


def _counted(loop) -> bool:
    """``while <counter> < max_steps`` (any comparison with max_steps) whose body advances a counter."""
    test_names = {n.id for n in ast.walk(loop.test) if isinstance(n, ast.Name)}
    bumped = {n.target.id for n in ast.walk(loop) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}
    bumped |= {t.id for n in ast.walk(loop) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return isinstance(loop.test, ast.Compare) and _mentions(loop.test, "max_steps") and bool(test_names & bumped - {"max_steps"})


def _parse_tool_calls(fn, src):
    S = lambda *a: Signal(2, "parse_tool_calls", *a)  # noqa: E731
    loads = [c for c in _calls(fn, "loads")]
    guarded = [c for c in loads if _inside_try(fn, c)]
    tries = [t for c in guarded for t in _inside_try(fn, c)]
    handlers = [h for t in tries for h in t.handlers]
    isdict = [c for c in _calls(fn, "isinstance") if len(c.args) == 2 and _mentions(c.args[1], "dict")]
    marked = [c for c in _calls(fn, "ToolCall") if len(c.args) >= 4 or any(k.arg == "error" for k in c.keywords)]
    return [
        S("json.loads called", bool(loads), True, _lines(src, loads)),
        S("json.loads inside a try", bool(guarded), True, _lines(src, tries + handlers)),
        S("non-object JSON checked (isinstance ... dict)", bool(isdict), True, _lines(src, isdict)),
        S("ToolCall built with an error", bool(marked), True, _lines(src, marked)),
    ]


def _safe_resolve(fn, src):
    S = lambda *a: Signal(3, "safe_resolve", *a)  # noqa: E731
    resolve = _calls(fn, "resolve") + _calls(fn, "realpath")
    component = _calls(fn, "is_relative_to") + _calls(fn, "relative_to") + _calls(fn, "commonpath")
    component += [n for n in ast.walk(fn) if isinstance(n, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in n.ops)
                  and any(isinstance(c, ast.Attribute) and c.attr == "parents" for c in n.comparators)]
    prefix = _calls(fn, "startswith")
    norm = _calls(fn, "normpath") + _calls(fn, "abspath")
    typed = [c for c in _calls(fn, "isinstance") if len(c.args) == 2 and _mentions(c.args[1], "str")]
    on_text = [c for c in prefix if isinstance(c.func, ast.Attribute) and _mentions(c.func.value, "rel_path")]
    texty = [n for n in ast.walk(fn) if isinstance(n, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in n.ops)
             and _mentions(n, "rel_path") and not (isinstance(n.left, ast.Constant) and "\x00" in str(n.left.value))] + on_text
    nul = [n for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str) and "\x00" in n.value]
    return [
        S("the path is resolved (resolve/realpath)", bool(resolve), True, _lines(src, resolve)),
        S("containment by components (is_relative_to/relative_to/commonpath/`in target.parents`)", bool(component), True,
          _lines(src, component)),
        S("string-prefix check (startswith)", bool(prefix), False, _lines(src, prefix)),
        S("no containment check: the path's text is compared instead (fixed names, a leading '..')",
          not component and all(c in on_text for c in prefix) and bool(texty),
          False, _lines(src, texty)),
        S("normpath/abspath (these do not follow symlinks)", bool(norm) and not resolve, False, _lines(src, norm)),
        S("non-string paths refused (isinstance ... str)", bool(typed), True, _lines(src, typed)),
        S("NUL bytes refused", bool(nul), True, _lines(src, nul)),
    ]


def _dispatch_tool(fn, src):
    S = lambda *a: Signal(3, "dispatch_tool", *a)  # noqa: E731
    root_arg = [n for n in ast.walk(fn) if isinstance(n, ast.Constant) and n.value in ("repo_root", "root")]
    lookup = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == "TOOL_FUNCTIONS"]
    dynamic = _calls(fn, "getattr") + _calls(fn, "globals") + _calls(fn, "eval")
    checked = _calls(fn, "check_arguments")
    handlers = [h for h in ast.walk(fn) if isinstance(h, ast.ExceptHandler)]
    return [
        S("repo_root read from the arguments", bool(root_arg), False, _lines(src, root_arg)),
        S("tools looked up in TOOL_FUNCTIONS", bool(lookup), True, _lines(src, lookup)),
        S("getattr/globals/eval used to find a tool", bool(dynamic), False, _lines(src, dynamic)),
        S("check_arguments called", bool(checked), True, _lines(src, checked)),
        S("exceptions turned into results (except clauses)", bool(handlers), True, _lines(src, handlers)),
    ]


RULES = {
    "agent_loop.py": {"run_agent": _run_agent, "parse_tool_calls": _parse_tool_calls},
    "tools.py": {"safe_resolve": _safe_resolve, "dispatch_tool": _dispatch_tool},
}


# --------------------------------------------------------------------------- integrity

def _learner_names(module: str) -> list:
    return [q.split(".")[1] for q in LEARNER_FUNCTIONS if q.split(".")[0] + ".py" == module]


def _outside_learner_functions(tree, module: str) -> dict:
    """Top-level name (or, for an import or other statement, its own text) -> AST dump, learner
    function bodies reduced to their docstring. Keyed by content, never by line number, so an added
    import or helper shifts nothing else."""
    learner = set(_learner_names(module))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in learner:
            node = copy.copy(node)
            node.body = node.body[:1]
        names = [getattr(node, "name", None)] if hasattr(node, "name") else \
            [t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)]
        key = names[0] if names and names[0] else _statement(node)
        out[key] = out.get(key, "") + ast.dump(node, include_attributes=False)
    return out


@functools.lru_cache(maxsize=8)
def _shipped(module: str) -> tuple:
    """_outside_learner_functions of every shipped version of ``module``: the same for every learner,
    so parsed once per grader process (read only by _changed_names)."""
    return tuple(_outside_learner_functions(ast.parse(t), module) for t in history.versions(f"code/{module}")
                 if _parses(t))


def _statement(node) -> str:
    try:
        return " ".join(ast.unparse(node).split())[:80]
    except (ValueError, RecursionError):
        return type(node).__name__


def _changed_names(theirs: dict, shipped_versions: list) -> tuple[list, list]:
    """(provided definitions changed or removed, top-level things added), against the closest
    shipped version."""
    best = None
    for ours in shipped_versions:
        changed = sorted(k for k in ours if theirs.get(k) != ours[k])
        added = sorted(k for k in theirs if k not in ours)
        if best is None or len(changed) + len(added) < len(best[0]) + len(best[1]):
            best = (changed, added)
    return best or ([], [])


def _is_stub(fn) -> bool:
    return any(isinstance(n, ast.Raise) and "NotImplementedError" in ast.dump(n) for n in ast.walk(fn))


def _body(fn) -> str:
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(getattr(fn.body[0], "value", None), ast.Constant) else fn.body
    return "\n".join(ast.unparse(s) for s in body)


def empty_integrity() -> dict:
    return {"modules": {}, "functions": {}, "guarded_edited": [], "guarded_missing": [], "guarded_added": [],
            "provided_edited": [], "not_shipped": [], "refused_modules": []}


def integrity(sub: Path) -> dict:
    """What changed in the submission compared with the lab it came from."""
    report = empty_integrity()
    reference = LAB_ROOT / "rubric" / "reference"
    for module in LEARNER_MODULES:
        entry = report["modules"][module] = {"exists": (sub / "code" / module).is_file(), "error": "", "changed": []}
        tree, _, error = parse(sub / "code" / module) if entry["exists"] else (None, "", "missing")
        entry["error"] = error
        if tree is None:
            continue
        entry["changed"], entry["added"] = _changed_names(_outside_learner_functions(tree, module), _shipped(module))
        ref_tree, _, _ = parse(reference / module)
        for name in _learner_names(module):
            fn, ref = function(tree, name), function(ref_tree, name) if ref_tree else None
            info = {"module": module, "exists": fn is not None}
            if fn is not None:
                info["stub"] = _is_stub(fn)
                info["lines"] = (fn.end_lineno or fn.lineno) - fn.lineno + 1
                if ref is not None and not info["stub"]:
                    ours, theirs = _body(ref), _body(fn)
                    info["matches_reference"] = ours == theirs
                    info["similarity"] = round(difflib.SequenceMatcher(None, ours, theirs).ratio(), 2)
            report["functions"][f"{module[:-3]}.{name}"] = info
    for rel in sorted(history.shipped_paths("code/") | {p for p in GUARDED_FILES if (LAB_ROOT / p).is_file()}):
        if rel.endswith(".pyc") or rel.split("/")[-1] in LEARNER_MODULES and rel.count("/") == 1:
            continue
        guarded = rel.startswith(GUARDED) or rel in GUARDED_FILES
        theirs = sub / rel
        if not theirs.is_file():
            if guarded and (LAB_ROOT / rel).is_file() and rel.endswith(".py"):
                report["guarded_missing"].append(rel)
            continue
        if not history.is_shipped(rel, theirs.read_bytes()) and (guarded or rel.endswith(".py")):
            report["guarded_edited" if guarded else "provided_edited"].append(rel)
    report["not_shipped"], report["refused_modules"] = not_shipped(sub)
    for folder in ("code/tests", "code/harness"):
        if (sub / folder).is_dir():
            shipped = history.shipped_paths(folder + "/")
            report["guarded_added"] += sorted(p.relative_to(sub).as_posix() for p in (sub / folder).rglob("*.py")
                                              if p.relative_to(sub).as_posix() not in shipped)
    return report


def not_shipped(sub: Path, limit: int = 200) -> tuple[list, list]:
    """(every file under code/ that no version of the lab shipped, [(file, why refused)] for the
    ones that would shadow a module the lab, Python or an installed package loads)."""
    from grading.workspace import shadows, walk

    shipped = history.shipped_paths("code/")
    extra, refused = [], []
    code = sub / "code"
    if not code.is_dir():
        return extra, refused
    for here, dirs, files in walk(code):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            rel = (here / name).relative_to(sub).as_posix()
            if rel in shipped or name.endswith(".pyc") or (here == code and name in LEARNER_MODULES):
                continue
            if len(extra) < limit:
                extra.append(rel)
            why = shadows(name) if here == code and name.endswith((".py", ".pth")) else ""
            if why:
                refused.append((rel, why))
    return extra, refused


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


TEST_DEF = re.compile(r"^\s*def\s+(test_\w+)\s*\(", re.M)


def test_names(tests_dir: Path):
    """Names of the test functions in the learner's own copy of code/tests (text only, never run), or
    None when there is none to read: which guiding tests their clone of the lab had."""
    names = set()
    if tests_dir.is_symlink() or not tests_dir.is_dir():
        return None
    for path in sorted(tests_dir.glob("test_*.py"))[:50]:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        names |= set(TEST_DEF.findall(path.read_text(encoding="utf-8", errors="replace")))
    return names or None
