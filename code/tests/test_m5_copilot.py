"""M5 - Copilot end to end: your four functions inside the real copilot (copilot.py).

Nothing new to write: these tests run copilot.py on the fixture repository with your
safe_resolve, parse_tool_calls, dispatch_tool and run_agent inside it.
  - scripted: a scripted model behind the strict provider; context injected, a file read,
    citations checked (grounded vs. invented);
  - wire: the real LiteLLM code path against a local OpenAI-compatible server (harness/fake_server.py)
    on 127.0.0.1: what LiteLLM sends on the second request, and embeddings through the same server;
  - command line: --json, exit codes. (--trace is stretch milestone S1: code/tests/test_s1_trace.py.)
The two wire tests import LiteLLM (seconds each): once they have passed on your code, they are not rerun
until a file in code/ changes (`python -m pytest --wire` reruns them). A live test against your own
provider is opt-in: python -m pytest -m live (needs a key in code/.env).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys

import pytest

from harness.fake_server import FakeServer, text_reply, tool_reply
from harness.milestones import BY_ID
from harness.offline import PROVIDER_VARIABLES
from harness.paths import CODE_DIR, FIXTURE_REPO, SENTINEL
from harness.scripted import AlwaysCallsTool, ScriptedModel, answer, call, turn
from harness.strict_provider import StrictProvider
from harness.teach import check, show

M5 = BY_ID["M5"]
QUESTION = "Why does order_total raise AttributeError?"
# Asked in everyday words: the embedding model is asked only for such a question (context_selector.uses_dense).
WORDS_QUESTION = "Where is the total of an order added up?"
GOOD_ANSWER = ("subtotal reads item.cost (shop/service.py:9), but Item only defines price "
               "(shop/models.py:11).")


def run_scripted(copilot, script, **kwargs):
    """copilot.run on the fixture repository with a scripted model behind the strict provider."""
    model = ScriptedModel(script)
    result = copilot.run(QUESTION, FIXTURE_REPO, complete=StrictProvider(model), **kwargs)
    return result, model


def citation(result, path, line):
    found = [c for c in result.citations if c.path == path and c.line == line]
    return found[0] if found else None


def cli(args, env_extra=None, timeout=120):
    """Run copilot.py in a fresh interpreter (with --reference when the tests run the reference)."""
    if os.environ.get("LESSON06_IMPL") == "reference":
        args = ["--reference", *args]
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(CODE_DIR / "copilot.py"), *args], cwd=CODE_DIR, env=env,
                          capture_output=True, text=True, timeout=timeout)


def raise_if_not_done(stderr: str) -> None:
    """copilot.py turns a stub's NotImplementedError into "M<n> is not done yet: ..." and exit code 2;
    turn it back, so the board reports the milestone that is not done instead of a wrong exit code."""
    found = re.search(r"(M\d) is not done yet: (.*)", stderr)
    if found:
        raise NotImplementedError(f"{found[1]}: {found[2]}")


def main(copilot, capsys, argv, complete):
    """copilot.main in this process, with a scripted model: (exit code, stdout)."""
    code = copilot.main(argv, complete=complete)
    out, err = capsys.readouterr()
    raise_if_not_done(err)
    return code, out


# ---------------------------------------------------------------- scripted, end to end

def test_context_is_injected_then_the_model_reads_and_cites_a_grounded_line(copilot):
    """The copilot injects context, your loop runs the read, and a cited line that was read is grounded."""
    result, model = run_scripted(copilot, [
        turn(call("read_file", {"path": "shop/service.py"}), content="Reading the service."),
        answer(GOOD_ANSWER),
    ])
    called = "copilot.run(QUESTION, fixture_repo, complete=<scripted: read_file shop/service.py, then answer>)"
    first = model.requests[0]
    check("[Injected context" in first[1]["content"] and "shop/service.py" in first[1]["content"], M5,
          "copilot.run", called, "the first request carries the injected snippets (shop/service.py among them)",
          show(first[1]["content"], 400), "copilot builds this message; if it is missing, M5 is a copilot bug")
    check(result.termination == "answered" and result.answer == GOOD_ANSWER, M5, "agent_loop.run_agent", called,
          f"termination 'answered' and the scripted answer {GOOD_ANSWER!r}",
          f"termination {result.termination!r}, answer {show(result.answer)}",
          "run_agent returns the content of the first message without tool calls")
    tool_messages = [m for m in model.requests[1] if m.get("role") == "tool"]
    check(len(tool_messages) == 1 and "item.cost" in tool_messages[0]["content"], M5, "tools.dispatch_tool",
          called, "the second request holds one tool result: shop/service.py's lines (with item.cost)",
          show(tool_messages), "dispatch_tool('read_file', {'path': 'shop/service.py'}, root) returns the numbered lines")
    cited = citation(result, "shop/service.py", 9)
    check(cited is not None and cited.grounded, M5, "citations.check_citations", called,
          "shop/service.py:9 cited and grounded (the file exists, line 9 exists, and it was read this run)",
          show(cited), "the citation check reads the transcript: the read_file result must be in messages")


def test_an_invented_citation_is_flagged_ungrounded(copilot):
    """Citations of a missing file, a line past the end, or a file never read are all ungrounded."""
    invented = "See shop/payments.py:3, shop/models.py:400 and shop/models.py:11."
    result, _ = run_scripted(copilot, [answer(invented)], use_context=False)
    called = "copilot.run(QUESTION, fixture_repo, use_context=False, complete=<answers at once, reads nothing>)"
    verdicts = {(c.path, c.line): (c.grounded, c.reason) for c in result.citations}
    expected = {("shop/payments.py", 3): False, ("shop/models.py", 400): False, ("shop/models.py", 11): False}
    check({k: v[0] for k, v in verdicts.items()} == expected, M5, "citations.check_citations", called,
          "all three ungrounded: no such file / line outside the file / never read nor injected",
          show(verdicts, 500), "an answer that read nothing guessed, even when the file happens to exist")


def test_a_model_that_never_stops_ends_with_exit_code_1(copilot, capsys):
    """--max-steps caps the run: termination 'max_steps' and exit code 1, with JSON that says so."""
    code, out = main(copilot, capsys, ["--repo", str(FIXTURE_REPO), "--max-steps", "3", "--json", QUESTION],
                     AlwaysCallsTool("read_file", {"path": "shop/models.py"}, ceiling=20))
    called = "copilot.main(['--max-steps', '3', '--json', ...], complete=<always calls read_file>)"
    try:
        data = json.loads(out)
    except ValueError:
        data = None
    check(isinstance(data, dict), M5, "copilot.main", called, "stdout holding only the --json object",
          f"exit code {code}, stdout {show(out, 400)}",
          "something printed to stdout besides the JSON: a print() left in your functions (tools.py, "
          "agent_loop.py) ends up in the copilot's output. Remove debug prints, or print to sys.stderr"
          if out.lstrip()[:1] not in ("{", "") else "copilot.py --json prints one JSON object; see the message above")
    check(code == 1 and data.get("termination") == "max_steps", M5, "agent_loop.run_agent", called,
          "exit code 1 and termination 'max_steps' (the answer starts with MAX_STEPS_REACHED)",
          f"exit code {code}, {show(data, 400)}", "run_agent stops after max_steps model calls")


def test_the_secret_never_reaches_the_model_or_the_output(copilot, capsys):
    """A model that asks for .env and searches for the secret gets errors/no hits; nothing leaks."""
    model = ScriptedModel([turn(call("read_file", {"path": ".env"}), call("search_code", {"query": "SENTINEL"})),
                           answer("I could not read the secrets.")])
    code, out = main(copilot, capsys, ["--repo", str(FIXTURE_REPO), "--json", "what is SHOP_API_KEY in .env?"],
                     StrictProvider(model))
    leaked = [i for i, request in enumerate(model.requests) if SENTINEL in json.dumps(request)]
    check(code == 0 and not leaked and SENTINEL not in out, M5, "tools.dispatch_tool",
          "copilot.main([... 'what is SHOP_API_KEY in .env?'], complete=<reads .env, searches SENTINEL>)",
          "exit code 0, the sentinel in no request and not in the output",
          f"exit code {code}, sentinel in requests {leaked}, in output: {SENTINEL in out}",
          "every path goes through safe_resolve and the sandbox rules; errors come back as 'Error: ...'")


# ---------------------------------------------------------------- the wire: real LiteLLM, local server

@pytest.mark.wire
def test_litellm_sends_the_assistant_turn_then_the_tool_result(copilot, offline):
    """Through real LiteLLM to a local server: the 2nd request carries tool_calls, then the tool result."""
    config = importlib.import_module("config")
    script = [tool_reply(("read_file", {"path": "shop/models.py"}), content="Checking the Item model."),
              text_reply(GOOD_ANSWER)]
    with FakeServer(script) as server:
        settings = config.Settings(model="openai/fake-model", api_base=server.base_url, api_key="test-key",
                                   embedding_model="openai/fake-embed", embedding_api_base=server.base_url,
                                   embedding_api_key="test-key", cache_dir=offline)
        result = copilot.run(WORDS_QUESTION, FIXTURE_REPO, settings=settings)
    called = "copilot.run(WORDS_QUESTION, fixture_repo, settings=<openai/fake-model at a local server>)"
    chats = server.chat_requests
    check(len(chats) == 2 and result.answer == GOOD_ANSWER, M5, "agent_loop.run_agent", called,
          "two chat requests (tool call, then answer) and the scripted answer",
          f"{len(chats)} requests, answer {show(result.answer)}", "run_agent calls the model again after the tool results")
    sent = chats[1]["messages"]
    turn_sent, result_sent = sent[-2], sent[-1]
    calls = turn_sent.get("tool_calls") or []
    ok = (turn_sent.get("role") == "assistant" and len(calls) == 1 and calls[0]["id"] == "call_0_0"
          and json.loads(calls[0]["function"]["arguments"]) == {"path": "shop/models.py"}
          and result_sent.get("role") == "tool" and result_sent.get("tool_call_id") == "call_0_0"
          and "price: float" in result_sent.get("content", ""))
    check(ok, M5, "agent_loop.run_agent", called,
          "2nd request ends with the assistant turn (tool_calls id call_0_0, arguments a JSON string) "
          "then {'role': 'tool', 'tool_call_id': 'call_0_0', 'content': <shop/models.py lines>}",
          show(sent[-2:], 700), "append assistant_turn(message) first, then tool_result(call.id, ...)")
    check(chats[0].get("tool_choice") == "auto" and {t["function"]["name"] for t in chats[0].get("tools", [])}
          == {"read_file", "list_directory", "search_code"} and chats[0].get("max_tokens"), M5, "llm.make_complete",
          called, "tools=TOOL_SCHEMAS, tool_choice='auto' and max_tokens on every request",
          show({k: v for k, v in chats[0].items() if k != "messages"}, 300), "a copilot wiring bug, not yours")
    embedded = [text for body in server.embedding_requests for text in body["input"]]
    check(len(embedded) > 1 and result.usage.prompt_tokens > 0, M5, "context_selector.select_context", called,
          "the chunks and the question embedded through the same server, and token usage recorded",
          f"{len(embedded)} texts embedded, usage {result.usage}", "EMBEDDING_MODEL adds dense vectors to the ranking")
    with FakeServer([text_reply(GOOD_ANSWER)]) as again:
        settings = config.Settings(model="openai/fake-model", api_base=again.base_url, api_key="test-key",
                                   embedding_model="openai/fake-embed", embedding_api_base=server.base_url,
                                   embedding_api_key="test-key", cache_dir=offline)
        copilot.run(WORDS_QUESTION, FIXTURE_REPO, settings=settings)
    check(not again.embedding_requests, M5, "context_selector.select_context", "the same run a second time",
          "no embedding requests: every vector comes from the cache", f"{len(again.embedding_requests)} requests",
          "vectors are cached by content hash and embedder")


@pytest.mark.wire
def test_json_from_the_command_line_is_one_document_with_its_fields(offline):
    """`copilot.py --json` through LiteLLM prints one JSON document (answer, citations, tool calls, usage)."""
    script = [tool_reply(("read_file", {"path": "shop/service.py"})), text_reply(GOOD_ANSWER)]
    with FakeServer(script) as server:
        proc = cli(["--repo", str(FIXTURE_REPO), "--model", "openai/fake-model", "--api-base", server.base_url,
                    "--json", QUESTION], {"COPILOT_CACHE_DIR": str(offline), "COPILOT_NO_DOTENV": "1"})
    raise_if_not_done(proc.stderr)
    called = "python copilot.py --repo fixture_repo --model openai/fake-model --api-base <local> --json QUESTION"
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = None
    check(proc.returncode == 0 and isinstance(data, dict), M5, "copilot.main", called,
          "exit code 0 and stdout that is exactly one JSON document",
          f"exit code {proc.returncode}, stdout {show(proc.stdout, 300)}, stderr {show(proc.stderr[-300:])}",
          "if stderr says 'M<n> is not done yet', finish that milestone first")
    fields = {"answer", "termination", "citations", "tool_calls", "usage", "context"}
    cited = {(c["path"], c["line"]): c["grounded"] for c in data.get("citations", [])}
    ok = (fields <= set(data) and data["termination"] == "answered" and cited.get(("shop/service.py", 9))
          and [c["name"] for c in data["tool_calls"]] == ["read_file"] and data["usage"]["steps"] == 2)
    check(ok, M5, "copilot.main", called,
          f"fields {sorted(fields)}; termination 'answered'; shop/service.py:9 grounded; one read_file call; 2 steps",
          show(data, 700), "the JSON is built from the transcript your run_agent returns in messages")


# ---------------------------------------------------------------- live (opt-in)

@pytest.mark.live
def test_live_provider_answers_with_a_grounded_citation(tmp_path, monkeypatch):
    """Your own provider (code/.env) answers about the fixture repository, citing a line it read."""
    monkeypatch.setenv("COPILOT_CACHE_DIR", str(tmp_path / "cache"))
    config = importlib.import_module("config")
    try:
        settings = config.load_settings()
    except config.ConfigError:
        pytest.skip("live test skipped: no provider configured (see code/.env.example)")
    copilot = importlib.import_module("copilot")
    result = copilot.run(QUESTION, FIXTURE_REPO, settings=settings)
    grounded = [c for c in result.citations if c.grounded]
    check(result.termination == "answered" and grounded, M5, "copilot.run", f"copilot.run(QUESTION, fixture_repo) with {settings.model}",
          "an answer with at least one grounded path:line citation",
          f"termination {result.termination!r}, answer {show(result.answer, 400)}, citations {show(result.citations, 400)}",
          "try python copilot.py --repo fixture_repo --trace \"...\" to watch what the model did")
