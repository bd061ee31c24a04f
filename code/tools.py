"""The agent-computer interface: a path sandbox, three read-only tools, their schemas, dispatch.

The model never touches the disk. It names a tool and sends JSON arguments; dispatch_tool runs
the matching function below with the repository root the *application* chose, and returns text
that the model reads as its observation.

Learner-owned (the rest of this file is provided):
    safe_resolve   M1  keep every path inside the repository
    dispatch_tool  M3  route a tool call by name; never raise

Policy (provided code). Containment (safe_resolve) says where a path lands *when it is checked*.
The repository can change between that check and the open (a folder swapped for a symlink), so
the provided openers (open_in_root, read_text_in_root) open again, component by component from
the root, following no symlink at all, and refuse what is not a plain regular file: FIFOs,
devices and sockets (never waited on), and regular files with more than one hard link (a hard
link to .env under another name is the same secret, and nothing in the file says so). Visibility
(is_excluded) applies one name rule to every path component, plus virtualenvs found by content.
A name list can never be complete: point the copilot at repositories whose secrets live elsewhere.
"""

from __future__ import annotations

import contextvars
import errno
import os
import re
import stat
import unicodedata
from contextlib import contextmanager
from pathlib import Path

# Bounds on what one tool call may return: a huge observation buries the evidence.
MAX_SPAN_LINES = 150            # lines shown by one read_file call
MAX_READ_CHARS = 12_000         # ... and at most this many characters of them (under tool_result's cap)
MAX_LINE_CHARS = 1_000          # a longer line is cut, with a marker
MAX_SEARCH_HITS = 40            # matching lines shown by one search_code call
MAX_HIT_CHARS = 200             # characters of each matching line shown
MAX_QUERY_CHARS = 200
MAX_SEARCH_FILE_BYTES = 2_000_000   # search skips larger files (minified bundles, data dumps)
MAX_LIST_ENTRIES = 200
BINARY_SNIFF_BYTES = 8_192      # a NUL byte in this prefix means "binary"
MAX_SCAN_BYTES = 16 * 1024 * 1024   # read_file reads at most this much of one file per call
MAX_PATH_CHARS = 4_096          # longer paths are refused before resolving (a 1 MB path takes ~40 s)
MAX_WALK_DEPTH = 64             # folders nested deeper than this are not walked
MAX_WALK_FILES = 50_000         # the walk stops after this many files
MAX_WALK_DIRS = 20_000          # ... or after entering this many folders (a million empty ones cost minutes)
MAX_ECHO_CHARS = 120            # how much of an untrusted argument an error message repeats

# Visibility rules, applied to EVERY component of the resolved, repository-relative path.
# Containment (safe_resolve) answers "is it inside the repository?"; these answer "should a model
# ever see it?". Names are compared casefolded and NFKC-normalized (.ENV opens .env on
# case-insensitive filesystems), with editor decorations removed (.env~, #.env#, .#.env).
EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".aws", ".ssh", ".gnupg", ".docker", ".kube",
    "conda-meta",
})
SECRET_FILE_NAMES = frozenset({
    ".env", ".envrc", ".netrc", "_netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc",
    ".yarnrc", ".dockercfg", "credentials",
})
SECRET_PREFIXES = (".env.", ".env-", ".env_")   # .env.local, .env-prod, .env_backup
# Private SSH keys (the FIDO "_sk" ones too); their .pub halves are public and stay visible.
KEY_FILE_NAMES = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk", "id_xmss"})
SECRET_SUFFIXES = (".env", ".pem", ".key", ".p12", ".pfx", ".ppk", ".jks", ".keystore", ".kdbx", ".asc")
VIRTUALENV_MARKERS = ("pyvenv.cfg", "conda-meta")  # a folder holding one of these is a virtualenv


class ToolError(Exception):
    """An expected tool failure (not found, excluded, wrong kind of file): the message is for the model."""


def shorten(value, limit: int = MAX_ECHO_CHARS) -> str:
    """repr(value), cut to ``limit`` characters: error messages never echo a huge argument whole."""
    try:
        text = repr(value)
    except Exception:  # a hostile object's __repr__, or an int too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}...({len(text):,} characters)"


def split_lines(text: str) -> list[str]:
    """The ONE line-splitting rule: split on "\\n" only, drop one trailing "\\r" from each line.

    str.splitlines() also splits on form feeds, U+2028 and a dozen others, so tools using it
    disagree about line numbers with tools that read line by line. Every tool, the context
    selector and the citation check number lines with this function. A final "\\n" ends the last
    line; it does not start an empty one.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


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
                   symlinks leading out, and sibling folders that merely share a prefix
                   (``repo_evil`` next to ``repo``).
        allowed    ``src/app.py``, ``./README.md``, ``sub/../file.py``, ``..foo.py``, ``...``,
                   an absolute path that lands inside, a symlink whose target is inside.

    Hint: check the cheap things first (type, NUL, length), then resolve, then judge. Compare the
    resolved target with the resolved root component by component (``Path.is_relative_to``),
    never as strings. See lesson/lesson.agent.md, "Section 4: Guided Examples" (Example 1).
    """
    # TODO(M1): resolve the path under the root and raise ValueError if its real location is outside.
    raise NotImplementedError("M1: tools.safe_resolve is not implemented yet (see TODO(M1) in code/tools.py)")


# --------------------------------------------------------------------------- visibility rules

_BACKUP_SUFFIXES = (".bak", ".orig", ".old", ".save", ".swp", ".swo", ".tmp")


def _canonical_name(part: str) -> str:
    """The name as a filesystem might treat it, without the decorations editors add."""
    name = unicodedata.normalize("NFKC", part).casefold()
    name = name.split(":", 1)[0]   # Windows: ".env::$DATA" is a stream of .env
    name = name.rstrip(" .")       # Windows: ".env. " opens .env
    name = name.strip("#~")        # .env~, #.env#
    if name.startswith(".#"):      # Emacs lock files: .#.env
        name = name[2:]
    for suffix in _BACKUP_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    return name


def excluded_name(part: str) -> bool:
    """True if one path component (a folder or a file name) is a secret or noise by its name."""
    name = _canonical_name(part)
    return (
        name in EXCLUDED_DIRS
        or name in SECRET_FILE_NAMES
        or name in KEY_FILE_NAMES
        or name.startswith(SECRET_PREFIXES)
        or name.endswith(SECRET_SUFFIXES)
    )


def is_excluded(parts) -> bool:
    """True if a repository-relative path (given as its components) must never reach the model.

    The same rule for every component: ``.env/pyvenv.cfg`` and ``deploy/id_rsa/key`` are as
    hidden as ``.env`` itself.
    """
    return any(excluded_name(part) for part in parts)


def is_virtualenv(folder) -> bool:
    """True if a folder holds a virtualenv marker (``pyvenv.cfg``, ``conda-meta``), whatever its name."""
    return any(os.path.lexists(os.path.join(folder, marker)) for marker in VIRTUALENV_MARKERS)


def _inside_virtualenv(root: Path, parts) -> bool:
    return any(is_virtualenv(root.joinpath(*parts[:i])) for i in range(1, len(parts) + 1))


def relative_parts(repo_root, resolved: Path) -> tuple[str, ...]:
    """Components of an already-resolved path, relative to the resolved root."""
    return resolved.relative_to(Path(repo_root).resolve()).parts


def display_path(repo_root, resolved: Path) -> str:
    """Repository-relative path with forward slashes, safe to print (undecodable bytes replaced)."""
    rel = "/".join(relative_parts(repo_root, resolved)) or "."
    return printable(rel)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """A file name made safe to show: undecodable bytes replaced (so it can be sent as JSON) and
    control characters written as escapes (a newline in a name cannot fake a line of output)."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate from JSON ("\\ud800"), which no file name holds
        raw = text.encode("utf-8", "replace")
    text = raw.decode("utf-8", "replace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def _excluded_message(shown: str) -> str:
    return (
        f"{shown} is excluded by the sandbox (secrets, .git, virtualenvs and caches are "
        "never shown); read source files instead"
    )


def _encodable(text: str) -> bool:
    """True if the OS can take ``text`` as a name (JSON's "\\ud800" decodes to a lone surrogate)."""
    try:
        os.fsencode(text)
        return True
    except UnicodeError:
        return False


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


def iter_repo_files(repo_root):
    """Yield (path, rel_path) for every visible regular file, in name order, depth first.

    Does not follow symlinks (so no loops and no way out of the root), skips excluded folders and
    virtualenvs without entering them, walks with a stack rather than recursion, and stops at
    MAX_WALK_DEPTH folders deep and after MAX_WALK_FILES files or MAX_WALK_DIRS folders. Shared with context_selector.py
    so both see the same files. Open what it yields with open_in_root(root, rel_path): the tree
    may change after the walk.
    """
    root = Path(repo_root).resolve()
    stack = [(iter(_sorted_entries(root)), ())]
    count, folders = 0, 0
    while stack:
        entries, rel = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if excluded_name(entry.name):  # parents were judged on the way down
            continue
        parts = rel + (entry.name,)
        try:
            if entry.is_dir(follow_symlinks=False) and not _is_junction(entry):
                if len(parts) < MAX_WALK_DEPTH and not is_virtualenv(entry.path):
                    folders += 1
                    if folders > MAX_WALK_DIRS:
                        return
                    stack.append((iter(_sorted_entries(entry.path)), parts))
            elif entry.is_file(follow_symlinks=False):  # skips symlinks, FIFOs, sockets, devices
                yield Path(entry.path), "/".join(parts)
                count += 1
                if count >= MAX_WALK_FILES:
                    return
        except OSError:
            continue


def _sorted_entries(folder) -> list:
    """A folder's entries by name; at most MAX_WALK_FILES of them (a million-file folder is cut)."""
    try:
        with os.scandir(folder) as scan:
            entries = [entry for entry, _ in zip(scan, range(MAX_WALK_FILES))]
    except OSError:  # unreadable folder, or a path too long: nothing to show from it
        return []
    return sorted(entries, key=lambda e: e.name)


def _is_junction(entry) -> bool:
    """Windows junctions lead elsewhere like symlinks, but is_symlink() says False (Python 3.12+)."""
    check = getattr(entry, "is_junction", None)
    return bool(check and check())


# --------------------------------------------------------------------------- opening inside the root

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
# openat() one component at a time where the OS offers it (Linux, macOS, BSDs); elsewhere
# (Windows) open by path and then check the opened file is the one the path names now.
USE_DIR_FD = bool(_NOFOLLOW and _DIRECTORY) and os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd


def _parts_of(relative) -> tuple[str, ...]:
    """Components of a repository-relative path given as a str ("a/b.py") or as a tuple of names."""
    if isinstance(relative, (tuple, list)):
        parts = tuple(relative)
    else:
        text = os.fspath(relative)
        if os.path.isabs(text) or os.path.splitdrive(text)[0]:
            raise ToolError(f"{shorten(text)} is not relative to the repository root")
        for sep in (os.sep, os.altsep):
            if sep and sep != "/":
                text = text.replace(sep, "/")
        parts = tuple(p for p in text.split("/") if p not in ("", "."))
    # ".." is walked like any other name (without following links): containment is safe_resolve's
    # job, and the paths it returns never contain "..". Keeping one check in one place means a
    # broken safe_resolve shows (break_and_observe.py's escape scenario) instead of being masked.
    if any(not isinstance(p, str) or p in ("", ".") or "/" in p or "\x00" in p for p in parts):
        raise ToolError(f"{shorten(relative)} is not a plain repository-relative path")
    return parts


def _os_refusal(shown: str, exc: OSError) -> ToolError:
    if exc.errno == errno.ENOENT:
        return ToolError(f"{shown!r} does not exist; use list_directory or search_code to find the right path")
    if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):  # a symlink where a real entry was
        return ToolError(f"{shown!r} goes through a symlink (or changed while it was being opened); "
                         "the tools open files only by their real path, so it is not read")
    return ToolError(f"cannot open {shown!r}: {exc.strerror or exc}")


def _check_opened(fd: int, shown: str, want_dir: bool) -> None:
    """Refuse what is not a plain file (or folder): judged on the OPEN descriptor, so nothing can swap it."""
    st = os.fstat(fd)
    if want_dir:
        if not stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{shown!r} is a file, not a directory; use read_file to read it")
        return
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown!r} is a directory; use list_directory to see what is inside")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{shown!r} is not a regular file (a pipe, socket or device); it cannot be read")
    if st.st_nlink > 1:
        raise ToolError(f"{shown!r} has {st.st_nlink} hard links; the sandbox refuses hard-linked files, "
                        "which can be a secret under another name")


def _open_fd(root, parts: tuple[str, ...], want_dir: bool, judge: bool = True) -> int:
    """An open descriptor for root/parts, following no symlink below the root; raises ToolError.

    ``judge=False`` skips the visibility rules (the caller judged the path already).
    """
    shown = printable("/".join(parts)) or "."
    if judge and is_excluded(parts):
        raise ToolError(_excluded_message(repr(shown)))
    root = Path(root).resolve()
    if not USE_DIR_FD:
        return _open_fd_by_path(root, parts, shown, want_dir, judge)
    fd = os.open(root, _READ_FLAGS | _DIRECTORY)  # the root itself was chosen by the application
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            # Look before opening, without following: a device is never even opened.
            st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise OSError(errno.ELOOP, "symlink")
            if last and not want_dir and not stat.S_ISDIR(st.st_mode):
                if not stat.S_ISREG(st.st_mode):
                    raise ToolError(f"{shown!r} is not a regular file (a pipe, socket or device); it cannot be read")
                flags = _READ_FLAGS | _NOFOLLOW
            elif not stat.S_ISDIR(st.st_mode):
                if last:
                    raise ToolError(f"{shown!r} is a file, not a directory; use read_file to read it")
                raise OSError(errno.ENOTDIR, "not a directory")
            else:
                flags = _READ_FLAGS | _NOFOLLOW | (_DIRECTORY if (want_dir or not last) else 0)
            child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
            if judge and (not last or want_dir):
                if any(_exists_at(marker, fd) for marker in VIRTUALENV_MARKERS):
                    raise ToolError(_excluded_message(repr(shown)))
        _check_opened(fd, shown, want_dir)
        return fd
    except OSError as exc:
        os.close(fd)
        raise _os_refusal(shown, exc) from None
    except BaseException:
        os.close(fd)
        raise


def _exists_at(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except OSError:
        return False


def _open_fd_by_path(root: Path, parts: tuple[str, ...], shown: str, want_dir: bool, judge: bool = True) -> int:
    """The fallback without openat(): open by path, then prove the open file is the one inside."""
    path = root.joinpath(*parts)
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) or _is_reparse_point(st):
            raise OSError(errno.ELOOP, "symlink")
        if not want_dir and not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{shown!r} is not a regular file (a pipe, socket or device); it cannot be read")
        if want_dir or stat.S_ISDIR(st.st_mode):
            fd = None  # folders cannot be opened by os.open everywhere: verify by path below
        else:
            fd = os.open(path, _READ_FLAGS | _NOFOLLOW)
    except OSError as exc:
        raise _os_refusal(shown, exc) from None
    try:
        opened = os.fstat(fd) if fd is not None else os.stat(path)
        # After opening, the path must name that very file with no link on the way, checked on both
        # sides of the identity check: a swap has to come and go between two checks to slip
        # through. Best effort: only openat() above rules it out.
        if not (_names_itself(path) and os.path.samestat(opened, os.stat(path)) and _names_itself(path)):
            raise OSError(errno.ELOOP, "changed while opening")
        if judge and _inside_virtualenv(root, parts if (want_dir or stat.S_ISDIR(opened.st_mode)) else parts[:-1]):
            raise ToolError(_excluded_message(repr(shown)))
        if fd is None:
            if not want_dir:
                raise ToolError(f"{shown!r} is a directory; use list_directory to see what is inside")
            return -1
        _check_opened(fd, shown, want_dir)
        return fd
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        raise _os_refusal(shown, exc) from None
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise


def _names_itself(path: Path) -> bool:
    """True if resolving ``path`` changes nothing: no component is a link (right now)."""
    return os.path.normcase(os.path.realpath(path)) == os.path.normcase(str(path))


def _is_reparse_point(st) -> bool:
    attributes = getattr(st, "st_file_attributes", 0)
    return bool(attributes & getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0))


def open_in_root(repo_root, relative):
    """Open a regular file inside the root for binary reading, race-safely; raises ToolError.

    ``relative`` is repository-relative ("pkg/app.py", as iter_repo_files and display_path give
    it, or a tuple of names, such as relative_parts of a path safe_resolve returned). Follows no
    symlink at any component (a folder swapped for a link after safe_resolve is refused, not
    followed), never blocks on a FIFO or device, and refuses hidden or secret paths, virtualenvs
    and regular files with more than one hard link. Containment itself ("..", absolute paths) is
    safe_resolve's judgement, made before; this adds what a check made before cannot promise.
    """
    parts = _parts_of(relative)
    if not parts:
        raise ToolError("'.' is a directory; use list_directory to see what is inside")
    return os.fdopen(_open_fd(repo_root, parts, want_dir=False), "rb")


def read_text_in_root(repo_root, relative, max_bytes: int, errors: str = "replace") -> str:
    """The whole text of a file opened with open_in_root, at most ``max_bytes``; raises ToolError.

    Larger files and binary files (a NUL byte near the start) are refused, not cut: a caller that
    rewrites the file must never see half of it. ``errors="strict"`` refuses undecodable bytes.
    """
    shown = printable("/".join(_parts_of(relative)))
    with open_in_root(repo_root, relative) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ToolError(f"{shown!r} is larger than {max_bytes:,} bytes; it is not read")
    if _is_binary(data[:BINARY_SNIFF_BYTES]):
        raise ToolError(f"{shown!r} is a binary file")
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError:
        raise ToolError(f"{shown!r} is not UTF-8 text") from None


def open_resolved(resolved, write_dir: bool = False):
    """Open a path safe_resolve returned, following no symlink at any component; raises ToolError.

    For callers that hold a resolved absolute path rather than (root, relative) — the edit tool.
    No visibility rules here (judge those with resolve_visible first); the same file-kind and
    hard-link policy as open_in_root. ``write_dir=True`` returns a descriptor of the file's
    folder instead (-1 where the OS has no openat), for writing a temp file beside it.
    """
    path = Path(resolved)
    anchor = Path(path.anchor)
    parts = path.relative_to(anchor).parts
    if not parts:
        raise ToolError(f"{shorten(str(path))} is not a file")
    if write_dir:
        return _open_fd(anchor, parts[:-1], want_dir=True, judge=False)
    return os.fdopen(_open_fd(anchor, parts, want_dir=False, judge=False), "rb")


class _OpenDirectory:
    """``with _OpenDirectory(root, parts) as where:`` gives what os.scandir and _lexists_in accept.

    With openat() this is a descriptor, so the listing is of the folder that was checked. The
    fallback (Windows) cannot hold a folder open: it checks the folder before listing it, so a
    swap and swap back in that instant could show names (never contents) from elsewhere.
    """

    def __init__(self, repo_root, parts):
        self.fd = _open_fd(repo_root, parts, want_dir=True)
        self.where = self.fd if self.fd >= 0 else str(Path(repo_root).resolve().joinpath(*parts))

    def __enter__(self):
        return self.where

    def __exit__(self, *exc):
        if self.fd >= 0:
            os.close(self.fd)


def _lexists_in(where, name: str) -> bool:
    if isinstance(where, int):
        return _exists_at(name, where)
    return os.path.lexists(os.path.join(where, name))


# --------------------------------------------------------------------------- what the tools showed

# While a run records (copilot.py wraps the loop in ``with recording() as shown``), read_file and
# search_code add every line range they return here: (display path, first line, last line). The
# citation check reads this structured record instead of re-parsing observation text, which a
# file name or a file's contents could forge.
_SHOWN: contextvars.ContextVar[list | None] = contextvars.ContextVar("tools_shown", default=None)


@contextmanager
def recording():
    """``with recording() as shown:`` collects (path, start, end) for every span a tool returns."""
    shown: list[tuple[str, int, int]] = []
    token = _SHOWN.set(shown)
    try:
        yield shown
    finally:
        _SHOWN.reset(token)


def current_record() -> list | None:
    """The record of the innermost ``recording()``, or None outside one."""
    return _SHOWN.get()


def _record(path: str, start: int, end: int) -> None:
    shown = _SHOWN.get()
    if shown is not None:
        shown.append((path, start, end))


# --------------------------------------------------------------------------- the tools (provided)

def _is_binary(prefix: bytes) -> bool:
    return b"\x00" in prefix


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
    _record(shown, start, last)
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


def _read_window(fh, first: int, last: int) -> tuple[list[str], int, bool]:
    """Decode lines first..last (1-based) and count the lines, reading at most MAX_SCAN_BYTES.

    Returns (lines, count, complete); complete is False when the budget ran out before the end
    of the file (count is then a lower bound). Lines split as split_lines does: on b"\\n", one
    trailing b"\\r" dropped.
    """
    limit = MAX_LINE_CHARS * 4  # bytes: up to 4 per character in UTF-8
    budget = MAX_SCAN_BYTES
    lines: list[str] = []
    number = 0
    while budget > 0:
        raw = fh.readline(min(limit + 1, budget))
        if not raw:
            return lines, number, True
        budget -= len(raw)
        number += 1
        cut = len(raw) > limit and not raw.endswith(b"\n")
        if cut:
            budget -= _skip_rest_of_line(fh, budget)  # a 5 MB single line never enters memory
        if number >= first:
            raw = raw[:-1] if raw.endswith(b"\n") else raw
            raw = raw[:-1] if raw.endswith(b"\r") else raw
            text = raw.decode("utf-8", "replace")
            if cut or len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + " [... line cut]"
            lines.append(text)
        if number >= last:
            more, complete = count_lines(fh, budget)
            return lines, number + more, complete
    return lines, number, not fh.read(1)


def _skip_rest_of_line(fh, budget: int) -> int:
    """Read to the end of the current line, at most ``budget`` bytes; return how many were read."""
    spent = 0
    while spent < budget and (chunk := fh.readline(min(1 << 16, budget - spent))):
        spent += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return spent


def count_lines(fh, budget: int = MAX_SCAN_BYTES) -> tuple[int, bool]:
    """Count the lines (as split_lines counts them) from the current position, a line start, of a
    binary file, reading at most ``budget`` bytes: (count, complete)."""
    count, last_byte = 0, b""
    while budget > 0 and (chunk := fh.read(min(1 << 20, budget))):
        budget -= len(chunk)
        count += chunk.count(b"\n")
        last_byte = chunk[-1:]
    if budget <= 0 and fh.read(1):
        return count, False
    return count + (1 if last_byte not in (b"", b"\n") else 0), True


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


def search_code(repo_root, query) -> str:
    """Find lines containing ``query`` (literal text, case-insensitive) in the repository's text files.

    Returns ``path:line: text`` lines, sorted by path then line, at most MAX_SEARCH_HITS.
    Skips excluded paths, symlinks, hard-linked, special and binary files and files over
    MAX_SEARCH_FILE_BYTES; reads at most MAX_SEARCH_TOTAL_BYTES in all.
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
    for _, rel in iter_repo_files(repo_root):
        if budget <= 0:
            notes.append(f"[search stopped after reading {MAX_SEARCH_TOTAL_BYTES:,} bytes; "
                        "list_directory and search a sub-folder's files by a more specific name]")
            break
        try:
            with open_in_root(repo_root, rel) as fh:
                data = fh.read(MAX_SEARCH_FILE_BYTES + 1)
        except (OSError, ToolError):  # changed since the walk, hard-linked, a FIFO: skipped
            continue
        budget -= len(data)
        if len(data) > MAX_SEARCH_FILE_BYTES:
            continue
        # Fast reject on the raw bytes before any decoding (most files do not match).
        if ascii_query and needle_bytes not in data.lower():
            continue
        if _is_binary(data[:BINARY_SNIFF_BYTES]):
            continue
        for number, line in enumerate(split_lines(data.decode("utf-8", "replace")), 1):
            if needle in line.lower():
                total += 1
                if len(hits) < MAX_SEARCH_HITS:
                    text = line.strip()
                    if len(text) > MAX_HIT_CHARS:
                        text = text[:MAX_HIT_CHARS] + " [...]"
                    hits.append(f"{printable(rel)}:{number}: {text}")
                    _record(printable(rel), number, number)
    if not hits:
        return "\n".join([f"No matches for {query!r}. Try a shorter or different identifier, or list_directory.", *notes])
    if total > len(hits):
        notes.insert(0,
            f"[showing the first {len(hits)} of {total} matches; search for a more specific "
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

# agent_loop.bounded_reply puts this key in the arguments of a call it will not run (too many
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
    """Run the tool the model asked for and return its result as text. Never raises.

    Contract:
        name       the tool name from the model (untrusted: may be unknown, may not even be a
                   str: a number, None, or an unhashable list or dict).
        args       the parsed arguments (untrusted: may not even be a dict).
        repo_root  bound by the application; never read from ``args``.
        returns    the tool's text, or a string starting with "Error:" that says what to do
                   instead, for: an unknown tool, arguments that are not an object, missing,
                   unexpected or wrongly typed arguments (``check_arguments`` finds these), a
                   sandbox ValueError, a ToolError, and any other exception inside a tool.

    Hint: check the name is a str, look it up in TOOL_FUNCTIONS, validate, then call ``fn(repo_root, **args)``
    inside try/except. See lesson/lesson.agent.md, "Section 3: Technical Explanation".
    """
    # TODO(M3): look the tool up, validate the arguments, call it, and turn every failure into 'Error: ...'.
    raise NotImplementedError("M3: tools.dispatch_tool is not implemented yet (see TODO(M3) in code/tools.py)")
