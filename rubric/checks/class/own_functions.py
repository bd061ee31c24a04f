"""The class's shared honest implementation of the four learner functions (not the reference).

Each learner folder's functions.py replaces some of these; recipe.json says what else differs.
Written in other idioms than rubric/reference/ on purpose: the grader must recognise them.
"""
# ruff: noqa  (bodies are planted into code/tools.py and code/agent_loop.py, where the names exist)


def safe_resolve(repo_root, rel_path):
    if not isinstance(rel_path, str) or "\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
        raise ValueError(f"refused path {str(rel_path)[:80]!r}: not a short string without NUL bytes")
    try:
        root = Path(repo_root).resolve()
        target = (root / rel_path).resolve()
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"cannot resolve {rel_path!r}: {exc}") from None
    if target != root and root not in target.parents:
        raise ValueError(f"{rel_path!r} is outside the repository; give a path inside it")
    return target


def dispatch_tool(name, args, repo_root):
    if not isinstance(name, str) or name not in TOOL_FUNCTIONS:
        return f"Error: unknown tool {shorten(name)}; the tools are {', '.join(TOOL_FUNCTIONS)}."
    if not isinstance(args, dict):
        return f"Error: the arguments for {name} must be a JSON object, not {type(args).__name__}."
    problem = check_arguments(name, args)
    if problem:
        return f"Error: {problem}."
    try:
        return TOOL_FUNCTIONS[name](repo_root, **args)
    except (ValueError, ToolError) as exc:
        return f"Error: {exc}"
    except Exception as exc:
        return f"Error: {name} failed with {type(exc).__name__}: {str(exc)[:200]}"


def parse_tool_calls(message):
    found = []
    for raw in getattr(message, "tool_calls", None) or []:
        text = raw.function.arguments
        try:
            value = json.loads(text) if text else {}
        except (TypeError, ValueError, RecursionError) as exc:
            found.append(ToolCall(raw.id, raw.function.name, {}, f"invalid JSON arguments: {str(exc)[:150]}"))
            continue
        if isinstance(value, dict):
            found.append(ToolCall(raw.id, raw.function.name, value))
        else:
            found.append(ToolCall(raw.id, raw.function.name, {}, f"arguments must be a JSON object, not {type(value).__name__}"))
    return found


def run_agent(messages, repo_root, complete, max_steps=DEFAULT_MAX_STEPS):
    steps = 0
    while steps < max_steps:
        steps += 1
        message = complete(messages, TOOL_SCHEMAS)
        calls = parse_tool_calls(message)
        if not calls:
            text = getattr(message, "content", None) or ""
            messages.append({"role": "assistant", "content": text})
            return text
        messages.append(assistant_turn(message))
        for call in calls:
            if call.error:
                output = f"Error: {call.error}. Send the arguments again as a JSON object."
            else:
                output = dispatch_tool(call.name, call.arguments, repo_root)
            messages.append(tool_result(call.id, output))
    return f"{MAX_STEPS_REACHED}: stopped after {max_steps} model calls without an answer."
