"""Learner text made inert for each place it is shown: terminal, Markdown, HTML, CSV.

Everything a report shows from a submission (folder name, file names, excerpts, probe arguments)
passes one of these, so a submission can neither drive the instructor's terminal nor forge a
report line, a spreadsheet formula or an HTML element.

    terminal(text)    the lab's own terminal_safe (code/report.py): control characters as escapes
    md(text)          one line of Markdown text: newlines folded, markup characters escaped
    md_code(text)     the same as an inline code span (a fence longer than any backtick run)
    csv_cell(value)   a cell a spreadsheet shows as text: =, +, -, @, tab or CR first gets a '
    html              the standard library's html.escape, re-exported so renderers import one module
"""

from __future__ import annotations

import re
import sys
from html import escape as html  # noqa: F401  re-exported

from grading.workspace import LAB_ROOT

if str(LAB_ROOT / "code") not in sys.path:  # appended: never ahead of an implementation pytest chose
    sys.path.append(str(LAB_ROOT / "code"))
from cli import terminal_safe  # noqa: E402  the lab's filter (stdlib only: no config, no .env), one definition

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Inline Markdown that could start a code span, a link or image ([ and ]), emphasis (an _ inside a
# word cannot, so snake_case stays readable), a table cell or strike-through; < and & become
# entities (no HTML, no comment); a leading block marker is escaped.
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")
_MD_LEADING = re.compile(r"^(\s*|\s*\d+)([#>+=-]|(?<=\d)[.)])")


def terminal(text) -> str:
    return terminal_safe(text)


def _one_line(text) -> str:
    return re.sub(r"\s*[\r\n]+\s*", " ⏎ ", terminal_safe(text))


def md(text) -> str:
    """``text`` as literal Markdown on one line: no heading, link, HTML comment or table cell can start."""
    text = _MD_LEADING.sub(r"\1\\\2", _MD_SPECIAL.sub(r"\\\1", _one_line(text)))
    return text.replace("&", "&amp;").replace("<", "&lt;")


def md_code(text, limit: int = 300) -> str:
    """An inline code span that shows ``text`` literally (pipes escaped, as GFM tables need)."""
    text = _one_line(text)[:limit].replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def csv_cell(value):
    """A spreadsheet reads a cell starting with =, +, -, @, tab or CR as a formula: a ' keeps it text.
    Control characters become visible escapes too (terminal_safe), for whoever prints the file."""
    if not isinstance(value, str):
        return value
    value = terminal_safe(value)
    # a value that starts with ' gets one too, so csv_uncell takes off only the one added here
    return "'" + value if value.startswith(FORMULA_START + ("'",)) else value


def csv_uncell(value: str) -> str:
    """What csv_cell was given, from a cell read back: the one ' csv_cell added, never a learner's own.
    (A spreadsheet may drop that '; decisions.read_decisions tries the cell as it is first.)"""
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_START + ("'",)) else value


def name_text(name) -> str:
    """A file or folder name as text: bytes that are not UTF-8 (kept by Python as lone surrogates,
    which no UTF-8 writer accepts) become U+FFFD."""
    return str(name).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def file_stem(name) -> str:
    """A learner's name as a file name: no separator, control character or leading dot. A name that
    had to change gets a short hash of the original, so `alice:1` and `alice_1` never share a file."""
    text = name_text(name)
    stem = re.sub(r"[\x00-\x1f\x7f/\\:]", "_", text).lstrip(".")[:120] or "learner"
    if stem == text:
        return stem
    import hashlib
    return f"{stem}~{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"
