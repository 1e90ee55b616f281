"""Plain baselines that every fused mode is compared with in the same run.

One unit per answerable node (code definitions, files, commits, decisions, incidents, documents):
its first chunk, as graphmem stored it. Three rankers over those units, none of them graphmem's:

- ``plain-bm25``: ``bm25s`` (Lucene BM25, k1 1.5, b 0.75) over lower-cased word tokens, no
  identifier splitting, no stemming;
- ``plain-dense``: cosine of graphmem's embedder's vectors (the unit's vector as the index holds
  it), exact search;
- ``plain-rrf``: reciprocal rank fusion (k 60) of the two.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from graphmem.model import NodeKind, kind_of
from graphmem.retrieval.fusion import RRF_K, reciprocal_rank_fusion

UNIT_KINDS = frozenset({NodeKind.SYMBOL, NodeKind.FILE, NodeKind.COMMIT, NodeKind.DECISION, NodeKind.INCIDENT,
                        NodeKind.DOCUMENT, NodeKind.SERVICE, NodeKind.TEAM, NodeKind.PERSON})
DEPTH = 100
_TOKEN = re.compile(r"\w+")
MODES = ("plain-bm25", "plain-dense", "plain-rrf")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class PlainBaselines:
    """The three plain rankers over one project's units; ``searchers()`` feeds ``eval.runner.run``."""

    def __init__(self, gm: Any) -> None:
        import bm25s

        first: dict[str, Any] = {}
        for chunk in gm.store.iter_chunks():
            if kind_of(chunk.node_key) in UNIT_KINDS:
                best = first.get(chunk.node_key)
                if best is None or chunk.ordinal < best.ordinal:
                    first[chunk.node_key] = chunk
        self.keys = sorted(first)
        texts = [first[k].text for k in self.keys]
        self.bm25 = bm25s.BM25()
        self.bm25.index([_tokens(t) for t in texts], show_progress=False)
        vectors = gm.indexes.vectors
        missing = [i for i, k in enumerate(self.keys) if vectors.vector(first[k].id) is None]
        rows = [vectors.vector(first[k].id) for k in self.keys]
        if missing:  # a unit the index does not hold (it should): embed it here
            fresh = gm.indexes.embedder.encode([texts[i] for i in missing], kinds=[first[self.keys[i]].kind
                                                                                 for i in missing])
            for j, i in enumerate(missing):
                rows[i] = fresh[j]
        self.matrix = np.vstack(rows).astype(np.float32) if rows else np.zeros((0, 384), np.float32)
        self.embedder = gm.indexes.embedder

    def _bm25(self, question: str) -> list[str]:
        scores = self.bm25.get_scores(_tokens(question))
        top = np.argsort(-scores, kind="stable")[:DEPTH]
        return [self.keys[i] for i in top if scores[i] > 0]

    def _dense(self, question: str) -> list[str]:
        sims = self.matrix @ np.asarray(self.embedder.encode_query(question), dtype=np.float32)
        return [self.keys[i] for i in np.argsort(-sims, kind="stable")[:DEPTH]]

    def _rrf(self, question: str) -> list[str]:
        fused = reciprocal_rank_fusion({"bm25": self._bm25(question), "vector": self._dense(question)},
                                       {"bm25": 1.0, "vector": 1.0}, RRF_K)
        return [key for key, _ in fused[:DEPTH]]

    def searchers(self) -> dict[str, Callable[[str], list[str]]]:
        return {"plain-bm25": self._bm25, "plain-dense": self._dense, "plain-rrf": self._rrf}
