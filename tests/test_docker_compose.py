"""docker-compose.yml and the Dockerfile cannot run here (no Docker engine); these tests check what
can break without one: the services, their health checks and volumes, the two graphmem servers and
the endpoint in front of them (deploy/nginx.conf), and that the servers' command line is one
graphmem accepts."""

from __future__ import annotations

import re
from pathlib import Path

import click
import yaml

from graphmem.cli import cli
from graphmem.config import check_neo4j_uri

REPO = Path(__file__).resolve().parents[1]


def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))


SERVERS = ("graphmem-1", "graphmem-2")


def test_services_health_checks_and_volumes() -> None:
    doc = compose()
    services = doc["services"]
    assert set(services) == {"neo4j", *SERVERS, "mcp"}
    neo4j = services["neo4j"]
    assert neo4j["image"].startswith("neo4j:5.26") and "apoc" in neo4j["environment"]["NEO4J_PLUGINS"]
    for name, service in services.items():
        assert service["healthcheck"]["test"] and service["restart"] == "unless-stopped", name
        for mount in service["volumes"]:
            source = mount.split(":")[0]
            assert source.startswith("${") or source in doc["volumes"] or (REPO / source).is_file(), mount
        # Only the endpoint and Neo4j publish ports, on loopback: nothing is exposed to the network.
        assert all(p.startswith("127.0.0.1:") for p in service.get("ports", ())), name
    assert "ports" not in services["graphmem-1"] and "ports" not in services["graphmem-2"]
    assert "/healthz" in " ".join(services["mcp"]["healthcheck"]["test"])


def test_two_stateless_servers_share_neo4j_and_its_indexes() -> None:
    services = compose()["services"]
    one, two = (services[name] for name in SERVERS)
    assert one == two  # the same server twice: either may answer any request
    env = one["environment"]
    assert env["GRAPHMEM_STORE"] == "neo4j" and env["GRAPHMEM_INDEX"] == "neo4j"
    assert env["GRAPHMEM_INGEST_ROOTS"] == "/repos"
    assert one["depends_on"]["neo4j"]["condition"] == "service_healthy"
    assert "/healthz" in " ".join(one["healthcheck"]["test"])
    # The default URI routes, and graphmem accepts it (GRAPHMEM_NEO4J_URI may name Aura instead).
    uri = re.fullmatch(r"\$\{GRAPHMEM_NEO4J_URI:-(.+)\}", env["NEO4J_URI"]).group(1)  # type: ignore[union-attr]
    assert check_neo4j_uri(uri) == "neo4j://neo4j:7687"


def test_the_endpoint_spreads_requests_over_both_servers() -> None:
    services = compose()["services"]
    proxy = services["mcp"]
    assert proxy["image"].startswith("nginx:")
    assert all(proxy["depends_on"][name]["condition"] == "service_healthy" for name in SERVERS)
    mount = next(m for m in proxy["volumes"] if m.endswith("/etc/nginx/nginx.conf:ro"))
    conf = (REPO / mount.split(":")[0]).read_text(encoding="utf-8")
    upstream = re.search(r"upstream (\w+) \{(.*?)\}", conf, flags=re.DOTALL)
    assert upstream is not None and f"proxy_pass http://{upstream.group(1)};" in conf
    assert re.findall(r"server ([\w.-]+:\d+)", upstream.group(2)) == [f"{name}:8765" for name in SERVERS]
    published = proxy["ports"][0].rsplit(":", 1)[1]
    assert re.search(rf"listen {published};", conf)
    # The servers see the client's Host, and accept the ones clients of the endpoint send.
    assert "proxy_set_header Host $http_host;" in conf and "proxy_buffering off;" in conf
    command = services["graphmem-1"]["command"]
    allowed = {command[i + 1] for i, arg in enumerate(command) if arg == "--allowed-host"}
    assert {f"localhost:{published}", f"127.0.0.1:{published}", f"mcp:{published}"} <= allowed


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
    command = compose()["services"]["graphmem-1"]["command"]
    assert command[:2] == ["graphmem", "serve"]
    serve = cli.commands["serve"]
    assert isinstance(serve, click.Command)
    sub = serve.make_context("serve", list(command[2:]))
    assert sub.params["transport"] == "http" and sub.params["host"] == "0.0.0.0" and sub.params["port"] == 8765
    assert sub.params["bootstrap"] is False  # two servers would start the same bootstrap ingest at once


def test_the_dockerfile_copies_what_exists() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    copied = re.findall(r"^COPY\s+(.+?)\s+\S+$", text, flags=re.MULTILINE)
    assert copied
    for sources in copied:
        for name in sources.split():
            assert (REPO / name).exists(), name
    assert "safe.directory" in text and "EXPOSE 8765" in text
