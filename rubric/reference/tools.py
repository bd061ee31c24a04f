"""The agent-computer interface: a path sandbox, three read-only tools, their schemas, dispatch.

The model never touches the disk. It names a tool and sends JSON arguments; dispatch_tool runs
the matching function below with the repository root the *application* chose, and returns text
that the model reads as its observation.

Learner-owned (the rest of this file is provided):
    safe_resolve   M1  keep every path inside the repository
    dispatch_tool  M3  route a tool call by name; never raise

Policy (provided code). Containment (safe_resolve) says where a path lands *when it is checked*;
the tools then open with repo_files.py's race-safe openers (open_in_root), which follow no
symlink, refuse special and hard-linked files, and apply the visibility rules (is_excluded) to
every path component. Those names are re-exported here, so ``tools.is_excluded`` still works.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# Reading an untrusted repository (provided; see repo_files.py). Re-exported: tools.<name> works.
from repo_files import (  # noqa: F401
    BINARY_SNIFF_BYTES, EXCLUDED_DIRS, FOLD_STEP, KEY_FILE_NAMES, MAX_ECHO_CHARS, MAX_LINE_CHARS, MAX_SCAN_BYTES,
    MAX_WALK_DEPTH, MAX_WALK_DIRS, MAX_WALK_FILES, SECRET_FILE_NAMES, SECRET_PREFIXES, SECRET_SUFFIXES,
    VIRTUALENV_MARKERS, ToolError, TreeReader, count_lines, count_matching_lines, count_newlines, current_record, display_path,
    excluded_name, find_lowered, is_excluded, is_virtualenv, iter_repo_files, matching_lines, open_in_root,
    open_resolved, printable, read_text_in_root, recording, relative_parts, rooted, shorten, split_lines,
    _OpenDirectory, _excluded_message, _inside_virtualenv, _is_binary, _is_junction, _lexists_in,
    _encodable, _read_window, _record,
)


# Bounds on what one tool call may return: a huge observation buries the evidence.
MAX_SPAN_LINES = 150            # lines shown by one read_file call
MAX_READ_CHARS = 12_000         # ... and at most this many characters of them (under tool_result's cap)
MAX_SEARCH_HITS = 40            # matching lines shown by one search_code call
MAX_HIT_CHARS = 200             # characters of each matching line shown
MAX_QUERY_CHARS = 200
MAX_SEARCH_FILE_BYTES = 2_000_000   # search skips larger files (minified bundles, data dumps)
MAX_LIST_ENTRIES = 200
MAX_PATH_CHARS = 4_096          # longer paths are refused before resolving (a 1 MB path takes ~40 s)


# --------------------------------------------------------------------------- the sandbox (M1)

def safe_resolve(repo_root, rel_path) -> Path:
    """Resolve ``rel_path`` under ``repo_root`` and refuse anything whose real location is outside.

    Contract:
        repo_root  a str or Path chosen by the application (never by the model).
        rel_path   untrusted: it comes from the model's tool arguments.
        returns    the fully resolved Path (symlinks followed, ``..`` applied), which is the
                   resolved root itself or lies inside it. It need not exist yet.
        raises     ValueError for a non-string, a NUL byte, a path longer than MAX_PATH_CHARS
                   (checked before resolving: resolving a megabyte of path takes tens of
                   seconds), a path that cannot be resolved (a symlink loop: resolve() raises
                   RuntimeError or OSError, which must become ValueError too), or any path whose
                   real location is outside the root: ``..`` escapes, absolute paths elsewhere,
                   symlinks leading out, sibling folders that merely share a prefix
                   (``repo_evil`` next to ``repo``), and a folder elsewhere whose path merely
                   contains the root's (``<parent>/elsewhere/<root>/x``): judged by components.
        allowed    ``src/app.py``, ``./README.md``, ``sub/../file.py``, ``..foo.py``, ``...``,
                   an absolute path that lands inside, a symlink whose target is inside.

    Hint: check the cheap things first (type, NUL, length), then resolve, then judge. Compare the
    resolved target with the resolved root component by component (``Path.is_relative_to``),
    never as strings. See lesson/lesson.agent.md, "Section 4: Guided Examples" (Example 1).
    """
    if not isinstance(rel_path, str):
        raise ValueError(f"path must be a string, got {type(rel_path).__name__}")
    if "\x00" in rel_path:
        raise ValueError("path contains a NUL byte")
    if len(rel_path) > MAX_PATH_CHARS:
        raise ValueError(f"path is {len(rel_path):,} characters long; the limit is {MAX_PATH_CHARS:,}")
    try:
        root = Path(repo_root).resolve()
        target = (root / rel_path).resolve()
    except (OSError, RuntimeError) as exc:  # symlink loops, names too long
        raise ValueError(f"cannot resolve path {rel_path!r}: {exc}") from None
    if not target.is_relative_to(root):
        raise ValueError(
            f"path {rel_path!r} resolves outside the repository; "
            "use a path relative to the repository root"
        )
    return target


def resolve_visible(repo_root, path) -> Path:
    """safe_resolve plus the visibility rules: the one gate every tool goes through."""
    if isinstance(path, str) and len(path) > MAX_PATH_CHARS:  # before any resolving: it is slow
        raise ValueError(f"path is {len(path):,} characters long; the limit is {MAX_PATH_CHARS:,}")
    if isinstance(path, str) and not _encodable(path):
        raise ValueError(f"path {shorten(path)} holds a lone surrogate (such as \\ud800), which no file name has")
    target = safe_resolve(repo_root, path)
    parts = relative_parts(repo_root, target)
    if is_excluded(parts) or _inside_virtualenv(Path(repo_root).resolve(), parts):
        raise ToolError(_excluded_message(shorten(path)))
    return target


# --------------------------------------------------------------------------- the tools (provided)


MAX_LINE_NUMBER = 1_000_000_000


def _check_line_number(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{name} must be a whole number, got {shorten(value)}")
    if value < 1:
        raise ToolError(f"{name} must be 1 or more (lines are numbered from 1), got {shorten(value)}")
    return min(value, MAX_LINE_NUMBER)  # clamped like any number past the end; a 4,000-digit one too


def read_file(repo_root, path, start_line=1, end_line=None) -> str:
    """Return lines start_line..end_line of a file, numbered, at most MAX_SPAN_LINES at a time.

    Line numbers outside the file are clamped to it; a span longer than MAX_SPAN_LINES is cut
    with a note that says how to read on. Binary files give a short notice; undecodable bytes
    become U+FFFD. Reads at most MAX_SCAN_BYTES per call, so a huge file is numbered only as far
    as that. Raises ValueError (sandbox) or ToolError (anything the model can fix).
    """
    start = _check_line_number("start_line", start_line)
    end = None if end_line is None else _check_line_number("end_line", end_line)
    if end is not None and end < start:
        raise ToolError(f"end_line ({end}) is before start_line ({start})")
    target = resolve_visible(repo_root, path)
    shown = display_path(repo_root, target)
    with open_in_root(repo_root, relative_parts(repo_root, target)) as fh:
        prefix = fh.read(BINARY_SNIFF_BYTES)
        if _is_binary(prefix):
            size = os.fstat(fh.fileno()).st_size
            return f"[{shown} is a binary file ({size:,} bytes); read_file shows text files only]"
        fh.seek(0)
        last_wanted = start + MAX_SPAN_LINES - 1 if end is None else min(end, start + MAX_SPAN_LINES - 1)
        shown_lines, total, complete = _read_window(fh, start, last_wanted)
    if total == 0:
        return f"[File: {shown} (empty)]"
    if start > total:
        if not complete:
            raise ToolError(f"start_line {start} is past the first {MAX_SCAN_BYTES:,} bytes of {shown!r} "
                            f"({total:,} lines), which is as far as read_file reads")
        raise ToolError(f"start_line {start} is past the end of {shown!r}, which has {total} lines")
    kept, size = 0, 0
    for line in shown_lines:  # the whole observation stays under MAX_READ_CHARS
        size += len(line) + 8
        if kept and size > MAX_READ_CHARS:
            break
        kept += 1
    shown_lines = shown_lines[:kept]
    last = start + len(shown_lines) - 1
    _record("/".join(relative_parts(repo_root, target)), start, last)  # raw names: printable is not one-to-one
    counted = f"{total} lines total" if complete else f"more than {total:,} lines; counted up to {MAX_SCAN_BYTES:,} bytes"
    header = f"[File: {shown} ({counted}) - showing lines {start}-{last}]"
    body = "\n".join(f"{start + i:>5}| {line}" for i, line in enumerate(shown_lines))
    notes = []
    if (last < total or not complete) and (end is None or end > last):
        more = f"{total - last} more lines below" if complete else "more lines below"
        notes.append(
            f"[{more}; read_file with start_line={last + 1} to continue. "
            f"At most {MAX_SPAN_LINES} lines ({MAX_READ_CHARS:,} characters) per call.]"
        )
    return "\n".join([header, body, *notes])


def list_directory(repo_root, path=".") -> str:
    """List one directory: sub-directories first (with a trailing /), then files with sizes."""
    target = resolve_visible(repo_root, path)
    shown = display_path(repo_root, target)
    base_parts = relative_parts(repo_root, target)
    dirs, files, hidden, scanned = [], [], 0, 0
    with _OpenDirectory(repo_root, base_parts) as where, os.scandir(where) as entries:
        for entry in entries:
            scanned += 1
            if scanned > MAX_LIST_ENTRIES * 50:  # a folder of a million files: stop reading it
                break
            if is_excluded(base_parts + (entry.name,)):
                hidden += 1
                continue
            name = printable(entry.name)
            try:
                if entry.is_symlink() or _is_junction(entry):
                    files.append(f"{name}@  (symlink)")
                elif entry.is_dir(follow_symlinks=False):
                    if any(_lexists_in(where, f"{entry.name}/{m}") for m in VIRTUALENV_MARKERS):
                        hidden += 1
                        continue
                    dirs.append(f"{name}/")
                else:
                    files.append(f"{name}  ({entry.stat(follow_symlinks=False).st_size:,} bytes)")
            except OSError:
                files.append(f"{name}  (unreadable)")
    entries = sorted(dirs) + sorted(files)
    lines = [f"[Directory: {shown}/ - {len(entries)} entries]"]
    lines += entries[:MAX_LIST_ENTRIES]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries; list a sub-directory instead]")
    if scanned > MAX_LIST_ENTRIES * 50:
        lines.append(f"[stopped reading after {MAX_LIST_ENTRIES * 50:,} entries; use search_code instead]")
    if hidden:
        lines.append(f"[{hidden} entries hidden by the sandbox rules]")
    if not entries and not hidden:
        lines.append("[empty directory]")
    return "\n".join(lines)


MAX_SEARCH_TOTAL_BYTES = 256 * 1024 * 1024  # one search reads at most this much in all
MAX_SEARCH_MATCHES = 1_000      # matching lines counted; past this the count says "more than"
MAX_SEARCH_SECONDS = 10.0       # one search stops after this long, with a note (a huge tree, a common query)


def search_code(repo_root, query) -> str:
    """Find lines containing ``query`` (literal text, case-insensitive) in the repository's text files.

    Returns ``path:line: text`` lines, sorted by path then line, at most MAX_SEARCH_HITS.
    Skips excluded paths, symlinks, hard-linked, special and binary files and files over
    MAX_SEARCH_FILE_BYTES; stops, with a note, after MAX_SEARCH_TOTAL_BYTES read, MAX_SEARCH_MATCHES
    matching lines or MAX_SEARCH_SECONDS, whichever comes first.
    """
    if not isinstance(query, str) or not query.strip():
        raise ToolError("query must be a non-empty string, for example a function or class name")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"query is {len(query)} characters; keep it under {MAX_QUERY_CHARS}")
    if not _encodable(query):
        raise ToolError(f"query {shorten(query)} holds a lone surrogate (such as \\ud800); search for plain text")
    safe_resolve(repo_root, ".")  # the root itself goes through the sandbox too
    needle = query.lower()
    needle_bytes = needle.encode("utf-8", "surrogateescape")
    ascii_query = needle.isascii()
    hits: list[str] = []
    notes: list[str] = []
    total, budget = 0, MAX_SEARCH_TOTAL_BYTES
    give_up = time.monotonic() + MAX_SEARCH_SECONDS
    narrow = "search for a more specific identifier, or list_directory and read the likely files"
    stopped = ""  # why the search ended before the end of the repository, if it did
    with TreeReader(repo_root, walked=True) as tree:  # opens like open_in_root, each folder once
        for _, rel in iter_repo_files(repo_root):
            if budget <= 0 or time.monotonic() > give_up:
                stopped = f"reading {MAX_SEARCH_TOTAL_BYTES:,} bytes" if budget <= 0 else f"{MAX_SEARCH_SECONDS:g} s"
                break
            try:  # rel's parts are the walk's own names: no parsing
                data = tree.read(tuple(rel.split("/")), MAX_SEARCH_FILE_BYTES + 1, shown=rel)
            except (OSError, ToolError):  # changed since the walk, hard-linked, a FIFO: skipped
                continue
            budget -= len(data)
            if len(data) > MAX_SEARCH_FILE_BYTES:
                continue
            # Fast reject before looking at lines (most files do not match): on the raw bytes for
            # an ASCII query, else on the decoded text, lowered once.
            first = find_lowered(data, needle_bytes) if ascii_query else 0
            if first < 0:
                continue
            if _is_binary(data[:BINARY_SNIFF_BYTES]):
                continue
            if not ascii_query and needle not in data.decode("utf-8", "replace").lower():
                continue
            skipped = 0  # lines before the first match's line: not lowered, not looked at again
            if ascii_query and first >= FOLD_STEP:  # a big file's first match far in: start at its line
                cut = data.rfind(b"\n", 0, first) + 1
                skipped, data, first = count_newlines(data, 0, cut), data[cut:], first - cut
            low = data.lower() if ascii_query else None  # a match: lowered (from there) once
            if ascii_query and len(hits) >= MAX_SEARCH_HITS:  # none of it is shown: count lines, no numbers
                found = count_matching_lines(data, low, needle_bytes, first, MAX_SEARCH_MATCHES + 1 - total)
                if total + found > MAX_SEARCH_MATCHES:  # a match past the cap: the count is "more than"
                    total, stopped = MAX_SEARCH_MATCHES, f"{MAX_SEARCH_MATCHES:,} matching lines"
                    break
                total += found
                continue
            for number, line in matching_lines(data, needle, low, first):
                number += skipped
                if total >= MAX_SEARCH_MATCHES:  # a match past the cap: the count is "more than"
                    stopped = f"{MAX_SEARCH_MATCHES:,} matching lines"
                    break
                total += 1
                if len(hits) < MAX_SEARCH_HITS:
                    line_text = line.strip()
                    if len(line_text) > MAX_HIT_CHARS:
                        line_text = line_text[:MAX_HIT_CHARS] + " [...]"
                    hits.append(f"{printable(rel)}:{number}: {line_text}")
                    _record(rel, number, number)
                if total % 256 == 0 and time.monotonic() > give_up:
                    stopped = f"{MAX_SEARCH_SECONDS:g} s"
                    break
            if stopped:  # also in the last file walked: the count must not look complete
                break
    if stopped:
        notes.append(f"[search stopped after {stopped}, before the end of the repository; {narrow}]")
    if not hits:
        return "\n".join([f"No matches for {query!r}. Try a shorter or different identifier, or list_directory.", *notes])
    if total > len(hits) or stopped:
        counted = (f"{total:,}" if not stopped else f"more than {total:,}" if stopped.endswith("matching lines")
                   else f"at least {total:,}")
        notes.insert(0,
            f"[showing the first {len(hits)} of {counted} matches; search for a more specific "
            "identifier (a full function or class name) to narrow it]"
        )
    return "\n".join(hits + notes)



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
                "part or to continue. Paths are relative to the repository root, as list_directory and "
                "search_code show them; paths outside the repository, secrets such as .env, and .git are "
                "refused. Use this once you know which file you need; use search_code to find it."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "File path relative to the repository root, exactly as list_directory or search_code shows it.",
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
                        "description": "Text to look for: a name from the question or the code, or 'def <name>' for its definition.",
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

# llm.bounded_reply puts this key in the arguments of a call it will not run (too many
# calls in one turn, arguments too long): check_arguments then returns its text as the problem.
NOT_RUN_KEY = "_not_run"


def check_arguments(name: str, args: dict) -> str | None:
    """Compare ``args`` with the tool's schema; return a problem the model can fix, or None."""
    odd = [key for key in args if not isinstance(key, str)]
    if odd:  # a caller's dict, not JSON: sorting or joining these names would raise
        return f"{name}: argument names must be strings, got {shorten(odd[0])}"
    if NOT_RUN_KEY in args:
        why = args[NOT_RUN_KEY]
        return (why if isinstance(why, str) else shorten(why))[:500]
    schema = {s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS}[name]
    allowed = schema["properties"]
    missing = [key for key in schema["required"] if key not in args]
    if missing:
        return f"{name} needs the argument(s) {', '.join(missing)}"
    unexpected = sorted(set(args) - set(allowed))
    if unexpected:
        return f"{name} does not take {shorten(', '.join(unexpected), 200)}; its arguments are {', '.join(allowed)}"
    for key, value in args.items():
        kind = allowed[key]["type"]
        wrong_bool = isinstance(value, bool) and kind != "boolean"
        if wrong_bool or not isinstance(value, _JSON_TYPES[kind]):
            return f"{name}: {key} must be a JSON {kind}, got {shorten(value)}"
    return None


# --------------------------------------------------------------------------- dispatch (M3)

def dispatch_tool(name, args, repo_root) -> str:
    """Run the tool the model asked for and return its result as text. Never raises (for Exception).

    Contract:
        name       the tool name from the model (untrusted: may be unknown, may not even be a
                   str: a number, None, or an unhashable list or dict).
        args       the parsed arguments (untrusted: may not even be a dict).
        repo_root  bound by the application; never read from ``args``.
        returns    the tool's text, or a string starting with "Error:" that says what to do
                   instead, for: an unknown tool (only the names in TOOL_FUNCTIONS are tools;
                   no other function of this module may be reached), arguments that are not an
                   object, missing, unexpected or wrongly typed arguments, and a call the
                   completion wrapper refused to run (``check_arguments`` finds all of these and
                   says which arguments the tool takes, or why the call was not run), a sandbox
                   ValueError, a ToolError, and any other exception inside a tool.
        calls      ``fn(repo_root, **args)``: by name, so the order of the model's JSON keys
                   does not matter (``{"end_line": 9, "path": ...}`` is a valid call).
        lets pass  KeyboardInterrupt and SystemExit (BaseException, not Exception): Ctrl-C
                   inside a tool stops the run; it is not an observation for the model.

    Hint: check the name is a str, look it up in TOOL_FUNCTIONS, validate, then call ``fn(repo_root, **args)``
    inside try/except. See lesson/lesson.agent.md, "Section 3: Technical Explanation".
    """
    fn = TOOL_FUNCTIONS.get(name) if isinstance(name, str) else None  # a list name is unhashable
    if fn is None:
        return f"Error: unknown tool {shorten(name)}. Available tools: {', '.join(TOOL_FUNCTIONS)}."
    if not isinstance(args, dict):
        return f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}."
    problem = check_arguments(name, args)
    if problem:
        return f"Error: {problem}."
    try:
        return fn(repo_root, **args)
    except (ValueError, ToolError) as exc:
        return f"Error: {exc}"
    except Exception as exc:  # a bug in a tool must not end the run: the model reads it instead
        return f"Error: {name} failed ({type(exc).__name__}: {str(exc)[:300]}). Try different arguments or another tool."
