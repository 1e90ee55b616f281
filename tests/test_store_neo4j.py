"""The Neo4j store passes the store contract, against a real server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.contract.store_contract import StoreContract

pytestmark = pytest.mark.neo4j


class TestNeo4jStore(StoreContract):
    @pytest.fixture
    def make_store(self, neo4j_store_factory: Callable[[str], Any]) -> Callable[[str], Any]:
        return neo4j_store_factory


def random_graph(seed: int, n_files: int = 12, n_syms: int = 60, n_calls: int = 150):
    """A random code graph: files containing symbols that call each other."""
    import random

    from graphmem.model import Node, Provenance, Relationship, RelType

    rng = random.Random(seed)
    files = [f"m{i}.py" for i in range(n_files)]
    nodes, rels = [], []
    for f in files:
        nodes.append(Node(f"file:{f}", f, Provenance(f, "code")))
    syms = []
    for i in range(n_syms):
        f = rng.choice(files)
        key = f"sym:{f}::s{i}"
        syms.append((key, f))
        nodes.append(Node(key, f"s{i}", Provenance(f, "code"), {"i": i}))
        rels.append(Relationship(f"file:{f}", RelType.CONTAINS, key, Provenance(f, "code")))
    for _ in range(n_calls):
        (a, fa), (b, _) = rng.choice(syms), rng.choice(syms)
        rels.append(Relationship(a, rng.choice([RelType.CALLS, RelType.IMPORTS]) if a != b else RelType.CALLS,
                                 b, Provenance(fa, "code")))
    return nodes, rels, files, [k for k, _ in syms]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_neo4j_and_embedded_answer_traversals_identically(
    seed: int, neo4j_store_factory: Callable[[str], Any], embedded_store_factory: Callable[[str], Any]
) -> None:
    import random

    nodes, rels, files, syms = random_graph(seed)
    neo, emb = neo4j_store_factory("same"), embedded_store_factory("same")
    for store in (neo, emb):
        store.upsert(nodes, rels, at="2025-01-01T00:00:00Z")
        store.close_sources(files[:2], at="2025-02-01T00:00:00Z")
    assert neo.counts().as_dict() == emb.counts().as_dict()
    rng = random.Random(seed)
    for _ in range(8):
        a, b = rng.choice(syms), rng.choice(syms)
        for kw in ({}, {"direction": "out"}, {"rel_types": ["CALLS"]}, {"as_of": "2025-01-15T00:00:00Z"}):
            def hops(store: Any, a: str = a, kw: dict = kw) -> list[tuple[str, int, tuple[str, ...]]]:
                return [(h.node.key, h.depth, h.path.nodes) for h in store.neighbors(a, depth=2, **kw)]

            assert hops(neo) == hops(emb)
            assert neo.paths(a, b, max_depth=5, **kw) == emb.paths(a, b, max_depth=5, **kw)
        sub_n, sub_e = neo.subgraph([a, b], depth=2), emb.subgraph([a, b], depth=2)
        assert set(sub_n.nodes) == set(sub_e.nodes)
        assert [r.ident for r in sub_n.rels] == [r.ident for r in sub_e.rels]


@pytest.mark.parametrize("kind", ["neo4j", "embedded"])
def test_relationships_written_after_their_nodes_are_never_doubled(
    kind: str, neo4j_store_factory: Callable[[str], Any], embedded_store_factory: Callable[[str], Any]
) -> None:
    """Relationships upserted after their nodes, with another writer in between (another store on
    the project) or an earlier upsert of some of them, exist once each."""
    from graphmem.model import Relationship

    make = neo4j_store_factory if kind == "neo4j" else embedded_store_factory
    nodes, rels, _, _ = random_graph(4)
    expected = len({r.ident for r in rels})

    def total(store: Any) -> int:
        return sum(store.counts().rels.values())

    first, other = make("fresh-a"), make("fresh-a")
    first.upsert(nodes, at="2025-01-01T00:00:00Z")
    other.upsert([], rels[:40], at="2025-01-01T00:00:00Z")  # written by someone else meanwhile
    summary = first.upsert([], rels, at="2025-01-01T00:00:00Z")
    assert summary.rels == expected and total(first) == expected

    again = make("fresh-b")
    again.upsert(nodes, at="2025-01-01T00:00:00Z")
    again.upsert([], rels[:40], at="2025-01-01T00:00:00Z")
    marked = [Relationship(r.src, r.type, r.dst, r.provenance, {"seen": 2}) for r in rels]
    again.upsert([], marked, at="2025-01-01T00:00:00Z")
    assert total(again) == expected
    assert {r.ident: r.props.get("seen") for r in again.iter_rels()} == {r.ident: 2 for r in rels}


@pytest.mark.parametrize("kind", ["neo4j", "embedded"])
def test_one_upsert_of_nodes_and_relationships_run_again_writes_each_once(
    kind: str, neo4j_store_factory: Callable[[str], Any], embedded_store_factory: Callable[[str], Any]
) -> None:
    """An ingest upserts its nodes and their relationships together: the Neo4j store creates the
    relationships of the nodes it has just created outright. Running it again (every node known),
    or over a project that already holds some of the nodes and relationships, writes each once."""
    from graphmem.model import Relationship

    make = neo4j_store_factory if kind == "neo4j" else embedded_store_factory
    nodes, rels, _, _ = random_graph(7)
    expected = len({r.ident for r in rels})

    def total(store: Any) -> int:
        return sum(store.counts().rels.values())

    store = make("together")
    assert store.upsert(nodes, rels + rels[:10], at="2025-01-01T00:00:00Z").rels == expected
    assert total(store) == expected
    marked = [Relationship(r.src, r.type, r.dst, r.provenance, {"seen": 2}) for r in rels]
    assert store.upsert(nodes, marked, at="2025-01-02T00:00:00Z").rels == expected
    assert total(store) == expected
    assert {r.ident: r.props.get("seen") for r in store.iter_rels()} == {r.ident: 2 for r in rels}

    # Half the nodes (files first) and the relationships among them known: the rest new.
    half = store_half = make("half")
    known = {n.key for n in nodes[: len(nodes) // 2]}
    half.upsert([n for n in nodes if n.key in known],
                [r for r in rels if r.src in known and r.dst in known], at="2025-01-01T00:00:00Z")
    assert half.upsert(nodes, marked, at="2025-01-02T00:00:00Z").rels == expected
    assert total(store_half) == expected
    assert {r.ident: r.props.get("seen") for r in half.iter_rels()} == {r.ident: 2 for r in rels}


def test_one_upsert_of_new_elements_of_every_shape_reads_back_as_in_the_embedded_store(
    neo4j_store_factory: Callable[[str], Any], embedded_store_factory: Callable[[str], Any]
) -> None:
    """New nodes are created (open ones found again by internal id), new relationships between
    them linked through those ids, the rest by key: a node born closed takes no relationship, one
    with two sources and relationships with properties of their own keep what they say, chunks
    land on their nodes, new or already known."""
    from dataclasses import replace

    from graphmem.model import Chunk, Provenance, Relationship, RelType

    nodes, rels, _, syms = random_graph(9)
    known = nodes[:5]  # files already in the project, with a relationship of their own
    closed = replace(nodes[20], valid_to="2025-01-05T00:00:00Z")
    shared = replace(nodes[21], sources=(nodes[21].provenance.source_path, "elsewhere.py"))
    batch = [*nodes[:20], closed, shared, *nodes[22:]]
    extra = [Relationship(r.src, r.type, r.dst, r.provenance, {"weight": 3}) for r in rels[:15]]
    chunks = [Chunk(n.key, 0, f"text of {n.key}", "code", Provenance(n.provenance.source_path, "code"))
              for n in nodes[::3]]
    link = Relationship(known[0].key, RelType.RELATED_TO, known[1].key, Provenance("m0.py", "code"))
    states = []
    for store in (neo4j_store_factory("shapes"), embedded_store_factory("shapes")):
        store.upsert(known, [link], at="2025-01-01T00:00:00Z")
        summary = store.upsert(batch, extra + rels[15:] + [link], chunks, at="2025-01-02T00:00:00Z")
        states.append((
            (summary.rels, summary.missing_endpoints, summary.chunks),
            store.counts().as_dict(),
            sorted((r.ident, tuple(sorted(r.props.items())), r.valid_from, r.valid_to, r.sources)
                   for r in store.iter_rels(include_closed=True)),
            sorted((n.key, n.valid_from, n.valid_to, n.sources, tuple(sorted(n.props.items())))
                   for n in store.iter_nodes(include_closed=True)),
            sorted((c.node_key, c.text) for c in store.get_chunks([n.key for n in nodes])),
        ))
    assert states[0] == states[1]
    assert states[0][0][1] > 0  # the closed node's relationships were skipped


def test_a_writer_between_the_nodes_and_relationships_of_one_upsert_doubles_nothing(
    neo4j_store_factory: Callable[[str], Any]
) -> None:
    """Another store writes relationships of the nodes an upsert has just created, after those
    nodes and before the upsert's own relationships: the upsert sees the project changed and
    merges its relationships instead of creating them, so none exists twice. (The relationship
    jobs run side by side, so the other write comes just before the first of them: once every
    node is in.)"""
    from graphmem.model import Relationship
    from graphmem.stores.neo4j import Job, Neo4jStore

    nodes, rels, _, _ = random_graph(8)
    expected = len({r.ident for r in rels})
    other = neo4j_store_factory("between")
    interleaved: list[int] = []

    class Interrupted(Neo4jStore):
        """Runs the other store's write once every node is in, before the upsert checks the
        project's generation (a phase starts once the one before it is done)."""

        def _pipeline(self, jobs: Any) -> None:
            def hooked() -> Any:
                for job in jobs:
                    if job.phase == 1 and not interleaved:
                        interleaved.append(job.phase)
                        work = job.work

                        def first(tx: Any, work: Any = work) -> Any:
                            other.upsert([], rels[:40], at="2025-01-01T00:00:00Z")
                            return work(tx)

                        job = Job(job.phase, first, job.lanes)
                    yield job
            super()._pipeline(hooked())

    store = Interrupted(other.driver, other.project, database=other.database)
    marked = [Relationship(r.src, r.type, r.dst, r.provenance, {"seen": 2}) for r in rels]
    summary = store.upsert(nodes, marked, at="2025-01-01T00:00:00Z")
    assert interleaved
    assert summary.rels == expected
    assert sum(store.counts().rels.values()) == expected
    assert {r.ident: r.props.get("seen") for r in store.iter_rels()} == {r.ident: 2 for r in rels}


@pytest.mark.parametrize("kind", ["neo4j", "embedded"])
def test_a_batch_of_new_and_known_chunks_writes_each_once(
    kind: str, neo4j_store_factory: Callable[[str], Any], embedded_store_factory: Callable[[str], Any]
) -> None:
    """New chunks are created, known ones updated in place, in one upsert; each stays one chunk."""
    from graphmem.model import Chunk, Provenance

    store = (neo4j_store_factory if kind == "neo4j" else embedded_store_factory)("chunks")
    nodes, _, _, syms = random_graph(5)
    store.upsert(nodes, at="2025-01-01T00:00:00Z")

    def chunks(version: int, keys: list[str]) -> list[Chunk]:
        return [Chunk(k, 0, f"{k} v{version}", "code", Provenance(k.split(":")[1].split("::")[0], "code"))
                for k in keys]

    store.upsert([], [], chunks(1, syms[:30]), at="2025-01-01T00:00:00Z")
    store.upsert([], [], chunks(2, syms), at="2025-01-02T00:00:00Z")
    assert store.counts().chunks == len(syms)
    assert sorted((c.node_key, c.text) for c in store.get_chunks(syms)) == sorted((k, f"{k} v2") for k in syms)


def test_a_write_leaves_garbage_collection_as_it_found_it(neo4j_store_factory: Callable[[str], Any]) -> None:
    """Writes pause the cyclic collector while they build their rows, and resume it, even when
    the write is refused."""
    import gc

    from graphmem.errors import ModelError
    from graphmem.model import Node, Provenance

    store = neo4j_store_factory("gc")
    nodes, rels, files, _ = random_graph(6)
    store.upsert(nodes, rels)
    store.close_sources(files[:1])
    assert gc.isenabled()
    with pytest.raises(ModelError):
        store.upsert([Node("nokind", "x", Provenance("a.py", "code"))])
    assert gc.isenabled()
    gc.disable()
    try:  # and a process that runs without it keeps running without it
        store.upsert(nodes[:3])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_read_is_one_round_trip(neo4j_store_factory: Callable[[str], Any]) -> None:
    """A read statement goes out with its result request in one flush, with no BEGIN or COMMIT
    of its own (counted at the driver's outbox, the one place every message batch leaves)."""
    from neo4j._sync.io._bolt._common import Outbox  # the driver's internals: counting only

    from graphmem.model import Node, Provenance

    store = neo4j_store_factory("round-trips")
    store.upsert([Node("sym:a.py::f", "f", Provenance("a.py", "code"))], [], [])
    assert store.get_node("sym:a.py::f") is not None  # a connection is open and idle now
    flushes = []
    flush = Outbox.flush

    def counted(outbox: Any) -> bool:
        sent = flush(outbox)
        flushes.append(sent)
        return sent

    Outbox.flush = counted  # type: ignore[method-assign]
    try:
        found = store.get_nodes(["sym:a.py::f", "sym:a.py::g"])
    finally:
        Outbox.flush = flush  # type: ignore[method-assign]
    assert set(found) == {"sym:a.py::f"}
    assert sum(map(bool, flushes)) == 1, flushes
