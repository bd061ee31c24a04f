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

import chunking
import citations
import cli
import config
import litellm_guard
import llm
import repo_files
import tools

CODE_DIR = Path(llm.__file__).resolve().parent

pytestmark = pytest.mark.skipif(
    os.environ.get("LESSON06_IMPL") != "reference", reason="course checks run with --reference"
)


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
import litellm_guard
litellm_guard.import_litellm()
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
    # A loopback server counts as a model on this machine (10x the time); the deadline is the point here.
    monkeypatch.setattr(llm.local_server, "LOCAL_TIMEOUT_FACTOR", 1)
    with RawServer(chat_body(content_json='"' + "x" * 200 + '"'), drip=0.05) as server:  # 10+ s in all
        settings = _settings(server.base_url)
        llm.import_litellm()  # its first import takes seconds, and is not the call being timed
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
    assert isinstance(caught.value, litellm_guard.DeadlineExceeded) and took < 3, (caught.value, took)


def test_within_deadline_returns_and_raises_like_the_call():
    assert litellm_guard.within_deadline(lambda a, b=0: a + b, 5, 1, b=2) == 3
    with pytest.raises(KeyError):
        litellm_guard.within_deadline({}.__getitem__, 5, "missing")




# --------------------------------------------------------------------------- 3. recursion and size in content

def test_a_thousand_nested_classes_are_chunked_without_recursion():
    text = "".join(" " * i + f"class C{i}:\n" for i in range(1_000)) + " " * 1_000 + "x = 1\n"
    started = time.perf_counter()
    spans = chunking.chunk_spans("deep.py", text)
    assert time.perf_counter() - started < 1.0
    assert spans[0][0] == 1 and spans[-1][1] == 1_001, spans[-3:]
    covered = set()
    for lo, hi in spans:
        covered.update(range(lo, hi + 1))
    assert covered == set(range(1, 1_002)), "every line is in some chunk"


def test_a_4301_digit_line_number_is_an_ungrounded_citation_not_a_crash(tmp_path):
    (tmp_path / "app.py").write_text("x = 1\n")
    with tools.recording():
        tools.read_file(tmp_path, "app.py")
        found = citations.check_citations("see app.py:" + "9" * 4_301 + " and app.py:1", tmp_path, [], [])
    assert [c.grounded for c in found] == [False, True], found
    assert "outside the file" in found[0].reason


def test_many_citations_of_one_big_file_cost_one_read_and_are_capped(tmp_path, monkeypatch):
    (tmp_path / "app.py").write_text("x = 1\n" * 200_000)
    opened = []
    real = tools.open_in_root
    monkeypatch.setattr(tools, "open_in_root", lambda *a: opened.append(a) or real(*a))
    answer = " ".join(f"app.py:{i}" for i in range(1, 1_501))
    with tools.recording():
        found = citations.check_citations(answer, tmp_path, [], [])
    assert len(found) == 1_500 and len(opened) == 1, len(opened)
    assert sum(c.reason.startswith("not checked") for c in found) == 1_500 - citations.MAX_CITATIONS


# --------------------------------------------------------------------------- 4. budgets in time

def test_search_stops_at_its_match_budget_with_a_note(tmp_path):
    for i in range(3):
        (tmp_path / f"f{i}.py").write_text("x = 1\n" * (tools.MAX_SEARCH_MATCHES))
    started = time.perf_counter()
    result = tools.search_code(tmp_path, "x")
    assert time.perf_counter() - started < 2
    assert f"search stopped after {tools.MAX_SEARCH_MATCHES:,} matching lines" in result, result[-300:]
    assert f"of more than {tools.MAX_SEARCH_MATCHES:,} matches" in result


@pytest.mark.parametrize("needle", ["x", "end", "\u00e9", "a b"])
def test_matching_lines_numbers_lines_as_split_lines_does(needle):
    data = "a b\nXx b\r\nno\n\nend x\u00e9 END\n\xe9\nlast x".encode() + b"\xff x\n"
    by_line = [(n, line) for n, line in enumerate(tools.split_lines(data.decode("utf-8", "replace")), 1)
               if needle in line.lower()]
    assert list(repo_files.matching_lines(data, needle)) == by_line


def test_search_stops_at_its_time_budget_with_a_note(tmp_path, monkeypatch):
    for i in range(3):
        (tmp_path / f"f{i}.py").write_text("y = 1\n")
    monkeypatch.setattr(tools, "MAX_SEARCH_SECONDS", 0.0)
    result = tools.search_code(tmp_path, "\u00fc")
    assert "search stopped after 0 s" in result, result


def test_the_index_has_a_byte_and_a_chunk_budget_with_a_note(tmp_path, monkeypatch, capsys):
    import context_index
    import context_selector

    for i in range(6):
        (tmp_path / f"m{i}.py").write_text("".join(f"def f{j}():\n    return {j}\n\n" for j in range(50)))
    monkeypatch.setattr(context_index, "MAX_INDEX_TOTAL_BYTES", 4 * (tmp_path / "m0.py").stat().st_size)
    monkeypatch.setattr(context_index, "MAX_INDEX_CHUNKS", 120)
    index = context_selector.load_index(tmp_path, cache_dir=tmp_path / "cache")
    said = capsys.readouterr().err
    assert "indexed the first 4 of 6 files" in said and "budget" in said, said
    assert "indexed the first 3 of 4 files" in said and 120 <= index.n_chunks < 200, (said, index.n_chunks)


def test_a_large_embedding_job_is_refused_before_it_starts(tmp_path):
    import context_selector
    import embeddings

    for i in range(4):
        (tmp_path / f"m{i}.py").write_text("".join(f"def f{j}():\n    return {j}\n\n" for j in range(20)))
    calls = []

    def embed(texts):
        calls.append(len(texts))
        return [[1.0, 0.0]] * len(texts)

    embed.max_chunks = 10
    index = context_selector.load_index(tmp_path, cache_dir=tmp_path / "cache")
    with pytest.raises(embeddings.EmbeddingFailed, match="EMBEDDING_MAX_CHUNKS="):
        embeddings.dense_scores(index, "f1", embed, tmp_path / "cache")
    assert calls == [1], "only the question was embedded"
    assert config.load_settings(env={"COPILOT_MODEL": "m", "COPILOT_API_BASE": "http://x/v1", "EMBEDDING_MAX_CHUNKS": "9000",
                                     "COPILOT_NO_DOTENV": "1"}).embedding_max_chunks == 9000


# --------------------------------------------------------------------------- 5. names and records

@pytest.mark.parametrize("name", ["id_rsa.bak.old", "id_rsa~.bak", ".env~.orig", "id_rsa copy", "id_rsa (1)",
                                  "id_rsa copy 2", "id_ed25519_work", "id_ecdsa-github", "#.env.save#", ".ENV.Old"])
def test_decorated_secret_names_are_hidden(name):
    assert repo_files.excluded_name(name), name


@pytest.mark.parametrize("name", ["id_rsa.pub", "id_rsa.pub.bak", "app.py", "backup.py", "latest.py", "envoy.py", ".bak"])
def test_ordinary_and_public_names_stay_visible(name):
    assert not repo_files.excluded_name(name), name


def _make(folder: Path, raw: bytes, text: str) -> bool:
    try:
        with open(os.path.join(os.fsencode(folder), raw), "w") as fh:
            fh.write(text)
        return True
    except (OSError, ValueError):
        return False


@pytest.mark.parametrize("first,second", [(b"a\x01.py", b"a\\x01.py"), (b"b\xff.py", "b\ufffd.py".encode())])
def test_lines_seen_are_keyed_by_the_raw_name_not_the_printable_one(tmp_path, first, second):
    if not (_make(tmp_path, first, "one\n") and _make(tmp_path, second, "two\n")):
        pytest.skip("this filesystem cannot hold both names")
    read, other = os.fsdecode(first), os.fsdecode(second)
    assert tools.printable(read) == tools.printable(other), "the two names print alike: the case this is about"
    with tools.recording() as shown:
        tools.read_file(tmp_path, read)
        seen = citations.lines_seen([], [], shown)
        target = citations.check_span(other, 1, 1, tmp_path, seen)
    assert not target.grounded and "never read" in target.reason, (shown, target)


def test_json_output_escapes_c1_controls_bidi_overrides_and_surrogates():
    text = cli.json_text({"answer": "a\x9b31mb \u202eevil\u202c \u2066x\u2069 \ud800"})
    assert all(ch not in text for ch in "\x9b\u202e\u202c\u2066\u2069\ud800"), ascii(text)
    assert json.loads(text)["answer"] == "a\x9b31mb \u202eevil\u202c \u2066x\u2069 \ud800"
    text.encode("utf-8")


def test_the_edit_confirmation_shows_bidi_overrides_as_escapes(tmp_path, capsys, monkeypatch):
    from stretch_provided import Edit, ask_on_terminal

    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-ok = 1\n+ok = 1  # \u202e;1 = ko\n"
    ask_on_terminal(Edit("x.py", tmp_path / "x.py", "", "", diff))
    err = capsys.readouterr().err
    assert "\u202e" not in err and "\\u202e" in err, ascii(err)


@pytest.mark.parametrize("path,test", [("app/tests.py", True), ("test/x.py", True), ("testing/a.py", True),
                                       ("pkg/a_test.go", True), ("web/a.test.js", True), ("src/a.spec.ts", True),
                                       ("pytest.ini", True), ("app.py", False), ("latest.py", False),
                                       ("contest.py", False), ("src/protest.js", False)])
def test_is_test_path_knows_the_common_layouts(path, test):
    from stretch_provided import is_test_path

    assert is_test_path(tuple(path.split("/"))) is test


# --------------------------------------------------------------------------- 6. --check and error lines

def test_a_servers_words_reach_the_terminal_escaped_and_urls_lose_their_secrets():
    exc = type("BadRequestError", (Exception,), {"status_code": 400})(
        "bad \x1b]52;c;SGVsbG8=\x07 request \x1b[2J at https://user:sk-SECRET@host.example/v1?api_key=sk-Q&x=1")
    line = llm.describe_error(exc, _settings("https://user:sk-SECRET@host.example/v1?key=sk-Q"))
    assert "\x1b" not in line and "\x07" not in line and "\\x1b" in line, ascii(line)
    assert "sk-SECRET" not in line and "sk-Q" not in line and "host.example/v1" in line, line
    unreachable = type("APIConnectionError", (Exception,), {})("Connection refused")
    line = llm.describe_error(unreachable, _settings("https://user:sk-SECRET@host.example/v1"))
    assert "could not reach" in line and "sk-SECRET" not in line and "https://host.example/v1" in line, line


def test_check_prints_no_url_secret_and_no_raw_control_characters(tmp_path):
    import io

    import preflight

    out = io.StringIO()
    preflight.check(env={"COPILOT_MODEL": "openai/fake", "COPILOT_API_KEY": "sk-0123456789abcdef",
                         "COPILOT_API_BASE": "http://user:sk-URLKEY@127.0.0.1:9/v1?token=sk-T\x1b[2J",
                         "COPILOT_NO_DOTENV": "1"}, out=out, sleep=lambda s: None)
    printed = out.getvalue()
    assert "sk-URLKEY" not in printed and "sk-T" not in printed and "\x1b" not in printed, printed
    assert "0123456789" not in printed and "ef, 19 characters" in printed, printed


@pytest.mark.parametrize("key", ["k" * 8, "0123456789abcdef", "sk-" + "x" * 45])
def test_mask_shows_at_most_four_characters_and_an_eighth_of_a_key(key):
    import preflight

    shown = preflight.mask(key).split(",")[0].strip(".*")
    assert len(shown) <= min(4, len(key) // 8) and (not shown or key.endswith(shown)), preflight.mask(key)


# --------------------------------------------------------------------------- 7. a traverse-only folder above the repository

def _as_another_user(work):
    """work() in a forked child that cannot read the locked folder: nobody when we are root."""
    if not hasattr(os, "fork") or not hasattr(os, "setuid"):
        pytest.skip("needs fork and setuid (POSIX) to build a folder this process cannot read")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody if root, report, and leave without pytest's cleanup
        code = 0
        try:
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            result = work()
        except BaseException as exc:  # reported to the parent, which fails the test with it
            result, code = {"error": repr(exc)}, 1
        os.write(write_end, json.dumps(result).encode())
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data or b"{}")


@pytest.mark.parametrize("passing", ["O_PATH", "read"])
def test_citations_and_edits_work_below_a_traverse_only_folder(passing, monkeypatch):
    """passing: how folders on the way down are opened; "read" is what macOS does (no O_PATH), and
    the edit still works because the edit tool opens from the repository root (tools.rooted)."""
    import shutil
    import tempfile

    import stretch
    from stretch_provided import EditPolicy

    if passing == "O_PATH" and not hasattr(os, "O_PATH"):
        pytest.skip("no O_PATH on this OS (the 'read' case covers it)")
    if passing == "read":
        monkeypatch.setattr(repo_files, "_PASS_FLAGS", repo_files._READ_FLAGS)
    locked = Path(tempfile.mkdtemp(prefix="hostile3-locked-"))
    try:
        repo = locked / "repo"
        repo.mkdir()
        (repo / "app.py").write_text("total = 1\n")
        os.chmod(repo, 0o777)
        os.chmod(repo / "app.py", 0o666)
        os.chmod(locked, 0o711 if os.getuid() == 0 else 0o311)  # search, no read (for whoever runs below)

        def work():
            listable = True
            try:
                os.listdir(locked)
            except PermissionError:
                listable = False
            with tools.recording():
                tools.read_file(repo, "app.py")
                cited = citations.check_citations("app.py:1", repo, [], [])
            said = stretch.edit_file_tool({"path": "app.py", "old_string": "total = 1", "new_string": "total = 2"},
                                          repo, EditPolicy(apply=True, confirm=lambda edit: True))
            try:
                repo_files.open_resolved(repo / "missing.py")
                error = ""
            except tools.ToolError as exc:
                error = str(exc)
            return {"listable": listable, "grounded": cited[0].grounded, "reason": cited[0].reason,
                    "said": said, "text": (repo / "app.py").read_text(), "error": error}

        result = _as_another_user(work)
    finally:
        os.chmod(locked, 0o700)
        shutil.rmtree(locked, ignore_errors=True)
    assert "text" in result, result
    assert result["listable"] is False, ("the case did not build: the folder was readable", result)
    assert result["grounded"] and result["text"] == "total = 2\n", result
    assert result["error"] and str(locked) not in result["error"] and "missing.py" in result["error"], result


def test_a_hostile_answer_prints_escaped_in_json_and_plain_output(tmp_path, monkeypatch, capsys):
    import copilot
    from harness.fake_server import FakeServer, text_reply
    from harness.offline import PROVIDER_VARIABLES
    from harness.paths import FIXTURE_REPO

    hostile = "done \x9b31m \u202eevil\u202c \ud800 see shop/service.py:9"
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with FakeServer([text_reply(hostile)] * 2) as server:
        for name, value in {"COPILOT_MODEL": "openai/fake", "COPILOT_API_BASE": server.base_url,
                            "COPILOT_NO_DOTENV": "1", "COPILOT_CACHE_DIR": str(tmp_path / "cache")}.items():
            monkeypatch.setenv(name, value)
        codes = [copilot.main(["--repo", str(FIXTURE_REPO), "--no-context", *flags, "q"]) for flags in (["--json"], [])]
    printed = capsys.readouterr().out
    document, plain = printed.split("\n", 1)
    assert document.startswith("{"), (codes, printed[:600])
    assert codes[0] == codes[1] in (0, 1), codes
    for printed in (document, plain):
        assert not any(ch in printed for ch in "\x9b\u202e\u202c\ud800"), ascii(printed)
        printed.encode("utf-8")
    assert json.loads(document)["answer"] == "done \x9b31m \u202eevil\u202c \ufffd see shop/service.py:9"
