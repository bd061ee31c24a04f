"""Course checks (maintainers): the copilot, round four (issue #28).

A run you can watch (live.py), numbers from model and server text bounded before conversion,
LiteLLM's own log lines kept off the terminal, text-call recovery only of a reply that is calls,
"local" decided by addresses, an index budget spent on text, evaluate.py's ceiling from the
model's budget. Servers are loopback fakes; the checks that start the copilot in a child process
(it imports LiteLLM) take a few seconds each.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace as NS

import pytest

from harness.fake_server import FakeServer, ended_reply, text_reply, tool_reply
from harness.offline import offline_env
from harness.paths import CODE_DIR, FIXTURE_REPO

import llm

pytestmark = pytest.mark.skipif(
    os.environ.get("LESSON06_IMPL") != "reference", reason="course checks run with --reference"
)

QUESTION = "why does order_total fail?"
ESC, BEL = "\x1b", "\x07"


def _env(tmp_path, server, **extra):
    return offline_env(tmp_path / "cache", COPILOT_MODEL="openai/fake", COPILOT_API_BASE=server.base_url,
                       COPILOT_API_KEY="x", LITELLM_OFFLINE_MODE="true", **extra)


def _copilot(*args):
    return [sys.executable, str(CODE_DIR / "copilot.py"), "--reference", "--repo", str(FIXTURE_REPO), *args]


# --------------------------------------------------------------------------- 1. a run you can watch

@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals (the pty module) are POSIX only")
def test_under_a_terminal_the_first_step_shows_while_the_model_still_thinks_about_the_second(tmp_path):
    import pty
    import select

    second_asked, release = threading.Event(), threading.Event()

    def replies(body, n):
        if n == 0:
            return tool_reply(("read_file", {"path": "shop/service.py"}), content="I read the service \x1b]0;x\x07")
        if n == 1:
            second_asked.set()
            release.wait(60)  # the model "thinks" until the test has seen the first step on the screen
        return text_reply("It uses item.cost; Item has price: shop/service.py:1")

    with FakeServer(replies) as server:
        master, slave = pty.openpty()
        proc = subprocess.Popen(_copilot(QUESTION), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=slave, env=_env(tmp_path, server), cwd=CODE_DIR)
        os.close(slave)
        screen = b""
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not (second_asked.is_set() and b"<- read_file" in screen
                                                       and b"[2] asking" in screen):
                ready, _, _ = select.select([master], [], [], 0.5)
                if ready:
                    try:
                        screen += os.read(master, 65536)
                    except OSError:
                        break
            seen_while_waiting = screen
        finally:
            release.set()
            out, _ = proc.communicate(timeout=90)
            try:
                while True:
                    ready, _, _ = select.select([master], [], [], 0.2)
                    if not ready:
                        break
                    chunk = os.read(master, 65536)
                    if not chunk:
                        break
                    screen += chunk
            except OSError:
                pass
            os.close(master)
    text = seen_while_waiting.decode("utf-8", "replace")
    assert second_asked.is_set() and proc.returncode == 0, (text, out)
    assert "[1] reply after" in text and "-> read_file path='shop/service.py'" in text, text
    assert "<- read_file:" in text and "[2] asking openai/fake ..." in text, text  # the elapsed time ticks in place
    assert "\\x1b]0;x\\x07" in text and "\x1b]" not in text and BEL not in text  # the model's text is escaped
    assert "[stop] answered after 2 model calls" in screen.decode("utf-8", "replace")
    assert b"[1]" not in out and out.startswith(b"It uses item.cost")  # stdout has the answer only


def test_without_a_terminal_nothing_shows_unless_asked_and_json_stays_clean(tmp_path):
    script = [tool_reply(("read_file", {"path": "shop/service.py"})), text_reply("Item has price: shop/models.py:10")]
    with FakeServer(script * 3) as server:
        env = _env(tmp_path, server)
        quiet = subprocess.run(_copilot(QUESTION), env=env, cwd=CODE_DIR, capture_output=True, text=True, timeout=120)
        asked = subprocess.run(_copilot("--progress", "--json", QUESTION), env=env, cwd=CODE_DIR,
                               capture_output=True, text=True, timeout=120)
        off = subprocess.run(_copilot("--no-progress", QUESTION), env=env, cwd=CODE_DIR,
                             capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and "[1]" not in quiet.stderr and "asking" not in quiet.stderr, quiet.stderr
    assert off.returncode == 0 and "[1]" not in off.stderr, off.stderr
    assert asked.returncode == 0, asked.stderr
    lines = asked.stderr.splitlines()
    assert lines[:1] == ["[1] asking openai/fake ..."] and "\r" not in asked.stderr and ESC not in asked.stderr, lines
    assert "  -> read_file path='shop/service.py'" in lines and "[stop] answered after 2 model calls" in lines[-1]
    assert json.loads(asked.stdout)["termination"] == "answered"  # stdout: one JSON document, nothing else


def test_the_live_view_escapes_what_the_model_and_the_tools_wrote_and_names_refusals():
    live = importlib.import_module("live")
    out = io.StringIO()
    view = live.LiveView(out, ticking=False, model="openai/m\x1b[2J")
    view.calling(1, [{"role": "user", "content": "q"}])
    reply = NS(content="Thought \x1b[31m\x07", tool_calls=[
        NS(id="a", function=NS(name="read_file", arguments=json.dumps({"path": "x\x1b]52;c;AA\x07.py"}))),
        NS(id="text_call_0", function=NS(name="search_code", arguments='{"query": "q"}'))])
    view.replied(1, reply, "content_filter\x1b[0m")
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None},
                {"role": "tool", "tool_call_id": "a", "content": "Error: path 'x\x1b.py' is outside"},
                {"role": "tool", "tool_call_id": "text_call_0", "content": "a\nb\x07\nc"}]
    view.calling(2, messages)
    view.failed(2, TimeoutError("x"))
    view.finished("max_steps", 2, messages)
    text = out.getvalue()
    assert ESC not in text and BEL not in text and "\r" not in text, text
    assert "\\x1b]52;c;AA\\x07" in text and "(written as text, recovered)" in text
    assert "<- read_file refused: path 'x\\x1b.py' is outside" in text
    assert "<- search_code: 3 lines, 6 characters" in text and "finish reason: content_filter\\x1b[0m" in text
    assert "[2] failed after" in text and text.rstrip().splitlines()[-1].startswith("[stop] max_steps after 2 model calls")


def test_the_live_view_hangs_off_the_model_wrapper_only():
    """llm.counting tells the view; without one, the wrapper is what it was."""
    calls = []

    class Watch:
        def calling(self, step, messages): calls.append(("calling", step))
        def replied(self, step, reply, finish): calls.append(("replied", step, reply.content))
        def failed(self, step, exc): calls.append(("failed", step, type(exc).__name__))

    usage = llm.Usage()
    replies = iter([NS(content="hi", tool_calls=None)])

    def complete(messages, tool_schemas, **options):
        try:
            return next(replies)
        except StopIteration:
            raise TimeoutError("slow") from None

    counted = llm.counting(complete, usage, Watch())
    assert counted([], []).content == "hi"
    with pytest.raises(TimeoutError):
        counted([], [])
    assert calls == [("calling", 1), ("replied", 1, "hi"), ("calling", 2), ("failed", 2, "TimeoutError")]


def test_progress_is_on_for_a_terminal_and_the_flags_win():
    live = importlib.import_module("live")
    tty, pipe = NS(isatty=lambda: True), io.StringIO()
    assert live.wanted(None, tty) and not live.wanted(None, pipe)
    assert live.wanted(True, pipe) and not live.wanted(False, tty)


# --------------------------------------------------------------------------- 2. numbers and LiteLLM's log lines

def test_a_structured_answer_in_plain_text_citing_a_4301_digit_line_is_judged_not_a_crash(tmp_path):
    copilot = importlib.import_module("copilot")
    huge = "7" * 4301  # int() refuses it outright: Python's integer string limit
    replies = iter([NS(content="Item has price: shop/models.py:10", tool_calls=None)]
                   + [NS(content=f"See shop/models.py:{huge}-{huge}9", tool_calls=None)] * 2)
    result = copilot.run(QUESTION, FIXTURE_REPO, complete=lambda m, t, **o: next(replies), structured=True,
                         cache_dir=tmp_path / "cache")
    assert result.termination == "invalid_answer" and result.exit_code == 1
    assert any("outside the file" in p for p in result.structured.problems), result.structured.problems


def test_token_counts_a_server_sends_are_bounded_before_they_add_up():
    usage = llm.Usage()
    huge = int("9" * 4300)  # the longest number JSON decoding lets through; two of them add up to 4,301 digits
    for _ in range(2):
        usage.record(NS(usage=NS(prompt_tokens=huge, completion_tokens=float("nan")), choices=[]))
    assert usage.prompt_tokens == 2 * llm.MAX_TOKENS_COUNTED and usage.completion_tokens == 0
    assert f"{usage.prompt_tokens:,}"  # the summary line prints it


def test_a_question_file_s_expected_line_is_bounded_too():
    evaluation = importlib.import_module("harness.evaluation")
    cited = [NS(path="shop/models.py", exists=True, in_range=True, line=10, end_line=10)]
    assert evaluation.matches_expected("shop/models.py:9-" + "9" * 4301, cited)
    assert not evaluation.matches_expected("shop/models.py:" + "9" * 4301, cited)


def test_a_server_claiming_a_window_of_4000_digits_has_an_unknown_window():
    local_server = importlib.import_module("local_server")
    local = NS(model="openai/m", api_base="http://127.0.0.1:8091/v1")

    def props(url, timeout):
        return io.BytesIO(('{"default_generation_settings": {"n_ctx": ' + "9" * 4000 + "}}").encode())

    assert local_server.context_window(local, opener=props) is None
    assert local_server.context_budget(local, 3_000, 6_000, window=10 ** 8)[0] == 6_000


def test_litellm_s_own_warning_quoting_a_server_s_finish_reason_reaches_stderr_escaped(capfd):
    preflight = importlib.import_module("preflight")
    weird = "weird\x1b]0;owned\x07\x1b[2J"
    with FakeServer([ended_reply(weird, "ready"), ended_reply(weird, "ok")]) as server:
        out = io.StringIO()
        preflight.check(env={"COPILOT_MODEL": "openai/fake", "COPILOT_API_BASE": server.base_url,
                             "COPILOT_NO_DOTENV": "1"}, out=out, sleep=lambda s: None)
    captured = capfd.readouterr()
    assert ESC not in out.getvalue() + captured.out + captured.err and BEL not in captured.err, captured.err
    assert "weird\\x1b]0;owned\\x07" in captured.err  # LiteLLM's "Unmapped finish_reason" line, escaped
    assert captured.out == ""  # LiteLLM's handler sends records below WARNING to stdout: none get there


# --------------------------------------------------------------------------- 3. text-call recovery only of calls

CALL = '{"name": "search_code", "arguments": {"query": "order_total"}}'
FENCE = f"```json\n{CALL}\n```"


@pytest.mark.parametrize("text, thought", [
    (CALL, ""),
    (FENCE, ""),
    (f"I look for the total.\n{FENCE}\n", "I look for the total."),
    (f"Thought: where is it defined?\n{CALL}\n{CALL}", "Thought: where is it defined?"),
])
def test_a_reply_that_is_calls_after_a_short_thought_is_recovered(text, thought):
    text_calls = importlib.import_module("text_calls")
    tools = importlib.import_module("tools")
    notes = []
    message = text_calls.recover(NS(content=text, tool_calls=None), tools.TOOL_SCHEMAS, notes.append)
    assert message.tool_calls and {c.function.name for c in message.tool_calls} == {"search_code"}
    assert (message.content or "") == thought and notes == []


@pytest.mark.parametrize("shape, text", [
    ("text after the call", f"I search.\n{FENCE}\nIt returned shop/service.py:9, so the answer is price."),
    ("a call quoted inside prose", f"text_calls.py recovers a reply like\n{CALL}\nand runs it as search_code."),
    ("a fence with other text", f"The docstring shows:\n```json\n{CALL}\n# and the reply goes on\n```"),
    ("a fence with text before the call", f"```json\n// the example\n{CALL}\n```"),
    ("a long explanation before it", "text_calls.py explains small models. " * 30 + f"\n{FENCE}"),
    ("code before it", f"Here is the module:\n```python\ndef recover(): ...\n```\n{FENCE}"),
])
def test_a_call_inside_other_text_leaves_the_reply_an_answer_with_a_note(shape, text):
    text_calls = importlib.import_module("text_calls")
    tools = importlib.import_module("tools")
    notes = []
    message = text_calls.recover(NS(content=text, tool_calls=None), tools.TOOL_SCHEMAS, notes.append)
    assert message.content == text and not getattr(message, "tool_calls", None), shape
    assert len(notes) == 1, shape


def test_a_local_model_explaining_text_calls_gets_its_answer_shown_with_a_note(tmp_path, capsys):
    copilot = importlib.import_module("copilot")
    report = importlib.import_module("report")
    config = importlib.import_module("config")
    explained = f"text_calls.py turns a reply like\n{FENCE}\ninto a real call: text_calls.py:1"
    with FakeServer([text_reply(explained)]) as server:
        settings = config.load_settings(env={"COPILOT_MODEL": "openai/qwen-1.5b", "COPILOT_API_BASE": server.base_url,
                                             "COPILOT_CACHE_DIR": str(tmp_path / "cache"), "COPILOT_NO_DOTENV": "1"})
        result = copilot.run("what does text_calls.py do?", CODE_DIR, settings=settings, use_context=False)
    assert result.termination == "answered" and result.answer == explained and len(server.chat_requests) == 1
    assert result.usage.quoted_calls == 1 and result.usage.recovered_calls == 0
    report.print_report(result)
    assert "quotes a tool call inside other text; it was kept as text, not run" in capsys.readouterr().out


# --------------------------------------------------------------------------- 4. what counts as local

@pytest.mark.parametrize("base", [
    "http://0.0.0.0:8091/v1",              # what llama-server prints for --host 0.0.0.0
    "http://127.1:8091/v1", "http://2130706433:8091/v1", "http://127.0.0.2:8091/v1",
    "http://[::ffff:127.0.0.1]:8091/v1", "http://[::1]:8091/v1", "http://[::]:8091/v1",
    "http://localhost:11434", "http://LOCALHOST:11434",
])
def test_every_spelling_of_this_machine_is_local_whatever_the_model_is_called(base):
    local_server = importlib.import_module("local_server")
    for model in ("openai/qwen-1.5b", "openai/gpt-4o", "openai/gpt-oss-20b", "groq/openai/gpt-oss-120b"):
        assert local_server.is_local_model(NS(model=model, api_base=base)), (model, base)


@pytest.mark.parametrize("base", ["http://192.168.1.20:8000/v1", "http://[::ffff:192.168.1.2]:8000/v1",
                                  "http://10.0.0.7:8091/v1", "https://203.0.113.7/v1"])  # literal: no lookup
def test_another_machine_is_hosted_whatever_the_model_is_called(base):
    local_server = importlib.import_module("local_server")
    assert not local_server.is_local_model(NS(model="openai/qwen-1.5b", api_base=base))


def test_copilot_local_wins_both_ways_and_says_so():
    config = importlib.import_module("config")
    local_server = importlib.import_module("local_server")
    llm_module = importlib.import_module("llm")
    proxy = config.load_settings(env={"COPILOT_MODEL": "openai/gpt-oss-20b", "COPILOT_API_BASE": "http://127.0.0.1:4000/v1",
                                      "COPILOT_LOCAL": "0", "COPILOT_NO_DOTENV": "1"})
    assert local_server.locality(proxy) == (False, "COPILOT_LOCAL=0 says so")
    assert llm_module.answer_cap(proxy) == llm_module.MAX_ANSWER_TOKENS  # gpt-oss gets room to think
    assert llm_module.request_timeout(proxy) == llm_module.REQUEST_TIMEOUT
    lan = config.load_settings(env={"COPILOT_MODEL": "openai/m", "COPILOT_API_BASE": "http://192.168.1.20:8000/v1",
                                    "COPILOT_LOCAL": "1", "COPILOT_NO_DOTENV": "1"})
    assert local_server.is_local_model(lan) and llm_module.answer_cap(lan) == local_server.LOCAL_ANSWER_TOKENS
    with pytest.raises(config.ConfigError, match="COPILOT_LOCAL must be 1 or 0"):
        config.load_settings(env={"COPILOT_MODEL": "openai/m", "COPILOT_API_BASE": "http://127.0.0.1:1/v1",
                                  "COPILOT_LOCAL": "maybe", "COPILOT_NO_DOTENV": "1"})


def test_check_says_which_applied_and_why():
    preflight = importlib.import_module("preflight")
    found = {}
    for local in ("", "0"):
        with FakeServer([text_reply("ready"), tool_reply(("list_directory", {"path": "."}))]) as server:
            out = io.StringIO()
            base = server.base_url.replace("127.0.0.1", "127.1")
            code = preflight.check(env={"COPILOT_MODEL": "openai/gpt-4o", "COPILOT_API_BASE": base,
                                        "COPILOT_LOCAL": local, "COPILOT_NO_DOTENV": "1"}, out=out, sleep=lambda s: None)
            found[local] = (code, out.getvalue().splitlines(), [r.get("max_tokens") for r in server.chat_requests])
    code, lines, caps = found[""]
    assert code == 0 and "ok    where: a local server (127.1 resolves to 127.0.0.1, this machine; " \
        "COPILOT_LOCAL=1 or 0 decides otherwise)" in lines, lines
    assert caps == [256, 256]
    code, lines, caps = found["0"]
    assert "ok    where: a hosted provider (COPILOT_LOCAL=0 says so)" in lines and not any("timeout:" in l for l in lines)
    assert caps == [llm.MAX_ANSWER_TOKENS] * 2, caps  # a hosted model's probes: no local cap


# --------------------------------------------------------------------------- 5. the index budget is spent on text

def _images_beside_sources(root, count=6, size=200_000):
    (root / "assets").mkdir()
    for i in range(count):  # a PNG's header, then a hole of zeros (sparse where the file system can)
        with open(root / "assets" / f"img_{i:03d}.png", "wb") as fh:
            fh.write(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
            fh.truncate(size)
    (root / "src").mkdir()
    (root / "src" / "shop.py").write_text("def order_total(items):\n    return sum(i.price for i in items)\n")


def test_binary_files_cost_the_index_budget_nothing_and_the_note_names_them(tmp_path, monkeypatch, capsys):
    context_index = importlib.import_module("context_index")
    context_selector = importlib.import_module("context_selector")
    repo = tmp_path / "repo"
    repo.mkdir()
    _images_beside_sources(repo)
    monkeypatch.setattr(context_index, "MAX_INDEX_TOTAL_BYTES", 1_000_000)  # 6 x 200 KB listed: over it
    read = []
    real = context_index.read_bytes
    monkeypatch.setattr(context_index, "read_bytes", lambda tree, rel: read.append(rel) or real(tree, rel))
    snippets = context_selector.select_context("how is order_total computed?", repo, k=3, cache_dir=tmp_path / "cache")
    said = capsys.readouterr().err
    assert [s.path for s in snippets] == ["src/shop.py"], said
    assert "skipped 6 binary files by their first bytes" in said and "assets/img_000.png" in said, said
    assert "past the index's" not in said, said  # nothing that is text was left out
    assert not [rel for rel in read if rel.startswith("assets/")]  # never read whole


def test_text_past_the_budget_is_still_named_after_the_binary_files(tmp_path, monkeypatch, capsys):
    context_index = importlib.import_module("context_index")
    files = [(str(tmp_path / "a.bin"), "a.bin", 600), (str(tmp_path / "b.py"), "b.py", 600),
             (str(tmp_path / "c.py"), "c.py", 600)]
    (tmp_path / "a.bin").write_bytes(b"\x00" * 600)
    (tmp_path / "b.py").write_text("x = 1\n" * 100)
    (tmp_path / "c.py").write_text("y = 2\n" * 100)
    monkeypatch.setattr(context_index, "MAX_INDEX_TOTAL_BYTES", 1_000)
    kept = context_index.within_budget(files, tmp_path)
    said = capsys.readouterr().err
    assert [rel for _, rel, _ in kept] == ["b.py"]
    assert "skipped 1 binary file by" in said and "indexed the first 1 of 2 files" in said and "1 more" in said, said


# --------------------------------------------------------------------------- 7. evaluate.py's ceiling, Ollama's window

def test_evaluate_model_takes_its_ceiling_from_the_model_s_budget(tmp_path, monkeypatch):
    config = importlib.import_module("config")
    evaluation = importlib.import_module("harness.evaluation")
    meter = importlib.import_module("harness.meter")
    monkeypatch.setattr(meter, "HARNESS_MAX_SECONDS", 0.2)  # stands in for 60 s against a slow model
    question = evaluation.load_questions(CODE_DIR / "eval" / "fixture_questions.jsonl")[0]

    def replies(body, n):
        return tool_reply(("read_file", {"path": "shop/models.py"})) if n == 0 else text_reply("price: shop/models.py:10")

    ended = {}
    for local in ("", "0"):
        with FakeServer(replies, delay=0.3) as server:  # each reply takes longer than the harness ceiling
            settings = config.load_settings(env={"COPILOT_MODEL": "openai/slow", "COPILOT_API_BASE": server.base_url,
                                                 "COPILOT_LOCAL": local, "COPILOT_NO_DOTENV": "1"})
            usage = llm.Usage()
            complete = llm.make_complete(settings, usage)
            assert evaluation.model_ceiling(complete) == complete.timeout * 10  # the loop's default steps
            (score,) = evaluation.evaluate_model([question], FIXTURE_REPO, complete,
                                                 lambda: (usage.prompt_tokens, usage.completion_tokens), "model",
                                                 100_000, cache_dir=tmp_path / "cache")
            ended[local] = (score.ended, complete.timeout)
    assert ended[""] == ("answered", 600.0) and ended["0"] == ("answered", 60.0), ended


def test_a_scripted_model_keeps_the_harness_ceiling():
    evaluation = importlib.import_module("harness.evaluation")
    meter = importlib.import_module("harness.meter")
    assert evaluation.model_ceiling(lambda m, t: None) == meter.HARNESS_MAX_SECONDS
    assert evaluation.model_ceiling(NS(timeout=600.0), max_steps=3) == 1800.0


class _OllamaShow:
    """A loopback server answering Ollama's POST /api/show with ``show`` (and recording the bodies)."""

    def __init__(self, show):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        state = self
        self.asked = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                state.asked.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
                data = json.dumps(show).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("show, window", [
    ({"parameters": "temperature 0.7\nnum_ctx 8192", "model_info": {"qwen2.context_length": 32768}}, 8192),
    ({"parameters": "temperature 0.7", "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}}, 32768),
    ({"model_info": {"llama.context_length": "a lot"}}, None),
    ({"parameters": "num_ctx " + "9" * 4301}, None),
])
def test_ollama_s_context_window_is_read_from_api_show(show, window):
    local_server = importlib.import_module("local_server")
    server = _OllamaShow(show)
    try:
        settings = NS(model="ollama_chat/qwen3", api_base=server.base, local=None)
        assert local_server.context_window(settings) == window
        assert server.asked == [("/api/show", {"model": "qwen3"})]
    finally:
        server.close()
