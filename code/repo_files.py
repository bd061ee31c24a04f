"""Reading a repository you don't trust: visibility rules, race-safe openers, the walk, lines.

Provided machinery shared by tools.py (both the learner's copy and rubric/reference/), the
context selector, the citation check and the stretch edit tool; tools.py re-exports every public
name, so ``tools.open_in_root`` and ``repo_files.open_in_root`` are the same function.

Containment (tools.safe_resolve) says where a path lands *when it is checked*. The repository can
change between that check and the open (a folder swapped for a symlink), so the openers here
(open_in_root, read_text_in_root, open_resolved) open again, component by component from the
root, following no symlink at all, and refuse what is not a plain regular file: FIFOs, devices
and sockets (never waited on), and regular files with more than one hard link (a hard link to
.env under another name is the same secret, and nothing in the file says so). Visibility
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
from collections import OrderedDict
from contextlib import contextmanager
from functools import lru_cache
from itertools import islice
from operator import attrgetter
from pathlib import Path

# Bounds on reading (tools.py re-exports them; its own bounds are there).
MAX_LINE_CHARS = 1_000          # a longer line is cut, with a marker
BINARY_SNIFF_BYTES = 8_192      # a NUL byte in this prefix means "binary"
MAX_SCAN_BYTES = 16 * 1024 * 1024   # read_file reads at most this much of one file per call
MAX_WALK_DEPTH = 64             # folders nested deeper than this are not walked
MAX_WALK_FILES = 50_000         # the walk stops after this many files
MAX_WALK_DIRS = 20_000          # ... or after entering this many folders (a million empty ones cost minutes)
MAX_OPEN_FOLDERS = 32          # folder descriptors a TreeReader keeps open (a walk needs about its depth)
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


# --------------------------------------------------------------------------- visibility rules

# What editors, file managers and people add to a name: stripped (repeatedly) before judging it.
_DECORATION = re.compile(r"(?:\.(?:bak|orig|old|save|swp|swo|tmp|backup|copy|sav|prev|\d+)|~| copy(?: \d+)?| \(\d+\))$")
KEY_PREFIXES = tuple(sorted(KEY_FILE_NAMES))    # id_rsa_work, id_ed25519-github: keys too (not .pub)


def _canonical_name(part: str) -> str:
    """The name as a filesystem might treat it, without the decorations editors add, stripped
    until the name stops changing (id_rsa~.bak, .env~.orig, "id_rsa copy", "id_rsa (1)")."""
    name = unicodedata.normalize("NFKC", part).casefold()
    name = name.split(":", 1)[0]   # Windows: ".env::$DATA" is a stream of .env
    while True:
        before = name
        name = name.rstrip(" .")   # Windows: ".env. " opens .env
        name = name.strip("#~")    # .env~, #.env#
        if name.startswith(".#"):  # Emacs lock files: .#.env
            name = name[2:]
        stripped = _DECORATION.sub("", name)
        name = stripped if stripped.strip(" .#~") else name  # ".bak" alone stays a name
        if name == before:
            return name


@lru_cache(maxsize=4096)  # a walk asks about the same folder names for every file below them
def excluded_name(part: str) -> bool:
    """True if one path component (a folder or a file name) is a secret or noise by its name."""
    name = _canonical_name(part)
    return (
        name in EXCLUDED_DIRS
        or name in SECRET_FILE_NAMES
        or name in KEY_FILE_NAMES
        or name.startswith(KEY_PREFIXES) and not name.endswith(".pub")
        or name.startswith(SECRET_PREFIXES)
        or name.endswith(SECRET_SUFFIXES)
    )


def is_excluded(parts) -> bool:
    """True if a repository-relative path (given as its components) must never reach the model.

    The same rule for every component: ``.env/pyvenv.cfg`` and ``deploy/id_rsa/key`` are as
    hidden as ``.env`` itself.
    """
    return any(map(excluded_name, parts))


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


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """A file name made safe to show: undecodable bytes replaced (so it can be sent as JSON) and
    control characters written as escapes (a newline in a name cannot fake a line of output), bidi
    overrides too (they make what you read differ from what is there: an edit's diff, a name)."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate from JSON ("\\ud800"), which no file name holds
        raw = text.encode("utf-8", "replace")
    text = raw.decode("utf-8", "replace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def _encodable(text: str) -> bool:
    """True if the OS can take ``text`` as a name (JSON's "\\ud800" decodes to a lone surrogate)."""
    try:
        os.fsencode(text)
        return True
    except UnicodeError:
        return False


def _excluded_message(shown: str) -> str:
    return (
        f"{shown} is excluded by the sandbox (secrets, .git, virtualenvs and caches are "
        "never shown); read source files instead"
    )


# --------------------------------------------------------------------------- the walk

def iter_repo_files(repo_root):
    """Yield (path, rel_path) for every visible regular file, in name order, depth first.

    Does not follow symlinks (so no loops and no way out of the root), skips excluded folders
    without listing them and virtualenvs (told from their listing) without walking them, walks
    with a stack rather than recursion, and stops at MAX_WALK_DEPTH folders deep and after
    MAX_WALK_FILES files or MAX_WALK_DIRS folders. Shared with context_selector.py so both see
    the same files. Open what it yields with open_in_root(root, rel_path): the tree
    may change after the walk.
    """
    root = Path(repo_root).resolve()
    stack = [(iter(_sorted_entries(root)), "", 0, root)]  # (entries, rel of the folder + "/", depth, Path)
    count, folders = 0, 0
    while stack:
        entries, prefix, depth, folder = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        name = entry.name
        if excluded_name(name):  # parents were judged on the way down
            continue
        try:
            if entry.is_dir(follow_symlinks=False) and not (_JUNCTIONS and _is_junction(entry)):
                if depth + 1 < MAX_WALK_DEPTH:
                    folders += 1  # a virtualenv too: listing it is the work being bounded
                    if folders > MAX_WALK_DIRS:
                        return
                    inside = _sorted_entries(entry.path)
                    if not _lists_virtualenv(entry.path, inside):
                        stack.append((iter(inside), f"{prefix}{name}/", depth + 1, _child(folder, name)))
            elif entry.is_file(follow_symlinks=False):  # skips symlinks, FIFOs, sockets, devices
                yield _child(folder, name), prefix + name  # no path is parsed: names are single parts
                count += 1
                if count >= MAX_WALK_FILES:
                    return
        except OSError:
            continue


def _join_parsing(folder: Path, name: str) -> Path:
    return folder / name


# Building each file's Path with ``/`` parses the name again (4 times the cost of appending it, a
# tenth of the walk); pathlib's own walkers append a known single part. Used only if it gives the same Path.
_child = getattr(Path, "_make_child_relpath", None) or _join_parsing
try:
    if _child(Path(os.path.abspath("a")), "b.py") != Path(os.path.abspath("a")) / "b.py":
        _child = _join_parsing
except Exception:  # a Python whose private helper differs: the public way
    _child = _join_parsing
_JUNCTIONS = os.name == "nt"   # only Windows has junctions; elsewhere is_junction() is always False
_BY_NAME = attrgetter("name")


def _sorted_entries(folder) -> list:
    """A folder's entries by name; at most MAX_WALK_FILES of them (a million-file folder is cut)."""
    try:
        with os.scandir(folder) as scan:
            entries = list(islice(scan, MAX_WALK_FILES))
    except OSError:  # unreadable folder, or a path too long: nothing to show from it
        return []
    entries.sort(key=_BY_NAME)
    return entries


def _lists_virtualenv(folder, entries) -> bool:
    """is_virtualenv, judged from the folder's listing: no lookup per marker (two system calls per
    folder cost more than reading the names). Casefolded, as a case-insensitive disk would match."""
    if len(entries) >= MAX_WALK_FILES:  # a cut listing may lack the marker: look it up
        return is_virtualenv(folder)
    names = "\0" + "\0".join(map(_BY_NAME, entries)).casefold() + "\0"  # one pass in C, not one call per name
    return any(f"\0{marker}\0" in names for marker in VIRTUALENV_MARKERS)


def _is_junction(entry) -> bool:
    """Windows junctions lead elsewhere like symlinks, but is_symlink() says False (Python 3.12+)."""
    check = getattr(entry, "is_junction", None)
    return bool(check and check())


# --------------------------------------------------------------------------- opening inside the root

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
# A folder passed through on the way down is only looked up in, never listed: Linux's O_PATH opens
# it with search permission alone, so a traverse-only folder (mode 0711) above the root does not
# stop the openers. Elsewhere it is opened for reading, as before.
_PASS_FLAGS = (getattr(os, "O_PATH", 0) | getattr(os, "O_CLOEXEC", 0)) if hasattr(os, "O_PATH") else _READ_FLAGS
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


def _refuse_kind(st, shown: str, want_dir: bool) -> None:
    """The file-kind rule: a folder when one is wanted, else a regular file (never a FIFO or device)."""
    if want_dir:
        if not stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{shown!r} is a file, not a directory; use read_file to read it")
        return
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown!r} is a directory; use list_directory to see what is inside")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{shown!r} is not a regular file (a pipe, socket or device); it cannot be read")


def _check_opened(fd: int, shown: str, want_dir: bool) -> None:
    """Refuse what is not a plain file (or folder): judged on the OPEN descriptor, so nothing can swap it."""
    st = os.fstat(fd)
    _refuse_kind(st, shown, want_dir)
    if not want_dir and st.st_nlink > 1:
        raise ToolError(f"{shown!r} has {st.st_nlink} hard links; the sandbox refuses hard-linked files, "
                        "which can be a secret under another name")


def _open_fd(root, parts: tuple[str, ...], want_dir: bool, judge: bool = True, shown: str | None = None) -> int:
    """An open descriptor for root/parts, following no symlink below the root; raises ToolError.

    ``judge=False`` skips the visibility rules (the caller judged the path already); ``shown`` is
    how errors name the path (default: parts joined).
    """
    with TreeReader(root, judge=judge) as tree:
        return tree.open_fd(parts, want_dir, shown)


class TreeReader:
    """Opens many files of one tree the way open_in_root does, opening each folder only once.

    ``with TreeReader(root) as tree: tree.open("pkg/app.py")``. Reading a whole repository (the
    context index, search_code) through open_in_root re-opens and re-judges every parent folder
    for every file; this keeps the last MAX_OPEN_FOLDERS folders open instead. A kept folder is
    the folder that was checked when it was opened: if its path is swapped for a symlink later,
    the reader goes on reading that folder and never follows the link. ``judge=False`` skips the
    visibility rules (open_resolved's callers judged the path already). ``walked=True``: the caller
    opens only what iter_repo_files has just yielded, whose listing of each folder was judged for a
    virtualenv already, so folders opened one by one (openat) are not looked up again for its
    markers (search_code: a sixth of its time on a large tree). Names are judged as always; a
    virtualenv made under a running walk may be read from, as if it had been made a moment before.
    """

    def __init__(self, repo_root, judge: bool = True, walked: bool = False):
        self.root = Path(repo_root).resolve()
        self.judge = judge
        self.walked = walked
        self._folders: OrderedDict[tuple[str, ...], int] = OrderedDict()  # parts -> descriptor

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        while self._folders:
            os.close(self._folders.popitem()[1])

    def open(self, relative):
        """Like open_in_root(root, relative): a binary file object; raises ToolError."""
        parts = _parts_of(relative)
        if not parts:
            raise ToolError("'.' is a directory; use list_directory to see what is inside")
        return os.fdopen(self.open_fd(parts, want_dir=False), "rb")

    def read(self, relative, limit: int, shown: str | None = None) -> bytes:
        """At most ``limit`` bytes of a file, opened as open() opens it; raises ToolError or OSError.
        A walk's own names can come as a tuple of parts (no parsing) with ``shown`` for errors."""
        parts = _parts_of(relative)
        fd, size = self._open_kept_file(parts) if USE_DIR_FD else (None, None)
        if fd is None:  # anything but a plain file in a kept folder: the general opener and its errors
            fd = self.open_fd(parts, want_dir=False, shown=shown)
        try:
            return read_at_most(fd, limit, size)
        finally:
            os.close(fd)

    def _open_kept_file(self, parts: tuple[str, ...]) -> tuple[int | None, int | None]:
        """open_fd(parts, want_dir=False) for the common case of a walk, in fewer Python calls (per
        file, the general opener's cost as much as its system calls): a visible regular file with
        one link, in a folder already kept open. The same checks in the same order: the name rule,
        a look without following before opening (no device is opened), the kind and links of the
        open descriptor. (descriptor, size of the open file), or (None, None) for anything else,
        which open_fd then opens or refuses with its message."""
        where = self._folders.get(parts[:-1]) if parts else None
        if where is None or (self.judge and any(map(excluded_name, parts))):
            return None, None
        try:
            if not stat.S_ISREG(os.stat(parts[-1], dir_fd=where, follow_symlinks=False).st_mode):
                return None, None
            fd = os.open(parts[-1], _READ_FLAGS | _NOFOLLOW, dir_fd=where)
        except OSError:
            return None, None
        try:
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1:
            self._folders.move_to_end(parts[:-1])
            return fd, st.st_size
        os.close(fd)
        return None, None

    def open_fd(self, parts: tuple[str, ...], want_dir: bool, shown: str | None = None) -> int:
        """A new descriptor (the caller closes it) for the file or folder root/parts."""
        shown = shown or printable("/".join(parts)) or "."
        if self.judge and is_excluded(parts):
            raise ToolError(_excluded_message(repr(shown)))
        if not USE_DIR_FD:
            return _open_fd_by_path(self.root, parts, shown, want_dir, self.judge)
        try:
            if not parts:
                fd = os.open(self.root, _READ_FLAGS | _DIRECTORY)  # the root was chosen by the application
            else:
                where, temporary = self._folder(parts[:-1], shown)
                try:
                    fd = self._open_child(where, parts[-1], shown, want_dir, last=True)
                finally:
                    if temporary:
                        os.close(where)
        except OSError as exc:
            raise _os_refusal(shown, exc) from None
        try:
            _check_opened(fd, shown, want_dir)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _folder(self, parts: tuple[str, ...], shown: str) -> tuple[int, bool]:
        """(descriptor, temporary) of folder root/parts; a temporary one is the caller's to close.

        Folders down to MAX_WALK_DEPTH are kept; deeper ones (a hostile path, never a walk) are not.
        """
        fd = self._folders.get(parts)  # a walk reads a folder's files one after another: kept already
        if fd is not None:
            self._folders.move_to_end(parts)
            return fd, False
        have = min(len(parts), MAX_WALK_DEPTH)
        while have and parts[:have] not in self._folders:  # the longest kept prefix
            have -= 1
        if parts[:have] not in self._folders:
            self._keep((), os.open(self.root, _PASS_FLAGS | _DIRECTORY))
        self._folders.move_to_end(parts[:have])
        fd, temporary = self._folders[parts[:have]], False
        for depth in range(have, len(parts)):
            try:
                child = self._open_child(fd, parts[depth], shown, want_dir=True, passing=True)
            finally:
                if temporary:
                    os.close(fd)
            temporary = depth >= MAX_WALK_DEPTH
            fd = child if temporary else self._keep(parts[:depth + 1], child)
        return fd, temporary

    def _keep(self, parts: tuple[str, ...], fd: int) -> int:
        self._folders[parts] = fd
        while len(self._folders) > MAX_OPEN_FOLDERS:  # the least recently used goes first
            os.close(self._folders.popitem(last=False)[1])
        return fd

    def _open_child(self, fd: int, name: str, shown: str, want_dir: bool, last: bool = False,
                    passing: bool = False) -> int:
        """Open one entry of the folder ``fd`` without following it; raises OSError or ToolError.
        ``passing``: a folder on the way down, opened for lookups only (_PASS_FLAGS)."""
        # Look before opening, without following: a device is never even opened. A folder on the
        # way down needs no look (one call per folder): O_NOFOLLOW | O_DIRECTORY refuse a link or
        # anything but a folder before opening it.
        if not passing:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise OSError(errno.ELOOP, "symlink")
            if last:
                _refuse_kind(st, shown, want_dir)
            elif not stat.S_ISDIR(st.st_mode):
                raise OSError(errno.ENOTDIR, "not a directory")
        if not want_dir:
            return os.open(name, _READ_FLAGS | _NOFOLLOW, dir_fd=fd)
        child = os.open(name, (_PASS_FLAGS if passing else _READ_FLAGS) | _NOFOLLOW | _DIRECTORY, dir_fd=fd)
        if self.judge and not self.walked and any(_exists_at(marker, child) for marker in VIRTUALENV_MARKERS):
            os.close(child)
            raise ToolError(_excluded_message(repr(shown)))
        return child


READ_FIRST = 65_536                # bytes asked for by a file's first read: most source files fit


def read_at_most(fd: int, limit: int, size: int | None = None) -> bytes:
    """Up to ``limit`` bytes of the open regular file ``fd``, from where it stands.

    A read reserves memory for all it may return: asking for 2 MB to get a 5 KB file took 15 times
    as long as the read itself, so the first read asks for READ_FIRST bytes, or, when the caller
    knows the file's ``size`` (fstat of a file just opened, at its start), one byte more than that.
    A read that returns less than asked has reached the end of a regular file; a bigger file is
    read again in one read (joining two parts copied the whole file once more, which cost more
    than reading it). A file that grew past its size (or lied about it) has the rest read after.
    """
    first = min(limit, READ_FIRST if size is None or size < 0 else size + 1)
    data = os.read(fd, first)
    if len(data) < first or first >= limit:
        return data
    if size is not None and size >= 0:
        return data + os.read(fd, limit - len(data))
    os.lseek(fd, -len(data), os.SEEK_CUR)
    return os.read(fd, limit)


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
        # sides of the identity check. This holds on Windows, where a folder holding an open file
        # cannot be renamed; on POSIX, two checks by path can be raced, which is why openat() is used there.
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
    Inside ``with rooted(repo_root):`` a path below that root is opened from the root, as the walk
    opens it (folders above the root are never opened one by one: one may be traverse-only);
    elsewhere from the filesystem's anchor.
    No visibility rules here (judge those with resolve_visible first); the same file-kind and
    hard-link policy as open_in_root. ``write_dir=True`` returns a descriptor of the file's
    folder instead (-1 where the OS has no openat), for writing a temp file beside it.
    """
    path = Path(resolved)
    root = _ROOT.get()
    anchor = root if root is not None and path != root and path.is_relative_to(root) else Path(path.anchor)
    parts = path.relative_to(anchor).parts
    if not parts:
        raise ToolError("that path is not a file")
    shown = printable(parts[-1])  # errors name the file, never the absolute path (the model reads them)
    if write_dir:
        return _open_fd(anchor, parts[:-1], want_dir=True, judge=False, shown=shown)
    return os.fdopen(_open_fd(anchor, parts, want_dir=False, judge=False, shown=shown), "rb")


_ROOT: contextvars.ContextVar[Path | None] = contextvars.ContextVar("tools_root", default=None)


@contextmanager
def rooted(repo_root):
    """``with rooted(repo_root):`` open_resolved opens paths below ``repo_root`` from it."""
    token = _ROOT.set(Path(repo_root).resolve())
    try:
        yield
    finally:
        _ROOT.reset(token)


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


# --------------------------------------------------------------------------- lines

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
    if "\r" not in text:
        return lines  # most files: no line to strip (the index splits every file it reads)
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def matching_lines(data: bytes, needle: str, low: bytes | None = None, start: int = 0):
    """Yield (line number, line) for each line of ``data`` containing ``needle`` (already lowered),
    lines numbered as split_lines numbers them. An ASCII needle is found in the raw bytes, lowered
    once (bytes.lower changes ASCII only, so positions hold): only matching lines are decoded.
    ``low``: ``data.lower()`` when the caller already has it (search_code's fast reject), and
    ``start``: where its first match is, so that it is not looked for twice."""
    if not needle.isascii():
        for number, line in enumerate(split_lines(data.decode("utf-8", "replace")), 1):
            if needle in line.lower():
                yield number, line
        return
    wanted, low = needle.encode(), data.lower() if low is None else low
    number, counted, at = 1, 0, low.find(wanted, start)
    while at >= 0:
        number += count_newlines(data, counted, at)
        counted = at
        start, end = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at)
        end = len(data) if end < 0 else end
        line = data[start:end].decode("utf-8", "replace")
        yield number, line[:-1] if line.endswith("\r") else line
        at = low.find(wanted, end)


def count_newlines(data: bytes, start: int, stop: int) -> int:
    """``data.count(b"\n", start, stop)``; a long span is counted by numpy, which compares many
    bytes per instruction where bytes.count takes one at a time (2 MB: 0.8 ms against 3.1 ms here;
    search_code numbers the line of a match at the end of a big file this way)."""
    if stop - start < FOLD_STEP:
        return data.count(b"\n", start, stop)
    import numpy as np  # here, not above: most searches never need it, and tools.py imports this module

    return int(np.count_nonzero(np.frombuffer(data, np.uint8, stop - start, start) == 10))


FOLD_STEP = 65_536                 # find_lowered lowers this much of a file at a time
SAMPLE_BYTES = 4_096               # ... after judging which of the needle's bytes is rarest on this much


def find_lowered(data: bytes, wanted: bytes) -> int:
    """``data.lower().find(wanted)`` for an ASCII ``wanted`` already lowered, one slice at a time:
    a big file without it (most files) never gets a lowered copy of its own size, which cost
    more than the search itself. Slices overlap by len(wanted) - 1 bytes, so no match is cut.

    In a big file, slices are lowered only around the needle's rarest byte (judged on the file's
    first bytes): a match holds that byte, in either case, at its place in the needle, and finding
    one byte (bytes.find) is many times faster than lowering. A file without it is passed over
    without lowering anything."""
    if len(data) <= FOLD_STEP:
        return data.lower().find(wanted)
    if not wanted:
        return 0
    sample, candidates = data[:SAMPLE_BYTES].lower(), sorted(set(wanted))
    # A byte absent from the sample is the best guess; else the least counted on a quarter of it
    # (counting each byte on all of it took as long as searching a 128 KB file).
    rare = next((byte for byte in candidates if byte not in sample), None)
    if rare is None:
        quarter = sample[:SAMPLE_BYTES // 4]
        rare = min(candidates, key=quarter.count)
    at_in_needle = wanted.index(rare)
    variants = [bytes([rare])] + ([bytes([rare - 32])] if 97 <= rare <= 122 else [])  # b"k", b"K"
    seen = [-2] * len(variants)  # where each variant was last found (-1: nowhere after that)
    start = 0
    while start < len(data):
        # A match at p >= start has the rare byte at p + at_in_needle: skip to where that can be.
        for i, variant in enumerate(variants):
            if seen[i] != -1 and seen[i] < start + at_in_needle:
                seen[i] = data.find(variant, start + at_in_needle)
        found = [at for at in seen if at >= 0]
        if not found:
            return -1
        start = min(found) - at_in_needle
        at = data[start:start + FOLD_STEP + len(wanted) - 1].lower().find(wanted)
        if at >= 0:
            return start + at
        start += FOLD_STEP
    return -1


def count_matching_lines(data: bytes, low: bytes, wanted: bytes, at: int, limit: int) -> int:
    """How many lines hold ``wanted`` (ASCII, lowered) from its match at ``at`` on, at most ``limit``:
    matching_lines without numbering or decoding, for matches that will not be shown."""
    count = 0
    while at >= 0 and count < limit:
        count += 1
        end = data.find(b"\n", at)
        at = -1 if end < 0 else low.find(wanted, end)
    return count


def _is_binary(prefix: bytes) -> bool:
    return b"\x00" in prefix


def sniff(tree: "TreeReader", relative) -> str:
    """"text", "binary" or "unreadable", from a file's first BINARY_SNIFF_BYTES alone: what a whole
    walk (the context index's budget) needs to know before it reads a file whole."""
    try:
        with tree.open(relative) as fh:
            return "binary" if _is_binary(fh.read(BINARY_SNIFF_BYTES)) else "text"
    except (ToolError, OSError):
        return "unreadable"


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
