"""cypher/schema.cypher runs against Neo4j, twice, and creates what the store relies on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from graphmem.cypher import read_cypher, split_statements
from graphmem.model import RelType
from graphmem.stores.neo4j import Neo4jStore

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.neo4j
def test_schema_is_idempotent_and_complete(neo4j_schema: Any) -> None:
    store = Neo4jStore(neo4j_schema, "schema-check", database=os.environ.get("NEO4J_DATABASE"))
    store.ensure_schema()  # a second time: nothing fails, nothing changes
    records = neo4j_schema.execute_query("SHOW INDEXES YIELD name, state RETURN name, state").records
    states = {r["name"]: r["state"] for r in records}
    statements = split_statements(read_cypher("schema.cypher"))
    expected, dropped = set(), set()
    for statement in statements:
        words = statement.split()
        name = words[2] if words[1] in ("INDEX", "CONSTRAINT") else words[3]
        names = {name.replace("{type}", t.value.lower()) for t in RelType} if "{type}" in name else {name}
        (dropped if words[0] == "DROP" else expected).update(names)
    assert expected <= set(states), expected - set(states)
    assert all(states[n] == "ONLINE" for n in expected)
    assert not dropped & set(states)


def test_docker_compose_runs_the_same_neo4j_as_the_local_script() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    neo4j = compose["services"]["neo4j"]
    pom = (REPO / "scripts/neo4j/pom.xml").read_text()
    version = pom.split("<neo4j.version>")[1].split("</neo4j.version>")[0]
    assert neo4j["image"] == f"neo4j:{'.'.join(version.split('.')[:2])}-community"
    assert "apoc" in neo4j["environment"]["NEO4J_PLUGINS"]
    assert neo4j["healthcheck"]["test"] and all(p.startswith("127.0.0.1:") for p in neo4j["ports"])
    assert neo4j["environment"]["NEO4J_server_memory_heap_max__size"]
