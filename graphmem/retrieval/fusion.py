"""Reciprocal rank fusion (the ``rrf`` preset, and the baseline every fused mode is compared with).

RRF (Cormack, Clarke and Büttcher, SIGIR 2009) scores a candidate by the sum over retrievers of
``weight / (k + rank)`` with ranks counted from 1. The constant ``k`` (default 60, as in the paper)
flattens the head of each list: a larger ``k`` lets agreement between retrievers outweigh a single
retriever's first place. It is set per call, by ``GRAPHMEM_RRF_K``, or in ``FusionConfig.rrf_k``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from graphmem.errors import ConfigError

RRF_K = 60.0


def rrf_k() -> float:
    """``GRAPHMEM_RRF_K`` if set, else 60."""
    raw = os.environ.get("GRAPHMEM_RRF_K")
    if not raw:
        return RRF_K
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"GRAPHMEM_RRF_K must be a number, not {raw!r}") from None
    if value < 0:
        raise ConfigError("GRAPHMEM_RRF_K must not be negative")
    return value


def reciprocal_rank_fusion(rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float],
                           k: float = RRF_K) -> list[tuple[str, float]]:
    """Fuse ranked key lists (best first) into one, best first. Ties break by key for stability."""
    scores: dict[str, float] = {}
    for name, keys in rankings.items():
        w = weights.get(name, 0.0)
        if w <= 0:
            continue
        for rank, key in enumerate(keys, start=1):
            scores[key] = scores.get(key, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))
