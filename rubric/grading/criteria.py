"""The rubric as data (read from rubric/rubric.md) and a SUGGESTED level per criterion, with reasons.

Every rule here mirrors a sentence of the rubric's level table; where the rubric asks for
something only a reader can judge (own words, explained unprompted), the suggestion says so and
stops at the level the evidence supports. The instructor decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grading.workspace import LAB_ROOT
from grading.attacks import EDGE_INPUTS
from grading.findings import own_block

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
    rows: dict = field(default_factory=dict)    # level -> the rubric's description of that level


def load_rubric(path=LAB_ROOT / "rubric" / "rubric.md") -> dict:
    """number -> Criterion, parsed from the rubric's headings, level tables and Evidence lists."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    out = {}
    parts = re.split(r"^## (\d)\. (.+?) \((\d+) points\)\s*$", text, flags=re.M)
    for i in range(1, len(parts) - 3, 4):
        number, title, weight, body = int(parts[i]), parts[i + 1].strip(), int(parts[i + 2]), parts[i + 3]
        points = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (\w+) \((\d+)\) \|", body, re.M)}
        rows = {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| (\w+) \(\d+\) \| (.*?)\|\s*$", body, re.M)}
        out[number] = Criterion(number, title, weight, points, _evidence_tests(body), rows)
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
        s = _hold(number, ev, rubric) or _observed(number, rubric[number], ev, rule(rubric[number], ev))
        s.points = 0 if s.mark == "HOLD" else rubric[number].points[s.level]
        out[number] = s
    return out


def _s(level, reasons, rule, confidence="high", mark=None, quotes=None) -> Suggestion:
    return Suggestion(level, list(reasons), 0, mark, rule, confidence, list(quotes or [])[:4])


# Which code criterion a learner function belongs to (criterion 1 is affected by all of them).
FUNCTION_CRITERION = {"tools.safe_resolve": 3, "tools.dispatch_tool": 3, "agent_loop.parse_tool_calls": 2,
                      "agent_loop.run_agent": 2}


def edited_scope(rel: str, rubric: dict) -> set:
    """The code criteria an edited or added guarded file can change: a guiding test file holds
    criterion 1 (the whole board) and each criterion whose Evidence names a test in it; anything
    else (the harness, a conftest, pytest.ini, the fixture) can change every test, so all three."""
    name = rel.rsplit("/", 1)[-1]
    if not (rel.startswith("code/tests/") and re.fullmatch(r"test_\w+\.py", name)):
        return {1, 2, 3}
    return {1} | {n for n in (2, 3) if n in rubric and any(t.split("::")[0] == rel for t in rubric[n].tests)}


def _hold(number, ev, rubric=None):
    """HOLD, never a level, on the code criteria when what the tests saw may not be the learner's work."""
    if number not in (1, 2, 3):
        return None
    integ = ev["integrity"]
    why = []
    if all(i.get("stub") for q, i in integ.get("functions", {}).items() if q in FUNCTION_CRITERION):
        return None   # nothing of theirs ran: the stubs' Missing says more than a hold
    rubric = rubric or load_rubric()
    # a skipped sandbox test says nothing about the loop: each edit holds the criteria it can change
    edited = [rel for rel in integ.get("guarded_edited", []) + integ.get("guarded_added", [])
              if number in edited_scope(rel, rubric)]
    if edited:
        why.append(("HOLD.edited_tests", f"tests or harness edited: {', '.join(edited[:4])}"))
    copied = ev.get("reference_copy") or {}
    if copied.get("hold"):   # two functions, or the reference's own wording: one alike function is a note
        what = [f"{', '.join(copied['functions'])} are rubric/reference/'s after canonicalising (names, wording, order, "
                "pass and dead code aside)"] if copied.get("functions") else []
        what += [f"the reference's own wording in their code: {'; '.join(repr(t) for t in copied['texts'][:3])}"] \
            if copied.get("texts") else []
        why.append(("HOLD.reference_match", "; ".join(what)))
        why += [("HOLD.reference_match", "side by side: " + x) for x in copied.get("lines", [])[:4]]
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
    newer = _newer_than_clone(ev, states)
    if newer and len(newer) == len(failing):
        # every failure is a test the learner's clone never had: the level their own board showed is
        # the suggestion, and whether to hold them to the later contract is the instructor's call
        s = _implementation(c, {**ev, "learner_tests": None, "board": _Without(board, newer)})
        gone = sorted({t for ts in newer.values() for t in ts})
        return _s(s.level, s.reasons + [f"{', '.join(newer)}: failing only on test(s) added to the lab after the learner's "
                                        f"clone (not in their code/tests): {', '.join(gone[:4])}; the suggestion "
                                        "ignores them: decide whether the later contract applies"],
                  s.rule, "medium", "READ", s.quotes)
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


def _newer_than_clone(ev, states) -> dict:
    """milestone -> failing test names that the learner's own code/tests does not have (added later)."""
    mine = ev.get("learner_tests")
    if not mine:
        return {}
    out = {}
    for m, state in states.items():
        if state != "failing":
            continue
        bad = [t for t in ev["board"].of(m) if t.outcome in ("failed", "timeout")]
        names = {t.name.split("[")[0] for t in bad}
        if bad and not names & set(mine):
            out[m] = sorted(names)
    return out


class _Without:
    """The board without the given milestones' failing tests (the tests the learner never had)."""

    def __init__(self, board, newer: dict):
        self._board = board
        drop = {(m, n) for m, ns in newer.items() for n in ns}
        self.tests = [t for t in board.tests if (t.milestone, t.name.split("[")[0]) not in drop]
        self.collection_error = board.collection_error

    def of(self, milestone: str) -> list:
        return [t for t in self.tests if t.milestone == milestone]

    def state(self, milestone: str) -> str:
        from grading.board import Board
        return Board(tests=self.of(milestone)).state(milestone)

    def named(self, name: str) -> list:
        from grading.board import Board
        return Board(tests=self.tests).named(name)


def _answer_review(ev, key):
    return ev.get("prose", {}).get("answers", {}).get(key, {})


def _explained(ev, key) -> bool:
    """The learner's own answer to question ``key`` is specific and engages the question."""
    r = _answer_review(ev, key)
    return bool(r.get("specific")) and r.get("engages", False)


def _answered(records: list) -> bool:
    """The function answered at least one probe (a probe process killed before asking observes nothing)."""
    return any(p["result"] != "hung" for p in records)


def _signal_notes(ev, criterion: int) -> list:
    """Static signals that differ from the rubric's usual pattern: a note to read, never a level."""
    flags = [s.label for s in ev["signals"] if s.criterion == criterion and s.found != s.good]
    return ["read the code (text signals, information only: the level follows behaviour): " + "; ".join(flags)] if flags else []


def _loop(c, ev):
    """Behaviour decides: the listed tests and parse_tool_calls/run_agent probed in the sandbox, judged
    in the grader. A text signal decides only one thing: run_agent that never reads max_steps is
    Missing when its loop could not be observed."""
    board, battery = ev["board"], ev["battery"]
    if board.state("M2") == "not started":   # the Missing row's "no json.loads"
        return _s("Missing", [f"{m} not started" for m in ("M2", "M4") if board.state(m) == "not started"]
                  + ["no json.loads: parse_tool_calls is not written"], "C2.not_started")
    tests, bad = _outcomes(board, c.tests)
    if board.state("M4") == "not started":
        # no loop yet: nothing the Missing row names (an uncapped loop, results without their turn)
        # exists, and the listed M4 tests fail: Developing, with the parsing judged as it stands
        parsed = battery.parse_summary()
        return _s("Developing", ["M4 not started: run_agent is not written, so the cap and the order cannot be judged",
                                 f"parse_tool_calls: {parsed['correct']} of {parsed['of']} probed inputs as the contract says"
                                 if parsed["of"] else "parse_tool_calls was not probed"]
                  + [f"{p['probe']}: {p['detail'][:160]}" for p in battery.parsing if p["result"] != "correct"][:3],
                  "C2.no_loop_yet")
    parsed, looped = battery.parse_summary(), battery.loop_summary()
    # a loop probe that crashed inside dispatch_tool is that function's defect (C3), not the loop's
    wrong_loop = [p for p in battery.looping if p["result"] != "correct" and "raised inside dispatch_tool" not in p["detail"]]
    wrong_parse = [p for p in battery.parsing if p["result"] != "correct"]
    seen = [f"{p['probe']}: {p['detail'][:160]}" for p in wrong_loop + wrong_parse]
    # uncapped: a model that never stops kept it running (an off-by-one cap is a defect, not Missing)
    never_stops = [p for p in wrong_loop if p["probe"] == "a model that never stops" and "did not return" in p["detail"]]
    cap_bad = [t for t in bad if "max_steps" in t.name]
    orphans = [p for p in wrong_loop if "no assistant turn before them" in p["detail"]]   # battery.ORPHANS
    unbounded = _signal(ev, "no bound on model calls")   # learner_code.UNBOUNDED
    missing = []
    if never_stops or cap_bad and not _answered(battery.looping) and unbounded and unbounded.found:
        missing.append("uncapped loop: run_agent kept calling a model that never stops past max_steps" if never_stops
                       else "the cap tests fail and run_agent never reads max_steps (no bound on model calls)")
    if orphans:
        missing.append("tool results appended without the assistant turn that made their calls (observed)")
    if missing:
        return _s("Missing", missing + [f"failing: {_names(bad)}" for _ in bad[:1]] + seen[:3], "C2.red_flag")
    if not _answered(battery.looping) and unbounded and unbounded.found:
        return _s("Missing", ["run_agent never reads max_steps: no bound on model calls anywhere (the loop could not be "
                              "observed running, so this text signal decides)"], "C2.unbounded_unobserved", "medium")
    outside = [why for m, why in _contradicted(ev).items() if m == "M2" or m == "M4" and wrong_loop]
    edge = [p for p in wrong_loop + wrong_parse if p["probe"] in EDGE_INPUTS and p["result"] in ("wrong", "crashed")]
    if not bad and seen and len(edge) == len(seen):
        # only inputs the level table does not name: the evidence does not decide between the rows
        return _s("Proficient", [f"all {len(tests)} cases of the {len(c.tests)} listed tests pass, and every probe of the "
                                 "cap, the parsing of real JSON and the order",
                                 "it fails only on inputs the rubric's level table does not name: "
                                 + "; ".join(f"{p['probe']}: {p['detail'][:120]}" for p in edge),
                                 "to decide: Proficient with this as feedback, or Developing if you hold the learner to "
                                 "the docstring here (a json.loads that raises on a model's input is a red flag)"]
                  + _signal_notes(ev, 2), "C2.edge_inputs", "low", "READ")
    if bad or seen:
        why = [f"{len(bad)} of the {len(tests)} listed tests fail: {_names(bad)}"] if bad else []
        why += ["observed against the contract in the sandbox, judged by the grader: " + s for s in seen[:4]]
        if not bad and outside:   # every test passes over a probe that failed: the probes decide
            why += outside + ["the probes judged in the grader decide: a passing test stream is information only"]
        return _s("Developing", why + _signal_notes(ev, 2),
                  "C2.tests_fail" if bad else "C2.contradicted_outside" if outside else "C2.probes_fail")
    reasons = [f"all {len(tests)} cases of the {len(c.tests)} listed tests pass (cap, parsing, order)"]
    if parsed["of"] or looped["of"]:
        reasons.append(f"probed in the sandbox: parse_tool_calls {parsed['correct']} of {parsed['of']} inputs and "
                       f"run_agent {looped['correct']} of {looped['of']} scripted models as the contract says (broken "
                       "arguments every turn, the answer on the last step, calls after an error included)")
    explained = [k for k in ("3", "4", "5") if _explained(ev, k)]
    quotes = [_answer_quote(ev, k) for k in ("3", "4", "5")]
    if len(explained) < 3:
        reasons.append("Exemplary also needs the learner's own explanation: UNDERSTANDING.md 3-5 are not all specific "
                       f"to their code (specific: {', '.join(explained) or 'none'})")
    elif not _cap_explained(ev):
        reasons.append("Exemplary also needs the cap explained: no sentence of UNDERSTANDING.md 3-5 says that the model "
                       "decides whether the loop goes on (a model that keeps calling tools), which max_steps bounds; "
                       "'endless loop' or 'unbounded execution' alone does not say it")
        if _answered(battery.looping):
            # specific answers whose cap sentence says only "endless loop": reading decides E or P
            return _s("Proficient", reasons + ["to decide: do the quoted answers explain the cap unprompted (the model "
                                               "decides whether to go on; max_steps bounds it)? Exemplary if they do"]
                      + _signal_notes(ev, 2), "C2.cap_unexplained", "medium", "READ", quotes)
    elif _answered(battery.looping):
        return _s("Exemplary", reasons + ["UNDERSTANDING.md 3, 4 and 5 explain it in the learner's own terms: confirm"]
                  + _signal_notes(ev, 2), "C2.explained", "medium", "READ", quotes)
    return _s("Proficient", reasons + _signal_notes(ev, 2), "C2.tests_pass", "high")


# The rubric's diagnostic answer on the cap: continuing is the model's decision, max_steps bounds it.
# A clause that names the model as what keeps the loop going (or whose decision stopping is), beside
# a word about the cap or the loop; "no cap -> endless loop" names neither.
MODEL_GOES_ON = re.compile(r"\bmodels?\b[^.;]{0,80}?\b(never (?:stops?|answers?|finish\w*)|does(?:n't| not) "
                           r"(?:stop|answer)|won't stop|keeps?|kept|forever|decid\w*|decision|always (?:call|ask)\w*|"
                           r"(?:asks?|calls?) again|stuck|continu\w*|burns?|runs? away)\b|\bmodels?\s+(?:\w+\s+)?loops?\b"
                           r"|\b(stop|stops|stopping|continu\w*)\b[^.;]{0,40}\b(when|until|belongs to|is up to|up to|"
                           r"decided by|decision of)\b[^.;]{0,20}\bmodel", re.I)
CAP_WORDS = re.compile(r"max_steps|\bcap\b|\bcapped\b|budget|\blimit|\bbound|forever|never stops?|runaway|\bloop|"
                       r"\bstop|ceiling|\bcounted\b", re.I)

AMNESIA = re.compile(r"\brepeat|\bresults?\b|\bsees?\b|\blearns?\b", re.I)   # (c)'s symptom, not the cap's


def _cap_explained(ev) -> bool:
    """UNDERSTANDING.md 3-5 say what the cap prevents in the rubric's terms: the model decides to go on."""
    for a in ev["understanding"].get("answers", []):
        if a.get("key") not in ("3", "4", "5") or not a.get("answered", True):
            continue
        for clause in re.split(r"[.;!?\n]|\([a-c]\)", f"{a.get('text', '')}\n{a.get('after_text', '')}"):
            if MODEL_GOES_ON.search(clause) and CAP_WORDS.search(clause) and not AMNESIA.search(clause):
                return True
    return False


def _answer_quote(ev, key) -> str:
    a = next((a for a in ev["understanding"].get("answers", []) if a["key"] == key), None)
    return f"Q{key}: {a['excerpt'][:240]}" if a and a.get("answered") else f"Q{key}: (not answered)"


def _sandbox(c, ev):
    """Behaviour decides: the M1/M3 tests and the battery's attacks, judged in the grader. Escapes
    observed in two or more attack classes (or the root taken from the arguments) are Missing, one
    class is Developing; a text pattern (startswith, normpath, a blocklist) only names the cause."""
    board, battery = ev["board"], ev["battery"]
    if board.state("M1") == "not started":
        return _s("Missing", ["M1 not started"], "C3.not_started")
    names = [n for n in c.tests if "test_m1_" in n or "test_m3_" in n]
    tests, bad = _outcomes(board, names)
    m1, m1_bad = board.of("M1"), [t for t in board.of("M1") if t.outcome in ("failed", "timeout")]
    broken = battery.broken()
    classes = battery.classes()
    leaked = [k for k in broken if classes[k]["status"] in ("leaked", "hung")]
    root_taken = [p for k in leaked for p in classes[k]["probes"] if "repo_root" in p["probe"] and p["result"] == "leaked"]
    failing = bad + [t for t in m1_bad if t not in bad]
    cause = _sandbox_pattern(ev)
    why = ([f"sandbox tests fail: {_names(failing)}"] if failing else []) + \
        ([f"instructor battery (judged in the grader): {', '.join(leaked)} got through"] if leaked else [])
    if root_taken or len([k for k in leaked if classes[k]["status"] == "leaked"]) >= 2:
        return _s("Missing", why + (["the root was taken from the tool arguments (observed)"] if root_taken else
                                     ["escapes in more than one class of attack: no working containment check"])
                  + [f"likely cause in the code: {x}" for x in cause], "C3.escapes_observed")
    if failing or leaked:
        note = [f"the code shows {x}, which the rubric's Missing row names: decide from the escapes above" for x in cause]
        return _s("Developing", why + note, "C3.escape_class", "high" if leaked else "medium")
    m3 = [t for t in tests if t.milestone == "M3"]
    reasons = [f"all {len(m1)} M1 test cases and the {len(m3)} cases of the listed M3 tests pass",
               f"instructor battery: {len(battery.held())} attack classes held" + (f", {', '.join(broken)} unclean" if broken else "")]
    if battery.error:
        reasons.append(f"the instructor battery did not run ({battery.error[:160]}): its attacks were not observed")
    if classes.get("legal", {}).get("status") == "too strict":
        reasons.append("the battery's legal paths are not all allowed (too strict): see the battery lines")
    reasons += [f"the code shows {x}, yet every attack was refused: read it (information only)" for x in cause]
    escape = ev["failure"].get("breaks", {}).get("escape", {})
    escape_findings = ev.get("prose", {}).get("breaks", {}).get("escape", {}).get("findings", [])
    q5 = next((a for a in ev["understanding"].get("answers", []) if a["key"] == "5"), {})
    q5_text = f"{q5.get('text', '')} {q5.get('after_text', '')}"
    # why .env needs its own rule: the answer names it (or another secret inside the root), not only the word
    visibility = _explained(ev, "5") and re.search(r"\.env\b|\.git\b|\bsecrets?\b", q5_text, re.I) \
        and re.search(r"visib|exclu|containment|inside", q5_text, re.I)
    read_block = _reads_its_block(escape)
    clean = not broken and not battery.error and battery.held() and classes.get("legal", {}).get("status") == "held"
    if clean and escape.get("complete") and read_block and not escape_findings and visibility:
        return _s("Exemplary", reasons + ["every attack refused without a crash and every legal path allowed; the escape "
                                          "write-up is complete and agrees with its block; UNDERSTANDING.md 5 separates "
                                          "containment from the .env visibility rule: confirm"], "C3.demonstrated",
                  "medium", "READ", [_answer_quote(ev, "5"), "escape hypothesis: " + escape.get("excerpts", {}).get("Hypothesis", "")])
    missing = [w for w, ok in (("every attack refused cleanly and every legal path allowed", clean),
                               ("the escape write-up complete", escape.get("complete")),
                               ("the escape Evidence part saying what its block showed (which probes leaked or were "
                                "refused)", read_block),
                               ("an escape write-up that agrees with its block", not escape_findings),
                               ("UNDERSTANDING.md 5 on containment vs .env visibility", visibility)) if not ok]
    return _s("Proficient", reasons + ["Exemplary also needs " + ", ".join(missing)], "C3.tests_and_battery_hold", "high")


# What a block of the escape break shows, said in the learner's words (the template's Evidence questions).
READS_BLOCK = re.compile(r"\b\d+ of \d+\b|\bleak|\brefus|\bsentinel|got through|\blet out\b|\bstopped\b|\bblocked\b", re.I)


def _reads_its_block(escape: dict) -> bool:
    """The escape Evidence part says what its block showed: an Exemplary write-up 'agrees with its block'
    only when it says something the block can agree with (the block's own scenario title aside)."""
    said = escape.get("prose", {}).get("Evidence", "")
    for block in [escape.get("pasted") or {}] + list(escape.get("blocks") or []):
        if isinstance(block, dict) and block.get("scenario"):
            said = said.replace(str(block["scenario"]), " ")
    return bool(READS_BLOCK.search(said))


def _sandbox_pattern(ev) -> list:
    """What the code's text suggests about a sandbox defect (names a cause; never decides a level)."""
    sig = {s.label: s for s in ev["signals"] if s.function in ("safe_resolve", "dispatch_tool")}
    found = lambda start: any(lab.startswith(start) and s.found for lab, s in sig.items())  # noqa: E731
    out = []
    if found("string-prefix") and not found("containment by components") and not found("no containment check"):
        out.append("containment checked by string prefix only")
    if found("normpath"):
        out.append("normpath/abspath without resolving symlinks")
    if found("no containment check"):
        out.append("no containment check: the path's text is checked against fixed names or a leading '..'")
    if found("repo_root read"):
        out.append("repo_root read from the tool arguments")
    return out


def _found(ev, where) -> list:
    """The grader's findings (grading/findings.py, as dicts) on the parts ``where(f['where'])`` accepts."""
    return [f for f in ev.get("prose", {}).get("findings", []) if where(str(f.get("where", "")))]


def _capping(found) -> list:
    return [f"[{f['id']}] {f['instructor']}" for f in found if f.get("caps")]


def _notes(found) -> list:
    """Questions for the instructor: what the grader could not prove, with what to decide."""
    return [f"[{f['id']}] to decide: {f['instructor']}" for f in found if not f.get("caps")]


def _in_understanding(where: str) -> bool:
    return where.startswith("Q") or where == "UNDERSTANDING.md"


def _in_failure(where: str) -> bool:
    return not (_in_understanding(where) or where in ("StarcallOS", "Evaluation", "What the numbers say"))


# The question a READ leaves to the instructor, per prose criterion (reasons starting "to decide:"
# stay out of the learner's feedback).
ASK = {4: "to decide: are the quoted answers the learner's own words, true of their code (ask one diagnostic "
          "question of the rubric if unsure)?",
       5: "to decide: does each break's design decision point at the learner's own line, and is each hypothesis a "
          "prediction written before the run?",
       6: "to decide: does the reading say which component separates the runs and why the shop-total-bug bad row "
          "fails on root, and name the weakest component of the learner's own run?",
       7: "to decide: is the capability a specific StarcallOS situation, and does the answer say what goes wrong "
          "without the pattern?"}


# An After M6 note that records a prediction meeting the run: the rubric's "a prediction that changed".
CHANGED = re.compile(r"\b(i (?:predicted|expected|guessed|thought|assumed)|my (?:prediction|guess|hypothesis)|than i "
                     r"(?:predicted|expected|guessed|thought)|was wrong|were wrong|changed my|correction|instead of)\b|->|→",
                     re.I)


def _understanding(c, ev):
    u = ev["understanding"]
    answers = [a for a in u.get("answers", []) if a["key"] != "StarcallOS"]
    done = [a for a in answers if a["answered"]]
    if not u.get("exists") or not done:
        return _s("Missing", ["UNDERSTANDING.md is missing" if not u.get("exists") else "every answer is still the template"],
                  "C4.empty")
    specific = [a["key"] for a in done if _explained(ev, a["key"])]
    reasons = [f"{len(done)} of 7 questions answered; specific to the question and to the learner's code or runs: "
               f"{', '.join(specific) or 'none'}"]
    found = _found(ev, _in_understanding)
    findings = _capping(found)
    findings += [f"sentences found verbatim in the lesson in answer {a['key']}" for a in done if a["lifted_from_lesson"]]
    findings += [f"possible factual error in {a['key']}: {e}" for a in done for e in a["factual_errors"]]
    notes = _notes(found)[:3]
    quotes = [_answer_quote(ev, k) for k in [a["key"] for a in done if a["key"] not in specific][:2] + specific[:2]]
    if findings:
        return _s("Developing", reasons + findings[:4] + ["findings cap this at Developing", ASK[4]] + notes,
                  "C4.findings_cap", "medium", "READ", quotes)
    if len(done) < 7:
        return _s("Developing", reasons + [f"not answered: {', '.join(a['key'] for a in answers if not a['answered'])}"]
                  + notes, "C4.unanswered", "medium" if notes else "high", "READ" if notes else None, quotes)
    after = [a for a in done if a["after_m6_words"] >= 10]
    changed = [a["key"] for a in after if CHANGED.search(a.get("after_text", ""))]
    unsure = [f["id"] for f in found if f["kind"] == "line"]
    if unsure:
        reasons.append(f"Exemplary waits on {', '.join(unsure)}: a file:line whose function does not use the code the "
                       "sentence names")
    if len(specific) >= 6 and len(after) >= 4 and changed and not unsure:
        return _s("Exemplary", reasons + [f"{len(after)} After M6 part(s) filled; a prediction that changed in "
                                          f"{', '.join(changed[:3])}", ASK[4]] + notes, "C4.specific", "medium", "READ",
                  quotes)
    if len(specific) >= 4:
        return _s("Proficient", reasons + ["Exemplary needs specific answers throughout and After M6 notes on most "
                                           f"answers recording a prediction that changed ({len(after)} filled, "
                                           f"{len(changed)} with a changed prediction)", ASK[4]] + notes, "C4.mostly_specific",
                  "medium", "READ", quotes)
    return _s("Developing", reasons + ["most answers mention nothing specific to their question or to the learner's code",
                                       ASK[4]] + notes, "C4.generic", "medium", "READ", quotes)


def _own_evidence(b) -> bool:
    """A break's evidence counts when one of its blocks ran on the learner's code (not `--simulate` or
    `--reference`: the learner's board counts the same blocks)."""
    if "own_evidence" in b:
        return bool(b["own_evidence"])
    return bool(b.get("evidence_block")) and own_block({"ran": b.get("pasted_ran", "")})


def _failure(c, ev):
    fa = ev["failure"]
    breaks = fa.get("breaks", {})
    if not fa.get("exists"):
        return _s("Missing", ["no FAILURE_ANALYSIS.md"], "C5.absent")
    touched = [s for s, b in breaks.items() if b["filled"]]
    if not touched and not fa.get("my_case", {}).get("words"):
        return _s("Missing", ["the template is untouched"], "C5.template")
    own = [s for s, b in breaks.items() if _own_evidence(b)]
    simulated = [s for s, b in breaks.items() if b.get("evidence_block") and s not in own]
    core = [s for s in ("runaway", "escape", "amnesia") if s in own and all(
        p in breaks[s]["filled"] for p in ("Hypothesis", "Evidence", "Design decision that prevents it"))]
    complete = [s for s, b in breaks.items() if b["complete"] and s in own]
    specific = [s for s, r in ev.get("prose", {}).get("breaks", {}).items() if r.get("specific") and s in complete]
    # How the run ended, or whether it leaked, differing from the rerun: the block is not that break's.
    # Counts alone differ honestly (the harness of the commit the learner cloned had other probes): a question.
    outcome = [s for s, b in breaks.items() if any(not row[3] and row[0] in ("ended", "leaked")
                                                   for row in b.get("comparison", []))]
    counts = [s for s, b in breaks.items() if s not in outcome and any(not row[3] for row in b.get("comparison", []))]
    found = _found(ev, _in_failure)
    findings = _capping(found) + [f"pasted evidence does not match a fresh run for: {s} (how it ended or whether it "
                                  "leaked)" for s in outcome]
    lifted = [f for f in found if f["kind"] == "lifted"]
    notes = _notes([f for f in found if f["kind"] not in ("lifted", "simulated")])[:3] + \
        [f"to decide: the counts of the pasted {s} block differ from a fresh rerun of the break (this lab's harness): "
         "another harness version, or an edited block?" for s in counts]
    reasons = [f"breaks complete (all five parts, evidence from the learner's own code): {', '.join(complete) or 'none'}; "
               f"specific to the break and the learner's code: {', '.join(specific) or 'none'}"]
    if simulated:
        reasons.append(f"evidence only from `--simulate`/`--reference` (the break on the reference, not the learner's code): "
                       f"{', '.join(simulated)}")
    quotes = [f"{f['where']}: {f['quote'][:300]}" for f in found if f.get("caps")][:3] or \
        [f"{s} hypothesis: {breaks[s]['excerpts'].get('Hypothesis', '')}" for s in complete[:2]]
    if findings:
        return _s("Developing", reasons + findings[:5] + ["contradicts its own evidence or repeats itself: at most Developing"]
                  + notes, "C5.contradicts_evidence", "high", "READ" if notes else None, quotes)
    if not own and simulated:
        return _s("Developing", reasons + ["no evidence block from the learner's own code: `--simulate`/`--reference` blocks show the "
                                           "break on the reference, so at most Developing"] + notes,
                  "C5.simulated_only", "high", None if not notes else "READ", quotes)
    my_case = fa.get("my_case", {})
    # A decision pointed at a line whose function never uses the code it names: not Exemplary until read.
    unsure = [f for f in found if f["kind"] == "line"]
    if unsure:
        reasons.append(f"Exemplary waits on {', '.join(f['id'] for f in unsure)}: a file:line whose function does not "
                       "use the code the sentence names")
    if len(specific) == 5 and my_case.get("words", 0) >= 20 and not lifted and not unsure:
        return _s("Exemplary", reasons + ["every scenario complete and specific; 'My case' recorded", ASK[5]] + notes,
                  "C5.specific", "medium", "READ", quotes)
    if lifted:
        reasons += [f"[{f['id']}] {f['instructor']}" for f in lifted[:2]] + \
            ["sentences of the lesson or the template, word for word: not Exemplary"]
    if len(core) == 3 and len(specific) >= 3:
        return _s("Proficient", reasons + ["runaway, escape and amnesia each have hypothesis, evidence block and design "
                                           "decision", ASK[5]] + notes, "C5.core_breaks", "medium", "READ", quotes)
    return _s("Developing", reasons + [f"core breaks with hypothesis + own evidence + decision: {', '.join(core) or 'none'}",
                                       ASK[5]] + notes, "C5.incomplete", "medium", "READ", quotes)


WEAKEST = re.compile(r"\b(weakest|worst|lowest|weak spot|weak point)\b", re.I)


def _evaluation(c, ev):
    e = ev["failure"].get("evaluation", {})
    review = ev.get("prose", {})
    if not e or (e.get("table_rows", 0) == 0 and e.get("table_words", 0) < 10):
        return _s("Missing", ["no evaluation table pasted in FAILURE_ANALYSIS.md"], "C6.no_table")
    reasons = [f"table pasted ({e['table_rows']} rows; {e['rows_matching_fresh_run']} identical to a fresh offline run)"]
    quote = [f"What the numbers say: {e.get('interpretation', '')[:300]}"]
    found = _found(ev, lambda w: w in ("Evaluation", "What the numbers say"))
    findings = _capping(found)
    lifted = [f for f in found if f["kind"] == "lifted"]
    if findings:
        return _s("Developing", reasons + findings[:3] + ["the reading contradicts its own table: at most Developing"],
                  "C6.reading_contradicts_table", "high", None, [f["quote"] for f in found if f.get("caps")][:2])
    cited = review.get("evaluation_specific", [])
    if not e.get("interpretation_text"):
        return _s("Developing", reasons + ["no interpretation under 'What the numbers say'"], "C6.no_reading")
    reasons.append(f"the reading names from its table: {', '.join(cited) or 'nothing'}")
    critical = WEAKEST.search(e.get("interpretation_text", ""))
    if not critical and len(cited) >= 4:
        reasons.append("Exemplary also needs the reading to name the weakest component (and a change to improve it)")
    if len(cited) >= 4 and not lifted and critical:
        return _s("Exemplary", reasons + ["reads the table component by component: confirm the weakest component and "
                                          "the proposed change", ASK[6]], "C6.reads_table", "medium", "READ", quote)
    if len(cited) >= 2:
        return _s("Proficient", reasons + [f"[{f['id']}] {f['instructor']}" for f in lifted[:1]] + [ASK[6]], "C6.short_reading",
                  "medium", "READ", quote)
    return _s("Developing", reasons + ["the reading names nothing from its table (impressions)", ASK[6]], "C6.impressions",
              "medium", "READ", quote)


# The lab's patterns, as the template's note and the lesson's Section 10 name them; a learner who
# names one (or a name from their own code) has a pattern, the template's own words included.
PATTERNS = {
    "a root bound by the application": r"\broot\b[^.]{0,60}\b(application|app\b|user|granted|chosen|fixed|never from the model)"
                                       r"|\bscope the user granted|safe_resolve|repo_root|\bcontainment\b|\ballow-?list",
    "refusals as observations": r"\brefusals?\b[^.]{0,40}\bobservations?|\berror[^.]{0,30}\b(observation|back to the model)"
                                r"|\bError: ",
    "a step budget with a stop reason": r"\b(step|call|action|api)s?[ -]budget|\bbudget on (steps|calls|actions)|max_steps"
                                        r"|MAX_STEPS_REACHED|\bstop reason|\bcap on (the )?(steps|calls|actions)|\blimit on "
                                        r"(steps|calls|actions|what)|\bfixed number of (api )?(calls|steps|actions)",
    "checked citations": r"\bcitations?\b[^.]{0,40}\b(check|ground|verif)|\bgrounded\b|show me where you read",
    "specific tool descriptions": r"\btool descriptions?\b|TOOL_SCHEMAS",
    "arguments parsed and validated": r"json\.loads|\barguments?\b[^.]{0,30}\b(pars|validat|decod)",
}
CAPABILITY = re.compile(r"\b(assistant|agent|capability|feature|action|app)\b\s+(?:that|which|who|to)\s+(?!act\b|acts\b|"
                        r"acting\b|remain|is\b|are\b|can\b|could\b|should\b|would\b|will\b|be\b|has\b|have\b)\w+"
                        r"|\b(assistant|agent|capability|feature)\s+(?!acting\b)\w+ing\b"
                        r"|\b[\w-]+-(?:ing|ed)\s+(assistant|agent|capability|feature)\b"
                        r"|\"[^\"]{4,60}\"\s+(capability|action|feature|assistant|request)", re.I)
CONSEQUENCE = re.compile(r"\b(without|otherwise|or else|if (?:it|the|a|one)\b[^.]{0,40}\b(?:not|no|raises|fails|crash\w*)"
                         r"|cannot|can't|could|would|might)\b", re.I)


def _starcall(c, ev):
    a = next((a for a in ev["understanding"].get("answers", []) if a["key"] == "StarcallOS"), None)
    if a is None or not a["answered"]:
        return _s("Missing", ["no StarcallOS reflection beyond the template"], "C7.absent")
    text = f"{a['text']} {a.get('after_text', '')}"
    quote = [f"StarcallOS: {a['excerpt'][:300]}"]
    own_names = [n for n in _answer_review(ev, "StarcallOS").get("specific", []) if not re.fullmatch(r"[\d,./]+", n)]
    patterns = [p for p, rx in PATTERNS.items() if re.search(rx, text, re.I)]
    capability = CAPABILITY.search(text)
    consequence = CONSEQUENCE.search(text)
    found = _found(ev, lambda w: w == "StarcallOS")
    repeated = _capping(found) + [f"[{f['id']}] {f['instructor']}" for f in found if f["kind"] == "lifted"]
    if a.get("lifted_from_lesson"):
        repeated.append("sentences found verbatim in the lesson: " + a["lifted_from_lesson"][0][:160])
    reasons = [f"patterns of the lab named: {', '.join(patterns) or 'none'}; names from the learner's code: "
               f"{', '.join(own_names) or 'none'}",
               f"a StarcallOS capability it applies to: {capability.group(0) if capability else 'none named'}; "
               f"what goes wrong without it: {'said' if consequence else 'not said'}"]
    if not (patterns or own_names) or repeated and not capability:
        return _s("Developing", reasons + repeated[:2] + ["generic: no concrete pattern from the lab applied to a "
                                                           "capability", ASK[7]], "C7.generic", "medium", "READ", quote)
    if not capability and len(patterns) >= 3:
        return _s("Developing", reasons + ["lists the lab's patterns without applying one to a StarcallOS capability",
                                           ASK[7]], "C7.list_of_patterns", "medium", "READ", quote)
    if capability and consequence and not repeated:
        return _s("Exemplary", reasons + ["a named pattern, a StarcallOS capability and what goes wrong without it: "
                                          "confirm the capability is specific", ASK[7]], "C7.specific", "medium", "READ",
                  quote)
    return _s("Proficient", reasons + repeated[:2] + ["a pattern, applied in general terms", ASK[7]], "C7.pattern", "medium",
              "READ", quote)
