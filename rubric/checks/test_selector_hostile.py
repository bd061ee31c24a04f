"""Course checks (maintainers): a hostile repository cannot crash, hang or flood context injection.

Each case builds its repository in tmp_path; cases the OS cannot build (FIFOs, hard links) skip.
"""

from __future__ import annotations

import importlib
import os
import threading

import pytest

cs = importlib.import_module("context_selector")
ci = importlib.import_module("context_index")
tools = importlib.import_module("tools")

SENTINEL = "HOSTILE_SENTINEL_7f3a"


def select(question, repo, tmp_path, **options):
    return cs.select_context(question, repo, cache_dir=tmp_path / "cache", **options)


def within(seconds, fn):
    """fn() in a thread; fails (instead of hanging the suite) if it does not return in time."""
    outcome = []

    def run():
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # handed to the test's thread below
            outcome.append((False, exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s (blocked?)"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def test_an_expression_too_deep_for_ast_is_chunked_all_the_same(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "deep.py").write_text("checksum_total = " + "1+" * 100_000 + "1\n")  # RecursionError in ast.parse
    (repo / "shop.py").write_text("def checksum_total():\n    return 2\n")
    snippets = select("checksum total", repo, tmp_path)
    assert {s.path for s in snippets} == {"deep.py", "shop.py"}
    assert sum(len(s.text) for s in snippets) <= cs.CONTEXT_CHAR_BUDGET


def test_one_huge_line_is_cut_and_the_budget_holds_in_total(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "bundle.js").write_text("var invoice_total=" + "invoice_total+1;" * 30_000 + "\n")  # ~490 KB, one line
    (repo / "invoice.py").write_text("def invoice_total(items):\n    return sum(items)\n")
    snippets = select("invoice total", repo, tmp_path, k=2)
    assert {s.path for s in snippets} == {"bundle.js", "invoice.py"}
    assert sum(len(s.text) for s in snippets) <= cs.CONTEXT_CHAR_BUDGET
    cut = next(s for s in snippets if s.path == "bundle.js")
    assert cut.text.endswith("…") and (cut.start_line, cut.end_line) == (1, 1)


def test_a_folder_chain_deeper_than_the_walk_goes_is_not_a_crash(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "top.py").write_text("def top_level_helper():\n    pass\n")
    here = os.open(repo, os.O_RDONLY) if hasattr(os, "O_DIRECTORY") and os.mkdir in os.supports_dir_fd else None
    if here is None:
        pytest.skip("building a 1,100-deep chain needs mkdir(dir_fd=...) on this OS")
    try:
        for _ in range(1_100):  # relative to an open folder: the full path would exceed PATH_MAX
            os.mkdir("d", dir_fd=here)
            deeper = os.open("d", os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = deeper
        with os.fdopen(os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=here), "w") as fh:
            fh.write("def top_level_helper_deep():\n    pass\n")
        os.close(here)
        assert [s.path for s in select("top level helper", repo, tmp_path)] == ["top.py"]
    finally:
        remove_chain(repo)


def remove_chain(repo):
    """Take the d/d/d... chain apart from the top (shutil.rmtree, so pytest's cleanup, recurses)."""
    top = repo / "d"
    while top.is_dir():
        if (top / "d").is_dir():
            (top / "d").rename(repo / "d-next")
        for leftover in top.iterdir():
            leftover.unlink()
        top.rmdir()
        if (repo / "d-next").is_dir():
            (repo / "d-next").rename(top)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="this OS cannot make a FIFO")
def test_a_fifo_is_never_opened_not_even_one_swapped_in_after_the_walk(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pipe.py").write_text("def order_total():\n    return 1\n")
    os.mkfifo(repo / "fifo.py")
    assert [s.path for s in within(20, lambda: select("order total", repo, tmp_path))] == ["pipe.py"]
    (repo / "pipe.py").unlink()
    os.mkfifo(repo / "pipe.py")  # after the walk, where the index expects a file
    assert within(10, lambda: ci._read_once(repo, "pipe.py")) is None
    assert within(20, lambda: select("order total", repo, tmp_path)) == []


def test_a_hard_link_to_a_secret_never_reaches_the_context(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".env").write_text(f"SHOP_API_KEY={SENTINEL}\n")
    try:
        os.link(repo / ".env", repo / "settings_copy.py")
    except (OSError, NotImplementedError):
        pytest.skip("this file system cannot make hard links")
    (repo / "settings.py").write_text("SHOP_API_KEY = None\n")
    snippets = select("SHOP_API_KEY", repo, tmp_path)
    assert [s.path for s in snippets] == ["settings.py"]
    assert not any(SENTINEL.encode() in p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())


@pytest.mark.parametrize("secret", [".env/pyvenv.cfg", ".env.d/production", "deploy/id_rsa/key", "env/lib/site.py"])
def test_secret_and_virtualenv_folders_are_hidden_at_every_depth(tmp_path, secret):
    repo = tmp_path / "repo"
    (repo / secret).parent.mkdir(parents=True)
    (repo / secret).write_text(f"SHOP_API_KEY = '{SENTINEL}'\n")
    if secret.startswith("env/"):
        (repo / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (repo / "settings.py").write_text("SHOP_API_KEY = None\n")
    snippets = select("SHOP_API_KEY", repo, tmp_path)
    assert [s.path for s in snippets] == ["settings.py"] and SENTINEL not in cs.render_snippets(snippets)


def test_line_numbers_follow_the_one_line_rule(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    text = "a = 1\f\nb = '\u2028'\r\nc = 3\x0b\n\ndef refund_total():\n    return 0\n"
    (repo / "odd.py").write_bytes(text.encode("utf-8"))
    (snippet,) = [s for s in select("refund total", repo, tmp_path) if "refund_total" in s.text]
    lines = tools.split_lines(text)
    assert snippet.text.split("\n") == lines[snippet.start_line - 1:snippet.end_line]
    rendered = cs.render_snippets([snippet]).split("\n")[1:]
    assert [int(r.split("|")[0]) for r in rendered] == list(range(snippet.start_line, snippet.end_line + 1))
