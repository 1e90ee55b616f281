"""The embedded store passes the store contract."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.contract.store_contract import StoreContract


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
