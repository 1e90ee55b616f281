"""Answering a question: retrievers, fusion, reranking, evidence.

``Retriever.query`` runs the retrievers of the chosen preset (BM25 and vectors over chunks, graph
retrieval over nodes), maps chunk hits to the nodes they belong to, fuses the node rankings with
reciprocal rank fusion, reorders the head with the cross-encoder (``hybrid-rerank``), and returns
distinct nodes, each with its best passage, its provenance and the graph paths that justify it.
The same call serves the CLI, the Python API, the MCP server and the evaluation harness.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from graphmem.errors import ModelError
from graphmem.model import Chunk, Node, NodeKind, RelType, kind_of
from graphmem.retrieval.fusion import (
    DEFAULT_MODE,
    Preset,
    preset,
    reciprocal_rank_fusion,
    rrf_k,
)
from graphmem.retrieval.graph import GraphRetriever
from graphmem.retrieval.indexes import Indexes
from graphmem.retrieval.question import Question, parse_question
from graphmem.stores.base import GraphStore, Path, Step

CHUNK_CANDIDATES = 100  # chunk hits fetched per lexical / vector retriever
NODE_CANDIDATES = 50  # node candidates each retriever hands to fusion
LEXICAL_SEEDS = 5  # best lexical and vector nodes that join the graph retriever's seeds
RERANK_DEPTH = 15  # fused candidates the cross-encoder reorders
# Weight of the graph list in fusion, times the preset's, when the question names the nodes the
# graph search starts from (an id, a name, "the latest incident").
ANCHORED_GRAPH_WEIGHT = 4.0
SUBJECT_FACTOR = 0.25
UNANCHORED_GRAPH_WEIGHT = 0.25  # MuSiQue sample: hybrid R@5 0.543 at 1.0, 0.608 at 0.25, 0.590 without the graph
# Weight of the graph list, times the preset's, when graph retrieval ranked passages over the entity
# layer (HippoRAG-style; it already starts from the best lexical and vector hits). It enters fusion by
# rank. Hybrid Recall@5 at 3 / 6 / 12: 2Wiki 0.689 / 0.716 / 0.723, MuSiQue (rules) 0.662 / 0.688 /
# 0.709, MuSiQue (OpenIE) 0.685 / 0.689 / 0.708 (BM25 0.669 / 0.539, vector 0.595 / 0.597).
LAYER_GRAPH_WEIGHT = 12.0


class Reranker(Protocol):
    name: str

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]: ...

    def helps_for(self, answer_kinds: Iterable[str] = ()) -> bool: ...


@dataclass(slots=True)
class Hit:
    """One result: a node, the passage that stands for it, and why it is here."""

    rank: int
    key: str
    kind: str
    score: float
    text: str
    source: dict[str, Any]
    provenance: dict[str, Any]
    evidence: list[dict[str, Any]]
    retrievers: dict[str, int | None]
    name: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "key": self.key, "kind": self.kind, "name": self.name,
                "score": round(self.score, 6), "text": self.text, "source": self.source,
                "provenance": self.provenance, "evidence": self.evidence, "retrievers": self.retrievers}


@dataclass(slots=True)
class Answer:
    """What ``query`` returns (``as_dict`` is the ``query --json`` object of SPEC.md)."""

    query: str
    mode: str
    results: list[Hit] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        return [h.key for h in self.results]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"query": self.query, "mode": self.mode,
                               "results": [h.as_dict() for h in self.results],
                               "timings_ms": {k: round(v, 2) for k, v in self.timings_ms.items()},
                               "analysis": self.analysis}
        if self.notes:
            out["notes"] = self.notes
        return out


@dataclass(slots=True)
class _Candidates:
    """Per-retriever node rankings and the best chunk seen for each node."""

    rankings: dict[str, list[str]] = field(default_factory=dict)
    best_chunk: dict[str, Chunk] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    graph_scores: dict[str, float] = field(default_factory=dict)  # set when the graph search is anchored
    subjects: set[str] = field(default_factory=set)  # what the question is about, not its answer
    anchored: bool = False  # the graph search started from organisation nodes the question names
    layer: bool = False  # the graph list ranks passages over the entity layer


class Retriever:
    """Question answering over one project's graph and indexes."""

    def __init__(self, store: GraphStore, indexes: Indexes, *, reranker: Reranker | None = None,
                 rrf_constant: float | None = None, now: datetime | None = None) -> None:
        self.store = store
        self.indexes = indexes
        self.reranker = reranker
        self.rrf_k = rrf_k() if rrf_constant is None else rrf_constant
        self.now = now
        self.graph = GraphRetriever(store)

    def query(self, text: str, *, mode: str = DEFAULT_MODE, k: int = 10, kinds: Iterable[str] | None = None,
              path_prefix: str | None = None, now: datetime | None = None, as_of: str | None = None) -> Answer:
        """Answer ``text`` with the ``mode`` preset; ``kinds`` and ``path_prefix`` filter results."""
        started = time.perf_counter()
        spec = preset(mode)
        text = text.strip()
        if not text:
            raise ModelError("empty question")
        if k < 1:
            raise ModelError("k must be at least 1")
        question = parse_question(text, now or self.now or datetime.now(timezone.utc))
        answer = Answer(query=text, mode=mode, analysis=question.as_dict())
        timings = {"bm25": 0.0, "vector": 0.0, "graph": 0.0, "fusion": 0.0, "rerank": 0.0}
        wanted = {NodeKind(x) for x in kinds} if kinds else None
        keep = _filter(wanted, path_prefix)
        cands = _Candidates()
        chunk_hits: dict[str, list[tuple[int, float]]] = {}

        # The graph retriever seeds from the best lexical and vector hits, so it runs both.
        runs = set(spec.retrievers) | ({"bm25", "vector"} if "graph" in spec.retrievers else set())
        if "bm25" in runs:
            t = time.perf_counter()
            chunk_hits["bm25"] = self.indexes.bm25.search(text, CHUNK_CANDIDATES)
            timings["bm25"] = _ms(t)
        query_vec = None
        if "vector" in runs:
            t = time.perf_counter()
            query_vec = self.indexes.embedder.encode_query(text)
            chunk_hits["vector"] = self.indexes.vectors.search(query_vec, CHUNK_CANDIDATES)
            timings["vector"] = _ms(t)
        t = time.perf_counter()
        chunks = self.store.get_chunks_by_id({cid for hits in chunk_hits.values() for cid, _ in hits})
        for name, hits in chunk_hits.items():
            ranking: list[str] = []
            for cid, _score in hits:
                chunk = chunks.get(cid)
                if chunk is None or chunk.node_key in ranking or not keep(chunk.node_key, chunk):
                    continue
                ranking.append(chunk.node_key)
                cands.best_chunk.setdefault(chunk.node_key, chunk)
                if len(ranking) >= NODE_CANDIDATES:
                    break
            cands.rankings[name] = ranking
        lookup_ms = _ms(t)
        for name in chunk_hits:
            timings[name] += lookup_ms / len(chunk_hits)

        if "graph" in spec.retrievers:
            t = time.perf_counter()
            seeds = _interleave([cands.rankings.get("bm25", []), cands.rankings.get("vector", [])], LEXICAL_SEEDS)
            if self.graph.embedder is None and query_vec is not None:
                self.graph.embedder = self.indexes.embedder
                self.graph.cache_dir = self.indexes.cache_dir
            result = self.graph.retrieve(question, lexical_seeds=seeds, k=NODE_CANDIDATES * 2, as_of=as_of,
                                         query_vec=query_vec)
            ranking = [h.key for h in result.hits if keep(h.key, None)][:NODE_CANDIDATES]
            cands.rankings["graph"] = ranking
            cands.paths = {h.key: h.path for h in result.hits}
            if result.named and not result.layer:  # started from what the question names: trust the gaps
                cands.graph_scores = {h.key: h.score for h in result.hits}
            cands.layer = result.layer
            cands.anchored = result.anchored
            cands.subjects = result.subjects
            answer.analysis["linked"] = result.linked
            timings["graph"] = _ms(t)

        t = time.perf_counter()
        fused = self._fuse(spec, cands, question)
        timings["fusion"] = _ms(t)
        head = fused[: max(k, RERANK_DEPTH if spec.rerank else k)]
        nodes = self.store.get_nodes(key for key, _ in head)
        texts = self._passages([key for key, _ in head], cands, nodes)
        if spec.rerank:
            t = time.perf_counter()
            if self.reranker is None:
                answer.notes.append("no reranker is available: results are in fused order "
                                    "(train one with `graphmem reranker train`)")
            elif not self.reranker.helps_for([k.value for k in question.answer_kinds]):
                # hybrid-rerank reranks only where the held-out evaluation saw it help.
                answer.notes.append("the reranker did not beat the fused order on held-out questions of this "
                                    "kind: results are in fused order")
            else:
                scores = self.reranker.score(text, [texts[key] for key, _ in head])
                head = [(key, float(s)) for (key, _), s in sorted(zip(head, scores), key=lambda p: -p[1])]
            timings["rerank"] = _ms(t)
        head = head[:k]
        evidence = self._evidence([key for key, _ in head], cands.paths)
        for rank, (key, score) in enumerate(head, start=1):
            node = nodes.get(key)
            chunk = cands.best_chunk.get(key)
            answer.results.append(Hit(
                rank=rank, key=key, kind=kind_of(key).value, score=score, text=texts[key],
                source=_source(node, chunk), provenance=node.provenance.as_props() if node else {},
                evidence=[p.as_dict() | {"text": p.describe()} for p in evidence.get(key, [])],
                retrievers={name: _rank_in(cands.rankings.get(name), key) for name in ("bm25", "vector", "graph")},
                name=node.name if node else ""))
        timings["total"] = _ms(started)
        answer.timings_ms = timings
        return answer

    # --- steps ----------------------------------------------------------------------------------

    def _fuse(self, spec: Preset, cands: _Candidates, q: Question) -> list[tuple[str, float]]:
        if len(spec.retrievers) == 1:
            ranking = cands.rankings.get(spec.retrievers[0], [])
            return [(key, 1.0 / (self.rrf_k + rank)) for rank, key in enumerate(ranking, start=1)]
        weights = dict(spec.weights)
        if cands.anchored:
            # The question names where to start: what the words match is the start, not the answer.
            weights["graph"] = weights.get("graph", 0.0) * ANCHORED_GRAPH_WEIGHT
        elif cands.layer:
            weights["graph"] = weights.get("graph", 0.0) * LAYER_GRAPH_WEIGHT
        elif not cands.graph_scores and not (set(q.answer_kinds) & self.graph.kinds_present()):
            # Nothing named and no kind asked that the graph holds ("when was the composer of X
            # born?" over passages): the graph list only re-ranks the lexical and vector hits
            # through what they mention; it breaks ties.
            weights["graph"] = weights.get("graph", 0.0) * UNANCHORED_GRAPH_WEIGHT
        fused = reciprocal_rank_fusion({r: cands.rankings.get(r, []) for r in spec.retrievers}, weights,
                                       self.rrf_k,
                                       by_score={"graph": cands.graph_scores} if cands.graph_scores else None)
        if spec.kind_boost and q.answer_kinds:
            answer_kinds = set(q.answer_kinds)
            fused = [(key, score * (1.0 + spec.kind_boost) if kind_of(key) in answer_kinds else score)
                     for key, score in fused]
        # "Which services depend on auth": auth matches every word of the question and is no answer.
        fused = [(key, score * SUBJECT_FACTOR if key in cands.subjects else score) for key, score in fused]
        fused.sort(key=lambda item: (-item[1], item[0]))
        return fused

    def _passages(self, keys: list[str], cands: _Candidates, nodes: dict[str, Node]) -> dict[str, str]:
        """The text that stands for each node: its best-ranked chunk, else its first chunk, else its name."""
        missing = [key for key in keys if key not in cands.best_chunk]
        if missing:
            for chunk in self.store.get_chunks(missing):
                cands.best_chunk.setdefault(chunk.node_key, chunk)
        out = {}
        for key in keys:
            best = cands.best_chunk.get(key)
            node = nodes.get(key)
            out[key] = best.text if best else (f"{node.name} ({key})" if node else key)
        return out

    def _evidence(self, keys: list[str], paths: dict[str, Path]) -> dict[str, list[Path]]:
        """Graph paths for each result: the graph retriever's, else where the node lives (its
        containing file and service), read in two batched steps."""
        out: dict[str, list[Path]] = {key: [paths[key]] for key in keys if key in paths and len(paths[key])}
        todo = [key for key in keys if key not in out and kind_of(key) in (NodeKind.SYMBOL, NodeKind.FILE)]
        chains: dict[str, Path] = {key: Path((key,), ()) for key in todo}
        frontier = {key: key for key in todo}  # current head -> result it belongs to
        for _ in range(3):
            if not frontier:
                break
            nxt: dict[str, str] = {}
            for edge in self.store.incident_edges(sorted(frontier), rel_types=[RelType.CONTAINS.value],
                                                  direction="in"):
                result = frontier.get(edge.origin)
                if result is None or result in nxt.values():
                    continue
                chain = chains[result]
                chains[result] = Path((edge.other,) + chain.nodes, (edge.step,) + chain.steps)
                nxt[edge.other] = result
            frontier = nxt
        for key, chain in chains.items():
            if len(chain):
                out[key] = [chain]
        return out


def _filter(kinds: set[NodeKind] | None, path_prefix: str | None):  # type: ignore[no-untyped-def]
    def keep(key: str, chunk: Chunk | None) -> bool:
        if kinds is not None and kind_of(key) not in kinds:
            return False
        if path_prefix:
            path = chunk.provenance.source_path if chunk else key.split(":", 1)[1].split("::")[0]
            return path.startswith(path_prefix)
        return True

    return keep


def _interleave(lists: Sequence[Sequence[str]], limit: int) -> list[str]:
    out: list[str] = []
    for i in range(max((len(x) for x in lists), default=0)):
        for ranking in lists:
            if i < len(ranking) and ranking[i] not in out:
                out.append(ranking[i])
    return out[:limit]


def _rank_in(ranking: list[str] | None, key: str) -> int | None:
    if not ranking:
        return None
    try:
        return ranking.index(key) + 1
    except ValueError:
        return None


def _source(node: Node | None, chunk: Chunk | None) -> dict[str, Any]:
    prov = chunk.provenance if chunk else (node.provenance if node else None)
    return {"path": prov.source_path if prov else None,
            "start_line": chunk.start_line if chunk else (node.props.get("start_line") if node else None),
            "end_line": chunk.end_line if chunk else (node.props.get("end_line") if node else None),
            "commit": prov.source_commit if prov else None}


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


__all__ = ["Answer", "Hit", "Reranker", "Retriever", "Step"]
