"""The agent-computer interface: a path sandbox, three read-only tools, their schemas, dispatch.

The model never touches the disk. It names a tool and sends JSON arguments; dispatch_tool runs
the matching function below with the repository root the *application* chose, and returns text
that the model reads as its observation.

Learner-owned (the rest of this file is provided):
    safe_resolve   M1  keep every path inside the repository
    dispatch_tool  M3  route a tool call by name; never raise
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# Bounds on what one tool call may return: a huge observation buries the evidence.
MAX_SPAN_LINES = 150            # lines shown by one read_file call
MAX_LINE_CHARS = 1_000          # a longer line is cut, with a marker
MAX_SEARCH_HITS = 40            # matching lines shown by one search_code call
MAX_HIT_CHARS = 200             # characters of each matching line shown
MAX_QUERY_CHARS = 200
MAX_SEARCH_FILE_BYTES = 2_000_000   # search skips larger files (minified bundles, data dumps)
MAX_LIST_ENTRIES = 200
BINARY_SNIFF_BYTES = 8_192      # a NUL byte in this prefix means "binary"

# Visibility rules, judged on the resolved path. Containment (safe_resolve) answers "is it
# inside the repository?"; these answer "should a model ever see it?".
EXCLUDED_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__"})
SECRET_FILE_NAMES = frozenset(
    {".env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".netrc", ".pgpass"}
)
SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx")


class ToolError(Exception):
    """An expected tool failure (not found, excluded, wrong kind of file): the message is for the model."""


# --------------------------------------------------------------------------- the sandbox (M1)

def safe_resolve(repo_root, rel_path) -> Path:
    """Resolve ``rel_path`` under ``repo_root`` and refuse anything whose real location is outside.

    Contract:
        repo_root  a str or Path chosen by the application (never by the model).
        rel_path   untrusted: it comes from the model's tool arguments.
        returns    the fully resolved Path (symlinks followed, ``..`` applied), which is the
                   resolved root itself or lies inside it. It need not exist yet.
        raises     ValueError for a non-string, a NUL byte, or any path whose real location is
                   outside the root: ``..`` escapes, absolute paths elsewhere, symlinks leading
                   out, and sibling folders that merely share a prefix (``repo_evil`` next to
                   ``repo``).
        allowed    ``src/app.py``, ``./README.md``, ``sub/../file.py``, ``..foo.py``, ``...``,
                   an absolute path that lands inside, a symlink whose target is inside.

    Hint: resolve first, judge second. Compare the resolved target with the resolved root
    component by component (``Path.is_relative_to``), never as strings.
    See lesson/lesson.agent.md, "Section 4: Guided Examples" (Example 1).
    """
    # TODO(M1): resolve the path under the root and raise ValueError if its real location is outside.
    raise NotImplementedError("M1: tools.safe_resolve is not implemented yet (see TODO(M1) in code/tools.py)")


# --------------------------------------------------------------------------- visibility rules

def is_excluded(parts) -> bool:
    """True if a repository-relative path (given as its components) must never reach the model."""
    for part in parts:
        name = part.casefold()  # .ENV opens .env on case-insensitive filesystems
        if name in EXCLUDED_DIRS:
            return True
    if not parts:
        return False
    name = parts[-1].casefold()
    return (
        name in SECRET_FILE_NAMES
        or name.startswith(".env.")
        or name.endswith(SECRET_SUFFIXES)
    )


def relative_parts(repo_root, resolved: Path) -> tuple[str, ...]:
    """Components of an already-resolved path, relative to the resolved root."""
    return resolved.relative_to(Path(repo_root).resolve()).parts


def display_path(repo_root, resolved: Path) -> str:
    """Repository-relative path with forward slashes, safe to print (undecodable bytes replaced)."""
    rel = "/".join(relative_parts(repo_root, resolved)) or "."
    return printable(rel)


def printable(text: str) -> str:
    """Replace surrogate escapes (undecodable file names) so the text can be sent as JSON."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def resolve_visible(repo_root, path) -> Path:
    """safe_resolve plus the visibility rules: the one gate every tool goes through."""
    target = safe_resolve(repo_root, path)
    if is_excluded(relative_parts(repo_root, target)):
        raise ToolError(
            f"{path!r} is excluded by the sandbox (secrets, .git, virtualenvs and caches are "
            "never shown); read source files instead"
        )
    return target


def iter_repo_files(repo_root):
    """Yield (path, rel_path) for every visible regular file, sorted by path.

    Does not follow symlinks (so no loops and no way out of the root) and skips excluded
    folders without entering them. Shared with context_selector.py so both see the same files.
    """
    yield from _walk(Path(repo_root).resolve(), ())


def _walk(folder, rel: tuple[str, ...]):
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError:  # unreadable folder: nothing to show from it
        return
    for entry in entries:
        if is_excluded((entry.name,)):  # parents were judged on the way down
            continue
        parts = rel + (entry.name,)
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(entry.path, parts)
            elif entry.is_file(follow_symlinks=False):  # skips symlinks, FIFOs, sockets, devices
                yield Path(entry.path), "/".join(parts)
        except OSError:
            continue


# --------------------------------------------------------------------------- the tools (provided)

def _open_regular(target: Path, shown: str):
    """Open a regular file for reading without ever blocking on a FIFO or device."""
    if target.is_dir():
        raise ToolError(f"{shown!r} is a directory; use list_directory to see what is inside")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(target, flags)
    except FileNotFoundError:
        raise ToolError(
            f"{shown!r} does not exist; use list_directory or search_code to find the right path"
        ) from None
    except OSError as exc:
        raise ToolError(f"cannot open {shown!r}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # checked on the open file: no swap in between
        os.close(fd)
        raise ToolError(f"{shown!r} is not a regular file (a pipe, socket or device); it cannot be read")
    return os.fdopen(fd, "rb")


def _is_binary(prefix: bytes) -> bool:
    return b"\x00" in prefix


def _check_line_number(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{name} must be a whole number, got {value!r}")
    if value < 1:
        raise ToolError(f"{name} must be 1 or more (lines are numbered from 1), got {value}")
    return value


def read_file(repo_root, path, start_line=1, end_line=None) -> str:
    """Return lines start_line..end_line of a file, numbered, at most MAX_SPAN_LINES at a time.

    Line numbers outside the file are clamped to it; a span longer than MAX_SPAN_LINES is cut
    with a note that says how to read on. Binary files give a short notice; undecodable bytes
    become U+FFFD. Raises ValueError (sandbox) or ToolError (anything the model can fix).
    """
    start = _check_line_number("start_line", start_line)
    end = None if end_line is None else _check_line_number("end_line", end_line)
    if end is not None and end < start:
        raise ToolError(f"end_line ({end}) is before start_line ({start})")
    target = resolve_visible(repo_root, path)
    shown = display_path(repo_root, target)
    with _open_regular(target, shown) as fh:
        prefix = fh.read(BINARY_SNIFF_BYTES)
        if _is_binary(prefix):
            size = os.fstat(fh.fileno()).st_size
            return f"[{shown} is a binary file ({size:,} bytes); read_file shows text files only]"
        fh.seek(0)
        last_wanted = start + MAX_SPAN_LINES - 1 if end is None else min(end, start + MAX_SPAN_LINES - 1)
        shown_lines, total = _read_window(fh, start, last_wanted)
    if total == 0:
        return f"[File: {shown} (empty)]"
    if start > total:
        raise ToolError(f"start_line {start} is past the end of {shown!r}, which has {total} lines")
    last = start + len(shown_lines) - 1
    header = f"[File: {shown} ({total} lines total) - showing lines {start}-{last}]"
    body = "\n".join(f"{start + i:>5}| {line}" for i, line in enumerate(shown_lines))
    notes = []
    if last < total and (end is None or end > last):
        notes.append(
            f"[{total - last} more lines below; read_file with start_line={last + 1} to continue. "
            f"At most {MAX_SPAN_LINES} lines per call.]"
        )
    return "\n".join([header, body, *notes])


def _read_window(fh, first: int, last: int) -> tuple[list[str], int]:
    """Decode lines first..last (1-based) and count all lines, in bounded memory."""
    limit = MAX_LINE_CHARS * 4  # bytes: up to 4 per character in UTF-8
    lines: list[str] = []
    number = 0
    while raw := fh.readline(limit + 1):
        number += 1
        cut = len(raw) > limit and not raw.endswith(b"\n")
        if cut:
            _skip_rest_of_line(fh)  # a 5 MB single line never enters memory
        if number >= first:
            text = raw.rstrip(b"\r\n").decode("utf-8", "replace")
            if cut or len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + " [... line cut]"
            lines.append(text)
        if number >= last:
            return lines, number + _count_remaining_lines(fh)
    return lines, number


def _skip_rest_of_line(fh) -> None:
    while chunk := fh.readline(1 << 16):
        if chunk.endswith(b"\n"):
            return


def _count_remaining_lines(fh) -> int:
    """Count the lines after the current position (which is a line start), chunk by chunk."""
    count, last_byte = 0, b""
    while chunk := fh.read(1 << 20):
        count += chunk.count(b"\n")
        last_byte = chunk[-1:]
    return count + (1 if last_byte not in (b"", b"\n") else 0)


def list_directory(repo_root, path=".") -> str:
    """List one directory: sub-directories first (with a trailing /), then files with sizes."""
    target = resolve_visible(repo_root, path)
    shown = display_path(repo_root, target)
    if not target.exists():
        raise ToolError(f"{shown!r} does not exist; list_directory with path '.' shows the top level")
    if not target.is_dir():
        raise ToolError(f"{shown!r} is a file, not a directory; use read_file to read it")
    dirs, files, hidden = [], [], 0
    base_parts = relative_parts(repo_root, target)
    with os.scandir(target) as entries:
        for entry in entries:
            if is_excluded(base_parts + (entry.name,)):
                hidden += 1
                continue
            name = printable(entry.name)
            try:
                if entry.is_symlink():
                    files.append(f"{name}@  (symlink)")
                elif entry.is_dir():
                    dirs.append(f"{name}/")
                else:
                    files.append(f"{name}  ({entry.stat().st_size:,} bytes)")
            except OSError:
                files.append(f"{name}  (unreadable)")
    entries = sorted(dirs) + sorted(files)
    lines = [f"[Directory: {shown}/ - {len(entries)} entries]"]
    lines += entries[:MAX_LIST_ENTRIES]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries; list a sub-directory instead]")
    if hidden:
        lines.append(f"[{hidden} entries hidden by the sandbox rules]")
    if not entries and not hidden:
        lines.append("[empty directory]")
    return "\n".join(lines)


def search_code(repo_root, query) -> str:
    """Find lines containing ``query`` (literal text, case-insensitive) in the repository's text files.

    Returns ``path:line: text`` lines, sorted by path then line, at most MAX_SEARCH_HITS.
    Skips excluded paths, symlinks, binary files and files over MAX_SEARCH_FILE_BYTES.
    """
    if not isinstance(query, str) or not query.strip():
        raise ToolError("query must be a non-empty string, for example a function or class name")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"query is {len(query)} characters; keep it under {MAX_QUERY_CHARS}")
    safe_resolve(repo_root, ".")  # the root itself goes through the sandbox too
    needle = query.lower()
    needle_bytes = needle.encode("utf-8")
    ascii_query = needle.isascii()
    hits: list[str] = []
    total = 0
    for path, rel in iter_repo_files(repo_root):
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_SEARCH_FILE_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_SEARCH_FILE_BYTES:
            continue
        # Fast reject on the raw bytes before any decoding (most files do not match).
        if ascii_query and needle_bytes not in data.lower():
            continue
        if _is_binary(data[:BINARY_SNIFF_BYTES]):
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if needle in line.lower():
                total += 1
                if len(hits) < MAX_SEARCH_HITS:
                    text = line.strip()
                    if len(text) > MAX_HIT_CHARS:
                        text = text[:MAX_HIT_CHARS] + " [...]"
                    hits.append(f"{printable(rel)}:{number}: {text}")
    if not hits:
        return f"No matches for {query!r}. Try a shorter or different identifier, or list_directory."
    if total > len(hits):
        hits.append(
            f"[showing the first {len(hits)} of {total} matches; search for a more specific "
            "identifier (a full function or class name) to narrow it]"
        )
    return "\n".join(hits)


# --------------------------------------------------------------------------- schemas (provided)

# The model sees only these names, descriptions and parameter schemas, never the code above:
# the description is the interface it programs against.
TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": (
                "Read a text file from the repository and return its lines, each prefixed with its "
                "line number (cite answers as path:line). Returns at most "
                f"{MAX_SPAN_LINES} lines per call; use start_line/end_line to read a specific "
                "part or to continue. Paths are relative to the repository root (for example "
                "'src/app.py'); paths outside the repository, secrets such as .env, and .git are "
                "refused. Use this once you know which file you need; use search_code to find it."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "File path relative to the repository root, e.g. 'pkg/models.py'.",
                    },
                    "start_line": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "First line to show (1-based). Default 1.",
                    },
                    "end_line": {
                        "type": "integer",
                        "minimum": 1,
                        "description": f"Last line to show (inclusive). Default: start_line + {MAX_SPAN_LINES - 1}.",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_directory",
            "description": (
                "List the entries of one directory in the repository: sub-directories end with '/', "
                f"files show their size. Not recursive; at most {MAX_LIST_ENTRIES} entries. Use it "
                "to learn the layout before reading; path '.' is the repository root."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Directory path relative to the repository root. Default '.'.",
                    },
                },
                "required": [],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_code",
            "description": (
                "Search every text file in the repository for a literal string (case-insensitive, "
                "not a regular expression) and return matching lines as 'path:line: text', at most "
                f"{MAX_SEARCH_HITS}. Best for finding where a function, class, variable or message "
                "is defined or used; then read_file around the line it reports."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Text to look for, e.g. 'def total' or 'PROVIDER_DEFAULTS'.",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
]

TOOL_FUNCTIONS = {
    "read_file": read_file,
    "list_directory": list_directory,
    "search_code": search_code,
}

_JSON_TYPES = {"string": str, "integer": int, "object": dict, "array": list, "boolean": bool}


def check_arguments(name: str, args: dict) -> str | None:
    """Compare ``args`` with the tool's schema; return a problem the model can fix, or None."""
    schema = {s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS}[name]
    allowed = schema["properties"]
    missing = [key for key in schema["required"] if key not in args]
    if missing:
        return f"{name} needs the argument(s) {', '.join(missing)}"
    unexpected = sorted(set(args) - set(allowed))
    if unexpected:
        return f"{name} does not take {', '.join(unexpected)}; its arguments are {', '.join(allowed)}"
    for key, value in args.items():
        kind = allowed[key]["type"]
        wrong_bool = isinstance(value, bool) and kind != "boolean"
        if wrong_bool or not isinstance(value, _JSON_TYPES[kind]):
            return f"{name}: {key} must be a JSON {kind}, got {value!r}"
    return None


# --------------------------------------------------------------------------- dispatch (M3)

def dispatch_tool(name, args, repo_root) -> str:
    """Run the tool the model asked for and return its result as text. Never raises.

    Contract:
        name       the tool name from the model (untrusted: may be unknown).
        args       the parsed arguments (untrusted: may not even be a dict).
        repo_root  bound by the application; never read from ``args``.
        returns    the tool's text, or a string starting with "Error:" that says what to do
                   instead, for: an unknown tool, arguments that are not an object, missing,
                   unexpected or wrongly typed arguments (``check_arguments`` finds these), a
                   sandbox ValueError, a ToolError, and any other exception inside a tool.

    Hint: look the name up in TOOL_FUNCTIONS, validate, then call ``fn(repo_root, **args)``
    inside try/except. See lesson/lesson.agent.md, "Section 3: Technical Explanation".
    """
    # TODO(M3): look the tool up, validate the arguments, call it, and turn every failure into 'Error: ...'.
    raise NotImplementedError("M3: tools.dispatch_tool is not implemented yet (see TODO(M3) in code/tools.py)")
