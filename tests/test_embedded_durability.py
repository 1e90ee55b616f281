"""The embedded store survives a process killed with SIGKILL in the middle of a batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from graphmem.stores.embedded import EmbeddedStore

BATCH = 2_000

WRITER = textwrap.dedent(
    """
    import sys
    from graphmem.model import Node, Provenance, Relationship, RelType
    from graphmem.stores.embedded import EmbeddedStore

    home, committed, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = EmbeddedStore(home, "crash")

    def nodes(b, n):
        p = Provenance(f"f{b}.py", "test")
        return [Node(f"sym:f{b}.py::n{i}", f"n{i}", p, {"batch": b, "i": i}) for i in range(n)]

    def rels(b, n):
        p = Provenance(f"f{b}.py", "test")
        return [Relationship(f"sym:f{b}.py::n{i}", RelType.CALLS, f"sym:f{b}.py::n{i + 1}", p)
                for i in range(n - 1)]

    for b in range(committed):
        store.upsert(nodes(b, batch), rels(b, batch))
        print("committed", b, flush=True)
    # One huge batch, long enough to be killed while it is being written.
    big = 250_000
    print("writing", flush=True)
    store.upsert(nodes(committed, big), rels(committed, big))
    print("finished", flush=True)
    """
)


def test_sigkill_mid_batch_keeps_every_committed_batch(tmp_path: Path) -> None:
    committed = 3
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), str(committed), str(BATCH)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.strip())
        if line.startswith("writing"):
            break
    # Kill it once SQLite is visibly writing the big transaction: the write-ahead log grows as the
    # uncommitted pages spill out of the page cache.
    wal = tmp_path / "crash" / "graph.sqlite-wal"
    start_size = wal.stat().st_size
    deadline = time.monotonic() + 120
    while wal.stat().st_size < start_size + 8_000_000:
        assert proc.poll() is None, f"writer finished before it could be killed: {lines}"
        assert time.monotonic() < deadline, "the big batch never reached the database"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert lines[:committed] == [f"committed {b}" for b in range(committed)]

    store = EmbeddedStore(tmp_path, "crash")
    counts = store.counts()
    # every earlier batch whole, nothing of the interrupted one
    assert counts.nodes == {"symbol": committed * BATCH}
    assert counts.rels == {"CALLS": committed * (BATCH - 1)}
    for b in range(committed):
        node = store.get_node(f"sym:f{b}.py::n{BATCH - 1}")
        assert node is not None and node.props == {"batch": b, "i": BATCH - 1}
    assert store.get_node(f"sym:f{committed}.py::n0") is None
    # and the store still takes writes
    store.close_sources(["f0.py"])
    assert store.counts().nodes == {"symbol": (committed - 1) * BATCH}


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    repo = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "-m", "graphmem.cli", "--home", str(home), "--project", "shop", *args],
                          capture_output=True, text=True, cwd=home.parent, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(repo)})


def test_an_empty_or_damaged_store_file_is_an_error_and_left_as_it_is(tmp_path: Path) -> None:
    """A 0-byte (or non-SQLite) ``graph.sqlite`` is not an empty project: read commands say it is
    damaged and write nothing, so the indexes beside it are not thrown away by the advice."""
    shop = tmp_path / "shop"
    shop.mkdir()
    (shop / "billing.py").write_text("def charge(amount):\n    return amount\n")
    home = tmp_path / "home"
    first = _cli(home, "ingest", str(shop))
    assert first.returncode == 0, first.stderr
    graph = home / "shop" / "graph.sqlite"
    for content, word in ((b"", "empty"), (b"not a database, at all" * 300, "damaged")):
        for leftover in (graph.with_name("graph.sqlite-wal"), graph.with_name("graph.sqlite-shm")):
            leftover.unlink(missing_ok=True)
        graph.write_bytes(content)
        for command in (("status",), ("status", "--json"), ("doctor",), ("query", "who owns billing?")):
            out = _cli(home, *command)
            assert out.returncode != 0, (command, out.stdout)
            assert word in out.stderr and "nothing was written" in out.stderr, (command, out.stderr)
            assert "doctor --repair" not in out.stdout + out.stderr
            assert graph.read_bytes() == content, command  # not made into a new database
        assert (home / "shop" / "index").is_dir()



def test_checking_a_store_file_keeps_the_locks_this_process_holds_on_it(tmp_path: Path) -> None:
    """Opening a second store on the same file checks that it is a database. Closing a plain file
    descriptor of it would drop the POSIX locks this process's connections hold on it: another
    process closing its own connection then takes itself for the last one and removes the
    write-ahead log under them (they saw "disk I/O error")."""
    import sqlite3

    from graphmem.stores.embedded import _check_database

    first = EmbeddedStore(tmp_path, "p")
    first.counts()  # the store file is made on first use
    first.close()
    path = tmp_path / "p" / "graph.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        assert holder.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        holder.execute("SELECT count(*) FROM meta").fetchone()
        _check_database(path)
        subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import sqlite3
            db = sqlite3.connect({str(path)!r}, isolation_level=None, timeout=30)
            db.execute("INSERT INTO meta (name, value) VALUES ('probe', 'written elsewhere')")
            db.close()
            """)], check=True, capture_output=True, text=True, timeout=60)
        assert path.with_name("graph.sqlite-wal").exists()  # still in use here: not removed
        rows = holder.execute("SELECT value FROM meta WHERE name = 'probe'").fetchall()
        assert rows == [("written elsewhere",)]
    finally:
        holder.close()
