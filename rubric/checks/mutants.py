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


def parse_variant(loop="for raw in getattr(message, \"tool_calls\", None) or []:", skip="",
                  not_json='f"arguments are not valid JSON ({exc})"', not_object='"arguments must be a JSON object"') -> str:
    """A parse_tool_calls body that is the reference's shape with one part changed: the loop over the
    calls (``loop``), lines run first for each call (``skip``), or an error text."""
    return f"""
calls = []
{loop}
    text = raw.function.arguments{skip}
    try:
        arguments = json.loads(text) if text else {{}}
    except (TypeError, ValueError, RecursionError) as exc:
        calls.append(ToolCall(raw.id, raw.function.name, {{}}, {not_json}))
        continue
    if not isinstance(arguments, dict):
        calls.append(ToolCall(raw.id, raw.function.name, {{}}, {not_object}))
        continue
    calls.append(ToolCall(raw.id, raw.function.name, arguments))
return calls
"""


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
    Mutant("resolve errors escape", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
root = Path(repo_root).resolve()
target = (root / rel_path).resolve()
if not target.is_relative_to(root):
    raise ValueError("outside")
return target
""", ("test_symlink_loop_raises_value_error",)),
    Mutant("no length cap", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path:
    raise ValueError("bad path")
try:
    root = Path(repo_root).resolve()
    target = (root / rel_path).resolve()
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if not target.is_relative_to(root):
    raise ValueError("outside")
return target
""", ("test_very_long_path_raises_before_resolving",)),
    # Containment judged on something other than the real, case-exact location (issue 20).
    Mutant("case-insensitive containment", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
try:
    root = Path(repo_root).resolve()
    target = (root / rel_path).resolve()
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if not Path(str(target).lower()).is_relative_to(str(root).lower()):
    raise ValueError("outside")
return target
""", ("test_sibling_differing_only_in_case_raises",)),
    Mutant("casefold containment", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
try:
    root = Path(repo_root).resolve()
    target = (root / rel_path).resolve()
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if not (target == root or str(target).casefold().startswith(str(root).casefold() + os.sep)):
    raise ValueError("outside")
return target
""", ("test_sibling_differing_only_in_case_raises",)),
    Mutant("resolves only the parent", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
try:
    root = Path(repo_root).resolve()
    joined = root / rel_path
    target = joined.parent.resolve() / joined.name
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if not target.is_relative_to(root):
    raise ValueError("outside")
return target
""", ("test_symlinked_file_leading_out_raises", "test_dotdot_escape_raises[..]")),
    Mutant("judges only a leading '..'", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
if Path(rel_path).parts[:1] == ("..",) or os.path.isabs(rel_path) and not Path(rel_path).is_relative_to(Path(repo_root).resolve()):
    raise ValueError("outside")
try:
    return (Path(repo_root).resolve() / rel_path).resolve()
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
""", ("test_dotdot_escape_raises[sub/../../outside/secret.txt]", "test_symlinked_file_leading_out_raises")),
    Mutant("resolves only paths that exist", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
root = Path(repo_root).resolve()
try:
    target = (root / rel_path).resolve(strict=True)
except FileNotFoundError:
    target = root / rel_path          # not there yet: judged as written
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if not target.is_relative_to(root):
    raise ValueError("outside")
return target
""", ("test_dotdot_escape_raises[missing/../../outside/secret.txt]",)),
    Mutant("checks the link, returns the link", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
try:
    root = Path(repo_root).resolve()
    target = (root / rel_path).resolve()
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if not target.is_relative_to(root):
    raise ValueError("outside")
return root / rel_path
""", ("test_in_repo_symlink_is_allowed", "test_legal_names_with_dots_resolve[sub/../file.py]")),
    # The model may only call what TOOL_FUNCTIONS lists, with arguments check_arguments accepts.
    Mutant("globals() as the tool table", "tools.py", "dispatch_tool", """
fn = globals().get(name) if isinstance(name, str) else None
if not callable(fn):
    return f"Error: unknown tool {shorten(name)}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
if not isinstance(args, dict):
    return f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}."
try:
    return fn(repo_root, **args)
except Exception as exc:
    return f"Error: {exc}"
""", ("test_only_the_listed_tools_can_be_called", "test_unexpected_argument_names_the_real_ones",
      "test_a_call_that_was_not_run_says_why")),
    Mutant("getattr on the module", "tools.py", "dispatch_tool", """
import sys
fn = getattr(sys.modules[__name__], name, None) if isinstance(name, str) else None
if not callable(fn):
    return f"Error: unknown tool {shorten(name)}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
if not isinstance(args, dict):
    return f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}."
problem = check_arguments(name, args) if name in TOOL_FUNCTIONS else None
if problem:
    return f"Error: {problem}."
try:
    return fn(repo_root, **args)
except Exception as exc:
    return f"Error: {exc}"
""", ("test_only_the_listed_tools_can_be_called",)),
    Mutant("skips check_arguments", "tools.py", "dispatch_tool", """
fn = TOOL_FUNCTIONS.get(name) if isinstance(name, str) else None
if fn is None:
    return f"Error: unknown tool {shorten(name)}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
if not isinstance(args, dict):
    return f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}."
try:
    return fn(repo_root, **args)
except Exception as exc:
    return f"Error: {name} failed ({type(exc).__name__}: {exc})"
""", ("test_unexpected_argument_names_the_real_ones", "test_a_call_that_was_not_run_says_why")),
    # Every call of a turn is kept and answered, even one identical to another (issue 20).
    Mutant("drops a repeated call", "agent_loop.py", "parse_tool_calls", parse_variant(
        loop="seen = set()\nfor raw in getattr(message, \"tool_calls\", None) or []:",
        skip="\n    if (raw.function.name, text) in seen:\n        continue  # the same call twice: once is enough (it is not)"
             "\n    seen.add((raw.function.name, text))"), ("test_identical_calls_in_one_turn_are_all_kept",)),
    Mutant("an error the model cannot act on", "agent_loop.py", "parse_tool_calls",
           parse_variant(not_json='"bad"', not_object='"bad"'), ("test_the_error_says_what_was_wrong",)),
    Mutant("answers a repeated call once", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        answer = getattr(message, "content", None) or ""
        messages.append({"role": "assistant", "content": answer})
        return answer
    messages.append(assistant_turn(message))
    done = set()
    for call in calls:
        key = (call.name, json.dumps(call.arguments, sort_keys=True))
        if key in done:
            continue                  # already answered above (but not for this id)
        done.add(key)
        result = f"Error: {call.error}" if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return f"{MAX_STEPS_REACHED}: no final answer after {max_steps} model calls"
""", ("test_identical_calls_each_get_their_own_result",)),
    Mutant("reads tool_calls as an attribute", "agent_loop.py", "parse_tool_calls",
           parse_variant(loop="for raw in message.tool_calls or []:"),
           ("test_no_tool_calls_gives_empty_list[no tool_calls attribute]",)),
    Mutant("catches only JSONDecodeError", "agent_loop.py", "parse_tool_calls", """
calls = []
for raw in getattr(message, "tool_calls", None) or []:
    try:
        arguments = json.loads(raw.function.arguments or "{}")
    except json.JSONDecodeError as exc:
        calls.append(ToolCall(raw.id, raw.function.name, {}, str(exc)))
        continue
    if not isinstance(arguments, dict):
        calls.append(ToolCall(raw.id, raw.function.name, {}, "not an object"))
        continue
    calls.append(ToolCall(raw.id, raw.function.name, arguments))
return calls
""", ("test_hostile_arguments_are_marked_not_raised",)),
    Mutant("looks up any name", "tools.py", "dispatch_tool", """
fn = TOOL_FUNCTIONS.get(name)
if fn is None:
    return f"Error: unknown tool {name!r}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
if not isinstance(args, dict):
    return "Error: arguments must be a JSON object"
problem = check_arguments(name, args)
if problem:
    return f"Error: {problem}."
try:
    return fn(repo_root, **args)
except Exception as exc:
    return f"Error: {exc}"
""", ("test_non_string_tool_name_is_an_error_string",)),
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
    Mutant("empty arguments treated as broken JSON", "agent_loop.py", "parse_tool_calls", """
calls = []
for raw in getattr(message, "tool_calls", None) or []:
    try:
        arguments = json.loads(raw.function.arguments)
    except (TypeError, ValueError) as exc:
        calls.append(ToolCall(raw.id, raw.function.name, {}, f"arguments are not valid JSON ({exc})"))
        continue
    if not isinstance(arguments, dict):
        calls.append(ToolCall(raw.id, raw.function.name, {}, "arguments must be a JSON object"))
        continue
    calls.append(ToolCall(raw.id, raw.function.name, arguments))
return calls
""", ("test_empty_arguments_string_means_no_arguments",)),
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
    Mutant("dispatches unparsable calls", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        messages.append({"role": "assistant", "content": message.content or ""})
        return message.content or ""
    messages.append(assistant_turn(message))
    for call in calls:
        messages.append(tool_result(call.id, dispatch_tool(call.name, call.arguments, repo_root)))
return MAX_STEPS_REACHED
""", ("test_bad_json_reaches_the_model_as_an_observation[read_file]",
      "test_bad_json_reaches_the_model_as_an_observation[list_directory]")),
)


# Contracts the docstrings state that provided code absorbs, so only a guiding test sees them (issue 27).
MUTANTS += (
    Mutant("length checked after resolving", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path:
    raise ValueError("bad path")
try:
    root = Path(repo_root).resolve()
    target = (root / rel_path).resolve()
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("path too long")
if not target.is_relative_to(root):
    raise ValueError("outside")
return target
""", ("test_the_length_is_checked_before_anything_is_resolved",)),
    Mutant("substring containment", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
try:
    root = os.path.realpath(repo_root)
    target = os.path.realpath(os.path.join(root, rel_path))
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if target != root and root + os.sep not in target:   # 'repo/' is in 'repo/x', not in 'repo_evil/x'
    raise ValueError("outside")
return Path(target)
""", ("test_containment_is_judged_by_components_not_by_text",)),
    Mutant("root in target.parents only", "tools.py", "safe_resolve", """
if not isinstance(rel_path, str) or "\\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
    raise ValueError("bad path")
try:
    root = Path(repo_root).resolve()
    target = (root / rel_path).resolve()
except (OSError, RuntimeError) as exc:
    raise ValueError(str(exc)) from None
if root not in target.parents:
    raise ValueError("outside")
return target
""", ("test_root_itself_resolves",)),
    Mutant("arguments passed by position", "tools.py", "dispatch_tool", """
fn = TOOL_FUNCTIONS.get(name) if isinstance(name, str) else None
if fn is None:
    return f"Error: unknown tool {shorten(name)}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
if not isinstance(args, dict):
    return f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}."
problem = check_arguments(name, args)
if problem:
    return f"Error: {problem}."
try:
    return fn(repo_root, *args.values())
except Exception as exc:
    return f"Error: {exc}"
""", ("test_arguments_are_passed_by_name_in_any_order",)),
    Mutant("catches BaseException", "tools.py", "dispatch_tool", """
fn = TOOL_FUNCTIONS.get(name) if isinstance(name, str) else None
if fn is None:
    return f"Error: unknown tool {shorten(name)}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
if not isinstance(args, dict):
    return f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}."
problem = check_arguments(name, args)
if problem:
    return f"Error: {problem}."
try:
    return fn(repo_root, **args)
except BaseException as exc:
    return f"Error: {exc}"
""", ("test_ctrl_c_inside_a_tool_is_not_an_observation",)),
    Mutant("None arguments crash", "agent_loop.py", "parse_tool_calls", parse_variant().replace(
        "json.loads(text) if text else {}", 'json.loads(text) if text != "" else {}').replace(
        "(TypeError, ValueError, RecursionError)", "(ValueError, RecursionError)"),
        ("test_none_arguments_mean_no_arguments",)),
    Mutant("tool calls indexed like dicts", "agent_loop.py", "parse_tool_calls", parse_variant().replace(
        "raw.function.arguments", 'raw["function"]["arguments"]'), ("test_arguments_json_string_becomes_a_dict",)),
    Mutant("one list shared by every call", "agent_loop.py", "parse_tool_calls", parse_variant().replace(
        "calls = []", 'calls = parse_tool_calls.__dict__.setdefault("calls", [])  # what a default calls=[] does'),
        ("test_arguments_json_string_becomes_a_dict", "test_id_and_name_are_kept")),
    Mutant("an empty reply asks again", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        answer = getattr(message, "content", None) or ""
        if not answer.strip():
            continue                  # nothing said: ask again
        messages.append({"role": "assistant", "content": answer})
        return answer
    messages.append(assistant_turn(message))
    for call in calls:
        result = f"Error: {call.error}" if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return f"{MAX_STEPS_REACHED}: no final answer after {max_steps} model calls"
""", ("test_an_empty_reply_ends_the_run_after_one_call",)),
    Mutant("returns the content as it is", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        messages.append({"role": "assistant", "content": message.content})
        return message.content        # None when the model wrote no text
    messages.append(assistant_turn(message))
    for call in calls:
        result = f"Error: {call.error}" if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return f"{MAX_STEPS_REACHED}: no final answer after {max_steps} model calls"
""", ("test_an_empty_reply_ends_the_run_after_one_call[content None]",)),
    Mutant("model errors become the answer", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    try:
        message = complete(messages, TOOL_SCHEMAS)
    except Exception as exc:
        return f"Error: the model call failed: {exc}"
    calls = parse_tool_calls(message)
    if not calls:
        answer = getattr(message, "content", None) or ""
        messages.append({"role": "assistant", "content": answer})
        return answer
    messages.append(assistant_turn(message))
    for call in calls:
        result = f"Error: {call.error}" if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return f"{MAX_STEPS_REACHED}: no final answer after {max_steps} model calls"
""", ("test_a_failed_model_call_is_not_an_answer",)),
    Mutant("any text ends the run", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    if getattr(message, "content", None):
        messages.append({"role": "assistant", "content": message.content})
        return message.content        # the model said something: that is the answer (it is not)
    calls = parse_tool_calls(message)
    if not calls:
        messages.append({"role": "assistant", "content": ""})
        return ""
    messages.append(assistant_turn(message))
    for call in calls:
        result = f"Error: {call.error}" if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return f"{MAX_STEPS_REACHED}: no final answer after {max_steps} model calls"
""", ("test_a_thought_beside_a_tool_call_does_not_end_the_run",)),
    Mutant("stops at a call with bad JSON", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        answer = getattr(message, "content", None) or ""
        messages.append({"role": "assistant", "content": answer})
        return answer
    broken = [call for call in calls if call.error]
    if broken:
        return f"Error: {broken[0].error}"
    messages.append(assistant_turn(message))
    for call in calls:
        messages.append(tool_result(call.id, dispatch_tool(call.name, call.arguments, repo_root)))
return f"{MAX_STEPS_REACHED}: no final answer after {max_steps} model calls"
""", ("test_bad_json_reaches_the_model_as_an_observation",)),
    Mutant("max_steps counts tool calls", "agent_loop.py", "run_agent", """
steps = 0
while steps < max_steps:
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        answer = getattr(message, "content", None) or ""
        messages.append({"role": "assistant", "content": answer})
        return answer
    messages.append(assistant_turn(message))
    for call in calls:
        steps += 1                    # one step per tool run (the cap is on model calls)
        result = f"Error: {call.error}" if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append(tool_result(call.id, result))
return f"{MAX_STEPS_REACHED}: no final answer after {max_steps} steps"
""", ("test_max_steps_counts_model_calls_not_tool_calls",)),
    Mutant("dicts instead of ToolCall objects", "agent_loop.py", "parse_tool_calls", parse_variant().replace(
        "calls.append(ToolCall(raw.id, raw.function.name, arguments))",
        'calls.append({"id": raw.id, "name": raw.function.name, "arguments": arguments})'),
        ("test_arguments_json_string_becomes_a_dict",)),
    Mutant("results sent with role function", "agent_loop.py", "run_agent", """
for _ in range(max_steps):
    message = complete(messages, TOOL_SCHEMAS)
    calls = parse_tool_calls(message)
    if not calls:
        answer = getattr(message, "content", None) or ""
        messages.append({"role": "assistant", "content": answer})
        return answer
    messages.append(assistant_turn(message))
    for call in calls:
        result = f"Error: {call.error}" if call.error else dispatch_tool(call.name, call.arguments, repo_root)
        messages.append({"role": "function", "tool_call_id": call.id, "name": call.name, "content": result})
return f"{MAX_STEPS_REACHED}: no final answer after {max_steps} model calls"
""", ("test_runs_a_tool_then_returns_the_answer",)),
)


# Mistakes no M1-M4 test can fail (they break no contract of the function itself) but a later
# test's hint must name: test_learner_path.py plants them and reads the first failure's hint.
HINT_MUTANTS = (
    Mutant("a debug print in dispatch_tool", "tools.py", "dispatch_tool", """
print("dispatch_tool:", name, args)   # left in while debugging
fn = TOOL_FUNCTIONS.get(name) if isinstance(name, str) else None
if fn is None:
    return f"Error: unknown tool {shorten(name)}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
if not isinstance(args, dict):
    return f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}."
problem = check_arguments(name, args)
if problem:
    return f"Error: {problem}."
try:
    return fn(repo_root, **args)
except Exception as exc:
    return f"Error: {exc}"
""", ()),
)

# Known-wrong stretch functions (code/stretch.py). Kept apart from MUTANTS because their tests are
# opt-in (--stretch): rubric/checks/test_provided_stretch.py plants them with test_course's _plant
# and runs the S<n> test file of the function's milestone.
STRETCH_MUTANTS = (
    Mutant("observations matched by position", "stretch.py", "trace_steps", """
steps = []
for index, message in enumerate(messages):
    if message.get("role") != "assistant":
        continue
    calls = message.get("tool_calls") or []
    if not calls:
        steps.append(Step(len(steps) + 1, "", [], answer=message.get("content") or ""))
        continue
    following = [m for m in messages[index + 1:index + 1 + len(calls)] if m.get("role") == "tool"]
    actions = [Action(c["function"]["name"], c["function"]["arguments"],
                      following[i]["content"] if i < len(following) else None) for i, c in enumerate(calls)]
    steps.append(Step(len(steps) + 1, (message.get("content") or "").strip(), actions))
return steps
""", ("test_observations_are_matched_by_tool_call_id_not_by_position",)),
    Mutant("edits the tests", "stretch.py", "plan_edit", """
target = tools.resolve_visible(repo_root, path)
shown = tools.display_path(repo_root, target)
text = read_text(target, shown)
if not old_string or text.count(old_string) != 1 or new_string == old_string:
    raise tools.ToolError("old_string must occur exactly once, and new_string must differ")
new_text = text.replace(old_string, new_string, 1)
return Edit(shown, target, text, new_text, unified_diff(shown, text, new_text))
""", ("test_tests_secrets_and_escapes_are_refused", "test_a_refusal_reaches_the_model_as_an_observation")),
    Mutant("replaces every match", "stretch.py", "plan_edit", """
target = tools.resolve_visible(repo_root, path)
shown = tools.display_path(repo_root, target)
if is_test_path(tools.relative_parts(repo_root, target)):
    raise tools.ToolError(f"{shown!r} is a test file: {TEST_REFUSAL}")
text = read_text(target, shown)
if old_string not in text:
    raise tools.ToolError(f"old_string was not found in {shown!r}")
new_text = text.replace(old_string, new_string)
return Edit(shown, target, text, new_text, unified_diff(shown, text, new_text))
""", ("test_old_string_must_occur_exactly_once",)),
    Mutant("an existing line is enough", "stretch.py", "validate_answer", """
problems = []
for i, cite in enumerate(arguments.get("citations") or []):
    checked = check_span(cite["path"], cite["start_line"], cite["end_line"], repo_root,
                         {cite["path"]: [(1, 10**9)]})
    if not (checked.exists and checked.in_range):
        problems.append(f"citations[{i}] {cite['path']}: {checked.reason}")
return problems
""", ("test_each_bad_citation_is_named_with_its_reason", "test_a_second_invalid_answer_ends_the_run_with_exit_1",
      "test_arguments_of_the_wrong_shape_are_problems_not_crashes")),
)
