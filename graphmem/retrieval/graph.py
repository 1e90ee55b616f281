"""Graph retrieval: link the question to nodes, expand through typed relationships, rank by a
personalised PageRank whose relationship weights follow what the question asks.

1. **Link.** Identifiers (``ADR-5``, ``INC-042``, ticket ids, commit shas), names of services, teams,
   people, files and symbols, titles of decisions and incidents (exact, or most of their words), and kinds the
   question names with a time ("an incident in the last month", "the latest incident") become seeds.
   The best lexical and vector hits join as weaker seeds.
2. **Expand** breadth-first from the seeds through the store's typed relationships (the same
   ``expand`` step on both stores; ``cypher/retrieval/expand.cypher`` on Neo4j), dropping dated
   nodes (commits, incidents, decisions) outside the question's time window.
3. **Rank** the reached nodes by personalised PageRank from the seeds over the reached subgraph, each
   relationship weighted by its type: the types the question names weigh more. Nodes of the kind
   the question asks for come first. Each hit keeps the path by which the expansion reached it.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path as FsPath
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from graphmem.model import Node, NodeKind, RelType
from graphmem.retrieval.question import Question
from graphmem.stores.base import Edge, GraphStore, Hub, Path, Step

if TYPE_CHECKING:
    from graphmem.retrieval.embed import Embedder

# How much each relationship type carries in PageRank before the question's emphasis.
BASE_WEIGHTS: dict[str, float] = {
    RelType.CONTAINS.value: 0.6, RelType.IMPORTS.value: 0.5, RelType.CALLS.value: 1.0,
    RelType.INHERITS.value: 0.6, RelType.DEPENDS_ON.value: 1.0, RelType.OWNS.value: 0.8,
    RelType.MEMBER_OF.value: 0.5, RelType.AUTHORED.value: 0.6, RelType.PARENT.value: 0.05,
    RelType.CHANGED.value: 0.4, RelType.MODIFIED.value: 0.8, RelType.REFERENCES.value: 0.8,
    RelType.FIXES.value: 1.0, RelType.SUPERSEDES.value: 1.0, RelType.DECIDED.value: 0.6,
    RelType.MENTIONS.value: 0.4, RelType.AFFECTED.value: 1.0, RelType.CAUSED_BY.value: 1.0,
    RelType.RESOLVED_BY.value: 1.0, RelType.IMPLEMENTS.value: 1.0, RelType.RELATED_TO.value: 0.7,
}
# A relationship type the question names weighs this many times more.
EMPHASIS = 6.0
DAMPING = 0.75
PPR_ITERATIONS = 40
LEXICAL_SEED_WEIGHT = 0.35
ANCHORED_LEXICAL_SEED_WEIGHT = 0.02
DESCRIBED_SEED_WEIGHT = 0.6
OFF_KIND_FACTOR = 0.1
LATEST_CHANGE_BOOST = 5.0
STEPPED_FROM_WEIGHT = 0.2
UNANCHORING_KINDS = frozenset({NodeKind.ENTITY, NodeKind.DOCUMENT})  # what a relative clause steps away from stays a weak seed
AGAINST_DIRECTION = 0.25  # weight of a directed relationship walked away from the answer's end
MAX_DEPTH = 4
MAX_NODES = 2500
DEEP_LIMIT = 400  # the fourth hop is taken only when three reached fewer nodes than this
HUB_DEGREE = 60  # past this many relationships a node is a hub (see stores.base.Hub)
HUB_TYPE_LIMIT = 15
FUZZY_MIN_LENGTH = 5
FUZZY_CUTOFF = 88.0  # rapidfuzz ratio: one or two typos in a word of 6-12 letters
FUZZY_KINDS = frozenset({NodeKind.SERVICE, NodeKind.TEAM, NodeKind.PERSON, NodeKind.ENTITY})
EMBEDDED_NAME_KINDS = (NodeKind.SERVICE, NodeKind.TEAM, NodeKind.DECISION, NodeKind.INCIDENT, NodeKind.ENTITY)
NAME_SIMILARITY = 0.55  # cosine of MiniLM vectors: clearly about the same thing
NAME_MATCHES = 3
MAX_NAME_WORDS = 8  # longest word sequence looked up as a name ("God's Gift to Women" is 5 words)
# The entity layer (see ``EntityLayer``): HippoRAG-style ranking of passages for questions that name
# only extracted entities and passages.
LAYER_REL_TYPES = (RelType.MENTIONS.value, RelType.RELATED_TO.value)
LAYER_DAMPING = 0.85  # long walks: the passages two or three names away are the second and third hops
# An extracted relation between two entities, against a mention: a stated fact ("Hank Snow moved
# to Nashville") says more about how two names connect than their sharing a passage. Measured on the
# MuSiQue sample with synonymy edges: graph R@5 0.739 at 1.0, 0.743-0.746 from 1.5 to 3.
LAYER_RELATED_WEIGHT = 2.0
LAYER_LEXICAL_SEED_WEIGHT = 0.05  # the best lexical and vector passages, against one named entity
LAYER_DOC_SEED_WEIGHT = 1.0  # a passage whose title the question spells
LAYER_SPECIFICITY_POWER = 1.0  # an entity mentioned by n passages weighs n ** -power
LAYER_FACTS = 3  # facts (subject-predicate-object) nearest the question whose ends seed the walk
LAYER_FACT_SIMILARITY = 0.5
LAYER_FACT_SEED_WEIGHT = 1.0
LAYER_BATCH = 5000  # entity keys per store read while building the layer
# Synonymy edges (HippoRAG): entities whose names embed close together ("Hank Snow" and "Clarence
# Eugene Hank Snow") are joined, so a walk crosses between passages that spell one thing differently.
# On the MuSiQue sample: graph R@5 0.726 -> 0.739 (OpenIE graph), 0.724 -> 0.728 (rule graph).
LAYER_SYNONYM_SIMILARITY = 0.8  # cosine of MiniLM name vectors (0.75-0.85 measure alike)
LAYER_SYNONYMS = 10  # nearest names per entity considered
LAYER_SYNONYM_WEIGHT = 1.0  # a synonymy edge, against a mention
LAYER_SYNONYM_BLOCK = 2048  # entities per block of the all-pairs similarity
SYNONYM_STEP = "SIMILAR_NAME"  # the step type of a synonymy edge on an evidence path (not stored)
# Entity types that say nothing about what an entity is (open extraction, capitalised spans).
GENERIC_ENTITY_TYPES = frozenset({"concept", "entity", "other", "unknown", "misc", "thing"})

_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*[A-Za-z0-9_]|[A-Za-z0-9]")
_IDENT_LIKE = re.compile(r"[a-z][A-Z]|_|\.|\(\)")
_STOP = frozenset(["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "is", "are", "was", "were", "be", "been", "that", "which", "what", "who", "whom", "whose", "how", "why", "when", "where", "did", "do", "does", "has", "have", "had", "it", "its", "this", "these", "those", "all", "any", "me", "show", "list", "find"])


def node_date(node: Node) -> str | None:
    """When a dated node happened: an incident's start, a commit's time, a decision's date (ISO)."""
    p = node.props
    names = {NodeKind.INCIDENT: ("started_at", "date"), NodeKind.COMMIT: ("committed_at", "authored_at"),
             NodeKind.DECISION: ("date",)}.get(node.kind, ())
    for name in names:
        value = p.get(name)
        if isinstance(value, str) and value:
            return f"{value}T00:00:00.000000Z" if len(value) == 10 else value
    return None


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@dataclass(slots=True)
class Catalog:
    """Names of the project's open nodes, for linking a question to them."""

    nodes: dict[str, tuple[NodeKind, str, str | None]] = field(default_factory=dict)  # key -> kind, name, date
    by_name: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    by_kind: dict[NodeKind, list[str]] = field(default_factory=dict)
    incidents_by_number: dict[int, str] = field(default_factory=dict)
    titles: list[tuple[str, set[str]]] = field(default_factory=list)  # title words, for fuzzy matching
    fuzzy_names: list[str] = field(default_factory=list)  # one-word names that misspellings may mean

    @classmethod
    def build(cls, store: GraphStore) -> Catalog:
        cat = cls()
        for node in store.iter_nodes():
            cat.nodes[node.key] = (node.kind, node.name, node_date(node))
            cat.by_kind.setdefault(node.kind, []).append(node.key)
            for name in cat._names(node):
                words = tuple(_singular(w) for w in _words(name))
                if words:
                    cat.by_name.setdefault(words, set()).add(node.key)
            if node.kind is NodeKind.INCIDENT:
                m = re.search(r"(\d+)$", node.key)
                if m:
                    cat.incidents_by_number[int(m.group(1))] = node.key
            if node.kind in (NodeKind.DECISION, NodeKind.INCIDENT) and node.name:
                cat.titles.append((node.key, {_singular(w) for w in _words(node.name)} - _STOP))
        cat.fuzzy_names = sorted({words[0] for words, keys in cat.by_name.items()
                                  if len(words) == 1 and len(words[0]) >= FUZZY_MIN_LENGTH
                                  and any(cat.nodes[k][0] in FUZZY_KINDS for k in keys)})
        return cat

    @staticmethod
    def _names(node: Node) -> list[str]:
        aliases = node.props.get("aliases")
        # Other spellings of the same thing (merged duplicates, "Postgres" for PostgreSQL).
        extra = [a for a in aliases if isinstance(a, str)] if isinstance(aliases, list) else []
        return Catalog._own_names(node) + extra

    @staticmethod
    def _own_names(node: Node) -> list[str]:
        kind, name = node.kind, node.name or ""
        if kind in (NodeKind.SERVICE, NodeKind.TEAM, NodeKind.TICKET, NodeKind.ENTITY):
            return [name]
        if kind is NodeKind.PERSON:
            email = str(node.props.get("email") or "")
            return [name, email, email.split("@")[0]] if email else [name]
        if kind is NodeKind.FILE:
            path = node.key[5:]
            return [path, path.rsplit("/", 1)[-1]]
        if kind is NodeKind.SYMBOL:
            qual = str(node.props.get("qualname") or name)
            last = qual.rsplit(".", 1)[-1]
            # Short or common last parts ("get", "main", "__init__") would link to everything.
            return [qual] + ([last] if len(last) >= 5 and not last.startswith("_") and last != qual else [])
        if kind is NodeKind.DECISION:
            return [f"ADR-{node.props.get('number')}", name]
        if kind is NodeKind.INCIDENT:
            return [node.key.split(":", 1)[1], name]
        return [name]


@dataclass(slots=True)
class GraphHit:
    key: str
    score: float
    path: Path


@dataclass(slots=True)
class GraphResult:
    hits: list[GraphHit]
    seeds: dict[str, float]
    linked: dict[str, str]  # key -> why it was linked
    anchored: bool = False  # started from organisation nodes the question names (not only entities)
    named: bool = False  # started from anything the question names (passages and entities too)
    reached: int = 0
    subjects: set[str] = field(default_factory=set)  # named nodes of the asked kind the question is about
    layer: bool = False  # ranked over the entity layer (passages by the PageRank of their entities)


@dataclass(slots=True)
class EntityLayer:
    """Extracted entities, the nodes that mention them and the relations between them, as one
    weighted graph held in memory (rebuilt with the catalog).

    Used for questions that name only entities and passages (multi-hop questions over a corpus of
    prose): a personalised PageRank from the named entities over the whole layer ranks passages by
    the mass that reaches them, as HippoRAG does. An entity mentioned by many passages counts less:
    every relationship of an entity mentioned by ``n`` passages weighs ``1 / n`` (its specificity),
    so a walk leaves a passage through its rare names rather than through "United States" - where
    breadth-first expansion would have to cut such hubs off, the layer keeps them but weighs them low.
    """

    keys: list[str]
    index: dict[str, int]
    transposed: sp.csr_matrix  # transition matrix, transposed (columns sum to 1 where a node has edges)
    adjacency: sp.csr_matrix  # symmetric step costs, for evidence paths
    steps: dict[tuple[int, int], Step]
    specificity: np.ndarray  # 1 / passages mentioning the node for entities, 1 for other nodes
    entity: np.ndarray  # bool: the node is an extracted entity
    facts: list[tuple[str, str, str]] = field(default_factory=list)  # (src, predicate, dst) of RELATED_TO

    @staticmethod
    def read(store: GraphStore, entity_keys: Sequence[str],
             ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
        """The layer's relationships (identities) touching these entities, and the facts among
        them: (src, predicate, dst) of every RELATED_TO predicate."""
        edges: dict[tuple[str, str, str], None] = {}
        facts: dict[tuple[str, str, str], None] = {}
        wanted = set(LAYER_REL_TYPES)
        for i in range(0, len(entity_keys), LAYER_BATCH):
            for r in store.get_relationships(entity_keys[i:i + LAYER_BATCH]):
                if r.type._value_ not in wanted:
                    continue
                edges[r.ident] = None
                predicate = r.props.get("predicate")
                if r.type is RelType.RELATED_TO and isinstance(predicate, str) and predicate != "names":
                    for p in predicate.split(" | "):
                        facts[(r.src, p, r.dst)] = None
        return list(edges), list(facts)

    @classmethod
    def build(cls, edges: Sequence[tuple[str, str, str]], facts: Sequence[tuple[str, str, str]],
              synonyms: Sequence[tuple[str, str, float]] = ()) -> EntityLayer | None:
        """The layer over what :meth:`read` returned; ``None`` when nothing mentions or relates the
        entities. ``synonyms``: (entity, entity, similarity) pairs of names that likely mean one thing."""
        if not edges:
            return None
        keys = sorted({k for src, _, dst in edges for k in (src, dst)})
        index = {k: i for i, k in enumerate(keys)}
        is_entity = np.array([k.startswith("entity:") for k in keys])
        mentions = np.zeros(len(keys))
        for src, typ, dst in edges:
            if typ == RelType.MENTIONS.value:
                mentions[index[dst]] += 1
        specificity = np.where(is_entity, np.maximum(mentions, 1.0) ** -LAYER_SPECIFICITY_POWER, 1.0)
        rows, cols, vals, steps = [], [], [], {}
        for src, typ, dst in edges:
            a, b = index[src], index[dst]
            if a == b:
                continue
            w = min(specificity[a], specificity[b])
            if typ == RelType.RELATED_TO.value:
                w *= LAYER_RELATED_WEIGHT
            rows += [a, b]
            cols += [b, a]
            vals += [w, w]
            steps[(a, b)] = steps[(b, a)] = Step(src, typ, dst)
        for src, dst, sim in synonyms:
            a, b = index.get(src), index.get(dst)
            if a is None or b is None or a == b:
                continue
            w = min(specificity[a], specificity[b]) * sim * LAYER_SYNONYM_WEIGHT
            rows += [a, b]
            cols += [b, a]
            vals += [w, w]
            steps.setdefault((a, b), Step(src, SYNONYM_STEP, dst))
            steps.setdefault((b, a), Step(src, SYNONYM_STEP, dst))
        n = len(keys)
        matrix = sp.csr_matrix((vals, (rows, cols)), shape=(n, n), dtype=np.float64)
        matrix.sum_duplicates()
        out_weight = np.asarray(matrix.sum(axis=1)).ravel()
        out_weight[out_weight == 0] = 1.0
        transition = sp.diags(1.0 / out_weight) @ matrix
        cost = matrix.copy()
        cost.data = 1.0 / cost.data
        return cls(keys, index, transition.T.tocsr(), cost.tocsr(), steps, specificity, is_entity, list(facts))

    def rank(self, seeds: dict[str, float], *, iterations: int | None = None,
             damping: float | None = None) -> np.ndarray:
        """Personalised PageRank from ``seeds`` (key -> weight) over the whole layer."""
        iterations = PPR_ITERATIONS if iterations is None else iterations
        damping = LAYER_DAMPING if damping is None else damping
        restart = np.zeros(len(self.keys))
        for key, w in seeds.items():
            i = self.index.get(key)
            if i is not None:
                restart[i] += w
        total = restart.sum()
        if total <= 0:
            return restart
        restart /= total
        rank = restart.copy()
        for _ in range(iterations):
            rank = damping * (self.transposed @ rank) + (1 - damping) * restart
        return rank

    def paths(self, sources: Sequence[int], targets: Sequence[int]) -> dict[int, Path]:
        """The cheapest path from any source to each target (a relationship costs its inverse weight)."""
        from scipy.sparse.csgraph import dijkstra

        if not sources or not targets:
            return {}
        _dist, pred, origin = dijkstra(self.adjacency, directed=False, indices=list(sources), min_only=True,
                                       return_predecessors=True)
        out: dict[int, Path] = {}
        for t in targets:
            if origin[t] < 0:
                continue
            nodes, steps = [t], []
            while pred[nodes[-1]] >= 0 and len(nodes) < 16:
                prev = int(pred[nodes[-1]])
                steps.append(self.steps[(prev, nodes[-1])])
                nodes.append(prev)
            out[t] = Path(tuple(self.keys[i] for i in reversed(nodes)), tuple(reversed(steps)))
        return out


class GraphRetriever:
    """Question -> ranked nodes with the paths that reached them (see the module docstring)."""

    def __init__(self, store: GraphStore, *, embedder: Embedder | None = None,
                 cache_dir: PathLike | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.cache_dir = FsPath(cache_dir) if cache_dir is not None else None
        self._catalog: Catalog | None = None
        self._catalog_stamp: str | None = None
        self._names: tuple[list[str], np.ndarray] | None = None
        self._layer: EntityLayer | None | bool = False  # False: not built for this catalog yet
        self._facts: np.ndarray | None = None

    @property
    def catalog(self) -> Catalog:
        stamp = self.store.get_meta("last_ingested_at")
        if self._catalog is None or stamp != self._catalog_stamp:
            self._catalog, self._catalog_stamp, self._names = Catalog.build(self.store), stamp, None
            self._layer, self._facts = False, None
        return self._catalog

    @property
    def layer(self) -> EntityLayer | None:
        """The entity layer of this catalog (built on first use; ``None`` without entities)."""
        cat = self.catalog
        if self._layer is False:
            entities = cat.by_kind.get(NodeKind.ENTITY, [])
            edges, facts = EntityLayer.read(self.store, entities) if entities else ([], [])
            # Synonymy edges join the names of extracted facts only: open extraction spells one
            # thing many ways ("Hank Snow", "Clarence Eugene Hank Snow"), while rule-extracted
            # names are spans as written, whose near-namesakes are mostly different things (on
            # 2Wiki's rule graph such edges cost graph R@5 0.885 -> 0.811).
            ends = sorted({key for src, _, dst in facts for key in (src, dst)}) if edges else []
            self._layer = EntityLayer.build(edges, facts, self._synonyms(ends))
        return self._layer  # type: ignore[return-value]

    def _synonyms(self, entities: Sequence[str]) -> list[tuple[str, str, float]]:
        """Pairs of entities whose names embed within ``LAYER_SYNONYM_SIMILARITY`` of each other
        (each entity's ``LAYER_SYNONYMS`` nearest), in a fixed order; none without an embedder."""
        if self.embedder is None or not LAYER_SYNONYMS or not entities:
            return []
        cat = self.catalog
        keys = sorted(k for k in entities if cat.nodes[k][1])
        vecs = self._encode_names([cat.nodes[k][1] for k in keys])
        out: dict[tuple[str, str], float] = {}
        top = min(LAYER_SYNONYMS + 1, len(keys))
        for start in range(0, len(keys), LAYER_SYNONYM_BLOCK):
            sims = vecs[start:start + LAYER_SYNONYM_BLOCK] @ vecs.T
            near = np.argpartition(-sims, top - 1, axis=1)[:, :top]
            for row, cols in enumerate(near):
                a = start + row
                for b in cols.tolist():
                    sim = float(sims[row, b])
                    if b != a and sim >= LAYER_SYNONYM_SIMILARITY:
                        pair = (keys[min(a, b)], keys[max(a, b)])
                        out[pair] = max(out.get(pair, 0.0), sim)
        return [(a, b, sim) for (a, b), sim in sorted(out.items())]

    def kinds_present(self) -> set[NodeKind]:
        """The node kinds the project holds."""
        return set(self.catalog.by_kind)

    def _name_vectors(self) -> tuple[list[str], np.ndarray]:
        """Embeddings of the names of services, teams, decisions, incidents and entities (once per
        catalog; symbols are left to BM25 and the chunk vectors)."""
        cat = self.catalog
        if self._names is None:
            assert self.embedder is not None
            keys = [k for kind in EMBEDDED_NAME_KINDS for k in cat.by_kind.get(kind, []) if cat.nodes[k][1]]
            texts = [cat.nodes[k][1] for k in keys]
            self._names = (keys, self._encode_names(texts))
        return self._names

    def _encode_names(self, texts: list[str]) -> np.ndarray:
        """Name vectors, through the project's embedding cache when there is one (a corpus of
        passages has tens of thousands of entity names; each new catalog would embed them again)."""
        assert self.embedder is not None
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        if self.cache_dir is None:
            return self.embedder.encode(texts)
        from graphmem.retrieval.indexes import EmbeddingCache, text_digest

        cache = EmbeddingCache(self.cache_dir / "embeddings" / f"names-{_safe(self.embedder.fingerprint())}.sqlite",
                               self.embedder.dim)
        try:
            digests = [text_digest(t) for t in texts]
            known = cache.get_many(digests)
            missing = sorted({d: i for i, d in enumerate(digests) if d not in known}.values())
            if missing:
                vecs = self.embedder.encode([texts[i] for i in missing])
                cache.put_many((digests[i], vecs[j]) for j, i in enumerate(missing))
                known.update((digests[i], vecs[j]) for j, i in enumerate(missing))
            return np.stack([known[d] for d in digests]).astype(np.float32)
        finally:
            cache.close()

    # --- linking --------------------------------------------------------------------------------

    def link(self, q: Question, query_vec: np.ndarray | None = None, *,
             plain: set[str] | None = None) -> dict[str, tuple[float, str]]:
        """Nodes the question names or describes: key -> (weight, reason).

        ``plain`` collects the passages and untyped entities named by one lower-case word ("mother"
        for the film "Mother"): a common word rather than a name."""
        cat = self.catalog
        out: dict[str, tuple[float, str]] = {}

        def add(keys: Sequence[str] | set[str], weight: float, why: str) -> None:
            keys = [k for k in keys if k in cat.nodes]
            for k in keys:
                w = weight / len(keys)
                if out.get(k, (0.0, ""))[0] < w:
                    out[k] = (w, why)

        for n in q.adr_numbers:
            add([f"adr:{n}"], 1.0, f"names ADR-{n}")
        for n in q.incident_numbers:
            if n in cat.incidents_by_number:
                add([cat.incidents_by_number[n]], 1.0, f"names INC-{n}")
        for t in q.tickets:
            add([f"ticket:{t}"], 1.0, f"names {t}")
        for sha in q.shas:
            add([k for k in cat.by_kind.get(NodeKind.COMMIT, []) if k[7:].startswith(sha)], 1.0, f"names commit {sha}")
        # Names: the longest word sequences first, so "billing service" is not also "billing".
        words = [_singular(w) for w in _words(q.text)]
        raw = _WORD.findall(q.text)
        used = [False] * len(words)
        for size in range(MAX_NAME_WORDS, 0, -1):
            # Of overlapping names of one length, those not starting or ending with a function word
            # go first: "the World Series" names "World Series", not "the World".
            starts = sorted(range(len(words) - size + 1),
                            key=lambda i: (words[i] in _STOP or words[i + size - 1] in _STOP, i))
            for i in starts:
                if any(used[i:i + size]):
                    continue
                gram = tuple(words[i:i + size])
                keys = cat.by_name.get(gram)
                if not keys or (size == 1 and gram[0] in _STOP):
                    continue
                if size == 1 and all(cat.nodes[k][0] is NodeKind.SYMBOL for k in keys) \
                        and not _IDENT_LIKE.search(raw[i]):
                    continue  # a plain English word that happens to name a function
                add(keys, 1.0, f"names {' '.join(raw[i:i + size])!r}")
                used[i:i + size] = [True] * size
                if plain is not None and size == 1 and raw[i].islower():
                    plain.update(k for k in keys if _common_noun(k))
        # Misspelt names ("notifcations"): single-word names of services, teams, people and entities.
        if cat.fuzzy_names:
            from rapidfuzz import fuzz, process

            for i, word in enumerate(words):
                if used[i] or len(word) < FUZZY_MIN_LENGTH or word in _STOP or (word,) in cat.by_name:
                    continue
                match = process.extractOne(word, cat.fuzzy_names, scorer=fuzz.ratio, score_cutoff=FUZZY_CUTOFF)
                if match:
                    add(cat.by_name[(match[0],)], 0.8, f"{raw[i]!r} is close to the name {match[0]!r}")
        # Names that mean what the question says without saying them (embedding similarity).
        if query_vec is not None and self.embedder is not None:
            named, matrix = self._name_vectors()
            if named:
                sims = matrix @ np.asarray(query_vec, dtype=np.float32)
                for j in np.argsort(-sims)[:NAME_MATCHES]:
                    if sims[j] >= NAME_SIMILARITY:
                        add([named[j]], float(sims[j]) * 0.6, f"its name is close in meaning ({sims[j]:.2f})")
        # "`submit` in clients/go/client.go": of same-named symbols, keep those in the file it names.
        named_files = {k[5:] for k, (_, why) in out.items() if k.startswith("file:") and why.startswith("names ")}
        if named_files:
            in_named = {k for k in out if k.startswith("sym:") and k[4:].split("::")[0] in named_files}
            for k in [k for k in out if k.startswith("sym:") and k not in in_named and in_named
                      and k.rsplit("::", 1)[-1].lower() in {j.rsplit("::", 1)[-1].lower() for j in in_named}]:
                del out[k]
        # Decision and incident titles the question paraphrases closely.
        qwords = set(words) - _STOP
        for key, title in cat.titles:
            if len(title) >= 2 and len(title & qwords) / len(title) >= 0.6:
                add([key], 0.8, "matches its title")
        self._link_kinds(q, add)
        return out

    def _link_kinds(self, q: Question, add) -> None:  # type: ignore[no-untyped-def]
        """Kinds named with a time ("the latest incident", "incidents last month") seed their nodes."""
        cat, tf = self.catalog, q.time
        if tf.as_of_ref:
            ref = self._resolve_ref(tf.as_of_ref)
            if ref:
                add([ref], 1.0, f"the question is asked as of {tf.as_of_ref}")
        if tf.pick and tf.pick_kind:
            dated = [(cat.nodes[k][2], k) for k in cat.by_kind.get(tf.pick_kind, []) if cat.nodes[k][2]]
            dated = [(d, k) for d, k in dated if tf.admits(d)]
            if dated:
                _d, k = (max if tf.pick == "latest" else min)(dated)
                add([k], 1.0, f"the {tf.pick} {tf.pick_kind.value}")
            return
        if tf.start or tf.end:
            for kind in q.kind_mentions:
                if kind is NodeKind.DECISION and q.adr_numbers or kind is NodeKind.INCIDENT and q.incident_numbers:
                    continue
                keys = [k for k in cat.by_kind.get(kind, []) if cat.nodes[k][2] and tf.admits(cat.nodes[k][2])]
                if keys:
                    add(keys, 1.0, f"{kind.value} in {tf.phrase!r}")

    def _resolve_ref(self, ref: str) -> str | None:
        m = re.match(r"(INC|ADR)-?0*(\d+)", ref, re.IGNORECASE)
        if not m:
            return None
        if m.group(1).upper() == "ADR":
            key = f"adr:{int(m.group(2))}"
            return key if key in self.catalog.nodes else None
        return self.catalog.incidents_by_number.get(int(m.group(2)))

    def reference_date(self, q: Question) -> str | None:
        """The date an "as of INC-042" question is asked at."""
        ref = self._resolve_ref(q.time.as_of_ref) if q.time.as_of_ref else None
        return self.catalog.nodes[ref][2] if ref else None

    # --- retrieval ------------------------------------------------------------------------------

    def retrieve(self, q: Question, *, lexical_seeds: Sequence[str] = (), k: int = 50,
                 as_of: str | None = None, query_vec: np.ndarray | None = None) -> GraphResult:
        plain: set[str] = set()
        linked = self.link(q, query_vec, plain=plain)
        seeds = {key: w for key, (w, _) in linked.items()}
        # Lexical and vector hits seed the search when the question names nothing; next to named
        # nodes they only nudge it (as seeds they would outrank what the named nodes lead to).
        # Extracted entities and passages named in the question ("Lothair II") are where to look,
        # not what the organisation's graph knows for certain: the search starts there but is not
        # treated as anchored on the organisation (fusion weighs it less).
        anchored = any(self.catalog.nodes[key][0] not in UNANCHORING_KINDS for key in seeds)
        asked = set(q.answer_kinds) & set(self.catalog.by_kind)
        dated = {NodeKind.COMMIT, NodeKind.INCIDENT, NodeKind.DECISION} & set(self.catalog.by_kind)
        timeless = as_of is None and not (q.time.active and dated)
        # The entity layer is the graph as it is now, without dates: it answers questions that
        # name no organisation node, ask for no kind but passages, and speak of no time that
        # the graph's dated nodes could answer.
        if not anchored and timeless and asked <= {NodeKind.DOCUMENT, NodeKind.ENTITY} and self.layer is not None:
            # Over prose, a name is what the question capitalises: "mother" is no film title here.
            linked = {key: v for key, v in linked.items() if key not in plain or not v[1].startswith("names ")}
            return self._retrieve_passages(q, linked, lexical_seeds, k, query_vec)
        lexical_weight = LEXICAL_SEED_WEIGHT if not seeds else ANCHORED_LEXICAL_SEED_WEIGHT
        for rank, key in enumerate(lexical_seeds):
            if key in self.catalog.nodes and key not in seeds:
                seeds[key] = lexical_weight / (rank + 1)
        result = GraphResult([], seeds, {key: why for key, (_, why) in linked.items()}, anchored=anchored,
                             named=bool(linked))
        if not seeds:
            return result
        window = q.time
        ref_date = self.reference_date(q)
        cat = self.catalog

        def admitted(key: str) -> bool:
            info = cat.nodes.get(key)
            if info is None or info[2] is None:
                return True
            if ref_date is not None and info[2] > ref_date:
                return False
            return window.admits(info[2]) if (window.start or window.end) else True

        # Breadth-first expansion, level by level: one store read per level.
        parent: dict[str, tuple[str, Step] | None] = {s: None for s in seeds}
        edges: list[Edge] = []
        frontier = sorted(seeds)
        # "the incident that hit the notifications service": a kind the question names without an
        # identifier or a time picks the nodes of that kind next to what it does name.
        described = [kind for kind in q.kind_mentions
                     if not (kind is NodeKind.INCIDENT and q.incident_numbers)
                     and not (kind is NodeKind.DECISION and q.adr_numbers)
                     and not any(cat.nodes.get(key, (None,))[0] is kind for key in linked)]
        # A node with very many relationships (a service with thousands of files) is crossed only by
        # the types the question names and by its rarer types (owners, dependencies).
        hub = Hub(HUB_DEGREE, HUB_TYPE_LIMIT, frozenset(t.value for t in q.rel_types))
        for level in range(MAX_DEPTH):
            if not frontier or len(parent) >= MAX_NODES:
                break
            if level == MAX_DEPTH - 1 and len(parent) > DEEP_LIMIT:
                break  # the last hop only out of a small neighbourhood
            by_origin: dict[str, list[Edge]] = {}
            for edge in self.store.expand(frontier, as_of=as_of, hub=hub):
                if admitted(edge.other):
                    by_origin.setdefault(edge.origin, []).append(edge)
            nxt: list[str] = []
            for origin in frontier:
                for edge in sorted(by_origin.get(origin, []), key=lambda e: (e.step.type, e.other)):
                    edges.append(edge)
                    if edge.other not in parent and len(parent) < MAX_NODES:
                        parent[edge.other] = (edge.origin, edge.step)
                        nxt.append(edge.other)
            frontier = sorted(set(nxt))
            if q.step and level == 0:
                # "who last changed the function that calls X": X's callers become the seeds.
                rel, end = q.step
                named = [key for key, (_, why) in linked.items() if why.startswith("names ")]
                stepped = sorted({e.other for key in named for e in by_origin.get(key, [])
                                  if e.step.type == rel.value and (e.step.src if end == "src" else e.step.dst) == e.other})
                for key in stepped:
                    seeds[key] = max(seeds.get(key, 0.0), 1.0 / len(stepped))
                    result.linked.setdefault(key, f"one {rel.value} step from what the question names")
                for key in named if stepped else ():
                    seeds[key] *= STEPPED_FROM_WEIGHT
            if described and level == 0:
                near = [key for key in frontier if cat.nodes.get(key, (None,))[0] in described]
                # "the incident that hit notifications": the neighbours of what the question names
                # (not of passages a text search found, and even when a text search seeded them
                # already), and among those the ones joined by a relationship the question names
                # (AFFECTED) rather than a mere mention.
                named_types = {t.value for t in q.rel_types}
                beside = {e.other: e.step.type for key, (_, why) in linked.items() if why.startswith("names ")
                          for e in by_origin.get(key, []) if cat.nodes.get(e.other, (None,))[0] in described}
                typed = sorted(key for key, typ in beside.items() if typ in named_types)
                near = typed or sorted(beside) or near
                for key in near:
                    seeds[key] = max(seeds.get(key, 0.0), DESCRIBED_SEED_WEIGHT / len(near))
                    result.linked.setdefault(key, "the kind the question describes, next to what it names")
        result.reached = len(parent)
        weights = edge_weights(q)
        factors = _latest_change_factors(edges, cat) if q.latest_change else None
        scores = self._pagerank(list(parent), edges, seeds, weights, {t.value: d for t, d in q.directions.items()},
                                factors)
        # Nodes of the kind the question asks for keep their PageRank; the rest are damped, so the
        # score stays the order (fusion may use the scores).
        answer = set(q.answer_kinds)
        # The named nodes themselves are no answer when the question asks for another kind
        # ("which commit caused INC-042" is not answered by INC-042), and rarely when it asks how
        # they relate to others of their kind through a directed relationship ("which services
        # depend on auth", "who calls X", "what replaced ADR-3"): there they are the subjects.
        # Only what the question names outright (an id, a name) is a subject; a title it resembles
        # may well be the answer ("which decision superseded ADR-14 (Cache inventory reads ...)").
        result.subjects = {key for key, (_, why) in linked.items()
                           if q.directions and why.startswith("names ") and cat.nodes.get(key, (None,))[0] in answer}
        # Extracted entities ("postgresql", "Lothair II") connect the passages and code that mention
        # them; they are answers only to a question that asks for entities.
        final = {key: s if not answer or cat.nodes.get(key, (None,))[0] in answer else s * OFF_KIND_FACTOR
                 for key, s in scores.items() if not (answer and key in result.linked
                                                       and cat.nodes.get(key, (None,))[0] not in answer)
                 and (cat.nodes.get(key, (None,))[0] is not NodeKind.ENTITY or NodeKind.ENTITY in answer)}
        for key in result.subjects & set(final):
            final[key] *= OFF_KIND_FACTOR
        # Nodes of the asked kind come first: the others are scaled below the weakest of them, so
        # the scores still give the order (fusion may read them).
        if answer:
            asked = [v for key, v in final.items() if cat.nodes.get(key, (None,))[0] in answer
                     and key not in result.subjects]
            others = [v for key, v in final.items() if cat.nodes.get(key, (None,))[0] not in answer
                      or key in result.subjects]
            if asked and others and max(others) >= min(asked):
                scale = OFF_KIND_FACTOR * min(asked) / max(others)
                final = {key: v * scale if (cat.nodes.get(key, (None,))[0] not in answer or key in result.subjects)
                         else v for key, v in final.items()}
        top = sorted(final, key=lambda key: (-final[key], key))[:k]
        # Evidence: the cheapest path from a seed, a relationship costing the inverse of its weight,
        # so paths through what the question asks about win over incidental ones.
        parent.update(_cheapest_paths(edges, {key: (0.0 if key in result.linked else 2.0) for key in seeds}, weights,
                                      targets=set(top)))
        for key in top:
            result.hits.append(GraphHit(key, float(final[key]), _path_to(key, parent)))
        return result

    def _fact_vectors(self) -> np.ndarray:
        """Embeddings of the layer's extracted facts, read as sentences ("Hank Snow moved to Nashville")."""
        layer, cat = self.layer, self.catalog
        assert layer is not None
        if self._facts is None:
            def name(key: str) -> str:
                return cat.nodes[key][1] if key in cat.nodes else key.rsplit(":", 1)[-1]

            self._facts = self._encode_names([f"{name(s)} {p} {name(d)}" for s, p, d in layer.facts])
        return self._facts

    def _retrieve_passages(self, q: Question, linked: dict[str, tuple[float, str]], lexical_seeds: Sequence[str],
                           k: int, query_vec: np.ndarray | None = None) -> GraphResult:
        """Rank by personalised PageRank over the entity layer (see ``EntityLayer``): the named
        entities seed it by their specificity, passages the question names by title seed it fully,
        and the best lexical and vector passages join weakly (as in HippoRAG 2)."""
        layer = self.layer
        assert layer is not None
        cat = self.catalog
        seeds: dict[str, float] = {}
        for key, (w, _why) in linked.items():
            i = layer.index.get(key)
            if i is None:
                continue
            if layer.entity[i]:
                seeds[key] = seeds.get(key, 0.0) + w * float(layer.specificity[i])
            else:
                seeds[key] = seeds.get(key, 0.0) + w * LAYER_DOC_SEED_WEIGHT
        for rank, key in enumerate(lexical_seeds):
            if key in layer.index:
                seeds[key] = seeds.get(key, 0.0) + LAYER_LEXICAL_SEED_WEIGHT / (rank + 1)
        # Extracted facts the question reads like (HippoRAG 2's query-to-triple linking): their
        # subjects and objects are where the answer's passages are.
        if layer.facts and query_vec is not None and self.embedder is not None and LAYER_FACTS:
            sims = self._fact_vectors() @ np.asarray(query_vec, dtype=np.float32)
            for j in np.argsort(-sims)[:LAYER_FACTS]:
                if sims[j] < LAYER_FACT_SIMILARITY:
                    break
                src, pred, dst = layer.facts[j]
                why = f"in the fact {src.rsplit(':', 1)[-1]!r} {pred} {dst.rsplit(':', 1)[-1]!r} ({sims[j]:.2f})"
                for key in (src, dst):
                    weight = LAYER_FACT_SEED_WEIGHT * float(sims[j]) * float(layer.specificity[layer.index[key]])
                    seeds[key] = seeds.get(key, 0.0) + weight
                    linked.setdefault(key, (0.0, why))
        result = GraphResult([], seeds, {key: why for key, (_, why) in linked.items()}, anchored=False,
                             named=bool(linked), layer=True)
        if not seeds:
            return result
        scores = layer.rank(seeds)
        wants_entities = NodeKind.ENTITY in q.answer_kinds
        order = np.argsort(-scores, kind="stable")
        top: list[int] = []
        for i in order:
            if scores[i] <= 0 or len(top) >= k:
                break
            if layer.entity[i] and not wants_entities:
                continue
            top.append(int(i))
        result.reached = int(np.count_nonzero(scores))
        paths = layer.paths([layer.index[key] for key in seeds if key in layer.index], top)
        for i in top:
            key = layer.keys[i]
            if key in cat.nodes:
                result.hits.append(GraphHit(key, float(scores[i]), paths.get(i, Path((key,), ()))))
        return result

    @staticmethod
    def _pagerank(nodes: list[str], edges: list[Edge], seeds: dict[str, float],
                  weights: dict[str, float], directions: dict[str, str] | None = None,
                  factors: dict[tuple[str, str, str], float] | None = None) -> dict[str, float]:
        index = {key: i for i, key in enumerate(nodes)}
        rows, cols, vals = [], [], []
        seen: set[tuple[str, str, str]] = set()
        for e in edges:
            ident = (e.step.src, e.step.type, e.step.dst)
            if ident in seen or e.step.src not in index or e.step.dst not in index:
                continue
            seen.add(ident)
            w = weights.get(e.step.type, 0.5) * (factors.get(ident, 1.0) if factors else 1.0)
            a, b = index[e.step.src], index[e.step.dst]
            # A relationship read with a direction ("which services depend on auth") is walked
            # mostly towards the answer's end.
            toward = (directions or {}).get(e.step.type)
            forward = w * (AGAINST_DIRECTION if toward == "src" else 1.0)
            backward = w * (AGAINST_DIRECTION if toward == "dst" else 1.0)
            rows += [a, b]
            cols += [b, a]
            vals += [forward, backward]
        n = len(nodes)
        matrix = sp.csr_matrix((vals, (rows, cols)), shape=(n, n), dtype=np.float64)
        out_weight = np.asarray(matrix.sum(axis=1)).ravel()
        out_weight[out_weight == 0] = 1.0
        transition = sp.diags(1.0 / out_weight) @ matrix  # row-stochastic (rows without edges stay 0)
        restart = np.zeros(n)
        for key, w in seeds.items():
            if key in index:
                restart[index[key]] = w
        restart /= restart.sum() or 1.0
        rank = restart.copy()
        transposed = transition.T.tocsr()
        for _ in range(PPR_ITERATIONS):
            rank = DAMPING * (transposed @ rank) + (1 - DAMPING) * restart
        return {key: float(rank[i]) for key, i in index.items()}


def edge_weights(q: Question) -> dict[str, float]:
    """Weight of each relationship type for this question: its base weight, more if the question names it."""
    emphasis = {t.value: w for t, w in q.rel_types.items()}
    return {t: base * (1.0 + EMPHASIS * min(1.0, emphasis.get(t, 0.0))) for t, base in BASE_WEIGHTS.items()}


def _latest_change_factors(edges: list[Edge], cat: Catalog) -> dict[tuple[str, str, str], float]:
    """For "who last changed X": of the commits that changed each symbol or file, the newest one's
    change relationship weighs ``LATEST_CHANGE_BOOST`` times more, the older ones a tenth."""
    newest: dict[str, tuple[str, tuple[str, str, str]]] = {}
    changes: list[tuple[str, str, str]] = []
    for e in edges:
        if e.step.type not in (RelType.MODIFIED.value, RelType.CHANGED.value):
            continue
        ident = (e.step.src, e.step.type, e.step.dst)
        changes.append(ident)
        when = cat.nodes.get(e.step.src, (None, "", None))[2] or ""
        if when > newest.get(e.step.dst, ("", ident))[0]:
            newest[e.step.dst] = (when, ident)
    latest = {ident for _, ident in newest.values()}
    return {ident: LATEST_CHANGE_BOOST if ident in latest else 0.1 for ident in changes}


def _cheapest_paths(edges: list[Edge], start: dict[str, float], weights: dict[str, float],
                    targets: set[str] | None = None) -> dict[str, tuple[str, Step] | None]:
    """Dijkstra from several sources over ``edges`` (both directions): node -> (previous node, step).
    Stops once every node of ``targets`` is settled."""
    adjacency: dict[str, list[tuple[str, Step, float]]] = {}
    for e in edges:
        cost = 1.0 / max(weights.get(e.step.type, 0.5), 1e-6)
        adjacency.setdefault(e.step.src, []).append((e.step.dst, e.step, cost))
        adjacency.setdefault(e.step.dst, []).append((e.step.src, e.step, cost))
    dist = dict(start)
    prev: dict[str, tuple[str, Step] | None] = {key: None for key in start}
    heap = [(cost, key) for key, cost in sorted(start.items())]
    heapq.heapify(heap)
    waiting = set(targets) if targets is not None else None
    while heap:
        cost, key = heapq.heappop(heap)
        if cost > dist.get(key, float("inf")):
            continue
        if waiting is not None:
            waiting.discard(key)
            if not waiting:
                break
        for other, step, step_cost in adjacency.get(key, ()):
            new = cost + step_cost
            if new < dist.get(other, float("inf")) - 1e-12:
                dist[other], prev[other] = new, (key, step)
                heapq.heappush(heap, (new, other))
    return prev


def _common_noun(key: str) -> bool:
    """Whether a node that one lower-case question word names is likely just that common word: a
    passage titled with it, or an entity of no particular type ("Mother", the film, or "church"
    from open extraction). A typed entity is a name however it is written ("postgres")."""
    if key.startswith("entity:"):
        return key.split(":", 2)[1] in GENERIC_ENTITY_TYPES
    return key.startswith("doc:")


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:120]


def _path_to(key: str, parent: dict[str, tuple[str, Step] | None]) -> Path:
    nodes, steps = [key], []
    while (link := parent.get(nodes[-1])) is not None:
        origin, step = link
        nodes.append(origin)
        steps.append(step)
    return Path(tuple(reversed(nodes)), tuple(reversed(steps)))

