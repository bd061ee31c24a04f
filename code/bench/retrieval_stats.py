"""The statistics of bench_retrieval.py: R@k and MRR from ranks, and percentile-bootstrap intervals.

numpy only and no imports from the lab, so rubric/checks/test_bench_stats.py can check the
arithmetic without the corpus (and without putting code/ on sys.path).
"""

from __future__ import annotations

import math

import numpy as np

CUTOFFS = (1, 3, 5)
RESAMPLES = 2_000
SEED = 14


def bootstrap_ci(values, resamples=RESAMPLES, seed=SEED, level=0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` and its percentile-bootstrap interval.

    For a paired difference pass the per-question differences (ours - theirs): resampling them
    resamples the same questions for both rankers.
    """
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return (math.nan, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return (float(values.mean()), float(low), float(high))


def metrics(ranks) -> dict[str, np.ndarray]:
    """Per-question R@k (0/1) and reciprocal rank, from the rank of the first relevant file (0 = none)."""
    ranks = np.asarray(ranks, dtype=np.float64)
    found = ranks > 0
    out = {f"R@{k}": (found & (ranks <= k)).astype(np.float64) for k in CUTOFFS}
    out["MRR"] = np.where(found, 1.0 / np.where(found, ranks, 1.0), 0.0)
    return out


def first_relevant_rank(ranking: list[str], relevant) -> int:
    """1-based rank of the first relevant file in ``ranking``, 0 when none is there."""
    wanted = set(relevant)
    return next((i + 1 for i, rel in enumerate(ranking) if rel in wanted), 0)
