"""S3 - Structured answer via a tool (stretch): emit_answer, forced with tool_choice, citations validated.

You write stretch.validate_answer(arguments, repo_root, messages, snippets) in code/stretch.py: it
returns the problems with the model's emit_answer arguments ([] when valid). Forcing the tool,
sending an invalid answer back once, and ending the run honestly are provided (copilot.py
--structured). Opt in with `python -m pytest --stretch` (unlocks once M5's tests pass).
"""

from __future__ import annotations

import importlib

from harness.fake_server import FakeServer, text_reply, tool_reply
from harness.milestones import BY_ID
from harness.paths import FIXTURE_REPO
from harness.scripted import ScriptedModel, answer, call, turn
from harness.strict_provider import StrictProvider
from harness.teach import check, learner, show
from stretch_support import Forcing, main

S3 = BY_ID["S3"]
FN = "stretch.validate_answer"
QUESTION = "Why does order_total raise AttributeError?"
FORCED = {"type": "function", "function": {"name": "emit_answer"}}
# What read_file showed of shop/service.py (lines_seen reads only this header line).
SERVICE_READ = [{"role": "tool", "tool_call_id": "r1",
                 "content": "[File: shop/service.py (17 lines total) - showing lines 1-17]\n    9|     return sum(item.cost ..."}]
CLAIM = "subtotal reads item.cost, which Item does not have."


def cite(path, start, end=None):
    return {"path": path, "start_line": start, "end_line": start if end is None else end}


def emit(*citations, text=CLAIM):
    return turn(call("emit_answer", {"answer": text, "citations": list(citations)}))


def validate(arguments, messages=SERVICE_READ, snippets=()):
    return learner(FN)(arguments, FIXTURE_REPO, list(messages), list(snippets))


def models_snippet():
    snippet = importlib.import_module("context_selector").Snippet
    return snippet("shop/models.py", 1, 20, 1.0, "(the first 20 lines of shop/models.py)")


# ---------------------------------------------------------------- validate_answer on its own

def test_a_grounded_answer_has_no_problems():
    """Spans that were read (a read_file result) or injected (a snippet) are valid: []."""
    arguments = {"answer": CLAIM, "citations": [cite("shop/service.py", 9), cite("shop/models.py", 8, 11)]}
    problems = validate(arguments, SERVICE_READ, [models_snippet()])
    check(problems == [], S3, FN,
          "validate_answer({answer, citations: [shop/service.py:9-9, shop/models.py:8-11]}, fixture_repo, "
          "<read shop/service.py 1-17>, <snippet shop/models.py 1-20>)",
          "[] (both spans exist and were shown to the model)", show(problems, 500),
          "citations.lines_seen(messages, snippets) collects what was shown; citations.check_span checks one span")


def test_each_bad_citation_is_named_with_its_reason():
    """Missing file, lines past the end, lines never shown, secrets, escapes, reversed ranges: one problem each."""
    bad = [cite("shop/payments.py", 3), cite("shop/service.py", 16, 40), cite("shop/models.py", 11),
           cite(".env", 1), cite("../outside.py", 1), cite("shop/service.py", 9, 7), cite("shop/service.py", 0)]
    citations = [cite("shop/service.py", 9)] + bad       # citations[0] is fine
    problems = validate({"answer": CLAIM, "citations": citations})
    named = [next((p for p in problems if p.startswith(f"citations[{i}]")), None) for i in range(1, len(citations))]
    words = ["no such file", "outside the file", "never read", "outside the repository", "outside the repository",
             "end_line", "from 1"]
    wrong = [(i + 1, w, p) for i, (w, p) in enumerate(zip(words, named)) if p is None or w not in p]
    ok = isinstance(problems, list) and len(problems) == len(bad) and not wrong
    check(ok, S3, FN, "validate_answer({answer, citations: [<good>, " + ", ".join(
              f"{c['path']}:{c['start_line']}-{c['end_line']}" for c in bad) + "]}, ...)",
          f"{len(bad)} problems, each starting 'citations[<i>]' and saying: {words}",
          f"{show(problems, 900)}; mismatched {show(wrong, 300)}",
          "name the citation and reuse citations.check_span's reason; check 1 <= start_line <= end_line yourself "
          "(validate_answer's contract names the words: lines count 'from 1', and 'end_line')")


def test_arguments_of_the_wrong_shape_are_problems_not_crashes():
    """Untrusted arguments (not a dict, no answer, string line numbers, ...) give problems, never an exception."""
    shapes = {
        "a string": "shop/service.py:9",
        "no answer": {"citations": [cite("shop/service.py", 9)]},
        "empty answer": {"answer": "  ", "citations": [cite("shop/service.py", 9)]},
        "no citations": {"answer": CLAIM, "citations": []},
        "citations not a list": {"answer": CLAIM, "citations": "shop/service.py:9"},
        "string lines": {"answer": CLAIM, "citations": [{"path": "shop/service.py", "start_line": "9", "end_line": "9"}]},
        "bool lines": {"answer": CLAIM, "citations": [{"path": "shop/service.py", "start_line": True, "end_line": True}]},
        "citation not an object": {"answer": CLAIM, "citations": ["shop/service.py:9"]},
        "no path": {"answer": CLAIM, "citations": [{"start_line": 9, "end_line": 9}]},
    }
    got = {}
    for name, arguments in shapes.items():
        try:
            got[name] = validate(arguments)
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            got[name] = f"raised {type(exc).__name__}: {exc}"
    wrong = {k: v for k, v in got.items()
             if not (isinstance(v, list) and v and all(isinstance(p, str) and p for p in v))}
    check(not wrong, S3, FN, f"validate_answer(<{', '.join(shapes)}>, ...)",
          "a non-empty list of readable problems for each, and no exception", show(wrong, 700),
          "check isinstance(...) before you use a value: dict, str, list, int (and not bool)")


# ---------------------------------------------------------------- emit_answer inside the copilot

def test_a_bad_citation_is_rejected_and_retried_once(copilot):
    """A forced emit_answer with a bad citation goes back as an error observation; the retry is accepted."""
    wrong, right = cite("shop/models.py", 400), cite("shop/service.py", 9)
    check(validate({"answer": CLAIM, "citations": [wrong]}) != [], S3, FN,
          "validate_answer({answer, citations: [shop/models.py:400]}, ...)", "a problem (line 400 does not exist)",
          "[]", "a span outside the file is never grounded")
    model = ScriptedModel([turn(call("read_file", {"path": "shop/service.py"}), content="Reading the service."),
                           answer("subtotal reads item.cost (shop/service.py:9)."), emit(wrong), emit(right)])
    forcing = Forcing(StrictProvider(model))
    result = copilot.run(QUESTION, FIXTURE_REPO, complete=forcing, structured=True, use_context=False)
    called = ("copilot.run(..., structured=True, complete=<read, answer, emit_answer(shop/models.py:400), "
              "emit_answer(shop/service.py:9)>)")
    retry = model.requests[3] if len(model.requests) > 3 else []
    sent_back = retry[-1].get("content", "") if retry else ""
    check(forcing.choices == ["auto", "auto", FORCED, FORCED] and sent_back.startswith("Error:")
          and "citations[0]" in sent_back and "outside the file" in sent_back, S3, FN, called,
          "tool_choice 'auto' for the loop, then emit_answer forced twice; the retry request ends with the tool "
          "message 'Error: ... citations[0] shop/models.py:400-400: line 400 outside the file ...'",
          f"tool_choice {show(forcing.choices)}, last message of the retry {show(sent_back, 400)}",
          "the problems you return are what the model reads; name the citation and the reason")
    final = result.structured
    grounded = [(c.path, c.line, c.grounded) for c in result.citations]
    check(result.termination == "answered" and final is not None and final.accepted and final.attempts == 2
          and grounded == [("shop/service.py", 9, True)], S3, FN, called,
          "termination 'answered', accepted on attempt 2, citation shop/service.py:9 grounded",
          f"termination {result.termination!r}, {show(final, 300)}, citations {grounded}",
          "return [] for a valid answer: an empty list means accepted")


def test_a_second_invalid_answer_ends_the_run_with_exit_1(copilot, capsys):
    """Two invalid emit_answer calls: no third try; exit code 1 and the reasons are printed."""
    never_read = cite("shop/models.py", 11)
    check(validate({"answer": CLAIM, "citations": [never_read]}) != [], S3, FN,
          "validate_answer({answer, citations: [shop/models.py:11]}, <only shop/service.py was read>)",
          "a problem (the lines were never shown)", "[]", "each span must have been read or injected in this run")
    model = ScriptedModel([turn(call("read_file", {"path": "shop/service.py"})), answer("It is Item (shop/models.py:11)."),
                           emit(never_read), emit(never_read)])
    code, out, _ = main(copilot, capsys, ["--repo", str(FIXTURE_REPO), "--no-context", "--structured", QUESTION],
                        Forcing(StrictProvider(model)))
    check(code == 1 and model.calls == 4 and "REJECTED" in out and "citations[0] shop/models.py:11" in out
          and "never read" in out, S3, FN,
          "copilot.main(['--structured', ...], complete=<read, answer, two emit_answer citing unread lines>)",
          "exit code 1 after 4 model calls, the output saying REJECTED with 'citations[0] shop/models.py:11...: ... never read ...'",
          f"exit {code} after {model.calls} calls, stdout {show(out, 700)}",
          "the run ends honestly: an answer that cannot be backed is not reported as answered")


def test_a_plain_text_reply_is_validated_when_the_provider_cannot_force(copilot):
    """A provider that ignores tool_choice (LiteLLM drops it for ollama_chat/) answers in text: its path:line is validated."""
    check(validate({"answer": CLAIM, "citations": [cite("shop/service.py", 9)]}) == [], S3, FN,
          "validate_answer({answer, citations: [shop/service.py:9]}, <read shop/service.py>)", "[]",
          "problems", "a span that was read is grounded")
    plain = "subtotal reads item.cost (shop/service.py:9)."
    model = ScriptedModel([turn(call("read_file", {"path": "shop/service.py"})), answer(plain), answer(plain)])
    result = copilot.run(QUESTION, FIXTURE_REPO, complete=Forcing(StrictProvider(model)), structured=True,
                         use_context=False)
    final = result.structured
    check(result.termination == "answered" and final is not None and final.accepted and not final.forced
          and final.citations == [cite("shop/service.py", 9)], S3, FN,
          "copilot.run(..., structured=True, complete=<replies in plain text to the forced turn>)",
          "accepted, forced False, citations [shop/service.py:9-9] read from the text",
          f"termination {result.termination!r}, {show(final, 400)}", "the same validate_answer checks both paths")


def test_litellm_sends_the_forced_tool_choice(copilot, tmp_path):
    """Through real LiteLLM to a local server: the final request names emit_answer in tool_choice."""
    check(validate({"answer": CLAIM, "citations": [cite("shop/service.py", 9)]}) == [], S3, FN,
          "validate_answer({answer, citations: [shop/service.py:9]}, <read shop/service.py>)", "[]",
          "problems", "a span that was read is grounded")
    config = importlib.import_module("config")
    script = [tool_reply(("read_file", {"path": "shop/service.py"})), text_reply("subtotal reads item.cost."),
              tool_reply(("emit_answer", {"answer": CLAIM, "citations": [cite("shop/service.py", 9)]}))]
    with FakeServer(script) as server:
        settings = config.Settings(model="openai/fake-model", api_base=server.base_url, api_key="test-key",
                                   embedding_model=None, embedding_api_base=None, embedding_api_key=None,
                                   cache_dir=tmp_path / "cache")
        result = copilot.run(QUESTION, FIXTURE_REPO, settings=settings, structured=True, use_context=False)
    chats = server.chat_requests
    sent = [(c.get("tool_choice"), sorted(t["function"]["name"] for t in c.get("tools", []))) for c in chats]
    check(len(chats) == 3 and sent[0][0] == "auto" and sent[2][0] == FORCED and "emit_answer" in sent[2][1]
          and result.structured is not None and result.structured.accepted, S3, FN,
          "copilot.run(..., settings=<openai/fake-model at a local server>, structured=True)",
          "3 requests: tool_choice 'auto' twice, then tool_choice naming emit_answer (which is in tools); accepted",
          f"{show(sent, 500)}; structured {show(result.structured, 300)}",
          "copilot passes tool_choice through LiteLLM, which sends it as is for openai/")
