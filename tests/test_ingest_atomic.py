"""An ingest's writes are seen whole or not at all: on the embedded store one transaction; on Neo4j
a mark that readers see until the writes are complete, and that the next ingest clears."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from graphmem.ingest import ingest
from graphmem.stores.base import INCOMPLETE
from graphmem.stores.embedded import EmbeddedStore


class Killed(Exception):
    """Stands for the process dying at this point of the write."""


def dies_before_recording_sources(store: Any) -> Any:
    """The same real store, failing where an ingest records which sources it has written."""

    def fail(states: dict) -> None:
        raise Killed

    store.set_source_states = fail
    return store


def commit_change(repo: Path) -> None:
    (repo / "services" / "billing" / "refunds.py").write_text(
        'def refund_invoice(invoice):\n    """Refund an invoice."""\n    return invoice\n')
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@acme.dev", "commit", "-qm", "Refunds"],
                   cwd=repo, check=True)


def snapshot(store: Any) -> tuple:
    counts = store.counts()
    return (counts.total_nodes, counts.total_rels, len(store.chunk_ids()), store.get_meta("last_commit"))


def test_embedded_ingest_is_one_transaction(tmp_path: Path, example_org: tuple) -> None:
    repo = tmp_path / "acme"
    shutil.copytree(example_org[0], repo, symlinks=True)
    home, cache = tmp_path / "home", tmp_path / "cache"
    ingest(repo, EmbeddedStore(home, "acme"), cache_dir=cache)
    before = snapshot(EmbeddedStore(home, "acme"))

    commit_change(repo)
    store = dies_before_recording_sources(EmbeddedStore(home, "acme"))
    with pytest.raises(Killed):
        ingest(repo, store, cache_dir=cache)
    # neither this process's graph nor another reader's holds any of the failed ingest's writes
    assert snapshot(store) == before
    fresh = EmbeddedStore(home, "acme")
    assert snapshot(fresh) == before and fresh.get_meta(INCOMPLETE) is None
    assert fresh.get_node("sym:services/billing/refunds.py::refund_invoice") is None

    report = ingest(repo, EmbeddedStore(home, "acme"), cache_dir=cache)
    assert report.changed == 1
    assert EmbeddedStore(home, "acme").get_node("sym:services/billing/refunds.py::refund_invoice") is not None


def test_atomic_writes_are_invisible_to_other_readers_until_committed(tmp_path: Path) -> None:
    from graphmem.model import Node, Provenance

    writer, reader = EmbeddedStore(tmp_path, "p"), EmbeddedStore(tmp_path, "p")
    writer.ensure_schema()
    prov = Provenance("a.py", "test")
    with writer.atomic():
        writer.upsert([Node("sym:a.py::f", "f", prov)])
        writer.set_meta({"marker": "x"})
        assert writer.get_node("sym:a.py::f") is not None
        assert reader.get_node("sym:a.py::f") is None and reader.get_meta("marker") is None
    assert reader.get_node("sym:a.py::f") is not None and reader.get_meta("marker") == "x"


def test_neo4j_marks_an_interrupted_ingest_until_the_next_one(tmp_path: Path, example_org: tuple,
                                                              neo4j_store_factory: Any) -> None:
    repo = tmp_path / "acme"
    shutil.copytree(example_org[0], repo, symlinks=True)
    cache = tmp_path / "cache"
    store = neo4j_store_factory("atomic")
    ingest(repo, store, cache_dir=cache)
    assert store.get_meta(INCOMPLETE) is None

    commit_change(repo)
    with pytest.raises(Killed):
        ingest(repo, dies_before_recording_sources(store),
               cache_dir=cache)
    assert store.get_meta(INCOMPLETE) is not None  # readers can tell the graph is partly written
    del store.set_source_states  # the process restarts: the store's own method again
    report = ingest(repo, store, cache_dir=cache)
    assert report.changed == 1 and store.get_meta(INCOMPLETE) is None
    assert store.get_node("sym:services/billing/refunds.py::refund_invoice") is not None


WRITER = """
import sys
from graphmem.ingest import ingest
from graphmem.stores.embedded import EmbeddedStore

def note(stage, done, total):
    print(stage, done, total, flush=True)

ingest(sys.argv[1], EmbeddedStore(sys.argv[2], "acme"), cache_dir=sys.argv[3], progress=note)
print("finished", flush=True)
"""


def test_a_killed_ingest_leaves_readers_on_a_complete_generation(tmp_path: Path, example_org: tuple) -> None:
    """SIGKILL a real ingest process at several points, among them right after its nodes are
    written and before its relationships are: a reader then sees the graph of before the ingest or
    of after it, never a part of it."""
    import signal
    import sys

    repo = tmp_path / "acme"
    shutil.copytree(example_org[0], repo, symlinks=True)
    pristine, cache = tmp_path / "pristine", tmp_path / "cache"
    ingest(repo, EmbeddedStore(pristine, "acme"), cache_dir=cache)
    before = snapshot(EmbeddedStore(pristine, "acme"))
    module = "".join(f"def step_{i}(value):\n    \"\"\"Step {i}.\"\"\"\n    return step_{i + 1}(value)\n\n"
                     for i in range(60))
    for n in range(60):
        (repo / "services" / "billing" / f"pipeline_{n}.py").write_text(module)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@acme.dev", "commit", "-qm", "Pipelines"],
                   cwd=repo, check=True)
    done = tmp_path / "done"
    shutil.copytree(pristine, done)
    ingest(repo, EmbeddedStore(done, "acme"), cache_dir=cache)
    after = snapshot(EmbeddedStore(done, "acme"))
    assert after != before

    def nodes_written(line: str) -> bool:  # "write <done> <total>" once the nodes are in
        parts = line.split()
        return parts[0] == "write" and 0 < int(parts[1]) < int(parts[2])

    kill_points = {"reading": lambda line: line.startswith("read"),
                   "write started": lambda line: line.startswith("write 0 "),
                   "nodes written": nodes_written}
    for name, when in kill_points.items():
        home = tmp_path / f"home-{name.replace(' ', '-')}"
        shutil.copytree(pristine, home)
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(repo), str(home), str(cache)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if when(line):
                proc.send_signal(signal.SIGKILL)
                break
        else:
            pytest.fail(f"the ingest never reached the kill point {name!r}")
        proc.wait()
        state = snapshot(EmbeddedStore(home, "acme"))
        assert state in (before, after), (name, state, before, after)
        assert EmbeddedStore(home, "acme").get_meta(INCOMPLETE) is None
        # and the next ingest completes what was killed
        ingest(repo, EmbeddedStore(home, "acme"), cache_dir=cache)
        assert snapshot(EmbeddedStore(home, "acme")) == after
