"""The Neo4j store, through the official driver.

Every node has the label ``:Node`` and its kind's label (``:Symbol``, ``:Decision``...), and the
properties ``project``, ``key``, ``kind``, ``name``, the provenance fields, ``valid_from`` and
``valid_to``. Relationships carry the provenance fields and validity.

Sources: ``source_path`` names the source an element came from. The rare element that several
sources assert also has ``sources`` (all of them) and ``multi = true``; a closed element has
``sources = []``. Both ``source_path`` and ``multi`` are indexed, so withdrawing a file finds its
elements without a scan. Properties are kept few on purpose: write cost grows with their number.

Writes are batched with ``UNWIND`` in managed transactions (the driver retries transient errors),
reads are one auto-commit statement each (one round trip; retried here);
values always travel as parameters, and the only text spliced into a query is a label or a
relationship type taken from the model's enums.
"""

from __future__ import annotations

import gc
import hashlib
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from graphmem.config import Neo4jSettings, check_neo4j_uri
from graphmem.cypher import read_cypher, split_statements
from graphmem.errors import StoreError, StoreUnavailable
from graphmem.model import (
    NODE_LABEL,
    PROVENANCE_FIELDS,
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
from graphmem.stores.base import (
    CHUNKS_GENERATION,
    GENERATION,
    Counts,
    Direction,
    Edge,
    Hub,
    Keep,
    Step,
    TraversalMixin,
    WriteSummary,
)
from graphmem.stores.batch import Batch, ProvenanceStamper, element_sources, prepare_batch

T = TypeVar("T")

# A process keeps each node's expansion (graph retrieval reads thousands per question) until the
# project's GENERATION changes, as the embedded store does.
EXPAND_CACHE_LIMIT = 50_000  # nodes whose expansion is kept (emptied when full)
READ_ATTEMPTS = 3  # tries of one read statement when a failure is retryable
# Statements whose plan no statistics can change (their lookups go through uniqueness constraints,
# internal ids or the indexes they name) keep their cached plan: by default Neo4j plans a statement
# again once the counts it was planned with have moved enough, which a large write does to every
# statement it runs, at tens of milliseconds each (more for a withdrawal's).
_KEEP_PLAN = "CYPHER replan=skip"
_BUMP = _KEEP_PLAN + " UNWIND $names AS name MERGE (m:GraphmemMeta {project: $project, name: name}) SET m.value = $value"
_GENERATION_NOW = _KEEP_PLAN + " OPTIONAL MATCH (m:GraphmemMeta {project: $project, name: $name}) RETURN m.value"
# Bookmarks of each Neo4j (by URI) shared by the stores of this process: with a cluster, a read
# that follows a write, even on another connection (an MCP server's ingest and its readers), waits
# for a member that has the write.
_BOOKMARKS: dict[str, Any] = {}
_BOOKMARKS_LOCK = threading.Lock()


def _shared_bookmarks(uri: str) -> Any:
    import neo4j

    with _BOOKMARKS_LOCK:
        return _BOOKMARKS.setdefault(uri, neo4j.GraphDatabase.bookmark_manager())

_BOOKKEEPING = frozenset({"project", "key", "kind", "name", "sources", "multi", "valid_from", "valid_to"})
_PROV = frozenset(PROVENANCE_FIELDS)
_RELTYPES = {t.value: t for t in RelType}


def _edges(rows: list[Any]) -> list[Edge]:
    """Edges from ``(origin, [[type, other, outgoing], ...])`` rows, once each (a self-loop is
    matched twice)."""
    seen: dict[tuple[str, str, str, str], Edge] = {}
    for origin, rels in rows:
        for typ, other, outgoing in rels:
            step = Step(origin, typ, other) if outgoing else Step(other, typ, origin)
            seen.setdefault((origin, step.src, typ, step.dst), Edge(origin, step, other))
    return list(seen.values())


def _store_error(exc: Exception) -> StoreError:
    """The graphmem error for a driver failure: the server unreachable (or refusing the login), or
    a query it refused."""
    import neo4j.exceptions as nx

    if isinstance(exc, (nx.ServiceUnavailable, nx.SessionExpired, nx.AuthError)):
        return StoreUnavailable(f"Neo4j is not available: {exc}")
    if isinstance(exc, nx.Neo4jError):
        return StoreError(f"Neo4j refused a graphmem query: {exc.code}: {exc.message}")
    return StoreError(f"Neo4j failed: {exc}")


def _valid(var: str, as_of: str | None) -> str:
    """Cypher condition: ``var`` valid at ``$as_of`` (open, when there is no ``as_of``)."""
    if as_of is None:
        return f"{var}.valid_to IS NULL"
    return f"({var}.valid_from <= $as_of AND ({var}.valid_to IS NULL OR {var}.valid_to > $as_of))"


# The source list of an element as stored (see the module docstring), before this write.
_OLD_SOURCES = "coalesce({v}.sources, CASE WHEN {v}.source_path IS NULL THEN [] ELSE [{v}.source_path] END)"

# After MERGE: a new element has no valid_from yet; a closed one is reopened from row.valid_from.
# Everything read from the element is read before the one SET clause, so the planner needs no Eager
# barrier (it would add one for a read after a map update).
_MERGE_TAIL = """
WITH {v}, row, {v}.valid_from AS old_from, {v}.valid_from IS NULL OR {v}.valid_to IS NOT NULL AS restart,
     {old} AS old
WITH {v}, row, old_from, restart, old + [s IN row.sources WHERE NOT s IN old] AS merged
SET {v} += row.props,{extra}
    {v}.valid_from = CASE WHEN restart THEN row.valid_from ELSE old_from END,
    {v}.valid_to = row.valid_to,
    {v}.sources = CASE WHEN size(merged) > 1 THEN merged END,
    {v}.multi = CASE WHEN size(merged) > 1 THEN true END
"""

_UPSERT_NODES = _KEEP_PLAN + """
UNWIND $rows AS row
MERGE (n:Node {project: $project, key: row.key})""" + _MERGE_TAIL.format(
    v="n", old=_OLD_SOURCES.format(v="n"), extra=" n:`%(label)s`, n.kind = row.kind, n.name = row.name,")

_UPSERT_RELS = _KEEP_PLAN + """
UNWIND $rows AS row
MATCH (a:Node {project: $project, key: row.src}) WHERE a.valid_to IS NULL
MATCH (b:Node {project: $project, key: row.dst}) WHERE b.valid_to IS NULL
MERGE (a)-[r:`%(type)s`]->(b)""" + _MERGE_TAIL.format(v="r", old=_OLD_SOURCES.format(v="r"), extra="") + """
RETURN count(r) AS written
"""

# Fast paths for elements known not to exist yet (about half the cost of the merging form): nodes
# the same transaction found missing, relationships with an end created by this upsert.
_EXISTING_KEYS = _KEEP_PLAN + " UNWIND $keys AS k MATCH (n:Node {project: $project, key: k}) RETURN collect(k) AS keys"

_CREATE_NODES = _KEEP_PLAN + """
UNWIND $rows AS row
CREATE (n:Node:`%(label)s`)
SET n += row.props, n.project = $project, n.key = row.key, n.kind = row.kind, n.name = row.name,
    n.valid_from = row.valid_from%(extra)s
RETURN count(n) AS written
"""
# The common new node (open, one source), with its internal id for what this upsert links to it.
_CREATE_OPEN_NODES = _KEEP_PLAN + """
UNWIND $rows AS row
CREATE (n:Node:`%(label)s` {project: $project, key: row.key, kind: row.kind, name: row.name,
                            valid_from: row.valid_from})
SET n += row.props
RETURN collect([row.key, id(n)]) AS ids
"""

_CREATE_RELS = _KEEP_PLAN + """
UNWIND $rows AS row
MATCH (a:Node {project: $project, key: row.src}) WHERE a.valid_to IS NULL
MATCH (b:Node {project: $project, key: row.dst}) WHERE b.valid_to IS NULL
CREATE (a)-[r:`%(type)s`]->(b)
SET r += row.props, r.valid_from = row.valid_from%(extra)s
RETURN count(r) AS written
"""

# The common new relationship: both ends created by this upsert (found by internal id, checked
# against project and key, without an index lookup), one source, open. Its row is a list (decoded
# faster than a map); validity and provenance are set as it is created, its own properties (the
# row's last value, a map) after.
_NEW_REL_FIELDS = ("valid_from", *PROVENANCE_FIELDS)
_CREATE_NEW_RELS = _KEEP_PLAN + """
UNWIND $rows AS row
MATCH (a) WHERE id(a) = row[0] AND a.project = $project AND a.key = row[1]
MATCH (b) WHERE id(b) = row[2] AND b.project = $project AND b.key = row[3]
CREATE (a)-[r:`%(type)s` {""" + ", ".join(f"{f}: row[{i + 4}]" for i, f in enumerate(_NEW_REL_FIELDS)) + """}]->(b)
%(own)s
RETURN count(r) AS written
"""
_OWN_PROPS = f"SET r += row[{4 + len(_NEW_REL_FIELDS)}]"

# Only for the rare new element that is born closed or with several sources: every SET item costs.
_CREATE_EXTRA = """, {v}.valid_to = row.valid_to,
    {v}.sources = CASE WHEN size(row.sources) > 1 THEN row.sources END,
    {v}.multi = CASE WHEN size(row.sources) > 1 THEN true END"""


def _plain(row: dict[str, Any]) -> bool:
    """A new element with one source and no end: the lean create statement fits it."""
    return row["valid_to"] is None and len(row["sources"]) == 1


_UPSERT_CHUNKS = _KEEP_PLAN + """
UNWIND $rows AS row
MERGE (c:Chunk {project: $project, id: row.id})
SET c += row.props%(vector)s
WITH c, row
MATCH (n:Node {project: $project, key: row.node_key})
MERGE (n)-[:HAS_CHUNK]->(c)
"""
# Chunks the same transaction found missing: created, and linked without looking for a link (a new
# chunk has none).
_EXISTING_CHUNKS = _KEEP_PLAN + " UNWIND $ids AS i MATCH (c:Chunk {project: $project, id: i}) RETURN collect(i) AS ids"
_CREATE_CHUNKS = _KEEP_PLAN + """
UNWIND $rows AS row
CREATE (c:Chunk)
SET c += row.props, c.project = $project, c.id = row.id%(vector)s
WITH c, row
MATCH (n:Node {project: $project, key: row.node_key})
CREATE (n)-[:HAS_CHUNK]->(c)
"""
# ... of a node this upsert created (found by internal id, checked against project and key).
_CREATE_NEW_NODE_CHUNKS = _KEEP_PLAN + """
UNWIND $rows AS row
MATCH (n) WHERE id(n) = row.node AND n.project = $project AND n.key = row.node_key
CREATE (n)-[:HAS_CHUNK]->(c:Chunk {project: $project, id: row.id})
SET c += row.props%(vector)s
"""
# With server-side indexes: the project's vector label and the chunk's vector, stored as float32
# (half the size of a Cypher list).
_CHUNK_VECTOR = """
SET c:`%(label)s`
WITH c, row
CALL db.create.setNodeVectorProperty(c, 'embedding', row.vector)"""


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection during a large write: its rows (hundreds of thousands of small
    dicts and lists, no cycles) made the collector rescan everything the process holds over and
    over (a quarter of the client's time writing Django's package). Not paused in a thread while
    another is writing: the first writer's end resumes it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _project_tag(project: str) -> str:
    return hashlib.blake2b(project.encode(), digest_size=8).hexdigest()


def vector_label(project: str) -> str:
    """The label of a project's chunks in its own vector index (server-side indexes): one index
    per project, so a query searches that project's vectors only, with its own HNSW graph."""
    return f"GraphmemVectors_{_project_tag(project)}"


def vector_index_name(project: str) -> str:
    """The name of a project's vector index (see ``vector_label``)."""
    return f"graphmem_vectors_{_project_tag(project)}"

# What server-side indexing adds to each chunk row: ``tokens``, ``digest`` and ``vector``, in order.
ChunkFields = Callable[[list[Chunk]], list[dict[str, Any]]]

# Withdrawing sources: the elements whose source_path is withdrawn, and the multi-source ones that
# list it. Each row says what sources are left.
_WITHDRAW_NODES = _KEEP_PLAN + """
CALL () {
  MATCH (n:Node {project: $project}) USING INDEX n:Node(project, source_path)
  WHERE n.source_path IN $paths RETURN n
  UNION
  MATCH (n:Node {project: $project, multi: true}) USING INDEX n:Node(project, multi)
  WHERE any(s IN n.sources WHERE s IN $paths) RETURN n
}
WITH n, %(old)s AS old
WHERE any(s IN old WHERE s IN $paths) AND NOT n.key IN $keep
RETURN n.key AS key, [s IN old WHERE NOT s IN $paths] AS left
""" % {"old": _OLD_SOURCES.format(v="n")}

_WITHDRAW_RELS = _KEEP_PLAN + """
CALL () {
  MATCH (a:Node)-[r:`%(type)s`]->() USING INDEX r:`%(type)s`(source_path)
  WHERE r.source_path IN $paths AND a.project = $project RETURN r
  UNION
  MATCH (a:Node)-[r:`%(type)s`]->() USING INDEX r:`%(type)s`(multi)
  WHERE r.multi = true AND a.project = $project AND any(s IN r.sources WHERE s IN $paths) RETURN r
}
WITH r, %(old)s AS old
WHERE any(s IN old WHERE s IN $paths) AND NOT [startNode(r).key, endNode(r).key] IN $keep
RETURN elementId(r) AS id, [s IN old WHERE NOT s IN $paths] AS left
""".replace("%(old)s", _OLD_SOURCES.format(v="r"))

# How many relationships of each type (in RelType's order) the database holds, from its count store.
_REL_TYPE_COUNTS = _KEEP_PLAN + " RETURN [" + ", ".join(f"COUNT {{ ()-[:`{t.value}`]->() }}" for t in RelType) + "]"

# Sources left after a withdrawal, written back in the stored form.
_SET_LEFT = """SET {v}.sources = CASE WHEN size(row.left) > 1 THEN row.left END,
    {v}.multi = CASE WHEN size(row.left) > 1 THEN true END,
    {v}.source_path = CASE WHEN {v}.source_path IN row.left THEN {v}.source_path ELSE row.left[0] END"""


@dataclass(slots=True)
class Job:
    """One write transaction of an upsert.

    Phases run in order (nodes, the generation mark, relationships, chunks); a phase starts when
    the one before it is done. Jobs whose ``lanes`` overlap never run at the same time.
    """

    phase: int
    work: Callable[[Any], Any]  # runs in the transaction; may return what to record once committed
    lanes: frozenset[int] = frozenset()


# Relationship groups, by the lanes of their two ends, paired so that the two groups of a round
# share no lane.
_LANE_ROUNDS = (((0, 0), (1, 1)), ((2, 2), (3, 3)), ((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 3), (1, 2)))


def _lane(key: str) -> int:
    """0 to 3: the lane of a node, from the source file its key names (or the key itself)."""
    if key.startswith(("sym:", "file:")):
        key = key[key.index(":") + 1:].partition("::")[0]
    return zlib.crc32(key.encode()) & 3


def _sources_of(props: dict[str, Any]) -> tuple[str, ...]:
    if "sources" in props:
        return tuple(props["sources"])
    return (props["source_path"],) if props.get("source_path") else ()


def _node_from(props: dict[str, Any]) -> Node:
    plain = {k: v for k, v in props.items() if k not in _BOOKKEEPING and k not in _PROV}
    return Node(
        key=props["key"],
        name=props.get("name", ""),
        provenance=Provenance.from_props(props),
        props=plain,
        valid_from=props.get("valid_from"),
        valid_to=props.get("valid_to"),
        sources=_sources_of(props),
    )


def _rel_from(src: str, typ: str, dst: str, props: dict[str, Any]) -> Relationship:
    plain = {k: v for k, v in props.items() if k not in _BOOKKEEPING and k not in _PROV}
    return Relationship(src, _RELTYPES[typ], dst, Provenance.from_props(props), plain,
                        props.get("valid_from"), props.get("valid_to"), _sources_of(props))


# A chunk's own properties as a list, without what server-side indexing adds (a vector is 1.5 KB);
# lists decode faster than maps, and many in one collected row faster still.
_CHUNK_FIELDS = ("id", "node_key", "ordinal", "text", "kind", "start_line", "end_line", *PROVENANCE_FIELDS)
_CHUNK = "[" + ", ".join(f"c.{name}" for name in _CHUNK_FIELDS) + "]"


def _chunk_from(values: list[Any]) -> Chunk:
    props = {k: v for k, v in zip(_CHUNK_FIELDS, values) if v is not None}
    return Chunk(props["node_key"], props["ordinal"], props["text"], props["kind"],
                 Provenance.from_props(props), props.get("start_line"), props.get("end_line"), props["id"])


class Neo4jStore(TraversalMixin):
    """A project's graph in a Neo4j 5 database (shared with other projects, never mixed)."""

    def __init__(self, driver: Any, project: str, *, database: str | None = None,
                 batch_size: int = 10_000, writers: int = 2, owns_driver: bool = False,
                 bookmarks: Any = None) -> None:
        import neo4j

        self._driver = driver
        # Reads go to a cluster's readers (read transactions) and still see this process's writes.
        self._bookmarks = bookmarks if bookmarks is not None else neo4j.GraphDatabase.bookmark_manager()
        self._project = check_project(project)
        self._database = database
        self._batch_size = batch_size
        self._writers = writers
        self._owns_driver = owns_driver
        self._chunk_fields: ChunkFields | None = None
        # node key -> its open edges, at _generation; (key, hub) -> those the hub's rule keeps
        self._expanded: dict[str | tuple[str, Hub], list[Edge]] = {}
        self._generation: str | None = None
        self._cache_lock = threading.Lock()

    @classmethod
    def connect(cls, project: str, *, uri: str | None = None, username: str | None = None,
                password: str | None = None, database: str | None = None, **kw: Any) -> Neo4jStore:
        """Connect with the given settings or ``NEO4J_URI``/``_USERNAME``/``_PASSWORD``/``_DATABASE``.

        A ``neo4j://`` or ``neo4j+s://`` URI (a cluster, Aura) routes: writes go to the leader, and
        reads, run as read transactions, to the readers."""
        import neo4j  # deferred: importing graphmem must not pull in the driver

        env = Neo4jSettings.from_env()
        uri = check_neo4j_uri(uri or env.uri)
        auth = (username or env.username, password or env.password)
        database = database or env.database
        try:
            # Server notifications (e.g. "property does not exist yet") would only clutter the logs.
            driver = neo4j.GraphDatabase.driver(uri, auth=auth, notifications_min_severity="OFF")
            driver.verify_connectivity()
        except Exception as exc:  # the driver raises several unrelated types for "not reachable"
            reason = " ".join(str(exc).split())
            raise StoreUnavailable(
                f"cannot reach Neo4j at {uri}: {exc.__class__.__name__}: {reason}. "
                "Start one with `scripts/neo4j-local start` (or docker compose up neo4j) and set NEO4J_*"
            ) from exc
        return cls(driver, project, database=database, owns_driver=True, bookmarks=_shared_bookmarks(uri), **kw)

    @property
    def project(self) -> str:
        return self._project

    @property
    def driver(self) -> Any:
        return self._driver

    @property
    def database(self) -> str | None:
        return self._database

    def index_chunks_with(self, fields: ChunkFields | None) -> None:
        """Server-side indexing: every chunk written from now on also gets what ``fields`` gives it
        (its BM25 tokens, vector and index digest), in the transaction that writes the chunk, so the
        indexes over those properties never disagree with the chunks (``None`` stops it)."""
        self._chunk_fields = fields

    def close(self) -> None:
        if self._owns_driver:
            self._driver.close()

    def __enter__(self) -> Neo4jStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------------------

    def session(self, **kw: Any) -> Any:
        """A driver session on the store's database that carries the process's bookmarks."""
        return self._driver.session(database=self._database, bookmark_manager=self._bookmarks, **kw)

    def _write(self, work: Callable[[Any], Any]) -> Any:
        """Run ``work(tx)`` in a managed write transaction (retried by the driver on transient errors)."""
        import neo4j.exceptions as nx

        try:
            with self.session() as session:
                return session.execute_write(work)
        except (nx.Neo4jError, nx.DriverError) as exc:
            raise _store_error(exc) from exc

    def _auto_read(self, query: str, rows: Callable[[Any], T], params: dict[str, Any]) -> T:
        """One read statement as an auto-commit transaction: the statement and its result travel in
        one round trip, where a managed transaction adds a BEGIN and a COMMIT (a third of a
        question's round trips). The session's access mode sends it to a cluster's readers; the
        driver retries only managed transactions, so a retryable failure (a lost connection, a
        leader change, a transient error) is retried here, a read being safe to repeat."""
        import neo4j
        import neo4j.exceptions as nx

        for attempt in range(READ_ATTEMPTS):
            try:
                with self.session(default_access_mode=neo4j.READ_ACCESS) as session:
                    return rows(session.run(query, project=self._project, **params))
            except (nx.Neo4jError, nx.DriverError) as exc:
                if attempt + 1 < READ_ATTEMPTS and exc.is_retryable():
                    time.sleep(0.05 * 2 ** attempt)
                    continue
                raise _store_error(exc) from exc
        raise AssertionError("unreachable")

    def _read(self, query: str, **params: Any) -> list[dict[str, Any]]:
        return self._auto_read(query, lambda result: [r.data() for r in result], params)

    def _values(self, query: str, **params: Any) -> list[list[Any]]:
        """Like ``_read``, each row as a list of values (cheaper to decode than a dict)."""
        return self._auto_read(query, lambda result: [r.values() for r in result], params)

    def _batches(self, items: list[T]) -> Iterator[list[T]]:
        """At most ``batch_size`` items each, as even as can be (two writers finish together)."""
        parts = -(-len(items) // self._batch_size)
        size = -(-len(items) // parts) if parts else 0
        for i in range(0, len(items), size or 1):
            yield items[i: i + size]

    def ensure_schema(self) -> None:
        statements = split_statements(read_cypher("schema.cypher"))
        expanded: list[str] = []
        for statement in statements:
            if "{TYPE}" in statement:
                expanded += [statement.replace("{TYPE}", t.value).replace("{type}", t.value.lower())
                             for t in RelType]
            else:
                expanded.append(statement)
        # Schema commands cannot share a transaction with writes; run each on its own.
        with self.session() as session:
            for statement in expanded:
                session.run(statement).consume()
            session.run("CALL db.awaitIndexes(300)").consume()

    # --- writes ---------------------------------------------------------------------------------

    def upsert(
        self,
        nodes: Iterable[Node] = (),
        rels: Iterable[Relationship] = (),
        chunks: Iterable[Chunk] = (),
        *,
        at: str | None = None,
    ) -> WriteSummary:
        with _gc_paused():
            return self._upsert(nodes, rels, chunks, at=to_iso(at) if at else now_iso())

    def _upsert(self, nodes: Iterable[Node], rels: Iterable[Relationship], chunks: Iterable[Chunk], *,
                at: str) -> WriteSummary:
        batch = prepare_batch(nodes, rels, chunks)
        summary = WriteSummary(nodes=len(batch.nodes), chunks=len(batch.chunks))
        try:
            # The nodes this upsert creates (filled as their transactions commit): a relationship
            # with such an end cannot exist yet. Nothing is kept from one upsert to the next.
            before = None
            if batch.nodes and batch.rels:  # the generation before any of them can be seen
                before = self._values(_GENERATION_NOW, name=GENERATION)[0][0]
            self._pipeline(self._write_jobs(batch, at, summary, {}, before))
        finally:  # after the writes (even some of them): a reader keeping older expansions drops them
            self._write(lambda tx: self._bump(tx, chunks=bool(batch.chunks)))
        return summary

    def _bump(self, tx: Any, *, chunks: bool = False) -> str:
        """A new generation (returned): every process drops the expansions it keeps; with ``chunks``
        (the write may have changed chunks) processes with local indexes sync them (``CHUNKS_GENERATION``)."""
        generation = uuid.uuid4().hex
        tx.run(_BUMP, project=self._project, names=[GENERATION, CHUNKS_GENERATION] if chunks else [GENERATION],
               value=generation).consume()
        with self._cache_lock:
            self._expanded, self._generation = {}, None
        return generation

    def _write_jobs(self, batch: Batch, at: str, summary: WriteSummary,
                    created: dict[str, int | None], before: str | None = None) -> Iterator[Job]:
        """The transactions of an upsert, nodes first, each built only when the writer needs it.
        ``created``: the node jobs add the nodes they create (with no relationship yet), with their
        internal id when they are open. ``before``: the project's generation before the upsert."""
        stamp, project = ProvenanceStamper(at), self._project

        def row(element: Node | Relationship) -> dict[str, Any]:
            props = {**element.props, **stamp(element.provenance).as_props()}
            # ``None`` values stay: ``+=`` removes those properties (and sets nothing on create).
            return {"props": props, "sources": list(element_sources(element)),
                    "valid_from": element.valid_from or at, "valid_to": element.valid_to}

        def rel_row(r: Relationship) -> dict[str, Any]:
            out = {"src": r.src, "dst": r.dst, **row(r)}
            if _plain(out):  # fits _CREATE_NEW_RELS if both its ends are new
                prov = out["props"]
                out["values"] = [out["valid_from"], *(prov.get(f) for f in PROVENANCE_FIELDS), r.props or None]
            return out

        def create(tx: Any, statement: str, names: dict[str, str], var: str, rows: list[dict[str, Any]]) -> int:
            """Create new elements: the lean statement for the common row, the full one for the rest."""
            written = 0
            for lean in (True, False):
                part = [r for r in rows if _plain(r) is lean]
                if part:
                    extra = "" if lean else _CREATE_EXTRA.format(v=var)
                    written += tx.run(statement % {**names, "extra": extra}, project=project,
                                      rows=part).single()["written"]
            return written

        def node_job(label: str, rows: list[dict[str, Any]]) -> Callable[[Any], Callable[[], None]]:
            def work(tx: Any) -> Callable[[], None]:
                existing = set(tx.run(_EXISTING_KEYS, project=project, keys=[r["key"] for r in rows]).single()["keys"])
                fresh = [r for r in rows if r["key"] not in existing]
                plain = [r for r in fresh if _plain(r)]
                ids: list[list[Any]] = []
                if plain:
                    ids = tx.run(_CREATE_OPEN_NODES % {"label": label}, project=project, rows=plain).single()["ids"]
                rest = [r for r in fresh if not _plain(r)]
                if rest:
                    tx.run(_CREATE_NODES % {"label": label, "extra": _CREATE_EXTRA.format(v="n")}, project=project,
                           rows=rest).consume()
                if existing:
                    tx.run(_UPSERT_NODES % {"label": label}, project=project,
                           rows=[r for r in rows if r["key"] in existing]).consume()

                def record() -> None:
                    created.update((r["key"], None) for r in rest)
                    created.update(ids)
                return record
            return work

        # Every write ends by setting a new generation. Once every node is in, the generation is
        # still ``before`` if no other write (another store or process) has ended since the upsert
        # began; a new one is then set, and a relationship job that finds another merges every
        # relationship, as it cannot know what was added to the new nodes meanwhile.
        mark: list[str] = []

        def mark_work(tx: Any) -> Callable[[], None] | None:
            if not created or tx.run(_GENERATION_NOW, project=project, name=GENERATION).single()[0] != before:
                return None  # no new node, or written meanwhile: every relationship is merged
            generation = self._bump(tx)
            return lambda: mark.append(generation)

        def rel_jobs(by_type: dict[str, list[dict[str, Any]]]) -> Callable[[Any], Callable[[], None]]:
            def work(tx: Any) -> Callable[[], None]:
                written = total = 0
                fresh = created
                if fresh and (not mark or tx.run(_GENERATION_NOW, project=project,
                                                 name=GENERATION).single()[0] != mark[0]):
                    fresh = {}
                for typ, rows in by_type.items():
                    total += len(rows)
                    # A relationship with an end that did not exist before this upsert cannot exist.
                    linked: list[list[Any]] = []
                    new: list[dict[str, Any]] = []
                    old: list[dict[str, Any]] = []
                    for r in rows:
                        src, dst = r["src"], r["dst"]
                        if src in fresh or dst in fresh:
                            a, b = fresh.get(src), fresh.get(dst)
                            if a is not None and b is not None and "values" in r:
                                linked.append([a, src, b, dst, *r["values"]])
                            else:
                                new.append(r)
                        else:
                            old.append(r)
                    for own in (False, True):
                        part = [r for r in linked if (r[-1] is not None) is own]
                        if part:
                            written += tx.run(_CREATE_NEW_RELS % {"type": typ, "own": _OWN_PROPS if own else ""},
                                              project=project, rows=part).single()["written"]
                    written += create(tx, _CREATE_RELS, {"type": typ}, "r", new)
                    if old:
                        written += tx.run(_UPSERT_RELS % {"type": typ}, project=project,
                                          rows=old).single()["written"]

                def count() -> None:
                    summary.rels += written
                    summary.missing_endpoints += total - written
                return count
            return work

        by_label: dict[NodeKind, list[Node]] = {}
        for n in batch.nodes:
            by_label.setdefault(n.kind, []).append(n)
        for kind, members in by_label.items():
            for part in self._batches(members):
                yield Job(0, node_job(kind.label, [{"key": n.key, "kind": kind.value, "name": n.name, **row(n)}
                                                   for n in part]))
        if batch.nodes and batch.rels:
            yield Job(1, mark_work)
        # Two transactions that write relationships deadlock when they share an end node. Nodes
        # fall in four lanes by their source file (keeping a file's relationships together), and
        # relationships in groups by the lanes of their ends. Each round pairs two groups with no
        # lane in common, so their transactions run side by side without sharing a node; the
        # rounds are one phase, a job waiting only for the running ones that share a lane with it.
        groups: dict[tuple[int, int], list[Relationship]] = {}
        for r in batch.rels:
            a, b = sorted((_lane(r.src), _lane(r.dst)))
            groups.setdefault((a, b), []).append(r)
        for pair in _LANE_ROUNDS:
            parts = [[part for part in self._batches(sorted(groups.get(g, ()), key=lambda r: r.type.value))]
                     for g in pair]
            for i in range(max(len(p) for p in parts)):  # alternate the two groups so both stay busy
                for g, group_parts in zip(pair, parts):
                    if i < len(group_parts):
                        part = group_parts[i]
                        by_type: dict[str, list[dict[str, Any]]] = {}
                        for r in part:
                            by_type.setdefault(r.type.value, []).append(rel_row(r))
                        yield Job(2, rel_jobs(by_type), frozenset(g))
        fields = self._chunk_fields
        vector = {"vector": _CHUNK_VECTOR % {"label": vector_label(project)} if fields else ""}

        def chunk_job(rows: list[dict[str, Any]]) -> Callable[[Any], None]:
            def work(tx: Any) -> None:
                existing = set(tx.run(_EXISTING_CHUNKS, project=project, ids=[r["id"] for r in rows]).single()["ids"])
                fresh = [r for r in rows if r["id"] not in existing]
                linked = []
                for r in fresh:
                    node = created.get(r["node_key"])
                    if node is not None:
                        linked.append({**r, "node": node})
                if linked:
                    tx.run(_CREATE_NEW_NODE_CHUNKS % vector, project=project, rows=linked).consume()
                fresh = [r for r in fresh if created.get(r["node_key"]) is None]
                if fresh:
                    tx.run(_CREATE_CHUNKS % vector, project=project, rows=fresh).consume()
                if existing:
                    tx.run(_UPSERT_CHUNKS % vector, project=project,
                           rows=[r for r in rows if r["id"] in existing]).consume()
            return work

        for part in self._batches(batch.chunks):
            rows = [{
                "id": c.id, "node_key": c.node_key,
                "props": {"node_key": c.node_key, "ordinal": c.ordinal, "kind": c.kind, "text": c.text,
                          "start_line": c.start_line, "end_line": c.end_line, **stamp(c.provenance).as_props()},
            } for c in part]
            if fields:  # computed here, on the thread building jobs, while writers run earlier ones
                for row, extra in zip(rows, fields(part)):
                    row["props"].update(index_tokens=extra["tokens"], index_digest=extra["digest"],
                                        index_project=project)
                    row["vector"] = extra["vector"]
            yield Job(3, chunk_job(rows))

    def _pipeline(self, jobs: Iterator[Job]) -> None:
        """Run write jobs on writer threads while this thread builds the next ones.

        Building rows is Python work and the server's is the rest: overlapping them, and running
        independent transactions side by side, uses both cores. A phase starts only when the one
        before it is done (relationships need their nodes); two jobs that share a lane never
        overlap.
        """
        from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

        running: dict[Future[Any], Job] = {}
        phase = None

        def settle(futures: Iterable[Future[Any]], how: str = "ALL_COMPLETED") -> None:
            done, _ = wait(list(futures), return_when=how)
            for future in done:
                running.pop(future)
                commit = future.result()
                # Bookkeeping only once a transaction has committed: the driver may run a
                # transaction function several times before one attempt succeeds.
                if callable(commit):
                    commit()

        with ThreadPoolExecutor(max_workers=self._writers, thread_name_prefix="graphmem-neo4j-writer") as pool:
            try:
                for job in jobs:
                    if job.phase != phase:
                        settle(list(running))
                        phase = job.phase
                    if job.lanes:
                        settle([f for f, j in running.items() if j.lanes & job.lanes])
                    while len(running) >= self._writers:
                        settle(list(running), FIRST_COMPLETED)
                    running[pool.submit(self._write, job.work)] = job
                settle(list(running))
            except BaseException:
                for future in running:
                    future.cancel()
                raise

    def set_sources(self, nodes: Mapping[str, Sequence[str]] | None = None,
                    rels: Mapping[tuple[str, str, str], Sequence[str]] | None = None) -> WriteSummary:
        node_rows = [{"key": k, "left": list(dict.fromkeys(v))} for k, v in sorted((nodes or {}).items())]
        rel_rows = [{"src": i[0], "type": i[1], "dst": i[2], "left": list(dict.fromkeys(v))}
                    for i, v in sorted((rels or {}).items())]
        if any(not row["left"] for row in node_rows + rel_rows):
            raise StoreError("set_sources needs at least one source per element (close or remove it instead)")
        summary = WriteSummary()
        project = self._project

        def work(tx: Any) -> tuple[int, int]:
            n = tx.run("UNWIND $rows AS row MATCH (n:Node {project: $project, key: row.key}) "
                       + _SET_LEFT.format(v="n") + " RETURN count(n) AS c", project=project,
                       rows=node_rows).single()["c"]
            r = tx.run("""UNWIND $rows AS row
                          MATCH (:Node {project: $project, key: row.src})-[r]->(:Node {project: $project, key: row.dst})
                          WHERE type(r) = row.type """ + _SET_LEFT.format(v="r") + " RETURN count(r) AS c",
                       project=project, rows=rel_rows).single()["c"]
            self._bump(tx)
            return n, r

        summary.nodes, summary.rels = self._write(work)
        return summary

    def close_sources(self, paths: Iterable[str], *, at: str | None = None, keep: Keep | None = None) -> WriteSummary:
        return self._withdraw(sorted(set(paths)), at=to_iso(at) if at else now_iso(), delete=False,
                              keep=keep or Keep())

    def remove_sources(self, paths: Iterable[str]) -> WriteSummary:
        return self._withdraw(sorted(set(paths)), at=now_iso(), delete=True, keep=Keep())

    def _withdraw(self, paths: list[str], *, at: str, delete: bool, keep: Keep) -> WriteSummary:
        with _gc_paused():
            return self._withdraw_now(paths, at=at, delete=delete, keep=keep)

    def _withdraw_now(self, paths: list[str], *, at: str, delete: bool, keep: Keep) -> WriteSummary:
        summary = WriteSummary()
        if not paths:
            return summary
        project = self._project
        # Grouped by type once: an ingest keeps every relationship it wrote (tens of thousands).
        kept_rels: dict[str, list[list[str]]] = {}
        for src, typ, dst in keep.rels:
            kept_rels.setdefault(typ, []).append([src, dst])

        def work(tx: Any) -> None:
            nodes = [r.data() for r in tx.run(_WITHDRAW_NODES, project=project, paths=paths,
                                              keep=sorted(keep.nodes))]
            shrink = [{"key": n["key"], "left": n["left"]} for n in nodes if n["left"]]
            gone = [n["key"] for n in nodes if not n["left"]]
            tx.run("UNWIND $rows AS row MATCH (n:Node {project: $project, key: row.key}) "
                   + _SET_LEFT.format(v="n"), project=project, rows=shrink).consume()
            rels: list[dict[str, Any]] = []
            # Types with no relationship in the whole database (the count store says so at once)
            # have nothing to withdraw.
            present = tx.run(_REL_TYPE_COUNTS).single()[0]
            for typ in (t for t, n in zip(RelType, present) if n):
                rels += [r.data() for r in tx.run(_WITHDRAW_RELS % {"type": typ.value}, project=project, paths=paths,
                                                  keep=kept_rels.get(typ.value, []))]
            rkeep = [{"id": r["id"], "left": r["left"]} for r in rels if r["left"]]
            rgone = [r["id"] for r in rels if not r["left"]]
            tx.run("UNWIND $rows AS row MATCH ()-[r]->() WHERE elementId(r) = row.id "
                   + _SET_LEFT.format(v="r"), rows=rkeep).consume()
            if delete:
                summary.removed_rels = tx.run(
                    """UNWIND $ids AS id MATCH ()-[r]->() WHERE elementId(r) = id DELETE r RETURN count(*) AS c""",
                    ids=rgone).single()["c"]
                res = tx.run("""UNWIND $keys AS k MATCH (n:Node {project: $project, key: k})
                                OPTIONAL MATCH (n)-[r]-(:Node)
                                WITH n, count(r) AS degree DETACH DELETE n RETURN count(n) AS n, sum(degree) AS d""",
                             project=project, keys=gone).single()
                summary.removed_nodes = res["n"]
                summary.removed_rels += res["d"] or 0
            else:
                summary.closed_rels = tx.run(
                    """UNWIND $ids AS id MATCH ()-[r]->() WHERE elementId(r) = id
                       WITH r, r.valid_to IS NULL AS was_open
                       SET r.sources = [], r.multi = null, r.valid_to = coalesce(r.valid_to, $at)
                       RETURN count(CASE WHEN was_open THEN 1 END) AS c""", ids=rgone, at=at).single()["c"]
                res = tx.run(
                    """UNWIND $keys AS k MATCH (n:Node {project: $project, key: k})
                       WITH n, n.valid_to IS NULL AS was_open
                       SET n.sources = [], n.multi = null, n.valid_to = coalesce(n.valid_to, $at)
                       WITH n, was_open
                       OPTIONAL MATCH (n)-[r]-(:Node) WHERE was_open AND r.valid_to IS NULL
                       SET r.valid_to = $at
                       RETURN count(DISTINCT CASE WHEN was_open THEN n END) AS n, count(DISTINCT r) AS r""",
                    project=project, keys=gone, at=at).single()
                summary.closed_nodes = res["n"]
                summary.closed_rels += res["r"]
            summary.removed_chunks = tx.run(
                """MATCH (c:Chunk {project: $project}) WHERE c.source_path IN $paths AND NOT c.id IN $keep
                   DETACH DELETE c RETURN count(*) AS c""", project=project, paths=paths,
                keep=sorted(keep.chunks)).single()["c"]
            self._bump(tx, chunks=summary.removed_chunks > 0)

        self._write(work)
        return summary

    # --- reads ----------------------------------------------------------------------------------

    def get_node(self, key: str) -> Node | None:
        return self.get_nodes([key]).get(key)

    def get_nodes(self, keys: Iterable[str]) -> dict[str, Node]:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        rows = self._values("UNWIND $keys AS k MATCH (n:Node {project: $project, key: k}) RETURN collect(properties(n))",
                            keys=keys)
        found = {p["key"]: _node_from(p) for p in rows[0][0]}
        return {k: found[k] for k in keys if k in found}

    def get_relationships(self, keys: Iterable[str], *, as_of: str | None = None) -> list[Relationship]:
        keys = sorted(set(keys))
        rows = self._read(
            f"""UNWIND $keys AS k MATCH (a:Node {{project: $project, key: k}})-[r]-(b:Node)
                WHERE {_valid('r', as_of)}
                RETURN DISTINCT startNode(r).key AS src, type(r) AS type, endNode(r).key AS dst,
                       properties(r) AS p""", keys=keys, as_of=as_of)
        rels = {(r["src"], r["type"], r["dst"]): _rel_from(r["src"], r["type"], r["dst"], r["p"]) for r in rows}
        return [rels[i] for i in sorted(rels)]

    def incident_edges(
        self,
        keys: Sequence[str],
        *,
        rel_types: Sequence[str] | None = None,
        direction: Direction = "both",
        as_of: str | None = None,
    ) -> list[Edge]:
        if not keys:
            return []
        pattern = {"out": "-[r]->", "in": "<-[r]-", "both": "-[r]-"}[direction]
        rows = self._values(
            f"""UNWIND $keys AS k MATCH (a:Node {{project: $project, key: k}}){pattern}(b:Node)
                WHERE ($types IS NULL OR type(r) IN $types) AND {_valid('r', as_of)} AND {_valid('b', as_of)}
                RETURN k AS origin, collect([type(r), b.key, startNode(r) = a]) AS rels""",
            keys=list(keys), types=list(rel_types) if rel_types is not None else None, as_of=as_of)
        return _edges(rows)

    def expand(self, keys: Sequence[str], *, as_of: str | None = None, hub: Hub | None = None) -> list[Edge]:
        if not keys:
            return []
        if as_of is not None:
            edges = _edges(self._values(read_cypher("retrieval/expand.cypher"), keys=list(keys), as_of=as_of))
            return hub.thin(edges) if hub is not None else edges
        # Open edges are kept per node until the project's generation changes (any write, by any
        # process): one small read instead of thousands of relationships. The read that checks the
        # generation also brings the nodes not kept yet, so a step costs one round trip.
        with self._cache_lock:
            if len(self._expanded) > EXPAND_CACHE_LIMIT:
                self._expanded, self._generation = {}, None
            cache, known = self._expanded, self._generation
        wanted = list(dict.fromkeys(keys))
        generation, fetched = self._open_expansions([k for k in wanted if k not in cache])
        if generation != known:  # written since (or not checked yet): what is kept is stale
            with self._cache_lock:
                if self._expanded is cache:
                    self._expanded, self._generation = {}, generation
                cache = self._expanded
            rest = [k for k in wanted if k not in fetched]
            if rest:
                fetched.update(self._open_expansions(rest)[1])
        cache.update(fetched)  # a dict a write has replaced since is simply dropped
        if hub is None:
            return [e for k in wanted for e in (fetched[k] if k in fetched else cache[k])]
        # Thinned per node as the hub's rule says (Hub.thin works per origin) and kept thinned, as
        # the embedded store keeps them: a hub's thousands of edges are not counted again per step.
        edges: list[Edge] = []
        for k in wanted:
            kept = cache.get((k, hub))
            if kept is None:
                kept = cache[(k, hub)] = hub.thin(fetched[k] if k in fetched else cache[k])
            edges += kept
        return edges

    def _open_expansions(self, keys: list[str]) -> tuple[str | None, dict[str, list[Edge]]]:
        """The project's generation and, read with it, the open edges of ``keys``."""
        query = ("CALL () {\n" + read_cypher("retrieval/expand.cypher")
                 + "\n}\nWITH collect([origin, rels]) AS rows\n"
                 "OPTIONAL MATCH (m:GraphmemMeta {project: $project, name: $name}) RETURN m.value, rows")
        generation, rows = self._values(query, keys=keys, as_of=None, name=GENERATION)[0]
        fetched: dict[str, list[Edge]] = {k: [] for k in keys}
        for edge in _edges(rows):
            fetched[edge.origin].append(edge)
        return generation, fetched

    def iter_nodes(self, kinds: Iterable[NodeKind] | None = None, *, include_closed: bool = False) -> Iterator[Node]:
        rows = self._read(
            """MATCH (n:Node {project: $project})
               WHERE ($kinds IS NULL OR n.kind IN $kinds) AND ($closed OR n.valid_to IS NULL)
               RETURN properties(n) AS p ORDER BY n.key""",
            kinds=[k.value for k in kinds] if kinds is not None else None, closed=include_closed)
        return (_node_from(r["p"]) for r in rows)

    def iter_rels(self, *, include_closed: bool = False) -> Iterator[Relationship]:
        """Every relationship, in identity order."""
        rows = self._read(
            """MATCH (a:Node {project: $project})-[r]->(b:Node)
               WHERE $closed OR r.valid_to IS NULL
               RETURN a.key AS src, type(r) AS type, b.key AS dst, properties(r) AS p
               ORDER BY src, type, dst""", closed=include_closed)
        return (_rel_from(r["src"], r["type"], r["dst"], r["p"]) for r in rows)

    def iter_chunks(self) -> Iterator[Chunk]:
        rows = self._values(f"MATCH (c:Chunk {{project: $project}}) RETURN {_CHUNK} AS p ORDER BY c.id")
        return (_chunk_from(p) for p, in rows)

    def get_chunks(self, node_keys: Iterable[str]) -> list[Chunk]:
        rows = self._values(
            "UNWIND $keys AS k MATCH (c:Chunk {project: $project, node_key: k}) "
            f"WITH c ORDER BY c.node_key, c.ordinal RETURN collect({_CHUNK})", keys=sorted(set(node_keys)))
        return [_chunk_from(p) for p in rows[0][0]]

    def get_chunks_by_id(self, ids: Iterable[int]) -> dict[int, Chunk]:
        rows = self._values(f"UNWIND $ids AS i MATCH (c:Chunk {{project: $project, id: i}}) RETURN collect({_CHUNK})",
                            ids=sorted(set(ids)))
        chunks = (_chunk_from(p) for p in rows[0][0])
        return {c.id: c for c in chunks}

    def chunk_ids(self) -> set[int]:
        return {r["id"] for r in self._read("MATCH (c:Chunk {project: $project}) RETURN c.id AS id")}

    def counts(self) -> Counts:
        counts = Counts()
        for r in self._read("""MATCH (n:Node {project: $project})
                               RETURN n.kind AS kind, n.valid_to IS NULL AS open, count(*) AS c"""):
            if r["open"]:
                counts.nodes[r["kind"]] = r["c"]
            else:
                counts.closed_nodes += r["c"]
        for r in self._read("""MATCH (:Node {project: $project})-[r]->(:Node)
                               RETURN type(r) AS type, r.valid_to IS NULL AS open, count(*) AS c"""):
            if r["open"]:
                counts.rels[r["type"]] = r["c"]
            else:
                counts.closed_rels += r["c"]
        counts.chunks = self._read("MATCH (c:Chunk {project: $project}) RETURN count(c) AS c")[0]["c"]
        return counts

    def has_nodes(self) -> bool:
        return bool(self._read("MATCH (n:Node {project: $project}) WHERE n.valid_to IS NULL RETURN 1 AS one LIMIT 1"))

    def save_snapshot(self) -> bool:
        return False  # the server holds the graph: a new process loads nothing

    # --- project state --------------------------------------------------------------------------

    def get_meta(self, name: str) -> str | None:
        rows = self._read("MATCH (m:GraphmemMeta {project: $project, name: $name}) RETURN m.value AS v", name=name)
        return rows[0]["v"] if rows else None

    def atomic(self) -> AbstractContextManager[None]:
        """Writes go in batches of their own transactions (one transaction for a whole ingest would
        hold it all in server memory); ``ingest`` marks the project ``ingest_incomplete`` meanwhile."""
        return nullcontext()

    def set_meta(self, values: dict[str, str | None]) -> None:
        gone = [k for k, v in values.items() if v is None]
        rows = [{"name": k, "value": v} for k, v in values.items() if v is not None]

        def work(tx: Any) -> None:
            tx.run("UNWIND $names AS k MATCH (m:GraphmemMeta {project: $project, name: k}) DELETE m",
                   project=self._project, names=gone).consume()
            tx.run("""UNWIND $rows AS row MERGE (m:GraphmemMeta {project: $project, name: row.name})
                      SET m.value = row.value""", project=self._project, rows=rows).consume()

        self._write(work)

    def source_states(self) -> dict[str, str]:
        rows = self._read("MATCH (s:GraphmemSource {project: $project}) RETURN s.path AS p, s.hash AS h")
        return {r["p"]: r["h"] for r in rows}

    def set_source_states(self, states: dict[str, str | None]) -> None:
        gone = [k for k, v in states.items() if v is None]
        rows = [{"path": k, "hash": v} for k, v in states.items() if v is not None]

        def work(tx: Any) -> None:
            tx.run("UNWIND $paths AS p MATCH (s:GraphmemSource {project: $project, path: p}) DELETE s",
                   project=self._project, paths=gone).consume()
            for part in self._batches(rows):
                tx.run("""UNWIND $rows AS row MERGE (s:GraphmemSource {project: $project, path: row.path})
                          SET s.hash = row.hash""", project=self._project, rows=part).consume()

        self._write(work)

    def drop_project(self) -> None:
        with self._cache_lock:
            self._expanded, self._generation = {}, None
        with self.session() as session:  # the project's own vector index
            session.run(f"DROP INDEX {vector_index_name(self._project)} IF EXISTS").consume()
        for label in (NODE_LABEL, "Chunk", "GraphmemMeta", "GraphmemSource"):
            while True:
                deleted = self._write(lambda tx, lb=label: tx.run(
                    f"MATCH (n:`{lb}` {{project: $project}}) WITH n LIMIT 10000 DETACH DELETE n RETURN count(*) AS c",
                    project=self._project).single()["c"])
                if not deleted:
                    break


__all__ = ["Neo4jStore"]
