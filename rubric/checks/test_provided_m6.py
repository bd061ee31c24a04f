"""Course checks (maintainers): the provided M6 harnesses - break_and_observe.py, evaluate.py,
the question sets and FAILURE_ANALYSIS.md's template - work on their own. Most of these pass even
on the stubs (the simulated breaks run the reference), so they are not guiding tests.
Run with the maintainer command (python -m pytest --reference --unlock-all code/tests rubric/checks).
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys

import pytest

from harness.evaluation import COLUMNS
from harness.offline import go_offline, offline_env
from harness.paths import CODE_DIR, REPO_ROOT

bo = importlib.import_module("break_and_observe")
evaluate = importlib.import_module("evaluate")



def clean_env(tmp_path, impl=None):
    env = offline_env(tmp_path / "cache")
    env.pop("LESSON06_IMPL", None)
    if impl:
        env["LESSON06_IMPL"] = impl
    return env


def cli(script, args, tmp_path, impl=None, cwd=CODE_DIR):
    """Run a provided script as a learner would; the timeout only guards against a hang."""
    return subprocess.run([sys.executable, str(CODE_DIR / script), *args], cwd=cwd, env=clean_env(tmp_path, impl),
                          capture_output=True, text=True, timeout=120)


def assert_clean(proc):
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-2000:]


# ---------------------------------------------------------------- FAILURE_ANALYSIS.md (structure only)

BREAKS = ("runaway", "escape", "amnesia", "raw-arguments", "vague-tools")
PER_BREAK = ("Hypothesis", "What I changed", "Command", "Evidence", "Design decision that prevents it", "Production cost")


def sections():
    """[(level, title, body)] of FAILURE_ANALYSIS.md, split at Markdown headings (outside code fences)."""
    text = (REPO_ROOT / "FAILURE_ANALYSIS.md").read_text(encoding="utf-8")
    found, fence, current = [], False, None
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        heading = None if fence else re.match(r"^(#{2,3}) (.+)$", line)
        if heading:
            current = [len(heading.group(1)), heading.group(2).strip(), []]
            found.append(current)
        elif current is not None:
            current[2].append(line)
    return [(level, title, "\n".join(body)) for level, title, body in found]


def test_failure_analysis_keeps_its_sections():
    found = sections()
    tops = [title for level, title, _ in found if level == 2]
    for number, name in enumerate(BREAKS, 1):
        top = next((t for t in tops if t.startswith(f"Break {number}: {name}")), None)
        assert top, f"FAILURE_ANALYSIS.md lost '## Break {number}: {name} ...'; headings: {tops}"
        start = next(i for i, (lvl, t, _) in enumerate(found) if lvl == 2 and t == top)
        subs = []
        for level, title, body in found[start + 1:]:
            if level == 2:
                break
            subs.append((title, body))
        assert [t for t, _ in subs] == list(PER_BREAK), f"{top}: sub-sections {[t for t, _ in subs]}"
        command = dict(subs)["Command"]
        assert f"python break_and_observe.py {name}" in command, f"{top}: the Command section names the scenario"
    assert "Evaluation" in tops and "Right evidence, wrong answer" in tops, tops
    for section, expected in (("Evaluation", ("Command", "Component table", "What the numbers say")),
                              ("Right evidence, wrong answer", ("Boundary failures vs reasoning failures",
                                                                "A measured case", "My case"))):
        start = next(i for i, (lvl, t, _) in enumerate(found) if lvl == 2 and t == section)
        subs = []
        for level, title, _ in found[start + 1:]:
            if level == 2:
                break
            subs.append(title)
        assert subs == list(expected), f"{section}: {subs}"


def test_the_measured_case_keeps_the_case_study_numbers():
    case = next(body for _, title, body in sections() if title == "A measured case")
    for fact in ("0.60", "0.25", "0.20", "0.15", "0.40", "9,647", "`cost`", "`price`", "shop-total-bug"):
        assert fact in case, f"'A measured case' lost {fact!r}"


# ---------------------------------------------------------------- break_and_observe.py

def test_every_simulated_break_shows_its_failure_from_the_command_line(tmp_path):
    proc = cli("break_and_observe.py", ["all", "--simulate", "--json"], tmp_path, impl="code")
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr
    runs = {ev["scenario"]: ev for ev in json.loads(proc.stdout)}
    assert list(runs) == list(BREAKS)
    for name, ev in runs.items():
        assert ev["failure_observed"], f"{name}: {ev['verdict']}"
        assert "simulated break on reference" in ev["ran"] and ev["model"].startswith("scripted")
    assert runs["runaway"]["ended"] == "harness ceiling" and runs["runaway"]["steps"] == bo.HARNESS_MAX_CALLS
    assert runs["escape"]["leaked"] is True
    assert runs["amnesia"]["results_seen"] == 0 and runs["amnesia"]["repeats"] >= 5
    assert runs["raw-arguments"]["tool_errors"] == runs["raw-arguments"]["tool_calls"] > 0
    assert any(k == "wrong tool" for k, _ in runs["vague-tools"]["details"])


def test_reference_runs_show_every_defence_holding(tmp_path):
    proc = cli("break_and_observe.py", ["all", "--reference", "--json"], tmp_path)
    assert_clean(proc)
    runs = json.loads(proc.stdout)
    assert proc.returncode == 0 and not any(ev["failure_observed"] for ev in runs), [ev["verdict"] for ev in runs]
    assert not any(ev["leaked"] for ev in runs)


def test_evidence_blocks_are_paste_ready_and_hide_temporary_paths(tmp_path):
    proc = cli("break_and_observe.py", ["escape", "--simulate"], tmp_path, impl="code")
    assert_clean(proc)
    block = proc.stdout[proc.stdout.index("```text"):]
    for label in ("steps", "tool calls", "tokens", "cost", "repeats", "leaked", "ended", "prevented by"):
        assert re.search(rf"^{label}\s+: ", block, re.M), f"no {label!r} line:\n{block}"
    assert "LiteLLM 1.110.2 price map" in block and "<tmp>" in block
    assert "/tmp/" not in block and "lesson06-break-" not in block


def test_the_break_runs_offline_without_litellm(tmp_path):
    code = ("import sys; import break_and_observe as b; rc = b.main(['all', '--simulate', '--json']); "
            "print('LITELLM', 'litellm' in sys.modules, rc)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=CODE_DIR, env=clean_env(tmp_path, "code"),
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.rstrip().endswith("LITELLM False 0"), proc.stdout[-300:] + proc.stderr[-1000:]


def test_stub_code_gets_one_line_naming_the_milestone(tmp_path):
    for script, args in (("break_and_observe.py", ["runaway"]), ("evaluate.py", [])):
        proc = cli(script, args, tmp_path, impl="code")
        assert_clean(proc)
        assert proc.returncode == 2 and re.match(r"M\d is not done yet: ", proc.stderr), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "--" in proc.stderr


def test_bad_arguments_exit_2_without_a_traceback(tmp_path):
    cases = [
        ("break_and_observe.py", ["bogus"]),
        ("break_and_observe.py", ["runaway", "--simulate", "--max-calls", "0"]),
        ("evaluate.py", ["--reference", "--runs", "nope"]),
        ("evaluate.py", ["--reference", "--questions", str(tmp_path / "missing.jsonl"), "--model"]),
        ("evaluate.py", ["--reference", "--repo", str(tmp_path / "nowhere")]),
        ("evaluate.py", ["--reference", "--only", "no-such-id"]),
    ]
    for script, args in cases:
        proc = cli(script, args, tmp_path)
        assert_clean(proc)
        assert proc.returncode == 2 and proc.stderr.strip(), (script, args, proc.stdout, proc.stderr)


def test_both_working_directories(tmp_path):
    proc = cli("break_and_observe.py", ["runaway", "--simulate"], tmp_path, impl="code", cwd=REPO_ROOT)
    assert_clean(proc)
    assert proc.returncode == 0 and "harness ceiling" in proc.stdout


def test_no_model_configured_is_one_line(tmp_path):
    proc = cli("break_and_observe.py", ["runaway", "--simulate", "--model"], tmp_path, impl="code")
    assert_clean(proc)
    assert proc.returncode == 2 and "cannot use a real model" in proc.stderr and "GROQ_API_KEY" in proc.stderr


def test_a_broken_question_file_names_its_line(tmp_path):
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "a", "question": "q", "relevant_files": [], "expected_symbols": [], "expected_citation": "x"}\n'
                   '{"id": "b"\n', encoding="utf-8")
    with pytest.raises(evaluate.QuestionSetError, match="line 2"):
        evaluate.load_questions(bad)


# ---------------------------------------------------------------- evaluate.py and the question sets

def test_question_sets_are_complete_and_match_their_scripted_runs():
    scripted = importlib.import_module("eval.scripted_runs").SCRIPTED
    for name, (path, repo) in evaluate.QUESTION_SETS.items():
        questions = evaluate.load_questions(path)
        ids = [q.id for q in questions]
        assert len(ids) == len(set(ids)) >= 5, f"{name}: ids {ids}"
        for run in ("good", "bad"):
            assert sorted(scripted[name][run]) == sorted(ids), f"{name}/{run}: scripted runs vs questions"
        for q in questions:
            for rel in q.relevant_files:
                assert (repo / rel).is_file(), f"{name}/{q.id}: relevant file {rel} does not exist"
            cited = q.expected_citation.partition(":")[0]
            assert (repo / cited).is_file(), f"{name}/{q.id}: expected citation {q.expected_citation}"
            assert all(bad.failure for bad in scripted[name]["bad"].values()), "every bad run says how it fails"
    fixture = {q.id: q for q in evaluate.load_questions(evaluate.QUESTION_SETS["fixture"][0])}
    assert fixture["shop-total-bug"].root_cause_terms == ("cost", "price")
    lab = [q.question for q in evaluate.load_questions(evaluate.QUESTION_SETS["lab"][0])]
    assert "What does config default to?" in lab


def test_lab_scripted_good_runs_stay_grounded(tmp_path):
    """Guards the lab set against drift in config.py, copilot.py, tools.py and agent_loop.py."""
    path, repo = evaluate.QUESTION_SETS["lab"]
    scores = evaluate.evaluate_scripted(evaluate.load_questions(path), repo, "lab", "good", cache_dir=tmp_path / "c")
    for s in scores:
        assert s.evidence_read and s.valid_tool_use and s.expected_citation, (s.id, s.files_read, s.ended)
        assert s.citations and s.grounded == s.citations, (s.id, s.ungrounded)
        assert len(s.symbols_found) == len(s.symbols_expected), (s.id, s.answer)


def test_evaluate_cli_prints_the_table_for_both_sets(tmp_path):
    for args in ([], ["--set", "lab"]):
        proc = cli("evaluate.py", ["--reference", *args], tmp_path)
        assert_clean(proc)
        assert proc.returncode == 0, proc.stderr
        header = next(line for line in proc.stdout.splitlines() if line.startswith("run "))
        assert header.split() == list(COLUMNS)
        assert "NOT model output" in proc.stdout and "component" in proc.stdout
    assert "scripted bad shop-total-bug: 0.60" in cli("evaluate.py", ["--reference"], tmp_path).stdout


# ---------------------------------------------------------------- --model, against a local server

def test_model_runs_hold_their_budget_against_a_local_server(tmp_path, monkeypatch, capsys):
    """The real LiteLLM path (harness/fake_server.py on 127.0.0.1): calls and tokens stay within budget."""
    fake = importlib.import_module("harness.fake_server")
    go_offline(monkeypatch, tmp_path / "cache")
    always_reads = lambda body, n: fake.tool_reply(("read_file", {"path": "README.md"}))  # noqa: E731
    with fake.FakeServer(always_reads) as server:
        base = ["--model", "openai/fake", "--api-base", server.base_url, "--json"]
        assert bo.main(["runaway", "--simulate", *base, "--max-calls", "4"]) == 0
        ev = json.loads(capsys.readouterr().out)
        assert ev["ended"] == "harness ceiling" and ev["steps"] == 4 == len(server.chat_requests)
        assert not ev["tokens_estimated"] and ev["tokens_in"] > 0 and ev["model"] == "real model: openai/fake"
        assert bo.main(["runaway", "--simulate", *base, "--max-tokens", "1500"]) == 0
        ev = json.loads(capsys.readouterr().out)
        assert ev["ended"] == "token budget" and ev["tokens_in"] + ev["tokens_out"] >= 1500
        assert ev["steps"] < bo.MODEL_MAX_CALLS  # the token budget stopped it, not the call ceiling
    answer = "subtotal sums item.cost (shop/service.py:9) but Item defines price (shop/models.py:11)."
    with fake.FakeServer(lambda body, n: fake.text_reply(answer)) as server:
        code = evaluate.main(["--model", "openai/fake", "--api-base", server.base_url, "--json", "--only", "shop-total-bug"])
        data = json.loads(capsys.readouterr().out)
    row = data["runs"]["model"]["questions"][0]
    assert code == 0 and row["root_cause"] is True and row["tokens_in"] > 0 and not row["tokens_estimated"]
    assert row["tool_calls"] == 0 and row["valid_tool_use"] is False and row["evidence_read"] is False
