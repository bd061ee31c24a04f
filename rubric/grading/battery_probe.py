"""Run in the sandbox by grading/battery.py: calls the learner's functions and reports what they did.

    python battery_probe.py CODE_DIR

Reads one question per line on stdin ({"nonce", "op": "resolve" | "dispatch" | "parse" | "loop",
...}), calls the learner's function (safe_resolve, dispatch_tool, parse_tool_calls, run_agent
against a scripted model), and answers with one JSON line on stdout carrying the question's nonce: what
the function returned (as text) or raised. It judges nothing: the grader decides, in its own
process, against the real files, after this process is gone. The next question (and its nonce)
is only sent once this answer arrived, and on POSIX each question is answered in a fresh fork, so
whatever a learner function patches (this module, the grader's, the standard library) is gone
before the next question: it can at most change its own answer. Standard library only.
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
    answer = {"nonce": question["nonce"]}
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
        turn = script[min(len(seen), len(script)) - 1]
        if len(seen) > 50:   # a loop that ignores its cap: stop it here, the count already shows it
            raise ProbeTimeout("more than 50 model calls")
        return _message(turn["calls"], turn.get("content", "")) if "calls" in turn else _answer(turn["answer"])
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    got = agent_loop.run_agent(messages, question["root"], complete, max_steps=question["max_steps"])
    answer["transcript"] = _summary(messages)
    return got


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
    """The names of the functions the exception came through, innermost last (which function raised)."""
    names, tb = [], exc.__traceback__
    while tb is not None and len(names) < 40:
        names.append(str(tb.tb_frame.f_code.co_name)[:60])
        tb = tb.tb_next
    return names[-8:]


def _safe_str(exc) -> bool:
    try:
        str(exc)
        return True
    except BaseException:  # noqa: BLE001
        return False


def main(code_dir: str) -> int:
    out = sys.stdout
    send = lambda rec: (out.write(json.dumps(rec, ensure_ascii=True) + "\n"), out.flush())  # noqa: E731
    hello = json.loads(sys.stdin.readline())
    sys.path.insert(0, str(Path(code_dir).resolve()))
    errors = []
    try:
        import tools
    except BaseException as exc:  # noqa: BLE001
        send({"nonce": hello["nonce"], "import_errors": [["tools.py", f"{type(exc).__name__}: {str(exc)[:300]}"]]})
        return 0
    modules = {"tools": tools}
    try:
        import agent_loop
        modules["agent_loop"] = agent_loop
    except BaseException as exc:  # noqa: BLE001
        errors.append(["agent_loop.py", f"{type(exc).__name__}: {str(exc)[:300]}"])
    send({"nonce": hello["nonce"], "import_errors": errors})
    for line in sys.stdin:
        question = json.loads(line)
        if hasattr(os, "fork"):
            answer_in_a_fork(modules, question, send)
        else:
            send(answer_here(modules, question))
    return 0


def answer_here(modules: dict, question: dict) -> dict:
    timed = hasattr(signal, "setitimer")
    if timed:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, PROBE_SECONDS)
    try:
        answer = call(modules, question)
    except ProbeTimeout as exc:  # the alarm rang between the call and its answer
        answer = {"nonce": question["nonce"], "hung": str(exc)}
    if timed:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return answer


def answer_in_a_fork(modules: dict, question: dict, send) -> None:
    """The learner function runs in a child that ends after this one answer."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            data = (json.dumps(answer_here(modules, question), ensure_ascii=True) + "\n").encode()
            os.write(write_end, data)
        finally:
            os._exit(0)
    os.close(write_end)
    chunks, deadline = [], PROBE_SECONDS + 2
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
    try:
        answer = json.loads(text[-1]) if text else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or answer.get("nonce") != question["nonce"]:
        answer = {"nonce": question["nonce"], "hung": f"no answer within {PROBE_SECONDS} s"} if late else \
            {"nonce": question["nonce"], "raised": "ProcessEnded", "message": "the call ended its own process"}
    send(answer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
