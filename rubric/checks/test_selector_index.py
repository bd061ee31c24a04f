"""Course checks (maintainers): context_index.py keeps the index in memory and on disk and still
sees every change; context_selector fits k files into the budget. tmp_path repositories only."""

from __future__ import annotations

import importlib
import os

cs = importlib.import_module("context_selector")
ci = importlib.import_module("context_index")


def counting(monkeypatch, name):
    calls = []
    real = getattr(ci, name)
    monkeypatch.setattr(ci, name, lambda *a: calls.append(1) or real(*a))
    return calls


def test_a_warm_process_neither_reads_the_cache_nor_rebuilds(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("def alpha():\n    return 'order'\n")
    cs.select_context("alpha", repo, cache_dir=tmp_path / "cache")
    reads, builds = counting(monkeypatch, "_read_cache"), counting(monkeypatch, "build_index")
    assert cs.select_context("alpha", repo, cache_dir=tmp_path / "cache")[0].path == "a.py"
    assert reads == [] and builds == []


def test_a_new_file_in_an_empty_folder_is_seen(tmp_path):
    repo = tmp_path / "repo"
    (repo / "later").mkdir(parents=True)
    (repo / "a.py").write_text("def alpha():\n    pass\n")
    assert [s.path for s in cs.select_context("beta", repo, cache_dir=tmp_path / "cache")] == []
    (repo / "later" / "b.py").write_text("def beta():\n    pass\n")
    assert [s.path for s in cs.select_context("beta", repo, cache_dir=tmp_path / "cache")] == ["later/b.py"]


def test_an_edit_of_the_same_size_within_the_same_clock_tick_is_seen(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("def alpha():\n    pass\n")
    mtime = (repo / "a.py").stat().st_mtime_ns
    cs.select_context("alpha", repo, cache_dir=tmp_path / "cache")
    (repo / "a.py").write_text("def gamma():\n    pass\n")  # same size
    os.utime(repo / "a.py", ns=(mtime, mtime))              # and the same time, as within one tick
    assert [s.path for s in cs.select_context("gamma", repo, cache_dir=tmp_path / "cache")] == ["a.py"]


def test_a_new_process_checks_the_cached_index_without_walking(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("def alpha():\n    pass\n")
    cs.select_context("alpha", repo, cache_dir=tmp_path / "cache")
    old = ci.RACY_NS
    monkeypatch.setattr(ci, "RACY_NS", 0)  # as if the files were old
    ci._in_memory.clear()  # a new process
    walks = counting(monkeypatch, "list_repo")
    assert cs.select_context("alpha", repo, cache_dir=tmp_path / "cache")[0].path == "a.py"
    assert walks == [] and old > 0


def test_k_files_fit_the_budget_by_trimming_snippets_not_dropping_files(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(5):
        body = "".join(f"    order_total_{n} = compute_order_total(items, discount, tax_rate_{n})\n" for n in range(39))
        (repo / f"shop{i}.py").write_text(f"def order_total():\n{body}")
    snippets = cs.select_context("order total", repo, k=5, cache_dir=tmp_path / "cache", budget=6_000)
    assert sorted({s.path for s in snippets}) == [f"shop{i}.py" for i in range(5)]
    assert sum(len(s.text) for s in snippets) <= 6_000
    for s in snippets:  # still whole lines, numbered as in the file
        lines = (repo / s.path).read_text().split("\n")
        assert s.text == "\n".join(lines[s.start_line - 1:s.end_line])


def test_the_best_file_keeps_its_whole_chunk_when_the_others_can_make_room(tmp_path):
    """Over budget, the lowest-ranked snippets are cut first (to half an equal share at least)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    best = "".join(f"    ledger_{n} = post_ledger_entry(account, {n})\n" for n in range(30))
    (repo / "ledger.py").write_text(f"def post_ledger():\n{best}")
    for name in ("audit.py", "report.py"):  # each mentions the ledger once, in a long function
        body = "".join(f"    line_{n} = format_row(row, {n})  # a fairly long line of report text\n" for n in range(40))
        (repo / name).write_text(f"def {name[:-3]}_ledger_lines(row):\n{body}")
    snippets = cs.select_context("post ledger entry", repo, k=3, cache_dir=tmp_path / "cache", budget=3_000)
    assert [s.path for s in snippets][0] == "ledger.py" and len(snippets) == 3, snippets
    assert (snippets[0].start_line, snippets[0].end_line) == (1, 31)  # whole, though longer than a third
    assert len(snippets[0].text) > 1_000 and sum(len(s.text) for s in snippets) <= 3_000
    assert all(len(s.text) >= 200 for s in snippets[1:])  # the others cut, not dropped


def test_the_cached_index_holds_every_array_the_ranking_reads(tmp_path, monkeypatch):
    """A new process reads the index from disk: the own counts (literal_scores) come back too."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "guide.md").write_text("# Guide\n\nHow do you run it behind a proxy? You set the hops.\n")
    (repo / "proxy.py").write_text("def proxy_hops(headers):\n    return headers\n")
    built = ci.load_index(repo, cs.RECIPE, tmp_path / "cache")
    ci._in_memory.clear()  # a new process
    builds = counting(monkeypatch, "build_index")
    read = ci.load_index(repo, cs.RECIPE, tmp_path / "cache")
    assert builds == [] and read is not built
    for name in ci.ARRAYS:
        assert (getattr(read, name) == getattr(built, name)).all(), name
    question = "How do I run it behind a proxy?"
    assert (cs.lexical_scores(read, question) == cs.lexical_scores(built, question)).all()
