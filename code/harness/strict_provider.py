"""A strict fake provider: checks each request the way real chat APIs do, then lets a scripted
model answer. Mistakes that a real provider rejects with HTTP 400 fail here too, offline.

Rules checked on every request (OpenAI, Groq, Anthropic and Gemini all enforce them):
  - the conversation is plain JSON: dicts, strings, lists (json.dumps must succeed);
  - a "tool" message answers a call of the assistant message just before it (only other
    tool messages may sit in between), and each call is answered exactly once;
  - every call of an assistant turn is answered before any other message follows;
  - a tool call carries id, type "function", a name, and arguments as a JSON string.
"""

from __future__ import annotations

import json


class ProviderRejected(Exception):
    """What a provider's 400 Bad Request would say. The text names the rule that was broken, and
    ``rule`` says which one in a word, so a test's hint can follow from it: "json", "tools", "role",
    "order" (a result with no assistant turn before it), "twice", "unanswered", "shape"."""

    def __init__(self, message: str, rule: str = ""):
        super().__init__(message)
        self.rule = rule


def check_request(messages, tools) -> None:
    try:
        json.dumps(messages)
    except TypeError as exc:
        raise ProviderRejected(
            f"400 Bad Request: the messages are not plain JSON ({exc}). Append dicts, not the "
            "model's Message object: agent_loop.assistant_turn(message) builds the dict.", "json"
        ) from None
    if not isinstance(tools, list) or not tools:
        raise ProviderRejected("400 Bad Request: no tools were sent, so the model cannot call any", "tools")
    pending: dict[str, bool] = {}  # call id -> answered? for the latest tool-calling turn
    for index, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in ("system", "user", "assistant", "tool"):
            raise ProviderRejected(f"400 Bad Request: messages[{index}] has no valid role: {msg!r:.120}", "role")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if call_id not in pending:
                raise ProviderRejected(
                    f"400 Bad Request: messages[{index}] has role 'tool' (tool_call_id={call_id!r}) but does "
                    "not answer a tool call of the assistant message before it. Append the assistant "
                    "turn with its tool_calls first, then one tool message per call.", "order"
                )
            if pending[call_id]:
                raise ProviderRejected(f"400 Bad Request: tool_call_id {call_id!r} is answered twice (messages[{index}])", "twice")
            if not isinstance(msg.get("content"), str):
                raise ProviderRejected(f"400 Bad Request: messages[{index}].content must be a string", "shape")
            pending[call_id] = True
            continue
        _require_all_answered(pending, index)
        pending = {}
        if role == "assistant" and msg.get("tool_calls"):
            for call in msg["tool_calls"]:
                _check_call_shape(call, index)
                pending[call["id"]] = False
    _require_all_answered(pending, len(messages))


def _require_all_answered(pending: dict, index: int) -> None:
    missing = [cid for cid, done in pending.items() if not done]
    if missing:
        raise ProviderRejected(
            "400 Bad Request: an assistant message with 'tool_calls' must be followed by one tool "
            f"message per call; before messages[{index}] these ids got no answer: {', '.join(missing)}", "unanswered"
        )


def _check_call_shape(call, index: int) -> None:
    fn = call.get("function") if isinstance(call, dict) else None
    ok = (
        isinstance(fn, dict)
        and isinstance(call.get("id"), str)
        and call.get("type") == "function"
        and isinstance(fn.get("name"), str)
        and isinstance(fn.get("arguments"), str)
    )
    if not ok:
        raise ProviderRejected(
            f"400 Bad Request: messages[{index}] has a malformed tool call {call!r:.160}; expected "
            "{'id': str, 'type': 'function', 'function': {'name': str, 'arguments': JSON string}}", "shape"
        )


class StrictProvider:
    """``complete(messages, tools)`` that validates the request, then asks ``model`` for a reply."""

    def __init__(self, model):
        self.model = model

    def __call__(self, messages, tools):
        check_request(messages, tools)
        return self.model(messages, tools)
