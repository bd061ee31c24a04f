"""Run learner code in a child process that cannot hang the grader, eat the machine or reach a key.

POSIX: a new session (so the whole process group is killed on timeout), RLIMIT_AS as a memory
ceiling, RLIMIT_FSIZE against a disk-filling loop, and on Linux RLIMIT_NPROC against a fork bomb
(the user's processes now plus SPARE_PROCESSES; root is not bound by it). Windows: the timeout only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

POSIX = os.name == "posix"
DEFAULT_MEMORY_MB = 1536          # pytest + litellm needs < 1 GiB of address space
MAX_FILE_BYTES = 256 << 20        # no single file written by learner code may exceed this
OUTPUT_LIMIT = 200_000            # characters of stdout/stderr kept
SPARE_PROCESSES = 256             # processes learner code may add (pytest's own subprocess tests need a few)

# Any of these reaching learner code could spend an instructor's money: never passed on.
KEY_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
PROVIDER_PREFIXES = ("COPILOT_", "EMBEDDING_", "GROQ_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_",
                     "AZURE_", "AWS_", "MISTRAL_", "COHERE_", "OLLAMA_", "HF_", "HUGGINGFACE", "LITELLM_",
                     "LESSON06_", "PYTEST_")
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


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """This environment without keys or provider settings, plus LiteLLM's offline switches."""
    env = {k: v for k, v in os.environ.items()
           if not any(h in k.upper() for h in KEY_HINTS) and not k.upper().startswith(PROVIDER_PREFIXES)}
    env.update({
        "HOME": str(home), "USERPROFILE": str(home),   # no ~/.netrc, no ~/.config of the instructor
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true",
        "LITELLM_MODE": "PRODUCTION",  # LiteLLM's import would otherwise load a .env found near it or in cwd
        "COPILOT_NO_DOTENV": "1", "COPILOT_CACHE_DIR": str(home / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8",
        "HTTP_PROXY": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    })
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


def _limits(memory_mb: int):
    processes = _process_ceiling()  # counted here, in the grader: the child must not read /proc

    def apply():  # runs in the child, before exec
        import resource
        ceiling = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
        if processes is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
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


def run(args, cwd, env, timeout: float, memory_mb: int = DEFAULT_MEMORY_MB) -> Ran:
    """``python ARGS`` in ``cwd``; never raises for what the child does."""
    command = [sys.executable, *map(str, args)]
    started = time.monotonic()
    options = {"start_new_session": True, "preexec_fn": _limits(memory_mb)} if POSIX else {}
    try:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace", **options)
    except OSError as exc:
        return Ran(command, 127, "", f"could not start: {exc}", 0.0)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        timed_out = True
    except BaseException:  # Ctrl-C or a kill of the grader: take the learner's processes with it
        _kill(proc)
        raise
    seconds = time.monotonic() - started
    return Ran(command, None if timed_out else proc.returncode, out[-OUTPUT_LIMIT:], err[-OUTPUT_LIMIT:],
               seconds, timed_out)


def _kill(proc) -> None:
    """The child and everything it started."""
    try:
        if POSIX:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        proc.kill()
