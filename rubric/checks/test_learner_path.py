"""Course checks (maintainers): the learner's path, walked in temporary copies of the lab.

Start from the shipped stubs, copy in the reference body of one learner function at a time
(M1 safe_resolve, M2 parse_tool_calls, M3 dispatch_tool, M4 run_agent) and run the learner's
command after each step: the board must advance exactly one milestone per step, and once M1-M4
pass it must show M5 and M6 as pending (tests pass, untestable part not done) rather than done.

The board tells the truth after that too (issue 20): M5 counts only a run of THIS checkout's code
against a provider that is not the lab's own fake server (the scripted demo is shown as such; a
second checkout beside the first, with the same cache, starts at pending), M6 only a write-up whose
every part holds the learner's own words and evidence (an emptied template is not one), and the
UNDERSTANDING.md line never blocks a milestone. Planted mistakes: the escape scenario never says
"the sandbox held" for an escaping safe_resolve, hints follow from what was wrong, and the
contracts state the words their tests want.

Each board is one `python -m pytest` in a fresh interpreter. The states after M4 run one quick test
of M5 and one of M6 (the board's pending states need only that). The copilot runs through LiteLLM
(the demo, a stand-in for a real provider) are the slow part: the M5 walk makes four of them and
took 119 s on two cores at load 8 (the whole file 216 s; the walk to M4 50 s, the M6 states 16 s).

The lesson's sample outputs are regenerated the same way, so the text cannot drift from the code:
Section 7's fresh-checkout board (the stubs), its string-prefix failure (a planted mistake) and its
M5 trace (harness/demo.py's scripted turns, through the real tools, citation check and trace printer).
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
    with FakeServer([tool_reply(("read_file", {"path": "shop/models.py"})), text_reply("price (shop/models.py:11)")],
                    signed=False) as server:  # unsigned: a server the copilot cannot tell from a provider
        ran = subprocess.run([sys.executable, "copilot.py", "--repo", "fixture_repo", "--model", "openai/fake-model",
                              "--api-base", server.base_url, "why does order_total fail?"], cwd=lab / "code", env=env,
                             capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0, ran.stdout[-1500:] + ran.stderr[-1500:]
    record = json.loads(progress.last_run_path({"COPILOT_CACHE_DIR": str(cache)}, lab / "code").read_text())
    assert record["implementation"] == "code" and record["code_dir"] == str((lab / "code").resolve()), record
    analysis = lab / "FAILURE_ANALYSIS.md"
    analysis.write_text(filled_analysis(lab, tmp_path), encoding="utf-8")
    assert progress.placeholders(analysis) == 0 and progress.unwritten(analysis) == []
    proc, rows, board = board_of(lab, cache, "-k", WITHOUT_LITELLM, *core)
    assert proc.returncode == 0 and "all selected milestones pass" in board, board
    assert not [row for row in rows.values() if "\u25d0" in row], board


# --------------------------------------------------------------------------- the board after M4, state by state

QUICK = ["code/tests/test_m5_copilot.py", "code/tests/test_m6_break_and_evaluate.py", "-k",
         "test_an_invented_citation_is_flagged_ungrounded or test_runaway_ceiling_holds_against_a_loop_with_no_cap"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A copy of the lab with M1-M4 written (the reference bodies), as a learner has it after M4."""
    root = tmp_path_factory.mktemp("finished") / "lab"
    shutil.copytree(REPO_ROOT, root, ignore=IGNORED)
    for milestone in MILESTONES[:4]:
        copy_in_reference_body(root, milestone.functions[0])
    return root


def copilot_run(lab: Path, cache: Path, *args: str, module=None):
    env = {k: v for k, v in offline_env(cache).items() if k != "LESSON06_IMPL"}
    command = ["-m", module] if module else ["copilot.py"]
    return subprocess.run([sys.executable, *command, *args], cwd=lab / "code", env=env, capture_output=True,
                          text=True, timeout=240)


def provider_run(lab: Path, cache: Path):
    """One copilot run against an OpenAI-compatible server that does not sign its replies as the
    lab's fake: what a real provider looks like to the copilot."""
    with FakeServer([tool_reply(("read_file", {"path": "shop/models.py"})), text_reply("price (shop/models.py:11)")],
                    signed=False) as server:
        ran = copilot_run(lab, cache, "--repo", "fixture_repo", "--model", "openai/a-provider", "--api-base",
                          server.base_url, "why does order_total fail?")
    assert ran.returncode == 0, ran.stdout[-1500:] + ran.stderr[-1500:]


def test_m5_counts_only_a_real_run_of_this_checkout(finished, tmp_path):
    cache = tmp_path / "cache"  # one cache folder for both checkouts, as on a learner's machine
    beside = tmp_path / "lab2"
    shutil.copytree(finished, beside, ignore=IGNORED)
    _, rows, board = board_of(finished, cache, *QUICK)
    assert rows["M5"].startswith("\u25d0") and "run the copilot once" in rows["M5"], board

    demo = copilot_run(finished, cache, module="harness.demo")
    assert demo.returncode == 0 and demo.stdout.startswith("SCRIPTED DEMO"), demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "  grounded" in demo.stdout and "UNGROUNDED" not in demo.stdout, demo.stdout[-2000:]
    record = progress.last_run(finished / "code", {"COPILOT_CACHE_DIR": str(cache)})
    assert record and record["scripted"] is True, record
    _, rows, board = board_of(finished, cache, *QUICK)
    assert rows["M5"].startswith("\u25d0") and "fake server" in rows["M5"], board

    provider_run(finished, cache)
    _, rows, board = board_of(finished, cache, *QUICK)
    assert rows["M5"].startswith("\u2713"), board
    demo = copilot_run(finished, cache, module="harness.demo")  # a later scripted run keeps the real one
    assert demo.returncode == 0, demo.stderr[-1500:]
    _, rows, board = board_of(finished, cache, *QUICK)
    assert rows["M5"].startswith("\u2713"), f"a scripted run replaced the record of a real one:\n{board}"

    _, rows2, board2 = board_of(beside, cache, *QUICK)
    assert rows2["M5"].startswith("\u25d0") and "run the copilot once" in rows2["M5"], (
        f"the checkout beside it reads another checkout's run:\n{board2}")
    provider_run(beside, cache)
    _, rows, board = board_of(finished, cache, *QUICK)
    assert rows["M5"].startswith("\u2713"), board


def placeholder_paragraphs(text: str) -> list[str]:
    """The template's placeholders, whole (paragraphs and list items wholly in _italics_, with a
    list item's bullet), so a test can delete or replace them."""
    found, fenced = [], False
    for chunk in re.split(r"\n(?=\s*\n|\s*- )", text):
        for line in chunk.splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
        body = chunk.strip()
        if not fenced and progress.ITALIC.match(progress.LIST_ITEM.sub("", body).strip()):
            found.append(body)
    return found


def emptied(text: str) -> str:
    for placeholder in placeholder_paragraphs(text):
        text = text.replace(placeholder, "", 1)
    return text


def evidence_blocks(lab: Path, tmp_path: Path) -> dict[str, str]:
    """The evidence block of each scenario, as break_and_observe.py prints it for the lab's own code
    (as step 3 asks: a --simulate block does not count)."""
    proc = subprocess.run(
        [sys.executable, "break_and_observe.py", "all"], cwd=lab / "code",
        env={k: v for k, v in offline_env(tmp_path / "cache-break").items() if k != "LESSON06_IMPL"},
        capture_output=True, text=True, timeout=240)
    blocks = re.findall(r"```text\n.*?\n```", proc.stdout, re.S)
    return {re.search(r"^scenario\s+:\s+([\w-]+)", b, re.M)[1]: b for b in blocks}


def filled_analysis(lab: Path, tmp_path: Path, evidence: bool = True) -> str:
    """FAILURE_ANALYSIS.md with every placeholder replaced by a sentence of the learner's own, each
    Evidence part holding its scenario's block (``evidence``), and a pasted component table."""
    text = (REPO_ROOT / "FAILURE_ANALYSIS.md").read_text(encoding="utf-8")  # the shipped template
    for placeholder in placeholder_paragraphs(text):
        label = re.match(r"-\s+(_[^_]+_)", placeholder)
        own = "My own words about what I ran and what I saw."
        text = text.replace(placeholder, f"- {label[1]} {own}" if label else own, 1)
    blocks = evidence_blocks(lab, tmp_path) if evidence else {}
    out, scenario = [], None
    for line in text.splitlines():
        found = re.match(r"## Break \d+: ([\w-]+)", line)
        scenario = found[1] if found else (None if line.startswith("## ") else scenario)
        out.append(line)
        if scenario in blocks and line == "### Evidence":
            out += ["", blocks[scenario]]
        if line == "### Component table":
            out += ["", "| question | read | root |", "|---|---|---|", "| shop-total-bug | yes | NO |"]
    return "\n".join(out) + "\n"


def test_m6_is_done_only_when_each_part_holds_own_text_and_evidence(finished, tmp_path):
    cache = tmp_path / "cache"
    analysis, understanding = finished / "FAILURE_ANALYSIS.md", finished / "UNDERSTANDING.md"
    shipped = analysis.read_text(encoding="utf-8")
    try:
        analysis.write_text(emptied(shipped), encoding="utf-8")
        assert progress.placeholders(analysis) == 0, "the emptied template still has placeholders"
        _, rows, board = board_of(finished, cache, *QUICK)
        assert rows["M6"].startswith("\u25d0") and "without your own text" in rows["M6"], board
        assert "all selected milestones pass" not in board, board

        analysis.write_text(filled_analysis(finished, tmp_path, evidence=False), encoding="utf-8")
        _, rows, board = board_of(finished, cache, *QUICK)
        assert rows["M6"].startswith("\u25d0") and "Break 1 Evidence" in rows["M6"], board

        analysis.write_text(filled_analysis(finished, tmp_path), encoding="utf-8")
        record = progress.last_run_path({"COPILOT_CACHE_DIR": str(cache)}, finished / "code")
        record.parent.mkdir(parents=True, exist_ok=True)  # M5 done, so the last line can say it all
        record.write_text(json.dumps({"implementation": "code", "code_dir": str((finished / "code").resolve()),
                                      "scripted": False}))
        _, rows, board = board_of(finished, cache, *QUICK)
        assert rows["M6"].startswith("\u2713") and "all selected milestones pass" in board, board
        line = next(x for x in board.splitlines() if x.startswith("UNDERSTANDING.md"))
        assert "\u25d0" in line and "locks no milestone" in line, board  # on the board, blocking nothing

        questions = understanding.read_text(encoding="utf-8")
        understanding.write_text(questions.replace("**Your answer:**\n", "**Your answer:**\nMy own answer, in "
                                                   "five words or more.\n"), encoding="utf-8")
        _, rows, board = board_of(finished, cache, *QUICK)
        line = next(x for x in board.splitlines() if x.startswith("UNDERSTANDING.md"))
        assert "\u2713" in line and "8 of 8 answered" in line, board
    finally:
        analysis.write_text(shipped, encoding="utf-8")


def analysis_with(tmp_path: Path, label_style: str, ran: str) -> Path:
    """The template filled in without a subprocess: list labels written in ``label_style`` ("_Q:_",
    "Q:", "**Q:**"), each Evidence part holding a block of its scenario whose ``ran`` line is ``ran``,
    and a component table."""
    text = (REPO_ROOT / "FAILURE_ANALYSIS.md").read_text(encoding="utf-8")
    own = "My own words about what I ran and what I saw."
    for placeholder in placeholder_paragraphs(text):
        label = re.match(r"-\s+_([^_]+)_", placeholder)
        shown = label_style.replace("Q:", label[1]) if label else None
        text = text.replace(placeholder, f"- {shown} {own}" if label else own, 1)
    out, scenario = [], None
    for line in text.splitlines():
        found = re.match(r"## Break \d+: ([\w-]+)", line)
        scenario = found[1] if found else (None if line.startswith("## ") else scenario)
        out.append(line)
        if scenario and line == "### Evidence":
            out += ["", "```text", f"scenario     : {scenario}: a break", f"ran          : {ran}", "```"]
        if line == "### Component table":
            out += ["", "| question | read | root |", "|---|---|---|", "| shop-total-bug | yes | NO |"]
    path = tmp_path / "FAILURE_ANALYSIS.md"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("style", ["_Q:_", "Q:", "**Q:**"], ids=["italic label", "plain label", "bold label"])
def test_m6_accepts_the_labels_a_learner_writes(style, tmp_path):
    """'- Question: my words' is as filled in as '- _Question:_ my words' (the template's italics kept or not)."""
    path = analysis_with(tmp_path, style, "your code (code/)")
    assert progress.placeholders(path) == 0 and progress.unwritten(path) == [], progress.unwritten(path)
    text = path.read_text(encoding="utf-8")
    bare = re.sub(r"(?m)^(- (?:_|\*\*)?[A-Z][^:\n]*:(?:_|\*\*)?) My own words about what I ran and what I saw\.$",
                  r"\1", text)
    path.write_text(bare, encoding="utf-8")
    assert "Right evidence, wrong answer: My case" in progress.unwritten(path), "labels with no answer passed"


@pytest.mark.parametrize("ran", ["simulated break on reference (rubric/reference/)",
                                 "simulated break on your code (code/)", "reference (rubric/reference/)"])
def test_m6_counts_only_evidence_from_the_learners_own_code(ran, tmp_path):
    """An Evidence part holding only a --simulate block (or a run of the reference) is not done, and the
    board says why; the same block printed by the learner's own code is."""
    path = analysis_with(tmp_path, "_Q:_", ran)
    missing = progress.unwritten(path)
    assert len(missing) == 5 and all("--simulate" in m and "your own broken code" in m for m in missing), missing
    assert progress.unwritten(analysis_with(tmp_path, "_Q:_", "your code (code/)")) == []


def test_the_shipped_analysis_marks_its_placeholders():
    """M6's pending state relies on the template's convention: a placeholder is wholly in _italics_."""
    text = progress.ANALYSIS.read_text(encoding="utf-8")
    assert "_italics_" in text, "FAILURE_ANALYSIS.md should tell the learner to replace every line in _italics_"
    sections = [s for s in re.split(r"(?m)^## ", text)[1:]]
    empty = [s.splitlines()[0] for s in sections if progress.placeholders_in(s) == 0]
    assert not empty, f"FAILURE_ANALYSIS.md sections without an _italic_ placeholder: {empty}"
    parts = progress.unwritten(progress.ANALYSIS)
    expected = 5 * len(progress.BREAK_PARTS) + sum(len(p) for p in progress.OTHER_PARTS.values())
    assert len(parts) == expected, f"the board should find {expected} parts to write in the template, found {parts}"
    assert progress.answers(progress.UNDERSTANDING) == (0, 8), "UNDERSTANDING.md: 8 questions, none answered"


def test_a_record_of_another_checkout_or_of_the_reference_does_not_count(tmp_path):
    env = {"COPILOT_CACHE_DIR": str(tmp_path)}
    path = progress.last_run_path(env)
    assert path != progress.last_run_path(env, tmp_path / "elsewhere" / "code"), "two checkouts, one record file"
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
    """Section 7's M5 trace is what the copilot prints for its scripted turns (which `python -m
    harness.demo` serves through LiteLLM), here replayed without LiteLLM through the real tools, the
    citation check and the trace printer (S1's reference); test_m5_counts_only_a_real_run_of_this_checkout
    runs the demo command itself."""
    import importlib
    import io

    from harness import demo
    from harness.offline import go_offline
    from harness.scripted import ScriptedModel, answer, call, turn
    from harness.strict_provider import StrictProvider

    stretch = importlib.import_module("stretch")
    if Path(stretch.__file__).resolve().parent != REFERENCE_DIR:
        pytest.skip("the trace needs S1's reference: run with --reference (the maintainer command)")
    go_offline(monkeypatch, tmp_path / "cache")
    copilot, report = importlib.import_module("copilot"), importlib.import_module("report")
    shown = lesson_block_after("ran and only the model's words were scripted")
    assert "python -m harness.demo" in LESSON.read_text(encoding="utf-8"), "the lesson should say how to reproduce it"
    question, replies = demo.sample()
    script = [turn(*(call(c["name"], c["arguments"]) for c in r["tool_calls"]), content=r["content"])
              if r.get("tool_calls") else answer(r["content"]) for r in replies]
    result = copilot.run(question, progress.CODE_DIR, complete=StrictProvider(ScriptedModel(script)))
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
                if abs(int(size[1].replace(",", "")) - len(full)) > 0.2 * len(full):  # the files keep changing
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
    assert len(printed) == len(shown) and not problems, (
        "\n".join(problems) + "\n--- printed (paste into lesson/lesson.agent.md, Section 7, shortening observations "
        "with ' ... ' and '[N chars]') ---\n" + "\n".join(printed))


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


# --------------------------------------------------------------------------- planted mistakes (issue 20)

# safe_resolve mutants that let a path out of the repository (the others refuse too much).
ESCAPING = ("string-prefix containment", "normpath ignores symlinks", "case-insensitive containment",
            "casefold containment", "resolves only the parent", "judges only a leading '..'",
            "resolves only paths that exist", "substring containment")


def planted(name: str, tmp_path: Path) -> Path:
    from mutants import HINT_MUTANTS, MUTANTS
    from test_course import _plant

    impl = tmp_path / name.replace(" ", "_").replace("'", "")
    impl.mkdir()
    _plant(next(m for m in MUTANTS + HINT_MUTANTS if m.name == name), impl)
    return impl


@pytest.mark.parametrize("name", ESCAPING)
def test_the_escape_scenario_never_certifies_an_escaping_sandbox(name, tmp_path):
    """`python break_and_observe.py escape` on a safe_resolve that lets a path out never says the
    sandbox held, even when a later check of the provided tools stopped every read."""
    env = {k: v for k, v in offline_env(tmp_path / "cache").items() if k != "LESSON06_IMPL"}
    env["LESSON06_IMPL"] = str(planted(name, tmp_path))
    proc = subprocess.run([sys.executable, "break_and_observe.py", "escape", "--json"], cwd=REPO_ROOT / "code",
                          env=env, capture_output=True, text=True, timeout=120)
    ev = json.loads(proc.stdout)
    assert ev["failure_observed"] and "held" not in ev["verdict"], (name, ev["verdict"], ev["details"])


@pytest.mark.parametrize("name,test_file,selection,words", [
    ("answers a repeated call once", "test_m4_loop.py", "identical", "an id it lists got no tool result"),
    ("no assistant turn before results", "test_m4_loop.py", "precedes", "append assistant_turn(message) FIRST"),
    ("checks the link, returns the link", "test_m1_sandbox.py", "in_repo_symlink", "returned the path as joined"),
    ("reads tool_calls as an attribute", "test_m2_parse.py", "no_tool_calls", "getattr(message, 'tool_calls', None)"),
    ("drops a repeated call", "test_m2_parse.py", "identical", "HTTP 400 when one id"),
    ("globals() as the tool table", "test_m3_dispatch.py", "only_the_listed", "TOOL_FUNCTIONS only"),
    ("skips check_arguments", "test_m3_dispatch.py", "unexpected_argument", "check_arguments"),
    # issue 27: each hint follows from the failing assertion, not from the milestone
    ("string-prefix containment", "test_m1_sandbox.py", "sibling", "also true for the root itself"),
    ("root in target.parents only", "test_m1_sandbox.py", "root_itself", "not its own parent"),
    ("substring containment", "test_m1_sandbox.py", "by_components", "STARTS with the root's components"),
    ("length checked after resolving", "test_m1_sandbox.py", "length_is_checked", "THEN resolve"),
    ("tool calls indexed like dicts", "test_m2_parse.py", "json_string_becomes", "an object with attributes"),
    ("one list shared by every call", "test_m2_parse.py", "json_string_becomes", "default argument"),
    ("None arguments crash", "test_m2_parse.py", "none_arguments", "json.loads(None) raises TypeError"),
    ("arguments passed by position", "test_m3_dispatch.py", "by_name", "fn(repo_root, **args)"),
    ("catches BaseException", "test_m3_dispatch.py", "ctrl_c", "never BaseException"),
    ("results sent with role function", "test_m4_loop.py", "runs_a_tool", "role is 'tool'"),
    ("stops at a call with bad JSON", "test_m4_loop.py", "bad_json", "it does not end the run"),
    ("any text ends the run", "test_m4_loop.py", "thought", "not by message.content"),
    ("an empty reply asks again", "test_m4_loop.py", "empty_reply", "do not ask again"),
    ("model errors become the answer", "test_m4_loop.py", "failed_model_call", "do not wrap complete()"),
    ("a debug print in dispatch_tool", "test_m5_copilot.py", "never_stops", "Remove debug prints"),
])
def test_each_hint_follows_from_what_was_wrong(name, test_file, selection, words, tmp_path):
    from test_course import run_pytest

    _, record = run_pytest(["--impl-dir", str(planted(name, tmp_path)), f"code/tests/{test_file}", "-k", selection],
                           tmp_path)
    first = next(t for t in record["tests"] if t["outcome"] == "failed")
    hint = next((line for line in first["message"].splitlines() if line.strip().startswith("hint:")), "")
    assert words in hint, f"{name}: the hint should say {words!r}:\n{first['message']}"


def test_the_contracts_state_the_words_their_tests_want():
    """S2/S3 (and M2's error) tests look for words: each docstring contract names them."""
    def doc(module, name):
        source = (REPO_ROOT / "code" / f"{module}.py").read_text(encoding="utf-8")
        node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
        return " ".join(ast.get_docstring(node).split())

    wanted = {("stretch", "plan_edit"): ('"not found"', '"3 times"', '"empty"', '"same"'),
              ("stretch", "validate_answer"): ('"from 1"', '"end_line"'),
              ("agent_loop", "parse_tool_calls"): ("not valid JSON", "must be a JSON object", "two identical"),
              ("tools", "dispatch_tool"): ("only the names in TOOL_FUNCTIONS", "why the call was not run")}
    missing = {f"{m}.{f}": [w for w in words if w not in doc(m, f)] for (m, f), words in wanted.items()}
    assert not any(missing.values()), missing


def test_the_lessons_agree_on_what_ends_a_run():
    short = (REPO_ROOT / "lesson" / "lesson.md").read_text(encoding="utf-8")
    full = LESSON.read_text(encoding="utf-8")
    numbers = {"three": 3, "four": 4, "five": 5}
    said_short = re.search(r"Only (\w+) things end a run", " ".join(short.split()))
    said_full = re.search(r"A copilot run ends in one of (\w+) ways", full)
    assert said_short and said_full and numbers[said_short[1]] == numbers[said_full[1]], (said_short, said_full)



def test_the_m4_hints_name_the_error_prefix_the_test_wants():
    """M4's tests want 'Error: ' + call.error as a broken call's result: tiers 2 and 3 say so in those words."""
    from harness.milestones import BY_ID

    approach, pseudo = BY_ID["M4"].hints[1:]
    assert "'Error: ' + call.error" in approach and "'Error: ' + call.error" in pseudo, (approach, pseudo)


def test_the_demo_scripts_a_reply_for_every_option_it_passes_on(tmp_path):
    """`python -m harness.demo --structured` (S3) asks the model once more, for emit_answer: the demo
    scripts that reply too (it stopped with "HTTP 500: script exhausted" before), and its citations
    are the ones the sample answer wrote, so the structured answer is accepted."""
    from harness import demo

    _, replies = demo.sample()
    scripted = demo.replies_for(["--structured"], replies)
    assert scripted[:-1] == replies and scripted[-1]["tool_calls"][0]["name"] == "emit_answer", scripted[-1]
    assert demo.replies_for([], replies) == replies
    run = copilot_run(REPO_ROOT, tmp_path / "cache", "--reference", "--structured", module="harness.demo")
    assert run.returncode == 0 and "Structured answer: accepted" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
