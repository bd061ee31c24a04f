"""Tool calls written out as text: recognised for every model, recovered for a local server only.

A small model that does not use its chat template's tool-call markup writes the call into its reply
(Qwen2.5-Coder-1.5B behind llama-server, measured in bench/README.md), so the server returns text:

    ```json
    {"name": "search_code", "arguments": {"query": "order_total"}}
    ```

    written_calls(text, names)   the calls a reply consists of, [(name, arguments)], or [] if it is anything else
    recover(message, schemas)    PROVIDED RECOVERY, for a local server (llm.make_complete): a reply that
                                 is such calls, optionally after a short Thought, becomes real tool
                                 calls, so the loop runs them and the model reads their real results;
                                 a call quoted inside other text (before and after it, or in a fence
                                 with other lines) leaves the reply an answer, with a note
    is_written_call(text)        the reply is nothing but a call written as JSON: for copilot.run this is
                                 a protocol failure, never an answer (every provider)

Narrow on purpose: a call is one JSON object naming one of the offered tools with an object of
arguments ({"name": ..., "arguments": {...}} or the few variants _as_call reads), starting a line,
alone or in a ```json fence or <tool_call> tags. Anything else leaves the reply as it is.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

RECOVERED_ID = "text_call_"          # ids of recovered calls: text_call_0, text_call_1, ...
MAX_WRITTEN_CHARS = 20_000           # longer replies are not searched (agent_loop.MAX_ARGUMENT_CHARS)
MAX_THOUGHT_CHARS = 600              # the text a recovered call may follow: a Thought of a few sentences
# What may open a written call: a code fence (```json) or a tag the model borrowed from its template.
OPENER = re.compile(r"```[A-Za-z_]*[ \t]*|<(tool_call|tools|function_call)>")
LINE_START = re.compile(r"^(?=```|<(?:tool_call|tools|function_call)>|\{)", re.MULTILINE)
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_DECODER = json.JSONDecoder()


def written_calls(text, names=None) -> list[tuple[str, dict]]:
    """[(name, arguments)] when ``text`` is nothing but tool calls written as JSON, else [].

    ``names``: the tools offered (None: any name that looks like one).
    """
    if not isinstance(text, str) or len(text) > MAX_WRITTEN_CHARS or "{" not in text:
        return []
    calls, at = [], _skip(text, 0)
    while at < len(text):
        block = _block_at(text, at, names)
        if block is None:
            return []
        calls.append(block[0])
        at = _skip(text, block[1])
    return calls


def first_calls(text, names) -> tuple[str, list[tuple[str, dict]], str | None]:
    """(the Thought, the calls, None) when ``text`` is a short Thought (at most MAX_THOUGHT_CHARS, no
    code fence) followed by tool calls written as JSON that start a line, and nothing after them.
    ("", [], why) when a call is there but inside other text: text after it, a long or fenced text
    before it (a model explaining code quotes calls too); ("", [], None) when there is none."""
    if not isinstance(text, str) or len(text) > MAX_WRITTEN_CHARS or "{" not in text:
        return "", [], None
    for line in LINE_START.finditer(text):
        calls, at = [], line.start()
        while (block := _block_at(text, at, names)) is not None:
            calls.append(block[0])
            at = _skip(text, block[1])
        if not calls:
            continue
        before = text[:line.start()].strip()
        if at < len(text):
            return "", [], "text follows the call"
        if len(before) > MAX_THOUGHT_CHARS or "```" in before:
            return "", [], "the call comes after more than a short Thought"
        return before, calls, None
    return "", [], None


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _block_at(text: str, at: int, names) -> tuple[tuple[str, dict], int] | None:
    """The call written at ``text[at:]`` and where it ends, or None. Doubled braces ({{"name": ...}},
    copied from the Qwen2.5 template's own example) are read as single ones."""
    opener, closing = OPENER.match(text, at), None
    if opener:
        closing = "```" if opener.group().startswith("```") else f"</{opener.group(1)}>"
        at = _skip(text, opener.end())
    doubled = text.startswith("{{", at)
    try:
        value, end = _DECODER.raw_decode(text, at + doubled)
    except (ValueError, RecursionError):
        return None
    for needed in ("}" if doubled else "", closing or ""):
        end = _skip(text, end)
        if not text.startswith(needed, end):
            return None
        end += len(needed)
    call = _as_call(value, names)
    return (call, end) if call else None


def _as_call(value, names) -> tuple[str, dict] | None:
    """(name, arguments) from the shapes small models write: {"name", "arguments"}, "parameters" for
    "arguments", {"function": name, ...}, or OpenAI's {"type": "function", "function": {...}}."""
    if isinstance(value, dict) and value.get("type") == "function" and set(value) == {"type", "function"}:
        value = value["function"]
    if not isinstance(value, dict) or len(value) != 2:
        return None
    name = value.get("name", value.get("function"))
    arguments = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):  # some models encode the arguments once more
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    if not (isinstance(name, str) and TOOL_NAME.fullmatch(name) and isinstance(arguments, dict)):
        return None
    return (name, arguments) if names is None or name in names else None


def is_written_call(text) -> bool:
    """The reply is only a tool call written as JSON (any tool name): not an answer."""
    return bool(written_calls(text))


def recover(message, tool_schemas, quoted=None):
    """PROVIDED RECOVERY (local servers): ``message`` with a written-out call made a real tool call.

    Returns the message unchanged when it already has tool calls, or when it is not a short Thought
    followed by calls to offered tools and nothing else (first_calls): a call quoted inside prose,
    or followed by text, leaves the reply an answer, and ``quoted(why)`` is called with the reason
    so the run can say so. Else a message whose content is the Thought (or None) and one tool call
    per written call, with ids RECOVERED_ID0, RECOVERED_ID1, ... so a transcript shows which calls
    were recovered.
    """
    if getattr(message, "tool_calls", None):
        return message
    names = {s.get("function", {}).get("name") for s in tool_schemas or [] if isinstance(s, dict)}
    thought, calls, why = first_calls(getattr(message, "content", None), names)
    if not calls:
        if why and quoted is not None:
            quoted(why)
        return message
    return SimpleNamespace(content=thought or None, role="assistant", tool_calls=[
        SimpleNamespace(id=f"{RECOVERED_ID}{i}", type="function",
                        function=SimpleNamespace(name=name, arguments=json.dumps(arguments)))
        for i, (name, arguments) in enumerate(calls)])
