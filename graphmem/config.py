"""Settings: from command-line options first, then environment variables, then defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from graphmem.errors import ConfigError

STORES = ("embedded", "neo4j")
DEFAULT_NEO4J_URI = "bolt://127.0.0.1:7687"
# The password scripts/neo4j-local and docker-compose.yml give a server bound to 127.0.0.1; any real
# deployment sets NEO4J_PASSWORD.
DEFAULT_NEO4J_PASSWORD = "graphmem-local"


@dataclass(slots=True)
class Neo4jSettings:
    """How to reach Neo4j (``NEO4J_URI``, ``NEO4J_USERNAME``, ``NEO4J_PASSWORD``, ``NEO4J_DATABASE``)."""

    uri: str = DEFAULT_NEO4J_URI
    username: str = "neo4j"
    password: str = DEFAULT_NEO4J_PASSWORD
    database: str | None = None

    @classmethod
    def from_env(cls) -> Neo4jSettings:
        return cls(
            uri=os.environ.get("NEO4J_URI") or DEFAULT_NEO4J_URI,
            username=os.environ.get("NEO4J_USERNAME") or "neo4j",
            password=os.environ.get("NEO4J_PASSWORD") or DEFAULT_NEO4J_PASSWORD,
            database=os.environ.get("NEO4J_DATABASE") or None,
        )


@dataclass(slots=True)
class Settings:
    """Where the graph lives. ``store`` is ``embedded`` (default) or ``neo4j``."""

    store: str = "embedded"
    home: Path = Path(".graphmem")
    project: str | None = None
    neo4j: Neo4jSettings = field(default_factory=Neo4jSettings)

    def __post_init__(self) -> None:
        if self.store not in STORES:
            raise ConfigError(f"unknown store {self.store!r}: choose one of {', '.join(STORES)}")
        self.home = Path(self.home).expanduser()

    @classmethod
    def from_env(cls, *, store: str | None = None, home: str | Path | None = None,
                 project: str | None = None) -> Settings:
        """Explicit arguments win over ``GRAPHMEM_STORE``, ``GRAPHMEM_HOME``, ``GRAPHMEM_PROJECT``."""
        return cls(
            store=store or os.environ.get("GRAPHMEM_STORE") or "embedded",
            home=Path(home or os.environ.get("GRAPHMEM_HOME") or ".graphmem"),
            project=project or os.environ.get("GRAPHMEM_PROJECT") or None,
            neo4j=Neo4jSettings.from_env(),
        )
