"""Course checks for rubric/grade.py: synthetic submissions built from the lab, graded end to end.

Cost: one full grading of the reference (shared by the tests below through a module fixture),
and about ten --quick gradings (M1-M4 tests only) of a few seconds each.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:  # appended, so the implementation under test stays first on the path
    sys.path.append(str(RUBRIC))

from grading import criteria, decisions, grader, runner, sandbox, synthetic, workspace  # noqa: E402
from classroom import own_bodies  # noqa: E402
from mutants import MUTANTS  # noqa: E402

# These checks are about the verdicts; test_grade_sandbox.py is about the isolation. Where no
# sandbox can run (macOS, Windows, no bubblewrap), they grade without one, as --no-sandbox does.
SANDBOX = "auto" if sandbox.choose("auto")[0] else "none"
NO_SANDBOX_FLAG = [] if SANDBOX == "auto" else ["--no-sandbox"]

LEVEL_RANK = {level: i for i, level in enumerate(reversed(criteria.LEVELS))}   # Missing 0 ... Exemplary 3
CODE_CRITERIA = (2, 3)
DOC_CRITERIA = (4, 5, 6, 7)
# One planted mistake per learner function, and the criterion it belongs to.
PLANTED = {"string-prefix containment": 3, "root taken from the arguments": 3,
           "bad JSON raises": 2, "no assistant turn before results": 2}


def levels(result) -> dict:
    return {c["number"]: c["level"] for c in result["criteria"]}


def rank(result, number) -> int:
    return LEVEL_RANK[levels(result)[number]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A correct learner's own functions (not the reference's, which would be held) with filled
    documents, graded in full (the expensive one)."""
    sub = synthetic.make(tmp_path_factory.mktemp("ref") / "alice", code="reference", docs="filled", functions=own_bodies())
    return grader.grade(sub, sandbox=SANDBOX)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Folder mode through the command line: stubs with edited tests, reference with template
    documents, and a tools.py that crashes on import; --quick keeps it to seconds."""
    base = tmp_path_factory.mktemp("class")
    subs = base / "submissions"
    synthetic.make(subs / "bob_stub", tests_edited=True)
    synthetic.make(subs / "carol_template", code="reference")
    synthetic.make(subs / "dave_crash", code="reference", import_crash=True, functions=own_bodies())
    before = tree_hash(subs)
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    proc = subprocess.run([sys.executable, str(RUBRIC / "grade.py"), str(subs), "--csv", str(base / "grades.csv"),
                           "--out", str(base / "reports"), "--quick", *NO_SANDBOX_FLAG], env=env, capture_output=True, text=True,
                          timeout=600)
    single = subprocess.run([sys.executable, str(RUBRIC / "grade.py"), str(subs / "bob_stub"), "--quick", *NO_SANDBOX_FLAG], env=env,
                            capture_output=True, text=True, timeout=600)
    reports = {p.stem: json.loads(p.read_text()) for p in (base / "reports").glob("*.json")}
    return {"proc": proc, "csv": base / "grades.csv", "reports": reports, "unchanged": tree_hash(subs) == before,
            "md": {p.stem: p.read_text() for p in (base / "reports").glob("*.md")}, "single": single}


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def test_rubric_weights_levels_and_named_tests_are_read_from_rubric_md():
    rubric = criteria.load_rubric()
    assert sum(c.weight for c in rubric.values()) == 100
    assert rubric[1].points == {"Exemplary": 25, "Proficient": 19, "Developing": 10, "Missing": 0}
    for number in (1, 2, 3):
        assert rubric[number].tests, f"criterion {number}: no test names parsed from its Evidence list"
        for name in rubric[number].tests:
            file, test = name.split("::")
            assert f"def {test}(" in (workspace.LAB_ROOT / file).read_text(), f"rubric names {name}, which does not exist"


def test_folder_mode_writes_one_csv_row_per_learner_and_a_progress_line_each(folder):
    assert folder["proc"].returncode == 0, folder["proc"].stderr[-2000:]
    rows = list(csv.DictReader(folder["csv"].open()))
    assert [r["learner"] for r in rows] == ["bob_stub", "carol_template", "dave_crash"]
    assert set(decisions.csv_header()) <= set(rows[0])
    assert [line.split("]")[0] for line in folder["proc"].stderr.splitlines() if line.startswith("[")] == \
        ["[1/3", "[2/3", "[3/3"]
    assert folder["unchanged"], "grading modified a submission"


def test_one_learner_prints_the_markdown_report(folder):
    single = folder["single"]
    assert single.returncode == 0, single.stderr[-2000:]
    assert single.stdout.startswith("# Grading evidence: bob_stub")
    assert "M1 Sandbox paths: not started" in single.stdout and "**Total (suggested)** | | **0 / 100**" in single.stdout


def test_stubs_are_missing_across_the_code_criteria_and_not_started_on_the_board(folder):
    r = folder["reports"]["bob_stub"]
    assert set(levels(r).values()) == {"Missing"}, levels(r)
    assert r["board"]["M1"].startswith("not started") and r["board"]["M4"].startswith("not started")
    assert "the instructor reads the evidence and decides" in folder["md"]["bob_stub"]
    # A stub's repeated message ("the same message as ... above") is a stub too, not a first failure.
    assert "first M1 failure" not in folder["md"]["bob_stub"] and "same message" not in folder["md"]["bob_stub"]


def test_tests_edited_to_pass_are_flagged_and_change_nothing(folder):
    r = folder["reports"]["bob_stub"]
    assert r["integrity"]["flags"]["tests_or_harness_edited"] == ["code/tests/test_m1_sandbox.py"]
    assert r["integrity"]["flags"]["stubs_still_raising"]
    assert not [t for t in r["tests"] if t["milestone"] == "M1" and t["outcome"] == "skipped"], \
        "the edited test file was used: grading must run the lab's pristine tests"


def test_the_reference_solution_is_held_on_code_and_template_documents_are_missing(folder):
    r = folder["reports"]["carol_template"]
    assert all(levels(r)[n] == "HOLD" for n in (1, 2, 3)), levels(r)
    assert all(c["mark"] == "HOLD" and c["points"] == 0 and c["rule"] == "HOLD.reference_match"
               for c in r["criteria"][:3]), r["criteria"][:3]
    assert all(levels(r)[n] == "Missing" for n in DOC_CRITERIA), levels(r)
    assert r["integrity"]["flags"]["matches_reference_solution"]


def test_an_import_crash_is_graded_not_fatal(folder):
    r = folder["reports"]["dave_crash"]
    assert levels(r)[1] == "Missing" and "does not import" in " ".join(r["criteria"][0]["reasons"])


def test_reference_with_filled_documents_has_every_criterions_evidence(reference):
    assert all(rank(reference, n) >= LEVEL_RANK["Proficient"] for n in range(1, 8)), levels(reference)
    assert all(state.startswith("passing") for m, state in reference["board"].items()), reference["board"]
    held = {name for name, c in reference["battery"].items() if c["status"] in ("held", "skipped")}
    assert held >= set(reference["battery"]) - {"hard links"}, reference["battery"]
    for name, b in reference["failure_analysis"]["breaks"].items():
        assert b["comparison"] and all(row[3] for row in b["comparison"]), (name, b["comparison"])
    ev = reference["failure_analysis"]["evaluation"]
    assert ev["rows_matching_fresh_run"] >= ev["fresh_rows"] - 1, ev
    assert reference["total"] == sum(c["points"] for c in reference["criteria"])
    signals = [s for c in reference["criteria"] for s in c["signals"]]
    loads = next(s for s in signals if s["label"] == "json.loads inside a try")
    assert loads["found"] and any("try" in text for _, text in loads["lines"]), loads


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_mistake_lowers_its_own_criterion_and_no_other(name, reference, tmp_path):
    mutant = next(m for m in MUTANTS if m.name == name)
    own = PLANTED[name]
    sub = synthetic.make(tmp_path / "erin", code="reference", mutant=mutant, docs="filled", functions=own_bodies())
    r = grader.grade(sub, quick=True, sandbox=SANDBOX)
    assert rank(r, own) < rank(reference, own), (name, levels(r))
    for other in (set(CODE_CRITERIA) | {4, 6, 7}) - {own}:
        assert levels(r)[other] == levels(reference)[other], (name, other, levels(r), levels(reference))


def test_pasted_evidence_that_does_not_match_a_rerun_is_flagged(reference, tmp_path):
    sub = synthetic.make(tmp_path / "frank", code="reference", docs="filled", mismatch=True, functions=own_bodies())
    r = grader.grade(sub, quick=True, sandbox=SANDBOX)
    rows = r["failure_analysis"]["breaks"]["runaway"]["comparison"]
    assert {row[0] for row in rows if not row[3]} == {"steps", "ended"}, rows
    assert rank(r, 5) < rank(reference, 5)
    assert "does not match a fresh run for: runaway" in " ".join(r["criteria"][4]["reasons"])


def test_an_endless_loop_in_run_agent_is_graded_not_hung(tmp_path):
    sub = synthetic.make(tmp_path / "gina", code="reference", loop_forever=True, functions=own_bodies())
    started = time.monotonic()
    r = grader.grade(sub, quick=True, test_seconds=3, after_seconds=1, sandbox=SANDBOX)
    assert time.monotonic() - started < 150
    assert r["integrity"]["flags"]["timeouts"] > 0
    assert r["board"]["M4"].startswith("timeout") and r["board"]["M1"].startswith("passing"), r["board"]
    assert levels(r)[2] in ("Missing", "Developing")


def test_learner_code_gets_no_keys_and_a_dead_proxy(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("COPILOT_MODEL", "groq/x")
    env = runner.child_env(tmp_path)
    assert "OPENAI_API_KEY" not in env and "COPILOT_MODEL" not in env
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and env["HTTPS_PROXY"].startswith("http://127.0.0.1")


@pytest.mark.skipif(not (runner.POSIX and os.path.isdir("/proc")), reason="processes are counted in /proc (Linux)")
def test_learner_code_runs_under_memory_file_and_process_ceilings(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import resource\nfor name in ('RLIMIT_AS', 'RLIMIT_FSIZE', 'RLIMIT_NPROC'):\n"
                     "    print(resource.getrlimit(getattr(resource, name))[0])\n")
    ran = runner.run([probe], cwd=tmp_path, env=runner.child_env(tmp_path), timeout=30, memory_mb=512)
    memory, file_size, processes = map(int, ran.stdout.split())
    assert memory == 512 << 20 and file_size == runner.MAX_FILE_BYTES, ran.stdout
    if "cgroup" in ran.limits:  # the ceiling holds for all the command's processes together
        assert f"{sandbox.MAX_PROCESSES} tasks for the whole command" in ran.limits, ran.limits
    else:
        tasks = sum(runner._tasks(pid) for pid in os.listdir("/proc") if pid.isdigit())
        assert 0 < processes <= tasks + runner.SPARE_PROCESSES, ran.stdout  # a fork bomb stops there


def symlink(link: Path, target: Path) -> None:
    try:
        os.symlink(target, link)
    except (OSError, NotImplementedError) as exc:
        pytest.skip(f"cannot create symlinks here ({exc})")


def test_the_copy_skips_secrets_and_links_leading_out(tmp_path):
    src = tmp_path / "sub"
    (src / "code").mkdir(parents=True)
    (src / "code" / ".env").write_text("KEY=x\n")
    (src / "code" / "tools.py").write_text("x = 1\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    symlink(src / "code" / "out.txt", tmp_path / "outside.txt")
    symlink(src / "code" / "in.py", Path("tools.py"))
    notes = workspace.copy_submission(src, tmp_path / "copy")
    copied = {p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*")}
    assert "code/tools.py" in copied and "code/in.py" in copied
    assert "code/.env" not in copied and "code/out.txt" not in copied
    assert {p for p, _ in notes.skipped} == {"code/.env", "code/out.txt"}


def test_a_saved_json_run_with_a_grounded_citation_is_found(tmp_path):
    from grading import documents
    run = {"question": "q", "model": "groq/x", "answer": "a shop/service.py:9", "termination": "answered",
           "citations": [{"path": "shop/service.py", "line": 9, "grounded": True}], "tool_calls": [{"name": "read_file"}],
           "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
                        {"role": "tool", "tool_call_id": "1", "content": "..."}, {"role": "assistant", "content": "a"}]}
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "why.json").write_text(json.dumps(run))
    (tmp_path / "runs" / "other.json").write_text('{"not": "a run"}')
    found = documents.saved_runs(tmp_path)
    assert [(r["path"], r["grounded"], r["tools_before_answer"]) for r in found] == [("runs/why.json", 1, True)]


def test_a_rewritten_provided_tool_is_flagged_and_never_graded(tmp_path):
    from grading import learner_code
    sub = synthetic.make(tmp_path / "hank", code="reference")
    path = sub / "code" / "tools.py"
    rewritten = path.read_text().replace("def read_file(repo_root, path, start_line=1, end_line=None) -> str:\n",
                                         "def read_file(repo_root, path, start_line=1, end_line=None) -> str:\n"
                                         "    return 'constant'\n", 1)
    assert rewritten != path.read_text()
    path.write_text(rewritten)
    assert learner_code.integrity(sub)["modules"]["tools.py"]["changed"] == ["read_file"]
    spliced = workspace.splice((workspace.LAB_ROOT / "code" / "tools.py").read_text(), rewritten,
                               ["safe_resolve", "dispatch_tool"])
    assert "return 'constant'" not in spliced
    assert spliced == (workspace.LAB_ROOT / "rubric" / "reference" / "tools.py").read_text()
