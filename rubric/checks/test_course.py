"""Course checks (maintainers): the lab is honest.

- every guiding test fails on the shipped stubs, because of the stub (NotImplementedError),
  never because of a collection or import error;
- the reference solution mirrors the stubs: identical modules except the learner-owned bodies;
- every stub carries TODO(Mn), a contract and a hint;
- each classic mistake from the lesson's common-mistakes table, planted into the reference,
  is caught by the test whose name describes it (so no guiding test is one that cannot fail);
- the M1-M4 tests never import litellm.

Run with the maintainer command in README.md. These files are collected only when their folder
is named on the command line: a learner's `python -m pytest` or `python -m pytest .` leaves them out.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import platform_sim
from harness.milestones import LEARNER_FUNCTIONS, MILESTONES
from harness.paths import CODE_DIR, REFERENCE_DIR, REPO_ROOT

from mutants import MUTANTS

LAB_MODULES = ("tools.py", "agent_loop.py", "stretch.py")
CORE_TESTS = [f"code/tests/{p.name}" for p in sorted((CODE_DIR / "tests").glob("test_m[1-4]_*.py"))]


def run_pytest(args, tmp_path, name="outcomes"):
    """Run the guiding tests in a fresh interpreter and return the outcome record."""
    out = tmp_path / f"{name}.json"
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--outcomes", str(out), *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.exists(), f"pytest wrote no outcomes (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    return proc, json.loads(out.read_text())


def test_every_guiding_test_fails_on_the_stubs_because_of_the_stub(tmp_path):
    proc, record = run_pytest(["--unlock-all", "--stretch", "code/tests"], tmp_path)
    assert "error" not in proc.stdout.split("\n")[-2], proc.stdout[-2000:]  # no collection errors
    tests = [t for t in record["tests"] if t["when"] == "call" or t["outcome"] == "failed"]
    by_node = {}
    for t in tests:
        by_node.setdefault(t["nodeid"], t)
    assert by_node, "no guiding tests ran"
    live = [n for n, t in by_node.items() if "live" in n]
    # Where symlinks cannot be made (Windows without the privilege, or CI's simulation of it), the
    # symlink cases skip before the stub is reached, with that reason.
    no_links = platform_sim.requested() or sys.platform == "win32"
    skipped_by_os = [n for n, t in by_node.items() if no_links and t["outcome"] == "skipped"
                     and "cannot create symlinks here" in t["message"]]
    wrong = [f"{n}: {t['outcome']} ({t['message'][:200]})" for n, t in by_node.items()
             if not (t["outcome"] == "failed" and t["not_done"]) and n not in live + skipped_by_os]
    assert not wrong, "guiding tests that do not fail on the stubs because of NotImplementedError:\n" + "\n".join(wrong)


def test_core_milestone_tests_do_not_import_litellm(tmp_path):
    _, record = run_pytest(["--reference", *CORE_TESTS], tmp_path)
    assert record["tests"], "no tests ran"
    assert not record["litellm_imported"], "the M1-M4 tests imported litellm (costs ~3 s per run)"


def _blank_learner_bodies(path: Path) -> str:
    """The module's AST dump with every learner-owned function body replaced by its docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    learner = {q.split(".")[1] for q in LEARNER_FUNCTIONS if q.split(".")[0] == path.stem}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in learner:
            node.body = node.body[:1]
    return ast.dump(tree, include_attributes=False)


@pytest.mark.parametrize("module", LAB_MODULES)
def test_reference_mirrors_the_stubs(module):
    stub, reference = CODE_DIR / module, REFERENCE_DIR / module
    assert _blank_learner_bodies(stub) == _blank_learner_bodies(reference), (
        f"code/{module} and rubric/reference/{module} differ outside the learner-owned function "
        "bodies (or in their docstrings): change both together"
    )


@pytest.mark.parametrize("qualified", sorted(LEARNER_FUNCTIONS))
def test_every_stub_has_todo_contract_and_hint(qualified):
    module, name = qualified.split(".")
    milestone = LEARNER_FUNCTIONS[qualified].id
    source = (CODE_DIR / f"{module}.py").read_text(encoding="utf-8")
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    doc = ast.get_docstring(node) or ""
    assert "Contract:" in doc and "Hint:" in doc and "lesson/lesson.agent.md" in doc, f"{qualified}: docstring lacks contract/hint"
    body = ast.get_source_segment(source, node)
    assert f"# TODO({milestone})" in body, f"{qualified}: no TODO({milestone}) comment"
    raises = [n for n in ast.walk(node) if isinstance(n, ast.Raise)]
    assert len(node.body) == 2 and len(raises) == 1, f"{qualified}: the stub should be a docstring and one raise"
    message = ast.literal_eval(raises[0].exc.args[0])
    assert message.startswith(f"{milestone}:"), f"{qualified}: NotImplementedError message must start with '{milestone}:'"


def test_only_the_four_learner_functions_are_stubs():
    for module in LAB_MODULES:
        source = (CODE_DIR / module).read_text(encoding="utf-8")
        stubs = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)
                 and any(isinstance(r, ast.Raise) and "NotImplementedError" in ast.dump(r) for r in ast.walk(n))}
        expected = {q.split(".")[1] for q in LEARNER_FUNCTIONS if q.startswith(module[:-3] + ".")}
        assert stubs == expected, f"code/{module}: stubs {sorted(stubs)}, expected {sorted(expected)}"


def test_milestones_one_to_four_name_the_learner_functions():
    names = [fn for m in MILESTONES[:4] for fn in m.functions]
    assert names == ["tools.safe_resolve", "agent_loop.parse_tool_calls", "tools.dispatch_tool", "agent_loop.run_agent"]


def _plant(mutant, target_dir: Path) -> None:
    """Copy the reference modules into target_dir with one function replaced by a known-wrong one."""
    for module in LAB_MODULES:
        shutil.copy(REFERENCE_DIR / module, target_dir / module)
    path = target_dir / mutant.module
    source = path.read_text(encoding="utf-8")
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == mutant.function)
    lines = source.splitlines(keepends=True)
    doc_end = node.body[0].end_lineno
    body = "".join("    " + line + "\n" if line else "\n" for line in mutant.body.strip("\n").splitlines())
    lines[doc_end:node.end_lineno] = [body]
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_classic_mistake_is_caught_by_the_test_named_for_it(mutant, tmp_path):
    impl = tmp_path / "impl"
    impl.mkdir()
    _plant(mutant, impl)
    # The test file of the function's milestone is enough (a failure there fails M1-M4), and a
    # quarter of the time of all four files.
    milestone = LEARNER_FUNCTIONS[f"{mutant.module.removesuffix('.py')}.{mutant.function}"]
    files = [f for f in CORE_TESTS if f.split("/")[-1].startswith(f"test_{milestone.id.lower()}_")]
    _, record = run_pytest(["--impl-dir", str(impl), "--unlock-all", *files], tmp_path)
    failed = {t["nodeid"].split("::", 1)[1] for t in record["tests"] if t["outcome"] == "failed"}
    missed = [name for name in mutant.caught_by if not any(f.startswith(name) for f in failed)]
    assert not missed, f"mistake {mutant.name!r} was not caught by {missed}; failing tests were {sorted(failed)}"


def _copy_reference(tmp_path: Path) -> Path:
    impl = tmp_path / "impl"
    impl.mkdir()
    for module in LAB_MODULES:
        shutil.copy(REFERENCE_DIR / module, impl / module)
    return impl


def test_a_renamed_function_gets_a_friendly_message_once(tmp_path):
    impl = _copy_reference(tmp_path)
    path = impl / "tools.py"
    path.write_text(path.read_text().replace("def safe_resolve(", "def safe_resolve_path("))
    proc, record = run_pytest(["--impl-dir", str(impl), "code/tests/test_m1_sandbox.py"], tmp_path)
    failed = [t for t in record["tests"] if t["outcome"] == "failed"]
    assert len(failed) == 1 and "code/tools.py has no function safe_resolve" in failed[0]["message"], failed
    assert proc.stdout.count("has no function safe_resolve") == 1, proc.stdout[-3000:]


def test_a_syntax_error_gets_a_friendly_message(tmp_path):
    impl = _copy_reference(tmp_path)
    path = impl / "agent_loop.py"
    path.write_text(path.read_text().replace("    calls = []\n", "    calls = [\n", 1))
    _, record = run_pytest(["--impl-dir", str(impl), "code/tests/test_m2_parse.py"], tmp_path)
    first = next(t for t in record["tests"] if t["outcome"] == "failed")
    assert "code/agent_loop.py does not import: SyntaxError on line" in first["message"], first["message"]


def _break_syntax_inside(path: Path, function: str) -> None:
    """Make the first statement of ``function`` an unclosed parenthesis."""
    source = path.read_text(encoding="utf-8")
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function)
    lines = source.splitlines(keepends=True)
    lines.insert(node.body[0].end_lineno, "    broken = (\n")
    path.write_text("".join(lines), encoding="utf-8")


def test_a_syntax_error_is_shown_once_and_the_board_stays_on_its_milestone(tmp_path):
    """A learner on M3 breaks dispatch_tool: one message (not one per test), and the board says M3."""
    impl = _copy_reference(tmp_path)
    _break_syntax_inside(impl / "tools.py", "dispatch_tool")
    proc, record = run_pytest(["--impl-dir", str(impl), "code/tests"], tmp_path)
    failed = [t for t in record["tests"] if t["outcome"] == "failed"]
    assert len(failed) == 1 and "code/tools.py does not import: SyntaxError" in failed[0]["message"], failed
    assert proc.stdout.count("SyntaxError") == 1, proc.stdout[-3000:]
    here = [line for line in proc.stdout.splitlines() if "you are here" in line]
    assert len(here) == 1 and here[0].startswith("M3 ") and "tools.dispatch_tool" in here[0], proc.stdout[-2000:]
    assert proc.returncode == 1 and "Traceback" not in proc.stdout


def test_the_teaching_block_comes_first_and_alone(tmp_path):
    """A failure reported from inside an except block shows no chained exception before the lesson."""
    impl = tmp_path / "impl"
    impl.mkdir()
    _plant(next(m for m in MUTANTS if m.name == "crashes on unparsed arguments"), impl)
    proc, _ = run_pytest(["--impl-dir", str(impl), "code/tests/test_m4_loop.py"], tmp_path)
    assert "During handling of the above exception" not in proc.stdout, proc.stdout[-3000:]
    after = proc.stdout.split("test_bad_json_reaches_the_model_as_an_observation[read_file] ", 1)[1]
    assert after.lstrip("_ \n").startswith("M4 (The loop) - agent_loop.run_agent"), after[:600]


@pytest.mark.parametrize("cwd", [".", "code"])
def test_learner_command_works_from_the_root_and_from_code(cwd):
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], cwd=REPO_ROOT / cwd,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "Lesson 06 milestones" in proc.stdout and "you are here: edit tools.safe_resolve" in proc.stdout, proc.stdout[-2000:]
    assert "NOT DONE YET: M1" in proc.stdout and "Traceback" not in proc.stdout


def test_live_without_a_provider_says_so_and_claims_nothing(tmp_path):
    """`python -m pytest -m live` with no key: the board says why nothing ran, never "all pass"."""
    from harness.offline import offline_env

    env = {k: v for k, v in offline_env(tmp_path / "cache").items() if k != "LESSON06_IMPL"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "live"], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert "live test skipped: no provider configured (see code/.env.example)" in proc.stdout, proc.stdout[-2000:]
    assert "all selected milestones pass" not in proc.stdout and "locked" not in proc.stdout, proc.stdout[-2000:]


def test_a_whole_tree_collection_leaves_the_course_checks_out():
    """`python -m pytest .` (or an IDE collecting everything) never runs rubric/checks on a learner's
    work in progress; naming the folder, as the maintainer command does, still does."""
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}

    def collected(*args):
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
                              cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
        return proc.stdout, [line for line in proc.stdout.splitlines() if re.match(r"\S+\.py(::\S+|: \d+)$", line)]

    out, whole = collected(".")
    assert whole and not [n for n in whole if n.startswith("rubric/")], out[-2000:]
    assert "rubric/checks not collected" in out, out[-2000:]
    _, named = collected("code/tests", "rubric/checks")
    assert any(n.startswith("rubric/checks/test_course.py") for n in named), named


@pytest.mark.parametrize("value,code", [("M9", 4), ("M2:2", 0)])
def test_an_unknown_hint_milestone_is_an_error(value, code):
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--hint", value], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert ("No milestone 'M9'" in proc.stderr) if code else ("Hint 2 of 3" in proc.stdout)


def test_the_simulated_platform_lacks_what_it_says(tmp_path):
    """LESSON06_SIMULATE_PLATFORM=no-dirfd (the second CI step) really takes dir_fd, O_NOFOLLOW and
    symlinks away: repo_files falls back to its path-by-path opener, and the symlink cases skip."""
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    env[platform_sim.ENV] = platform_sim.MODE
    probe = ("from harness import platform_sim; assert platform_sim.apply(); import os, repo_files\n"
             "assert not repo_files.USE_DIR_FD and not hasattr(os, 'O_NOFOLLOW') and not os.supports_dir_fd\n"
             "try:\n    os.symlink('a', 'b')\nexcept OSError:\n    print('no symlinks')")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=CODE_DIR, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "no symlinks", proc.stdout + proc.stderr
    proc, record = run_pytest(["--reference", "code/tests/test_m1_sandbox.py", "-k", "symlink"], tmp_path)
    if platform_sim.requested():
        skipped = [t for t in record["tests"] if t["outcome"] == "skipped"]
        assert skipped and all("cannot create symlinks" in t["message"] for t in skipped), record["tests"]
