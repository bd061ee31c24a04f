"""The course's own hand-graded class: each learner in rubric/checks/class/<name>/ as data.

    build(name, dst)   a learner repository at ``dst``: the lab (grading/synthetic.py), the shared
                       honest functions (class/own_functions.py) with the learner's functions.py on
                       top, and what recipe.json says differs (stubs left, edited tests, extra
                       files, a saved copilot run, changed documents).
    KEY                name -> {"C1": level or "HOLD", ...}, from class/key.json (written before the
                       grader was first run on the class).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from grading import synthetic

CLASS = Path(__file__).resolve().parent / "class"
KEY = {k: v["key"] for k, v in json.loads((CLASS / "key.json").read_text(encoding="utf-8")).items() if not k.startswith("_")}
GENERIC = json.loads((CLASS / "generic.json").read_text(encoding="utf-8"))
MODULE = synthetic.FUNCTION_MODULE


def _bodies(path: Path) -> dict:
    """function name -> its body's source (dedented), from a file of plain definitions."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            body = lines[node.body[0].lineno - 1:node.end_lineno]
            out[node.name] = "\n".join(line[4:] for line in body)
    return out


def own_bodies() -> dict:
    """The class's shared honest functions (name -> body), for synthetic.make(functions=...)."""
    return _bodies(CLASS / "own_functions.py")


def _saved_run(kind: str, sub: Path) -> dict:
    """A `copilot.py --json` run: 'checks_out' quotes the real file, 'invented' quotes lines it is not."""
    rel = "code/config.py"
    lines = (sub / rel).read_text(encoding="utf-8").splitlines()[:12]
    if kind == "invented":
        lines = ["GROQ_IS_DEFAULT = True  # the provider with the fastest free tier", "PROVIDERS = ['groq']"]
    body = "\n".join(f"{i:>5}| {text}" for i, text in enumerate(lines, 1))
    observation = f"[File: {rel} ({len(lines)} lines total) - showing lines 1-{len(lines)}]\n{body}"
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": rel})}}
    return {"question": "why does config default to Groq?", "model": "groq/openai/gpt-oss-120b",
            "answer": f"The provider order in {rel}:1-2 puts Groq first.", "termination": "answered", "exit_code": 0,
            "citations": [{"path": rel, "line": 1, "exists": True, "in_range": True, "seen": True, "grounded": True}],
            "tool_calls": [{"name": "read_file", "arguments": {"path": rel}}],
            "messages": [{"role": "user", "content": "why does config default to Groq?"},
                         {"role": "assistant", "content": None, "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call_1", "content": observation},
                         {"role": "assistant", "content": f"The provider order in {rel}:1-2 puts Groq first."}]}


def _understanding(recipe: dict) -> str:
    u = recipe.get("understanding", {})
    answers = dict(synthetic.ANSWERS)
    if u.get("answers") == "generic":
        answers = {k: GENERIC["starcall" if k == "StarcallOS" else "answers"] for k in answers}
    if "only" in u:
        answers = {k: v for k, v in answers.items() if k in u["only"]}
    saved, after = synthetic.ANSWERS, synthetic.AFTER
    try:  # synthetic.understanding reads its module's answers
        synthetic.ANSWERS = answers
        synthetic.AFTER = after if u.get("after_m6", True) and "only" not in u and u.get("answers") != "generic" else ""
        text = synthetic.understanding(True)
    finally:
        synthetic.ANSWERS, synthetic.AFTER = saved, after
    return text


def _failure(recipe: dict) -> str:
    f = recipe.get("failure", {})
    if f == "template":
        return synthetic.failure_analysis(False)
    parts = GENERIC["parts"] if f.get("parts") == "generic" else None
    text = synthetic.failure_analysis(True, parts=parts)
    for pattern, replacement in f.get("edits", []):
        text, n = re.subn(pattern, replacement, text)
        assert n, f"recipe edit {pattern!r} matched nothing"
    return text


def build(name: str, dst: Path) -> Path:
    folder = CLASS / name
    recipe = json.loads((folder / "recipe.json").read_text(encoding="utf-8"))
    bodies = own_bodies()
    if (folder / "functions.py").is_file():
        bodies.update(_bodies(folder / "functions.py"))
    bodies = {f: b for f, b in bodies.items() if f not in recipe.get("stubs", [])}
    sub = synthetic.make(dst, tests_edited=recipe.get("tests_edited", False), functions=bodies)
    for rel, text in recipe.get("extra_files", {}).items():
        (sub / rel).write_text(text, encoding="utf-8")
    (sub / "UNDERSTANDING.md").write_text(_understanding(recipe), encoding="utf-8")
    (sub / "FAILURE_ANALYSIS.md").write_text(_failure(recipe), encoding="utf-8")
    for doc in ("UNDERSTANDING.md", "FAILURE_ANALYSIS.md"):
        synthetic.resolve_refs(sub / doc, sub / "code")
    if recipe.get("saved_run"):
        (sub / "runs").mkdir()
        run = _saved_run(recipe["saved_run"], sub)
        (sub / "runs" / "why-groq.json").write_text(json.dumps(run, indent=1), encoding="utf-8")
    return sub

FUNCTION_NAMES = [f"{module[:-3]}.{name}" for name, module in MODULE.items()]
