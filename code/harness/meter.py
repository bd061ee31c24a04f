"""The harness's side of every M6 run: it stands between the loop under test and the model.

``Meter`` wraps the model: it counts each request, checks it the way a provider would, estimates
(or reads) its tokens, and stops the run at a ceiling that holds whatever the loop does.
``Observer`` wraps dispatch_tool: it records every tool call that really ran, and counts those too.
Used by break_and_observe.py and evaluate.py.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass

from harness.strict_provider import ProviderRejected, check_request

HARNESS_MAX_CALLS = 50          # offline ceiling: a runaway stops here even if the loop has no cap
HARNESS_MAX_TOKENS = 2_000_000  # offline token ceiling (estimated tokens); the call ceiling comes first
HARNESS_MAX_TOOL_CALLS = 200    # a loop that dispatches tools without asking the model stops here
HARNESS_MAX_SECONDS = 60        # checked at every model and tool call
CHARS_PER_TOKEN = 4             # offline token estimate: about 4 characters of English/code per token


class HarnessCeiling(BaseException):
    """The harness stopped the run. A BaseException, like KeyboardInterrupt, so that a loop under
    test which catches ``Exception`` around the model call cannot swallow it."""


def tool_texts(messages) -> list[str]:
    """The content of every tool message in a conversation."""
    return [m.get("content") or "" for m in messages if isinstance(m, dict) and m.get("role") == "tool"]


@dataclass
class Request:
    """One model request: its input tokens, and the tool results the model could see in it."""

    tokens_in: int
    tool_texts: frozenset


class Meter:
    """Stands between the loop and the model: counts each request, checks it the way a provider
    would, and stops the run at the harness ceiling whatever the loop under test does."""

    def __init__(self, model, max_calls: int, max_tokens: int, usage=None):
        self.model, self.max_calls, self.max_tokens = model, max_calls, max_tokens
        self.usage = usage          # a real model: callable() -> tokens (in, out) so far; None: estimate
        self.calls = 0
        self.started = time.perf_counter()
        self.tokens_in = self.tokens_out = 0
        self.requests: list[Request] = []
        self.requested: list[tuple[str, str]] = []  # (tool name, canonical arguments) the model asked for
        self.rejected: str | None = None
        self.stopped: str | None = None

    def __call__(self, messages, tools):
        if self.calls >= self.max_calls:
            self.stopped = f"harness ceiling: {self.max_calls} model calls"
            raise HarnessCeiling(self.stopped)
        if self.tokens_in + self.tokens_out >= self.max_tokens:
            self.stopped = f"token budget: {self.tokens_in + self.tokens_out:,} of {self.max_tokens:,} tokens used"
            raise HarnessCeiling(self.stopped)
        self.check_clock()
        self.calls += 1  # counted first: a loop that swallows the rejection below still hits the ceiling
        try:
            check_request(messages, tools)
        except ProviderRejected as exc:
            self.rejected = str(exc)
            raise
        estimate_in = len(json.dumps(messages, default=str)) // CHARS_PER_TOKEN + len(json.dumps(tools)) // CHARS_PER_TOKEN
        before = self.usage() if self.usage else (0, 0)
        reply = self.model(messages, tools)
        if self.usage:
            after = self.usage()
            used_in, used_out = after[0] - before[0], after[1] - before[1]
        else:
            used_in, used_out = estimate_in, estimate_out(reply)
        self.tokens_in += used_in
        self.tokens_out += used_out
        self.requests.append(Request(used_in, frozenset(tool_texts(messages))))
        for raw in getattr(reply, "tool_calls", None) or []:
            self.requested.append((raw.function.name, canonical(raw.function.arguments)))
        return reply

    def check_clock(self) -> None:
        if time.perf_counter() - self.started > HARNESS_MAX_SECONDS:
            self.stopped = f"harness ceiling: {HARNESS_MAX_SECONDS} s of wall time"
            raise HarnessCeiling(self.stopped)


def estimate_out(reply) -> int:
    """Tokens of a reply, estimated from its characters."""
    text = getattr(reply, "content", None) or ""
    for raw in getattr(reply, "tool_calls", None) or []:
        text += raw.function.name + str(raw.function.arguments)
    return max(1, len(text) // CHARS_PER_TOKEN)


def canonical(arguments) -> str:
    """Tool arguments in one spelling (sorted keys), so identical calls compare equal."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except (TypeError, ValueError):
        return str(arguments)


@dataclass
class Executed:
    """One tool call that really ran (args as dispatch_tool received them)."""

    step: int       # the model call that requested it (1-based)
    name: str
    args: object
    result: str | None


class Observer:
    """Wraps dispatch_tool to record every tool call that actually ran, and what it returned."""

    def __init__(self, dispatch, meter: Meter):
        self.dispatch, self.meter = dispatch, meter
        self.executed: list[Executed] = []

    def __call__(self, name, args, repo_root):
        if len(self.executed) >= HARNESS_MAX_TOOL_CALLS:  # a loop dispatching without asking the model
            self.meter.stopped = f"harness ceiling: {HARNESS_MAX_TOOL_CALLS} tool calls"
            raise HarnessCeiling(self.meter.stopped)
        self.meter.check_clock()
        record = Executed(self.meter.calls, name, copy.deepcopy(args), None)
        self.executed.append(record)
        record.result = self.dispatch(name, args, repo_root)
        return record.result
