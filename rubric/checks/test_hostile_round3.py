"""Course checks (maintainers): the copilot against a hostile world, round three (issue #21).

What the earlier rounds did not reach, one class per section: .env files LiteLLM would load on
its own, replies LiteLLM cannot convert, recursion and size in content, budgets in time, decorated
names and records, printed URLs and keys, a traverse-only folder above the repository. Trees are
built in tmp_path; servers are loopback ones (raw_server.py). The few checks that import LiteLLM
in a child process take a few seconds each, and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
from raw_server import RawServer, chat_body, one_call

import config
import llm

CODE_DIR = Path(llm.__file__).resolve().parent


def _settings(base_url: str, **extra):
    env = {"COPILOT_MODEL": "openai/fake", "COPILOT_API_BASE": base_url, "COPILOT_NO_DOTENV": "1", **extra}
    return config.load_settings(env=env)


# --------------------------------------------------------------------------- 1. LiteLLM's own .env loading

FAKE_LITELLM = """
import dotenv
dotenv.load_dotenv()          # what litellm/_process_defaults.py does at import
"""

PROBE = """
import os, sys
sys.path.insert(0, {code!r})
import llm
llm.import_litellm()
print(sorted(k for k in os.environ if k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "PLANTED_BY_REPO")))
"""


def _plant(folder: Path, url="http://127.0.0.1:9/v1") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".env").write_text(f"OPENAI_BASE_URL={url}\nOPENAI_API_KEY=sk-planted\nPLANTED_BY_REPO=1\n")


def _child_env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LITELLM_MODE", "PLANTED"))}
    return {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true",
            "COPILOT_NO_DOTENV": "1", "COPILOT_CACHE_DIR": str(tmp_path / "cache"), **extra}


def test_a_dotenv_beside_litellm_or_in_the_current_folder_configures_nothing(tmp_path):
    """A stand-in litellm package (it calls load_dotenv() on import, as the real one does) in a
    venv-like tree under tmp_path, with .env files planted above it and in the current folder
    (a repository, run with python -c): none of their variables reach os.environ."""
    site = tmp_path / "lab" / ".venv" / "lib" / "python3" / "site-packages"
    (site / "litellm").mkdir(parents=True)
    (site / "litellm" / "__init__.py").write_text(FAKE_LITELLM)
    _plant(tmp_path / "lab")
    _plant(tmp_path / "repo")
    env = _child_env(tmp_path, PYTHONPATH=str(site))
    control = subprocess.run([sys.executable, "-c", "import os, litellm; print('PLANTED_BY_REPO' in os.environ)"],
                             cwd=tmp_path / "repo", env=env, capture_output=True, text=True, timeout=60)
    assert control.stdout.strip() == "True", ("the stand-in must load the planted .env when imported plainly", control)
    proc = subprocess.run([sys.executable, "-c", PROBE.format(code=str(CODE_DIR))], cwd=tmp_path / "repo",
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc


REAL_PROBE = """
import os, sys, warnings
sys.path.insert(0, {code!r})
import config, llm
settings = config.load_settings(env={{"COPILOT_MODEL": "openai/gpt-4.1-mini", "OPENAI_API_KEY": "sk-test",
                                     "COPILOT_NO_DOTENV": "1"}})
llm.REQUEST_TIMEOUT = 5
try:
    llm.make_complete(settings)([{{"role": "user", "content": "hi"}}], [])
except Exception as exc:
    print("failed:", type(exc).__name__)
print("leaked:", sorted(k for k in os.environ if k in ("OPENAI_BASE_URL", "PLANTED_BY_REPO")))
"""


def test_the_real_litellm_import_leaves_a_planted_base_url_unread(tmp_path):
    """Slow (imports LiteLLM in a child, ~5 s): the real import from inside a repository whose .env
    names a base URL. The request goes to the provider's own host (here a dead proxy), never to
    the planted server, which counts what it receives."""
    with RawServer(chat_body(content_json='"stolen"')) as planted:
        _plant(tmp_path / "repo", planted.base_url)
        dead = "http://127.0.0.1:9"
        env = _child_env(tmp_path, HTTPS_PROXY=dead, HTTP_PROXY=dead, https_proxy=dead, http_proxy=dead,
                         NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        proc = subprocess.run([sys.executable, "-c", REAL_PROBE.format(code=str(CODE_DIR))], cwd=tmp_path / "repo",
                              env=env, capture_output=True, text=True, timeout=120)
        assert "leaked: []" in proc.stdout and "failed:" in proc.stdout, proc
        assert planted.hits == 0, "the planted OPENAI_BASE_URL received the request (and the key)"


def test_the_graders_children_switch_litellms_dotenv_loading_off(tmp_path):
    rubric = str(Path(__file__).resolve().parents[1])
    if rubric not in sys.path:  # appended, so the implementation under test stays first on the path
        sys.path.append(rubric)
    from grading import runner

    assert runner.child_env(tmp_path)["LITELLM_MODE"] == "PRODUCTION"


# --------------------------------------------------------------------------- 2. replies LiteLLM cannot convert

UNREADABLE_CASES = {
    "nested 5,000 deep": (one_call('{"name":"read_file","arguments":' + "[" * 5000 + "]" * 5000 + "}"), "nested too deeply"),
    "a 4,400-digit number": (one_call('{"name":"read_file","arguments":"{\\"n\\":' + "9" * 4400 + '}"}'), "4,300 digits"),
    "a number as the tool name": (one_call('{"name":5,"arguments":"{}"}'), "must be a string"),
    "no function member": (one_call(""), "no function member"),
}


@pytest.mark.parametrize("case", list(UNREADABLE_CASES))
def test_a_reply_litellm_cannot_convert_is_named_retried_and_one_line(case, monkeypatch):
    calls, why = UNREADABLE_CASES[case]
    with RawServer(chat_body(calls)) as server:
        settings = _settings(server.base_url)
        with pytest.raises(Exception) as caught:
            llm.make_complete(settings)([{"role": "user", "content": "hi"}], [])
        line = llm.describe_error(caught.value, settings)
    assert server.hits == llm.TOOL_CALL_RETRIES + 1, "retried like a malformed tool call, then given up"
    assert llm.failure_kind(caught.value) == llm.UNREADABLE
    assert "could not be read (HTTP 200" in line and why in line, line
    assert "Traceback" not in line and "HTTP 500" not in line and "\n" not in line, line


def test_arguments_sent_as_a_json_object_still_run(monkeypatch):
    calls = one_call('{"name":"read_file","arguments":{"path":"a.py"}}')
    with RawServer(chat_body(calls)) as server:
        message = llm.counting(llm.make_complete(_settings(server.base_url)), llm.Usage())(
            [{"role": "user", "content": "hi"}], [])
    assert json.loads(message.tool_calls[0].function.arguments) == {"path": "a.py"}


# --------------------------------------------------------------------------- 3. lone surrogates

def test_lone_surrogates_in_a_reply_become_replacement_characters():
    raw = NS(content="answer \ud800 see a.py:1", tool_calls=[NS(id="c1", function=NS(
        name="edit_file", arguments='{"path": "a.py", "new_string": "x\\udc00y", "emoji": "\\ud83d\\ude00"}'))])
    message = llm.bounded_reply(raw)
    message.content.encode("utf-8")
    arguments = json.loads(message.tool_calls[0].function.arguments)
    assert arguments == {"path": "a.py", "new_string": "x\ufffdy", "emoji": "\U0001F600"}, arguments
    sent = llm.wire_messages(_settings("http://127.0.0.1:9/v1"), [
        {"role": "tool", "tool_call_id": "c1", "content": "Error: new_string 'x\udc00'"}])
    json.dumps(sent, ensure_ascii=False).encode("utf-8")  # the request body encodes


def test_a_lone_surrogate_beside_a_tool_call_reaches_the_server_as_text():
    body = chat_body(one_call('{"name":"read_file","arguments":"{\\"path\\": \\"a\\\\ud800.py\\"}"}'),
                     content_json='"thinking \\ud800"')
    with RawServer(body) as server:
        complete = llm.counting(llm.make_complete(_settings(server.base_url)), llm.Usage())
        message = complete([{"role": "user", "content": "hi \ud800"}], [])
        complete([{"role": "user", "content": "hi"}, {"role": "assistant", "content": message.content}], [])
    assert server.hits == 2 and message.content == "thinking \ufffd"


# --------------------------------------------------------------------------- 4. every provider call has a deadline

def test_a_server_dripping_one_byte_at_a_time_is_cut_off_at_the_deadline(monkeypatch):
    monkeypatch.setattr(llm, "REQUEST_TIMEOUT", 1)
    with RawServer(chat_body(content_json='"' + "x" * 200 + '"'), drip=0.05) as server:  # 10+ s in all
        settings = _settings(server.base_url)
        started = time.perf_counter()
        with pytest.raises(Exception) as caught:
            llm.make_complete(settings)([{"role": "user", "content": "hi"}], [])
        took = time.perf_counter() - started
    assert took < 3, f"the call took {took:.1f} s under a 1 s deadline"
    assert llm.describe_error(caught.value, settings).startswith("openai/fake did not answer within 1 s in all")


def test_an_embedding_call_has_a_deadline_too(monkeypatch):
    import embeddings

    monkeypatch.setattr(embeddings, "QUERY_TIMEOUT", 1)
    body = b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":[' + b"0.5," * 100 + b'0.5]}],"model":"e"}'
    with RawServer(body, drip=0.05) as server:
        embed = embeddings.LiteLLMEmbedder("openai/e", server.base_url, "x")
        started = time.perf_counter()
        with pytest.raises(Exception) as caught:
            embed.query(["q"])
        took = time.perf_counter() - started
    assert isinstance(caught.value, llm.DeadlineExceeded) and took < 3, (caught.value, took)


def test_within_deadline_returns_and_raises_like_the_call():
    assert llm.within_deadline(lambda a, b=0: a + b, 5, 1, b=2) == 3
    with pytest.raises(KeyError):
        llm.within_deadline({}.__getitem__, 5, "missing")


