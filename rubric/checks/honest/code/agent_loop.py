"""A learner's loop, kept small for the honest corpus: line numbers below are what the write-ups cite."""

import json


def parse_tool_calls(message):
    out = []
    for call in getattr(message, "tool_calls", None) or []:
        raw = call.function.arguments or "{}"
        try:
            args = json.loads(raw)
        except (ValueError, RecursionError) as err:
            out.append((call.id, call.function.name, {}, f"bad JSON: {err}"))
            continue
        if not isinstance(args, dict):
            out.append((call.id, call.function.name, {}, "arguments are not an object"))
            continue
        out.append((call.id, call.function.name, args, None))
    return out


def run_agent(messages, complete, dispatch, max_steps=10):
    for step in range(max_steps):
        reply = complete(messages)
        calls = parse_tool_calls(reply)
        if not calls:
            return reply.content
        messages.append({"role": "assistant", "tool_calls": reply.tool_calls})
        for call_id, name, args, error in calls:
            result = f"Error: {error}" if error else dispatch(name, args)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return "MAX_STEPS_REACHED"
