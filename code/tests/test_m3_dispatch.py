"""M3 - Dispatch: tools.dispatch_tool routes a call to the right tool and never raises.

Whatever it returns becomes the model's observation, so every failure must come back as a
readable string starting with "Error:".
"""

from __future__ import annotations

import importlib

import pytest

from harness.paths import SENTINEL, hide_tmp
from harness.milestones import BY_ID
from harness.teach import check, fail, learner, show

M3 = BY_ID["M3"]
FN = "tools.dispatch_tool"


@pytest.fixture
def dispatch():
    return learner(FN)


def run(dispatch, name, args, root, tmp=None):
    called = f"dispatch_tool({name!r}, {show(args, 120)}, <repo>)"
    if tmp is not None:
        called = hide_tmp(called, tmp)
    try:
        result = dispatch(name, args, root)
    except NotImplementedError:
        raise
    except Exception as exc:
        fail(M3, FN, called, "a string (dispatch_tool never raises)", f"raised {type(exc).__name__}: {exc}",
             "wrap the tool call in try/except and return 'Error: ...' so the model can react")
    check(isinstance(result, str), M3, FN, called, "a str", f"{type(result).__name__}: {show(result)}",
          "the model reads text: return the tool's string, or an 'Error: ...' string")
    return called, result


def expect_error(dispatch, name, args, root, why, hint, tmp=None, mentions=()):
    called, result = run(dispatch, name, args, root, tmp)
    check(result.startswith("Error:"), M3, FN, called, f"a string starting with 'Error:' ({why})", show(result), hint)
    for word in mentions:
        check(word in result, M3, FN, called, f"an error that mentions {word!r} so the model knows what to fix",
              show(result), hint)
    return result


# ---------------------------------------------------------------- routing

def test_read_file_dispatch_returns_the_fixture_content(dispatch, fixture_repo):
    """read_file is routed to tools.read_file and returns the file's numbered lines."""
    called, result = run(dispatch, "read_file", {"path": "shop/models.py"}, fixture_repo)
    check("price: float" in result and "class Item" in result, M3, FN, called,
          "the text of shop/models.py (it defines class Item with price: float)", show(result),
          "look the name up in TOOL_FUNCTIONS and call fn(repo_root, **args)")


def test_line_range_arguments_are_passed_through(dispatch, fixture_repo):
    """Optional arguments (start_line, end_line) reach the tool."""
    called, result = run(dispatch, "read_file", {"path": "shop/service.py", "start_line": 7, "end_line": 9}, fixture_repo)
    check("showing lines 7-9" in result and "def subtotal" in result and "import" not in result, M3, FN, called,
          "only lines 7-9 of shop/service.py", show(result), "pass every argument on: fn(repo_root, **args)")


def test_list_directory_dispatch(dispatch, fixture_repo):
    """list_directory is routed and shows the folder's entries."""
    called, result = run(dispatch, "list_directory", {"path": "shop"}, fixture_repo)
    check("models.py" in result and "service.py" in result, M3, FN, called, "a listing with models.py and service.py",
          show(result), "route 'list_directory' to tools.list_directory")


def test_search_code_dispatch(dispatch, fixture_repo):
    """search_code is routed and reports path:line: text."""
    called, result = run(dispatch, "search_code", {"query": "item.cost"}, fixture_repo)
    check("shop/service.py:9:" in result, M3, FN, called, "a hit 'shop/service.py:9: ...'", show(result),
          "route 'search_code' to tools.search_code")


# ---------------------------------------------------------------- bad calls come back as text

def test_unknown_tool_returns_error_string(dispatch, fixture_repo):
    """An unknown tool name is an 'Error:' string that lists the real tools."""
    expect_error(dispatch, "delete_file", {"path": "shop/models.py"}, fixture_repo, "unknown tool",
                 "models invent tool names: answer with the list of tools that exist", mentions=("read_file",))


@pytest.mark.parametrize("args", [["shop/models.py"], "shop/models.py", None], ids=["list", "string", "None"])
def test_arguments_that_are_not_an_object(dispatch, fixture_repo, args):
    """Arguments that are not a dict give an 'Error:' string, not a TypeError."""
    expect_error(dispatch, "read_file", args, fixture_repo, "arguments must be a JSON object",
                 "check isinstance(args, dict) before calling fn(repo_root, **args)")


def test_missing_argument_is_named(dispatch, fixture_repo):
    """A missing required argument gives an error that names it."""
    expect_error(dispatch, "read_file", {}, fixture_repo, "path is required",
                 "check_arguments(name, args) compares the call with TOOL_SCHEMAS", mentions=("path",))


@pytest.mark.parametrize("args", [{"path": 42}, {"path": "shop/models.py", "start_line": "5"}], ids=["path=42", "start_line='5'"])
def test_wrong_argument_type(dispatch, fixture_repo, args):
    """A wrongly typed argument gives an 'Error:' string."""
    expect_error(dispatch, "read_file", args, fixture_repo, "wrong type",
                 "check_arguments(name, args) reports wrong types; return its message after 'Error: '")


def test_root_never_comes_from_arguments(dispatch, tree):
    """A 'repo_root' smuggled into the arguments is refused and never used."""
    args = {"path": "secret.txt", "repo_root": str(tree.outside)}
    result = expect_error(dispatch, "read_file", args, tree.root, "repo_root is not a tool argument",
                          "the root is bound by your application; an unexpected argument is an error", tmp=tree.tmp)
    check("OUTSIDE-SENTINEL" not in result, M3, FN, "dispatch_tool('read_file', {..., 'repo_root': <outside>}, <repo>)",
          "no content from outside the repository", show(result), "never read repo_root from args")


@pytest.mark.parametrize("path", ["../outside/secret.txt", "../../etc/passwd"])
def test_sandbox_escape_becomes_error_string(dispatch, tree, path):
    """safe_resolve's ValueError reaches the model as an 'Error:' string, and nothing leaks."""
    result = expect_error(dispatch, "read_file", {"path": path}, tree.root, "the path leaves the repository",
                          "catch ValueError from the sandbox and return 'Error: ' + str(exc)", tmp=tree.tmp)
    check("OUTSIDE-SENTINEL" not in result, M3, FN, f"dispatch_tool('read_file', {{'path': {path!r}}}, <repo>)",
          "no content from outside", show(result), "the tool must refuse before it opens anything")


@pytest.mark.parametrize("name,args", [
    ("read_file", {"path": ".env"}),
    ("read_file", {"path": "shop/../.env"}),
    ("read_file", {"path": "./.env/."}),
    ("search_code", {"query": "SENTINEL"}),
    ("search_code", {"query": "SHOP_API_KEY"}),
    ("list_directory", {"path": "."}),
], ids=["read .env", "read shop/../.env", "read ./.env/.", "search SENTINEL", "search SHOP_API_KEY", "list ."])
def test_secret_never_appears(dispatch, fixture_repo, name, args):
    """The fixture's .env sentinel never appears in any tool's output."""
    called, result = run(dispatch, name, args, fixture_repo)
    check(SENTINEL not in result, M3, FN, called, "output without the .env secret", show(result),
          "the provided tools refuse .env after resolving; make sure you call them, not open() yourself")


def test_symlink_to_secret_is_refused(dispatch, repo_copy, symlink):
    """A symlink inside the repository that points at .env is refused like .env itself."""
    symlink(repo_copy / "notes.txt", repo_copy / ".env")
    called, result = run(dispatch, "read_file", {"path": "notes.txt"}, repo_copy)
    check(result.startswith("Error:") and SENTINEL not in result, M3, FN, called,
          "an 'Error:' string, no secret", show(result), "route through the provided read_file, which judges the resolved path")


def test_exception_inside_a_tool_becomes_error_string(dispatch, fixture_repo, monkeypatch):
    """A tool that crashes (a bug, a disk error) gives an 'Error:' string; the run goes on."""
    tools = importlib.import_module("tools")

    def broken(repo_root, path, start_line=1, end_line=None):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(tools, "read_file", broken)
    monkeypatch.setitem(tools.TOOL_FUNCTIONS, "read_file", broken)
    expect_error(dispatch, "read_file", {"path": "shop/models.py"}, fixture_repo, "the tool raised RuntimeError",
                 "catch Exception around the tool call too, and say which tool failed", mentions=("disk on fire",))


@pytest.mark.parametrize("path,why", [("shop", "a directory"), ("shop/nothing_here.py", "missing file")])
def test_tool_refusals_are_error_strings(dispatch, fixture_repo, path, why):
    """read_file on a directory or a missing file is an 'Error:' string the model can act on."""
    expect_error(dispatch, "read_file", {"path": path}, fixture_repo, why,
                 "ToolError is the provided tools' way of refusing; catch it like ValueError")


@pytest.mark.parametrize("name", [["read_file"], {"name": "read_file"}, 42, None],
                         ids=["list (unhashable)", "dict (unhashable)", "int", "None"])
def test_non_string_tool_name_is_an_error_string(dispatch, fixture_repo, name):
    """A tool name that is not a string (even an unhashable list) is an 'Error:' string, not a TypeError."""
    expect_error(dispatch, name, {"path": "shop/models.py"}, fixture_repo, "the name is not a tool",
                 "TOOL_FUNCTIONS.get(['read_file']) raises TypeError (a list cannot be a dict key): "
                 "check isinstance(name, str) before looking it up", mentions=("read_file",))


# ---------------------------------------------------------------- only the three tools, only their arguments

@pytest.mark.parametrize("name", ["_lexists_in", "resolve_visible", "open_in_root", "check_arguments"])
def test_only_the_listed_tools_can_be_called(dispatch, fixture_repo, monkeypatch, name):
    """A module-level function that is not in TOOL_FUNCTIONS is an unknown tool: it is never called."""
    tools = importlib.import_module("tools")
    ran = []
    monkeypatch.setattr(tools, name, lambda *a, **k: ran.append((a, k)) or "THE HELPER RAN", raising=False)
    called, result = run(dispatch, name, {"name": "/etc/passwd"}, fixture_repo)
    check(not ran and result.startswith("Error:") and "read_file" in result, M3, FN, called,
          f"'Error: unknown tool ...' listing the real tools, and {name} never called",
          f"{name} was called with {show(ran)}; returned {show(result)}" if ran else show(result),
          "look the name up in TOOL_FUNCTIONS only: globals().get(name) or getattr(tools, name) lets the model "
          "call any helper in the module (lesson: Section 9, 'Any function is a tool')")


def test_unexpected_argument_names_the_real_ones(dispatch, fixture_repo):
    """An argument the tool does not take gives an error naming the arguments it does take."""
    result = expect_error(dispatch, "read_file", {"path": "shop/models.py", "file": "shop/models.py"}, fixture_repo,
                          "read_file takes path, start_line, end_line",
                          "call check_arguments(name, args) before the tool: it names the arguments the schema declares "
                          "(lesson: Section 9, 'Arguments not checked against the schema')", mentions=("file", "start_line", "end_line"))
    check("unexpected keyword" not in result, M3, FN, "dispatch_tool('read_file', {'path': ..., 'file': ...}, <repo>)",
          "check_arguments' sentence, not Python's TypeError", show(result),
          "return 'Error: ' + check_arguments(name, args) before calling the tool")


def test_a_call_that_was_not_run_says_why(dispatch, fixture_repo, monkeypatch):
    """A call the completion wrapper refused (too many in one turn) is answered with its reason, not run."""
    tools = importlib.import_module("tools")
    key = getattr(tools, "NOT_RUN_KEY", "_not_run")
    why = "not run: this turn asked for 14 tool calls and at most 12 are run per turn; ask again for the ones you still need"
    ran = []
    monkeypatch.setitem(tools.TOOL_FUNCTIONS, "read_file", lambda root, **args: ran.append(args) or "RAN")
    called, result = run(dispatch, "read_file", {key: why}, fixture_repo)
    check(result.startswith("Error:") and why in result and not ran, M3, FN, called,
          f"'Error: {why}' (the reason check_arguments returns), and read_file not run", show(result),
          "check_arguments(name, args) returns that reason for a call marked not-run: return it after 'Error: '")


# ---------------------------------------------------------------- how the tool is called

def test_arguments_are_passed_by_name_in_any_order(dispatch, fixture_repo):
    """The model may write its JSON keys in any order: {"end_line", "start_line", "path"} is the same call."""
    args = {"end_line": 9, "start_line": 7, "path": "shop/service.py"}
    called, result = run(dispatch, "read_file", args, fixture_repo)
    check("showing lines 7-9" in result and "def subtotal" in result, M3, FN, called,
          "lines 7-9 of shop/service.py, as with the keys in the schema's order", show(result),
          "pass the arguments by name: fn(repo_root, **args). fn(repo_root, *args.values()) passes them by "
          "position, in whatever order the model wrote its keys (here end_line became the path; lesson: Section 9, 'Arguments passed by position')")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, raised by a tool while it runs (a subclass, so pytest itself is not interrupted)."""


def test_ctrl_c_inside_a_tool_is_not_an_observation(dispatch, fixture_repo, monkeypatch):
    """KeyboardInterrupt inside a tool goes up through dispatch_tool: Ctrl-C stops the run, it is no tool error."""
    tools = importlib.import_module("tools")

    def interrupted(repo_root, path, start_line=1, end_line=None):
        raise Interrupted("Ctrl-C while reading")

    monkeypatch.setattr(tools, "read_file", interrupted)
    monkeypatch.setitem(tools.TOOL_FUNCTIONS, "read_file", interrupted)
    called = "dispatch_tool('read_file', {'path': 'shop/models.py'}, <repo>)   # the tool raises KeyboardInterrupt"
    try:
        result = dispatch("read_file", {"path": "shop/models.py"}, fixture_repo)
    except KeyboardInterrupt:
        return
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001
        fail(M3, FN, called, "KeyboardInterrupt, unchanged", f"raised {type(exc).__name__}: {exc}",
             "let KeyboardInterrupt pass through untouched: catch Exception only")
    fail(M3, FN, called, "KeyboardInterrupt raised out of dispatch_tool (the user pressed Ctrl-C: the run stops)",
         f"returned {show(result)}",
         "catch Exception, never BaseException or a bare `except:`: those also catch KeyboardInterrupt and "
         "SystemExit, so Ctrl-C becomes an observation and the run goes on (lesson: Section 9, 'Catching too much')")
