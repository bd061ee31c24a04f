"""Course checks for the grader's reading of prose and code (grading/prose.py, similarity.py, the
code signals): each cross-check fires on the contradiction it names and stays quiet on the truth.
Fast: no grading run, small files in tmp_path."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import documents, learner_code, prose, similarity  # noqa: E402

BLOCK = {"steps": "50 model calls", "tool calls": "50 ran, 0 returned an error", "leaked": "YES"}
TABLE = """component               scripted good  scripted bad
----------------------  -------------  ------------
evidence read           5/5            2/5
context hit             5/5            5/5
root cause named        1/1            0/1
"""


def sub_with(tmp_path: Path, name: str, source: str) -> Path:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / name).write_text(source, encoding="utf-8")
    return tmp_path


def test_a_call_count_the_block_does_not_show_is_a_contradiction():
    found = prose.against_block("runaway", "It stopped after 12 model calls.", BLOCK, {})
    assert found and "12 model calls" in found[0] and "50 model calls" in found[0]
    assert prose.against_block("runaway", "It made 50 model calls before the ceiling.", BLOCK, {}) == []


def test_an_ending_the_block_does_not_show_is_a_contradiction():
    block = dict(BLOCK, ended="harness ceiling: stopped at 50 model calls")
    said = "My loop stopped at max_steps and returned MAX_STEPS_REACHED."
    assert prose.against_block("runaway", said, block, {}, said)
    assert prose.against_block("runaway", "Only the harness ceiling ended it.", block, {}, "Only the harness ceiling ended it.") == []


def test_nothing_leaked_beside_leaked_yes_is_a_contradiction():
    assert prose.against_block("escape", "Nothing leaked: the sandbox held.", BLOCK, {})
    assert prose.against_block("escape", "Nothing leaked.", dict(BLOCK, leaked="no"), {}) == []


def test_a_file_line_claim_is_checked_against_that_line(tmp_path):
    # A line that shares no name with its sentence is "could not check" (None), never false: only code
    # the sentence names and the function at that line never uses makes a claim false (test_findings.py).
    source = '"""doc"""\n\n\n\n\n\ndef run_agent(max_steps):\n    for _ in range(max_steps):\n        args = eval(x)\n'
    sub = sub_with(tmp_path, "agent_loop.py", source)
    right = prose.file_line_claims("The cap is `max_steps` (agent_loop.py:8) in run_agent.", sub)
    unsure = prose.file_line_claims("The cap is `max_steps` (agent_loop.py:1).", sub)
    wrong = prose.file_line_claims("I decode with `json.loads(raw)` (agent_loop.py:9).", sub)
    assert right[0]["ok"] is True and unsure[0]["ok"] is None and wrong[0]["ok"] is False, (right, unsure, wrong)


def test_a_file_line_claim_never_reads_outside_the_submission(tmp_path):
    outside = tmp_path / "secret.py"
    outside.write_text("TOKEN = 'instructor-only'\n", encoding="utf-8")
    sub = tmp_path / "learner"
    (sub / "code").mkdir(parents=True)
    claims = prose.file_line_claims("See ../../secret.py:1 for `TOKEN`.", sub)
    assert claims and claims[0]["ok"] is None and "instructor-only" not in json.dumps(claims)


def test_the_evaluation_reading_is_checked_against_the_pasted_table():
    found = prose.evaluation_reading("Root cause named is the same for both runs.", TABLE)
    assert found and "1/1 against 0/1" in found[0]
    assert prose.evaluation_reading("Context hit is the same for both runs; root cause named separates them.", TABLE) == []


def test_the_scripted_shop_total_bug_case_is_a_reasoning_failure():
    assert prose.my_case_label("Question: shop-total-bug. This is a boundary failure: the answer was wrong.")
    assert prose.my_case_label("shop-total-bug: a reasoning failure, not a boundary failure.") == []


def test_repeated_sentences_and_generic_answers_are_found():
    same = "This highlights the key role of careful design in modern AI systems today."
    assert prose.repeated({"1": same, "2": "Other words. " + same})
    assert prose.specific("Careful design matters a lot.", {"max_steps"}) == []
    assert "max_steps" in prose.specific("My loop stops at max_steps (agent_loop.py:12).", {"max_steps"})


def test_a_saved_run_counts_only_when_its_tool_results_match_the_files(tmp_path):
    sub = sub_with(tmp_path, "config.py", "A = 1\nB = 2\n")
    def run(lines):
        body = "\n".join(f"{i:>5}| {t}" for i, t in enumerate(lines, 1))
        return {"answer": "a", "citations": [{"grounded": True}], "tool_calls": [{}], "messages": [
            {"role": "assistant", "tool_calls": [{"id": "1"}]},
            {"role": "tool", "content": f"[File: config.py (2 lines total) - showing lines 1-2]\n{body}"}]}
    (sub / "runs").mkdir()
    (sub / "runs" / "real.json").write_text(json.dumps(run(["A = 1", "B = 2"])))
    (sub / "runs" / "made_up.json").write_text(json.dumps(run(["GROQ = True", "B = 2"])))
    found = {r["path"]: r["checks_out"] for r in documents.saved_runs(sub)}
    assert found == {"runs/made_up.json": False, "runs/real.json": True}


def signal(source: str, function: str, label_start: str) -> bool:
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
    make = {**learner_code.RULES["agent_loop.py"], **learner_code.RULES["tools.py"]}[function]
    return next(s.found for s in make(fn, source) if s.label.startswith(label_start))


def test_every_counted_loop_and_containment_idiom_is_recognised():
    counted = "def run_agent(messages, max_steps):\n    steps = 0\n    while steps < max_steps:\n        steps += 1\n"
    assert signal(counted, "run_agent", "counted loop")
    assert not signal("def run_agent(messages, max_steps):\n    while True:\n        pass\n", "run_agent", "counted loop")
    for check in ("root not in target.parents and target != root", "not target.is_relative_to(root)",
                  "os.path.commonpath([root, target]) != str(root)"):
        source = f"def safe_resolve(repo_root, rel_path):\n    if {check}:\n        raise ValueError\n"
        assert signal(source, "safe_resolve", "containment by components"), check
    blocklist = ("def safe_resolve(repo_root, rel_path):\n    for w in ('outside', 'secret'):\n        if w in rel_path:\n"
                 "            raise ValueError\n    if rel_path.startswith('../'):\n        raise ValueError\n")
    assert signal(blocklist, "safe_resolve", "no containment check")


def test_a_renamed_function_is_the_same_after_normalising():
    a = ast.parse("def f(x):\n    total = x + 1\n    return f'{total}'\n").body[0]
    b = ast.parse("def f(value):\n    '''doc'''\n    result = value + 1  # note\n    return f'{result}!'\n").body[0]
    c = ast.parse("def f(x):\n    return x - 1\n").body[0]
    assert similarity.normalised(a) == similarity.normalised(b) != similarity.normalised(c)


def test_hostile_prose_is_read_in_bounded_time(tmp_path):
    import time
    sub = sub_with(tmp_path, "agent_loop.py", "def run_agent(max_steps):\n    pass\n")
    huge = " x.py:1" * 1_000 + "root cause named is " * 50_000 + "a.a-a/" * 100_000
    answers = [{"key": k, "answered": True, "text": huge, "after_text": huge, "question": "q"} for k in "1234567"]
    failure = {"breaks": {"runaway": {"prose": {"Hypothesis": huge}, "pasted": BLOCK}},
               "evaluation": {"interpretation_text": huge, "table_text": TABLE * 1000}, "my_case": {"text": huge}}
    started = time.monotonic()
    out = prose.review(sub, {"answers": answers}, failure, {})
    assert time.monotonic() - started < 10, "the prose checks must stay bounded on a huge write-up"
    assert out["answers"]["1"]["claims"] and len(out["answers"]["1"]["claims"]) <= prose.MAX_CLAIMS
