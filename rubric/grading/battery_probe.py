"""Run in a child process by grading/battery.py: path attacks on the learner's tools module.

    python battery_probe.py CODE_DIR WORK_DIR

Builds a small tree in WORK_DIR (a repository, things outside it, links between them), imports
``tools`` from CODE_DIR and prints one JSON line per probe as it finishes, so a probe that hangs
or crashes the process loses nothing that came before it. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

SENTINEL = "GRADER-OUTSIDE-SENTINEL-5e1f"
SECRET = "GRADER-ENV-SENTINEL-77c2"
PROBE_SECONDS = 3


def build(work: Path) -> dict:
    repo, outside, evil = work / "repo", work / "outside", work / "repo_evil"
    for folder in (repo / "sub", outside, evil, work / "repo2", work / "Repo"):
        folder.mkdir(parents=True, exist_ok=True)
    (repo / "file.py").write_text("x = 1\n")
    (repo / "sub" / "file.py").write_text("y = 2\n")
    (repo / "caf\u00e9.py").write_text("z = 3\n")
    (repo / ".env").write_text(f"API_KEY={SECRET}\n")
    (outside / "secret.txt").write_text(SENTINEL + "\n")
    for folder in (evil, work / "repo2", work / "Repo"):
        (folder / "x.py").write_text(SENTINEL + "\n")
    links = {}
    def link(name, target):
        try:
            os.symlink(target, repo / name)
            links[name] = True
        except (OSError, NotImplementedError):
            links[name] = False
    link("out", "../outside/secret.txt")
    link("out_dir", "../outside")
    link("chain1", "chain2")
    link("chain2", "chain3")
    link("chain3", "../outside")
    link("loop_a", "loop_b")
    link("loop_b", "loop_a")
    link("self", "self")
    link("in_link", "file.py")
    link("in_dir", "sub")
    link("env_link", ".env")
    try:
        os.symlink(repo, work / "root_link")
        links["root_link"] = True
    except (OSError, NotImplementedError):
        links["root_link"] = False
    try:
        os.link(outside / "secret.txt", repo / "hard.txt")
        links["hard.txt"] = True
    except (OSError, NotImplementedError):
        links["hard.txt"] = False
    return {"repo": repo, "outside": outside, "evil": evil, "links": links}


def probes(t: dict, work: Path):
    """(class, description, kind, root, argument, needs); kind 'attack' must end inside or refused."""
    repo, links = t["repo"], t["links"]
    A, L = "attack", "legal"
    yield from [
        ("encodings", "percent-encoded dots", A, repo, "%2e%2e/outside/secret.txt", None),
        ("encodings", "percent-encoded slash", A, repo, "..%2foutside%2fsecret.txt", None),
        ("encodings", "fullwidth dots", A, repo, "\uff0e\uff0e/outside/secret.txt", None),
        ("encodings", "one-dot leader characters", A, repo, "\u2025/outside/secret.txt", None),
        ("encodings", "backslashes", A, repo, "..\\outside\\secret.txt", None),
        ("encodings", "undecodable (surrogate) name", A, repo, "bad\udcffname.py", None),
        ("encodings", "trailing NUL after a real escape", A, repo, "../outside/secret.txt\x00.py", None),
        ("long paths", "200 levels of ../", A, repo, "../" * 200 + "outside/secret.txt", None),
        ("long paths", "a 5,000-character name", A, repo, "a" * 5000, None),
        ("long paths", "4,000 nested folders then out", A, repo, "d/" * 4000 + "../" * 4001 + "outside/secret.txt", None),
        ("symlink chains", "three links leading out", A, repo, "chain1/secret.txt", "chain1"),
        ("symlink chains", "link to an outside folder, then ..", A, repo, "out_dir/../outside/secret.txt", "out_dir"),
        ("symlink chains", "link to an outside file", A, repo, "out", "out"),
        ("symlink loops", "two links pointing at each other", A, repo, "loop_a", "loop_a"),
        ("symlink loops", "a link to itself", A, repo, "self/x", "self"),
        ("case variants", "sibling differing only in case", A, repo, "../Repo/x.py", None),
        ("case variants", "upper-case repository name", A, repo, "../REPO/file.py", None),
        ("absolute paths", "absolute path outside", A, repo, str(t["outside"] / "secret.txt"), None),
        ("absolute paths", "/etc/passwd", A, repo, "/etc/passwd", None),
        ("absolute paths", "absolute sibling with a shared prefix", A, repo, str(t["evil"] / "x.py"), None),
        ("sibling prefixes", "repo2 next to repo", A, repo, "../repo2/x.py", None),
        ("sibling prefixes", "back in, then out to repo_evil", A, repo, "../repo/../repo_evil/x.py", None),
        ("sibling prefixes", "root given with a trailing slash", A, str(repo) + os.sep, "../repo_evil/x.py", None),
        ("legal", "absolute path inside", L, repo, str(repo / "file.py"), None),
        ("legal", "root given as a symlink", L, work / "root_link", "file.py", "root_link"),
        ("legal", "root given with a trailing slash", L, str(repo) + os.sep, "file.py", None),
        ("legal", "non-ASCII name", L, repo, "caf\u00e9.py", None),
        ("legal", "./sub/./file.py", L, repo, "./sub/./file.py", None),
        ("legal", "symlink to a file inside", L, repo, "in_link", "in_link"),
        ("legal", "symlinked folder inside", L, repo, "in_dir/file.py", "in_dir"),
    ]


def dispatch_probes(t: dict):
    """(class, description, name, args, needs): the result must be a string without a sentinel."""
    outside = str(t["outside"])
    yield from [
        ("dispatch", "repo_root smuggled in the arguments", "read_file", {"path": "secret.txt", "repo_root": outside}, None),
        ("dispatch", "a non-tool function by name", "is_excluded", {"parts": ["x"]}, None),
        ("dispatch", "a dunder name", "__class__", {}, None),
        ("dispatch", "arguments as a JSON string", "read_file", '{"path": "../outside/secret.txt"}', None),
        ("dispatch", "a list as the path", "read_file", {"path": ["..", "outside", "secret.txt"]}, None),
        ("dispatch", "list_directory outside", "list_directory", {"path": "../outside"}, None),
        ("dispatch", ".env in upper case", "read_file", {"path": ".ENV"}, None),
        ("dispatch", "a symlink to .env", "read_file", {"path": "env_link"}, "env_link"),
        ("dispatch", "a symlink chain leading out", "read_file", {"path": "chain1/secret.txt"}, "chain1"),
        ("hard links", "a hard link to an outside file", "read_file", {"path": "hard.txt"}, "hard.txt"),
    ]


class ProbeTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise ProbeTimeout(f"no answer within {PROBE_SECONDS} s")


def judge_path(tools, kind, root, arg, repo: Path) -> tuple[str, str]:
    try:
        got = tools.safe_resolve(root, arg)
    except ValueError as exc:
        return ("refused", f"ValueError: {str(exc)[:120]}")
    except ProbeTimeout as exc:
        return ("hung", str(exc))
    except BaseException as exc:  # noqa: BLE001  (anything else is what we came to see)
        return ("crashed", f"{type(exc).__name__}: {str(exc)[:120]}")
    try:
        inside = Path(got).resolve().is_relative_to(repo.resolve())
    except (OSError, RuntimeError, ValueError, TypeError) as exc:
        return ("crashed", f"returned {got!r:.120}, which cannot be resolved ({type(exc).__name__})")
    return ("inside" if inside else "outside", f"returned {str(got)[-120:]}")


def main(code_dir: str, work_dir: str) -> int:
    sys.path.insert(0, str(Path(code_dir).resolve()))
    work = Path(work_dir).resolve()
    t = build(work)
    os.chdir(work)
    emit = lambda rec: print(json.dumps(rec, ensure_ascii=True), flush=True)  # noqa: E731
    try:
        import tools
    except BaseException as exc:  # noqa: BLE001
        emit({"import_error": f"{type(exc).__name__}: {str(exc)[:300]}", "module": "tools.py"})
        return 0
    try:
        import agent_loop  # noqa: F401  (only to see that it imports; the probes use tools)
    except BaseException as exc:  # noqa: BLE001
        emit({"import_error": f"{type(exc).__name__}: {str(exc)[:300]}", "module": "agent_loop.py"})
    timed = hasattr(signal, "setitimer")
    if timed:
        signal.signal(signal.SIGALRM, _alarm)
    for cls, what, kind, root, arg, needs in probes(t, work):
        if needs and not t["links"].get(needs):
            emit({"class": cls, "probe": what, "kind": kind, "result": "skipped", "detail": "links not available here"})
            continue
        emit({"class": cls, "probe": what, "kind": kind, "argument": repr(arg)[:80], "started": True})
        if timed:
            signal.setitimer(signal.ITIMER_REAL, PROBE_SECONDS)
        result, detail = judge_path(tools, kind, root, arg, t["repo"])
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"class": cls, "probe": what, "kind": kind, "argument": repr(arg)[:80], "result": result, "detail": detail})
    for cls, what, name, args, needs in dispatch_probes(t):
        if needs and not t["links"].get(needs):
            emit({"class": cls, "probe": what, "kind": "dispatch", "result": "skipped", "detail": "links not available here"})
            continue
        emit({"class": cls, "probe": what, "kind": "dispatch", "argument": f"{name}({args!r:.60})", "started": True})
        if timed:
            signal.setitimer(signal.ITIMER_REAL, PROBE_SECONDS)
        try:
            text = tools.dispatch_tool(name, args, str(t["repo"]))
            if not isinstance(text, str):
                result, detail = "crashed", f"returned {type(text).__name__}, not a string"
            elif SENTINEL in text or SECRET in text:
                result, detail = "leaked", text[:160]
            else:
                result, detail = ("refused" if text.startswith("Error") else "answered"), text[:160]
        except ProbeTimeout as exc:
            result, detail = "hung", str(exc)
        except BaseException as exc:  # noqa: BLE001
            result, detail = "crashed", f"{type(exc).__name__}: {str(exc)[:120]}"
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"class": cls, "probe": what, "kind": "dispatch", "argument": f"{name}({args!r:.60})",
              "result": result, "detail": detail})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
