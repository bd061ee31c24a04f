"""Synthetic submissions built from the lab itself, for rubric/checks/test_grade.py and the benchmark.

    make(dst, code="stub"|"reference", mutant=None, docs="template"|"filled", ...)

The filled documents are plausible answers written for these checks (not model answers); their
evidence blocks and evaluation table come from real runs of the lab's tools on the reference.
"""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

from grading import runner
from grading.workspace import LAB_ROOT, LEARNER_MODULES, SKIP_DIRS

ANSWERS = {
    "1": "Without tools the model only has my question and whatever it memorised, so for auth.py it would "
         "guess: that guess is a hallucination, fluent text with no evidence behind it. A better prompt cannot "
         "add the missing file. With read_file the loop becomes ReAct: a thought, an action, then an observation "
         "that comes from my dispatch_tool, so the next step rests on evidence from the repository.",
    "2": "Only the name, the description and the parameters schema reach the model; the function body never does. "
         "It picks a tool by reading descriptions, so two near-identical descriptions would make it choose by "
         "position or at random. In the vague-tools run my scripted model picked the wrong tool four times out of "
         "five. A good description says what it returns, its limits and when to prefer it.",
    "3": "The model emits a tool call whose function.arguments is a JSON string. parse_tool_calls runs json.loads "
         "on that string inside a try, so broken JSON becomes a ToolCall with error set. run_agent appends the "
         "assistant turn, then dispatch_tool runs the tool with the root my code chose, and tool_result(call.id, "
         "text) answers the tool_call_id. The next request contains the whole history plus those results.",
    "4": "A tool result answers one specific call by its tool_call_id, and the provider looks for that id in the "
         "assistant turn just before it. Without the assistant message the provider returns HTTP 400 because the "
         "results answer calls that are not in the conversation; the strict fake provider in the tests does the "
         "same. One result per id, in order, keeps parallel calls matched.",
    "5": "(a) Without max_steps a model that never stops would burn the budget: the runaway block showed 50 calls "
         "and a growing history. (b) Without safe_resolve the containment check is gone and ../outside leaks; "
         "visibility is a separate rule that still hides .env inside the root. (c) Without feeding results back "
         "the model repeats itself because it never sees an observation.",
    "6": "For 'what does TAX_RATE default to?' the injected snippet from shop/settings.py is all the context the "
         "model needs. For 'why does order_total raise AttributeError?' it must read service.py, see item.cost, "
         "then search for the Item class: the second tool call depends on the first observation, which retrieval "
         "cannot predict. Injection costs one call; the loop costs several.",
    "7": "I still do not see how a provider decides between answering and calling another tool when the evidence "
         "is ambiguous. I tried lowering max_steps and watching where the runs stopped. Would logging the "
         "reasoning trace with --trace on ten real questions show a pattern?",
    "StarcallOS": "A StarcallOS capability that files a user's documents should take its root from the application, "
                  "never from the model, exactly like dispatch_tool binding repo_root. It applies to the document "
                  "organiser: the model proposes moves, the application checks each path against the user's folder. "
                  "Without it one injected instruction in a document could move files out of the user's space, "
                  "and refusals should come back as observations so the model can correct itself.",
}
AFTER = "After M6: my prediction for the runaway was right about the cost but wrong about the cause of the stop."


def _run(args) -> str:
    env = runner.child_env(Path(sys.prefix))
    env.pop("HOME", None)
    proc = subprocess.run([sys.executable, *args], cwd=LAB_ROOT / "code", env=env, capture_output=True,
                          text=True, timeout=120)
    return proc.stdout


@functools.lru_cache(maxsize=1)
def evidence_blocks() -> dict:
    """scenario -> the ```text block break_and_observe.py prints for its simulated break."""
    text = _run(["break_and_observe.py", "all", "--simulate"])
    blocks = re.findall(r"```text\n(.*?)```", text, re.S)
    out = {}
    for b in blocks:
        name = re.search(r"scenario\s*:\s*([\w-]+)", b).group(1)
        out[name] = re.sub(r"^(ran\s*:).*$", r"\1 your code (code/)", b, flags=re.M)
    return out


@functools.lru_cache(maxsize=1)
def evaluation_table() -> str:
    return _run(["evaluate.py", "--reference"])


def understanding(filled: bool) -> str:
    text = (LAB_ROOT / "UNDERSTANDING.md").read_text(encoding="utf-8")
    if not filled:
        return text
    out, key = [], None
    for line in text.splitlines():
        m = re.match(r"## (\d)\.", line) or (re.match(r"## (StarcallOS)", line))
        if m:
            key = m.group(1)
        out.append(line)
        if line.strip() == "**Your answer:**" and key in ANSWERS:
            out += ["", ANSWERS[key]]
        elif line.strip() == "**After M6:**" and key in ANSWERS:
            out += ["", AFTER]
    return "\n".join(out) + "\n"


def failure_analysis(filled: bool, mismatch: bool = False) -> str:
    if not filled:
        return (LAB_ROOT / "FAILURE_ANALYSIS.md").read_text(encoding="utf-8")
    blocks = evidence_blocks()
    parts = ["# Failure Analysis (Lesson 06, M6)", ""]
    for i, name in enumerate(("runaway", "escape", "amnesia", "raw-arguments", "vague-tools"), 1):
        block = blocks[name]
        if mismatch and name == "runaway":
            block = re.sub(r"^(steps\s*:).*$", r"\1 12 model calls", block, flags=re.M)
            block = re.sub(r"^(ended\s*:).*$", r"\1 max_steps: the loop returned MAX_STEPS_REACHED", block, flags=re.M)
        parts += [f"## Break {i}: {name}", "", "### Hypothesis", "",
                  f"I expect the {name} break to show its failure within the harness ceiling, because the one "
                  "decision that prevents it is gone and nothing else in the loop stands in for it.", "",
                  "### What I changed", "", f"I made the edit the harness suggests for {name} in my own code.", "",
                  "### Command", "", "```bash", "cd code", f"python break_and_observe.py {name}", "```", "",
                  "### Evidence", "", "```text", block.rstrip("\n"), "```", "",
                  "The number that surprised me most was the token count.", "",
                  "### Design decision that prevents it", "", "The matching line in my code prevents it; I point at it "
                  "in the review.", "", "### Production cost", "", "At the block's prices one run is cheap, a hundred "
                  "a day add up, and the user waits for nothing.", ""]
    parts += ["## Evaluation", "", "### Command", "", "```bash", "cd code", "python evaluate.py", "```", "",
              "### Component table", "", "```text", evaluation_table().rstrip("\n"), "```", "",
              "### What the numbers say", "",
              "The root cause component alone separates the good and the bad run on shop-total-bug: the bad run "
              "reads both files, cites grounded lines and still names only cost. The weakest component of the bad "
              "run is evidence read, which fails on three questions. Valid tool use is the same for the good runs "
              "because the scripted model never repeats itself there; a real model would.", "",
              "## Right evidence, wrong answer", "", "### My case", "",
              "- Question: why does order_total raise AttributeError?", "- Command: python evaluate.py",
              "- Trajectory: search_code, read_file service.py, read_file models.py",
              "- What the answer said: Item has no attribute cost.",
              "- This is a reasoning failure, not a boundary failure: every boundary held and both files were read, "
              "yet the answer never joined price and cost. A second pass that checks the answer names both would "
              "catch it, measured by the root cause component.", ""]
    return "\n".join(parts)


def _ignore(folder, names):
    return [n for n in names if n in SKIP_DIRS or (n == ".env" and not folder.endswith("fixture_repo"))]


def plant(path: Path, function: str, body: str) -> None:
    """Replace ``function``'s body (after its docstring) in the module at ``path``."""
    source = path.read_text(encoding="utf-8")
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function)
    lines = source.splitlines(keepends=True)
    text = "".join("    " + line + "\n" if line else "\n" for line in body.strip("\n").splitlines())
    lines[node.body[0].end_lineno:node.end_lineno] = [text]
    path.write_text("".join(lines), encoding="utf-8")


def make(dst: Path, *, code: str = "stub", mutant=None, docs: str = "template", mismatch: bool = False,
         tests_edited: bool = False, loop_forever: bool = False, import_crash: bool = False) -> Path:
    """A learner repository at ``dst``: the lab, with the chosen code and documents."""
    shutil.copytree(LAB_ROOT, dst, ignore=_ignore)
    if code == "reference":
        for name in LEARNER_MODULES:
            shutil.copyfile(LAB_ROOT / "rubric" / "reference" / name, dst / "code" / name)
    if mutant is not None:
        plant(dst / "code" / mutant.module, mutant.function, mutant.body)
    if loop_forever:
        plant(dst / "code" / "agent_loop.py", "run_agent", "while True:\n    pass")
    if import_crash:
        path = dst / "code" / "tools.py"
        path.write_text(path.read_text(encoding="utf-8") + "\nraise RuntimeError('crash at import time')\n", encoding="utf-8")
    if tests_edited:
        path = dst / "code" / "tests" / "test_m1_sandbox.py"
        path.write_text("import pytest\npytestmark = pytest.mark.skip('done')\n" + path.read_text(encoding="utf-8"),
                        encoding="utf-8")
    (dst / "UNDERSTANDING.md").write_text(understanding(docs == "filled"), encoding="utf-8")
    (dst / "FAILURE_ANALYSIS.md").write_text(failure_analysis(docs == "filled", mismatch), encoding="utf-8")
    return dst
