"""Read-only Cypher: the checker refuses writes however they are disguised, the READ transaction
refuses what gets past it, and what may run runs with a row limit and a time limit."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from graphmem.errors import GraphmemError, NotSupported
from graphmem.model import Node, Provenance, Relationship, RelType
from graphmem.readonly import (
    READ_ONLY_PROCEDURES,
    CypherError,
    CypherRefused,
    CypherTimeout,
    _execute,
    check_read_only,
    parse_value,
    query_parameters,
    run_read_only,
)

# Each is refused by check_read_only. "Hostile" labels let a leak be found even when other
# projects share the server.
HOSTILE = [
    # updating clauses
    "CREATE (n:Hostile {x: 1})",
    "MATCH (n) SET n.hostile = 1",
    "MATCH (n) DETACH DELETE n",
    "MATCH ()-[r]->() DELETE r",
    "MERGE (n:Hostile {x: 1})",
    "MATCH (n) REMOVE n.key",
    "MATCH (n:Node) REMOVE n:Node",
    "MATCH (n) SET n:Hostile",
    "MATCH (n) SET n += {hostile: true}",
    "UNWIND range(1, 3) AS i CREATE (:Hostile {i: i})",
    "FOREACH (i IN range(1, 3) | CREATE (:Hostile {i: i}))",
    "MATCH (a), (b) WITH a, b LIMIT 1 CREATE (a)-[:HOSTILE]->(b)",
    "OPTIONAL MATCH (n:Nothing) WITH n MERGE (m:Hostile) RETURN m",
    "MATCH (n) WITH n LIMIT 1 CALL (n) { SET n.x = 1 } RETURN n",
    "MATCH (n) WITH n LIMIT 1 CALL { WITH n SET n.x = 1 } RETURN n",
    "INSERT (:Hostile {x: 1})",
    "MATCH (n) NODETACH DELETE n",
    "EXPLAIN CREATE (:Hostile)",
    "PROFILE MATCH (n) SET n.x = 1",
    "CYPHER runtime=slotted CREATE (:Hostile)",
    "CALL db.labels() YIELD label CREATE (:Hostile {label: label})",
    # committing on its own
    "CALL { CREATE (:Hostile) } IN TRANSACTIONS",
    "CALL { MATCH (n:Hostile) RETURN n } IN TRANSACTIONS OF 10 ROWS RETURN n",
    "CALL { MATCH (n:Hostile) DETACH DELETE n } IN 2 CONCURRENT TRANSACTIONS OF 10 ROWS",
    # schema and administration
    "CREATE INDEX hostile IF NOT EXISTS FOR (n:Hostile) ON (n.x)",
    "DROP INDEX graphmem_node_source",
    "CREATE CONSTRAINT hostile FOR (n:Hostile) REQUIRE n.x IS UNIQUE",
    "DROP CONSTRAINT graphmem_node_key",
    "CREATE DATABASE hostile",
    "STOP DATABASE neo4j",
    "START DATABASE neo4j",
    "ALTER USER neo4j SET PASSWORD 'hostile-password'",
    "CREATE USER hostile SET PASSWORD 'hostile-password'",
    "GRANT ROLE admin TO hostile",
    "DENY READ {*} ON GRAPH * TO PUBLIC",
    "REVOKE ROLE admin FROM neo4j",
    "SHOW TRANSACTIONS",
    "SHOW TRANSACTIONS YIELD transactionId TERMINATE TRANSACTIONS transactionId",
    "TERMINATE TRANSACTIONS 'neo4j-transaction-1'",
    "SHOW USERS",
    "SHOW SETTINGS",
    "USE system SHOW DATABASES",
    "USE neo4j MATCH (n) RETURN n",
    # procedures that write, administer, or are simply not on the allow-list
    "CALL db.createLabel('Hostile')",
    "CALL db.createProperty('hostile')",
    "CALL db.createRelationshipType('HOSTILE')",
    "CALL db.clearQueryCaches()",
    "CALL dbms.listConfig()",
    "CALL dbms.killConnections(['bolt-1'])",
    "CALL dbms.security.createUser('hostile', 'x', false)",
    "RETURN dbms.components() AS x",
    "CALL apoc.create.node(['Hostile'], {x: 1})",
    "MATCH (n) CALL apoc.create.setProperty(n, 'hostile', 1) YIELD node RETURN node",
    "CALL apoc.merge.node(['Hostile'], {x: 1})",
    "CALL apoc.periodic.iterate('MATCH (n) RETURN n', 'DETACH DELETE n', {batchSize: 10})",
    "CALL apoc.periodic.commit('MATCH (n) WITH n LIMIT 10 DETACH DELETE n RETURN count(*)')",
    "CALL apoc.cypher.runWrite('CREATE (:Hostile)', {})",
    "CALL apoc.cypher.doIt('CREATE (:Hostile)', {})",
    "CALL apoc.cypher.run('CREATE (:Hostile)', {})",
    "CALL apoc.refactor.rename.label('Node', 'Hostile')",
    "MATCH (a:Node), (b:Node) WITH a, b LIMIT 1 CALL apoc.refactor.mergeNodes([a, b]) YIELD node RETURN node",
    "MATCH (n) WITH collect(n) AS ns CALL apoc.nodes.delete(ns, 10) YIELD value RETURN value",
    "CALL apoc.schema.assert({}, {})",
    "CALL apoc.trigger.add('hostile', 'CREATE (:Hostile)', {})",
    "CALL apoc.load.json('file:///etc/passwd')",
    "CALL apoc.export.csv.all('/tmp/hostile.csv', {})",
    "CALL apoc.util.sleep(100000)",
    "CALL apoc.meta.data.of('CREATE (:Hostile)')",
    "OPTIONAL CALL apoc.create.node(['Hostile'], {})",
    "RETURN apoc.cypher.runFirstColumnSingle('CREATE (n:Hostile) RETURN n', {}) AS x",
    "RETURN {a: apoc.cypher.runFirstColumnMany('MATCH (n) DETACH DELETE n RETURN 1', {})} AS x",
    # files and URLs
    "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row",
    "LOAD CSV WITH HEADERS FROM 'https://example.com/x.csv' AS row CREATE (:Hostile)",
    # several statements
    "MATCH (n) RETURN count(n); MATCH (n) DETACH DELETE n",
    "RETURN 1; RETURN 2",
    "RETURN ';' AS x; CREATE (:Hostile)",
    "RETURN 1 /* ; */ ; // only comments may follow\nCREATE (:Hostile)",
    # comments and case hiding or splitting a keyword
    "MATCH (n) /* x */ DeTaCh /**/ DELETE n",
    "MATCH (n)//\nSET n.x=1",
    "MATCH (n)//\rSET n.x=1",
    "MATCH (n) cReAtE (:Hostile)",
    "MATCH (n)/*CREATE*/SET/**/n.x = 1",
    "MATCH (n) RETURN n /* looks closed */ */ CREATE (:Hostile)",
    "MATCH (n) RETURN n /* /* comments do not nest */ CREATE (:Hostile) // */",
    # string literals with escapes before the write
    "RETURN 'it\\'s' AS x CREATE (:Hostile)",
    'RETURN "say \\"hi\\"" AS x CREATE (:Hostile)',
    "RETURN '\\\\' AS x CREATE (:Hostile)",
    "RETURN '//' AS x CREATE (:Hostile)",
    "RETURN '/*' AS x CREATE (:Hostile) RETURN '*/'",
    # unicode escapes, which Neo4j applies before anything else
    "MATCH (n) \\u0053ET n.x = 1",
    "WITH 'a\\u0027 AS x CREATE (:Hostile) //' AS y RETURN y",
    "RETURN 1 AS `a\\u0060 CREATE (:Hostile) //`",
    "RETURN 1 AS x //\\u000a CREATE (:Hostile)",
    "RETURN 1 AS x //\\u000D CREATE (:Hostile)",
    "RETURN 1 AS x /* \\u002a/ CREATE (:Hostile) */",
    "RETURN '\\\\\\u0027 CREATE (:Hostile) //' AS x",
    "RETURN '\\u12' AS broken_escape",
    "MATCH (n) ſet n.x = 1",
    # backticks
    "CALL `apoc`.`create`.`node`(['Hostile'], {})",
    "CALL `apoc.cypher.runWrite`('CREATE (:Hostile)', {})",
    "RETURN `apoc`.`cypher`.runFirstColumnSingle('CREATE (n:Hostile) RETURN n', {}) AS x",
    "MATCH (n) SET n.`x` = 1",
    "RETURN 1 AS `unterminated",
    "RETURN 'unterminated",
    "RETURN 1 /* unterminated",
]

# Each passes the checker and runs: keywords inside strings, names that contain or are keywords.
BENIGN = [
    "MATCH (n:Node {project: $project}) WHERE n.name = 'CREATE' RETURN n.key AS k LIMIT 1",
    "MATCH (n:Node {project: $project}) WHERE n.name CONTAINS 'DETACH DELETE' OR n.name = \"SET x = 1\" RETURN n",
    "RETURN 'MATCH (n) DETACH DELETE n; DROP INDEX x' AS text",
    "RETURN 'it\\'s CREATE' AS a, \"quote \\\" SET\" AS b, '\\\\' AS c",
    "RETURN '// not a comment' AS a, '/* nor this */' AS b, '`' AS c",
    "MATCH (n:Node {project: $project}) RETURN n.created_at, n.set, n.delete, n.merge, n.remove LIMIT 1",
    "MATCH (n:Node {project: $project}) RETURN n {.key, .set, .create} AS m LIMIT 1",
    "MATCH (n:Dataset) RETURN n",
    "MATCH (n:Node {project: $project})-[:CREATED_BY]->(m) RETURN n, m",
    "MATCH (n:Node {project: $project})-[:DELETES|SETS]->(m) RETURN count(m) AS c",
    "MATCH (n:Create) RETURN n",
    "MATCH (n:Node {project: $project}) RETURN n.`CREATE` AS `SET`, n.`DELETE` AS `drop table` LIMIT 1",
    "RETURN {create: 1, set: 2, delete: 3} AS map",
    "MATCH (n:Node {project: $project}) // CREATE (:Hostile)\nRETURN count(n) AS c",
    "MATCH (n:Node {project: $project}) /* SET n.x = 1 */ RETURN count(n) AS c",
    "RETURN 1 AS x;",
    "RETURN 1 AS x; // a trailing comment",
    "RETURN $set AS s, $create AS c",
    "MATCH p = (start:Node {project: $project})-[:CALLS]->(stop) RETURN count(p) AS paths",
    "UNWIND [1, 2, 3] AS created RETURN sum(created) AS total",
    "MATCH (n:Node {project: $project}) WHERE n.key STARTS WITH 'sym:' RETURN n.key ORDER BY n.key SKIP 1 LIMIT 2",
    "MATCH (n:Node {project: $project}) WITH n.kind AS kind, count(*) AS c RETURN kind, c ORDER BY c DESC",
    "CALL db.labels() YIELD label RETURN label",
    "CALL db.relationshipTypes()",
    "CALL db.propertyKeys() YIELD propertyKey RETURN count(*) AS keys",
    "CALL db.schema.visualization()",
    "CALL db.schema.nodeTypeProperties() YIELD nodeType, propertyName RETURN nodeType, count(*) AS props",
    "SHOW INDEXES YIELD name RETURN name",
    "SHOW CONSTRAINTS",
    "SHOW PROCEDURES YIELD name RETURN count(*) AS procedures",
    ("RETURN date.truncate('month', date('2026-05-17')) AS month, duration.between(date('2026-01-01'), "
     "date('2026-02-01')) AS d, toUpper('set') AS up"),
    "MATCH (n:Node {project: $project}) RETURN count { (n)-->() } AS out, exists { (n)<--() } AS has_in LIMIT 1",
    "MATCH (n:Node {project: $project}) RETURN COLLECT { MATCH (n)-->(m) RETURN m.key } AS next LIMIT 1",
    "CALL (){ MATCH (n:Node {project: $project}) RETURN n LIMIT 1 } RETURN n.key",
    "RETURN 'caf\\u00e9' AS word, '\\\\u0041' AS not_an_escape",
    "RETURN '\\u005c\\u0027' AS quote",
    "WITH 1 AS show_me RETURN show_me",
]


@pytest.fixture(scope="module")
def store(neo4j_schema: Any) -> Iterator[Any]:
    """A small project of its own: two services, a call between two symbols."""
    from graphmem.stores.neo4j import Neo4jStore

    s = Neo4jStore(neo4j_schema, f"ro-{uuid.uuid4().hex[:8]}", database=os.environ.get("NEO4J_DATABASE"))
    prov = Provenance("test.py", "test")
    nodes = [Node("service:billing", "billing", prov), Node("service:ledger", "ledger", prov),
             Node("file:billing/a.py", "billing/a.py", prov),
             Node("sym:billing/a.py::f", "f", prov), Node("sym:billing/a.py::g", "g", prov)]
    rels = [Relationship("service:billing", RelType.DEPENDS_ON, "service:ledger", prov),
            Relationship("service:billing", RelType.CONTAINS, "file:billing/a.py", prov),
            Relationship("file:billing/a.py", RelType.CONTAINS, "sym:billing/a.py::f", prov),
            Relationship("sym:billing/a.py::f", RelType.CALLS, "sym:billing/a.py::g", prov)]
    s.upsert(nodes, rels)
    yield s
    s.drop_project()


def database_state(store: Any) -> tuple[int, int, int]:
    """Nodes and relationships of the whole database (every project), and node labels."""
    rows = store.driver.execute_query(
        "CALL () { MATCH (n) RETURN count(n) AS nodes } CALL () { MATCH ()-[r]->() RETURN count(r) AS rels } "
        "CALL () { CALL db.labels() YIELD label RETURN count(label) AS labels } RETURN nodes, rels, labels",
        database_=store.database).records[0]
    return rows["nodes"], rows["rels"], rows["labels"]


def assert_leaves_database_unchanged(store: Any, attempt: Callable[[], None]) -> None:
    """``attempt`` changes no count. Other suites may share the server, so a difference is checked
    again once before it counts as a failure."""
    for tries in (1, 2):
        before = database_state(store)
        attempt()
        after = database_state(store)
        if before == after:
            break
        assert tries == 1, f"the database changed: {before} -> {after}"
    hostile = store.driver.execute_query("MATCH (n:Hostile) RETURN count(n) AS c", database_=store.database)
    assert hostile.records[0]["c"] == 0


# --- the checker, no server needed ------------------------------------------------------------------


def test_there_are_enough_hostile_and_benign_queries() -> None:
    assert len(HOSTILE) >= 60 and len(set(HOSTILE)) == len(HOSTILE)
    assert len(BENIGN) >= 30 and len(set(BENIGN)) == len(BENIGN)


@pytest.mark.parametrize("query", HOSTILE)
def test_the_checker_refuses_hostile_queries(query: str) -> None:
    with pytest.raises(CypherRefused) as refused:
        check_read_only(query)
    message = str(refused.value)
    assert "\n" not in message and ("refused" in message or "cannot check" in message)


@pytest.mark.parametrize("query", BENIGN)
def test_the_checker_allows_benign_queries(query: str) -> None:
    check_read_only(query)


@pytest.mark.parametrize("query, named", [
    ("MATCH (n) /* x */ DeTaCh /**/ DELETE n", "DETACH DELETE"),
    ("MATCH (n)//\nSET n.x=1", "SET"),
    ("CALL apoc.periodic.iterate('a', 'b', {})", "apoc.periodic.iterate"),
    ("RETURN 1; RETURN 2", "one statement"),
    ("LOAD CSV FROM 'x' AS row RETURN row", "LOAD CSV"),
    ("CALL { RETURN 1 AS x } IN TRANSACTIONS RETURN x", "IN TRANSACTIONS"),
    ("SHOW TRANSACTIONS", "SHOW TRANSACTIONS"),
    ("CALL dbms.listConfig()", "dbms"),
    ("USE system SHOW USERS", "USE"),
    ("MATCH (n) \\u0053ET n.x = 1", "SET"),
])
def test_a_refusal_names_what_it_found_and_where(query: str, named: str) -> None:
    with pytest.raises(CypherRefused, match=r"\(line \d+, column \d+\)") as refused:
        check_read_only(query)
    assert named in str(refused.value)


def test_the_position_of_a_refusal_counts_lines() -> None:
    with pytest.raises(CypherRefused, match=r"line 3, column 3"):
        check_read_only("MATCH (n)\n// fine\n  SET n.x = 1")


def test_empty_queries_are_errors() -> None:
    for query in ("", "   ", "// nothing\n/* at all */"):
        with pytest.raises(CypherError, match="empty"):
            check_read_only(query)


def test_query_parameters_and_command_line_values() -> None:
    assert query_parameters("MATCH (n {key: $key}) WHERE n.x > $ min RETURN $`odd name`, '$not'") == \
        {"key", "min", "odd name"}
    assert [parse_value(v) for v in ("3", "-2", "2.5", "true", "FALSE", "null", "[1, 2]", "sym:a.py::f", "0x1")] \
        == [3, -2, 2.5, True, False, None, [1, 2], "sym:a.py::f", "0x1"]


# --- on the server ----------------------------------------------------------------------------------


@pytest.mark.neo4j
def test_hostile_queries_are_refused_and_change_nothing(store: Any) -> None:
    def attempt() -> None:
        for query in HOSTILE:
            with pytest.raises(CypherRefused):
                run_read_only(store, query, timeout_s=10)

    assert_leaves_database_unchanged(store, attempt)


# Past the checker, straight into the READ transaction: Neo4j refuses each.
SERVER_REFUSES = [
    "CREATE (n:Hostile {x: 1}) RETURN n",
    "MATCH (n) SET n.hostile = 1",
    "MATCH (n:Hostile) DETACH DELETE n",
    "MERGE (n:Hostile)",
    "INSERT (:Hostile {x: 1})",
    "FOREACH (i IN [1] | CREATE (:Hostile))",
    "CALL { CREATE (:Hostile) } IN TRANSACTIONS",
    "CALL { RETURN 1 AS x } IN TRANSACTIONS RETURN x",
    "CREATE INDEX hostile IF NOT EXISTS FOR (n:Hostile) ON (n.x)",
    "CALL db.createLabel('Hostile')",
    "CALL db.createProperty('hostile')",
    "CALL apoc.create.node(['Hostile'], {})",
    "CALL apoc.merge.node(['Hostile'], {x: 1})",
    "CALL apoc.cypher.runWrite('CREATE (:Hostile)', {})",
    "CALL apoc.cypher.run('CREATE (:Hostile)', {})",
    "CALL apoc.periodic.iterate('MATCH (n:Hostile) RETURN n', 'DETACH DELETE n', {batchSize: 10})",
    "CALL apoc.refactor.rename.label('Hostile', 'Hostile2')",
    "CALL apoc.schema.assert({}, {}, false)",
    "CALL apoc.trigger.add('hostile', 'RETURN 1', {})",
    "RETURN apoc.cypher.runFirstColumnSingle('CREATE (n:Hostile) RETURN n', {}) AS x",
    "MATCH (n) \\u0053ET n.x = 1",
    "WITH 'a\\u0027 AS x CREATE (:Hostile) //' AS y RETURN y",
]


@pytest.mark.neo4j
def test_the_read_transaction_refuses_writes_the_checker_never_saw(store: Any) -> None:
    for query in SERVER_REFUSES:
        with pytest.raises(CypherRefused):
            check_read_only(query)  # the checker would have stopped it ...

    def attempt() -> None:
        for query in SERVER_REFUSES:  # ... and without it, Neo4j does
            with pytest.raises(CypherRefused, match="refused by Neo4j"):
                _execute(store.driver, store.database, store.project, query, None, row_limit=10, timeout_s=10)

    assert_leaves_database_unchanged(store, attempt)


@pytest.mark.neo4j
def test_benign_queries_run(store: Any) -> None:
    def attempt() -> None:
        for query in BENIGN:
            result = run_read_only(store, query, {"set": 1, "create": 2}, timeout_s=10)
            assert isinstance(result.columns, list), query

    assert_leaves_database_unchanged(store, attempt)


@pytest.mark.neo4j
def test_unicode_escapes_are_read_as_neo4j_reads_them(store: Any) -> None:
    """The checker decodes ``\\uXXXX`` exactly as Neo4j does: these values prove where strings end."""
    result = run_read_only(store, "RETURN '\\u005c\\u0027' AS quote, '\\\\u0041' AS literal, "
                                  "'\\\\\\u0041' AS escaped, 'caf\\u00e9' AS word")
    assert result.rows == [["'", "\\u0041", "\\A", "café"]]


@pytest.mark.neo4j
def test_results_are_json_with_keys_for_nodes_relationships_and_paths(store: Any) -> None:
    import json

    result = run_read_only(store, """
        MATCH p = (a:Node {project: $project, key: 'sym:billing/a.py::f'})-[r:CALLS]->(b)
        RETURN a, r, p, datetime('2026-05-01T10:00:00Z') AS at, date('2026-05-01') AS day,
               duration('P1DT2H') AS took, point({x: 1.0, y: 2.0}) AS where, [1, 'two'] AS mixed""")
    assert result.columns == ["a", "r", "p", "at", "day", "took", "where", "mixed"]
    node, rel, path, at, day, took, where, mixed = result.rows[0]
    assert node["key"] == "sym:billing/a.py::f" and "Symbol" in node["labels"] and node["properties"]["name"] == "f"
    assert rel == {"type": "CALLS", "start": "sym:billing/a.py::f", "end": "sym:billing/a.py::g",
                   "properties": rel["properties"]}
    assert [step.get("key") or step.get("type") for step in path] == \
        ["sym:billing/a.py::f", "CALLS", "sym:billing/a.py::g"]
    assert at.startswith("2026-05-01T10:00:00") and day == "2026-05-01" and took.startswith("P")
    assert where["coordinates"] == [1.0, 2.0] and mixed == [1, "two"]
    json.dumps(result.as_dict())  # everything serialises
    # A relationship returned without its nodes still names its ends by key.
    alone = run_read_only(store, "MATCH (:Node {project: $project})-[r:DEPENDS_ON]->() RETURN r")
    assert alone.rows[0][0]["start"] == "service:billing" and alone.rows[0][0]["end"] == "service:ledger"


@pytest.mark.neo4j
def test_project_is_always_the_stores_own(store: Any) -> None:
    result = run_read_only(store, "RETURN $project AS p")
    assert result.rows == [[store.project]]
    counted = run_read_only(store, "MATCH (n:Node {project: $project}) RETURN count(n) AS c")
    assert counted.rows == [[5]]
    with pytest.raises(CypherError, match="--project"):
        run_read_only(store, "RETURN $project", {"project": "someone-else"})


@pytest.mark.neo4j
def test_the_row_limit_truncates(store: Any) -> None:
    result = run_read_only(store, "UNWIND range(1, 50000) AS x RETURN x", row_limit=7)
    assert result.rows == [[x] for x in range(1, 8)] and result.truncated
    exact = run_read_only(store, "UNWIND range(1, 7) AS x RETURN x", row_limit=7)
    assert len(exact.rows) == 7 and not exact.truncated
    with pytest.raises(CypherError, match="at least 1"):
        run_read_only(store, "RETURN 1", row_limit=0)


@pytest.mark.neo4j
def test_a_slow_query_is_stopped_by_the_time_limit(store: Any) -> None:
    started = time.monotonic()
    with pytest.raises(CypherTimeout, match="time limit of 1.5 s") as stopped:
        run_read_only(store, "UNWIND range(1, 1000000) AS x UNWIND range(1, 1000000) AS y "
                             "WITH x, y WHERE x * y = -1 RETURN count(*) AS never", timeout_s=1.5)
    assert time.monotonic() - started < 20
    assert "\n" not in str(stopped.value)
    assert run_read_only(store, "RETURN 1 AS alive").rows == [[1]]  # the server is fine afterwards


@pytest.mark.neo4j
def test_errors_from_the_server_are_one_clear_line(store: Any) -> None:
    with pytest.raises(CypherError, match="SyntaxError") as bad:
        run_read_only(store, "MATCH (n) RETRUN n")
    assert "\n" not in str(bad.value) and not isinstance(bad.value, CypherRefused)
    with pytest.raises(CypherError, match=r"SyntaxError: '\(' is never closed \(line 1, column 7\)") as unclosed:
        run_read_only(store, "MATCH (n RETURN n")  # cannot be scoped, so it never reaches the server
    assert not isinstance(unclosed.value, CypherRefused)
    with pytest.raises(CypherError, match="ProcedureNotFound"):
        run_read_only(store, "CALL `db.labels`()")  # allow-listed spelling, but no such procedure


@pytest.mark.neo4j
def test_allow_listed_procedures_only_read(store: Any) -> None:
    procedures = {r["name"]: r for r in store.driver.execute_query(
        "SHOW PROCEDURES YIELD name, mode, signature RETURN name, mode, signature", database_=store.database).records}
    present = READ_ONLY_PROCEDURES & set(procedures)
    assert {"db.labels", "db.relationshipTypes", "db.propertyKeys", "db.schema.visualization"} <= present
    # DEFAULT is APOC's mode for procedures that need no write access.
    assert {name: procedures[name]["mode"] for name in present
            if procedures[name]["mode"] not in ("READ", "DEFAULT")} == {}
    # None takes a node or a node id: what they return is schema, never another project's data.
    assert {name for name in present if "NODE" in procedures[name]["signature"].split(") ::")[0]
            or "INTEGER" in procedures[name]["signature"].split(") ::")[0]} == set()
    assert not any(name.startswith(("db.index.fulltext.query", "db.index.vector.query", "apoc.path.", "apoc.meta."))
                   for name in READ_ONLY_PROCEDURES)


def test_the_embedded_store_says_raw_cypher_needs_neo4j(embedded_store_factory: Callable[[str], Any]) -> None:
    store = embedded_store_factory("acme")
    with pytest.raises(NotSupported, match="needs the Neo4j store") as refused:
        run_read_only(store, "RETURN 1")
    assert "scripts/neo4j-local start" in str(refused.value) and "--store neo4j" in str(refused.value)
    assert isinstance(refused.value, GraphmemError)


def test_the_api_says_so_too_without_creating_an_embedded_home(tmp_path: Any) -> None:
    from graphmem.api import Graphmem
    from graphmem.config import Settings

    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "acme")
    with pytest.raises(NotSupported, match="GRAPHMEM_STORE=neo4j"):
        gm.cypher("RETURN 1")
    with pytest.raises(NotSupported):
        gm.cypher(saved="hotspots")
    assert not (tmp_path / "home").exists()
