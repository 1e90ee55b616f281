"""Reciprocal rank fusion and the named retrieval presets.

RRF (Cormack, Clarke and Büttcher, SIGIR 2009) scores a candidate by the sum over retrievers of
``weight / (k + rank)`` with ranks counted from 1. The constant ``k`` (default 60, as in the paper)
flattens the head of each list: a larger ``k`` lets agreement between retrievers outweigh a single
retriever's first place. It is set per call, by ``GRAPHMEM_RRF_K``, or per preset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from graphmem.errors import ConfigError

RRF_K = 60.0
RETRIEVERS = ("bm25", "vector", "graph")


@dataclass(frozen=True, slots=True)
class Preset:
    """A retrieval mode: which retrievers take part, their RRF weights, and whether to rerank."""

    name: str
    weights: Mapping[str, float] = field(default_factory=dict)
    rerank: bool = False
    # In fused modes, candidates of the kind the question asks for ("which team ...") get their
    # fused score multiplied by 1 + kind_boost.
    kind_boost: float = 0.0

    @property
    def retrievers(self) -> tuple[str, ...]:
        return tuple(r for r in RETRIEVERS if self.weights.get(r, 0.0) > 0)


PRESETS: dict[str, Preset] = {
    "bm25": Preset("bm25", {"bm25": 1.0}),
    "vector": Preset("vector", {"vector": 1.0}),
    "graph": Preset("graph", {"graph": 1.0}),
    "hybrid": Preset("hybrid", {"bm25": 1.0, "vector": 1.0, "graph": 1.0}, kind_boost=1.0),
    "hybrid-rerank": Preset("hybrid-rerank", {"bm25": 1.0, "vector": 1.0, "graph": 1.0}, rerank=True,
                            kind_boost=1.0),
}
DEFAULT_MODE = "hybrid-rerank"


def preset(mode: str) -> Preset:
    try:
        return PRESETS[mode]
    except KeyError:
        raise ConfigError(f"unknown mode {mode!r}: choose one of {', '.join(PRESETS)}") from None


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
                           k: float = RRF_K, *,
                           by_score: Mapping[str, Mapping[str, float]] | None = None) -> list[tuple[str, float]]:
    """Fuse ranked key lists (best first) into one, best first. Ties break by key for stability.

    A retriever named in ``by_score`` (name -> key -> score) enters by score instead of rank:
    ``w * (s / s_max) / (k + 1)``, the same scale as a first place, so a large gap between its
    first and second candidate survives fusion. Graph retrieval uses this when the question names
    the nodes it starts from (a PageRank from "INC-042" that scores the commit that caused it far
    above a commit that merely mentions it).
    """
    scores: dict[str, float] = {}
    for name, keys in rankings.items():
        w = weights.get(name, 0.0)
        if w <= 0:
            continue
        raw = (by_score or {}).get(name)
        top = max((raw.get(key, 0.0) for key in keys), default=0.0) if raw else 0.0
        for rank, key in enumerate(keys, start=1):
            if raw and top > 0:
                contribution = w * (raw.get(key, 0.0) / top) / (k + 1)
            else:
                contribution = w / (k + rank)
            scores[key] = scores.get(key, 0.0) + contribution
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))
