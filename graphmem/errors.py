"""The exceptions graphmem raises. The CLI and the MCP server turn every one into one clear line."""

from __future__ import annotations


class GraphmemError(Exception):
    """Root of every error graphmem raises on purpose."""


class ConfigError(GraphmemError):
    """A setting is missing or has a value graphmem cannot use."""


class ModelError(GraphmemError):
    """A node, relationship or chunk does not fit the graph model (bad key, kind, type or value)."""


class StoreError(GraphmemError):
    """A graph store could not do what was asked."""


class StoreUnavailable(StoreError):
    """The store cannot be reached (Neo4j down, wrong credentials, home not writable)."""


class NotSupported(GraphmemError):
    """The operation needs a capability this store does not have (raw Cypher on the embedded store)."""


class IngestRefused(GraphmemError):
    """An ingest would close most of what a project holds (an empty or unrelated folder): nothing
    was written; the caller must confirm that the removal is meant."""
