"""Dense vectors for context_selector.py (optional): chunks and questions embedded by a model.

Used only when an ``embed(texts) -> vectors`` function is given (copilot.py passes a
LiteLLMEmbedder when EMBEDDING_MODEL is set). Vectors are cached next to the lexical index, keyed
by chunk content and embedder, so a second run embeds nothing.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np

from context_index import LexicalIndex, file_lines

EMBED_BATCH = 64                  # chunks per embedding request


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
    lines = file_lines(index, index.chunk_path(chunk))
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

