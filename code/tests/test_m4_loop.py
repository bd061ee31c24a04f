"""M4 - The loop: agent_loop.run_agent calls the model, runs tools, feeds results back, stops.

The model here is scripted (harness/scripted.py) and sits behind a strict fake provider
(harness/strict_provider.py) that rejects a malformed conversation the way a real API does.
The tools are real: they read code/fixture_repo.
"""

from __future__ import annotations

import importlib
import json

import pytest

from harness.milestones import BY_ID
from harness.paths import SENTINEL
from harness.scripted import AlwaysCallsTool, RunawayLoop, ScriptedModel, answer, call, turn
from harness.strict_provider import ProviderRejected, StrictProvider
from harness.teach import check, fail, learner, show

M4 = BY_ID["M4"]
FN = "agent_loop.run_agent"
QUESTION = "Why does order_total raise AttributeError?"


@pytest.fixture
def run_agent():
    return learner(FN)


@pytest.fixture
def loop_module():
    return importlib.import_module("agent_loop")


def start():
    return [{"role": "system", "content": "You answer questions about a repository."},
            {"role": "user", "content": QUESTION}]


# What to do depends on which rule the provider's 400 names (harness/strict_provider.py).
REJECTION_HINTS = {
    "order": "append assistant_turn(message) FIRST, then one tool_result(call.id, ...) per call "
             "(lesson: Section 9, 'Tool results without the assistant turn')",
    "unanswered": "the assistant turn is there, but an id it lists got no tool result: append one "
                  "tool_result(call.id, ...) for EVERY parsed call, repeats and errors included, before "
                  "calling the model again (lesson: Section 9, 'A repeated call answered once')",
    "twice": "one tool_result per call id, no more: answer each call once, in order",
    "json": "append plain dicts: assistant_turn(message), not the Message object itself",
    "shape": "append assistant_turn(message) as it is: it builds each call as {'id', 'type', 'function'}, "
             "and tool_result(call.id, text) gives each result a string content",
    "role": "every message needs a role the provider knows (system, user, assistant, tool): a tool result's "
            "role is 'tool', as tool_result(call.id, text) builds it ('function' is an old OpenAI role that "
            "providers reject)",
    "tools": "pass TOOL_SCHEMAS as the second argument: complete(messages, TOOL_SCHEMAS)",
}


def drive(run_agent, model, repo, called, max_steps=None):
    """Run the learner's loop behind the strict provider; turn provider errors into lessons."""
    messages = start()
    kwargs = {} if max_steps is None else {"max_steps": max_steps}
    try:
        result = run_agent(messages, repo, StrictProvider(model), **kwargs)
    except NotImplementedError:
        raise
    except ProviderRejected as exc:
        fail(M4, FN, called, "every request accepted by the (strict fake) provider", f"rejected: {exc}",
             REJECTION_HINTS.get(exc.rule, REJECTION_HINTS["order"]))
    except RunawayLoop as exc:
        fail(M4, FN, called, "stop after max_steps model calls", f"{exc}",
             "loop with `for step in range(max_steps)`, never `while True`")
    except AssertionError as exc:
        if "scripted model was called" not in str(exc):
            raise
        fail(M4, FN, called, f"no model call after the one that answered ({len(model.script)} scripted replies)",
             str(exc), "a message without tool calls is the answer: append it and return it at once")
    except Exception as exc:
        fail(M4, FN, called, "a returned string (tool problems become observations)",
             f"raised {type(exc).__name__}: {exc}", "a tool problem must never end the run: dispatch_tool returns text")
    return result, messages


def tool_messages(messages):
    return [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]


STOPPED_EARLY = ("after a turn with tool calls, append the results and call the model again: only a reply "
                 "WITHOUT tool calls ends the run")


def request(model, number: int, called: str, what: str, result=None, hint: str = STOPPED_EARLY):
    """The messages of the model's call ``number`` (1 = the first); a teaching failure if the loop
    stopped before making it."""
    if model.calls < number:
        fail(M4, FN, called, f"a model call number {number}, carrying {what}",
             f"the loop made {model.calls} model call{'s' * (model.calls != 1)} and returned {show(result)}", hint)
    return model.requests[number - 1]


def test_runs_a_tool_then_returns_the_answer(run_agent, fixture_repo):
    """With a scripted model: one read_file, then the final answer is returned."""
    model = ScriptedModel([turn(call("read_file", {"path": "shop/models.py"}, call_id="c1")),
                           answer("Item defines price, not cost (shop/models.py:11).")])
    called = "run_agent(messages, fixture_repo, <model: read_file, then answer>)"
    result, messages = drive(run_agent, model, fixture_repo, called)
    check(result == "Item defines price, not cost (shop/models.py:11).", M4, FN, called,
          "the model's final content", show(result), "when parse_tool_calls returns [], return message.content")
    check(model.calls == 2, M4, FN, called, "2 model calls (tool call, then answer)", f"{model.calls} calls",
          "call the model again after feeding the tool results back")
    results = tool_messages(request(model, 2, called, "the tool result", result))
    check(len(results) == 1 and "price: float" in results[0]["content"], M4, FN, called,
          "the 2nd request carries the tool result with shop/models.py's text",
          show(results), "append tool_result(call.id, dispatch_tool(...)) before calling the model again")


def test_answer_without_tools_returns_immediately(run_agent, fixture_repo):
    """A model that answers straight away is called once and its content returned."""
    model = ScriptedModel([answer("It is a tiny shop.")])
    called = "run_agent(messages, fixture_repo, <model that answers at once>)"
    result, _ = drive(run_agent, model, fixture_repo, called)
    check(result == "It is a tiny shop." and model.calls == 1, M4, FN, called, "'It is a tiny shop.' after 1 call",
          f"{show(result)} after {model.calls} calls", "no tool calls means the model is done: return its content")


def test_always_calling_model_stops_at_max_steps(run_agent, fixture_repo, loop_module):
    """A model that never stops asking for tools is cut off after max_steps calls."""
    model = AlwaysCallsTool("read_file", {"path": "README.md"})
    called = "run_agent(messages, fixture_repo, <model that always calls read_file>, max_steps=3)"
    result, _ = drive(run_agent, model, fixture_repo, called, max_steps=3)
    check(model.calls == 3, M4, FN, called, "exactly 3 model calls", f"{model.calls} calls",
          "max_steps counts model calls: for step in range(max_steps)")
    check(isinstance(result, str) and result.startswith(loop_module.MAX_STEPS_REACHED), M4, FN, called,
          f"a string starting with {loop_module.MAX_STEPS_REACHED!r}", show(result),
          "after the loop, return a message that starts with MAX_STEPS_REACHED so callers can tell")


class ThreeCallsEachTurn(AlwaysCallsTool):
    """A confused model that asks for three tools on every turn and never answers."""

    def __call__(self, messages, tools):
        super().__call__(messages, tools)
        return turn(call("list_directory", {"path": "."}), call("read_file", {"path": "README.md"}),
                    call("search_code", {"query": "price"}))


def test_max_steps_counts_model_calls_not_tool_calls(run_agent, fixture_repo, loop_module):
    """max_steps caps model calls: a model asking for 3 tools per turn gets max_steps turns, not max_steps tools."""
    model = ThreeCallsEachTurn()
    called = "run_agent(messages, fixture_repo, <model that asks for 3 tools on every turn>, max_steps=4)"
    result, messages = drive(run_agent, model, fixture_repo, called, max_steps=4)
    check(model.calls == 4 and len(tool_messages(messages)) == 12, M4, FN, called,
          "4 model calls, 12 tool results (3 per turn)",
          f"{model.calls} model calls, {len(tool_messages(messages))} tool results",
          "count one step per model call (for step in range(max_steps)), not one per tool call: the cap "
          "bounds what the model costs, and every call of a turn must still be answered")
    check(isinstance(result, str) and result.startswith(loop_module.MAX_STEPS_REACHED), M4, FN, called,
          f"a string starting with {loop_module.MAX_STEPS_REACHED!r}", show(result),
          "after the loop, return a message that starts with MAX_STEPS_REACHED")


def test_default_max_steps_applies(run_agent, fixture_repo, loop_module):
    """Without max_steps the default cap (DEFAULT_MAX_STEPS) still holds."""
    model = AlwaysCallsTool("list_directory", {"path": "."})
    called = "run_agent(messages, fixture_repo, <model that always calls list_directory>)"
    result, _ = drive(run_agent, model, fixture_repo, called)
    check(model.calls == loop_module.DEFAULT_MAX_STEPS, M4, FN, called,
          f"{loop_module.DEFAULT_MAX_STEPS} model calls (DEFAULT_MAX_STEPS)", f"{model.calls} calls",
          "keep the signature's default: max_steps=DEFAULT_MAX_STEPS")


def test_assistant_turn_precedes_its_results(run_agent, fixture_repo):
    """The transcript reads: assistant turn with tool_calls, then its tool results, then the answer."""
    model = ScriptedModel([turn(call("search_code", {"query": "item.cost"}, call_id="s1")), answer("service.py:9")])
    called = "run_agent(messages, fixture_repo, <model: search_code, then answer>)"
    _, messages = drive(run_agent, model, fixture_repo, called)
    roles = [m.get("role") for m in messages]
    check(roles == ["system", "user", "assistant", "tool", "assistant"], M4, FN, called,
          "roles system, user, assistant, tool, assistant", show(roles),
          "append the assistant turn, then the tool result, then (at the end) the final answer")
    turn_msg = messages[2]
    ids = [c.get("id") for c in turn_msg.get("tool_calls") or []]
    check(ids == ["s1"] and messages[3].get("tool_call_id") == "s1", M4, FN, called,
          "the assistant turn carries tool_calls with id 's1', answered by tool_call_id 's1'",
          show(messages[2:4]), "use assistant_turn(message) and tool_result(call.id, result)")


def test_parallel_calls_are_all_answered_in_order(run_agent, fixture_repo):
    """Three calls in one turn get three results, in the order requested, before the next model call."""
    model = ScriptedModel([
        turn(call("list_directory", {"path": "shop"}, call_id="p1"), call("read_file", {"path": "shop/models.py"}, call_id="p2"),
             call("search_code", {"query": "TAX_RATE"}, call_id="p3")),
        answer("done"),
    ])
    called = "run_agent(messages, fixture_repo, <model: 3 parallel calls p1, p2, p3, then answer>)"
    result, _ = drive(run_agent, model, fixture_repo, called)
    got = [m["tool_call_id"] for m in tool_messages(request(model, 2, called, "the 3 tool results", result))]
    check(got == ["p1", "p2", "p3"], M4, FN, called, "tool results for p1, p2, p3 in that order", show(got),
          "loop over every parsed call, not just the first")


def test_identical_calls_each_get_their_own_result(run_agent, fixture_repo):
    """The same call twice in one turn (two ids) gets two results: a provider rejects an unanswered id."""
    twin = {"path": "shop/models.py"}
    model = ScriptedModel([turn(call("read_file", twin, call_id="t1"), call("read_file", twin, call_id="t2")),
                           answer("price")])
    called = "run_agent(messages, fixture_repo, <model: read_file shop/models.py twice in one turn (t1, t2), then answer>)"
    result, _ = drive(run_agent, model, fixture_repo, called)
    got = [m["tool_call_id"] for m in tool_messages(request(model, 2, called, "the 2 tool results", result))]
    check(got == ["t1", "t2"], M4, FN, called, "tool results for t1 and t2", show(got), REJECTION_HINTS["unanswered"])


@pytest.mark.parametrize("tool,raw,valid,output", [
    ("read_file", '{"path": "shop/models.py"', {"path": "shop/models.py"}, "price: float"),
    ("list_directory", '{"path": "shop"', {"path": "shop"}, "[Directory:"),
], ids=["read_file", "list_directory"])
def test_bad_json_reaches_the_model_as_an_observation(run_agent, fixture_repo, loop_module, monkeypatch,
                                                      tool, raw, valid, output):
    """Broken arguments are not dispatched: the model is told they did not parse, and can try again."""
    tools = importlib.import_module("tools")
    ran = []  # the arguments each real run of the tool received
    real = tools.TOOL_FUNCTIONS[tool]
    monkeypatch.setitem(tools.TOOL_FUNCTIONS, tool, lambda root, **args: ran.append(args) or real(root, **args))
    model = ScriptedModel([turn(call(tool, raw=raw, call_id="b1")), turn(call(tool, valid, call_id="b2")),
                           answer("price")])
    called = f"run_agent(messages, fixture_repo, <model: {tool} with broken JSON {raw!r}, then a valid call, then answer>)"
    result, _ = drive(run_agent, model, fixture_repo, called)
    first = tool_messages(request(model, 2, called, "b1's result 'Error: ...'", result,
                                  STOPPED_EARLY + ": a call whose arguments did not parse is answered with 'Error: ' "
                                  "+ call.error, so the model can send it again; it does not end the run"))
    check(len(first) == 1 and first[0]["tool_call_id"] == "b1" and first[0]["content"].startswith("Error:"),
          M4, FN, called, "the 2nd request answers b1 with 'Error: ...'", show(first),
          "a ToolCall with .error set gets 'Error: ' + its error as the result; don't dispatch it")
    error = loop_module.parse_tool_calls(turn(call(tool, raw=raw, call_id="b1")))[0].error
    content = first[0]["content"]
    check(bool(error) and error in content and output not in content, M4, FN, called,
          f"b1's result carries the parse error ({show(error)}) and no output of {tool}",
          show(content), "if call.error: the result is 'Error: ' + call.error; dispatch_tool only for calls without one")
    check(all(args == valid for args in ran), M4, FN, called, f"{tool} ran only with the valid arguments {valid}",
          f"{tool} ran with {show(ran)}", "a call whose arguments did not parse must not reach the tool: "
          "with arguments={} list_directory would list the top level")
    check(result == "price", M4, FN, called, "the run continues to the answer 'price'", show(result),
          "after an error observation, loop again: the model can correct itself")


def test_tool_errors_are_observations(run_agent, fixture_repo):
    """A refused path becomes the call's result; the secret never reaches the model."""
    model = ScriptedModel([turn(call("read_file", {"path": "../../etc/passwd"}, call_id="e1"),
                                call("read_file", {"path": ".env"}, call_id="e2")),
                           answer("I cannot read those.")])
    called = "run_agent(messages, fixture_repo, <model: read ../../etc/passwd and .env, then answer>)"
    result, messages = drive(run_agent, model, fixture_repo, called)
    results = tool_messages(request(model, 2, called, "the two tool results", result))
    check(len(results) == 2 and all(r["content"].startswith("Error:") for r in results), M4, FN, called,
          "two 'Error: ...' tool results", show(results), "send dispatch_tool's text back as the result, errors included")
    check(SENTINEL not in json.dumps(messages), M4, FN, called, "no .env secret anywhere in the transcript",
          "the sentinel was in the transcript", "every file access goes through dispatch_tool")


def test_transcript_is_extended_in_place_and_serializable(run_agent, fixture_repo):
    """messages grows in place (append-only) and json.dumps(messages) works afterwards."""
    model = ScriptedModel([turn(call("read_file", {"path": "README.md"}, call_id="r1")), answer("ok")])
    messages = start()
    original = [dict(m) for m in messages]
    called = "run_agent(messages, fixture_repo, <model: read README.md, then answer>)"
    try:
        run_agent(messages, fixture_repo, StrictProvider(model))
    except NotImplementedError:
        raise
    except Exception as exc:
        fail(M4, FN, called, "a returned string", f"raised {type(exc).__name__}: {exc}",
             "see the contract in run_agent's docstring")
    check(len(messages) == 5 and messages[:2] == original, M4, FN, called,
          "the same list, now 5 messages, first two unchanged", f"{len(messages)} messages: {show(messages)}",
          "append to the list you were given; never rebuild or reorder it")
    try:
        json.dumps(messages)
    except TypeError as exc:
        fail(M4, FN, called, "json.dumps(messages) works", f"TypeError: {exc}",
             "append plain dicts: assistant_turn(message), not the Message object itself")


def test_the_tools_are_offered_to_the_model(run_agent, fixture_repo):
    """Every model call receives TOOL_SCHEMAS, so the model knows which tools exist."""
    model = ScriptedModel([answer("ok")])
    called = "run_agent(messages, fixture_repo, <model>)"
    drive(run_agent, model, fixture_repo, called)
    names = [t["function"]["name"] for t in model.tools_seen[0] or []]
    check(names == ["read_file", "list_directory", "search_code"], M4, FN, called,
          "complete(messages, TOOL_SCHEMAS)", show(names), "pass TOOL_SCHEMAS as the second argument of complete")



# ---------------------------------------------------------------- what ends a run, and what does not

@pytest.mark.parametrize("content", ["", None], ids=["content ''", "content None"])
def test_an_empty_reply_ends_the_run_after_one_call(run_agent, fixture_repo, loop_module, content):
    """A reply with neither tool calls nor text ends the run: one model call, and "" comes back (a str, never None)."""
    model = ScriptedModel([answer(content)] * loop_module.DEFAULT_MAX_STEPS)
    called = f"run_agent(messages, fixture_repo, <model whose reply has no tool calls and content={content!r}>)"
    result, messages = drive(run_agent, model, fixture_repo, called)
    check(model.calls == 1, M4, FN, called, "1 model call: a reply without tool calls ends the run, even an empty one",
          f"{model.calls} model calls, then {show(result)}",
          "do not ask again when the reply is empty: return it. The copilot tells the user what an empty reply "
          "means (a reasoning model out of tokens, a filter); asking again repeats the same request and pays for it")
    check(result == "", M4, FN, called, "'' (a str: run_agent always returns a string)", show(result),
          "the reply's content may be None: return (message.content or ''), never None; callers call .strip() "
          "and .startswith() on what you return")


def test_a_failed_model_call_is_not_an_answer(run_agent, fixture_repo):
    """complete() raising (a provider that cannot be reached) goes up out of run_agent unchanged."""

    class ProviderDown(ConnectionError):
        pass

    model = ScriptedModel([turn(call("list_directory", {"path": "shop"}, call_id="d1"))])

    def complete(messages, tools):
        if model.calls >= 1:
            raise ProviderDown("Connection error: could not reach the provider (scripted)")
        return model(messages, tools)

    messages = start()
    called = "run_agent(messages, fixture_repo, <complete: a tool call, then raises ConnectionError>)"
    try:
        result = run_agent(messages, fixture_repo, complete)
    except ProviderDown:
        return
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001
        fail(M4, FN, called, "the ConnectionError complete() raised, unchanged",
             f"raised {type(exc).__name__}: {exc}", "let complete()'s exception go up as it is")
    fail(M4, FN, called, "the ConnectionError complete() raised, going up out of run_agent",
         f"returned {show(result)}",
         "do not wrap complete() in try/except: a failed model call is not the model's answer. The copilot "
         "catches it, prints 'could not reach ...' and exits 2; returned as text it is printed as the answer "
         "with exit 0 (lesson: Section 9, 'Catching too much')")


def test_a_thought_beside_a_tool_call_does_not_end_the_run(run_agent, fixture_repo):
    """Text written beside tool calls (a Thought) is not the answer: the calls run and the loop goes on."""
    final = "Item defines price, not cost (shop/models.py:11)."
    model = ScriptedModel([turn(call("read_file", {"path": "shop/models.py"}, call_id="th1"),
                                content="Thought: the error names cost, so I read the Item model first."),
                           answer(final)])
    called = "run_agent(messages, fixture_repo, <model: 'Thought: ...' WITH a read_file call, then answer>)"
    result, messages = drive(run_agent, model, fixture_repo, called)
    results = tool_messages(request(model, 2, called, "the read_file result of th1", result,
                                    STOPPED_EARLY + ". Text written beside tool calls (a 'Thought') is not the "
                                    "answer: decide by parse_tool_calls(message), not by message.content "
                                    "(lesson: Section 9, 'Any text is the answer')"))
    check(len(results) == 1 and results[0]["tool_call_id"] == "th1" and "price: float" in results[0]["content"],
          M4, FN, called, "the 2nd request answers th1 with shop/models.py's text", show(results),
          "decide by the tool calls, not by the text: parse_tool_calls(message) is [] only for an answer; "
          "a turn with calls is run even when it carries content")
    check(result == final, M4, FN, called, f"the final answer {final!r}", show(result),
          "return the content of the first reply WITHOUT tool calls")
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    check(last.get("role") == "assistant" and last.get("content") == final, M4, FN, called,
          f"the transcript ends with {{'role': 'assistant', 'content': {final!r}}}", show(messages[-1]),
          "append the answer as an assistant message before returning it (the docstring: 'also appended')")
