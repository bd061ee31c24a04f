"""Where learner code runs: a bubblewrap or Docker/Podman sandbox, or (only when asked) none.

A Box wraps one ``python ARGS`` command. Under bubblewrap the child gets its own user, PID,
network, IPC, mount and UTS namespaces, sees the system and Python read-only, the lab copy
read-only, its work folder writable, a private size-capped /tmp, a fresh /proc of its own PID
namespace only, no capabilities, a clear environment, and dies with the grader. Memory and the
number of processes hold for everything it starts (a cgroup, see ``Group``); where no cgroup can
be made, rlimits per process and the tmpfs caps are what holds, and ``Box.limits`` says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
SANDBOX_UID = 65534               # "nobody": an unprivileged user inside the namespace
TMP_MB = 256                      # private /tmp (and /dev/shm) size inside the sandbox
MAX_FILE_BYTES = 256 << 20        # no single file written by learner code may exceed this (runner's RLIMIT_FSIZE)
MAX_PROCESSES = 256               # tasks (processes and threads) for one command and all it starts
CPU_SHARE = 1.0                   # CPUs one command and all it starts may use at once (a quota, not a weight)
CPU_PERIOD_US = 100_000
DOCKER_IMAGE = os.environ.get("GRADE_DOCKER_IMAGE", "debian:bookworm-slim")
# --sandbox user (where no namespace can be made, e.g. Gradescope's container): learner code runs as
# this unprivileged user (rubric/gradescope/setup.sh creates it), never as the grader's own user
SANDBOX_USER = os.environ.get("GRADE_SANDBOX_USER", "lesson06-learner")

# Never visible inside, even where a bound folder holds it: the grader's own checkout.
HIDDEN = [os.path.realpath(Path(__file__).resolve().parents[2])]
HOW_TO_GET_ONE = ("no sandbox for learner code here: on Debian/Ubuntu `sudo apt-get install bubblewrap`; "
                  "elsewhere run grade.py in a Linux VM or with --sandbox docker, or pass --no-sandbox to run "
                  "learner code with your own privileges (see rubric/rubric.md, 'The sandbox')")


def is_secret_name(name: str) -> bool:
    """An environment variable that may hold a key (never passed to learner code)."""
    return any(h in name.upper() for h in SECRET_HINTS)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _system_dirs() -> list:
    """(kind, path, target) for the read-only system: /usr and its usual companions, as they are here."""
    out = []
    for name in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/alternatives",
                 "/etc/ssl", "/etc/ca-certificates", "/etc/localtime"):
        if os.path.islink(name):
            out.append(("--symlink", os.readlink(name), name))
        elif os.path.exists(name):
            out.append(("--ro-bind", name, name))
    return out


def python_dirs() -> list:
    """Folders the interpreter and its packages live in (never the lab's own checkout)."""
    found = []
    for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))):
        p = os.path.realpath(p)
        if p.startswith("/usr/") or p == "/usr" or any(p == q or p.startswith(q + os.sep) for q in found):
            continue
        found = [q for q in found if not q.startswith(p + os.sep)] + [p]
    return found


@dataclass
class Box:
    kind: str = "none"
    readonly: list = field(default_factory=list)    # visible read-only at the same path
    writable: list = field(default_factory=list)    # visible read-write at the same path
    # visible read-write at the same path, but a fresh size-capped tmpfs per command: what a learner
    # writes there (a disk bomb, a .pth for the next command) never reaches the grader's disk
    scratch: list = field(default_factory=list)
    limits: str = ""                                 # which limits held, for the evidence

    user: str = ""                                   # kind "user": the account learner code runs as

    def wrap(self, command: list, cwd: Path, env: dict, memory_mb: int, name: str) -> tuple[list, dict]:
        """(argv to start, environment for that argv). A key-like variable never gets in, whoever built env."""
        env = {k: v for k, v in env.items() if not is_secret_name(k)}
        if self.kind == "bubblewrap":
            return self._bwrap(command, cwd, env), {"PATH": "/usr/bin:/bin"}
        if self.kind == "user":   # the switch to the user happens in runner's preexec (sandbox.become)
            return command, env
        if self.kind in ("docker", "podman"):
            return self._container(command, cwd, env, memory_mb, name), {
                k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST", "XDG_RUNTIME_DIR")}
        return command, env

    def _bwrap(self, command, cwd, env) -> list:
        argv = [shutil.which("bwrap") or "bwrap", "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--uid", str(SANDBOX_UID),
                "--gid", str(SANDBOX_UID), "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        for kind, a, b in _system_dirs():
            argv += [kind, a, b]
        argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_MB << 20), "--tmpfs", "/dev/shm",
                 "--size", str(TMP_MB << 20), "--tmpfs", "/tmp"]
        shown = [b for _, _, b in _system_dirs()] + python_dirs()
        for p in python_dirs():   # after the tmpfs: a virtualenv made under /tmp (as CI does) stays visible
            argv += ["--ro-bind", p, p]
        for hidden in HIDDEN:     # the instructor's checkout (its code/.env) under /usr or a Python folder
            if any(_inside(hidden, b) for b in shown):
                argv += ["--tmpfs", hidden]
                argv += [x for p in python_dirs() if _inside(p, hidden) for x in ("--ro-bind", p, p)]
        for p in self.readonly:
            argv += ["--ro-bind", str(p), str(p)]
        for p in self.writable:
            argv += ["--bind", str(p), str(p)]
        for p in self.scratch:
            argv += ["--size", str(TMP_MB << 20), "--perms", "0700", "--tmpfs", str(p)]
        for k, v in env.items():
            argv += ["--setenv", k, v]
        return argv + ["--chdir", str(cwd), "--", *map(str, command)]

    def _container(self, command, cwd, env, memory_mb, name) -> list:
        argv = [shutil.which(self.kind) or self.kind, "run", "--rm", "-i", "--name", name, "--network", "none",
                "--memory", f"{memory_mb}m", "--memory-swap", f"{memory_mb}m", "--pids-limit", str(MAX_PROCESSES),
                "--cpus", f"{CPU_SHARE:g}",
                "--read-only", "--tmpfs", f"/tmp:rw,size={TMP_MB}m,mode=1777", "--user", f"{SANDBOX_UID}:{SANDBOX_UID}",
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--workdir", str(cwd),
                # no file larger than the runner's ceiling, nor more descriptors than it allows
                "--ulimit", f"fsize={MAX_FILE_BYTES}:{MAX_FILE_BYTES}", "--ulimit", "nofile=1024:1024"]
        for p in python_dirs():
            argv += ["-v", f"{p}:{p}:ro"]
        for p in self.readonly:
            argv += ["-v", f"{p}:{p}:ro"]
        for p in self.writable:   # single files only (the test log): a folder would be an unsized disk
            argv += ["-v", f"{p}:{p}"]
        for p in self.scratch:   # the work folder: sized, fresh for every command, never on the grader's disk
            argv += ["--tmpfs", f"{p}:rw,size={TMP_MB}m,mode=1777"]
        for k, v in env.items():
            argv += ["-e", f"{k}={v}"]
        return argv + [DOCKER_IMAGE, *map(str, command)]

    def share(self, readable=(), writable=()) -> None:
        """As a separate user, learner code sees the grader's folders only through their modes:
        ``readable`` trees become world-readable (folders on the way traversable, not listable),
        ``writable`` ones owned by that user. Other kinds see them through their mounts."""
        if self.kind != "user":
            return
        uid, gid = user_ids(self.user)
        for top in map(Path, readable):
            for parent in reversed(top.parents):
                if parent.is_dir() and str(parent).startswith(tempfile_root()) and parent != Path(tempfile_root()):
                    os.chmod(parent, os.stat(parent).st_mode | 0o111)
            for here, dirs, files in os.walk(top):
                os.chmod(here, 0o755)
                for f in files:
                    path = os.path.join(here, f)
                    if not os.path.islink(path):
                        os.chmod(path, os.stat(path).st_mode | 0o444)
        for top in map(Path, writable):
            os.chown(top, uid, gid)
            os.chmod(top, 0o700)

    def stop(self, name: str) -> None:
        """A container outlives a killed client: remove it by name. As a separate user, every process
        of that user is killed (a double-forked daemon included): one learner command at a time."""
        if self.kind == "user":
            kill_user(self.user)
        if self.kind in ("docker", "podman"):
            try:
                subprocess.run([self.kind, "kill", name], capture_output=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass


def bwrap_works() -> str:
    """"" when bubblewrap can start a namespace here, else why not."""
    exe = shutil.which("bwrap")
    if not exe or not sys.platform.startswith("linux"):
        return "bubblewrap (bwrap) is not installed" if sys.platform.startswith("linux") else f"{sys.platform} has no bubblewrap"
    try:
        probe = subprocess.run([exe, "--unshare-user", "--unshare-pid", "--unshare-net", "--dev-bind", "/", "/",
                                "--", "/bin/true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap could not start: {exc}"
    return "" if probe.returncode == 0 else f"bwrap cannot make namespaces here: {probe.stderr.decode(errors='replace').strip()[:200]}"


def container_works(kind: str) -> str:
    exe = shutil.which(kind)
    if not exe:
        return f"{kind} is not installed"
    try:
        probe = subprocess.run([exe, "image", "inspect", DOCKER_IMAGE], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{kind} could not start: {exc}"
    if probe.returncode:
        return f"{kind} cannot use the image {DOCKER_IMAGE} (pull it first, or set GRADE_DOCKER_IMAGE): " \
               f"{probe.stderr.decode(errors='replace').strip()[:160]}"
    return ""


def tempfile_root() -> str:
    import tempfile
    return os.path.realpath(tempfile.gettempdir())


def user_ids(name: str) -> tuple[int, int] | None:
    """(uid, gid) of an account that is not root, or None."""
    try:
        import pwd
        entry = pwd.getpwnam(name)
    except (ImportError, KeyError):
        return None
    return (entry.pw_uid, entry.pw_gid) if entry.pw_uid != 0 else None


def become(name: str) -> None:
    """In a child before exec: drop to ``name`` for good (groups, gid, then uid)."""
    uid, gid = user_ids(name)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def kill_user(name: str) -> int:
    """Kill every process of ``name`` (kill(-1) from a child that became that user reaches exactly
    its processes, a double-forked daemon included); the number still alive after (0 expected)."""
    import signal
    import time
    ids = user_ids(name)
    if ids is None or not hasattr(os, "fork") or os.geteuid() != 0:
        return 0
    for _ in range(20):
        pid = os.fork()
        if pid == 0:
            try:
                become(name)
                for _ in range(50):
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except ProcessLookupError:
                        break
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        left = _processes_of(ids[0])
        if not left:
            return 0
        time.sleep(0.05)
    return len(_processes_of(ids[0]))


def _processes_of(uid: int) -> list:
    out = []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid:
                out.append(int(pid))
        except OSError:
            continue
    return out


def user_works(name: str = "") -> str:
    """"" when learner code can run as the unprivileged user ``name`` here, else why not."""
    name = name or SANDBOX_USER
    if not sys.platform.startswith("linux") or not hasattr(os, "geteuid"):
        return f"{sys.platform}: no separate-user mode"
    if os.geteuid() != 0:
        return "a separate user needs the grader to run as root (as it does on Gradescope)"
    if user_ids(name) is None:
        return f"no unprivileged account {name!r} (rubric/gradescope/setup.sh creates it; GRADE_SANDBOX_USER names another)"
    try:   # that user must be able to start this Python and import pytest from an ordinary folder
        probe = subprocess.run([sys.executable, "-s", "-c", "import pytest"], capture_output=True, timeout=60, cwd="/",
                               preexec_fn=lambda: become(name), env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{sys.executable} cannot start as {name!r}: {exc}"
    if probe.returncode:
        return f"{sys.executable} cannot run as {name!r} (a folder above it is private?): " \
               f"{probe.stderr.decode(errors='replace').strip()[-200:]}"
    return ""


def choose(wanted: str = "auto") -> tuple[str, str]:
    """(kind, why not) for the sandbox asked for; kind is "" when none can run here."""
    if wanted == "none":
        return "none", ""
    if wanted == "user":
        why = user_works()
        return ("", why) if why else ("user", "")
    if wanted in ("auto", "bubblewrap"):
        why = bwrap_works()
        if not why:
            return "bubblewrap", ""
        return "", why
    why = container_works(wanted)
    return ("", why) if why else (wanted, "")


# --------------------------------------------------------------------------- cgroups

CGROUP = Path("/sys/fs/cgroup")


class Group:
    """A cgroup for one command and all it starts: memory and task ceilings, and a kill that
    reaches every descendant whatever session it made. v2 where the unified tree is writable,
    else v1 memory + pids; ``Group.make`` returns None where neither can be created."""

    def __init__(self, paths: list, version: str):
        self.paths, self.version = paths, version
        self.cpu = ""    # the CPU quota that holds ("" = none: runner falls back to RLIMIT_CPU and nice)

    @classmethod
    def make(cls, memory_mb: int) -> "Group | None":
        if not sys.platform.startswith("linux"):
            return None
        name = f"lesson06-grade-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        for maker in (cls._v2, cls._v1):
            try:
                group = maker(name, memory_mb)
            except OSError:
                group = None
            if group:
                return group
        return None

    @classmethod
    def _v2(cls, name, memory_mb):
        if not (CGROUP / "cgroup.controllers").is_file():
            return None
        here = CGROUP / _own("").lstrip("/")
        wanted = {"memory", "pids"}
        enabled = set((here / "cgroup.subtree_control").read_text().split())
        if not wanted <= enabled:
            return None
        path = here / name
        path.mkdir()
        group = cls([path], "cgroup v2")
        try:
            (path / "memory.max").write_text(str(memory_mb << 20))
            (path / "memory.swap.max").write_text("0") if (path / "memory.swap.max").exists() else None
            (path / "pids.max").write_text(str(MAX_PROCESSES))
            if "cpu" in enabled:
                (path / "cpu.max").write_text(f"{int(CPU_SHARE * CPU_PERIOD_US)} {CPU_PERIOD_US}")
                group.cpu = f"{CPU_SHARE:g} CPU"
        except OSError:
            group.remove()
            raise
        return group

    def cpu_seconds(self) -> float | None:
        """CPU time used by everything in the group so far (None where it is not counted)."""
        for p in self.paths:
            try:
                if (p / "cpuacct.usage").exists():
                    return int((p / "cpuacct.usage").read_text()) / 1e9
                if (p / "cpu.stat").exists():
                    stat = dict(line.split() for line in (p / "cpu.stat").read_text().splitlines() if " " in line)
                    return int(stat["usage_usec"]) / 1e6
            except (OSError, ValueError, KeyError):
                continue
        return None

    @classmethod
    def _v1(cls, name, memory_mb):
        mem, pids = CGROUP / "memory", CGROUP / "pids"
        if not (mem / "cgroup.procs").exists() or not (pids / "cgroup.procs").exists():
            return None
        paths = [mem / _own("memory").lstrip("/") / name, pids / _own("pids").lstrip("/") / name]
        for p in paths:
            _sweep(p.parent)
        group = cls([], "cgroup v1")
        try:
            for p in paths:
                p.mkdir()
                group.paths.append(p)
            (paths[0] / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
            (paths[1] / "pids.max").write_text(str(MAX_PROCESSES))
        except OSError:
            group.remove()
            raise
        try:  # CPU accounting only: the grader and the benchmark report what each command cost
            account = CGROUP / "cpuacct" / _own("cpuacct").lstrip("/") / name
            _sweep(account.parent)
            if not account.exists():   # cpu and cpuacct may share one hierarchy: then it is one folder
                account.mkdir()
                group.paths.append(account)
        except OSError:
            pass
        try:  # a CPU quota: a learner forking busy processes takes one CPU, never a neighbour's
            quota = CGROUP / "cpu" / _own("cpu").lstrip("/") / name
            _sweep(quota.parent)
            if not quota.exists():
                quota.mkdir()
                group.paths.append(quota)
            (quota / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (quota / "cpu.cfs_quota_us").write_text(str(int(CPU_SHARE * CPU_PERIOD_US)))
            group.cpu = f"{CPU_SHARE:g} CPU"
        except OSError:
            pass
        return group

    def enter(self) -> None:
        """Called in the child before exec: it and all it starts belong to the group."""
        for p in self.paths:
            with open(p / "cgroup.procs", "w") as fh:
                fh.write(str(os.getpid()))

    def pids(self) -> set:
        out = set()
        for p in self.paths:
            try:
                out |= {int(x) for x in (p / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return out

    def kill_all(self) -> None:
        import signal
        import time

        for _ in range(50):
            left = self.pids()
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        for p in reversed(self.paths):
            try:
                p.rmdir()
            except OSError:
                pass

    def oom_kills(self) -> int:
        for p in self.paths:
            for f in ("memory.events", "memory.oom_control"):
                try:
                    text = (p / f).read_text()
                except OSError:
                    continue
                for line in text.splitlines():
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        return 0


def _sweep(parent: Path) -> None:
    """Remove empty groups a killed grader left behind (its pid is in their name)."""
    for old in parent.glob("lesson06-grade-*"):
        try:
            pid = int(old.name.split("-")[2])
            os.kill(pid, 0)
        except ProcessLookupError:
            try:
                old.rmdir()
            except OSError:
                pass
        except (ValueError, IndexError, OSError):
            continue


def _own(controller: str) -> str:
    """This process's cgroup path for a v1 controller ("" = the v2 unified tree)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller and controller in names.split(",")) or (not controller and names == ""):
            return path
    raise OSError(f"no {controller or 'unified'} cgroup")
