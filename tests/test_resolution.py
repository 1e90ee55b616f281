"""Entity resolution (graphmem/resolution.py): the labelled name fixture, then merges, links and
undo on both stores."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from graphmem.errors import ModelError
from graphmem.model import Node, NodeKind, Provenance, Relationship, RelType
from graphmem.resolution import (
    EMBED_THRESHOLD,
    cluster_names,
    merge_history,
    resolve_entities,
    undo_last,
    unmerge,
)
from graphmem.retrieval.graph import Catalog
from tests.conftest import REPO

FIXTURE = json.loads((REPO / "tests" / "fixtures" / "entity_duplicates.json").read_text())
NAMES = [n for cluster in FIXTURE["clusters"] for n in cluster]
CURVE = (None, 0.96, 0.94, 0.92, 0.90, 0.88, 0.87, 0.86, 0.84, 0.82, 0.80, 0.78)


def _pairs(clusters: list[list[str]] | list[set[str]]) -> set[frozenset[str]]:
    return {frozenset(p) for c in clusters for p in itertools.combinations(sorted(c), 2)}


TRUE_PAIRS = _pairs(FIXTURE["clusters"])


def _score(clusters: list[set[str]]) -> tuple[float, float]:
    found = _pairs(clusters)
    hits = len(found & TRUE_PAIRS)
    return hits / max(len(found), 1), hits / len(TRUE_PAIRS)


# --- the labelled fixture -----------------------------------------------------------------------


def test_fixture_is_large_and_consistent() -> None:
    assert len(NAMES) >= 150 and len(set(NAMES)) == len(NAMES)
    assert sum(len(c) > 1 for c in FIXTURE["clusters"]) >= 50
    where = {n: i for i, c in enumerate(FIXTURE["clusters"]) for n in c}
    for a, b in FIXTURE["hard_negatives"]:  # every hard negative names two labelled, different things
        assert where[a] != where[b], (a, b)


def test_precision_and_recall_on_the_labelled_names(embedder: Any) -> None:
    rules = _score(cluster_names(NAMES))
    full = _score(cluster_names(NAMES, embedder=embedder))
    print(f"\nrules only: precision {rules[0]:.3f} recall {rules[1]:.3f}")
    print(f"with embeddings (threshold {EMBED_THRESHOLD}): precision {full[0]:.3f} recall {full[1]:.3f}")
    assert full[0] >= 0.9 and full[1] >= 0.8
    assert rules[0] >= 0.95  # the rule stages alone are the precise part
    assert full[1] > rules[1]  # and embeddings add what no rule spells ("Python language")


def test_embedding_threshold_curve(embedder: Any) -> None:
    """The table behind EMBED_THRESHOLD: the chosen threshold keeps the best recall of the curve
    without the precision lost below it."""
    rows = {t: _score(cluster_names(NAMES, embedder=embedder if t else None, threshold=t)) for t in CURVE}
    print("\nthreshold  precision  recall")
    for t, (p, r) in rows.items():
        print(f"{'rules' if t is None else t:>9}  {p:9.3f}  {r:6.3f}")
    chosen = rows[EMBED_THRESHOLD]
    assert chosen[0] >= 0.95
    assert chosen[1] >= max(r for t, (_, r) in rows.items() if t is None or t > EMBED_THRESHOLD)
    assert min(p for t, (p, _) in rows.items() if t is not None and t < 0.80) < chosen[0]


@pytest.mark.parametrize(("same", "names"), [
    (True, ["PostgreSQL", "Postgres", "psql"]),
    (True, ["Kubernetes", "k8s", "Kubernets"]),
    (True, ["Amazon Web Services", "AWS"]),
    (True, ["auth-service", "auth service", "AuthService", "auth-svc"]),
    (True, ["John Smith", "Smith, John", "J. Smith"]),
    (True, ["Robert Johnson", "Bob Johnson"]),
    (False, ["Python 2", "Python 3"]),
    (False, ["Python", "Python 3"]),
    (False, ["Lothair I", "Lothair II"]),
    (False, ["John Smith", "Jane Smith"]),
    (False, ["Maria Garcia", "Mario Garcia"]),
    (False, ["Angular", "AngularJS"]),
    (False, ["billing service", "billing worker"]),
    (False, ["Germany", "German"]),
    (False, ["European Union", "European Union law"]),
    (False, ["World Trade Organization", "World Tourism Organization"]),
])
def test_rules_and_guards(same: bool, names: list[str]) -> None:
    groups = cluster_names(names)
    assert (len(groups) == 1) is same, groups


def test_an_initial_that_fits_two_people_stays_alone() -> None:
    groups = cluster_names(["John Smith", "Jane Smith", "J. Smith"])
    assert {"J. Smith"} in groups and len(groups) == 3


# --- the store ----------------------------------------------------------------------------------

T0 = "2025-01-01T00:00:00.000000Z"
T1 = "2025-02-01T00:00:00.000000Z"


def _prov(path: str, extractor: str = "llm") -> Provenance:
    return Provenance(source_path=path, extractor=extractor, extractor_version="1", confidence=0.8)


def _org_graph() -> tuple[list[Node], list[Relationship]]:
    """Three documents naming PostgreSQL three ways, the billing service two ways, and a class."""
    own = _prov("CODEOWNERS", "ownership")
    code = _prov("billing/handlers.py", "code")
    a, b, c = _prov("docs/a.md"), _prov("docs/b.md"), _prov("docs/c.md")
    nodes = [
        Node("service:billing", "billing", own),
        Node("sym:billing/handlers.py::InvoiceHandler", "InvoiceHandler", code),
        Node("doc:docs/a.md", "a", a), Node("doc:docs/b.md", "b", b), Node("doc:docs/c.md", "c", c),
        Node("entity:technology:postgresql", "PostgreSQL", a, {"entity_type": "technology"}),
        Node("entity:concept:postgres", "Postgres", b, {"entity_type": "concept"}),
        Node("entity:technology:psql", "psql", c, {"entity_type": "technology"}),
        Node("entity:service:billing service", "billing service", c, {"entity_type": "service"}),
        Node("entity:concept:invoicehandler", "InvoiceHandler", b, {"entity_type": "concept"}),
        Node("entity:person:ana lopez", "Ana Lopez", a, {"entity_type": "person"}),
        Node("entity:organization:ana lopez", "Ana Lopez", b, {"entity_type": "organization"}),
    ]
    rels = [
        Relationship("service:billing", RelType.CONTAINS, "sym:billing/handlers.py::InvoiceHandler", code),
        Relationship("doc:docs/a.md", RelType.MENTIONS, "entity:technology:postgresql", a),
        Relationship("doc:docs/b.md", RelType.MENTIONS, "entity:concept:postgres", b, {"span": "Postgres"}),
        Relationship("doc:docs/c.md", RelType.MENTIONS, "entity:technology:psql", c),
        Relationship("doc:docs/c.md", RelType.MENTIONS, "entity:service:billing service", c),
        Relationship("doc:docs/b.md", RelType.MENTIONS, "entity:concept:invoicehandler", b),
        Relationship("entity:concept:postgres", RelType.RELATED_TO, "entity:service:billing service", b,
                     {"predicate": "stores invoices for"}),
        Relationship("entity:technology:psql", RelType.RELATED_TO, "entity:concept:postgres", c,
                     {"predicate": "is the client of"}),
        Relationship("doc:docs/a.md", RelType.MENTIONS, "entity:person:ana lopez", a),
        Relationship("doc:docs/b.md", RelType.MENTIONS, "entity:organization:ana lopez", b),
    ]
    return nodes, rels


def _snapshot(store: Any) -> tuple[dict[str, tuple], set[tuple]]:
    """Open nodes and relationships, as comparable values."""
    nodes = {n.key: (n.name, json.dumps(n.props, sort_keys=True), n.sources, n.valid_from)
             for n in store.iter_nodes()}
    rels = {(r.src, r.type.value, r.dst, json.dumps(r.props, sort_keys=True), r.sources)
            for r in store.get_relationships(list(nodes))}
    return nodes, rels


@pytest.fixture(params=["embedded", "neo4j"])
def make_store(request: pytest.FixtureRequest) -> Callable[[str], Any]:
    factory = "embedded_store_factory" if request.param == "embedded" else "neo4j_store_factory"
    return request.getfixturevalue(factory)


@pytest.fixture
def org(make_store: Callable[[str], Any]) -> Any:
    store = make_store("resolve")
    store.ensure_schema()
    nodes, rels = _org_graph()
    store.upsert(nodes, rels, at=T0)
    return store


def test_merge_keeps_aliases_sources_and_relationships(org: Any, make_store: Callable[[str], Any]) -> None:
    other = make_store("bystander")  # the same keys in another project: untouched throughout
    nodes, rels = _org_graph()
    other.upsert(nodes, rels, at=T0)
    before_other = _snapshot(other)

    report = resolve_entities(org)
    assert report.merges == 2 and report.merged_nodes == 3 and report.links == 1
    pg = org.get_node("entity:technology:postgresql")  # typed and most connected: the survivor
    assert set(pg.props["aliases"]) == {"Postgres", "psql"}
    assert set(pg.props["merged_from"]) == {"entity:concept:postgres", "entity:technology:psql"}
    assert set(pg.sources) == {"docs/a.md", "docs/b.md", "docs/c.md"}
    for key in ("entity:concept:postgres", "entity:technology:psql", "entity:service:billing service"):
        merged = org.get_node(key)
        assert merged is not None and not merged.is_open  # closed, not deleted: history stays
    open_keys = {n.key for n in org.iter_nodes()}
    assert "entity:concept:postgres" not in open_keys and "entity:technology:postgresql" in open_keys
    # Relationships moved onto the survivor, with their properties and sources; between two
    # spellings of the same thing they disappear.
    rels_now = {(r.src, r.type.value, r.dst): r for r in org.get_relationships(sorted(open_keys))}
    assert rels_now[("doc:docs/b.md", "MENTIONS", "entity:technology:postgresql")].props == {"span": "Postgres"}
    assert ("doc:docs/c.md", "MENTIONS", "entity:technology:postgresql") in rels_now
    # "billing service" (typed a service) became the service itself.
    stores_for = rels_now[("entity:technology:postgresql", "RELATED_TO", "service:billing")]
    assert stores_for.props["predicate"] == "stores invoices for" and stores_for.sources == ("docs/b.md",)
    assert ("doc:docs/c.md", "MENTIONS", "service:billing") in rels_now
    assert org.get_node("service:billing").props["aliases"] == ["billing service"]
    assert not any(src == dst for src, _, dst in rels_now)
    # An untyped entity naming one class is linked to it, not merged.
    link = rels_now[("entity:concept:invoicehandler", "RELATED_TO", "sym:billing/handlers.py::InvoiceHandler")]
    assert link.props["predicate"] == "names" and link.provenance.extractor == "resolution"
    # A person and an organisation of the same name stay two nodes.
    assert {"entity:person:ana lopez", "entity:organization:ana lopez"} <= open_keys
    # Questions before the merge still see the old spelling.
    old = org.get_relationships(["entity:concept:postgres"], as_of=T1)
    assert [r.src for r in old if r.type is RelType.MENTIONS] == ["doc:docs/b.md"]
    # Graph retrieval names the survivor by its aliases.
    assert Catalog.build(org).by_name[("psql",)] == {"entity:technology:postgresql"}
    assert _snapshot(other) == before_other
    assert merge_history(other) == []
    # Running again changes nothing.
    again = resolve_entities(org)
    assert again.merges == 0 and again.links == 0


def test_unmerge_restores_nodes_and_relationships(org: Any, make_store: Callable[[str], Any]) -> None:
    before = _snapshot(org)
    report = resolve_entities(org)
    assert _snapshot(org) != before
    history = merge_history(org)
    assert [h["id"] for h in history] == report.merge_ids
    other = make_store("bystander")
    with pytest.raises(ModelError):
        unmerge(other, report.merge_ids[0])  # a merge of another project is not there
    for merge_id in reversed(report.merge_ids):
        assert unmerge(org, merge_id) == [merge_id]
    assert _snapshot(org) == before
    assert merge_history(org) == [] and undo_last(org) == []
    # An undone merge is not redone: the pairs are kept apart.
    assert resolve_entities(org).merges == 0


def test_undo_cascades_to_later_merges_of_the_same_node(org: Any) -> None:
    before = _snapshot(org)
    first = resolve_entities(org, link=False)
    # A later document spells PostgreSQL yet another way; the next run merges it into the survivor.
    d = _prov("docs/d.md")
    org.upsert([Node("doc:docs/d.md", "d", d), Node("entity:concept:postgre sql", "Postgre SQL", d)],
               [Relationship("doc:docs/d.md", RelType.MENTIONS, "entity:concept:postgre sql", d)], at=T1)
    mid = _snapshot(org)
    second = resolve_entities(org, link=False)
    assert second.merges == 1
    assert "Postgre SQL" in org.get_node("entity:technology:postgresql").props["aliases"]
    assert undo_last(org) == second.merge_ids
    assert _snapshot(org) == mid
    resolve_entities(org, link=False)  # the undone pair stays apart; nothing else to merge
    assert org.get_node("entity:concept:postgre sql").is_open
    pg_merge = next(h["id"] for h in merge_history(org) if h["survivor"] == "entity:technology:postgresql")
    assert unmerge(org, pg_merge) == [pg_merge]
    assert len(merge_history(org)) == len(first.merge_ids) - 1
    for h in reversed(merge_history(org)):
        unmerge(org, h["id"])
    nodes, rels = _snapshot(org)
    assert {k: v for k, v in nodes.items() if "docs/d.md" not in v[2]} == before[0]
    assert all(r in rels for r in before[1])


def test_entities_only_projects_resolve_without_org_nodes(make_store: Callable[[str], Any]) -> None:
    store = make_store("prose")
    p = _prov("dataset:x/1", "passages-rules")
    store.upsert([Node("doc:1", "One", p), Node("entity:concept:international monetary fund", "International "
                                                "Monetary Fund", p), Node("entity:concept:imf", "IMF", p),
                  Node("entity:concept:rit", "RIT", p), Node("entity:concept:religion in turkey",
                                                              "Religion in Turkey", _prov("dataset:x/2"))],
                 [Relationship("doc:1", RelType.MENTIONS, k, p) for k in
                  ("entity:concept:international monetary fund", "entity:concept:imf", "entity:concept:rit")])
    report = resolve_entities(store)
    # An acronym joins the expansion a source spells out with it, not one it merely fits.
    assert report.by_stage == {"acronym": 1} and report.merged_nodes == 1
    assert {n.key for n in store.iter_nodes([NodeKind.ENTITY])} == {
        "entity:concept:international monetary fund", "entity:concept:rit", "entity:concept:religion in turkey"}
