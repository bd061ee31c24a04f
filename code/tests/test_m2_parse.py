"""M2 - Parse tool calls: agent_loop.parse_tool_calls turns the model's message into ToolCalls.

The trap this milestone is about: ``function.arguments`` arrives as a JSON *string*.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from harness.milestones import BY_ID
from harness.scripted import answer, call, turn
from harness.teach import check, fail, learner, show

M2 = BY_ID["M2"]
FN = "agent_loop.parse_tool_calls"


@pytest.fixture
def parse():
    return learner(FN)


def parsed(parse, message, called: str):
    try:
        calls = parse(message)
    except NotImplementedError:
        raise
    except AttributeError as exc:  # the message's shape, not its arguments
        fail(M2, FN, called, "a list of ToolCall, and no exception", f"raised AttributeError: {exc}",
             "a message may come without a tool_calls attribute at all: read it with "
             "getattr(message, 'tool_calls', None) or [], which covers missing, None and []")
    except TypeError as exc:
        fail(M2, FN, called, "a list of ToolCall, and no exception", f"raised TypeError: {exc}", raised_hint(exc))
    except Exception as exc:
        fail(M2, FN, called, "a list of ToolCall, and no exception", f"raised {type(exc).__name__}: {exc}",
             "bad arguments from the model must never crash the loop: catch the json.loads error and mark "
             "that call with error=...")
    tool_call = getattr(importlib.import_module("agent_loop"), "ToolCall", None)
    if not isinstance(calls, list) or (tool_call and not all(isinstance(c, tool_call) for c in calls)):
        fail(M2, FN, called, "a list of agent_loop.ToolCall objects", show(calls),
             "build each one with ToolCall(id, name, arguments) (or ToolCall(id, name, {}, error)) and return "
             "them in a list: the loop reads call.id, call.name, call.arguments and call.error")
    # A second call must start from a new list: one shared between calls (a default argument
    # such as calls=[]) still holds the calls of the first message.
    try:
        again = parse(answer("done", tool_calls=[]))
    except Exception:  # noqa: BLE001  (the other tests judge that message)
        again = []
    if again is calls or again:
        fail(M2, FN, f"{called}, then parse_tool_calls(<an answer with tool_calls=[]>)",
             "[] from the second call: a new list on every call",
             f"{show(again)}" + (" (the very list the first call returned)" if again is calls else ""),
             "the list of calls is shared between calls: a default argument such as calls=[] (or a list "
             "made at module level) is created once, when Python reads the def, and keeps every call ever "
             "parsed. Start each call with calls = [] inside the function")
    return calls


def raised_hint(exc: TypeError) -> str:
    """What a TypeError from parse_tool_calls says about the code that raised it."""
    text = str(exc)
    if "not subscriptable" in text:
        return ("each tool call is an object with attributes, not a dict: raw.id, raw.function.name and "
                "raw.function.arguments (the contract's LiteLLM shape), not raw['function']")
    if "NoneType" in text or "not NoneType" in text:
        return ("a provider may send arguments=None for a call without arguments: like '', it means {} "
                "(json.loads(None) raises TypeError), so test `if text` before json.loads")
    return ("bad arguments from the model must never crash the loop: json.loads raises TypeError for a "
            "non-string; catch it with the other errors and mark that call with error=...")


def test_arguments_json_string_becomes_a_dict(parse):
    """The JSON string in function.arguments comes back as a dict on ToolCall.arguments."""
    msg = turn(call("read_file", {"path": "config.py"}, call_id="call_1"))
    called = "parse_tool_calls(<message with read_file, arguments='{\"path\": \"config.py\"}'>)"
    calls = parsed(parse, msg, called)
    check(isinstance(calls, list) and len(calls) == 1, M2, FN, called, "a list with exactly 1 ToolCall", show(calls),
          "build one ToolCall per entry in message.tool_calls")
    got = calls[0].arguments
    check(isinstance(got, dict), M2, FN, called, "arguments == {'path': 'config.py'} (a dict)",
          f"{type(got).__name__}: {show(got)}",
          "arguments arrive as a JSON string: json.loads(raw.function.arguments) (lesson: Section 9, first row)")
    check(got == {"path": "config.py"}, M2, FN, called, "{'path': 'config.py'}", show(got),
          "json.loads the whole arguments string")


def test_id_and_name_are_kept(parse):
    """Each ToolCall keeps the provider's id (needed to answer it) and the tool name."""
    msg = turn(call("search_code", {"query": "def total"}, call_id="call_abc"))
    called = "parse_tool_calls(<message with one search_code call, id='call_abc'>)"
    calls = parsed(parse, msg, called)
    check(len(calls) == 1 and calls[0].id == "call_abc" and calls[0].name == "search_code", M2, FN, called,
          "ToolCall(id='call_abc', name='search_code', ...)", show(calls),
          "copy raw.id and raw.function.name: the tool result must quote this exact id")
    check(not getattr(calls[0], "error", None), M2, FN, called, "error is None for valid arguments",
          show(calls[0]), "only set error when the arguments could not be parsed")


@pytest.mark.parametrize("message", [
    answer("done", tool_calls=None),
    answer("done", tool_calls=[]),
    SimpleNamespace(content="done"),
], ids=["tool_calls=None", "tool_calls=[]", "no tool_calls attribute"])
def test_no_tool_calls_gives_empty_list(parse, message):
    """A message with no tool calls (None, [], or no attribute at all) parses to []: the model answered."""
    called = f"parse_tool_calls(<answer: content='done', tool_calls {'missing' if not hasattr(message, 'tool_calls') else repr(message.tool_calls)}>)"
    calls = parsed(parse, message, called)
    check(calls == [], M2, FN, called, "[]", show(calls),
          "getattr(message, 'tool_calls', None) or [] covers all three shapes")


def test_parallel_calls_keep_their_order(parse):
    """Several calls in one turn come back in the order the model sent them."""
    msg = turn(call("list_directory", {"path": "."}, call_id="a"), call("read_file", {"path": "README.md"}, call_id="b"),
               call("search_code", {"query": "price"}, call_id="c"))
    called = "parse_tool_calls(<message with 3 parallel calls a, b, c>)"
    calls = parsed(parse, msg, called)
    got = [(c.id, c.name) for c in calls]
    check(got == [("a", "list_directory"), ("b", "read_file"), ("c", "search_code")], M2, FN, called,
          "[('a', 'list_directory'), ('b', 'read_file'), ('c', 'search_code')]", show(got),
          "loop over every entry of message.tool_calls, not just the first")


def test_identical_calls_in_one_turn_are_all_kept(parse):
    """Two identical calls (same tool, same arguments, two ids) are two ToolCalls: each id needs its answer."""
    msg = turn(call("read_file", {"path": "shop/models.py"}, call_id="twin_1"),
               call("read_file", {"path": "shop/models.py"}, call_id="twin_2"))
    called = "parse_tool_calls(<message with the same read_file call twice, ids twin_1 and twin_2>)"
    calls = parsed(parse, msg, called)
    got = [c.id for c in calls]
    check(got == ["twin_1", "twin_2"], M2, FN, called, "ToolCalls for twin_1 and twin_2", show(got),
          "keep every call, even a repeat: the provider answers HTTP 400 when one id of a turn gets no "
          "tool result (lesson: Section 9, 'A repeated call answered once')")


@pytest.mark.parametrize("raw,word", [('{"path": "config.py"', "json"), ('["config.py"]', "object")],
                         ids=["broken JSON", "a list"])
def test_the_error_says_what_was_wrong(parse, raw, word):
    """The error is a sentence for the model: it says the arguments are not valid JSON, or not a JSON object."""
    msg = turn(call("read_file", raw=raw, call_id="why"))
    called = f"parse_tool_calls(<message whose arguments are {raw!r}>)"
    calls = parsed(parse, msg, called)
    error = calls[0].error if len(calls) == 1 else None
    check(isinstance(error, str) and word in error.lower(), M2, FN, called,
          f"error naming what was wrong (it mentions {word!r}, as the docstring's contract says)", show(error),
          "the model reads this error as its observation and must be able to fix its call: say what was "
          "wrong, e.g. f'arguments are not valid JSON ({exc})' or 'arguments must be a JSON object, got list'")


def test_malformed_json_is_marked_not_raised(parse):
    """Broken JSON never raises: the call comes back with arguments={} and an error to tell the model."""
    msg = turn(call("read_file", raw='{"path": "config.py"', call_id="bad"))
    called = "parse_tool_calls(<message whose arguments are '{\"path\": \"config.py\"' (no closing brace)>)"
    calls = parsed(parse, msg, called)
    check(len(calls) == 1, M2, FN, called, "1 ToolCall marked with an error", show(calls),
          "keep the call: the loop must still answer its id")
    check(calls[0].id == "bad" and calls[0].arguments == {} and bool(calls[0].error), M2, FN, called,
          "ToolCall(id='bad', arguments={}, error='<what was wrong>')", show(calls[0]),
          "catch json.JSONDecodeError (a ValueError) and set error=...")


def test_empty_arguments_string_means_no_arguments(parse):
    """Some providers send "" for a call without arguments: that is {} with no error, not broken JSON."""
    msg = turn(call("list_directory", raw="", call_id="none"))
    called = "parse_tool_calls(<message with list_directory, arguments=''>)"
    calls = parsed(parse, msg, called)
    check(len(calls) == 1 and calls[0].arguments == {} and not calls[0].error, M2, FN, called,
          "ToolCall(id='none', name='list_directory', arguments={}, error=None)", show(calls),
          "json.loads('') raises; treat an empty string as {} before parsing (lesson: Section 3, Implementation Details)")


def test_none_arguments_mean_no_arguments(parse):
    """Arguments None (some providers send it for a call without arguments) mean {}, with no error, as ""."""
    msg = turn(call("list_directory", call_id="nil"))
    msg.tool_calls[0].function.arguments = None
    called = "parse_tool_calls(<message with list_directory, arguments=None>)"
    calls = parsed(parse, msg, called)
    check(len(calls) == 1 and calls[0].arguments == {} and not calls[0].error, M2, FN, called,
          "ToolCall(id='nil', name='list_directory', arguments={}, error=None)", show(calls),
          "the contract: an empty string or None means {} with no error; json.loads(None) raises TypeError, "
          "so check `if text` first: json.loads(text) if text else {}")


@pytest.mark.parametrize("raw", ['["config.py"]', '"config.py"', "42", "null"])
def test_json_that_is_not_an_object_is_marked(parse, raw):
    """Valid JSON that is not an object (list, string, number, null) is marked with an error too."""
    msg = turn(call("read_file", raw=raw, call_id="odd"))
    called = f"parse_tool_calls(<message whose arguments are {raw!r}>)"
    calls = parsed(parse, msg, called)
    check(len(calls) == 1 and calls[0].arguments == {} and bool(calls[0].error), M2, FN, called,
          "ToolCall(id='odd', arguments={}, error='arguments must be a JSON object ...')", show(calls),
          "after json.loads, check isinstance(args, dict); tools take named arguments only")


def test_valid_and_broken_calls_in_one_turn(parse):
    """One broken call does not hide the valid calls next to it."""
    msg = turn(call("read_file", {"path": "a.py"}, call_id="ok1"), call("read_file", raw="{oops", call_id="bad"),
               call("search_code", {"query": "x"}, call_id="ok2"))
    called = "parse_tool_calls(<3 calls: valid, broken JSON, valid>)"
    calls = parsed(parse, msg, called)
    got = [(c.id, c.arguments, bool(c.error)) for c in calls]
    expected = [("ok1", {"path": "a.py"}, False), ("bad", {}, True), ("ok2", {"query": "x"}, False)]
    check(got == expected, M2, FN, called, show(expected), show(got),
          "handle each call on its own: `continue` after marking a broken one")


# ---------------------------------------------------------------- hostile arguments

@pytest.mark.parametrize("raw", [
    '{"path": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"path": "a.py", "start_line": 1' + "0" * 5_000 + "}",
], ids=["nested 100,000 deep", "a 5,001-digit number"])
def test_hostile_arguments_are_marked_not_raised(parse, raw):
    """Arguments nested too deep to parse (RecursionError) or a huge number (ValueError) are marked, not raised."""
    msg = turn(call("read_file", raw=raw, call_id="deep"), call("read_file", {"path": "b.py"}, call_id="ok"))
    called = f"parse_tool_calls(<2 calls: arguments {show(raw, 50)} ({len(raw):,} characters), then a valid one>)"
    calls = parsed(parse, msg, called)
    got = [(c.id, c.arguments if c.id == "ok" else "...", bool(c.error)) for c in calls]
    expected = [("deep", "...", True), ("ok", {"path": "b.py"}, False)]
    check(got == expected and calls[0].arguments == {}, M2, FN, called,
          "ToolCall(id='deep', arguments={}, error='...'), then the valid call", show(got),
          "json.loads raises RecursionError for deep nesting, and RecursionError is not a ValueError: "
          "catch (ValueError, RecursionError), not only json.JSONDecodeError")
