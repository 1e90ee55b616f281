"""The embedded store passes the store contract."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.contract.store_contract import StoreContract


def _view(store: Any, keys: list[str]) -> tuple:
    """Everything a reader can see of a store's graph: elements with their properties, sources
    and state, the expansion of every open node and the relationships of ``keys``."""
    nodes = [(n.key, n.name, n.props, n.sources, n.provenance, n.valid_to is None)
             for n in store.iter_nodes(include_closed=True)]
    rels = [(r.ident, r.props, r.sources, r.provenance, r.valid_to is None) for r in store.iter_rels(include_closed=True)]
    live = [n.key for n in store.iter_nodes()]
    around = sorted((e.origin, e.step.src, e.step.type, e.step.dst) for e in store.expand(live))
    return nodes, rels, around, sorted(r.ident for r in store.get_relationships(keys))


class TestEmbeddedStore(StoreContract):
    @pytest.fixture
    def make_store(self, embedded_store_factory: Callable[[str], Any]) -> Callable[[str], Any]:
        return embedded_store_factory


def test_expansions_kept_between_questions_follow_every_change(
        embedded_store_factory: Callable[[str], Any]) -> None:
    """expand() keeps a node's edges between calls; a write by another process, a write here and
    another hub rule each give the current answer, not the kept one."""
    from graphmem.model import Node, Provenance, Relationship, RelType
    from graphmem.stores.base import Hub
    from tests.contract.store_contract import T0, sample_graph

    store, other = embedded_store_factory("acme"), None
    try:
        nodes, rels, chunks = sample_graph()
        store.upsert(nodes, rels, chunks, at=T0)
        key = "service:billing"

        def around(hub: Hub | None = None) -> set[str]:
            return {e.other for e in store.expand([key], hub=hub)}

        before = around()
        assert "team:payments" in before and "doc:notes" not in before and around() == before
        assert around(Hub(degree=1, type_limit=0, keep=frozenset({"OWNS"}))) == {"team:payments"}
        other = embedded_store_factory("acme")  # another process, through the database
        notes = Provenance("notes.md", "test")
        other.upsert([Node("doc:notes", "notes", notes)], [Relationship("doc:notes", RelType.MENTIONS, key, notes)], [])
        assert around() == before | {"doc:notes"}
        store.close_sources(["notes.md"])  # this process
        assert around() == before
    finally:
        store.close()
        if other is not None:
            other.close()


def test_the_graph_in_memory_equals_the_graph_read_back_after_any_writes(
        embedded_store_factory: Callable[[str], Any]) -> None:
    """Random upserts, closes, removals and source changes (self-loops, shared sources, reopened
    nodes) leave the graph in memory exactly as a new process reads it from the database: no
    relationship left behind at a removed node, none lost from either side of its ends."""
    import random

    from graphmem.model import Node, Provenance, Relationship, RelType

    rng = random.Random(7)
    keys = [f"sym:m{i}.py::f{i}" for i in range(12)]
    paths = [f"m{i}.py" for i in range(5)]
    types = [RelType.CALLS, RelType.IMPORTS, RelType.CONTAINS]

    store, removed = embedded_store_factory("churn"), 0
    try:
        for step in range(60):
            action = rng.random()
            if action < 0.55:
                chosen = rng.sample(keys, 4)
                nodes = [Node(k, k.rsplit(":", 1)[1], Provenance(rng.choice(paths), "test"), {"n": step})
                         for k in chosen]
                rels = [Relationship(rng.choice(chosen), rng.choice(types), rng.choice(chosen),
                                     Provenance(rng.choice(paths), "test"), {"step": step}) for _ in range(5)]
                store.upsert(nodes, rels, [], at=f"2025-01-01T00:00:{step:02d}.000000Z")
            elif action < 0.75:
                store.close_sources([rng.choice(paths)], at=f"2025-01-01T00:00:{step:02d}.500000Z")
            elif action < 0.9:
                removed += store.remove_sources(rng.sample(paths, 2)).removed_nodes
            else:
                present = [n.key for n in store.iter_nodes(include_closed=True)]
                if present:
                    store.set_sources(nodes={k: [rng.choice(paths)] for k in rng.sample(present, min(3, len(present)))})
            if step % 10 == 9:
                again = embedded_store_factory("churn")
                try:
                    assert _view(store, keys) == _view(again, keys), f"after step {step}"
                finally:
                    again.close()
        assert removed > 3  # the run deleted nodes with relationships, not only closed them
    finally:
        store.close()


def test_a_new_process_reads_an_unchanged_graph_from_its_snapshot(
        embedded_store_factory: Callable[[str], Any], caplog: pytest.LogCaptureFixture) -> None:
    """``save_snapshot`` keeps the graph's rows; later processes read them while the graph is
    unchanged and see the same graph as from the database; a write deletes them; a snapshot of an
    older graph, or a damaged one, is never read in place of the database."""
    from graphmem.model import Node, Provenance
    from graphmem.stores.embedded import SNAPSHOT_FILE
    from tests.contract.store_contract import T0, sample_graph

    store = embedded_store_factory("snap")
    opened = [store]

    def fresh() -> Any:
        other = embedded_store_factory("snap")
        opened.append(other)
        return other

    try:
        snapshot = store.path / SNAPSHOT_FILE
        assert not store.save_snapshot() and not snapshot.exists()  # an empty project: nothing to keep
        nodes, rels, chunks = sample_graph()
        keys = [n.key for n in nodes]
        store.upsert(nodes, rels, chunks, at=T0)
        expected = _view(store, keys)
        reader = fresh()
        assert _view(reader, keys) == expected and not snapshot.exists()  # a load saves nothing
        assert store.save_snapshot() and not store.save_snapshot()  # saved once per graph
        saved = snapshot.stat().st_ino, snapshot.read_bytes()
        reader = fresh()
        assert _view(reader, keys) == expected
        assert not reader.save_snapshot()  # it read this graph's snapshot: nothing new to save
        assert snapshot.stat().st_ino == saved[0]

        store.upsert([Node("doc:later", "later", Provenance("later.md", "test"))], [], [])
        assert not snapshot.exists()
        keys.append("doc:later")
        expected = _view(store, keys)
        snapshot.write_bytes(saved[1])  # the older graph's snapshot: not this generation
        reader = fresh()
        assert _view(reader, keys) == expected
        assert reader.save_snapshot() and snapshot.read_bytes() != saved[1]

        snapshot.write_bytes(snapshot.read_bytes()[:1000])  # damaged
        with caplog.at_level("WARNING", logger="graphmem.stores.embedded"):
            assert _view(fresh(), keys) == expected
        assert "snapshot" in caplog.text and "reading the database" in caplog.text
    finally:
        for s in opened:
            s.close()
