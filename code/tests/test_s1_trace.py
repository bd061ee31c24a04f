"""S1 - Reasoning trace (stretch): the run as Thought -> Action -> Observation, read from the transcript.

You write stretch.trace_steps(messages) in code/stretch.py. copilot.py --trace prints the steps it
returns, and --json includes them. Opt in with `python -m pytest --stretch` (unlocks once M5's tests pass).
"""

from __future__ import annotations

import json

import pytest

from harness.milestones import BY_ID
from harness.paths import FIXTURE_REPO
from harness.scripted import ScriptedModel, answer, call, turn
from harness.strict_provider import StrictProvider
from harness.teach import check, learner, show
from stretch_support import main

S1 = BY_ID["S1"]
FN = "stretch.trace_steps"
HINT_ID = "match each observation by its tool_call_id, among the tool messages right after the turn"


def asks(content, *calls):
    """An assistant turn as run_agent appends it: calls are (id, tool, arguments dict)."""
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for cid, name, args in calls]}


def result(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


START = [{"role": "system", "content": "rules"}, {"role": "user", "content": "Why does order_total fail?"}]


def summary(steps):
    """Plain tuples of what trace_steps returned, or a teaching failure if it is not Step/Action objects."""
    try:
        return [(s.number, s.thought, [(a.tool, a.arguments, a.observation) for a in s.actions], s.answer)
                for s in steps]
    except (AttributeError, TypeError):
        pytest.fail(f"S1 ({S1.title}) - {FN} must return a list of stretch.Step objects (number, thought, "
                    f"actions, answer) whose actions are stretch.Action objects (tool, arguments, observation); "
                    f"got {show(steps)}", pytrace=False)


def test_each_assistant_turn_is_a_step_with_its_thought_and_actions():
    """One Step per assistant turn: its text is the Thought, each tool call an Action with its Observation."""
    trace_steps = learner(FN)
    messages = START + [
        asks("Find where totals are computed.", ("a", "search_code", {"query": "order_total"})),
        result("a", "shop/service.py:12: def order_total(items):"),
        asks(None, ("b", "read_file", {"path": "shop/service.py"})),
        result("b", "[File: shop/service.py (14 lines total) - showing lines 1-14]"),
    ]
    got = summary(trace_steps(messages))
    expected = [
        (1, "Find where totals are computed.", [("search_code", '{"query": "order_total"}',
                                                 "shop/service.py:12: def order_total(items):")], None),
        (2, "", [("read_file", '{"path": "shop/service.py"}',
                  "[File: shop/service.py (14 lines total) - showing lines 1-14]")], None),
    ]
    check(got == expected, S1, FN, "trace_steps(<two tool turns; the second has content None>)",
          show(expected, 600), show(got, 600),
          "skip system/user/tool messages; a turn's content is its Thought ('' when None); arguments stay the JSON string")


def test_observations_are_matched_by_tool_call_id_not_by_position():
    """Parallel calls answered in another order still get their own observations (matched by id)."""
    trace_steps = learner(FN)
    messages = START + [
        asks("Read both files.", ("m", "read_file", {"path": "shop/models.py"}),
             ("s", "read_file", {"path": "shop/service.py"})),
        result("s", "service lines"),
        result("m", "models lines"),
    ]
    got = summary(trace_steps(messages))
    observations = [a[2] for a in got[0][2]] if got else []
    check(observations == ["models lines", "service lines"], S1, FN,
          "trace_steps(<calls m, s answered as s, m>)", "['models lines', 'service lines'] (call m, then call s)",
          show(observations), HINT_ID)


def test_a_call_nobody_answered_has_no_observation():
    """A call without a tool message gets observation None instead of a crash or a neighbour's result."""
    trace_steps = learner(FN)
    messages = START + [
        asks("Two looks.", ("x", "read_file", {"path": "a.py"}), ("y", "read_file", {"path": "b.py"})),
        result("x", "a lines"),
    ]
    got = summary(trace_steps(messages))
    observations = [a[2] for a in got[0][2]] if got else []
    check(observations == ["a lines", None], S1, FN, "trace_steps(<calls x, y; only x answered>)",
          "['a lines', None]", show(observations), "dict.get(call_id) gives None when nothing answered")


def test_the_final_answer_is_the_last_step_with_no_actions():
    """The turn without tool calls is the answer: the last step, no actions, answer = its text."""
    trace_steps = learner(FN)
    final = "subtotal reads item.cost (shop/service.py:9)."
    messages = START + [asks("Look.", ("a", "read_file", {"path": "shop/service.py"})),
                        result("a", "lines"), {"role": "assistant", "content": final}]
    got = summary(trace_steps(messages))
    check(len(got) == 2 and got[-1] == (2, "", [], final), S1, FN, "trace_steps(<a tool turn, then an answer>)",
          f"2 steps, the last (2, '', [], {final!r})", show(got, 500),
          "an assistant message without tool_calls is an answer step: thought '', actions [], answer = content")


def test_reused_call_ids_match_the_results_of_their_own_turn():
    """Some servers reuse ids ('call_0') every turn: each turn gets the results that follow it."""
    trace_steps = learner(FN)
    messages = START + [asks("First.", ("call_0", "list_directory", {})), result("call_0", "first listing"),
                        asks("Second.", ("call_0", "list_directory", {"path": "shop"})),
                        result("call_0", "second listing")]
    got = summary(trace_steps(messages))
    observations = [s[2][0][2] for s in got if s[2]]
    check(observations == ["first listing", "second listing"], S1, FN,
          "trace_steps(<two turns, both with call id 'call_0'>)", "['first listing', 'second listing']",
          show(observations), "collect only the tool messages right after each assistant turn")


def test_copilot_trace_and_json_show_the_steps(copilot, capsys):
    """copilot.py --trace prints Thought -> Action -> Observation from your trace_steps; --json holds the steps."""
    trace_steps = learner(FN)
    check(summary(trace_steps(START)) == [], S1, FN, "trace_steps(<system and user messages only>)",
          "[] (no assistant turn, no step)", show(trace_steps(START)), "only assistant messages make steps")
    script = lambda: ScriptedModel([  # noqa: E731  (a fresh script for each run)
        turn(call("read_file", {"path": "shop/service.py"}), call("read_file", {"path": "shop/models.py"}),
             content="Reading the service and the model."),
        answer("subtotal reads item.cost (shop/service.py:9) but Item has price (shop/models.py:11).")])
    argv = ["--repo", str(FIXTURE_REPO), "Why does order_total fail?"]
    code, out, err = main(copilot, capsys, [*argv, "--trace"], StrictProvider(script()))
    wanted = ["Step 1", "Thought: Reading the service and the model.",
              'Action: read_file({"path": "shop/service.py"})', "Observation: [File: shop/service.py",
              'Action: read_file({"path": "shop/models.py"})', "Observation: [File: shop/models.py",
              "Step 2", "Answer: (printed below)"]
    missing = [w for w in wanted if w not in out]
    check(code == 0 and not missing, S1, FN, "copilot.main([... '--trace'], complete=<two parallel reads, then an answer>)",
          f"exit code 0 and the lines {wanted}", f"exit code {code}, missing {missing}, stdout {show(out, 500)}, "
          f"stderr {show(err, 200)}", "copilot prints format_trace(trace_steps(messages)) of the real run")
    code, out, _ = main(copilot, capsys, [*argv, "--json"], StrictProvider(script()))
    trace = json.loads(out).get("trace") if code == 0 else None
    tools_seen = [[a["tool"] for a in step["actions"]] for step in trace or []]
    check(tools_seen == [["read_file", "read_file"], []], S1, FN, "copilot.main([... '--json'], same run)",
          "JSON 'trace': 2 steps, the first with two read_file actions, the second the answer",
          show(trace, 500), "--json prints dataclasses.asdict of each Step your function returns")
