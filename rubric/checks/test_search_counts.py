"""search_code's match count (issue 28, item 6): a count cut at MAX_SEARCH_MATCHES says so, even
when the cap is reached in the last file walked; a complete count says nothing more."""

from __future__ import annotations

import tools


def test_capped_in_the_last_file_says_more_than(tmp_path):
    (tmp_path / "only.py").write_text("x = 1\n" * (tools.MAX_SEARCH_MATCHES * 3 + 1))
    result = tools.search_code(tmp_path, "x")
    assert f"of more than {tools.MAX_SEARCH_MATCHES:,} matches" in result, result[-400:]
    assert f"search stopped after {tools.MAX_SEARCH_MATCHES:,} matching lines" in result, result[-400:]


def test_capped_at_the_end_of_a_file_with_more_files_after_it(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n" * tools.MAX_SEARCH_MATCHES)
    (tmp_path / "b.py").write_text("x = 2\n")
    result = tools.search_code(tmp_path, "x")
    assert f"of more than {tools.MAX_SEARCH_MATCHES:,} matches" in result, result[-400:]


def test_exactly_the_cap_is_a_complete_count(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n" * tools.MAX_SEARCH_MATCHES)
    (tmp_path / "b.py").write_text("nothing here\n")
    result = tools.search_code(tmp_path, "x")
    assert f"of {tools.MAX_SEARCH_MATCHES:,} matches" in result, result[-400:]
    assert "more than" not in result and "search stopped" not in result, result[-400:]


def test_a_small_count_is_exact(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n" * (tools.MAX_SEARCH_HITS + 5))
    result = tools.search_code(tmp_path, "x")
    assert f"of {tools.MAX_SEARCH_HITS + 5:,} matches" in result and "stopped" not in result, result[-400:]
