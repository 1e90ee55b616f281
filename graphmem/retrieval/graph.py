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


class GraphRetriever:
    """Question -> ranked nodes with the paths that reached them (see the module docstring)."""

    def __init__(self, store: GraphStore, *, embedder: Embedder | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self._catalog: Catalog | None = None
        self._catalog_stamp: str | None = None
        self._names: tuple[list[str], np.ndarray] | None = None

    @property
    def catalog(self) -> Catalog:
        stamp = self.store.get_meta("last_ingested_at")
        if self._catalog is None or stamp != self._catalog_stamp:
            self._catalog, self._catalog_stamp, self._names = Catalog.build(self.store), stamp, None
        return self._catalog

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
            matrix = (self.embedder.encode(texts) if texts
                      else np.zeros((0, self.embedder.dim), dtype=np.float32))
            self._names = (keys, matrix)
        return self._names

    # --- linking --------------------------------------------------------------------------------

    def link(self, q: Question, query_vec: np.ndarray | None = None) -> dict[str, tuple[float, str]]:
        """Nodes the question names or describes: key -> (weight, reason)."""
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
        for size in (4, 3, 2, 1):
            for i in range(len(words) - size + 1):
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
        linked = self.link(q, query_vec)
        seeds = {key: w for key, (w, _) in linked.items()}
        # Lexical and vector hits seed the search when the question names nothing; next to named
        # nodes they only nudge it (as seeds they would outrank what the named nodes lead to).
        # Extracted entities and passages named in the question ("Lothair II") are where to look,
        # not what the organisation's graph knows for certain: the search starts there but is not
        # treated as anchored on the organisation (fusion weighs it less).
        anchored = any(self.catalog.nodes[key][0] not in UNANCHORING_KINDS for key in seeds)
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


def _path_to(key: str, parent: dict[str, tuple[str, Step] | None]) -> Path:
    nodes, steps = [key], []
    while (link := parent.get(nodes[-1])) is not None:
        origin, step = link
        nodes.append(origin)
        steps.append(step)
    return Path(tuple(reversed(nodes)), tuple(reversed(steps)))

