"""Scripted models: stand-ins for an LLM that answer from a script, so loop tests are exact.

Only the model's decisions are fake. The tools are real and really read the fixture files.
Messages have LiteLLM's shape (attribute access, ``function.arguments`` a JSON string).

    model = ScriptedModel([
        turn(call("read_file", {"path": "shop/models.py"})),
        answer("Item has price, not cost: shop/models.py:10"),
    ])
    run_agent(messages, repo, model)          # model(messages, tools) -> message
    model.requests                            # what the loop sent, one deep copy per call
"""

from __future__ import annotations

import copy
import itertools
import json
from types import SimpleNamespace

_ids = itertools.count(1)


def call(name: str, arguments=None, *, raw: str | None = None, call_id: str | None = None):
    """One tool call. ``arguments`` is JSON-encoded; ``raw`` sends an exact (maybe broken) string."""
    text = raw if raw is not None else json.dumps(arguments if arguments is not None else {})
    return SimpleNamespace(
        id=call_id or f"call_{next(_ids)}",
        type="function",
        function=SimpleNamespace(name=name, arguments=text),
    )


def turn(*calls, content=None):
    """An assistant message that requests tools (content None, as OpenAI and Groq send it)."""
    return SimpleNamespace(role="assistant", content=content, tool_calls=list(calls))


def answer(text: str, tool_calls=None):
    """A final assistant message with no tool calls. ``tool_calls`` may be None or []."""
    return SimpleNamespace(role="assistant", content=text, tool_calls=tool_calls)


class ScriptedModel:
    """Returns the scripted messages in order; records every request it receives.

    Running past the end of the script is a test bug, reported as such.
    """

    def __init__(self, script, usage=(100, 20)):
        self.script = list(script)
        self.requests: list[list[dict]] = []
        self.tools_seen: list = []
        self.usage = usage  # (prompt_tokens, completion_tokens) reported per call

    @property
    def calls(self) -> int:
        return len(self.requests)

    def __call__(self, messages, tools):
        self.requests.append(copy.deepcopy(list(messages)))
        self.tools_seen.append(tools)
        if self.calls > len(self.script):
            raise AssertionError(
                f"the scripted model was called {self.calls} times but has only "
                f"{len(self.script)} scripted replies: the loop kept going after the model answered"
            )
        return self.script[self.calls - 1]


class AlwaysCallsTool(ScriptedModel):
    """A confused model that requests the same tool on every turn and never answers."""

    def __init__(self, name="read_file", arguments=None, ceiling: int = 100):
        super().__init__([])
        self.name, self.arguments = name, arguments or {"path": "README.md"}
        # A safety net so a test of an uncapped loop still ends, and soon: ten times the default cap.
        self.ceiling = ceiling

    def __call__(self, messages, tools):
        self.requests.append(copy.deepcopy(list(messages)) if self.calls < 50 else [])
        if self.calls > self.ceiling:
            raise RunawayLoop(f"the loop called the model {self.calls} times without stopping")
        return turn(call(self.name, self.arguments))


class RunawayLoop(AssertionError):
    """Raised by a harness ceiling when a loop under test has no cap of its own."""
