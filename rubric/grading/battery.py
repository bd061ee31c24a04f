"""The instructor's sandbox battery: attacks the guiding tests do not contain, judged by the grader.

The grader builds the attack tree itself, with names drawn at random for each run (never the
guiding tests' fixture names), and shows it to the sandbox read-only. battery_probe.py calls the
learner's safe_resolve/dispatch_tool once per question and only reports what they returned or
raised; every verdict is decided here, in the grader's process, against the real files, after the
probe process is gone. parse_tool_calls is observed the same way, against its contract (answers
kept in ``Battery.parsing``, evidence for criterion 2). A class of attack *held* when every probe in it was refused or stayed
inside the repository; it *leaked* when one resolved outside (or a sentinel reached a tool
result, or a function that is not a tool was called by name); it is *unclean* when a probe
raised something other than ValueError (no leak, but a crash the tool would have to survive).
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grading import runner
from grading.attacks import (build, dispatch_probes, expected_calls, loop_scripts, parse_probes, probes,  # noqa: F401
                             tool_names)

BATTERY_TIMEOUT = 60          # wall seconds; the probes' own limits hold inside it
BATTERY_CPU_SECONDS = 30      # ... past which, under a neighbour's load, only CPU spent ends the battery
BATTERY_WALL_CAP = 180        # never longer than this, whatever the load
ANSWER_SECONDS = 12           # the probe answers for itself within ~6 s (3 s alarm, then its own kill)
HUNG_LIMIT = 3                # after this many questions that hung, the rest are not asked (the learner's time)
IMPORT_SECONDS = 30           # the learner's modules must import within this (in the probe)
# Judged on the provided tools, not on safe_resolve: a hard link has no path to give it away.
NOT_THE_LEARNERS = {"hard links": "a hard link looks like any file to a path check; only the provided "
                                  "tools' open (nlink check) can refuse it"}
PASSING = {"refused", "inside", "answered", "skipped"}


@dataclass
class Battery:
    probes: list = field(default_factory=list)
    error: str = ""                     # could not run at all (import error, crash before any probe)
    import_errors: list = field(default_factory=list)   # "tools.py: RuntimeError: ..." per module
    ran: object = None
    tool_names: list = field(default_factory=list)      # the tools TOOL_SCHEMAS names (the rest are not tools)
    parsing: list = field(default_factory=list)         # parse_tool_calls observed: {"probe", "result", "detail"}
    looping: list = field(default_factory=list)         # run_agent against a scripted model, the same shape
    # what was not observed, and whose doing that was: "learner" (its import ended or stalled, its
    # code killed the probe, its functions hung) or "grader" (a deadline under load); "" = all asked
    not_observed: list = field(default_factory=list)
    cause: str = ""
    attempts: int = 1

    def gap(self, cause: str, why: str) -> None:
        if cause == "learner" or not self.cause:
            self.cause = cause
        if why not in self.not_observed:
            self.not_observed.append(why)

    def parse_summary(self) -> dict:
        """parse_tool_calls against its contract, judged here: {"correct", "of", "wrong": [...]}."""
        return _summary(self.parsing)

    def loop_summary(self) -> dict:
        """run_agent against its contract (cap, order, one result per id), judged here."""
        return _summary(self.looping)

    def classes(self) -> dict:
        """class -> {"status": held|leaked|unclean|hung|skipped|too strict, "probes": [...]}."""
        out: dict = {}
        for p in self.probes:
            out.setdefault(p["class"], []).append(p)
        return {name: {"status": _status(name, ps), "probes": ps} for name, ps in out.items()}

    def held(self) -> list:
        return [c for c, v in self.classes().items() if v["status"] == "held" and c != "legal"]

    def broken(self) -> list:
        return [c for c, v in self.classes().items()
                if v["status"] in ("leaked", "hung", "unclean") and c not in NOT_THE_LEARNERS and c != "legal"]


def _summary(records: list) -> dict:
    asked = [p for p in records if p["result"] != NOT_ASKED]   # not observed: neither right nor wrong
    wrong = [p for p in asked if p["result"] != "correct"]
    not_asked = len(records) - len(asked)
    records = asked
    return {"correct": len(records) - len(wrong), "of": len(records), "not_asked": not_asked,
            "not_started": bool(records) and all("NotImplementedError" in p["detail"] for p in records),
            "wrong": [f"{p['probe']}: {p['result']}: {p['detail'][:160]}" for p in wrong[:6]]}


NOT_ASKED = "not asked"


def _status(name: str, probes: list) -> str:
    """A class's verdict from the probes that were asked; one never asked is "not observed", not a failure."""
    results = {p["result"] for p in probes}
    asked = [p for p in probes if p["result"] != NOT_ASKED]
    if not asked:
        return "not observed"
    if all("NotImplementedError" in p.get("detail", "") for p in asked):
        return "not started"
    if "hung" in results:
        return "hung"
    if name == "legal":
        if results & {"crashed"}:
            return "unclean"
        if results & {"refused", "outside"}:
            return "too strict"
        return "not observed" if NOT_ASKED in results else "held"
    if results & {"outside", "leaked", "accepted"}:
        return "leaked"
    if "crashed" in results:
        return "unclean"
    if NOT_ASKED in results:
        return "not observed"
    if results <= {"skipped"}:
        return "skipped"
    return "held"


# --------------------------------------------------------------------------- judging, in the grader

def contradicted(board, battery) -> list:
    """Milestones whose guiding tests pass while the battery, judged here, saw the function fail.

    The tests run in the learner's process, so their stream can be forged (a payload that rewrites
    every report to "passed"); the battery's answers are judged in the grader. Both passing is
    consistent; tests passing over a battery failure is what a forged stream looks like."""
    out = []
    for milestone, kinds in (("M1", False), ("M3", True)):
        if board.state(milestone) != "passing":
            continue
        bad = [name for name, v in battery.classes().items() if v["status"] in ("leaked", "hung")
               and name not in NOT_THE_LEARNERS and any((p["kind"] == "dispatch") == kinds for p in v["probes"])]
        if bad:
            out.append(f"{milestone} tests all pass, but the battery saw {', '.join(bad)} get through")
    for milestone, summary in (("M2", battery.parse_summary()), ("M4", battery.loop_summary())):
        if board.state(milestone) == "passing" and summary["of"] and summary["wrong"]:
            out.append(f"{milestone} tests all pass, but {summary['of'] - summary['correct']} of {summary['of']} "
                       f"contract probes judged outside did not: {summary['wrong'][0][:160]}")
    return out


def judge_parse(answer: dict, calls) -> tuple[str, str]:
    if "hung" in answer:
        return "hung", answer["hung"]
    if "raised" in answer:
        return "crashed", f"{answer['raised']}: {answer.get('message', '')[:120]}"
    got, want = answer.get("calls"), expected_calls(calls)
    if got is None:
        return "wrong", f"returned a {answer.get('type')}, not a list"
    if got == want:
        return "correct", f"{len(want)} call(s) as the contract says"
    return "wrong", f"expected {_brief(want)}, got {_brief(got)}"


def default_max_steps() -> int:
    """DEFAULT_MAX_STEPS of the lab's provided agent_loop.py (what run_agent must use when not told)."""
    import ast
    from grading.workspace import LAB_ROOT
    try:
        tree = ast.parse((LAB_ROOT / "code" / "agent_loop.py").read_text(encoding="utf-8"))
        return next(n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                    and any(getattr(x, "id", "") == "DEFAULT_MAX_STEPS" for x in n.targets))
    except (OSError, SyntaxError, StopIteration):
        return 10


# What each guiding test named in the rubric (criteria 1-3) checks, and the probe judged outside that
# checks the same contract: a test passing over its counterpart's failure is contradicted; a test
# without one passes only in the learner's process (unconfirmed). ("class", attack class) |
# ("parse", None) | ("loop", probe description).
COUNTERPARTS = {
    "test_dotdot_escape_raises": ("class", "sub-folder climbs"),
    "test_absolute_path_outside_raises": ("class", "absolute paths"),
    "test_sibling_with_shared_prefix_raises": ("class", "sibling prefixes"),
    "test_symlinked_file_leading_out_raises": ("class", "innocent links"),
    "test_symlinked_directory_leading_out_raises": ("class", "symlink chains"),
    "test_nul_byte_raises": ("class", "non-string and NUL paths"),
    "test_non_string_path_raises": ("class", "non-string and NUL paths"),
    "test_legal_names_with_dots_resolve": ("class", "legal"),
    "test_in_repo_symlink_is_allowed": ("class", "legal"),
    "test_root_never_comes_from_arguments": ("class", "dispatch"),
    "test_sandbox_escape_becomes_error_string": ("class", "dispatch"),
    "test_secret_never_appears": ("class", "dispatch"),
    "test_symlink_to_secret_is_refused": ("class", "dispatch"),
    "test_tool_errors_are_observations": ("loop", "malformed arguments, then the answer"),
    "test_always_calling_model_stops_at_max_steps": ("loop", "a model that never stops"),
    "test_default_max_steps_applies": ("loop", "a model that never stops, max_steps not given"),
    "test_arguments_json_string_becomes_a_dict": ("parse", None),
    "test_malformed_json_is_marked_not_raised": ("parse", None),
    "test_json_that_is_not_an_object_is_marked": ("parse", None),
    "test_no_tool_calls_gives_empty_list": ("parse", None),
    "test_parallel_calls_keep_their_order": ("parse", None),
    "test_bad_json_reaches_the_model_as_an_observation": ("loop", "malformed arguments, then the answer"),
    "test_assistant_turn_precedes_its_results": ("loop", "two calls in one turn, then the answer"),
    "test_parallel_calls_are_all_answered_in_order": ("loop", "two calls in one turn, then the answer"),
    "test_transcript_is_extended_in_place_and_serializable": ("loop", "two calls in one turn, then the answer"),
    "test_runs_a_tool_then_returns_the_answer": ("loop", "the same call twice, then the answer"),
    "test_answer_without_tools_returns_immediately": ("loop", "answers at once"),
}


def uncovered(names) -> list:
    """Named guiding tests ("file::test" or "test") whose contract no probe judged outside checks."""
    return [n for n in names if n.split("::")[-1] not in COUNTERPARTS]


def unconfirmed(board, battery, names) -> list:
    """Named tests that pass in the stream while nothing outside confirmed their contract: no
    counterpart at all, or a counterpart that was never asked."""
    out = []
    loops = {p["probe"]: p for p in battery.looping}
    classes = battery.classes()
    for name in names:
        found = board.named(name)
        if not found or any(t.outcome != "passed" for t in found):
            continue
        kind, what = COUNTERPARTS.get(name.split("::")[-1], (None, None))
        seen = (kind == "class" and classes.get(what, {}).get("status") not in (None, "not observed")) or \
            (kind == "parse" and any(p["result"] != NOT_ASKED for p in battery.parsing)) or \
            (kind == "loop" and loops.get(what, {}).get("result", NOT_ASKED) != NOT_ASKED)
        if not seen:
            out.append(name)
    return out


def judge_loop(answer: dict, script: list, max_steps: int | None) -> tuple[str, str]:
    max_steps = default_max_steps() if max_steps is None else max_steps
    seen, transcript = answer.get("seen") or [], answer.get("transcript") or []
    if "raised" in answer:
        trace = answer.get("trace") if isinstance(answer.get("trace"), list) else []
        inside = next((f for f in ("dispatch_tool", "parse_tool_calls") if f in map(str, trace)), "")
        return "crashed", f"{answer['raised']}: {answer.get('message', '')[:120]}" + (f" ({RAISED_IN} {inside})" if inside else "")
    if "hung" in answer:
        return "wrong", f"max_steps={max_steps}: did not return ({answer['hung']}) after {len(seen)} model calls"
    returned = answer.get("returned", "")
    if not isinstance(returned, str):   # the contract: always a str (None, a dict ... is a wrong loop, not a crash here)
        return "wrong", f"returned {type(returned).__name__}, not a str, after {len(seen)} model calls"
    if "answer" not in script[-1]:   # a model that never stops: the cap must hold, and say so
        if len(seen) != max_steps or not returned.startswith("MAX_STEPS_REACHED"):
            return "wrong", f"max_steps={max_steps}: {len(seen)} model calls, returned {returned[:60]!r}"
        return "correct", f"stopped after {max_steps} model calls with MAX_STEPS_REACHED"
    expected = []
    for turn in script[:-1]:
        ids = [c[0] for c in turn["calls"]]
        expected += [["assistant", ids]] + [["tool", i] for i in ids]
    got = [m[:2] for m in transcript[2:]]
    problems = []
    if returned != (script[-1]["answer"] or ""):   # content None: the docstring's empty answer is ""
        problems.append(f"returned {returned[:60]!r}, not the model's answer")
    if len(seen) != len(script):
        problems.append(f"{len(seen)} model calls, expected {len(script)}")
    if any(m[0] == "tool" and not any(isinstance(p[1], list) and m[1] in p[1] for p in got[:i])   # no message made the call
           for i, m in enumerate(got)):
        problems.append(ORPHANS)
    if seen and [m[:2] for m in seen[-1][2:]] != expected:   # what the model was sent, seen by the probe's keeper
        problems.append(f"the last model call was sent {_roles(seen[-1][2:])}, expected {_roles(expected)}")
    # an answer's text is appended (the docstring); an empty reply only ends the run, kept or not
    allowed = [expected + [["assistant", ""]]] + ([expected] if not script[-1]["answer"] else [])
    if got not in allowed:
        problems.append(f"messages after the question {_roles(got)}, expected {_roles(expected + [['assistant', '']])}")
    bad = [c[0] for turn in script[:-1] for c in turn["calls"] if not _is_object(c[2])]
    ok = [i for turn in script[:-1] for i in turn.get("ok", [])]   # well-formed calls the tool can answer
    for m in transcript:
        if m[0] == "tool" and m[1] in bad and not m[2].startswith("Error"):
            problems.append(f"the malformed call's result does not start with Error: {m[2][:60]!r}")
        if m[0] == "tool" and m[1] in ok and m[2].startswith("Error"):
            problems.append(f"a valid call was refused (arguments passed by position, not by name?): {m[2][:80]!r}")
    return ("wrong", "; ".join(problems)) if problems else ("correct", f"{len(seen)} model call(s), every id answered in order")


ORPHANS = "tool results with no assistant turn before them that made their calls"
RAISED_IN = "raised inside"   # a loop probe that crashed in another learner function: that function's defect


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict) if text else True
    except ValueError:
        return False


def _roles(messages) -> str:
    return " ".join(m[0] + (f"({len(m[1])} calls)" if isinstance(m[1], list) and m[1] else "") for m in messages[:8])


def _brief(calls) -> str:
    return "[" + ", ".join(f"{c[1][:12]} {c[2][:40]}{' + error' if c[3] else ''}" for c in calls[:3]) + "]"



def judge_path(returned: str, repo: Path, cwd: Path) -> str:
    """inside | outside: where a returned path really leads (links followed, case-insensitive
    aliases of the repository counted as the repository, sub-folder climbs resolved)."""
    path = Path(returned)
    path = path if path.is_absolute() else cwd / path
    real = Path(os.path.realpath(path))
    repo_real = Path(os.path.realpath(repo))
    if real == repo_real or real.is_relative_to(repo_real):
        return "inside"
    try:
        repo_stat = os.stat(repo_real)
    except OSError:
        return "outside"
    for ancestor in [real, *real.parents]:
        try:
            if os.path.samestat(os.stat(ancestor), repo_stat):   # the repository under another spelling
                return "inside"
        except OSError:
            continue
    return "outside"


def judge_resolve(answer: dict, t: dict) -> tuple[str, str]:
    if "hung" in answer:
        return "hung", answer["hung"]
    if "raised" in answer:
        text = f"{answer['raised']}: {answer.get('message', '')[:120]}"
        return ("refused" if answer["raised"] == "ValueError" else "crashed"), text
    returned = answer.get("returned", "")
    if not isinstance(returned, str):   # the contract: always a str (None, a dict ... is a wrong loop, not a crash here)
        return "wrong", f"returned {type(returned).__name__}, not a str, after {len(seen)} model calls"
    if answer.get("type") not in ("str", "PosixPath", "WindowsPath", "Path") and not answer.get("type", "").endswith("Path"):
        return "crashed", f"returned a {answer.get('type')}, not a path: {returned[:100]}"
    try:
        where = judge_path(returned, t["repo"], t["parent"])
    except (OSError, ValueError, RuntimeError) as exc:
        return "crashed", f"returned {returned[:120]!r}, which cannot be resolved ({type(exc).__name__})"
    return where, f"returned {returned[-120:]}"


def judge_dispatch(answer: dict, t: dict, cls: str) -> tuple[str, str]:
    if "hung" in answer:
        return "hung", answer["hung"]
    if "raised" in answer:
        return "crashed", f"{answer['raised']}: {answer.get('message', '')[:120]}"
    text = answer.get("returned", "")
    if answer.get("type") != "str":
        return "crashed", f"returned {answer.get('type')}, not a string"
    if t["sentinel"] in text or t["secret"] in text:
        return "leaked", text[:160]
    if cls == "non-tool names" and not text.startswith("Error"):
        return "leaked", f"a function that is not in TOOL_SCHEMAS was called: {text[:140]}"
    return ("refused" if text.startswith("Error") else "answered"), text[:160]


# --------------------------------------------------------------------------- the session

class Session:
    """Questions in, one answer per question out; an answer counts only with its question's nonce."""

    def __init__(self, child):
        self.child, self.lines = child, queue.Queue(maxsize=16)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        """Only lines shaped like an answer are kept, each at most 1 MB (a loop ignoring its cap
        answers with ~300 KB), at most 16 waiting (one is asked at a time): a learner printing
        without end costs the grader no memory."""
        try:
            for raw in iter(lambda: self.child.proc.stdout.readline(1 << 20), b""):
                if raw.startswith(b'{"nonce"'):
                    try:
                        self.lines.put_nowait(raw)
                    except queue.Full:
                        pass
        except (OSError, ValueError):
            pass
        self.lines.put(None)

    def ask(self, question: dict, seconds: float) -> dict | None:
        nonce = secrets.token_hex(8)
        try:
            self.child.proc.stdin.write((json.dumps({**question, "nonce": nonce}) + "\n").encode())
            self.child.proc.stdin.flush()
        except (OSError, ValueError):
            return None
        deadline = time.monotonic() + seconds
        while True:
            try:
                raw = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if raw is None:
                return None
            try:
                answer = json.loads(raw)
            except ValueError:
                continue                  # the learner's own printing
            if isinstance(answer, dict) and answer.get("nonce") == nonce:
                return answer


def run_battery(lab: Path, home: Path, memory_mb: int, box=None, base: Path | None = None) -> Battery:
    """``base``: a folder the sandbox shows read-only (the tree is built there); default home.

    A battery the grader's own limits cut short (its deadline under a neighbour's load) runs once
    more; what it still could not ask stays "not asked", for the instructor to read, never a failure."""
    battery = _run_battery(lab, home, memory_mb, box, base)
    if battery.cause == "grader":
        again = _run_battery(lab, home, memory_mb, box, base)
        again.attempts = 2
        return again
    return battery


def _run_battery(lab: Path, home: Path, memory_mb: int, box=None, base: Path | None = None) -> Battery:
    base = base or home / "battery"
    base.mkdir(exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    t = build(base)
    tools, helpers = tool_names(lab / "code" / "tools.py")
    # the probe under the name of an ordinary run of the lab: nothing in argv says "grader"
    script = run / "copilot.py"
    shutil.copyfile(lab / "rubric" / "grading" / "battery_probe.py", script)
    os.chmod(run, 0o755)
    os.chmod(script, 0o644)
    if box is not None:
        box.share(readable=[base])
    battery = Battery()
    questions = [("resolve", p) for p in probes(t)] + [("dispatch", p) for p in dispatch_probes(t, helpers)]
    with runner.Child([script, lab / "code", str(IMPORT_SECONDS)], cwd=t["parent"], env=runner.child_env(home), timeout=BATTERY_WALL_CAP + 30,
                      memory_mb=memory_mb, box=box, channel=True) as child:
        if child.proc is None:
            battery.error, battery.ran = child.error, child.finish()
            return battery
        session = Session(child)
        hello = session.ask({"op": "hello"}, IMPORT_SECONDS + 20)
        if hello is None or hello.get("import_failed"):
            ended = child.proc.poll() is not None
            battery.ran = child.finish()
            if hello is not None:
                why = str(hello["import_failed"])[:300]
                battery.gap("learner", why)
            elif ended:
                why = f"the probe process ended before it could ask anything ({battery.ran.describe()})"
                battery.gap("learner", why)
            else:
                why = f"the probe did not start within {IMPORT_SECONDS + 20:g} s (the grader's deadline)"
                battery.gap("grader", why)
            battery.error = f"the battery did not run: {why}: {battery.ran.stderr[-300:].strip()}".rstrip(": ")
            return battery
        battery.import_errors = [f"{m}: {e}" for m, e in hello.get("import_errors", [])][:4]
        if any(str(e).startswith("tools.py") for e in battery.import_errors):
            battery.error = f"tools.py does not import: {battery.import_errors[0].split(': ', 1)[-1]}"
            try:
                child.proc.stdin.close()   # no questions: the probe process ends
            except OSError:
                pass
            battery.ran = child.finish()
            return battery
        stopped = ""       # why the rest is not asked

        def over() -> bool:
            wall = time.monotonic() - child.started
            if wall > BATTERY_WALL_CAP:
                return True
            cpu = child.group.cpu_seconds() if child.group is not None else None
            return wall > BATTERY_TIMEOUT and (cpu is None or cpu > BATTERY_CPU_SECONDS)

        def ask(question: dict) -> tuple:
            """(answer or None, why not asked)"""
            nonlocal stopped
            if not stopped and over():
                stopped = "grader"
                hung = sum(p["result"] == "hung" for p in battery.probes + battery.parsing + battery.looping)
                battery.gap("learner" if hung else "grader",
                            f"the battery's deadline passed ({BATTERY_TIMEOUT} s)" + (f" after {hung} question(s) hung"
                                                                                     if hung else " under load"))
            if stopped:
                return None, "not asked: " + battery.not_observed[-1]
            answer = session.ask(question, ANSWER_SECONDS)
            if answer is None:
                stopped = "killed"
                if child.proc.poll() is not None:
                    battery.gap("learner", "the learner's code ended the probe process")
                else:
                    battery.gap("grader", f"the probe did not answer within {ANSWER_SECONDS} s (the grader's deadline)")
                return None, "not asked: " + battery.not_observed[-1]
            if answer.get("not_asked"):
                battery.gap("learner", str(answer["not_asked"])[:200])
                return None, "not asked: " + str(answer["not_asked"])[:200]
            if "hung" in answer:
                hung = 1 + sum(p["result"] == "hung" for p in battery.probes + battery.parsing + battery.looping)
                if hung >= HUNG_LIMIT:
                    stopped = "hung"
                    battery.gap("learner", f"the learner's functions hung {hung} times; the rest was not asked")
            return answer, ""

        for op, p in questions:
            if op == "resolve":
                cls, what, kind, root, arg, needs = p
                record = {"class": cls, "probe": what, "kind": kind, "argument": repr(arg)[:80]}
            else:
                cls, what, name, args, needs = p
                record = {"class": cls, "probe": what, "kind": "dispatch", "argument": f"{name}({args!r:.60})"}
            if needs and not (t["links"].get(needs) if needs != "case" else False):
                battery.probes.append({**record, "result": "skipped", "detail": "not possible on this file system"})
                continue
            question = {"op": op, "root": str(root), "arg": arg} if op == "resolve" else \
                {"op": op, "root": str(t["repo"]), "name": name, "args": args}
            answer, why = ask(question)
            if answer is None:
                battery.probes.append({**record, "result": NOT_ASKED, "detail": why})
                continue
            result, detail = judge_resolve(answer, t) if op == "resolve" else judge_dispatch(answer, t, cls)
            if op == "resolve" and kind == "invalid" and result in ("inside", "outside", "crashed"):
                result, detail = "accepted", f"an invalid path was not refused with ValueError: {detail}"
            battery.probes.append({**record, "result": result, "detail": detail.replace(str(t["parent"]), "<tmp>")})
        can_parse = not any(str(e).startswith("agent_loop.py") for e in battery.import_errors)
        for what, calls in parse_probes() if can_parse else ():
            answer, why = ask({"op": "parse", "calls": calls})
            if answer is None:
                battery.parsing.append({"probe": what, "result": NOT_ASKED, "detail": why})
                continue
            result, detail = judge_parse(answer, calls)
            battery.parsing.append({"probe": what, "result": result, "detail": detail})
        for what, script_, max_steps in loop_scripts(t) if can_parse else ():
            answer, why = ask({"op": "loop", "script": script_, "max_steps": max_steps, "root": str(t["repo"])})
            if answer is None:
                battery.looping.append({"probe": what, "result": NOT_ASKED, "detail": why})
                continue
            result, detail = judge_loop(answer, script_, max_steps)
            battery.looping.append({"probe": what, "result": result, "detail": detail})
        if stopped == "killed":
            child.end()
        try:
            child.proc.stdin.close()   # no more questions: the probe process ends
        except OSError:
            pass
        battery.ran = child.finish()
    battery.tool_names = sorted(tools)
    return battery
