"""One submission in, one report out: collect the evidence, then suggest a level per criterion."""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from grading import board as board_mod
from grading import battery as battery_mod
from grading import cli_runs, copying, criteria, documents, learner_code, prose, runner, workspace
from grading import sandbox as sandbox_mod
from grading.sandbox import Box
from grading.report import code
from grading.safe_text import name_text
from grading.workspace import LAB_ROOT


def lab_version() -> str:
    try:
        out = subprocess.run(["git", "-C", str(LAB_ROOT), "log", "-1", "--format=%h %cs"], capture_output=True,
                             text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return f"{LAB_ROOT.name} {out}".strip()


class NoSandbox(RuntimeError):
    """No sandbox can run learner code here, and --no-sandbox was not given."""


def make_box(sandbox: str, tmp: Path, lab: Path, home: Path, battery: Path) -> Box:
    """The sandbox every learner command of this submission runs in: the lab and the battery tree
    read-only, the work folder (home) the only writable one. Under bubblewrap home is a fresh
    size-capped tmpfs for each command (nothing is written to the grader's disk, nothing carries
    over to the next command); a container needs it on disk for the tests' log."""
    kind, why = choose_sandbox(sandbox)
    if not kind:
        raise NoSandbox(f"{why}; {sandbox_mod.HOW_TO_GET_ONE}")
    if kind in ("docker", "podman"):   # home a sized tmpfs per command, as under bubblewrap
        return Box(kind, readonly=[lab, battery], scratch=[home])
    if kind == "user":   # no mounts: modes decide what the learner's user reads (the lab) and writes (home)
        box = Box(kind, readonly=[lab, battery], writable=[home], user=sandbox_mod.SANDBOX_USER)
        os.chmod(tmp, 0o711)
        box.share(readable=[battery], writable=[home])
        return box
    return Box(kind, readonly=[lab, battery], scratch=[home] if kind == "bubblewrap" else [],
               writable=[] if kind == "bubblewrap" else [home])


@functools.lru_cache(maxsize=8)
def choose_sandbox(sandbox: str) -> tuple[str, str]:
    return sandbox_mod.choose(sandbox)


def grade(submission: Path, *, stretch: bool = True, memory_mb: int = runner.DEFAULT_MEMORY_MB,
          test_seconds: float = 60.0, after_seconds: float = 2.0, keep: bool = False, quick: bool = False,
          as_submitted: bool = False, sandbox: str = "auto") -> dict:
    """The whole report as a dict (see report.markdown for how it reads).

    sandbox: auto | bubblewrap | docker | podman | none. Raises NoSandbox when the one asked for
    cannot run here (none never needs one: the instructor asked for it)."""
    started, cpu_started = time.monotonic(), time.thread_time()   # one learner is graded in one thread
    tmp = Path(tempfile.mkdtemp(prefix="lab-"))   # no "grade" in any path learner code sees
    with runner.counting() as costs:
        result = _grade(submission, tmp, stretch, memory_mb, test_seconds, after_seconds, keep, quick, as_submitted,
                        sandbox)
    cpu = [c["cpu_seconds"] for c in costs if c["cpu_seconds"] is not None]
    result.update(seconds=round(time.monotonic() - started, 1), learner_commands=costs,
                  learner_cpu_seconds=round(sum(cpu), 1) if cpu else None,
                  grader_cpu_seconds=round(time.thread_time() - cpu_started, 2))
    return result


def _grade(submission, tmp, stretch, memory_mb, test_seconds, after_seconds, keep, quick, as_submitted, sandbox):
    try:
        notes = workspace.copy_submission(submission, tmp / "submission")
        root = workspace.find_lab_root(tmp / "submission")
        lab, home, battery_tree = tmp / "lab", tmp / "home", tmp / "battery"
        home.mkdir()
        battery_tree.mkdir()
        box = make_box(sandbox, tmp, lab, home, battery_tree)
        missing = workspace.build_lab(lab, root / "code", as_submitted)
        box.share(readable=[lab])
        # The battery first: it imports the learner's modules within seconds. An import that stalls
        # there (or in the tests) ends this learner's budget: the rest is skipped, not observed.
        with runner.counting("battery"):
            battery = battery_mod.run_battery(lab, home, memory_mb, box=box, base=battery_tree)
        stalled = battery.cause == "learner" and battery.error and "did not finish importing" in battery.error
        if stalled:
            board = board_mod.skipped_board(lab, stretch, quick, f"skipped: {battery.not_observed[0]}")
        else:
            with runner.counting("pytest"):
                board = board_mod.run_board(lab, home, stretch, memory_mb, (test_seconds, after_seconds), quick, box=box)
            if board.ran.timed_out and not board.tests:
                stalled = True
        hung = [t.name for t in board.tests if t.outcome == "timeout" and t.milestone in ("M4", "M5", "M6")]
        if hung or stalled:  # the loop does not return: every tool below would only wait for its own timeout
            why = (f"skipped: the learner's loop did not return in the tests ({hung[0]} timed out)" if hung else
                   "skipped: the learner's modules stalled while importing (not observed)")
            defences, simulated = cli_runs.skipped("python break_and_observe.py all", why), \
                cli_runs.reference_breaks(lab, home, memory_mb, why, box=box)
            evaluation = cli_runs.skipped("python evaluate.py", why)
        else:
            defences, simulated = cli_runs.breaks(lab, home, memory_mb, box=box)
            evaluation = cli_runs.evaluate(lab, home, memory_mb, box=box)
        unreadable: list = []   # a parser of submission content that gave up (too deep, too big)
        ev = {
            "board": board, "battery": battery, "defences": defences, "simulated": simulated,
            "evaluation": evaluation, "missing_modules": missing,
            "signals": _guarded(unreadable, "learner_code.signals", [], learner_code.signals, root / "code"),
            "integrity": _guarded(unreadable, "integrity", learner_code.empty_integrity(), learner_code.integrity, root),
            "understanding": _guarded(unreadable, "UNDERSTANDING.md", {"exists": False},
                                      documents.understanding, root / "UNDERSTANDING.md"),
            "failure": _guarded(unreadable, "FAILURE_ANALYSIS.md", {"exists": False}, documents.failure_analysis,
                                root / "FAILURE_ANALYSIS.md", simulated.blocks or {},
                                evaluation.text() if evaluation.ok else ""),
            "saved_runs": _guarded(unreadable, "saved runs", [], documents.saved_runs, root),
            # the guiding tests the learner's clone had (a test added to the lab later was never on their board)
            "learner_tests": _guarded(unreadable, "learner tests", None, learner_code.test_names, root / "code" / "tests"),
            "quick": quick, "as_submitted": as_submitted, "sandbox": box.kind, "limits": box.limits,
            "unreadable": unreadable,
            # milestones whose tests pass over a function the battery saw fail (criteria and flags read it)
            "contradicted": battery_mod.contradicted(board, battery),
            # copying of rubric/reference/: functions alike after canonicalising, its own wording, HOLD or note
            "reference_copy": _guarded(unreadable, "copying.reference_copy", {}, copying.reference_copy, root / "code"),
            "not_observed": _not_observed(board, battery),
        }
        ev["prose"] = _guarded(unreadable, "prose review", {}, prose.review, root, ev["understanding"], ev["failure"],
                               simulated.blocks or {})
        result = assemble(submission, ev, stretch, notes)
    finally:
        if keep:
            print(f"grade: kept the work folder {tmp}", flush=True)
        else:
            workspace.remove_tree(tmp)
    return result


def _not_observed(board, battery) -> list:
    """What the grader could not observe, and whose doing it was (criteria.not_observed judges it)."""
    out = []
    missing = board.missing()
    if missing:
        out.append(f"{len(missing)} guiding test(s) never reported ({board.ran.describe() if board.ran else 'not run'}; "
                   f"{'the learner' if board.cause() == 'learner' else 'the grader'}'s doing)")
    out += [f"battery: {w} ({'the learner' if battery.cause == 'learner' else 'the grader'}'s doing)"
            for w in battery.not_observed]
    return out


def _guarded(unreadable: list, what: str, default, fn, *args):
    """fn(*args), or ``default`` with a note when the submission's content defeats the parser."""
    try:
        return fn(*args)
    except (RecursionError, MemoryError, ValueError, OSError, UnicodeError) as exc:
        unreadable.append(f"{what}: could not be read ({type(exc).__name__}: {str(exc)[:120]})")
        return default


def could_not_grade(submission: Path, why: str) -> dict:
    """The row of a submission the grader could not finish: a clear reason, never the class's run."""
    rubric = criteria.load_rubric()
    out = [{"number": n, "title": c.title, "weight": c.weight, "level": "could not grade", "points": 0,
            "reasons": [why], "evidence": [], "signals": []} for n, c in sorted(rubric.items())]
    return {"learner": name_text(submission.name), "submission": name_text(submission), "lab": lab_version(), "criteria": out,
            "total": 0, "max_total": sum(c["weight"] for c in out), "could_not_grade": why, "sandbox": "",
            "integrity": {"flags": {}, "lines": [f"- could not grade: {why}"]}, "runs": [], "copy_notes": [],
            "board": {}, "tests": [], "battery": {}, "understanding": {}, "failure_analysis": {}, "saved_runs": [],
            "note": "Suggested levels only: the instructor decides.", "seconds": 0}


def assemble(submission: Path, ev: dict, stretch: bool, notes) -> dict:
    rubric = criteria.load_rubric()
    suggestions = criteria.suggest(rubric, ev)
    builders = {1: _ev_implementation, 2: _ev_loop, 3: _ev_sandbox, 4: _ev_understanding, 5: _ev_failure,
                6: _ev_evaluation, 7: _ev_starcall}
    out = []
    for number, c in sorted(rubric.items()):
        s = suggestions[number]
        sig = [asdict(x) for x in ev["signals"] if x.criterion == number]
        out.append({"number": number, "title": c.title, "weight": c.weight, "level": s.level, "points": s.points,
                    "reasons": s.reasons, "mark": s.mark, "rule": s.rule, "confidence": s.confidence,
                    "quotes": s.quotes, "evidence": builders[number](c, ev), "signals": sig})
    integ = _integrity(ev)
    b = ev["board"]
    what = "the M1-M4 test files (--quick)" if ev.get("quick") else "code/tests" + (" --stretch" if stretch else "")
    runs = [(f"python -m pytest --unlock-all {what} (the lab's pristine tests)",
             b.ran.describe() + ("" if b.source == "stream" else f"; outcomes from the grader's log ({b.source})")),
            ("battery_probe.py (instructor sandbox battery)", ev["battery"].ran.describe()),
            (ev["defences"].command, ev["defences"].ran.describe()),
            (ev["simulated"].command, ev["simulated"].ran.describe()),
            (ev["evaluation"].command, ev["evaluation"].ran.describe())]
    return {
        "sandbox": ev.get("sandbox", "none"), "limits": ev.get("limits", ""), "unreadable": ev.get("unreadable", []),
        "learner": name_text(submission.resolve().name), "submission": name_text(submission), "lab": lab_version(),
        "criteria": out, "total": sum(c["points"] for c in out), "max_total": sum(c["weight"] for c in out),
        "integrity": integ, "runs": runs, "copy_notes": notes.skipped,
        "board": {m.id: b.line(m.id) for m in board_mod.milestones(stretch)},
        "tests": [asdict(t) for t in b.tests],
        "battery": ev["battery"].classes(), "parse_observed": ev["battery"].parse_summary(),
        "loop_observed": ev["battery"].loop_summary(),
        "understanding": ev["understanding"], "failure_analysis": ev["failure"],
        "saved_runs": ev["saved_runs"],
        "findings": ev.get("prose", {}).get("findings", []),   # F1, F2...: the CSV's drop_findings names them
        "note": "Suggested levels only: the instructor decides.",
    }


def _test_lines(board, names) -> list:
    lines = []
    for name in names:
        found = board.named(name)
        if not found:
            lines.append(f"    - `{name.split('::')[-1]}`: not run (not in this lab's tests)")
            continue
        bad = [t for t in found if t.outcome != "passed"]
        state = "passed" if not bad else ("not started" if all(t.not_done for t in bad) else bad[0].outcome)
        where = name.split("::")[0].split("/")[-1]
        lines.append(f"    - {where} `{name.split('::')[-1]}`: **{state}**" +
                     (f" ({len(found) - len(bad)} of {len(found)} cases pass)" if len(found) > 1 and bad else ""))
    return lines


def _first_failures(board, milestones) -> list:
    lines = []
    for m in milestones:
        bad = [t for t in board.of(m) if t.outcome in ("failed", "timeout") and not t.not_done]
        if bad:
            keep = [x.strip() for x in bad[0].message.splitlines() if x.strip().startswith(("called:", "expected:", "got:"))]
            text = " / ".join(keep) if keep else bad[0].message.strip().splitlines()[0][:300] if bad[0].message.strip() else bad[0].outcome
            lines.append(f"- first {m} failure, `{bad[0].name}`: {text[:400]}")
    return lines


def _ev_implementation(c, ev):
    b = ev["board"]
    lines = ["- The board (the lab's own tests, pristine, on the learner's functions, `--unlock-all`):"]
    lines += [f"    - {m.id} {m.title}: {b.line(m.id)}" for m in board_mod.milestones(True) if b.of(m.id)]
    if b.collection_error:
        lines.append(f"- pytest reported: {code_block(b.collection_error)}")
    if ev["missing_modules"]:
        lines.append(f"- not in the submission (the shipped stub was used): {', '.join(ev['missing_modules'])}")
    lines += ["- Named in the rubric:"] + _test_lines(b, c.tests)
    lines += _first_failures(b, [m.id for m in board_mod.milestones(True)])
    runs = ev["saved_runs"]
    if runs:
        lines.append("- Saved copilot runs in the repository:")
        lines += [f"    - `{r['path']}`: model {r['model'] or '?'}, {r['tool_calls']} tool calls, {r['grounded']} of "
                  f"{r['citations']} citations grounded, ended {r['termination']}, tools before the answer: "
                  f"{'yes' if r['tools_before_answer'] else 'no'}" for r in runs[:5]]
    else:
        lines.append("- Saved copilot runs in the repository: none found (`copilot.py --json` output or `--save-transcript` files)")
    return lines


def code_block(text: str) -> str:
    return "`" + " ".join(text.split())[:300].replace("`", "'") + "`"


def _ev_loop(c, ev):
    lines = ["- Tests named in the rubric:"] + _test_lines(ev["board"], c.tests)
    observed = (("`parse_tool_calls` (inputs drawn per run)", "cases", ev["battery"].parse_summary()),
                ("`run_agent` against a scripted model (cap, message order, one result per id)", "scripts",
                 ev["battery"].loop_summary()))
    for what, unit, seen in observed:
        if seen["of"] or seen.get("not_asked"):
            lines.append(f"- {what}, observed in a child process and judged by the grader: " + (
                "not started" if seen["not_started"] else f"{seen['correct']} of {seen['of']} {unit} as its contract says")
                + (f"; {seen['not_asked']} not asked (not observed)" if seen.get("not_asked") else ""))
            lines += [f"    - {w}" for w in seen["wrong"][:4] if not seen["not_started"]]
    runaway = (ev["defences"].blocks or {}).get("runaway")
    if runaway:
        lines.append(f"- `break_and_observe.py runaway` on the learner's unbroken code: ended {code(runaway.get('ended', '?'))}, "
                     f"steps {code(runaway.get('steps', '?'))}")
    elif not ev["defences"].ok:
        lines.append(f"- `break_and_observe.py all` could not run on the learner's code: {ev['defences'].problem()}")
    return lines


def _ev_sandbox(c, ev):
    lines = ["- Tests named in the rubric:"] + _test_lines(ev["board"], c.tests)
    battery = ev["battery"]
    if battery.error:
        lines.append(f"- Instructor battery: did not run: {battery.error}")
    else:
        lines.append("- Instructor battery (attacks the guiding tests do not contain; a class holds when every probe was "
                     "refused or stayed inside the repository):")
        for name, info in battery.classes().items():
            bad = [p for p in info["probes"] if p["result"] not in ("refused", "inside", "answered", "skipped")]
            if name == "legal":
                bad = [p for p in info["probes"] if p["result"] not in ("inside", "skipped")]
            note = f" ({battery_mod.NOT_THE_LEARNERS[name]})" if name in battery_mod.NOT_THE_LEARNERS else ""
            label = "legal paths still allowed" if name == "legal" else name
            lines.append(f"    - {label}: **{info['status']}**, {len(info['probes']) - len(bad)} of {len(info['probes'])} probes{note}")
            if info["status"] != "not started":
                lines += [f"        - {p['probe']}: {p['result']}: {code(p.get('detail', '')[:140])}" for p in bad[:4]]
    escape = (ev["defences"].blocks or {}).get("escape")
    if escape:
        lines.append(f"- `break_and_observe.py escape` on the learner's unbroken code: leaked {code(escape.get('leaked', '?'))}, "
                     f"{code(escape.get('escaped', escape.get('verdict', '')))}")
    return lines


def _ev_understanding(c, ev):
    u = ev["understanding"]
    if not u.get("exists"):
        return ["- `UNDERSTANDING.md` is not in the submission"]
    lines = []
    for a in u["answers"]:
        if a["key"] == "StarcallOS":
            continue
        state = "answered" if a["answered"] else "**template / empty**"
        r = ev.get("prose", {}).get("answers", {}).get(a["key"], {})
        lines.append(f"- Q{a['key']} {a['title'].split('.', 1)[-1].strip()}: {state}, {a['words']} words (After M6: "
                     f"{a['after_m6_words']}); specific: {', '.join(r.get('specific', [])) or 'nothing'}; "
                     f"engages its question: {'yes' if r.get('engages') else 'no'}")
        lines += [f"    - `{c['claim']}` {'checks out' if c['ok'] else 'does not match its line' if c['ok'] is False else 'not found'}"
                  f": line reads {code(c['line'])}" for c in r.get("claims", [])[:3]]
        if a["answered"]:
            lines.append("    " + documents_quote(a["excerpt"]))
        for s in a["lifted_from_lesson"]:
            lines.append(f"    - found verbatim in the lesson: {code(s[:200])}")
        for e in a["factual_errors"]:
            lines.append(f"    - possible factual error: {e}")
    return lines


def documents_quote(text: str) -> str:
    return "> " + text.replace("\n", " ")


def _ev_failure(c, ev):
    fa = ev["failure"]
    if not fa.get("exists"):
        return ["- `FAILURE_ANALYSIS.md` is not in the submission"]
    lines = [f"- Fresh runs for comparison: `{ev['simulated'].command}`" + (f"; {ev['simulated'].note}" if ev["simulated"].note else "")]
    for name in documents.SCENARIOS:
        b = fa["breaks"].get(name)
        if b is None:
            lines.append(f"- {name}: section not found")
            continue
        parts = ", ".join(f"{p.split()[0].lower()} {n}" for p, n in b["parts"].items())
        lines.append(f"- {name}: filled {len(b['filled'])} of 5 parts (words: {parts}); evidence block "
                     f"{'pasted' if b['evidence_block'] else 'missing'}")
        if b["excerpts"].get("Hypothesis"):
            lines.append("    " + documents_quote("Hypothesis: " + b["excerpts"]["Hypothesis"]))
        for field, pasted, fresh, ok in b.get("comparison", []):
            lines.append(f"    - {field}: pasted {code(pasted)} vs fresh {code(fresh)}: {'agrees' if ok else '**differs**'}")
        if "your code" not in b.get("pasted_ran", "your code") and b.get("evidence_block"):
            lines.append(f"    - the pasted block says it ran on {code(b['pasted_ran'])}, not the learner's own code")
    mine = fa.get("my_case", {})
    lines.append(f"- Right evidence, wrong answer / My case: {mine.get('words', 0)} words")
    lines += [f"- finding: {f}" for f in ev.get("prose", {}).get("failure_findings", [])[:6]
              + ev.get("prose", {}).get("my_case_findings", [])]
    if mine.get("excerpt"):
        lines.append("    " + documents_quote(mine["excerpt"]))
    return lines


def _ev_evaluation(c, ev):
    run, e = ev["evaluation"], ev["failure"].get("evaluation", {})
    lines = [f"- `python evaluate.py` on the learner's code: {'ran' if run.ok else 'did not run: ' + run.problem()}"]
    table = cli_runs.component_table(run.text()) if run.ok else {}
    if table:
        lines.append("- Fresh components (scripted good / scripted bad): " +
                     "; ".join(f"{k} {g} / {b}" for k, (g, b) in list(table.items())[:9]))
    lines += ["- Tests named in the rubric:"] + _test_lines(ev["board"], c.tests)
    if e:
        lines.append(f"- Pasted table: {e['table_rows']} rows, {e['rows_matching_fresh_run']} identical to the fresh run "
                     f"(of {e['fresh_rows']}); a table from `--model` is expected to differ")
        lines += [f"    - differs: {code(r[:160])}" for r in e["differing_rows"][:3]]
        lines.append(f"- Interpretation: {e['interpretation_words']} words")
        lines += [f"- finding: {f}" for f in ev.get("prose", {}).get("evaluation_findings", [])[:3]]
        if e["interpretation"]:
            lines.append("    " + documents_quote(e["interpretation"]))
    else:
        lines.append("- No Evaluation section found in FAILURE_ANALYSIS.md")
    return lines


def _ev_starcall(c, ev):
    a = next((a for a in ev["understanding"].get("answers", []) if a["key"] == "StarcallOS"), None)
    if a is None:
        return ["- no StarcallOS reflection section in UNDERSTANDING.md"]
    lines = [f"- {'present' if a['answered'] else 'template / empty'}, {a['words']} words"]
    if a["answered"]:
        lines.append("    " + documents_quote(a["excerpt"]))
    return lines


def _integrity(ev) -> dict:
    integ, board = ev["integrity"], ev["board"]
    changed = {m: i["changed"] for m, i in integ["modules"].items() if i["changed"]}
    added = {m: i.get("added", []) for m, i in integ["modules"].items() if i.get("added")}
    refused = integ.get("refused_modules", [])
    copied = ev.get("reference_copy") or {}
    same = list(copied.get("functions", [])) + [f"the reference's own words: \"{t[:60]}\"" for t in copied.get("texts", [])
                                                if copied.get("hold")][:3]
    stubs = [q for q, i in integ["functions"].items() if i.get("stub")]
    core_stubs = [q for q in stubs if not q.startswith("stretch.")]
    guarded = integ["guarded_edited"] + integ["guarded_added"]  # a missing file may just predate the learner's clone
    broken = [f"{m}: {i['error']}" for m, i in integ["modules"].items() if i["error"] and i["error"] != "missing"]
    broken += [f"does not import: {e}" for e in ev["battery"].import_errors]
    timeouts = [t.name for t in board.tests if t.outcome == "timeout"]
    flags = {"tests_or_harness_edited": guarded, "provided_code_changed": [f"{m}: {', '.join(v)}" for m, v in changed.items()]
             + integ["provided_edited"], "matches_reference_solution": same, "stubs_still_raising": core_stubs,
             "timeouts": len(timeouts), "does_not_import": broken,
             "shadowing_modules_refused": [f"{p} ({why})" for p, why in refused],
             "tests_contradicted_outside": ev.get("contradicted", []), "not_observed": ev.get("not_observed", [])}
    lines = [
        "- What ran: " + ("the learner's tools.py, agent_loop.py and stretch.py as submitted (--as-submitted)" if ev["as_submitted"]
                          else "the learner's functions (and any definitions they added) inside this lab's provided code; "
                               "provided code they changed was not used"),
        "- Tests, harness, eval sets, fixture repository, conftest/pytest.ini compared with every version the lab shipped: "
        + (", ".join([f"**edited** {code(p)}" for p in integ["guarded_edited"]] + [f"**added** {code(p)}" for p in
                      integ["guarded_added"]]) or "unchanged")
        + (f"; not in the submission (deleted, or newer than the learner's copy of the lab): "
           f"{', '.join(map(code, integ['guarded_missing'][:8]))}" if integ["guarded_missing"] else "")
        + ". (Grading used the lab's pristine tests either way.)",
        "- Learner modules outside the learner functions (AST, as the course checks compare them): "
        + ("; ".join(f"{m} differs in {', '.join(map(code, v))}" for m, v in changed.items()) if changed else "identical to a shipped version"),
        "- Other provided files changed: " + (", ".join(map(code, integ["provided_edited"])) or "none"),
        "- Added at the top level of the learner modules (kept, so their functions can use them): "
        + ("; ".join(f"{m}: {', '.join(map(code, v[:8]))}" for m, v in added.items()) if added else "nothing"),
        "- Files in code/ that the lab never shipped: " + (", ".join(map(code, integ.get("not_shipped", [])[:20]))
                                                          or "none")
        + (f" ({len(integ['not_shipped'])} listed)" if len(integ.get("not_shipped", [])) > 20 else ""),
    ]
    lines += [f"- **refused** {code(p)}: {why}; not put in the lab, so it changed nothing that ran" for p, why in refused]
    for q, i in integ["functions"].items():
        if not i["exists"]:
            lines.append(f"- {q}: **missing or renamed**")
        elif i.get("stub"):
            lines.append(f"- {q}: still the stub (raises NotImplementedError)")
        else:
            same_text = "**matches the reference solution** (with another function or its wording: HOLD)" \
                if q in copied.get("functions", []) else "the reference's statements after canonicalising (one function: " \
                "information only)" if q in copied.get("alike", []) else \
                f"{int(i.get('similarity', 0) * 100)} % similar to the reference (difflib on the unparsed body)"
            lines.append(f"- {q}: {i['lines']} lines, {same_text}")
    lines += [f"- copied from the reference, side by side: {code(x)}" for x in copied.get("lines", [])[:10]]
    lines += [f"- {b}" for b in broken]
    lines += [f"- **contradicted**: {x}" for x in flags["tests_contradicted_outside"]]
    lines += [f"- **not observed** (never counted as passing): {x}" for x in flags["not_observed"]]
    if timeouts:
        lines.append(f"- {len(timeouts)} test(s) hit the grader's time limit (an endless loop?): {', '.join(timeouts[:5])}")
    lines.append(f"- Sandbox: {ev.get('limits') or ev.get('sandbox', 'none')}")
    lines += [f"- {u}" for u in ev.get("unreadable", [])]
    if not runner.POSIX:
        lines.append("- Windows: learner code ran with a timeout only (no memory ceiling, no per-test limit)")
    return {"flags": flags, "lines": lines}
