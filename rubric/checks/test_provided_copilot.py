"""Course checks (maintainers): the provided M5 code - config.py, context_selector.py, copilot.py's
command line - works on its own. These pass even on the stubs, so they are not guiding tests.
Run with the maintainer command (python -m pytest --reference rubric/checks).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from harness.offline import offline_env
from harness.paths import CODE_DIR, FIXTURE_REPO, SENTINEL

config = importlib.import_module("config")
cs = importlib.import_module("context_selector")
chunking = importlib.import_module("chunking")
ci = importlib.import_module("context_index")


def clean_env(tmp_path, **extra):
    return offline_env(tmp_path / "cache", **extra)


def copilot_cli(args, env, cwd=CODE_DIR):
    if os.environ.get("LESSON06_IMPL") == "reference":
        args = ["--reference", *args]
    return subprocess.run([sys.executable, str(CODE_DIR / "copilot.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- config.py

def test_groq_wins_when_several_keys_are_set():
    env = {"OPENAI_API_KEY": "o", "GROQ_API_KEY": "g", "ANTHROPIC_API_KEY": "a"}
    assert config.default_model(env) == config.PROVIDER_DEFAULTS[0][1]
    assert config.PROVIDER_DEFAULTS[0][0] == "GROQ_API_KEY"
    assert [k for k, _ in config.PROVIDER_DEFAULTS][:4] == ["GROQ_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"]


def test_copilot_model_beats_the_table_and_the_command_line_beats_both(tmp_path):
    env = {"GROQ_API_KEY": "g", "OPENAI_API_KEY": "o", "COPILOT_MODEL": "openai/gpt-4.1-mini"}
    assert config.load_settings(env=env).model == "openai/gpt-4.1-mini"
    assert config.load_settings(env=env).api_key == "o"
    assert config.load_settings(model="groq/x", env=env).model == "groq/x"


def test_real_environment_beats_code_env_and_the_cwd_env_is_never_read(tmp_path, monkeypatch):
    code_env, cwd = tmp_path / "code.env", tmp_path / "cloned_repo"
    code_env.write_text("GROQ_API_KEY=from-code-env\nCOPILOT_MODEL=groq/a\n")
    cwd.mkdir()
    (cwd / ".env").write_text("COPILOT_API_BASE=http://attacker.invalid/v1\nCOPILOT_MODEL=openai/evil\nEMBEDDING_MODEL=e\n")
    monkeypatch.setattr(config, "ENV_FILE", code_env)
    monkeypatch.chdir(cwd)  # run from inside a repository that ships its own .env
    merged = config.read_environment(environ={"COPILOT_MODEL": "groq/real"})
    assert merged["GROQ_API_KEY"] == "from-code-env"
    assert merged["COPILOT_MODEL"] == "groq/real"
    assert "COPILOT_API_BASE" not in merged and "EMBEDDING_MODEL" not in merged


def test_an_explicit_env_file_replaces_code_env_and_nothing_is_exported(tmp_path, monkeypatch):
    code_env, chosen = tmp_path / "code.env", tmp_path / "chosen.env"
    code_env.write_text("GROQ_API_KEY=from-code-env\n")
    chosen.write_text("OPENAI_API_KEY=from-chosen\nCOPILOT_MODEL=openai/gpt-4.1-mini\n")
    monkeypatch.setattr(config, "ENV_FILE", code_env)
    for name in ("GROQ_API_KEY", "OPENAI_API_KEY", "COPILOT_MODEL", "COPILOT_NO_DOTENV"):
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    settings = config.load_settings(env_file=chosen)
    assert settings.model == "openai/gpt-4.1-mini" and settings.api_key == "from-chosen"
    assert "GROQ_API_KEY" not in config.read_environment(env_file=chosen)
    assert config.load_settings().api_key == "from-code-env"
    assert dict(os.environ) == before, "load_settings exported .env values into os.environ"
    with pytest.raises(config.ConfigError, match="does not exist"):
        config.read_environment(env_file=tmp_path / "missing.env")


def test_other_providers_get_their_conventional_key_passed_explicitly():
    env = {"COPILOT_MODEL": "mistral/mistral-small", "MISTRAL_API_KEY": "m"}
    assert config.load_settings(env=env).api_key == "m"
    assert config.load_settings(env={"COPILOT_MODEL": "ollama_chat/llama3.1"}).api_key is None


def test_no_provider_is_a_config_error_that_names_the_env_lines():
    with pytest.raises(config.ConfigError) as info:
        config.default_model({})
    assert "GROQ_API_KEY=" in str(info.value) and "code/.env" in str(info.value)


def test_local_server_needs_a_model_name_and_gets_a_placeholder_key():
    with pytest.raises(config.ConfigError, match="COPILOT_MODEL"):
        config.load_settings(env={"COPILOT_API_BASE": "http://localhost:8000/v1"})
    local = config.load_settings(env={"COPILOT_API_BASE": "http://localhost:8000/v1", "COPILOT_MODEL": "openai/m"})
    assert local.api_key == config.PLACEHOLDER_API_KEY and local.api_base.endswith("/v1")
    with pytest.raises(config.ConfigError, match="OPENAI_API_KEY"):
        config.load_settings(env={"COPILOT_MODEL": "openai/gpt-4.1-mini", "GROQ_API_KEY": "g"})


def test_importing_config_sets_the_offline_price_map():
    assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"


def test_cache_dir_is_overridable(tmp_path):
    assert config.default_cache_dir({"COPILOT_CACHE_DIR": str(tmp_path)}) == tmp_path


# ---------------------------------------------------------------- copilot.py command line

def test_no_provider_exits_2_with_one_line(tmp_path):
    proc = copilot_cli(["why does config default to Groq?"], clean_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "GROQ_API_KEY=" in lines[0] and "Traceback" not in proc.stderr


def test_bad_repo_exits_2_with_one_line(tmp_path):
    proc = copilot_cli(["--repo", str(tmp_path / "nope"), "--json", "q"], clean_env(tmp_path, GROQ_API_KEY="x"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert json.loads(proc.stdout)["exit_code"] == 2


def test_context_only_needs_no_key_and_shows_config_first(tmp_path):
    proc = copilot_cli(["--context-only", "why does config default to Groq?"], clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("[Snippet: config.py lines "), proc.stdout[:300]
    assert SENTINEL not in proc.stdout


def test_context_only_json_never_imports_litellm(tmp_path):
    code = ("import sys, json, copilot; rc = copilot.main(['--repo', sys.argv[1], '--context-only', '--json', "
            "'order_total subtotal']); print('LITELLM', 'litellm' in sys.modules, file=sys.stderr); sys.exit(rc)")
    env = clean_env(tmp_path, PYTHONPATH=str(CODE_DIR))
    proc = subprocess.run([sys.executable, "-c", code, str(FIXTURE_REPO)], cwd=CODE_DIR, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "LITELLM False" in proc.stderr
    paths = [s["path"] for s in json.loads(proc.stdout)["context"]]
    assert "shop/service.py" in paths and not any(".env" in p for p in paths)


def test_lines_seen_and_format_trace_read_the_transcript():
    """The provided halves around S1: what the run showed (lines_seen) and how steps print (format_trace).
    stretch.trace_steps itself is the learner's (S1) and is tested in code/tests/test_s1_trace.py."""
    citations = importlib.import_module("citations")
    report = importlib.import_module("report")
    stretch = importlib.import_module("stretch")
    messages = [
        {"role": "system", "content": "s"}, {"role": "user", "content": "q"},
        {"role": "assistant", "content": "Looking for totals.", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "search_code", "arguments": '{"query": "total"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "shop/service.py:12: def order_total("},
        {"role": "assistant", "content": "It is in shop/service.py:12."},
    ]
    assert citations.lines_seen(messages, []) == {"shop/service.py": [(12, 12)]}
    steps = [stretch.Step(1, "Looking for totals.", [
                 stretch.Action("search_code", '{"query": "total"}', "shop/service.py:12: def order_total("),
                 stretch.Action("read_file", '{"path": "x.py"}', None)]),
             stretch.Step(2, "", [], answer="It is in shop/service.py:12.")]
    assert report.format_trace(steps).splitlines() == [
        "Step 1", "  Thought: Looking for totals.",
        '  Action: search_code({"query": "total"})', "  Observation: shop/service.py:12: def order_total(",
        '  Action: read_file({"path": "x.py"})', "  Observation: (none: no tool message answered this call)",
        "Step 2", "  Answer: (printed below)"]


# ---------------------------------------------------------------- context_selector.py

def test_identifiers_split_into_words():
    assert cs.identifier_terms("SecureCookieSessionInterface")[:5] == (
        "securecookiesessioninterface", "secure", "cookie", "session", "interface")
    assert cs.identifier_terms("order_total") == ("order_total", "order", "total")
    assert "cookie" in cs.question_terms("Where are the session cookies set?")
    assert "why" not in cs.question_terms("why does config default to Groq?")


def test_plurals_fold_once_and_only_plurals():
    assert [cs.identifier_terms(w) for w in ("cookies", "queries", "classes", "caches")] == [
        ("cookie",), ("query",), ("class",), ("cache",)]
    assert [cs.identifier_terms(w) for w in ("this", "status", "class", "analysis")] == [
        ("this",), ("status",), ("class",), ("analysis",)]
    assert cs.question_terms("session cookies") == ["session", "cookie"]  # a plural counts once


@pytest.mark.parametrize("rel,role", [
    ("src/flask/sessions.py", "source"), ("tests/test_basic.py", "test"), ("pkg/test_utils.py", "test"),
    ("conftest.py", "test"), ("docs/config.rst", "doc"), ("README.md", "doc"), ("HISTORY.md", "changelog"),
    ("CHANGES.rst", "changelog"), ("src/history.py", "source"),
    ("PKG-INFO", "meta"), ("src/flask.egg-info/SOURCES.txt", "meta"), (".github/workflows/tests.yml", "meta"),
    (".github/CONTRIBUTING.md", "meta"), ("pyproject.toml", "meta"), ("tox.ini", "meta"), (".idea/workspace.xml", "meta"),
    (".gitignore", "meta"), ("json/tests/draft7/type.json", "meta"), ("docs/conf.py", "meta"), ("src/config.py", "source"),
    (".claude/worktrees/a/README.md", "meta"), (".devcontainer/setup.py", "meta"), ("pkg/_private/core.py", "source"),
    ("setup.py", "meta"), ("pkg/setup.py", "source"), ("conf.py", "meta"), ("docs/source/conf.py", "meta"),
    ("pkg/conf.py", "source"), ("LICENSE", "meta"), ("COPYING.LESSER", "meta"), ("AUTHORS.rst", "meta"),
    ("CONTRIBUTING.md", "doc"),
    ("pkg/license.py", "source"), ("humanfriendly/tests.py", "test"), ("portalocker_tests/locks.py", "test"),
    ("tests_unit/helpers.py", "test"), ("src/latest/x.py", "source"), ("pytest_mock/plugin.py", "source"),
])
def test_file_roles_come_from_the_path(rel, role):
    assert cs.file_role(rel) == role


def test_source_outranks_a_test_that_matches_as_well(tmp_path):
    body = "def refresh_token_cache():\n    return rotate_refresh_token()\n"
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "auth.py").write_text(body)
    (tmp_path / "auth.py").write_text(body)
    snippets = cs.select_context("how is the refresh token rotated?", tmp_path, k=2, cache_dir=tmp_path / "cache")
    assert [s.path for s in snippets][:2] == ["auth.py", "tests/auth.py"]
    asked = cs.select_context("which test covers rotating the refresh token?", tmp_path, k=2, cache_dir=tmp_path / "cache")
    assert [s.path for s in asked][:2] == ["tests/auth.py", "auth.py"]  # a question about tests wants the test


def test_a_question_about_tests_weighs_words_by_how_few_files_hold_them(tmp_path, monkeypatch):
    # "parse" fills every test of test_parse.py (common among chunks, rare among files); "quote"
    # is in one test there and all over test_quote.py. Asked which test covers parse and quoting,
    # the selector should name the parser's tests: counted by chunks, "parse" weighs too little.
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "csvish.py").write_text("def parse(text):\n    return text.split(',')\n\n\n"
                                    "def quote(value):\n    return '\"' + value + '\"'\n")
    cases = [("one", "a", ["a"]), ("two", "a,b", ["a", "b"]), ("empty", "", [""]), ("spaces", " a ", [" a "]),
             ("three", "a,b,c", ["a", "b", "c"]), ("trailing", "a,", ["a", ""])]
    (repo / "tests" / "test_parse.py").write_text("from csvish import parse\n\n\n" + "".join(
        f"def test_parse_{name}():\n    assert parse({text!r}) == {fields!r}\n\n\n" for name, text, fields in cases)
        + "def test_parse_quoted_field():\n    assert parse('\"a\"') == ['\"a\"']\n")
    (repo / "tests" / "test_quote.py").write_text(
        "from csvish import quote\n\n\ndef test_quote_wraps_a_field():\n    assert quote('a') == '\"a\"'\n\n\n"
        "def test_quote_a_quoted_field():\n    assert quote('\"a\"') == '\"\"a\"\"'\n")
    question = "Which test checks how parse treats a quoted field?"
    assert cs.question_intent(question) == "test"
    ranked = [s.path for s in cs.select_context(question, repo, k=2, cache_dir=tmp_path / "cache")]
    assert ranked[0] == "tests/test_parse.py", ranked
    monkeypatch.setattr(cs, "TEST_FILE_IDF", False)  # rarity over chunks: the quoting tests win
    ranked = [s.path for s in cs.select_context(question, repo, k=2, cache_dir=tmp_path / "cache")]
    assert ranked[0] == "tests/test_quote.py", ranked


def test_packaging_files_give_way_to_the_readme_they_repeat(tmp_path):
    readme = "Streaming uploads\n=================\n\nSend a large body in pieces with chunked transfer encoding.\n"
    (tmp_path / "README.rst").write_text(readme)
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: demo\n\n" + readme)
    snippets = cs.select_context("how do I stream a large upload in pieces?", tmp_path, k=2, cache_dir=tmp_path / "cache")
    assert [s.path for s in snippets][:2] == ["README.rst", "PKG-INFO"]


def test_contractions_are_not_question_terms():
    assert cs.question_terms("Why doesn't the pool close, and won't it retry?") == ["pool", "clos", "retry"]


def test_a_chunk_carries_a_share_of_its_files_evidence(tmp_path):
    (tmp_path / "pool.py").write_text("def open_pool():\n    return connection_pool()\n\n\ndef unrelated():\n    return 1\n")
    (tmp_path / "other.py").write_text("def unrelated():\n    return 2\n")
    index = cs.load_index(tmp_path, tmp_path / "cache")
    scores = cs.score_chunks(index, cs.question_terms("connection pool"))
    by_place = {(index.chunk_path(c), int(index.chunk_start[c])): float(scores[c]) for c in range(index.n_chunks)}
    assert by_place[("pool.py", 5)] > 0 == by_place[("other.py", 1)]  # same words, but pool.py is about pools
    assert by_place[("pool.py", 1)] > by_place[("pool.py", 5)]


@pytest.mark.parametrize("question,intent", [
    ("Where is slugify tested?", "test"),
    ("Which tests cover the paginator?", "test"),
    ("How does the test_client fixture work?", "code"),  # an identifier, not the word
    ("How do I deploy with gunicorn?", "howto"),  # usage: docs count as much as code
    ("How does the session cookie get signed?", "code"),
    # asked without the word "test", still about a test
    ("Where is it checked that a wheel name with a bad build tag is rejected?", "test"),
    ("Which check proves the decorator does not deadlock?", "test"),
    # what the project offers its user: the docs say
    ("I keep my config in YAML. Can I still validate it?", "howto"),
    ("Is there a way to print the parse tree?", "howto"),
    ("What's the recommended buffer size for a channel?", "howto"),
    ("How is the next URL checked after login?", "code"),
    # the user's own tests are not the project's: the docs usually answer
    ("How do I check in my unit tests which entries my code logged?", "howto"),
    ("My tests that use fake objects fail with a registration error", "code"),
    ("Where are the tests for the retry decorator?", "test"),
    # a how-to question that asks where the code does it wants the code
    ("How do I retry a failed upload, and where is that implemented?", "code"),
    ("Is there a way to run as root? Where does the library add sudo?", "code"),
    ("How do I retry a failed upload? Where is that explained?", "howto"),
])
def test_question_intent_comes_from_the_words(question, intent):
    assert cs.question_intent(question) == intent


def test_python_is_chunked_by_definition_even_when_it_does_not_parse():
    source = "import os\n\n\n@decorator\ndef first():\n    return 1\n\n\nclass Second:\n    x = 1\n"
    assert chunking.chunk_spans("m.py", source) == [(1, 3), (4, 6), (7, 8), (9, 10)]
    broken = "def broken(:\n    '''a docstring\ndef not_a_definition():\n'''\n" + "x = 1\n" * 200
    spans = chunking.chunk_spans("b.py", broken)
    assert spans[0] == (1, 4) and spans[1] == (5, 4 + chunking.WINDOW_LINES) and spans[-1][1] == 204


def test_big_class_is_chunked_by_method():
    methods = "".join(f"    def m{i}(self):\n" + "        pass\n" * 20 for i in range(6))
    spans = chunking.chunk_spans("c.py", "class Big:\n    '''doc'''\n" + methods)
    assert (1, 2) in spans and (3, 23) in spans and len(spans) == 7


def test_context_never_contains_a_secret_or_follows_a_symlink_out(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "settings.py").write_text("API_KEY_NAME = 'SHOP_API_KEY'\n")
    (repo / ".env").write_text(f"SHOP_API_KEY={SENTINEL}\n")
    (repo / "id_rsa").write_text(f"{SENTINEL} SHOP_API_KEY\n")
    outside = tmp_path / "outside.py"
    outside.write_text(f"SHOP_API_KEY = '{SENTINEL}'\n")
    try:
        os.symlink(outside, repo / "link.py")
    except OSError:
        pass
    snippets = cs.select_context("SHOP_API_KEY", repo, cache_dir=tmp_path / "cache")
    assert [s.path for s in snippets] == ["pkg/settings.py"]
    assert not any(SENTINEL in s.text for s in snippets)
    assert not any(SENTINEL.encode() in p.read_bytes() for p in (tmp_path / "cache").iterdir())


def test_binary_and_generated_files_are_skipped(tmp_path):
    (tmp_path / "data.bin").write_bytes(b"\x00\x01 order total")
    (tmp_path / "messages.po").write_text('msgid "order total"\n')
    (tmp_path / "shop.py").write_text("def order_total():\n    pass\n")
    assert [s.path for s in cs.select_context("order total", tmp_path, cache_dir=tmp_path.parent / "c1")] == ["shop.py"]


def test_the_second_run_uses_the_cache_and_a_change_rebuilds(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("def alpha():\n    return 'order'\n")
    cache = tmp_path / "cache"
    builds = []
    real = ci.build_index
    monkeypatch.setattr(ci, "build_index", lambda *a: builds.append(1) or real(*a))
    cs.select_context("alpha", repo, cache_dir=cache)
    cs.select_context("alpha", repo, cache_dir=cache)
    assert len(builds) == 1
    os.utime(repo / "a.py", ns=(1, 1))  # touched, same content: still cached
    cs.select_context("alpha", repo, cache_dir=cache)
    assert len(builds) == 1
    (repo / "b.py").write_text("def beta():\n    pass\n")
    assert cs.select_context("beta", repo, cache_dir=cache)[0].path == "b.py"
    assert len(builds) == 2


def test_cache_inside_the_repository_is_refused(tmp_path):
    (tmp_path / "a.py").write_text("def alpha():\n    pass\n")
    cs.select_context("alpha", tmp_path, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_dense_vectors_are_fused_and_cached(tmp_path):
    from harness.fake_server import bag_of_words_vector

    calls = []

    def embed(texts):
        calls.append(len(texts))
        return [bag_of_words_vector(t) for t in texts]

    embed.name = "test-bag-of-words"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "notify.py").write_text("def send_signal(receivers):\n    '''tell every listener'''\n")
    (repo / "other.py").write_text("def unrelated():\n    return 42\n")
    first = cs.select_context("listener notifications", repo, embed=embed, cache_dir=tmp_path / "cache")
    assert first[0].path == "notify.py" and sum(calls) == 3  # two chunks and the question
    cs.select_context("listener notifications", repo, embed=embed, cache_dir=tmp_path / "cache")
    assert sum(calls) == 3  # nothing embedded the second time


def test_litellm_embedder_through_the_fake_server():
    from harness.fake_server import FakeServer

    batch = importlib.import_module("embeddings").EMBED_BATCH
    with FakeServer() as server:
        embed = cs.LiteLLMEmbedder("openai/fake-embed", server.base_url, "x")
        vectors = embed([f"text {i}" for i in range(batch + 3)])
    assert len(vectors) == batch + 3
    assert [len(b["input"]) for b in server.embedding_requests] == [batch, 3]
