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
    """number -> Suggestion."""
    rules = {1: _implementation, 2: _loop, 3: _sandbox, 4: _understanding, 5: _failure, 6: _evaluation, 7: _starcall}
    out = {}
    for number, rule in rules.items():
        s = rule(rubric[number], ev)
        if isinstance(s, tuple):
            s = Suggestion(*s, rule=f"C{number}.{s[0].lower()}")
        s.points = 0 if s.mark == "HOLD" else rubric[number].points[s.level]
        out[number] = s
    return out


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
    broken = [f"{m}: {e}" for m, e in ((m, i["error"]) for m, i in integ["modules"].items()) if e and e != "missing"]
    renamed = [q for q, i in integ["functions"].items() if not i["exists"]]
    no_import = ev["battery"].import_errors + [t.message.splitlines()[0] for t in board.tests if "does not import" in t.message][:1]
    if broken or no_import or board.collection_error and not board.tests:
        return "Missing", ["the code does not import: " + (broken + no_import + [board.collection_error[:200]])[0]]
    if renamed:
        return "Missing", [f"learner function(s) missing or renamed: {', '.join(renamed)}"]
    if "not started" in (states["M1"], states["M2"]):
        return "Missing", [f"the board shows {m} not started" for m in ("M1", "M2") if states[m] == "not started"]
    if ev.get("quick"):
        core = [f"{m} {s}" for m, s in states.items() if m <= "M4" and s != "passing"]
        return "Developing", ["--quick: M5 and M6 were not run, so this criterion cannot go above Developing here",
                              "M1-M4 " + ("pass" if not core else "fail: " + "; ".join(core))]
    failing = [f"{m} {s}" for m, s in states.items() if s != "passing"]
    runs = [r for r in ev["saved_runs"] if r["grounded"] and r["tools_before_answer"]]
    if not failing:
        if runs:
            return "Exemplary", ["M1-M6 all pass on the lab's own tests",
                                 f"saved run {runs[0]['path']}: {runs[0]['grounded']} grounded citation(s), tools called before the answer",
                                 "readability and docstring contracts: read the four functions"]
        return "Proficient", ["M1-M6 all pass on the lab's own tests",
                              "no saved copilot run (--json or --save-transcript) with a grounded citation was found "
                              "in the repository: Exemplary needs the learner's own runs"]
    if all(states[m] == "passing" for m in ("M1", "M2", "M3", "M4", "M5")):
        return "Proficient", ["M1-M5 pass", f"{'; '.join(failing)}: Proficient only if FAILURE_ANALYSIS.md says the break was left in on purpose"]
    if all(states[m] == "passing" for m in ("M1", "M2", "M3", "M4")):
        return "Developing", ["M1-M4 pass, but the copilot does not pass end to end: " + "; ".join(failing)]
    return "Developing", ["milestone tests fail: " + "; ".join(failing)]


def _loop(c, ev):
    board = ev["board"]
    if "not started" in (board.state("M2"), board.state("M4")):
        return "Missing", [f"{m} not started" for m in ("M2", "M4") if board.state(m) == "not started"]
    tests, bad = _outcomes(board, c.tests)
    reasons = []
    capped, loads, ordered = _signal(ev, "`for"), _signal(ev, "json.loads called"), _signal(ev, "assistant_turn")
    cap_bad = [t for t in bad if "max_steps" in t.name]
    order_bad = [t for t in bad if "assistant_turn_precedes" in t.name or "answered_in_order" in t.name]
    missing = []
    if cap_bad and not (capped and capped.found):
        missing.append("the cap tests fail and no `for ... in range(max_steps)` loop was found (uncapped loop)")
    if loads is not None and not loads.found:
        missing.append("no json.loads in parse_tool_calls")
    if order_bad and not (ordered and ordered.found):
        missing.append("the order tests fail and no assistant_turn is appended before the tool results")
    if missing:
        return "Missing", missing + [f"failing: {_names(bad)}"]
    if bad:
        return "Developing", [f"{len(bad)} of the {len(tests)} listed tests fail: {_names(bad)}"]
    reasons.append(f"all {len(tests)} cases of the {len(c.tests)} listed tests pass (cap, parsing, order)")
    flags = [s.label for s in ev["signals"] if s.criterion == 2 and (s.found != s.good)]
    explained = [a for a in ev["understanding"].get("answers", []) if a["key"] in ("3", "4", "5") and a["answered"]]
    if not flags and len(explained) == 3:
        return "Exemplary", reasons + ["every code signal of the Exemplary row is present",
                                       "UNDERSTANDING.md answers 3, 4 and 5 exist: check that they explain cap, decoding and order"]
    if flags:
        reasons.append("signals to look at: " + "; ".join(flags))
    if len(explained) < 3:
        reasons.append("Exemplary also needs the learner's own explanation (UNDERSTANDING.md 3-5 not all answered)")
    return "Proficient", reasons


def _sandbox(c, ev):
    board, battery = ev["board"], ev["battery"]
    if board.state("M1") == "not started":
        return "Missing", ["M1 not started"]
    names = [n for n in c.tests if "test_m1_" in n or "test_m3_" in n]
    tests, bad = _outcomes(board, names)
    m1, m1_bad = board.of("M1"), [t for t in board.of("M1") if t.outcome in ("failed", "timeout")]
    broken = battery.broken()
    leaked = [k for k in broken if battery.classes()[k]["status"] in ("leaked", "hung")]
    prefix, component = _signal(ev, "string-prefix"), _signal(ev, "containment by components")
    norm, root_arg = _signal(ev, "normpath"), _signal(ev, "repo_root read")
    pattern = []
    if prefix and prefix.found and component and not component.found:
        pattern.append("containment checked by string prefix only")
    if norm and norm.found:
        pattern.append("normpath/abspath without resolving symlinks")
    if root_arg and root_arg.found and any("root" in t.name for t in bad):
        pattern.append("the root is taken from the tool arguments")
    if pattern and (bad or m1_bad or leaked):
        return "Missing", pattern + [f"failing: {_names(bad + m1_bad)}" if bad or m1_bad else f"battery leaked: {', '.join(leaked)}"]
    if bad or m1_bad or leaked:
        why = []
        if bad or m1_bad:
            why.append(f"sandbox tests fail: {_names(bad + [t for t in m1_bad if t not in bad])}")
        if leaked:
            why.append(f"instructor battery: {', '.join(leaked)} got through")
        return "Developing", why
    m3 = [t for t in tests if t.milestone == "M3"]
    reasons = [f"all {len(m1)} M1 test cases and the {len(m3)} cases of the listed M3 tests pass",
               f"instructor battery: {len(battery.held())} attack classes held" + (f", {', '.join(broken)} unclean" if broken else "")]
    if battery.classes().get("legal", {}).get("status") == "too strict":
        reasons.append("the battery's legal paths are not all allowed (too strict): see the battery lines")
    good = [s for s in ev["signals"] if s.function == "safe_resolve" and s.good]
    escape = ev["failure"].get("breaks", {}).get("escape", {})
    q5 = next((a for a in ev["understanding"].get("answers", []) if a["key"] == "5"), {})
    if all(s.found for s in good) and not broken and escape.get("complete") and "visibility" in q5.get("key_words_found", []):
        return "Exemplary", reasons + ["resolve, component-wise check, type and NUL checks all present; escape write-up "
                                       "complete; UNDERSTANDING.md 5 talks about visibility: confirm the learner can demonstrate it"]
    return "Proficient", reasons + ["Exemplary also needs the demonstration and the containment/visibility explanation "
                                    "(escape write-up, UNDERSTANDING.md 5)"]


def _understanding(c, ev):
    u = ev["understanding"]
    answers = [a for a in u.get("answers", []) if a["key"] != "StarcallOS"]
    done = [a for a in answers if a["answered"]]
    if not u.get("exists") or not done:
        return "Missing", ["UNDERSTANDING.md is missing" if not u.get("exists") else "every answer is still the template"]
    lifted = [a["key"] for a in done if a["lifted_from_lesson"]]
    errors = [f"{a['key']}: {e}" for a in done for e in a["factual_errors"]]
    reasons = [f"{len(done)} of 7 questions answered ({sum(a['words'] for a in done)} words)"]
    if lifted:
        reasons.append(f"sentences found verbatim in the lesson in answer(s) {', '.join(lifted)}")
    if errors:
        reasons.append("possible factual error " + "; ".join(errors))
    if len(done) < 7 or lifted or errors:
        missing = [a["key"] for a in answers if not a["answered"]]
        return "Developing", reasons + ([f"not answered: {', '.join(missing)}"] if missing else [])
    full = all(a["words"] >= 40 and len(a["key_words_found"]) * 2 >= len(a["key_words_found"] + a["key_words_missing"]) for a in done)
    after = [a for a in done if a["after_m6_words"] >= 10]
    if full and after:
        return "Exemplary", reasons + [f"every answer >= 40 words and uses most of its note's key words; {len(after)} After M6 part(s) filled",
                                       "own voice and reference to their own code or runs: read the excerpts"]
    return "Proficient", reasons + ["Exemplary needs specific answers covering each note and After M6 parts"
                                    + ("" if after else " (none filled)")]


def _failure(c, ev):
    fa = ev["failure"]
    breaks = fa.get("breaks", {})
    if not fa.get("exists"):
        return "Missing", ["no FAILURE_ANALYSIS.md"]
    touched = [s for s, b in breaks.items() if b["filled"]]
    if not touched and not fa.get("my_case", {}).get("words"):
        return "Missing", ["the template is untouched"]
    core = [s for s in ("runaway", "escape", "amnesia") if breaks.get(s) and all(
        p in breaks[s]["filled"] for p in ("Hypothesis", "Evidence", "Design decision that prevents it"))]
    complete = [s for s, b in breaks.items() if b["complete"]]
    mismatched = [s for s, b in breaks.items() if any(not row[3] for row in b.get("comparison", []))]
    reasons = [f"breaks written up: {', '.join(touched) or 'none'}; complete (all five parts): {', '.join(complete) or 'none'}"]
    my_case = fa.get("my_case", {})
    if len(complete) == 5 and my_case.get("words", 0) >= 40 and my_case.get("says_which"):
        level = "Exemplary"
        reasons.append("every scenario complete and 'My case' names boundary vs reasoning failure")
    elif len(core) == 3:
        level = "Proficient"
        reasons.append("runaway, escape and amnesia each have hypothesis, evidence block and design decision")
    else:
        level = "Developing"
        reasons.append(f"core breaks with hypothesis + evidence + decision: {', '.join(core) or 'none'} of runaway, escape, amnesia")
    if mismatched:
        reasons.append(f"pasted evidence does not match a fresh run for: {', '.join(mismatched)} (red flag)")
        level = {"Exemplary": "Proficient", "Proficient": "Developing"}.get(level, level)
    return level, reasons


def _evaluation(c, ev):
    e = ev["failure"].get("evaluation", {})
    if not e or (e.get("table_rows", 0) == 0 and e.get("table_words", 0) < 10):
        return "Missing", ["no evaluation table pasted in FAILURE_ANALYSIS.md"]
    reasons = [f"table pasted ({e['table_rows']} rows; {e['rows_matching_fresh_run']} identical to a fresh offline run)"]
    if e["interpretation_words"] < 20:
        return "Developing", reasons + ["little or no interpretation under 'What the numbers say'"]
    reasons.append(f"interpretation: {e['interpretation_words']} words, mentions {', '.join(e['mentions']) or 'none of the key terms'}")
    if e["interpretation_words"] >= 60 and "root" in e["mentions"] and {"shop-total-bug", "weakest"} & set(e["mentions"]):
        return "Exemplary", reasons + ["reads critically? check the weakest component and the proposed change"]
    return "Proficient", reasons


def _starcall(c, ev):
    a = next((a for a in ev["understanding"].get("answers", []) if a["key"] == "StarcallOS"), None)
    if a is None or not a["answered"]:
        return "Missing", ["no StarcallOS reflection beyond the template"]
    pattern = [w for w in a["key_words_found"] if w != "starcallos"]
    reasons = [f"{a['words']} words; pattern words: {', '.join(pattern) or 'none'}"]
    if a["words"] < 30 or not pattern:
        return "Developing", reasons + ["short or without a named pattern"]
    if a["words"] >= 60 and "starcallos" in a["key_words_found"] and "without" in a["excerpt"].lower():
        return "Exemplary", reasons + ["names a place in StarcallOS and what goes wrong without it: check it is specific"]
    return "Proficient", reasons
