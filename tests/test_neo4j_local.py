"""The server scripts/neo4j-local runs: Browser over HTTP, APOC loaded, Community 5.26, the ports
it was given advertised, memory guards sized by its heap."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import require

pytestmark = pytest.mark.neo4j
REPO = Path(__file__).resolve().parents[1]


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


def _discovery(http_port: int | str) -> dict[str, Any]:
    """The discovery document Neo4j serves at ``GET /`` on its HTTP port."""
    request = urllib.request.Request(f"http://127.0.0.1:{http_port}/", headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_the_discovery_document_names_the_ports_the_server_listens_on() -> None:
    http_port = os.environ.get("GRAPHMEM_NEO4J_HTTP_PORT")
    require(http_port is not None, "GRAPHMEM_NEO4J_HTTP_PORT is set when scripts/test starts the local server")
    bolt_port = urlsplit(os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687")).port
    found = _discovery(http_port)
    assert found["bolt_direct"] == f"bolt://127.0.0.1:{bolt_port}"
    assert found["bolt_routing"] == f"neo4j://127.0.0.1:{bolt_port}"
    assert found["transaction"].startswith(f"http://127.0.0.1:{http_port}/")


def _settings(driver: Any, names: list[str]) -> dict[str, str]:
    return {r["name"]: r["value"] for r in driver.execute_query(
        "SHOW SETTINGS YIELD name, value WHERE name IN $names RETURN name, value", names=names).records}


GUARDS = ["db.memory.transaction.max", "db.memory.transaction.total.max", "db.transaction.timeout",
          "server.memory.heap.max_size"]


def test_memory_guards_and_a_transaction_time_limit_are_set(neo4j_driver: Any) -> None:
    settings = _settings(neo4j_driver, GUARDS)
    # Unset, Neo4j reports 0B (no limit) and 0s (no time limit).
    assert settings["db.memory.transaction.max"] not in ("0B", "0.00B")
    assert settings["db.memory.transaction.total.max"] not in ("0B", "0.00B")
    assert settings["db.transaction.timeout"] not in ("0s", "0ns")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_script_on_other_ports_advertises_them_and_sizes_the_guards_by_the_heap(tmp_path: Path) -> None:
    """A second server, assembled afresh and started by the script on ports of its own, small heap."""
    require(shutil.which("mvn") is not None and shutil.which("curl") is not None,
            "scripts/neo4j-local needs mvn and curl")
    version = re.search(r"<neo4j.version>(.+)</neo4j.version>", (REPO / "scripts/neo4j/pom.xml").read_text())
    assert version
    bolt_port, http_port = _free_port(), _free_port()
    env = {**os.environ, "GRAPHMEM_NEO4J_HOME": str(tmp_path / "home"), "GRAPHMEM_NEO4J_DATA": str(tmp_path / "data"),
           "GRAPHMEM_NEO4J_BOLT_PORT": str(bolt_port), "GRAPHMEM_NEO4J_HTTP_PORT": str(http_port),
           "GRAPHMEM_NEO4J_PASSWORD": "other-ports", "GRAPHMEM_NEO4J_HEAP": "512m", "GRAPHMEM_NEO4J_PAGECACHE": "64m"}
    script = str(REPO / "scripts/neo4j-local")
    try:
        started = subprocess.run([script, "start"], env=env, capture_output=True, text=True, timeout=600)
        assert started.returncode == 0, started.stderr
        # Maven's console library writes colour resets even in batch mode; none may reach the user.
        assert "\x1b" not in started.stderr and "[0m" not in started.stderr, repr(started.stderr)
        assert "one-time download" in started.stderr and f"bolt 127.0.0.1:{bolt_port}" in started.stderr
        found = _discovery(http_port)
        assert found["bolt_direct"] == f"bolt://127.0.0.1:{bolt_port}"
        assert found["bolt_routing"] == f"neo4j://127.0.0.1:{bolt_port}"
        assert found["transaction"].startswith(f"http://127.0.0.1:{http_port}/")
        printed = subprocess.run([script, "env"], env=env, capture_output=True, text=True, timeout=60).stdout
        assert f"NEO4J_URI=bolt://127.0.0.1:{bolt_port}" in printed

        import neo4j

        with neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{bolt_port}", auth=("neo4j", "other-ports")) as driver:
            settings = _settings(driver, GUARDS)
        assert settings["server.memory.heap.max_size"] == "512.00MiB"
        assert settings["db.memory.transaction.max"] == "128.00MiB"  # a quarter of the heap
        assert settings["db.memory.transaction.total.max"] == "256.00MiB"  # half of it
        assert settings["db.transaction.timeout"] == "5m"
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True, text=True, timeout=120)
        shutil.rmtree(tmp_path / "home", ignore_errors=True)  # 140 MB of jars
