"""S2 - A write tool, with care (stretch): edit_file, an exact and unique replacement.

You write stretch.plan_edit(repo_root, path, old_string, new_string) in code/stretch.py: it checks
one edit and computes the new text and its diff, and writes nothing. Applying, the dry run and the
confirmation are provided. Every test edits a private copy of the fixture repository.
Opt in with `python -m pytest --stretch` (unlocks once M5's tests pass).
"""

from __future__ import annotations

import json


from harness.milestones import BY_ID
from harness.scripted import ScriptedModel, answer, call, turn
from harness.strict_provider import StrictProvider
from harness.teach import check, learner, show
from stretch_support import main

S2 = BY_ID["S2"]
FN = "stretch.plan_edit"
SERVICE = "shop/service.py"
QUESTION = "Fix order_total: it raises AttributeError."
FIX = {"path": SERVICE, "old_string": "item.cost", "new_string": "item.price"}


def tool_error():
    return __import__("tools").ToolError


def refusal(plan_edit, root, path, old="x", new="y"):
    """(kind, message) of what plan_edit raised, or ('returned', edit) if it raised nothing."""
    try:
        return "returned", plan_edit(root, path, old, new)
    except ValueError as exc:
        return "ValueError", str(exc)
    except tool_error() as exc:
        return "ToolError", str(exc)


def fixing_model(*extra_turns):
    """A model that reads shop/service.py, asks for the fix, then answers."""
    return ScriptedModel([
        turn(call("read_file", {"path": SERVICE}), content="Reading the service."),
        turn(call("edit_file", FIX), content="Replace item.cost with item.price."),
        *extra_turns,
        answer("subtotal used item.cost; Item defines price (shop/models.py:11)."),
    ])


def tool_results(model):
    """Every tool message the model was sent, by the name of the call it answers."""
    last = model.requests[-1]
    names = {c["id"]: c["function"]["name"] for m in last if m.get("role") == "assistant"
             for c in m.get("tool_calls") or []}
    return [(names.get(m["tool_call_id"]), m["content"]) for m in last if m.get("role") == "tool"]


# ---------------------------------------------------------------- plan_edit on its own

def test_plan_edit_replaces_the_one_exact_match_and_writes_nothing(repo_copy):
    """plan_edit returns the new text and a unified diff, and the file on disk stays as it was."""
    plan_edit = learner(FN)
    before = (repo_copy / SERVICE).read_bytes()
    called = f"plan_edit(<copy of fixture_repo>, {SERVICE!r}, 'item.cost', 'item.price')"
    edit = plan_edit(repo_copy, SERVICE, "item.cost", "item.price")
    got = {"path": getattr(edit, "path", None), "diff": getattr(edit, "diff", None)}
    new_text = getattr(edit, "new_text", "") or ""
    diff = got["diff"] or ""
    ok = (got["path"] == SERVICE and "sum(item.price * item.quantity" in new_text and "item.cost" not in new_text
          and getattr(edit, "old_text", None) == before.decode("utf-8")
          and f"--- a/{SERVICE}" in diff and "-    return sum(item.cost" in diff and "+    return sum(item.price" in diff)
    check(ok, S2, FN, called,
          "Edit(path='shop/service.py', old_text=<the file>, new_text=<item.price instead>, diff=<unified diff>)",
          show(got, 500), "read_text gives old_text; one str.replace gives new_text; unified_diff(shown, old, new)")
    check((repo_copy / SERVICE).read_bytes() == before, S2, FN, called, "the file unchanged on disk",
          "the file was modified", "plan_edit only plans: applying is provided (apply_edit)")


def test_old_string_must_occur_exactly_once(repo_copy):
    """No match, several matches, an empty old_string or no change: a ToolError that says what to do."""
    plan_edit = learner(FN)
    before = (repo_copy / SERVICE).read_bytes()
    cases = {  # old_string, new_string -> words the message must contain
        ("item.nope", "item.price"): "not found",
        ("amount", "total"): "3 times",           # service.py uses `amount` on three lines
        ("", "item.price"): "empty",
        ("item.cost", "item.cost"): "same",
    }
    got = {f"{old!r} -> {new!r}": refusal(plan_edit, repo_copy, SERVICE, old, new) for old, new in cases}
    wrong = {k: v for (k, v), words in zip(got.items(), cases.values())
             if v[0] != "ToolError" or words not in v[1]}
    check(not wrong, S2, FN, f"plan_edit(root, {SERVICE!r}, <old_string>, <new_string>) for {list(got)}",
          "ToolError each time, saying: 'not found' / '3 times' / 'empty' / 'same'", show(wrong, 600),
          "count the matches: exactly one, or tell the model how many and how to make it unique; "
          "plan_edit's contract names the words each refusal must use")
    check((repo_copy / SERVICE).read_bytes() == before, S2, FN, "the refused edits above",
          "the file unchanged", "the file was modified", "refuse before computing anything")


def test_tests_secrets_and_escapes_are_refused(repo_copy, tmp_path):
    """Test files, excluded files (.env) and paths outside the repository are refused, never edited."""
    plan_edit = learner(FN)
    (repo_copy / "conftest.py").write_text("import pytest\n")
    (repo_copy / "shop" / "order_test.py").write_text("def test_x():\n    assert True\n")
    (tmp_path / "outside.py").write_text("x = 1\n")
    tests_rule = "tests are the specification"
    cases = {  # path -> (exception, words the message must contain)
        "tests/test_service.py": ("ToolError", tests_rule),
        "shop/../tests/test_service.py": ("ToolError", tests_rule),
        "conftest.py": ("ToolError", tests_rule),
        "shop/order_test.py": ("ToolError", tests_rule),
        ".env": ("ToolError", "excluded"),
        "../outside.py": ("ValueError", ""),
        str(tmp_path / "outside.py"): ("ValueError", ""),
    }
    snapshot = {p: p.read_bytes() for p in [*repo_copy.rglob("*"), tmp_path / "outside.py"] if p.is_file()}
    got = {path: refusal(plan_edit, repo_copy, path, "x", "y") for path in cases}
    wrong = {p: v for p, v in got.items() if v[0] != cases[p][0] or cases[p][1] not in str(v[1])}
    check(not wrong, S2, FN, "plan_edit(root, <path>, 'x', 'y') for " + ", ".join(cases),
          "ToolError 'the tests are the specification ...' for the four test files, ToolError for .env "
          "(from resolve_visible), ValueError for both escapes", show(wrong, 700),
          "tools.resolve_visible first, then is_test_path on tools.relative_parts(root, target)")
    changed = [str(p) for p, data in snapshot.items() if p.read_bytes() != data]
    check(not changed, S2, FN, "the refused edits above", "no file changed", show(changed), "refuse before reading")


def test_a_symlink_to_a_test_file_is_refused(repo_copy, symlink):
    """An in-repo symlink that resolves to a test file is judged by where it leads: refused."""
    plan_edit = learner(FN)
    symlink(repo_copy / "shop" / "alias.py", repo_copy / "tests" / "test_service.py")
    kind, message = refusal(plan_edit, repo_copy, "shop/alias.py", "order_total", "total")
    check(kind == "ToolError" and "tests are the specification" in str(message), S2, FN,
          "plan_edit(root, 'shop/alias.py' -> tests/test_service.py, ...)",
          "ToolError: ... the tests are the specification ...", f"{kind}: {show(message)}",
          "judge the resolved path's parts, not the spelling the model sent")


# ---------------------------------------------------------------- edit_file inside the copilot

def test_a_dry_run_prints_a_diff_and_changes_nothing(copilot, capsys, repo_copy):
    """With --allow-edits the model is offered edit_file; the dry run shows the diff and writes nothing."""
    plan_edit = learner(FN)
    expected = plan_edit(repo_copy, SERVICE, "item.cost", "item.price").diff
    before = {p: p.read_bytes() for p in repo_copy.rglob("*") if p.is_file()}
    plain = fixing_model()
    main(copilot, capsys, ["--repo", str(repo_copy), QUESTION], StrictProvider(plain))
    offered = sorted({name for tools in plain.tools_seen for name in (t["function"]["name"] for t in tools)})
    check("edit_file" not in offered, S2, "copilot.main", "copilot.main([... QUESTION]) without --allow-edits",
          "edit_file never offered", f"offered {offered}", "a tool the user did not enable is never described to the model")
    model = fixing_model()
    code, out, err = main(copilot, capsys, ["--repo", str(repo_copy), "--allow-edits", QUESTION], StrictProvider(model))
    called = "copilot.main(['--allow-edits', QUESTION], complete=<read, edit_file item.cost -> item.price, answer>)"
    results = dict(tool_results(model))
    ok = (code == 0 and "edit_file" in [t["function"]["name"] for t in model.tools_seen[0]]
          and str(results.get("edit_file", "")).startswith("Dry run:") and expected in results.get("edit_file", ""))
    check(ok, S2, FN, called, "exit 0; edit_file offered; its observation 'Dry run: ...' with the diff plan_edit made",
          f"exit {code}, edit_file result {show(results.get('edit_file'), 400)}, stderr {show(err, 200)}",
          "edit_file_tool calls plan_edit, then shows edit.diff without writing")
    shown = [line for line in expected.splitlines() if line.startswith(("-    ", "+    "))]
    changed = [str(p.relative_to(repo_copy)) for p, data in before.items() if p.read_bytes() != data]
    check(all(line in out for line in shown) and "dry run" in out and not changed, S2, FN, called,
          f"the diff lines {shown} printed under 'Edits:', and no file changed",
          f"changed {changed}; stdout {show(out, 600)}", "a dry run shows the change and leaves the repository alone")


def test_applying_without_a_terminal_is_refused_unless_yes(copilot, capsys, repo_copy):
    """--apply needs a confirmation: with --json (or no terminal) it is refused; --yes confirms."""
    plan_edit = learner(FN)
    fixed = plan_edit(repo_copy, SERVICE, "item.cost", "item.price").new_text
    before = (repo_copy / SERVICE).read_bytes()
    model = fixing_model()
    code, out, _ = main(copilot, capsys, ["--repo", str(repo_copy), "--allow-edits", "--apply", "--json", QUESTION],
                        StrictProvider(model))
    edits = json.loads(out).get("edits") if code in (0, 1) else None
    result = dict(tool_results(model)).get("edit_file", "")
    check((repo_copy / SERVICE).read_bytes() == before and result.startswith("Error:")
          and [e["status"] for e in edits or []] == ["unconfirmed"], S2, FN,
          "copilot.main(['--allow-edits', '--apply', '--json', QUESTION]) with no terminal to ask",
          "the file unchanged, the model told 'Error: ... confirmation ...', JSON edits status 'unconfirmed'",
          f"edit_file result {show(result, 300)}, edits {show(edits, 300)}",
          "nobody can confirm, so nothing is written: no channel to ask means no")
    model = fixing_model()
    code, out, _ = main(copilot, capsys, ["--repo", str(repo_copy), "--allow-edits", "--apply", "--yes", QUESTION],
                        StrictProvider(model))
    result = dict(tool_results(model)).get("edit_file", "")
    now = (repo_copy / SERVICE).read_bytes().decode("utf-8")
    check(code == 0 and now == fixed and result.startswith("Applied:"), S2, FN,
          "copilot.main(['--allow-edits', '--apply', '--yes', QUESTION])",
          "exit 0, the observation 'Applied: ...', and shop/service.py now equal to plan_edit's new_text",
          f"exit {code}, result {show(result, 300)}, file now {show(now, 300)}",
          "new_text must be the whole file with exactly one replacement")


def test_a_refusal_reaches_the_model_as_an_observation(copilot, capsys, repo_copy):
    """An edit of the tests is refused as an 'Error: ...' observation; the run goes on and answers."""
    plan_edit = learner(FN)
    kind, _ = refusal(plan_edit, repo_copy, "tests/test_service.py", "== 7.2", "== 0")
    check(kind == "ToolError", S2, FN, "plan_edit(root, 'tests/test_service.py', '== 7.2', '== 0')",
          "ToolError (the tests are the specification)", kind, "is_test_path(...) of the resolved path")
    before = (repo_copy / "tests" / "test_service.py").read_bytes()
    model = ScriptedModel([
        turn(call("edit_file", {"path": "tests/test_service.py", "old_string": "== 7.2", "new_string": "== 0"}),
             content="Make the test pass."),
        answer("I may not change the tests; the bug is item.cost in shop/service.py:9."),
    ])
    code, out, _ = main(copilot, capsys, ["--repo", str(repo_copy), "--allow-edits", "--apply", "--yes", QUESTION],
                        StrictProvider(model))
    result = dict(tool_results(model)).get("edit_file", "")
    check(code == 0 and result.startswith("Error:") and "tests are the specification" in result
          and (repo_copy / "tests" / "test_service.py").read_bytes() == before, S2, FN,
          "copilot.main(['--allow-edits', '--apply', '--yes', ...], complete=<edits tests/test_service.py, then answers>)",
          "exit 0; the model reads 'Error: ... the tests are the specification ...'; the test file unchanged",
          f"exit {code}, edit_file result {show(result, 300)}", "a refusal is data for the model, not a crash")
