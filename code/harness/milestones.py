"""The course as data: milestones in order, what each asks the learner to edit, and its hints.

One table serves the pytest board, `python -m pytest --hint`, and the course checks, so the milestone
list cannot drift between them. Hints come in three tiers (a nudge, the approach, pseudo-code)
and stop short of the solution (tier 3 comes close to it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

LESSON = "lesson/lesson.agent.md"


@dataclass(frozen=True)
class Milestone:
    id: str                 # "M1"; test files are named test_m1_*.py (stretch: test_s1_*.py)
    title: str
    functions: tuple[str, ...]  # learner-owned "module.function" names; () when nothing to write
    file: str               # where the learner works, relative to the repository root
    section: str            # the lesson section the failure messages point at
    hints: tuple[str, str, str] = field(default=("", "", ""))
    stretch: bool = False

    @property
    def target(self) -> str:
        """What to do, for the board: 'edit tools.safe_resolve in code/tools.py'."""
        if self.functions:
            return f"edit {', '.join(self.functions)} in {self.file}"
        return f"nothing new to write: see {self.file} and the failing test's message"


MILESTONES: tuple[Milestone, ...] = (
    Milestone(
        "M1", "Sandbox paths", ("tools.safe_resolve",), "code/tools.py",
        f"{LESSON}, Section 4, Example 1",
        (
            "Try one by hand: print (Path('repo') / 'shop/../../etc/passwd').resolve(). "
            "That printed location, not the text the model sent, is what your check should judge.",
            "Call Path.resolve() on the root and on root / path, so '..' and symlinks are "
            "already applied. Accept only a target equal to the root or below it, tested on "
            "path parts (Path.is_relative_to): a text prefix test admits '/repo_evil' for "
            "'/repo'. Refuse a non-str, a path containing '\\0' or one over MAX_PATH_CHARS "
            "before anything else, and turn resolve()'s RuntimeError/OSError (a symlink loop) "
            "into ValueError.",
            "if path is not a str, contains NUL or is too long: raise ValueError\n"
            "root   = resolve(repo_root)\n"
            "target = resolve(root joined with path)      # may not exist yet: fine\n"
            "         (a loop raises RuntimeError/OSError: re-raise as ValueError)\n"
            "if target is not inside root (component-wise): raise ValueError\n"
            "return target",
        ),
    ),
    Milestone(
        "M2", "Parse tool calls", ("agent_loop.parse_tool_calls",), "code/agent_loop.py",
        f"{LESSON}, Section 4, Example 2",
        (
            "Print type(message.tool_calls[0].function.arguments). It looks like a dict. Is it?",
            "A message with no tool calls may have no attribute, None, or []: treat all three "
            "as 'no calls'. For each call, json.loads the arguments string (an empty string "
            "means no arguments: {}). Bad JSON, or JSON that is not an object, must not raise "
            "(json.loads raises RecursionError for very deep nesting, which is not a ValueError): "
            "return a ToolCall with arguments={} and error set, so the loop can tell the model "
            "what went wrong.",
            "calls = []\n"
            "for each raw in (message.tool_calls or []):\n"
            "    text = raw.function.arguments\n"
            "    try: args = json.loads(text) if text != '' else {}    # \"\" means no arguments\n"
            "    except invalid JSON or too deep: append ToolCall(id, name, {}, error=...); continue\n"
            "    if args is not a dict: append ToolCall(id, name, {}, error=...); continue\n"
            "    append ToolCall(raw.id, raw.function.name, args)\n"
            "return calls",
        ),
    ),
    Milestone(
        "M3", "Dispatch", ("tools.dispatch_tool",), "code/tools.py",
        f"{LESSON}, Section 3, How It Works",
        (
            "The model reads whatever dispatch_tool returns. An exception reaches nobody it "
            "can help; a clear 'Error: ...' string reaches the model, which can try again.",
            "Look the name up in TOOL_FUNCTIONS (only if it is a str: a list is unhashable). "
            "Check that args is a dict and that "
            "check_arguments(name, args) finds no problem. Call fn(repo_root, **args): the "
            "root comes from your application, never from args. Catch ValueError and "
            "ToolError (expected) and any other Exception (a tool bug) and return them as "
            "strings starting with 'Error:' (Exception only: KeyboardInterrupt must still stop the run).",
            "fn = TOOL_FUNCTIONS.get(name);  if missing: return 'Error: unknown tool ...'\n"
            "if args is not a dict: return 'Error: ...'\n"
            "problem = check_arguments(name, args);  if problem: return 'Error: ' + problem\n"
            "try: return fn(repo_root, **args)\n"
            "except (ValueError, ToolError) as e: return 'Error: ' + str(e)\n"
            "except Exception as e: return 'Error: <tool> failed ...'",
        ),
    ),
    Milestone(
        "M4", "The loop", ("agent_loop.run_agent",), "code/agent_loop.py",
        f"{LESSON}, Section 3, How It Works, and Section 4, Example 3",
        (
            "Who decides when the loop ends: your code or the model? What if the model never "
            "decides?",
            "Loop at most max_steps times. Each time: message = complete(messages, "
            "TOOL_SCHEMAS); calls = parse_tool_calls(message). No calls: append the answer "
            "and return it. Otherwise append assistant_turn(message) FIRST, then one "
            "tool_result(call.id, ...) per call, in order, for every call (a call with "
            "an error is not run: its result is 'Error: ' + call.error). Text beside tool calls "
            "is not an answer, and an empty reply is (return ''); let complete()'s errors go up. "
            "After the loop: return a string starting with MAX_STEPS_REACHED.",
            "for step in range(max_steps):\n"
            "    message = complete(messages, TOOL_SCHEMAS)\n"
            "    calls = parse_tool_calls(message)\n"
            "    if not calls: answer = message.content or ''\n"
            "                  append {'role': 'assistant', 'content': answer}; return answer\n"
            "    messages.append(assistant_turn(message))\n"
            "    for call in calls:\n"
            "        result = 'Error: ' + call.error if call.error else dispatch_tool(...)\n"
            "        messages.append(tool_result(call.id, result))\n"
            "return MAX_STEPS_REACHED + ': ...'",
        ),
    ),
    Milestone(
        "M5", "Copilot end-to-end", (), "code/copilot.py",
        f"{LESSON}, Section 6, Project Assignment",
        (
            "Nothing new to write: M5 runs your four functions inside the real copilot. If a "
            "test fails here, the message names which of your functions misbehaved.",
            "Run `python copilot.py --context-only \"why does config default to Groq?\"` from "
            "code/, then set a key in code/.env and ask the same question for real. No key yet? "
            "`python -m harness.demo` shows a whole run, scripted (the board does not count it).",
            "Read the failing test's 'called' line, reproduce it in a Python shell against "
            "your function, and compare with the M1-M4 contracts in the docstrings.",
        ),
    ),
    Milestone(
        "M6", "Break and evaluate", (), "FAILURE_ANALYSIS.md",
        f"{LESSON}, Section 7, Project Milestones",
        (
            "Each break removes one design decision. Predict the failure before you run it.",
            "Run `python break_and_observe.py runaway --simulate` (then escape, amnesia, "
            "raw-arguments, vague-tools) and paste each evidence block into "
            "FAILURE_ANALYSIS.md. Then run `python evaluate.py`.",
            "For each scenario: hypothesis -> the one change -> the command -> the evidence "
            "block -> which design decision prevents it -> what it would cost in production.",
        ),
    ),
)

STRETCH: tuple[Milestone, ...] = (
    Milestone(
        "S1", "Reasoning trace", ("stretch.trace_steps",), "code/stretch.py",
        f"{LESSON}, Section 6, Extended Requirements",
        (
            "The transcript already says everything: which assistant turn asked for which call, "
            "and which tool message answered it. How do you pair them without trusting the order?",
            "Walk the messages once. Each assistant message is a step. For a turn with tool_calls, "
            "gather the tool messages that follow it (until the next non-tool message) keyed by "
            "tool_call_id, then make one Action per call and look its observation up by id (None "
            "when nothing answered). A turn without tool_calls is the answer: no actions.",
            "steps = []\n"
            "for each message at position i:\n"
            "    skip it unless role == 'assistant'\n"
            "    if it has no tool_calls: append an answer Step; continue\n"
            "    results = {tool_call_id: content} of the tool messages right after position i\n"
            "    actions = [Action(name, arguments, results.get(id)) for each call]\n"
            "    append Step(len(steps) + 1, stripped content or '', actions)\n"
            "return steps",
        ),
        stretch=True,
    ),
    Milestone(
        "S2", "A write tool, with care", ("stretch.plan_edit",), "code/stretch.py",
        f"{LESSON}, Section 6, Extended Requirements",
        (
            "A write is a read with consequences: every rule that protects reading still applies. "
            "Which files must a model never change, however much it wants the tests to pass?",
            "Resolve the path with tools.resolve_visible (sandbox and exclusions in one call), "
            "refuse is_test_path(...) of the resolved path's parts with TEST_REFUSAL, read the "
            "file with read_text, then count old_string: exactly one match, or a ToolError that "
            "says how many there were and what to do. Build the new text with a single replacement "
            "and its diff with unified_diff. Write nothing: applying is provided.",
            "target = resolve_visible(root, path);  shown = display_path(root, target)\n"
            "if is_test_path(relative_parts(root, target)): raise ToolError(... TEST_REFUSAL)\n"
            "text = read_text(target, shown)\n"
            "if old_string is empty, or it occurs 0 or 2+ times: raise ToolError(what to do)\n"
            "if new_string == old_string: raise ToolError(...)\n"
            "new_text = text with old_string replaced once\n"
            "return Edit(shown, target, text, new_text, unified_diff(shown, text, new_text))",
        ),
        stretch=True,
    ),
    Milestone(
        "S3", "Structured answer via a tool", ("stretch.validate_answer",), "code/stretch.py",
        f"{LESSON}, Section 6, Extended Requirements",
        (
            "The citations are untrusted twice over: their shape (is start_line even a number?) "
            "and their claim (did this run really show those lines?).",
            "Check the shape first and collect problems instead of raising: a dict, a non-empty "
            "answer string, a non-empty citations list, each citation with a string path and "
            "whole-number lines (bool is not a number), 1 <= start_line <= end_line. Then ground "
            "each well-formed one with lines_seen and check_span (citations.py), and report its "
            "reason when it is not grounded.",
            "if arguments is not a dict: return [problem]\n"
            "problems = [];  check answer;  check citations is a non-empty list (else return)\n"
            "seen = lines_seen(messages, snippets)\n"
            "for i, cite in enumerate(citations):\n"
            "    if its shape is wrong: problems.append(f'citations[{i}] ...'); continue\n"
            "    checked = check_span(path, start, end, repo_root, seen)\n"
            "    if not checked.grounded: problems.append(f'citations[{i}] ...: ' + checked.reason)\n"
            "return problems",
        ),
        stretch=True,
    ),
)

ALL = MILESTONES + STRETCH
BY_ID = {m.id: m for m in ALL}
LEARNER_FUNCTIONS = {fn: m for m in ALL for fn in m.functions}


def milestone_of_test_file(filename: str) -> Milestone | None:
    """'test_m3_dispatch.py' -> M3; files that follow no milestone return None."""
    stem = filename.rsplit("/", 1)[-1]
    if not stem.startswith("test_") or "_" not in stem[5:]:
        return None
    return BY_ID.get(stem[5:].split("_", 1)[0].upper())
