"""The agentic loop: ask the model, run the tools it asks for, feed the results back, repeat.

This file speaks the protocol only. It never builds a path or opens a file: every tool call
goes through tools.dispatch_tool, which already knows the repository root.

Learner-owned (the rest of this file is provided):
    parse_tool_calls  M2  turn the model's message into ToolCall objects (json.loads!)
    run_agent         M4  the bounded loop
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tools import TOOL_SCHEMAS, dispatch_tool, shorten

# A confused model can ask for tools forever; the loop never makes more model calls than this.
DEFAULT_MAX_STEPS = 10

# What a capped run's return value starts with, so callers can tell "stopped" from "answered".
MAX_STEPS_REACHED = "MAX_STEPS_REACHED"

# Each result is cut at MAX_OBSERVATION_CHARS (tool_result); the completion wrapper runs at most
# llm.MAX_CALLS_PER_TURN calls per turn, so one turn's results stay bounded in total.
MAX_OBSERVATION_CHARS = 16_000


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
    are, so they match the tool results (llm.bounded_reply has already made them usable strings).
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


def parse_tool_calls(message) -> list[ToolCall]:
    """Extract the tool calls from a model message (LiteLLM's shape) as ToolCall objects.

    Contract:
        message   has ``.content`` and ``.tool_calls``; each call has ``.id``,
                  ``.function.name`` and ``.function.arguments``, which is a JSON *string*.
        returns   one ToolCall per requested call, in order, with ``arguments`` as a dict;
                  [] when there are no tool calls (attribute missing, None, or []).
                  An empty string ``""`` or None (some providers send one of them for a
                  call without arguments) means ``{}``, with no error.
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
        returns    always a str, never None: the model's final text when it answers without
                   tool calls (that answer is also appended as an assistant message). A reply
                   with neither tool calls nor text ends the run too, returning "" after that one
                   model call (the caller explains an empty reply; the loop does not ask again).
                   Text written beside tool calls (a "Thought") is not an answer: the calls run
                   and the loop goes on. After ``max_steps`` model calls without an answer: a
                   string starting with MAX_STEPS_REACHED.
        raises     whatever ``complete`` raises (a provider that cannot be reached, a bad key):
                   the loop does not catch it, so the copilot can report it and exit 2.

    Each step: call ``complete(messages, TOOL_SCHEMAS)``; if it requested tools, append
    ``assistant_turn(message)``, then exactly one ``tool_result(call.id, ...)`` per call, in the
    order requested. A call with ``error`` set is not run: its result is "Error: " plus that
    error; every other call gets ``dispatch_tool(call.name, call.arguments, repo_root)``.

    Hint: a ``for step in range(max_steps)`` loop cannot run away; ``while True`` can.
    See lesson/lesson.agent.md, "Section 3: Technical Explanation" and Example 3.
    """
    # TODO(M4): call the model, run the tools it asks for, feed the results back, stop at max_steps.
    raise NotImplementedError("M4: agent_loop.run_agent is not implemented yet (see TODO(M4) in code/agent_loop.py)")
