"""Raw Cypher stays inside its project and inside the server's means.

Project scoping: every node pattern of a read query is held to ``$project`` (checked on the text,
then against two projects that share a real Neo4j). Means: a query that would exhaust Neo4j's
heap is stopped with a clear error and the server keeps answering, from the Python API, the
command line and the MCP tool alike; so are other memory and time bombs, those Neo4j's own guards
stop and those only the runner's deadline stops; the time limit a query may ask for is capped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem.model import Chunk, Node, Provenance, Relationship, RelType
from graphmem.readonly import (
    DEADLINE_GRACE_S,
    DEFAULT_MAX_TIMEOUT_S,
    TERMINATE_WAIT_S,
    CypherError,
    CypherOutOfMemory,
    CypherRefused,
    CypherTimeout,
    check_read_only,
    max_timeout_s,
    run_read_only,
    scope_to_project,
)

REPO = Path(__file__).resolve().parents[1]

# Doubles an 8-character string 28 times: 2 GiB of characters, built inside one expression, where
# Neo4j's per-transaction memory accounting does not look. It used to stop the JVM.
STRING_BOMB = "RETURN size(reduce(s='xxxxxxxx', i IN range(1,28) | s+s))"
# A thousand strings of 1-4 MiB collected into one list: tracked, so db.memory.transaction.max stops it.
COLLECT_BOMB = "UNWIND range(1, 1000) AS i RETURN size(collect(reduce(s = toString(i), j IN range(1, 20) | s + s)))"


def scoped(query: str) -> str:
    check_read_only(query)
    return scope_to_project(query)


# --- the rewrite, no server needed ----------------------------------------------------------------

P = "{project: $project}"


@pytest.mark.parametrize("query, expected", [
    ("MATCH (n:Node) RETURN n.project, count(*)", f"MATCH (n:Node {P}) RETURN n.project, count(*)"),
    ("MATCH (c:Chunk) WHERE c.project <> $project RETURN c.text",
     f"MATCH (c:Chunk {P}) WHERE c.project <> $project RETURN c.text"),
    ("MATCH ()-[r]->() RETURN count(r)", f"MATCH ( {P})-[r]->( {P}) RETURN count(r)"),
    ("MATCH (s:Service {key: 'service:billing'}) RETURN s",
     "MATCH (s:Service {key: 'service:billing', project: $project}) RETURN s"),
    ("MATCH (n {}) RETURN n", f"MATCH (n {P}) RETURN n"),
    ("OPTIONAL MATCH (a)<-[r:X WHERE r.w > 0]-(:B WHERE b.x) RETURN a",
     f"OPTIONAL MATCH (a {P})<-[r:X WHERE r.w > 0]-(:B {P} WHERE b.x) RETURN a"),
    ("MATCH (n) WHERE (n)-->(:Secret) AND NOT (n)<--() RETURN n",
     f"MATCH (n {P}) WHERE (n {P})-->(:Secret {P}) AND NOT (n {P})<--( {P}) RETURN n"),
    ("MATCH (a) WHERE exists((a)--()) RETURN a", f"MATCH (a {P}) WHERE exists((a {P})--( {P})) RETURN a"),
    ("RETURN [(a)-[:X]->(b) WHERE b.x > 1 | b.key], [p = (a)-->() | p]",
     f"RETURN [(a {P})-[:X]->(b {P}) WHERE b.x > 1 | b.key], [p = (a {P})-->( {P}) | p]"),
    ("RETURN EXISTS { (n)-->(m) }, COUNT { (n:Node) }, COLLECT { MATCH (x) RETURN x }",
     f"RETURN EXISTS {{ (n {P})-->(m {P}) }}, COUNT {{ (n:Node {P}) }}, COLLECT {{ MATCH (x {P}) RETURN x }}"),
    ("MATCH p = shortestPath((a:A)-[*]-(b)) RETURN p", f"MATCH p = shortestPath((a:A {P})-[*]-(b {P})) RETURN p"),
    ("MATCH (a), (b) RETURN allShortestPaths((a)-[*]-(b))",
     f"MATCH (a {P}), (b {P}) RETURN allShortestPaths((a {P})-[*]-(b {P}))"),
    ("MATCH p = ANY SHORTEST (a)-->+(b) RETURN p", f"MATCH p = ANY SHORTEST (a {P})-->+(b {P}) RETURN p"),
    ("MATCH (a) ((x)-[:R]->(y)){1,3} (b) RETURN a",
     f"MATCH (a {P}) ((x {P})-[:R]->(y {P})){{1,3}} (b {P}) RETURN a"),
    ("MATCH (n IS Node WHERE n.x = 1 OR n.y = 2) RETURN n", f"MATCH (n IS Node {P} WHERE n.x = 1 OR n.y = 2) RETURN n"),
    ("MATCH (n:$($label)) RETURN n", f"MATCH (n:$($label) {P}) RETURN n"),
    ("CALL () { MATCH (n) RETURN n } RETURN n", f"CALL () {{ MATCH (n {P}) RETURN n }} RETURN n"),
    ("UNWIND $ids AS id MATCH (n) WHERE elementId(n) = id RETURN n",
     f"UNWIND $ids AS id MATCH (n {P}) WHERE elementId(n) = id RETURN n"),
    # Arrows drawn with look-alike dashes and heads, a comment inside an arrow, escapes: Neo4j reads
    # each as a pattern, so it is one.
    ("MATCH (a)\u2013\u2013\uff1e(b) RETURN b", f"MATCH (a {P})\u2013\u2013\uff1e(b {P}) RETURN b"),
    ("MATCH (a) WHERE (a)-/* x */->(b) RETURN a", f"MATCH (a {P}) WHERE (a {P})-/* x */->(b {P}) RETURN a"),
    ("MATCH (a)\\u002d\\u002d>(b) RETURN b", f"MATCH (a {P})\\u002d\\u002d>(b {P}) RETURN b"),
    # Not patterns: arithmetic, a variable called match, strings, map projections.
    ("WITH 1 AS x RETURN (x) - -1, count(x) < -1", "WITH 1 AS x RETURN (x) - -1, count(x) < -1"),
    ("WITH 1 AS match RETURN match", "WITH 1 AS match RETURN match"),
    ("RETURN '(a)-->(b)' AS text", "RETURN '(a)-->(b)' AS text"),
])
def test_every_node_pattern_is_held_to_the_project(query: str, expected: str) -> None:
    assert scoped(query) == expected


def test_the_saved_queries_are_scoped_too() -> None:
    from graphmem.readonly import saved_queries

    for saved in saved_queries().values():
        assert scoped(saved.text).count("project: $project") > saved.text.count("project: $project"), saved.name


@pytest.mark.parametrize("query, named", [
    ("CALL db.index.fulltext.queryNodes('graphmem_text', 'billing') YIELD node RETURN node", "every project"),
    ("CALL db.index.vector.queryNodes('graphmem_vec', 5, [0.1, 0.2]) YIELD node RETURN node", "every project"),
    ("MATCH (n:Service) CALL apoc.path.expand(n, '', '', 1, 3) YIELD path RETURN path", "apoc.path"),
    ("CALL apoc.path.subgraphNodes(0, {}) YIELD node RETURN node", "apoc.path"),
    ("CALL apoc.meta.stats()", "apoc.meta"),
    ("CALL apoc.neighbors.athop(0, 'CALLS', 2)", "apoc.neighbors"),
    ("RETURN apoc.nodes.relationships.exist(0) AS x", "apoc.nodes"),
    ("RETURN apoc.meta.nodes.count([]) AS everyone", "apoc.meta"),
    ("MATCH (n $props) RETURN n", "$parameter map"),
    ("WITH 1 AS x MATCH x RETURN x", "pattern"),
])
def test_what_cannot_be_held_to_the_project_is_refused(query: str, named: str) -> None:
    with pytest.raises(CypherRefused, match=r"\(line \d+, column \d+\)") as refused:
        scoped(query)
    message = str(refused.value)
    assert named in message and "\n" not in message


def test_the_time_limit_a_query_may_ask_for_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHMEM_CYPHER_MAX_TIMEOUT", raising=False)
    assert max_timeout_s() == DEFAULT_MAX_TIMEOUT_S == 30.0
    monkeypatch.setenv("GRAPHMEM_CYPHER_MAX_TIMEOUT", "45")
    assert max_timeout_s() == 45.0
    monkeypatch.setenv("GRAPHMEM_CYPHER_MAX_TIMEOUT", "soon")
    from graphmem.errors import ConfigError

    with pytest.raises(ConfigError, match="GRAPHMEM_CYPHER_MAX_TIMEOUT"):
        max_timeout_s()


# --- on the server ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def projects(neo4j_schema: Any) -> Iterator[tuple[Any, Any]]:
    """Projects A and B in one database, with the same keys and different names and texts."""
    from graphmem.stores.neo4j import Neo4jStore

    suffix = uuid.uuid4().hex[:8]
    stores = [Neo4jStore(neo4j_schema, f"scope-{side}-{suffix}", database=os.environ.get("NEO4J_DATABASE"))
              for side in ("a", "b")]
    for store, side in zip(stores, ("a", "b")):
        prov = Provenance("billing/api.py", "test")
        nodes = [Node("service:billing", f"billing-{side}", prov), Node("service:ledger", f"ledger-{side}", prov),
                 Node("file:billing/api.py", "billing/api.py", prov),
                 Node("sym:billing/api.py::charge", f"charge_{side}", prov)]
        rels = [Relationship("service:billing", RelType.DEPENDS_ON, "service:ledger", prov),
                Relationship("service:billing", RelType.CONTAINS, "file:billing/api.py", prov),
                Relationship("file:billing/api.py", RelType.CONTAINS, "sym:billing/api.py::charge", prov)]
        chunks = [Chunk("sym:billing/api.py::charge", 0, f"secret text of project {side}", "code", prov)]
        if side == "b":  # a node only B has
            nodes.append(Node("service:b-only", "b-only", prov))
        store.upsert(nodes, rels, chunks)
    yield stores[0], stores[1]
    for store in stores:
        store.drop_project()


# Each runs under project A and must see A's data only: (query, expected rows given A's name,
# parameters; "B" stands for B's name). Rows are compared in any order.
SCOPED_READS = [
    ("MATCH (n:Node) RETURN n.project AS p, count(*) AS c", lambda a: [[a, 4]], {}),
    ("MATCH (c:Chunk) WHERE c.project <> $project RETURN c.text", lambda a: [], {}),
    ("MATCH (c:Chunk) RETURN c.text", lambda a: [["secret text of project a"]], {}),
    ("MATCH (n) RETURN DISTINCT n.project", lambda a: [[a]], {}),
    ("MATCH (n {project: $other}) RETURN count(n)", lambda a: [[0]], {"other": "B"}),
    ("MATCH (n:Node) WHERE n.project = $other OR true RETURN count(n)", lambda a: [[4]], {"other": "B"}),
    ("MATCH ()-[r]->() RETURN count(r)", lambda a: [[4]], {}),  # three relationships and HAS_CHUNK
    ("MATCH (s:Service {key: 'service:billing'}) RETURN s.name", lambda a: [["billing-a"]], {}),
    ("OPTIONAL MATCH (n:Service {key: 'service:b-only'}) RETURN n.name", lambda a: [[None]], {}),
    ("RETURN EXISTS { MATCH (n:Service {key: 'service:b-only'}) } AS e", lambda a: [[False]], {}),
    ("RETURN EXISTS { (:Service {name: 'b-only'}) } AS e", lambda a: [[False]], {}),
    ("RETURN COUNT { (n:Node) } AS c", lambda a: [[4]], {}),
    ("RETURN COLLECT { MATCH (n:Node) RETURN DISTINCT n.project } AS p", lambda a: [[[a]]], {}),
    ("MATCH (s:Service {key: 'service:billing'}) "
     "RETURN [(s)-[:DEPENDS_ON]->(t) | t.name] AS deps, [(x)-->(y) | y.project] AS any_project",
     lambda a: [[["ledger-a"], [a, a, a, a]]], {}),
    ("MATCH (n:Node) WHERE (n)-[:CONTAINS]->() RETURN n.name", lambda a: [["billing-a"], ["billing/api.py"]], {}),
    ("MATCH p = shortestPath((s:Service {key: 'service:billing'})-[*]-(c:Symbol)) "
     "RETURN [x IN nodes(p) | x.project] AS projects", lambda a: [[[a, a, a]]], {}),
    ("MATCH (s:Service) ((x)-[:CONTAINS]->(y)){1,2} (z:Symbol) RETURN s.name, z.name",
     lambda a: [["billing-a", "charge_a"]], {}),
    ("CALL () { MATCH (n) RETURN n.project AS p } RETURN DISTINCT p", lambda a: [[a]], {}),
    ("MATCH (n:Service) RETURN n.name AS name UNION MATCH (n:Symbol) RETURN n.name AS name",
     lambda a: [["billing-a"], ["ledger-a"], ["charge_a"]], {}),
    ("MATCH (a:Service)\u2013[:DEPENDS_ON]\u2013\uff1e(b) RETURN b.name", lambda a: [["ledger-a"]], {}),
]


@pytest.mark.neo4j
@pytest.mark.parametrize("query, expected, params", SCOPED_READS)
def test_raw_cypher_reads_only_its_own_project(projects: tuple[Any, Any], query: str, expected: Any,
                                               params: dict[str, Any]) -> None:
    a, b = projects
    values = {k: b.project if v == "B" else v for k, v in params.items()}
    result = run_read_only(a, query, values, timeout_s=10)
    assert sorted(result.rows) == sorted(expected(a.project)), query


@pytest.mark.neo4j
def test_the_other_project_sees_its_own_data(projects: tuple[Any, Any]) -> None:
    _, b = projects
    assert run_read_only(b, "MATCH (n:Node) RETURN n.project, count(*)").rows == [[b.project, 5]]
    assert run_read_only(b, "MATCH (s:Service {key: 'service:b-only'}) RETURN s.name").rows == [["b-only"]]
    assert run_read_only(b, "MATCH (c:Chunk) RETURN c.text").rows == [["secret text of project b"]]


@pytest.mark.neo4j
def test_nodes_of_another_project_cannot_be_reached_by_id(projects: tuple[Any, Any]) -> None:
    a, b = projects
    ids = [r["id"] for r in b.driver.execute_query(
        "MATCH (n:Node {project: $p}) RETURN elementId(n) AS id", p=b.project, database_=b.database).records]
    assert len(ids) == 5
    result = run_read_only(a, "UNWIND $ids AS id MATCH (n) WHERE elementId(n) = id RETURN n.key", {"ids": ids})
    assert result.rows == []
    with pytest.raises(CypherError, match=r"\$project is the project of the store"):
        run_read_only(a, "MATCH (n:Node {project: $project}) RETURN n", {"project": b.project})


@pytest.mark.neo4j
def test_index_search_procedures_are_refused_before_they_reach_other_projects(projects: tuple[Any, Any]) -> None:
    a, _ = projects
    for query in ("CALL db.index.fulltext.queryNodes('any', 'billing') YIELD node RETURN node.name",
                  "CALL db.index.vector.queryNodes('any', 3, [0.1, 0.2, 0.3]) YIELD node RETURN node.name"):
        with pytest.raises(CypherRefused, match="every project"):
            run_read_only(a, query)
    # Schema procedures still run: they return labels, not nodes.
    labels = {row[0] for row in run_read_only(a, "CALL db.labels() YIELD label RETURN label").rows}
    assert {"Node", "Service", "Chunk"} <= labels


@pytest.mark.neo4j
def test_the_saved_queries_keep_to_their_project(projects: tuple[Any, Any]) -> None:
    from graphmem.readonly import run_saved

    a, b = projects
    rows = run_saved(a, "service_dependencies").records()
    assert rows == [{"service": "service:billing", "depends_on": "service:ledger", "confidence": 1.0,
                     "evidence": ["billing/api.py"]}]
    neighbours = run_saved(a, "neighbours", {"key": "service:billing"}).records()
    assert {r["other"] for r in neighbours} == {"service:ledger", "file:billing/api.py"}


def _alive(store: Any) -> None:
    assert run_read_only(store, "RETURN 1 AS alive", timeout_s=10).rows == [[1]]


@pytest.mark.neo4j
def test_a_query_that_would_exhaust_the_heap_is_stopped_and_neo4j_keeps_answering(
        projects: tuple[Any, Any]) -> None:
    a, _ = projects
    with pytest.raises(CypherOutOfMemory, match="Neo4j stopped the query") as stopped:
        run_read_only(a, STRING_BOMB, timeout_s=20)
    assert "\n" not in str(stopped.value)
    _alive(a)
    with pytest.raises(CypherOutOfMemory, match="db.memory.transaction.max"):
        run_read_only(a, COLLECT_BOMB, timeout_s=20)
    _alive(a)


def test_a_value_that_outgrew_the_largest_array_reads_as_a_memory_stop() -> None:
    """Whether the string bomb ends on the memory guard, the heap or Java's array size limit
    depends on the server's heap at that moment; the last arrives as a bare negative size."""
    import neo4j.exceptions as nx

    from graphmem.readonly import _translate

    hydrate = getattr(nx.Neo4jError, "_hydrate_neo4j", None) or getattr(nx.Neo4jError, "hydrate")
    overflow = _translate(hydrate(code="Neo.DatabaseError.Statement.ExecutionFailed", message="-2147483648"), 20)
    assert isinstance(overflow, CypherOutOfMemory) and "Neo4j stopped the query" in str(overflow)
    assert "narrow it" in str(overflow) and "-2147483648" in str(overflow)
    other = _translate(hydrate(code="Neo.DatabaseError.Statement.ExecutionFailed", message="-1 is not a size"), 20)
    assert type(other) is CypherError and "Neo4j could not run the query" in str(other)


# Bombs of every kind, each through the real runner: (id, query, the errors it may end with, what
# stops it). "server": Neo4j's own guards, its time limit or its memory limit for one transaction.
# "client": Neo4j notices its time limit, and TERMINATE TRANSACTION, only at some points of a
# query's execution, never inside an expression; a query that spends its time in expressions
# (reduce, list comprehensions over a huge range) runs to its end on the server (measured on 5.26:
# 15 s to 40 s of one core for these two), so the runner gives up at its deadline, terminates the
# transaction and drops the connection, and the server discards the result when it is done.
BOMBS = [
    ("cartesian-product", "MATCH (a:Service), (b:Service), (c:Service), (d:Service), (e:Service) RETURN count(*) AS n",
     (CypherTimeout,), "server"),
    ("deep-variable-length-paths", "MATCH p = (a:Service)-[*..50]-(b:Service) RETURN count(p) AS n",
     (CypherTimeout,), "server"),
    ("huge-range-sorted", "UNWIND range(1, 200000000) AS i WITH i ORDER BY toString(i) DESC RETURN count(*) AS n",
     (CypherOutOfMemory, CypherTimeout), "server"),
    ("huge-range-distinct", "UNWIND range(1, 300000000) AS i RETURN count(DISTINCT toString(i)) AS n",
     (CypherOutOfMemory, CypherTimeout), "server"),
    ("reduce-in-unwind", "UNWIND range(1, 60) AS k RETURN sum(reduce(s = 0, x IN range(1, 20000000) | s + x % 7)) AS n",
     (CypherTimeout,), "client"),
    ("comprehension-over-a-billion",
     "RETURN size([x IN range(1, 1000000000) WHERE x % 999999937 = 0 | toString(x)]) AS n",
     (CypherTimeout,), "client"),
]
BOMB_TIME_LIMIT = 2.0
# The longest a bomb may take to be refused: its limit, the grace the server's own stop gets, the
# wait for the termination to be confirmed, and slack for a busy machine.
BOMB_REFUSED_WITHIN = BOMB_TIME_LIMIT + DEADLINE_GRACE_S + TERMINATE_WAIT_S + 4.0


@pytest.fixture(scope="module")
def dense(neo4j_schema: Any) -> Iterator[Any]:
    """A project of 300 services, each depending on 8 others: dense enough for paths to explode."""
    from graphmem.stores.neo4j import Neo4jStore

    store = Neo4jStore(neo4j_schema, f"bombs-{uuid.uuid4().hex[:8]}", database=os.environ.get("NEO4J_DATABASE"))
    prov = Provenance("services.toml", "test")
    n = 300
    nodes = [Node(f"service:s{i}", f"s{i}", prov) for i in range(n)]
    rels = [Relationship(f"service:s{i}", RelType.DEPENDS_ON, f"service:s{(i * 7 + k * 13 + 1) % n}", prov)
            for i in range(n) for k in range(8)]
    store.upsert(nodes, rels, [])
    yield store
    store.drop_project()


def _server_side(store: Any, query: str) -> list[str]:
    """The status of every server-side transaction still running ``query`` (as the runner sent it)."""
    records = store.driver.execute_query(
        "SHOW TRANSACTIONS YIELD currentQuery, status WHERE currentQuery = $q RETURN status",
        q=scoped(query), database_=store.database).records
    return [r["status"] for r in records]


@pytest.mark.neo4j
@pytest.mark.parametrize("name, query, errors, stopped_by", BOMBS, ids=[b[0] for b in BOMBS])
def test_bombs_end_with_a_clear_error_in_bounded_time_and_neo4j_keeps_answering(
        dense: Any, name: str, query: str, errors: tuple[type[CypherError], ...], stopped_by: str) -> None:
    started = time.monotonic()
    with pytest.raises(errors) as stopped:
        run_read_only(dense, query, timeout_s=BOMB_TIME_LIMIT)
    took = time.monotonic() - started
    message = str(stopped.value)
    assert took < BOMB_REFUSED_WITHIN, f"{name} was refused after {took:.1f} s"
    assert "\n" not in message and "narrow it" in message
    if isinstance(stopped.value, CypherTimeout):
        assert f"timed out after {BOMB_TIME_LIMIT:g} s" in message
    # The server no longer works on it, or has been told to stop and finishes the expression it is in.
    statuses = _server_side(dense, query)
    assert all(status.startswith("Terminated") for status in statuses), statuses
    if stopped_by == "client" and isinstance(stopped.value, CypherTimeout):
        assert "was still evaluating it" in message and statuses
    _alive(dense)


def _graphmem_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "graphmem.cli", "--store", "neo4j", *args],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


@pytest.mark.neo4j
def test_the_command_line_reports_the_memory_limit_and_the_time_limit_cap(projects: tuple[Any, Any]) -> None:
    a, _ = projects
    out = _graphmem_cli("--project", a.project, "cypher", STRING_BOMB)
    assert out.returncode != 0 and "Neo4j stopped the query" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    capped = _graphmem_cli("--project", a.project, "cypher", "--timeout", "120", "RETURN 1")
    assert capped.returncode != 0 and "at most 30 s" in capped.stderr, capped.stderr
    alive = _graphmem_cli("--project", a.project, "cypher", "--json", "MATCH (n:Node) RETURN DISTINCT n.project AS p")
    assert alive.returncode == 0, alive.stderr
    assert '"rows": [\n    [\n      "' + a.project + '"' in alive.stdout


@pytest.mark.neo4j
def test_the_mcp_cypher_tool_reports_the_memory_limit_and_the_time_limit_cap(
        projects: tuple[Any, Any], tmp_path: Path) -> None:
    from graphmem.config import Settings
    from graphmem.mcp_server import Service

    a, _ = projects
    service = Service(Settings.from_env(store="neo4j", home=tmp_path / "home"), a.project)
    try:
        with pytest.raises(CypherOutOfMemory, match="Neo4j stopped the query"):
            service.cypher(query=STRING_BOMB, timeout_s=20)
        with pytest.raises(CypherError, match="at most 30 s"):
            service.cypher(query="RETURN 1", timeout_s=120)
        rows = service.cypher(query="MATCH (n:Node) RETURN DISTINCT n.project AS p")["untrusted_rows"]
        assert rows == [{"p": a.project}]
    finally:
        service.close()
