"""Course checks for the grader's findings on write-ups (grading/findings.py): a finding is proven or
it is not made.

Two halves. The honest corpus (rubric/checks/honest/: write-ups in several voices, with the small
code they cite) must produce no proven finding of any kind, whatever hypotheses, projections, hedged
numbers, line ranges, template labels and fence spellings it holds. And each kind must still catch
the contradiction it exists for. Fast: no grading run.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import criteria, documents, findings, prose  # noqa: E402

HONEST = Path(__file__).resolve().parent / "honest"
BLOCK = {"steps": "50 model calls", "tool calls": "50 ran, 0 returned an error", "leaked": "no",
         "projection": "left running, it would fill the window after about 807 calls",
         "ended": "harness ceiling: stopped at 50 model calls"}
LEAKED = {"steps": "9 model calls", "leaked": "YES: 5 of 9 probes outside the repository got through", "ended": "answered"}
# What a default rerun of each break prints (the grader compares a pasted block with it).
FRESH = {"runaway": BLOCK, "escape": LEAKED,
         "amnesia": {"steps": "10 model calls", "tool calls": "10 ran", "repeats": "9 identical repeated calls",
                     "ended": "max_steps"}}
TABLE = """component               scripted good  scripted bad
----------------------  -------------  ------------
context hit             5/5            5/5
evidence read           5/5            2/5
root cause named        1/1            0/1
"""
ROWS = """run   question         context  read  tools              cited  grounded  expect  symbols  root  steps
----  ---------------  -------  ----  -----------------  -----  --------  ------  -------  ----  -----
good  shop-total-bug   yes      yes   yes                yes    2/2       yes     3/3      yes   4
bad   shop-total-bug   yes      yes   yes                yes    2/2       yes     2/3      NO    4
bad   member-discount  yes      yes   NO (1 err, 1 rep)  yes    2/2       yes     3/3      -     5
"""


def submission(tmp_path: Path, doc: Path) -> Path:
    sub = tmp_path / doc.stem.replace(".", "_")
    shutil.copytree(HONEST / "code", sub / "code")
    shutil.copy(doc, sub / (doc.name.split(".")[0] + ".md"))
    return sub


def review(sub: Path) -> tuple:
    u = documents.understanding(sub / "UNDERSTANDING.md")
    f = documents.failure_analysis(sub / "FAILURE_ANALYSIS.md", FRESH, "")
    return u, f, prose.review(sub, u, f, FRESH)


# --------------------------------------------------------------------------- the honest corpus

@pytest.mark.parametrize("doc", sorted(HONEST.glob("*.md")), ids=lambda p: p.name)
def test_an_honest_write_up_gets_no_proven_finding_of_any_kind(tmp_path, doc):
    u, f, r = review(submission(tmp_path, doc))
    proven = [x for x in r["findings"] if x["caps"]]
    assert not proven, f"{doc.name}: false findings: {proven}"
    assert not any(row for b in f.get("breaks", {}).values() for row in b.get("comparison", []) if not row[3]), \
        f"{doc.name}: a pasted block read as differing from the rerun: {f['breaks']}"
    assert not r["understanding_findings"] + r["failure_findings"] + r["evaluation_findings"] + r["my_case_findings"]


def test_the_honest_corpus_covers_every_block_spelling_and_the_run_with_its_own_flags(tmp_path):
    _, careful, _ = review(submission(tmp_path, HONEST / "FAILURE_ANALYSIS.careful.md"))
    _, chatty, r = review(submission(tmp_path, HONEST / "FAILURE_ANALYSIS.chatty.md"))
    # ~~~~text, ```TEXT and ````text blocks are all read, and two blocks of one break both kept
    assert careful["breaks"]["runaway"]["evidence_block"] and careful["breaks"]["escape"]["evidence_block"]
    assert chatty["breaks"]["runaway"]["evidence_block"] and len(careful["breaks"]["amnesia"]["blocks"]) == 2
    assert careful["breaks"]["runaway"]["flags"].startswith("--max-calls")
    assert "comparison" not in careful["breaks"]["runaway"], "a --max-calls 30 run compared with a default rerun"
    # a break with only a --simulate block: a note for the instructor, never a contradiction
    notes = [x for x in r["findings"] if x["kind"] == "simulated"]
    assert [x["where"] for x in notes] == ["amnesia Evidence"] and not notes[0]["caps"]


@pytest.mark.parametrize("evidence", [
    "Hypothesis: I predict about 30 calls before anything stops it.",
    "I expect it to stop near 20 calls.",
    "The projection says it would run for about 807 calls before the window fills.",
    "With the cap in place the same scenario stops itself after 10 calls.",
    "It made about 45 calls before the harness stopped it.",
    "Roughly 3k calls a day would be a lot, but this run was 50 calls.",
    "The first 10 calls looked normal; then it repeated itself.",
    "I ran it with --max-calls 300 and it made 300 calls before the harness stopped it.",
    "It made more than 40 calls.",
    "It went on for about a dozen calls, all of them the same read_file.",
    "Roughly 3k calls would have been the real bill; here it was 10 calls.",
])
def test_predictions_projections_hedges_and_stated_flags_are_not_contradictions(evidence):
    block = BLOCK
    if "300" in evidence:
        block = dict(BLOCK, steps="300 model calls", **{"tool calls": "300 ran"})
    if "dozen" in evidence or "3k" in evidence:
        block = FRESH["amnesia"]
    found = findings.count_claims("runaway", evidence, [block], BLOCK)
    assert found == [], found


@pytest.mark.parametrize("evidence", [
    "Nothing leaked through `.env`: that rule is another layer.",
    "The symlink probes did not get out, the provided opener refused them.",
    "I expected that nothing would leak, but 5 of 9 did.",
    "On my own code the run did not leak 5 of 5, it crashed after 3 leaks.",
])
def test_a_partial_or_predicted_no_leak_is_not_a_contradiction(evidence):
    assert findings.leak_claims("escape", evidence, [LEAKED]) == []


def test_a_line_range_is_read_whole_and_a_claim_without_a_shared_name_is_only_a_note(tmp_path):
    sub = submission(tmp_path, HONEST / "FAILURE_ANALYSIS.careful.md")
    resolve = lambda rel: prose._file(sub, rel)  # noqa: E731
    checks, notes = findings.line_claims("Results go back with `messages.append` (agent_loop.py:22-31).", resolve)
    assert checks[0]["ok"] is True and notes == []
    checks, notes = findings.line_claims("The loop that keeps the model honest lives at agent_loop.py:5, see "
                                         "`TOOL_SCHEMAS`.", resolve)
    assert checks[0]["ok"] is None and [n.kind for n in notes] == ["line_unchecked"] and not notes[0].caps


def test_the_template_label_and_a_negated_label_are_not_the_learners_answer():
    text = ("- Question: shop-total-bug, scripted bad run\n- Boundary failure or reasoning failure, and why: "
            "reasoning; not a boundary failure, every limit held.")
    assert findings.my_case_label(text) == []
    assert findings.my_case_label("- _Boundary failure or reasoning failure, and why:_ shop-total-bug: a reasoning "
                                  "failure.") == []


def test_a_sentence_about_context_hit_is_not_one_about_evidence_read():
    said = "Evidence read separates the runs, while context hit is the same for both."
    assert findings.evaluation_claims(said, TABLE) == []
    assert findings.evaluation_claims("Context hit cannot separate them: 5/5 for both.", TABLE) == []
    assert findings.row_claims("The bad run's shop-total-bug row: read yes, grounded 2/2, yet root NO and "
                               "symbols 2/3.", ROWS) == []


# --------------------------------------------------------------------------- what each kind still catches

def test_each_kind_still_catches_its_contradiction(tmp_path):
    assert findings.count_claims("runaway", "Surprise: it stopped by itself after only 12 model calls.", [BLOCK], BLOCK)
    assert findings.count_claims("runaway", "My loop ran 140 calls before the ceiling.", [BLOCK], BLOCK)
    assert findings.leak_claims("escape", "Nothing leaked: every probe was refused.", [LEAKED])
    assert findings.ending_claims("runaway", "It stopped at max_steps and returned MAX_STEPS_REACHED.", [BLOCK])
    assert findings.evaluation_claims("Root cause named is the same for both runs.", TABLE)
    assert findings.row_claims("On shop-total-bug the bad run has root YES, just like the good run.", ROWS)
    assert findings.my_case_label("- Boundary failure or reasoning failure, and why: boundary failure: the "
                                  "shop-total-bug run stopped reading too early.")
    assert findings.repeated({"a": "This safeguard keeps the whole system robust reliable and scalable today.",
                              "b": "Other words. This safeguard keeps the whole system robust reliable and scalable today."},
                             "FAILURE_ANALYSIS.md")
    lesson = findings._words("the model repeats the same call, because it never sees what came back from the tools "
                             "it asked for")
    assert findings.lifted("The model repeats the same call, because it never sees what came back from the tools.",
                           lesson, "amnesia Hypothesis")
    sub = submission(tmp_path, HONEST / "FAILURE_ANALYSIS.careful.md")
    (sub / "code" / "agent_loop.py").write_text(
        (sub / "code" / "agent_loop.py").read_text().replace("json.loads(raw)", "ast.literal_eval(raw)"))
    checks, notes = findings.line_claims("My parse_tool_calls runs `json.loads` on it (agent_loop.py:11), which gives "
                                         "a dict for `**args`.", lambda rel: prose._file(sub, rel))
    assert checks[0]["ok"] is False and notes[0].kind == "line" and not notes[0].caps


@pytest.mark.parametrize("fence,label", [("```", "text"), ("~~~", "text"), ("````", "TEXT"), ("~~~~~", ""),
                                         ("```", "Text")])
def test_an_evidence_block_is_read_whatever_its_fence_and_one_without_a_scenario_is_a_note(fence, label):
    block = f"{fence}{label}\nscenario     : runaway: cap removed\nsteps        : 50 model calls\n{fence}\n"
    assert documents.parse_blocks(block)["runaway"]["steps"] == "50 model calls"
    assert findings.unparsed_blocks("runaway", block) == []
    broken = f"{fence}{label}\nsteps 50, tool calls 50, it ended at the ceiling\n{fence}\n"
    notes = findings.unparsed_blocks("runaway", broken)
    assert [n.kind for n in notes] == ["unparsed"] and not notes[0].caps


# --------------------------------------------------------------------------- what the criteria do with them

def _ev(u: dict, f: dict, r: dict) -> dict:
    return {"understanding": u, "failure": f, "prose": r}


@pytest.mark.parametrize("ran", ["simulated break on reference (rubric/reference/)", "reference (rubric/reference/)"])
def test_simulated_blocks_cannot_lift_failure_analysis_above_developing(tmp_path, ran):
    # --simulate and --reference blocks show the lab's break, not the learner's: the board keeps M6
    # pending on them, and C5 stays at most Developing however complete the prose is.
    text = (HONEST / "FAILURE_ANALYSIS.careful.md").read_text(encoding="utf-8")
    text = text.replace("ran          : your code (code/)", f"ran          : {ran}")
    doc = tmp_path / "FAILURE_ANALYSIS.simulated.md"
    doc.write_text(text, encoding="utf-8")
    u, f, r = review(submission(tmp_path, doc))
    s = criteria._failure(criteria.load_rubric()[5], _ev(u, f, r))
    assert s.level == "Developing" and s.rule == "C5.simulated_only", (s.level, s.reasons)


def test_the_grader_counts_the_same_evidence_blocks_as_own_as_the_learners_board():
    sys.path.insert(0, str(RUBRIC.parent / "code"))
    try:
        from harness import progress
    finally:
        sys.path.remove(str(RUBRIC.parent / "code"))
    for ran in ["your code (code/)", "simulated break on reference (rubric/reference/)",
                "simulated break on your code (code/)", "reference (rubric/reference/)", "my_lab", None]:
        block = "scenario     : runaway\n" + (f"ran          : {ran}\n" if ran is not None else "") + "steps : 3\n"
        fields = {} if ran is None else {"ran": ran}
        assert findings.own_block(fields) == progress.own_block(block), ran
        assert documents.own_run(fields) == progress.own_block(block), ran


def test_a_failure_analysis_made_of_the_lesson_and_the_template_example_is_not_exemplary(tmp_path):
    lesson = (RUBRIC.parent / "lesson" / "lesson.agent.md").read_text(encoding="utf-8")
    row = next(line for line in lesson.splitlines() if line.startswith("| `amnesia` |"))
    copied = row.split("|")[3].strip().capitalize() + "."
    template = (RUBRIC.parent / "FAILURE_ANALYSIS.md").read_text(encoding="utf-8")
    example = " ".join(template.split("### A measured case", 1)[1].split("\n\n")[1].split())
    text = (HONEST / "FAILURE_ANALYSIS.careful.md").read_text(encoding="utf-8")
    text = text.replace("The model will repeat itself, maybe a dozen times, because it never sees an answer.", copied)
    text = text.replace("- What would fix it:", f"- What the answer said: {example}\n- What would fix it:")
    doc = tmp_path / "FAILURE_ANALYSIS.lifted.md"
    doc.write_text(text, encoding="utf-8")
    u, f, r = review(submission(tmp_path, doc))
    lifted = [x for x in r["findings"] if x["kind"] == "lifted"]
    assert {x["where"] for x in lifted} >= {"amnesia Hypothesis", "My case"}, lifted
    s = criteria._failure(criteria.load_rubric()[5], _ev(u, f, r))
    assert s.level != "Exemplary", s.reasons


@pytest.mark.parametrize("answer,level", [
    ("A step budget with a recorded stop reason, for a StarcallOS assistant that books meetings: without it a "
     "conflict retried forever would burn the calendar quota.", "Exemplary"),
    ("Refusals as observations: a StarcallOS agent should report a refused path to the model so it can re-plan.",
     "Proficient"),
    ("StarcallOS should use a sandbox so it is safe and works well for users.", "Developing"),
    ("StarcallOS can adopt a root bound by the application, refusals as observations, a step budget and checked "
     "citations to stay safe and trustworthy for everyone.", "Developing"),
])
def test_the_reflection_credits_the_templates_patterns_applied_to_a_capability(answer, level):
    u = {"exists": True, "answers": [{"key": "StarcallOS", "answered": True, "text": answer, "after_text": "",
                                      "excerpt": answer, "lifted_from_lesson": []}]}
    s = criteria._starcall(criteria.load_rubric()[7], _ev(u, {}, {"answers": {"StarcallOS": {"specific": []}},
                                                                  "findings": []}))
    assert s.level == level, s.reasons


# --------------------------------------------------------------------------- feedback and the CSV

def graded(tmp_path: Path) -> dict:
    """A report as grade.py writes it, for the learner of the chatty write-up with one false claim added."""
    doc = tmp_path / "FAILURE_ANALYSIS.slip.md"
    doc.write_text((HONEST / "FAILURE_ANALYSIS.chatty.md").read_text(encoding="utf-8").replace(
        "so not 100, it was 50 calls", "so not 100, it stopped after 12 calls on its own"), encoding="utf-8")
    u, f, r = review(submission(tmp_path, doc))
    rubric = criteria.load_rubric()
    crit = []
    for n, c in sorted(rubric.items()):
        s = criteria._failure(c, _ev(u, f, r)) if n == 5 else criteria._s("Proficient", ["all listed tests pass"], f"C{n}.x")
        crit.append({"number": n, "title": c.title, "weight": c.weight, "level": s.level, "points": c.points[s.level],
                     "reasons": s.reasons, "mark": s.mark, "rule": s.rule, "confidence": s.confidence, "quotes": s.quotes})
    return {"learner": "pat", "criteria": crit, "total": sum(c["points"] for c in crit), "max_total": 100,
            "findings": r["findings"], "tests": [], "battery": {}, "failure_analysis": f, "integrity": {"flags": {}}}


def test_feedback_gives_the_findings_in_plain_words_without_rule_ids(tmp_path):
    from grading import feedback
    r = graded(tmp_path)
    c5 = r["criteria"][4]
    assert c5["level"] == "Developing" and any(x.startswith("[F") for x in c5["reasons"]), c5["reasons"]
    text = feedback.render(r)
    section = text.split("### 5.")[1].split("###")[0]
    assert "'12 calls'" in section and "evidence block you pasted shows 50 model calls" in section, section
    assert not re.search(r"\[F\d+\]|C\d\.\w+|caps? this|to decide", text), text


def test_reasons_follow_the_level_the_instructor_chose_and_a_dropped_finding_leaves_the_feedback(tmp_path):
    from grading import feedback
    r = graded(tmp_path)
    finding = next(f for f in r["findings"] if f["kind"] == "count")
    levels = {c["number"]: (c["level"], c["points"]) for c in r["criteria"]}
    levels[5] = ("Proficient", 11)
    text = feedback.render(r, levels, dropped=[finding["id"].lower()])
    assert "12 calls" not in text, "a dropped finding is still in the feedback"
    well = text.split("## What you did well")[1].split("## What to work on")[0]
    assert "Failure analysis** (Proficient): your instructor chose Proficient; the rubric describes it as: The three " \
           "core breaks" in well, well
    assert "at most Developing" not in text and "contradicts" not in text


def test_the_grades_csv_lists_findings_and_finalize_drops_the_ones_named(tmp_path):
    import csv
    import json

    from grading import decisions
    r = graded(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "pat.json").write_text(json.dumps(r), encoding="utf-8")
    decisions.write_csv([r], tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    finding = next(f for f in r["findings"] if f["kind"] == "count")
    assert f"{finding['id']}: runaway: says" in rows[0]["findings"]
    rows[0].update(drop_findings=f"{finding['id']}, F99", c5_level="Proficient")
    with open(tmp_path / "grades.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    errors = decisions.finalize(tmp_path / "grades.csv", reports, tmp_path / "final.csv", tmp_path / "fb")
    assert len(errors) == 1 and "F99" in errors[0] and "not a finding" in errors[0], errors
    rows[0]["drop_findings"] = finding["id"]
    with open(tmp_path / "grades.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert decisions.finalize(tmp_path / "grades.csv", reports, tmp_path / "final.csv", tmp_path / "fb") == []
    text = (tmp_path / "fb" / "pat.md").read_text(encoding="utf-8")
    assert "12 calls" not in text and "your instructor chose Proficient" in text


def test_a_decision_pointed_at_code_its_function_never_uses_keeps_failure_analysis_from_exemplary():
    parts = list(documents.PARTS)
    breaks = {s: {"filled": parts, "complete": True, "own_evidence": True, "evidence_block": True,
                  "excerpts": {"Hypothesis": "a prediction"}} for s in documents.SCENARIOS}
    fa = {"exists": True, "breaks": breaks, "my_case": {"words": 40}}
    note = {"id": "F1", "kind": "line", "caps": False, "where": "raw-arguments write-up", "quote": "",
            "instructor": "agent_loop.py:171 reads 'args = ast.literal_eval(raw)'; the sentence names json.loads"}
    review_ = {"breaks": {s: {"specific": ["max_steps"]} for s in documents.SCENARIOS}, "findings": []}
    rubric = criteria.load_rubric()[5]
    assert criteria._failure(rubric, _ev({}, fa, review_)).level == "Exemplary"
    s = criteria._failure(rubric, _ev({}, fa, dict(review_, findings=[note])))
    assert s.level == "Proficient" and s.mark == "READ" and any("F1" in x for x in s.reasons), s.reasons


def test_a_block_whose_counts_differ_from_the_rerun_is_a_question_and_one_that_ended_otherwise_a_finding():
    parts = list(documents.PARTS)
    breaks = {s: {"filled": parts, "complete": True, "own_evidence": True, "evidence_block": True,
                  "excerpts": {"Hypothesis": "a prediction"}} for s in documents.SCENARIOS}
    breaks["escape"]["comparison"] = [("steps", "8 model calls", "5 model calls", False)]
    review_ = {"breaks": {s: {"specific": ["max_steps"]} for s in documents.SCENARIOS}, "findings": []}
    s = criteria._failure(criteria.load_rubric()[5], _ev({}, {"exists": True, "breaks": breaks,
                                                              "my_case": {"words": 40}}, review_))
    assert s.level == "Exemplary" and s.mark == "READ" and any("escape block differ" in x for x in s.reasons), s.reasons
    breaks["escape"]["comparison"].append(("ended", "max_steps", "answered", False))
    s = criteria._failure(criteria.load_rubric()[5], _ev({}, {"exists": True, "breaks": breaks,
                                                              "my_case": {"words": 40}}, review_))
    assert s.level == "Developing" and any("does not match a fresh run for: escape" in x for x in s.reasons), s.reasons


def test_an_after_m6_note_is_checked_against_the_break_it_names(tmp_path):
    sub = submission(tmp_path, HONEST / "FAILURE_ANALYSIS.chatty.md")
    shutil.copy(HONEST / "UNDERSTANDING.terse.md", sub / "UNDERSTANDING.md")
    _, _, r = review(sub)
    assert not [x for x in r["findings"] if x["caps"]], r["findings"]
    text = (HONEST / "UNDERSTANDING.terse.md").read_text(encoding="utf-8")
    (sub / "UNDERSTANDING.md").write_text(text.replace("I guessed 25 calls, the block said 50 calls, stopped",
                                                       "it stopped after 12 calls on its own, stopped"), encoding="utf-8")
    _, _, r = review(sub)
    found = [x for x in r["findings"] if x["caps"]]
    assert [(x["kind"], x["where"], x["criterion"]) for x in found] == [("count", "Q5", 4)], found
    assert found[0]["learner"].startswith("In your After M6 note to question 5, about the runaway break")
