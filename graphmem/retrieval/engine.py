"""Answering a question: retrievers, fusion, reranking, evidence.

``Retriever.query`` runs the retrievers of the chosen recipe (``graphmem.retrieval.config``: BM25
and vectors over chunks, graph retrieval over nodes), maps chunk hits to the nodes they belong to,
fuses the node rankings (the learned ranker of ``learned.py`` with its floor, or plain reciprocal
rank fusion), reorders the head with the cross-encoder (``hybrid-rerank``), and returns
distinct nodes, each with its best passage, its provenance and the graph paths that justify it.
The same call serves the CLI, the Python API, the MCP server and the evaluation harness.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from graphmem.errors import ModelError
from graphmem.model import (FUNCTION_KINDS, REL_ENDPOINTS, Chunk, Node, NodeKind, RelType, is_declaration_key,
                            is_test_key, kind_of)
from graphmem.retrieval.config import DEFAULT_MODE, RerankConfig, RetrievalConfig, preset
from graphmem.retrieval.fusion import reciprocal_rank_fusion, rrf_k
from graphmem.retrieval.graph import UNANCHORING_KINDS, GraphResult, GraphRetriever, sorts
from graphmem.retrieval.indexes import Indexes
from graphmem.retrieval.learned import (CandidateSignals, QuestionSignals, apply_floor, demote_subjects, load_model,
                                       matrix, outside_scope_last, spread_over_files)
from graphmem.retrieval.question import Question, parse_question
from graphmem.retrieval.warm import load_models, wants_models
from graphmem.stores.base import GraphStore, Path, Step

MAX_QUESTION_CHARS = 8000  # a question, not a document: see Retriever.candidates

class Reranker(Protocol):
    name: str

    @property
    def loaded(self) -> bool: ...

    def prepare(self) -> None:
        """Load the model unless it is loaded; safe to call from several threads at once."""

    def score(self, query: str, texts: Sequence[str], policy: RerankConfig | None = None) -> Sequence[float]: ...

    def helps_for(self, answer_kinds: Iterable[str] = (), policy: RerankConfig | None = None, *,
                  relational: bool = False, passages: bool = False) -> bool: ...


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
class Candidates:
    """Per-retriever node rankings and scores, the best chunk seen for each node, and what graph
    retrieval said about the question and each node it reached (the inputs of fusion)."""

    question: Question
    rankings: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # list -> key -> raw score
    best_chunk: dict[str, Chunk] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    graph: GraphResult | None = None
    query_vec: Any = None
    # A type put in place of a method the question names ("which class has the `x` method?"): the
    # question asks for the type that holds it, a relationship a text-only reranker cannot see.
    holders: bool = False
    # The symbol kind ("class", "method", ...) of each symbol candidate, when the question asks for
    # a function, a method or a type.
    shapes: dict[str, str] = field(default_factory=dict)
    # The relationship types the project's graph holds (None: not read, as without graph retrieval).
    rel_types: frozenset[str] | None = None

    def signals(self) -> tuple[QuestionSignals, dict[str, CandidateSignals]]:
        """Fusion's view of the question and of every candidate (see ``graphmem.retrieval.learned``)."""
        q, g = self.question, self.graph
        linked = g.linked if g else {}
        qs = QuestionSignals(asks_kind=bool(q.answer_kinds), anchored=bool(g and g.anchored),
                             layer=bool(g and g.layer), named=sum(1 for lk in linked.values() if lk.named),
                             relations=frozenset(t.value for t in q.rel_types),
                             main_relations=frozenset(t.value for t in q.main_rel_types), directed=bool(q.directions),
                             words=q.words)
        directions = {t.value: end for t, end in q.directions.items()}
        answer = set(q.answer_kinds)
        out: dict[str, CandidateSignals] = {}
        for name, ranking in self.rankings.items():
            raw = self.scores.get(name, {})
            top = max((abs(v) for v in raw.values()), default=0.0) or 1.0
            for rank, key in enumerate(ranking, start=1):
                c = out.get(key)
                if c is None:
                    path = self.paths.get(key)
                    last = path.steps[-1] if path is not None and path.steps else None
                    end = directions.get(last.type) if last is not None else None
                    c = out[key] = CandidateSignals(
                        kind_match=kind_of(key) in answer, named=key in linked and linked[key].named,
                        linked=key in linked, subject=bool(g and key in g.subjects),
                        path_length=len(path) if path is not None else None,
                        path_relations=frozenset(st.type for st in path.steps) if path is not None else frozenset(),
                        last_relation=last.type if last is not None else None,
                        last_directed=bool(last is not None and end is not None
                                           and (last.src if end == "src" else last.dst) == key),
                        bridged=bool(g and key in g.bridged), shape=_shape(q, self.shapes.get(key)))
                c.ranks[name] = rank
                c.scores[name] = raw.get(key, 0.0) / top if name != "vector" else raw.get(key, 0.0)
        return qs, out


def _shape(q: Question, symbol_kind: str | None) -> int:
    """+1 for a function or method when the question asks for one, -1 for a symbol of another
    kind (a type), 0 when the question asks for no callable or the candidate is no symbol. (For
    "which class ..." the methods found stand in for their types, see ``_lift_methods``.)"""
    if symbol_kind is None or not q.asks_callable:
        return 0
    return 1 if symbol_kind in FUNCTION_KINDS else -1


class Retriever:
    """Question answering over one project's graph and indexes."""

    def __init__(self, store: GraphStore, indexes: Indexes, *, reranker: Reranker | None = None,
                 rrf_constant: float | None = None, now: datetime | None = None,
                 config: RetrievalConfig | None = None) -> None:
        self.store = store
        self.indexes = indexes
        self.reranker = reranker
        self.rrf_k = rrf_k() if rrf_constant is None else rrf_constant
        self.now = now
        self._graphs: list[tuple[tuple[Any, ...], GraphRetriever]] = []
        # The graph retriever is wired once per linking, walk and layer setting (a swept recipe may
        # change them), with the embedder provider (loaded on first use).
        self.graph = self.graph_for(config or preset(DEFAULT_MODE))

    def start_models(self, text: str, mode: str | RetrievalConfig = DEFAULT_MODE) -> None:
        """Start loading, on another thread, the models a new process's first question ``text``
        will use that are not loaded or loading yet (see ``graphmem.retrieval.warm``)."""
        spec = preset(mode)
        if wants_models(self.indexes, self.reranker, spec):
            _side_pool().submit(load_models, lambda: self.indexes, lambda: self.reranker, text, spec, self.now)

    def graph_for(self, spec: RetrievalConfig) -> GraphRetriever:
        """The graph retriever of ``spec``'s linking, walk and entity-layer settings."""
        key = (spec.link, spec.walk, spec.layer)  # compared, not hashed: settings may hold mappings
        for known, graph in self._graphs:
            if known == key:
                return graph
        graph = GraphRetriever(self.store, embedder=lambda: self.indexes.embedder, cache_dir=self.indexes.cache_dir,
                               link_config=spec.link, walk_config=spec.walk, layer_config=spec.layer)
        self._graphs.append((key, graph))
        return graph

    def query(self, text: str, *, mode: str | RetrievalConfig = DEFAULT_MODE, k: int = 10,
              kinds: Iterable[str] | None = None, path_prefix: str | None = None, now: datetime | None = None,
              as_of: str | None = None) -> Answer:
        """Answer ``text`` with the ``mode`` recipe; ``kinds`` and ``path_prefix`` filter results."""
        started = time.perf_counter()
        spec = preset(mode)
        if k < 1:
            raise ModelError("k must be at least 1")
        timings = {"bm25": 0.0, "vector": 0.0, "graph": 0.0, "fusion": 0.0, "rerank": 0.0}
        self.start_models(text, spec)
        cands = self.candidates(text, spec, kinds=kinds, path_prefix=path_prefix, now=now, as_of=as_of,
                                timings=timings)
        question = cands.question
        answer = Answer(query=text.strip(), mode=spec.name, analysis=question.as_dict())
        if cands.graph is not None:
            answer.analysis["linked"] = cands.graph.messages()
        t = time.perf_counter()
        fused = self.fuse(spec, cands)
        timings["fusion"] = _ms(t)
        head = fused[: max(k, spec.rerank.depth if spec.rerank.enabled else k)]
        keys = [key for key, _ in head]
        # Without reranking the results are known now: their evidence (up to four reads of a
        # store) is read beside their nodes, as are the passages of nodes no list brought one for.
        releases = cands.rel_types is None or RelType.RELEASED_IN.value in cands.rel_types
        early = None if spec.rerank.enabled else _side_pool().submit(self._evidence, keys, cands.paths, releases)
        missing = [key for key in keys if key not in cands.best_chunk]
        first = _side_pool().submit(self.store.get_chunks, missing) if missing else None
        nodes = self.store.get_nodes(keys)
        texts = self._passages(keys, cands, nodes, first.result() if first is not None else [])
        if spec.rerank.enabled:
            t = time.perf_counter()
            if self.reranker is None:
                answer.notes.append("no reranker is available: results are in fused order "
                                    "(train one with `graphmem reranker train`, or the machine's with "
                                    "`graphmem reranker build-general`)")
            elif not self.reranker.helps_for([kd.value for kd in question.answer_kinds], spec.rerank,
                                             relational=question.relational or cands.holders,
                                             passages=self._prose(cands, keys, spec.rerank)):
                # hybrid-rerank reranks only where held-out questions saw it help (the project's model:
                # per answer kind; the general one: questions that ask for no relationship, over code).
                answer.notes.append("the reranker is not used for questions like this one (it did not beat the "
                                    "fused order on held-out questions of their kind): results are in fused order")
            else:
                scores = self.reranker.score(answer.query, [texts[key] for key, _ in head], spec.rerank)
                head = [(key, float(sc)) for (key, _), sc in sorted(zip(head, scores), key=lambda p: -p[1])]
                if spec.fusion.scope_last:  # the reranker orders the answers within the question's scope
                    dealt = [score for _, score in head]  # in falling order, dealt out again as in ``fuse``
                    head = list(zip(_scoped([key for key, _ in head], cands), dealt))
            timings["rerank"] = _ms(t)
        head = head[:k]
        evidence = (early.result() if early is not None
                    else self._evidence([key for key, _ in head], cands.paths, releases))
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

    def candidates(self, text: str, spec: RetrievalConfig, *, kinds: Iterable[str] | None = None,
                   path_prefix: str | None = None, now: datetime | None = None, as_of: str | None = None,
                   timings: dict[str, float] | None = None) -> Candidates:
        """Run the recipe's retrievers: node rankings with scores, and what graph retrieval found."""
        timings = timings if timings is not None else {}
        text = text.strip()
        if not text:
            raise ModelError("empty question")
        if len(text) > MAX_QUESTION_CHARS:
            # Every retriever and the reranker read the whole question: a pasted file would take
            # minutes and gigabytes to answer, and answer nothing better than its gist would.
            raise ModelError(f"question too long: {len(text)} characters (at most {MAX_QUESTION_CHARS}); "
                             "ask about the part that matters")
        depth = spec.candidates
        wanted = {NodeKind(x) for x in kinds} if kinds else None
        keep = _filter(wanted, path_prefix)
        chunk_hits: dict[str, list[tuple[int, float]]] = {}
        # A filter narrows each retriever's own search: fetch deeper so the filtered lists stay full.
        fetch = depth.chunk_candidates * (4 if (wanted or path_prefix) else 1)
        runs = spec.searches
        # Only the graph list and fusion read the question, and the graph retriever's catalog says
        # whether the project holds agent sessions: checked against the store once per question,
        # beside the searches (which do not read the question).
        graph = self.graph_for(spec) if "graph" in spec.retrievers else None
        checked = _side_pool().submit(graph.refresh) if graph is not None else None
        # Indexes served by a database answer BM25 there while this thread embeds the question.
        lexical = (_side_pool().submit(_timed, _search, self.indexes.bm25, text, fetch)
                   if "bm25" in runs and "vector" in runs and getattr(self.indexes, "remote", False) else None)
        query_vec = None
        found: dict[int, Chunk] = {}  # chunks an index sent with its hits
        if "bm25" in runs and lexical is None:
            t = time.perf_counter()
            chunk_hits["bm25"], sent = _search(self.indexes.bm25, text, fetch)
            found.update(sent)
            timings["bm25"] = _ms(t)
        if "vector" in runs:
            t = time.perf_counter()
            query_vec = self.indexes.embedder.encode_query(text)
            chunk_hits["vector"], sent = _search(self.indexes.vectors, query_vec, fetch)
            found.update(sent)
            timings["vector"] = _ms(t)
        if lexical is not None:
            (chunk_hits["bm25"], sent), timings["bm25"] = lexical.result()
            found.update(sent)
        built = checked.result() if checked is not None else None
        sessions = built is not None and bool(built.catalog.by_kind.get(NodeKind.SESSION))
        question = parse_question(text, now or self.now or datetime.now(timezone.utc), sessions=sessions)
        if built is not None and question.answer_kinds:
            # A kind the project holds none of ("when was the law changed" over passages, no
            # commits; "which release" where no tags make releases) asks for nothing the graph can
            # give: the question is read as asking the others, or no kind.
            question.answer_kinds = tuple(kind for kind in question.answer_kinds if built.catalog.by_kind.get(kind))
        if built is not None and built.catalog.rel_types is not None:
            # Likewise a relationship it holds none of ("what caused …" over code without incidents,
            # "which code depends on X" where dependencies join services only) leads nowhere.
            # Bases declared outside the project ("class X(Exception)") are inheritance the catalog
            # knows without an edge.
            inherits = {RelType.INHERITS.value} if built.catalog.implementers else set()
            question.keep_relationships(built.catalog.rel_types | inherits)
        if wanted:
            # The kinds asked for by filter are the answer's: the walk ranks them (it keeps entities,
            # say, only when they are asked for) instead of losing them to the filter afterwards.
            question.answer_kinds = (tuple(k for k in question.answer_kinds if k in wanted)
                                     or tuple(sorted(wanted, key=lambda k: k.value)))
        cands = Candidates(question, query_vec=query_vec,
                           rel_types=built.catalog.rel_types if built is not None else None)
        t = time.perf_counter()
        wanted_ids = {cid for hits in chunk_hits.values() for cid, _ in hits}
        chunks = {cid: found[cid] for cid in wanted_ids if cid in found}
        if len(chunks) < len(wanted_ids):
            chunks.update(self.store.get_chunks_by_id(wanted_ids - chunks.keys()))
        if as_of is not None:  # the text indexes hold today's chunks: keep those whose node held then
            held = {key for key, node in self.store.get_nodes({c.node_key for c in chunks.values()}).items()
                    if node.valid_at(as_of)}
            chunks = {cid: c for cid, c in chunks.items() if c.node_key in held}
        for name, hits in chunk_hits.items():
            ranking: list[str] = []
            scores: dict[str, float] = {}
            for cid, score in hits:
                chunk = chunks.get(cid)
                if chunk is None or chunk.node_key in scores or not keep(chunk.node_key, chunk):
                    continue
                ranking.append(chunk.node_key)
                scores[chunk.node_key] = float(score)
                cands.best_chunk.setdefault(chunk.node_key, chunk)
                if len(ranking) >= depth.node_candidates:
                    break
            cands.rankings[name] = ranking
            cands.scores[name] = scores
        lookup_ms = _ms(t)
        for name in chunk_hits:
            timings[name] = timings.get(name, 0.0) + lookup_ms / len(chunk_hits)
        if graph is not None:
            t = time.perf_counter()
            seeds = _interleave([cands.rankings.get("bm25", []), cands.rankings.get("vector", [])],
                                depth.lexical_seeds)
            result = graph.retrieve(question, lexical_seeds=seeds, k=depth.node_candidates * 2, as_of=as_of,
                                    query_vec=cands.query_vec, built=built)
            hits = [h for h in result.hits if keep(h.key, None)]
            if as_of is not None:  # a node the question names is a seed even where it did not exist yet
                held = {key for key, node in self.store.get_nodes({h.key for h in hits}).items() if node.valid_at(as_of)}
                hits = [h for h in hits if h.key in held]
            hits = hits[:depth.node_candidates]
            cands.rankings["graph"] = [h.key for h in hits]
            cands.scores["graph"] = {h.key: h.score for h in hits}
            cands.paths = {h.key: h.path for h in result.hits}
            cands.graph = result
            timings["graph"] = _ms(t)
        if question.asks_type:
            self._lift_methods(cands, keep)
        if cands.graph is not None and cands.graph.sort:
            _lift_holders(cands, keep)
        if question.asks_callable or question.asks_type:
            symbols = sorted({key for ranking in cands.rankings.values() for key in ranking if key.startswith("sym:")})
            cands.shapes = {key: str(node.props.get("symbol_kind", "")) for key, node in
                            self.store.get_nodes(symbols).items()} if symbols else {}
        return cands

    def _lift_methods(self, cands: Candidates, keep: Any) -> None:
        """For "which class has method m": each method found brings the type that holds it into
        the same list (the type is the answer; the method is the evidence): in the method's place
        when the question names the method, else right after it (a method found for its words
        may be the answer itself)."""
        wanted = {key.rsplit(".", 1)[0] for ranking in cands.rankings.values() for key in ranking
                  if key.startswith("sym:") and "." in key.split("::", 1)[1]}
        nodes = self.store.get_nodes(sorted(wanted)) if wanted else {}
        present = {key for key, node in nodes.items() if node.props.get("symbol_kind") not in FUNCTION_KINDS}
        named = {key for key, why in cands.graph.linked.items() if why.named} if cands.graph is not None else set()

        def owner_type(key: str) -> str | None:
            owner = key.rsplit(".", 1)[0] if key.startswith("sym:") and "." in key.split("::", 1)[1] else None
            return owner if owner in present else None

        if _bring_holders(cands, owner_type, keep, before=named):
            cands.holders = True

    def fuse(self, spec: RetrievalConfig, cands: Candidates) -> list[tuple[str, float]]:
        """One ranked list of (key, score) from the recipe's lists: plain (weighted) reciprocal rank
        fusion, or the learned ranker with its floor."""
        lists = {r: cands.rankings.get(r, []) for r in spec.retrievers}
        fusion = spec.fusion
        if len(lists) == 1:
            ranking = next(iter(lists.values()))
            return [(key, 1.0 / (self.rrf_k + rank)) for rank, key in enumerate(ranking, start=1)]
        if fusion.method == "rrf":
            return reciprocal_rank_fusion(lists, fusion.weights, fusion.rrf_k)
        model = load_model(fusion.model)
        qs, signals = cands.signals()
        keys = sorted(k for k in signals if any(k in lst for lst in lists.values()))
        if not keys:
            return []
        scores = model.score(matrix(qs, keys, signals), "layer" if qs.layer else "walk")
        by_key = dict(zip(keys, scores.tolist()))
        order = sorted(keys, key=lambda key: (-by_key[key], key))
        order = demote_subjects(order, {key for key in keys if signals[key].subject}, fusion.subject_rank)
        order = apply_floor(order, lists, fusion.floor_top, fusion.floor_rank)
        if fusion.scope_last:
            order = _scoped(order, cands)
        if not cands.question.answer_kinds:
            order = spread_over_files(order, fusion.file_spread, fusion.spread_window)
        # The rules above move some keys past others: the model's scores are dealt out again in the
        # final order, so a higher score still means a higher place.
        dealt = sorted((by_key[key] for key in order), reverse=True)
        return [(key, float(score)) for key, score in zip(order, dealt)]

    @staticmethod
    def _prose(cands: Candidates, head: Sequence[str], rules: RerankConfig) -> bool:
        """Whether the graph list was ranked over the entity layer and more than ``rules``' share of
        ``head`` are documents' passages or extracted entities (prose), not code or records."""
        if not (cands.graph and cands.graph.layer and head):
            return False
        return sum(kind_of(key) in UNANCHORING_KINDS for key in head) / len(head) > rules.general_prose_share

    def _passages(self, keys: list[str], cands: Candidates, nodes: dict[str, Node],
                  chunks: list[Chunk]) -> dict[str, str]:
        """The text that stands for each node: its best-ranked chunk, else its first chunk (of
        ``chunks``, those of the nodes without a best one, in order), else its name."""
        for chunk in chunks:
            cands.best_chunk.setdefault(chunk.node_key, chunk)
        out = {}
        for key in keys:
            best = cands.best_chunk.get(key)
            node = nodes.get(key)
            out[key] = best.text if best else (f"{node.name} ({key})" if node else key)
        return out

    def _evidence(self, keys: list[str], paths: dict[str, Path], releases: bool = True) -> dict[str, list[Path]]:
        """Graph paths for each result: the graph retriever's, else where the node lives (its
        containing file and service), read a level at a time. Only the kinds a relationship
        CONTAINS may end at are looked up (the model refuses any other), so a chain that reached
        its service costs no further read. With ``releases`` (the project may hold some), a commit
        also shows the release that shipped it, one read for all commits."""
        contained = REL_ENDPOINTS[RelType.CONTAINS][1]
        out: dict[str, list[Path]] = {key: [paths[key]] for key in keys if key in paths and len(paths[key])}
        todo = [key for key in keys if key not in out and kind_of(key) in contained]
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
            frontier = {key: result for key, result in nxt.items() if kind_of(key) in contained}
        for key, chain in chains.items():
            if len(chain):
                out[key] = [chain]
        commits = [key for key in keys if releases and kind_of(key) is NodeKind.COMMIT]
        if commits:
            for edge in self.store.incident_edges(commits, rel_types=[RelType.RELEASED_IN.value], direction="out"):
                out.setdefault(edge.origin, []).append(Path((edge.origin, edge.other), (edge.step,)))
        return out


# Kinds of node no "where is ..." question asks for: events and people, not places.
_NO_PLACES = frozenset({NodeKind.COMMIT, NodeKind.RELEASE, NodeKind.PERSON, NodeKind.TEAM, NodeKind.SESSION})
_CODE = frozenset({NodeKind.SYMBOL, NodeKind.FILE})


def _scoped(order: list[str], cands: Candidates) -> list[str]:
    """``order`` with what lies outside the question's scope moved after the rest, each part in its
    order:

    - code outside the packages it places its answer in; code that is not test code when it asks
      for tests, and test code when it asks for code, or where something is, and speaks of no
      tests;
    - functions and methods after the types when it opens by asking for a type ("which class
      ..."), among the places the symbols held; files after the rest when it opens by asking for
      functions (a file's module-level code is no function);
    - what is no member of the type whose members it asks for ("which methods of Client ...");
    - what is not of the sort of thing it asks for by name ("which middleware ...");
    - what is not code when it asks where something is (documents first when it speaks of
      documentation), and what is no document when it asks for one ("which guide ...");
    - commits, releases and people when it asks where or how something is done, or names code and
      asks for nothing (no kind, no relationship, no history, no time);
    - the changelogs when it asks nothing of the project's history;
    - a declaration file's symbol when the definition it declares is in ``order`` too.

    When it counts a relationship ("imported by the most files"), the code counted comes first."""
    g = cands.graph
    if g is None:
        return order
    q = cands.question
    order = outside_scope_last(order, g.outside, g.inside, q.asks_tests,
                               bool(q.answer_kinds) and set(q.answer_kinds) <= _CODE)
    if not q.mentions_tests and ((q.answer_kinds and set(q.answer_kinds) <= _CODE) or q.asks_place):
        # "Which function builds the multipart body?", "what calls X?", "where is the cookie
        # signed?": the project's code, its tests only after it (unless the question speaks of tests).
        order = _last(order, is_test_key)
    if q.asks_type and not q.asks_callable and q.opens_asking:
        # "Which class cleans untrusted HTML?": the classes, then the methods that stand for them,
        # in the places the symbols held (a file or a person keeps its own).
        places = [i for i, key in enumerate(order) if key in cands.shapes]
        symbols = _last([order[i] for i in places], lambda key: cands.shapes[key] in FUNCTION_KINDS)
        order = list(order)
        for i, key in zip(places, symbols):
            order[i] = key
    if q.asks_callable and q.opens_asking:
        order = _last(order, lambda key: key.startswith("file:"))  # "which functions ...": a file is none
    if g.owners:
        order = _last(order, lambda key: not any(key.startswith(owner + ".") for owner in g.owners))
    if g.sort:
        order = _last(order, lambda key: key not in g.sort)
    if q.asks_place:
        # Code first (documents, when the question speaks of documentation), then the other places.
        wanted = {NodeKind.DOCUMENT} if q.asks_docs else _CODE
        order = _last(order, lambda key: kind_of(key) not in wanted)
    if q.answer_kinds == (NodeKind.DOCUMENT,):
        # "Which document explains authentication?": the documents, then the rest.
        order = _last(order, lambda key: kind_of(key) is not NodeKind.DOCUMENT)
    plain = not (q.answer_kinds or q.about_history or q.relational or q.time.active)
    if q.asks_place or (q.asks_way and not q.about_history) or (plain and any(key.startswith("sym:") for key in g.linked)):
        order = _last(order, lambda key: kind_of(key) in _NO_PLACES)  # "what does X return?" asks of code
    if g.records:
        order = _last(order, lambda key: key in g.records)
    order = declarations_after_definitions(order)
    if g.counted:
        # "Which module is imported by the most files?": a count answers it, not the words.
        rank = {key: i for i, key in enumerate(g.counted)}
        order = sorted((key for key in order if key in rank), key=rank.__getitem__) + [
            key for key in order if key not in rank]
    return order


def declarations_after_definitions(order: list[str]) -> list[str]:
    """``order`` with each symbol of a declaration file (``typings/index.d.ts::Command.parse``)
    after the rest when the symbol it declares (``lib/command.js::Command.parse``) is in ``order``
    too: the code that does the work stands for its signature."""
    if not any(is_declaration_key(key) for key in order):
        return order
    defined = {key.partition("::")[2] for key in order if key.startswith("sym:") and not is_declaration_key(key)}
    return _last(order, lambda key: is_declaration_key(key) and key.partition("::")[2] in defined)


def _last(order: list[str], away: Callable[[str], bool]) -> list[str]:
    """``order`` with the keys ``away`` holds for moved after the others, each part in its order."""
    return [key for key in order if not away(key)] + [key for key in order if away(key)]


def _lift_holders(cands: Candidates, keep: Any) -> None:
    """For "which middleware compresses responses": each piece of code a list found brings, right
    after it, the type of the asked sort that holds it (its class, or the one such type in its file:
    see ``graphmem.retrieval.graph.sorts``)."""
    assert cands.graph is not None
    members = cands.graph.sort
    places = sorts.by_path(members)
    _bring_holders(cands, lambda key: None if key in members else sorts.holder_of(key, members, places), keep)


def _bring_holders(cands: Candidates, holder_of: Callable[[str], str | None], keep: Any,
                   before: Collection[str] = ()) -> bool:
    """Each key of every list brings ``holder_of(key)`` into the same list, with the key's score:
    right after it, or in its place for a key in ``before`` (the key follows). A holder already
    placed stays where it is, and each list keeps its length. Whether a holder took a key's place."""
    placed_before = False
    for name, ranking in cands.rankings.items():
        lifted: list[str] = []
        scores = cands.scores.get(name)
        for key in ranking:
            holder = holder_of(key)
            lift = holder is not None and holder not in lifted and keep(holder, None)
            if lift and key in before:
                lifted.append(holder)
                placed_before = True
            if key not in lifted:
                lifted.append(key)
            if lift and holder not in lifted:
                lifted.append(holder)
            if lift and scores is not None and holder not in scores:
                scores[holder] = scores.get(key, 0.0)
        cands.rankings[name] = lifted[:len(ranking)]
    return placed_before


def _filter(kinds: set[NodeKind] | None, path_prefix: str | None):  # type: ignore[no-untyped-def]
    def keep(key: str, chunk: Chunk | None) -> bool:
        if kinds is not None and kind_of(key) not in kinds:
            return False
        if path_prefix:
            path = chunk.provenance.source_path if chunk else key.split(":", 1)[1].split("::")[0]
            return path.startswith(path_prefix)
        return True

    return keep


def _search(index: Any, query: Any, k: int) -> tuple[list[tuple[int, float]], dict[int, Chunk]]:
    """An index's ``(chunk id, score)`` hits, and the hits' chunks where the index sends them
    along (one served by a database, ``search_chunks``: no separate read of the chunks)."""
    with_chunks = getattr(index, "search_chunks", None)
    if with_chunks is None:
        return index.search(query, k), {}
    pairs = with_chunks(query, k)
    return [(c.id, score) for c, score in pairs], {c.id: c for c, _ in pairs}


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


_SIDE_POOL: ThreadPoolExecutor | None = None
_SIDE_POOL_LOCK = threading.Lock()


def _side_pool() -> ThreadPoolExecutor:
    """Threads for reads that overlap a question's other work (created on first use)."""
    global _SIDE_POOL
    with _SIDE_POOL_LOCK:
        if _SIDE_POOL is None:
            _SIDE_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="graphmem-retrieval")
        return _SIDE_POOL


def _timed(search: Any, *args: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    return search(*args), _ms(t)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


__all__ = ["Answer", "Candidates", "Hit", "Reranker", "Retriever", "Step"]
