"""Course checks for what the grader judges outside the learner's process, and what it refuses to read.

The battery (rubric/grading/battery.py, attacks.py): names drawn per run, climbs through folders
that exist, innocently named links, a case sibling, non-tool names asked for as tools, and
parse_tool_calls and run_agent against their contracts, each judged by the grader. Integrity:
shadowing modules refused by name, an added import not taken for a changed provided function.
And the parsers of submission content against the three RecursionError shapes. A few seconds each;
the ones that run learner code need bubblewrap and skip, with the reason, where it cannot run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import battery, grader, learner_code, runner, sandbox, synthetic, workspace  # noqa: E402
from mutants import MUTANTS  # noqa: E402

BWRAP_WHY = sandbox.choose("bubblewrap")[1]
needs_bwrap = pytest.mark.skipif(bool(BWRAP_WHY), reason=f"bubblewrap cannot run here: {BWRAP_WHY}")


def test_a_shadowing_module_is_refused_by_name_and_never_reaches_the_lab(tmp_path):
    sub = synthetic.make(tmp_path / "shadow", code="reference")
    for name in ("yaml.py", "requests.py", "sitecustomize.py", "json.py", "evil.pth"):
        (sub / "code" / name).write_text("raise SystemExit('forged')\n")
    (sub / "code" / "my_helpers.py").write_text("X = 1\n")
    integ = learner_code.integrity(sub)
    refused = dict(integ["refused_modules"])
    assert {"code/sitecustomize.py", "code/json.py", "code/evil.pth"} <= set(refused), refused
    if "yaml" in workspace.installed_modules():  # PyYAML comes with litellm
        assert "code/yaml.py" in refused and "installed package" in refused["code/yaml.py"]
    assert "code/my_helpers.py" in integ["not_shipped"] and "code/my_helpers.py" not in refused
    lab = tmp_path / "lab"
    workspace.build_lab(lab, sub / "code")
    placed = {p.name for p in (lab / "code").iterdir()}
    assert "my_helpers.py" in placed and not placed & {"yaml.py", "sitecustomize.py", "json.py", "evil.pth"}


def test_an_added_import_is_not_a_change_to_provided_code(tmp_path):
    sub = synthetic.make(tmp_path / "imports", code="reference")
    path = sub / "code" / "tools.py"
    path.write_text("import textwrap  # mine\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    entry = learner_code.integrity(sub)["modules"]["tools.py"]
    assert entry["changed"] == [] and entry["added"] == ["import textwrap"], entry


@pytest.mark.skipif(os.name == "nt", reason="a 1,000-deep chain exceeds Windows' 260-character paths")
def test_the_three_recursion_shapes_do_not_crash_the_parsers(tmp_path):
    from grading import documents
    sub = tmp_path / "deep"
    (sub / "code").mkdir(parents=True)
    (sub / "runs").mkdir()
    (sub / "runs" / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    deep_expr = "X = " + "+".join(["1"] * 100_000) + "\n"
    (sub / "code" / "tools.py").write_text(deep_expr + (workspace.LAB_ROOT / "code" / "tools.py").read_text())
    chain = sub
    for _ in range(1000):   # one level at a time: mkdir(parents=True) itself recurses
        chain = chain / "d"
        chain.mkdir()
    (chain / "bottom.txt").write_text("x")
    notes = workspace.copy_submission(sub, tmp_path / "copy")
    assert any("deeper than" in why for _, why in notes.skipped)
    learner_code.integrity(tmp_path / "copy")         # does not raise
    workspace.build_lab(tmp_path / "lab", tmp_path / "copy" / "code")
    unreadable: list = []
    grader._guarded(unreadable, "saved runs", [], documents.saved_runs, tmp_path / "copy")
    workspace.remove_tree(sub)
    assert not sub.exists(), "a 1,000-deep tree must be removable"


def test_battery_names_are_drawn_per_run_and_never_the_guiding_tests(tmp_path):
    first, second = battery.build(tmp_path / "a"), battery.build(tmp_path / "b")
    assert first["repo_name"] != second["repo_name"] and first["outside"].name != second["outside"].name
    for p in battery.probes(first):   # the guiding tests' fixture names: a blocklist of them must not pass
        assert not any(w in f"{p[3]} {p[4]}" for w in ("outside", "secret", "repo_evil", "repo2")), p


def test_judged_outside_a_climb_a_link_and_a_case_sibling_lead_out(tmp_path):
    t = battery.build(tmp_path)
    repo, parent = t["repo"], t["parent"]
    out = str(t["outside"] / t["target"])
    assert battery.judge_path(f"{repo}/{t['sub']}/../../{t['outside'].name}/{t['target']}", repo, parent) == "outside"
    if t["links"][t["vendor"]]:
        assert battery.judge_path(f"{repo}/{t['vendor']}/{t['target']}", repo, parent) == "outside"
    if t["case_sibling"] is not None:
        assert battery.judge_path(str(t["case_sibling"] / t["file"]), repo, parent) == "outside"
    assert battery.judge_path(f"{repo}/{t['sub']}/../{t['file']}", repo, parent) == "inside"
    assert battery.judge_resolve({"returned": out, "type": "PosixPath"}, t)[0] == "outside"
    assert battery.judge_dispatch({"returned": "/x/y", "type": "str"}, t, "non-tool names")[0] == "leaked"


BLOCKLIST = '''
if not isinstance(rel_path, str) or "\\x00" in rel_path:
    raise ValueError("bad path")
for word in ("outside", "secret", "repo_evil", "repo2", "Repo"):
    if word in rel_path:
        raise ValueError("blocked")
if rel_path.startswith(("../", "/", "..\\\\")) or rel_path == "..":
    raise ValueError("blocked")
return Path(repo_root) / rel_path
'''
GLOBALS_DISPATCH = '''
fn = globals().get(name) if isinstance(name, str) else None
if fn is None or not isinstance(args, dict):
    return "Error: unknown tool"
try:
    return str(fn(repo_root, **{k: v for k, v in args.items() if k != "repo_root"}))
except Exception as exc:
    return f"Error: {exc}"
'''


@needs_bwrap
def test_the_battery_catches_a_blocklist_of_the_guiding_tests_names_and_a_globals_dispatch(tmp_path):
    sub = synthetic.make(tmp_path / "gamer", code="reference")
    synthetic.plant(sub / "code" / "tools.py", "safe_resolve", BLOCKLIST)
    synthetic.plant(sub / "code" / "tools.py", "dispatch_tool", GLOBALS_DISPATCH)
    lab, home, tree = tmp_path / "lab", tmp_path / "home", tmp_path / "tree"
    home.mkdir()
    tree.mkdir()
    workspace.build_lab(lab, sub / "code")
    box = sandbox.Box("bubblewrap", readonly=[lab, tree], writable=[home])
    b = battery.run_battery(lab, home, runner.DEFAULT_MEMORY_MB, box=box, base=tree)
    status = {k: v["status"] for k, v in b.classes().items()}
    assert status["sub-folder climbs"] == "leaked" and status["innocent links"] == "leaked", status
    assert status["non-tool names"] == "leaked", b.classes()["non-tool names"]
    assert b.parse_summary()["correct"] == b.parse_summary()["of"] > 5   # the other functions are untouched


@needs_bwrap
def test_parse_and_loop_are_judged_outside_against_their_contracts(tmp_path):
    sub = synthetic.make(tmp_path / "loops", code="reference")
    for name in ("bad JSON raises", "no assistant turn before results"):
        m = next(m for m in MUTANTS if m.name == name)
        synthetic.plant(sub / "code" / m.module, m.function, m.body)
    lab, home, tree = tmp_path / "lab", tmp_path / "home", tmp_path / "tree"
    home.mkdir()
    tree.mkdir()
    workspace.build_lab(lab, sub / "code")
    b = battery.run_battery(lab, home, runner.DEFAULT_MEMORY_MB, box=sandbox.Box("bubblewrap", readonly=[lab, tree],
                            writable=[home]), base=tree)
    parsed, looped = b.parse_summary(), b.loop_summary()
    assert any("malformed JSON: crashed" in w for w in parsed["wrong"]), parsed
    assert any("two calls in one turn" in w and "expected assistant(2 calls)" in w for w in looped["wrong"]), looped
    assert any(p["probe"] == "a model that never stops" and p["result"] == "correct" for p in b.looping), b.looping


def test_a_forged_pass_after_a_real_failure_keeps_the_failure():
    from grading import board
    node = "code/tests/test_m1_sandbox.py::test_x"
    lines = [json.dumps({"nodeid": node, "event": "setup", "outcome": "skipped", "message": "forged"}),
             json.dumps({"nodeid": node, "event": "start"}),
             json.dumps({"nodeid": node, "event": "call", "outcome": "failed", "message": "got: leak"}),
             json.dumps({"nodeid": node, "event": "call", "outcome": "passed", "message": ""}),   # from atexit
             "[" * 100_000, json.dumps(["not", "a", "record"]), json.dumps({"nodeid": 5, "event": "call"})]
    tests = board._from_log(lines)
    assert [(t.nodeid, t.outcome) for t in tests] == [(node, "failed")]
