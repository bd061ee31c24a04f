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
         "It picks read_file or search_code by reading descriptions, so two near-identical descriptions would make it choose by "
         "position or at random. In the vague-tools run my scripted model picked the right tool 1 time out of "
         "5. A good description says what it returns, its limits and when to prefer it.",
    "3": "The model emits a tool call whose function.arguments is a JSON string. parse_tool_calls runs json.loads "
         "on that string inside a try, so broken JSON becomes a ToolCall with error set. run_agent appends the "
         "assistant turn, then dispatch_tool runs the tool with the root my code chose, and tool_result(call.id, "
         "text) answers the tool_call_id. The next request contains the whole history plus those results. The "
         "decoding is `json.loads` in parse_tool_calls ({{agent_loop.py:parse_tool_calls:json.loads}}).",
    "4": "A tool result answers one specific call by its tool_call_id, and the provider looks for that id in the "
         "assistant turn just before it. Without the assistant message the provider returns HTTP 400 because the "
         "results answer calls that are not in the conversation; the strict fake provider in the tests does the "
         "same. One result per id, in order, keeps parallel calls matched: my run_agent appends `assistant_turn` "
         "({{agent_loop.py:run_agent:assistant_turn}}) before any `tool_result`.",
    "5": "(a) Without max_steps a model that never stops would burn the budget: the runaway block showed 50 calls "
         "and a growing history. (b) Without safe_resolve the containment check is gone and ../outside leaks; "
         "visibility is a separate rule that still hides .env inside the root. (c) Without feeding results back "
         "the model repeats itself because it never sees an observation. My containment check is "
         "in safe_resolve ({{tools.py:safe_resolve:resolve()}} resolves first); .env is refused by the visibility rule.",
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


# Per break: hypothesis, the edit, a reading of the pasted block ({field} from it), the decision
# that prevents it ({{file:function:snippet}} becomes file:line in the learner's code), the cost.
BREAKS = {
    "runaway": (
        "With `while True:` in place of the cap, the scripted model asks for one more file on every turn and "
        "nothing in run_agent ends the run, so I expect the harness ceiling to stop it with the history growing.",
        "In agent_loop.run_agent I replaced the counted loop header with `while True:`.",
        "It made {steps} and the block says {ended}. Tokens in grew because each call resends the history.",
        "The counted loop in run_agent ({{agent_loop.py:run_agent:max_steps}}) caps model calls at `max_steps` "
        "and returns MAX_STEPS_REACHED after it.",
        "At the block's prices ({cost}) one run is cheap; a real model stuck like this burns it for every "
        "user, and the projection line shows the context window filling first."),
    "escape": (
        "With the containment check gone, the instruction planted in README.md should get `../outside/secret.txt` "
        "and the sibling `../repo_evil` read; `.env` should stay refused because visibility is a separate rule.",
        "In tools.safe_resolve I returned the resolved path without comparing it with the root.",
        "The block says leaked {leaked} and {escaped}; the `.env` probe was still refused by visibility.",
        "safe_resolve resolves first and then compares by components ({{tools.py:safe_resolve:resolve()}}); "
        "dispatch_tool passes the application's repo_root, never one from the arguments.",
        "A leaked secret cannot be taken back: one run that prints a key means a rotated key and an incident."),
    "amnesia": (
        "If run_agent never appends the tool results, the model sees no observation, so it should repeat its "
        "first search_code call until max_steps stops it.",
        "In agent_loop.run_agent I removed the `messages.append(tool_result(...))` line.",
        "The block says {results seen} and {repeats}: the same search again and again.",
        "run_agent appends `tool_result` for each call ({{agent_loop.py:run_agent:tool_result}}) right after "
        "the assistant turn.",
        "Every call is paid for ({cost}) and wasted, and the user waits for an answer that never comes."),
    "raw-arguments": (
        "Passing function.arguments to dispatch_tool as the raw string should make every call fail, because the "
        "tools need a dict; the model retries until max_steps.",
        "In agent_loop.parse_tool_calls I used the arguments string as it came instead of `json.loads` on it.",
        "The block says {tool calls} and {valid calls}: {first error}",
        "parse_tool_calls decodes the arguments with `json.loads` ({{agent_loop.py:parse_tool_calls:json.loads}}) "
        "and marks bad JSON with an error the model can read.",
        "Nothing leaks, but every step fails ({cost}) and the run ends with no answer."),
    "vague-tools": (
        "If read_file, search_code and list_directory are described in nearly the same words, the scripted "
        "model should choose by position and call the wrong tool for most of its five steps.",
        "I applied the harness's edit that gives the tools near-identical descriptions in TOOL_SCHEMAS.",
        "The block says {tool choice}; {tool calls}.",
        "Distinct descriptions in TOOL_SCHEMAS (what each returns and when to prefer it), which dispatch_tool "
        "looks up in TOOL_FUNCTIONS ({{tools.py:dispatch_tool:TOOL_FUNCTIONS}}).",
        "Wrong tools cost steps ({cost}) and trust: the answer rests on files the model never meant to read."),
}
INTERPRETATION = (
    "In my table the scripted bad run on shop-total-bug reads both files and cites grounded lines, yet `root` "
    "is NO and `symbols` 2/3: it never names price, so root cause named (1/1 against 0/1) separates the two "
    "runs there. The weakest component of the bad run is evidence read (5/5 against 2/5). Context hit is 5/5 "
    "for both runs because the scripted questions all start from the injected snippets.")
MY_CASE = [
    "- Question: why does order_total raise AttributeError?", "- Command: python evaluate.py",
    "- Trajectory: search_code, read_file shop/service.py, read_file shop/models.py",
    "- What the answer said: Item has no attribute cost.",
    "- Which components passed, which failed: context, read, tools, cited and grounded passed; root NO.",
    "- This is a reasoning failure, not a boundary failure: every boundary held and both files were read, "
    "yet the answer never joined price and cost.",
    "- A second pass that checks the answer names both symbols would catch it, measured by the root cause row."]


def _fill(text: str, fields: dict) -> str:
    return re.sub(r"\{([a-z ]+)\}", lambda m: fields.get(m.group(1), m.group(0)).split(";")[0], text)


def failure_analysis(filled: bool, mismatch: bool = False, parts: dict | None = None) -> str:
    """A filled FAILURE_ANALYSIS.md (``parts`` replaces the learner's prose: keys as in BREAKS plus
    "interpretation" and "my case")."""
    if not filled:
        return (LAB_ROOT / "FAILURE_ANALYSIS.md").read_text(encoding="utf-8")
    from grading.documents import parse_blocks
    blocks, parts = evidence_blocks(), parts or {}
    out = ["# Failure Analysis (Lesson 06, M6)", ""]
    for i, name in enumerate(("runaway", "escape", "amnesia", "raw-arguments", "vague-tools"), 1):
        block = blocks[name]
        if mismatch and name == "runaway":
            block = re.sub(r"^(steps\s*:).*$", r"\1 12 model calls", block, flags=re.M)
            block = re.sub(r"^(ended\s*:).*$", r"\1 max_steps: the loop returned MAX_STEPS_REACHED", block, flags=re.M)
        fields = parse_blocks(f"```text\n{block}```").get(name, {})
        hyp, changed, reading, decision, cost = (parts.get(k, v) for k, v in zip(
            ("hypothesis", "changed", "reading", "decision", "cost"), BREAKS[name]))
        out += [f"## Break {i}: {name}", "", "### Hypothesis", "", _fill(hyp, fields), "",
                "### What I changed", "", changed, "",
                "### Command", "", "```bash", "cd code", f"python break_and_observe.py {name}", "```", "",
                "### Evidence", "", "```text", block.rstrip("\n"), "```", "", _fill(reading, fields), "",
                "### Design decision that prevents it", "", decision, "",
                "### Production cost", "", _fill(cost, fields), ""]
    out += ["## Evaluation", "", "### Command", "", "```bash", "cd code", "python evaluate.py", "```", "",
            "### Component table", "", "```text", evaluation_table().rstrip("\n"), "```", "",
            "### What the numbers say", "", parts.get("interpretation", INTERPRETATION), "",
            "## Right evidence, wrong answer", "", "### My case", ""]
    mine = parts.get("my case", MY_CASE)
    return "\n".join(out + ([mine] if isinstance(mine, str) else list(mine)) + [""])


def resolve_refs(path: Path, code_dir: Path) -> None:
    """``{{file.py:function:snippet}}`` in a document becomes ``file.py:N``, N the first line of
    ``function`` (after its docstring) holding ``snippet``, as a learner would point at it."""
    def where(m):
        module, name, snippet = m.group(1), m.group(2), m.group(3)
        source = (code_dir / module).read_text(encoding="utf-8")
        node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
        lines = source.splitlines()
        for n in range(node.body[0].end_lineno + 1, node.end_lineno + 1):
            if snippet in lines[n - 1]:
                return f"{module}:{n}"
        return module
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"\{\{([\w.]+):(\w+):([^}]+)\}\}", where, text), encoding="utf-8")


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


FUNCTION_MODULE = {"safe_resolve": "tools.py", "dispatch_tool": "tools.py", "parse_tool_calls": "agent_loop.py",
                   "run_agent": "agent_loop.py"}


def make(dst: Path, *, code: str = "stub", mutant=None, docs: str = "template", mismatch: bool = False,
         tests_edited: bool = False, loop_forever: bool = False, import_crash: bool = False,
         functions: dict | None = None) -> Path:
    """A learner repository at ``dst``: the lab, with the chosen code and documents.

    ``functions`` (name -> body) is planted over ``code``: a learner's own work rather than a copy
    of rubric/reference/ (which the grader holds for a talk with the learner)."""
    shutil.copytree(LAB_ROOT, dst, ignore=_ignore)
    if code == "reference":
        for name in LEARNER_MODULES:
            shutil.copyfile(LAB_ROOT / "rubric" / "reference" / name, dst / "code" / name)
    for name, body in (functions or {}).items():
        plant(dst / "code" / FUNCTION_MODULE[name], name, body)
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
    for name in ("UNDERSTANDING.md", "FAILURE_ANALYSIS.md"):
        resolve_refs(dst / name, dst / "code")
    return dst
