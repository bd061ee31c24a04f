"""Dense vectors for context_selector.py (optional): chunks and questions embedded by a model.

Used only with an ``embed`` function (copilot.py passes a LiteLLMEmbedder when EMBEDDING_MODEL is
set). What an embed function offers:

    embed(texts) -> vectors          the repository's chunks (documents)
    embed.query(texts) -> vectors    optional: questions, for models that embed them differently
    embed.name                       optional: which model, as configured (default: the function's name)
    embed.reported_model             optional, after a call: the model the server says it ran

Any failure of ``embed`` becomes EmbeddingFailed, and context_selector carries on with the lexical
ranking alone. The question is embedded first, so a dead server shows up within QUERY_TIMEOUT.

The cache: one file per repository and configured model, cache_dir/vectors/<repo>/<model>.f32, of
fixed-size records (key, vector) appended batch by batch, so an interrupted job keeps what it
finished and a new question appends one record instead of rewriting the file. A key is a hash of
what determines the vector: the input type (question or document) and the text embedded; a chunk's
text is made from its path, its file's content and its lines only, so (path, content hash, lines)
stand for it. The model's identity is the file's: when the server reports a different model than
the one that filled the file (or vectors change size), the file starts again instead of mixing
two models' vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import context_index
from cli import redact_urls
from context_index import LexicalIndex, file_lines
from litellm_guard import import_litellm, within_deadline
from tools import TreeReader, printable

EMBED_BATCH = 16                  # chunks per embedding request, saved as each one completes
QUERY_TIMEOUT = 15                # seconds in all to embed the question: a dead server is found fast
BATCH_TIMEOUT = 180               # seconds in all per batch (a busy CPU server may do 1 chunk a second)
PROGRESS_EVERY = 10.0             # seconds between progress lines on stderr during a long job
MAX_EMBED_CHUNKS = 3_000          # a bigger job (a provider's bill, an hour of a CPU server) needs EMBEDDING_MAX_CHUNKS
TEXT_VERSION = 1                  # bump when chunk_text changes: every chunk is embedded again
QUERY, DOCUMENT = "query", "document"


class EmbeddingFailed(Exception):
    """The embedding model could not be used this time; the message says why in one line."""


class LiteLLMEmbedder:
    """``embed(texts)`` and ``embed.query(texts)`` through litellm.embedding, in batches.

    Asymmetric models embed questions and documents differently: e5 wants "query: " and
    "passage: " in front of the text (``query_prefix``, ``document_prefix``); Cohere, Voyage and
    others take an ``input_type`` (``input_types=("search_query", "search_document")``).
    """

    def __init__(self, model: str, api_base=None, api_key=None, *, query_prefix="", document_prefix="",
                 input_types=(), max_chunks=MAX_EMBED_CHUNKS):
        self.model, self.api_base, self.api_key = model, api_base, api_key
        self.max_chunks = max_chunks  # chunks one run embeds without being allowed more (EMBEDDING_MAX_CHUNKS)
        self.prefix = {QUERY: query_prefix, DOCUMENT: document_prefix}
        self.input_type = dict(zip((QUERY, DOCUMENT), input_types))
        # Where the model is served is not part of its name: localhost and 127.0.0.1 share vectors.
        extras = [query_prefix, document_prefix, *input_types]
        self.name = model if not any(extras) else "|".join([model, *extras])
        self.reported_model = None

    @classmethod
    def from_settings(cls, settings) -> "LiteLLMEmbedder | None":
        """The embedder config.Settings describes, or None when EMBEDDING_MODEL is not set."""
        if not settings.embedding_model:
            return None
        return cls(settings.embedding_model, settings.embedding_api_base, settings.embedding_api_key,
                   query_prefix=getattr(settings, "embedding_query_prefix", ""),
                   document_prefix=getattr(settings, "embedding_document_prefix", ""),
                   input_types=getattr(settings, "embedding_input_types", ()),
                   max_chunks=getattr(settings, "embedding_max_chunks", None) or MAX_EMBED_CHUNKS)

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts, DOCUMENT, BATCH_TIMEOUT)

    def query(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts, QUERY, QUERY_TIMEOUT)

    def _embed(self, texts, kind: str, timeout: float) -> list[list[float]]:
        litellm = import_litellm()  # lazy: it takes seconds, and it reads no stray .env this way
        extra = {"input_type": self.input_type[kind]} if kind in self.input_type else {}
        # LiteLLM 1.110 retries an embedding DEFAULT_MAX_RETRIES times even with max_retries=0
        # (it reads `max_retries or DEFAULT_MAX_RETRIES`): share the time out between the attempts.
        retries = max(int(getattr(litellm, "DEFAULT_MAX_RETRIES", 0) or 0), 0)
        timeout /= 1 + retries
        vectors: list[list[float]] = []
        for i in range(0, len(texts), EMBED_BATCH):
            batch = [self.prefix[kind] + text for text in texts[i:i + EMBED_BATCH]]
            # LiteLLM's timeout is per read: the deadline bounds the whole call, retries included
            response = within_deadline(litellm.embedding, timeout * (1 + retries), model=self.model, input=batch,
                                           api_base=self.api_base, api_key=self.api_key, timeout=timeout,
                                           max_retries=0, **extra)
            items = sorted(response.data, key=lambda item: item["index"])  # plain dicts, not objects
            if len(items) != len(batch):
                raise ValueError(f"{self.model} returned {len(items)} vectors for {len(batch)} texts")
            self.reported_model = getattr(response, "model", None) or None
            vectors += [item["embedding"] for item in items]
        return vectors


# --------------------------------------------------------------------------- scoring

def dense_scores(index: LexicalIndex, question: str, embed, cache_dir) -> np.ndarray:
    """Cosine similarity of the question with every chunk, embedding only what is not cached.

    Raises EmbeddingFailed (after saving every finished batch) when the model cannot be used.
    """
    name = getattr(embed, "name", None) or getattr(embed, "__name__", "embed")
    store = VectorStore.open(cache_dir, index.root, name)
    query = _question_vector(store, question, embed)
    return _unit_chunk_matrix(index, store, embed) @ (query / (np.linalg.norm(query) or 1.0))


def record_key(kind: str, *parts) -> bytes:
    return hashlib.blake2b("\x1f".join([kind, *map(str, parts)]).encode("utf-8", "surrogateescape"),
                           digest_size=16).digest()


def chunk_keys(index: LexicalIndex) -> list[bytes]:
    """Every chunk's record key: its input type and what its text is made of (see chunk_text)."""
    keys = index.memo.get("chunk_keys")
    if keys is None:
        keys = index.memo["chunk_keys"] = [
            record_key(DOCUMENT, TEXT_VERSION, rel, index.hashes.get(rel, ""), start, end)
            for rel, start, end in zip(map(index.chunk_path, range(index.n_chunks)),
                                       index.chunk_start.tolist(), index.chunk_end.tolist())]
    return keys


def chunk_text(rel: str, lines: list[str], start: int, end: int) -> str:
    """What is embedded for a chunk: its path (where the code lives says what it is) and its lines."""
    return rel + "\n" + "\n".join(lines[start - 1:end])


def _question_vector(store: "VectorStore", question: str, embed) -> np.ndarray:
    key = record_key(QUERY, question)
    if key not in store:
        store.add([key], _call(getattr(embed, "query", embed), [question], embed, store))
    return store.vector(key)


def _unit_chunk_matrix(index: LexicalIndex, store: "VectorStore", embed) -> np.ndarray:
    """Every chunk's vector, scaled to length 1; kept with the index until the store starts again."""
    memo = index.memo.get("dense")
    if memo is not None and memo[0] is store and memo[1] == store.generation:
        return memo[2]
    keys = chunk_keys(index)
    missing = [c for c, key in enumerate(keys) if key not in store]
    allowed = getattr(embed, "max_chunks", None) or MAX_EMBED_CHUNKS
    if len(missing) > allowed:  # asked before the job, not discovered after it
        raise EmbeddingFailed(f"{len(missing):,} chunks would be embedded, more than the {allowed:,} a run embeds "
                              f"without asking; to allow it, put EMBEDDING_MAX_CHUNKS={len(missing)} in code/.env")
    if missing:
        _embed_chunks(index, store, embed, missing, keys)
        if not all(key in store for key in keys):  # check_model started the file again mid-run
            raise EmbeddingFailed("the server changed embedding model during this run; the next run starts again")
    matrix = store.matrix(keys)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    index.memo["dense"] = (store, store.generation, unit)
    return unit


def _embed_chunks(index, store, embed, missing: list[int], keys) -> None:
    """Embed ``missing`` chunks batch by batch, each batch saved as it completes, with progress."""
    total, done, started = len(missing), 0, time.perf_counter()
    label = printable(str(getattr(embed, "name", "the embedding model")).split("|")[0])
    if total > EMBED_BATCH:
        print(f"context: embedding {total:,} chunks with {label}; each batch is saved, "
              "so an interrupted run resumes here", file=sys.stderr)
    last_report = started
    texts = _texts_of(index, missing)
    for i in range(0, total, EMBED_BATCH):
        batch = missing[i:i + EMBED_BATCH]
        try:
            store.add([keys[c] for c in batch], _call(embed, [next(texts) for _ in batch], embed, store))
        except EmbeddingFailed as exc:
            if done:
                raise EmbeddingFailed(f"{exc} ({done:,} of {total:,} chunks saved; the next run resumes)") from exc
            raise
        done += len(batch)
        now = time.perf_counter()
        if now - last_report >= PROGRESS_EVERY and done < total:
            rate = done / (now - started)
            print(f"context: embedded {done:,}/{total:,} chunks ({rate:.1f}/s, about "
                  f"{(total - done) / rate / 60:.0f} min left)", file=sys.stderr)
            last_report = now
    if total > EMBED_BATCH:
        print(f"context: embedded {total:,} chunks in {time.perf_counter() - started:.1f} s", file=sys.stderr)


def _texts_of(index: LexicalIndex, chunks: list[int]):
    """chunk_text of each chunk in turn, reading each file once (chunks of a file are consecutive)."""
    rel, lines = None, []
    with TreeReader(index.root) as tree:
        for c in chunks:
            if index.chunk_path(c) != rel:
                rel = index.chunk_path(c)
                lines = file_lines(index, rel, tree)
            yield chunk_text(rel, lines, int(index.chunk_start[c]), int(index.chunk_end[c]))


def _call(fn, texts: list[str], embed, store: "VectorStore") -> np.ndarray:
    """fn(texts) as a float32 matrix, checked; any failure of the model becomes EmbeddingFailed."""
    try:
        vectors = np.asarray(fn(texts), dtype=np.float32)
    except Exception as exc:  # whatever the provider raises (connection, timeout, HTTP status, bad JSON)
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        said = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        raise EmbeddingFailed(printable(redact_urls(said))) from None  # no ESC, no user:KEY@ from the server's words
    if vectors.ndim != 2 or len(vectors) != len(texts) or not vectors.shape[1] or not np.isfinite(vectors).all():
        raise EmbeddingFailed(f"the model returned {vectors.shape} numbers for {len(texts)} texts")
    store.check_model(getattr(embed, "reported_model", None), vectors.shape[1])
    return vectors


# --------------------------------------------------------------------------- the vector cache

class VectorStore:
    """One repository's vectors from one configured model: records (key, vector) in a file that only grows.

    ``open`` keeps the store in memory for the process, so the next question reads only the records
    appended since (by this or another process). Without a cache folder it lives in memory only.
    """

    _opened: dict = {}

    def __init__(self, path: Path | None):
        self.path = path
        self.meta_path = path.with_suffix(".json") if path else None
        self._clear(None)

    def _clear(self, meta) -> None:
        self.generation = getattr(self, "generation", 0) + 1  # vectors held before are gone
        self.meta = meta or {}
        self.rows: dict[bytes, int] = {}
        self.parts: list[np.ndarray] = []
        self._stacked = np.zeros((0, int(self.meta.get("dim") or 1)), np.float32)
        self.loaded = 0  # bytes of the file already read

    @classmethod
    def open(cls, cache_dir, root: Path, name: str) -> "VectorStore":
        folder = context_index.cache_folder(Path(root), cache_dir)
        slug = record_key("model", name).hex()[:20]
        if folder is None:  # no cache on disk: vectors last as long as the process
            return cls._opened.setdefault((Path(root), slug), cls(None))
        path = folder / "vectors" / context_index.repo_key(Path(root)) / f"{slug}.f32"
        store = cls._opened.setdefault(path, cls(path))
        store.refresh()
        return store

    @property
    def dtype(self):
        return np.dtype([("key", "V16"), ("vector", "<f4", (int(self.meta["dim"]),))])

    def refresh(self) -> None:
        """Read what was appended to the file since last time (all of it the first time)."""
        if self.path is None:
            return
        try:
            meta = json.loads(self.meta_path.read_text(encoding="utf-8"))
            size = self.path.stat().st_size
        except (OSError, ValueError):
            return  # nothing cached yet: keep what is in memory
        if meta != self.meta or size < self.loaded:
            self._clear(meta)  # started again (another model) by another process
        whole = (size - self.loaded) // self.dtype.itemsize
        if whole <= 0:
            return
        try:
            records = np.fromfile(self.path, dtype=self.dtype, count=whole, offset=self.loaded)
        except (OSError, ValueError):
            return
        self._append(records["key"].tolist(), records["vector"])
        self.loaded += whole * self.dtype.itemsize

    def __contains__(self, key: bytes) -> bool:
        return key in self.rows

    def vector(self, key: bytes) -> np.ndarray:
        return self.matrix([key])[0]

    def matrix(self, keys) -> np.ndarray:
        if len(self.parts) > 1:
            self.parts = [np.concatenate(self.parts)]
        stacked = self.parts[0] if self.parts else self._stacked
        return stacked[[self.rows[key] for key in keys]]

    def check_model(self, reported: str | None, dim: int) -> None:
        """Start again when the vectors now come from another model than the stored ones."""
        if self.meta and (self.meta.get("dim") != dim or (reported and self.meta.get("model") not in (None, reported))):
            self._start({"model": reported, "dim": dim})
        elif not self.meta:
            self._start({"model": reported, "dim": dim})

    def _start(self, meta: dict) -> None:
        self._clear(meta)
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(b"")
            partial = self.meta_path.with_name(f"{self.meta_path.stem}.{os.getpid()}.tmp")
            partial.write_text(json.dumps(meta), encoding="utf-8")
            os.replace(partial, self.meta_path)
        except OSError as exc:
            print(f"context: could not cache embeddings ({exc.strerror})", file=sys.stderr)
            self.path = None

    def add(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Keep the vectors, and append them to the file at once (an interruption loses no finished batch)."""
        self._append(keys, vectors)
        if self.path is None:
            return
        records = np.empty(len(keys), dtype=self.dtype)
        records["key"], records["vector"] = keys, vectors
        try:
            with open(self.path, "ab") as fh:
                start = fh.tell()
                fh.write(records.tobytes())
            if start == self.loaded:
                self.loaded += records.nbytes  # nobody else appended in between: no need to read ours back
        except OSError as exc:
            print(f"context: could not cache embeddings ({exc.strerror})", file=sys.stderr)

    def _append(self, keys, vectors) -> None:
        base = sum(len(p) for p in self.parts)
        self.parts.append(np.asarray(vectors, dtype=np.float32))
        self.rows.update(zip(keys, range(base, base + len(keys))))
