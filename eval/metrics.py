"""Retrieval metrics as SPEC.md defines them, and a paired bootstrap for differences between modes.

A gold key is found at the rank of the first result whose key is the gold key or lies inside it
(a symbol inside its file, a method inside its class). Recall@k is the share of a question's gold
keys found within the first k results; MRR uses the best rank of any gold key; nDCG@10 gives each
gold key its found rank; all_recall@k is 1 when every gold key is found within k. ``mrr_exact``
is MRR counting only a gold key itself, not what lies inside it: for "which class has method m",
the method ranked first finds the class for MRR, not for ``mrr_exact``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from graphmem.model import key_contains

CUTOFFS = (2, 5, 10)


def found_ranks(results: Sequence[str], gold: Sequence[str]) -> dict[str, int | None]:
    """Gold key -> 1-based rank at which it is found (``None``: not in the results)."""
    out: dict[str, int | None] = {}
    for g in gold:
        out[g] = next((rank for rank, key in enumerate(results, start=1) if key_contains(g, key)), None)
    return out


def question_metrics(results: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """Recall@2/5/10, MRR, nDCG@10 and all_recall@5 of one question."""
    gold = list(dict.fromkeys(gold))
    ranks = found_ranks(results, gold)
    out: dict[str, float] = {}
    for k in CUTOFFS:
        out[f"recall@{k}"] = sum(1 for r in ranks.values() if r is not None and r <= k) / len(gold) if gold else 0.0
    best = min((r for r in ranks.values() if r is not None), default=None)
    out["mrr"] = 1.0 / best if best else 0.0
    exact = next((rank for rank, key in enumerate(results, start=1) if key in gold), None)
    out["mrr_exact"] = 1.0 / exact if exact else 0.0
    dcg = sum(1.0 / math.log2(r + 1) for r in ranks.values() if r is not None and r <= 10)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold), 10) + 1))
    out["ndcg@10"] = dcg / ideal if ideal else 0.0
    out["all_recall@5"] = 1.0 if gold and all(r is not None and r <= 5 for r in ranks.values()) else 0.0
    return out


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), without numpy."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                     level: float = 0.95) -> dict[str, float]:
    """Mean of ``b - a`` over paired questions with a percentile bootstrap interval."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    n = len(a)
    diffs = [y - x for x, y in zip(a, b)]
    if n == 0:
        return {"diff": 0.0, "low": 0.0, "high": 0.0}
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2.0
    return {"diff": mean(diffs), "low": means[int(tail * resamples)], "high": means[min(resamples - 1,
                                                                                          int((1 - tail) * resamples))]}
