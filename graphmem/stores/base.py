"""The ``GraphStore`` protocol and the traversal semantics every store shares.

A store is bound to one project at construction: nothing it reads or writes can reach another
project's nodes. Stores only *fetch* (``incident_edges``); breadth-first expansion, shortest paths
and subgraphs are computed here once, so that Neo4j and the embedded store answer the same question
with the same result.

Traversal rules:
- Only elements valid at ``as_of`` are followed (open ones when ``as_of`` is ``None``).
- Direction ``"out"`` follows relationships from source to target, ``"in"`` the other way,
  ``"both"`` either way; a path records each relationship as stored.
- Ties are broken by sorting (frontier by key; edges by type, neighbour key, direction), so a result
  does not depend on storage order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from graphmem.errors import ModelError
from graphmem.model import Chunk, Node, NodeKind, Relationship, RelType

Direction = Literal["out", "in", "both"]
DIRECTIONS = ("out", "in", "both")


# Meta entry present while an ingest's writes are under way (or after one was killed mid-write).
INCOMPLETE = "ingest_incomplete"
# Meta entry a store shared by processes (Neo4j) changes with every write that may change a
# project's chunks: a process whose local indexes were synced at another value is behind.
CHUNKS_GENERATION = "chunks_generation"
# Meta entry every write that adds, renames or closes nodes a question may name sets (an ingest, an
# enrichment, entity resolution, a memory or an agent session): graph retrieval rebuilds its name
# catalog when it moves, in this process or another.
NAMES_STAMP = "names_changed_at"
# Meta entry every write of a project's nodes or relationships changes (a new random value): what is
# derived from the whole graph and kept between processes (the name catalog) is reused only while
# it holds the value it was derived at.
GENERATION = "graph_generation"

@dataclass(frozen=True, slots=True)
class Step:
    """One relationship on a path, as stored: ``src -[type]-> dst``."""

    src: str
    type: str
    dst: str

    def as_dict(self) -> dict[str, str]:
        return {"src": self.src, "type": self.type, "dst": self.dst}


@dataclass(frozen=True, slots=True)
class Path:
    """A walk through the graph: ``nodes[i]`` and ``nodes[i+1]`` are joined by ``steps[i]``."""

    nodes: tuple[str, ...]
    steps: tuple[Step, ...]

    def __len__(self) -> int:
        return len(self.steps)

    def as_dict(self) -> dict[str, object]:
        return {"nodes": list(self.nodes), "rels": [s.as_dict() for s in self.steps]}

    def describe(self) -> str:
        """``a -CALLS-> b <-OWNS- c``."""
        parts = [self.nodes[0]] if self.nodes else []
        for here, step, there in zip(self.nodes, self.steps, self.nodes[1:]):
            arrow = f" -{step.type}-> " if step.src == here else f" <-{step.type}- "
            parts.append(arrow + there)
        return "".join(parts)


@dataclass(slots=True)
class Hop:
    """A node reached by a traversal, its depth and the path that first reached it."""

    node: Node
    depth: int
    path: Path


@dataclass(slots=True)
class Subgraph:
    """Nodes and the relationships among them."""

    nodes: dict[str, Node] = field(default_factory=dict)
    rels: list[Relationship] = field(default_factory=list)


@dataclass(slots=True)
class Counts:
    """How much a project holds. Open elements by kind/type, closed ones in total."""

    nodes: dict[str, int] = field(default_factory=dict)
    rels: dict[str, int] = field(default_factory=dict)
    closed_nodes: int = 0
    closed_rels: int = 0
    chunks: int = 0

    @property
    def total_nodes(self) -> int:
        return sum(self.nodes.values())

    @property
    def total_rels(self) -> int:
        return sum(self.rels.values())

    def as_dict(self) -> dict[str, object]:
        return {
            "nodes": dict(sorted(self.nodes.items())),
            "rels": dict(sorted(self.rels.items())),
            "total_nodes": self.total_nodes,
            "total_rels": self.total_rels,
            "closed_nodes": self.closed_nodes,
            "closed_rels": self.closed_rels,
            "chunks": self.chunks,
        }


@dataclass(slots=True)
class WriteSummary:
    """What a write did. ``missing_endpoints`` counts relationships skipped for a missing or closed end."""

    nodes: int = 0
    rels: int = 0
    chunks: int = 0
    closed_nodes: int = 0
    closed_rels: int = 0
    removed_nodes: int = 0
    removed_rels: int = 0
    removed_chunks: int = 0
    missing_endpoints: int = 0

    def add(self, other: WriteSummary) -> WriteSummary:
        for name in self.__slots__:  # type: ignore[attr-defined]
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self


@dataclass(frozen=True, slots=True)
class Keep:
    """Elements a withdrawal leaves alone: those the withdrawn sources assert again right now.

    Lets a changed file be replaced without churn: upsert what it says now, then withdraw the file
    from everything else it said before.
    """

    nodes: frozenset[str] = frozenset()
    rels: frozenset[tuple[str, str, str]] = frozenset()
    chunks: frozenset[int] = frozenset()

    @classmethod
    def of(cls, nodes: Iterable[Node] = (), rels: Iterable[Relationship] = (), chunks: Iterable[Chunk] = ()) -> Keep:
        return cls(frozenset(n.key for n in nodes), frozenset(r.ident for r in rels),
                   frozenset(c.id for c in chunks))


@dataclass(frozen=True, slots=True)
class Hub:
    """How graph retrieval crosses a hub: a node with more than ``degree`` relationships keeps only
    those of the types in ``keep`` and of its types with at most ``type_limit`` relationships (a
    service's owners and dependencies, not its thousands of files)."""

    degree: int
    type_limit: int
    keep: frozenset[str] = frozenset()

    def crossing(self, types: Sequence[str]) -> set[str] | None:
        """Of one node's relationships (their types, one entry each), the types to follow; ``None``
        when the node is no hub and every relationship is followed."""
        if len(types) <= self.degree:
            return None
        per_type: dict[str, int] = {}
        for t in types:
            per_type[t] = per_type.get(t, 0) + 1
        return {t for t, n in per_type.items() if t in self.keep or n <= self.type_limit}

    def thin(self, edges: list[Edge]) -> list[Edge]:
        """``edges`` of several origins, thinned per origin."""
        by_origin: dict[str, list[Edge]] = {}
        for e in edges:
            by_origin.setdefault(e.origin, []).append(e)
        out: list[Edge] = []
        for group in by_origin.values():
            kept = self.crossing([e.step.type for e in group])
            out += group if kept is None else [e for e in group if e.step.type in kept]
        return out


@dataclass(frozen=True, slots=True)
class Edge:
    """A relationship seen from one of its ends (what ``incident_edges`` returns)."""

    origin: str  # the node the traversal came from
    step: Step
    other: str  # the node at the other end

    @property
    def outgoing(self) -> bool:
        return self.step.src == self.origin


@runtime_checkable
class GraphStore(Protocol):
    """What ingestion and retrieval need from a graph store, for one project."""

    @property
    def project(self) -> str: ...

    def ensure_schema(self) -> None:
        """Create constraints and indexes; idempotent, never implicit."""

    def atomic(self) -> AbstractContextManager[None]:
        """A context in which writes go in together where the store can (the embedded store: one
        transaction); elsewhere the writes go as they come and ``ingest_incomplete`` says so."""
        ...

    def upsert(
        self,
        nodes: Iterable[Node] = (),
        rels: Iterable[Relationship] = (),
        chunks: Iterable[Chunk] = (),
        *,
        at: str | None = None,
    ) -> WriteSummary:
        """Insert or update, in one atomic batch (per store's batch size), idempotently.

        Properties merge (``None`` removes one); ``sources`` gains the element's source path; a
        closed element is reopened from ``at``. Chunks are replaced whole by id. Relationships whose
        ends do not exist or are closed are skipped and counted (``missing_endpoints``).
        """

    def set_sources(self, nodes: Mapping[str, Sequence[str]] | None = None,
                    rels: Mapping[tuple[str, str, str], Sequence[str]] | None = None) -> WriteSummary:
        """Replace the source lists of existing elements (``upsert`` only adds sources; undoing an
        entity merge takes back the ones it added). Unknown elements are ignored; a list must not be
        empty (close or remove an element instead). Counts the nodes and relationships changed."""

    def close_sources(self, paths: Iterable[str], *, at: str | None = None, keep: Keep | None = None) -> WriteSummary:
        """Withdraw these source paths: an element left with no source is closed at ``at``, as are
        the open relationships of a node so closed; chunks from these paths are deleted. Elements
        in ``keep`` are left as they are."""

    def remove_sources(self, paths: Iterable[str]) -> WriteSummary:
        """Like ``close_sources`` but deletes what it would close."""

    def get_node(self, key: str) -> Node | None:
        """The node with this key, open or closed."""

    def get_nodes(self, keys: Iterable[str]) -> dict[str, Node]:
        """The nodes with these keys that exist, open or closed."""

    def get_relationships(self, keys: Iterable[str], *, as_of: str | None = None) -> list[Relationship]:
        """Relationships valid at ``as_of`` that start or end at any of these keys."""

    def incident_edges(
        self,
        keys: Sequence[str],
        *,
        rel_types: Sequence[str] | None = None,
        direction: Direction = "both",
        as_of: str | None = None,
    ) -> list[Edge]:
        """Relationships valid at ``as_of`` touching ``keys`` whose other end is also valid."""

    def expand(self, keys: Sequence[str], *, as_of: str | None = None, hub: Hub | None = None) -> list[Edge]:
        """One step of graph retrieval: every relationship (either direction) valid at ``as_of``
        touching ``keys`` whose other end is valid too (Neo4j: ``cypher/retrieval/expand.cypher``).
        With ``hub``, a node's relationships are thinned as ``Hub.thin`` says."""

    def neighbors(self, key: str, *, depth: int = 1, rel_types: Sequence[str] | None = None,
                  direction: Direction = "both", as_of: str | None = None, limit: int = 100) -> list[Hop]:
        """Typed neighbours of ``key`` to ``depth``, nearest first, each with its path."""

    def paths(self, src: str, dst: str, *, max_depth: int = 4, rel_types: Sequence[str] | None = None,
              direction: Direction = "both", as_of: str | None = None, limit: int = 10) -> list[Path]:
        """All shortest paths between two keys."""

    def subgraph(self, seeds: Iterable[str], *, depth: int = 1, rel_types: Sequence[str] | None = None,
                 direction: Direction = "both", as_of: str | None = None, max_nodes: int = 500) -> Subgraph:
        """The neighbourhood of ``seeds`` with the relationships among it."""

    def iter_nodes(self, kinds: Iterable[NodeKind] | None = None, *, include_closed: bool = False) -> Iterator[Node]:
        """Every node (of these kinds), in key order."""

    def iter_rels(self, *, include_closed: bool = False) -> Iterator[Relationship]:
        """Every relationship, in identity order."""

    def iter_chunks(self) -> Iterator[Chunk]:
        """Every chunk, in id order."""

    def get_chunks(self, node_keys: Iterable[str]) -> list[Chunk]:
        """The chunks of these nodes."""

    def get_chunks_by_id(self, ids: Iterable[int]) -> dict[int, Chunk]:
        """The chunks with these ids that exist."""

    def chunk_ids(self) -> set[int]:
        """Ids of every chunk (to check an index against)."""

    def counts(self) -> Counts:
        """Open nodes by kind, open relationships by type, closed totals, chunks."""

    def has_nodes(self) -> bool:
        """Whether the project holds an open node (what ``counts`` would say, without counting)."""

    def save_snapshot(self) -> bool:
        """Keep what a new process needs to open the graph quickly, where the store has such a
        thing (the embedded store's rows, read instead of its database while the graph is
        unchanged); False when nothing was saved."""

    def get_meta(self, name: str) -> str | None:
        """A project-level setting such as the last ingested commit."""

    def set_meta(self, values: dict[str, str | None]) -> None:
        """Set (``None`` deletes) project-level settings."""

    def source_states(self) -> dict[str, str]:
        """Content hash of every ingested source path."""

    def set_source_states(self, states: dict[str, str | None]) -> None:
        """Record (``None`` forgets) the content hash of source paths."""

    def drop_project(self) -> None:
        """Delete everything this project holds."""

    def close(self) -> None:
        """Release connections and files."""


def to_networkx(store: GraphStore, *, include_closed: bool = False):  # type: ignore[no-untyped-def]
    """The project's graph as a ``networkx.MultiDiGraph``, for analysis and drawing in notebooks.

    Each node carries ``kind``, ``name`` and ``node`` (the :class:`Node`); each relationship is
    keyed by its type and carries ``rel`` (the :class:`Relationship`). networkx is imported here
    only: no store keeps its graph in it, and a question never pays for its import.
    """
    import networkx as nx

    graph = nx.MultiDiGraph()
    for node in store.iter_nodes(include_closed=include_closed):
        graph.add_node(node.key, kind=node.kind.value, name=node.name, node=node)
    for rel in store.iter_rels(include_closed=include_closed):
        if rel.src in graph and rel.dst in graph:
            graph.add_edge(rel.src, rel.dst, key=rel.type.value, rel=rel)
    return graph


# --- shared traversal ---------------------------------------------------------------------------


def check_traversal(direction: str, rel_types: Sequence[str] | None, depth: int) -> list[str] | None:
    """Validate traversal arguments once, for every store."""
    if direction not in DIRECTIONS:
        raise ModelError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    if depth < 0:
        raise ModelError("depth must be >= 0")
    if rel_types is None:
        return None
    out = []
    for name in rel_types:
        try:
            out.append(RelType(str(name).upper()).value)
        except ValueError as exc:
            raise ModelError(f"unknown relationship type {name!r}") from exc
    return sorted(set(out))


def _edge_order(edge: Edge) -> tuple[str, str, bool]:
    return (edge.step.type, edge.other, not edge.outgoing)


def bfs(
    store: GraphStore,
    start: Sequence[str],
    *,
    depth: int,
    rel_types: Sequence[str] | None = None,
    direction: Direction = "both",
    as_of: str | None = None,
    max_nodes: int = 10_000,
) -> dict[str, tuple[int, Path]]:
    """Breadth-first expansion from ``start``: reached key -> (depth, first path that reached it)."""
    types = check_traversal(direction, rel_types, depth)
    reached: dict[str, tuple[int, Path]] = {k: (0, Path((k,), ())) for k in sorted(set(start))}
    frontier = sorted(reached)
    for level in range(1, depth + 1):
        if not frontier or len(reached) >= max_nodes:
            break
        by_origin: dict[str, list[Edge]] = {}
        for edge in store.incident_edges(frontier, rel_types=types, direction=direction, as_of=as_of):
            by_origin.setdefault(edge.origin, []).append(edge)
        nxt: list[str] = []
        for origin in frontier:
            base = reached[origin][1]
            for edge in sorted(by_origin.get(origin, ()), key=_edge_order):
                if edge.other in reached:
                    continue
                reached[edge.other] = (level, Path(base.nodes + (edge.other,), base.steps + (edge.step,)))
                nxt.append(edge.other)
                if len(reached) >= max_nodes:
                    break
            if len(reached) >= max_nodes:
                break
        frontier = sorted(nxt)
    return reached


class TraversalMixin:
    """``neighbors``, ``paths``, ``subgraph`` and ``expand`` for any store that implements the fetch
    methods (``get_node(s)``, ``get_relationships``, ``incident_edges``), so every store answers alike."""

    def expand(self, keys: Sequence[str], *, as_of: str | None = None, hub: Hub | None = None) -> list[Edge]:
        edges: list[Edge] = self.incident_edges(keys, as_of=as_of)  # type: ignore[attr-defined]
        return hub.thin(edges) if hub is not None else edges

    def neighbors(
        self,
        key: str,
        *,
        depth: int = 1,
        rel_types: Sequence[str] | None = None,
        direction: Direction = "both",
        as_of: str | None = None,
        limit: int = 100,
    ) -> list[Hop]:
        """Nodes within ``depth`` of ``key`` (excluding it), nearest first, each with its path."""
        start = self.get_node(key)
        if start is None or not start.valid_at(as_of):
            return []
        reached = bfs(self, [key], depth=depth, rel_types=rel_types,  # type: ignore[arg-type]
                      direction=direction, as_of=as_of, max_nodes=limit + 1)
        order = sorted((d, k) for k, (d, _) in reached.items() if k != key)[:limit]
        nodes = self.get_nodes(k for _, k in order)
        return [Hop(nodes[k], d, reached[k][1]) for d, k in order if k in nodes]

    def paths(
        self,
        src: str,
        dst: str,
        *,
        max_depth: int = 4,
        rel_types: Sequence[str] | None = None,
        direction: Direction = "both",
        as_of: str | None = None,
        limit: int = 10,
        max_frontier: int = 20_000,
    ) -> list[Path]:
        """All shortest paths from ``src`` to ``dst`` (at most ``max_depth`` hops), up to ``limit``.

        Distinct node sequences only; between two nodes joined by several relationships the first by
        (type, direction) is reported. Sorted by node sequence.
        """
        types = check_traversal(direction, rel_types, max_depth)
        nodes = self.get_nodes([src, dst])
        if src not in nodes or dst not in nodes or not nodes[src].valid_at(as_of) or not nodes[dst].valid_at(as_of):
            return []
        if src == dst:
            return [Path((src,), ())]
        # parents[k] = edges by which k was first reached, all from the previous level
        parents: dict[str, list[Edge]] = {src: []}
        frontier = [src]
        found = False
        for _level in range(max_depth):
            if not frontier or found:
                break
            level_parents: dict[str, list[Edge]] = {}
            for edge in self.incident_edges(frontier, rel_types=types, direction=direction, as_of=as_of):
                if edge.other in parents:
                    continue
                level_parents.setdefault(edge.other, []).append(edge)
            parents.update(level_parents)
            found = dst in level_parents
            frontier = sorted(level_parents)
            if len(parents) > max_frontier:
                break
        if not found:
            return []

        def walk(key: str) -> Iterator[tuple[tuple[str, ...], tuple[Step, ...]]]:
            if key == src:
                yield (src,), ()
                return
            best: dict[str, Edge] = {}
            for edge in sorted(parents[key], key=lambda e: (e.step.type, not e.outgoing)):
                best.setdefault(edge.origin, edge)
            for origin in sorted(best):
                for nodes_, steps in walk(origin):
                    yield nodes_ + (key,), steps + (best[origin].step,)

        out: list[Path] = []
        for nodes_, steps in walk(dst):
            out.append(Path(nodes_, steps))
            if len(out) >= limit:
                break
        return out

    def subgraph(
        self,
        seeds: Iterable[str],
        *,
        depth: int = 1,
        rel_types: Sequence[str] | None = None,
        direction: Direction = "both",
        as_of: str | None = None,
        max_nodes: int = 500,
    ) -> Subgraph:
        """The nodes within ``depth`` of any seed and every valid relationship among them."""
        seeds = [k for k, n in self.get_nodes(seeds).items() if n.valid_at(as_of)]
        reached = bfs(self, seeds, depth=depth, rel_types=rel_types,  # type: ignore[arg-type]
                      direction=direction, as_of=as_of, max_nodes=max_nodes)
        nodes = self.get_nodes(reached)
        types = set(check_traversal(direction, rel_types, depth) or ()) or None
        rels = {
            r.ident: r
            for r in self.get_relationships(nodes, as_of=as_of)
            if r.src in nodes and r.dst in nodes and (types is None or r.type.value in types)
        }
        return Subgraph(nodes=nodes, rels=[rels[i] for i in sorted(rels)])
