"""A run you can watch: each step on stderr as it happens (copilot.py shows it on a terminal).

    LiveView(stream, ticking)     what llm.counting tells as your run_agent calls the model
        .calling(step, messages)  a model call starts: first the results of the last turn's tools
                                  (read from ``messages``, which your loop filled), then the call,
                                  with an elapsed time that ticks on a terminal
        .replied(step, reply)     the reply: each tool call it asks for, with its arguments, or the answer
        .failed(step, exc)        the call failed (the one error line comes from copilot.py)
        .finished(...)            the stop reason, once the run is over
    wanted(flag, stream)          on or off: --progress / --no-progress, else "is stderr a terminal?"

It hangs off provided code only: llm.counting calls it around each model call, so your run_agent
and dispatch_tool are unchanged and the screen shows your own loop. A tool's result appears when
the next model call starts (or when the run ends), because that is when the provided code sees
the message your loop added. Nothing goes to stdout; every piece of model, tool or server text is
escaped (cli.terminal_safe) and cut to one line first.
"""

from __future__ import annotations

import json
import threading
import time

from cli import terminal_safe

TICK_SECONDS = 0.5          # a terminal's elapsed time is redrawn this often
PLAIN_WAIT_NOTE = 30.0      # without a terminal, a line every this many seconds of waiting
LINE_CHARS = 110            # model and tool text is cut to this many characters per line


def wanted(flag, stream) -> bool:
    """``flag`` (True/False from --progress/--no-progress) if given, else whether ``stream`` is a terminal."""
    if flag is not None:
        return bool(flag)
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def one_line(text, limit: int = LINE_CHARS) -> str:
    """``text`` as one escaped line of at most ``limit`` characters (untrusted: a model's, a file's)."""
    flat = " ".join(str(text).split())
    if len(flat) > limit:
        flat = flat[:limit - 3] + "..."
    return terminal_safe(flat)


def _get(item, key):
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


class LiveView:
    """Writes the steps of one run to ``stream``; ``ticking`` redraws the waiting line in place (a terminal)."""

    def __init__(self, stream, ticking: bool, model: str = "the model"):
        self.stream, self.ticking, self.model = stream, ticking, model
        self.started = time.perf_counter()
        self._calls: dict[str, str] = {}   # id -> tool name, for calls whose result is not shown yet
        self._seen = 0                     # messages already looked at
        self._stop = None
        self._ticker = None
        self._call_started = 0.0
        self._drawn = 0                    # characters of the ticking line on the screen now

    # ------------------------------------------------------------------ what llm.counting tells
    def calling(self, step: int, messages) -> None:
        self.results(messages)
        self._call_started = time.perf_counter()
        label = f"[{step}] asking {one_line(self.model, 60)}"
        if not self.ticking:
            self._write(f"{label} ...")
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, args=(step, label, self._stop), daemon=True,
                                        name="live-view")
        self._ticker.start()

    def replied(self, step: int, reply, finish=None) -> None:
        took = self._end_wait()
        calls = list(_get(reply, "tool_calls") or [])
        text = _get(reply, "content")
        said = f"[{step}] reply after {took:.1f} s: "
        if calls:
            self._write(said + (f"{len(calls)} tool calls" if len(calls) > 1 else "1 tool call"))
            thought = text.strip() if isinstance(text, str) else ""
            if thought:
                self._write(f"      thought: {one_line(thought)}")
            for raw in calls:
                function = _get(raw, "function")
                name, arguments, call_id = _get(function, "name"), _get(function, "arguments"), _get(raw, "id")
                self._calls[str(call_id)] = str(name)
                recovered = " (written as text, recovered)" if str(call_id).startswith("text_call_") else ""
                self._write(f"  -> {one_line(name, 40)} {self._arguments(arguments)}{recovered}")
        elif isinstance(text, str) and text.strip():
            self._write(said + f"an answer, {len(text):,} characters")
        else:
            self._write(said + "an empty reply")
        if finish and str(finish).split(" ")[0] not in ("stop", "tool_calls", "None"):
            self._write(f"      finish reason: {one_line(finish, 80)}")

    def failed(self, step: int, exc: BaseException) -> None:
        took = self._end_wait()
        self._write(f"[{step}] failed after {took:.1f} s ({one_line(type(exc).__name__, 40)})")

    def results(self, messages) -> None:
        """The results of tool calls shown so far, from the messages the loop added since last time."""
        try:
            fresh = list(messages)[self._seen:]
            self._seen += len(fresh)
        except TypeError:
            return
        for message in fresh:
            if _get(message, "role") != "tool":
                continue
            name = self._calls.pop(str(_get(message, "tool_call_id")), "tool")
            content = _get(message, "content")
            text = content if isinstance(content, str) else str(content)
            if text.startswith("Error:"):
                self._write(f"  <- {one_line(name, 40)} refused: {one_line(text[6:].strip(), 90)}")
            else:
                lines = text.count("\n") + 1 if text else 0
                self._write(f"  <- {one_line(name, 40)}: {lines:,} lines, {len(text):,} characters")

    def finished(self, termination: str, steps: int, messages=None) -> None:
        if messages is not None:
            self.results(messages)
        took = time.perf_counter() - self.started
        self._write(f"[stop] {one_line(termination, 40)} after {steps} model call{'s' if steps != 1 else ''}, "
                    f"{took:.1f} s")

    # ------------------------------------------------------------------ the waiting line
    def _tick(self, step: int, label: str, stop: threading.Event) -> None:
        """A terminal: the waiting line redrawn in place with the seconds so far. Otherwise a plain
        line now and then, so a log shows the run is still waiting and not stuck."""
        if not self.ticking:
            while not stop.wait(PLAIN_WAIT_NOTE):
                self._write(f"[{step}] still waiting, {time.perf_counter() - self._call_started:.0f} s")
            return
        while True:
            line = f"{label} ... {time.perf_counter() - self._call_started:.0f} s"
            self._raw("\r" + line.ljust(self._drawn))  # spaces, not an escape code: any console clears this way
            self._drawn = len(line)
            if stop.wait(TICK_SECONDS):
                return

    def _end_wait(self) -> float:
        took = time.perf_counter() - self._call_started
        if self._stop is not None:
            self._stop.set()
            self._ticker.join()
            self._stop = self._ticker = None
            if self.ticking:  # the ticking line gives way to the step's line
                self._raw("\r" + " " * self._drawn + "\r")
                self._drawn = 0
        return took

    def _arguments(self, arguments) -> str:
        try:
            decoded = json.loads(arguments) if isinstance(arguments, str) else arguments
        except (ValueError, RecursionError):
            return one_line(arguments, 80)
        if isinstance(decoded, dict) and all(isinstance(k, str) for k in decoded):
            return one_line(", ".join(f"{k}={v!r}" for k, v in decoded.items()), 80)
        return one_line(arguments, 80)

    def _write(self, line: str) -> None:
        self._raw(line + "\n")

    def _raw(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not end the run
            pass
