"""M1 - Sandbox paths: tools.safe_resolve keeps every model-supplied path inside the repository.

The cases come from the lesson's Example 1 and its common-mistakes table: '..' escapes,
absolute paths, symlinks, and the sibling folder that shares a name prefix.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from harness.paths import hide_tmp
from harness.milestones import BY_ID
from harness.teach import check, fail, learner, show

M1 = BY_ID["M1"]
FN = "tools.safe_resolve"


@pytest.fixture
def safe_resolve():
    return learner(FN)


def resolves_to(safe_resolve, tree, path, expected: Path, hint: str):
    called = f"safe_resolve(<tmp>/repo, {path!r})"
    try:
        got = safe_resolve(tree.root, path)
    except NotImplementedError:
        raise
    except Exception as exc:
        fail(M1, FN, called, f"returns {hide_tmp(expected, tree.tmp)}",
             f"raised {type(exc).__name__}: {hide_tmp(exc, tree.tmp)}", hint)
    check(isinstance(got, Path), M1, FN, called, "a pathlib.Path", f"{type(got).__name__}: {show(got)}",
          "return the resolved Path object itself, not a string")
    if got != expected and got in (tree.root / path, tree.root.resolve() / path):  # asked, not reached
        hint = ("you returned the path as joined, before resolving; the contract returns the resolved "
                "location: return (root / rel_path).resolve(), the value you checked")
    check(got == expected, M1, FN, called, f"{hide_tmp(expected, tree.tmp)} (fully resolved)",
          hide_tmp(got, tree.tmp), hint)


def rejected(safe_resolve, tree, path, why: str, hint: str, root=None):
    root = tree.root if root is None else root
    called = f"safe_resolve({hide_tmp(root, tree.tmp)}, {hide_tmp(show(path), tree.tmp)})"
    try:
        got = safe_resolve(root, path)
    except ValueError:
        return
    except NotImplementedError:
        raise
    except Exception as exc:
        fail(M1, FN, called, f"ValueError ({why})", f"{type(exc).__name__}: {hide_tmp(exc, tree.tmp)}",
             "raise ValueError for every refused path, so dispatch_tool can catch one kind of error")
    fail(M1, FN, called, f"ValueError ({why})", f"returned {hide_tmp(got, tree.tmp)}", hint)


# ---------------------------------------------------------------- paths that must resolve

def test_relative_path_resolves_inside_the_root(safe_resolve, tree):
    """A plain relative path resolves to the file inside the repository."""
    resolves_to(safe_resolve, tree, "src/config.py", (tree.root / "src" / "config.py").resolve(),
                "join the path onto the root and return the resolved result")


def test_dot_slash_path_resolves(safe_resolve, tree):
    """'./README.md' is the README at the root."""
    resolves_to(safe_resolve, tree, "./README.md", (tree.root / "README.md").resolve(),
                "Path.resolve() removes '.' components for you")


def test_root_itself_resolves(safe_resolve, tree):
    """'.' is the repository root itself, which is inside."""
    resolves_to(safe_resolve, tree, ".", tree.root.resolve(),
                "the root counts as inside: target.is_relative_to(root) is true for the root itself, while "
                "`root in target.parents` is false for it (a path is not its own parent)")


def test_root_may_be_a_string(safe_resolve, tree):
    """repo_root may arrive as a str as well as a Path."""
    called = "safe_resolve(str(<tmp>/repo), 'src/config.py')"
    expected = (tree.root / "src" / "config.py").resolve()
    try:
        got = safe_resolve(str(tree.root), "src/config.py")
    except NotImplementedError:
        raise
    except Exception as exc:
        fail(M1, FN, called, hide_tmp(expected, tree.tmp), f"{type(exc).__name__}: {exc}",
             "wrap the root in Path(repo_root) before using it")
    check(got == expected, M1, FN, called, hide_tmp(expected, tree.tmp), hide_tmp(got, tree.tmp),
          "wrap the root in Path(repo_root) before using it")


def test_missing_file_inside_is_allowed(safe_resolve, tree):
    """A path that does not exist yet but would be inside resolves (the tool reports 'not found')."""
    resolves_to(safe_resolve, tree, "src/not_written_yet.py", (tree.root / "src" / "not_written_yet.py").resolve(),
                "use Path.resolve() without strict=True: existence is the tool's question, not the sandbox's")


@pytest.mark.parametrize("name", ["..foo.py", "...", "sub/../file.py"])
def test_legal_names_with_dots_resolve(safe_resolve, tree, name):
    """Names that merely contain dots, and '..' that lands back inside, are legal."""
    resolves_to(safe_resolve, tree, name, (tree.root / name).resolve(),
                "judge where the path lands after resolving, not whether its text contains '..'")


def test_absolute_path_inside_is_allowed(safe_resolve, tree):
    """An absolute path that lands inside the root is judged by where it lands: allowed."""
    target = (tree.root / "src" / "config.py").resolve()
    resolves_to(safe_resolve, tree, str(target), target,
                "joining an absolute path replaces the root; then judge the result like any other")


def test_in_repo_symlink_is_allowed(safe_resolve, tree, symlink):
    """A symlink whose target is inside the repository resolves to that target."""
    symlink(tree.root / "alias.py", tree.root / "src" / "config.py")
    resolves_to(safe_resolve, tree, "alias.py", (tree.root / "src" / "config.py").resolve(),
                "resolve() follows the link; the target is inside, so allow it")


def test_root_reached_through_a_symlink(safe_resolve, tree, symlink):
    """The root itself may be a symlink: results are compared with the resolved root."""
    link_root = symlink(tree.tmp / "repo_link", tree.root)
    called = "safe_resolve(<tmp>/repo_link, 'src/config.py')"
    expected = (tree.root / "src" / "config.py").resolve()
    try:
        got = safe_resolve(link_root, "src/config.py")
    except NotImplementedError:
        raise
    except Exception as exc:
        fail(M1, FN, called, hide_tmp(expected, tree.tmp), f"{type(exc).__name__}: {exc}",
             "resolve the root too, so both sides of the comparison are real locations")
    check(got == expected, M1, FN, called, hide_tmp(expected, tree.tmp), hide_tmp(got, tree.tmp),
          "resolve the root too, so both sides of the comparison are real locations")


# ---------------------------------------------------------------- paths that must be refused

@pytest.mark.parametrize("path", ["../outside/secret.txt", "../../etc/passwd", "sub/../../outside/secret.txt",
                                  "missing/../../outside/secret.txt", ".."])
def test_dotdot_escape_raises(safe_resolve, tree, path):
    """'..' that climbs out of the root raises ValueError: first, after a sub-folder, after a folder
    that does not exist, or as the whole path."""
    rejected(safe_resolve, tree, path, "the path climbs out of the repository",
             "resolve the WHOLE joined path (every '..', wherever it stands, even after a folder that does "
             "not exist), then check the result is still inside the resolved root")


def test_absolute_path_outside_raises(safe_resolve, tree):
    """An absolute path elsewhere on the disk raises ValueError."""
    rejected(safe_resolve, tree, str(tree.outside / "secret.txt"), "absolute path outside the repository",
             "root / '/abs/path' IS '/abs/path': joining does not contain anything, the check must")


def test_sibling_with_shared_prefix_raises(safe_resolve, tree):
    """'../repo_evil/x.py' is outside even though '/tmp/repo_evil' starts with '/tmp/repo'."""
    rejected(safe_resolve, tree, "../repo_evil/x.py", "repo_evil is a sibling, not a sub-folder",
             "str(target).startswith(str(root)) is the classic bug; compare path components: "
             "target.is_relative_to(root), which is also true for the root itself ('root in target.parents' "
             "alone refuses '.')")


def test_containment_is_judged_by_components_not_by_text(safe_resolve, tree):
    """A folder elsewhere whose path merely contains the root's path (<tmp>/elsewhere/<the root's whole
    path>/secret.txt) is outside: the root must be where the target's path starts, component by component."""
    root = tree.root.resolve()
    copy = tree.tmp / "elsewhere" / Path(*root.parts[1:])  # the root's path again, below another folder
    copy.mkdir(parents=True)
    (copy / "secret.txt").write_text("OUTSIDE-SENTINEL\n")
    rejected(safe_resolve, tree, str(copy / "secret.txt"),
             "the root's path appears inside this path, but the path starts at <tmp>/elsewhere, outside",
             "`str(root) in str(target)` (or a regular expression, or find()) finds the root's text anywhere in "
             "the path; containment means the target's path STARTS with the root's components: "
             "target.is_relative_to(root)")


def test_sibling_differing_only_in_case_raises(safe_resolve, tree):
    """'../Repo/secret.txt' is outside: on a case-sensitive disk Repo and repo are two folders."""
    sibling = tree.tmp / "Repo"
    try:
        sibling.mkdir()
    except FileExistsError:
        pytest.skip("this file system ignores case (Repo and repo are one folder), so no sibling can differ "
                    "from the repository only in case; the case is covered on Linux")
    (sibling / "secret.txt").write_text("OUTSIDE-SENTINEL\n")
    rejected(safe_resolve, tree, "../Repo/secret.txt", "Repo is a sibling folder, not the repository",
             "compare the real locations exactly: lower() or casefold() makes <tmp>/Repo look like <tmp>/repo, "
             "which is another folder on this disk")


def test_symlinked_file_leading_out_raises(safe_resolve, tree, symlink):
    """A symlink inside the repository that points at a file outside raises ValueError."""
    symlink(tree.root / "innocent.txt", tree.outside / "secret.txt")
    rejected(safe_resolve, tree, "innocent.txt", "the link's real target is outside",
             "resolve the whole path, the link itself included: os.path.normpath, os.path.abspath and "
             "resolving only the parent folder do not follow it; Path.resolve() does")


def test_symlinked_directory_leading_out_raises(safe_resolve, tree, symlink):
    """A directory symlink that leads out makes every path through it an escape."""
    symlink(tree.root / "docs", tree.outside)
    rejected(safe_resolve, tree, "docs/secret.txt", "docs/ is a link to a folder outside",
             "resolve the whole path, not just the last component")


def test_nul_byte_raises(safe_resolve, tree):
    """A NUL byte in the path raises ValueError (not an OS error from deep inside)."""
    rejected(safe_resolve, tree, "src/config.py\x00.txt", "NUL bytes are never part of a real file name",
             "check for '\\x00' before touching the filesystem")


@pytest.mark.parametrize("bad", [None, 42, ["src", "config.py"], b"src/config.py"], ids=["None", "int", "list", "bytes"])
def test_non_string_path_raises(safe_resolve, tree, bad):
    """Tool arguments are untrusted: a path that is not a str raises ValueError."""
    rejected(safe_resolve, tree, bad, "the path is not a string",
             "the model can send any JSON type; check isinstance(rel_path, str) first")


# ---------------------------------------------------------------- hostile repositories and arguments

def test_symlink_loop_raises_value_error(safe_resolve, tree, symlink):
    """A symlink loop inside the repository ('a' -> 'b' -> 'a') is refused with ValueError, not a crash."""
    symlink(tree.root / "a", tree.root / "b")
    symlink(tree.root / "b", tree.root / "a")
    called = "safe_resolve(<tmp>/repo, 'a/x.py')   # a -> b -> a"
    try:
        got = safe_resolve(tree.root, "a/x.py")
    except ValueError:
        return
    except NotImplementedError:
        raise
    except Exception as exc:
        fail(M1, FN, called, "ValueError (the path cannot be resolved: a symlink loop)",
             f"{type(exc).__name__}: {hide_tmp(exc, tree.tmp)}",
             "Path.resolve() raises RuntimeError (OSError on some systems) for a loop: catch both "
             "around resolve() and raise ValueError, the one error dispatch_tool expects from the sandbox")
    # Some Python versions return a loop unresolved instead of raising: still inside, still safe.
    check(isinstance(got, Path) and got.is_relative_to(tree.root.resolve()), M1, FN, called,
          "ValueError, or (where resolve() does not raise on loops) a path inside the repository",
          hide_tmp(got, tree.tmp), "judge the resolved target like any other")


@pytest.mark.parametrize("path", ["x/" * 50_000, "../" * 30_000 + "etc/passwd", "a" * 300_000],
                         ids=["100k chars of folders", "30k '..' climbs", "one 300k-char name"])
def test_very_long_path_raises_before_resolving(safe_resolve, tree, path):
    """A path longer than tools.MAX_PATH_CHARS is refused with ValueError (resolving a megabyte takes ~40 s)."""
    limit = getattr(importlib.import_module("tools"), "MAX_PATH_CHARS", 4096)
    called = f"safe_resolve(<tmp>/repo, {show(path, 60)})   # {len(path):,} characters"
    try:
        got = safe_resolve(tree.root, path)
    except ValueError:
        return
    except NotImplementedError:
        raise
    except Exception as exc:
        fail(M1, FN, called, "ValueError (the path is too long)", f"{type(exc).__name__}: {show(str(exc), 200)}",
             "raise ValueError for every refused path, so dispatch_tool can catch one kind of error")
    fail(M1, FN, called, f"ValueError ({len(path):,} characters is over MAX_PATH_CHARS = {limit:,})",
         f"returned a path of {len(str(got)):,} characters",
         "check len(rel_path) > MAX_PATH_CHARS with the other cheap checks, before resolving: "
         "no real file has such a path, and resolve() on a megabyte of path takes ~40 s")


def test_the_length_is_checked_before_anything_is_resolved(safe_resolve, tree, monkeypatch):
    """An over-long path is refused before Path.resolve() or os.path.realpath() is ever reached (judged by
    the order of the steps, not by a clock: resolving a megabyte of path takes tens of seconds)."""
    limit = getattr(importlib.import_module("tools"), "MAX_PATH_CHARS", 4096)
    path = "sub/" * (limit // 4 + 1)  # over the limit, yet quick to resolve: only the order is judged
    called = f"safe_resolve(<tmp>/repo, 'sub/sub/.../')   # {len(path):,} characters, MAX_PATH_CHARS = {limit:,}"
    reached = []
    real_resolve, real_realpath = Path.resolve, os.path.realpath

    def resolve_spy(self, *args, **kwargs):
        reached.append(f"Path.resolve() of a {len(str(self)):,}-character path")
        return real_resolve(self, *args, **kwargs)

    def realpath_spy(path, *args, **kwargs):
        reached.append(f"os.path.realpath() of a {len(str(path)):,}-character path")
        return real_realpath(path, *args, **kwargs)

    error = None
    with monkeypatch.context() as spy:
        spy.setattr(Path, "resolve", resolve_spy)  # PosixPath and WindowsPath inherit it
        spy.setattr(os.path, "realpath", realpath_spy)
        try:
            got = safe_resolve(tree.root, path)
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001  (judged below)
            error, got = exc, None
    check(isinstance(error, ValueError), M1, FN, called, "ValueError (the path is over MAX_PATH_CHARS)",
          f"{type(error).__name__}: {show(str(error), 200)}" if error else f"returned {hide_tmp(got, tree.tmp)}",
          "raise ValueError when len(rel_path) > MAX_PATH_CHARS")
    check(not reached, M1, FN, called, "ValueError before anything is resolved (Path.resolve and os.path.realpath "
          "never called)", f"ValueError, but only after: {'; '.join(reached[:2])}",
          "check the cheap things first (type, NUL, length), THEN resolve: resolve() walks every component of "
          "the path, and on a megabyte of path that takes ~40 s (the docstring: 'checked before resolving')")
