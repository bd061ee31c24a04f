"""The instructor's sandbox battery: attacks the guiding tests do not contain, judged by the grader.

The grader builds the attack tree itself, with names drawn at random for each run (never the
guiding tests' fixture names), and shows it to the sandbox read-only. battery_probe.py calls the
learner's safe_resolve/dispatch_tool once per question and only reports what they returned or
raised; every verdict is decided here, in the grader's process, against the real files, after the
probe process is gone. A class of attack *held* when every probe in it was refused or stayed
inside the repository; it *leaked* when one resolved outside (or a sentinel reached a tool
result, or a function that is not a tool was called by name); it is *unclean* when a probe
raised something other than ValueError (no leak, but a crash the tool would have to survive).
"""

from __future__ import annotations

import ast
import json
import os
import queue
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grading import runner

BATTERY_TIMEOUT = 60
ANSWER_SECONDS = 6            # the probe's own alarm is 3 s; past this the process is killed
# Judged on the provided tools, not on safe_resolve: a hard link has no path to give it away.
NOT_THE_LEARNERS = {"hard links": "a hard link looks like any file to a path check; only the provided "
                                  "tools' open (nlink check) can refuse it"}
WORDS = ("assets", "vendor", "notes", "data", "build", "media", "lib", "pkg", "docs", "src", "util", "static")
PASSING = {"refused", "inside", "answered", "skipped"}


@dataclass
class Battery:
    probes: list = field(default_factory=list)
    error: str = ""                     # could not run at all (import error, crash before any probe)
    import_errors: list = field(default_factory=list)   # "tools.py: RuntimeError: ..." per module
    ran: object = None
    tool_names: list = field(default_factory=list)      # the tools TOOL_SCHEMAS names (the rest are not tools)

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


def _status(name: str, probes: list) -> str:
    results = {p["result"] for p in probes}
    if all("NotImplementedError" in p.get("detail", "") for p in probes):
        return "not started"
    if "hung" in results:
        return "hung"
    if name == "legal":
        if results & {"crashed"}:
            return "unclean"
        return "too strict" if results & {"refused", "outside"} else "held"
    if results & {"outside", "leaked"}:
        return "leaked"
    if "crashed" in results:
        return "unclean"
    if results <= {"skipped"}:
        return "skipped"
    return "held"


# --------------------------------------------------------------------------- the tree, drawn per run

def _name(word: str = "") -> str:
    return f"{word or secrets.choice(WORDS)}_{secrets.token_hex(3)}"


def build(base: Path) -> dict:
    """A repository, things outside it and links between them, every name new for this run."""
    parent = base / _name("w")
    t = {"parent": parent, "repo_name": f"proj{secrets.token_hex(3)}", "sentinel": f"OUTSIDE-{secrets.token_hex(8)}",
         "secret": f"ENVKEY-{secrets.token_hex(8)}", "links": {}}
    repo = t["repo"] = parent / t["repo_name"]
    t["sub"], t["deeper"], t["file"], t["nonascii"] = _name(), _name(), _name() + ".py", _name("caf\u00e9") + ".py"
    t["outside"], t["target"] = parent / _name(), _name() + ".txt"
    t["prefix_sibling"], t["joined_sibling"] = parent / (t["repo_name"] + "2"), parent / (t["repo_name"] + "_" + _name())
    (repo / t["sub"] / t["deeper"]).mkdir(parents=True)
    for p in (repo / t["file"], repo / t["sub"] / t["file"], repo / t["nonascii"]):
        p.write_text("x = 1\n", encoding="utf-8")
    (repo / ".env").write_text(f"API_KEY={t['secret']}\n")
    t["outside"].mkdir()
    (t["outside"] / t["target"]).write_text(t["sentinel"] + "\n")
    for folder in (t["prefix_sibling"], t["joined_sibling"]):
        folder.mkdir()
        (folder / t["file"]).write_text(t["sentinel"] + "\n")
    case = parent / t["repo_name"].capitalize()     # a sibling differing from the repository only in case
    t["case_sibling"] = None if case.exists() else case  # exists already: a case-insensitive file system
    if t["case_sibling"]:
        case.mkdir()
        (case / t["file"]).write_text(t["sentinel"] + "\n")
    rel_out = f"../{t['outside'].name}"
    t["vendor"], t["settings"], t["chain"] = _name(), _name() + ".py", [_name() for _ in range(3)]
    t["loop"], t["self"], t["in_link"], t["in_dir"], t["env_link"] = (_name() for _ in range(5))
    for name, target in [(t["vendor"], rel_out), (t["settings"], f"{rel_out}/{t['target']}"),
                         (t["chain"][0], t["chain"][1]), (t["chain"][1], t["chain"][2]), (t["chain"][2], rel_out),
                         (t["loop"], t["loop"] + "_b"), (t["loop"] + "_b", t["loop"]), (t["self"], t["self"]),
                         (t["in_link"], t["file"]), (t["in_dir"], t["sub"]), (t["env_link"], ".env")]:
        t["links"][name] = _try(lambda: os.symlink(target, repo / name))
    t["root_link"] = parent / _name()
    t["links"]["root"] = _try(lambda: os.symlink(repo, t["root_link"]))
    t["hard"] = _name() + ".txt"
    t["links"]["hard"] = _try(lambda: os.link(t["outside"] / t["target"], repo / t["hard"]))
    return t


def _try(make) -> bool:
    try:
        make()
        return True
    except (OSError, NotImplementedError):
        return False


def probes(t: dict):
    """(class, description, kind, root, argument, needs); kind 'attack' must end inside or refused."""
    repo, sub, deeper, f, out, target = t["repo"], t["sub"], t["deeper"], t["file"], t["outside"].name, t["target"]
    A, L, name = "attack", "legal", t["repo_name"]
    yield from [
        ("encodings", "percent-encoded dots", A, repo, f"%2e%2e/{out}/{target}", None),
        ("encodings", "percent-encoded slash", A, repo, f"..%2f{out}%2f{target}", None),
        ("encodings", "fullwidth dots", A, repo, f"\uff0e\uff0e/{out}/{target}", None),
        ("encodings", "one-dot leader characters", A, repo, f"\u2025/{out}/{target}", None),
        ("encodings", "backslashes", A, repo, f"..\\{out}\\{target}", None),
        ("encodings", "undecodable (surrogate) name", A, repo, f"{sub}\udcff.py", None),
        ("encodings", "trailing NUL after a real escape", A, repo, f"../{out}/{target}\x00.py", None),
        ("long paths", "200 levels of ../", A, repo, "../" * 200 + f"{out}/{target}", None),
        ("long paths", "a 5,000-character name", A, repo, "a" * 5000, None),
        ("long paths", "4,000 nested folders then out", A, repo, "d/" * 4000 + "../" * 4001 + f"{out}/{target}", None),
        ("sub-folder climbs", "one existing folder down, two up", A, repo, f"{sub}/../../{out}/{target}", None),
        ("sub-folder climbs", "two existing folders down, three up", A, repo, f"{sub}/{deeper}/../../../{out}/{target}", None),
        ("sub-folder climbs", "dots between the climbs", A, repo, f"./{sub}/./../.././{out}/{target}", None),
        ("innocent links", "a folder link with an ordinary name", A, repo, f"{t['vendor']}/{target}", t["vendor"]),
        ("innocent links", "a .py link to an outside file", A, repo, t["settings"], t["settings"]),
        ("symlink chains", "three links leading out", A, repo, f"{t['chain'][0]}/{target}", t["chain"][0]),
        ("symlink chains", "link to an outside folder, then ..", A, repo, f"{t['vendor']}/../{out}/{target}", t["vendor"]),
        ("symlink loops", "two links pointing at each other", A, repo, t["loop"], t["loop"]),
        ("symlink loops", "a link to itself", A, repo, f"{t['self']}/x", t["self"]),
        ("case variants", "sibling differing only in case", A, repo,
         f"../{name.capitalize()}/{f}", "case" if t["case_sibling"] is None else None),
        ("case variants", "upper-case repository name", A, repo, f"../{name.upper()}/{f}", None),
        ("absolute paths", "absolute path outside", A, repo, str(t["outside"] / target), None),
        ("absolute paths", "/etc/passwd", A, repo, "/etc/passwd", None),
        ("absolute paths", "absolute sibling with a shared prefix", A, repo, str(t["prefix_sibling"] / f), None),
        ("sibling prefixes", "a sibling whose name extends the repository's", A, repo, f"../{name}2/{f}", None),
        ("sibling prefixes", "back in, then out to a sibling", A, repo, f"../{name}/../{t['joined_sibling'].name}/{f}", None),
        ("sibling prefixes", "root given with a trailing slash", A, str(repo) + os.sep, f"../{t['joined_sibling'].name}/{f}", None),
        ("legal", "absolute path inside", L, repo, str(repo / f), None),
        ("legal", "root given as a symlink", L, t["root_link"], f, "root"),
        ("legal", "root given with a trailing slash", L, str(repo) + os.sep, f, None),
        ("legal", "non-ASCII name", L, repo, t["nonascii"], None),
        ("legal", "./sub/./file", L, repo, f"./{sub}/./{f}", None),
        ("legal", "a climb that stays inside", L, repo, f"{sub}/{deeper}/../../{f}", None),
        ("legal", "symlink to a file inside", L, repo, t["in_link"], t["in_link"]),
        ("legal", "symlinked folder inside", L, repo, f"{t['in_dir']}/{f}", t["in_dir"]),
    ]


def dispatch_probes(t: dict, helpers: list):
    """(class, description, name, args, needs): the result must be a string without a sentinel."""
    out, target = f"../{t['outside'].name}", t["target"]
    yield from [
        ("dispatch", "repo_root smuggled in the arguments", "read_file", {"path": target, "repo_root": str(t["outside"])}, None),
        ("dispatch", "arguments as a JSON string", "read_file", json.dumps({"path": f"{out}/{target}"}), None),
        ("dispatch", "a list as the path", "read_file", {"path": ["..", t["outside"].name, target]}, None),
        ("dispatch", "list_directory outside", "list_directory", {"path": out}, None),
        ("dispatch", ".env in upper case", "read_file", {"path": ".ENV"}, None),
        ("dispatch", "a symlink to .env", "read_file", {"path": t["env_link"]}, t["env_link"]),
        ("dispatch", "a symlink chain leading out", "read_file", {"path": f"{t['chain'][0]}/{target}"}, t["chain"][0]),
        ("dispatch", "an innocently named link to an outside file", "read_file", {"path": t["settings"]}, t["settings"]),
        ("hard links", "a hard link to an outside file", "read_file", {"path": t["hard"]}, "hard"),
    ]
    for helper in ["__class__", *helpers]:
        yield ("non-tool names", f"{helper} asked for as a tool", helper, {"repo_root": str(t["outside"]),
               "rel_path": f"{out}/{target}", "path": f"{out}/{target}"}, None)


def tool_names(tools_py: Path) -> tuple[set, list]:
    """(the tools in TOOL_SCHEMAS, the module's other top-level functions), read without running it."""
    try:
        tree = ast.parse(tools_py.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
        return set(), []
    tools = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(x, ast.Name) and x.id == "TOOL_SCHEMAS" for x in node.targets):
            tools = {k.value for k in _walk_names(node.value)}
    others = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in tools
              and n.name != "dispatch_tool"]
    return tools, others[:8]


def _walk_names(node):
    for d in ast.walk(node):
        if isinstance(d, ast.Dict):
            for k, v in zip(d.keys, d.values):
                if isinstance(k, ast.Constant) and k.value == "name" and isinstance(v, ast.Constant):
                    yield v


# --------------------------------------------------------------------------- judging, in the grader

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
        self.child, self.lines = child, queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for raw in self.child.proc.stdout:
                self.lines.put(raw)
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
    """``base``: a folder the sandbox shows read-only (the tree is built there); default home."""
    base = base or home / "battery"
    base.mkdir(exist_ok=True)
    t = build(base)
    tools, helpers = tool_names(lab / "code" / "tools.py")
    script = lab / "rubric" / "grading" / "battery_probe.py"
    battery = Battery()
    questions = [("resolve", p) for p in probes(t)] + [("dispatch", p) for p in dispatch_probes(t, helpers)]
    with runner.Child([script, lab / "code"], cwd=t["parent"], env=runner.child_env(home), timeout=BATTERY_TIMEOUT,
                      memory_mb=memory_mb, box=box, channel=True) as child:
        if child.proc is None:
            battery.error, battery.ran = child.error, child.finish()
            return battery
        session, deadline = Session(child), child.started + BATTERY_TIMEOUT
        hello = session.ask({"op": "hello"}, 60)
        if hello is None:
            battery.ran = child.finish()
            battery.error = f"the battery did not start ({battery.ran.describe()}): {battery.ran.stderr[-300:].strip()}"
            return battery
        battery.import_errors = [f"{m}: {e}" for m, e in hello.get("import_errors", [])][:4]
        if any(str(e).startswith("tools.py") for e in battery.import_errors):
            battery.error = f"tools.py does not import: {battery.import_errors[0].split(': ', 1)[-1]}"
            battery.ran = child.finish()
            return battery
        alive = True
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
            if not alive or time.monotonic() > deadline:
                battery.probes.append({**record, "result": "hung", "detail": "not asked: the probe process was killed"})
                continue
            question = {"op": op, "root": str(root), "arg": arg} if op == "resolve" else \
                {"op": op, "root": str(t["repo"]), "name": name, "args": args}
            answer = session.ask(question, ANSWER_SECONDS)
            if answer is None:
                alive = False
                battery.probes.append({**record, "result": "hung", "detail": "no answer: the probe process was killed here"})
                continue
            result, detail = judge_resolve(answer, t) if op == "resolve" else judge_dispatch(answer, t, cls)
            battery.probes.append({**record, "result": result, "detail": detail.replace(str(t["parent"]), "<tmp>")})
        if not alive:
            child.end()
        try:
            child.proc.stdin.close()   # no more questions: the probe process ends
        except OSError:
            pass
        battery.ran = child.finish()
    battery.tool_names = sorted(tools)
    return battery
