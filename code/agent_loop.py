"""The agentic loop: ask the model, run the tools it asks for, feed the results back, repeat.

This file speaks the protocol only. It never builds a path or opens a file: every tool call
goes through tools.dispatch_tool, which already knows the repository root.

Learner-owned (the rest of this file is provided):
    parse_tool_calls  M2  turn the model's message into ToolCall objects (json.loads!)
    run_agent         M4  the bounded loop
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from types import SimpleNamespace

from tools import NOT_RUN_KEY, TOOL_FUNCTIONS, TOOL_SCHEMAS, dispatch_tool, shorten

# A confused model can ask for tools forever; the loop never makes more model calls than this.
DEFAULT_MAX_STEPS = 10

# What a capped run's return value starts with, so callers can tell "stopped" from "answered".
MAX_STEPS_REACHED = "MAX_STEPS_REACHED"

# Budgets per turn, so they hold in total and not only per tool: at most MAX_CALLS_PER_TURN calls
# are run (bounded_reply), and each result is cut at MAX_OBSERVATION_CHARS (tool_result), so one
# turn's results stay under 12 x 16,000 characters however many calls the model asks for.
MAX_CALLS_PER_TURN = 12
MAX_OBSERVATION_CHARS = 16_000
MAX_ARGUMENT_CHARS = 20_000
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")   # what providers accept back as a tool name
_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


@dataclass
class ToolCall:
    """One tool call requested by the model, with its arguments already parsed.

    ``error`` is set (and ``arguments`` is {}) when the model's arguments could not be used:
    the loop then sends the error back as this call's result instead of running the tool.
    """

    id: str
    name: str
    arguments: dict
    error: str | None = None


def assistant_turn(message) -> dict:
    """The model's tool-calling message as a plain, JSON-serializable dict for ``messages``.

    Providers require this turn (with its ``tool_calls``) right before the tool results. A dict
    rather than LiteLLM's Message object: ``json.dumps`` can save it, and some providers mutate
    the object if it is sent back. Content is None (JSON null) when the model wrote no text:
    "" makes LiteLLM send Gemini an empty text part, which Google rejects. Arguments that are not a JSON object are sent back as
    "{}" (the problem reaches the model as that call's result); ids and names are kept as they
    are, so they match the tool results (bounded_reply has already made them usable strings).
    """
    calls = []
    for raw in getattr(message, "tool_calls", None) or []:
        function = getattr(raw, "function", None)
        arguments = getattr(function, "arguments", None)
        if not _is_json_object(arguments):
            arguments = "{}"  # the parse error reaches the model as this call's result instead
        name = getattr(function, "name", None)
        calls.append(
            {
                "id": getattr(raw, "id", None),
                "type": "function",
                "function": {"name": name if isinstance(name, str) else shorten(name), "arguments": arguments},
            }
        )
    text = getattr(message, "content", None)
    content = text if isinstance(text, str) and text.strip() else None
    return {"role": "assistant", "content": content, "tool_calls": calls}


def _is_json_object(text) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError, RecursionError):  # nested 100,000 deep: RecursionError
        return False


def tool_result(call_id: str, content: str) -> dict:
    """The message that answers one tool call; a result over MAX_OBSERVATION_CHARS is cut, with a note."""
    content = content if isinstance(content, str) else str(content)
    if len(content) > MAX_OBSERVATION_CHARS:
        content = (
            content[:MAX_OBSERVATION_CHARS]
            + f"\n[observation cut: {len(content):,} characters, at most {MAX_OBSERVATION_CHARS:,} per "
            "tool result; ask for less, e.g. a smaller line range or a more specific search]"
        )
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def bounded_reply(message):
    """The model's message made safe to run and to send back; the completion wrapper applies it.

    Applied before parse_tool_calls and assistant_turn see the message, so both see the same
    calls: ids become unique non-empty strings (a repeated id would answer two calls with one
    result), a name that is not a short plain string becomes "invalid_tool_name", arguments
    that are not a string are encoded, and a call past MAX_CALLS_PER_TURN, or with arguments
    over MAX_ARGUMENT_CHARS, keeps its id but gets arguments ``{"_not_run": "<why>"}``:
    check_arguments returns that text, so it is answered with an error and never run.
    """
    raws = list(getattr(message, "tool_calls", None) or [])
    content = getattr(message, "content", None)
    calls, seen = [], set()
    for index, raw in enumerate(raws):
        function = getattr(raw, "function", None)
        call_id = getattr(raw, "id", None)
        if not (isinstance(call_id, str) and _CALL_ID.fullmatch(call_id)) or call_id in seen:
            call_id = f"call_{index}" if f"call_{index}" not in seen else f"call_{index}_{len(seen)}"
        seen.add(call_id)
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        why = None
        if not (isinstance(name, str) and _TOOL_NAME.fullmatch(name)):
            why = f"the tool name {shorten(name, 60)} is not a tool; the tools are {', '.join(TOOL_FUNCTIONS)}"
            name = "invalid_tool_name"
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments)
            except (TypeError, ValueError, RecursionError):
                arguments = ""
        if index >= MAX_CALLS_PER_TURN:
            why = (f"not run: this turn asked for {len(raws)} tool calls and at most {MAX_CALLS_PER_TURN} "
                   "are run per turn; ask again for the ones you still need")
        elif len(arguments) > MAX_ARGUMENT_CHARS:
            why = f"not run: the arguments were {len(arguments):,} characters; the limit is {MAX_ARGUMENT_CHARS:,}"
        if why:
            arguments = json.dumps({NOT_RUN_KEY: why})
        calls.append(SimpleNamespace(id=call_id, type="function",
                                     function=SimpleNamespace(name=name, arguments=arguments)))
    return SimpleNamespace(content=content if isinstance(content, str) else None, tool_calls=calls or None)


def parse_tool_calls(message) -> list[ToolCall]:
    """Extract the tool calls from a model message (LiteLLM's shape) as ToolCall objects.

    Contract:
        message   has ``.content`` and ``.tool_calls``; each call has ``.id``,
                  ``.function.name`` and ``.function.arguments``, which is a JSON *string*.
        returns   one ToolCall per requested call, in order, with ``arguments`` as a dict;
                  [] when there are no tool calls (attribute missing, None, or []).
                  An empty string ``""`` (some providers send it for a call without
                  arguments) means ``{}``, with no error.
        never     raises for bad arguments: malformed JSON, JSON nested too deeply to parse
                  (``json.loads`` raises RecursionError, which is not a ValueError), a number
                  too long to convert (over 4,300 digits: ValueError), or JSON that is not an
                  object, gives a ToolCall with ``arguments={}`` and ``error`` saying what was
                  wrong, in words the model can act on: that the arguments are not valid JSON
                  (with json's reason), or that they must be a JSON object (and what they were).
        keeps      every call, even two identical ones (same name and arguments, two ids): each
                   id must get its own tool result, or the provider rejects the next request.

    Hint: ``getattr(message, "tool_calls", None) or []`` covers the three "no calls" cases;
    ``json.loads`` the arguments string inside try/except (catch RecursionError too). See lesson/lesson.agent.md,
    "Section 4: Guided Examples" (Example 2).
    """
    # TODO(M2): build one ToolCall per entry in message.tool_calls, json.loads-ing the arguments.
    raise NotImplementedError("M2: agent_loop.parse_tool_calls is not implemented yet (see TODO(M2) in code/agent_loop.py)")


def run_agent(messages, repo_root, complete, max_steps=DEFAULT_MAX_STEPS) -> str:
    """Run the tool loop until the model answers or ``max_steps`` model calls have been made.

    Contract:
        messages   the conversation so far (system, user, ...); extended IN PLACE, append-only,
                   with plain dicts, so afterwards it is the whole JSON-serializable transcript.
        repo_root  passed to dispatch_tool; the loop itself never touches the filesystem.
        complete   ``complete(messages, tools)`` returns the assistant message (LiteLLM's shape).
        returns    the model's final text when it answers without tool calls (that answer is
                   also appended as an assistant message); otherwise, after ``max_steps`` model
                   calls, a string starting with MAX_STEPS_REACHED.

    Each step: call ``complete(messages, TOOL_SCHEMAS)``; if it requested tools, append
    ``assistant_turn(message)``, then exactly one ``tool_result(call.id, ...)`` per call, in the
    order requested. A call with ``error`` set is not run: its result is "Error: " plus that
    error; every other call gets ``dispatch_tool(call.name, call.arguments, repo_root)``.

    Hint: a ``for step in range(max_steps)`` loop cannot run away; ``while True`` can.
    See lesson/lesson.agent.md, "Section 3: Technical Explanation" and Example 3.
    """
    # TODO(M4): call the model, run the tools it asks for, feed the results back, stop at max_steps.
    raise NotImplementedError("M4: agent_loop.run_agent is not implemented yet (see TODO(M4) in code/agent_loop.py)")
