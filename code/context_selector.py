"""Context injection: before the loop starts, find the few snippets of code most related to the question.

    select_context("why does config default to Groq?", ".")
    -> [Snippet(path='config.py', start_line=30, end_line=41, score=7.9, text='...'), ...]

How (the retrieval you built in Projects 03/04, applied to source files):
  1. Walk the repository with tools.iter_repo_files, the same visibility rules as the tools
     (no .git, no virtualenvs, never a .env or a private key).
  2. Chunk: Python by top-level function and class (via ``ast``; a big class by method), the
     lines between them as their own chunks; other text files by windows of lines.
  3. Embed every chunk and the question as vectors, and rank chunks by their dot product,
     scaled by the file's role (source 1.0; tests and docs 0.7; changelogs 0.5).
  4. Keep the best chunks of the top-k files, within a character budget, with line numbers.

The simplest embedding: one dimension per word of the repository's vocabulary. A chunk's value on
a word is its BM25 term weight (how often the word occurs, saturated, adjusted for chunk length);
the question's value is the word's rarity (IDF). Their dot product is the BM25 score. Words are
split the way code is written: ``SecureCookieSessionInterface`` also counts as ``secure``,
``cookie``, ``session``, ``interface``, and ``order_total`` as ``order`` and ``total``, so the
question "session cookie" meets that class. These sparse vectors need no model and no network.

With an ``embed`` function (copilot.py passes one when EMBEDDING_MODEL is set), dense vectors from
an embedding model are added, and the two rankings are merged by reciprocal-rank fusion: dense
vectors catch questions worded differently from the code, lexical ones catch exact identifiers.

Indexes are cached outside the repository (config.default_cache_dir), keyed by the files' content
hashes, and dense vectors by chunk content and embedder, so a second run embeds nothing.
"""

from __future__ import annotations

import ast
import gc
import hashlib
import json
import os
import re
import sys
import time
from array import array
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tools import BINARY_SNIFF_BYTES, iter_repo_files, printable

DEFAULT_TOP_FILES = 3             # k: how many files the injected context comes from
CONTEXT_CHAR_BUDGET = 6_000       # all snippets together (~1,500 tokens): cheap grounding, not the repo
MAX_SNIPPETS_PER_FILE = 2
SNIPPET_MAX_LINES = 40            # a longer chunk is shown as its most relevant 40 lines
MAX_CHUNK_LINES = 80              # a longer function is split into windows
WINDOW_LINES = 50                 # windows for long code and for non-Python text
WINDOW_OVERLAP = 10               # so an answer on a window edge is whole in one of them
MAX_INDEX_FILE_BYTES = 500_000    # bigger files are data or generated code, not answers
# Generated, minified or translation files: big, and they drown the code in matches.
SKIP_SUFFIXES = (".po", ".pot", ".min.js", ".min.css", ".map", ".svg", ".lock")
PATH_WEIGHT = 5                   # a file name is strong evidence: its words count 5 times (bench/bench_retrieval.py)
# Questions to a coding copilot are mostly about what the code does: when a source file and a test,
# a doc page or a changelog match equally well, show the source (MRR 0.55 -> 0.79 in bench_retrieval.py).
ROLE_WEIGHTS = {"source": 1.0, "test": 0.7, "doc": 0.7, "changelog": 0.5}
CHANGELOG_NAMES = re.compile(r"(history|changes|changelog|news)(\.(md|rst|txt))?$", re.IGNORECASE)
TEST_DIRS = frozenset({"test", "tests", "testing"})
DOC_DIRS = frozenset({"doc", "docs", "examples"})
DOC_SUFFIXES = (".rst", ".md", ".txt")
BM25_K1 = 1.2                     # how fast repeated words stop adding weight
BM25_B = 0.75                     # how much long chunks are penalized
RRF_K = 60                        # reciprocal-rank fusion constant (the usual value)
EMBED_BATCH = 64                  # chunks per embedding request
PROGRESS_AFTER_SECONDS = 2.0      # say what is happening when indexing is slow
PARALLEL_MIN_BYTES = 4_000_000    # below this, starting worker processes costs more than it saves
INDEX_VERSION = 3                 # bump when the index format or tokenization changes

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Pieces of an identifier: "HTTPServerError2" -> HTTP, Server, Error, 2; "order_total" -> order, total.
IDENTIFIER_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Question words that say nothing about the code (file extensions included: "setup.py" -> setup).
STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i if in into is it its me my of on or "
    "our should so that the their them then there these this to was we what when where which "
    "who why will with would you your py js ts md txt code file files function functions "
    "class classes method methods".split()
)


@dataclass(frozen=True)
class Snippet:
    """Lines start_line..end_line (1-based, inclusive) of ``path`` (repository-relative, '/')."""

    path: str
    start_line: int
    end_line: int
    score: float
    text: str


# --------------------------------------------------------------------------- words

_terms_memo: dict[str, tuple[str, ...]] = {}


def identifier_terms(word: str) -> tuple[str, ...]:
    """'SecureCookieSession' -> ('securecookiesession', 'secure', 'cookie', 'session').

    The whole identifier (lowercased) plus its snake_case / CamelCase parts, plurals folded
    ('cookies' -> 'cookie'). Memoized: a repository repeats the same identifiers endlessly.
    """
    terms = _terms_memo.get(word)
    if terms is None:
        whole = word.lower()
        parts = [_fold_plural(p.lower()) for p in IDENTIFIER_PART.findall(word) if len(p) > 1]
        terms = tuple(dict.fromkeys([whole, *parts]))
        _terms_memo[word] = terms
    return terms


def _fold_plural(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def count_terms(text: str) -> Counter:
    """Term frequencies of a piece of code or prose, identifier-aware."""
    counts: Counter = Counter()
    for word, n in Counter(IDENTIFIER.findall(text)).items():
        for term in identifier_terms(word):
            counts[term] += n
    return counts


def question_terms(question: str) -> list[str]:
    """The question's distinct terms, without the words that say nothing about code."""
    words = [w for w in IDENTIFIER.findall(question) if w.lower() not in STOPWORDS]
    terms = (t for w in words for t in identifier_terms(w))
    return [t for t in dict.fromkeys(terms) if t not in STOPWORDS]


# --------------------------------------------------------------------------- chunking

def file_role(rel: str) -> str:
    """'source', 'test', 'doc' or 'changelog', from the path alone: 'tests/test_app.py' -> 'test'."""
    *folders, name = rel.lower().split("/")
    if CHANGELOG_NAMES.match(name):
        return "changelog"
    if TEST_DIRS.intersection(folders) or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py":
        return "test"
    if DOC_DIRS.intersection(folders) or name.endswith(DOC_SUFFIXES):
        return "doc"
    return "source"


def chunk_spans(rel: str, text: str) -> list[tuple[int, int]]:
    """(start_line, end_line) pairs covering the file: Python by definitions, the rest by windows."""
    n_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    if rel.endswith(".py"):
        spans = python_spans(text, n_lines)
        if spans is not None:
            return spans
    return windows(1, n_lines)  # not Python, or Python that does not parse


def python_spans(text: str, n_lines: int) -> list[tuple[int, int]] | None:
    """Top-level functions and classes, each with its decorators; the code between them
    (imports, constants, the module docstring) as chunks of its own. None if it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):  # ValueError: NUL bytes in the source
        return None
    return _spans_of_body(tree.body, 1, n_lines)


def _spans_of_body(body, first: int, last: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    covered = first - 1
    for node in body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        end = node.end_lineno or node.lineno
        if start > covered + 1:
            spans += windows(covered + 1, start - 1)  # the statements between definitions
        too_long = end - start + 1 > MAX_CHUNK_LINES
        if too_long and isinstance(node, ast.ClassDef):
            spans += _spans_of_body(node.body, start, end)  # a big class: one chunk per method
        else:
            spans += windows(start, end)
        covered = end
    if covered < last:
        spans += windows(covered + 1, last)
    return spans


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


# --------------------------------------------------------------------------- reading files

def indexable(rel: str, size: int) -> bool:
    """Files worth indexing by name and size (binary files are recognised when read)."""
    return size <= MAX_INDEX_FILE_BYTES and not rel.lower().endswith(SKIP_SUFFIXES)


def read_bytes(path) -> bytes | None:
    """Up to MAX_INDEX_FILE_BYTES of a file; never follows a symlink swapped in since the walk."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(MAX_INDEX_FILE_BYTES + 1)


def as_text(data: bytes | None) -> str | None:
    """Decoded text, or None for a binary (or unreadable) file."""
    if data is None or b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return None
    return data.decode("utf-8", "replace")


def content_hash(data: bytes | None) -> str:
    return "" if data is None else hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class FileChunks:
    """One file's chunks and the identifiers counted in each, packed for sending between processes.

    Chunk i spans lines ``spans[2i]..spans[2i+1]`` and owns ``sizes[i]`` consecutive entries of
    ``words`` (one newline-joined string) and ``counts``. Packed, because a worker process sends this
    back, and a million small objects take longer to send than to compute.
    """

    digest: str
    spans: array
    sizes: array
    words: str
    counts: array


def index_file(path: str, rel: str) -> tuple[str, FileChunks | None]:
    """Read, chunk and count one file: (content hash, FileChunks); None instead for a binary file.

    The counts are of raw identifiers (``order_total``); build_index splits them into terms once
    per distinct identifier, not once per occurrence. A top-level function so that worker
    processes can run it.
    """
    data = read_bytes(path)
    text = as_text(data)
    digest = content_hash(data)
    if text is None:
        return digest, None
    lines = text.splitlines()
    in_path = IDENTIFIER.findall(rel.rsplit(".", 1)[0])  # a file's name is strong evidence of its topic
    spans, sizes, words, counts = array("i"), array("i"), [], array("i")
    for start, end in chunk_spans(rel, text):
        found = Counter(IDENTIFIER.findall("\n".join(lines[start - 1:end])))
        if found:  # blank lines between definitions carry nothing
            for _ in range(PATH_WEIGHT):
                found.update(in_path)
            spans.extend((start, end))
            sizes.append(len(found))
            words.extend(found)
            counts.extend(found.values())
    return digest, FileChunks(digest, spans, sizes, "\n".join(words), counts)


# --------------------------------------------------------------------------- the index

class LexicalIndex:
    """Every chunk's identifier counts, stored as an inverted index, and scored with BM25.

    Stored per identifier: ``postings[word_ptr[w]:word_ptr[w+1]]`` are the chunks that contain
    identifier w, and ``tf`` the same slice holds how often. A term ("session") maps to every
    identifier that contains it (``session``, ``SecureCookieSession``, ``session_class``...):
    ``term_words[term_ptr[t]:term_ptr[t+1]]``. A chunk's value on a term is then computed when a
    question uses it: the sparse vector of the module docstring, one column at a time.
    """

    def __init__(self, root, files, hashes, chunks, terms, term_ptr, term_words, word_ptr, postings, tf):
        self.root = Path(root)
        self.files = files                # [(rel, size, mtime_ns)] for every visible file
        self.hashes = hashes              # rel -> content hash, for indexed files
        self.chunk_file, self.chunk_start, self.chunk_end, self.chunk_length = chunks
        self.terms = terms                # term -> row of term_ptr
        self.term_ptr, self.term_words = term_ptr, term_words
        self.word_ptr, self.postings, self.tf = word_ptr, postings, tf
        mean = float(self.chunk_length.mean()) if self.n_chunks else 1.0
        self.norm = BM25_K1 * (1 - BM25_B + BM25_B * self.chunk_length / max(mean, 1.0))
        role_weight = np.array([ROLE_WEIGHTS[file_role(f[0])] for f in files] or [1.0])
        self.prior = role_weight[self.chunk_file]  # per chunk: its file's ROLE_WEIGHTS entry

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_start)

    def term_counts(self, term: str) -> np.ndarray | None:
        """How often ``term`` occurs in each chunk, over every identifier that contains it."""
        row = self.terms.get(term)
        if row is None:
            return None
        words = self.term_words[self.term_ptr[row]:self.term_ptr[row + 1]]
        where = _concatenated_ranges(self.word_ptr[words], self.word_ptr[words + 1])
        return np.bincount(self.postings[where], weights=self.tf[where], minlength=self.n_chunks)

    def scores(self, terms) -> np.ndarray:
        """BM25 score of every chunk (the dot product of the question's and the chunk's vectors),
        times the chunk's file-role weight (ROLE_WEIGHTS).

        Chunk side: the term's count, saturated and length-adjusted. Question side: the term's
        rarity (IDF), so "session" outweighs "get".
        """
        total = np.zeros(self.n_chunks, dtype=np.float64)
        for term in terms:
            counts = self.term_counts(term)
            if counts is None:
                continue
            df = np.count_nonzero(counts)
            idf = np.log1p((self.n_chunks - df + 0.5) / (df + 0.5))
            total += idf * counts * (BM25_K1 + 1) / (counts + self.norm)
        return total * self.prior

    def chunk_path(self, chunk: int) -> str:
        return self.files[self.chunk_file[chunk]][0]


def _concatenated_ranges(starts, stops) -> np.ndarray:
    """np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)]), without a Python loop."""
    lengths = stops - starts
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(offsets - starts, lengths)


def build_index(root, listing) -> LexicalIndex:
    """Read, chunk and count every indexable file of ``listing`` [(path, rel, size, mtime_ns)]."""
    collecting = gc.isenabled()
    gc.disable()  # millions of small objects: the cycle collector would rescan them again and again
    try:
        return _build_index(root, listing)
    finally:
        if collecting:
            gc.enable()


def _build_index(root, listing) -> LexicalIndex:
    started = time.perf_counter()
    wanted = [(str(p), rel) for p, rel, size, _ in listing if indexable(rel, size)]
    position = {rel: i for i, (_, rel, _, _) in enumerate(listing)}
    words: dict[str, int] = defaultdict()
    words.default_factory = words.__len__  # a new identifier gets the next number
    hashes, chunk_file, spans, sizes, ids, counts = {}, array("i"), array("i"), array("i"), [], array("i")
    for (path, rel), (digest, found) in zip(wanted, _index_all(wanted, started)):
        hashes[rel] = digest
        if found is None or not found.sizes:
            continue
        chunk_file.extend([position[rel]] * len(found.sizes))
        spans.extend(found.spans)
        sizes.extend(found.sizes)
        ids.extend(map(words.__getitem__, found.words.split("\n")))
        counts.extend(found.counts)
    ids = np.array(ids, dtype=np.int64)
    tf = np.frombuffer(counts, dtype=np.int32).astype(np.float32)
    rows = np.repeat(np.arange(len(sizes), dtype=np.int32), np.frombuffer(sizes, dtype=np.int32))
    terms, term_ptr, term_words, terms_per_word = _term_map(list(words))
    order = np.argsort(ids, kind="stable")  # group the entries by identifier
    word_ptr = np.concatenate([[0], np.cumsum(np.bincount(ids, minlength=len(words)))]).astype(np.int64)
    bounds = np.frombuffer(spans, dtype=np.int32).reshape(-1, 2)
    # A chunk's length counts every term, as a question sees it: order_total is three.
    length = np.bincount(rows, weights=tf * terms_per_word[ids], minlength=len(sizes)).astype(np.float32)
    chunks = (np.frombuffer(chunk_file, dtype=np.int32).copy(), bounds[:, 0].copy(), bounds[:, 1].copy(), length)
    _progress_done(started, len(wanted), len(sizes))
    return LexicalIndex(root, [(rel, size, mtime) for _, rel, size, mtime in listing], hashes, chunks,
                        terms, term_ptr, term_words, word_ptr, rows[order], tf[order])


def _term_map(identifiers):
    """Which identifiers each term occurs in: terms {term: row}, term_ptr, term_words; and how
    many terms each identifier counts as."""
    terms: dict[str, int] = {}
    term_rows, word_cols, per_word = [], [], []
    for number, word in enumerate(identifiers):
        parts = identifier_terms(word)
        per_word.append(len(parts))
        for term in parts:
            term_rows.append(terms.setdefault(term, len(terms)))
            word_cols.append(number)
    term_rows = np.array(term_rows, dtype=np.int64)
    order = np.argsort(term_rows, kind="stable")
    term_ptr = np.concatenate([[0], np.cumsum(np.bincount(term_rows, minlength=len(terms)))]).astype(np.int64)
    return terms, term_ptr, np.array(word_cols, dtype=np.int64)[order], np.array(per_word, dtype=np.float32)


def _index_all(wanted, started):
    """index_file for every file, in order; in worker processes when the repository is big."""
    if not wanted:
        return
    paths, rels = zip(*wanted)
    pool = _worker_pool(sum(os.path.getsize(p) for p in paths))
    if pool is None:
        yield from _with_progress(map(index_file, paths, rels), len(wanted), started)
        return
    with pool:
        yield from _with_progress(pool.map(index_file, paths, rels, chunksize=32), len(wanted), started)


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


def load_index(repo_root, cache_dir=None) -> LexicalIndex:
    """The repository's index: from the cache when no file changed, otherwise built (and cached)."""
    root = Path(repo_root).resolve()
    listing = list_repo(root)
    cache = _cache_file(root, cache_dir)
    index = _read_cache(cache, root, listing) if cache else None
    if index is None:
        index = build_index(root, listing)
        if cache:
            _write_cache(cache, index)
    return index


def _cache_file(root: Path, cache_dir) -> Path | None:
    """Where this repository's index lives; None when the cache would sit inside the repository."""
    if cache_dir is None:
        from config import default_cache_dir

        cache_dir = default_cache_dir()
    folder = Path(cache_dir).expanduser().resolve()
    if folder == root or root in folder.parents:
        return None  # an index inside the repo would be indexed itself on the next run
    key = hashlib.blake2b(f"{INDEX_VERSION}:{root}".encode("utf-8", "surrogateescape"), digest_size=10).hexdigest()
    return folder / f"index-{key}.npz"


ARRAYS = ("chunk_file", "chunk_start", "chunk_end", "chunk_length", "term_ptr", "term_words", "word_ptr", "postings", "tf")


def _read_cache(cache: Path, root: Path, listing) -> LexicalIndex | None:
    try:
        with np.load(cache, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode("utf-8", "surrogateescape"))
            arrays = {name: data[name] for name in ARRAYS}
    except (OSError, ValueError, KeyError):
        return None  # no cache yet, or a damaged one: build again
    files = [tuple(f) for f in meta["files"]]
    if meta.get("version") != INDEX_VERSION or not _unchanged(files, listing, meta["hashes"]):
        return None
    terms = {term: i for i, term in enumerate(meta["terms"])}
    chunks = tuple(arrays[name] for name in ARRAYS[:4])
    return LexicalIndex(root, files, meta["hashes"], chunks, terms, *(arrays[name] for name in ARRAYS[4:]))


def _unchanged(files, listing, hashes) -> bool:
    """Same files, same sizes; a file whose time changed is re-hashed (touched is not changed)."""
    if len(files) != len(listing):
        return False
    for (rel, size, mtime), (path, now_rel, now_size, now_mtime) in zip(files, listing):
        if rel != now_rel or size != now_size:
            return False
        if mtime != now_mtime and (rel not in hashes or content_hash(read_bytes(path)) != hashes[rel]):
            return False
    return True


def _write_cache(cache: Path, index: LexicalIndex) -> None:
    meta = {"version": INDEX_VERSION, "root": str(index.root), "files": index.files,
            "hashes": index.hashes, "terms": list(index.terms)}
    arrays = dict(zip(ARRAYS, (index.chunk_file, index.chunk_start, index.chunk_end, index.chunk_length,
                               index.term_ptr, index.term_words, index.word_ptr, index.postings, index.tf)))
    blob = np.frombuffer(json.dumps(meta).encode("utf-8", "surrogateescape"), dtype=np.uint8)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_name(f"{cache.stem}.{os.getpid()}.tmp.npz")
        np.savez(partial, meta=blob, **arrays)
        os.replace(partial, cache)  # atomic: a reader never sees half a file
    except OSError as exc:  # a read-only home folder costs speed, never the answer
        print(f"context: could not cache the index in {cache.parent} ({exc.strerror})", file=sys.stderr)


# --------------------------------------------------------------------------- dense vectors (optional)

class LiteLLMEmbedder:
    """``embed(texts) -> list of vectors`` through litellm.embedding, in batches.

    ``name`` identifies the embedder in the cache, so vectors of different models never mix.
    """

    def __init__(self, model: str, api_base=None, api_key=None):
        self.model, self.api_base, self.api_key = model, api_base, api_key
        self.name = f"litellm:{model}@{api_base or ''}"

    def __call__(self, texts: list[str]) -> list[list[float]]:
        import litellm  # lazy: importing LiteLLM takes seconds

        vectors: list[list[float]] = []
        for i in range(0, len(texts), EMBED_BATCH):
            batch = texts[i:i + EMBED_BATCH]
            response = litellm.embedding(model=self.model, input=batch, api_base=self.api_base, api_key=self.api_key)
            items = sorted(response.data, key=lambda item: item["index"])  # plain dicts, not objects
            if len(items) != len(batch):
                raise ValueError(f"{self.model} returned {len(items)} vectors for {len(batch)} texts")
            vectors += [item["embedding"] for item in items]
        return vectors


def dense_scores(index: LexicalIndex, question: str, embed, cache_dir) -> np.ndarray:
    """Cosine similarity of the question with every chunk, embedding only chunks not cached yet."""
    name = getattr(embed, "name", getattr(embed, "__name__", "embed"))
    keys = [_chunk_key(index, c, name) for c in range(index.n_chunks)]
    store = _VectorStore(cache_dir, name)
    missing = [c for c, key in enumerate(keys) if key not in store]
    if missing:
        texts = [_chunk_text(index, c) for c in missing]
        store.add([keys[c] for c in missing], embed(texts))
    matrix = store.matrix(keys)
    question_key = f"{name}|question|{hashlib.blake2b(question.encode(), digest_size=16).hexdigest()}"
    if question_key not in store:
        store.add([question_key], embed([question]))
    query = store.vectors[question_key]
    matrix_norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    return (matrix @ query) / np.where(matrix_norms == 0, 1.0, matrix_norms)


def _chunk_key(index: LexicalIndex, chunk: int, embedder: str) -> str:
    rel = index.chunk_path(chunk)
    return f"{embedder}|{index.hashes.get(rel, '')}|{index.chunk_start[chunk]}-{index.chunk_end[chunk]}"


def _chunk_text(index: LexicalIndex, chunk: int) -> str:
    lines = _file_lines(index, index.chunk_path(chunk))
    body = "\n".join(lines[index.chunk_start[chunk] - 1:index.chunk_end[chunk]])
    return f"{index.chunk_path(chunk)}\n{body}"  # the path tells the model where the code lives


class _VectorStore:
    """Dense vectors on disk, one file per embedder: {key: vector}. Loaded whole; small repos only."""

    def __init__(self, cache_dir, embedder: str):
        self.vectors: dict[str, np.ndarray] = {}
        self.path = None
        if cache_dir is not None:
            slug = hashlib.blake2b(embedder.encode(), digest_size=10).hexdigest()
            self.path = Path(cache_dir).expanduser() / f"vectors-{slug}.npz"
            try:
                with np.load(self.path, allow_pickle=False) as data:
                    self.vectors = dict(zip(data["keys"].tolist(), data["vectors"]))
            except (OSError, ValueError, KeyError):
                pass

    def __contains__(self, key) -> bool:
        return key in self.vectors

    def add(self, keys, vectors) -> None:
        for key, vector in zip(keys, vectors):
            self.vectors[key] = np.asarray(vector, dtype=np.float32)
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")
            np.savez(partial, keys=np.array(list(self.vectors)), vectors=np.stack(list(self.vectors.values())))
            os.replace(partial, self.path)
        except (OSError, ValueError) as exc:
            print(f"context: could not cache embeddings ({exc})", file=sys.stderr)

    def matrix(self, keys) -> np.ndarray:
        return np.stack([self.vectors[key] for key in keys]) if keys else np.zeros((0, 1), np.float32)


def fuse_rankings(*score_arrays) -> np.ndarray:
    """Reciprocal-rank fusion: each ranking gives a chunk 1/(RRF_K + rank); the sums are compared.

    Chunks with a zero score in a ranking get nothing from it (no evidence is not evidence).
    """
    fused = np.zeros(len(score_arrays[0]), dtype=np.float64)
    for scores in score_arrays:
        order = np.argsort(-scores, kind="stable")
        ranks = np.empty(len(scores), dtype=np.float64)
        ranks[order] = np.arange(1, len(scores) + 1)
        fused += np.where(scores > 0, 1.0 / (RRF_K + ranks), 0.0)
    return fused


# --------------------------------------------------------------------------- selecting snippets

def select_context(question, repo_root, k=DEFAULT_TOP_FILES, embed=None, cache_dir=None,
                   budget=CONTEXT_CHAR_BUDGET) -> list[Snippet]:
    """The best snippets for ``question`` from the ``k`` most relevant files, within ``budget`` characters.

    ``embed``: optional ``embed(texts) -> vectors`` (e.g. LiteLLMEmbedder); without it, offline only.
    ``cache_dir``: where indexes and vectors are cached (default: config.default_cache_dir()).
    Returns [] when nothing in the repository shares a word with the question.
    """
    if cache_dir is None:
        from config import default_cache_dir

        cache_dir = default_cache_dir()
    index = load_index(repo_root, cache_dir)
    if index.n_chunks == 0 or k < 1:
        return []
    terms = question_terms(question)
    scores = index.scores(terms)
    if embed is not None:
        dense = dense_scores(index, question, embed, cache_dir) * index.prior
        scores = fuse_rankings(scores, dense).astype(np.float32)
    return pick_snippets(index, scores, terms, k, budget)


def pick_snippets(index: LexicalIndex, scores, terms, k: int, budget: int) -> list[Snippet]:
    """Best chunk of each of the top-k files first, then their next-best chunks while budget lasts."""
    ranked = [int(c) for c in np.argsort(-scores, kind="stable") if scores[c] > 0]
    top_files: list[str] = []
    per_file: dict[str, list[int]] = {}
    for chunk in ranked:
        rel = index.chunk_path(chunk)
        if rel not in per_file:
            if len(top_files) == k:
                continue
            top_files.append(rel)
            per_file[rel] = []
        if len(per_file[rel]) < MAX_SNIPPETS_PER_FILE:
            per_file[rel].append(chunk)
    firsts = [per_file[rel][0] for rel in top_files]
    seconds = sorted((c for rel in top_files for c in per_file[rel][1:]), key=lambda c: -scores[c])
    chosen, used = [], 0
    for chunk in firsts + seconds:
        snippet = _snippet(index, chunk, float(scores[chunk]), terms)
        if used + len(snippet.text) > budget and chosen:
            continue
        chosen.append(snippet)
        used += len(snippet.text)
    return chosen


def _snippet(index: LexicalIndex, chunk: int, score: float, terms) -> Snippet:
    rel = index.chunk_path(chunk)
    lines = _file_lines(index, rel)
    start, end = int(index.chunk_start[chunk]), min(int(index.chunk_end[chunk]), len(lines))
    if end - start + 1 > SNIPPET_MAX_LINES:
        start = _best_window(lines, start, end, set(terms))
        end = start + SNIPPET_MAX_LINES - 1
    return Snippet(printable(rel), start, end, round(score, 4), "\n".join(lines[start - 1:end]))


def _best_window(lines, start: int, end: int, terms: set) -> int:
    """First line of the SNIPPET_MAX_LINES-line window of start..end with the most question terms."""
    hits = [len(terms.intersection(count_terms(line))) for line in lines[start - 1:end]]
    sums = np.convolve(hits, np.ones(SNIPPET_MAX_LINES, dtype=int), mode="valid")
    return start + int(np.argmax(sums)) if len(sums) else start


def _file_lines(index: LexicalIndex, rel: str) -> list[str]:
    text = as_text(read_bytes(index.root / rel))
    return [] if text is None else text.splitlines()


def render_snippets(snippets) -> str:
    """Snippets as numbered lines under a header, the way read_file shows them (cite path:line)."""
    blocks = []
    for s in snippets:
        body = "\n".join(f"{s.start_line + i:>5}| {line}" for i, line in enumerate(s.text.splitlines()))
        blocks.append(f"[Snippet: {s.path} lines {s.start_line}-{s.end_line} (score {s.score:.3g})]\n{body}")
    return "\n\n".join(blocks)
