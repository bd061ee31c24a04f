"""rubric/reference/'s four functions with local names changed (a copy, lightly disguised)."""


def safe_resolve(repo_root, rel_path):
    if not isinstance(rel_path, str):
        raise ValueError(f'path must be a string, got {type(rel_path).__name__}')
    if '\x00' in rel_path:
        raise ValueError('path contains a NUL byte')
    if len(rel_path) > MAX_PATH_CHARS:
        raise ValueError(f'path is {len(rel_path):,} characters long; the limit is {MAX_PATH_CHARS:,}')
    try:
        base = Path(repo_root).resolve()
        where = (base / rel_path).resolve()
    except (OSError, RuntimeError) as exc:
        raise ValueError(f'cannot resolve path {rel_path!r}: {exc}') from None
    if not where.is_relative_to(base):
        raise ValueError(f'path {rel_path!r} resolves outside the repository; use a path relative to the repository root')
    return where


def dispatch_tool(name, args, repo_root):
    tool = TOOL_FUNCTIONS.get(name) if isinstance(name, str) else None
    if tool is None:
        return f"Error: unknown tool {shorten(name)}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
    if not isinstance(args, dict):
        return f'Error: arguments for {name} must be a JSON object, got {type(args).__name__}.'
    issue = check_arguments(name, args)
    if issue:
        return f'Error: {issue}.'
    try:
        return tool(repo_root, **args)
    except (ValueError, ToolError) as exc:
        return f'Error: {exc}'
    except Exception as exc:
        return f'Error: {name} failed ({type(exc).__name__}: {str(exc)[:300]}). Try different arguments or another tool.'


def parse_tool_calls(message):
    found_calls = []
    for raw in getattr(message, 'tool_calls', None) or []:
        raw_text = raw.function.arguments
        try:
            decoded = json.loads(raw_text) if raw_text else {}
        except (TypeError, ValueError, RecursionError) as exc:
            found_calls.append(ToolCall(raw.id, raw.function.name, {}, f'arguments are not valid JSON ({str(exc)[:200]}): {str(raw_text)[:200]!r}'))
            continue
        if not isinstance(decoded, dict):
            found_calls.append(ToolCall(raw.id, raw.function.name, {}, f'arguments must be a JSON object, got {type(decoded).__name__}'))
            continue
        found_calls.append(ToolCall(raw.id, raw.function.name, decoded))
    return found_calls


def run_agent(messages, repo_root, complete, max_steps=DEFAULT_MAX_STEPS):
    for _ in range(max_steps):
        message = complete(messages, TOOL_SCHEMAS)
        found_calls = parse_tool_calls(message)
        if not found_calls:
            reply_text = getattr(message, 'content', None) or ''
            messages.append({'role': 'assistant', 'content': reply_text})
            return reply_text
        messages.append(assistant_turn(message))
        for call in found_calls:
            if call.error:
                observation = f'Error: {call.error}. Call {call.name} again with a JSON object as arguments.'
            else:
                observation = dispatch_tool(call.name, call.arguments, repo_root)
            messages.append(tool_result(call.id, observation))
    return f'{MAX_STEPS_REACHED}: no final answer after {max_steps} model calls; the model kept calling tools.'
