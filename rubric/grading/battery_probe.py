"""Run in the sandbox by grading/battery.py: calls the learner's functions and reports what they did.

    python copilot.py CODE_DIR [IMPORT_SECONDS]   (this file, copied by the grader under an ordinary name)

Reads one question per line on stdin ({"nonce", "op": "resolve" | "dispatch" | "parse" | "loop",
...}), calls the learner's function (safe_resolve, dispatch_tool, parse_tool_calls, run_agent
against a scripted model), and answers with one JSON line on stdout carrying the question's nonce:
what the function returned (as text) or raised. It judges nothing: the grader decides, in its own
process, against the real files, after this process is gone. The learner's code never runs in the
process that holds stdin, stdout or a nonce (see "three processes" below), and each question is
answered in a fresh fork, so whatever a learner function patches is gone before the next question:
it can at most change its own answer. To learner code the run looks ordinary: argv is
code/copilot.py, no grader module is loaded. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

PROBE_SECONDS = 3
MAX_TEXT = 4000


class ProbeTimeout(BaseException):  # not an Exception: a learner's `except Exception` cannot swallow it
    pass


def _alarm(signum, frame):
    raise ProbeTimeout(f"no answer within {PROBE_SECONDS} s")


def _text(value) -> str:
    """What the function returned, as text, whatever it is (a learner object's __str__ may raise)."""
    try:
        text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else repr(value)
    except BaseException as exc:  # noqa: BLE001
        text = f"<unprintable {type(value).__name__}: {type(exc).__name__}>"
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    return text[:MAX_TEXT]


def call(modules: dict, question: dict) -> dict:
    answer: dict = {}
    try:
        if question["op"] == "resolve":
            got = modules["tools"].safe_resolve(question["root"], question["arg"])
        elif question["op"] == "dispatch":
            got = modules["tools"].dispatch_tool(question["name"], question["args"], question["root"])
        elif question["op"] == "parse":
            got = modules["agent_loop"].parse_tool_calls(_message(question["calls"]))
            answer["calls"] = [_view(c) for c in got[:20]] if isinstance(got, list) else None
        else:
            got = _loop(modules["agent_loop"], question, answer)
        answer.update(returned=_text(got), type=type(got).__name__)
    except ProbeTimeout as exc:
        answer.update(hung=str(exc))
    except BaseException as exc:  # noqa: BLE001  (anything else is what we came to see)
        answer.update(raised=type(exc).__name__, message=_text(str(exc))[:200] if _safe_str(exc) else "",
                      trace=_trace(exc))
    return answer


def _loop(agent_loop, question: dict, answer: dict):
    """run_agent against a scripted model; what the model was sent, call by call, goes in the answer."""
    script, seen = question["script"], answer.setdefault("seen", [])

    def complete(messages, tools):
        seen.append(_summary(messages))
        turn = _ask_model(seen[-1]) if _MODEL.get("a_write") is not None else \
            ({"stop": True} if len(seen) > 50 else script[min(len(seen), len(script)) - 1])
        if not isinstance(turn, dict) or turn.get("stop"):   # a loop that ignores its cap: the count shows it
            raise ProbeTimeout("more than 50 model calls")
        return _message(turn["calls"], turn.get("content", "")) if "calls" in turn else _answer(turn.get("answer", ""))
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    cap = {} if question["max_steps"] is None else {"max_steps": question["max_steps"]}   # None: the default
    got = agent_loop.run_agent(messages, question["root"], complete, **cap)
    answer["transcript"] = _summary(messages)
    return got


_MODEL: dict = {}   # in a question's fork: the pipes to the keeper, which serves the scripted model


def _ask_model(summary) -> dict | None:
    import time
    os.write(_MODEL["a_write"], (json.dumps({"seq": _MODEL["seq"], "model": summary}, ensure_ascii=True) + "\n").encode())
    deadline = time.monotonic() + PROBE_SECONDS
    while True:   # a reply meant for an earlier question's fork (killed before it read it) is skipped
        reply = _json(_read_line(_MODEL["r_read"], _MODEL.setdefault("buffer", bytearray()), deadline))
        if reply is None or reply.get("seq") == _MODEL["seq"]:
            return reply


def _answer(text):
    from types import SimpleNamespace as NS

    return NS(content=text, tool_calls=None)


def _summary(messages) -> list:
    """[role, tool-call ids or the answered id, the first characters of the content] per message."""
    out = []
    for m in list(messages)[:200]:
        get = m.get if isinstance(m, dict) else (lambda k, d=None, m=m: getattr(m, k, d))
        calls = get("tool_calls") or []
        ids = [c.get("id") if isinstance(c, dict) else getattr(c, "id", None) for c in calls] if isinstance(calls, list) else []
        out.append([_text(get("role")), [_text(i) for i in ids] or _text(get("tool_call_id", "")), _text(get("content", ""))[:80]])
    return out


def _message(calls, content=""):
    """A model message in LiteLLM's shape; calls None: a message without the attribute at all.
    ``content``: text some models send beside their calls ("Thought: ..."), not an answer."""
    from types import SimpleNamespace as NS

    if calls is None:
        return NS(content="")
    return NS(content=content, tool_calls=[NS(id=i, type="function", function=NS(name=n, arguments=a)) for i, n, a in calls])


def _view(call) -> list:
    """[id, name, arguments as JSON text, whether an error is set] of one returned ToolCall."""
    try:
        arguments = json.dumps(getattr(call, "arguments", None), sort_keys=True, default=repr)[:2000]
    except BaseException:  # noqa: BLE001
        arguments = "<unprintable>"
    return [_text(getattr(call, "id", None)), _text(getattr(call, "name", None)), arguments,
            bool(getattr(call, "error", None))]


def _trace(exc) -> list:
    """The names of the functions the exception came through, outermost first (which learner function
    let it out): all of the first 40, since a provided tool's own frames can bury dispatch_tool."""
    names, tb = [], exc.__traceback__
    while tb is not None and len(names) < 40:
        names.append(str(tb.tb_frame.f_code.co_name)[:60])
        tb = tb.tb_next
    return names


def _safe_str(exc) -> bool:
    try:
        str(exc)
        return True
    except BaseException:  # noqa: BLE001
        return False


# --------------------------------------------------------------------------- three processes
#
# This process (the keeper) talks to the grader on stdin/stdout and never imports learner code.
# It forks a worker *before* it reads a question, so no nonce is in the worker's memory; the worker
# drops stdin/stdout (the grader's channel), imports the learner's modules and forks once per
# question; that fork calls the function and answers the keeper through a pipe, tagged with the
# question's sequence number. The keeper adds the nonce and answers the grader. run_agent's model
# is served by the keeper, which counts the calls itself: an answer cannot claim calls it never made.

IMPORT_SECONDS = 30       # the learner's import, in the worker
WORKER_RESTARTS = 5       # a function that kills its worker costs a fresh import, this many times
LINE_BYTES = 1 << 20


def _read_line(fd: int, buffer: bytearray, deadline: float) -> bytes | None:
    """One line from ``fd`` before ``deadline`` (time.monotonic); None on EOF or time-out."""
    import select
    import time
    while b"\n" not in buffer:
        left = None if deadline == float("inf") else deadline - time.monotonic()
        if left is not None and left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None
        buffer += chunk
        if len(buffer) > LINE_BYTES and b"\n" not in buffer:
            buffer.clear()
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line


class Worker:
    """The worker process, seen from the keeper: its pid and three pipes."""

    def __init__(self, code_dir: str):
        import time
        q_read, self.q_write = os.pipe()
        self.a_read, a_write = os.pipe()
        r_read, self.r_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            for fd in (self.q_write, self.a_read, self.r_write):
                os.close(fd)
            try:
                _worker(code_dir, q_read, a_write, r_read)
            finally:
                os._exit(0)
        for fd in (q_read, a_write, r_read):
            os.close(fd)
        self.buffer, self.seq = bytearray(), 0
        line = _read_line(self.a_read, self.buffer, time.monotonic() + IMPORT_SECONDS)
        self.hello = _json(line)
        if self.hello is None:
            self.ended = self.stop()

    def stop(self) -> str:
        """Kill it; how it had ended ("" when it was still running)."""
        import time
        ended = ""
        for _ in range(10):   # a worker that closed its pipe by exiting is reaped within a moment
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                ended = "ended"
                break
            if pid:
                ended = f"exit code {os.waitstatus_to_exitcode(status)}"
                break
            time.sleep(0.05)
        if not ended:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        for fd in (self.q_write, self.a_read, self.r_write):
            try:
                os.close(fd)
            except OSError:
                pass
        return ended

    def ask(self, question: dict) -> dict | None:
        """The worker's answer to one question (None: it died or went silent; it is then stopped)."""
        import time
        self.seq += 1
        try:
            os.write(self.q_write, (json.dumps({**question, "seq": self.seq}) + "\n").encode())
        except OSError:
            return None
        seen, script = [], question.get("script") or []
        deadline = time.monotonic() + PROBE_SECONDS + 3
        while True:
            msg = _json(_read_line(self.a_read, self.buffer, deadline))
            if msg is None:
                return None
            if msg.get("seq") != self.seq:
                continue
            if "model" in msg:        # one model call of run_agent: counted and answered here
                seen.append(msg["model"] if isinstance(msg["model"], list) else [])
                reply = {"stop": True} if len(seen) > 50 else script[min(len(seen), len(script)) - 1] if script else {}
                try:
                    os.write(self.r_write, (json.dumps({**reply, "seq": self.seq}) + "\n").encode())
                except OSError:
                    return None
                continue
            answer = msg.get("answer")
            if not isinstance(answer, dict):
                return None
            if question["op"] == "loop":
                answer["seen"] = seen   # the calls this process served, whatever the answer says
            return answer


def _json(line):
    try:
        value = json.loads(line) if line else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _worker(code_dir: str, q_read: int, a_write: int, r_read: int) -> None:
    """Imports the learner's modules, then answers each question in a fresh fork."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)   # the grader's channel is not this process's: nothing here can read or write it
    os.dup2(null, 1)
    os.close(null)
    code = Path(code_dir).resolve()
    sys.argv = [str(code / "copilot.py")]    # an ordinary run, as far as anything here can tell
    main = sys.modules.get("__main__")
    if main is not None:
        main.__file__ = sys.argv[0]
    sys.path.insert(0, str(code))
    send = lambda rec: os.write(a_write, (json.dumps(rec, ensure_ascii=True) + "\n").encode())  # noqa: E731
    errors, modules = [], {}
    for name in ("tools", "agent_loop"):
        try:
            modules[name] = __import__(name)
        except BaseException as exc:  # noqa: BLE001
            errors.append([f"{name}.py", f"{type(exc).__name__}: {str(exc)[:300]}"])
            if name == "tools":
                break
    send({"import_errors": errors})
    buffer = bytearray()
    while True:
        question = _json(_read_line(q_read, buffer, float("inf")))
        if question is None:
            return
        answer_in_a_fork(modules, question, lambda rec, seq=question.get("seq"): send({"seq": seq, "answer": rec}),
                         a_write, r_read)


def main(code_dir: str) -> int:
    if sys.platform.startswith("linux"):
        try:   # not dumpable: a learner process of the same user cannot open this one's descriptors or memory
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    out, buffer = sys.stdout.buffer, bytearray()

    def send(rec):
        out.write((json.dumps(rec, ensure_ascii=True) + "\n").encode())
        out.flush()

    worker, restarts = Worker(code_dir), 0
    hello = _json(_read_line(0, buffer, float("inf")))
    if hello is None:
        return 0
    if worker.hello is None:
        why = f"the probe ended while importing the learner's modules ({worker.ended})" if worker.ended else \
            f"the learner's modules did not finish importing within {IMPORT_SECONDS:g} s"
        send({"nonce": hello.get("nonce"), "import_errors": [], "import_failed": why})
        return 0
    send({"nonce": hello.get("nonce"), "import_errors": worker.hello.get("import_errors", [])})
    while True:
        if worker is None and restarts < WORKER_RESTARTS:   # forked before the question (and its nonce) is read
            restarts += 1
            worker = Worker(code_dir)
            if worker.hello is None:
                worker = None
                restarts = WORKER_RESTARTS
        line = _read_line(0, buffer, float("inf"))
        question = _json(line)
        if question is None:
            break
        nonce = question.pop("nonce", None)
        if worker is None:
            send({"nonce": nonce, "not_asked": "the learner's code ended the probe's worker too often"})
            continue
        answer = worker.ask(question)
        if answer is None:
            ended = worker.stop()
            worker = None
            answer = {"raised": "ProcessEnded", "message": "the call ended its own process"} if ended else \
                {"hung": f"no answer within {PROBE_SECONDS} s"}
        answer = {k: v for k, v in answer.items() if k in ANSWER_KEYS}
        send({"nonce": nonce, **answer})
    if worker is not None:
        worker.stop()
    return 0


# "trace": which learner function let an exception out (battery.judge_loop blames dispatch_tool for a
# tool error it did not catch, not the loop)
ANSWER_KEYS = {"returned", "type", "raised", "message", "hung", "calls", "seen", "transcript", "trace"}


def answer_here(modules: dict, question: dict) -> dict:
    timed = hasattr(signal, "setitimer")
    if timed:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, PROBE_SECONDS)
    try:
        answer = call(modules, question)
    except ProbeTimeout as exc:  # the alarm rang between the call and its answer
        answer = {"hung": str(exc)}
    if timed:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return answer


def answer_in_a_fork(modules: dict, question: dict, send, a_write: int, r_read: int) -> None:
    """The learner function runs in a child that ends after this one answer."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _MODEL.update(seq=question.get("seq"), a_write=a_write, r_read=r_read)
        try:
            data = (json.dumps(answer_here(modules, question), ensure_ascii=True) + "\n").encode()
            os.write(write_end, data)
        finally:
            os._exit(0)
    os.close(write_end)
    chunks, deadline = [], PROBE_SECONDS + 1
    import select
    import time
    end, late = time.monotonic() + deadline, False
    while time.monotonic() < end:
        ready, _, _ = select.select([read_end], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            late = True
            break
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    os.waitpid(pid, 0)
    text = b"".join(chunks).decode("utf-8", "replace").strip().splitlines()
    answer = _json(text[-1]) if text else None
    if answer is None:
        answer = {"hung": f"no answer within {PROBE_SECONDS} s"} if late else \
            {"raised": "ProcessEnded", "message": "the call ended its own process"}
    send(answer)


if __name__ == "__main__":
    if len(sys.argv) > 2:
        IMPORT_SECONDS = float(sys.argv[2])
    sys.exit(main(sys.argv[1]))
