"""The saved queries of cypher/saved/ on the example organisation in Neo4j, through the library and
the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem.model import Node, Provenance, Relationship, RelType
from graphmem.readonly import (
    CypherError,
    CypherResult,
    bind_saved,
    check_read_only,
    get_saved,
    query_parameters,
    run_saved,
    saved_queries,
)

REPO = Path(__file__).resolve().parents[1]
SAVED = saved_queries()

# Code keys of the example organisation (examples/make_example_org.py writes the same code for any --now).
APPEND_BATCH = "sym:services/ledger/internal/store/store.go::Store.AppendBatch"
HANDLER_POST = "sym:services/billing/api/handlers.py::InvoiceHandler.post"


@pytest.fixture(scope="module")
def acme(neo4j_schema: Any, example_org: tuple[Path, dict[str, Any]],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The example organisation ingested into a Neo4j project of its own, and its facts."""
    from graphmem.ingest import ingest
    from graphmem.stores.neo4j import Neo4jStore

    repo, facts = example_org
    store = Neo4jStore(neo4j_schema, f"acme-saved-{uuid.uuid4().hex[:8]}", database=os.environ.get("NEO4J_DATABASE"))
    ingest(repo, store, cache_dir=tmp_path_factory.mktemp("saved-cache"))
    yield store, facts
    store.drop_project()


def params_for(name: str, facts: dict[str, Any]) -> dict[str, Any]:
    """Parameters that make each saved query meaningful on the example organisation."""
    inc031 = facts["incidents"]["incident:INC-031"]
    return {
        "blast_radius": {"symbol": APPEND_BATCH},
        "code_changed_by_decision": {"decision": "adr:5"},
        "decision_chain": {"decision": facts["supersedes"][0][1]},
        "ownership_chain": {"symbol": HANDLER_POST},
        "module_experts": {"module": "services/billing/"},
        "team_incidents": {"team": "team:payments"},
        "person_commits": {"person": facts["incidents"]["incident:INC-042"]["fix_authors"][0]},
        "incident_timeline": {"incident": "incident:INC-042"},
        "service_recent_changes": {"service": "service:billing"},
        "neighbours": {"key": "service:billing"},
        "decisions_in_period": {"since": inc031["started_at"][:10], "until": facts["now"]},
    }.get(name, {})


def run(acme: tuple[Any, dict[str, Any]], name: str, **extra: Any) -> CypherResult:
    store, facts = acme
    return run_saved(store, name, {**params_for(name, facts), **extra})


def column(result: CypherResult, name: str) -> list[Any]:
    return [row[result.columns.index(name)] for row in result.rows]


# --- the files ------------------------------------------------------------------------------------


def test_there_are_enough_saved_queries_and_each_says_what_it_answers() -> None:
    assert len(SAVED) >= 14
    for name, saved in SAVED.items():
        assert saved.name == name and len(saved.description) > 40, name
        assert saved.summary.endswith("."), name
        assert all(p.description for p in saved.params), name


@pytest.mark.parametrize("name", sorted(SAVED))
def test_a_saved_query_is_read_only_filters_by_project_and_declares_its_parameters(name: str) -> None:
    saved = SAVED[name]
    check_read_only(saved.text)
    used = query_parameters(saved.text)
    assert "project" in used and "limit" in used, name
    assert used - {"project"} == {p.name for p in saved.params}, name
    assert "ORDER BY" in saved.text and "LIMIT $limit" in saved.text, name
    limit = next(p for p in saved.params if p.name == "limit")
    assert isinstance(limit.default, int) and not limit.required


def test_parameters_are_checked_and_converted() -> None:
    blast = get_saved("blast_radius")
    assert bind_saved(blast, {"symbol": APPEND_BATCH, "depth": "2"}) == \
        {"symbol": APPEND_BATCH, "depth": 2, "limit": 100, "as_of": None}
    with pytest.raises(CypherError, match=r"needs --param symbol=\.\.\.; it takes: symbol \(required\), depth"):
        bind_saved(blast, {})
    with pytest.raises(CypherError, match=r"has no parameter dept; it takes: symbol \(required\)"):
        bind_saved(blast, {"symbol": APPEND_BATCH, "dept": "2"})
    with pytest.raises(CypherError, match="depth must be a whole number"):
        bind_saved(blast, {"symbol": APPEND_BATCH, "depth": "deep"})
    # A key that looks like a number stays text; "null" clears an optional parameter.
    chain = get_saved("decision_chain")
    assert bind_saved(chain, {"decision": "5", "as_of": "null"})["decision"] == "5"
    assert bind_saved(chain, {"as_of": "null"})["as_of"] is None
    with pytest.raises(CypherError, match="no saved query 'nope'; there are: blast_radius"):
        get_saved("nope")


# --- on the example organisation ------------------------------------------------------------------


@pytest.mark.neo4j
@pytest.mark.parametrize("name", sorted(SAVED))
def test_every_saved_query_answers_on_the_example(acme: tuple[Any, dict[str, Any]], name: str) -> None:
    result = run(acme, name)
    assert result.rows, name
    assert not result.truncated and all(len(row) == len(result.columns) for row in result.rows)
    json.dumps(result.as_dict())


@pytest.mark.neo4j
def test_blast_radius_finds_callers_by_distance_with_services_and_owners(acme: tuple[Any, dict[str, Any]]) -> None:
    result = run(acme, "blast_radius")
    by_caller = {r["caller"]: r for r in result.records()}
    handle = by_caller["sym:services/ledger/internal/consumer/consumer.go::Consumer.Handle"]
    assert handle["distance"] == 1 and handle["services"] == ["service:ledger"]
    assert "team:payments" in handle["owners"]  # facts: ledger belongs to payments
    assert by_caller["sym:services/ledger/cmd/ledger/main.go::main"]["distance"] == 3
    assert column(result, "distance") == sorted(column(result, "distance"))
    nearer = run(acme, "blast_radius", depth="1")
    assert set(column(nearer, "distance")) == {1} and len(nearer.rows) < len(result.rows)


@pytest.mark.neo4j
def test_code_changed_by_a_decision_is_what_its_commits_modified(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    code = set(column(run(acme, "code_changed_by_decision"), "code"))
    for change in facts["adrs"]["adr:5"]["implemented_by"]:
        assert set(change["symbols"]) <= code and set(change["files"]) <= code


@pytest.mark.neo4j
def test_the_decision_chain_follows_supersedes(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    assert column(run(acme, "decision_chain"), "chain") == [list(pair) for pair in facts["supersedes"]]
    assert run(acme, "decision_chain", decision="adr:1").rows == []


@pytest.mark.neo4j
def test_the_ownership_chain_climbs_from_symbol_to_service(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    records = run(acme, "ownership_chain").records()
    assert [r["node"] for r in records if r["step"] == 0] == [HANDLER_POST]
    service = [r for r in records if r["kind"] == "service"]
    assert {r["node"] for r in service} == {"service:billing"}
    assert facts["services"]["service:billing"]["team"] in {r["owner"] for r in service}
    team = next(r for r in service if r["owner"] == "team:payments")
    assert set(team["members_or_teams"]) == set(facts["teams"]["team:payments"]["members"])


@pytest.mark.neo4j
def test_services_ranked_by_incidents_match_the_facts(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    expected = {s: sum(s in i["services"] for i in facts["incidents"].values()) for s in facts["services"]}
    result = run(acme, "services_by_incidents")
    assert dict(zip(column(result, "service"), column(result, "incidents"))) == expected
    assert column(result, "incidents") == sorted(column(result, "incidents"), reverse=True)


@pytest.mark.neo4j
def test_team_incidents_are_those_on_the_teams_services(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    for team, info in facts["teams"].items():
        expected = {key for key, i in facts["incidents"].items() if set(i["services"]) & set(info["services"])}
        assert set(column(run(acme, "team_incidents", team=team), "incident")) == expected, team


@pytest.mark.neo4j
def test_the_incident_timeline_has_cause_fix_and_people_in_order(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    inc = facts["incidents"]["incident:INC-042"]
    records = run(acme, "incident_timeline").records()
    events = {(r["event"], r["key"]) for r in records}
    assert {("caused by commit", k) for k in inc["caused_by"]} <= events
    assert {("fixed by commit", k) for k in inc["resolved_by"]} <= events
    assert ("refers to decision", inc["decisions"][0]) in events
    fixers = {p for r in records if r["event"] == "fixed by commit" for p in r["who"]}
    assert set(inc["fix_authors"]) <= fixers
    dated = [r["at"] for r in records if r["at"]]
    assert dated == sorted(dated)


@pytest.mark.neo4j
def test_the_dependency_graph_is_the_facts(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    result = run(acme, "service_dependencies")
    assert set(zip(column(result, "service"), column(result, "depends_on"))) == \
        {(d["from"], d["to"]) for d in facts["dependencies"]}
    billing = run(acme, "service_dependencies", service="service:billing")
    assert all("service:billing" in pair for pair in zip(column(billing, "service"), column(billing, "depends_on")))


@pytest.mark.neo4j
def test_people_modules_periods_and_recent_changes(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    inc042 = facts["incidents"]["incident:INC-042"]
    commits = run(acme, "person_commits")
    assert set(inc042["resolved_by"]) <= set(column(commits, "commit"))
    assert column(commits, "date") == sorted(column(commits, "date"), reverse=True)
    experts = run(acme, "module_experts")
    assert set(column(experts, "person")) <= set(facts["people"]) and inc042["fix_authors"][0] in column(experts, "person")
    period = run(acme, "decisions_in_period")
    assert "adr:5" in column(period, "decision")
    assert run(acme, "decisions_in_period", since="2000-01-01", until="2000-01-02").rows == []
    recent = run(acme, "service_recent_changes")
    assert set(inc042["resolved_by"]) <= set(column(recent, "commit"))


@pytest.mark.neo4j
def test_files_with_changes_and_incidents(acme: tuple[Any, dict[str, Any]]) -> None:
    _, facts = acme
    failing = facts["incidents"]["incident:INC-031"]["failing_symbol"]
    records = {r["file"]: r for r in run(acme, "files_changes_incidents", limit="100").records()}
    store_file = "file:" + failing.removeprefix("sym:").partition("::")[0]
    assert "incident:INC-031" in records[store_file]["incident_keys"]
    ranked = [(r["incidents"], r["changes"]) for r in records.values()]
    assert ranked == sorted(ranked, reverse=True)


@pytest.mark.neo4j
def test_co_changed_functions_and_hotspots(acme: tuple[Any, dict[str, Any]]) -> None:
    pairs = run(acme, "co_changed_functions").records()
    assert all(p["times"] >= 2 and p["times"] == len(p["commits"]) for p in pairs)
    one = pairs[0]["function"]
    assert all(p["function"] == one for p in run(acme, "co_changed_functions", symbol=one, min_commits="1").records())
    hot = run(acme, "hotspots").records()
    assert all(h["score"] == h["callers"] * h["changes"] > 0 for h in hot)


@pytest.mark.neo4j
def test_as_of_reads_the_graph_of_an_earlier_time(acme: tuple[Any, dict[str, Any]]) -> None:
    assert run(acme, "services_by_incidents", as_of="2000-01-01").rows == []  # nothing was known then


@pytest.mark.neo4j
def test_closed_facts_and_orphans(neo4j_store_factory: Callable[[str], Any]) -> None:
    """On a graph built for it: a call that no longer holds, a file no one owns."""
    store = neo4j_store_factory("saved-small")
    prov = Provenance("test.py", "test")
    then = "2025-01-01T00:00:00Z"
    nodes = [Node(k, k.rpartition(":")[2], prov, valid_from=then) for k in (
        "service:billing", "team:payments", "file:billing/a.py", "file:scripts/tool.py",
        "sym:billing/a.py::f", "sym:billing/a.py::g", "sym:billing/a.py::old")]
    rels = [Relationship("team:payments", RelType.OWNS, "service:billing", prov, valid_from=then),
            Relationship("service:billing", RelType.CONTAINS, "file:billing/a.py", prov, valid_from=then),
            Relationship("sym:billing/a.py::f", RelType.CALLS, "sym:billing/a.py::g", prov, valid_from=then),
            Relationship("sym:billing/a.py::old", RelType.CALLS, "sym:billing/a.py::g", prov, valid_from=then,
                         valid_to="2025-06-01T00:00:00Z")]
    store.upsert(nodes, rels)
    now = run_saved(store, "blast_radius", {"symbol": "sym:billing/a.py::g"})
    assert column(now, "caller") == ["sym:billing/a.py::f"]
    before = run_saved(store, "blast_radius", {"symbol": "sym:billing/a.py::g", "as_of": "2025-03-01"})
    assert column(before, "caller") == ["sym:billing/a.py::f", "sym:billing/a.py::old"]
    orphans = run_saved(store, "orphan_code", {}).records()
    assert [(o["file"], o["reason"]) for o in orphans] == [
        ("file:scripts/tool.py", "no owner"), ("file:billing/a.py", "owners never changed it")]


@pytest.mark.neo4j
def test_the_python_api_runs_raw_and_saved_queries(acme: tuple[Any, dict[str, Any]], tmp_path: Path) -> None:
    from graphmem.api import Graphmem
    from graphmem.config import Settings

    store, facts = acme
    gm = Graphmem(Settings(store="neo4j", home=tmp_path), store.project, store=store)
    chain = gm.cypher(saved="decision_chain")
    assert chain.records()[0]["chain"] == list(facts["supersedes"][0])
    raw = gm.cypher("MATCH (s:Service {project: $project}) WHERE s.key = $key RETURN s.key AS k", {"key": "service:ledger"})
    assert raw.rows == [["service:ledger"]]
    with pytest.raises(CypherError, match="not both"):
        gm.cypher("RETURN 1", saved="hotspots")


# --- the command line -----------------------------------------------------------------------------


def graphmem(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphmem.cli", "--home", str(home), *args], check=False,
                          capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.mark.neo4j
def test_the_cli_runs_saved_queries(acme: tuple[Any, dict[str, Any]], tmp_path: Path) -> None:
    store, _ = acme
    base = ("--store", "neo4j", "--project", store.project, "cypher")
    out = graphmem(*base, "--saved", "blast_radius", "--param", f"symbol={APPEND_BATCH}", "--param", "depth=1",
                   "--json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["columns"][:2] == ["caller", "distance"] and answer["truncated"] is False
    assert "sym:services/ledger/internal/consumer/consumer.go::Consumer.Handle" in [r[0] for r in answer["rows"]]
    table = graphmem(*base, "--saved", "decision_chain", home=tmp_path)
    assert table.returncode == 0 and "adr:5" in table.stdout and "replacements" in table.stdout
    assert "1 row in" in table.stderr
    raw = graphmem(*base, "MATCH (s:Service {project: $project}) RETURN s.key AS service ORDER BY service LIMIT $n",
                   "--param", "n=2", "--limit", "1", home=tmp_path)
    assert raw.returncode == 0 and "service:billing" in raw.stdout and "truncated at --limit 1" in raw.stderr


@pytest.mark.neo4j
@pytest.mark.parametrize("args, message", [
    (["MATCH (n) DETACH DELETE n"], "refused: DETACH DELETE writes to the graph"),
    (["--saved", "blast_radius"], "needs --param symbol=..."),
    (["--saved", "blast_radius", "--param", "symbol"], "--param takes NAME=VALUE"),
    (["--saved", "nope"], "no saved query 'nope'"),
    ([], "give a Cypher QUERY or --saved NAME"),
    (["RETURN 1", "--saved", "hotspots"], "give a Cypher QUERY or --saved NAME"),
    (["MATCH (n RETURN n"], "SyntaxError"),
])
def test_cli_errors_are_one_line(acme: tuple[Any, dict[str, Any]], tmp_path: Path, args: list[str],
                                 message: str) -> None:
    store, _ = acme
    out = graphmem("--store", "neo4j", "--project", store.project, "cypher", *args, home=tmp_path)
    assert out.returncode == 1 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_the_cli_lists_every_saved_query(tmp_path: Path) -> None:
    out = graphmem("cypher", "--list", home=tmp_path)
    assert out.returncode == 0, out.stderr
    for name, saved in SAVED.items():
        assert f"\n{name}\n" in f"\n{out.stdout}", name
        for param in saved.params:
            assert f"--param {param.name}:" in out.stdout
    listed = json.loads(graphmem("cypher", "--list", "--json", home=tmp_path).stdout)
    assert [q["name"] for q in listed["queries"]] == list(SAVED)
    assert listed["queries"][0]["params"][0]["required"] is True


def test_the_cli_says_raw_cypher_needs_neo4j(tmp_path: Path) -> None:
    out = graphmem("cypher", "RETURN 1", home=tmp_path)
    assert out.returncode == 1 and "needs the Neo4j store" in out.stderr and "scripts/neo4j-local start" in out.stderr
