"""Course checks (maintainers): a model on this machine (issue 22). A local server gets a longer
timeout, small --check probes and a context that fits its window; a tool call a small model writes
as text is recovered for a local server only, and is never taken for an answer; nothing changes for
a hosted provider. Against harness/fake_server.py on loopback, offline.
"""

from __future__ import annotations

import importlib
import io
import json
import re
from types import SimpleNamespace as NS

import pytest

from harness.fake_server import FakeServer, text_reply, tool_reply
from harness.paths import CODE_DIR, FIXTURE_REPO
from test_providers import finished  # noqa: F401  (a fixture: copilot and config, once the loop exists)

agent_loop = importlib.import_module("agent_loop")
local_server = importlib.import_module("local_server")
text_calls = importlib.import_module("text_calls")
tools = importlib.import_module("tools")

FENCED = '```json\n{"name": "read_file", "arguments": {"path": "shop/service.py"}}\n```'
GROUNDED = "subtotal reads item.cost, but Item has price: shop/service.py:9"
QUESTION = "Why does order_total fail?"
NAMES = {"read_file", "list_directory", "search_code"}


# ---------------------------------------------------------------- recognising a call written as text

@pytest.mark.parametrize("text", [
    FENCED,
    '{"name": "read_file", "arguments": {"path": "a.py"}}',
    '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>',
    '{{"name": "read_file", "arguments": {"path": "a.py"}}}',            # the Qwen2.5 template's doubled braces
    '```\n{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}\n```\n\n\n',  # arguments encoded twice
    '```json\n{"function": "read_file", "arguments": {"path": "a.py"}}\n```',  # shapes the 1.5B wrote
    '<tools>\n{"type": "function", "function": {"name": "read_file", "arguments": {"path": "a.py"}}}\n</tools>',
    '{"name": "read_file", "parameters": {"path": "a.py"}}',
])
def test_a_reply_that_is_only_a_call_is_recognised(text):
    assert [name for name, _ in text_calls.written_calls(text, NAMES)] == ["read_file"]
    assert text_calls.is_written_call(text)


@pytest.mark.parametrize("text", [
    "The total is wrong because of shop/service.py:9.",
    'Call it as {"name": "read_file", "arguments": {"path": "a.py"}} when needed.',  # not starting a line
    '```json\n{"name": "run_shell", "arguments": {"cmd": "ls"}}\n```',      # not an offered tool
    '```json\n{"name": "read_file", "arguments": ["a.py"]}\n```',           # arguments not an object
    '```json\n{"name": "read_file", "arguments": {}, "id": 1}\n```',        # other keys
    '```json\n{"path": "shop/service.py"}\n```',
    "{" * 5000,
])
def test_anything_else_is_left_alone(text):
    assert text_calls.written_calls(text, NAMES) == []
    assert text_calls.recover(NS(content=text, tool_calls=None), tools.TOOL_SCHEMAS).content == text


def test_a_thought_before_the_call_stays_as_the_text():
    message = text_calls.recover(NS(content=f"I look for the total.\n{FENCED}", tool_calls=None), tools.TOOL_SCHEMAS)
    (call,) = message.tool_calls
    assert message.content == "I look for the total." and call.id == "text_call_0"
    assert call.function.name == "read_file" and json.loads(call.function.arguments) == {"path": "shop/service.py"}
    assert importlib.import_module("llm").bounded_reply(message).tool_calls[0].id == "text_call_0"


def test_text_after_the_call_makes_the_reply_an_answer_with_a_note():
    # issue 28: recovering the first call and dropping the rest ate answers that quoted a call
    text = f"I look for the total.\n{FENCED}\nThis returned:\n```\nshop/service.py:9: invented\n```\nSo the answer is..."
    assert not text_calls.is_written_call(text)  # for a hosted model this is text, and stays text
    notes = []
    message = text_calls.recover(NS(content=text, tool_calls=None), tools.TOOL_SCHEMAS, notes.append)
    assert message.content == text and not getattr(message, "tool_calls", None) and notes == ["text follows the call"]


def test_a_real_tool_call_is_never_touched():
    message = NS(content=FENCED, tool_calls=[NS(id="c1", function=NS(name="list_directory", arguments="{}"))])
    assert text_calls.recover(message, tools.TOOL_SCHEMAS) is message


# ---------------------------------------------------------------- which server is local

@pytest.mark.parametrize("model, base, local", [
    ("openai/qwen-1.5b", "http://127.0.0.1:8091/v1", True),
    ("openai/m", "http://localhost:8000/v1", True),
    ("hosted_vllm/m", "http://[::1]:8000/v1", True),
    ("ollama_chat/qwen3", None, True),                         # LiteLLM's default is localhost:11434
    ("openai/m", "http://192.168.1.20:8000/v1", False),        # another machine may be fast
    ("openai/gpt-4.1-mini", None, False),
    ("groq/openai/gpt-oss-120b", "http://127.0.0.1:9/v1", True),   # the name decides nothing (COPILOT_LOCAL=0 does)
    ("openai/m", "not a url", False),
])
def test_local_means_a_model_served_on_this_machine(model, base, local):
    assert local_server.is_local_model(NS(model=model, api_base=base)) is local


def test_a_local_server_gets_a_longer_timeout_and_a_hosted_one_does_not():
    llm = importlib.import_module("llm")
    assert llm.request_timeout(NS(model="openai/m", api_base="http://127.0.0.1:1/v1")) == \
        llm.REQUEST_TIMEOUT * local_server.LOCAL_TIMEOUT_FACTOR
    assert llm.request_timeout(NS(model="groq/openai/gpt-oss-120b", api_base=None)) == llm.REQUEST_TIMEOUT


class Props:
    """urlopen for context_window: one canned /props answer, recording what was asked."""

    def __init__(self, body):
        self.body, self.asked = body, []

    def __call__(self, url, timeout):
        self.asked.append((url, timeout))
        if isinstance(self.body, Exception):
            raise self.body
        return io.BytesIO(json.dumps(self.body).encode())


def test_the_context_window_is_asked_of_a_local_server_only():
    props = Props({"default_generation_settings": {"n_ctx": 4096}})
    local = NS(model="openai/m", api_base="http://127.0.0.1:8091/v1")
    assert local_server.context_window(local, opener=props) == 4096
    assert props.asked == [("http://127.0.0.1:8091/props", local_server.PROPS_TIMEOUT)]
    assert local_server.context_window(NS(model="openai/m", api_base="https://203.0.113.7/v1"), opener=props) is None
    assert len(props.asked) == 1
    for body in ({"n_ctx": 4096}, {"default_generation_settings": {"n_ctx": "big"}}, OSError("refused"), []):
        assert local_server.context_window(local, opener=Props(body)) is None


def test_the_injected_context_is_cut_to_fit_a_small_window_and_says_so():
    local = NS(model="openai/m", api_base="http://127.0.0.1:8091/v1")
    assert local_server.context_budget(local, 3_000, 6_000, window=8192) == (6_000, None)
    budget, note = local_server.context_budget(local, 3_000, 6_000, window=2048)
    assert budget < 6_000 and "2,048 tokens" in note and f"{budget:,} characters" in note
    assert local_server.context_budget(local, 9_000, 6_000, window=2048)[0] == 0


def test_tool_descriptions_and_the_prompt_name_no_real_path_or_symbol():
    # issue 22: a small model cited pkg/models.py:1, read_file's example, and shop/models.py:10 in
    # the system prompt is the fixture's own expected citation.
    copilot = importlib.import_module("copilot")
    text = json.dumps(tools.TOOL_SCHEMAS) + copilot.SYSTEM_PROMPT
    assert not re.findall(r"[\w-]+/[\w/-]*\.py\b", text)
    assert "PROVIDER_DEFAULTS" not in text and "order_total" not in text


# ---------------------------------------------------------------- end to end, against a local fake

def settings(finished, server, tmp_path, model="openai/qwen-1.5b", **extra):
    return finished.config.load_settings(env={"COPILOT_MODEL": model, "COPILOT_API_BASE": server.base_url,
                                              "COPILOT_CACHE_DIR": str(tmp_path / "cache"), "GROQ_API_KEY": "k", **extra})


def test_a_local_model_s_written_call_is_run_and_the_run_answers(finished, tmp_path):
    with FakeServer([text_reply(f"I read the service.\n{FENCED}"), text_reply(GROUNDED)]) as server:
        result = finished.copilot.run(QUESTION, FIXTURE_REPO, settings=settings(finished, server, tmp_path))  # asks /props too
        sent_back = server.chat_requests[1]["messages"]
    assert result.termination == "answered" and result.usage.recovered_calls == 1
    assert [r["max_tokens"] for r in server.chat_requests] == [local_server.LOCAL_ANSWER_TOKENS] * 2  # a runaway ends in time
    assert [c["name"] for c in result.tool_calls] == ["read_file"] and result.citations[0].grounded
    turn, answer = sent_back[-2:]
    assert turn["tool_calls"][0]["id"] == "text_call_0" and turn["content"] == "I read the service."
    assert answer["role"] == "tool" and "[File: shop/service.py" in answer["content"]


def test_a_hosted_model_s_written_call_is_a_protocol_failure_not_an_answer(finished, tmp_path, capsys):
    with FakeServer([text_reply(FENCED)]) as server:
        result = finished.copilot.run(QUESTION, FIXTURE_REPO, settings=settings(finished, server, tmp_path, "groq/x", COPILOT_LOCAL="0"),
                                      use_context=False)
        sent = server.chat_requests[0]
    assert result.termination == "tool_call_as_text" and result.exit_code == 1 and result.usage.recovered_calls == 0
    assert sent["max_tokens"] == importlib.import_module("llm").MAX_ANSWER_TOKENS  # a hosted request is unchanged
    report = importlib.import_module("report")
    report.print_report(result)
    out = capsys.readouterr().out
    assert "(no answer: the model's last reply is a tool call written as text" in out
    assert "stopped: the model wrote a tool call as text]" in out and "Citations: none" not in out


def test_check_against_a_local_server_says_its_timeout_and_window_and_keeps_probes_small(finished, tmp_path):
    preflight = importlib.import_module("preflight")
    with FakeServer([text_reply("ready"), text_reply('{"name": "list_directory", "arguments": {"path": "."}}')]) as server:
        out = io.StringIO()
        code = preflight.check(env={"COPILOT_MODEL": "openai/qwen-1.5b", "COPILOT_API_BASE": server.base_url,
                                    "COPILOT_NO_DOTENV": "1"}, out=out, sleep=lambda s: None)
    lines = out.getvalue().splitlines()
    assert code == 0, lines
    assert any(line.startswith("ok    timeout: 600 s per model call (a local server") for line in lines), lines
    assert any("context window: not reported by the server" in line for line in lines), lines
    assert lines[-1].startswith("warn  tool call: the model wrote its list_directory call as text"), lines
    assert [r["max_tokens"] for r in server.chat_requests] == [256, 256]
    assert server.chat_requests[1]["tool_choice"] == "auto"


def test_the_lab_s_own_question_gets_its_code_as_context(tmp_path):
    # Not the scripted runs' invented "19% VAT" answer, nor the question file (issue 22).
    copilot = importlib.import_module("copilot")
    result = copilot.run("why does config default to Groq?", CODE_DIR, complete=lambda m, t, **o: NS(
        content="PROVIDER_DEFAULTS lists Groq first: config.py:41", tool_calls=None), cache_dir=tmp_path / "cache")
    paths = [s.path for s in result.snippets]
    assert paths[0] == "config.py" and not [p for p in paths if p.startswith(("eval/", "fixture_repo/"))], paths
    assert "PROVIDER_DEFAULTS" in result.snippets[0].text and result.snippets[0].text.rstrip().endswith(")")


# ---------------------------------------------------------------- live (opt-in): any model .env names

@pytest.mark.live
def test_a_live_run_keeps_the_protocol(finished, tmp_path, monkeypatch):
    """Whatever model code/.env names (a local llama-server as well as a hosted one): protocol facts
    only, never the answer's wording. python -m pytest --reference -m live rubric/checks/test_local_model.py"""
    from harness.paths import SENTINEL

    monkeypatch.setenv("COPILOT_CACHE_DIR", str(tmp_path / "cache"))
    try:
        settings = finished.config.load_settings()
    except finished.config.ConfigError:
        pytest.skip("live test skipped: no provider configured in code/.env")
    steps = 4
    result = finished.copilot.run(QUESTION, FIXTURE_REPO, settings=settings, max_steps=steps)
    assert result.termination in ("answered", "max_steps", "empty_answer", "tool_call_as_text"), result.termination
    assert 1 <= result.usage.steps <= steps
    messages = result.messages
    json.dumps(messages)  # the transcript is plain data
    for i, turn in enumerate(messages):
        if turn["role"] != "assistant" or not turn.get("tool_calls"):
            continue
        ids = [call["id"] for call in turn["tool_calls"]]
        answers = messages[i + 1:i + 1 + len(ids)]
        assert [a["role"] for a in answers] == ["tool"] * len(ids) and [a["tool_call_id"] for a in answers] == ids
        for call, answer in zip(turn["tool_calls"], answers):
            assert isinstance(json.loads(call["function"]["arguments"]), dict), call
            assert SENTINEL not in answer["content"]  # the sandbox held whatever was asked
    assert all(isinstance(c.grounded, bool) for c in result.citations)
    assert result.termination == "answered" or not result.citations
