"""The embedded store: the graph in memory, SQLite (WAL) on disk.

Layout: ``<home>/<project>/graph.sqlite``. SQLite is the durable log: each ``upsert`` or close is
one transaction, so a process killed mid-batch leaves every earlier batch intact and none of the
interrupted one; ``atomic()`` makes a whole ingest one transaction. On open the tables are loaded
into adjacency dicts (``_Graph``: the layout of a ``networkx.MultiDiGraph`` keyed by relationship
type, without importing networkx, which would cost a first question about 0.3 s), which serve
every read; ``stores.base.to_networkx`` gives the graph as networkx's for analysis. Chunks stay on
disk only. ``save_snapshot`` (called by ingest and by a server that has loaded the graph) writes the
rows to ``<home>/<project>/graph.marshal`` with the graph's generation, so the next process to open
the unchanged graph reads that instead; every write deletes it.

Several processes may use one home: writes take SQLite's write lock, and every call first checks
``PRAGMA data_version`` so a graph changed by another process is reloaded before it is read.

Several threads may share one store. Reads run concurrently: they hold a shared lock while they
walk the in-memory graph, and read SQL (chunks, meta) through a connection of their own thread,
which sees the last commit and never waits for a writer. One write runs at a time; it changes the
in-memory graph only under the exclusive lock, once its transaction is durable, and a reload
builds the new graph first and swaps it in under that lock: a reader sees a write whole or not at
all. Inside ``atomic()`` the writing thread reads through the main connection, its own writes
included, and the in-memory graph takes each write as it comes, so other threads reading the same
store object see them before the commit; a second store object sees the whole block once it is
committed (how the MCP server's ingest and its readers share a home).
"""

from __future__ import annotations

import gc
import logging
import marshal
import os
import sqlite3
import threading
import uuid
from contextlib import contextmanager
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import orjson

from graphmem.config import prepare_home
from graphmem.errors import StoreError, StoreUnavailable
from graphmem.model import (
    KIND_BY_PREFIX,
    Chunk,
    Node,
    NodeKind,
    Provenance,
    Relationship,
    RelType,
    check_project,
    now_iso,
    to_iso,
)
from graphmem.retrieval.files import write_bytes_atomic
from graphmem.stores.base import GENERATION, Counts, Direction, Edge, Hub, Keep, Step, TraversalMixin, WriteSummary
from graphmem.stores.batch import ProvenanceStamper, element_sources, merge_props, prepare_batch

SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    key TEXT PRIMARY KEY, name TEXT NOT NULL, props TEXT NOT NULL, provenance INTEGER NOT NULL,
    sources TEXT, valid_from TEXT, valid_to TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rels (
    src TEXT NOT NULL, type TEXT NOT NULL, dst TEXT NOT NULL, props TEXT NOT NULL,
    provenance INTEGER NOT NULL, sources TEXT, valid_from TEXT, valid_to TEXT,
    PRIMARY KEY (src, type, dst)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY, node_key TEXT NOT NULL, ordinal INTEGER NOT NULL, kind TEXT NOT NULL,
    text TEXT NOT NULL, start_line INTEGER, end_line INTEGER, source_path TEXT NOT NULL,
    provenance INTEGER NOT NULL
);
-- Elements share few distinct provenance records; rows refer to them by id. An element's
-- sources are NULL when they are just its provenance's source path (nearly always).
CREATE TABLE IF NOT EXISTS provenance (id INTEGER PRIMARY KEY, data TEXT NOT NULL UNIQUE);
CREATE INDEX IF NOT EXISTS chunks_by_node ON chunks (node_key);
CREATE INDEX IF NOT EXISTS chunks_by_source ON chunks (source_path);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS source_states (path TEXT PRIMARY KEY, hash TEXT NOT NULL) WITHOUT ROWID;
"""

_RELTYPES = {t.value: t for t in RelType}
# The graph's rows for the next process (``marshal``: plain values only, so reading it runs no code,
# and faster than the SQL and JSON it stands for).
SNAPSHOT_FILE = "graph.marshal"
SNAPSHOT_FORMAT = 1
log = logging.getLogger(__name__)
EXPAND_CACHE_LIMIT = 50_000  # nodes whose expansion is kept between questions (emptied when full)
RelIdent = tuple[str, str, str]


def _dumps(value: object) -> str:
    # str, not bytes: keeping many orjson bytes objects alive is several times slower (allocator).
    return orjson.dumps(value).decode()


def _dump_props(props: dict) -> str:
    return orjson.dumps(props).decode() if props else "{}"


class _Codec:
    """Provenance records by id and source lists as JSON, cached both ways.

    A batch repeats the same few provenance records and source lists; loading through the codec
    also shares one Provenance object among the elements that have equal ones.
    """

    def __init__(self) -> None:
        self.by_id: dict[int, Provenance] = {}
        self.ids: dict[str, int] = {}
        self._json: dict[int, tuple[Provenance, str]] = {}
        self._sources_out: dict[tuple[str, ...], str] = {}
        self._sources_in: dict[str, tuple[str, ...]] = {}

    def load(self, db: sqlite3.Connection) -> None:
        for pid, data in db.execute("SELECT id, data FROM provenance"):
            self.ids[data] = pid
            self.by_id[pid] = Provenance.from_props(orjson.loads(data))

    def prov_id(self, prov: Provenance, new: dict[str, int]) -> int:
        """The id of ``prov``; an unseen record gets the next id and is added to ``new``."""
        hit = self._json.get(id(prov))
        if hit is None or hit[0] is not prov:
            hit = self._json[id(prov)] = (prov, _dumps(prov.as_props()))
        data = hit[1]
        pid = self.ids.get(data) or new.get(data)
        if pid is None:
            pid = new[data] = len(self.ids) + len(new) + 1
        return pid

    def commit(self, new: dict[str, int]) -> None:
        """Adopt records written by a committed transaction (and forget the batch's objects)."""
        self._json.clear()
        for data, pid in new.items():
            self.ids[data] = pid
            self.by_id[pid] = Provenance.from_props(orjson.loads(data))

    def dump_sources(self, sources: tuple[str, ...], prov: Provenance) -> str | None:
        if len(sources) == 1 and sources[0] == prov.source_path:
            return None
        text = self._sources_out.get(sources)
        if text is None:
            text = self._sources_out[sources] = _dumps(sources)
        return text

    def load_sources(self, text: str | None, prov: Provenance) -> tuple[str, ...]:
        if text is None:
            return (prov.source_path,)
        sources = self._sources_in.get(text)
        if sources is None:
            sources = self._sources_in[text] = tuple(orjson.loads(text))
        return sources


class _ReadWriteLock:
    """Many readers or one writer. A waiting writer goes first, so a stream of readers cannot keep
    it out. Not reentrant: a thread must not take it again while it holds it."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writing = False
        self._waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writing or self._waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._writing or self._readers:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


def _create_database(path: Path) -> None:
    """Create the store file complete (WAL mode and tables) under a temporary name, then link it into
    place: ``graph.sqlite`` is thus never seen empty, so an empty one always means damage.
    A store another process created meanwhile is kept."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
        finally:
            db.close()  # the last connection folds the WAL into the file
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: a rename, unless the store appeared
            if not path.exists():
                os.replace(tmp, path)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)


def _check_database(path: Path) -> None:
    """Refuse a store file that is not an SQLite database before the store opens it: SQLite takes an
    empty file for a new database and would write a fresh, empty graph over it.

    The file is never opened directly: closing any descriptor of it drops the POSIX locks that this
    process's other connections hold on it. A read-only SQLite connection shares those locks safely."""
    what = ""
    if path.stat().st_size == 0:
        what = "empty (0 bytes)"
    else:
        try:
            probe = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
            try:
                probe.execute("PRAGMA schema_version").fetchone()
            finally:
                probe.close()
        except sqlite3.DatabaseError as exc:
            if "not a database" not in str(exc) and "malformed" not in str(exc):
                raise  # locked or unreadable: SQLite's own message says more than a guess would
            what = "damaged (not an SQLite database)"
    if what:
        raise StoreError(
            f"the store file {path} is {what}; nothing was written to it. Restore it from a backup, or, "
            f"to rebuild the project from its repository, move the project folder {path.parent} aside and "
            "run `graphmem ingest` again.")


class EmbeddedStore(TraversalMixin):
    """A project's graph in ``<home>/<project>``, with no server."""

    def __init__(self, home: str | Path, project: str) -> None:
        self._project = check_project(project)
        self._dir = Path(home).expanduser() / project
        self._db: sqlite3.Connection | None = None
        self._version: int | None = None
        self._snapshot_at: str | None = None  # the generation of the snapshot this store read or saved
        self._graph = _Graph()
        self._codec = _Codec()
        self._lock = threading.RLock()  # one writer (or reload) at a time; owns the main connection
        self._rw = _ReadWriteLock()  # readers of the in-memory graph against its changes
        # expand() of today's graph by (node, hub rule): emptied by every change of the graph, so
        # hubs that many questions cross are read once, not once per question.
        self._expanded: dict[tuple[str, Hub | None], list[Edge]] = {}
        self._local = threading.local()
        self._read_conns: dict[int, sqlite3.Connection] = {}  # by thread ident, to close them
        self._conns_lock = threading.Lock()  # guards _read_conns (never held while waiting on others)
        self._version_lock = threading.Lock()  # readers' data_version checks on the main connection
        self._epoch = 0  # bumped by close(): a thread's read connection from before is stale
        self._atomic_thread: int | None = None  # the thread inside atomic(), if any

    # --- connection and loading -----------------------------------------------------------------

    @property
    def project(self) -> str:
        return self._project

    @property
    def path(self) -> Path:
        """The directory holding this project's files (indexes live beside the graph here)."""
        return self._dir

    def _conn(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        with self._lock:
            return self._open()

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                prepare_home(self._dir.parent)
                self._dir.mkdir(parents=True, exist_ok=True)
                path = self._dir / "graph.sqlite"
                if not path.exists():
                    _create_database(path)
                _check_database(path)
                db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                # NORMAL in WAL mode: a committed transaction survives a killed process.
                db.execute("PRAGMA synchronous=NORMAL")
                # Replaced and deleted rows are overwritten, not left in free pages: text that a
                # later ingest redacts or withdraws does not linger on disk.
                db.execute("PRAGMA secure_delete=ON")
                # A larger page cache keeps the B-tree pages of big batches in memory (64 MiB).
                db.execute("PRAGMA cache_size=-65536")
                db.executescript(SCHEMA)
            except (OSError, sqlite3.Error) as exc:
                raise StoreUnavailable(f"cannot open the embedded store in {self._dir}: {exc}") from exc
            self._db = db
        return self._db

    def _read_conn(self) -> sqlite3.Connection:
        """This thread's read-only connection (opened on first use)."""
        local = self._local
        if getattr(local, "epoch", None) == self._epoch and local.conn is not None:
            return local.conn  # type: ignore[no-any-return]
        self._conn()  # creates the database and its tables
        try:
            conn = sqlite3.connect(self._dir / "graph.sqlite", timeout=60, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA query_only=1")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open the embedded store in {self._dir}: {exc}") from exc
        with self._conns_lock:
            # Connections of threads that have ended are closed here, not left to pile up.
            alive = {t.ident for t in threading.enumerate()}
            for ident in [i for i in self._read_conns if i not in alive]:
                self._read_conns.pop(ident).close()
            old = self._read_conns.get(threading.get_ident())
            if old is not None:
                old.close()
            self._read_conns[threading.get_ident()] = conn
            local.conn, local.epoch = conn, self._epoch
        return conn

    def _reads(self) -> sqlite3.Connection:
        """The connection to read SQL with: the main one for the thread inside ``atomic()`` (its
        writes are not committed yet), else the thread's own read connection."""
        if self._atomic_thread == threading.get_ident():
            return self._conn()
        return self._read_conn()

    def _seen_version(self, db: sqlite3.Connection) -> int:
        """``data_version`` of the main connection, which changes with commits of other connections
        only (this store's own writes are already in memory). Readers of all threads ask it on the
        main connection while a writer may be using it: SQLite serialises the calls, and the lock
        plus SQL text of their own keep two threads from stepping one cached statement at once."""
        with self._version_lock:
            return int(db.execute("PRAGMA main.data_version").fetchone()[0])

    def _sync(self) -> sqlite3.Connection:
        """The main connection, after reloading the graph if another connection changed the
        database. Called before taking the read lock, never while holding it."""
        db = self._conn()
        if self._seen_version(db) == self._version:
            return db
        with self._lock:  # no write of this store is under way: the graph may be replaced
            db = self._conn()
            version = self._seen_version(db)
            if version != self._version:
                snapshot = not db.in_transaction
                if snapshot:
                    db.execute("BEGIN")  # one snapshot for all the tables
                try:
                    with _gc_paused():
                        self._load(db)
                finally:
                    if snapshot:
                        db.execute("COMMIT")
                self._version = version
        return db

    def _load(self, db: sqlite3.Connection) -> None:
        """Read the whole graph, then swap it in under the exclusive lock (readers meanwhile keep
        using the one they have): from the snapshot ``save_snapshot`` wrote while the graph's
        ``GENERATION`` is the one it was saved at, else from ``db``."""
        codec = _Codec()
        codec.load(db)
        generation = _generation(db)
        graph = None
        saved = self._read_snapshot(generation)
        if saved is not None:
            try:
                graph = _Graph.of_rows(*saved, codec, parsed=True)
                self._snapshot_at = generation
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.warning("graph snapshot %s is damaged (%s): reading the database", self._snapshot_path, exc)
        if graph is None:
            graph = _Graph.of_rows(db.execute("SELECT * FROM nodes"), db.execute("SELECT * FROM rels"), codec,
                                   parsed=False)
        with self._rw.write():
            self._graph = graph
            self._codec = codec
            self._expanded = {}

    def save_snapshot(self) -> bool:
        """Save the graph's rows for the next process that opens it (``graph.marshal``, read instead
        of the database while the graph is unchanged), unless this store read them from one.
        ``ingest`` calls it at the end and a server once it has loaded the graph: a process that
        answers one question does not pay for it. False when there was nothing to save."""
        with self._lock:
            db = self._conn()
            if db.in_transaction:  # inside atomic(): what it wrote is not committed yet
                return False
            db.execute("BEGIN")  # one snapshot for all the tables
            try:
                generation = _generation(db)
                if generation is None or generation == self._snapshot_at:
                    return False
                loads = orjson.loads
                node_rows = [(key, name, loads(props), pid, sources, vfrom, vto)
                             for key, name, props, pid, sources, vfrom, vto in db.execute("SELECT * FROM nodes")]
                # Relationship ends as the nodes' own key objects: marshal writes a repeated object
                # once, and reads it back as one.
                same = {row[0]: row[0] for row in node_rows}.get
                rel_rows = [(same(src, src), typ, same(dst, dst), loads(props), pid, sources, vfrom, vto)
                            for src, typ, dst, props, pid, sources, vfrom, vto in db.execute("SELECT * FROM rels")]
            finally:
                db.execute("COMMIT")
            saved = self._save_snapshot(generation, (node_rows, rel_rows))
            if saved:
                self._snapshot_at = generation
            return saved

    @property
    def _snapshot_path(self) -> Path:
        return self._dir / SNAPSHOT_FILE

    def _read_snapshot(self, generation: str | None) -> tuple[list[tuple], list[tuple]] | None:
        """The node and relationship rows saved at ``generation``, or None."""
        if generation is None:
            return None
        try:
            raw = marshal.loads(self._snapshot_path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, EOFError, ValueError, TypeError) as exc:
            log.warning("graph snapshot %s is unreadable (%s): reading the database", self._snapshot_path, exc)
            return None
        if (not isinstance(raw, dict) or raw.get("format") != SNAPSHOT_FORMAT or raw.get("generation") != generation
                or not isinstance(raw.get("nodes"), list) or not isinstance(raw.get("rels"), list)):
            return None
        return raw["nodes"], raw["rels"]

    def _save_snapshot(self, generation: str, rows: tuple[list[tuple], list[tuple]]) -> bool:
        try:
            write_bytes_atomic(self._snapshot_path, marshal.dumps(
                {"format": SNAPSHOT_FORMAT, "generation": generation, "nodes": rows[0], "rels": rows[1]}))
            return True
        except OSError as exc:  # a read-only home: every process reads the database
            log.warning("cannot save the graph snapshot %s: %s", self._snapshot_path, exc)
            return False

    def _drop_snapshot(self) -> None:
        """Delete the snapshot of the graph (each write does, before its work and after its
        commit): it never outlives the data it holds (text that a write redacts or withdraws does
        not linger on disk)."""
        self._snapshot_at = None
        try:
            self._snapshot_path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot delete the graph snapshot %s: %s", self._snapshot_path, exc)

    def _write(self, db: sqlite3.Connection, work) -> None:  # type: ignore[no-untyped-def]
        """Run ``work(db)`` in one IMMEDIATE transaction against an up-to-date graph."""
        with _gc_paused():
            self._write_now(db, work)

    def _write_now(self, db: sqlite3.Connection, work) -> None:  # type: ignore[no-untyped-def]
        self._drop_snapshot()
        if db.in_transaction:  # inside atomic(): that transaction commits or rolls back everything
            apply = work(db)
            _new_generation(db)
            with self._rw.write():
                self._expanded = {}
                apply()
            return
        self._begin(db)
        try:
            apply = work(db)
            _new_generation(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._drop_snapshot()  # one another process saved while this write was under way
        with self._rw.write():
            self._expanded = {}
            apply()  # the in-memory graph changes only once the transaction is durable

    def _begin(self, db: sqlite3.Connection) -> None:
        """Open an IMMEDIATE (write) transaction on an up-to-date graph."""
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreError(f"the embedded store is locked by another process: {exc}") from exc
        try:
            version = db.execute("PRAGMA data_version").fetchone()[0]
            if version != self._version:
                self._load(db)
                self._version = version
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def ensure_schema(self) -> None:
        self._conn()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Make every write inside one transaction: other processes see all of it or none of it,
        and an error (or a kill) leaves the store as it was before. Nested use joins the outer one."""
        with self._lock:
            db = self._conn()
            if db.in_transaction:
                yield
                return
            with _gc_paused():
                self._begin(db)
                try:
                    self._atomic_thread = threading.get_ident()  # its reads see its own writes
                    yield
                except BaseException:
                    self._atomic_thread = None
                    db.execute("ROLLBACK")
                    self._load(db)  # the in-memory graph took the writes as they came: undo them
                    raise
                self._atomic_thread = None
                db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            with self._conns_lock:
                for conn in self._read_conns.values():
                    conn.close()
                self._read_conns.clear()
                self._epoch += 1
            if self._db is not None:
                self._db.close()
                self._db = None
                self._version = None

    def __enter__(self) -> EmbeddedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes ---------------------------------------------------------------------------------

    def upsert(
        self,
        nodes: Iterable[Node] = (),
        rels: Iterable[Relationship] = (),
        chunks: Iterable[Chunk] = (),
        *,
        at: str | None = None,
    ) -> WriteSummary:
        at = to_iso(at) if at else now_iso()
        with _gc_paused():
            batch = prepare_batch(nodes, rels, chunks)
        stamp = ProvenanceStamper(at)
        summary = WriteSummary()
        with self._lock:
            db = self._conn()

            def work(db: sqlite3.Connection):  # type: ignore[no-untyped-def]
                graph = self._graph
                node_data, succ = graph.nodes, graph.succ  # the adjacency dicts themselves: the hot path
                node_sources, rel_sources = graph.sources()
                # Nodes and relationships merge alike (props merge, sources accumulate, a closed
                # element reopens); the two loops are written out because this is the hot path: a
                # shared helper costs about 8% of write throughput.
                new_nodes: list[Node] = []
                for node in batch.nodes:
                    old = node_data.get(node.key)
                    srcs = element_sources(node)
                    if old is None:
                        merged = Node(node.key, node.name, stamp(node.provenance),
                                      {k: v for k, v in node.props.items() if v is not None},
                                      node.valid_from or at, node.valid_to, srcs)
                    else:
                        reopened = old.valid_to is not None
                        merged = Node(
                            node.key, node.name or old.name, stamp(node.provenance),
                            merge_props(old.props, node.props),
                            (node.valid_from or at) if reopened else old.valid_from,
                            node.valid_to,
                            old.sources + tuple(s for s in srcs if s not in old.sources),
                        )
                    new_nodes.append(merged)
                # Relationships need both ends present and open (see GraphStore.upsert).
                batch_open = {n.key: n.valid_to is None for n in new_nodes}

                def is_open(key: str) -> bool:
                    state = batch_open.get(key)
                    if state is not None:
                        return state
                    node = node_data.get(key)
                    return node is not None and node.valid_to is None

                new_rels: list[Relationship] = []
                for rel in batch.rels:
                    if not (is_open(rel.src) and is_open(rel.dst)):
                        summary.missing_endpoints += 1
                        continue
                    old_rel = succ.get(rel.src, {}).get(rel.dst, {}).get(rel.type._value_)
                    srcs = element_sources(rel)
                    if old_rel is None:
                        merged_rel = Relationship(rel.src, rel.type, rel.dst, stamp(rel.provenance),
                                                  {k: v for k, v in rel.props.items() if v is not None},
                                                  rel.valid_from or at, rel.valid_to, srcs)
                    else:
                        reopened = old_rel.valid_to is not None
                        merged_rel = Relationship(
                            rel.src, rel.type, rel.dst, stamp(rel.provenance),
                            merge_props(old_rel.props, rel.props),
                            (rel.valid_from or at) if reopened else old_rel.valid_from,
                            rel.valid_to,
                            old_rel.sources + tuple(s for s in srcs if s not in old_rel.sources),
                        )
                    new_rels.append(merged_rel)
                codec, new_provs = self._codec, {}
                node_rows = [(n.key, n.name, _dump_props(n.props), codec.prov_id(n.provenance, new_provs),
                              codec.dump_sources(n.sources, n.provenance), n.valid_from, n.valid_to)
                             for n in new_nodes]
                rel_rows = [(r.src, r.type._value_, r.dst, _dump_props(r.props), codec.prov_id(r.provenance, new_provs),
                             codec.dump_sources(r.sources, r.provenance), r.valid_from, r.valid_to) for r in new_rels]
                chunk_rows = [(c.id, c.node_key, c.ordinal, c.kind, c.text, c.start_line, c.end_line,
                               c.provenance.source_path, codec.prov_id(stamp(c.provenance), new_provs))
                              for c in batch.chunks]
                db.executemany("INSERT INTO provenance VALUES (?,?)", [(i, d) for d, i in new_provs.items()])
                db.executemany("INSERT OR REPLACE INTO nodes VALUES (?,?,?,?,?,?,?)", node_rows)
                db.executemany("INSERT OR REPLACE INTO rels VALUES (?,?,?,?,?,?,?,?)", rel_rows)
                db.executemany("INSERT OR REPLACE INTO chunks VALUES (?,?,?,?,?,?,?,?,?)", chunk_rows)
                summary.nodes, summary.rels, summary.chunks = len(new_nodes), len(new_rels), len(batch.chunks)

                def apply() -> None:
                    codec.commit(new_provs)
                    graph.add_nodes(new_nodes)
                    graph.add_rels(new_rels)
                    for n in new_nodes:
                        for s in n.sources:
                            node_sources.setdefault(s, set()).add(n.key)
                    for r in new_rels:
                        for s in r.sources:
                            rel_sources.setdefault(s, set()).add((r.src, r.type._value_, r.dst))

                return apply

            self._write(db, work)
            self._version = db.execute("PRAGMA data_version").fetchone()[0]
        return summary

    def set_sources(self, nodes: Mapping[str, Sequence[str]] | None = None,
                    rels: Mapping[RelIdent, Sequence[str]] | None = None) -> WriteSummary:
        node_lists = {k: tuple(dict.fromkeys(v)) for k, v in (nodes or {}).items()}
        rel_lists = {tuple(i): tuple(dict.fromkeys(v)) for i, v in (rels or {}).items()}
        if any(not v for v in [*node_lists.values(), *rel_lists.values()]):
            raise StoreError("set_sources needs at least one source per element (close or remove it instead)")
        summary = WriteSummary()
        with self._lock:
            db = self._conn()

            def work(db: sqlite3.Connection):  # type: ignore[no-untyped-def]
                graph = self._graph
                node_sources, rel_sources = graph.sources()
                new_nodes = [(old, Node(old.key, old.name, old.provenance, old.props, old.valid_from, old.valid_to,
                                        node_lists[key]))
                             for key in sorted(node_lists) if (old := graph.nodes.get(key)) is not None]
                new_rels = []
                for ident in sorted(rel_lists):
                    src, typ, dst = ident
                    old_rel = graph.rel(src, typ, dst)
                    if old_rel is not None:
                        new_rels.append((old_rel, Relationship(old_rel.src, old_rel.type, old_rel.dst,
                                                               old_rel.provenance, old_rel.props, old_rel.valid_from,
                                                               old_rel.valid_to, rel_lists[ident])))
                dumps = self._codec.dump_sources
                db.executemany("UPDATE nodes SET sources=? WHERE key=?",
                               [(dumps(n.sources, n.provenance), n.key) for _, n in new_nodes])
                db.executemany("UPDATE rels SET sources=? WHERE src=? AND type=? AND dst=?",
                               [(dumps(r.sources, r.provenance), *r.ident) for _, r in new_rels])
                summary.nodes, summary.rels = len(new_nodes), len(new_rels)

                def apply() -> None:
                    for old, n in new_nodes:
                        graph.nodes[n.key] = n
                        for path in old.sources:
                            node_sources.get(path, set()).discard(n.key)
                        for path in n.sources:
                            node_sources.setdefault(path, set()).add(n.key)
                    for old_rel, r in new_rels:
                        graph.set_rel(r)
                        for path in old_rel.sources:
                            rel_sources.get(path, set()).discard(r.ident)
                        for path in r.sources:
                            rel_sources.setdefault(path, set()).add(r.ident)

                return apply

            self._write(db, work)
            self._version = db.execute("PRAGMA data_version").fetchone()[0]
        return summary

    def close_sources(self, paths: Iterable[str], *, at: str | None = None, keep: Keep | None = None) -> WriteSummary:
        return self._withdraw(set(paths), at=to_iso(at) if at else now_iso(), delete=False, keep=keep or Keep())

    def remove_sources(self, paths: Iterable[str]) -> WriteSummary:
        return self._withdraw(set(paths), at=now_iso(), delete=True, keep=Keep())

    def _withdraw(self, paths: set[str], *, at: str, delete: bool, keep: Keep) -> WriteSummary:
        summary = WriteSummary()
        if not paths:
            return summary
        with self._lock:
            db = self._conn()

            def work(db: sqlite3.Connection):  # type: ignore[no-untyped-def]
                graph = self._graph
                node_sources, rel_sources = graph.sources()
                node_updates: list[Node] = []  # sources shrunk, maybe closed
                node_deletes: list[str] = []
                rel_updates: dict[RelIdent, Relationship] = {}
                rel_deletes: set[RelIdent] = set()
                for key in sorted(set().union(*(node_sources.get(p, ()) for p in paths)) - keep.nodes):
                    node: Node = graph.nodes[key]
                    left = tuple(s for s in node.sources if s not in paths)
                    if left:
                        node_updates.append(Node(node.key, node.name, node.provenance, node.props,
                                                 node.valid_from, node.valid_to, left))
                    elif delete:
                        node_deletes.append(key)
                    else:
                        closed = Node(node.key, node.name, node.provenance, node.props,
                                      node.valid_from, node.valid_to or at, left)
                        node_updates.append(closed)
                        if node.valid_to is None:
                            summary.closed_nodes += 1
                            # A fact about a node that no longer holds cannot hold either.
                            for rel in graph.incident_rels(key):
                                r = rel_updates.get(rel.ident) or rel
                                if r.valid_to is None:
                                    rel_updates[rel.ident] = Relationship(
                                        r.src, r.type, r.dst, r.provenance, r.props, r.valid_from, at, r.sources)
                                    summary.closed_rels += 1
                for ident in sorted(set().union(*(rel_sources.get(p, ()) for p in paths)) - keep.rels):
                    src, typ, dst = ident
                    r = rel_updates.get(ident) or graph.succ[src][dst][typ]
                    left = tuple(s for s in r.sources if s not in paths)
                    if left:
                        rel_updates[ident] = Relationship(r.src, r.type, r.dst, r.provenance, r.props,
                                                          r.valid_from, r.valid_to, left)
                    elif delete:
                        rel_deletes.add(ident)
                        rel_updates.pop(ident, None)
                    else:
                        if r.valid_to is None:
                            summary.closed_rels += 1
                        rel_updates[ident] = Relationship(r.src, r.type, r.dst, r.provenance, r.props,
                                                          r.valid_from, r.valid_to or at, left)
                deleted_set = set(node_deletes)
                for key in node_deletes:  # a deleted node takes its relationships with it
                    for rel in graph.incident_rels(key):
                        rel_deletes.add(rel.ident)
                        rel_updates.pop(rel.ident, None)
                rel_updates = {i: r for i, r in rel_updates.items() if i[0] not in deleted_set and i[2] not in deleted_set}
                dumps = self._codec.dump_sources
                db.executemany("UPDATE nodes SET sources=?, valid_to=? WHERE key=?",
                               [(dumps(n.sources, n.provenance), n.valid_to, n.key) for n in node_updates])
                db.executemany("DELETE FROM nodes WHERE key=?", [(k,) for k in node_deletes])
                db.executemany("UPDATE rels SET sources=?, valid_to=? WHERE src=? AND type=? AND dst=?",
                               [(dumps(r.sources, r.provenance), r.valid_to, *i) for i, r in rel_updates.items()])
                db.executemany("DELETE FROM rels WHERE src=? AND type=? AND dst=?", sorted(rel_deletes))
                chunk_ids = [cid for p in sorted(paths)
                             for (cid,) in db.execute("SELECT id FROM chunks WHERE source_path=?", (p,))
                             if cid not in keep.chunks]
                db.executemany("DELETE FROM chunks WHERE id=?", [(cid,) for cid in chunk_ids])
                summary.removed_chunks = len(chunk_ids)
                summary.removed_nodes, summary.removed_rels = len(node_deletes), len(rel_deletes)

                def apply() -> None:
                    for n in node_updates:
                        graph.nodes[n.key] = n
                    for r in rel_updates.values():
                        graph.set_rel(r)
                    for u, t, v in rel_deletes:
                        gone = graph.remove_rel(u, t, v)
                        if gone is not None:
                            # Sources outside ``paths`` (a call from another file into a deleted
                            # function) must forget it too, or their withdrawal would look it up.
                            for path in gone.sources:
                                rel_sources.get(path, set()).discard((u, t, v))
                    graph.remove_nodes(node_deletes)
                    for p in paths:  # kept elements still list these paths
                        if p in node_sources:
                            node_sources[p] &= keep.nodes
                        if p in rel_sources:
                            rel_sources[p] &= keep.rels

                return apply

            self._write(db, work)
            self._version = db.execute("PRAGMA data_version").fetchone()[0]
        return summary

    # --- reads ----------------------------------------------------------------------------------

    def get_node(self, key: str) -> Node | None:
        self._sync()
        with self._rw.read():
            return self._graph.nodes.get(key)

    def get_nodes(self, keys: Iterable[str]) -> dict[str, Node]:
        self._sync()
        with self._rw.read():
            nodes = self._graph.nodes
            return {k: nodes[k] for k in keys if k in nodes}

    def get_relationships(self, keys: Iterable[str], *, as_of: str | None = None) -> list[Relationship]:
        self._sync()
        with self._rw.read():
            graph = self._graph
            out: dict[RelIdent, Relationship] = {}
            for key in keys:
                for r in graph.incident_rels(key):
                    if r.valid_at(as_of):
                        out[r.ident] = r
            return [out[i] for i in sorted(out)]

    def incident_edges(
        self,
        keys: Sequence[str],
        *,
        rel_types: Sequence[str] | None = None,
        direction: Direction = "both",
        as_of: str | None = None,
    ) -> list[Edge]:
        self._sync()
        with self._rw.read():
            graph = self._graph
            types = set(rel_types) if rel_types is not None else None
            out: list[Edge] = []
            for key in keys:
                if key not in graph.nodes:
                    continue
                sides = []
                if direction in ("out", "both"):
                    sides.append(graph.succ[key])
                if direction in ("in", "both"):
                    sides.append(graph.pred[key])
                for side in sides:
                    for other, by_type in side.items():
                        for t, r in by_type.items():
                            if types is not None and t not in types:
                                continue
                            if not r.valid_at(as_of) or not graph.nodes[other].valid_at(as_of):
                                continue
                            out.append(Edge(key, Step(r.src, t, r.dst), other))
            return out

    def expand(self, keys: Sequence[str], *, as_of: str | None = None, hub: Hub | None = None) -> list[Edge]:
        # incident_edges without the type and direction options, on the adjacency dicts:
        # graph retrieval calls it on thousands of nodes per question. A hub is thinned before its
        # edges are made (Hub.thin's rule, counted over the same valid relationships).
        self._sync()
        with self._rw.read():
            out: list[Edge] = []
            if as_of is not None:
                for key in keys:
                    out += self._expand_one(key, as_of, hub)
                return out
            cache = self._expanded
            if len(cache) > EXPAND_CACHE_LIMIT:
                cache.clear()
            for key in keys:
                edges = cache.get((key, hub))
                if edges is None:
                    edges = cache[(key, hub)] = self._expand_one(key, None, hub)
                out += edges
            return out

    def _expand_one(self, key: str, as_of: str | None, hub: Hub | None) -> list[Edge]:
        """One node's valid edges, thinned when it is a hub (the caller holds the read lock)."""
        succ, pred, nodes = self._graph.succ, self._graph.pred, self._graph.nodes
        if key not in succ:
            return []
        valid: list[tuple[str, str, bool]] = []
        for adjacency, outgoing in ((succ[key], True), (pred[key], False)):
            for other, multi in adjacency.items():
                node = nodes[other]
                if not (node.valid_to is None if as_of is None else node.valid_at(as_of)):
                    continue
                for t, r in multi.items():
                    if r.valid_to is None if as_of is None else r.valid_at(as_of):
                        valid.append((other, t, outgoing))
        kept = hub.crossing([t for _, t, _ in valid]) if hub is not None else None
        if kept is not None:
            valid = [v for v in valid if v[1] in kept]
        return [Edge(key, Step(key, t, other) if outgoing else Step(other, t, key), other)
                for other, t, outgoing in valid]

    def iter_nodes(self, kinds: Iterable[NodeKind] | None = None, *, include_closed: bool = False) -> Iterator[Node]:
        self._sync()
        with self._rw.read():
            wanted = {k.prefix for k in kinds} if kinds is not None else None
            nodes = self._graph.nodes
            selected = [
                n for k, n in nodes.items()
                if (wanted is None or k[: k.index(":") + 1] in wanted)
                and (include_closed or n.valid_to is None)
            ]
        return iter(sorted(selected, key=lambda n: n.key))

    def iter_rels(self, *, include_closed: bool = False) -> Iterator[Relationship]:
        """Every relationship, in identity order."""
        self._sync()
        with self._rw.read():
            rels = [r for r in self._graph.rels() if include_closed or r.valid_to is None]
        return iter(sorted(rels, key=lambda r: r.ident))

    def _chunk_rows(self, sql: str, params: Sequence[object] = ()) -> list[Chunk]:
        self._sync()
        db = self._reads()
        rows = db.execute(sql, params).fetchall()
        by_id = self._codec.by_id  # a writer may add to it meanwhile: looked up, never iterated
        # A write commits its provenance records before it adds them to the codec: read those here.
        unknown = {row[8] for row in rows if row[8] not in by_id}
        extra = _read_provenance(db, unknown) if unknown else {}

        def prov(pid: int) -> Provenance:
            found = by_id.get(pid)
            return found if found is not None else extra[pid]

        return [Chunk(node_key, ordinal, text, kind, prov(pid), start, end, cid)
                for cid, node_key, ordinal, kind, text, start, end, _src, pid in rows]

    def iter_chunks(self) -> Iterator[Chunk]:
        return iter(self._chunk_rows("SELECT * FROM chunks ORDER BY id"))

    def get_chunks(self, node_keys: Iterable[str]) -> list[Chunk]:
        keys = sorted(set(node_keys))
        out: list[Chunk] = []
        for i in range(0, len(keys), 500):
            part = keys[i: i + 500]
            out += self._chunk_rows(
                f"SELECT * FROM chunks WHERE node_key IN ({','.join('?' * len(part))})", part)
        return sorted(out, key=lambda c: (c.node_key, c.ordinal))

    def get_chunks_by_id(self, ids: Iterable[int]) -> dict[int, Chunk]:
        wanted = sorted(set(ids))
        out: dict[int, Chunk] = {}
        for i in range(0, len(wanted), 500):
            part = wanted[i: i + 500]
            for c in self._chunk_rows(f"SELECT * FROM chunks WHERE id IN ({','.join('?' * len(part))})", part):
                out[c.id] = c
        return out

    def chunk_ids(self) -> set[int]:
        return {row[0] for row in self._reads().execute("SELECT id FROM chunks").fetchall()}

    def counts(self) -> Counts:
        # Counted by SQLite, not from the graph in memory (which holds what it committed): a new
        # process asking whether a project holds anything need not load the whole graph first.
        db = self._reads()
        counts = Counts()
        for prefix, is_open, n in db.execute(
                "SELECT substr(key, 1, instr(key, ':') - 1), valid_to IS NULL, count(*) FROM nodes GROUP BY 1, 2"):
            if is_open:
                kind = KIND_BY_PREFIX[prefix].value
                counts.nodes[kind] = counts.nodes.get(kind, 0) + n
            else:
                counts.closed_nodes += n
        for typ, is_open, n in db.execute("SELECT type, valid_to IS NULL, count(*) FROM rels GROUP BY 1, 2"):
            if is_open:
                counts.rels[typ] = n
            else:
                counts.closed_rels += n
        counts.chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return counts

    def has_nodes(self) -> bool:
        return self._reads().execute("SELECT 1 FROM nodes WHERE valid_to IS NULL LIMIT 1").fetchone() is not None

    # --- project state --------------------------------------------------------------------------

    def get_meta(self, name: str) -> str | None:
        rows = self._reads().execute("SELECT value FROM meta WHERE name=?", (name,)).fetchall()
        return rows[0][0] if rows else None

    def set_meta(self, values: dict[str, str | None]) -> None:
        with self._lock, _transaction(self._conn()) as db:
            db.executemany("DELETE FROM meta WHERE name=?", [(k,) for k, v in values.items() if v is None])
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)",
                           [(k, v) for k, v in values.items() if v is not None])

    def source_states(self) -> dict[str, str]:
        return dict(self._reads().execute("SELECT path, hash FROM source_states").fetchall())

    def set_source_states(self, states: dict[str, str | None]) -> None:
        with self._lock, _transaction(self._conn()) as db:
            db.executemany("DELETE FROM source_states WHERE path=?",
                           [(k,) for k, v in states.items() if v is None])
            db.executemany("INSERT OR REPLACE INTO source_states VALUES (?,?)",
                           [(k, v) for k, v in states.items() if v is not None])

    def drop_project(self) -> None:
        with self._lock, _transaction(self._conn()) as db:
            for table in ("nodes", "rels", "chunks", "meta", "source_states", "provenance"):
                db.execute(f"DELETE FROM {table}")  # noqa: S608 (fixed table names)
        self._drop_snapshot()
        self._version = None


def _read_provenance(db: sqlite3.Connection, ids: set[int]) -> dict[int, Provenance]:
    """Provenance records by id, read from the database."""
    out: dict[int, Provenance] = {}
    wanted = sorted(ids)
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        for pid, data in db.execute(f"SELECT id, data FROM provenance WHERE id IN ({','.join('?' * len(part))})",
                                    part).fetchall():
            out[pid] = Provenance.from_props(orjson.loads(data))
    return out


class _Graph:
    """The graph in memory: nodes by key, and each relationship both at ``succ[src][dst][type]``
    and at ``pred[dst][src][type]`` (one type dict shared by the two sides, so replacing a
    relationship on one side replaces it on the other)."""

    __slots__ = ("nodes", "succ", "pred", "_by_source")

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.succ: dict[str, dict[str, dict[str, Relationship]]] = {}
        self.pred: dict[str, dict[str, dict[str, Relationship]]] = {}
        self._by_source: tuple[dict[str, set[str]], dict[str, set[RelIdent]]] | None = None

    @classmethod
    def of_rows(cls, node_rows: Iterable[Sequence], rel_rows: Iterable[Sequence], codec: _Codec, *,
                parsed: bool) -> _Graph:
        """The graph of rows as the tables hold them (properties as JSON text unless ``parsed``)."""
        graph = cls()
        by_id, load_sources, loads = codec.by_id, codec.load_sources, orjson.loads
        # A first question waits for this: the loops build the graph's dicts directly.
        nodes, succ, pred = graph.nodes, graph.succ, graph.pred
        for key, name, props, pid, sources, vfrom, vto in node_rows:
            prov = by_id[pid]
            nodes[key] = Node(key, name, prov, props if parsed else loads(props), vfrom, vto,
                              load_sources(sources, prov))
            succ[key] = {}
            pred[key] = {}
        for src, typ, dst, props, pid, sources, vfrom, vto in rel_rows:
            prov = by_id[pid]
            by_type = succ[src].get(dst)
            if by_type is None:
                by_type = succ[src][dst] = pred[dst][src] = {}
            by_type[typ] = Relationship(src, _RELTYPES[typ], dst, prov, props if parsed else loads(props), vfrom, vto,
                                        load_sources(sources, prov))
        return graph

    def sources(self) -> tuple[dict[str, set[str]], dict[str, set[RelIdent]]]:
        """Source path -> the node keys, and the relationship idents, that list it among their
        sources. Only writes need them: built at the first, kept up to date by the writes."""
        if self._by_source is None:
            node_sources: dict[str, set[str]] = {}
            rel_sources: dict[str, set[RelIdent]] = {}
            for key, n in self.nodes.items():
                for path in n.sources:
                    node_sources.setdefault(path, set()).add(key)
            for r in self.rels():
                for path in r.sources:
                    rel_sources.setdefault(path, set()).add(r.ident)
            self._by_source = (node_sources, rel_sources)
        return self._by_source

    def add_nodes(self, nodes: Iterable[Node]) -> None:
        """Add nodes, or replace those already present (their relationships stay)."""
        known, succ, pred = self.nodes, self.succ, self.pred
        for n in nodes:
            if n.key not in known:
                succ[n.key] = {}
                pred[n.key] = {}
            known[n.key] = n

    def add_rels(self, rels: Iterable[Relationship]) -> None:
        """Add or replace relationships whose end nodes are present. Loading a large project is
        mostly this loop, hence the plain dict work."""
        succ, pred = self.succ, self.pred
        for r in rels:
            u, v = r.src, r.dst
            by_type = succ[u].get(v)
            if by_type is None:
                by_type = succ[u][v] = pred[v][u] = {}
            by_type[r.type._value_] = r

    def set_rel(self, r: Relationship) -> None:
        self.add_rels((r,))

    def rel(self, src: str, typ: str, dst: str) -> Relationship | None:
        return self.succ.get(src, {}).get(dst, {}).get(typ)

    def incident_rels(self, key: str) -> list[Relationship]:
        """The node's outgoing, then incoming relationships (a self-loop once)."""
        out = [r for by_type in self.succ.get(key, {}).values() for r in by_type.values()]
        out += [r for other, by_type in self.pred.get(key, {}).items() if other != key for r in by_type.values()]
        return out

    def rels(self) -> Iterator[Relationship]:
        for targets in self.succ.values():
            for by_type in targets.values():
                yield from by_type.values()

    def remove_rel(self, src: str, typ: str, dst: str) -> Relationship | None:
        """Remove one relationship and return it (None when absent)."""
        by_type = self.succ.get(src, {}).get(dst)
        if by_type is None or typ not in by_type:
            return None
        gone = by_type.pop(typ)
        if not by_type:
            del self.succ[src][dst]
            del self.pred[dst][src]
        return gone

    def remove_nodes(self, keys: Iterable[str]) -> None:
        """Remove nodes with their relationships; absent keys are ignored."""
        succ, pred = self.succ, self.pred
        for key in keys:
            if self.nodes.pop(key, None) is None:
                continue
            for other in succ.pop(key):
                if other != key:
                    del pred[other][key]
            for other in pred.pop(key):
                if other != key:
                    del succ[other][key]


def _generation(db: sqlite3.Connection) -> str | None:
    """The graph's ``GENERATION`` (None before its first write)."""
    found = db.execute("SELECT value FROM meta WHERE name=?", (GENERATION,)).fetchone()
    return found[0] if found else None


def _new_generation(db: sqlite3.Connection) -> None:
    """Mark the graph changed (``GENERATION``), in the transaction of the write that changed it."""
    db.execute("INSERT OR REPLACE INTO meta VALUES (?,?)", (GENERATION, uuid.uuid4().hex))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector during bulk work, then freeze what it built.

    Building hundreds of thousands of objects that all stay alive makes the collector rescan the
    whole graph again and again, during the write and long after it. The graph's objects form no
    reference cycles, so once built they are moved out of the collector's sight (``gc.freeze``).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One IMMEDIATE transaction: committed on success, rolled back on any error (inside
    :meth:`EmbeddedStore.atomic`, part of that transaction instead)."""
    if db.in_transaction:
        yield db
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
