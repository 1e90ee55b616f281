"""Several stateless graphmem servers over one Neo4j.

Real ``graphmem serve --transport http`` processes over the shared test Neo4j (one through a
``neo4j://`` routing URI): what one ingests the other answers at once (server-side indexes) or
within seconds (local indexes, shared or separate homes); 20 concurrent clients across two servers
get the same answers from both, without an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from graphmem.api import Graphmem
from graphmem.cli import main
from graphmem.config import NEO4J_SCHEMES, Neo4jSettings, Settings, check_neo4j_uri
from graphmem.errors import ConfigError
from graphmem.model import Chunk, Node, Provenance
from graphmem.retrieval.indexes import FOLLOW_EVERY_S, Indexes
from graphmem.stores.base import CHUNKS_GENERATION
from graphmem.stores.neo4j import GENERATION
from tests.test_mcp import free_port, payload, stop

pytestmark = pytest.mark.neo4j

BILLING = '''"""Billing: invoices and the taxes on them."""


def compute_invoice_tax(amount: float, rate: float) -> float:
    """Tax owed on an invoice amount at a tax rate."""
    return round(amount * rate, 2)


class InvoiceLedger:
    """Keeps the posted invoices of a customer."""

    def post_invoice(self, invoice_id: str, amount: float) -> None:
        """Record a posted invoice in the ledger."""
        self.last = (invoice_id, amount)
'''

SHIPPING = '''"""Shipping: parcels and what posting them costs."""


def estimate_parcel_postage(weight_kg: float) -> float:
    """Postage for a parcel, by its weight in kilograms."""
    return 4.5 + 1.2 * weight_kg
'''

TAX = "sym:billing.py::compute_invoice_tax"
POSTAGE = "sym:shipping.py::estimate_parcel_postage"
QUESTIONS = ["how is the tax on an invoice computed", "where are posted invoices recorded",
             "what does posting a parcel cost by weight", "InvoiceLedger post_invoice"]


def git(repo: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@acme.dev", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@acme.dev", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small git repository: billing code in its first commit."""
    root = tmp_path / "repos" / "shop"
    root.mkdir(parents=True)
    (root / "billing.py").write_text(BILLING, encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "billing: invoice tax")
    return root


def add_shipping(repo: Path) -> None:
    (repo / "shipping.py").write_text(SHIPPING, encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "shipping: parcel postage")


def routing_uri() -> str:
    """The test Neo4j's URI with the routing scheme (a single server accepts it too)."""
    uri = os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687")
    scheme, _, rest = uri.partition("://")
    return f"{scheme.replace('bolt', 'neo4j')}://{rest}"


@contextmanager
def servers(project: str, homes: list[Path], *, index: str, roots: list[Path],
            uris: list[str | None]) -> Iterator[list[str]]:
    """``graphmem serve --transport http`` processes (one per home, started together); yields their
    MCP URLs, stops them afterwards."""
    procs: list[tuple[subprocess.Popen[str], int]] = []
    with ExitStack() as stack:
        for home, uri in zip(homes, uris):
            env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
            env.setdefault("NEO4J_URI", "bolt://127.0.0.1:7687")
            env.setdefault("NEO4J_PASSWORD", "graphmem-local")
            env.update({"GRAPHMEM_REPLAY": "0", **({"NEO4J_URI": uri} if uri else {})})
            port = free_port()
            proc = subprocess.Popen(
                [sys.executable, "-m", "graphmem.cli", "--store", "neo4j", "--index", index, "--home", str(home),
                 "--project", project, "serve", "--transport", "http", "--port", str(port), "--no-bootstrap",
                 *[a for r in roots for a in ("--ingest-root", str(r))]],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
            stack.callback(stop, proc)
            procs.append((proc, port))
        deadline = time.monotonic() + 90
        for proc, port in procs:
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                        assert json.loads(response.read())["project"] == project
                        break
                except OSError:
                    assert proc.poll() is None, proc.communicate()[1]
                    assert time.monotonic() < deadline, "a server did not answer within 90 s"
                    time.sleep(0.3)
        yield [f"http://127.0.0.1:{port}/mcp" for _, port in procs]


async def call(url: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    async with Client(url, read_timeout_seconds=120) as client:
        return payload(await client.call_tool(tool, args))


def keys(answer: dict[str, Any]) -> list[str]:
    return [hit["key"] for hit in answer["results"]]


def ranking(answer: dict[str, Any]) -> list[tuple[str, int, float, list[Any]]]:
    """What two servers must agree on: keys, ranks, scores and evidence (timings may differ)."""
    return [(h["key"], h["rank"], round(h["score"], 9), h["evidence"]) for h in answer["results"]]


def test_server_side_indexes_two_servers_one_neo4j(neo4j_store_factory: Callable[[str], Any], repo: Path,
                                                   tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = neo4j_store_factory("multi").project  # dropped (with its vector index) afterwards
    homes = [tmp_path / "home-1", tmp_path / "home-2"]  # separate homes: nothing shared but Neo4j
    with servers(project, homes, index="neo4j", roots=[repo.parent], uris=[None, routing_uri()]) as (one, two):

        async def scenario() -> list[float]:
            report = await call(one, "ingest", {"path": str(repo)})
            assert report["written"]["nodes"] > 0
            answer = await call(two, "search", {"question": QUESTIONS[0], "k": 5})
            assert TAX in keys(answer)[:3]
            node = await call(two, "get_node", {"key": TAX})
            assert node["node"]["key"] == TAX and "rate" in node["passages"][0]["untrusted_text"]

            add_shipping(repo)  # a second commit, ingested through the other server, seen at once
            await call(two, "ingest", {"path": str(repo)})
            answer = await call(one, "search", {"question": QUESTIONS[2], "k": 5})
            assert POSTAGE in keys(answer)[:3]
            rows = await call(one, "cypher", {"query": "MATCH (s:Symbol {project: $project}) RETURN s.key AS key"})
            assert {TAX, POSTAGE} <= {r["key"] for r in rows["untrusted_rows"]}

            # 20 clients, half on each server, each asking every question once.
            latencies: list[float] = []
            answers: dict[tuple[str, str], list[Any]] = {}

            async def client(url: str) -> None:
                async with Client(url, read_timeout_seconds=120) as session:
                    for question in QUESTIONS:
                        started = time.perf_counter()
                        result = payload(await session.call_tool("search", {"question": question, "k": 5}))
                        latencies.append((time.perf_counter() - started) * 1000)
                        got = ranking(result)
                        assert answers.setdefault((url, question), got) == got, "a server changed its answer"

            outcomes = await asyncio.gather(*(client(url) for url in [one, two] * 10), return_exceptions=True)
            errors = [repr(o) for o in outcomes if isinstance(o, BaseException)]
            assert not errors, errors
            for question in QUESTIONS:
                assert answers[(one, question)] == answers[(two, question)], question
                assert answers[(one, question)], question
            return latencies

        latencies = asyncio.run(scenario())
    assert len(latencies) == 20 * len(QUESTIONS)
    p50, p95 = statistics.median(latencies), statistics.quantiles(latencies, n=20)[-1]
    with capsys.disabled():
        print(f"\nmulti-server (server-side indexes): {len(latencies)} searches by 20 concurrent clients "
              f"over 2 servers, 0 errors: p50 {p50:.0f} ms, p95 {p95:.0f} ms")


def test_local_indexes_two_servers_one_home(neo4j_store_factory: Callable[[str], Any], repo: Path,
                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = neo4j_store_factory("multi-local").project
    home = tmp_path / "home"
    with servers(project, [home, home], index="local", roots=[repo.parent], uris=[routing_uri(), None]) as (one, two):

        async def scenario() -> float:
            assert TAX not in keys(await call(two, "search", {"question": QUESTIONS[0], "k": 5}))
            await call(one, "ingest", {"path": str(repo)})
            ingested = time.monotonic()
            while True:
                answer = await call(two, "search", {"question": QUESTIONS[0], "k": 5})
                waited = time.monotonic() - ingested
                if TAX in keys(answer)[:3]:
                    return waited
                assert waited < 20, "the other server did not see the ingest within 20 s"
                await asyncio.sleep(0.2)

        waited = asyncio.run(scenario())
    with capsys.disabled():
        print(f"\nmulti-server (local indexes, one home): the other server saw the ingest after {waited:.1f} s")


def test_local_indexes_in_separate_homes_follow_the_chunk_generation(
        neo4j_store_factory: Callable[[str], Any], repo: Path, tmp_path: Path, embedder: Any) -> None:
    """Separate homes share nothing but Neo4j: the reader's indexes catch up with the writer's
    ingest through the chunk generation, within FOLLOW_EVERY_S of its end (plus the sync)."""
    project = neo4j_store_factory("multi-follow").project
    writer, reader = (Graphmem(Settings(store="neo4j", home=tmp_path / name, replay=0, neo4j=Neo4jSettings.from_env()),
                               project, embedder=embedder) for name in ("writer", "reader"))
    try:
        writer.ingest(repo)
        store = reader.store
        assert TAX in reader.query(QUESTIONS[0], mode="hybrid", k=5).keys[:3]  # its first question syncs
        synced = store.get_meta(CHUNKS_GENERATION)
        assert synced and reader.indexes.synced_generation() == synced

        add_shipping(repo)
        writer.ingest(repo)
        started = time.monotonic()
        while POSTAGE not in reader.query(QUESTIONS[2], mode="hybrid", k=5).keys[:3]:
            assert time.monotonic() - started < FOLLOW_EVERY_S + 10, "the reader never caught up"
            time.sleep(0.1)
        assert time.monotonic() - started <= FOLLOW_EVERY_S + 5
        assert reader.indexes.synced_generation() == store.get_meta(CHUNKS_GENERATION) != synced
        assert reader.check_indexes().ok

        # A write that changes no chunk (a node's property) moves the graph generation only: no sync.
        before = (store.get_meta(GENERATION), store.get_meta(CHUNKS_GENERATION))
        prov = Provenance("billing.py", "test")
        store.upsert([Node(TAX, "compute_invoice_tax", prov, {"reviewed": True})])
        assert store.get_meta(GENERATION) != before[0] and store.get_meta(CHUNKS_GENERATION) == before[1]
        store.upsert(chunks=[Chunk(TAX, 9, "compute_invoice_tax rounds to cents", "doc", prov)])
        assert store.get_meta(CHUNKS_GENERATION) != before[1]
        moved = store.get_meta(CHUNKS_GENERATION)
        store.remove_sources(["no-such-file.py"])  # removes no chunk
        assert store.get_meta(CHUNKS_GENERATION) == moved
        store.remove_sources(["billing.py"])
        assert store.get_meta(CHUNKS_GENERATION) != moved
    finally:
        writer.close()
        reader.close()


def test_syncs_of_one_index_folder_take_turns_and_skip_work_done(neo4j_store_factory: Callable[[str], Any],
                                                                 tmp_path: Path, embedder: Any) -> None:
    """Processes sharing a home: two syncs at once take turns, and the second, finding the folder
    synced at the generation it was asked to reach, does nothing; a process that follows later
    syncs once, and the others then find the folder current."""
    store = neo4j_store_factory("multi-turns")
    prov = Provenance("ledger.py", "test")
    store.upsert([Node("file:ledger.py", "ledger.py", prov)],
                 chunks=[Chunk("file:ledger.py", i, f"ledger entry {i} settles an invoice", "code", prov)
                         for i in range(3)])
    generation = store.get_meta(CHUNKS_GENERATION)
    assert generation

    def indexes() -> Indexes:  # what each process of one home opens
        return Indexes(tmp_path / "index", embedder=embedder, cache_dir=tmp_path / "cache")

    first, second = indexes(), indexes()
    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda ix: ix.sync(store, unless_synced_at=generation), [first, second]))
    assert sorted(r.added for r in reports) == [0, 3]  # one did the work, the other found it done
    assert first.synced_generation() == generation and first.verify(store).ok

    store.upsert(chunks=[Chunk("file:ledger.py", 3, "ledger entry 3 refunds an invoice", "code", prov)])
    late = indexes()
    report = late.follow(store)
    assert report is not None and report.added == 1
    assert second.synced_generation() == store.get_meta(CHUNKS_GENERATION) != generation
    assert indexes().follow(store) is None  # the folder is current: nothing to do
    assert late.verify(store).ok


def test_neo4j_uris_are_checked_before_connecting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for scheme in NEO4J_SCHEMES:
        assert check_neo4j_uri(f" {scheme}://db.example.com:7687 ") == f"{scheme}://db.example.com:7687"
    for bad in ("http://localhost:7474", "localhost:7687", "neo4j://", "bolt:/localhost"):
        with pytest.raises(ConfigError, match="NEO4J_URI must be"):
            check_neo4j_uri(bad)
    with pytest.raises(ConfigError) as refused:
        check_neo4j_uri("https://neo4j:s3cret@db.example.com")
    assert "s3cret" not in str(refused.value)  # the rest of a URI may hold a password
    monkeypatch.setenv("NEO4J_URI", "http://localhost:7474")
    assert main(["--store", "neo4j", "--home", str(tmp_path), "--project", "p", "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphmem: error: NEO4J_URI must be") and err.count("\n") == 1
