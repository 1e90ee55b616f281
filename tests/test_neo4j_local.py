"""The server scripts/neo4j-local runs: Browser over HTTP, APOC loaded, Community 5.26."""

from __future__ import annotations

import os
import urllib.request
from typing import Any

import pytest

from tests.conftest import require

pytestmark = pytest.mark.neo4j


def test_apoc_and_version(neo4j_driver: Any) -> None:
    components = neo4j_driver.execute_query("CALL dbms.components() YIELD name, versions, edition "
                                            "RETURN name, versions[0] AS version, edition").records
    kernel = components[0]
    assert kernel["version"].startswith("5.26.")
    assert neo4j_driver.execute_query("RETURN apoc.version() AS v").records[0]["v"] == kernel["version"]


def test_browser_answers_over_http() -> None:
    port = os.environ.get("GRAPHMEM_NEO4J_HTTP_PORT")
    require(port is not None, "GRAPHMEM_NEO4J_HTTP_PORT is set when scripts/test starts the local server")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/browser/", timeout=30) as response:
        page = response.read().decode("utf-8", "replace")
        assert response.status == 200
    assert "<title>Neo4j Browser" in page
