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
MAX_CITATIONS = 200         # citations checked per answer; the rest are reported as not checked
MAX_LINE_DIGITS = 9         # a longer line number is past any file (int() refuses 4,301 digits at all)
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
    Paths are the raw repository-relative names ("/".join of the parts), never the printable ones.

    What the tools showed comes from ``shown``, the record tools.recording() keeps while a run
    goes (default: the active one): data the tools produced, never re-parsed from observation
    text, which a file name or a file's contents could forge. Only without any record (a saved
    transcript checked later) are the observations parsed instead.
    """
    seen: dict[str, list[tuple[int, int]]] = {}
    for s in snippets:  # keyed by raw path: a\x01.py and a file named a\\x01.py print alike
        seen.setdefault(getattr(s, "key", "") or s.path, []).append(Shown(s.start_line, s.end_line, "injected"))
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
            seen.setdefault(path, []).append(Shown(line_number(lo), line_number(hi), "read"))
        if not READ_HEADER.search(text):
            for path, line in SEARCH_HIT.findall(text):
                seen.setdefault(path, []).append(Shown(line_number(line), line_number(line), "read"))
    return seen


def line_number(digits: str) -> int:
    """A cited line number; one longer than MAX_LINE_DIGITS digits is past any file (never int()-ed)."""
    return int(digits) if len(digits) <= MAX_LINE_DIGITS else 10 ** MAX_LINE_DIGITS


def check_citations(answer: str, repo_root, messages, snippets) -> list[Citation]:
    """Every path:line in the answer, checked: a visible file in the repository (through the
    sandbox), lines that exist, and lines that were injected or shown by a tool in this run.
    A citation that fails any check is ungrounded: the model may have guessed it. At most
    MAX_CITATIONS are checked (each file is opened and counted once); the rest are ungrounded
    with the reason "not checked"."""
    seen = lines_seen(messages, snippets)
    citations, done, files = [], set(), {}
    for match in CITATION.finditer(answer or ""):
        path = match.group(1).removeprefix("./")
        line = line_number(match.group(2))
        end = max(line_number(match.group(3) or match.group(2)), line)
        if (path, line, end) not in done:
            done.add((path, line, end))
            cite = Citation(path, line, end)
            if len(done) > MAX_CITATIONS:
                cite.reason = f"not checked: the answer cites more than {MAX_CITATIONS} places"
                citations.append(cite)
            else:
                citations.append(_check_one(cite, repo_root, seen, files))
    return citations


def check_span(path: str, start_line: int, end_line: int, repo_root, seen, files=None) -> Citation:
    """One cited span (``seen`` from lines_seen), checked exactly like the citations in an answer."""
    return _check_one(Citation(path.removeprefix("./"), start_line, end_line), repo_root, seen, files)


def structured_citations(final, repo_root, messages, snippets) -> list[Citation]:
    """The well-formed citations of emit_answer's arguments (S3), checked for the report."""
    seen = lines_seen(messages, snippets)
    spans = [(c.get("path"), c.get("start_line"), c.get("end_line")) for c in final.citations if isinstance(c, dict)]
    spans = [(p, a, b) for p, a, b in spans if isinstance(p, str) and all(type(n) is int for n in (a, b))]
    files: dict = {}  # each file opened and counted once
    return [check_span(path, start, end, repo_root, seen, files) for path, start, end in spans[:MAX_CITATIONS]]


def _check_one(cite: Citation, repo_root, seen, files=None) -> Citation:
    """``files``: path -> what was found about that file, so many citations of one file cost one read."""
    files = {} if files is None else files
    if cite.path not in files:
        files[cite.path] = _look_at(cite.path, repo_root)
    found = files[cite.path]
    if isinstance(found, str):
        cite.reason = found
        return cite
    key, total, complete = found
    cite.exists = True
    cite.in_range = 1 <= cite.line <= cite.end_line and (cite.end_line <= total or not complete)
    if not cite.in_range:
        lines = f"line {cite.line} is" if cite.end_line == cite.line else f"lines {cite.line}-{cite.end_line} are"
        cite.reason = f"{lines} outside the file ({total} lines)"
        return cite
    shown = seen.get(key, [])
    cite.seen = any(lo <= cite.end_line and cite.line <= hi for lo, hi in shown)
    if not cite.seen:
        cite.reason = "these lines were never read or injected in this run" if not shown else shown_only(shown)
    return cite


def _look_at(path: str, repo_root):
    """(display path, lines, complete) of a cited file, or why it cannot be cited."""
    try:
        target = tools.resolve_visible(repo_root, path)
    except (ValueError, tools.ToolError):
        return "outside the repository or hidden by the sandbox"
    if not target.is_file():
        return "no such file in the repository"
    try:
        total, complete = _count_lines(repo_root, target)
    except tools.ToolError:  # a FIFO, a hard-linked file, a link swapped in since resolving
        return "not a plain file the tools read (hard-linked, special, or changed while checked)"
    return "/".join(tools.relative_parts(repo_root, target)), total, complete  # the record's key: raw names


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


def _count_lines(repo_root, target: Path) -> tuple[int, bool]:
    """Lines in the file as tools.split_lines counts them, opened from the root like the tools open
    it (no link followed, no FIFO waited on, no folder above the root opened), reading at most
    tools.MAX_SCAN_BYTES: (count, complete)."""
    with tools.open_in_root(repo_root, tools.relative_parts(repo_root, target)) as fh:
        return tools.count_lines(fh)
