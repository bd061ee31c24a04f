"""Course checks (maintainers): the provided tools are safe and practical on real repositories.

Run against the reference (`--reference`), since the tools call the learner's safe_resolve.
Covers: exclusions judged on the resolved path, symlinks, bounded output in size and memory,
binary and undecodable content, FIFOs, undecodable file names, literal deterministic search,
symlink loops, argument validation, and dispatch that never raises on fuzzed input.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tracemalloc
from pathlib import Path

import pytest

from support import deadline

import tools
from harness.paths import FIXTURE_REPO, SENTINEL

pytestmark = pytest.mark.skipif(
    os.environ.get("LESSON06_IMPL") != "reference", reason="course checks run with --reference"
)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "app.py").write_text("def handler():\n    return 'ok'\n")
    (root / ".env").write_text(f"KEY={SENTINEL}\n")
    return root


def make_symlink(link: Path, target: Path):
    try:
        os.symlink(target, link, target_is_directory=target.is_dir())
    except (OSError, NotImplementedError) as exc:
        pytest.skip(f"no symlinks here: {exc}")




# ---------------------------------------------------------------- exclusions

@pytest.mark.parametrize("rel", [
    ".env", ".env.local", ".env.production", ".ENV", "id_rsa", "deploy/id_ed25519", "certs/server.pem",
    "keys/tls.key", ".git/config", "node_modules/x/index.js", ".venv/lib/site.py", "venv/bin/activate",
    "pkg/__pycache__/app.cpython-311.pyc", ".netrc",
])
def test_excluded_paths(rel):
    assert tools.is_excluded(tuple(rel.split("/"))), rel


@pytest.mark.parametrize("rel", [
    ".gitignore", ".github/workflows/ci.yml", "env.py", ".envelope.ts", "id_rsa.pub", "environment/settings.py",
    "docs/venv-setup.md", "src/keys.py",
])
def test_visible_paths(rel):
    assert not tools.is_excluded(tuple(rel.split("/"))), rel


@pytest.mark.parametrize("path", [".env", "pkg/../.env", ".env/.", "./.env"])
def test_read_file_refuses_secret_however_spelled(repo, path):
    with pytest.raises((ValueError, tools.ToolError)):
        tools.read_file(repo, path)


def test_symlink_to_secret_is_refused(repo):
    make_symlink(repo / "notes.txt", repo / ".env")
    with pytest.raises(tools.ToolError):
        tools.read_file(repo, "notes.txt")


def test_git_internals_are_refused(repo):
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[remote]\n")
    with pytest.raises(tools.ToolError):
        tools.read_file(repo, ".git/config")
    with pytest.raises(tools.ToolError):
        tools.list_directory(repo, ".git")


def test_fixture_sentinel_never_leaks_through_any_tool():
    outputs = [
        tools.list_directory(FIXTURE_REPO, "."),
        tools.search_code(FIXTURE_REPO, "SENTINEL"),
        tools.search_code(FIXTURE_REPO, "="),
        tools.dispatch_tool("read_file", {"path": ".env"}, FIXTURE_REPO),
    ]
    assert all(SENTINEL not in out for out in outputs)


# ---------------------------------------------------------------- read_file bounds

def test_read_file_numbers_lines_and_names_the_file():
    out = tools.read_file(FIXTURE_REPO, "shop/models.py")
    assert out.splitlines()[0].startswith("[File: shop/models.py (")
    assert "   11|     price: float" in out


def test_long_file_is_cut_with_a_note(tmp_path):
    (tmp_path / "big.py").write_text("".join(f"x{i} = {i}\n" for i in range(1, 1001)))
    out = tools.read_file(tmp_path, "big.py")
    assert "showing lines 1-150" in out and "1000 lines total" in out
    assert "start_line=151" in out
    assert len(out.splitlines()) == 152


def test_line_range_is_clamped_to_the_file(tmp_path):
    (tmp_path / "f.py").write_text("".join(f"l{i}\n" for i in range(1, 21)))
    out = tools.read_file(tmp_path, "f.py", 15, 10**12)
    assert "showing lines 15-20" in out and "more lines below" not in out


@pytest.mark.parametrize("start,end", [(0, None), (-3, None), ("5", None), (True, None), (2.5, None), (10, 5), (1, 0)])
def test_bad_line_numbers_are_tool_errors(start, end):
    with pytest.raises(tools.ToolError):
        tools.read_file(FIXTURE_REPO, "shop/models.py", start, end)


def test_start_past_the_end_is_an_error():
    with pytest.raises(tools.ToolError, match="past the end"):
        tools.read_file(FIXTURE_REPO, "shop/models.py", 10_000)


def test_five_megabyte_line_stays_bounded(tmp_path):
    (tmp_path / "min.js").write_bytes(b"var a='" + b"x" * 5_000_000 + b"';\nnext();\n")
    out = tools.read_file(tmp_path, "min.js")
    assert len(out) < 5_000 and "line cut" in out and "2| next();" in out


def test_fifty_megabyte_file_stays_bounded_in_memory(tmp_path):
    with open(tmp_path / "dump.sql", "wb") as fh:
        line = b"INSERT INTO t VALUES (1, 'abcdefghij');\n"
        fh.write(line * (50_000_000 // len(line)))
    tracemalloc.start()
    out = tools.read_file(tmp_path, "dump.sql", 1000, 1010)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "showing lines 1000-1010" in out
    assert peak < 8_000_000, f"peak Python memory {peak:,} bytes for a 50 MB file"


def test_binary_file_gives_a_notice(tmp_path):
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    assert "binary file" in tools.read_file(tmp_path, "logo.png")


def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    (tmp_path / "latin.txt").write_bytes("caf\u00e9 = 1\n".encode("latin-1"))
    out = tools.read_file(tmp_path, "latin.txt")
    assert "caf\ufffd = 1" in out
    json.dumps(out)


def test_empty_file(tmp_path):
    (tmp_path / "empty.py").write_text("")
    assert "(empty)" in tools.read_file(tmp_path, "empty.py")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_fifo_is_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with deadline(5), pytest.raises(tools.ToolError, match="not a regular file"):
        tools.read_file(tmp_path, "pipe")
    with deadline(5):
        assert "No matches" in tools.search_code(tmp_path, "anything")


def test_directory_and_missing_file_are_explained():
    with pytest.raises(tools.ToolError, match="list_directory"):
        tools.read_file(FIXTURE_REPO, "shop")
    with pytest.raises(tools.ToolError, match="does not exist"):
        tools.read_file(FIXTURE_REPO, "shop/nope.py")


# ---------------------------------------------------------------- list_directory

def test_listing_hides_excluded_entries_and_counts_them(repo):
    (repo / ".git").mkdir()
    out = tools.list_directory(repo, ".")
    assert "pkg/" in out and ".env" not in out and ".git" not in out
    assert "2 entries hidden" in out


def test_listing_is_capped(tmp_path):
    for i in range(tools.MAX_LIST_ENTRIES + 25):
        (tmp_path / f"f{i:04}.txt").write_text("")
    out = tools.list_directory(tmp_path, ".")
    assert "25 more entries" in out
    assert len(out.splitlines()) == tools.MAX_LIST_ENTRIES + 2


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="needs a filesystem that allows undecodable names")
def test_undecodable_file_names_do_not_break_listing_or_search(tmp_path):
    name = os.fsdecode(b"caf\xe9.py")
    try:
        (tmp_path / name).write_text("match_me = 1\n")
    except (OSError, UnicodeEncodeError) as exc:
        pytest.skip(f"cannot create the name: {exc}")
    json.dumps(tools.list_directory(tmp_path, "."))
    json.dumps(tools.search_code(tmp_path, "match_me"))


def test_symlink_loop_does_not_break_listing_or_search(tmp_path):
    make_symlink(tmp_path / "loop", tmp_path)
    make_symlink(tmp_path / "a", tmp_path / "b")
    make_symlink(tmp_path / "b", tmp_path / "a")
    (tmp_path / "real.py").write_text("needle = 1\n")
    assert "loop@" in tools.list_directory(tmp_path, ".")
    assert tools.search_code(tmp_path, "needle") == "real.py:1: needle = 1"
    with pytest.raises((ValueError, tools.ToolError)):
        tools.read_file(tmp_path, "a")


# ---------------------------------------------------------------- search_code

def test_search_is_literal_and_survives_regex_syntax(tmp_path):
    (tmp_path / "r.py").write_text("pattern = '(a+)+$'\nother = 'aaaa'\n")
    assert tools.search_code(tmp_path, "(a+)+$") == "r.py:1: pattern = '(a+)+$'"
    assert "No matches" in tools.search_code(tmp_path, "[unclosed")


def test_search_is_case_insensitive_sorted_and_deterministic(tmp_path):
    for name in ("b.py", "a.py", "sub/c.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("Config = 1\nconfig = 2\n")
    out = tools.search_code(tmp_path, "CONFIG")
    assert out.splitlines() == ["a.py:1: Config = 1", "a.py:2: config = 2", "b.py:1: Config = 1",
                                "b.py:2: config = 2", "sub/c.py:1: Config = 1", "sub/c.py:2: config = 2"]
    assert out == tools.search_code(tmp_path, "CONFIG")


def test_search_caps_hits_and_says_how_to_narrow(tmp_path):
    (tmp_path / "many.py").write_text("".join(f"value_{i} = {i}\n" for i in range(500)))
    out = tools.search_code(tmp_path, "value_").splitlines()
    assert len(out) == tools.MAX_SEARCH_HITS + 1 and "of 500 matches" in out[-1] and "narrow" in out[-1]


def test_search_never_reads_secrets_or_follows_links_out(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text(f"token = '{SENTINEL}'\n")
    (root / ".env").write_text(f"token = '{SENTINEL}'\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "m.js").write_text(f"token = '{SENTINEL}'\n")
    make_symlink(root / "linked.py", outside / "leak.py")
    make_symlink(root / "linkdir", outside)
    assert "No matches" in tools.search_code(root, "token")


def test_search_skips_binary_and_huge_files(tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"needle\x00\x01")
    (tmp_path / "huge.txt").write_bytes(b"needle\n" + b"x" * (tools.MAX_SEARCH_FILE_BYTES + 1))
    assert "No matches" in tools.search_code(tmp_path, "needle")


@pytest.mark.parametrize("query", ["", "   ", "x" * (tools.MAX_QUERY_CHARS + 1), None, 7])
def test_bad_queries_are_tool_errors(query):
    with pytest.raises(tools.ToolError):
        tools.search_code(FIXTURE_REPO, query)


# ---------------------------------------------------------------- schemas and dispatch

def test_schemas_name_the_three_tools_and_expose_no_root():
    names = [s["function"]["name"] for s in tools.TOOL_SCHEMAS]
    assert names == ["read_file", "list_directory", "search_code"] == list(tools.TOOL_FUNCTIONS)
    text = json.dumps(tools.TOOL_SCHEMAS)
    assert "root\"" not in text and "repo_root" not in text
    for schema in tools.TOOL_SCHEMAS:
        params = schema["function"]["parameters"]
        assert params["additionalProperties"] is False and set(params["required"]) <= set(params["properties"])
        assert len(schema["function"]["description"]) > 120, "descriptions are the interface: say what, limits, when"


def test_dispatch_never_raises_on_fuzzed_calls(tmp_path):
    rng = random.Random(6)
    values = [None, True, 0, -1, 10**20, 2.5, "", "..", "../../etc/passwd", "\x00", "a" * 5000, [], {}, ["x"],
              {"path": "x"}, ".env", "pkg/../../x", "/", "C:\\Windows", "\ud800"]
    names = ["read_file", "list_directory", "search_code", "", None, "READ_FILE", "exec", 42]
    keys = ["path", "start_line", "end_line", "query", "repo_root", "", "PATH"]
    for _ in range(600):
        args = {rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 3))}
        if rng.random() < 0.1:
            args = rng.choice(values)
        result = tools.dispatch_tool(rng.choice(names), args, FIXTURE_REPO)
        assert isinstance(result, str)
        assert SENTINEL not in result
