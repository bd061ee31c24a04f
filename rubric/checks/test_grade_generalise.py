"""Course checks: the grader judges C1-C3 on behaviour, holds only on evidence, and finds peers who copy.

Learners written here by another hand than the rules: honest solutions in idioms the reference does
not use (for/else, a counted while loop, realpath + commonpath, `in target.parents`, a
functools.partial dispatch table, `type(args) is not dict`, a list comprehension with extend) must
keep their level and get no HOLD; wrong ones the guiding tests let through (a cap broken JSON skips,
the answer on the last step dropped, arguments passed by position, a thought taken for the answer,
an empty reply ignored, a stop at the first tool error, ast.literal_eval) must be caught by the
probes; a reference copy with `pass` added and names changed is held, one function written from
the hints is not; two learners sharing renamed, reordered code and reworded prose are both held,
learners who wrote the obvious code are not.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import battery, copying, criteria, learner_code, peers, runner, sandbox, synthetic, workspace  # noqa: E402
from grading.attacks import EDGE_INPUTS  # noqa: E402
from grading.workspace import LAB_ROOT  # noqa: E402

BWRAP_WHY = sandbox.choose("bubblewrap")[1]
needs_bwrap = pytest.mark.skipif(bool(BWRAP_WHY), reason=f"bubblewrap cannot run here: {BWRAP_WHY}")

# --------------------------------------------------------------------------- honest learners

COMMONPATH_RESOLVE = '''
if type(rel_path) is not str or "\\0" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("refusing that path: give a relative path inside the repository as text")
base = os.path.realpath(repo_root)
try:
    where = os.path.realpath(os.path.join(base, rel_path))
except (OSError, RuntimeError) as problem:
    raise ValueError(f"could not follow {rel_path!r}: {problem}") from None
if os.path.commonpath([base, where]) != base:
    raise ValueError(f"{rel_path!r} is not inside the repository")
return Path(where)
'''
PARENTS_RESOLVE = '''
if not isinstance(rel_path, str):
    raise ValueError("paths are strings")
if rel_path.find("\\x00") >= 0 or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("path refused (NUL byte or too long)")
try:
    top = Path(repo_root).resolve(strict=False)
    full = top.joinpath(rel_path).resolve()
except (OSError, RuntimeError):
    raise ValueError("that path cannot be resolved") from None
if full != top and top not in full.parents:
    raise ValueError("outside the project")
return full
'''
PARTIAL_DISPATCH = '''
import functools
if not isinstance(name, str) or name not in TOOL_FUNCTIONS:
    return f"Error: no tool called {shorten(name)}; the tools are {sorted(TOOL_FUNCTIONS)}"
if type(args) is not dict:
    return "Error: arguments must be a JSON object"
complaint = check_arguments(name, args)
if complaint:
    return "Error: " + complaint
table = {tool: functools.partial(fn, repo_root) for tool, fn in TOOL_FUNCTIONS.items()}
try:
    return table[name](**args)
except (ValueError, ToolError) as exc:
    return "Error: " + str(exc)
except Exception as exc:
    return f"Error: the tool broke ({type(exc).__name__}); try other arguments"
'''
COMPREHENSION_PARSE = '''
raw_calls = getattr(message, "tool_calls", None) or []

def decode(raw):
    text = raw.function.arguments
    if not text:
        return ToolCall(raw.id, raw.function.name, {})
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, TypeError) as err:
        return ToolCall(raw.id, raw.function.name, {}, f"arguments are not valid JSON: {err}")
    if type(value) is not dict:
        return ToolCall(raw.id, raw.function.name, {}, "arguments must be a JSON object, not " + type(value).__name__)
    return ToolCall(raw.id, raw.function.name, value)

out = []
out.extend([decode(raw) for raw in raw_calls])
return out
'''
FOR_ELSE_LOOP = '''
for _turn in range(max_steps):
    reply = complete(messages, TOOL_SCHEMAS)
    wanted = parse_tool_calls(reply)
    if not wanted:
        text = getattr(reply, "content", None) or ""
        messages.append({"role": "assistant", "content": text})
        break
    messages.append(assistant_turn(reply))
    messages.extend([tool_result(c.id, "Error: " + c.error if c.error else dispatch_tool(c.name, c.arguments, repo_root))
                     for c in wanted])
else:
    return MAX_STEPS_REACHED + f": stopped after {max_steps} model calls"
return text
'''
WHILE_LOOP = '''
used = 0
while used < max_steps:
    used += 1
    reply = complete(messages, TOOL_SCHEMAS)
    todo = parse_tool_calls(reply)
    if len(todo) == 0:
        final = reply.content if getattr(reply, "content", None) else ""
        messages.append({"role": "assistant", "content": final})
        return final
    messages.append(assistant_turn(reply))
    for item in todo:
        if item.error:
            messages.append(tool_result(item.id, f"Error: {item.error}"))
            continue
        messages.append(tool_result(item.id, dispatch_tool(item.name, item.arguments, repo_root)))
return f"{MAX_STEPS_REACHED} ({used} model calls, no answer)"
'''
# The docstring appends an answer's text; an empty reply only ends the run with "": not appending it is
# allowed (no guiding test asks for it), so a probe must not call it wrong.
EMPTY_NOT_KEPT_LOOP = '''
steps_left = max_steps
while steps_left > 0:
    steps_left -= 1
    msg = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(msg)
    if not calls:
        said = msg.content or ""
        if said:
            messages.append({"role": "assistant", "content": said})
        return said
    messages.append(assistant_turn(msg))
    for c in calls:
        out = ("Error: " + c.error) if c.error else dispatch_tool(c.name, c.arguments, repo_root)
        messages.append(tool_result(c.id, out))
return MAX_STEPS_REACHED + " (no answer within the budget)"
'''
HONEST = {
    "hana": {"safe_resolve": COMMONPATH_RESOLVE, "dispatch_tool": PARTIAL_DISPATCH,
             "parse_tool_calls": COMPREHENSION_PARSE, "run_agent": FOR_ELSE_LOOP},
    "ravi": {"safe_resolve": PARENTS_RESOLVE, "dispatch_tool": PARTIAL_DISPATCH,
             "parse_tool_calls": COMPREHENSION_PARSE, "run_agent": WHILE_LOOP},
    "tess": {"safe_resolve": PARENTS_RESOLVE, "dispatch_tool": PARTIAL_DISPATCH,
             "parse_tool_calls": COMPREHENSION_PARSE, "run_agent": EMPTY_NOT_KEPT_LOOP},
}

# --------------------------------------------------------------------------- wrong learners

SKIPPED_CAP = '''
steps = 0
while steps < max_steps:
    reply = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(reply)
    if not calls:
        messages.append({"role": "assistant", "content": reply.content or ""})
        return reply.content or ""
    messages.append(assistant_turn(reply))
    useful = True
    for call in calls:
        if call.error:
            useful = False
            messages.append(tool_result(call.id, "Error: " + call.error))
        else:
            messages.append(tool_result(call.id, dispatch_tool(call.name, call.arguments, repo_root)))
    if useful:
        steps += 1   # only a step that did something counts
return MAX_STEPS_REACHED + ": out of steps"
'''
LAST_STEP_DROPPED = '''
for step in range(max_steps):
    reply = complete(messages, TOOL_SCHEMAS)
    if step == max_steps - 1:
        break
    calls = parse_tool_calls(reply)
    if not calls:
        messages.append({"role": "assistant", "content": reply.content or ""})
        return reply.content or ""
    messages.append(assistant_turn(reply))
    for call in calls:
        result = "Error: " + call.error if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return MAX_STEPS_REACHED + ": out of steps"
'''
THOUGHT_ENDS = '''
for step in range(max_steps):
    reply = complete(messages, TOOL_SCHEMAS)
    if reply.content:
        messages.append({"role": "assistant", "content": reply.content})
        return reply.content
    calls = parse_tool_calls(reply)
    if not calls:
        messages.append({"role": "assistant", "content": ""})
        return ""
    messages.append(assistant_turn(reply))
    for call in calls:
        result = "Error: " + call.error if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return MAX_STEPS_REACHED + ": out of steps"
'''
EMPTY_IGNORED = '''
for step in range(max_steps):
    reply = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(reply)
    if not calls and reply.content:
        messages.append({"role": "assistant", "content": reply.content})
        return reply.content
    messages.append(assistant_turn(reply))
    for call in calls:
        result = "Error: " + call.error if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return MAX_STEPS_REACHED + ": out of steps"
'''
STRIPS_NONE = """
for step in range(max_steps):
    reply = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(reply)
    if not calls:
        text = reply.content.strip()
        messages.append({"role": "assistant", "content": text})
        return text
    messages.append(assistant_turn(reply))
    for call in calls:
        result = "Error: " + call.error if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return MAX_STEPS_REACHED + ": out of steps"
"""
STOPS_AT_ERROR = '''
for step in range(max_steps):
    reply = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(reply)
    if not calls:
        messages.append({"role": "assistant", "content": reply.content or ""})
        return reply.content or ""
    messages.append(assistant_turn(reply))
    for call in calls:
        result = "Error: " + call.error if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
        if result.startswith("Error") and not call.error:
            return "the tool failed: " + result
return MAX_STEPS_REACHED + ": out of steps"
'''
POSITIONAL_DISPATCH = '''
fn = TOOL_FUNCTIONS.get(name) if isinstance(name, str) else None
if fn is None:
    return f"Error: unknown tool {shorten(name)}"
if not isinstance(args, dict):
    return "Error: arguments must be an object"
problem = check_arguments(name, args)
if problem:
    return f"Error: {problem}."
try:
    return fn(repo_root, *args.values())
except (ValueError, ToolError) as exc:
    return f"Error: {exc}"
except Exception as exc:
    return f"Error: {type(exc).__name__}"
'''
LITERAL_EVAL_PARSE = '''
import ast
calls = []
for raw in getattr(message, "tool_calls", None) or []:
    text = raw.function.arguments
    try:
        value = ast.literal_eval(text) if text else {}
    except (ValueError, SyntaxError, RecursionError, TypeError, MemoryError) as exc:
        calls.append(ToolCall(raw.id, raw.function.name, {}, f"could not parse: {exc}"))
        continue
    if not isinstance(value, dict):
        calls.append(ToolCall(raw.id, raw.function.name, {}, "not an object"))
        continue
    calls.append(ToolCall(raw.id, raw.function.name, value))
return calls
'''
WRONG = [  # (function, body, the probe that must see it, what it says)
    ("run_agent", SKIPPED_CAP, "malformed arguments on every turn", "did not return"),
    ("run_agent", LAST_STEP_DROPPED, "the answer on the last allowed step", "not the model's answer"),
    ("run_agent", THOUGHT_ENDS, "a thought beside a tool call", "not the model's answer"),
    ("run_agent", EMPTY_IGNORED, "an empty reply (no text, no calls)", "model calls, expected 1"),
    ("run_agent", STRIPS_NONE, "an empty reply with content None", "AttributeError"),
    ("run_agent", STOPS_AT_ERROR, "more tool calls after a tool error", "not the model's answer"),
    ("dispatch_tool", POSITIONAL_DISPATCH, "arguments in another key order", "a valid call was refused"),
    ("parse_tool_calls", LITERAL_EVAL_PARSE, "JSON with null, true and an escaped slash", "expected"),
]


def _code(dst: Path, bodies: dict) -> Path:
    """A learner's code/ folder: the shipped modules with ``bodies`` planted over the reference."""
    code = dst / "code"
    code.mkdir(parents=True)
    for module in ("tools.py", "agent_loop.py"):
        shutil.copy(LAB_ROOT / "rubric" / "reference" / module, code / module)
    for name, body in bodies.items():
        synthetic.plant(code / synthetic.FUNCTION_MODULE[name], name, body)
    return code


def _battery(tmp_path: Path, bodies: dict):
    sub = synthetic.make(tmp_path / "learner", code="reference", functions=bodies)
    lab, home, tree = tmp_path / "lab", tmp_path / "home", tmp_path / "tree"
    home.mkdir()
    tree.mkdir()
    workspace.build_lab(lab, sub / "code")
    b = battery.run_battery(lab, home, runner.DEFAULT_MEMORY_MB, box=sandbox.Box("bubblewrap", readonly=[lab, tree],
                            writable=[home]), base=tree)
    return sub, b


class _Board:
    """Every guiding test passing (the wrong learners here pass them all): only the probes can tell."""
    tests, collection_error = [], ""

    def state(self, milestone):
        return "passing"

    def of(self, milestone):
        return []

    def named(self, name):
        return [NS(name=name.split("::")[-1], outcome="passed", milestone=name.split("test_")[1][:2].upper())]


def _ev(sub: Path, b) -> dict:
    return {"board": _Board(), "battery": b, "signals": learner_code.signals(sub / "code"), "prose": {},
            "understanding": {"answers": []}, "failure": {}, "contradicted": [], "integrity": learner_code.empty_integrity()}


@needs_bwrap
@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_idioms_pass_every_probe_and_keep_their_level(tmp_path, name):
    sub, b = _battery(tmp_path, HONEST[name])
    wrong = [p for p in b.parsing + b.looping if p["result"] != "correct"]
    assert not wrong, wrong
    assert not b.broken(), {k: v["status"] for k, v in b.classes().items()}
    rubric = criteria.load_rubric()
    ev = _ev(sub, b)
    loop, box = criteria._loop(rubric[2], ev), criteria._sandbox(rubric[3], ev)
    # Proficient: the tests and probes pass; Exemplary would need the write-up these learners lack
    assert (loop.level, loop.rule) == ("Proficient", "C2.tests_pass"), loop.reasons
    assert (box.level, box.rule) == ("Proficient", "C3.tests_and_battery_hold"), box.reasons
    assert criteria._hold(2, ev) is None and not copying.reference_copy(sub / "code")["hold"]
    # the same code explained in the learner's own terms: Exemplary, whatever the idiom
    ev["prose"] = {"answers": {k: {"specific": ["agent_loop.py:120"], "engages": True} for k in ("3", "4", "5")}}
    ev["understanding"] = {"answers": [{"key": "5", "answered": True, "excerpt": "...", "after_text": "",
                                        "text": "(a) without the cap a model that keeps calling tools is called forever; "
                                                "(b) containment is my realpath check; .env is a separate visibility rule"}]}
    ev["failure"] = {"breaks": {"escape": {"complete": True, "excerpts": {"Hypothesis": "it leaks"},
                                           "prose": {"Evidence": "3 of 5 probes leaked; .env was refused"}}}}
    assert criteria._loop(rubric[2], ev).level == "Exemplary", criteria._loop(rubric[2], ev).reasons
    assert criteria._sandbox(rubric[3], ev).level == "Exemplary", criteria._sandbox(rubric[3], ev).reasons


@needs_bwrap
@pytest.mark.parametrize("function,body,probe,says", WRONG, ids=[w[2] for w in WRONG])
def test_wrong_solutions_the_tests_let_through_are_seen_by_a_probe(tmp_path, function, body, probe, says):
    sub, b = _battery(tmp_path, {function: body})
    seen = {p["probe"]: p for p in b.parsing + b.looping}
    assert seen[probe]["result"] != "correct" and says in seen[probe]["detail"], seen[probe]
    suggestion = criteria._loop(criteria.load_rubric()[2], _ev(sub, b))
    # an input the level table does not name (a reply whose content is None) failing alone is shown
    # to the instructor at Proficient (READ); every other probe decides Developing or Missing
    want = (("Proficient", "READ"),) if probe in EDGE_INPUTS else (("Developing", None), ("Missing", None))
    assert (suggestion.level, suggestion.mark) in want, (suggestion.level, suggestion.reasons)
    assert any(probe in r for r in suggestion.reasons), suggestion.reasons


@needs_bwrap
@pytest.mark.parametrize("kind", ["while True", "one call too many"])
def test_an_observed_uncapped_loop_is_missing_and_an_off_by_one_cap_developing(tmp_path, kind):
    body = WHILE_TRUE if kind == "while True" else WHILE_LOOP.replace("while used < max_steps", "while used <= max_steps")
    sub, b = _battery(tmp_path, {"run_agent": body})
    c2 = criteria._loop(criteria.load_rubric()[2], _ev(sub, b))
    assert (c2.level, c2.rule) == (("Missing", "C2.red_flag") if kind == "while True" else ("Developing", "C2.probes_fail")), \
        (c2.level, c2.reasons)


WHILE_TRUE = '''
while True:
    reply = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(reply)
    if not calls:
        messages.append({"role": "assistant", "content": reply.content or ""})
        return reply.content or ""
    messages.append(assistant_turn(reply))
    for call in calls:
        messages.append(tool_result(call.id, "Error: " + call.error if call.error else
                                    dispatch_tool(call.name, call.arguments, repo_root)))
'''


def test_an_uncapped_loop_is_missing_only_when_nothing_reads_max_steps(tmp_path):
    """The one text signal that may decide: no bound on model calls at all, when the loop was not observed."""
    forever = _code(tmp_path / "a", {"run_agent": "while True:\n    reply = complete(messages, TOOL_SCHEMAS)\n"
                                                  "    if not parse_tool_calls(reply):\n        return reply.content or ''\n"})
    capped = _code(tmp_path / "b", {"run_agent": WHILE_LOOP})
    unobserved = battery.Battery(error="the battery did not start")
    rubric = criteria.load_rubric()
    for code, level in ((forever, "Missing"), (capped, "Proficient")):
        ev = _ev(code.parent, unobserved)
        assert criteria._loop(rubric[2], ev).level == level, criteria._loop(rubric[2], ev).reasons


# --------------------------------------------------------------------------- copying the reference

def _reference_body(name: str) -> str:
    import ast
    source = (LAB_ROOT / "rubric" / "reference" / synthetic.FUNCTION_MODULE[name]).read_text(encoding="utf-8")
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = source.splitlines()
    import textwrap
    return textwrap.dedent("\n".join(lines[fn.body[1].lineno - 1:fn.end_lineno]))


def test_a_reference_copy_with_pass_added_and_names_changed_is_held_with_its_lines(tmp_path):
    bodies = {}
    for name, renames in (("safe_resolve", (("target", "dest"), ("root", "base"))),
                          ("dispatch_tool", (("fn", "func"), ("problem", "issue"))),
                          ("parse_tool_calls", (("arguments", "parsed"), ("calls", "found"))),
                          ("run_agent", (("result", "out"), ("calls", "todo")))):
        body = _reference_body(name)
        for old, new in renames:
            body = re.sub(rf"\b{old}\b", new, body)
        bodies[name] = "pass\n" + body.replace("\n    return", "\n    pass\n    return", 1)
    copy = copying.reference_copy(_code(tmp_path / "copy", bodies))
    assert copy["hold"] and len(copy["functions"]) >= 2, copy
    assert any("|" in line and "reference" in line for line in copy["lines"]), copy["lines"]


FROM_THE_HINT = '''
for step in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        answer = getattr(message, "content", None) or ""
        messages.append({"role": "assistant", "content": answer})
        return answer
    messages.append(assistant_turn(message))
    for call in calls:
        if call.error:
            result = f"Error: {call.error}"
        else:
            result = dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return f"{MAX_STEPS_REACHED}: gave up after {max_steps} steps"
'''


NATURAL_RESOLVE = '''
if not isinstance(rel_path, str):
    raise ValueError(f"path must be a string, got {type(rel_path).__name__}")
if "\\x00" in rel_path:
    raise ValueError("path contains a NUL byte")
if len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("path too long")
try:
    base = Path(repo_root).resolve()
    dest = (base / rel_path).resolve()
except (OSError, RuntimeError) as err:
    raise ValueError(f"bad path: {err}") from None
if not dest.is_relative_to(base):
    raise ValueError("outside the repository")
return dest
'''


def test_one_function_written_from_the_hints_is_a_note_not_a_hold(tmp_path):
    """Hint M4:3's pseudo-code written out, and safe_resolve from its docstring's hint with two
    messages anyone would write: the reference's statements, not its surface, so no HOLD."""
    copy = copying.reference_copy(_code(tmp_path / "one", {**HONEST["hana"], "run_agent": FROM_THE_HINT,
                                                           "safe_resolve": NATURAL_RESOLVE}))
    assert not copy["hold"] and copy["notes"] and copy["functions"] == [], copy
    assert len(copy["alike"]) == 2 and len(copy["texts"]) == 2, copy
    for name in HONEST:
        assert not copying.reference_copy(_code(tmp_path / name, HONEST[name]))["hold"], name


# --------------------------------------------------------------------------- copying between learners

RELATIVE_TO_RESOLVE = '''
if not isinstance(rel_path, str) or "\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("unusable path")
try:
    inside = Path(repo_root).resolve()
    asked = (inside / rel_path).resolve()
    asked.relative_to(inside)
except (OSError, RuntimeError, ValueError):
    raise ValueError(f"{rel_path!r} is outside the repository or cannot be resolved") from None
return asked
'''
PROSE_HANA = """# Understanding

My loop in agent_loop.py keeps a for/else so the cap message is only built when the model never answered.
I tried a while loop first but the counter drifted when a turn had two calls, so I gave up on it.
The cap matters because the model decides whether to continue, and a confused model just keeps asking for files.
Order matters: the provider refuses a tool message whose call id is not in the assistant turn right before it.
When I broke the order on purpose the strict fake server answered with a 400 and named the orphan id.
For containment I compare realpath results with commonpath because the docs warned me about string prefixes.
My sibling folder test repo2 showed why: a prefix check let it through while commonpath refused it.
The .env rule is separate because a file inside the repository can still be a secret the model should not read.
I was surprised that a symlink loop raised RuntimeError on my laptop and OSError on the lab machine.
Next time I would log every refused path so I can see which attacks a model actually tries in practice.
"""
PROSE_RAVI = """# Understanding

I count model calls with a plain counter in a while loop, bumped before each call so nothing can skip it.
The thing that confused me longest was why a list of arguments is refused even though it is valid JSON.
Without the assistant turn first, the tool results answer questions nobody asked, and the provider complains.
The sandbox compares the resolved target with its parents, which also survives a root given with a slash.
Visibility of .env is about secrets rather than location, so it lives in a different function on purpose.
During the runaway break my code stopped at the cap, while the broken copy ran on until the harness ceiling.
Parsing an empty arguments string as an empty object was the only case I had to look up in the docstring.
My prediction for the amnesia run was wrong: I expected a few repeats and got nine identical calls in a row.
If I had more time I would measure how often a real model sends broken JSON compared with the scripted one.
"""
PROSE_LENA = """# Understanding

The step ceiling lives in my counted loop, and I return the marker string the moment it runs out of calls.
A model that always wants one more file would otherwise burn through the whole budget for nothing useful.
I put the assistant message ahead of its results because each result has to answer a call the model made.
Broken arguments become an observation with an error, so the model gets a chance to repair its own call.
Resolving before judging is what stops a symlinked folder from smuggling the read out of the project.
The secret file stays hidden by a second rule, since it sits inside the project and passes containment.
The evaluation table showed my weakest part was evidence read, two of five, which matches what I saw.
"""


def _reword(text: str) -> str:
    """A copier's disguise: sentences reordered, a few words swapped, the same substance."""
    swaps = (("My loop", "The loop"), ("because", "since"), ("I tried", "I first tried"), ("just keeps", "keeps"),
             ("on purpose", "deliberately"), ("surprised", "astonished"), ("Next time", "Another time"),
             ("the docs warned me", "the lesson warned me"), ("showed why", "proved the point"))
    for old, new in swaps:
        text = text.replace(old, new)
    head, *lines = text.strip().splitlines()
    return head + "\n" + "\n".join(reversed([x for x in lines if x])) + "\n"


def _rename(body: str) -> str:
    for old, new in (("reply", "answer_msg"), ("wanted", "requested"), ("text", "final_text"), ("base", "home_dir"),
                     ("where", "candidate"), ("problem", "err"), ("complaint", "issue"), ("table", "bound"),
                     ("value", "decoded"), ("out", "result_list")):
        body = body.replace(old, new)
    return body


def _learner(dst: Path, bodies: dict, prose: str, reverse: bool = False) -> Path:
    _code(dst, bodies)
    if reverse:   # the functions in another order in each file
        for module in ("tools.py", "agent_loop.py"):
            path = dst / "code" / module
            import ast
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
            lines = source.splitlines(keepends=True)
            names = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in bodies]
            first, second = names[0], names[-1]
            a, b = "".join(lines[first.lineno - 1:first.end_lineno]), "".join(lines[second.lineno - 1:second.end_lineno])
            path.write_text(source.replace(a, "\0").replace(b, a).replace("\0", b), encoding="utf-8")
    (dst / "UNDERSTANDING.md").write_text(prose, encoding="utf-8")
    (dst / "FAILURE_ANALYSIS.md").write_text("# Failure analysis\n", encoding="utf-8")
    return dst


def test_two_learners_sharing_renamed_reordered_code_and_reworded_prose_are_both_held(tmp_path):
    ravi = {"safe_resolve": PARENTS_RESOLVE, "run_agent": WHILE_LOOP}   # the obvious rest: the reference's
    lena = {"safe_resolve": RELATIVE_TO_RESOLVE}
    base = tmp_path / "class"
    _learner(base / "hana", HONEST["hana"], PROSE_HANA)
    _learner(base / "hugo", {k: _rename(v) for k, v in HONEST["hana"].items()}, _reword(PROSE_HANA), reverse=True)
    _learner(base / "ravi", ravi, PROSE_RAVI)
    _learner(base / "lena", lena, PROSE_LENA)
    _learner(base / "omar", {}, PROSE_LENA.replace("two of five", "three of five").split("\n", 3)[0] + "\n")
    mistake = {"tests": [{"nodeid": "code/tests/test_m1_sandbox.py::test_nul_byte_raises", "outcome": "failed"}],
               "loop_observed": {"wrong": ["an empty reply (no text, no calls): wrong: 5 model calls"]}, "battery": {}}
    same = peers.failure_signature(mistake)
    assert same == {"test code/tests/test_m1_sandbox.py::test_nul_byte_raises", "probe an empty reply (no text, no calls)"}
    pairs = peers.peer_pairs(sorted(base.iterdir()), {"hana": same, "hugo": same, "ravi": frozenset()})
    held = {tuple(p["learners"]) for p in pairs if p["hold"]}
    assert held == {("hana", "hugo")}, [(p["learners"], p["code"], p["prose"], p["what"]) for p in pairs]
    assert pairs[0]["shared"][0].startswith("the same failures"), pairs[0]["shared"]
    pair = next(p for p in pairs if p["hold"])
    assert pair["code"] >= peers.PEER_CODE and pair["prose"] >= peers.PEER_PROSE, pair
    assert any("|" in s for s in pair["shared"]), pair["shared"]
    results = {n: {"learner": n, "criteria": [{"number": i, "level": "Proficient", "points": 5, "rule": "x", "reasons": []}
                                              for i in range(1, 8)], "integrity": {"flags": {}}} for n in ("hana", "hugo", "ravi")}
    assert peers.hold_peers(results, pairs) == ["hana", "hugo"]
    for n in ("hana", "hugo"):
        assert all(c["level"] == "HOLD" and c["rule"] == "HOLD.peer_copy" for c in results[n]["criteria"])
        assert results[n]["integrity"]["flags"]["shares_work_with"] and results[n]["total"] == 0
    assert all(c["level"] == "Proficient" for c in results["ravi"]["criteria"])


def test_learners_who_wrote_the_obvious_code_are_not_a_pair(tmp_path):
    """Everyone close to the reference and the hints, each with their own prose: nothing unusual shared."""
    base = tmp_path / "class"
    for name, prose in (("a", PROSE_HANA), ("b", PROSE_RAVI), ("c", PROSE_LENA)):
        _learner(base / name, {}, prose)
    assert not [p for p in peers.peer_pairs(sorted(base.iterdir())) if p["hold"]]


# --------------------------------------------------------------------------- general causes of disagreement

NESTED_PARSE = '''
def _decode(text):
    if text is None or not str(text).strip():
        return {}, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as problem:
        return {}, f"arguments are not JSON: {problem}"
    if not isinstance(value, dict):
        return {}, "arguments must be a JSON object, not " + type(value).__name__
    leftovers = [k for k in value if not isinstance(k, str) or k.startswith("__")]
    if leftovers:
        return {}, "argument names must be plain: " + ", ".join(map(str, leftovers))
    return value, None

found = []
for entry in getattr(message, "tool_calls", None) or []:
    arguments, error = _decode(entry.function.arguments)
    found.append(ToolCall(id=entry.id, name=entry.function.name, arguments=arguments, error=error))
return found
'''
MOVED_HELPER = '''

def _from_json(raw):
    """Arguments from the model's text."""
    if raw is None or not str(raw).strip():
        return {}, None
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError) as err:
        return {}, f"not JSON arguments: {err}"
    if not isinstance(decoded, dict):
        return {}, "need a JSON object, got " + type(decoded).__name__
    odd = [k for k in decoded if not isinstance(k, str) or k.startswith("__")]
    if odd:
        return {}, "plain argument names only: " + ", ".join(map(str, odd))
    return decoded, None
'''
MOVED_PARSE = '''
collected = []
for item in getattr(message, "tool_calls", None) or []:
    args, err = _from_json(item.function.arguments)
    collected.append(ToolCall(id=item.id, name=item.function.name, arguments=args, error=err))
return collected
'''


def test_a_copy_that_moves_a_nested_helper_to_module_level_under_another_name_is_still_held(tmp_path):
    # code moved between functions is the same code: statements are compared per module, and the
    # helpers a learner adds to a module are read with the four functions
    base = tmp_path / "class"
    _learner(base / "nora", {"parse_tool_calls": NESTED_PARSE}, PROSE_RAVI)
    otto = _learner(base / "otto", {"parse_tool_calls": MOVED_PARSE}, PROSE_LENA)
    with open(otto / "code" / "agent_loop.py", "a", encoding="utf-8") as f:
        f.write(MOVED_HELPER)
    _learner(base / "pia", {}, PROSE_HANA)
    pairs = peers.peer_pairs(sorted(base.iterdir()))
    held = [p for p in pairs if p["hold"]]
    assert [tuple(p["learners"]) for p in held] == [("nora", "otto")], \
        [(p["learners"], p["code"], p["prose"], p["what"]) for p in pairs]
    assert any("_from_json" in s for s in held[0]["shared"]), held[0]["shared"]


def _results(*names):
    return {n: {"learner": n, "criteria": [{"number": i, "level": "Proficient", "points": 5, "rule": "x", "reasons": []}
                                           for i in range(1, 8)], "integrity": {"flags": {}}} for n in names}


def test_rare_shared_sentences_hold_the_write_ups_beside_shared_code_not_alone():
    beside_code = {"a": "x", "b": "y", "learners": ["x", "y"], "hold": True, "code": peers.PEER_CODE,
                   "prose": peers.PEER_PROSE, "prose_share": peers.PEER_SHARE / 2, "what": "w", "shared": []}
    alone = {**beside_code, "a": "u", "b": "v", "learners": ["u", "v"], "code": 0, "prose": 3 * peers.PEER_PROSE,
             "hold": False}
    results = _results("x", "y", "u", "v")
    assert peers.hold_peers(results, [beside_code, alone]) == ["x", "y"]
    for n in ("x", "y"):
        assert [c["level"] for c in results[n]["criteria"]] == ["HOLD"] * 7
    for n in ("u", "v"):
        assert "HOLD" not in [c["level"] for c in results[n]["criteria"]]


def _c1_ev(failing: list, learner_tests):
    from grading.board import Board, Test
    tests = [Test(f"code/tests/test_{m.lower()}_x.py::test_{m.lower()}_ok", m, "passed")
             for m in ("M1", "M2", "M3", "M4", "M5", "M6")]
    tests += [Test(f"code/tests/test_{m.lower()}_x.py::{name}[a]", m, "failed", "boom") for m, name in failing]
    return {"board": Board(tests=tests), "integrity": {"modules": {}, "functions": {}},
            "battery": NS(import_errors=[]), "saved_runs": [], "learner_tests": learner_tests}


def test_a_failure_only_on_a_test_added_after_the_learners_clone_is_read_not_decided():
    # the learner's own code/tests did not have the failing test: their board was green; the
    # suggestion follows it and the instructor decides whether the later contract applies
    c1 = criteria.load_rubric()[1]
    had = {"test_m1_ok", "test_m2_ok", "test_m3_ok", "test_m4_ok", "test_m5_ok", "test_m6_ok"}
    s = criteria._implementation(c1, _c1_ev([("M2", "test_added_later")], had))
    assert (s.level, s.mark) == ("Proficient", "READ") and "test_added_later" in " ".join(s.reasons), s
    # a test the learner had fails: decided as before
    s = criteria._implementation(c1, _c1_ev([("M2", "test_m2_ok")], had))
    assert (s.level, s.mark) == ("Developing", None), s
    # one old and one new failure, or no copy of the tests to compare with: as before
    s = criteria._implementation(c1, _c1_ev([("M2", "test_added_later"), ("M4", "test_m4_ok")], had))
    assert (s.level, s.mark) == ("Developing", None), s
    s = criteria._implementation(c1, _c1_ev([("M2", "test_added_later")], None))
    assert (s.level, s.mark) == ("Developing", None), s


# --------------------------------------------------------------------------- what decides a level, in the rubric's words

def _c2_ev(states: dict, parsing=(), looping=(), answers=()):
    """A board with the given milestone states (every listed test of a passing milestone passed) and
    probes with the given (probe, result) pairs; ``answers``: (key, text) of UNDERSTANDING.md."""
    from grading.board import Board, Test
    rubric = criteria.load_rubric()
    tests = []
    for name in rubric[2].tests + rubric[3].tests + [f"code/tests/test_m{i}_x.py::test_ok" for i in (1, 2, 3, 4)]:
        m = "M" + name.split("test_m", 1)[1][0]
        state = states.get(m, "passing")
        tests.append(Test(name, m, "passed" if state == "passing" else "failed", "",
                          not_done=state == "not started"))
    b = battery.Battery(parsing=[{"probe": p, "result": r, "detail": "x" if r == "correct" else f"{p}: boom"}
                                 for p, r in parsing],
                        looping=[{"probe": p, "result": r, "detail": "x" if r == "correct" else f"{p}: boom"}
                                 for p, r in looping])
    ev = {"board": Board(tests=tests), "battery": b, "signals": [], "contradicted": [],
          "prose": {"answers": {k: {"specific": ["max_steps"], "engages": True} for k, _ in answers}},
          "understanding": {"answers": [{"key": k, "answered": True, "text": t, "after_text": "", "excerpt": t}
                                        for k, t in answers]},
          "failure": {}, "integrity": learner_code.empty_integrity()}
    return rubric, ev


def test_a_learner_without_a_loop_yet_is_developing_on_c2_and_missing_only_without_json_loads():
    # rubric C2: Missing is "an uncapped loop, no json.loads, or results without the assistant turn";
    # a run_agent not yet written is none of these, and its listed tests fail: Developing
    rubric, ev = _c2_ev({"M4": "not started"}, parsing=[("an object", "correct")])
    s = criteria._loop(rubric[2], ev)
    assert (s.level, s.rule) == ("Developing", "C2.no_loop_yet"), s.reasons
    rubric, ev = _c2_ev({"M2": "not started", "M4": "not started"})
    assert criteria._loop(rubric[2], ev).level == "Missing"
    rubric, ev = _c2_ev({"M2": "not started"})
    assert criteria._loop(rubric[2], ev).level == "Missing"


CAP_AS_DECISION = [("3", "parse_tool_calls runs json.loads on the arguments string, because the tools need a dict"),
                   ("4", "the provider matches each tool_call_id to the assistant turn before it, or answers 400"),
                   ("5", "(a) without max_steps a model that keeps calling tools is called forever. (c) no results: "
                         "the model repeats itself until the cap")]


@pytest.mark.parametrize("probe", ["JSON nested 100,000 deep", "a number of 5,000 digits", "an empty reply with content None"])
def test_failing_only_an_input_the_level_table_does_not_name_is_proficient_to_read(probe):
    # both outside instructors kept C2 at Proficient for a loop or parse that fails only on such an
    # input (a reply whose content is None, JSON nested 100,000 deep): the evidence does not decide
    kind = "looping" if "reply" in probe else "parsing"
    rubric, ev = _c2_ev({}, **{kind: [(probe, "crashed"), ("an object" if kind == "parsing" else "answers at once",
                                                           "correct")]}, answers=CAP_AS_DECISION)
    s = criteria._loop(rubric[2], ev)
    assert (s.level, s.mark, s.rule) == ("Proficient", "READ", "C2.edge_inputs"), s.reasons
    assert any(probe in r for r in s.reasons)
    # the same with a probe of what the level table names (non-object JSON marked) failing: Developing
    rubric, ev = _c2_ev({}, parsing=[(probe, "crashed"), ("JSON that is true", "wrong")], looping=[("answers at once", "correct")])
    assert criteria._loop(rubric[2], ev).level == "Developing"


@pytest.mark.parametrize("cap,exemplary", [
    (CAP_AS_DECISION[2][1], True),
    ("(a) Without the cap, the loop only stops when the model stops, so it burns tokens", True),
    ("(a) no cap -> endless loop and cost; (c) no results -> the model repeats", False),
    ("(a) Removing the max_steps cap could result in unbounded execution and increased costs. (c) Removing the "
     "results would prevent the model from learning, leading to repetitive behavior", False),
    ("(a) loops forever (c) the model repeats the same call forever, until the cap", False),
    ("max_steps ends the run of a model that never answers", True),
    ("(a) No cap: a confused model loops forever", True),
    ("the model emits a tool call and the loop runs it, up to max_steps times", False),
])
def test_c2_exemplary_needs_the_cap_explained_as_the_models_decision(cap, exemplary):
    # rubric C2 Exemplary: "the learner explains all three unprompted"; its diagnostic answer on the
    # cap: continuing is the model's decision, max_steps puts a ceiling on it
    rubric, ev = _c2_ev({}, parsing=[("an object", "correct")], looping=[("answers at once", "correct")],
                        answers=CAP_AS_DECISION[:2] + [("5", cap)])
    s = criteria._loop(rubric[2], ev)
    assert s.level == ("Exemplary" if exemplary else "Proficient"), s.reasons
    assert s.mark == "READ", s   # prose decides between the two: the instructor confirms by reading


def _c3_ev(q5: str, evidence: str):
    rubric, ev = _c2_ev({}, answers=[("5", q5)])
    ev["battery"] = battery.Battery(probes=[{"class": "sub-folder climbs", "kind": "resolve", "probe": "a", "result": "refused",
                                             "detail": ""},
                                            {"class": "legal", "kind": "resolve", "probe": "b", "result": "inside", "detail": ""}])
    title = "escape: the path sandbox (safe_resolve's containment check) removed"
    ev["failure"] = {"breaks": {"escape": {"complete": True, "excerpts": {"Hypothesis": "h"}, "pasted": {"scenario": title},
                                           "prose": {"Evidence": f"{title} {evidence}"}}}}
    return rubric, ev


@pytest.mark.parametrize("q5,evidence,exemplary", [
    (".env is inside the root, so containment accepts it; the visibility rules hide it", "3 of 5 probes leaked", True),
    ("it is important to distinguish between containment and visibility, as both play complementary roles",
     "3 of 5 probes leaked", False),
    (".env is inside the root, so containment accepts it; the visibility rules hide it", "", False),
    (".env is inside the root, so containment accepts it; the visibility rules hide it",
     "These results underscore the importance of a robust sandbox.", False),
])
def test_c3_exemplary_needs_env_named_and_the_escape_block_read(q5, evidence, exemplary):
    # rubric C3 Exemplary: "explains why `.env` needs the separate visibility rule", and the escape
    # write-up agrees with its block: a write-up that says nothing of its block has nothing to agree
    rubric, ev = _c3_ev(q5, evidence)
    assert ev["battery"].held() and not ev["battery"].broken(), ev["battery"].classes()
    s = criteria._sandbox(rubric[3], ev)
    assert s.level == ("Exemplary" if exemplary else "Proficient"), s.reasons


@pytest.mark.parametrize("edited,held", [
    ("code/tests/test_m1_sandbox.py", {1, 3}),
    ("code/tests/test_m2_parse.py", {1, 2}),
    ("code/tests/test_m4_loop.py", {1, 2, 3}),   # test_tool_errors_are_observations is C3's evidence too
    ("code/tests/test_m6_breaks.py", {1}),
    ("code/harness/strict_provider.py", {1, 2, 3}),
    ("code/tests/conftest.py", {1, 2, 3}),
])
def test_an_edited_test_file_holds_the_criteria_its_tests_decide(edited, held):
    # class3's key holds a learner who skipped the symlink tests of test_m1_sandbox.py on C1 and C3,
    # and grades the loop: a test file says nothing about a criterion none of its tests decide
    rubric, ev = _c2_ev({})
    ev["integrity"]["guarded_edited"] = [edited]
    ev["integrity"]["functions"] = {"tools.safe_resolve": {"stub": False}}
    got = {n for n in (1, 2, 3) if criteria._hold(n, ev, rubric)}
    assert got == held, got


def test_a_crash_deep_inside_a_provided_tool_is_blamed_on_dispatch_tool():
    # a tool error that dispatch_tool lets out passes through the provided tool's own helpers: the
    # probe's trace must still show dispatch_tool, so C3 (not the loop) answers for it
    from grading import battery_probe

    def nest(depth):
        if depth == 0:
            raise ValueError("no such file")
        return nest(depth - 1)

    def dispatch_tool():
        return nest(10)

    def run_agent():
        return dispatch_tool()

    try:
        run_agent()
    except ValueError as exc:
        trace = battery_probe._trace(exc)
    result, detail = battery.judge_loop({"raised": "ToolError", "message": "no such file", "trace": trace},
                                        [{"answer": "a"}], 3)
    assert result == "crashed" and "raised inside dispatch_tool" in detail, (trace, detail)


LEAKY_DISPATCH = '''
if name not in TOOL_FUNCTIONS:
    return f"Error: unknown tool {name!r}; the tools are {sorted(TOOL_FUNCTIONS)}"
if not isinstance(args, dict):
    return "Error: arguments must be a JSON object"
try:
    return TOOL_FUNCTIONS[name](repo_root, **args)
except ValueError as exc:
    return "Error: " + str(exc)
'''


@needs_bwrap
def test_a_tool_error_dispatch_tool_lets_out_is_dispatchs_defect_in_the_sandbox_too(tmp_path):
    # the probe's answer crosses a process boundary: the trace that names dispatch_tool must survive it,
    # or a correct loop is marked down on C2 for its dispatch_tool's defect (C3's)
    sub, b = _battery(tmp_path, {"dispatch_tool": LEAKY_DISPATCH})
    seen = {p["probe"]: p for p in b.looping}
    after_error = seen["more tool calls after a tool error"]
    assert after_error["result"] == "crashed" and "raised inside dispatch_tool" in after_error["detail"], after_error
    c2 = criteria._loop(criteria.load_rubric()[2], _ev(sub, b))
    assert not any("more tool calls after a tool error" in r for r in c2.reasons), c2.reasons
