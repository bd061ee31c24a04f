"""Course checks (maintainers): what the injected context may hold. A snippet ends on a whole Python
statement (issue 22: ``config.py:2-41`` stopped one line into PROVIDER_DEFAULTS, and a model invented
the rest of the tuple), and a question about the lab never gets the lab's own test data (scripted
answers, fakes, the fixture repository, the question sets) as context.
"""

from __future__ import annotations

import importlib

from harness.paths import CODE_DIR

cs = importlib.import_module("context_selector")
chunking = importlib.import_module("chunking")


def test_a_statement_cut_by_the_window_is_completed():
    head = [f"# line {n} about nothing much" for n in range(1, 39)]
    table = ["TABLE = (", *(f'    ("KEY_{n}", "alpha beta {n}"),' for n in range(6)), ")"]
    lines = [*head, *table, *(f"OTHER_{n} = {n}" for n in range(30))]
    start, end = chunking.whole_statements("m.py", lines, 1, 2, 41)
    assert (start, end) == (2, 46) and lines[end - 1] == ")"


def test_a_statement_too_long_to_complete_is_left_out():
    lines = ["A = 1", "B = [", *(f"    {n}," for n in range(40)), "]", "C = 2"]
    assert chunking.whole_statements("m.py", lines, 1, 1, 10) == (1, 1)
    # a window that starts inside it moves to the next statement
    assert chunking.whole_statements("m.py", lines, 1, 20, 44, grow=False) == (44, 44)


def test_the_scan_ignores_brackets_in_strings_and_comments():
    lines = ['x = "(" + \'[\'  # {', 'y = """', "(", '"""', "z = f(1,", "  2)", "w = 1 \\", "  + 2"]
    assert chunking.open_after(lines) == [False, True, True, False, True, False, True, False]


def test_other_files_are_not_moved():
    lines = ["(" for _ in range(60)]
    assert chunking.whole_statements("notes.md", lines, 1, 2, 41) == (2, 41)


def test_injected_snippets_end_on_whole_statements(tmp_path):
    lines = [f"# alpha note {n}" for n in range(38)]
    lines += ["SETTINGS = (", *(f'    ("alpha", {n}),' for n in range(5)), ")", *(f"X{n} = {n}" for n in range(40))]
    (tmp_path / "settings.py").write_text("\n".join(lines) + "\n")
    snippets = cs.select_context("alpha settings", tmp_path, cache_dir=tmp_path / "cache")
    for snippet in snippets:
        shown = snippet.text.split("\n")
        assert not chunking.open_after(shown)[-1] and len(shown) <= cs.SNIPPET_MAX_LINES + chunking.STATEMENT_SLACK, snippet
    assert ")" in snippets[0].text.split("\n"), snippets[0]


def test_a_budget_cut_keeps_whole_statements():
    text = "\n".join(["def f():", "    call(", "        x,", "        y,", "    )", "    return alpha"])
    cut = cs._cut(cs.Snippet("m.py", 1, 6, 1.0, text), 40, {"alpha"})  # would start at "        y,"
    assert (cut.start_line, cut.end_line, cut.text) == (6, 6, "    return alpha"), cut


def test_questions_about_the_lab_get_no_lab_test_data(tmp_path):
    snippets = cs.select_context("why does config default to Groq?", CODE_DIR, k=5, cache_dir=tmp_path / "cache",
                                 exclude=cs.lab_data(CODE_DIR))
    paths = [s.path for s in snippets]
    assert paths and paths[0] == "config.py", paths
    assert not [p for p in paths if p.startswith(cs.LAB_DATA)], paths
    assert cs.lab_data(CODE_DIR.parent) == tuple(f"code/{p}" for p in cs.LAB_DATA)


def test_other_repositories_hide_nothing(tmp_path):
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "scripted_runs.py").write_text("ALPHA = 1\n")
    assert cs.lab_data(tmp_path) == ()
    assert [s.path for s in cs.select_context("alpha", tmp_path, cache_dir=tmp_path / "c",
                                              exclude=cs.lab_data(tmp_path))] == ["eval/scripted_runs.py"]
