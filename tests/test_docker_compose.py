"""docker-compose.yml and the Dockerfile cannot run here (no Docker engine); these tests check what
can break without one: the services, their health checks and volumes, and that the MCP service's
command line is one graphmem accepts."""

from __future__ import annotations

import re
from pathlib import Path

import click
import yaml

from graphmem.cli import cli

REPO = Path(__file__).resolve().parents[1]


def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))


def test_services_health_checks_and_volumes() -> None:
    doc = compose()
    neo4j, mcp = doc["services"]["neo4j"], doc["services"]["graphmem"]
    assert neo4j["image"].startswith("neo4j:5.26") and "apoc" in neo4j["environment"]["NEO4J_PLUGINS"]
    assert mcp["depends_on"]["neo4j"]["condition"] == "service_healthy"
    for service in (neo4j, mcp):
        assert service["healthcheck"]["test"] and service["restart"] == "unless-stopped"
        for mount in service["volumes"]:
            source = mount.split(":")[0]
            assert source.startswith("${") or source in doc["volumes"], mount
    assert "/healthz" in " ".join(mcp["healthcheck"]["test"])
    assert mcp["environment"]["NEO4J_URI"] == "bolt://neo4j:7687"
    assert mcp["environment"]["GRAPHMEM_INGEST_ROOTS"] == "/repos"
    # Both bind to loopback on the host: nothing is exposed to the network by default.
    assert all(p.startswith("127.0.0.1:") for s in (neo4j, mcp) for p in s["ports"])


def _mebibytes(size: str) -> float:
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", size.lower()).groups()  # type: ignore[union-attr]
    return int(number) * {"g": 1024, "m": 1, "k": 1 / 1024, "": 1 / 1048576}[unit]


def test_neo4j_has_memory_guards_sized_against_its_heap_and_a_time_limit() -> None:
    """The same guards as scripts/neo4j-local: one transaction a quarter of the heap, all half."""
    env = compose()["services"]["neo4j"]["environment"]
    heap = _mebibytes(env["NEO4J_server_memory_heap_max__size"])
    assert _mebibytes(env["NEO4J_db_memory_transaction_max"]) == heap // 4
    assert _mebibytes(env["NEO4J_db_memory_transaction_total_max"]) == heap // 2
    timeout = env["NEO4J_db_transaction_timeout"]
    assert re.fullmatch(r"[1-9]\d*[smh]", timeout), timeout
    script = (REPO / "scripts" / "neo4j-local").read_text(encoding="utf-8")
    assert 'tx_max="$((heap_mib / 4))m"' in script and 'tx_total_max="$((heap_mib / 2))m"' in script
    assert f"GRAPHMEM_NEO4J_TX_TIMEOUT:-{timeout}" in script


def test_the_mcp_command_is_one_graphmem_accepts() -> None:
    command = compose()["services"]["graphmem"]["command"]
    assert command[:2] == ["graphmem", "serve"]
    serve = cli.commands["serve"]
    assert isinstance(serve, click.Command)
    sub = serve.make_context("serve", list(command[2:]))
    assert sub.params["transport"] == "http" and sub.params["host"] == "0.0.0.0" and sub.params["port"] == 8765


def test_the_dockerfile_copies_what_exists() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    copied = re.findall(r"^COPY\s+(.+?)\s+\S+$", text, flags=re.MULTILINE)
    assert copied
    for sources in copied:
        for name in sources.split():
            assert (REPO / name).exists(), name
    assert "safe.directory" in text and "EXPOSE 8765" in text
