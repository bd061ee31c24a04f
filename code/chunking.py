"""Chunking for context injection: which lines of a file make one chunk.

    chunk_spans("app.py", text) -> [(1, 12), (13, 40), ...]   # 1-based, inclusive, covering the file

Python is chunked by its definitions: each top-level function and class with its decorators (a
class longer than MAX_CHUNK_LINES by method), and the lines between them (imports, constants) as
chunks of their own. Doc pages (.rst, .md, .txt) by section, from one heading to the next
(context_selector adds each section's heading path to its words). Any other text, and any
definition or section still too long, by overlapping windows of WINDOW_LINES lines.
context_selector.py counts the words of each chunk; this file only says where chunks begin and end. Change it, and bump context_selector.INDEX_VERSION.
"""

from __future__ import annotations

import re

from tools import split_lines

MAX_CHUNK_LINES = 80              # a longer function is split into windows
WINDOW_LINES = 50                 # windows for long code and for non-Python text
WINDOW_OVERLAP = 10               # so an answer on a window edge is whole in one of them
MAX_NESTING = 8                   # classes inside classes split by method this deep; deeper ones by windows

DEFINITION = re.compile(r"(?:async\s+def|def|class)\b")
TRIPLE_QUOTE = re.compile(r'"""|\'\'\'')
NOT_STATEMENT_STARTS = frozenset(("", " ", "\t", "#", ")", "]", "}"))  # after the indent: no statement at this indent starts here


def chunk_spans(rel: str, text: str) -> list[tuple[int, int]]:
    """(start_line, end_line) pairs covering the file: Python by definitions, the rest by windows."""
    return spans_of_lines(rel, split_lines(text))


def spans_of_lines(rel: str, lines: list[str], titles: dict | None = None) -> list[tuple[int, int]]:
    """chunk_spans of a file already split; ``titles``: its headings(lines), when the caller has them."""
    if rel.endswith(".py"):
        return python_spans(lines, code_starts(lines), 0, len(lines), "")
    if rel.lower().endswith(DOC_SUFFIXES) and SECTIONS:
        starts = sorted(headings(lines) if titles is None else titles) or [1]
        bounds = ([1] if starts[0] > 1 else []) + starts + [len(lines) + 1]
        return [span for a, b in zip(bounds, bounds[1:]) for span in windows(a, b - 1)]
    return windows(1, len(lines))


# --------------------------------------------------------------------------- doc pages by section

DOC_SUFFIXES = (".rst", ".md", ".txt")
SECTIONS = True                   # doc pages by section (False: by windows, as other text)
MD_HEADING = re.compile(r"#{1,6}[ \t]+\S")
FENCE = re.compile(r"(```|~~~)")
ADORNMENTS = frozenset("=-~^\"'`#*+:.")
HEADING_STARTS = frozenset("#")
RST_ADORNMENT = re.compile(r"([=\-~^\"'`#*+:.])\1{2,}[ \t]*$")


def headings(lines) -> dict[int, tuple[str, ...]]:
    """{line where a section starts (1-based): its heading path, page title first} for a doc page.

    Markdown ``# Title`` lines (not inside a fenced block) and reStructuredText titles (a line
    underlined, and maybe overlined, by a run of one punctuation character at least as long). A
    heading's level is its number of '#', or the order in which its adornment style first appears
    (reStructuredText's own rule), so the path holds the page title and every enclosing section.
    """
    found, styles, path, fenced = {}, [], [], False
    for i, line in enumerate(lines):
        if ("```" in line or "~~~" in line) and FENCE.match(line.lstrip()):
            fenced = not fenced
        if fenced:
            continue
        if not line or line[0] not in HEADING_STARTS and (i + 1 >= len(lines) or lines[i + 1][:1] not in ADORNMENTS):
            continue  # most lines: neither "# Title" nor followed by an underline (checked cheaply first)
        title, style, start = None, None, i
        if MD_HEADING.match(line):
            level_mark = len(line) - len(line.lstrip("#"))
            title, style = line.strip("# \t"), f"#{level_mark}"
        elif (i + 1 < len(lines) and line.strip() and not RST_ADORNMENT.match(line)
              and RST_ADORNMENT.match(lines[i + 1]) and len(lines[i + 1].rstrip()) >= len(line.rstrip())):
            over = i > 0 and lines[i - 1].rstrip() == lines[i + 1].rstrip()
            title, style, start = line.strip(), ("over" if over else "") + lines[i + 1][0], i - over
        if title is None:
            continue
        if style not in styles:
            styles.append(style)
        level = sorted(styles).index(style) if style.startswith("#") else styles.index(style)
        path = path[:level] + [title]
        found[start + 1] = tuple(path)
    return found


def python_spans(lines, starts, first: int, last: int, indent: str, depth: int = 0) -> list[tuple[int, int]]:
    """Lines first+1..last as chunks: each function and class at ``indent`` with its decorators
    (a big class by method), and the code between them (imports, constants, docstrings).

    Read from the indentation, not parsed with ``ast``: a definition runs from its line to the
    next statement at the same indentation, so broken code is chunked too, and no file can make
    it recurse deeply (a 200 KB ``1+1+...`` line makes ast.parse raise RecursionError): a class
    is split by method at most MAX_NESTING classes deep (1,000 nested ``class`` lines are windows
    below that), which also bounds the work to MAX_NESTING passes over the file. On flask,
    requests and Django it gives ast's chunks for 2,904 of 2,905 files (the other does not parse).
    """
    n = len(indent)
    # The character after the indent first: it rules out most lines (those indented deeper) at once.
    at = [i for i, line, start in zip(range(first, last), lines[first:last], starts[first:last])
          if line[n:n + 1] not in NOT_STATEMENT_STARTS and start and line.startswith(indent)]
    spans, covered, k = [], first, 0
    while k < len(at):
        i = at[k]
        while k < len(at) - 1 and lines[at[k]][n] == "@":
            k += 1  # decorators belong to the definition they decorate
        head, k = at[k], k + 1
        if not DEFINITION.match(lines[head], n):
            continue
        stop = at[k] if k < len(at) else last
        end = stop - 1
        while end > head and (not lines[end].strip() or lines[end].lstrip().startswith("#")):
            end -= 1  # blank lines and comments after a definition belong to what follows
        spans += windows(covered + 1, i)
        body = _body_indent(lines, starts, head + 1, end + 1, indent)
        if end - i + 1 > MAX_CHUNK_LINES and lines[head].startswith("class", n) and body and depth < MAX_NESTING:
            spans += python_spans(lines, starts, i, end + 1, body, depth + 1)  # a big class: one chunk per method
        else:
            spans += windows(i + 1, end + 1)
        covered = end + 1
    return spans + windows(covered + 1, last)


def code_starts(lines) -> list[bool]:
    """Per line: can a statement start here? Not inside a triple-quoted string, not after a backslash."""
    starts, quote, continued = [], None, False
    for line in lines:
        starts.append(quote is None and not continued)
        if "'''" in line or '"""' in line:
            for match in TRIPLE_QUOTE.finditer(line):
                quote = match.group() if quote is None else (None if match.group() == quote else quote)
        continued = quote is None and line.endswith("\\")
    return starts


def _body_indent(lines, starts, first: int, last: int, indent: str) -> str | None:
    for i in range(first, last):
        stripped = lines[i].lstrip()
        if starts[i] and stripped and not stripped.startswith("#") and len(lines[i]) - len(stripped) > len(indent):
            return lines[i][:len(lines[i]) - len(stripped)]
    return None


def windows(first: int, last: int) -> list[tuple[int, int]]:
    """first..last as one span, or as overlapping windows when longer than MAX_CHUNK_LINES."""
    if last < first:
        return []
    if last - first + 1 <= MAX_CHUNK_LINES:
        return [(first, last)]
    spans, start = [], first
    while True:
        end = min(start + WINDOW_LINES - 1, last)
        spans.append((start, end))
        if end == last:
            return spans
        start += WINDOW_LINES - WINDOW_OVERLAP


# --------------------------------------------------------------------------- whole statements

STATEMENT_SLACK = 12              # lines a snippet may grow by to end (or begin) at a statement boundary
_PYTHON_TOKEN = re.compile(r"'''|\"\"\"|\\.|[\"'#()\[\]{}]")


def open_after(lines) -> list[bool]:
    """Per line: does a Python statement go on past it (an open bracket, string or backslash)?

    Read from the first line on, which should begin a statement. A quick scan, not a parser: enough
    to keep a snippet from stopping one line into a tuple (``config.py:2-41`` did).
    """
    flags, depth, quote = [], 0, None
    for line in lines:
        for match in _PYTHON_TOKEN.finditer(line):
            token = match.group()
            if quote:
                quote = None if token == quote else quote
            elif token == "#":
                break
            elif token in ("'", '"', "'''", '"""'):
                quote = token
            elif token in "([{":
                depth += 1
            elif token in ")]}":
                depth = max(0, depth - 1)
        if quote in ("'", '"'):
            quote = None  # a one-line string cannot go on (broken code): do not let it swallow the file
        flags.append(depth > 0 or quote is not None or line.endswith("\\"))
    return flags


def whole_statements(rel: str, lines, first: int, start: int, end: int, keep: int | None = None,
                     grow: bool = True) -> tuple[int, int]:
    """start..end (1-based lines of ``lines``) moved to statement boundaries in a Python file.

    ``first`` is a line where a statement begins (the scan starts there). With ``grow``, a statement
    cut at either end is completed when it takes at most STATEMENT_SLACK more lines, else left out;
    without it, only left out, never past line ``keep`` (the line that must stay). Other files: as given.
    """
    if not rel.endswith(".py") or not first <= start <= end <= len(lines):
        return start, end
    last = min(len(lines), end + (STATEMENT_SLACK if grow else 0))
    opened = open_after(lines[first - 1:last])

    def goes_on(line: int) -> bool:  # the statement at ``line`` continues on the next line
        return first <= line <= last and opened[line - first]

    lowest_end, highest_start = (start, end) if keep is None else (keep, keep)
    if goes_on(end):
        ahead = next((n for n in range(end + 1, last + 1) if not goes_on(n)), None)
        behind = next((n for n in range(end - 1, lowest_end - 1, -1) if not goes_on(n)), None)
        end = ahead if grow and ahead is not None else behind if behind is not None else end
    if goes_on(start - 1):
        reach = max(first, start - STATEMENT_SLACK) if grow else start
        back = next((n for n in range(start - 1, reach - 1, -1) if not goes_on(n - 1)), None)
        forth = next((n for n in range(start + 1, highest_start + 1) if not goes_on(n - 1)), None)
        start = back if back is not None and grow else forth if forth is not None else start
    return start, end
