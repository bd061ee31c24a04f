"""Stretch milestones: a visible reasoning trace (S1), a careful write tool (S2), a checked
structured answer (S3). Optional, for when M1-M5 pass: `python -m pytest --stretch`.

copilot.py uses this module:
    --trace, --json                           trace_steps turns the transcript into steps   (S1)
    --allow-edits [--apply [--yes]]           offers edit_file; plan_edit checks each edit  (S2)
    --structured                              forces emit_answer; validate_answer checks it (S3)

Your run_agent stays exactly as it is after M4. The stretch tools are wired around it, not into
it: copilot offers their schemas next to TOOL_SCHEMAS, and extra_tools() (stretch_provided.py)
routes their names to the handlers before your dispatch_tool sees the call. The machinery (the
edit tool's policy, writing, asking; the forced emit_answer turn) is provided in stretch_provided.py
and re-exported here; this file holds your three functions and what they build.

Learner-owned (the rest of this file is provided):
    trace_steps      S1  the transcript as Thought -> Action -> Observation steps
    plan_edit        S2  check one edit and compute the new text and its diff, without writing
    validate_answer  S3  check emit_answer's arguments against the repository and the run
"""

from __future__ import annotations

from dataclasses import dataclass, field

import stretch_provided
import tools  # for your plan_edit: resolve_visible, display_path, relative_parts, ToolError
from citations import check_span, lines_seen  # the citation check S3 reuses (citations.py)
from stretch_provided import (  # noqa: F401  provided, re-exported: stretch.<name> keeps working
    EDIT_FILE_SCHEMA, EMIT_ANSWER_SCHEMA, EMIT_RETRIES, FINAL_TURN_PROMPT, FORCE_EMIT_ANSWER,
    MAX_EDIT_BYTES, TEST_DIRS, TEST_FILE_NAMES, TEST_REFUSAL, Edit, EditPolicy, StructuredAnswer,
    apply_edit, ask_on_terminal, edit_policy, extra_tools, is_test_path, plain_answer_arguments,
    read_text, unified_diff,
)


# =========================================================================== S1: reasoning trace

@dataclass
class Action:
    """One tool call of a step, and the observation that answered it."""

    tool: str
    arguments: str              # exactly as the model sent them (a JSON string)
    observation: str | None     # the content of the tool message with this call's id; None if none


@dataclass
class Step:
    """One assistant turn read as ReAct: a Thought, then its Actions (each with its Observation)."""

    number: int                 # 1, 2, ... in transcript order
    thought: str                # the turn's text, stripped; "" when the model said nothing
    actions: list[Action] = field(default_factory=list)   # [] for an answer
    answer: str | None = None   # the text of a turn without tool calls (an answer); else None


def trace_steps(messages) -> list[Step]:
    """The run as ReAct steps, derived from the append-only transcript alone.

    Contract:
        messages   the transcript run_agent extended (plain dicts: system, user, assistant, tool).
        returns    one Step per assistant message, numbered from 1, in order:
                   - a turn with tool_calls: thought = its content stripped ("" for None), one
                     Action per call in the order requested (tool name, arguments string), whose
                     observation is the content of the tool message answering that call's id
                     among the tool messages that follow the turn (before the next assistant
                     turn); None when no tool message answers it;
                   - a turn without tool_calls: an answer step, thought "", actions [], answer =
                     its content ("" for None).
                   Other roles make no step. Never raises for a call nobody answered.

    Hint: match observations by tool_call_id, not by position: parallel results can arrive in any
    order, and some servers reuse ids across turns, so look only at the tool messages after the
    turn. See lesson/lesson.agent.md, "Section 6: Project Assignment" (Extended Requirements).
    """
    steps: list[Step] = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        number = len(steps) + 1
        calls = message.get("tool_calls") or []
        if not calls:
            steps.append(Step(number, "", [], answer=message.get("content") or ""))
            continue
        results = {}
        for later in messages[index + 1:]:
            if later.get("role") != "tool":
                break
            results.setdefault(later.get("tool_call_id"), str(later.get("content", "")))
        actions = [Action(c["function"]["name"], c["function"]["arguments"], results.get(c["id"]))
                   for c in calls]
        steps.append(Step(number, (message.get("content") or "").strip(), actions))
    return steps


# =========================================================================== S2: edit_file
#
# The edit contract is "replace this exact text, which occurs once" (why: stretch_provided.py).
# Your plan_edit checks one edit and builds an Edit (stretch_provided.Edit: path, target, old_text,
# new_text, diff) with the provided is_test_path, read_text and unified_diff; edit_file_tool
# below hands it to the provided tool, which shows or writes it.

def plan_edit(repo_root, path, old_string, new_string) -> Edit:
    """Check one edit_file request and compute what it would change. Writes nothing.

    Contract:
        repo_root   bound by the application, as for every tool.
        path        untrusted (from the model): goes through tools.resolve_visible, which raises
                    ValueError outside the repository and ToolError for excluded files (.env,
                    .git, ...).
        old_string  the exact text to replace (a str); new_string what replaces it (a str).
        returns     Edit(path=<display path>, target=<resolved Path>, old_text=<file now>,
                    new_text=<file with the one replacement>, diff=unified_diff(...)).
        raises      tools.ToolError, with a message the model can act on, when: the path is a test
                    file (is_test_path on the resolved path's parts; say that the tests are the
                    specification, TEST_REFUSAL); the file is not an existing UTF-8 text file
                    (read_text checks that); old_string is empty (say "empty"); old_string occurs
                    zero times (say "not found") or more than once (say how many: "3 times");
                    new_string equals old_string (say they are the "same").

    Hint: judge the *resolved* path (tools.relative_parts), so `src/../tests/x.py` and an in-repo
    symlink to a test file are refused too. str.count tells you how many matches there are.
    See lesson/lesson.agent.md, "Section 6: Project Assignment" (Extended Requirements).
    """
    target = tools.resolve_visible(repo_root, path)
    shown = tools.display_path(repo_root, target)
    if is_test_path(tools.relative_parts(repo_root, target)):
        raise tools.ToolError(f"{shown!r} is a test file: {TEST_REFUSAL}")
    text = read_text(target, shown)
    if not old_string:
        raise tools.ToolError("old_string is empty; copy the exact text to replace from read_file's output")
    matches = text.count(old_string)
    if matches == 0:
        raise tools.ToolError(
            f"old_string was not found in {shown!r}; read_file it again and copy the text exactly, "
            "including indentation, without the line-number prefix")
    if matches > 1:
        raise tools.ToolError(
            f"old_string occurs {matches} times in {shown!r}; include more surrounding lines so "
            "that it matches exactly once")
    if new_string == old_string:
        raise tools.ToolError("new_string is the same as old_string; there is nothing to change")
    new_text = text.replace(old_string, new_string, 1)
    return Edit(shown, target, text, new_text, unified_diff(shown, text, new_text))


def edit_file_tool(args, repo_root, policy: EditPolicy) -> str:
    """The edit_file tool (stretch_provided.edit_file_tool), checking each edit with your plan_edit."""
    return stretch_provided.edit_file_tool(args, repo_root, policy, plan_edit)  # looked up now: patchable


# =========================================================================== S3: emit_answer
#
# copilot --structured forces the emit_answer tool (stretch_provided.EMIT_ANSWER_SCHEMA) after your
# run_agent has answered; your validate_answer checks what the model sent.

def validate_answer(arguments, repo_root, messages, snippets) -> list[str]:
    """Check emit_answer's arguments; return the problems, one readable line each ([] = valid).

    Contract:
        arguments  untrusted: what the model sent (normally a dict with "answer" and "citations").
        repo_root, messages, snippets   the run's root, transcript and injected snippets.
        returns    [] when: arguments is a dict; "answer" is a non-empty string; "citations" is a
                   non-empty list; each citation is a dict with a string "path" and whole-number
                   "start_line" and "end_line" (bool is not a number), 1 <= start_line <= end_line
                   (a start_line below 1 gets a problem saying lines count "from 1"; an end_line
                   before start_line, a problem that names "end_line");
                   and each cited span is grounded: a visible file inside the repository, lines
                   inside the file, and lines that were injected or shown by a tool in this run.
                   Otherwise one problem per failure, naming the citation (e.g. "citations[1]
                   shop/models.py:40-42: ...") and what is wrong, so the model can fix it; for an
                   ungrounded span, check_span's own reason ("no such file", "never read", ...).
        never      raises for bad arguments; never re-implements the citation check.

    Hint: lines_seen(messages, snippets) (from citations.py) gives what the run showed;
    check_span(path, start_line, end_line, repo_root, seen) checks one span and its .grounded /
    .reason say the verdict. See lesson/lesson.agent.md, "Section 6: Project Assignment" (Extended Requirements).
    """
    if not isinstance(arguments, dict):
        return [f"the arguments must be an object with answer and citations, got {type(arguments).__name__}"]
    problems = []
    answer, citations = arguments.get("answer"), arguments.get("citations")
    if not isinstance(answer, str) or not answer.strip():
        problems.append("answer must be a non-empty string")
    if not isinstance(citations, list) or not citations:
        problems.append("citations must be a non-empty list of {path, start_line, end_line}")
        return problems
    seen = lines_seen(messages, snippets)
    for i, cite in enumerate(citations):
        path = cite.get("path") if isinstance(cite, dict) else None
        start = cite.get("start_line") if isinstance(cite, dict) else None
        end = cite.get("end_line") if isinstance(cite, dict) else None
        numbers = all(isinstance(n, int) and not isinstance(n, bool) for n in (start, end))
        if not isinstance(path, str) or not numbers:
            problems.append(f"citations[{i}] must be an object with a string path and whole-number "
                            f"start_line and end_line, got {cite!r:.120}")
        elif not 1 <= start <= end:
            problems.append(f"citations[{i}] {path}:{start}-{end}: lines count from 1 and end_line "
                            "must not be before start_line")
        else:
            checked = check_span(path, start, end, repo_root, seen)
            if not checked.grounded:
                problems.append(f"citations[{i}] {path}:{start}-{end}: {checked.reason}")
    return problems


def finish_with_emit_answer(messages, repo_root, complete, snippets, retries=EMIT_RETRIES) -> StructuredAnswer:
    """After run_agent has answered: force emit_answer, check it with your validate_answer, retry
    once, then stop (stretch_provided.finish_with_emit_answer). Raises NotImplementedError while
    validate_answer (S3) is a stub."""
    return stretch_provided.finish_with_emit_answer(messages, repo_root, complete, snippets, validate_answer, retries)
