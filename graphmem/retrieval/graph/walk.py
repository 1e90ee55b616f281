"""The organisation-graph walk: expand breadth-first from the seeds through typed relationships,
then rank what was reached by a personalised PageRank whose relationship weights follow what the
question asks. Nodes of the kind the question asks for come first; each hit keeps the path by
which the expansion reached it.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from graphmem.model import ORG_KINDS, REL_ENDPOINTS, NodeKind, RelType, person_key
from graphmem.retrieval.config import LinkConfig, WalkConfig
from graphmem.retrieval.graph.catalog import Catalog
from graphmem.retrieval.graph.linking import Link, LinkReason, reference_date
from graphmem.retrieval.graph.pagerank import personalized_pagerank, transition
from graphmem.retrieval.graph.sparse import Csr, cheapest_paths
from graphmem.retrieval.graph.result import GraphHit, GraphResult
from graphmem.retrieval.question import Question
from graphmem.stores.base import Edge, GraphStore, Hub, Path, Step


_BY_TYPE_AND_OTHER = attrgetter("step.type", "other")


def walk(store: GraphStore, cat: Catalog, q: Question, linked: dict[str, Link], result: GraphResult, *,
         k: int, as_of: str | None, config: WalkConfig, link_config: LinkConfig) -> GraphResult:
    """Fill ``result`` (whose ``seeds`` are set) with the ranked nodes the walk reaches."""
    seeds = result.seeds
    window = q.time
    ref_date = reference_date(cat, q)

    def admitted(key: str) -> bool:
        info = cat.nodes.get(key)
        if info is None or info[2] is None:
            return True
        if ref_date is not None and info[2] > ref_date:
            return False
        return window.admits(info[2]) if (window.start or window.end) else True

    dated = ref_date is not None or bool(window.start or window.end)  # otherwise every node is admitted
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
    hub = Hub(config.hub_degree, config.hub_type_limit, frozenset(t.value for t in q.rel_types))
    # A question for the commits or releases that changed the code it names (for its latest change,
    # ``_newest_change_first`` counts its members' changes already).
    history = (bool({RelType.MODIFIED, RelType.CHANGED} & set(q.rel_types)) and not q.latest_change
               and bool({NodeKind.COMMIT, NodeKind.RELEASE} & set(q.answer_kinds)))
    # A question for what imports a file it names (its importers import its definitions).
    imports = q.directions.get(RelType.IMPORTS) == "src"
    for level in range(config.max_depth):
        if not frontier or len(parent) >= config.max_nodes:
            break
        if level == config.max_depth - 1 and len(parent) > config.deep_limit:
            break  # the last hop only out of a small neighbourhood
        by_origin: dict[str, list[Edge]] = {}
        for edge in store.expand(frontier, as_of=as_of, hub=hub):
            if not dated or admitted(edge.other):
                by_origin.setdefault(edge.origin, []).append(edge)
        nxt: list[str] = []
        for origin in frontier:
            for edge in sorted(by_origin.get(origin, []), key=_BY_TYPE_AND_OTHER):
                edges.append(edge)
                if edge.other not in parent and len(parent) < config.max_nodes:
                    parent[edge.other] = (edge.origin, edge.step)
                    nxt.append(edge.other)
        frontier = sorted(set(nxt))
        if q.step and level == 0:
            # "who last changed the function that calls X": X's callers become the seeds.
            rel, end = q.step
            named = [key for key, link in linked.items() if link.named]
            stepped = sorted({e.other for key in named for e in by_origin.get(key, [])
                              if e.step.type == rel.value and (e.step.src if end == "src" else e.step.dst) == e.other})
            for key in stepped:
                seeds[key] = max(seeds.get(key, 0.0), 1.0 / len(stepped))
                result.linked.setdefault(key, Link(seeds[key], LinkReason.STEPPED, rel.value))
            for key in named if stepped else ():
                seeds[key] *= link_config.stepped_from_weight
        if (history or imports) and level == 0:
            # "Which releases changed StaticFiles": a change to one of its methods changes it.
            # "What imports starlette.datastructures": an import of one of its classes imports it.
            for key, link in linked.items():
                if not link.named or not key.startswith("sym:" if history else "file:"):
                    continue
                members = sorted({e.other for e in by_origin.get(key, []) if e.step.type == RelType.CONTAINS.value
                                  and e.step.src == key and e.other.startswith("sym:")})
                weight = seeds.get(key, 0.0) * link_config.member_weight / max(len(members), 1)
                for member in members if weight > 0 else ():
                    seeds[member] = max(seeds.get(member, 0.0), weight)
                    result.linked.setdefault(member, Link(weight, LinkReason.MEMBER, key))
        if described and level == 0:
            near = [key for key in frontier if cat.nodes.get(key, (None,))[0] in described]
            # "the incident that hit notifications": the neighbours of what the question names
            # (not of passages a text search found, and even when a text search seeded them
            # already), and among those the ones joined by a relationship the question names
            # (AFFECTED) rather than a mere mention.
            named_types = {t.value for t in q.rel_types}
            beside = {e.other: e.step.type for key, link in linked.items() if link.named
                      for e in by_origin.get(key, []) if cat.nodes.get(e.other, (None,))[0] in described}
            typed = sorted(key for key, typ in beside.items() if typ in named_types)
            near = typed or sorted(beside) or near
            for key in near:
                seeds[key] = max(seeds.get(key, 0.0), link_config.described_seed_weight / len(near))
                result.linked.setdefault(key, Link(seeds[key], LinkReason.DESCRIBED))
    result.reached = len(parent)
    weights = edge_weights(q, config)
    factors = _latest_change_factors(edges, cat, config) if q.latest_change else None
    sub = _Subgraph.build(list(parent), edges, weights, {t.value: d for t, d in q.directions.items()}, factors, config)
    scores = sub.pagerank(seeds, config)
    # Nodes of the kind the question asks for keep their PageRank; the rest are damped, so the
    # score stays the order (fusion may use the scores).
    answer = set(q.answer_kinds)
    # The named nodes themselves are no answer when the question asks for another kind
    # ("which commit caused INC-042" is not answered by INC-042), and rarely when it asks how
    # they relate to others of their kind through a directed relationship ("which services
    # depend on auth", "who calls X", "what replaced ADR-3"): there they are the subjects.
    # What the question names outright (an id, a name) or whose title it repeats is a subject:
    # "which decision replaced synchronous billing calls" asks for what replaced that title. So
    # are the nodes one step from it that a two-step question goes through ("what calls the
    # callers of X": X's callers are the way in, their callers the answer), and the members of
    # what it names ("what imports datastructures": the module's classes are what is imported).
    # A question that asks for a thing no node kind is ("which database does billing use") is
    # about the organisation nodes it names; code it names may hold the answer itself.
    result.subjects = {key for key, link in result.linked.items()
                       if q.directions and (link.named or link.reason in (LinkReason.TITLE, LinkReason.STEPPED,
                                                                          LinkReason.MEMBER))
                       and cat.nodes.get(key, (None,))[0] in answer}
    if q.asks_other_thing:
        result.subjects |= {key for key, link in result.linked.items()
                            if link.named and cat.nodes.get(key, (None,))[0] in ORG_KINDS}
    # Extracted entities ("postgresql", "Lothair II") connect the passages and code that mention
    # them; they are answers only to a question that asks for entities.
    kinds = {key: cat.nodes.get(key, _NO_INFO)[0] for key in scores}  # read once: the passes below read them often
    entities = NodeKind.ENTITY in answer
    final: dict[str, float] = {}
    for key, s in scores.items():
        kind = kinds[key]
        if answer and kind not in answer:
            if key in result.linked:
                continue
            s *= config.off_kind_factor
        if kind is not NodeKind.ENTITY or entities:
            final[key] = s
    for key in result.subjects & set(final):
        final[key] *= config.off_kind_factor
    if config.direct_first and answer and q.directions:
        final = _direct_answers_first(final, edges, q, cat, result, answer, config)
    # A root commit created everything it touched: it changed and removed nothing. Nor is it the
    # answer to a question that asks no commit: it touches every node of its time, so PageRank
    # lifts it from whatever the question names (a shallow clone's one commit touches them all).
    root_answers = not q.asks_change and (q.asks_creation or NodeKind.COMMIT in answer or bool(q.shas))
    for key in (cat.root_commits & set(final)) if not root_answers else ():
        final[key] *= config.off_kind_factor
    # "Which release removed X", "when was X added": the commit made when X's time in the graph
    # ended (or began) is the answer, above every other.
    if (q.asks_removal or q.asks_creation) and (not answer or NodeKind.COMMIT in answer):
        top_score = max(final.values(), default=1.0)
        named = [key for key, ln in result.linked.items() if ln.named and key in cat.lifetimes]
        for key in named:
            began, ended = cat.lifetimes[key]
            moment = ended if q.asks_removal else began
            # Code moved to another file: its end is no removal when a namesake began then or
            # later, its beginning no addition when a namesake had ended by then.
            if moment and any(other != key and other.rsplit("::", 1)[-1] == key.rsplit("::", 1)[-1]
                              and _moved(cat.lifetimes[other], moment, q.asks_removal) for other in named):
                continue
            for commit in cat.commits_at.get(moment or "", []):
                final[commit] = max(final.get(commit, 0.0), top_score * config.latest_change_boost)
    # "Who last changed X", "which commit last touched X": the newest change to what the question
    # names is the answer, or that change's author when a person is asked. PageRank alone lets an
    # author of many older changes nearby outweigh it.
    counted = q.asks_most and NodeKind.PERSON in answer and not q.latest_change
    if q.latest_change:
        final = _newest_change_first(final, edges, cat, result, answer, store)
    elif counted:
        final = _most_changes_first(final, store, cat, result, as_of)
    elif most := _counted_relation(q, answer, result, cat, as_of):
        final, result.counted = _most_related_first(final, store, cat, q.answer_kinds[0], *most,
                                                    limit=config.most_related, tests=q.mentions_tests)
        counted = True
    if q.asks_in_force:
        final = _superseded_last(final, edges, cat, ref_date, config)
    shipped: dict[str, tuple[str, Step]] = {}
    if NodeKind.RELEASE in answer:
        final, shipped = _shipped_in(final, store, as_of, k)
    # Nodes of the asked kind come first: the others are scaled below the weakest of them, so
    # the scores still give the order (fusion may read them).
    for key in final.keys() - kinds.keys():  # commits and authors the special orders above added
        kinds[key] = cat.nodes.get(key, _NO_INFO)[0]
    if answer:
        off = {key for key in final if kinds[key] not in answer} | (result.subjects & final.keys())
        asked = [v for key, v in final.items() if key not in off]
        high = max((final[key] for key in off), default=0.0)
        if asked and off and high >= (low := min(asked)):
            scale = config.off_kind_factor * low / high
            for key in off:
                final[key] *= scale
    stepped = any(link.reason is LinkReason.STEPPED for link in result.linked.values())
    if config.role_order and answer and q.main_rel_types and not (stepped or q.asks_removal or q.asks_creation
                                                                   or q.latest_change or counted):
        final = _role_order(final, kinds, sub, edges, q, cat, result, answer, config)
    top = _best(final, k)
    # Evidence: the cheapest path from a seed, a relationship costing the inverse of its weight,
    # so paths through what the question asks about win over incidental ones.
    paths = sub.cheapest_paths({key: (0.0 if key in result.linked else 2.0) for key in seeds}, top)
    for key in top:
        path = paths.get(key) or _path_to(key, parent)
        if key in shipped:  # a release ranked by the commit it shipped: that commit's way, one step on
            commit, step = shipped[key]
            way = paths.get(commit) or _path_to(commit, parent)
            path = Path(way.nodes + (key,), way.steps + (step,))
        result.hits.append(GraphHit(key, float(final[key]), path))
    return result


@dataclass(slots=True)
class _Subgraph:
    """The reached nodes and their relationships, read once for both PageRank and evidence paths."""

    keys: list[str]
    index: dict[str, int]
    transitions: Csr  # PageRank's weighted adjacency (each way as the question reads it)
    cost: Csr  # step costs for evidence paths: the inverse of a relationship's weight
    pair_ids: np.ndarray  # ascending ids (lower end * n + higher end) of the joined pairs of nodes
    pair_steps: list[Step]  # for each, the cheapest relationship between the two, either way

    @classmethod
    def build(cls, nodes: list[str], edges: list[Edge], weights: dict[str, float], directions: dict[str, str],
              factors: dict[tuple[str, str, str], float] | None, config: WalkConfig) -> _Subgraph:
        index = {key: i for i, key in enumerate(nodes)}
        # Each relationship once (as first met) with both ends reached; its type's numbers are
        # worked out once per type, and the rest is done on arrays (a walk reaches thousands).
        first_met: dict[tuple[str, str, str], Step] = {}
        ends: list[int] = []
        types: dict[str, int] = {}
        codes: list[int] = []
        for e in edges:
            st = e.step
            ident = (st.src, st.type, st.dst)
            if ident in first_met:
                continue
            a, b = index.get(st.src), index.get(st.dst)
            if a is None or b is None:
                continue
            first_met[ident] = st
            ends += (a, b)
            codes.append(types.setdefault(st.type, len(types)))
        per_type = []
        for t in types:
            base = weights.get(t)
            # A relationship read with a direction ("which services depend on auth") is walked
            # mostly towards the answer's end.
            toward = directions.get(t)
            per_type.append((config.unknown_type_weight if base is None else base,
                             config.against_direction if toward == "src" else 1.0,
                             config.against_direction if toward == "dst" else 1.0,
                             1.0 / max(0.5 if base is None else base, 1e-6)))
        table = np.asarray(per_type, dtype=np.float64).reshape(len(per_type), 4)
        m, n = len(codes), len(nodes)
        code = np.asarray(codes, dtype=np.int64)
        pairs = np.asarray(ends, dtype=np.int64).reshape(m, 2)
        a, b = pairs[:, 0], pairs[:, 1]
        w = table[code, 0]
        if factors:
            w = w * np.fromiter((factors.get(i, 1.0) for i in first_met), dtype=np.float64, count=m)
        # Both ways of each relationship, in the order met (duplicates are summed in that order).
        vals = np.empty(2 * m)
        vals[0::2], vals[1::2] = w * table[code, 1], w * table[code, 2]
        transitions = Csr.from_triples(pairs.reshape(-1), pairs[:, ::-1].reshape(-1), vals, n)
        # Evidence steps: between two nodes, the cheapest relationship (the first met among equals);
        # the cost matrix lists the pairs in the order first met.
        cost_of = table[code, 3]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        pair_id = lo * max(n, 1) + hi
        order = np.lexsort((np.arange(m), cost_of, pair_id))
        head = np.ones(m, dtype=bool)
        head[1:] = pair_id[order][1:] != pair_id[order][:-1]
        chosen = order[head]  # per pair, by ascending id: its cheapest relationship
        _, first = np.unique(pair_id, return_index=True)  # per pair, same order: where first met
        met = chosen[np.argsort(first, kind="stable")]
        costs = cost_of[met]
        cost = Csr.from_triples(np.concatenate([lo[met], hi[met]]), np.concatenate([hi[met], lo[met]]),
                                np.concatenate([costs, costs]), n)
        steps = list(first_met.values())
        return cls(nodes, index, transitions, cost, pair_id[chosen], [steps[i] for i in chosen.tolist()])

    def pagerank(self, seeds: dict[str, float], config: WalkConfig) -> dict[str, float]:
        """PageRank over the reached subgraph; each relationship weighs as the question reads it."""
        restart = np.zeros(len(self.keys))
        for key, w in seeds.items():
            if key in self.index:
                restart[self.index[key]] = w
        rank = personalized_pagerank(transition(self.transitions), restart, damping=config.damping,
                                     iterations=config.iterations)
        return {key: float(rank[i]) for key, i in self.index.items()}

    def cheapest_paths(self, start: dict[str, float], targets: list[str]) -> dict[str, Path]:
        """The cheapest path from any seed (``start``: seed -> cost of starting there) to each target."""
        sources = {self.index[key]: cost for key, cost in start.items() if key in self.index}
        if not sources:
            return {}
        dist, pred = cheapest_paths(self.cost, sources)
        before = pred.tolist()
        chains: dict[str, list[int]] = {}  # target -> its path's nodes, from the target back to a seed
        for key in targets:
            t = self.index.get(key)
            if t is None or not np.isfinite(dist[t]):
                continue
            nodes = chains[key] = [t]
            while before[nodes[-1]] >= 0:
                nodes.append(before[nodes[-1]])
        # Each step is the cheapest relationship between its two nodes: all looked up at once.
        pairs = np.asarray([(a, b) for nodes in chains.values() for a, b in zip(nodes, nodes[1:])],
                           dtype=np.int64).reshape(-1, 2)
        found = np.searchsorted(self.pair_ids, pairs.min(axis=1) * max(len(self.keys), 1) + pairs.max(axis=1))
        steps = iter([self.pair_steps[i] for i in found.tolist()])
        out: dict[str, Path] = {}
        for key, nodes in chains.items():
            back = [next(steps) for _ in nodes[1:]]
            out[key] = Path(tuple(self.keys[i] for i in reversed(nodes)), tuple(reversed(back)))
        return out


def _direct_answers_first(final: dict[str, float], edges: list[Edge], q: Question, cat: Catalog,
                          result: GraphResult, answer: set[NodeKind], config: WalkConfig) -> dict[str, float]:
    """"What does X call", "which services depend on auth": the nodes one step of a relationship the
    question directs away from what it names (or, for a two-step question, from the nodes it steps
    through), at the end it asks for, answer it; next come the nodes one more such step on (X's
    callers' callers: they reach X through another), then the rest of what the walk reached (the
    file that holds X, what X itself calls, its class), each group scaled below the weakest of the
    one before. PageRank alone lets a well-connected neighbour outrank them."""
    directions = {t.value: end for t, end in q.directions.items()}

    def along(starts: set[str]) -> set[str]:
        return {e.other for e in edges if e.origin in starts and e.step.type in directions
                and (e.step.src if directions[e.step.type] == "src" else e.step.dst) == e.other
                and e.other in final and e.other not in result.subjects
                and cat.nodes.get(e.other, (None,))[0] in answer}

    origins = {key for key, link in result.linked.items()
               if link.reason is LinkReason.STEPPED or (link.named and not q.step)}
    direct = along(origins)
    return _tiers_first(final, [direct, along(direct) - origins], config.off_kind_factor)


def _tiers_first(final: dict[str, float], tiers: list[set[str]], factor: float) -> dict[str, float]:
    """``final`` with each tier's keys above everything not in it or an earlier tier: what follows
    a tier is scaled (by ``factor``) below its weakest key, unless it is below it already."""
    out, placed = final, set()
    for tier in tiers:
        tier = {key for key in tier if key in out} - placed
        placed |= tier
        rest = [v for key, v in out.items() if key not in placed]
        if not tier or not rest:
            continue
        low, high = min(out[key] for key in tier), max(rest)
        if high >= low:
            scale = factor * low / high
            out = {key: v if key in placed else v * scale for key, v in out.items()}
    return out


# Links too loose to give the answer a role: a path from these says nothing of it.
_UNANCHORED = (LinkReason.LEXICAL, LinkReason.FACT, LinkReason.SIMILAR_NAME)


def _role_order(final: dict[str, float], kinds: dict[str, NodeKind | None], sub: _Subgraph, edges: list[Edge],
                q: Question, cat: Catalog, result: GraphResult, answer: set[NodeKind],
                config: WalkConfig) -> dict[str, float]:
    """The answer plays the role the main clause gives it. In "which services depend on a service
    that had an incident" the incident's own service is one step from the incident, and PageRank
    ranks it above its dependents; in "who fixed the incident that hit X" the cause's author
    ranks beside the fix's. Among the first ``role_depth`` candidates of the asked kind, those that
    play the role come first, then those that play it one step further (a caller's caller), then
    those whose cheapest path from what the question names crosses
    no other node of its start's kind (nor, where no directed relationship places the answer, of
    the asked kind); PageRank orders each group. Their scores are dealt out again in the new order,
    so the score stays the order."""
    anchors = {key: 0.0 for key, link in result.linked.items() if link.reason not in _UNANCHORED}
    if not anchors:
        return final  # nothing named: the walk started from text hits, which have no role
    cands = _best({key: v for key, v in final.items() if kinds[key] in answer and key not in result.subjects
                   and key not in anchors}, config.role_depth)
    if len(cands) < 2:
        return final
    # The node a relative clause describes ("the incident that hit X") is where the main clause
    # starts; X only led to it.
    described = {key: 0.0 for key in anchors if result.linked[key].reason is LinkReason.DESCRIBED}
    paths = sub.cheapest_paths(described or anchors, cands)
    main = {t.value for t in q.main_rel_types}
    named = {t.value for t in q.rel_types}
    directions = {t.value: end for t, end in q.directions.items()}

    def stands_for(typ: str) -> set[str]:
        return {typ, *config.stands_for.get(typ, ())}

    def read(step: Step, toward: str) -> set[str]:
        """The relationships the question names that a step stands for, walked towards ``toward`` as asked."""
        return {t for t in stands_for(step.type) & named
                if t not in directions or (step.src if directions[t] == "src" else step.dst) == toward}

    directed_main = {t for t in main if t in directions}
    directed_rel = set(directions) - main
    # What the main clause's directed relationship reaches from the answer: what the question names
    # ("which services call billing"), or, when nothing it names can stand there, what is one step
    # from it ("which services depend on the service that had INC-7").
    ends = {kind for typ, (src_kinds, dst_kinds) in REL_ENDPOINTS.items()
            for t in stands_for(typ.value) & directed_main
            for kind in (dst_kinds if directions[t] == "src" else src_kinds)}
    near = set(anchors)
    if not any(cat.nodes.get(key, (None,))[0] in ends for key in anchors):
        near |= {e.other for e in edges if e.origin in anchors}
    asked = {typ: found for typ in {e.step.type for e in edges} if (found := stands_for(typ) & directed_main)}
    players = {(e.step.src if directions[t] == "src" else e.step.dst)
               for e in edges if e.step.type in asked and (e.step.src in near or e.step.dst in near)
               for t in asked[e.step.type]
               if (e.step.dst if directions[t] == "src" else e.step.src) in near}
    # One more step of the same relationship, as asked: X's callers' callers reach X through
    # another; they come before what merely lies next to X (its class, what X itself calls).
    relays = {(e.step.src if directions[t] == "src" else e.step.dst)
              for e in edges if e.step.type in asked for t in asked[e.step.type]
              if (e.step.dst if directions[t] == "src" else e.step.src) in players} - players

    def tier(key: str) -> tuple[int, int, int]:
        path = paths.get(key)
        if path is None or not path.steps:
            return (0, 0, 0)
        if directed_main:
            # "Which services depend on the service that had INC-7": the answer is at the asked end
            # of that relationship, whose other end the question names or describes.
            plays = key in players
        else:
            reads = [read(st, path.nodes[i + 1]) for i, st in enumerate(path.steps)]
            last = path.steps[-1]
            # No relationship the question names ends the path walked the wrong way; the path
            # crosses each directed relationship of the relative clauses as asked ("the service
            # that calls the endpoint that failed": a caller of what failed); and from the node a
            # relative clause describes ("the incident that hit X") it goes on by the main clause's
            # relationships, not again by the relative clause's.
            plays = ((bool(reads[-1]) or not stands_for(last.type) & named)
                     and directed_rel <= set().union(*reads)
                     and not (result.linked[path.nodes[0]].reason is LinkReason.DESCRIBED
                              and any(r and not r & main for r in reads)))
        # A path through another node of its start's kind (another incident, another commit) is
        # about that node, not the one the question names. Without a directed relationship to
        # place the answer, one through another node of the asked kind reaches that node first,
        # which answers more directly (the team owning the service before a person owning one of
        # its files).
        start = cat.nodes.get(path.nodes[0], (None,))[0]
        crossed = {start} if directed_main else {start, *answer}
        own = not any(cat.nodes.get(node, (None,))[0] in crossed for node in path.nodes[1:-1])
        return (int(plays), int(key in relays), int(own))

    order = sorted(cands, key=lambda key: tier(key), reverse=True)  # stable: PageRank within a tier
    values = sorted((final[key] for key in cands), reverse=True)
    for i in range(1, len(values)):  # equal scores would let the key decide again
        values[i] = min(values[i], values[i - 1] * (1.0 - 1e-9))
    return {**final, **dict(zip(order, values))}


def edge_weights(q: Question, config: WalkConfig | None = None) -> dict[str, float]:
    """Weight of each relationship type for this question: its base weight, more if the question names it."""
    config = config or WalkConfig()
    emphasis = {t.value: w for t, w in q.rel_types.items()}
    return {t: base * (1.0 + config.emphasis * min(1.0, emphasis.get(t, 0.0))) for t, base in config.base_weights.items()}


def _newest_change_first(final: dict[str, float], edges: list[Edge], cat: Catalog, result: GraphResult,
                         answer: set[NodeKind], store: GraphStore) -> dict[str, float]:
    """``final`` with the newest commit that changed each node the question is about, or its authors
    when the answer is a person, above every other node (in their own order, the commit's author
    before its co-authors). What the question is about: the nodes it steps to ("who last changed
    the caller of X": X's callers), else the ones it names. A merge commit's author brought the
    change in but did not write it, so a merge is the newest change only when nothing else changed
    the node (see ``_change_rank``)."""
    stepped = {key for key, link in result.linked.items() if link.reason is LinkReason.STEPPED}
    subjects = stepped or {key for key, link in result.linked.items() if link.named}
    newest: dict[str, tuple[bool, bool, str, str]] = {}  # subject -> its newest change's _change_rank
    authors: dict[str, set[str]] = {}
    for e in edges:
        # A change to a class's method changes the class.
        subject = e.step.dst if e.step.dst in subjects else _owner_in(e.step.dst, subjects)
        if e.step.type in _CHANGE_TYPES and subject is not None:
            newest[subject] = max(newest.get(subject, _NO_CHANGE), _change_rank(e.step.src, cat))
        elif e.step.type == RelType.AUTHORED.value:
            authors.setdefault(e.step.dst, set()).add(e.step.src)
    # A root commit only created what it touched: no answer to who changed it.
    newest = {subject: rank for subject, rank in newest.items() if rank[0]}
    if not newest:
        return final
    out = dict(final)
    top = max(final.values(), default=1.0)
    commits = {commit for *_, commit in newest.values()}
    main_author = {key: person_key(str(node.props.get("author_email") or ""))
                   for key, node in (store.get_nodes(commits).items() if NodeKind.PERSON in answer else ())}
    for commit in commits:
        picked = ([commit] if not answer or NodeKind.COMMIT in answer else []) + sorted(
            authors.get(commit, ()) if NodeKind.PERSON in answer else ())
        for key in picked:
            out[key] = top + final.get(key, 0.0)
        helpers = [out[k] for k in authors.get(commit, ()) if k != main_author.get(commit)]
        if main_author.get(commit) in picked and helpers:
            # Just above its co-authors: the one who wrote the change, the others helped.
            author = main_author[commit]
            out[author] = max(out[author], max(helpers) * (1 + 1e-6))
    return out


def _most_changes_first(final: dict[str, float], store: GraphStore, cat: Catalog, result: GraphResult,
                        as_of: str | None) -> dict[str, float]:
    """For "who wrote most of regexp.go", "who knows the router best": the people by how many of
    the changes to the code the question names (or to its members) they authored, above everyone
    else, then in ``final``'s order. A count is no PageRank, which lifts whoever wrote much nearby;
    and it is read from the store (three reads), not from the walk, which may stop short of some
    authors. Merge commits bring others' changes in and root commits only create: neither counts."""
    subjects = sorted(key for key, link in result.linked.items()
                      if link.named and cat.nodes.get(key, _NO_INFO)[0] in (NodeKind.SYMBOL, NodeKind.FILE))
    if not subjects:
        return final
    members = [e.other for e in store.incident_edges(subjects, rel_types=[RelType.CONTAINS.value], direction="out",
                                                     as_of=as_of)]
    changed = store.incident_edges(sorted(set(subjects) | set(members)), rel_types=sorted(_CHANGE_TYPES),
                                   direction="in", as_of=as_of)
    changes = {e.other for e in changed if e.other not in cat.merge_commits and e.other not in cat.root_commits}
    counts: dict[str, int] = {}
    for e in store.incident_edges(sorted(changes), rel_types=[RelType.AUTHORED.value], direction="in", as_of=as_of):
        counts[e.other] = counts.get(e.other, 0) + 1
    if not counts:
        return final
    out = dict(final)
    top = max(final.values(), default=1.0)
    for person, n in counts.items():
        out[person] = top * (1.0 + n) + final.get(person, 0.0)
    return out


def _superseded_last(final: dict[str, float], edges: list[Edge], cat: Catalog, ref_date: str | None,
                     config: WalkConfig) -> dict[str, float]:
    """``final`` with the decisions not in force at ``ref_date`` (now, without one) moved down.

    A decision superseded by then (by a decision dated at or before ``ref_date``) gives its place
    to the one that superseded it and follows right after it: it is still what the question's
    words describe. A decision dated after ``ref_date`` (a text match can bring one in as a seed)
    did not exist yet and goes below every decision that did."""
    def dated_by_then(key: str) -> bool:
        return ref_date is None or (cat.nodes.get(key, (None, "", None))[2] or "") <= ref_date

    out = dict(final)
    replaced = sorted((e.step.src, e.step.dst) for e in edges
                      if e.step.type == RelType.SUPERSEDES.value and e.step.dst in final and dated_by_then(e.step.src))
    for new, old in replaced:
        top = max(out[old], out.get(new, 0.0))
        out[new], out[old] = top, top * _JUST_BELOW
    decisions = {key for key in out if cat.nodes.get(key, (None,))[0] is NodeKind.DECISION}
    later = {key for key in decisions if not dated_by_then(key)}
    standing = decisions - later
    if later and standing and max(out[key] for key in later) >= (low := min(out[key] for key in standing)):
        scale = config.off_kind_factor * low / max(out[key] for key in later)
        out = {key: v * scale if key in later else v for key, v in out.items()}
    return out


_JUST_BELOW = 1.0 - 1e-6  # a score just under another one: the order is the only thing it says


def _moved(namesake: tuple[str | None, str | None], moment: str, removal: bool) -> bool:
    """Whether a namesake's lifetime makes ``moment`` (an end for a removal, else a beginning) a
    move of the code rather than its removal or addition."""
    began, ended = namesake
    return (began is not None and began >= moment) if removal else (ended is not None and ended <= moment)


def _owner_in(key: str, owners: set[str]) -> str | None:
    """The symbol of ``owners`` that ``key`` (``sym:path::A.b.c``) is a member of, if any."""
    while key.startswith("sym:") and "." in key.rsplit("::", 1)[-1]:
        key = key.rsplit(".", 1)[0]
        if key in owners:
            return key
    return None


_CHANGE_TYPES = frozenset({RelType.MODIFIED.value, RelType.CHANGED.value})
# Relationships between pieces of code a question may count ("called the most", "imported by the
# most files", "the most subclasses").
_COUNTED = (RelType.CALLS, RelType.IMPORTS, RelType.INHERITS)
_CODE = frozenset({NodeKind.SYMBOL, NodeKind.FILE})


def _counted_relation(q: Question, answer: set[NodeKind], result: GraphResult, cat: Catalog,
                      as_of: str | None) -> tuple[str, str] | None:
    """The relationship and end a question counts over the whole project ("which module is
    imported by the most files?": IMPORTS, the imported end; "which function calls the most
    others?": CALLS, the calling end), or None: it asks for no most, no code, names no direction,
    names code of its own (a count about that code is another question), or looks at the past."""
    if not q.asks_most or as_of is not None or not answer or not answer <= _CODE:
        return None
    if any(link.named and cat.nodes.get(key, _NO_INFO)[0] in _CODE for key, link in result.linked.items()):
        return None
    for rel in _COUNTED:
        if rel in q.rel_types and rel in q.directions:
            return rel.value, q.directions[rel]
    return None


def _most_related_first(final: dict[str, float], store: GraphStore, cat: Catalog, kind: NodeKind,
                        rel: str, end: str, *, limit: int, tests: bool) -> tuple[dict[str, float], list[str]]:
    """The project's code of the asked kind (a module is a file, a function a symbol) by how many
    distinct nodes it has at the other end of
    ``rel`` (``end``: the end it stands at), the ``limit`` best above everything else, then in
    ``final``'s order. A count over the whole graph (``Catalog.degree``), not over what the walk
    reached from the question's words; test code counts only for a question that speaks of tests.
    Returns the scores and the counted keys, most first."""
    counts = cat.degree(store, rel, end, by_file=kind is NodeKind.FILE, tests=tests)
    ranked = sorted((key for key in counts if cat.nodes.get(key, _NO_INFO)[0] is kind),
                    key=lambda key: (-counts[key], key))[:limit]
    if not ranked:
        return final, []
    top = max(final.values(), default=1.0) or 1.0
    most = counts[ranked[0]]
    for key in ranked:
        final[key] = top * (2.0 + counts[key] / most)
    return final, ranked


def _latest_change_factors(edges: list[Edge], cat: Catalog, config: WalkConfig) -> dict[tuple[str, str, str], float]:
    """For "who last changed X": of the commits that changed each symbol or file, the newest one's
    (by ``_change_rank``) change relationship weighs ``latest_change_boost`` times more, the older
    ones less."""
    newest: dict[str, tuple[tuple[bool, bool, str, str], tuple[str, str, str]]] = {}
    changes: list[tuple[str, str, str]] = []
    for e in edges:
        if e.step.type not in _CHANGE_TYPES:
            continue
        ident = (e.step.src, e.step.type, e.step.dst)
        changes.append(ident)
        newest[e.step.dst] = max(newest.get(e.step.dst, (_NO_CHANGE, ident)), (_change_rank(e.step.src, cat), ident))
    latest = {ident for _, ident in newest.values()}
    return {ident: config.latest_change_boost if ident in latest else config.older_change_factor for ident in changes}


def _change_rank(commit: str, cat: Catalog) -> tuple[bool, bool, str, str]:
    """How recent a change ``commit`` is, as a sortable key: a root commit (which only creates) and
    a merge (whose author brought others' changes in) rank below any other change, then the date."""
    return (commit not in cat.root_commits, commit not in cat.merge_commits,
            cat.nodes.get(commit, (None, "", None))[2] or "", commit)


_NO_CHANGE = (False, False, "", "")


def _shipped_in(final: dict[str, float], store: GraphStore, as_of: str | None,
                k: int) -> tuple[dict[str, float], dict[str, tuple[str, Step]]]:
    """A release answers through the commits it shipped first: each of the ``k`` best commits lifts
    its release to just above itself ("which release removed X": the commit that removed X ranks
    first, so its release ranks above it). Also returns, for each release lifted, the commit and
    the step that lifted it (its evidence)."""
    commits = _best({key: v for key, v in final.items() if key.startswith("commit:")}, k)
    if not commits:
        return final, {}
    out, via = dict(final), {}
    # Only each commit's own RELEASED_IN step: a commit's other relationships (every symbol it
    # modified) are not read.
    for edge in store.incident_edges(commits, rel_types=[RelType.RELEASED_IN.value], direction="out", as_of=as_of):
        lifted = final[edge.origin] * 1.001
        if lifted > out.get(edge.other, 0.0):
            out[edge.other] = lifted
            via[edge.other] = (edge.origin, edge.step)
    return out, via


def _best(scores: dict[str, float], k: int) -> list[str]:
    """The ``k`` keys of highest score, by descending score, then key. Only the keys scoring at
    least the ``k``-th highest score are sorted (a walk scores thousands of nodes)."""
    if len(scores) > 2 * k > 0:
        values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
        cut = float(np.partition(values, len(values) - k)[len(values) - k])
        scores = {key: v for key, v in scores.items() if v >= cut}
    return sorted(scores, key=lambda key: (-scores[key], key))[:k]


_NO_INFO = (None,)


def _path_to(key: str, parent: dict[str, tuple[str, Step] | None]) -> Path:
    nodes, steps = [key], []
    while (link := parent.get(nodes[-1])) is not None:
        origin, step = link
        nodes.append(origin)
        steps.append(step)
    return Path(tuple(reversed(nodes)), tuple(reversed(steps)))
