"""What one run produced, and how it is shown: plain report, trace, JSON, transcript.

    Result                  everything one run produced; Result.to_json() is what --json prints
    print_report(result)    the answer, its citations, edits (S2), one summary line
    format_trace(steps)     stretch.Step objects as Thought / Action / Observation text (S1)
    save_transcript(...)    --save-transcript: the JSON document plus every message
    terminal_safe(text)     control characters as visible escapes: every plain-text output uses it

Below copilot.py: it imports agent_loop (the max-steps marker), llm (Usage) and stretch (the trace),
never copilot.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path

import agent_loop
import llm
import stretch
from cli import json_text, terminal_safe  # report.terminal_safe: the one filter for printed text

TRACE_OBSERVATION_CHARS = 240   # --trace shortens each observation to this
TRACE_NOT_DONE = "--trace is stretch milestone S1: implement stretch.trace_steps; see PROJECT.md"

class SafeOutput:
    """A text stream that passes everything written through terminal_safe."""

    def __init__(self, out):
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(terminal_safe(text))

    def flush(self) -> None:
        self.out.flush()


@dataclass
class Result:
    """Everything one run produced; ``to_json()`` is what --json prints."""

    question: str
    repo: str
    model: str
    answer: str
    termination: str                     # "answered", "max_steps", "empty_answer", "tool_call_as_text"
                                         # or "invalid_answer" (--structured)
    messages: list = field(default_factory=list)
    snippets: list = field(default_factory=list)
    citations: list = field(default_factory=list)
    usage: llm.Usage = field(default_factory=llm.Usage)
    wall_seconds: float = 0.0
    structured: stretch.StructuredAnswer | None = None   # --structured (S3): how emit_answer went
    edits: list | None = None            # --allow-edits (S2): one entry per edit_file call

    @property
    def exit_code(self) -> int:
        return 0 if self.termination == "answered" else 1

    @property
    def tool_calls(self) -> list[dict]:
        return tool_calls_of(self.messages)

    def to_json(self, with_trace: bool = True) -> dict:
        data = {
            "question": self.question,
            "repo": self.repo,
            "model": self.model,
            "answer": self.answer,
            "termination": self.termination,
            "exit_code": self.exit_code,
            "citations": [{**asdict(c), "grounded": c.grounded} for c in self.citations],
            "tool_calls": self.tool_calls,
            "context": [{"path": s.path, "start_line": s.start_line, "end_line": s.end_line, "score": s.score}
                        for s in self.snippets],
            "usage": {**asdict(self.usage), "tool_calls": len(self.tool_calls),
                      "wall_seconds": round(self.wall_seconds, 3)},
        }
        if with_trace:
            steps, note = trace_or_note(self.messages)
            data["trace"] = None if steps is None else [asdict(s) if is_dataclass(s) else s for s in steps]
            if note:
                data["trace_note"] = note
        if self.structured is not None:
            data["structured"] = asdict(self.structured)
        if self.edits is not None:
            data["edits"] = self.edits
        return data


def tool_calls_of(messages) -> list[dict]:
    """Every tool call in the transcript: step, name, arguments (as sent), and whether it errored.

    Results are paired with calls by id, in order, each result used once: a repeated id (which
    llm.bounded_reply prevents, but a transcript may come from elsewhere) still pairs
    each call with its own result.
    """
    results: dict = {}
    for m in messages:
        if m.get("role") == "tool":
            results.setdefault(str(m.get("tool_call_id")), []).append(str(m.get("content", "")))
    calls, step = [], 0
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            step += 1
            for call in message["tool_calls"]:
                fn = call.get("function", {})
                waiting = results.get(str(call.get("id")), [])
                result = waiting.pop(0) if waiting else ""
                calls.append({"step": step, "name": fn.get("name"), "arguments": fn.get("arguments"),
                              "error": result.startswith("Error:")})
    return calls


# --------------------------------------------------------------------------- the plain report

def print_report(result: Result, trace: bool = False, out=None) -> None:
    """The plain report. Everything goes through terminal_safe: file names, contents and the
    model's text can hold escape sequences."""
    out = SafeOutput(out or sys.stdout)
    if trace:
        steps, note = trace_or_note(result.messages)
        if steps is not None:
            print(format_trace(steps), end="\n\n", file=out)
        else:
            print(f"copilot: {terminal_safe(note)}", file=sys.stderr)
    if result.termination == "empty_answer":
        print(f"(no answer: {empty_reply_reason(result.usage.finish_reason)})", file=out)
    elif result.termination == "tool_call_as_text":
        print(f"(no answer: the model's last reply is a tool call written as text, which the provider did not "
              f"turn into a call:)\n{result.answer}\n(this model does not call tools reliably: try another)", file=out)
    else:
        print(result.answer, file=out)
        if result.usage.quoted_calls:  # text_calls.py: a local model's reply quoting a call inside other text
            print("\n(note: the model's reply quotes a tool call inside other text; it was kept as text, not run)",
                  file=out)
        if result.termination == "answered" and str(result.usage.finish_reason).startswith("length"):
            print(f"\n(the reply reached the {result.usage.answer_cap:,}-token cap of one model call: it may be cut off)", file=out)
    if result.structured is not None:
        print_structured(result.structured, out)
    if result.citations:
        print("\nCitations:", file=out)
        for c in result.citations:
            where = f"{c.path}:{c.line}" + (f"-{c.end_line}" if c.end_line != c.line else "")
            verdict = "grounded" if c.grounded else f"UNGROUNDED ({c.reason})"
            print(f"  {where}  {verdict}", file=out)
    elif result.termination == "answered":
        print("\nCitations: none (the answer cites no path:line, so nothing backs it)", file=out)
    if result.edits is not None:
        print_edits(result.edits, out)
    print("\n" + summary_line(result), file=out)


def empty_reply_reason(finish_reason: str | None) -> str:
    """Why a model's reply had neither text nor a tool call, from its finish reason."""
    said = f"finish reason {finish_reason}" if finish_reason else "no finish reason reported"
    if str(finish_reason).startswith("length"):
        return (f"the model reached the {llm.MAX_ANSWER_TOKENS:,}-token cap of one reply before writing "
                f"any text ({said}); reasoning models can spend it all thinking: ask a narrower question "
                "or choose another model")
    if str(finish_reason).startswith("content_filter"):
        return f"the provider withheld the reply ({said}): rephrase the question or choose another model"
    return f"the model ended its turn with no text and no tool call ({said}): ask again or choose another model"


def summary_line(result: Result) -> str:
    u = result.usage
    cost = f"${u.cost_usd:.4f}" if u.cost_usd is not None else "cost unknown"
    ended = {"answered": "answered", "invalid_answer": "stopped: the structured answer failed validation",
             "empty_answer": "stopped: the model's last reply was empty",
             "tool_call_as_text": "stopped: the model wrote a tool call as text"}.get(
        result.termination, f"stopped: {agent_loop.MAX_STEPS_REACHED}")
    took = f"{result.wall_seconds:.1f} s"
    if u.model_seconds or u.startup_seconds:  # a real model: what the provider took, apart from start-up
        took += f" (model {u.model_seconds:.1f} s, LiteLLM start-up {u.startup_seconds:.1f} s)"
    calls = f"{len(result.tool_calls)} tool calls" + (f" ({u.recovered_calls} written as text, recovered)"
                                                      if u.recovered_calls else "")
    return (f"[{u.steps} steps | {calls} | tokens {u.prompt_tokens:,} in / "
            f"{u.completion_tokens:,} out | {cost} | {took} | {ended}]")


def print_structured(final, out) -> None:
    """--structured (S3): how the forced emit_answer turn went, and every problem if it failed."""
    how = "emit_answer" if final.forced else "plain text (the provider did not force emit_answer)"
    tries = f"{final.attempts} attempt" + ("s" if final.attempts != 1 else "")
    if final.accepted:
        print(f"\nStructured answer: accepted ({how}, {tries})", file=out)
        return
    print(f"\nStructured answer: REJECTED after {tries} ({how}):", file=out)
    for problem in final.problems:
        print(f"  - {problem}", file=out)


def print_edits(edits, out) -> None:
    """--allow-edits (S2): what happened to every edit_file call; dry runs and writes show their diff."""
    print("\nEdits:" if edits else "\nEdits: none requested", file=out)
    labels = {"dry_run": "dry run, NOT applied (add --apply to write it)", "applied": "applied"}
    for edit in edits:
        label = labels.get(edit["status"], f"{edit['status']}: {edit['reason']}")
        print(f"  {edit['path']}  {label}", file=out)
        if edit["status"] in labels and edit["diff"]:
            print("".join(f"    {line}" for line in edit["diff"].splitlines(keepends=True)).rstrip(), file=out)


def save_transcript(result: Result, path) -> str | None:
    """--save-transcript: write the JSON document plus every message to ``path``.

    Returns None, or one line saying why nothing was written (the caller still prints the
    answer): a missing folder, a directory, a symlink (never followed: it may have been planted
    to make the copilot overwrite another file) or a file with several hard links.
    """
    data = json_text({**result.to_json(), "messages": result.messages}, indent=1)
    shown = repr(str(path))[:200]
    target = Path(path)
    flags = (os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NONBLOCK", 0))  # a FIFO without a reader fails at once instead of waiting
    try:
        if target.is_symlink():
            return f"--save-transcript: {shown} is a symlink; it is not followed, and nothing was written"
        fd = os.open(target, flags, 0o600)  # O_NOFOLLOW: a link planted since the check is refused too
    except IsADirectoryError:
        return f"--save-transcript: {shown} is a directory; name a file"
    except FileNotFoundError:
        return f"--save-transcript: the folder of {shown} does not exist; create it or name another file"
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        return f"--save-transcript: cannot write {shown}: {getattr(exc, 'strerror', None) or exc}"
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            return f"--save-transcript: {shown} is not a plain file (a FIFO, a device, or hard-linked); nothing was written"
        fh.truncate(0)
        fh.write(data)
    return None


def save_last_run(result: Result, cache_dir) -> None:
    """Record that the copilot finished a run through a provider, for the test board's M5 (harness/
    progress.py): which implementation ran, from which checkout (the file is named after it, so
    clones never share a record), and whether the replies were the lab's fake server's (scripted).
    Never fails the run."""
    from harness.progress import record_name

    where = Path(agent_loop.__file__).resolve().parent
    code_dir = Path(__file__).resolve().parent
    record = {"implementation": "code" if where == code_dir else "reference", "code_dir": str(code_dir),
              "model": result.model, "scripted": result.usage.scripted, "termination": result.termination,
              "steps": result.usage.steps, "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = Path(cache_dir) / record_name(code_dir)
    try:  # a scripted or --reference run never replaces the record of a real run of this code
        before = json.loads(path.read_text(encoding="utf-8"))
        rank = lambda r: (r.get("implementation") == "code", not r.get("scripted"))  # noqa: E731
        if isinstance(before, dict) and rank(before) > rank(record):
            return
    except (OSError, ValueError):
        pass
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1), encoding="utf-8")
    except OSError:
        pass  # a read-only cache folder: the board keeps showing M5 as pending, nothing breaks


# --------------------------------------------------------------------------- the trace (S1)

def trace_or_note(messages):
    """(steps, None) from stretch.trace_steps (S1), or (None, one line saying why there is no trace)."""
    try:
        return stretch.trace_steps(messages), None
    except NotImplementedError:
        return None, TRACE_NOT_DONE
    except Exception as exc:  # a bug in stretch work must not cost the user the answer
        if os.environ.get("COPILOT_DEBUG") == "1":
            raise
        return None, (f"stretch.trace_steps raised {type(exc).__name__}: {llm.first_line(exc)} "
                      "(COPILOT_DEBUG=1 shows where)")


def format_trace(steps) -> str:
    """stretch.Step objects as text: Thought, then Action and Observation for each call."""
    lines = []
    for step in steps:
        lines.append(f"Step {step.number}")
        if not step.actions:  # only the last answer is the one printed below the trace
            shown = "(printed below)" if step is steps[-1] else _shorten(step.answer or "", TRACE_OBSERVATION_CHARS)
            lines.append(f"  Answer: {shown}")
        elif step.thought:
            lines.append(f"  Thought: {_shorten(step.thought, TRACE_OBSERVATION_CHARS)}")
        for action in step.actions:
            observation = action.observation
            if observation is None:
                observation = "(none: no tool message answered this call)"
            lines.append(f"  Action: {action.tool}({action.arguments})")
            lines.append(f"  Observation: {_shorten(observation, TRACE_OBSERVATION_CHARS)}")
    return "\n".join(lines)


def _shorten(text: str, limit: int) -> str:
    flat = " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 20] + f" ... [{len(flat):,} chars]"
