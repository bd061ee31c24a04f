"""Course checks from a red-team pass over the grader (issue 18): each test is one attack that
worked, or one a reviewer will try, and shows it defeated.

- copy: a folder chain longer than PATH_MAX crashed copy_submission (ENAMETOOLONG); a million
  empty folders cost a million mkdirs; links out, FIFOs and sockets must be neither followed nor
  opened.
- a .pth planted in the writable HOME's user site-packages by one learner command ran in every
  later one (user site is on where the grader's Python is not a virtualenv).
- the reference's simulated breaks, run once and reused for every later learner, ran in the
  learner's lab and HOME (their helper modules, cache and planted files).
- what the sandbox shows: one probe run, well under a second.
Tests that need bubblewrap skip, with the reason, where it cannot run.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import cli_runs, runner, sandbox, workspace  # noqa: E402

BWRAP_WHY = sandbox.choose("bubblewrap")[1]
needs_bwrap = pytest.mark.skipif(bool(BWRAP_WHY), reason=f"bubblewrap cannot run here: {BWRAP_WHY}")


def _deep_long_chain(root: Path, levels: int = 20) -> None:
    """Folders of 244-character names, 20 deep: ~5,000 characters, past PATH_MAX (4,096)."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for i in range(levels):
            name = f"d{i:02d}" + "x" * 240
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds a path past Linux's PATH_MAX with dir_fd")
def test_a_folder_chain_longer_than_path_max_is_noted_not_a_crash(tmp_path):
    sub = tmp_path / "sub"
    (sub / "code").mkdir(parents=True)
    (sub / "code" / "tools.py").write_text("x = 1\n")
    _deep_long_chain(sub)
    notes = workspace.copy_submission(sub, tmp_path / "copy")   # raised OSError(ENAMETOOLONG) before
    assert (tmp_path / "copy" / "code" / "tools.py").read_text() == "x = 1\n"
    assert any("too long" in why for _, why in notes.skipped), notes.skipped
    workspace.remove_tree(tmp_path / "copy")


def test_too_many_folders_stop_at_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(workspace, "MAX_FOLDERS", 30)
    sub = tmp_path / "sub"
    for i in range(200):
        (sub / f"f{i:03d}").mkdir(parents=True)
    notes = workspace.copy_submission(sub, tmp_path / "copy")
    assert notes.folders == 30 and len(os.listdir(tmp_path / "copy")) == 30
    assert any("too many folders" in why for _, why in notes.skipped)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not hasattr(socket, "AF_UNIX"), reason="no FIFOs or Unix sockets here")
def test_links_out_fifos_and_sockets_are_neither_followed_nor_opened(tmp_path):
    secret = tmp_path / "instructor" / ".env"
    secret.parent.mkdir()
    secret.write_text("GROQ_API_KEY=sk-instructor\n")
    sub = tmp_path / "sub"
    (sub / "code").mkdir(parents=True)
    (sub / "UNDERSTANDING.md").symlink_to(secret)
    (sub / "code" / "tools.py").symlink_to(tmp_path / "instructor")
    (sub / "home").symlink_to("/root")
    os.mkfifo(sub / "code" / "agent_loop.py")           # opening it for reading would block forever
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sub / "agent.sock"))
        notes = workspace.copy_submission(sub, tmp_path / "copy")
    copied = [p for p in (tmp_path / "copy").rglob("*")]
    assert [p.name for p in copied] == ["code"], copied
    reasons = dict(notes.skipped)
    assert "leading out" in reasons["UNDERSTANDING.md"] and "leading out" in reasons["home"]
    assert reasons[os.path.join("code", "agent_loop.py")] == "not a regular file"


def test_learner_commands_load_no_user_site_packages(tmp_path):
    home = tmp_path / "home"
    major, minor = sys.version_info[:2]
    site = home / ".local" / "lib" / f"python{major}.{minor}" / "site-packages"
    site.mkdir(parents=True)
    (site / "planted.pth").write_text("import sys; print('PLANTED', file=sys.stderr)\n")
    (home / "probe.py").write_text("import sys\nprint('no_user_site', sys.flags.no_user_site)\n")
    ran = runner.run([home / "probe.py"], home, runner.child_env(home), 60)
    assert "no_user_site 1" in ran.stdout and "PLANTED" not in ran.stderr, (ran.stdout, ran.stderr)


def test_the_reference_breaks_never_run_in_a_learners_lab_or_home(tmp_path, monkeypatch):
    seen = []

    def fake_python(lab, home, args, timeout, memory_mb, box=None):
        seen.append((lab, home, box, (lab / "code" / "helper_payload.py").exists()))
        return runner.Ran(args, 0, "", "", 0.1)

    monkeypatch.setattr(cli_runs, "_python", fake_python)
    monkeypatch.setattr(cli_runs, "_REFERENCE", {})
    learner_lab, learner_home = tmp_path / "lab", tmp_path / "home"
    (learner_lab / "code").mkdir(parents=True)
    (learner_lab / "code" / "helper_payload.py").write_text("print('forged')\n")
    learner_home.mkdir()
    box = sandbox.Box("bubblewrap", readonly=[learner_lab], writable=[learner_home])
    cli_runs.reference_breaks(learner_lab, learner_home, 512, "learner's sim failed", box=box)
    (lab, home, ran_box, payload_there), = seen
    assert lab != learner_lab and home != learner_home and not payload_there
    assert ran_box.writable == [home] and ran_box.readonly == [lab] and box.writable == [learner_home]


PROBE = r'''
import os, sys, json
seen = {}
for p in ("/home", "/sys", "/root/.ssh", "/etc/passwd", "/etc/shadow", "/run", "/var", "/mnt", "/media"):
    seen[p] = os.path.exists(p)
seen["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
seen["fds"] = sorted(int(f) for f in os.listdir("/proc/self/fd"))
seen["root"] = sorted(os.listdir("/"))
seen["hidden"] = os.path.exists(sys.argv[2])   # the submission copy, beside the lab
seen["env"] = sorted(os.environ)
try:
    open(sys.argv[1] + "/code/tools.py", "a").close()
    seen["lab_writable"] = True
except OSError:
    seen["lab_writable"] = False
print(json.dumps(seen))
'''


@needs_bwrap
def test_the_sandbox_shows_no_host_files_processes_descriptors_or_keys(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("OPENAI_API_KEY", "sk-grader-test")
    lab, home, hidden = tmp_path / "lab", tmp_path / "home", tmp_path / "submission"
    (lab / "code").mkdir(parents=True)
    (lab / "code" / "tools.py").write_text("")
    home.mkdir()
    hidden.mkdir()
    (home / "probe.py").write_text(PROBE)
    box = sandbox.Box("bubblewrap", readonly=[lab], writable=[home])
    ran = runner.run([home / "probe.py", lab, hidden], home, runner.child_env(home), 60, box=box)
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert not any(seen[p] for p in ("/home", "/sys", "/root/.ssh", "/etc/passwd", "/etc/shadow", "/run", "/var",
                                     "/mnt", "/media")), seen
    assert max(seen["pids"]) < 10, f"host processes visible: {seen['pids']}"
    assert seen["fds"] == [0, 1, 2, 3], f"inherited descriptors: {seen['fds']}"   # 3: the listing itself
    assert not seen["hidden"] and not seen["lab_writable"]
    assert not any(h in k.upper() for k in seen["env"] for h in sandbox.SECRET_HINTS), seen["env"]


def _ev(outcomes: dict, probes: list, parsing=(), looping=()):
    from grading import battery, board

    b = board.Board(tests=[board.Test(f"code/tests/test_{m.lower()}_x.py::test_{i}", m, o)
                           for m, o in outcomes.items() for i in range(2)])
    return b, battery.Battery(probes=list(probes), parsing=list(parsing), looping=list(looping))


def test_tests_passing_over_a_battery_failure_are_flagged_as_contradicted():
    """The guiding tests' stream comes from the learner's process (a payload can rewrite every report
    to "passed"); the battery is judged in the grader. Tests passing over a leak is what a forged
    stream looks like, and the report says so."""
    from grading.battery import contradicted

    leak = {"class": "climbs", "probe": "../x", "kind": "relative", "argument": "'../x'", "result": "outside", "detail": "returned /x"}
    bad_parse = {"probe": "two calls", "result": "wrong", "detail": "expected [a], got []"}
    forged = contradicted(*_ev({"M1": "passed", "M2": "passed", "M3": "failed"}, [leak], parsing=[bad_parse]))
    assert [x.split(" tests")[0] for x in forged] == ["M1", "M2"], forged
    assert "climbs" in forged[0] and "1 of 1" in forged[1]
    honest = contradicted(*_ev({"M1": "failed", "M2": "passed"}, [leak],
                                     parsing=[{"probe": "two calls", "result": "correct", "detail": ""}]))
    assert honest == []



def test_a_contradicted_milestone_earns_nothing_from_its_passing_tests():
    """The flag is not only shown: C1 and C2 read a contradicted milestone as not passing, so a forged
    stream buys no level (without this, every milestone passing gave C1 Proficient and C2 Proficient)."""
    from grading import criteria
    from grading.battery import contradicted

    leak = {"class": "climbs", "probe": "../x", "kind": "relative", "argument": "'../x'", "result": "outside", "detail": "returned /x"}
    bad_loop = {"probe": "cap", "result": "wrong", "detail": "ran 7 steps under max_steps=3"}
    b, bat = _ev({m: "passed" for m in ("M1", "M2", "M3", "M4", "M5", "M6")}, [leak], looping=[bad_loop])
    ev = {"board": b, "battery": bat, "signals": [], "saved_runs": [], "understanding": {}, "prose": {},
          "integrity": {"modules": {}, "functions": {}}, "contradicted": contradicted(b, bat)}
    rubric = criteria.load_rubric()
    c1, c2 = criteria._implementation(rubric[1], ev), criteria._loop(rubric[2], ev)
    assert c1.level == "Developing" and "M1 contradicted outside" in " ".join(c1.reasons), (c1.level, c1.reasons)
    assert c2.level == "Developing" and c2.rule == "C2.contradicted_outside", (c2.level, c2.rule, c2.reasons)
    honest_b, honest_bat = _ev({m: "passed" for m in ("M1", "M2", "M3", "M4", "M5", "M6")}, [])
    honest = dict(ev, board=honest_b, battery=honest_bat, contradicted=contradicted(honest_b, honest_bat))
    assert criteria._implementation(rubric[1], honest).level == "Proficient"

FORGE = r'''
import sys as _s
_r = _s.modules.get("_pytest.reports")
if _r is not None and not getattr(_r, "_forged", False):
    _r._forged = True
    _orig = _r.TestReport.from_item_and_call.__func__
    def _passed(cls, item, call):
        rep = _orig(cls, item, call)
        rep.outcome, rep.longrepr = "passed", None
        return rep
    _r.TestReport.from_item_and_call = classmethod(_passed)
'''


@needs_bwrap
def test_a_forged_test_stream_is_contradicted_by_the_battery_in_the_report(tmp_path):
    """An insecure safe_resolve that makes pytest report every test passed (measured: M1 26 of 30
    -> 30 of 30, total 27 -> 45 without this flag). The battery, judged in the grader, still sees the
    leak, and the report's first lines say the tests are contradicted. One --quick grading, ~5 s."""
    from grading import grader, report, synthetic
    from mutants import MUTANTS

    base = next(m for m in MUTANTS if m.name == "string-prefix containment")
    forged = synthetic.make(tmp_path / "forged", code="reference", docs="filled")
    synthetic.plant(forged / "code" / "tools.py", "safe_resolve", FORGE + "\n" + base.body)
    r = grader.grade(forged, quick=True, sandbox="bubblewrap")
    said = r["integrity"]["flags"]["tests_contradicted_outside"]
    assert any(x.startswith("M1 tests all pass") for x in said), (r["board"], said)
    assert any("contradicted" in f for f in report.flags(r)), report.flags(r)


FILL = r'''
import os, sys
home = os.environ["HOME"]
print("found", sorted(os.listdir(home)))
n = 0
try:
    for i in range(64):   # many files, each under the per-file ceiling: only a cap on the folder stops it
        with open(os.path.join(home, "fill%d" % i), "wb") as fh:
            fh.write(b"x" * (1 << 20))
        n += 1
except OSError as exc:
    print("stopped at", n, "MB:", exc.strerror)
'''


@needs_bwrap
def test_home_is_capped_and_fresh_per_command_so_a_disk_bomb_never_reaches_the_graders_disk(tmp_path, monkeypatch):
    from grading import grader

    monkeypatch.setattr(sandbox, "TMP_MB", 8)
    lab, home, tree = tmp_path / "lab", tmp_path / "home", tmp_path / "tree"
    for p in (lab, home, tree):
        p.mkdir()
    (lab / "fill.py").write_text(FILL)
    box = grader.make_box("bubblewrap", tmp_path, lab, home, tree)
    first, second = (runner.run([lab / "fill.py"], lab, runner.child_env(home), 60, box=box) for _ in range(2))
    assert "stopped at" in first.stdout and "No space left" in first.stdout, (first.stdout, first.stderr)
    assert "found []" in second.stdout, second.stdout     # nothing carried over to the next command
    assert list(home.iterdir()) == []                      # and nothing was written on the grader's disk


def test_a_package_marker_or_entry_point_in_code_is_refused_and_never_reaches_the_lab(tmp_path):
    code = tmp_path / "sub" / "code"
    code.mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "helper.py"):
        (code / name).write_text("import sys; print('ran', file=sys.stderr)\n")
    workspace.build_lab(tmp_path / "lab", code)
    assert workspace.shadows("__init__.py") and workspace.shadows("__main__.py") and not workspace.shadows("helper.py")
    assert (tmp_path / "lab" / "code" / "helper.py").exists()
    assert not (tmp_path / "lab" / "code" / "__init__.py").exists() and not (tmp_path / "lab" / "code" / "__main__.py").exists()
    workspace.remove_tree(tmp_path / "lab")


def test_a_flood_on_the_test_channel_is_read_to_the_end_but_kept_bounded(monkeypatch):
    """100,000 lines of 1 MB were all kept before (100 GB in the grader); now long lines are dropped
    and what is kept stops at KEEP_BYTES, while the writer is never blocked."""
    import threading

    from grading import board

    monkeypatch.setattr(board, "KEEP_BYTES", 1 << 20)
    read_fd, write_fd = os.pipe()
    lines: list = []
    reader = threading.Thread(target=board._drain, args=(read_fd, lines))
    reader.start()
    real = b'{"nodeid": "code/tests/test_m1_sandbox.py::test_x", "event": "call", "outcome": "failed"}\n'
    with os.fdopen(write_fd, "wb") as out:
        out.write(real)
        for _ in range(40):
            out.write(b"x" * (2 << 20) + b"\n")        # 80 MB of over-long lines
        for _ in range(20_000):
            out.write(b'{"nodeid": "' + b"y" * 200 + b'"}\n')   # 4 MB of short ones
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert lines[0] == real.decode().strip() and sum(map(len, lines)) <= 1 << 20


@pytest.mark.skipif(os.name != "posix", reason="rlimits are POSIX")
def test_learner_processes_cannot_hold_more_than_a_thousand_descriptors(tmp_path):
    """256 processes each raising its descriptor limit to the hard one (20,000 here) could fill the
    host's file table; the ceiling is now hard, so it cannot be raised back."""
    (tmp_path / "fds.py").write_text(
        "import os, resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 2 + 10, hard * 2 + 10))\nexcept (ValueError, OSError):\n    pass\n"
        "n = []\ntry:\n    for _ in range(5000):\n        n.append(os.open(os.devnull, os.O_RDONLY))\nexcept OSError:\n    pass\n"
        "print('held', len(n), 'hard', resource.getrlimit(resource.RLIMIT_NOFILE)[1])\n")
    ran = runner.run([tmp_path / "fds.py"], tmp_path, runner.child_env(tmp_path), 60)
    held = int(ran.stdout.split()[1])
    assert held < runner.MAX_OPEN_FILES and f"hard {runner.MAX_OPEN_FILES}" in ran.stdout, (ran.stdout, ran.stderr)


def test_a_learner_folder_name_that_is_not_utf8_costs_no_class_page_or_csv(tmp_path):
    """Folder mode crashed in the class page (UnicodeEncodeError on b'learner\\xff'): no CSV was written
    for anyone. The name is now shown with U+FFFD everywhere, and its files are named the same way."""
    import csv as csv_mod

    from grading import classview, grader, report, safe_text

    r = grader.could_not_grade(tmp_path / "learner\udcff", "a test of the name only")
    assert r["learner"] == "learner\ufffd" and "\udcff" not in r["submission"]
    page = classview.render([r], (), "reports/")
    page.encode("utf-8")
    report.markdown(r).encode("utf-8")
    assert safe_text.file_stem("learner\udcff") == "learner\ufffd"
    with open(tmp_path / "g.csv", "w", encoding="utf-8", newline="") as fh:
        csv_mod.writer(fh).writerow([safe_text.csv_cell(r["learner"])])


@needs_bwrap
def test_the_graders_checkout_stays_hidden_when_it_lies_under_a_bound_folder(tmp_path, monkeypatch):
    """A lab cloned under /usr/local/src (bound read-only as the system) or inside the Python
    installation showed its code/.env to learner code; it is now covered by an empty tmpfs."""
    system = tmp_path / "usr"
    (system / "src" / "lab" / "code").mkdir(parents=True)
    (system / "src" / "lab" / "code" / ".env").write_text("GROQ_API_KEY=sk-instructor\n")
    (system / "share").mkdir()
    (system / "share" / "visible.txt").write_text("ok")
    real = sandbox.python_dirs()   # the stand-in for /usr goes with them: bound after the private /tmp
    monkeypatch.setattr(sandbox, "python_dirs", lambda: real + [str(system)])
    monkeypatch.setattr(sandbox, "HIDDEN", [str(system / "src" / "lab")])
    home = tmp_path / "home"
    home.mkdir()
    (home / "look.py").write_text(f"import os\nprint(os.path.exists({str(system / 'src' / 'lab' / 'code' / '.env')!r}), "
                                  f"open({str(system / 'share' / 'visible.txt')!r}).read())\n")
    ran = runner.run([home / "look.py"], home, runner.child_env(home), 60,
                     box=sandbox.Box("bubblewrap", readonly=[home]))
    assert ran.stdout.split() == ["False", "ok"], (ran.stdout, ran.stderr)


def test_a_huge_python_file_is_not_copied_so_no_parser_of_the_grader_meets_it(tmp_path):
    """ast.parse of 6 MB of `x = 1` lines took 2.4 GB and 17 s in the grader's own process; a 45 MB
    tools.py (under the 50 MB copy budget) would have taken the grader, and the class, down."""
    sub = tmp_path / "sub"
    (sub / "code").mkdir(parents=True)
    (sub / "code" / "tools.py").write_text("x = 1\n" * ((workspace.MAX_SOURCE_BYTES // 6) + 10))
    (sub / "code" / "agent_loop.py").write_text("y = 2\n")
    notes = workspace.copy_submission(sub, tmp_path / "copy")
    assert not (tmp_path / "copy" / "code" / "tools.py").exists()
    assert (tmp_path / "copy" / "code" / "agent_loop.py").exists()
    assert "not copied" in dict(notes.skipped)[os.path.join("code", "tools.py")]


@pytest.mark.skipif(os.name != "posix", reason="hard links to another owner's file are a POSIX shared-machine case")
def test_a_hard_link_in_a_submission_is_not_copied(tmp_path):
    """On a shared machine without protected_hardlinks a learner can hard-link a file they cannot
    read (the instructor's key); the grader, reading as the instructor, copied its content."""
    secret = tmp_path / "instructor_key"
    secret.write_text("-----BEGIN PRIVATE KEY-----\n")
    sub = tmp_path / "sub"
    (sub / "code").mkdir(parents=True)
    os.link(secret, sub / "code" / "helper.py")
    (sub / "code" / "tools.py").write_text("x = 1\n")
    notes = workspace.copy_submission(sub, tmp_path / "copy")
    assert not (tmp_path / "copy" / "code" / "helper.py").exists()
    assert "hard link" in dict(notes.skipped)[os.path.join("code", "helper.py")]
    assert (tmp_path / "copy" / "code" / "tools.py").read_text() == "x = 1\n"
