"""Graph stores behind one protocol. ``open_store`` is the one place that picks a backend."""

from __future__ import annotations

from collections.abc import Callable

from graphmem.config import Settings
from graphmem.model import check_project
from graphmem.stores.base import (
    Counts,
    Edge,
    GraphStore,
    Hop,
    Path,
    Step,
    Subgraph,
    WriteSummary,
)


def _embedded(settings: Settings, project: str) -> GraphStore:
    from graphmem.stores.embedded import EmbeddedStore

    return EmbeddedStore(settings.home, project)


def _neo4j(settings: Settings, project: str) -> GraphStore:
    from graphmem.stores.neo4j import Neo4jStore

    n = settings.neo4j
    return Neo4jStore.connect(project, uri=n.uri, username=n.username, password=n.password, database=n.database)


BACKENDS: dict[str, Callable[[Settings, str], GraphStore]] = {"embedded": _embedded, "neo4j": _neo4j}


def open_store(settings: Settings, project: str) -> GraphStore:
    """Open the configured store for ``project`` and make sure its schema exists."""
    store = BACKENDS[settings.store](settings, check_project(project))
    store.ensure_schema()
    return store


__all__ = ["BACKENDS", "Counts", "Edge", "GraphStore", "Hop", "Path", "Step", "Subgraph", "WriteSummary",
           "open_store"]
