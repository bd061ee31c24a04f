"""Tool calls written out as text: recognised for every model, recovered for a local server only.

A small model that does not use its chat template's tool-call markup writes the call into its reply
(Qwen2.5-Coder-1.5B behind llama-server, measured in bench/README.md), so the server returns text:

    ```json
    {"name": "search_code", "arguments": {"query": "order_total"}}
    ```

    written_calls(text, names)   the calls a reply consists of, [(name, arguments)], or [] if it is anything else
    recover(message, schemas)    PROVIDED RECOVERY, for a local server (llm.make_complete): a reply
                                 that ends in such calls (after a Thought, say) becomes those tool
                                 calls, so the loop runs them
    is_written_call(text)        the reply is nothing but a call written as JSON: for copilot.run this is
                                 a protocol failure, never an answer (every provider)

Narrow on purpose: each call is a JSON object with exactly a "name" (one of the offered tools) and
its "arguments" object, alone or in a ```json fence or <tool_call> tags, starting a line, and
nothing may follow the calls. Text after them, an unknown tool or arguments that are not an object
leave the reply as it is.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

RECOVERED_ID = "text_call_"          # ids of recovered calls: text_call_0, text_call_1, ...
MAX_WRITTEN_CHARS = 20_000           # longer replies are not searched (agent_loop.MAX_ARGUMENT_CHARS)
# One block: a fenced one (```json ... ```), a tagged one (<tool_call> ... </tool_call>) or a bare object.
BLOCK = re.compile(r"\s*(?:```[a-zA-Z_]*\s*(?P<fenced>\{.*?\})\s*```|<tool_call>\s*(?P<tagged>\{.*?\})\s*</tool_call>"
                   r"|(?P<bare>\{.*\}))\s*", re.DOTALL)


def written_calls(text, names=None) -> list[tuple[str, dict]]:
    """[(name, arguments)] when ``text`` is nothing but tool calls written as JSON, else [].

    ``names``: the tools offered (None: any name that looks like one). Doubled braces
    ({{"name": ...}}, copied from the Qwen2.5 template's own example) are read as single ones.
    """
    if not isinstance(text, str) or len(text) > MAX_WRITTEN_CHARS or "{" not in text:
        return []
    calls, at = [], 0
    while at < len(text):
        match = BLOCK.match(text, at)
        if not match or match.end() == at:
            return []
        call = _call(match.group("fenced") or match.group("tagged") or match.group("bare"), names)
        if call is None:
            return []
        calls.append(call)
        at = match.end()
    return calls


LINE_START = re.compile(r"^(?=```|<tool_call>|\{)", re.MULTILINE)


def _call(block: str, names) -> tuple[str, dict] | None:
    for candidate in (block, block[1:-1] if block.startswith("{{") and block.endswith("}}") else None):
        try:
            data = json.loads(candidate) if candidate else None
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict) or set(data) != {"name", "arguments"}:
            continue
        name, arguments = data["name"], data["arguments"]
        if isinstance(arguments, str):  # some models encode the arguments once more
            try:
                arguments = json.loads(arguments)
            except (ValueError, RecursionError):
                continue
        if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name) and isinstance(arguments, dict) \
                and (names is None or name in names):
            return name, arguments
    return None


def trailing_calls(text, names) -> tuple[str, list[tuple[str, dict]]]:
    """(the text before, the calls) when ``text`` ends in tool calls written as JSON, each block starting
    a line; ("", []) otherwise. The shape a Thought followed by its call takes from a small model."""
    if not isinstance(text, str) or len(text) > MAX_WRITTEN_CHARS:
        return "", []
    for start in LINE_START.finditer(text):
        calls = written_calls(text[start.start():], names)
        if calls:
            return text[:start.start()].strip(), calls
    return "", []


def is_written_call(text) -> bool:
    """The reply is only a tool call written as JSON (any tool name): not an answer."""
    return bool(written_calls(text))


def recover(message, tool_schemas):
    """PROVIDED RECOVERY (local servers): ``message`` with a written-out call made a real tool call.

    Returns the message unchanged when it already has tool calls or does not end in calls to the
    offered tools; else a message whose content is the text before the calls (the Thought, or None)
    and one tool call per written call, with ids
    RECOVERED_ID0, RECOVERED_ID1, ... so a transcript shows which calls were recovered.
    """
    if getattr(message, "tool_calls", None):
        return message
    names = {s.get("function", {}).get("name") for s in tool_schemas or [] if isinstance(s, dict)}
    thought, calls = trailing_calls(getattr(message, "content", None), names)
    if not calls:
        return message
    return SimpleNamespace(content=thought or None, role="assistant", tool_calls=[
        SimpleNamespace(id=f"{RECOVERED_ID}{i}", type="function",
                        function=SimpleNamespace(name=name, arguments=json.dumps(arguments)))
        for i, (name, arguments) in enumerate(calls)])
