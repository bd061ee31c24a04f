"""The provided machinery behind stretch.py: the edit_file tool (S2), the forced emit_answer
turn (S3), and extra_tools, which offers both around your unchanged run_agent.

stretch.py keeps your three functions and re-exports these names, so ``stretch.EditPolicy`` and
``stretch.edit_file_tool`` still work. This module never imports stretch: stretch.py passes your
plan_edit and validate_answer in when it calls edit_file_tool and finish_with_emit_answer here,
looking them up at call time (a test that patches ``stretch.plan_edit`` is heard).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import secrets
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import agent_loop
import tools
from citations import CITATION, line_number  # plain_answer_arguments reads path:line citations with them


# =========================================================================== S2: edit_file
#
# The edit contract is "replace this exact text, which occurs once". The model quotes text it has
# just read, so the tool can check the quote before touching anything: no match, or two matches,
# comes back as an observation and the file stays as it was. The alternatives ask more of a model:
# a unified diff needs line numbers and context lines that drift as soon as it miscounts (the
# agentfix workshop saw ~12B models fail to produce patches that apply), and a whole-file rewrite
# costs output tokens in proportion to the file and hides unintended changes inside the copy.

MAX_EDIT_BYTES = 1_000_000          # larger files are refused: an edit tool is not a data tool
TEST_DIRS = frozenset({"tests", "test", "testing", "__tests__", "spec", "specs"})
TEST_FILE_NAMES = frozenset({"conftest.py", "tests.py", "test.py", "pytest.ini", "tox.ini", "noxfile.py"})
# Test files by their name in the common languages: test_x.py, x_test.py, x_test.go, x.test.js, x.spec.ts ...
TEST_FILE = re.compile(r"test_.+\.py|.+_(?:test|spec)\.(?:py|go|rb|exs?)|.+\.(?:test|spec)\.[a-z0-9]+")
TEST_REFUSAL = "the tests are the specification - change the source instead"

EDIT_FILE_SCHEMA = {
    "type": "function",
    "function": {
        "name": "edit_file",
        "description": (
            "Change an existing file in the repository by replacing one exact piece of text. "
            "old_string must appear exactly once in the file: copy it from read_file's output "
            "(without the line-number prefix), with enough surrounding lines to be unique. "
            "Returns the unified diff of the change. Test files (tests/, test_*.py, *_test.py, "
            "conftest.py), secrets and paths outside the repository are refused. The user may "
            "run in dry-run mode, where the diff is shown and nothing is written."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the repository root."},
                "old_string": {"type": "string", "description": "The exact text to replace; must occur once."},
                "new_string": {"type": "string", "description": "The text to put in its place."},
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": False,
        },
    },
}


@dataclass
class Edit:
    """A checked edit that has not been applied."""

    path: str           # repository-relative, forward slashes (as tools.display_path shows it)
    target: Path        # the resolved file that would change
    old_text: str       # the whole file now
    new_text: str       # the whole file after the replacement
    diff: str           # unified diff from old_text to new_text (a/ and b/ prefixes)


def is_test_path(parts) -> bool:
    """True for a repository-relative path (as components) that belongs to the test suite."""
    names = [part.casefold() for part in parts]
    if not names:
        return False
    name = names[-1]
    return (
        any(part in TEST_DIRS for part in names[:-1])
        or name in TEST_FILE_NAMES
        or TEST_FILE.fullmatch(name) is not None
    )


def read_text(target: Path, shown: str) -> str:
    """The whole file as text, for an edit. Raises ToolError unless it is an existing regular
    UTF-8 text file of at most MAX_EDIT_BYTES. Opened with tools.open_resolved: no symlink is
    followed at any component, no FIFO is waited on, and a hard-linked file is refused (editing
    it would change its other names too: a .env, a test, a file outside the repository)."""
    try:
        with tools.open_resolved(target) as fh:
            data = fh.read(MAX_EDIT_BYTES + 1)
    except tools.ToolError as exc:
        raise tools.ToolError(
            f"{shown!r} is not an existing file that can be edited ({exc}); edit_file changes existing "
            "regular files only (list_directory shows what is there)") from None
    if len(data) > MAX_EDIT_BYTES:
        raise tools.ToolError(f"{shown!r} is larger than {MAX_EDIT_BYTES:,} bytes; edit_file refuses it")
    if b"\x00" in data[:tools.BINARY_SNIFF_BYTES]:
        raise tools.ToolError(f"{shown!r} is a binary file; edit_file changes text files only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise tools.ToolError(f"{shown!r} is not UTF-8 text; edit_file refuses to rewrite it") from None


def unified_diff(path: str, old: str, new: str) -> str:
    """The change as a unified diff, the format `git diff` prints."""
    lines = difflib.unified_diff(_with_ends(old), _with_ends(new), f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _with_ends(text: str) -> list[str]:
    """Lines split as tools.split_lines splits them (on "\\n" only), each keeping its ending."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


@dataclass
class EditPolicy:
    """What the user allowed: copilot.py --allow-edits (a dry run), --apply, --yes.

    ``confirm(edit) -> bool`` asks the user. None means nobody can be asked (--json, or no
    terminal), and then applying is refused: no channel to ask means no.
    """

    apply: bool = False
    confirm: Callable[[Edit], bool] | None = None
    log: list[dict] = field(default_factory=list)   # one entry per edit_file call, for the report

    def record(self, path: str, status: str, reason: str = "", diff: str = "") -> None:
        self.log.append({"path": path, "status": status, "reason": reason, "diff": diff})


def edit_file_tool(args, repo_root, policy: EditPolicy, plan_edit) -> str:
    """The edit_file tool: check the edit with ``plan_edit`` (stretch.plan_edit, S2), then show it
    (dry run) or write it once the user has confirmed. Refusals come back as "Error: ..." text the
    model reads, never as an exception; every call is recorded in ``policy.log``. Files are opened
    from ``repo_root`` down (tools.rooted), never from the filesystem's root."""
    with tools.rooted(repo_root):
        return _edit_file(args, repo_root, policy, plan_edit)


def _edit_file(args, repo_root, policy: EditPolicy, plan_edit) -> str:
    problem = _edit_arguments_problem(args)
    if problem:
        return f"Error: {problem}"
    try:
        edit = plan_edit(repo_root, args["path"], args["old_string"], args["new_string"])
    except ValueError as exc:  # the sandbox: the path is outside the repository
        return _refuse(policy, args["path"], "refused", f"{exc}; edit_file changes files inside the repository only")
    except tools.ToolError as exc:
        return _refuse(policy, args["path"], "refused", str(exc))
    if not policy.apply:
        policy.record(edit.path, "dry_run", diff=edit.diff)
        return (f"Dry run: {edit.path} was NOT changed (the user runs without --apply). "
                f"This is the change edit_file would make:\n{edit.diff}")
    if policy.confirm is None:
        return _refuse(policy, edit.path, "unconfirmed",
                       "applying an edit needs the user's confirmation and nobody can confirm here "
                       "(--json or no terminal); the user can rerun with --yes", edit.diff)
    if not policy.confirm(edit):
        return _refuse(policy, edit.path, "declined",
                       "the user declined this edit; do not repeat it, describe the change in your answer", edit.diff)
    try:
        apply_edit(edit)
    except (OSError, tools.ToolError) as exc:
        return _refuse(policy, edit.path, "refused", f"could not write: {exc}", edit.diff)
    policy.record(edit.path, "applied", diff=edit.diff)
    return f"Applied: {edit.path} was changed:\n{edit.diff}"


def _refuse(policy: EditPolicy, path, status: str, reason: str, diff: str = "") -> str:
    policy.record(tools.printable(str(path)), status, reason, diff)
    return f"Error: edit_file did not change {path!r}: {reason}"


def _edit_arguments_problem(args) -> str | None:
    if not isinstance(args, dict):
        return "edit_file's arguments must be a JSON object"
    wanted = EDIT_FILE_SCHEMA["function"]["parameters"]["required"]
    missing = [key for key in wanted if key not in args]
    unexpected = sorted(set(args) - set(wanted), key=repr)  # key=repr: a caller's dict may mix key types
    wrong = [key for key in wanted if key in args and not isinstance(args[key], str)]
    if missing or unexpected or wrong:
        return (f"edit_file takes exactly the string arguments {', '.join(wanted)} "
                f"(missing: {missing or 'none'}, unexpected: {tools.shorten(unexpected) if unexpected else 'none'}, not strings: {wrong or 'none'})")
    return None


def apply_edit(edit: Edit) -> None:
    """Write the edit, unless the file changed after plan_edit read it (then ToolError).

    Writes a new file beside the target and renames it over the name (os.replace): a hard link
    is never written through, a symlink planted at the name is replaced rather than followed,
    the folder is reached without following links (tools.open_resolved; where the OS has no
    openat(), checked just before writing), and nobody ever reads half a file. The file keeps
    its permission bits.
    """
    if read_text(edit.target, edit.path) != edit.old_text:
        raise tools.ToolError(f"{edit.path!r} changed after the edit was checked; read it again and redo the edit")
    data, name = edit.new_text.encode("utf-8"), edit.target.name
    temp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.edit"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    folder = tools.open_resolved(edit.target, write_dir=True)  # -1 where the OS has no openat()
    at = {"dir_fd": folder} if folder >= 0 and os.rename in os.supports_dir_fd else None
    try:
        if at is not None:
            mode = stat.S_IMODE(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
            fd = os.open(temp, flags, mode, dir_fd=folder)
        else:
            temp = str(edit.target.with_name(temp))
            fd = os.open(temp, flags, stat.S_IMODE(os.lstat(edit.target).st_mode))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            if at is not None:
                os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
            else:
                os.replace(temp, edit.target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, **(at or {}))
            raise
    finally:
        if folder >= 0:
            os.close(folder)


def ask_on_terminal(edit: Edit) -> bool:
    """Show the diff and ask y/N on the terminal (stderr); anything but y or yes means no."""
    print("\n".join(tools.printable(line) for line in edit.diff.split("\n")), file=sys.stderr)  # no raw ESC
    print(f"Apply this edit to {edit.path}? [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def edit_policy(allow_edits: bool, apply: bool, yes: bool, json_output: bool) -> EditPolicy | None:
    """copilot.py's --allow-edits / --apply / --yes as an EditPolicy, or None: edit_file is not
    offered. Raises ValueError (one line for the user) for a flag without its prerequisite."""
    if not allow_edits:
        if apply or yes:
            raise ValueError("--apply and --yes need --allow-edits")
        return None
    if yes and not apply:
        raise ValueError("--yes confirms the edits that --apply writes: use --allow-edits --apply --yes")
    if yes:
        confirm = _always_yes
    elif json_output or not _stdin_is_terminal():
        confirm = None  # a prompt into a pipe would hang, or read the next line of data as consent
    else:
        confirm = ask_on_terminal
    return EditPolicy(apply=apply, confirm=confirm)


def _always_yes(edit: Edit) -> bool:
    return True


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdin
        return False


# =========================================================================== S3: emit_answer

EMIT_ANSWER_SCHEMA = {
    "type": "function",
    "function": {
        "name": "emit_answer",
        "description": (
            "Give your final answer and the evidence for it. Each citation is a file path and a "
            "line range that you were shown in this conversation (the injected context, a "
            "read_file result or a search_code hit). Citations are checked against the repository "
            "and the conversation; an answer with a citation that fails is sent back to you."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "answer": {"type": "string", "description": "The answer, briefly, in plain text."},
                "citations": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string", "description": "File path relative to the repository root."},
                            "start_line": {"type": "integer", "minimum": 1},
                            "end_line": {"type": "integer", "minimum": 1},
                        },
                        "required": ["path", "start_line", "end_line"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["answer", "citations"],
            "additionalProperties": False,
        },
    },
}

# tool_choice naming one function, in OpenAI's format. LiteLLM 1.110.2 passes it on unchanged for
# openai/, groq/ and hosted_vllm/, turns it into {"type": "tool", "name": ...} for anthropic/ and
# into functionCallingConfig mode ANY (allowed_function_names) for gemini/. It cannot be forced
# everywhere: for ollama_chat/ LiteLLM drops tool_choice altogether, and for Anthropic models that
# reject forced tools it downgrades to "auto" (llm.make_complete sends drop_params=True on this
# call). The model may then reply in plain text, and finish_with_emit_answer validates that text.
FORCE_EMIT_ANSWER = {"type": "function", "function": {"name": "emit_answer"}}
EMIT_RETRIES = 1        # an invalid answer goes back to the model once, then the run ends
FINAL_TURN_PROMPT = (
    "Now give your final answer by calling emit_answer: the answer, and for each claim the path, "
    "start_line and end_line of lines you were shown in this conversation."
)


@dataclass
class StructuredAnswer:
    """How the forced emit_answer turn(s) ended."""

    answer: str
    citations: list             # as the model sent them
    problems: list[str]         # [] when the last attempt was valid
    attempts: int               # forced model calls made (1 + retries used)
    forced: bool                # False when the reply was plain text (the provider ignored tool_choice)

    @property
    def accepted(self) -> bool:
        return not self.problems


def finish_with_emit_answer(messages, repo_root, complete, snippets, validate_answer,
                            retries=EMIT_RETRIES) -> StructuredAnswer:
    """After run_agent has answered: force emit_answer, check it with ``validate_answer``
    (stretch.validate_answer, S3), send it back once if it fails, then stop.

    Appends to ``messages`` like the loop does (the forced turn, then one tool message per call),
    so the transcript stays valid for every provider. ``complete`` must accept ``tool_choice=``.
    Raises NotImplementedError while validate_answer (S3) is a stub.
    """
    messages.append({"role": "user", "content": FINAL_TURN_PROMPT})
    offered = [*tools.TOOL_SCHEMAS, EMIT_ANSWER_SCHEMA]  # the same tools as before, plus the answer
    for attempt in range(1, retries + 2):
        message = complete(messages, offered, tool_choice=FORCE_EMIT_ANSWER)
        calls = agent_loop.parse_tool_calls(message)
        chosen = next((c for c in calls if c.name == "emit_answer"), None)
        if chosen is not None:
            arguments = chosen.arguments
            problems = [f"the arguments were unusable: {chosen.error}"] if chosen.error else \
                validate_answer(arguments, repo_root, messages, snippets)
        else:  # no emit_answer call: a provider that cannot force a tool (LiteLLM drops it for ollama_chat/)
            arguments = plain_answer_arguments(getattr(message, "content", None) or "")
            problems = validate_answer(arguments, repo_root, messages, snippets)
        verdict = "Accepted." if not problems else (
            "Error: the answer was not accepted:\n" + "\n".join(f"- {p}" for p in problems)
            + "\nCall emit_answer again and cite only lines you were shown in this conversation.")
        _record_reply(messages, message, calls, chosen, verdict)
        if not problems:
            break
    answer = arguments.get("answer") if isinstance(arguments, dict) else None
    cited = arguments.get("citations") if isinstance(arguments, dict) else None
    return StructuredAnswer(answer if isinstance(answer, str) else "", cited if isinstance(cited, list) else [],
                            problems, attempt, chosen is not None)


def plain_answer_arguments(content: str) -> dict:
    """emit_answer's arguments read from a plain-text answer: its path:line citations (CITATION)."""
    citations = []
    for match in CITATION.finditer(content):
        line = line_number(match.group(2))  # bounded: int() refuses a 4,301-digit number outright
        end = max(line_number(match.group(3)) if match.group(3) else line, line)
        citations.append({"path": match.group(1).removeprefix("./"), "start_line": line, "end_line": end})
    return {"answer": content, "citations": citations}


def _record_reply(messages, message, calls, chosen, verdict: str) -> None:
    """Append the forced turn and answer every call in it (providers reject unanswered calls)."""
    if not calls:
        messages.append({"role": "assistant", "content": getattr(message, "content", None) or ""})
        if verdict != "Accepted.":
            messages.append({"role": "user", "content": verdict})
        return
    messages.append(agent_loop.assistant_turn(message))
    for call in calls:
        reply = verdict if call is chosen else "Error: only emit_answer can be called now."
        messages.append(agent_loop.tool_result(call.id, reply))


# =========================================================================== wiring (S2 and S3)

@contextmanager
def extra_tools(complete, extra: dict):
    """Offer extra tools around your run_agent, which stays unchanged.

    ``extra`` maps a tool name to (schema, handler), where ``handler(args, repo_root) -> str``.
    Inside the ``with`` block the model is offered TOOL_SCHEMAS plus these schemas (through the
    ``complete`` this yields), and calls of these names are routed to their handlers; every other
    call still goes to your dispatch_tool. run_agent looks dispatch_tool up by name when it calls
    it, so it is swapped for a router here and always put back afterwards. With no extra tools,
    nothing is swapped.
    """
    if not extra:
        yield complete
        return
    schemas = [schema for schema, _ in extra.values()]
    handlers = {name: handler for name, (_, handler) in extra.items()}
    original_loop, original_tools = agent_loop.dispatch_tool, tools.dispatch_tool

    def dispatch(name, args, repo_root):
        handler = handlers.get(name)
        return original_loop(name, args, repo_root) if handler is None else handler(args, repo_root)

    def offering(messages, tool_schemas, **options):
        return complete(messages, [*tool_schemas, *schemas], **options)

    agent_loop.dispatch_tool = tools.dispatch_tool = dispatch
    try:
        yield offering
    finally:
        agent_loop.dispatch_tool, tools.dispatch_tool = original_loop, original_tools
