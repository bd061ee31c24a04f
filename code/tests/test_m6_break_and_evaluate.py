"""M6 - Break and evaluate: the harnesses measure failures safely, on YOUR finished code.

break_and_observe.py removes one design decision at a time and measures what happens; evaluate.py
measures the copilot over a question set, component by component. These tests run both against
your four functions (M1-M4) with scripted models, offline, so they pass once your code is right
and stay deterministic. Your analysis goes in FAILURE_ANALYSIS.md; nothing here reads your prose.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path


import break_and_observe as bo
from harness.meter import HARNESS_MAX_TOOL_CALLS
from harness.milestones import BY_ID
from harness.paths import FIXTURE_REPO
from harness.teach import check, learner, show

M6 = BY_ID["M6"]
LOOP = "agent_loop.run_agent"


def lab():
    return bo.load_lab()


def without_time(evidence) -> dict:
    data = evidence.as_dict()
    data.pop("wall_seconds")
    return data


# --------------------------------------------------------------------------- break and observe

def test_the_harness_runs_offline_and_deterministically():
    """Every scenario, run twice on your code, measures exactly the same values (only time differs)."""
    for name in bo.SCENARIOS:
        first, second = bo.run_scenario(name, lab=lab()), bo.run_scenario(name, lab=lab())
        called = f"break_and_observe.run_scenario({name!r}) twice, scripted model, your code"
        check(without_time(first) == without_time(second), M6, LOOP, called,
              "identical evidence both times (the scripted model and the tools are deterministic)",
              f"{show(without_time(first))} then {show(without_time(second))}",
              "nothing in run_agent may depend on time, randomness or global state between runs")
        check(first.model.startswith("scripted") and first.tokens_estimated, M6, LOOP, called,
              "a scripted model (offline), tokens estimated", show(first.model),
              "the harness only calls a real model with --model")


def test_each_evidence_block_reports_measured_values():
    """On your (unbroken) code, each block shows the defence holding, in numbers from the run."""
    evidence = {name: bo.run_scenario(name, lab=lab()) for name in bo.SCENARIOS}
    default = importlib.import_module("agent_loop").DEFAULT_MAX_STEPS
    expected = {  # what the scripted models do against a correct M1-M4
        "runaway": ("max_steps", default, default),
        "escape": ("answered", None, None),
        "amnesia": ("answered", 4, 3),
        "raw-arguments": ("answered", 4, 3),
        "vague-tools": ("answered", 6, 5),
    }
    for name, ev in evidence.items():
        ended, steps, calls = expected[name]
        called = f"break_and_observe.run_scenario({name!r}) on your code"
        got = f"ended={ev.ended!r}, steps={ev.steps}, tool calls={ev.tool_calls}: {ev.ended_detail}"
        check(ev.ended == ended and steps in (None, ev.steps) and calls in (None, ev.tool_calls),
              M6, LOOP, called, f"ended={ended!r}, steps={steps}, tool calls={calls}", got,
              "run the scenario yourself: python break_and_observe.py " + name)
        block = bo.render(ev)
        for label, value in (("steps", f"{ev.steps} model calls"), ("tool calls", f"{ev.tool_calls} ran"),
                             ("tokens", f"{ev.tokens_in:,} in"), ("repeats", f"{ev.repeats} identical"),
                             ("leaked", "no"), ("ended", ev.ended), ("prevented by", ev.prevented_by[:30])):
            check(value in block and ev.tokens_in > 0, M6, LOOP, called, f"the block's {label!r} line shows {value!r}",
                  block, "the evidence block must carry the values measured in this run")
        check(not ev.leaked and not ev.failure_observed, M6, LOOP, called,
              "no leak and no failure: your code still has every defence", f"leaked={ev.leaked}, verdict={ev.verdict!r}",
              "undo your M6 experiments (git diff code/) once you have recorded them")
    amnesia = evidence["amnesia"]
    check(amnesia.results_seen == amnesia.tool_calls == 3 and amnesia.repeats == 0, M6, LOOP,
          "run_scenario('amnesia') on your code", "3 of 3 results seen by the model, 0 repeats",
          f"{amnesia.results_seen} of {amnesia.tool_calls} seen, {amnesia.repeats} repeats",
          "append the assistant turn and one tool result per call before calling the model again")
    escape = evidence["escape"]
    probes = [line for key, line in escape.details if key.startswith("probe") and "skipped" not in line]
    check(probes and all("refused" in line and "by accident" not in line for line in probes), M6,
          "tools.safe_resolve", "run_scenario('escape') on your code",
          "every probe refused by the sandbox (not by accident)", show(probes),
          "safe_resolve must itself refuse every path whose real location is outside the root")


def test_runaway_ceiling_holds_against_a_loop_with_no_cap():
    """A deliberately uncapped loop (which even swallows errors) is stopped by the harness ceiling."""
    parse, dispatch = learner("agent_loop.parse_tool_calls"), "dispatch_tool"
    loop_module = importlib.import_module("agent_loop")

    def uncapped(messages, repo_root, complete, max_steps=None):
        while True:  # no cap on purpose: only the harness can end this
            try:
                message = complete(messages, loop_module.TOOL_SCHEMAS)
            except Exception:  # a careless loop: swallows every error and carries on
                continue
            calls = parse(message)
            if not calls:
                return message.content
            messages.append(loop_module.assistant_turn(message))
            for c in calls:
                result = getattr(loop_module, dispatch)(c.name, c.arguments, repo_root)
                messages.append(loop_module.tool_result(c.id, result))

    ev = bo.run_scenario("runaway", lab=lab(), run_agent=uncapped, max_calls=25)
    called = "run_scenario('runaway', run_agent=<while True loop>, max_calls=25) with your parse/dispatch"
    check(ev.ended == "harness ceiling" and ev.steps == 25 and ev.tool_calls == 25, M6, LOOP, called,
          "stopped by the harness ceiling after exactly 25 model calls and 25 tool calls",
          f"ended={ev.ended!r} after {ev.steps} calls, {ev.tool_calls} tool calls ({ev.ended_detail})",
          "the ceiling lives in the model wrapper, so no loop can get past it")
    block = bo.render(ev)
    check(ev.failure_observed and "projection" in block and "25 model calls" in block, M6, LOOP, called,
          "a block reporting the runaway, its cost and a projection", block,
          "the evidence block reports calls, tokens and what they would have cost")

    def replays(messages, repo_root, complete, max_steps=None):
        calls = parse(complete(messages, loop_module.TOOL_SCHEMAS))
        while True:  # re-runs the first request forever and never asks the model again
            for c in calls:
                getattr(loop_module, dispatch)(c.name, c.arguments, repo_root)

    ev = bo.run_scenario("runaway", lab=lab(), run_agent=replays)
    called = "run_scenario('runaway', run_agent=<loop that re-runs one tool call forever>)"
    check(ev.ended == "harness ceiling" and ev.steps == 1 and ev.tool_calls == HARNESS_MAX_TOOL_CALLS,
          M6, LOOP, called, f"stopped after 1 model call and {HARNESS_MAX_TOOL_CALLS} tool calls",
          f"ended={ev.ended!r}, {ev.steps} model calls, {ev.tool_calls} tool calls",
          "the harness also counts tool calls, for loops that never ask the model again")


AUDITED = ("open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree")
_touched: list | None = None


def _audit(event, args):
    if _touched is not None and event in AUDITED and args:
        _touched.append((event, args[0], args[1:] if event == "open" else ()))


def test_escape_never_touches_anything_outside_its_temporary_directory(tmp_path):
    """The escape scenario reads and writes only inside its own temporary folder (and reads the fixture it copies)."""
    global _touched
    ev_warm = bo.run_scenario("escape", lab=lab())  # warm up imports, so only the scenario is audited
    check(not ev_warm.leaked, M6, "tools.safe_resolve", "run_scenario('escape') on your code",
          "no sentinel in any tool result or answer", f"leaked: {ev_warm.details}",
          "every probe must be refused by safe_resolve or the visibility rules")
    if not getattr(test_escape_never_touches_anything_outside_its_temporary_directory, "hooked", False):
        sys.addaudithook(_audit)
        test_escape_never_touches_anything_outside_its_temporary_directory.hooked = True
    work = tmp_path / "work"
    work.mkdir()
    decoy = tmp_path / "decoy-next-to-the-workspace.txt"
    decoy.write_text("must stay untouched\n")
    _touched = []
    try:
        ev = bo.run_scenario("escape", lab=lab(), workdir=work)
    finally:
        touched, _touched = _touched, None
    allowed_reads = (work.resolve(), FIXTURE_REPO.resolve())
    outside = []
    for event, target, extra in touched:
        if isinstance(target, int) or target is None or not os.path.isabs(os.fsdecode(target)):
            continue  # an open descriptor, or a name opened relative to one (openat: its folder was audited)
        path = Path(os.fsdecode(target)).resolve()
        if not path.is_relative_to(tmp_path.resolve()) and (path.suffix in (".py", ".pyc", ".so") or path.name == "__pycache__"):
            continue  # Python's own imports
        writes = _is_write(extra) if event == "open" else event not in ("os.listdir", "os.scandir")
        inside = any(path == root or path.is_relative_to(root) for root in (allowed_reads[:1] if writes else allowed_reads))
        if not inside:
            outside.append((event, str(path).replace(str(tmp_path.resolve()), "<tmp>")))
    called = "run_scenario('escape', workdir=<tmp>/work) under an audit hook"
    check(not outside, M6, "tools.safe_resolve", called, "every file opened or listed lies inside <tmp>/work "
          "(reads of code/fixture_repo, which it copies, allowed)", show(outside),
          "tools open only what safe_resolve returned; the harness works only in its temp folder")
    check(decoy.read_text() == "must stay untouched\n" and not ev.leaked and (work / "outside" / "secret.txt").exists(),
          M6, "tools.safe_resolve", called, "the decoy untouched, no leak, the sentinel inside <tmp>/work",
          f"leaked={ev.leaked}", "the sentinel lives beside the repository copy, inside the temp folder")


def _is_write(extra) -> bool:
    mode, flags = (tuple(extra) + (None, None))[:2]
    if isinstance(mode, str) and any(ch in mode for ch in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC))


def test_each_break_applied_to_your_code_shows_its_failure():
    """With one decision removed from YOUR code (by the harness), each scenario's failure appears."""
    for name in bo.SCENARIOS:
        ev = bo.run_scenario(name, simulate=True, lab=lab())
        called = f"break_and_observe.run_scenario({name!r}, simulate=True) on your code"
        check(ev.failure_observed, M6, LOOP, called, f"the {name} failure observed", f"{ev.verdict} ({ev.ended_detail})",
              f"python break_and_observe.py {name} --simulate shows what the failure looks like")


# --------------------------------------------------------------------------- evaluate

MODEL_COMPONENTS = ("evidence_read", "valid_tool_use", "cited_real", "all_grounded", "expected_citation",
                    "symbols", "root_cause", "answered")


def components(score) -> dict:
    """The model-dependent components of one score, as numbers (higher is better)."""
    return {
        "evidence_read": int(score.evidence_read), "valid_tool_use": int(score.valid_tool_use),
        "cited_real": int(score.cited_real), "all_grounded": int(score.citations > 0 and score.grounded == score.citations),
        "expected_citation": int(score.expected_citation), "symbols": len(score.symbols_found),
        "root_cause": int(score.root_cause is not False),  # None: the question has no root-cause terms
        "answered": int(score.ended == "answered"),
    }


def scripted_scores(run, tmp_path):
    import evaluate

    path, repo = evaluate.QUESTION_SETS["fixture"]
    return evaluate.evaluate_scripted(evaluate.load_questions(path), repo, "fixture", run, cache_dir=tmp_path / "cache")


def test_evaluator_scores_good_and_bad_runs_differently_component_by_component(tmp_path):
    """Scripted good and bad runs through your loop: each component separates them on its own."""
    good = {s.id: s for s in scripted_scores("good", tmp_path)}
    bad = {s.id: s for s in scripted_scores("bad", tmp_path)}
    called = "evaluate.evaluate_scripted(fixture questions, 'good' / 'bad') through copilot.run and your run_agent"
    for qid, g in good.items():
        check(all(components(g).values()) and g.context_hit, M6, LOOP, f"{called}: {qid}",
              "the scripted good run scores on every component", show(components(g)),
              "the good scripts read the right files and cite what they read: check your loop feeds results back")
        check(g.context_hit == bad[qid].context_hit, M6, LOOP, f"{called}: {qid}",
              "the same context hit for both runs (the model does not choose the injected context)",
              f"good {g.context_hit}, bad {bad[qid].context_hit}", "context selection happens before the loop")
    for name in MODEL_COMPONENTS:
        higher = [qid for qid in good if components(good[qid])[name] > components(bad[qid])[name]]
        lower = [qid for qid in good if components(good[qid])[name] < components(bad[qid])[name]]
        check(higher and not lower, M6, LOOP, called,
              f"component {name!r}: the good run scores higher on some question and never lower",
              f"higher on {higher}, lower on {lower}",
              "each component must measure one thing, so a bad run can fail it alone")


def test_right_evidence_wrong_answer_is_caught_only_by_the_root_cause(tmp_path):
    """The planted defect: both runs read both files; only the answer naming cost AND price gets the root cause."""
    good = next(s for s in scripted_scores("good", tmp_path) if s.id == "shop-total-bug")
    bad = next(s for s in scripted_scores("bad", tmp_path) if s.id == "shop-total-bug")
    called = "evaluate on 'shop-total-bug' (scripted good vs scripted bad)"
    same = ("context_hit", "evidence_read", "valid_tool_use", "cited_real", "expected_citation")
    check(all(getattr(good, c) and getattr(bad, c) for c in same) and bad.grounded == bad.citations > 0,
          M6, LOOP, called, f"both runs pass {same} with grounded citations",
          f"good {[getattr(good, c) for c in same]}, bad {[getattr(bad, c) for c in same]}, "
          f"bad grounded {bad.grounded}/{bad.citations}", "both scripts read shop/service.py and shop/models.py")
    check(good.root_cause is True and bad.root_cause is False, M6, LOOP, called,
          "root cause: good True (names cost and price), bad False (names only cost)",
          f"good {good.root_cause}, bad {bad.root_cause}: {bad.answer!r}", "root_cause_terms are ['cost', 'price']")
    check((good.blended_case_study, bad.blended_case_study) == (1.0, 0.6), M6, LOOP, called,
          "the case study's weights blend them to 1.00 and 0.60", f"{good.blended_case_study}, {bad.blended_case_study}",
          "0.25 file + 0.20 evidence + 0.15 tools + 0.40 root cause")


def test_evaluate_prints_a_component_table_and_json(tmp_path, monkeypatch, capsys):
    """`python evaluate.py` prints one row per question and run, and --json carries every component."""
    import evaluate
    from harness.evaluation import COLUMNS

    monkeypatch.setenv("COPILOT_CACHE_DIR", str(tmp_path / "cache"))
    scripted_scores("good", tmp_path)  # your loop first: main() itself turns a stub into "M<n> is not done yet"
    called = "evaluate.main([]) then evaluate.main(['--json'])"
    code = evaluate.main([])
    table = capsys.readouterr().out
    check(code == 0 and all(col in table for col in COLUMNS) and table.count("shop-total-bug") >= 2,
          M6, LOOP, called, "exit 0 and a table with every column, a row per question and run",
          f"exit {code}: {table[:600]}", "evaluate.py runs your copilot: python evaluate.py")
    code = evaluate.main(["--json"])
    data = json.loads(capsys.readouterr().out)
    rows = [q for run in data["runs"].values() for q in run["questions"]]
    fields = ("context_hit", "evidence_read", "valid_tool_use", "cited_real", "grounded", "symbols_found",
              "root_cause", "steps", "tokens_in", "wall_seconds", "ended")
    check(code == 0 and len(rows) == 10 and all(all(f in row for f in fields) for row in rows), M6, LOOP, called,
          f"10 rows (5 questions x good/bad), each with {fields}", show(rows[:1]),
          "--json prints one document with every component per question")
