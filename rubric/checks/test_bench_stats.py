"""Course checks (maintainers): the statistics of code/bench/bench_retrieval.py, on made-up ranks.

The benchmark itself needs the corpus in ../shared and is not a test; its arithmetic
(code/bench/retrieval_stats.py, loaded by path: it imports nothing from the lab) is.
"""

import importlib.util
from pathlib import Path

import numpy as np

STATS = Path(__file__).resolve().parents[2] / "code" / "bench" / "retrieval_stats.py"
spec = importlib.util.spec_from_file_location("retrieval_stats", STATS)
stats = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stats)


def test_metrics_from_ranks():
    m = stats.metrics([1, 2, 4, 0])  # 0: no relevant file ranked
    assert m["R@1"].tolist() == [1, 0, 0, 0]
    assert m["R@3"].tolist() == [1, 1, 0, 0]
    assert m["R@5"].tolist() == [1, 1, 1, 0]
    assert np.allclose(m["MRR"], [1, 0.5, 0.25, 0])


def test_first_relevant_rank_takes_any_relevant_file():
    assert stats.first_relevant_rank(["a.py", "b.py", "c.py"], ["c.py", "b.py"]) == 2
    assert stats.first_relevant_rank(["a.py"], ["z.py"]) == 0


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    values = np.r_[np.ones(30), np.zeros(70)]
    mean, low, high = stats.bootstrap_ci(values)
    assert mean == 0.3 and low < 0.3 < high and 0.15 < low and high < 0.45
    assert stats.bootstrap_ci(values) == (mean, low, high)  # same seed, same interval
    assert stats.bootstrap_ci(np.zeros(50))[1:] == (0.0, 0.0)  # no spread, no interval


def test_paired_difference_is_tighter_than_the_separate_intervals():
    rng = np.random.default_rng(0)
    base = rng.random(200)
    better = base + 0.05  # the same questions, each a little better
    _, low, high = stats.bootstrap_ci(better - base)
    assert abs(low - 0.05) < 1e-9 and abs(high - 0.05) < 1e-9  # a constant gain: certain
    _, a_low, a_high = stats.bootstrap_ci(better)
    assert a_high - a_low > 0.05  # alone, each mean is far less certain
