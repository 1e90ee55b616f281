"""The passage entity layer: extracted entities, the nodes that mention them and the relations
between them, as one weighted graph held in memory, ranked HippoRAG-style."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from graphmem.model import NodeKind, RelType
from graphmem.retrieval.config import LayerConfig
from graphmem.retrieval.graph.pagerank import personalized_pagerank, transition
from graphmem.retrieval.graph.sparse import Csr, cheapest_paths
from graphmem.retrieval.graph.catalog import Catalog
from graphmem.retrieval.graph.linking import Link, LinkReason
from graphmem.retrieval.graph.result import GraphHit, GraphResult
from graphmem.retrieval.question import Question
from graphmem.stores.base import GraphStore, Path, Step

LAYER_REL_TYPES = (RelType.MENTIONS.value, RelType.RELATED_TO.value)
LAYER_BATCH = 5000  # entity keys per store read while building the layer
SYNONYM_STEP = "SIMILAR_NAME"  # the step type of a synonymy edge on an evidence path (not stored)


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
    transposed: Csr  # transition matrix, transposed (columns sum to 1 where a node has edges)
    adjacency: Csr  # symmetric step costs, for evidence paths
    steps: dict[tuple[int, int], Step]
    specificity: np.ndarray  # 1 / passages mentioning the node for entities, 1 for other nodes
    entity: np.ndarray  # bool: the node is an extracted entity
    facts: list[tuple[str, str, str]] = field(default_factory=list)  # (src, predicate, dst) of RELATED_TO
    config: LayerConfig = field(default_factory=LayerConfig)
    about: frozenset[tuple[str, str, str]] = frozenset()  # mentions joining a passage to its own entity

    @staticmethod
    def read(store: GraphStore, entity_keys: Sequence[str],
             ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]], set[tuple[str, str, str]]]:
        """The layer's relationships (identities) touching these entities, the facts among them
        ((src, predicate, dst) of every RELATED_TO predicate), and the mentions that join a passage
        to the entity it is about (``role = "about"``)."""
        edges: dict[tuple[str, str, str], None] = {}
        facts: dict[tuple[str, str, str], None] = {}
        about: set[tuple[str, str, str]] = set()
        wanted = set(LAYER_REL_TYPES)
        for i in range(0, len(entity_keys), LAYER_BATCH):
            for r in store.get_relationships(entity_keys[i:i + LAYER_BATCH]):
                if r.type._value_ not in wanted:
                    continue
                edges[r.ident] = None
                if r.props.get("role") == "about":
                    about.add(r.ident)
                predicate = r.props.get("predicate")
                if r.type is RelType.RELATED_TO and isinstance(predicate, str) and predicate != "names":
                    for p in predicate.split(" | "):
                        facts[(r.src, p, r.dst)] = None
        return list(edges), list(facts), about

    @classmethod
    def build(cls, edges: Sequence[tuple[str, str, str]], facts: Sequence[tuple[str, str, str]],
              synonyms: Sequence[tuple[str, str, float]] = (), config: LayerConfig | None = None,
              about: Collection[tuple[str, str, str]] = ()) -> EntityLayer | None:
        """The layer over what :meth:`read` returned; ``None`` when nothing mentions or relates the
        entities. ``synonyms``: (entity, entity, similarity) pairs of names that likely mean one thing;
        ``about``: the mentions (of ``edges``) that join a passage to the entity it is about, which
        weigh ``config.about_weight`` times an ordinary mention, so a walk that reaches a name goes
        on to the passage about it rather than to the other passages that merely mention it."""
        if not edges:
            return None
        config = config or LayerConfig()
        keys = sorted({k for src, _, dst in edges for k in (src, dst)})
        index = {k: i for i, k in enumerate(keys)}
        is_entity = np.array([k.startswith("entity:") for k in keys])
        mentions = np.zeros(len(keys))
        for src, typ, dst in edges:
            if typ == RelType.MENTIONS.value:
                mentions[index[dst]] += 1
        specificity = np.where(is_entity, np.maximum(mentions, 1.0) ** -config.specificity_power, 1.0)
        rows, cols, vals, steps = [], [], [], {}
        for src, typ, dst in edges:
            a, b = index[src], index[dst]
            if a == b:
                continue
            w = min(specificity[a], specificity[b])
            if typ == RelType.RELATED_TO.value:
                w *= config.related_weight
            elif (src, typ, dst) in about:
                w *= config.about_weight
            rows += [a, b]
            cols += [b, a]
            vals += [w, w]
            steps[(a, b)] = steps[(b, a)] = Step(src, typ, dst)
        for src, dst, sim in synonyms:
            a, b = index.get(src), index.get(dst)
            if a is None or b is None or a == b:
                continue
            w = min(specificity[a], specificity[b]) * sim * config.synonym_weight
            rows += [a, b]
            cols += [b, a]
            vals += [w, w]
            steps.setdefault((a, b), Step(src, SYNONYM_STEP, dst))
            steps.setdefault((b, a), Step(src, SYNONYM_STEP, dst))
        n = len(keys)
        matrix = Csr.from_triples(rows, cols, vals, n)
        costs = matrix.with_data(1.0 / matrix.data)
        return cls(keys, index, transition(matrix), costs, steps, specificity, is_entity, list(facts), config,
                   frozenset(about))

    def bridged(self, path: Path) -> bool:
        """The path ends in an about-mention after passing through another passage."""
        if not path.steps or len(path.steps) < 2:
            return False
        last = path.steps[-1]
        return (last.src, last.type, last.dst) in self.about and any(
            not self.entity[self.index[key]] for key in path.nodes[:-1])

    def rank(self, seeds: dict[str, float]) -> np.ndarray:
        """Personalised PageRank from ``seeds`` (key -> weight) over the whole layer."""
        restart = np.zeros(len(self.keys))
        for key, w in seeds.items():
            i = self.index.get(key)
            if i is not None:
                restart[i] += w
        return personalized_pagerank(self.transposed, restart, damping=self.config.damping,
                                     iterations=self.config.iterations)

    def paths(self, sources: Sequence[int], targets: Sequence[int]) -> dict[int, Path]:
        """The cheapest path from any source to each target (a relationship costs its inverse weight)."""
        if not sources or not targets:
            return {}
        dist, pred = cheapest_paths(self.adjacency, dict.fromkeys(sources, 0.0))
        out: dict[int, Path] = {}
        for t in targets:
            if not np.isfinite(dist[t]):
                continue
            nodes, steps = [t], []
            while pred[nodes[-1]] >= 0 and len(nodes) < 16:
                prev = int(pred[nodes[-1]])
                steps.append(self.steps[(prev, nodes[-1])])
                nodes.append(prev)
            out[t] = Path(tuple(self.keys[i] for i in reversed(nodes)), tuple(reversed(steps)))
        return out



def rank_passages(layer: EntityLayer, cat: Catalog, q: Question, linked: dict[str, Link],
                  lexical_seeds: Sequence[str], k: int, *, fact_vectors: np.ndarray | None = None,
                  query_vec: np.ndarray | None = None) -> GraphResult:
    """Rank by personalised PageRank over the entity layer (see ``EntityLayer``): the named
    entities seed it by their specificity, passages the question names by title seed it fully,
    and the best lexical and vector passages join weakly (as in HippoRAG 2). A seed passage that
    names no entity is an isolated node of the walk and keeps its share of the restart mass."""
    config = layer.config
    seeds: dict[str, float] = {}
    # A passage that names no entity is a node of the layer without edges (every passage is a node
    # in HippoRAG 2): the walk cannot leave it, so it keeps its share of the restart mass.
    isolated: dict[str, float] = {}
    for key, link in linked.items():
        i = layer.index.get(key)
        if i is None:
            if not key.startswith(NodeKind.ENTITY.prefix):
                isolated[key] = isolated.get(key, 0.0) + link.weight * config.doc_seed_weight
            continue
        if layer.entity[i]:
            seeds[key] = seeds.get(key, 0.0) + link.weight * float(layer.specificity[i])
        else:
            seeds[key] = seeds.get(key, 0.0) + link.weight * config.doc_seed_weight
    for rank, key in enumerate(lexical_seeds):
        target = seeds if key in layer.index else isolated
        target[key] = target.get(key, 0.0) + config.lexical_seed_weight / (rank + 1)
    # Extracted facts the question reads like (HippoRAG 2's query-to-triple linking): their
    # subjects and objects are where the answer's passages are.
    if layer.facts and query_vec is not None and fact_vectors is not None and config.facts:
        sims = fact_vectors @ np.asarray(query_vec, dtype=np.float32)
        for j in np.argsort(-sims)[:config.facts]:
            if sims[j] < config.fact_similarity:
                break
            src, pred, dst = layer.facts[j]
            detail = f"{src.rsplit(':', 1)[-1]} {pred} {dst.rsplit(':', 1)[-1]} ({sims[j]:.2f})"
            for key in (src, dst):
                weight = config.fact_seed_weight * float(sims[j]) * float(layer.specificity[layer.index[key]])
                seeds[key] = seeds.get(key, 0.0) + weight
                linked.setdefault(key, Link(0.0, LinkReason.FACT, detail))
    result = GraphResult([], {**seeds, **isolated}, dict(linked), anchored=False,
                         named=bool(linked), layer=True)
    if not seeds and not isolated:
        return result
    inside = sum(seeds.values())
    total = inside + sum(isolated.values())
    # PageRank normalises the restart vector over the layer's seeds; rescale to all seeds.
    scores = layer.rank(seeds) * (inside / total) if seeds else np.zeros(len(layer.keys))
    wants_entities = NodeKind.ENTITY in q.answer_kinds
    order = np.argsort(-scores, kind="stable")
    top: list[int] = []
    for i in order:
        if scores[i] <= 0 or len(top) >= k:
            break
        if layer.entity[i] and not wants_entities:
            continue
        top.append(int(i))
    result.reached = int(np.count_nonzero(scores)) + len(isolated)
    paths = layer.paths([layer.index[key] for key in seeds if key in layer.index], top)
    ranked = [(float(scores[i]), layer.keys[i], paths.get(i, Path((layer.keys[i],), ()))) for i in top]
    ranked += [((1 - config.damping) * w / total, key, Path((key,), ())) for key, w in isolated.items()]
    ranked.sort(key=lambda item: -item[0])  # stable: ties keep the layer's order, then the lexical one
    for score, key, path in ranked[:k]:
        if key in cat.nodes:
            result.hits.append(GraphHit(key, score, path))
            if layer.bridged(path):
                result.bridged.add(key)
    return result
