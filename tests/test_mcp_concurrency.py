"""Freshness and concurrency of the MCP server and what it stands on.

A running server answers from the latest committed ingest, also one made by another process; reads
go on while an ingest holds the writer; a second ingest meanwhile is refused; a reader never sees
half of a write, in the store or in the indexes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from graphmem.model import Chunk, Node, Provenance, Relationship, RelType
from graphmem.retrieval.indexes import FairLock, Indexes
from graphmem.stores.embedded import EmbeddedStore
from tests.test_ingest import git
from tests.test_mcp import cli_env, free_port, payload

NEW_FUNCTION = "quuxinator_frobnicate_ledger"
NEW_KEY = f"sym:ledger/reconcile.py::{NEW_FUNCTION}"
QUESTION = "Which function frobnicates the ledger entries with the quuxinator?"


def write(repo: Path, path: str, text: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small git repository: billing calls ledger."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, "graphmem.toml", '[services.billing]\npaths = ["billing/"]\n[services.ledger]\npaths = ["ledger/"]\n')
    write(repo, "ledger/store.py", 'def append(entry):\n    """Append an entry to the ledger."""\n    return entry\n')
    write(repo, "billing/invoices.py", 'from ledger.store import append\n\n\ndef create(amount):\n'
                                       '    """Create an invoice for an amount."""\n    return append(amount)\n')
    commit(repo, "Start billing and ledger")
    return repo


def add_function(repo: Path) -> str:
    """Commit a function with a distinctive name; its commit sha."""
    write(repo, "ledger/reconcile.py", f'def {NEW_FUNCTION}(entries):\n'
                                       '    """Frobnicate the ledger entries with the quuxinator."""\n'
                                       '    return sorted(entries)\n')
    return commit(repo, "Add the quuxinator")


def cli(home: Path, *args: str) -> None:
    """``graphmem`` in a process of its own, as a git hook runs it."""
    subprocess.run([sys.executable, "-m", "graphmem.cli", "--home", str(home), "--project", "acme", *args],
                   check=True, capture_output=True, env=cli_env(), timeout=600)


@contextmanager
def http_server(home: Path, *extra: str) -> Iterator[str]:
    """``graphmem serve --transport http`` on the embedded home; yields the MCP URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphmem.cli", "--home", str(home), "--project", "acme", "serve",
         "--transport", "http", "--port", str(port), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    assert json.loads(response.read())["project"] == "acme"
                    break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "the HTTP server did not answer within 60 s"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def call(url: str, tool: str, args: dict[str, Any]) -> Any:
    """One tool call on a client connection of its own (the raw result)."""
    async def run() -> Any:
        async with Client(url, read_timeout_seconds=300) as client:
            return await client.call_tool(tool, args)

    return asyncio.run(run())


def found(url: str, question: str = QUESTION, mode: str | None = None) -> list[str]:
    args = {"question": question, "k": 5, **({"mode": mode} if mode else {})}
    return [hit["key"] for hit in payload(call(url, "search", args))["results"]]


def test_a_running_server_sees_an_ingest_made_by_another_process(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli(home, "ingest", str(repo))
    with http_server(home) as url:
        assert NEW_KEY not in found(url)
        head = add_function(repo)
        cli(home, "ingest", str(repo))  # what the post-commit hook does
        assert NEW_KEY in found(url)[:2]
        # Each index on its own: graph retrieval alone could find the name through the reloaded graph.
        assert NEW_KEY in found(url, mode="bm25")[:2]
        assert NEW_KEY in found(url, mode="vector")[:2]
        status = payload(call(url, "status", {}))
        assert status["last_ingested_commit"] == head and status["freshness"]["up_to_date"] is True
        assert status["indexes"]["ok"] and status["ingest_running"] is None


def test_reads_go_on_while_an_ingest_waits_for_the_writer(repo: Path, tmp_path: Path) -> None:
    """Another process holds the store's write lock, so the server's ingest cannot finish: searches
    and status still answer, a second ingest is refused, and once the lock is released the ingest
    completes and the next search finds what it added."""
    home = tmp_path / "home"
    cli(home, "ingest", str(repo))
    add_function(repo)
    with http_server(home, "--ingest-root", str(tmp_path)) as url:
        assert "sym:billing/invoices.py::create" in found(url, "Which function creates an invoice?")
        blocker = sqlite3.connect(home / "acme" / "graph.sqlite", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        outcome: dict[str, Any] = {}
        worker = threading.Thread(target=lambda: outcome.update(ingest=call(url, "ingest", {"path": str(repo)})))
        try:
            worker.start()
            deadline = time.monotonic() + 60
            while payload(call(url, "status", {}))["ingest_running"] is None:
                assert worker.is_alive() and time.monotonic() < deadline, outcome
                time.sleep(0.1)
            assert "sym:billing/invoices.py::create" in found(url, "Which function creates an invoice?")
            assert NEW_KEY not in found(url)  # not committed yet
            running = payload(call(url, "status", {}))["ingest_running"]
            assert running is not None and running["path"] == str(repo.resolve())
            second = call(url, "ingest", {"path": str(repo)})
            assert second.is_error and "an ingest is already running" in second.content[0].text
            assert worker.is_alive()  # it cannot commit while the lock is held
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
            worker.join(timeout=300)
        report = payload(outcome["ingest"])
        assert report["written"]["nodes"] >= 1 and report["content_notice"]
        assert NEW_KEY in found(url)[:2]
        assert payload(call(url, "status", {}))["ingest_running"] is None


def batch(i: int, size: int = 150) -> tuple[list[Node], list[Relationship], list[Chunk]]:
    """Nodes of one batch, chained by relationships, each with a chunk."""
    prov = Provenance(f"docs/b{i}.md", "test")
    nodes = [Node(f"doc:b{i}/{j}", f"part {j} of batch {i}", prov) for j in range(size)]
    rels = [Relationship(f"doc:b{i}/{j}", RelType.MENTIONS, f"doc:b{i}/{j + 1}", prov) for j in range(size - 1)]
    chunks = [Chunk(f"doc:b{i}/{j}", 0, f"batch {i} part {j}", "doc", prov) for j in range(size)]
    return nodes, rels, chunks


def test_readers_of_a_shared_store_never_see_half_a_write(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, "acme")
    batches = 25
    seen: list[str] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                for i in range(batches):
                    keys = [f"doc:b{i}/{j}" for j in range(150)]
                    nodes = store.get_nodes(keys)
                    edges = store.expand(keys)
                    if len(nodes) not in (0, len(keys)):
                        seen.append(f"batch {i}: {len(nodes)} of {len(keys)} nodes")
                    if nodes and len(edges) != 2 * 149:
                        seen.append(f"batch {i}: {len(edges)} edge ends with all its nodes present")
        except Exception as exc:  # noqa: BLE001 - any failure of a reader is the finding
            seen.append(f"{type(exc).__name__}: {exc}")

    readers = [threading.Thread(target=read) for _ in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, inside a write's in-memory changes too
    try:
        for t in readers:
            t.start()
        for i in range(batches):
            nodes, rels, chunks = batch(i)
            store.upsert(nodes, rels, chunks)  # one write: nodes, relationships and chunks together
    finally:
        done.set()
        for t in readers:
            t.join(timeout=60)
        sys.setswitchinterval(interval)
        store.close()
    assert not seen, seen[:5]


def test_another_store_object_sees_an_atomic_write_whole_when_committed(tmp_path: Path) -> None:
    """How the MCP server's ingest and its readers share a home: two store objects."""
    reader, writer = EmbeddedStore(tmp_path, "acme"), EmbeddedStore(tmp_path, "acme")
    try:
        reader.upsert(*batch(0))
        assert len(reader.get_nodes([f"doc:b0/{j}" for j in range(150)])) == 150
        with writer.atomic():
            writer.upsert(*batch(1))
            writer.set_meta({"last_ingested_at": "2030-01-01T00:00:00+00:00"})
            assert reader.get_node("doc:b1/0") is None and not reader.get_chunks(["doc:b1/0"])
            assert reader.get_meta("last_ingested_at") is None
            assert writer.get_node("doc:b1/0") is not None and writer.get_meta("last_ingested_at")
            writer.upsert(*batch(2))
        assert reader.get_node("doc:b1/0") is not None and reader.get_node("doc:b2/149") is not None
        assert [c.text for c in reader.get_chunks(["doc:b2/3"])] == ["batch 2 part 3"]
        assert reader.get_meta("last_ingested_at") == "2030-01-01T00:00:00+00:00"
    finally:
        reader.close()
        writer.close()


def test_indexes_notice_a_save_by_another_handle_and_adopt_a_fork(tmp_path: Path, embedder: Any) -> None:
    store = EmbeddedStore(tmp_path, "acme")
    prov = Provenance("docs/a.md", "test")
    try:
        store.upsert([Node("doc:a", "a", prov)], [], [Chunk("doc:a", 0, "the aardvark ledger", "doc", prov)])
        served = Indexes(tmp_path / "index", embedder=embedder, cache_dir=tmp_path / "cache")
        Indexes(tmp_path / "index", embedder=embedder, cache_dir=tmp_path / "cache").sync(store)
        assert served.bm25.search("aardvark", 1) and not served.refresh()
        store.upsert([Node("doc:z", "z", prov)], [], [Chunk("doc:z", 0, "the zeppelin hangar", "doc", prov)])
        Indexes(tmp_path / "index", embedder=embedder, cache_dir=tmp_path / "cache").sync(store)  # "another process"
        assert served.bm25.search("zeppelin", 1) == []  # the copy it loaded
        assert served.refresh()
        hit = served.bm25.search("zeppelin", 1)[0][0]
        assert store.get_chunks_by_id([hit])[hit].node_key == "doc:z"
        assert served.vectors.search(embedder.encode_query("zeppelin hangar"), 1)[0][0] == hit
        # a fork syncs apart and is swapped in whole; the swapped-in copies match the files
        store.upsert([Node("doc:q", "q", prov)], [], [Chunk("doc:q", 0, "the quokka register", "doc", prov)])
        before = served.bm25
        fork = served.fork()
        fork.sync(store)
        assert served.bm25 is before and not before.search("quokka", 1)  # untouched meanwhile
        served.adopt(fork)
        assert served.bm25.search("quokka", 1) and not served.refresh() and served.verify(store).ok
    finally:
        store.close()


def test_the_embedder_lock_goes_to_the_longest_waiter() -> None:
    """An ingest that releases the embedder between parts and asks again queues behind the queries
    that were waiting."""
    lock, order = FairLock(), []

    def query(name: str) -> None:
        with lock:
            order.append(name)

    lock.acquire()  # the ingest embeds a part
    waiters = []
    for name in ("q1", "q2"):
        waiters.append(threading.Thread(target=query, args=(name,)))
        waiters[-1].start()
        while lock.waiting < len(waiters):  # queued, in this order
            time.sleep(0.001)
    lock.release()
    with lock:  # its next part
        order.append("ingest")
    for t in waiters:
        t.join(timeout=10)
    assert order == ["q1", "q2", "ingest"]
