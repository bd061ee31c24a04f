"""Course checks (maintainers): the learner's path, walked in a temporary copy of the lab.

Start from the shipped stubs, copy in the reference body of one learner function at a time
(M1 safe_resolve, M2 parse_tool_calls, M3 dispatch_tool, M4 run_agent) and run the learner's
command after each step: the board must advance exactly one milestone per step, and once M1-M4
pass it must show M5 and M6 as pending (tests pass, untestable part not done) rather than done.
Then record a copilot run and fill in FAILURE_ANALYSIS.md: only now may it say everything passes.

Each step is one `python -m pytest` in a fresh interpreter. The last steps leave out the two M5
tests that go through real LiteLLM (~6 s of import each; the maintainer command runs them on the
reference); the one copilot run through LiteLLM is the M5 step itself.

The lesson's sample outputs are regenerated the same way, so the text cannot drift from the code:
Section 7's fresh-checkout board (the stubs), its string-prefix failure (a planted mistake) and its
M5 trace (the same scripted turns, through the real tools, citation check and trace printer).
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

from harness import progress
from harness.fake_server import FakeServer, text_reply, tool_reply
from harness.milestones import MILESTONES
from harness.offline import offline_env
from harness.paths import REFERENCE_DIR, REPO_ROOT

IGNORED = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", ".pytest_cache", "*.pyc")
WITHOUT_LITELLM = "not litellm_sends and not json_from_the_command_line"


def copy_in_reference_body(lab: Path, qualified: str) -> None:
    """Replace the stub of ``module.function`` in lab/code with the reference function."""
    module, name = qualified.split(".")
    stub_path = lab / "code" / f"{module}.py"
    stub, reference = stub_path.read_text(encoding="utf-8"), (REFERENCE_DIR / f"{module}.py").read_text(encoding="utf-8")

    def span(source):
        node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
        return node.lineno - 1, node.end_lineno

    lines, (start, end) = stub.splitlines(keepends=True), span(stub)
    ref_start, ref_end = span(reference)
    lines[start:end] = reference.splitlines(keepends=True)[ref_start:ref_end]
    stub_path.write_text("".join(lines), encoding="utf-8")


def board_of(lab: Path, cache: Path, *args: str):
    env = {k: v for k, v in offline_env(cache).items() if k != "LESSON06_IMPL"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=lab, env=env,
                          capture_output=True, text=True, timeout=300)
    board = proc.stdout.split("Lesson 06 milestones", 1)[-1]
    rows = {m[1]: m[2] for m in re.finditer(r"^(M\d)  .+?\s{2,}(\S.*)$", board, re.M)}
    return proc, rows, board


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("learner") / "lab"
    shutil.copytree(REPO_ROOT, root, ignore=IGNORED)
    return root


def test_the_board_advances_one_milestone_per_step_and_shows_what_is_pending(lab, tmp_path):
    cache = tmp_path / "cache"
    done_marks = ("\u2713", "ok ")
    for step, milestone in enumerate(MILESTONES[:4]):
        proc, rows, board = board_of(lab, cache)
        assert proc.returncode == 1, f"step {step}: exit {proc.returncode}\n{board}"
        here = [mid for mid, text in rows.items() if "you are here" in text]
        assert here == [milestone.id], f"step {step} (M1-M{step} done): board should point at {milestone.id}\n{board}"
        assert all(rows[m.id].startswith(done_marks) for m in MILESTONES[:step]), board
        assert "all selected milestones pass" not in board
        copy_in_reference_body(lab, milestone.functions[0])

    core = [f"code/tests/{p.name}" for p in sorted((lab / "code" / "tests").glob("test_m[1-6]_*.py"))]
    proc, rows, board = board_of(lab, cache, "-k", WITHOUT_LITELLM, *core)
    assert proc.returncode == 0, board
    assert "\u25d0" in rows["M5"] and "run the copilot once" in rows["M5"] and "you are here" in rows["M5"], board
    assert "\u25d0" in rows["M6"] and "FAILURE_ANALYSIS.md" in rows["M6"], board
    assert "all selected milestones pass" not in board and "still to do" in board, board

    # The untestable parts done: one copilot run of this checkout (through LiteLLM to a local fake
    # server, as a real provider would be), and a filled-in analysis.
    env = {k: v for k, v in offline_env(cache).items() if k != "LESSON06_IMPL"}
    with FakeServer([tool_reply(("read_file", {"path": "shop/models.py"})), text_reply("price (shop/models.py:11)")]) as server:
        ran = subprocess.run([sys.executable, "copilot.py", "--repo", "fixture_repo", "--model", "openai/fake-model",
                              "--api-base", server.base_url, "why does order_total fail?"], cwd=lab / "code", env=env,
                             capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0, ran.stdout[-1500:] + ran.stderr[-1500:]
    record = json.loads(progress.last_run_path({"COPILOT_CACHE_DIR": str(cache)}).read_text())
    assert record["implementation"] == "code" and record["code_dir"] == str((lab / "code").resolve()), record
    analysis = lab / "FAILURE_ANALYSIS.md"
    analysis.write_text(re.sub(r"(?m)^(\s*(?:- )?)_(?=\S)", r"\1My note: ", analysis.read_text(encoding="utf-8")),
                        encoding="utf-8")
    assert progress.placeholders(analysis) == 0
    proc, rows, board = board_of(lab, cache, "-k", WITHOUT_LITELLM, *core)
    assert proc.returncode == 0 and "\u25d0" not in board and "all selected milestones pass" in board, board


def test_the_shipped_analysis_marks_its_placeholders():
    """M6's pending state relies on the template's convention: a placeholder is wholly in _italics_."""
    text = progress.ANALYSIS.read_text(encoding="utf-8")
    assert "_italics_" in text, "FAILURE_ANALYSIS.md should tell the learner to replace every line in _italics_"
    sections = [s for s in re.split(r"(?m)^## ", text)[1:]]
    empty = [s.splitlines()[0] for s in sections if progress.placeholders_in(s) == 0]
    assert not empty, f"FAILURE_ANALYSIS.md sections without an _italic_ placeholder: {empty}"


def test_a_record_of_another_checkout_or_of_the_reference_does_not_count(tmp_path):
    env = {"COPILOT_CACHE_DIR": str(tmp_path)}
    path = progress.last_run_path(env)
    path.write_text(json.dumps({"implementation": "reference", "code_dir": str(progress.CODE_DIR)}))
    assert progress.last_run(env=env) is None
    path.write_text(json.dumps({"implementation": "code", "code_dir": str(tmp_path / "elsewhere" / "code")}))
    assert progress.last_run(env=env) is None
    path.write_text(json.dumps({"implementation": "code", "code_dir": str(progress.CODE_DIR)}))
    assert progress.last_run(env=env) is not None
    os.remove(path)


# --------------------------------------------------------------------------- the lesson's sample outputs

LESSON = REPO_ROOT / "lesson" / "lesson.agent.md"


def lesson_block_after(marker: str) -> list[str]:
    """The lines of the first ```text block after ``marker`` in the lesson."""
    text = LESSON.read_text(encoding="utf-8")
    assert marker in text, f"lesson/lesson.agent.md no longer says {marker!r}: update this check with it"
    found = re.search(r"```text\n(.*?)\n```", text.split(marker, 1)[1], re.S)
    return found[1].splitlines()


def learner_run(*args: str, cwd: Path = REPO_ROOT, tmp: Path) -> list[str]:
    env = {k: v for k, v in offline_env(tmp / "cache").items() if k != "LESSON06_IMPL"}
    env["COLUMNS"] = "80"  # pytest's section rule is as wide as the terminal
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    return proc.stdout.splitlines()


def test_the_lessons_fresh_checkout_board_is_what_the_stubs_print(tmp_path):
    shown = lesson_block_after("A fresh checkout, before you have written anything:")
    out = learner_run(tmp=tmp_path)
    start = next(i for i, line in enumerate(out) if line.startswith("NOT DONE YET"))
    end = next(i for i, line in enumerate(out) if line.startswith("next:"))
    assert out[start:end + 1] == shown, (
        "lesson/lesson.agent.md, Section 7 ('What the test run shows you'): the sample board differs from a real "
        "run on the stubs. Paste this:\n" + "\n".join(out[start:end + 1]))


def test_the_lessons_failure_example_is_what_the_classic_bug_prints(tmp_path):
    from mutants import MUTANTS
    from test_course import _plant

    shown = lesson_block_after("the classic string-prefix containment bug gives:")
    impl = tmp_path / "impl"
    impl.mkdir()
    _plant(next(m for m in MUTANTS if m.name == "string-prefix containment"), impl)
    out = learner_run("--impl-dir", str(impl), "code/tests/test_m1_sandbox.py", "-k",
                      "test_sibling_with_shared_prefix_raises", tmp=tmp_path)
    start = out.index(shown[0]) if shown[0] in out else 0
    assert out[start:start + len(shown)] == shown, (
        "lesson/lesson.agent.md, Section 7: the string-prefix example differs from what the test prints. Paste this:\n"
        + "\n".join(out[start:start + len(shown)]))


def test_the_lessons_copilot_trace_is_what_the_copilot_prints(monkeypatch, tmp_path):
    """Section 7's M5 trace, replayed: the same thoughts, actions and answer from a scripted model on
    code/, through the real tools, the citation check and the trace printer (S1's reference)."""
    import importlib
    import io

    from harness.offline import go_offline
    from harness.scripted import ScriptedModel, answer, call, turn
    from harness.strict_provider import StrictProvider

    stretch = importlib.import_module("stretch")
    if Path(stretch.__file__).resolve().parent != REFERENCE_DIR:
        pytest.skip("the trace needs S1's reference: run with --reference (the maintainer command)")
    go_offline(monkeypatch, tmp_path / "cache")
    copilot, report = importlib.import_module("copilot"), importlib.import_module("report")
    shown = lesson_block_after("ran and only the model's words were scripted")
    script, thought = [], None
    for line in shown:
        if line.startswith("  Thought: "):
            thought = line.removeprefix("  Thought: ")
        elif line.startswith("  Action: "):
            name, _, args = line.removeprefix("  Action: ").partition("(")
            script.append(turn(call(name, json.loads(args[:-1])), content=thought))
    text = shown[shown.index("  Answer: (printed below)") + 2]
    question = re.search(r'python copilot.py --context-only "([^"]+)"', LESSON.read_text(encoding="utf-8"))[1]
    result = copilot.run(question, progress.CODE_DIR, complete=StrictProvider(ScriptedModel([*script, answer(text)])))
    out = io.StringIO()
    report.print_report(result, trace=True, out=out)
    printed = out.getvalue().strip("\n").splitlines()
    observations = iter(m["content"] for m in result.messages if m.get("role") == "tool")
    problems = []
    for want, got in zip(shown, printed):
        if want.startswith("  Observation: "):  # the lesson may cut an observation with " ... "
            full = " | ".join(x.strip() for x in next(observations, "").strip().splitlines() if x.strip())
            fragments = [f for f in want.removeprefix("  Observation: ").split(" ... ") if f]
            size = re.fullmatch(r"\[([\d,]+) chars\]", fragments[-1])
            if size:
                fragments.pop()
                if int(size[1].replace(",", "")) != len(full):
                    problems.append(f"{want!r}: the real observation is {len(full):,} chars")
            missing = [f for f in fragments if f not in full]
            if missing:
                problems.append(f"{want!r}: {missing} not in the real observation {full[:300]!r}")
        elif want.startswith("[") and want.endswith("]"):  # the summary: its numbers vary run to run
            shape = (r"\[\d+ steps \| \d+ tool calls \| tokens [\d,]+ in / [\d,]+ out \| .+ \| "
                     r"[\d.]+ s \(model [\d.]+ s, LiteLLM start-up [\d.]+ s\) \| answered\]")
            if not re.fullmatch(shape, want) or want.split("|")[:2] != got.split("|")[:2]:
                problems.append(f"summary line {want!r} does not have the shape of {got!r} (with a real model)")
        elif want != got:
            problems.append(f"lesson {want!r}\n  prints {got!r}")
    assert len(printed) == len(shown) and not problems, "\n".join(problems) + "\n--- printed ---\n" + "\n".join(printed)


def test_every_name_a_hint_or_board_line_mentions_exists():
    """`--hint` and the board point at module.name: each must be a real top-level name (no stale
    pointer after a module is split, like copilot.check_span becoming citations.check_span)."""
    from harness.milestones import ALL
    from harness.paths import CODE_DIR

    def names(module):
        path = REFERENCE_DIR / f"{module}.py" if (REFERENCE_DIR / f"{module}.py").exists() else CODE_DIR / f"{module}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                found |= {t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                          if isinstance(t, ast.Name)}
            elif isinstance(node, ast.ImportFrom):
                found |= {a.asname or a.name for a in node.names}
        return found

    modules = {p.stem for p in CODE_DIR.glob("*.py")}
    wrong = []
    for m in ALL:
        text = " ".join((*m.hints, *m.functions, m.file))
        for module, name in re.findall(r"\b([a-z_]+)\.([A-Za-z_]\w*)\b", text):
            if module in modules and name not in names(module) and name != "py":
                wrong.append(f"{m.id}: {module}.{name}")
    assert not wrong, f"hints name things that do not exist: {wrong}"
