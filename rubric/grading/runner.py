"""Run learner code in a child process that cannot hang the grader, eat the machine or reach a key.

Where it runs is a sandbox.Box (bubblewrap by default on Linux). Around it, on POSIX: a new
session, a cgroup for memory and processes where one can be made (every descendant killed at
the end, whatever session it started), else RLIMIT_AS/RLIMIT_NPROC per process; RLIMIT_FSIZE
against a disk-filling loop. Output goes to files the grader owns, never pipes, and the wait is
bounded: a child that keeps a descriptor open cannot hold the grader. Windows: the timeout only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from grading.sandbox import MAX_FILE_BYTES, MAX_PROCESSES, Box, Group, is_secret_name  # noqa: F401

POSIX = os.name == "posix"
DEFAULT_MEMORY_MB = 1536          # pytest + litellm needs < 1 GiB of address space
OUTPUT_LIMIT = 200_000            # characters of stdout/stderr kept
MAX_OPEN_FILES = 1024             # descriptors per learner process
SPARE_PROCESSES = 256             # processes learner code may add (pytest's own subprocess tests need a few)

# A dead loopback proxy: anything that tries the internet fails at once instead of leaving.
DEAD_PROXY = "http://127.0.0.1:9"


@dataclass
class Ran:
    command: list
    returncode: int | None      # None when it timed out
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    skipped: str = ""           # not run at all, and why
    limits: str = ""            # the sandbox and the limits that held (sandbox.Box, runner.Child)
    cpu_seconds: float | None = None   # CPU of the command and all it started, where a cgroup counted it

    @property
    def crashed(self) -> bool:  # killed by a signal (negative code), e.g. the memory ceiling
        return self.returncode is not None and self.returncode < 0

    def describe(self) -> str:
        if self.skipped:
            return self.skipped
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s (killed)"
        if self.crashed:
            return f"killed by signal {-self.returncode} (memory ceiling or crash)"
        return f"exit code {self.returncode} in {self.seconds:.1f} s"


# Passed on from the grader's environment (never a key-like name); everything else is set explicitly
# below, so no provider setting or key the instructor's shell holds reaches learner code.
PASSED_ON = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT", "COMSPEC", "WINDIR", "TEMP", "TMP")


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: a few harmless variables, LiteLLM's offline switches, a dead proxy.
    Never a key or a provider setting, whatever the grader's own environment holds."""
    env = {k: v for k, v in os.environ.items() if k.upper() in PASSED_ON and not is_secret_name(k)}
    env.update({
        "HOME": str(home), "USERPROFILE": str(home),   # no ~/.netrc, no ~/.config of the instructor
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true",
        "LITELLM_MODE": "PRODUCTION",  # LiteLLM's import would otherwise load a .env found near it or in cwd
        "COPILOT_NO_DOTENV": "1", "COPILOT_CACHE_DIR": str(home / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8",
        "HTTP_PROXY": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    })
    env.update(extra)
    return env


def drop_own_secrets() -> list:
    """Remove key-like variables from the grader's own environment before any child starts (a child
    without a sandbox could read /proc/<grader>/environ), and make the grader undumpable on Linux,
    so a process of the same user cannot read its memory or environ. Returns the names dropped."""
    dropped = sorted(k for k in os.environ if is_secret_name(k))
    for k in dropped:
        del os.environ[k]
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE = 4
        except (OSError, AttributeError):
            pass
    return dropped


NICE = 5                          # learner code yields to the grader itself


def _limits(memory_mb: int, group: Group | None, user: str = "", cpu_seconds: float = 0):
    # counted here, in the grader: the child must not read /proc. A separate user runs nothing else.
    processes = None if group else (MAX_PROCESSES if user else _process_ceiling())

    def apply():  # runs in the child, before exec
        import resource
        if group is not None:
            group.enter()
        ceiling = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))   # per process, under the group's total
        if group is None:  # per user only: what holds for processes where no cgroup could be made
            if processes is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
        # hard, so it cannot be raised back: 256 processes x the usual 20,000+ could fill the host's file table
        files = min(MAX_OPEN_FILES, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
        try:
            os.nice(NICE)
        except OSError:
            pass
        if (group is None or not group.cpu) and cpu_seconds:   # no CPU quota: at least a CPU-time ceiling
            limit = int(cpu_seconds) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))
        if user:   # last: the limits above are set while still allowed to
            from grading.sandbox import become
            become(user)
    return apply


def _process_ceiling() -> int | None:
    """RLIMIT_NPROC counts every task (process or thread) of the user, whoever started it: the
    ones running now plus SPARE_PROCESSES, within the hard limit. None where they cannot be
    counted (no /proc), so nothing is limited that a count would not justify."""
    import resource

    if not hasattr(resource, "RLIMIT_NPROC") or not os.path.isdir("/proc"):
        return None
    uid = os.getuid()
    try:
        mine = sum(_tasks(pid) for pid in os.listdir("/proc") if pid.isdigit() and _owner(pid) == uid)
    except OSError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    wanted = mine + SPARE_PROCESSES
    return wanted if hard == resource.RLIM_INFINITY or wanted <= hard else None


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:  # gone since the listing
        return None


def _tasks(pid: str) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))  # its threads, itself included
    except OSError:
        return 1


_LIVE: set = set()            # every Child not yet ended, for end_all
_COSTS = threading.local()    # per grading thread: what each learner command cost


@contextlib.contextmanager
def counting(step: str = ""):
    """Every learner command this thread finishes inside is listed in the yielded list as {"command",
    "seconds", "cpu_seconds"} (CPU as its cgroup counted it, None where none was made), named
    ``step`` by an inner ``counting(step)``; a result reused from an earlier run is not listed."""
    outer = getattr(_COSTS, "costs", None), getattr(_COSTS, "step", "")
    if step:
        _COSTS.step = step
    else:
        _COSTS.costs = []
    try:
        yield getattr(_COSTS, "costs", None)
    finally:
        _COSTS.costs, _COSTS.step = outer


def _count(command: list, seconds: float, cpu: float | None) -> None:
    costs = getattr(_COSTS, "costs", None)
    if costs is not None:
        name = getattr(_COSTS, "step", "") or " ".join(str(a) for a in command[2:5] if os.sep not in str(a))
        costs.append({"command": name, "seconds": round(seconds, 2), "cpu_seconds": None if cpu is None else round(cpu, 2)})


_STOPPING = threading.Event()


def end_all() -> None:
    """The grader is being stopped: end every learner command now and start no new one (the
    threads that were waiting for them then finish at once, and clean up)."""
    _STOPPING.set()
    for child in list(_LIVE):
        child.end()


class Child:
    """One learner command: started in its box, waited for with a deadline, and always ended with
    everything it started. ``with Child(...) as c: c.proc ...; ran = c.finish()``"""

    def __init__(self, args, cwd, env, timeout: float, memory_mb: int = DEFAULT_MEMORY_MB, box: Box | None = None,
                 pass_fds=(), channel: bool = False):
        """channel: stdin and stdout are pipes the caller talks through (stderr still goes to a file)."""
        self.box = box or Box("none")
        self.timeout, self.memory_mb = timeout, memory_mb
        # -s: no user site-packages, so a .pth one command planted in the writable HOME runs in no later one
        self.command = [sys.executable, "-s", *map(str, args)]
        self.name = f"lesson06-grade-{uuid.uuid4().hex[:12]}"
        self.group = Group.make(memory_mb) if POSIX and self.box.kind in ("bubblewrap", "none", "user") else None
        self.limits = self._describe_limits()
        self.box.limits = self.limits
        self._out = tempfile.TemporaryDirectory(prefix="grade-out-")   # the grader's; never inside the box
        self.files = [open(Path(self._out.name) / n, "w+b") for n in ("stdout", "stderr")]
        argv, run_env = self.box.wrap(self.command, Path(cwd), env, memory_mb, self.name)
        self.started = time.monotonic()
        container = self.box.kind in ("docker", "podman")   # its client is not the learner's code
        options = {"start_new_session": True, "preexec_fn": None if container else
                   _limits(memory_mb, self.group, self.box.user if self.box.kind == "user" else "", timeout)} \
            if POSIX else {}
        if _STOPPING.is_set():
            self.proc, self.error, self.timed_out = None, "could not start: the grader is stopping", False
            return
        _LIVE.add(self)
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=run_env, stdin=subprocess.PIPE if channel else subprocess.DEVNULL,
                                         stdout=subprocess.PIPE if channel else self.files[0],
                                         stderr=self.files[1], pass_fds=tuple(pass_fds), **options)
            self.error = ""
        except OSError as exc:
            self.proc, self.error = None, f"could not start: {exc}"
        self.timed_out = False

    def _describe_limits(self) -> str:
        from grading import sandbox
        where = {"bubblewrap": "bubblewrap (user, PID, network, IPC, mount, UTS namespaces; lab read-only)",
                 "docker": "docker (--network none, read-only lab)", "podman": "podman (--network none, read-only lab)",
                 "none": "no sandbox: learner code ran with the instructor's privileges",
                 "user": f"a separate unprivileged user ({self.box.user}; no namespaces: every process of that user "
                         "killed after each command)"}[self.box.kind]
        if self.box.kind in ("docker", "podman"):
            holds = f"container limits {self.memory_mb} MB, {sandbox.MAX_PROCESSES} tasks"
        elif self.group is not None:
            holds = f"{self.group.version}: {self.memory_mb} MB and {sandbox.MAX_PROCESSES} tasks for the whole command" + \
                (f", {self.group.cpu} at most" if self.group.cpu else ", a CPU-time ceiling per process")
        elif POSIX:
            holds = f"rlimits per process only ({self.memory_mb} MB address space each, a per-user process ceiling)"
        else:
            holds = "a timeout only"
        if self.box.kind == "bubblewrap":
            holds += f"; /tmp and /dev/shm capped at {sandbox.TMP_MB} MB"
        return f"{where}; {holds}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.end()
        return False

    def wait(self, deadline: float | None = None) -> None:
        """Until the child exits or the deadline (time.monotonic) passes; then it is killed."""
        if self.proc is None:
            return
        left = (deadline if deadline is not None else self.started + self.timeout) - time.monotonic()
        try:
            self.proc.wait(timeout=max(0.0, left))
        except subprocess.TimeoutExpired:
            self.timed_out = True
        except BaseException:  # Ctrl-C or a kill of the grader: take the learner's processes with it
            self.end()
            raise

    def end(self) -> None:
        """Kill the child and every descendant (namespace, process group, cgroup)."""
        if self.proc is not None and self.proc.poll() is None:
            _kill(self.proc)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.box.stop(self.name)
        if self.group is not None:
            self.group.kill_all()
            self.group.remove()
            self.group = None
        # stdin only: a reader thread may still be inside stdout's read, and closing it would wait
        # for that read (forever, if an escaped process kept the pipe open where no cgroup was had)
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        _LIVE.discard(self)

    def finish(self) -> "Ran":
        self.wait()
        oom = self.group.oom_kills() if self.group is not None else 0
        cpu = self.group.cpu_seconds() if self.group is not None else None
        self.end()
        seconds = time.monotonic() - self.started
        out, err = (_tail(f) for f in self.files)
        for f in self.files:
            f.close()
        self._out.cleanup()
        if self.proc is None:
            return Ran(self.command, 127, "", self.error, 0.0, limits=self.limits)
        _count(self.command, seconds, cpu)
        if oom:
            err += f"\n[grader] the memory ceiling ({self.memory_mb} MB) killed {oom} process(es)"
        return Ran(self.command, None if self.timed_out else self.proc.returncode, out, err, seconds,
                   self.timed_out, limits=self.limits, cpu_seconds=cpu)


def _tail(fh) -> str:
    """The last OUTPUT_LIMIT characters a child wrote, however much it wrote."""
    fh.flush()
    size = fh.seek(0, os.SEEK_END)
    fh.seek(max(0, size - OUTPUT_LIMIT * 4))
    return fh.read().decode("utf-8", errors="replace")[-OUTPUT_LIMIT:]


def run(args, cwd, env, timeout: float, memory_mb: int = DEFAULT_MEMORY_MB, box: Box | None = None) -> Ran:
    """``python ARGS`` in ``cwd`` inside ``box``; never raises for what the child does."""
    with Child(args, cwd, env, timeout, memory_mb, box) as child:
        return child.finish()


def _kill(proc) -> None:
    """The child and its process group (the namespace dies with the sandbox's first process)."""
    try:
        if POSIX:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass
