"""Course checks (maintainers): the optional dense path of context_selector.py (embeddings.py).

A failing embedding server falls back to lexical context; long jobs report progress and save each
batch, so an interrupted job resumes; the vector cache is keyed by what determines a vector and
kept per repository. Fake embed functions, or a loopback fake server; no network.
"""

from __future__ import annotations

import importlib
import socket
import time

import numpy as np
import pytest

from harness.fake_server import FakeServer, bag_of_words_vector

cs = importlib.import_module("context_selector")
emb = importlib.import_module("embeddings")
ci = importlib.import_module("context_index")


class FakeEmbedder:
    """Records every text it embeds; can fail on a chosen call; can report a model name."""

    def __init__(self, name="fake-embed", fail_on_call=None, error=RuntimeError("server said 503"), model=None):
        self.name, self.fail_on_call, self.error, self.reported_model = name, fail_on_call, error, None
        self.model = model
        self.documents, self.questions, self.calls = [], [], 0

    def _embed(self, texts):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise self.error
        self.reported_model = self.model
        return [bag_of_words_vector(t) for t in texts]

    def __call__(self, texts):
        vectors = self._embed(texts)
        self.documents += texts
        return vectors

    def query(self, texts):
        vectors = self._embed(texts)
        self.questions += texts
        return vectors


def make_repo(root, n_functions=0, files=None):
    root.mkdir(parents=True, exist_ok=True)
    (root / "notify.py").write_text("def send_signal(receivers):\n    '''tell every listener'''\n")
    (root / "other.py").write_text("def unrelated():\n    return 42\n")
    if n_functions:
        body = "".join(f"def handler_{i}(event):\n    return event.payload_{i}\n\n\n" for i in range(n_functions))
        (root / "many.py").write_text(body)
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    return root


def lexical(question, repo, tmp_path):
    return cs.select_context(question, repo, cache_dir=tmp_path / "lexical-cache")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when this returns: connecting is refused


# ---------------------------------------------------------------- falling back

def test_an_unreachable_embedding_server_falls_back_to_lexical_context(tmp_path, capsys):
    repo = make_repo(tmp_path / "repo")
    embed = cs.LiteLLMEmbedder("openai/fake-embed", f"http://127.0.0.1:{closed_port()}/v1", "x")
    started = time.perf_counter()
    got = cs.select_context("listener signal", repo, embed=embed, cache_dir=tmp_path / "cache")
    assert time.perf_counter() - started < emb.QUERY_TIMEOUT + 10
    assert got == lexical("listener signal", repo, tmp_path)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(warnings) == 1 and "using lexical context only" in warnings[0], warnings


@pytest.mark.parametrize("error", [RuntimeError("boom"), TimeoutError(), ValueError("x" * 10_000 + "\n\x1b[2J")])
def test_any_embedder_error_is_one_short_warning_and_the_run_goes_on(tmp_path, capsys, error):
    repo = make_repo(tmp_path / "repo")
    got = cs.select_context("listener signal", repo, embed=FakeEmbedder(fail_on_call=1, error=error),
                            cache_dir=tmp_path / "cache")
    assert got == lexical("listener signal", repo, tmp_path)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400 and "\x1b" not in err, err


def test_a_wrong_number_of_vectors_is_a_failure_not_a_crash(tmp_path, capsys):
    repo = make_repo(tmp_path / "repo")

    def short(texts):
        return [[1.0, 0.0]] * (len(texts) - 1)

    assert cs.select_context("listener", repo, embed=short, cache_dir=tmp_path / "cache")
    assert "using lexical context only" in capsys.readouterr().err


def test_context_only_with_a_dead_embedding_server_still_prints_context(tmp_path):
    import subprocess
    import sys

    from harness.offline import offline_env
    from harness.paths import CODE_DIR, FIXTURE_REPO

    def context_only(**settings):
        return subprocess.run([sys.executable, str(CODE_DIR / "copilot.py"), "--context-only", "--repo",
                               str(FIXTURE_REPO), "Where is the order total computed?"], cwd=CODE_DIR,
                              env=offline_env(tmp_path / "cache", **settings), capture_output=True, text=True, timeout=120)

    done = context_only(EMBEDDING_MODEL="openai/fake-embed", EMBEDDING_API_BASE=f"http://127.0.0.1:{closed_port()}/v1")
    assert done.returncode == 0, done.stderr
    assert "[Snippet: " in done.stdout and done.stdout == context_only().stdout
    assert "using lexical context only" in done.stderr and done.stderr.count("\n") == 1, done.stderr


# ---------------------------------------------------------------- long jobs

def test_an_interrupted_job_resumes_from_the_saved_batches(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(emb, "EMBED_BATCH", 4)
    repo = make_repo(tmp_path / "repo", n_functions=14)  # 16 chunks: 4 batches
    cache = tmp_path / "cache"
    first = FakeEmbedder(fail_on_call=4)  # the question, two batches, then the server dies
    cs.select_context("listener signal", repo, embed=first, cache_dir=cache)
    err = capsys.readouterr().err
    assert "8 of 16 chunks saved; the next run resumes" in err, err
    emb.VectorStore._opened.clear()  # as a new process would: read back from disk
    second = FakeEmbedder()
    got = cs.select_context("listener signal", repo, embed=second, cache_dir=cache)
    assert len(second.documents) == 8 and second.questions == []
    assert got[0].path == "notify.py"


def test_ctrl_c_keeps_the_finished_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(emb, "EMBED_BATCH", 4)
    repo = make_repo(tmp_path / "repo", n_functions=14)
    with pytest.raises(KeyboardInterrupt):  # not swallowed as an embedding failure
        cs.select_context("listener", repo, embed=FakeEmbedder(fail_on_call=3, error=KeyboardInterrupt()),
                          cache_dir=tmp_path / "cache")
    emb.VectorStore._opened.clear()
    again = FakeEmbedder()
    cs.select_context("listener", repo, embed=again, cache_dir=tmp_path / "cache")
    assert len(again.documents) == 12


def test_long_jobs_say_how_far_they_are_on_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(emb, "EMBED_BATCH", 4)
    monkeypatch.setattr(emb, "PROGRESS_EVERY", 0.0)
    repo = make_repo(tmp_path / "repo", n_functions=14)
    cs.select_context("listener", repo, embed=FakeEmbedder(), cache_dir=tmp_path / "cache")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("context: embedding 16 chunks with fake-embed")
    assert any("embedded 8/16 chunks" in line for line in err) and "embedded 16 chunks in" in err[-1]


def test_each_file_is_read_once_however_many_chunks_it_has(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo", n_functions=20)
    reads = []
    real = emb.file_lines
    monkeypatch.setattr(emb, "file_lines", lambda index, rel, tree=None: reads.append(rel) or real(index, rel, tree))
    cs.select_context("listener", repo, embed=FakeEmbedder(), cache_dir=tmp_path / "cache")
    assert sorted(reads) == ["many.py", "notify.py", "other.py"]


# ---------------------------------------------------------------- what a vector is keyed by

def test_questions_and_documents_are_embedded_as_such(tmp_path):
    repo = make_repo(tmp_path / "repo")
    with FakeServer() as server:
        embed = cs.LiteLLMEmbedder("openai/e5", server.base_url, "x", query_prefix="query: ",
                                   document_prefix="passage: ", input_types=("search_query", "search_document"))
        cs.select_context("listener signal", repo, embed=embed, cache_dir=tmp_path / "cache")
    question, *documents = server.embedding_requests
    assert question["input"] == ["query: listener signal"] and question["input_type"] == "search_query"
    assert all(t.startswith("passage: ") for body in documents for t in body["input"])
    assert {body["input_type"] for body in documents} == {"search_document"}


def test_where_the_server_runs_is_not_part_of_the_key_but_the_prefixes_are():
    names = {cs.LiteLLMEmbedder("openai/e5", base).name for base in ("http://localhost:8080/v1", "http://127.0.0.1:8080/v1")}
    assert len(names) == 1
    assert cs.LiteLLMEmbedder("openai/e5", query_prefix="query: ").name not in names


def test_the_path_is_part_of_the_key_so_identical_files_and_renames_are_embedded(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "copy.py").write_bytes((repo / "notify.py").read_bytes())
    embed = FakeEmbedder()
    cs.select_context("listener", repo, embed=embed, cache_dir=tmp_path / "cache")
    assert sorted(t.split("\n")[0] for t in embed.documents) == ["copy.py", "notify.py", "other.py"]
    (repo / "copy.py").rename(repo / "renamed.py")
    again = FakeEmbedder()
    cs.select_context("listener", repo, embed=again, cache_dir=tmp_path / "cache")
    assert [t.split("\n")[0] for t in again.documents] == ["renamed.py"]


def test_a_different_model_behind_the_same_name_starts_the_cache_again(tmp_path):
    repo = make_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    cs.select_context("listener", repo, embed=FakeEmbedder(model="model-a"), cache_dir=cache)
    same = FakeEmbedder(model="model-a")
    cs.select_context("a new question about listeners", repo, embed=same, cache_dir=cache)
    assert same.documents == []  # same model: only the new question was embedded
    swapped = FakeEmbedder(model="model-b")
    cs.select_context("yet another question", repo, embed=swapped, cache_dir=cache)
    assert len(swapped.documents) == 2  # every chunk again: no mixing of two models' vectors


def test_vectors_of_another_size_start_the_cache_again(tmp_path):
    repo = make_repo(tmp_path / "repo")
    cs.select_context("listener", repo, embed=FakeEmbedder(), cache_dir=tmp_path / "cache")
    texts = []

    def smaller(batch):
        texts.extend(batch)
        return [bag_of_words_vector(t, dimensions=8) for t in batch]

    smaller.name = "fake-embed"
    cs.select_context("other question", repo, embed=smaller, cache_dir=tmp_path / "cache")
    assert len(texts) == 3  # the question, then both chunks again


# ---------------------------------------------------------------- stored per repository

def test_each_repository_has_its_own_file_and_a_new_question_appends_one_record(tmp_path):
    cache = tmp_path / "cache"
    big, small = make_repo(tmp_path / "big", n_functions=30), make_repo(tmp_path / "small")
    cs.select_context("listener", big, embed=FakeEmbedder(), cache_dir=cache)
    cs.select_context("listener", small, embed=FakeEmbedder(), cache_dir=cache)
    assert len(list((cache / "vectors").glob("*/*.f32"))) == 2
    (big_file,) = (cache / "vectors" / ci.repo_key(big.resolve())).glob("*.f32")
    before = big_file.read_bytes()
    cs.select_context("a question never asked", small, embed=FakeEmbedder(), cache_dir=cache)
    assert big_file.read_bytes() == before  # another repository's question leaves it alone
    cs.select_context("a question never asked", big, embed=FakeEmbedder(), cache_dir=cache)
    after = big_file.read_bytes()
    record = 16 + 4 * len(bag_of_words_vector("x"))
    assert after[:len(before)] == before and len(after) == len(before) + record


def test_no_vector_cache_inside_the_repository(tmp_path):
    repo = make_repo(tmp_path)
    embed = FakeEmbedder()
    cs.select_context("listener", repo, embed=embed, cache_dir=repo / "cache")
    assert not (repo / "cache").exists()


def test_settings_describe_an_asymmetric_embedder():
    config = importlib.import_module("config")
    env = {"EMBEDDING_MODEL": "openai/e5", "EMBEDDING_API_BASE": "http://127.0.0.1:8080/v1",
           "EMBEDDING_QUERY_PREFIX": "query: ", "EMBEDDING_DOCUMENT_PREFIX": "passage: ",
           "EMBEDDING_INPUT_TYPES": "search_query, search_document"}
    embed = cs.LiteLLMEmbedder.from_settings(config.load_settings(env=env, need_model=False))
    assert embed.prefix == {"query": "query: ", "document": "passage: "}
    assert embed.input_type == {"query": "search_query", "document": "search_document"}
    assert cs.LiteLLMEmbedder.from_settings(config.load_settings(env={}, need_model=False)) is None
    with pytest.raises(config.ConfigError, match="EMBEDDING_INPUT_TYPES"):
        config.load_settings(env={**env, "EMBEDDING_INPUT_TYPES": "search_query"}, need_model=False)


def test_a_server_that_never_answers_costs_at_most_the_query_timeout(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(emb, "QUERY_TIMEOUT", 1.5)
    repo = make_repo(tmp_path / "repo")
    with FakeServer(delay=30) as server:
        embed = cs.LiteLLMEmbedder("openai/fake-embed", server.base_url, "x")
        started = time.perf_counter()
        got = cs.select_context("listener signal", repo, embed=embed, cache_dir=tmp_path / "cache")
        took = time.perf_counter() - started
    assert got == lexical("listener signal", repo, tmp_path)
    assert "using lexical context only" in capsys.readouterr().err
    assert took < 1.5 + 10, f"{took:.1f} s"  # the time out, plus importing LiteLLM on a busy machine


class BandEmbedder:
    """Similarities in the narrow, high band real models give (0.80 to 0.88), not 0 to 1."""

    name = "band-embed"

    def __call__(self, texts):
        return [[1.0, 0.15 if "docs/" in t else 0.75] for t in texts]  # docs/: cos ~0.99; code: ~0.80

    def query(self, texts):
        return [[1.0, 0.0]] * len(texts)


def test_role_weights_scale_the_similarity_a_chunk_has_above_the_repositorys_floor(tmp_path):
    # The doc page is the more similar chunk; a 0.7 doc weight applied to raw cosines (0.99 x 0.7
    # = 0.69 < 0.80) would rank every code chunk above it.
    repo = make_repo(tmp_path / "repo", files={})
    (repo / "docs").mkdir()
    (repo / "docs" / "guide.rst").write_text("Sending signals\n===============\n\nConnect a receiver first.\n")
    index = cs.load_index(repo, tmp_path / "cache")
    scores = cs.dense_chunk_scores(index, "how do I send a signal", BandEmbedder(), tmp_path / "cache", "code")
    best = {index.chunk_path(c): float(s) for c, s in enumerate(scores)}
    assert best["docs/guide.rst"] > max(best["notify.py"], best["other.py"]), best


def test_dense_never_moves_a_clear_lexical_winner_but_breaks_near_ties():
    dense = np.array([0.0, 1.0, 0.0])  # dense evidence as strong as it gets, all for the lexical runner-up
    clear = np.array([1.0, 1.0 - 1.5 * cs.DENSE_MARGIN, 0.2])  # lexical leads by more than DENSE_MARGIN
    fused = cs.fuse_scores(clear, dense, weight=10.0)
    assert list(np.argsort(-fused)) == [0, 1, 2], fused  # the lexical order stands
    near = np.array([1.0, 1.0 - cs.DENSE_MARGIN / 10, 0.2])  # a near tie: dense decides it
    assert cs.fuse_scores(near, dense, weight=cs.DENSE_WEIGHT).argmax() == 1
    assert cs.fuse_scores(np.zeros(3), dense, weight=cs.DENSE_WEIGHT).argmax() == 1  # no lexical match at all


@pytest.mark.parametrize("question", [
    "Where is retry_after defined?", "What raises `Timeout`?", "RetryError: gave up after 3 attempts",
    "Where is session.close called?", "what does SendSignal do",
])
def test_a_question_that_names_code_is_ranked_lexically_and_embeds_nothing(tmp_path, question):
    """Identifiers and error messages are what words rank best (bench/README.md, sixth round)."""
    repo = make_repo(tmp_path / "repo")
    embed = FakeEmbedder()
    got = cs.select_context(question, repo, embed=embed, cache_dir=tmp_path / "cache")
    assert not cs.uses_dense(question, cs.question_intent(question))
    assert embed.calls == 0 and got == lexical(question, repo, tmp_path)
    cs.select_context("where do the listeners get told", repo, embed=embed, cache_dir=tmp_path / "cache")
    assert embed.questions == ["where do the listeners get told"]  # everyday words: the model is asked


def test_dense_named_asks_the_model_for_named_questions_too(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    embed = FakeEmbedder()
    monkeypatch.setattr(cs, "DENSE_NAMED", True)
    cs.select_context("Where is send_signal defined?", repo, embed=embed, cache_dir=tmp_path / "cache")
    assert embed.questions == ["Where is send_signal defined?"]


def _files_scored(index, per_file: dict) -> np.ndarray:
    """Chunk scores giving each named file its score on its first chunk (a tenth on the others)."""
    scores = np.zeros(index.n_chunks)
    for chunk in range(index.n_chunks):
        rel = index.chunk_path(chunk)
        first = chunk == 0 or index.chunk_path(chunk - 1) != rel
        scores[chunk] = per_file.get(rel, 0.0) * (1.0 if first else 0.1)
    return scores


def _file_order(index, scores) -> list[str]:
    best = cs.file_scores(index, scores)
    return [index.files[f][0] for f in np.argsort(-best, kind="stable") if best[f] > 0]


def test_a_doc_page_keeps_the_place_the_words_gave_it_and_the_model_orders_the_rest(tmp_path):
    body = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    repo = make_repo(tmp_path / "repo", files={"a.py": body, "b.py": body, "c.py": body,
                                                "guide.md": "# Guide\n\nwords\n\n## More\n\nmore words\n"})
    index = cs.load_index(repo, tmp_path / "cache")
    lexical_scores = _files_scored(index, {"a.py": 3.0, "guide.md": 2.0, "b.py": 1.0, "c.py": 0.5})
    fused = _files_scored(index, {"c.py": 5.0, "b.py": 4.0, "a.py": 3.0, "guide.md": 0.1, "notify.py": 0.05})
    assert _file_order(index, fused)[-2:] == ["guide.md", "notify.py"]  # the model sank the doc page
    kept = cs.keep_doc_places(index, lexical_scores, fused)
    assert _file_order(index, kept) == ["c.py", "guide.md", "b.py", "a.py", "notify.py"]
    for rel in ("a.py", "guide.md"):  # within a file, its chunks keep their order
        mine = [c for c in range(index.n_chunks) if index.chunk_path(c) == rel]
        assert list(np.argsort(-kept[mine], kind="stable")) == list(np.argsort(-fused[mine], kind="stable"))
    # A doc page the words never found is not brought in by the model alone.
    only_dense = _files_scored(index, {"a.py": 1.0, "guide.md": 9.0})
    assert _file_order(index, cs.keep_doc_places(index, _files_scored(index, {"a.py": 1.0}), only_dense)) == ["a.py"]


def test_select_context_keeps_doc_places_when_it_fuses(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    calls = []
    real = cs.keep_doc_places
    monkeypatch.setattr(cs, "keep_doc_places", lambda *args: calls.append(args) or real(*args))
    question = "which listener gets told"
    got = cs.select_context(question, repo, embed=FakeEmbedder(), cache_dir=tmp_path / "cache")
    assert got and len(calls) == 1


def test_a_how_to_question_is_ranked_lexically_and_embeds_nothing(tmp_path, monkeypatch):
    """all-MiniLM-L6-v2 put doc pages far below where the words do (bench/README.md): a how-to
    question keeps the lexical order and costs no embedding call; other questions still ask."""
    repo = make_repo(tmp_path / "repo")
    question = "How do I tell every listener?"
    assert cs.question_intent(question) == "howto"
    embed = FakeEmbedder()
    got = cs.select_context(question, repo, embed=embed, cache_dir=tmp_path / "cache")
    assert embed.calls == 0 and got == lexical(question, repo, tmp_path)
    cs.select_context("who receives the signal", repo, embed=embed, cache_dir=tmp_path / "cache")
    assert embed.questions == ["who receives the signal"]
    monkeypatch.setattr(cs, "DENSE_HOWTO", True)
    cs.select_context(question, repo, embed=embed, cache_dir=tmp_path / "cache")
    assert embed.questions[-1] == question
