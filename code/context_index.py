"""The chunk index behind context_selector.py: built once, kept on disk, checked for changes.

context_selector.py decides what a chunk is and how it is scored. This module is the machinery:
it reads every visible file once (in worker processes when the repository is big), stores every
chunk's identifier counts as an inverted index so that scoring a question is a few numpy
operations, and caches that index outside the repository (config.default_cache_dir), checked on
the next run against every file's size, modification time and (when the time moved) content hash.

It never imports context_selector: the selector hands it a ``Recipe`` (how to read one file, how
to split an identifier into terms), so the dependency points one way.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import time
from array import array
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Callable

import numpy as np

from repo_files import printable, sniff
from tools import (BINARY_SNIFF_BYTES, MAX_WALK_DEPTH, MAX_WALK_DIRS, ToolError, TreeReader, excluded_name, is_virtualenv,
                   iter_repo_files, split_lines)

MAX_INDEX_FILE_BYTES = 500_000    # bigger files are data or generated code, not answers
MAX_INDEX_TOTAL_BYTES = 64_000_000  # files past this, in walk order, are not indexed (a note says so)
MAX_INDEX_CHUNKS = 150_000        # ... nor files past this many chunks (Django 5.1.4: 34 MB, 58,288 chunks)
# Generated, minified or translation files: big, and they drown the code in matches.
SKIP_SUFFIXES = (".po", ".pot", ".min.js", ".min.css", ".map", ".svg", ".lock")
PROGRESS_AFTER_SECONDS = 2.0      # say what is happening when indexing is slow
PARALLEL_MIN_BYTES = 4_000_000    # below this, starting worker processes costs more than it saves
FILES_PER_BATCH = 64              # files a worker reads with one TreeReader (neighbours share folders)
BATCH_BYTES = 1_000_000           # ... and at most this much text, so stopping at a budget wastes little
SPLIT_PARTS = 4                   # with workers, the identifiers are split into terms in this many pieces
STORAGE_VERSION = 2               # bump when the arrays stored below change


@dataclass
class FileChunks:
    """One file's chunks and the identifiers counted in each, packed for sending between processes.

    Chunk i spans lines ``spans[2i]..spans[2i+1]`` and owns ``sizes[i]`` consecutive entries of
    ``entries``, ``counts`` and ``own``; an entry is a line number into ``words``, the file's distinct
    identifiers in order of first sight (one newline-joined string: each is sent and looked up once
    per file, not once per chunk). ``counts`` include the words the chunk's path, heading or name
    add; ``own`` are its text's alone. Packed, because a worker process sends this back, and a
    million small objects take longer to send than to compute.
    """

    digest: str
    spans: array
    sizes: array
    words: str
    entries: array
    counts: array
    own: array


@dataclass(frozen=True)
class Recipe:
    """How to turn files into chunks: supplied by context_selector.py."""

    version: int                                               # bump to rebuild every cached index
    index_file: Callable[[TreeReader, str], tuple[str, FileChunks | None]]  # (tree, rel) -> (hash, chunks)
    terms_of: Callable[[str], tuple[str, ...]]                 # identifier -> the terms it counts as


# --------------------------------------------------------------------------- reading files

def indexable(rel: str, size: int) -> bool:
    """Files worth indexing by name and size (binary files are recognised when read)."""
    return size <= MAX_INDEX_FILE_BYTES and not rel.lower().endswith(SKIP_SUFFIXES)


def read_bytes(tree: TreeReader, rel: str) -> bytes | None:
    """Up to MAX_INDEX_FILE_BYTES of a file, or None when the tools would refuse it.

    A TreeReader opens like tools.open_in_root: no symlink at any component (the tree may have
    changed since the walk), never blocking on a FIFO, refusing hard-linked files and secret paths.
    """
    try:
        return tree.read(rel, MAX_INDEX_FILE_BYTES + 1)
    except (ToolError, OSError):
        return None


def _read_once(root, rel: str) -> bytes | None:
    with TreeReader(root) as tree:
        return read_bytes(tree, rel)


def as_text(data: bytes | None) -> str | None:
    """Decoded text, or None for a binary (or unreadable) file."""
    if data is None or b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return None
    return data.decode("utf-8", "replace")


def content_hash(data: bytes | None) -> str:
    return "" if data is None else hashlib.blake2b(data, digest_size=16).hexdigest()


def file_lines(index: "LexicalIndex", rel: str, tree: TreeReader | None = None) -> list[str]:
    """The lines of one indexed file, read again from disk (the index keeps counts, not text).

    Pass ``tree`` when reading many files in turn, so their folders are opened once.
    """
    if tree is None:
        with TreeReader(index.root) as tree:
            return file_lines(index, rel, tree)
    text = as_text(read_bytes(tree, rel))
    return [] if text is None else split_lines(text)


# --------------------------------------------------------------------------- the index

class LexicalIndex:
    """Every chunk's identifier counts, stored as an inverted index.

    Stored per identifier: ``postings[word_ptr[w]:word_ptr[w+1]]`` are the chunks that contain
    identifier w, and ``tf`` the same slice holds how often (``tf_own``: in the chunk's text alone,
    without the words its path, heading or name add; ``own_length``: the chunks' lengths so counted).
    A term ("session") maps to every
    identifier that contains it (``session``, ``SecureCookieSession``, ``session_class``...):
    ``term_words[term_ptr[t]:term_ptr[t+1]]``. ``term_counts`` gives one term's column of the
    chunk-by-term matrix; context_selector.score_chunks turns columns into BM25 scores.
    """

    def __init__(self, root, files, hashes, chunks, terms, term_ptr, term_words, word_ptr, postings, tf, tf_own,
                 own_length):
        self.root = Path(root)
        self.files = files                # [(rel, size, mtime_ns)] for every visible file
        self.hashes = hashes              # rel -> content hash, for indexed files
        self.chunk_file, self.chunk_start, self.chunk_end, self.chunk_length = chunks
        self.terms = terms                # term -> row of term_ptr
        self.term_ptr, self.term_words = term_ptr, term_words
        self.word_ptr, self.postings, self.tf = word_ptr, postings, tf
        self.tf_own, self.own_length = tf_own, own_length
        self.folders: list[tuple[str, int]] = []  # [(rel, mtime_ns)] watched for added/removed files
        self.taken_ns = 0                 # when files and folders were listed
        self.memo: dict = {}              # per-index values the selector derives once (role weights...)

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_start)

    def term_counts(self, term: str, own: bool = False) -> np.ndarray | None:
        """How often ``term`` occurs in each chunk, over every identifier that contains it
        (``own``: in the chunk's text alone, not in the words its path, heading or name add)."""
        row = self.terms.get(term)
        if row is None:
            return None
        words = self.term_words[self.term_ptr[row]:self.term_ptr[row + 1]]
        where = _concatenated_ranges(self.word_ptr[words], self.word_ptr[words + 1])
        tf = self.tf_own if own else self.tf
        return np.bincount(self.postings[where], weights=tf[where], minlength=self.n_chunks)

    def chunk_path(self, chunk: int) -> str:
        return self.files[self.chunk_file[chunk]][0]


def _concatenated_ranges(starts, stops) -> np.ndarray:
    """np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)]), without a Python loop."""
    lengths = stops - starts
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(offsets - starts, lengths)


def build_index(root, listing, recipe: Recipe) -> LexicalIndex:
    """Read, chunk and count every indexable file of ``listing`` [(path, rel, size, mtime_ns)]."""
    collecting = gc.isenabled()
    gc.disable()  # millions of small objects: the cycle collector would rescan them again and again
    try:
        return _build_index(root, listing, recipe)
    finally:
        if collecting:
            gc.enable()


def _build_index(root, listing, recipe: Recipe) -> LexicalIndex:
    started = time.perf_counter()
    wanted = within_budget([(str(p), rel, size) for p, rel, size, _ in listing if indexable(rel, size)], root)
    pool = _worker_pool(sum(size for *_, size in wanted)) if wanted else None
    try:
        return _index_with(pool, root, listing, wanted, recipe, started)
    finally:  # also when the chunk budget stopped the reading early: batches not started were dropped
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _index_with(pool, root, listing, wanted, recipe: Recipe, started) -> LexicalIndex:
    position = {rel: i for i, (_, rel, _, _) in enumerate(listing)}
    words: dict[str, int] = defaultdict()
    words.default_factory = words.__len__  # a new identifier gets the next number
    hashes, chunk_file, spans, sizes, ids = {}, array("i"), array("i"), array("i"), []
    counts, own = array("i"), array("i")
    results = _index_all(str(root), wanted, recipe.index_file, started, pool)
    try:
        for (_, rel, _), (digest, found) in zip(wanted, results):
            hashes[rel] = digest
            if found is None or not found.sizes:
                continue
            chunk_file.extend([position[rel]] * len(found.sizes))
            spans.extend(found.spans)
            sizes.extend(found.sizes)
            numbers = np.fromiter(map(words.__getitem__, found.words.split("\n")), dtype=np.int64)
            ids.append(numbers[np.frombuffer(found.entries, dtype=np.int32)])  # each entry's identifier number
            counts.extend(found.counts)
            own.extend(found.own)
            if len(sizes) >= MAX_INDEX_CHUNKS and len(hashes) < len(wanted):
                print(f"context: indexed the first {len(hashes):,} of {len(wanted):,} files: they hold "
                      f"{len(sizes):,} chunks, the index's budget; point --repo at a sub-folder for the rest",
                      file=sys.stderr)
                break
    finally:
        results.close()  # cancels the batches not started yet (past the budget)
    # Each identifier's terms, once all files are in: in the worker processes, if any, while this one sorts.
    split = _split_terms(pool, recipe.terms_of, list(words))  # a lazy map: the sorting below goes on meanwhile
    ids = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    tf = np.frombuffer(counts, dtype=np.int32).astype(np.float32)
    tf_own = np.frombuffer(own, dtype=np.int32).astype(np.float32)
    rows = np.repeat(np.arange(len(sizes), dtype=np.int32), np.frombuffer(sizes, dtype=np.int32))
    order = np.argsort(ids.astype(np.int32), kind="stable")  # group the entries by identifier (int32 sorts faster)
    word_ptr = np.concatenate([[0], np.cumsum(np.bincount(ids, minlength=len(words)))]).astype(np.int64)
    postings, tf_sorted, tf_own_sorted = rows[order], tf[order], tf_own[order]
    bounds = np.frombuffer(spans, dtype=np.int32).reshape(-1, 2)
    terms, term_ptr, term_words, terms_per_word = _term_map(list(chain.from_iterable(split)))  # waits for the terms
    # A chunk's length counts every term, as a question sees it: order_total is three.
    length = np.bincount(rows, weights=tf * terms_per_word[ids], minlength=len(sizes)).astype(np.float32)
    own_length = np.bincount(rows, weights=tf_own * terms_per_word[ids], minlength=len(sizes)).astype(np.float32)
    chunks = (np.frombuffer(chunk_file, dtype=np.int32).copy(), bounds[:, 0].copy(), bounds[:, 1].copy(), length)
    _progress_done(started, len(hashes), len(sizes))
    return LexicalIndex(root, [(rel, size, mtime) for _, rel, size, mtime in listing], hashes, chunks,
                        terms, term_ptr, term_words, word_ptr, postings, tf_sorted, tf_own_sorted, own_length)


def within_budget(files, root=None) -> list[tuple[str, str, int]]:
    """The files [(path, rel, size)] whose text fits in MAX_INDEX_TOTAL_BYTES, in walk order, with a
    note on stderr when some do not (131 MB of text took 113 s and 677 MB of memory).

    When the listed sizes exceed the budget, each file's first bytes are read first (repo_files.sniff,
    through one TreeReader at ``root``): binary and unreadable files cost the budget nothing, so
    140 images in assets/ no longer crowd out src/. The note names what was skipped and why."""
    if sum(size for *_, size in files) <= MAX_INDEX_TOTAL_BYTES or root is None:
        return list(files)  # everything fits: binary files are recognised when read, as before
    kept, total, binary, at = [], 0, [], len(files)
    with TreeReader(root) as tree:
        for i, (path, rel, size) in enumerate(files):
            kind = sniff(tree, rel)
            if kind != "text":
                binary.append((rel, size, kind))
            elif total + size > MAX_INDEX_TOTAL_BYTES:
                at = i
                break
            else:
                kept.append((path, rel, size))
                total += size
    if binary:
        kinds = " and ".join(f"{n:,} {kind}" for kind in ("binary", "unreadable")
                             if (n := sum(k == kind for _, _, k in binary)))
        files_word = "files" if len(binary) != 1 else "file"
        print(f"context: skipped {kinds} {files_word} by their first bytes ({sum(s for _, s, _ in binary) / 1e6:.0f} "
              f"MB listed, e.g. {printable(binary[0][0])}): they cost the index's budget nothing", file=sys.stderr)
    if at < len(files):
        skipped = sum(size for *_, size in files[at:])
        print(f"context: indexed the first {len(kept):,} of {len(files) - len(binary):,} files ({total / 1e6:.0f} MB of "
              f"text); {len(files) - at:,} more ({skipped / 1e6:.0f} MB) are past the index's "
              f"{MAX_INDEX_TOTAL_BYTES / 1e6:.0f} MB budget: point --repo at a sub-folder for them", file=sys.stderr)
    return kept


def _term_map(split):
    """Which identifiers each term occurs in, from the terms of each identifier (``split``):
    terms {term: row}, term_ptr, term_words; and how many terms each identifier counts as."""
    per_word = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    numbered: dict[str, int] = defaultdict()
    numbered.default_factory = numbered.__len__  # a new term gets the next row, as words do in _build_index
    term_rows = np.fromiter(map(numbered.__getitem__, chain.from_iterable(split)), dtype=np.int64, count=int(per_word.sum()))
    word_cols = np.repeat(np.arange(len(split), dtype=np.int64), per_word)  # the identifier of each (term, identifier) pair
    order = np.argsort(term_rows, kind="stable")
    term_ptr = np.concatenate([[0], np.cumsum(np.bincount(term_rows, minlength=len(numbered)))]).astype(np.int64)
    return dict(numbered), term_ptr, word_cols[order], per_word.astype(np.float32)


def _index_all(root: str, wanted, index_file, started, pool):
    """index_file for every file, in order; in the worker processes of ``pool`` when there is one."""
    if not wanted:
        return
    if pool is None:
        with TreeReader(root) as tree:
            yield from _with_progress((index_file(tree, rel) for _, rel, _ in wanted), len(wanted), started)
        return
    # Neighbouring files share folders: a batch opens each of its folders once (TreeReader).
    batches = list(_batches(wanted))
    results = pool.map(_index_batch, [index_file] * len(batches), [root] * len(batches), batches)
    try:
        yield from _with_progress((found for batch in results for found in batch), len(wanted), started)
    finally:  # also when the caller stops early (the chunk budget): map's iterator cancels the batches not started
        results.close()


def _split_terms(pool, terms_of, words: list[str]):
    """The terms of each identifier (terms_of), in order, as an iterable of lists: in the worker
    processes when there are any (already sent to them on return, so the caller can work meanwhile)."""
    if pool is None or not words:
        return [list(map(terms_of, words))]
    step = -(-len(words) // SPLIT_PARTS)
    parts = [words[i:i + step] for i in range(0, len(words), step)]
    return pool.map(_split_part, [terms_of] * len(parts), parts)


def _split_part(terms_of, words):
    return list(map(terms_of, words))


def _batches(wanted):
    """Runs of neighbouring files, at most FILES_PER_BATCH files and BATCH_BYTES bytes each."""
    batch, size = [], 0
    for _, rel, n in wanted:
        if batch and (len(batch) >= FILES_PER_BATCH or size + n > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(rel)
        size += n
    if batch:
        yield batch


def _index_batch(index_file, root: str, rels) -> list:
    with TreeReader(root) as tree:
        return [index_file(tree, rel) for rel in rels]


def _worker_pool(total_bytes: int):
    """Worker processes for a big repository (parsing Python with ast is the slow part), else None."""
    if total_bytes < PARALLEL_MIN_BYTES or (os.cpu_count() or 1) < 2:
        return None
    try:
        return ProcessPoolExecutor(initializer=gc.disable)  # as in build_index: ast makes many objects
    except (OSError, NotImplementedError, ImportError):  # no process support here (some sandboxes)
        return None


def _with_progress(results, n_files: int, started: float):
    """Pass the results on as they come, saying once on stderr what is going on if it takes a while."""
    announced = False
    for result in results:
        yield result
        if not announced and time.perf_counter() - started > PROGRESS_AFTER_SECONDS:
            print(f"context: indexing {n_files:,} files; the index is cached for next time...", file=sys.stderr)
            announced = True


def _progress_done(started, n_files, n_chunks):
    elapsed = time.perf_counter() - started
    if elapsed > PROGRESS_AFTER_SECONDS:
        print(f"context: indexed {n_files:,} files ({n_chunks:,} chunks) in {elapsed:.1f} s", file=sys.stderr)


# --------------------------------------------------------------------------- the cache

RACY_NS = 2_000_000_000           # a file or folder changed this close to a snapshot may change again
                                  # within the same clock tick, unseen: check it the slow way
_in_memory: dict[tuple[Path, int], LexicalIndex] = {}   # (root, recipe version) -> index, for this process


def load_index(repo_root, recipe: Recipe, cache_dir=None) -> LexicalIndex:
    """The repository's index: kept in memory and on disk, rebuilt only when a file changed.

    Checking costs one stat per file and per folder (a folder's time changes when an entry is
    added, removed or renamed); only when that finds a change is the repository walked again.
    """
    root = Path(repo_root).resolve()
    cache = _cache_file(root, recipe, cache_dir)
    index = _in_memory.get((root, recipe.version))
    if index is None and cache:
        index = _read_cache(cache, root, recipe)
    if index is not None and still_valid(index):
        _in_memory[(root, recipe.version)] = index
        return index
    started = time.time_ns()
    listing, folders = list_repo(root), list_folders(root)
    if index is not None and _unchanged(root, index.files, listing, index.hashes, index.taken_ns - RACY_NS):
        index.files = [(rel, size, mtime) for _, rel, size, mtime in listing]  # touched, not changed
    else:
        index = build_index(root, listing, recipe)
    index.folders, index.taken_ns = folders, started
    if cache:
        _write_cache(cache, index, recipe)
    _in_memory[(root, recipe.version)] = index
    return index


def list_repo(root) -> list[tuple[Path, str, int, int]]:
    """(path, rel, size, mtime_ns) of every visible file: what a cached index must match."""
    listing = []
    for path, rel in iter_repo_files(root):
        try:
            info = path.lstat()
        except OSError:
            continue
        listing.append((path, rel, info.st_size, info.st_mtime_ns))
    return listing


def list_folders(root: Path) -> list[tuple[str, int]]:
    """(rel, mtime_ns) of the folders to watch for added or removed files, the root ("") first.

    Only says where to look for changes (what is visible stays tools.iter_repo_files's decision);
    skips what the tools skip by name, and virtualenvs, so a big site-packages is not watched.
    """
    folders, stack = [], [("", str(root))]
    while stack and len(folders) <= MAX_WALK_DIRS:  # a loop, not recursion; bounded like the tools' walk
        rel, path = stack.pop()
        try:
            folders.append((rel, os.lstat(path).st_mtime_ns))
            with os.scandir(path) as scan:
                entries = [e for e in scan if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        depth = rel.count("/") + 1 if rel else 0
        for entry in entries:
            if depth + 1 < MAX_WALK_DEPTH and not excluded_name(entry.name) and not is_virtualenv(entry.path):
                stack.append((f"{rel}/{entry.name}" if rel else entry.name, entry.path))
    return folders


def still_valid(index: LexicalIndex) -> bool:
    """True when no watched folder and no file changed since the index's snapshot (stats only)."""
    racy = index.taken_ns - RACY_NS
    folders, files = _watched(index)
    try:
        for path, mtime in folders:
            if mtime >= racy or os.lstat(path).st_mtime_ns != mtime:
                return False
        for path, rel, size, mtime in files:
            info = os.lstat(path)
            if info.st_size != size or info.st_mtime_ns != mtime:
                return False
            if mtime >= racy and content_hash(_read_once(index.root, rel)) != index.hashes.get(rel):
                return False
    except OSError:
        return False
    return True


def _watched(index: LexicalIndex):
    """Absolute paths of the folders and of the files whose changes matter (made once per snapshot)."""
    key = ("watched", index.taken_ns, id(index.files))
    if key not in index.memo:
        root = str(index.root)
        join = (lambda rel: os.path.join(root, *rel.split("/")) if rel else root)
        index.memo[key] = ([(join(rel), mtime) for rel, mtime in index.folders],
                           [(join(rel), rel, size, mtime) for rel, size, mtime in index.files
                            if not rel.lower().endswith(SKIP_SUFFIXES)])  # never indexed, whatever they hold
    return index.memo[key]


def _unchanged(root, files, listing, hashes, racy: int) -> bool:
    """Same files, same sizes; a file whose time changed (or is racy) is re-hashed: touched is not changed."""
    if len(files) != len(listing):
        return False
    with TreeReader(root) as tree:  # after a checkout, many files have new times: one reader for all
        for (rel, size, mtime), (path, now_rel, now_size, now_mtime) in zip(files, listing):
            if rel != now_rel or size != now_size:
                return False
            if (mtime != now_mtime or mtime >= racy) and content_hash(read_bytes(tree, rel)) != hashes.get(rel, content_hash(None)):
                return False
    return True


def cache_folder(root: Path, cache_dir) -> Path | None:
    """The cache folder (default: config.default_cache_dir()); None when it would sit inside the repository."""
    if cache_dir is None:
        from config import default_cache_dir

        cache_dir = default_cache_dir()
    folder = Path(cache_dir).expanduser().resolve()
    if folder == root or root in folder.parents:
        return None  # a cache inside the repo would be indexed itself on the next run
    return folder


def repo_key(root: Path, salt: str = "") -> str:
    """A short stable name for a repository (its resolved path) in the cache folder."""
    return hashlib.blake2b(f"{salt}{root}".encode("utf-8", "surrogateescape"), digest_size=10).hexdigest()


def _cache_file(root: Path, recipe: Recipe, cache_dir) -> Path | None:
    """Where this repository's index lives; None when there is no cache."""
    folder = cache_folder(root, cache_dir)
    if folder is None:
        return None
    return folder / f"index-{repo_key(root, f'{STORAGE_VERSION}.{recipe.version}:')}.npz"


ARRAYS = ("chunk_file", "chunk_start", "chunk_end", "chunk_length", "term_ptr", "term_words", "word_ptr", "postings", "tf",
          "tf_own", "own_length")
NOT_INDEXED = "-"  # in the stored hashes: a visible file the index did not read (too big, generated)


def _blob(strings) -> np.ndarray:
    """Strings as one NUL-separated byte array: much faster to load than JSON (no name holds a NUL)."""
    return np.frombuffer("\0".join(strings).encode("utf-8", "surrogateescape"), dtype=np.uint8)


def _strings(blob: np.ndarray) -> list[str]:
    return blob.tobytes().decode("utf-8", "surrogateescape").split("\0") if len(blob) else []


def _read_cache(cache: Path, root: Path, recipe: Recipe) -> LexicalIndex | None:
    try:
        with np.load(cache, allow_pickle=False) as data:
            meta = json.loads(data["meta"].tobytes().decode("utf-8"))
            if meta.get("version") != f"{STORAGE_VERSION}.{recipe.version}" or meta.get("root") != str(root):
                return None
            arrays = {name: data[name] for name in ARRAYS}
            rels, hashes = _strings(data["file_rels"]), _strings(data["file_hashes"])
            files = list(zip(rels, data["file_size"].tolist(), data["file_mtime"].tolist()))
            folders = list(zip(_strings(data["folder_rels"]), data["folder_mtime"].tolist()))
            terms = _strings(data["terms"])
    except (OSError, ValueError, KeyError, UnicodeDecodeError):
        return None  # no cache yet, or a damaged one: build again
    hashes = {rel: digest for rel, digest in zip(rels, hashes) if digest != NOT_INDEXED}
    chunks = tuple(arrays[name] for name in ARRAYS[:4])
    index = LexicalIndex(root, files, hashes, chunks, dict(zip(terms, range(len(terms)))),
                         *(arrays[name] for name in ARRAYS[4:]))
    index.folders, index.taken_ns = folders, int(meta["taken_ns"])
    return index


def _write_cache(cache: Path, index: LexicalIndex, recipe: Recipe) -> None:
    meta = {"version": f"{STORAGE_VERSION}.{recipe.version}", "root": str(index.root), "taken_ns": index.taken_ns}
    arrays = dict(zip(ARRAYS, (index.chunk_file, index.chunk_start, index.chunk_end, index.chunk_length,
                               index.term_ptr, index.term_words, index.word_ptr, index.postings, index.tf,
                               index.tf_own, index.own_length)))
    rels = [rel for rel, _, _ in index.files]
    arrays.update(
        meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
        file_rels=_blob(rels), file_hashes=_blob(index.hashes.get(rel, NOT_INDEXED) for rel in rels),
        file_size=np.array([size for _, size, _ in index.files], dtype=np.int64),
        file_mtime=np.array([mtime for _, _, mtime in index.files], dtype=np.int64),
        folder_rels=_blob(rel for rel, _ in index.folders),
        folder_mtime=np.array([mtime for _, mtime in index.folders], dtype=np.int64),
        terms=_blob(index.terms))
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_name(f"{cache.stem}.{os.getpid()}.tmp.npz")
        np.savez(partial, **arrays)
        os.replace(partial, cache)  # atomic: a reader never sees half a file
    except OSError as exc:  # a read-only home folder costs speed, never the answer
        print(f"context: could not cache the index in {cache.parent} ({exc.strerror})", file=sys.stderr)
