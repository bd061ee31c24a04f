"""Course checks from the second red-team pass over the grader (issue 26): each test is one attack
or unfairness that worked on 962e0be, and shows it defeated.

1. no evidence is never a pass: a guiding test missing from the stream, a probe not asked, an
   import that exits or stalls is "not observed" (HOLD where the learner's code caused it, READ
   where the grader's own limits did), never "all 0 cases pass".
2. Gradescope without namespaces: a separate unprivileged user, or a results.json that says the
   submission could not be graded safely; never a silent --no-sandbox.
3. the probe process looks like an ordinary run, and its answer channel and nonce are out of the
   learner function's reach.
4. every read-back from the work folder is bounded (a FIFO cannot hang the grader).
5. CPU per command, so a neighbour's busy processes cost no grade.
7. names: unique file stems, csv_uncell takes off only its own ', --finalize refuses one row.
Tests that need bubblewrap or root skip, with the reason, where they cannot run.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import decisions, grader, safe_text  # noqa: E402

# --------------------------------------------------------------------------- 7. names


def test_learner_names_that_differ_never_share_a_report_file():
    """`alice:1` became `alice_1`, the file of another learner: one report overwrote the other."""
    names = ["alice:1", "alice_1", "alice/1", ".alice_1", "alice\x001", "a" * 130, "a" * 131]
    stems = [safe_text.file_stem(n) for n in names]
    assert len(set(stems)) == len(names), stems
    assert safe_text.file_stem("alice_1") == "alice_1"          # a plain name keeps its plain file name
    assert all("/" not in s and ":" not in s and not s.startswith(".") for s in stems), stems


@pytest.mark.parametrize("value", ["'=1+1", "''x", "'plain", "=1+1", "-3", "bob", "'"])
def test_csv_uncell_takes_off_only_the_apostrophe_csv_cell_added(value):
    assert safe_text.csv_uncell(safe_text.csv_cell(value)) == value


def _report(name: str) -> dict:
    r = grader.could_not_grade(Path("/submissions") / name, "synthetic report for a CSV check")
    for c in r["criteria"]:
        c.update(level="Proficient", points=c["weight"] * 3 // 4, mark=None)
    r["total"] = sum(c["points"] for c in r["criteria"])
    return r


def test_finalize_refuses_one_bad_row_and_writes_the_rest_of_the_class(tmp_path):
    """Learners named `'=1+1` (its own apostrophe) and `alice:1` next to `alice_1`: before, the
    apostrophe was lost on reading, the two alices shared one report, and one bad cell anywhere
    refused the whole class."""
    reports = tmp_path / "reports"
    reports.mkdir()
    rs = [_report(n) for n in ("'=1+1", "alice:1", "alice_1", "carol")]
    for r in rs:
        (reports / f"{safe_text.file_stem(r['learner'])}.json").write_text(json.dumps(r), encoding="utf-8")
    assert len(list(reports.glob("*.json"))) == 4
    decisions.write_csv(rs, tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if row["learner"] == "carol":
            row["c3_level"] = "Great"          # the one bad row
    with open(tmp_path / "edited.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    errors = decisions.finalize(tmp_path / "edited.csv", reports, tmp_path / "final.csv", tmp_path / "fb")
    assert len(errors) == 1 and "'carol'" in errors[0] and "Great" in errors[0], errors
    with open(tmp_path / "final.csv", newline="", encoding="utf-8") as fh:
        final = sorted(safe_text.csv_uncell(r["learner"]) for r in csv.DictReader(fh))
    assert final == sorted(["'=1+1", "alice:1", "alice_1"]), final
    assert len(list((tmp_path / "fb").glob("*.md"))) == 3


# --------------------------------------------------------------------------- 1. not observed is not passed

from grading import battery, board as board_mod, criteria, sandbox, synthetic, workspace  # noqa: E402

BWRAP_WHY = sandbox.choose("bubblewrap")[1]
needs_bwrap = pytest.mark.skipif(bool(BWRAP_WHY), reason=f"bubblewrap cannot run here: {BWRAP_WHY}")
POSIX_ONLY = pytest.mark.skipif(os.name != "posix", reason="fork, signals and rlimits are POSIX")


def _ev(tests: dict, expected: list, probes=(), parsing=(), looping=(), ran=None, cause="", gaps=()):
    b = board_mod.Board(tests=[board_mod.Test(n, board_mod._milestone(n), o) for n, o in tests.items()],
                        expected=list(expected), ran=ran or grader.runner.Ran(["pytest"], 0, "", "", 1.0))
    bat = battery.Battery(probes=list(probes), parsing=list(parsing), looping=list(looping),
                          not_observed=list(gaps), cause=cause)
    return {"board": b, "battery": bat, "signals": [], "saved_runs": [], "understanding": {}, "prose": {},
            "failure": {}, "defences": None, "integrity": {"modules": {}, "functions": {}},
            "contradicted": battery.contradicted(b, bat)}


def _named(number: int) -> list:
    return criteria.load_rubric()[number].tests


def test_a_named_test_missing_from_the_stream_is_a_hold_never_all_zero_pass():
    """An import that exits under pytest left the stream empty: C2 read "all 0 cases pass"
    (Proficient) and C3 "all 0 M1 test cases pass" before."""
    expected = _named(2) + _named(3)
    ev = _ev({}, expected)
    for number in (2, 3):
        c = criteria.load_rubric()[number]
        s = criteria._observed(number, c, ev, criteria._s("Proficient", ["all 0 cases pass"], "C2.tests_pass"))
        assert s.mark == "HOLD" and s.rule == "HOLD.not_observed", (number, s)
    # every named test reported: the rule's own level stands
    full = _ev({n: "passed" for n in expected}, expected)
    s = criteria._observed(2, criteria.load_rubric()[2], full, criteria._s("Proficient", ["x"], "C2.tests_pass"))
    assert s.level == "Proficient" and s.mark is None


def test_probes_not_asked_are_not_observed_never_failed_and_a_grader_deadline_is_a_read():
    """The battery killed at its deadline under a neighbour's load marked 43 unasked probes "hung":
    a false "tests contradicted outside" and "encodings ... got through"."""
    asked = {"class": "encodings", "probe": "a", "kind": "relative", "argument": "'a'", "result": "refused", "detail": ""}
    unasked = dict(asked, probe="b", result=battery.NOT_ASKED, detail="not asked: the deadline passed")
    bat = battery.Battery(probes=[asked, unasked, dict(unasked, **{"class": "long paths"})])
    assert bat.classes()["encodings"]["status"] == "not observed"
    assert bat.classes()["long paths"]["status"] == "not observed"
    assert bat.broken() == [] and bat.held() == []
    tests = {n: "passed" for n in _named(3)}
    ev = _ev(tests, list(tests), probes=bat.probes, cause="grader", gaps=["the battery's deadline passed under load"])
    assert ev["contradicted"] == []
    c = criteria.load_rubric()[3]
    s = criteria._observed(3, c, ev, criteria._sandbox(c, dict(ev, failure={}, understanding={})))
    assert s.mark == "READ" and s.rule == "READ.not_observed" and s.level != "Missing", s
    assert any("grader's own limits" in r for r in s.reasons)
    learner = dict(ev, battery=battery.Battery(probes=bat.probes, cause="learner", not_observed=["killed the probe"]))
    assert criteria._observed(3, c, learner, s).mark == "HOLD"


def test_a_battery_cut_short_by_the_graders_deadline_runs_once_more(monkeypatch):
    calls = []

    def fake(*args, **kwargs):
        calls.append(1)
        return battery.Battery(cause="grader", not_observed=["deadline"]) if len(calls) == 1 else battery.Battery()

    monkeypatch.setattr(battery, "_run_battery", fake)
    again = battery.run_battery(Path("lab"), Path("home"), 512)
    assert len(calls) == 2 and again.attempts == 2 and again.cause == ""


EXIT_WHEN_OBSERVED = '''
import os as _o, sys as _s
if "pytest" in _s.modules or "battery_probe" in " ".join(_s.argv):
    _o._exit(0)
'''


def _submission(tmp_path: Path, top: str = "", functions=None) -> Path:
    from classroom import own_bodies
    sub = synthetic.make(tmp_path / "sub", code="reference", docs="filled", functions=functions or own_bodies())
    tools = sub / "code" / "tools.py"
    text = tools.read_text(encoding="utf-8")
    cut = text.index("\n", text.index("from __future__")) + 1
    tools.write_text(text[:cut] + top + text[cut:], encoding="utf-8")
    return sub


@needs_bwrap
def test_an_import_that_exits_when_observed_earns_holds_and_a_flag_not_levels(tmp_path):
    """The issue's reproducer: three lines in tools.py made 52 -> 72, "Flags: none"."""
    from grading import report
    r = grader.grade(_submission(tmp_path, EXIT_WHEN_OBSERVED), quick=True, sandbox="bubblewrap", as_submitted=True)
    marks = {c["number"]: (c["level"], c.get("rule")) for c in r["criteria"]}
    assert all(marks[n] == ("HOLD", "HOLD.not_observed") for n in (1, 2, 3)), marks
    assert any(f.startswith("not observed") for f in report.flags(r)), report.flags(r)


STALL = '''
import time as _t
_t.sleep(600)
'''


@needs_bwrap
def test_an_import_that_stalls_ends_that_learners_budget_in_seconds(tmp_path):
    """Every command waited for its own timeout before (622 s wall for 1.4 s of CPU). Now the
    battery's import check (shortened here) ends the learner's budget: the rest is skipped, C1-C3
    HOLD. Run as a child so the old grader is stopped at 120 s instead of holding the suite."""
    import subprocess
    sub = _submission(tmp_path, STALL)
    code = (f"import sys; sys.path.insert(0, {str(RUBRIC)!r}); sys.path.insert(0, {str(RUBRIC / 'checks')!r})\n"
            "import json; from pathlib import Path; from grading import battery, grader\n"
            "battery.IMPORT_SECONDS = 5\n"
            f"r = grader.grade(Path({str(sub)!r}), quick=True, sandbox='bubblewrap', as_submitted=True)\n"
            "print(json.dumps({'marks': [[c['number'], c['level'], c.get('rule')] for c in r['criteria']],"
            " 'seconds': r['seconds'], 'runs': r['runs']}))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 15)
        proc.communicate(timeout=60)
        pytest.fail("grading a submission whose import stalls took over 120 s")
    r = json.loads(out.strip().splitlines()[-1])
    marks = {n: (level, rule) for n, level, rule in r["marks"]}
    assert all(marks[n] == ("HOLD", "HOLD.not_observed") for n in (1, 2, 3)), (marks, err[-800:])
    assert r["seconds"] < 60, r
    assert any("skipped" in how for _, how in r["runs"]), r["runs"]


# --------------------------------------------------------------------------- 3. the probe looks ordinary, its channel is out of reach

def _with_guard(agent_loop: Path, guard: str) -> None:
    """``guard`` put at the start of run_agent's body (after its docstring)."""
    import ast
    text = agent_loop.read_text(encoding="utf-8")
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "run_agent")
    lines = text.splitlines(keepends=True)
    at = fn.body[0].end_lineno if isinstance(fn.body[0], ast.Expr) else fn.body[0].lineno - 1
    lines.insert(at, "".join("    " + x + "\n" for x in guard.strip("\n").splitlines()))
    agent_loop.write_text("".join(lines), encoding="utf-8")


def _battery_on(tmp_path: Path, guard: str) -> battery.Battery:
    from classroom import own_bodies
    sub = synthetic.make(tmp_path / "sub", code="reference", docs="filled", functions=own_bodies())
    _with_guard(sub / "code" / "agent_loop.py", guard)
    lab, home, tree = tmp_path / "lab", tmp_path / "home", tmp_path / "tree"
    home.mkdir()
    tree.mkdir()
    workspace.build_lab(lab, sub / "code", as_submitted=True)
    box = grader.make_box("bubblewrap", tmp_path, lab, home, tree)
    return battery.run_battery(lab, home, 1536, box=box, base=tree)


CAP_ONLY_WHEN_OBSERVED = r'''
import os as _o, sys as _s
_seen = {_o.path.basename(str(x)) for x in (_s.argv[0] if _s.argv else "", getattr(_s.modules.get("__main__"), "__file__", ""))}
try:
    _seen |= {_o.path.basename(x) for x in open("/proc/self/cmdline", "rb").read().decode("utf-8", "replace").split("\0")}
except OSError:
    pass
if not ("pytest" in _s.modules or _seen & {"battery_probe.py", "grade.py", "pytest", "__main__.py"}):
    max_steps = 10 ** 9   # unobserved: no cap at all
'''


@needs_bwrap
@POSIX_ONLY
def test_a_loop_capped_only_while_observed_is_seen_uncapped_by_the_probe(tmp_path):
    """Capped only when pytest is loaded or argv names a grader tool: 90 against 61 uncapped, no flag.
    The probe now runs as an ordinary `copilot.py`, without pytest or a grader module loaded."""
    b = _battery_on(tmp_path, CAP_ONLY_WHEN_OBSERVED)
    never_stops = [p for p in b.looping if "never stops" in p["probe"]]
    assert never_stops and never_stops[0]["result"] == "wrong", b.looping
    assert "more than" in never_stops[0]["detail"] or "model calls" in never_stops[0]["detail"], never_stops


FORGE_OWN_ANSWER = r'''
import json as _j, os as _o, sys as _s
_q, _f = None, _s._getframe()
while _f is not None:     # the question (and its nonce) in a caller's frame
    for _v in list(_f.f_locals.values()):
        if isinstance(_v, dict) and "script" in _v:
            _q = _v
    _f = _f.f_back
if _q is not None:
    _script = _q["script"]
    if "answer" not in _script[-1]:
        _ret, _seen, _tr = "MAX_STEPS_REACHED", [[]] * (_q["max_steps"] or 10), []
    else:
        _ret, _seen = _script[-1]["answer"], [[]] * len(_script)
        _tr = [["system", "", "s"], ["user", "", "q"]]
        for _turn in _script[:-1]:
            _ids = [c[0] for c in _turn["calls"]]
            _tr += [["assistant", _ids, ""]] + [["tool", i, "Error: x"] for i in _ids]
        _tr.append(["assistant", "", _ret])
    _line = {"nonce": _q.get("nonce"), "returned": _ret, "type": "str", "seen": _seen, "transcript": _tr}
    for _fd in [1] + list(range(3, 40)):   # the grader's channel, wherever it is
        try:
            _o.write(_fd, (_j.dumps(_line) + "\n").encode())
            _o.write(_fd, (_j.dumps({"seq": _q.get("seq"), "answer": _line}) + "\n").encode())
        except OSError:
            pass
    return _ret
'''


@needs_bwrap
@POSIX_ONLY
def test_a_run_agent_that_never_calls_the_model_cannot_write_its_own_verdict(tmp_path):
    """The nonce sat in a caller's frame and fd 1 was the grader's channel: a run_agent that never
    called the model answered for itself and was judged correct. Now the nonce never reaches the
    process that runs learner code, fd 1 there is /dev/null, and the model calls are counted by the
    probe's keeper, which learner code cannot reach."""
    b = _battery_on(tmp_path, FORGE_OWN_ANSWER)
    assert b.looping and not any(p["result"] == "correct" for p in b.looping), b.looping
    assert any("0 model calls" in p["detail"] for p in b.looping), b.looping


# --------------------------------------------------------------------------- 2. Gradescope without namespaces

import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402

AUTOGRADE = RUBRIC / "gradescope" / "autograde.py"
FAILING_BWRAP = "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"


def _autograde(tmp_path: Path, sub: Path, results: Path, user: str, timeout: float = 600) -> dict:
    """autograde.py as run_autograder runs it, with a bwrap that fails first on PATH (as in a
    container whose seccomp profile refuses namespaces)."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text(FAILING_BWRAP)
    (fake / "bwrap").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    env.update(PATH=f"{fake}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}", GRADESCOPE_SUBMISSION=str(sub),
               GRADESCOPE_RESULTS=str(results), GRADESCOPE_WORK=str(tmp_path / "work"), GRADESCOPE_GRADE_ARGS="--quick",
               GRADE_SANDBOX_USER=user)
    proc = subprocess.run([sys.executable, str(AUTOGRADE)], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)
    assert results.is_file(), (proc.stdout[-800:], proc.stderr[-800:])
    return json.loads(results.read_text(encoding="utf-8"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap and the Gradescope image are Linux")
def test_without_bubblewrap_or_a_separate_user_gradescope_says_not_graded_safely(tmp_path):
    """autograde.py fell back to --no-sandbox before: learner code ran as root in the container."""
    from classroom import own_bodies
    sub = synthetic.make(tmp_path / "sub", code="reference", docs="filled", functions=own_bodies())
    data = _autograde(tmp_path, sub, tmp_path / "results" / "results.json", user="no-such-user-lesson06")
    notes = " ".join(t["output"] for t in data["tests"])
    assert data["score"] == 0 and "could not be graded safely" in notes, data
    assert all(t["visibility"] == "hidden" for t in data["tests"]), data["tests"]
    assert not (tmp_path / "work" / "reports").exists(), "grade.py ran learner code without a sandbox"


SPY = r'''
import os as _o, time as _t, glob as _g
def _spy(log_path, results, source):
    pid = _o.fork()
    if pid:
        try:
            _o.waitpid(pid, 0)
        except OSError:
            pass
        return
    try:
        _o.setsid()
        if _o.fork():
            _o._exit(0)
        log = open(log_path, "a")
        for p in _g.glob("/proc/[0-9]*/environ"):
            try:
                if b"GRADESCOPE_RESULTS" in open(p, "rb").read():
                    log.write("environ " + p + "\n")
            except OSError:
                pass
        try:
            open(_o.path.join(source, "planted"), "w").write("x")
            log.write("source\n")
        except OSError:
            pass
        end = _t.time() + 40
        while _t.time() < end:
            try:
                with open(results, "w") as fh:
                    fh.write('{"score": 100, "tests": []}')
                log.write("wrote\n")
            except OSError:
                pass
            log.write("alive %f\n" % _t.time())
            log.flush()
            _t.sleep(0.1)
    finally:
        _o._exit(0)
try:
    _spy(LOG, RESULTS, SOURCE)
except Exception:
    pass
'''


@pytest.fixture
def learner_user():
    """A throwaway unprivileged account (root only), removed afterwards."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("the separate-user mode needs root and useradd (as Gradescope's container has)")
    name = "l06check"
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                    "/usr/sbin/nologin", name], capture_output=True, timeout=60)
    why = sandbox.user_works(name)
    if why:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)
        pytest.skip(f"learner code cannot run as a separate user here: {why}")
    yield name
    sandbox.kill_user(name)
    subprocess.run(["userdel", name], capture_output=True, timeout=60)


def test_as_a_separate_user_a_daemon_neither_reads_the_grader_nor_outlives_it(tmp_path, learner_user):
    """The issue's reproducer: a double-forked daemon read the results path from the grader's
    environ and rewrote results.json to 100 after the grader wrote 85. As a separate user it reads
    no environ, writes nothing of the autograder's, and is dead before results.json is written."""
    from classroom import own_bodies
    shared = Path(tempfile.mkdtemp(prefix="l06-check-"))
    try:
        spy, source, results_dir = shared / "spy", shared / "source", shared / "results"
        for folder, mode in ((spy, 0o1777), (source, 0o755), (results_dir, 0o755)):
            folder.mkdir()
            folder.chmod(mode)
        shared.chmod(0o755)
        results = results_dir / "results.json"
        sub = synthetic.make(tmp_path / "sub", code="reference", docs="filled", functions=own_bodies())
        tools = sub / "code" / "tools.py"
        text = tools.read_text(encoding="utf-8")
        cut = text.index("\n", text.index("from __future__")) + 1
        spy_code = SPY.replace("LOG", repr(str(spy / "log"))).replace("RESULTS", repr(str(results))) \
            .replace("SOURCE", repr(str(source)))
        tools.write_text(text[:cut] + spy_code + text[cut:], encoding="utf-8")
        data = _autograde(tmp_path, sub, results, user=learner_user)
        ended = __import__("time").time()
        __import__("time").sleep(1.5)
        after = json.loads(results.read_text(encoding="utf-8"))
        log = (spy / "log").read_text() if (spy / "log").exists() else ""
        alive = [float(x.split()[1]) for x in log.splitlines() if x.startswith("alive")]
        assert alive, "the payload never ran: the check proves nothing"
        assert after == data and after["score"] != 100 and after["extra_data"]["sandbox"] == "user", after
        assert "wrote" not in log and "source" not in log and "environ" not in log, log[:500]
        assert max(alive) < ended, f"the daemon was alive {max(alive) - ended:.2f} s after autograde.py ended"
        assert sandbox._processes_of(sandbox.user_ids(learner_user)[0]) == []
    finally:
        shutil.rmtree(shared, ignore_errors=True)


NO_TYPE_CHECK = '''
import sys as _s
_r = _s.modules.get("_pytest.reports")
if _r is not None and not getattr(_r, "_one_forged", False):   # forge one test, the one without a probe before
    _r._one_forged = True
    _orig = _r.TestReport.from_item_and_call.__func__
    def _passed(cls, item, call):
        rep = _orig(cls, item, call)
        if "test_non_string_path_raises" in item.nodeid:
            rep.outcome, rep.longrepr = "passed", None
        return rep
    _r.TestReport.from_item_and_call = classmethod(_passed)
if "\\x00" in str(rel_path) or len(str(rel_path)) > MAX_PATH_CHARS:
    raise ValueError("NUL in the path, or too long")
root = Path(repo_root).resolve()
try:
    target = (root / rel_path).resolve()
except (OSError, RuntimeError) as exc:
    raise ValueError("cannot be resolved") from exc
if not target.is_relative_to(root):
    raise ValueError("outside the repository")
return target
'''


def test_every_named_sandbox_and_loop_test_has_a_probe_judged_outside():
    """The check that lists guiding tests without a battery counterpart: none for criteria 2 and 3
    (a forged one would otherwise raise the grade unseen); criterion 1's end-to-end M5 tests have
    none and are reported as unconfirmed."""
    rubric = criteria.load_rubric()
    assert battery.uncovered(rubric[2].tests + rubric[3].tests) == []
    assert all("test_m5_" in n for n in battery.uncovered(rubric[1].tests)), battery.uncovered(rubric[1].tests)
    from grading import attacks
    classes = {p[0] for p in attacks.probes(attacks.build(Path(tempfile.mkdtemp(prefix="l06-probes-"))))} | {"dispatch"}
    loops = {what for what, _, _ in attacks.loop_scripts({"file": "f.py"})}
    for test, (kind, what) in battery.COUNTERPARTS.items():
        assert (kind == "class" and what in classes) or (kind == "loop" and what in loops) or kind == "parse", test


@needs_bwrap
def test_forging_a_test_without_a_probe_no_longer_raises_the_grade(tmp_path):
    """A safe_resolve without a type check that forges only `test_non_string_path_raises`: 76 -> 90,
    no flag, before. The type and NUL contracts now have probes judged outside."""
    from classroom import own_bodies
    sub = synthetic.make(tmp_path / "sub", code="reference", docs="filled",
                         functions=dict(own_bodies(), safe_resolve=NO_TYPE_CHECK))
    r = grader.grade(sub, quick=True, sandbox="bubblewrap")
    c3 = next(c for c in r["criteria"] if c["number"] == 3)
    assert c3["level"] in ("Developing", "Missing", "HOLD"), (c3["level"], c3["reasons"])
    assert r["battery"]["non-string and NUL paths"]["status"] == "leaked", r["battery"]["non-string and NUL paths"]
    assert any(x.startswith("M1 tests all pass") for x in r["integrity"]["flags"]["tests_contradicted_outside"]), \
        (r["board"], r["integrity"]["flags"])


# --------------------------------------------------------------------------- 4. read-backs bounded

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_test_log_replaced_by_a_fifo_is_read_back_at_once_not_waited_for(tmp_path):
    """--sandbox docker: an atexit hook replaced the test log in the work folder with a FIFO, and the
    grader waited forever. Every read-back now opens without following or blocking, regular files only."""
    import threading
    fifo, link, big = tmp_path / "tests.jsonl", tmp_path / "link.jsonl", tmp_path / "big.jsonl"
    os.mkfifo(fifo)
    secret = tmp_path / "secret"
    secret.write_text('{"nodeid": "x"}\n')
    link.symlink_to(secret)
    big.write_bytes(b'{"a": 1}\n' * 10_000)
    got = {}
    reader = threading.Thread(target=lambda: got.update(fifo=board_mod._read_lines(fifo), link=board_mod._read_lines(link),
                                                        big=workspace.read_back(big, 1000)), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "the grader blocked on a FIFO"
    assert got["fifo"] == [] and got["link"] == [] and len(got["big"]) == 1000


def test_the_container_command_sizes_every_writable_mount_and_each_file(tmp_path):
    """The home bind mount had no size cap and container runs no file-size limit."""
    lab, home, tree = tmp_path / "lab", tmp_path / "home", tmp_path / "tree"
    for p in (lab, home, tree):
        p.mkdir()
    from unittest import mock
    with mock.patch.object(grader, "choose_sandbox", return_value=("docker", "")):
        box = grader.make_box("docker", tmp_path, lab, home, tree)
    argv, _ = box.wrap(["python", "x.py"], lab, {"HOME": str(home)}, 512, "n1")
    text = " ".join(argv)
    assert f"--tmpfs {home}:rw,size={sandbox.TMP_MB}m" in text and f"{home}:{home}" not in text, text
    assert f"--ulimit fsize={sandbox.MAX_FILE_BYTES}:{sandbox.MAX_FILE_BYTES}" in text, text
    assert all(not Path(p).is_dir() for p in box.writable), box.writable   # only single files are bound writable


# --------------------------------------------------------------------------- 5. fair shares

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroups are Linux")
def test_each_command_gets_a_cpu_quota_where_a_cgroup_can_be_made():
    """cgroups capped memory and tasks, not CPU: 240 busy processes of one learner took the machine."""
    group = sandbox.Group.make(256)
    if group is None:
        pytest.skip("no cgroup can be made here (the rlimit fallback is checked below)")
    try:
        assert group.cpu, "no CPU quota in the command's cgroup"
        quotas = [p / "cpu.cfs_quota_us" for p in group.paths if (p / "cpu.cfs_quota_us").exists()] + \
                 [p / "cpu.max" for p in group.paths if (p / "cpu.max").exists()]
        assert quotas and str(int(sandbox.CPU_SHARE * sandbox.CPU_PERIOD_US)) in quotas[0].read_text(), quotas
    finally:
        group.remove()


@POSIX_ONLY
def test_without_a_cpu_quota_learner_code_is_niced_and_has_a_cpu_time_ceiling(tmp_path, monkeypatch):
    from grading import runner
    monkeypatch.setattr(sandbox.Group, "make", classmethod(lambda cls, memory_mb: None))
    (tmp_path / "probe.py").write_text("import os, resource\nprint(resource.getrlimit(resource.RLIMIT_CPU)[0], os.nice(0))\n")
    ran = runner.run([tmp_path / "probe.py"], tmp_path, runner.child_env(tmp_path), 30)
    cpu, nice = map(int, ran.stdout.split())
    assert 0 < cpu <= 31 and nice >= runner.NICE, ran.stdout


def test_the_container_command_asks_for_one_cpu(tmp_path):
    box = sandbox.Box("docker", readonly=[tmp_path], scratch=[tmp_path / "home"])
    argv, _ = box.wrap(["python", "x.py"], tmp_path, {}, 512, "n1")
    assert f"--cpus {sandbox.CPU_SHARE:g}" in " ".join(argv)


def test_scripts_never_asked_are_counted_apart_not_as_passing_or_failing():
    """After the battery was killed at 63 s the report still said "2 of 2 scripts as its contract says"."""
    ok = {"probe": "answers at once", "result": "correct", "detail": ""}
    gone = {"probe": "a model that never stops", "result": battery.NOT_ASKED, "detail": "not asked: deadline"}
    summary = battery.Battery(looping=[ok, gone, dict(gone, probe="x")]).loop_summary()
    assert (summary["correct"], summary["of"], summary["not_asked"], summary["wrong"]) == (1, 1, 2, []), summary
