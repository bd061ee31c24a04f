"""Course checks (maintainers): break_and_observe.py's verdict follows its own evidence.

A learner makes each break the natural way, not always the way the harness suggests: `while True`
or a huge range, a counter never incremented; `args = raw` with an isinstance check left in; a
sandbox that resolves but never checks; dropping the results but keeping the turn, or the reverse;
one vague description for every tool. For each variant, run on the reference with the variant
patched in, the block's verdict must say the failure happened when its own numbers show it, and
say "no ..." only when they do not.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import pytest

import break_and_observe as bo
from harness.evidence import patched
from harness.lab import load_lab
from harness.paths import REFERENCE_DIR


@pytest.fixture(scope="module")
def lab():
    lab = load_lab()
    if Path(lab.agent_loop.__file__).resolve().parent != REFERENCE_DIR:
        pytest.skip("the variants are patched into the reference: run with --reference (the maintainer command)")
    return lab


def _loop(al, *, bound=None, turn=True, results=True):
    """The reference loop with one decision changed: ``bound`` calls (None: a counter never
    incremented), and whether the assistant turn and the results are appended."""

    def run_agent(messages, repo_root, complete, max_steps=al.DEFAULT_MAX_STEPS):
        step = 0
        while step < (max_steps if bound is None else bound):
            step += 0 if bound is None else 1
            message = complete(messages, al.TOOL_SCHEMAS)
            calls = al.parse_tool_calls(message)
            if not calls:
                messages.append({"role": "assistant", "content": message.content or ""})
                return message.content or ""
            if turn:
                messages.append(al.assistant_turn(message))
            for c in calls:
                result = f"Error: {c.error}" if c.error else al.dispatch_tool(c.name, c.arguments, repo_root)
                if results:
                    messages.append(al.tool_result(c.id, result))
        return f"{al.MAX_STEPS_REACHED}: stopped"

    return run_agent


def _parse_keeping_isinstance(al):
    def parse_tool_calls(message):  # `args = raw` with the isinstance check left in place
        out = []
        for raw in getattr(message, "tool_calls", None) or []:
            args = raw.function.arguments
            if not isinstance(args, dict):
                out.append(al.ToolCall(raw.id, raw.function.name, {}, "arguments must be a JSON object"))
                continue
            out.append(al.ToolCall(raw.id, raw.function.name, args))
        return out

    return parse_tool_calls


def _all_vague(schemas):
    vague = copy.deepcopy(schemas)
    for schema in vague:
        schema["function"]["description"] = bo.VAGUE_DESCRIPTION
    return vague


def variants(lab):
    al, tl = lab.agent_loop, lab.tools
    return {
        "runaway: range(10**6)": ("runaway", [], _loop(al, bound=10**6)),
        "runaway: counter never incremented": ("runaway", [], _loop(al, bound=None)),
        "amnesia: results dropped, turn kept": ("amnesia", [], _loop(al, results=False)),
        "amnesia: turn dropped, results kept": ("amnesia", [], _loop(al, turn=False)),
        "amnesia: both dropped": ("amnesia", [], _loop(al, turn=False, results=False)),
        "raw-arguments: no json.loads": ("raw-arguments", [(al, "parse_tool_calls", bo.parse_without_json_loads(lab))], None),
        "raw-arguments: args = raw, isinstance kept": ("raw-arguments", [(al, "parse_tool_calls", _parse_keeping_isinstance(al))], None),
        "escape: join, no check": ("escape", [(tl, "safe_resolve", bo.resolve_without_sandbox)], None),
        "escape: resolve, no check": ("escape", [(tl, "safe_resolve", lambda root, p: (Path(root) / p).resolve())], None),
        "escape: abspath, no check": ("escape", [(tl, "safe_resolve", lambda root, p: Path(os.path.abspath(os.path.join(root, p))))], None),
        "vague-tools: two alike": ("vague-tools", [(tl, "TOOL_SCHEMAS", bo.vague_schemas(tl.TOOL_SCHEMAS)),
                                                   (al, "TOOL_SCHEMAS", bo.vague_schemas(tl.TOOL_SCHEMAS))], None),
        "vague-tools: all alike": ("vague-tools", [(tl, "TOOL_SCHEMAS", _all_vague(tl.TOOL_SCHEMAS)),
                                                   (al, "TOOL_SCHEMAS", _all_vague(tl.TOOL_SCHEMAS))], None),
    }


# What each break's failure looks like in the numbers, independently of the scenario's own judge.
SHOWS_THE_FAILURE = {
    "runaway": lambda ev: ev.ended in ("harness ceiling", "token budget"),
    "amnesia": lambda ev: ev.tool_calls > 0 and ev.results_seen == 0,
    "raw-arguments": lambda ev: ev.tool_calls == ev.tool_errors,  # nothing ran successfully
    # a leak, or probes safe_resolve let out that only the provided tools' later checks stopped
    "escape": lambda ev: ev.leaked or any(x in bo.render(ev) for x in ("by accident", "LET OUT by safe_resolve")),
    "vague-tools": lambda ev: _wrong_picks(ev) > 0,
}


def _wrong_picks(ev) -> int:
    found = re.match(r"(\d+) of (\d+) picks", dict(ev.details).get("tool choice", ""))
    return int(found[2]) - int(found[1]) if found else 0


def test_each_natural_variant_of_a_break_gets_the_verdict_its_numbers_show(lab):
    wrong = []
    for label, (name, changes, loop) in variants(lab).items():
        with patched(*changes):
            ev = bo.run_scenario(name, lab=lab, run_agent=loop)
        block = bo.render(ev)
        says_failure = ev.verdict.startswith(("the failure happened", "nothing leaked, but"))
        if not (SHOWS_THE_FAILURE[name](ev) and ev.failure_observed and says_failure):
            wrong.append(f"{label}: failure_observed={ev.failure_observed}\n{block}")
    assert not wrong, "verdicts that contradict their own evidence:\n" + "\n".join(wrong)


@pytest.mark.parametrize("name", list(bo.SCENARIOS))
def test_an_unbroken_run_says_no_failure_and_why(lab, name):
    ev = bo.run_scenario(name, lab=lab)
    assert not ev.failure_observed and ev.verdict.startswith("no "), bo.render(ev)
    assert not SHOWS_THE_FAILURE[name](ev), bo.render(ev)
