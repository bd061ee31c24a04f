"""The rubric as data (read from rubric/rubric.md) and a SUGGESTED level per criterion, with reasons.

Every rule here mirrors a sentence of the rubric's level table; where the rubric asks for
something only a reader can judge (own words, explained unprompted), the suggestion says so and
stops at the level the evidence supports. The instructor decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grading.workspace import LAB_ROOT

LEVELS = ("Exemplary", "Proficient", "Developing", "Missing")
SHARE = {"Exemplary": 1.0, "Proficient": 0.75, "Developing": 0.40, "Missing": 0.0}
FALLBACK = {1: ("Implementation runs correctly", 25), 2: ("Loop bounded, arguments parsed, message order", 15),
            3: ("Sandbox", 15), 4: ("Understanding document", 15), 5: ("Failure analysis", 15),
            6: ("Evaluation", 10), 7: ("StarcallOS reflection", 5)}


@dataclass
class Criterion:
    number: int
    title: str
    weight: int
    points: dict                      # level -> points, from the rubric's table
    tests: list = field(default_factory=list)   # "code/tests/test_x.py::test_name" named in its Evidence


def load_rubric(path=LAB_ROOT / "rubric" / "rubric.md") -> dict:
    """number -> Criterion, parsed from the rubric's headings, level tables and Evidence lists."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    out = {}
    parts = re.split(r"^## (\d)\. (.+?) \((\d+) points\)\s*$", text, flags=re.M)
    for i in range(1, len(parts) - 3, 4):
        number, title, weight, body = int(parts[i]), parts[i + 1].strip(), int(parts[i + 2]), parts[i + 3]
        points = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (\w+) \((\d+)\) \|", body, re.M)}
        out[number] = Criterion(number, title, weight, points, _evidence_tests(body))
    for number, (title, weight) in FALLBACK.items():
        out.setdefault(number, Criterion(number, title, weight, {}))
    for c in out.values():
        for level in LEVELS:
            c.points.setdefault(level, int(c.weight * SHARE[level] + 0.5))
    return out


def _evidence_tests(body: str) -> list:
    """Test ids in the **Evidence:** part: `code/tests/f.py::t`, then `::t` or `t` inherit the file."""
    block = body.split("**Evidence:**", 1)[-1].split("**Red flags:**", 1)[0]
    tests, current = [], None
    for span in re.findall(r"`([^`]+)`", block):
        m = re.fullmatch(r"(code/tests/test_\w+\.py)(?:::(\w+))?", span)
        if m:
            current = m.group(1)
            if m.group(2):
                tests.append(f"{current}::{m.group(2)}")
        elif current and re.fullmatch(r"(?:::)?(test_\w+)", span):
            tests.append(f"{current}::{span.lstrip(':')}")
    return tests


MARKS = (None, "READ", "HOLD")
CONFIDENCE = ("high", "medium", "low")


@dataclass
class Suggestion:
    """One criterion's suggestion, and how far the instructor can take it as it is.

    mark None: the evidence decides (tests, probes, pasted blocks), confirm at a glance.
    mark "READ": a suggested level the instructor confirms by reading ``quotes`` (the few
        sentences it rests on).
    mark "HOLD": talk to the learner first (reference solution, edited tests, a shadowing
        file): ``level`` is "HOLD", never a level, and earns no points until decided.
    ``rule`` names the rule that decided; ``confidence`` is high, medium or low.
    """
    level: str
    reasons: list
    points: int = 0
    mark: str | None = None
    rule: str = ""
    confidence: str = "medium"
    quotes: list = field(default_factory=list)


def suggest(rubric: dict, ev: dict) -> dict:
    """number -> Suggestion (a HOLD earns no points until the instructor decides)."""
    rules = {1: _implementation, 2: _loop, 3: _sandbox, 4: _understanding, 5: _failure, 6: _evaluation, 7: _starcall}
    out = {}
    for number, rule in rules.items():
        s = _hold(number, ev) or _observed(number, rubric[number], ev, rule(rubric[number], ev))
        s.points = 0 if s.mark == "HOLD" else rubric[number].points[s.level]
        out[number] = s
    return out


def _s(level, reasons, rule, confidence="high", mark=None, quotes=None) -> Suggestion:
    return Suggestion(level, list(reasons), 0, mark, rule, confidence, list(quotes or [])[:4])


# Which code criterion a learner function belongs to (criterion 1 is affected by all of them).
FUNCTION_CRITERION = {"tools.safe_resolve": 3, "tools.dispatch_tool": 3, "agent_loop.parse_tool_calls": 2,
                      "agent_loop.run_agent": 2}


def _hold(number, ev):
    """HOLD, never a level, on the code criteria when what the tests saw may not be the learner's work."""
    if number not in (1, 2, 3):
        return None
    integ = ev["integrity"]
    why = []
    if all(i.get("stub") for q, i in integ.get("functions", {}).items() if q in FUNCTION_CRITERION):
        return None   # nothing of theirs ran: the stubs' Missing says more than a hold
    edited = integ.get("guarded_edited", []) + integ.get("guarded_added", [])
    if edited:
        why.append(("HOLD.edited_tests", f"tests or harness edited: {', '.join(edited[:4])}"))
    copied = sorted(set(ev.get("reference_matches", [])) | {q for q, i in integ.get("functions", {}).items()
                                                            if i.get("matches_reference")})
    copied = [q for q in copied if q in FUNCTION_CRITERION and number in (1, FUNCTION_CRITERION[q])]
    if copied:
        why.append(("HOLD.reference_match", f"{', '.join(copied)} match rubric/reference/ (normalised AST: names, "
                                            "strings and comments aside)"))
    shadow = sorted({str(p[0] if isinstance(p, (list, tuple)) else p) for p in integ.get("refused_modules", [])})
    if shadow:
        why.append(("HOLD.shadowing_file", f"{', '.join(shadow[:4])} shadows a module the lab or its tests import"))
    if not why:
        return None
    return _s("HOLD", [w for _, w in why] + ["talk to the learner before any level: ask them to walk you through "
                                             "the code and the change"], why[0][0], "high", "HOLD")


def not_observed(number: int, c, ev) -> tuple:
    """(gaps the learner's code caused, gaps the grader's own limits caused) in what decides code
    criterion ``number``: guiding tests the stream never mentioned, probes never asked."""
    board, battery = ev["board"], ev["battery"]
    learner, grader = [], []
    missing = board.missing() if hasattr(board, "missing") else []
    if number == 2:
        missing = [n for n in missing if any(n == t or n.endswith("::" + t.split("::")[-1]) for t in c.tests)]
    elif number == 3:
        missing = [n for n in missing if "test_m1_" in n or any(n == t for t in c.tests if "test_m3_" in t)]
    if missing:
        names = ", ".join(n.split("::")[-1] for n in missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        why = f"{len(missing)} guiding test(s) never reported ({names}): {board.ran.describe() if board.ran else 'not run'}"
        (learner if board.cause() == "learner" else grader).append(why)
    if battery.not_observed:
        asked = {1: True, 2: battery.error or any(p["result"] == "not asked" for p in battery.parsing + battery.looping),
                 3: battery.error or any(v["status"] == "not observed" for v in battery.classes().values())}[number]
        if asked:
            (learner if battery.cause == "learner" else grader).append(
                "instructor battery: " + "; ".join(battery.not_observed[:3]) +
                (" (asked twice)" if battery.attempts > 1 else ""))
    return learner, grader


def _observed(number, c, ev, s):
    """``s`` when everything that decides code criterion ``number`` was observed. What was not observed
    never counts as passing: a HOLD where the learner's code caused the gap (an import that exits or
    stalls, a probe it killed), a READ where the grader's own limits did (asked again first)."""
    if number not in (1, 2, 3) or s.mark == "HOLD" or "board" not in ev:
        return s
    if all(i.get("stub") for q, i in ev["integrity"].get("functions", {}).items() if q in FUNCTION_CRITERION) \
            and ev["integrity"].get("functions"):
        return s    # nothing of theirs ran: the stubs' level says more
    learner, grader = not_observed(number, c, ev)
    from grading.battery import unconfirmed
    alone = unconfirmed(ev["board"], ev["battery"], c.tests) if hasattr(ev["board"], "missing") else []
    if alone and not learner and s.level in ("Proficient", "Exemplary"):
        s.reasons.append("unconfirmed (these pass only in the learner's process; no probe judged outside checks "
                         "them): " + ", ".join(n.split("::")[-1] for n in alone[:5]))
    if learner:
        return _s("HOLD", [f"not observed: {w}" for w in learner] + [
            "the learner's code kept the grader from observing this (it exited, stalled or killed the probe): "
            "talk to the learner before any level"], "HOLD.not_observed", "high", "HOLD")
    if grader:
        return _s(s.level, [f"not observed (the grader's own limits, not the learner's code): {w}" for w in grader]
                  + [f"suggested from what was observed: {r}" for r in s.reasons], "READ.not_observed", "low", "READ",
                  s.quotes)
    return s


def _contradicted(ev) -> dict:
    """milestone -> why, where its guiding tests all pass but the probes judged in the grader saw its
    function fail. The tests run in the learner's process and their stream can be forged; the probes'
    verdicts cannot, so such a milestone never counts as passing here (grader: battery.contradicted)."""
    return {line.split(" ", 1)[0]: line for line in ev.get("contradicted", [])}


def _outcomes(board, names):
    tests = [t for name in names for t in board.named(name)]
    bad = [t for t in tests if t.outcome in ("failed", "timeout")]
    return tests, bad


def _names(tests) -> str:
    shown = sorted({t.name.split("[")[0] for t in tests})
    return ", ".join(shown[:6]) + (f" and {len(shown) - 6} more" if len(shown) > 6 else "")


def _signal(ev, label_start: str):
    return next((s for s in ev["signals"] if s.label.startswith(label_start)), None)


def _implementation(c, ev):
    board, integ = ev["board"], ev["integrity"]
    states = {m: board.state(m) for m in ("M1", "M2", "M3", "M4", "M5", "M6")}
    states.update({m: "contradicted outside" for m in _contradicted(ev)})
    broken = [f"{m}: {e}" for m, e in ((m, i["error"]) for m, i in integ["modules"].items()) if e and e != "missing"]
    renamed = [q for q, i in integ["functions"].items() if not i["exists"]]
    no_import = ev["battery"].import_errors + [t.message.splitlines()[0] for t in board.tests if "does not import" in t.message][:1]
    if broken or no_import or board.collection_error and not board.tests:
        return _s("Missing", ["the code does not import: " + (broken + no_import + [board.collection_error[:200]])[0]], "C1.no_import")
    if renamed:
        return _s("Missing", [f"learner function(s) missing or renamed: {', '.join(renamed)}"], "C1.renamed")
    if "not started" in (states["M1"], states["M2"]):
        return _s("Missing", [f"the board shows {m} not started" for m in ("M1", "M2") if states[m] == "not started"],
                  "C1.not_started")
    if ev.get("quick"):
        core = [f"{m} {s}" for m, s in states.items() if m <= "M4" and s != "passing"]
        return _s("Developing", ["--quick: M5 and M6 were not run, so this criterion cannot go above Developing here",
                                 "M1-M4 " + ("pass" if not core else "fail: " + "; ".join(core))], "C1.quick", "low")
    failing = [f"{m} {s}" for m, s in states.items() if s != "passing"]
    runs = [r for r in ev["saved_runs"] if r["grounded"] and r["tools_before_answer"]]
    own = [r for r in runs if r.get("checks_out")]
    if not failing:
        if own:
            return _s("Exemplary", ["M1-M6 all pass on the lab's own tests",
                                    f"saved run {own[0]['path']}: {own[0]['grounded']} grounded citation(s), tools called "
                                    f"before the answer, and it checks out ({own[0].get('check_note', '')})",
                                    "readability and docstring contracts: read the four functions"], "C1.own_run", "medium")
        why = ["M1-M6 all pass on the lab's own tests"]
        why += [f"saved run {r['path']} does not check out against the repository ({r.get('check_note', '')}): "
                "information only, not the learner's own run" for r in runs[:2]] or \
            ["no saved copilot run (--json or --save-transcript) with a grounded citation was found "
             "in the repository: Exemplary needs the learner's own runs"]
        return _s("Proficient", why, "C1.all_pass_no_own_run")
    if all(states[m] == "passing" for m in ("M1", "M2", "M3", "M4", "M5")):
        return _s("Proficient", ["M1-M5 pass", f"{'; '.join(failing)}: Proficient only if FAILURE_ANALYSIS.md says "
                                 "the break was left in on purpose"], "C1.m6_failing", "medium")
    if all(states[m] == "passing" for m in ("M1", "M2", "M3", "M4")):
        return _s("Developing", ["M1-M4 pass, but the copilot does not pass end to end: " + "; ".join(failing)],
                  "C1.not_end_to_end")
    return _s("Developing", ["milestone tests fail: " + "; ".join(failing)], "C1.milestones_fail")


def _answer_review(ev, key):
    return ev.get("prose", {}).get("answers", {}).get(key, {})


def _explained(ev, key) -> bool:
    """The learner's own answer to question ``key`` is specific and engages the question."""
    r = _answer_review(ev, key)
    return bool(r.get("specific")) and r.get("engages", False)


def _loop(c, ev):
    board = ev["board"]
    if "not started" in (board.state("M2"), board.state("M4")):
        return _s("Missing", [f"{m} not started" for m in ("M2", "M4") if board.state(m) == "not started"], "C2.not_started")
    tests, bad = _outcomes(board, c.tests)
    capped, loads, ordered = _signal(ev, "counted loop"), _signal(ev, "json.loads called"), _signal(ev, "assistant_turn")
    cap_bad = [t for t in bad if "max_steps" in t.name]
    order_bad = [t for t in bad if "assistant_turn_precedes" in t.name or "answered_in_order" in t.name]
    missing = []
    if cap_bad and not (capped and capped.found):
        missing.append("the cap tests fail and no counted loop was found (uncapped loop)")
    if loads is not None and not loads.found:
        missing.append("no json.loads in parse_tool_calls")
    if order_bad and not (ordered and ordered.found):
        missing.append("the order tests fail and no assistant_turn is appended before the tool results")
    if missing:
        return _s("Missing", missing + [f"failing: {_names(bad)}"], "C2.red_flag")
    if bad:
        return _s("Developing", [f"{len(bad)} of the {len(tests)} listed tests fail: {_names(bad)}"], "C2.tests_fail")
    outside = [why for m, why in _contradicted(ev).items() if m in ("M2", "M4")]
    if outside:
        return _s("Developing", outside + ["the probes judged in the grader decide: a passing test stream is "
                                           "information only"], "C2.contradicted_outside")
    reasons = [f"all {len(tests)} cases of the {len(c.tests)} listed tests pass (cap, parsing, order)"]
    flags = [s.label for s in ev["signals"] if s.criterion == 2 and (s.found != s.good)]
    explained = [k for k in ("3", "4", "5") if _explained(ev, k)]
    quotes = [_answer_quote(ev, k) for k in ("3", "4", "5")]
    if not flags and len(explained) == 3:
        return _s("Exemplary", reasons + ["every code signal of the Exemplary row is present",
                                          "UNDERSTANDING.md 3, 4 and 5 explain it in the learner's own terms: confirm"],
                  "C2.explained", "medium", "READ", quotes)
    if flags:
        reasons.append("signals to look at: " + "; ".join(flags))
    if len(explained) < 3:
        reasons.append("Exemplary also needs the learner's own explanation: UNDERSTANDING.md 3-5 are not all specific "
                       f"to their code (specific: {', '.join(explained) or 'none'})")
    return _s("Proficient", reasons, "C2.tests_pass", "high" if not flags else "medium")


def _answer_quote(ev, key) -> str:
    a = next((a for a in ev["understanding"].get("answers", []) if a["key"] == key), None)
    return f"Q{key}: {a['excerpt'][:240]}" if a and a.get("answered") else f"Q{key}: (not answered)"


def _sandbox(c, ev):
    board, battery = ev["board"], ev["battery"]
    if board.state("M1") == "not started":
        return _s("Missing", ["M1 not started"], "C3.not_started")
    names = [n for n in c.tests if "test_m1_" in n or "test_m3_" in n]
    tests, bad = _outcomes(board, names)
    m1, m1_bad = board.of("M1"), [t for t in board.of("M1") if t.outcome in ("failed", "timeout")]
    broken = battery.broken()
    leaked = [k for k in broken if battery.classes()[k]["status"] in ("leaked", "hung")]
    sig = {s.label: s for s in ev["signals"] if s.function in ("safe_resolve", "dispatch_tool")}
    found = lambda start: any(lab.startswith(start) and s.found for lab, s in sig.items())  # noqa: E731
    pattern = []
    if found("string-prefix") and not found("containment by components") and not found("no containment check"):
        pattern.append("containment checked by string prefix only")
    if found("normpath"):
        pattern.append("normpath/abspath without resolving symlinks")
    if found("no containment check"):
        pattern.append("no containment check: the path's text is checked against fixed names or a leading '..'")
    if found("repo_root read") and any("root" in t.name for t in bad):
        pattern.append("the root is taken from the tool arguments")
    failing = bad + [t for t in m1_bad if t not in bad]
    if pattern:
        return _s("Missing", pattern + ([f"failing: {_names(failing)}"] if failing else []) +
                  ([f"battery: {', '.join(leaked)} got through"] if leaked else []), "C3.red_flag_pattern",
                  "high" if failing or leaked else "medium")
    if failing or leaked:
        why = []
        if failing:
            why.append(f"sandbox tests fail: {_names(failing)}")
        if leaked:
            why.append(f"instructor battery: {', '.join(leaked)} got through")
        return _s("Developing", why, "C3.escape_class")
    m3 = [t for t in tests if t.milestone == "M3"]
    reasons = [f"all {len(m1)} M1 test cases and the {len(m3)} cases of the listed M3 tests pass",
               f"instructor battery: {len(battery.held())} attack classes held" + (f", {', '.join(broken)} unclean" if broken else "")]
    if battery.classes().get("legal", {}).get("status") == "too strict":
        reasons.append("the battery's legal paths are not all allowed (too strict): see the battery lines")
    good = [s for s in ev["signals"] if s.function == "safe_resolve" and s.good]
    escape = ev["failure"].get("breaks", {}).get("escape", {})
    escape_findings = ev.get("prose", {}).get("breaks", {}).get("escape", {}).get("findings", [])
    q5 = next((a for a in ev["understanding"].get("answers", []) if a["key"] == "5"), {})
    visibility = _explained(ev, "5") and re.search(r"\.env\b|visib", f"{q5.get('text', '')} {q5.get('after_text', '')}", re.I)
    if all(s.found for s in good) and not broken and escape.get("complete") and not escape_findings and visibility:
        return _s("Exemplary", reasons + ["resolve, component-wise check, type and NUL checks all present; the escape "
                                          "write-up is complete and agrees with its block; UNDERSTANDING.md 5 separates "
                                          "containment from the .env visibility rule: confirm"], "C3.demonstrated",
                  "medium", "READ", [_answer_quote(ev, "5"), "escape hypothesis: " + escape.get("excerpts", {}).get("Hypothesis", "")])
    missing = [w for w, ok in (("the escape write-up complete", escape.get("complete")),
                               ("an escape write-up that agrees with its block", not escape_findings),
                               ("UNDERSTANDING.md 5 on containment vs .env visibility", visibility)) if not ok]
    return _s("Proficient", reasons + ["Exemplary also needs " + ", ".join(missing or ["every safe_resolve signal"])],
              "C3.tests_and_battery_hold", "high")


def _understanding(c, ev):
    u, review = ev["understanding"], ev.get("prose", {})
    answers = [a for a in u.get("answers", []) if a["key"] != "StarcallOS"]
    done = [a for a in answers if a["answered"]]
    if not u.get("exists") or not done:
        return _s("Missing", ["UNDERSTANDING.md is missing" if not u.get("exists") else "every answer is still the template"],
                  "C4.empty")
    specific = [a["key"] for a in done if _explained(ev, a["key"])]
    reasons = [f"{len(done)} of 7 questions answered; specific to the question and to the learner's code or runs: "
               f"{', '.join(specific) or 'none'}"]
    findings = [f for f in review.get("understanding_findings", []) if not f.startswith("QStarcallOS")]
    findings += [f"sentences found verbatim in the lesson in answer {a['key']}" for a in done if a["lifted_from_lesson"]]
    findings += [f"possible factual error in {a['key']}: {e}" for a in done for e in a["factual_errors"]]
    quotes = [_answer_quote(ev, k) for k in [a["key"] for a in done if a["key"] not in specific][:2] + specific[:2]]
    if findings:
        return _s("Developing", reasons + findings[:4] + ["findings cap this at Developing"], "C4.findings_cap",
                  "medium", "READ", quotes)
    if len(done) < 7:
        return _s("Developing", reasons + [f"not answered: {', '.join(a['key'] for a in answers if not a['answered'])}"],
                  "C4.unanswered")
    after = [a for a in done if a["after_m6_words"] >= 10]
    if len(specific) >= 6 and after:
        return _s("Exemplary", reasons + [f"{len(after)} After M6 part(s) filled"], "C4.specific", "medium", "READ", quotes)
    if len(specific) >= 4:
        return _s("Proficient", reasons + ["Exemplary needs specific answers throughout and After M6 notes"
                                           + ("" if after else " (none filled)")], "C4.mostly_specific", "medium", "READ", quotes)
    return _s("Developing", reasons + ["most answers mention nothing specific to their question or to the learner's code"],
              "C4.generic", "medium", "READ", quotes)


def _failure(c, ev):
    fa, review = ev["failure"], ev.get("prose", {})
    breaks = fa.get("breaks", {})
    if not fa.get("exists"):
        return _s("Missing", ["no FAILURE_ANALYSIS.md"], "C5.absent")
    touched = [s for s, b in breaks.items() if b["filled"]]
    if not touched and not fa.get("my_case", {}).get("words"):
        return _s("Missing", ["the template is untouched"], "C5.template")
    core = [s for s in ("runaway", "escape", "amnesia") if breaks.get(s) and all(
        p in breaks[s]["filled"] for p in ("Hypothesis", "Evidence", "Design decision that prevents it"))]
    complete = [s for s, b in breaks.items() if b["complete"]]
    specific = [s for s, r in review.get("breaks", {}).items() if r.get("specific") and s in complete]
    mismatched = [s for s, b in breaks.items() if any(not row[3] for row in b.get("comparison", []))]
    findings = review.get("failure_findings", []) + review.get("my_case_findings", [])
    findings += [f"pasted evidence does not match a fresh run for: {s}" for s in mismatched]
    reasons = [f"breaks complete (all five parts): {', '.join(complete) or 'none'}; specific to the break and the "
               f"learner's code: {', '.join(specific) or 'none'}"]
    quotes = [f[:300] for f in findings[:3]] or [f"{s} hypothesis: {breaks[s]['excerpts'].get('Hypothesis', '')}" for s in complete[:2]]
    if findings:
        return _s("Developing", reasons + findings[:5] + ["contradicts its own evidence or repeats itself: at most Developing"],
                  "C5.contradicts_evidence", "high" if any("says" in f for f in findings) else "medium", "READ", quotes)
    my_case = fa.get("my_case", {})
    if len(specific) == 5 and my_case.get("words", 0) >= 20:
        return _s("Exemplary", reasons + ["every scenario complete and specific; 'My case' recorded"], "C5.specific",
                  "medium", "READ", quotes)
    if len(core) == 3 and len(specific) >= 3:
        return _s("Proficient", reasons + ["runaway, escape and amnesia each have hypothesis, evidence block and design "
                                           "decision"], "C5.core_breaks", "medium", "READ", quotes)
    return _s("Developing", reasons + [f"core breaks with hypothesis + evidence + decision: {', '.join(core) or 'none'}"],
              "C5.incomplete", "medium", "READ", quotes)


def _evaluation(c, ev):
    e, review = ev["failure"].get("evaluation", {}), ev.get("prose", {})
    if not e or (e.get("table_rows", 0) == 0 and e.get("table_words", 0) < 10):
        return _s("Missing", ["no evaluation table pasted in FAILURE_ANALYSIS.md"], "C6.no_table")
    reasons = [f"table pasted ({e['table_rows']} rows; {e['rows_matching_fresh_run']} identical to a fresh offline run)"]
    quote = [f"What the numbers say: {e.get('interpretation', '')[:300]}"]
    findings = review.get("evaluation_findings", [])
    if findings:
        return _s("Developing", reasons + findings[:3] + ["the reading contradicts its own table: at most Developing"],
                  "C6.reading_contradicts_table", "high", "READ", findings[:2])
    cited = review.get("evaluation_specific", [])
    if not e.get("interpretation_text"):
        return _s("Developing", reasons + ["no interpretation under 'What the numbers say'"], "C6.no_reading")
    reasons.append(f"the reading names from its table: {', '.join(cited) or 'nothing'}")
    if len(cited) >= 4:
        return _s("Exemplary", reasons + ["reads the table component by component: confirm the weakest component and "
                                          "the proposed change"], "C6.reads_table", "medium", "READ", quote)
    if len(cited) >= 2:
        return _s("Proficient", reasons, "C6.short_reading", "medium", "READ", quote)
    return _s("Developing", reasons + ["the reading names nothing from its table (impressions)"], "C6.impressions",
              "medium", "READ", quote)


def _starcall(c, ev):
    a = next((a for a in ev["understanding"].get("answers", []) if a["key"] == "StarcallOS"), None)
    if a is None or not a["answered"]:
        return _s("Missing", ["no StarcallOS reflection beyond the template"], "C7.absent")
    r = _answer_review(ev, "StarcallOS")
    quote = [f"StarcallOS: {a['excerpt'][:300]}"]
    named = r.get("specific", [])
    repeated = [f for f in ev.get("prose", {}).get("understanding_findings", []) if "StarcallOS" in f]
    reasons = [f"names from the lab or the learner's code: {', '.join(named) or 'none'}"]
    if not named or repeated:
        return _s("Developing", reasons + repeated[:1] + ["generic: no concrete pattern from the lab"], "C7.generic",
                  "medium", "READ", quote)
    if r.get("engages") and len(named) >= 2 and len(re.split(r"(?<=[.!?])\s+", a["text"])) >= 3:
        return _s("Exemplary", reasons + ["a named pattern, a place in StarcallOS and what happens without it: confirm"],
                  "C7.specific", "medium", "READ", quote)
    return _s("Proficient", reasons + ["a pattern, applied in general terms"], "C7.pattern", "medium", "READ", quote)
