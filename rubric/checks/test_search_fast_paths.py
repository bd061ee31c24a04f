"""search_code's and the walk's faster paths (issue 29) find and hide what the plain ones did.

Each fast path skips work: a 64 KB first read, the first match looked for once, matches past the
shown ones counted without line numbers, a virtualenv told from its folder's listing, a folder on
the way down opened without a look first, and not looked up again for a virtualenv's markers
when the walk has just listed it. These checks hold the results to the plain reading.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

import repo_files
import tools


def _numbered(data: bytes, needle: str) -> list[int]:
    """Line numbers of the lines holding ``needle`` (lowered), by the one line-splitting rule."""
    lines = tools.split_lines(data.decode("utf-8", "replace"))
    return [n for n, line in enumerate(lines, 1) if needle in line.lower()]


# --------------------------------------------------------------------------- what is found

def test_a_non_ascii_query_matches_whatever_the_case_of_either_side(tmp_path):
    (tmp_path / "a.txt").write_text("x = 1\nDIE GR\u00d6SSE \u00dcBER ALLES\n", encoding="utf-8")
    assert "a.txt:2: DIE GR\u00d6SSE" in tools.search_code(tmp_path, "\u00fcber")
    assert "a.txt:2: DIE GR\u00d6SSE" in tools.search_code(tmp_path, "gr\u00d6sse")


def test_an_ascii_query_is_numbered_right_after_multibyte_text(tmp_path):
    (tmp_path / "a.py").write_text("\u00e9\n" * 3 + "\u00fcn\u00efc\u00f6d\u00e9 = 1; Needle = 2\n\u00df\n", encoding="utf-8")
    assert "a.py:4: \u00fcn\u00efc\u00f6d\u00e9 = 1; Needle = 2" in tools.search_code(tmp_path, "NEEDLE")


def test_a_needle_after_a_long_binary_looking_prefix_is_found(tmp_path):
    # Control characters and bytes that are not UTF-8, but no NUL among the first
    # BINARY_SNIFF_BYTES: a text file, searched to its end (past the first read too).
    prefix = bytes(range(1, 256)) * (2 * repo_files.READ_FIRST // 255)
    data = prefix + b"\nthe Needle is here\n"
    (tmp_path / "blob.dat").write_bytes(data)
    (tmp_path / "real.bin").write_bytes(b"\x00" + data)  # a NUL up front: binary, skipped
    result = tools.search_code(tmp_path, "needle")
    assert f"blob.dat:{_numbered(data, 'needle')[0]}: the Needle is here" in result, result
    assert "real.bin" not in result


def test_a_needle_past_the_first_read_is_found_and_a_file_past_the_limit_is_skipped(tmp_path):
    data = b"x = 1\n" * (repo_files.READ_FIRST // 6 + 500) + b"NEEDLE = 1\n"
    (tmp_path / "long.py").write_bytes(data)
    (tmp_path / "huge.py").write_bytes(b"needle\n" + b"x" * tools.MAX_SEARCH_FILE_BYTES)
    result = tools.search_code(tmp_path, "needle")
    assert f"long.py:{_numbered(data, 'needle')[0]}: NEEDLE = 1" in result and "huge.py" not in result, result


@pytest.mark.parametrize("size", [0, 1, repo_files.READ_FIRST - 1, repo_files.READ_FIRST,
                                  repo_files.READ_FIRST + 1, 3 * repo_files.READ_FIRST + 7])
@pytest.mark.parametrize("limit", [1, repo_files.READ_FIRST, repo_files.READ_FIRST + 1, 10 * repo_files.READ_FIRST])
def test_read_at_most_reads_up_to_the_limit(tmp_path, size, limit):
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        assert repo_files.read_at_most(fd, limit) == data[:limit]
        os.lseek(fd, 7, os.SEEK_SET)  # from where the file stands, not from its start
        assert repo_files.read_at_most(fd, limit) == data[7:7 + limit]
    finally:
        os.close(fd)


@pytest.mark.parametrize("wanted", [b"needle", b"n", b"a needle longer than one slice's overlap"])
def test_find_lowered_finds_the_first_match_across_slice_edges(wanted):
    step = repo_files.FOLD_STEP
    filler = b"x" * (3 * step)
    assert repo_files.find_lowered(filler, wanted) == -1
    for at in (0, step - len(wanted), step - 1, step, 2 * step - 3, 3 * step - len(wanted)):
        data = bytearray(filler)
        data[at:at + len(wanted)] = wanted.upper()
        data = bytes(data[:3 * step])
        assert repo_files.find_lowered(data, wanted) == data.lower().find(wanted), at


# --------------------------------------------------------------------------- what is counted

def test_matches_past_the_shown_ones_are_counted_as_matching_lines(tmp_path):
    # Two matches on one line count once, as in the shown lines; every file past the first
    # few is counted without numbering (the fast path).
    text = "needle = needle\nx = 1\nNeedle()\n\nneedle\r\n"
    for i in range(45):
        (tmp_path / f"f{i:02}.py").write_text(text)
    expected = sum(len(_numbered(p.read_bytes(), "needle")) for p in tmp_path.iterdir())
    assert expected == 45 * 3
    result = tools.search_code(tmp_path, "needle")
    assert f"of {expected:,} matches" in result and "stopped" not in result, result[-300:]
    assert result.count("\n") == tools.MAX_SEARCH_HITS  # the hits, then one note


@pytest.mark.parametrize("after, capped", [(tools.MAX_SEARCH_MATCHES - tools.MAX_SEARCH_HITS, False),
                                           (tools.MAX_SEARCH_MATCHES - tools.MAX_SEARCH_HITS + 1, True)])
def test_the_match_cap_holds_on_the_counting_path(tmp_path, after, capped):
    (tmp_path / "a.py").write_text("x = 1\n" * tools.MAX_SEARCH_HITS)  # fills the shown hits
    (tmp_path / "b.py").write_text("x = 2\n" * after)                  # counted only
    result = tools.search_code(tmp_path, "x")
    if capped:
        assert f"of more than {tools.MAX_SEARCH_MATCHES:,} matches" in result, result[-400:]
        assert f"search stopped after {tools.MAX_SEARCH_MATCHES:,} matching lines" in result
    else:
        assert f"of {tools.MAX_SEARCH_MATCHES:,} matches" in result and "stopped" not in result, result[-400:]


# --------------------------------------------------------------------------- what is hidden

def test_a_virtualenv_is_told_from_its_listing_whatever_the_case_of_its_marker(tmp_path):
    for folder, marker in (("env_a", "pyvenv.cfg"), ("env_b", "PyVenv.CFG"), ("env_c", "conda-meta")):
        (tmp_path / folder).mkdir()
        if marker == "conda-meta":
            (tmp_path / folder / marker).mkdir()
        else:
            (tmp_path / folder / marker).write_text("home = /usr\n")
        (tmp_path / folder / "site.py").write_text("needle = 1\n")
    (tmp_path / "src.py").write_text("needle = 1\n")
    assert [rel for _, rel in tools.iter_repo_files(tmp_path)] == ["src.py"]
    assert "env_" not in tools.search_code(tmp_path, "needle")


def test_search_code_trusts_the_walk_for_virtualenvs_and_a_plain_reader_does_not(tmp_path, monkeypatch):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "a.py").write_text("needle = 1\n")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "env" / "site.py").write_text("needle = 2\n")
    looked_up = []
    real = repo_files._exists_at
    monkeypatch.setattr(repo_files, "_exists_at", lambda name, fd: looked_up.append(name) or real(name, fd))
    found = tools.search_code(tmp_path, "needle")
    assert "pkg/sub/a.py:1:" in found and "env/" not in found, found
    with repo_files.TreeReader(tmp_path) as tree:  # a reader given paths from elsewhere looks them up
        assert tree.read("pkg/sub/a.py", 100) == b"needle = 1\n"
        with pytest.raises(tools.ToolError, match="excluded"):
            tree.read("env/site.py", 100)
    if repo_files.USE_DIR_FD:  # openat() systems; elsewhere a path is opened whole and judged by is_virtualenv
        # the walk judged each folder from its listing: only the plain reader looked again
        assert looked_up and set(looked_up) <= set(repo_files.VIRTUALENV_MARKERS)
        looked_up.clear()
        tools.search_code(tmp_path, "needle")
        assert looked_up == []


def test_a_listing_cut_by_the_walk_cap_looks_the_marker_up(tmp_path, monkeypatch):
    venv = tmp_path / "env"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    monkeypatch.setattr(repo_files, "MAX_WALK_FILES", 3)
    without_marker = [entry for entry in os.scandir(tmp_path)] * 3  # a full listing the marker is not in
    assert repo_files._lists_virtualenv(str(venv), without_marker)
    assert not repo_files._lists_virtualenv(str(tmp_path), without_marker)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or sys.platform == "win32", reason="no FIFOs on this OS")
def test_a_fifo_or_a_file_where_a_folder_should_be_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "plain").write_text("x = 1\n")
    signal.alarm(10)  # a FIFO opened for reading would wait for a writer forever
    try:
        with repo_files.TreeReader(tmp_path) as tree:
            for bad in ("pipe/a.py", "plain/a.py"):
                with pytest.raises(tools.ToolError, match="symlink|not a directory"):
                    tree.read(bad, 100)
    finally:
        signal.alarm(0)


# --------------------------------------------------------------------------- skipping to the rarest byte

def test_find_lowered_agrees_with_lowering_the_whole_file_wherever_the_rare_byte_is():
    # Big files (the anchored path): the needle's rarest byte absent, only before the match, only
    # in the other case, cut by a slice edge, and matches in mixed case; a fixed seed, many cases.
    import random
    rng = random.Random(29)
    step = repo_files.FOLD_STEP
    for _ in range(400):
        size = rng.choice([step + 1, 2 * step + 5, 3 * step + 17])
        filler = rng.choice([b"x", b"ab", b"aB_ ", b"abcdeKkXx_ (\n"])
        data = bytearray((filler * (size // len(filler) + 1))[:size])
        wanted = bytes(rng.choice(b"abkqx_( ") for _ in range(rng.randint(1, 7)))
        for _ in range(rng.randint(0, 3)):  # matches, in either case
            at = rng.randrange(size)
            data[at:at + len(wanted)] = bytes(c - 32 if 97 <= c <= 122 and rng.random() < 0.5 else c for c in wanted)
        for _ in range(rng.randint(0, 5)):  # stray copies of bytes the needle holds
            data[rng.randrange(size)] = rng.choice(b"kKqQ(")
        data = bytes(data[:size])
        assert repo_files.find_lowered(data, wanted) == data.lower().find(wanted), (filler, wanted)


def test_count_newlines_counts_as_bytes_count_on_either_side_of_its_numpy_threshold():
    import random
    rng = random.Random(6)
    step = repo_files.FOLD_STEP
    data = bytes(rng.choice(b"ab\n\r") for _ in range(3 * step))
    for start, stop in [(0, 0), (0, step - 1), (0, step), (1, step + 1), (5, 3 * step), (step, 3 * step - 3)]:
        assert repo_files.count_newlines(data, start, stop) == data.count(b"\n", start, stop), (start, stop)


def test_matches_far_apart_in_a_big_file_keep_their_numbers(tmp_path):
    # matching_lines counts the lines between two matches (numpy past FOLD_STEP): none may be lost.
    gap = "filler\n" * (repo_files.FOLD_STEP // 3)
    data = ("needle\n" + gap + "needle\r\n" + gap + gap + "needle").encode()
    (tmp_path / "far.py").write_bytes(data)
    result = tools.search_code(tmp_path, "needle")
    assert [line.split(":")[1] for line in result.splitlines()] == [str(n) for n in _numbered(data, "needle")], result


def test_a_match_far_into_a_big_file_is_numbered_as_the_plain_reading_numbers_it(tmp_path):
    # search_code looks at a big file from its first match's line on: the numbers must not move.
    head = "x = 1\r\n" * (2 * repo_files.FOLD_STEP // 7) + "y = 2\n"
    data = (head + "a = NEEDLE\r\nb = 1\nneedle(needle)\n" + "z\n" * 100 + "last needle").encode()
    (tmp_path / "big.py").write_bytes(data)
    result = tools.search_code(tmp_path, "needle")
    numbers = _numbered(data, "needle")
    assert numbers[0] > 2 * repo_files.FOLD_STEP // 7
    assert [line.split(":")[1] for line in result.splitlines()] == [str(n) for n in numbers], result
    for i in range(tools.MAX_SEARCH_HITS):  # and counted without numbers past the shown hits
        (tmp_path / f"a{i:02}.py").write_text("needle\n")
    assert f"of {tools.MAX_SEARCH_HITS + len(numbers):,} matches" in tools.search_code(tmp_path, "needle")


# --------------------------------------------------------------------------- opening in a kept folder

def test_the_walk_gives_each_file_the_path_its_name_gives(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for rel in ("a.py", "pkg/b.py", "pkg/sub/c d.py", "pkg/sub/\u00e9.py"):
        (tmp_path / rel).write_text("x\n")
    walked = list(tools.iter_repo_files(tmp_path))
    assert [rel for _, rel in walked] == ["a.py", "pkg/b.py", "pkg/sub/c d.py", "pkg/sub/\u00e9.py"]
    assert all(path == tmp_path.resolve().joinpath(*rel.split("/")) and str(path) == str(tmp_path.resolve() / rel)
               for path, rel in walked)


@pytest.mark.skipif(not repo_files.USE_DIR_FD, reason="without openat() no folder is kept open")
def test_reading_in_a_kept_folder_refuses_what_opening_refuses(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "linked.py").write_text("secret\n")
    os.link(tmp_path / "linked.py", tmp_path / "second.py")
    os.symlink("ok.py", tmp_path / "sym.py")
    (tmp_path / ".env").write_text("KEY=1\n")
    (tmp_path / "folder").mkdir()
    kinds = ["linked.py", "second.py", "sym.py", ".env", "folder", "missing.py"]
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.py")
        kinds.append("pipe.py")
    signal.alarm(10)  # a FIFO opened for reading would wait for a writer forever
    try:
        with repo_files.TreeReader(tmp_path) as tree:
            assert tree.read("ok.py", 100) == b"x = 1\n"  # the root is kept open now
            for rel in kinds:
                with pytest.raises(tools.ToolError) as read_error:
                    tree.read((rel,), 100, shown=rel)
                with pytest.raises(tools.ToolError) as open_error:
                    tree.open(rel)
                assert str(read_error.value) == str(open_error.value), rel
    finally:
        signal.alarm(0)


@pytest.mark.parametrize("size", [0, 1, 100, repo_files.READ_FIRST + 1, 3 * repo_files.READ_FIRST + 7])
@pytest.mark.parametrize("limit", [1, 100, repo_files.READ_FIRST, 10 * repo_files.READ_FIRST])
def test_read_at_most_reads_up_to_the_limit_whatever_size_it_is_told(tmp_path, size, limit):
    # The size comes from fstat; the file may have grown or shrunk since (or report 0, as /proc does).
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    for told in sorted({0, max(size - 1, 0), size, size + 5, 10 * size}):
        fd = os.open(tmp_path / "f", os.O_RDONLY)
        try:
            assert repo_files.read_at_most(fd, limit, told) == data[:limit], told
        finally:
            os.close(fd)
