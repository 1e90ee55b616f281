"""The Neo4j store, through the official driver.

Every node has the label ``:Node`` and its kind's label (``:Symbol``, ``:Decision``...), and the
properties ``project``, ``key``, ``kind``, ``name``, the provenance fields, ``sources`` (every source
path that asserts it), ``source_path`` (one of them, indexed), ``shared`` (more than one source),
``valid_from`` and ``valid_to``. Relationships carry the same bookkeeping plus ``project``.

Writes are batched with ``UNWIND`` in managed transactions (the driver retries transient errors);
values always travel as parameters, and the only text spliced into a query is a label or a
relationship type taken from the model's enums.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from graphmem.config import Neo4jSettings
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
from graphmem.stores.base import Counts, Direction, Edge, Step, TraversalMixin, WriteSummary
from graphmem.stores.batch import ProvenanceStamper, element_sources, prepare_batch

_BOOKKEEPING = frozenset({"project", "key", "kind", "name", "sources", "shared", "valid_from", "valid_to"})
_PROV = frozenset(PROVENANCE_FIELDS)
_RELTYPES = {t.value: t for t in RelType}


def _valid(var: str, as_of: str | None) -> str:
    """Cypher condition: ``var`` valid at ``$as_of`` (open, when there is no ``as_of``)."""
    if as_of is None:
        return f"{var}.valid_to IS NULL"
    return f"({var}.valid_from <= $as_of AND ({var}.valid_to IS NULL OR {var}.valid_to > $as_of))"


_UPSERT_NODES = """
UNWIND $rows AS row
MERGE (n:Node {project: $project, key: row.key})
ON CREATE SET n.valid_from = row.valid_from, n.sources = []
WITH n, row, n.valid_to IS NOT NULL AS reopened
SET n += row.props
SET n:`%(label)s`
SET n.kind = row.kind, n.name = row.name,
    n.valid_from = CASE WHEN reopened THEN row.valid_from ELSE n.valid_from END,
    n.valid_to = row.valid_to,
    n.sources = n.sources + [s IN row.sources WHERE NOT s IN n.sources]
SET n.shared = size(n.sources) > 1
"""

_UPSERT_RELS = """
UNWIND $rows AS row
MATCH (a:Node {project: $project, key: row.src})
MATCH (b:Node {project: $project, key: row.dst})
MERGE (a)-[r:`%(type)s`]->(b)
ON CREATE SET r.valid_from = row.valid_from, r.sources = [], r.project = $project
WITH r, row, r.valid_to IS NOT NULL AS reopened
SET r += row.props
SET r.valid_from = CASE WHEN reopened THEN row.valid_from ELSE r.valid_from END,
    r.valid_to = row.valid_to,
    r.sources = r.sources + [s IN row.sources WHERE NOT s IN r.sources]
SET r.shared = size(r.sources) > 1
RETURN count(r) AS written
"""

_UPSERT_CHUNKS = """
UNWIND $rows AS row
MERGE (c:Chunk {project: $project, id: row.id})
SET c += row.props
WITH c, row
MATCH (n:Node {project: $project, key: row.node_key})
MERGE (n)-[:HAS_CHUNK]->(c)
"""

# Withdrawing sources. Elements are found through the indexed primary source or the shared flag.
_WITHDRAW_NODES = """
CALL () {
  MATCH (n:Node {project: $project}) WHERE n.source_path IN $paths RETURN n
  UNION
  MATCH (n:Node {project: $project, shared: true}) WHERE any(s IN n.sources WHERE s IN $paths) RETURN n
}
WITH n, [s IN n.sources WHERE NOT s IN $paths] AS left
RETURN n.key AS key, left, n.valid_to IS NULL AS was_open
"""

_WITHDRAW_RELS = """
CALL () {
  MATCH ()-[r:`%(type)s`]->() WHERE r.project = $project AND r.source_path IN $paths RETURN r
  UNION
  MATCH ()-[r:`%(type)s`]->() WHERE r.project = $project AND r.shared = true
    AND any(s IN r.sources WHERE s IN $paths) RETURN r
}
WITH r, [s IN r.sources WHERE NOT s IN $paths] AS left
RETURN elementId(r) AS id, left, r.valid_to IS NULL AS was_open
"""


def _node_from(props: dict[str, Any]) -> Node:
    plain = {k: v for k, v in props.items() if k not in _BOOKKEEPING and k not in _PROV}
    return Node(
        key=props["key"],
        name=props.get("name", ""),
        provenance=Provenance.from_props(props),
        props=plain,
        valid_from=props.get("valid_from"),
        valid_to=props.get("valid_to"),
        sources=tuple(props.get("sources") or ()),
    )


def _rel_from(src: str, typ: str, dst: str, props: dict[str, Any]) -> Relationship:
    plain = {k: v for k, v in props.items() if k not in _BOOKKEEPING and k not in _PROV}
    return Relationship(src, _RELTYPES[typ], dst, Provenance.from_props(props), plain,
                        props.get("valid_from"), props.get("valid_to"), tuple(props.get("sources") or ()))


def _chunk_from(props: dict[str, Any]) -> Chunk:
    return Chunk(props["node_key"], props["ordinal"], props["text"], props["kind"],
                 Provenance.from_props(props), props.get("start_line"), props.get("end_line"), props["id"])


class Neo4jStore(TraversalMixin):
    """A project's graph in a Neo4j 5 database (shared with other projects, never mixed)."""

    def __init__(self, driver: Any, project: str, *, database: str | None = None,
                 batch_size: int = 5000, owns_driver: bool = False) -> None:
        self._driver = driver
        self._project = check_project(project)
        self._database = database
        self._batch_size = batch_size
        self._owns_driver = owns_driver

    @classmethod
    def connect(cls, project: str, *, uri: str | None = None, username: str | None = None,
                password: str | None = None, database: str | None = None, **kw: Any) -> Neo4jStore:
        """Connect with the given settings or ``NEO4J_URI``/``_USERNAME``/``_PASSWORD``/``_DATABASE``."""
        import neo4j  # deferred: importing graphmem must not pull in the driver

        env = Neo4jSettings.from_env()
        uri = uri or env.uri
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
        return cls(driver, project, database=database, owns_driver=True, **kw)

    @property
    def project(self) -> str:
        return self._project

    @property
    def driver(self) -> Any:
        return self._driver

    @property
    def database(self) -> str | None:
        return self._database

    def close(self) -> None:
        if self._owns_driver:
            self._driver.close()

    def __enter__(self) -> Neo4jStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------------------

    def _run(self, write: bool, work: Callable[[Any], Any]) -> Any:
        """Run ``work(tx)`` in a managed transaction (retried by the driver on transient errors)."""
        import neo4j.exceptions as nx

        try:
            with self._driver.session(database=self._database) as session:
                return (session.execute_write if write else session.execute_read)(work)
        except (nx.ServiceUnavailable, nx.SessionExpired, nx.AuthError) as exc:
            raise StoreUnavailable(f"Neo4j is not available: {exc}") from exc
        except nx.Neo4jError as exc:
            raise StoreError(f"Neo4j refused a graphmem query: {exc.code}: {exc.message}") from exc

    def _read(self, query: str, **params: Any) -> list[dict[str, Any]]:
        def work(tx: Any) -> list[dict[str, Any]]:
            return [r.data() for r in tx.run(query, project=self._project, **params)]

        return self._run(False, work)

    def _batches(self, rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        for i in range(0, len(rows), self._batch_size):
            yield rows[i: i + self._batch_size]

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
        with self._driver.session(database=self._database) as session:
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
        at = to_iso(at) if at else now_iso()
        batch = prepare_batch(nodes, rels, chunks)
        stamp = ProvenanceStamper(at)
        summary = WriteSummary(nodes=len(batch.nodes), chunks=len(batch.chunks))
        by_label: dict[NodeKind, list[dict[str, Any]]] = {}
        for n in batch.nodes:
            kind = n.kind
            by_label.setdefault(kind, []).append({
                "key": n.key, "kind": kind.value, "name": n.name,
                "props": {**n.props, **stamp(n.provenance).as_props()},
                "sources": list(element_sources(n)),
                "valid_from": n.valid_from or at, "valid_to": n.valid_to,
            })
        for kind, rows in by_label.items():
            query = _UPSERT_NODES % {"label": kind.label}
            for part in self._batches(rows):
                self._run(True, lambda tx, q=query, p=part: tx.run(q, project=self._project, rows=p).consume())
        by_type: dict[RelType, list[dict[str, Any]]] = {}
        for r in batch.rels:
            by_type.setdefault(r.type, []).append({
                "src": r.src, "dst": r.dst,
                "props": {**r.props, **stamp(r.provenance).as_props()},
                "sources": list(element_sources(r)),
                "valid_from": r.valid_from or at, "valid_to": r.valid_to,
            })
        for typ, rows in by_type.items():
            query = _UPSERT_RELS % {"type": typ.value}
            for part in self._batches(rows):
                written = self._run(
                    True, lambda tx, q=query, p=part: tx.run(q, project=self._project, rows=p).single()["written"])
                summary.rels += written
                summary.missing_endpoints += len(part) - written
        rows = [{
            "id": c.id, "node_key": c.node_key,
            "props": {"node_key": c.node_key, "ordinal": c.ordinal, "kind": c.kind, "text": c.text,
                      "start_line": c.start_line, "end_line": c.end_line, **stamp(c.provenance).as_props()},
        } for c in batch.chunks]
        for part in self._batches(rows):
            self._run(True, lambda tx, p=part: tx.run(_UPSERT_CHUNKS, project=self._project, rows=p).consume())
        return summary

    def close_sources(self, paths: Iterable[str], *, at: str | None = None) -> WriteSummary:
        return self._withdraw(sorted(set(paths)), at=to_iso(at) if at else now_iso(), delete=False)

    def remove_sources(self, paths: Iterable[str]) -> WriteSummary:
        return self._withdraw(sorted(set(paths)), at=now_iso(), delete=True)

    def _withdraw(self, paths: list[str], *, at: str, delete: bool) -> WriteSummary:
        summary = WriteSummary()
        if not paths:
            return summary
        project = self._project

        def work(tx: Any) -> None:
            nodes = [r.data() for r in tx.run(_WITHDRAW_NODES, project=project, paths=paths)]
            keep = [{"key": n["key"], "left": n["left"]} for n in nodes if n["left"]]
            gone = [n["key"] for n in nodes if not n["left"]]
            tx.run("""UNWIND $rows AS row MATCH (n:Node {project: $project, key: row.key})
                      SET n.sources = row.left, n.shared = size(row.left) > 1,
                          n.source_path = CASE WHEN n.source_path IN row.left THEN n.source_path
                                               ELSE row.left[0] END""",
                   project=project, rows=keep).consume()
            rels: list[dict[str, Any]] = []
            for typ in RelType:
                rels += [r.data() for r in tx.run(_WITHDRAW_RELS % {"type": typ.value}, project=project, paths=paths)]
            rkeep = [{"id": r["id"], "left": r["left"]} for r in rels if r["left"]]
            rgone = [r["id"] for r in rels if not r["left"]]
            tx.run("""UNWIND $rows AS row MATCH ()-[r]->() WHERE elementId(r) = row.id
                      SET r.sources = row.left, r.shared = size(row.left) > 1,
                          r.source_path = CASE WHEN r.source_path IN row.left THEN r.source_path
                                               ELSE row.left[0] END""", rows=rkeep).consume()
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
                       SET r.sources = [], r.shared = false, r.valid_to = coalesce(r.valid_to, $at)
                       RETURN count(CASE WHEN was_open THEN 1 END) AS c""", ids=rgone, at=at).single()["c"]
                res = tx.run(
                    """UNWIND $keys AS k MATCH (n:Node {project: $project, key: k})
                       WITH n, n.valid_to IS NULL AS was_open
                       SET n.sources = [], n.shared = false, n.valid_to = coalesce(n.valid_to, $at)
                       WITH n, was_open
                       OPTIONAL MATCH (n)-[r]-(:Node) WHERE was_open AND r.valid_to IS NULL
                       SET r.valid_to = $at
                       RETURN count(DISTINCT CASE WHEN was_open THEN n END) AS n, count(DISTINCT r) AS r""",
                    project=project, keys=gone, at=at).single()
                summary.closed_nodes = res["n"]
                summary.closed_rels += res["r"]
            summary.removed_chunks = tx.run(
                """MATCH (c:Chunk {project: $project}) WHERE c.source_path IN $paths
                   DETACH DELETE c RETURN count(*) AS c""", project=project, paths=paths).single()["c"]

        self._run(True, work)
        return summary

    # --- reads ----------------------------------------------------------------------------------

    def get_node(self, key: str) -> Node | None:
        return self.get_nodes([key]).get(key)

    def get_nodes(self, keys: Iterable[str]) -> dict[str, Node]:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        rows = self._read("UNWIND $keys AS k MATCH (n:Node {project: $project, key: k}) RETURN properties(n) AS p",
                          keys=keys)
        found = {r["p"]["key"]: _node_from(r["p"]) for r in rows}
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
        rows = self._read(
            f"""UNWIND $keys AS k MATCH (a:Node {{project: $project, key: k}}){pattern}(b:Node)
                WHERE ($types IS NULL OR type(r) IN $types) AND {_valid('r', as_of)} AND {_valid('b', as_of)}
                RETURN k AS origin, startNode(r).key AS src, type(r) AS type, endNode(r).key AS dst""",
            keys=list(keys), types=list(rel_types) if rel_types is not None else None, as_of=as_of)
        seen: dict[tuple[str, str, str, str], Edge] = {}
        for r in rows:
            step = Step(r["src"], r["type"], r["dst"])
            other = step.dst if step.src == r["origin"] else step.src
            seen.setdefault((r["origin"], step.src, step.type, step.dst), Edge(r["origin"], step, other))
        return list(seen.values())

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
        rows = self._read("MATCH (c:Chunk {project: $project}) RETURN properties(c) AS p ORDER BY c.id")
        return (_chunk_from(r["p"]) for r in rows)

    def get_chunks(self, node_keys: Iterable[str]) -> list[Chunk]:
        rows = self._read(
            """UNWIND $keys AS k MATCH (c:Chunk {project: $project, node_key: k})
               RETURN properties(c) AS p ORDER BY c.node_key, c.ordinal""", keys=sorted(set(node_keys)))
        return [_chunk_from(r["p"]) for r in rows]

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
        for r in self._read("""MATCH ()-[r]->() WHERE r.project = $project
                               RETURN type(r) AS type, r.valid_to IS NULL AS open, count(*) AS c"""):
            if r["open"]:
                counts.rels[r["type"]] = r["c"]
            else:
                counts.closed_rels += r["c"]
        counts.chunks = self._read("MATCH (c:Chunk {project: $project}) RETURN count(c) AS c")[0]["c"]
        return counts

    # --- project state --------------------------------------------------------------------------

    def get_meta(self, name: str) -> str | None:
        rows = self._read("MATCH (m:GraphmemMeta {project: $project, name: $name}) RETURN m.value AS v", name=name)
        return rows[0]["v"] if rows else None

    def set_meta(self, values: dict[str, str | None]) -> None:
        gone = [k for k, v in values.items() if v is None]
        rows = [{"name": k, "value": v} for k, v in values.items() if v is not None]

        def work(tx: Any) -> None:
            tx.run("UNWIND $names AS k MATCH (m:GraphmemMeta {project: $project, name: k}) DELETE m",
                   project=self._project, names=gone).consume()
            tx.run("""UNWIND $rows AS row MERGE (m:GraphmemMeta {project: $project, name: row.name})
                      SET m.value = row.value""", project=self._project, rows=rows).consume()

        self._run(True, work)

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

        self._run(True, work)

    def drop_project(self) -> None:
        for label in (NODE_LABEL, "Chunk", "GraphmemMeta", "GraphmemSource"):
            while True:
                deleted = self._run(True, lambda tx, lb=label: tx.run(
                    f"MATCH (n:`{lb}` {{project: $project}}) WITH n LIMIT 10000 DETACH DELETE n RETURN count(*) AS c",
                    project=self._project).single()["c"])
                if not deleted:
                    break


__all__ = ["Neo4jStore"]
