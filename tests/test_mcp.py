"""The MCP server end to end: the SDK's own client over stdio (embedded store) and streamable HTTP
(Neo4j), a raw stdio exchange whose stdout must hold protocol messages only, and the tools'
behaviour in process: bounded arguments and replies, repository text only in untrusted_ fields.
(Freshness and concurrency: test_mcp_concurrency.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from graphmem.api import Graphmem
from graphmem.config import Settings
from graphmem.mcp_server import CONTENT_NOTICE, LIMITS, Service, build_server, fit_reply
from graphmem.model import NodeKind
from tests.conftest import NOW

TOOLS = {"search", "explain", "get_node", "neighbors", "cypher", "ingest", "status"}


def question(facts: dict[str, Any], qid: str) -> tuple[str, list[str]]:
    q = next(q for q in facts["questions"] if q["id"] == qid)
    return q["question"], q["gold"]


def payload(result: Any) -> dict[str, Any]:
    """A tool result's JSON object (the structured content, checked against the text block)."""
    assert not result.is_error, result.content[0].text
    data = json.loads(result.content[0].text)
    assert result.structured_content == data
    return data


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("NEO4J_URI", "bolt://127.0.0.1:7687")
    env.setdefault("NEO4J_PASSWORD", "graphmem-local")
    return env


@pytest.fixture(scope="module")
def acme_home(tmp_path_factory: pytest.TempPathFactory, example_org: tuple[Path, dict[str, Any]]) -> Path:
    """The example organisation ingested into an embedded home (project acme)."""
    home = tmp_path_factory.mktemp("mcp-home")
    with Graphmem(Settings(store="embedded", home=home), "acme") as gm:
        gm.ingest(example_org[0])
    return home


def test_stdio_with_the_sdk_client(acme_home: Path, example_org: tuple[Path, dict[str, Any]]) -> None:
    text, gold = question(example_org[1], "org-4")
    params = StdioServerParameters(command=sys.executable, env=cli_env(),
                                   args=["-m", "graphmem.cli", "--home", str(acme_home), "--project", "acme", "serve"])

    async def session() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert TOOLS <= set(tools)
            assert tools["search"].annotations.read_only_hint is True
            assert tools["ingest"].annotations.read_only_hint is False
            answer = payload(await client.call_tool("search", {"question": text, "k": 5}))
            assert gold[0] in [hit["key"] for hit in answer["results"][:2]]
            top = answer["results"][0]
            assert "text" not in top and top["untrusted_text"]
            assert "name" not in top and "untrusted_name" in top
            assert top["provenance"]["extractor"] and answer["content_notice"] == CONTENT_NOTICE
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            assert {"graphmem://schema", "graphmem://queries"} <= resources
            schema = json.loads((await client.read_resource("graphmem://schema")).contents[0].text)
            assert schema["relationships"]["CAUSED_BY"]["from"] == ["incident"]

    asyncio.run(session())


def test_stdio_stdout_carries_only_protocol_messages(acme_home: Path, example_org: tuple[Path, dict[str, Any]],
                                                     tmp_path: Path) -> None:
    """Ingest (progress, model loading, logging) and search through a raw stdio exchange: every
    line the server writes to stdout is a JSON-RPC message."""
    home = tmp_path / "fresh"
    text, gold = question(example_org[1], "org-4")
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphmem.cli", "--home", str(home), "--project", "acme", "serve",
         "--ingest-root", str(example_org[0].parent)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    assert proc.stdin and proc.stdout
    requests = [
        {"method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "raw-test", "version": "0"}}},
        {"method": "notifications/initialized"},
        {"method": "tools/call", "params": {"name": "ingest", "arguments": {"path": str(example_org[0])}}},
        {"method": "tools/call", "params": {"name": "ingest", "arguments": {"path": str(tmp_path)}}},
        {"method": "tools/call", "params": {"name": "search", "arguments": {"question": text, "k": 3}}},
    ]
    replies: dict[int, dict[str, Any]] = {}
    try:
        for ident, request in enumerate(requests):
            message = {"jsonrpc": "2.0", **request}
            if not request["method"].startswith("notifications/"):
                message["id"] = ident
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            while "id" in message and ident not in replies:
                line = proc.stdout.readline()
                assert line, "the server closed stdout"
                reply = json.loads(line)  # anything that is not JSON fails here
                assert reply["jsonrpc"] == "2.0"
                if "id" in reply:
                    replies[reply["id"]] = reply
        proc.stdin.close()
        rest = proc.stdout.read()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    for line in rest.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
    ingested = json.loads(replies[2]["result"]["content"][0]["text"])
    assert ingested["written"]["nodes"] > 100 and not replies[2]["result"].get("isError")
    refused = replies[3]["result"]
    assert refused["isError"] and "ingest is limited to folders under" in refused["content"][0]["text"]
    hits = json.loads(replies[4]["result"]["content"][0]["text"])["results"]
    assert gold[0] in [h["key"] for h in hits[:2]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(neo4j_store_factory: Any, example_org: tuple[Path, dict[str, Any]], tmp_path: Path) -> Iterator[str]:
    """``graphmem serve --transport http`` over the example organisation in Neo4j; yields the URL."""
    store = neo4j_store_factory("mcp")
    home = tmp_path / "home"
    gm = Graphmem(Settings(store="neo4j", home=home), store.project, store=store)
    gm.ingest(example_org[0])
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphmem.cli", "--store", "neo4j", "--home", str(home), "--project", store.project,
         "serve", "--transport", "http", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    assert json.loads(response.read())["project"] == store.project
                    break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "the HTTP server did not answer within 60 s"
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)
        gm.close()


def stop(proc: subprocess.Popen[str]) -> None:
    """End a server process: politely, then by force."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.neo4j
def test_http_with_the_sdk_client_on_neo4j(http_server: str, example_org: tuple[Path, dict[str, Any]]) -> None:
    text, gold = question(example_org[1], "org-7")  # "the latest incident": relative to NOW
    services = sorted(example_org[1]["services"])

    async def session() -> None:
        async with Client(http_server, read_timeout_seconds=120) as client:
            assert TOOLS <= {t.name for t in (await client.list_tools()).tools}
            answer = payload(await client.call_tool("search", {"question": text, "k": 5, "now": NOW}))
            assert gold[0] in [hit["key"] for hit in answer["results"][:2]]
            rows = payload(await client.call_tool("cypher", {
                "query": "MATCH (s:Service {project: $project}) RETURN s.key AS key ORDER BY key"}))
            assert [r["key"] for r in rows["untrusted_rows"]] == services
            refused = await client.call_tool("cypher", {"query": "MATCH (s:Service) DETACH DELETE s"})
            assert refused.is_error and "DELETE" in refused.content[0].text
            ranked = payload(await client.call_tool("cypher", {"saved": "services_by_incidents"}))
            assert {r["service"] for r in ranked["untrusted_rows"]} & set(services)
            saved = json.loads((await client.read_resource("graphmem://queries")).contents[0].text)
            assert len(saved) >= 12 and all(q["description"] for q in saved)
            text_of = (await client.read_resource("graphmem://queries/blast_radius")).contents[0].text
            assert "$symbol" in text_of
            status = payload(await client.call_tool("status", {}))
            assert status["store"] == "neo4j" and status["nodes"]["service"] == len(services)

    asyncio.run(session())


def test_tools_in_process(acme_home: Path, example_org: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """get_node, neighbors, explain, errors and ingest roots, through the SDK's in-process client."""
    facts = example_org[1]
    incident, cause = "incident:INC-042", question(facts, "org-4")[1][0]
    service = Service(Settings(store="embedded", home=acme_home), "acme")
    fresh = Service(Settings(store="embedded", home=tmp_path / "other"), "acme",
                    ingest_roots=[example_org[0]])

    async def session() -> None:
        async with Client(build_server(service)) as client:
            node = payload(await client.call_tool("get_node", {"key": incident}))
            assert node["node"]["kind"] == "incident" and node["node"]["provenance"]["source_path"]
            assert node["node"]["untrusted_name"] and "untrusted_props" in node["node"]
            assert "name" not in node["node"] and "props" not in node["node"]
            assert node["relationships"]["out"]["CAUSED_BY"] >= 1 and node["passages"][0]["untrusted_text"]
            near = payload(await client.call_tool("neighbors", {"key": incident, "rel_types": ["caused_by"],
                                                                "direction": "out"}))
            assert [n["key"] for n in near["neighbors"]] == [cause]
            assert "untrusted_name" in near["neighbors"][0] and near["content_notice"] == CONTENT_NOTICE
            why = payload(await client.call_tool("explain", {"source": cause, "target": incident}))
            assert why["paths"] and why["paths"][0]["rels"][0]["type"] == "CAUSED_BY"
            assert why["paths"][0]["rels"][0]["provenance"]["extractor"]
            for tool, args, message in [
                ("get_node", {"key": "bogus"}, "not a graphmem key"),
                ("get_node", {"key": "service:nope"}, "no node 'service:nope'"),
                ("search", {"question": "x", "mode": "psychic"}, "unknown mode"),
                ("neighbors", {"key": incident, "rel_types": ["LIKES"]}, "unknown relationship types"),
                ("ingest", {"path": str(example_org[0])}, "ingest is limited"),
                ("cypher", {"query": "MATCH (n) RETURN n"}, "needs the Neo4j store"),
                # oversized arguments: refused at once, and the error does not repeat them
                ("search", {"question": "why? " * 200_000}, "at most 4,000 are accepted"),
                ("search", {"question": "why?", "k": 1000}, "k must be between 1 and 100"),
                ("search", {"question": "why?", "mode": "m" * 100_000}, "unknown mode"),
                ("search", {"question": "why?", "kinds": ["commit"] * 1000}, "at most 50 are accepted"),
                ("search", {"question": "why?", "path_prefix": "p/" * 10_000}, "path_prefix has"),
                ("get_node", {"key": "service:" + "x" * 100_000}, "at most 2,048 are accepted"),
                ("get_node", {"key": incident, "chunks": 10_000}, "chunks must be between 0 and 20"),
                ("neighbors", {"key": incident, "limit": 10_000}, "limit must be between 1 and 500"),
                ("explain", {"source": cause, "target": incident, "max_depth": 50}, "max_depth must be"),
                ("cypher", {"query": "MATCH (n) RETURN n " + " " * 30_000}, "at most 20,000 are accepted"),
                ("cypher", {"query": "RETURN $p", "params": {"p": "x" * 30_000}}, "params (as JSON) has"),
                ("ingest", {"path": "/" + "a" * 10_000}, "at most 4,096 are accepted"),
            ]:
                result = await client.call_tool(tool, args)
                assert result.is_error and message in result.content[0].text, (tool, result.content[0].text)
                assert len(result.content[0].text) < 600, (tool, len(result.content[0].text))
        async with Client(build_server(fresh)) as client:
            report = payload(await client.call_tool("ingest", {"path": str(example_org[0])}))
            assert report["written"]["nodes"] > 100
            assert report["content_notice"] == CONTENT_NOTICE and "skipped" not in report
            assert isinstance(report["untrusted_skipped"], list)
            status = payload(await client.call_tool("status", {}))
            assert status["indexes"]["ok"] and status["nodes"]["service"] == len(facts["services"])
            assert status["content_notice"] == CONTENT_NOTICE and status["ingest_running"] is None

    try:
        asyncio.run(session())
    finally:
        service.close()
        fresh.close()


def test_the_server_loads_the_project_before_the_first_question(acme_home: Path, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """warm_up loads the graph, catalog, indexes and models of a project that holds a graph, so
    the first search finds them loaded; a project that holds nothing loads nothing; close waits
    for a warm-up it started."""
    service = Service(Settings(store="embedded", home=acme_home), "acme")
    empty = Service(Settings(store="embedded", home=tmp_path / "empty"), "acme")
    try:
        took = service.warm_up()
        assert took is not None and {"graph", "snapshot", "catalog", "bm25", "vectors", "embedder"} <= set(took)
        assert (acme_home / "acme" / "graph.marshal").is_file()  # the next process reads the graph from it
        gm = service.graphmem()
        assert gm.indexes.embedder_loaded
        assert ("reranker" in took) == (gm.reranker is not None)
        if gm.reranker is not None:
            assert gm.reranker.loaded
        found = service.search("Which commit caused INC-042?")
        assert found["results"] and found["timings_ms"]["total"] > 0
        assert empty.warm_up() is None and not empty.graphmem().indexes.embedder_loaded
        again = Service(Settings(store="embedded", home=acme_home), "acme")
        again.start_warm_up()
        again.close()  # waits for the warm-up: nothing fails under it
        assert not [r for r in caplog.records if r.levelname == "WARNING" and "ahead" in r.getMessage()]
    finally:
        service.close()
        empty.close()


def outside_fence(value: Any, needle: str, path: str = "") -> list[str]:
    """Where ``needle`` occurs in an answer outside any field whose name starts with untrusted_."""
    if isinstance(value, str):
        return [path] if needle in value else []
    if isinstance(value, dict):
        return [p for k, v in value.items() if not str(k).startswith("untrusted_")
                for p in outside_fence(v, needle, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in outside_fence(v, needle, f"{path}[{i}]")]
    return []


def test_repository_text_stays_inside_untrusted_fields(acme_home: Path,
                                                         example_org: tuple[Path, dict[str, Any]]) -> None:
    """Commit messages, names and docstrings reach the agent only inside untrusted_ fields, through
    every tool that returns them."""
    service = Service(Settings(store="embedded", home=acme_home), "acme")
    store = service.graphmem().store
    commits = [n for n in store.iter_nodes([NodeKind.COMMIT]) if n.props.get("message")]
    symbols = [n for n in store.iter_nodes([NodeKind.SYMBOL]) if n.props.get("docstring")]
    assert commits and symbols
    texts = [(commits[0].key, commits[0].props["message"].split("\n")[0]),
             (symbols[0].key, str(symbols[0].props["docstring"])[:40])]
    text, _ = question(example_org[1], "org-4")

    async def session() -> None:
        async with Client(build_server(service)) as client:
            for key, needle in texts:
                node = payload(await client.call_tool("get_node", {"key": key}))
                assert outside_fence(node, needle) == [] and needle in json.dumps(node["node"]["untrusted_props"])
                near = payload(await client.call_tool("neighbors", {"key": key, "depth": 2}))
                other = near["neighbors"][0]["key"]
                why = payload(await client.call_tool("explain", {"source": key, "target": other}))
                found = payload(await client.call_tool("search", {"question": text, "k": 20}))
                commits_found = payload(await client.call_tool("search", {"question": "which commits changed "
                                                                          "the billing service?", "k": 20,
                                                                          "kinds": ["commit"]}))
                for answer in (near, why, found, commits_found):
                    assert answer["content_notice"] == CONTENT_NOTICE
                    assert outside_fence(answer, needle) == [], outside_fence(answer, needle)
                for hit in commits_found["results"]:
                    assert "name" not in hit and hit["untrusted_name"] and hit["untrusted_text"]
                assert "linked" not in found["analysis"]

    try:
        asyncio.run(session())
    finally:
        service.close()


def test_replies_fit_well_under_the_clients_message_limit(tmp_path: Path) -> None:
    """Hits whose passages are full of quotes, backslashes and non-ASCII text (what JSON escapes
    most): the answer is cut to the reply budget, and the whole message the SDK sends stays within
    four times that budget, which the default keeps far below the 1 MiB a client accepts."""
    assert 4 * LIMITS.reply_bytes < 1024 * 1024 * 0.7
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    nasty = ('"\\ ünïcødé — “quoted” \\n ' * 120)
    for i in range(4):
        (repo / "pkg" / f"m{i}.py").write_text("".join(
            f'def handler_{i}_{j}(x):\n    r"""Handle the ledger {j}. {nasty}"""\n    return x\n\n\n'
            for j in range(10)))
    budget = 30_000  # the 40 passages take about 85 kB: cut to fit
    service = Service(Settings(store="embedded", home=tmp_path / "home"), "big", ingest_roots=[tmp_path],
                      limits=replace(LIMITS, reply_bytes=budget))

    async def session() -> None:
        async with Client(build_server(service)) as client:
            payload(await client.call_tool("ingest", {"path": str(repo)}))
            result = await client.call_tool("search", {"question": "handle the ledger", "k": 100, "mode": "bm25"})
            answer = payload(result)
            assert len(answer["results"]) >= 20 and answer["clipped"]
            assert all(hit["untrusted_text"] for hit in answer["results"])
            assert len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()) <= budget
            message = result.model_dump_json(by_alias=True).encode()
            assert len(message) <= 4 * budget, len(message)

    try:
        asyncio.run(session())
    finally:
        service.close()


def test_fit_reply_clips_texts_then_drops_rows() -> None:
    rows = [{"n": i, "text": "x" * 2000, "keys": [f"k{j}" for j in range(500)]} for i in range(5000)]
    answer = fit_reply({"columns": ["n", "text", "keys"], "untrusted_rows": rows}, 100_000, items="untrusted_rows")
    assert len(json.dumps(answer, separators=(",", ":")).encode()) <= 100_000
    assert answer["truncated"] and "left out" in answer["note"] and answer["clipped"]
    assert answer["untrusted_rows"][0]["n"] == 0 and len(answer["untrusted_rows"][0]["text"]) < 2000
    small = {"results": [{"untrusted_text": "short"}]}
    assert fit_reply(dict(small), 100_000, items="results") == small  # what fits is left alone
