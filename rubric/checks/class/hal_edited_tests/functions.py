def run_agent(messages, repo_root, complete, max_steps=DEFAULT_MAX_STEPS):
    for step in range(max_steps):
        reply = complete(messages, TOOL_SCHEMAS)
        requested = parse_tool_calls(reply)
        if not requested:
            final = getattr(reply, "content", None) or ""
            messages.append({"role": "assistant", "content": final})
            return final
        messages.append(assistant_turn(reply))
        for call in requested:
            result = f"Error: {call.error}. Retry with a JSON object." if call.error else \
                dispatch_tool(call.name, call.arguments, repo_root)
            messages.append(tool_result(call.id, result))
    return f"{MAX_STEPS_REACHED}: {max_steps} model calls and still no answer."
