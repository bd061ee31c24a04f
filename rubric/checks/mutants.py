"""Known-wrong implementations of the four learner functions: the lesson's common mistakes.

Each mutant replaces one function body in a copy of the reference. test_course.py proves that
the guiding tests named in ``caught_by`` fail against it, i.e. that those tests can fail, and
fail for the reason their names state.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    module: str
    function: str
    body: str                      # replaces everything after the docstring
    caught_by: tuple[str, ...]     # guiding test names (prefixes) that must fail


MUTANTS = (
    Mutant("string-prefix containment", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path:
    raise ValueError("bad path")
root = Path(repo_root).resolve()
target = (root / rel_path).resolve()
if not str(target).startswith(str(root)):
    raise ValueError("outside")
return target
""", ("test_sibling_with_shared_prefix_raises",)),
    Mutant("normpath ignores symlinks", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path:
    raise ValueError("bad path")
root = Path(os.path.abspath(repo_root))
target = Path(os.path.normpath(os.path.join(root, rel_path)))
if not target.is_relative_to(root):
    raise ValueError("outside")
return target
""", ("test_symlinked_file_leading_out_raises", "test_symlinked_directory_leading_out_raises",
      "test_in_repo_symlink_is_allowed")),
    Mutant("refuses any '..' text", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or ".." in rel_path:
    raise ValueError("bad path")
root = Path(repo_root).resolve()
target = (root / rel_path).resolve()
if not target.is_relative_to(root):
    raise ValueError("outside")
return target
""", ("test_legal_names_with_dots_resolve",)),
    Mutant("no type check", "tools.py", "safe_resolve", """
root = Path(repo_root).resolve()
target = (root / rel_path).resolve()
if not target.is_relative_to(root):
    raise ValueError("outside")
return target
""", ("test_non_string_path_raises",)),
    Mutant("arguments used without json.loads", "agent_loop.py", "parse_tool_calls", """
return [ToolCall(raw.id, raw.function.name, raw.function.arguments)
        for raw in getattr(message, "tool_calls", None) or []]
""", ("test_arguments_json_string_becomes_a_dict",)),
    Mutant("bad JSON raises", "agent_loop.py", "parse_tool_calls", """
return [ToolCall(raw.id, raw.function.name, json.loads(raw.function.arguments))
        for raw in getattr(message, "tool_calls", None) or []]
""", ("test_malformed_json_is_marked_not_raised", "test_json_that_is_not_an_object_is_marked")),
    Mutant("only the first call", "agent_loop.py", "parse_tool_calls", """
raws = getattr(message, "tool_calls", None) or []
if not raws:
    return []
raw = raws[0]
return [ToolCall(raw.id, raw.function.name, json.loads(raw.function.arguments))]
""", ("test_parallel_calls_keep_their_order",)),
    Mutant("tool errors propagate", "tools.py", "dispatch_tool", """
fn = TOOL_FUNCTIONS.get(name)
if fn is None:
    return f"Error: unknown tool {name!r}"
return fn(repo_root, **args)
""", ("test_sandbox_escape_becomes_error_string", "test_exception_inside_a_tool_becomes_error_string",
      "test_arguments_that_are_not_an_object", "test_missing_argument_is_named")),
    Mutant("root taken from the arguments", "tools.py", "dispatch_tool", """
fn = TOOL_FUNCTIONS.get(name)
if fn is None or not isinstance(args, dict):
    return "Error: bad call"
args = dict(args)
root = args.pop("repo_root", repo_root)
try:
    return fn(root, **args)
except Exception as exc:
    return f"Error: {exc}"
""", ("test_root_never_comes_from_arguments",)),
    Mutant("no assistant turn before results", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        messages.append({"role": "assistant", "content": message.content or ""})
        return message.content or ""
    for call in calls:
        messages.append(tool_result(call.id, dispatch_tool(call.name, call.arguments, repo_root)))
return MAX_STEPS_REACHED
""", ("test_runs_a_tool_then_returns_the_answer", "test_assistant_turn_precedes_its_results")),
    Mutant("while True (no cap)", "agent_loop.py", "run_agent", """
while True:
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        messages.append({"role": "assistant", "content": message.content or ""})
        return message.content or ""
    messages.append(assistant_turn(message))
    for call in calls:
        messages.append(tool_result(call.id, dispatch_tool(call.name, call.arguments, repo_root)))
""", ("test_always_calling_model_stops_at_max_steps", "test_default_max_steps_applies")),
    Mutant("answers only the first call", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        messages.append({"role": "assistant", "content": message.content or ""})
        return message.content or ""
    messages.append(assistant_turn(message))
    call = calls[0]
    messages.append(tool_result(call.id, dispatch_tool(call.name, call.arguments, repo_root)))
return MAX_STEPS_REACHED
""", ("test_parallel_calls_are_all_answered_in_order",)),
    Mutant("appends the Message object", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        messages.append(message)
        return message.content or ""
    messages.append(assistant_turn(message))
    for call in calls:
        messages.append(tool_result(call.id, dispatch_tool(call.name, call.arguments, repo_root)))
return MAX_STEPS_REACHED
""", ("test_transcript_is_extended_in_place_and_serializable",)),
    Mutant("crashes on unparsed arguments", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        messages.append({"role": "assistant", "content": message.content or ""})
        return message.content or ""
    messages.append(assistant_turn(message))
    for call in calls:
        if call.error:
            raise ValueError(call.error)
        messages.append(tool_result(call.id, dispatch_tool(call.name, call.arguments, repo_root)))
return MAX_STEPS_REACHED
""", ("test_bad_json_reaches_the_model_as_an_observation",)),
)
