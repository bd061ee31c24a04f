"""Citation checking: is every ``path:line`` an answer cites real, and was it shown in this run?

    lines_seen(messages, snippets)     path -> line ranges the model was shown (context, tools)
    check_citations(answer, ...)       every path:line in a plain answer, checked
    check_span(path, start, end, ...)  one span, checked the same way (stretch S3 uses it)
    structured_citations(final, ...)   emit_answer's citations (S3), checked for the report

A citation is grounded when its file is visible inside the repository (through the sandbox), its
lines exist, and those lines were injected or returned by a tool in this run. Below copilot.py and
stretch.py; imports neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import tools

# path:line or path:start-end, where the path has a file extension ("config.py:40", "a/b.md:3-9").
CITATION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]*\w\.[A-Za-z0-9_]+):(\d+)(?:\s*[-\u2013]\s*(\d+))?")
READ_HEADER = re.compile(r"^\[File: (.+?) \((\d+) lines total\) - showing lines (\d+)-(\d+)\]", re.M)
SEARCH_HIT = re.compile(r"^(.+?):(\d+): ", re.M)


class Shown(tuple):
    """(first, last) line shown to the model, remembering how: "injected" (context) or "read" (a tool)."""

    def __new__(cls, first: int, last: int, how: str):
        span = super().__new__(cls, (first, last))
        span.how = how
        return span


@dataclass
class Citation:
    """One ``path:line`` the answer cited, and what the check found."""

    path: str
    line: int
    end_line: int
    exists: bool = False      # a visible file inside the repository
    in_range: bool = False    # the lines exist in that file
    seen: bool = False        # those lines were injected or returned by a tool in this run
    reason: str = ""

    @property
    def grounded(self) -> bool:
        return self.exists and self.in_range and self.seen


def lines_seen(messages, snippets, shown=None) -> dict[str, list[tuple[int, int]]]:
    """path -> line ranges the model was shown: injected snippets, read_file windows, search hits.

    What the tools showed comes from ``shown``, the record tools.recording() keeps while a run
    goes (default: the active one): data the tools produced, never re-parsed from observation
    text, which a file name or a file's contents could forge. Only without any record (a saved
    transcript checked later) are the observations parsed instead.
    """
    seen: dict[str, list[tuple[int, int]]] = {}
    for s in snippets:
        seen.setdefault(s.path, []).append(Shown(s.start_line, s.end_line, "injected"))
    record = tools.current_record() if shown is None else shown
    if record is not None:
        for path, lo, hi in record:
            seen.setdefault(path, []).append(Shown(lo, hi, "read"))
        return seen
    for message in messages:
        if message.get("role") != "tool" or str(message.get("content", "")).startswith("Error:"):
            continue
        text = str(message["content"])
        for path, _total, lo, hi in READ_HEADER.findall(text):
            seen.setdefault(path, []).append(Shown(int(lo), int(hi), "read"))
        if not READ_HEADER.search(text):
            for path, line in SEARCH_HIT.findall(text):
                seen.setdefault(path, []).append(Shown(int(line), int(line), "read"))
    return seen


def check_citations(answer: str, repo_root, messages, snippets) -> list[Citation]:
    """Every path:line in the answer, checked: a visible file in the repository (through the
    sandbox), lines that exist, and lines that were injected or shown by a tool in this run.
    A citation that fails any check is ungrounded: the model may have guessed it."""
    seen = lines_seen(messages, snippets)
    citations, done = [], set()
    for match in CITATION.finditer(answer or ""):
        path = match.group(1).removeprefix("./")
        line = int(match.group(2))
        end = max(int(match.group(3) or line), line)
        if (path, line, end) not in done:
            done.add((path, line, end))
            citations.append(_check_one(Citation(path, line, end), repo_root, seen))
    return citations


def check_span(path: str, start_line: int, end_line: int, repo_root, seen) -> Citation:
    """One cited span (``seen`` from lines_seen), checked exactly like the citations in an answer."""
    return _check_one(Citation(path.removeprefix("./"), start_line, end_line), repo_root, seen)


def structured_citations(final, repo_root, messages, snippets) -> list[Citation]:
    """The well-formed citations of emit_answer's arguments (S3), checked for the report."""
    seen = lines_seen(messages, snippets)
    spans = [(c.get("path"), c.get("start_line"), c.get("end_line")) for c in final.citations if isinstance(c, dict)]
    return [check_span(path, start, end, repo_root, seen) for path, start, end in spans
            if isinstance(path, str) and all(type(n) is int for n in (start, end))]


def _check_one(cite: Citation, repo_root, seen) -> Citation:
    try:
        target = tools.resolve_visible(repo_root, cite.path)
    except (ValueError, tools.ToolError):
        cite.reason = "outside the repository or hidden by the sandbox"
        return cite
    if not target.is_file():
        cite.reason = "no such file in the repository"
        return cite
    try:
        total, complete = _count_lines(target)
    except tools.ToolError:  # a FIFO, a hard-linked file, a link swapped in since resolving
        cite.reason = "not a plain file the tools read (hard-linked, special, or changed while checked)"
        return cite
    cite.exists = True
    cite.in_range = 1 <= cite.line <= cite.end_line and (cite.end_line <= total or not complete)
    if not cite.in_range:
        lines = f"line {cite.line} is" if cite.end_line == cite.line else f"lines {cite.line}-{cite.end_line} are"
        cite.reason = f"{lines} outside the file ({total} lines)"
        return cite
    shown = seen.get(tools.display_path(repo_root, target), [])
    cite.seen = any(lo <= cite.end_line and cite.line <= hi for lo, hi in shown)
    if not cite.seen:
        cite.reason = "these lines were never read or injected in this run" if not shown else shown_only(shown)
    return cite


def shown_only(shown) -> str:
    """'only lines 12, 37, 103-118 were shown (injected: 12, 37; read: 103-118)'."""
    kinds = {how: [s for s in shown if getattr(s, "how", "read") == how] for how in ("injected", "read")}
    kinds = {how: spans for how, spans in kinds.items() if spans}
    if len(kinds) == 1:
        how = next(iter(kinds))
        where = "injected as context; the file was never read" if how == "injected" else "read with a tool"
    else:
        where = "; ".join(f"{how}: {_lines(spans)}" for how, spans in kinds.items())
    return f"only lines {_lines(shown)} were shown ({where})"


def _lines(spans) -> str:
    """Merged, sorted line ranges: [(12, 12), (103, 118), (104, 104)] -> '12, 103-118'."""
    merged: list[list[int]] = []
    for lo, hi in sorted(tuple(s) for s in spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in merged)


def _count_lines(path: Path) -> tuple[int, bool]:
    """Lines in the file as tools.split_lines counts them, through the race-safe opener (no link
    followed, no FIFO waited on), reading at most tools.MAX_SCAN_BYTES: (count, complete)."""
    with tools.open_resolved(path) as fh:
        return tools.count_lines(fh)
