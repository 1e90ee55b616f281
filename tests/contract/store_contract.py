"""The contract every GraphStore passes. A backend's test module subclasses ``StoreContract`` and
provides one fixture, ``make_store(project) -> GraphStore``; calling it again with the same project
must give a store that sees what earlier ones wrote (for the embedded store: reopened from disk).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from graphmem.errors import ModelError, StoreError
from graphmem.model import Chunk, Node, Provenance, Relationship, RelType
from graphmem.stores.base import GraphStore

MakeStore = Callable[[str], Any]

T0 = "2025-01-01T00:00:00.000000Z"
T1 = "2025-02-01T00:00:00.000000Z"
T2 = "2025-03-01T00:00:00.000000Z"


def prov(path: str, extractor: str = "code") -> Provenance:
    return Provenance(source_path=path, extractor=extractor, extractor_version="1", confidence=0.9)


def sample_graph() -> tuple[list[Node], list[Relationship], list[Chunk]]:
    """A small organisation: two services, their files and symbols, a team, a commit, an incident."""
    h, c, o, g, i = (prov("billing/handlers.py"), prov("billing/client.py"), prov("CODEOWNERS", "ownership"),
                     prov(".git", "git"), prov("docs/incidents/INC-042.md", "incident"))
    nodes = [
        Node("service:billing", "billing", o, {"language": "python"}),
        Node("service:gateway", "gateway", o, {"language": "typescript"}),
        Node("team:payments", "payments", o),
        Node("file:billing/handlers.py", "handlers.py", h, {"language": "python", "lines": 40}),
        Node("sym:billing/handlers.py::InvoiceHandler", "InvoiceHandler", h, {"symbol_kind": "class"}),
        Node("sym:billing/handlers.py::InvoiceHandler.post", "post", h,
             {"symbol_kind": "method", "signature": "def post(self, request)", "start_line": 10, "end_line": 20}),
        Node("file:billing/client.py", "client.py", c),
        Node("sym:billing/client.py::charge", "charge", c, {"symbol_kind": "function", "tags": ["io", "net"]}),
        Node("commit:" + "a" * 40, "Fix invoice rounding", g, {"authored_at": T1}),
        Node("incident:INC-042", "Invoices failed", i, {"severity": "sev2"}),
    ]
    rels = [
        Relationship("service:billing", RelType.CONTAINS, "file:billing/handlers.py", o),
        Relationship("service:billing", RelType.CONTAINS, "file:billing/client.py", o),
        Relationship("file:billing/handlers.py", RelType.CONTAINS, "sym:billing/handlers.py::InvoiceHandler", h),
        Relationship("file:billing/client.py", RelType.CONTAINS, "sym:billing/client.py::charge", c),
        Relationship("sym:billing/handlers.py::InvoiceHandler", RelType.CONTAINS,
                     "sym:billing/handlers.py::InvoiceHandler.post", h),
        Relationship("sym:billing/handlers.py::InvoiceHandler.post", RelType.CALLS, "sym:billing/client.py::charge",
                     h, {"resolution": "import", "lines": [12, 15]}),
        Relationship("team:payments", RelType.OWNS, "service:billing", o),
        Relationship("service:gateway", RelType.DEPENDS_ON, "service:billing", o),
        Relationship("commit:" + "a" * 40, RelType.MODIFIED, "sym:billing/client.py::charge", g),
        Relationship("incident:INC-042", RelType.AFFECTED, "service:billing", i),
        Relationship("incident:INC-042", RelType.CAUSED_BY, "commit:" + "a" * 40, i),
    ]
    chunks = [
        Chunk("sym:billing/handlers.py::InvoiceHandler.post", 0, "billing/handlers.py::InvoiceHandler.post\n"
              "def post(self, request)", "code", h, 10, 20),
        Chunk("sym:billing/client.py::charge", 0, "billing/client.py::charge\ndef charge(amount)", "code", c, 1, 9),
        Chunk("incident:INC-042", 0, "INC-042 Invoices failed: rounding bug", "incident", i),
    ]
    return nodes, rels, chunks


class StoreContract:
    """Behaviour shared by every store. Subclasses provide the ``make_store`` fixture."""

    @pytest.fixture
    def store(self, make_store: MakeStore) -> GraphStore:
        store = make_store("alpha")
        store.ensure_schema()
        return store

    @pytest.fixture
    def loaded(self, store: GraphStore) -> GraphStore:
        nodes, rels, chunks = sample_graph()
        store.upsert(nodes, rels, chunks, at=T0)
        return store

    # --- writing ---------------------------------------------------------------------------------

    def test_satisfies_protocol(self, store: GraphStore) -> None:
        assert isinstance(store, GraphStore)

    def test_upsert_and_read_back(self, store: GraphStore) -> None:
        nodes, rels, chunks = sample_graph()
        summary = store.upsert(nodes, rels, chunks, at=T0)
        assert (summary.nodes, summary.rels, summary.chunks, summary.missing_endpoints) == (10, 11, 3, 0)
        node = store.get_node("sym:billing/handlers.py::InvoiceHandler.post")
        assert node is not None
        assert node.kind.value == "symbol"
        assert node.props == {"symbol_kind": "method", "signature": "def post(self, request)",
                              "start_line": 10, "end_line": 20}
        assert node.provenance.source_path == "billing/handlers.py"
        assert node.provenance.extractor == "code"
        assert node.provenance.confidence == pytest.approx(0.9)
        assert node.provenance.ingested_at == T0
        assert node.valid_from == T0 and node.valid_to is None
        assert node.sources == ("billing/handlers.py",)
        assert store.get_node("sym:billing/client.py::charge").props["tags"] == ["io", "net"]
        call = [r for r in store.get_relationships(["sym:billing/client.py::charge"]) if r.type is RelType.CALLS]
        assert len(call) == 1 and call[0].props == {"resolution": "import", "lines": [12, 15]}
        assert call[0].provenance.confidence == pytest.approx(0.9)
        assert call[0].provenance.source_path == "billing/handlers.py"
        assert store.get_node("service:nope") is None

    def test_upserting_the_same_batch_twice_changes_no_count(self, store: GraphStore) -> None:
        nodes, rels, chunks = sample_graph()
        store.upsert(nodes, rels, chunks, at=T0)
        first = store.counts().as_dict()
        store.upsert(nodes, rels, chunks, at=T1)
        assert store.counts().as_dict() == first
        assert first["total_nodes"] == 10 and first["total_rels"] == 11 and first["chunks"] == 3
        # the second write did not restart validity
        assert store.get_node("service:billing").valid_from == T0
        assert len(store.chunk_ids()) == 3
        by_id = store.get_chunks_by_id([chunks[0].id, chunks[2].id, 12345])
        assert set(by_id) == {chunks[0].id, chunks[2].id}
        assert by_id[chunks[2].id].text == chunks[2].text and by_id[chunks[2].id].node_key == chunks[2].node_key

    def test_properties_merge_and_none_removes(self, loaded: GraphStore) -> None:
        key = "sym:billing/handlers.py::InvoiceHandler.post"
        loaded.upsert([Node(key, "post", prov("billing/handlers.py"), {"docstring": "Create.", "start_line": None})])
        props = loaded.get_node(key).props
        assert props["docstring"] == "Create." and "start_line" not in props and props["end_line"] == 20

    def test_relationship_to_a_missing_node_is_skipped_and_counted(self, loaded: GraphStore) -> None:
        before = loaded.counts().total_rels
        summary = loaded.upsert(rels=[
            Relationship("sym:billing/client.py::charge", RelType.CALLS, "sym:nowhere.py::f", prov("billing/client.py"))])
        assert summary.missing_endpoints == 1 and summary.rels == 0
        assert loaded.counts().total_rels == before

    def test_nodes_and_relationships_in_one_batch(self, store: GraphStore) -> None:
        p = prov("a.py")
        summary = store.upsert([Node("file:a.py", "a.py", p), Node("sym:a.py::f", "f", p)],
                               [Relationship("file:a.py", RelType.CONTAINS, "sym:a.py::f", p)])
        assert summary.rels == 1 and summary.missing_endpoints == 0

    @pytest.mark.parametrize("bad", [
        lambda p: ([Node("nonsense", "x", p)], []),
        lambda p: ([Node("file:a.py", "a", p, {"nested": {"no": 1}})], []),
        lambda p: ([Node("file:a.py", "a", p, {"mixed": [1, "a"]})], []),
        lambda p: ([Node("file:a.py", "a", p, {"key": "override"})], []),
        lambda p: ([], [Relationship("file:a.py", "DROP_DATABASE", "file:b.py", p)]),  # type: ignore[arg-type]
        lambda p: ([], [Relationship("team:x", RelType.CALLS, "file:b.py", p)]),
        lambda p: ([Node("file:a.py", "a", Provenance("", "code"))], []),
    ])
    def test_invalid_elements_are_refused_and_nothing_is_written(self, loaded: GraphStore, bad: Any) -> None:
        before = loaded.counts().as_dict()
        nodes, rels = bad(prov("a.py"))
        good = Node("file:zzz.py", "zzz", prov("zzz.py"))
        with pytest.raises(ModelError):
            loaded.upsert([good, *nodes], rels)
        assert loaded.counts().as_dict() == before
        assert loaded.get_node("file:zzz.py") is None

    # --- closing and removing --------------------------------------------------------------------

    def test_close_sources_closes_what_only_that_file_asserted(self, loaded: GraphStore) -> None:
        # a second source also asserts the service: it must stay open
        loaded.upsert([Node("service:billing", "billing", prov("graphmem.toml", "services"))], at=T0)
        summary = loaded.close_sources(["billing/client.py"], at=T2)
        assert summary.closed_nodes == 2  # the file and its function
        assert summary.removed_chunks == 1
        charge = loaded.get_node("sym:billing/client.py::charge")
        assert charge is not None and charge.valid_to == T2 and not charge.is_open
        # relationships of a closed node are closed too, whoever asserted them
        assert not [h for h in loaded.neighbors("commit:" + "a" * 40) if h.node.key.endswith("::charge")]
        assert loaded.get_node("service:billing").is_open
        counts = loaded.counts()
        assert counts.nodes["symbol"] == 2 and counts.nodes["file"] == 1
        assert counts.closed_nodes == 2
        # CONTAINS service->file and file->charge, CALLS post->charge, MODIFIED commit->charge
        assert counts.closed_rels == 4
        assert {c.node_key for c in loaded.iter_chunks()} == {
            "sym:billing/handlers.py::InvoiceHandler.post", "incident:INC-042"}
        # history stays queryable
        before = loaded.neighbors("commit:" + "a" * 40, as_of=T1)
        assert "sym:billing/client.py::charge" in {h.node.key for h in before}

    def test_closing_withdraws_one_source_of_a_shared_node(self, loaded: GraphStore) -> None:
        loaded.upsert([Node("service:billing", "billing", prov("graphmem.toml", "services"))], at=T0)
        assert set(loaded.get_node("service:billing").sources) == {"CODEOWNERS", "graphmem.toml"}
        loaded.close_sources(["CODEOWNERS"], at=T1)
        billing = loaded.get_node("service:billing")
        assert billing.is_open and billing.sources == ("graphmem.toml",)
        loaded.close_sources(["graphmem.toml"], at=T2)
        assert loaded.get_node("service:billing").valid_to == T2

    def test_withdrawing_with_keep_replaces_what_a_file_says(self, loaded: GraphStore) -> None:
        from graphmem.stores.base import Keep

        c = prov("billing/client.py")
        # the file now says: the file, a new function `refund`, and still `charge`; no longer CONTAINS charge
        now = [Node("file:billing/client.py", "client.py", c), Node("sym:billing/client.py::refund", "refund", c),
               Node("sym:billing/client.py::charge", "charge", c)]
        rels = [Relationship("file:billing/client.py", RelType.CONTAINS, "sym:billing/client.py::refund", c)]
        chunks = [Chunk("sym:billing/client.py::refund", 0, "refund", "code", c)]
        loaded.upsert(now, rels, chunks, at=T1)
        summary = loaded.close_sources(["billing/client.py"], at=T2, keep=Keep.of(now, rels, chunks))
        assert summary.closed_nodes == 0 and summary.closed_rels == 1 and summary.removed_chunks == 1
        charge = loaded.get_node("sym:billing/client.py::charge")
        assert charge.is_open and charge.valid_from == T0  # unchanged facts keep their history
        assert loaded.get_node("sym:billing/client.py::refund").is_open
        contains = {r.dst for r in loaded.get_relationships(["file:billing/client.py"])
                    if r.type is RelType.CONTAINS and r.src == "file:billing/client.py"}
        assert contains == {"sym:billing/client.py::refund"}
        assert [ch.text for ch in loaded.get_chunks(["sym:billing/client.py::refund"])] == ["refund"]
        assert loaded.get_chunks(["sym:billing/client.py::charge"]) == []
        # the calls into charge, asserted by another file, still hold
        assert any(h.node.key.endswith("InvoiceHandler.post") for h in loaded.neighbors("sym:billing/client.py::charge"))

    def test_relationships_to_closed_nodes_are_not_written(self, loaded: GraphStore) -> None:
        loaded.close_sources(["billing/client.py"], at=T1)
        summary = loaded.upsert(rels=[Relationship("team:payments", RelType.OWNS, "file:billing/client.py",
                                                   prov("CODEOWNERS", "ownership"))], at=T2)
        assert summary.rels == 0 and summary.missing_endpoints == 1

    def test_upsert_reopens_a_closed_node(self, loaded: GraphStore) -> None:
        loaded.close_sources(["billing/client.py"], at=T1)
        loaded.upsert([Node("sym:billing/client.py::charge", "charge", prov("billing/client.py"))], at=T2)
        charge = loaded.get_node("sym:billing/client.py::charge")
        assert charge.is_open and charge.valid_from == T2 and charge.sources == ("billing/client.py",)

    def test_remove_sources_deletes(self, loaded: GraphStore) -> None:
        summary = loaded.remove_sources(["billing/client.py"])
        assert summary.removed_nodes == 2 and summary.removed_chunks == 1
        assert summary.removed_rels == 4
        assert loaded.get_node("sym:billing/client.py::charge") is None
        counts = loaded.counts()
        assert counts.closed_nodes == 0 and counts.total_nodes == 8 and counts.total_rels == 7
        # The call into the deleted function went with it, though it came from another file: that
        # file's later withdrawal finds nothing of it left.
        again = loaded.remove_sources(["billing/handlers.py"])
        assert (again.removed_nodes, again.removed_rels) == (3, 3)  # the file's two, and its service's CONTAINS
        assert loaded.counts().total_rels == 4

    def test_set_sources_replaces_source_lists(self, loaded: GraphStore, make_store: MakeStore) -> None:
        call = ("sym:billing/handlers.py::InvoiceHandler.post", "CALLS", "sym:billing/client.py::charge")
        loaded.upsert([Node("service:billing", "billing", prov("docs/a.md"))], at=T1)
        assert loaded.get_node("service:billing").sources == ("CODEOWNERS", "docs/a.md")
        summary = loaded.set_sources({"service:billing": ["docs/a.md"], "service:nope": ["x.md"]},
                                     {call: ["billing/handlers.py", "docs/b.md"]})
        assert (summary.nodes, summary.rels) == (1, 1)
        again = make_store("alpha")  # persisted, not only in memory
        assert again.get_node("service:billing").sources == ("docs/a.md",)
        assert again.get_node("service:billing").props == {"language": "python"}
        [rel] = [r for r in again.get_relationships([call[0]]) if r.ident == call]
        assert set(rel.sources) == {"billing/handlers.py", "docs/b.md"}
        # Withdrawal follows the new lists: CODEOWNERS no longer holds the service up.
        loaded.close_sources(["CODEOWNERS", "docs/b.md"], at=T2)
        assert loaded.get_node("service:billing").is_open
        assert [r.sources for r in loaded.get_relationships([call[0]]) if r.ident == call] == [("billing/handlers.py",)]
        loaded.close_sources(["docs/a.md"], at=T2)
        assert not loaded.get_node("service:billing").is_open
        with pytest.raises(StoreError):
            loaded.set_sources({"team:payments": []})
        other = make_store("beta")
        assert other.set_sources({"sym:billing/client.py::charge": ["elsewhere.py"]}).nodes == 0
        assert loaded.get_node("sym:billing/client.py::charge").sources == ("billing/client.py",)

    def test_withdrawing_an_unknown_source_does_nothing(self, loaded: GraphStore) -> None:
        before = loaded.counts().as_dict()
        assert loaded.close_sources(["no/such/file.py"]).closed_nodes == 0
        assert loaded.counts().as_dict() == before

    # --- reading ---------------------------------------------------------------------------------

    def test_neighbors_by_depth_type_and_direction(self, loaded: GraphStore) -> None:
        one = loaded.neighbors("service:billing")
        assert {h.node.key for h in one} == {
            "file:billing/handlers.py", "file:billing/client.py", "team:payments", "service:gateway",
            "incident:INC-042"}
        assert all(h.depth == 1 for h in one)
        owners = loaded.neighbors("service:billing", rel_types=["OWNS"], direction="in")
        assert [h.node.key for h in owners] == ["team:payments"]
        assert loaded.neighbors("service:billing", rel_types=["OWNS"], direction="out") == []
        deep = {h.node.key: h for h in loaded.neighbors("team:payments", depth=3, direction="out")}
        assert deep["sym:billing/handlers.py::InvoiceHandler"].depth == 3
        path = deep["sym:billing/handlers.py::InvoiceHandler"].path
        assert path.nodes == ("team:payments", "service:billing", "file:billing/handlers.py",
                              "sym:billing/handlers.py::InvoiceHandler")
        assert [s.type for s in path.steps] == ["OWNS", "CONTAINS", "CONTAINS"]
        assert loaded.neighbors("service:billing", limit=2) and len(loaded.neighbors("service:billing", limit=2)) == 2
        with pytest.raises(ModelError):
            loaded.neighbors("service:billing", rel_types=["NOT_A_TYPE"])

    def test_expand_is_one_step_both_ways_over_open_elements(self, loaded: GraphStore) -> None:
        def ident(edges: list) -> set:
            return {(e.origin, e.step.src, e.step.type, e.step.dst, e.other) for e in edges}

        keys = ["service:billing", "incident:INC-042"]
        got = ident(loaded.expand(keys))
        assert got == ident(loaded.incident_edges(keys))
        assert ("service:billing", "team:payments", "OWNS", "service:billing", "team:payments") in got
        loaded.close_sources(["CODEOWNERS"])
        assert not any(e.other == "team:payments" for e in loaded.expand(["service:billing"]))
        assert any(e.other == "team:payments" for e in loaded.expand(["service:billing"], as_of=T0))

    def test_paths_between_keys(self, loaded: GraphStore) -> None:
        paths = loaded.paths("incident:INC-042", "sym:billing/client.py::charge", max_depth=4)
        assert [p.nodes for p in paths] == [
            ("incident:INC-042", "commit:" + "a" * 40, "sym:billing/client.py::charge"),
        ]
        assert paths[0].describe() == (
            "incident:INC-042 -CAUSED_BY-> commit:" + "a" * 40 + " -MODIFIED-> sym:billing/client.py::charge")
        both = loaded.paths("team:payments", "sym:billing/client.py::charge", max_depth=4)
        assert [p.nodes for p in both] == [
            ("team:payments", "service:billing", "file:billing/client.py", "sym:billing/client.py::charge")]
        # a diamond has two shortest paths, reported in node order, and limit cuts them
        p = prov("d.py")
        loaded.upsert([Node(f"sym:d.py::{n}", n, p) for n in "abcd"],
                      [Relationship(f"sym:d.py::{s}", RelType.CALLS, f"sym:d.py::{t}", p)
                       for s, t in ("ab", "ac", "bd", "cd")])
        two = loaded.paths("sym:d.py::a", "sym:d.py::d")
        assert [p.nodes[1] for p in two] == ["sym:d.py::b", "sym:d.py::c"]
        assert len(loaded.paths("sym:d.py::a", "sym:d.py::d", limit=1)) == 1
        assert loaded.paths("sym:d.py::d", "sym:d.py::a", direction="out") == []
        assert len(loaded.paths("sym:d.py::d", "sym:d.py::a", direction="in")) == 2
        assert loaded.paths("team:payments", "sym:billing/client.py::charge", max_depth=2) == []
        assert loaded.paths("team:payments", "service:nope") == []

    def test_subgraph_around_seeds(self, loaded: GraphStore) -> None:
        sub = loaded.subgraph(["incident:INC-042"], depth=1)
        assert set(sub.nodes) == {"incident:INC-042", "service:billing", "commit:" + "a" * 40}
        assert {r.ident for r in sub.rels} == {
            ("incident:INC-042", "AFFECTED", "service:billing"),
            ("incident:INC-042", "CAUSED_BY", "commit:" + "a" * 40),
        }
        typed = loaded.subgraph(["service:billing"], depth=2, rel_types=["CONTAINS"])
        assert "sym:billing/handlers.py::InvoiceHandler" in typed.nodes
        assert all(r.type is RelType.CONTAINS for r in typed.rels)

    def test_iteration_and_counts(self, loaded: GraphStore) -> None:
        from graphmem.model import NodeKind

        files = [n.key for n in loaded.iter_nodes([NodeKind.FILE])]
        assert files == ["file:billing/client.py", "file:billing/handlers.py"]
        assert len(list(loaded.iter_nodes())) == 10
        counts = loaded.counts()
        assert counts.nodes == {"service": 2, "team": 1, "file": 2, "symbol": 3, "commit": 1, "incident": 1}
        assert counts.rels["CONTAINS"] == 5 and counts.total_rels == 11 and counts.chunks == 3
        chunks = loaded.get_chunks(["sym:billing/client.py::charge"])
        assert [c.text for c in chunks] == ["billing/client.py::charge\ndef charge(amount)"]
        assert chunks[0].start_line == 1 and chunks[0].end_line == 9 and chunks[0].provenance.extractor == "code"
        assert loaded.chunk_ids() == {c.id for c in loaded.iter_chunks()}

    def test_to_networkx_holds_the_same_graph(self, loaded: GraphStore) -> None:
        from graphmem.stores.base import to_networkx

        loaded.close_sources(["docs/incidents/INC-042.md"], at=T1)
        graph = to_networkx(loaded)
        assert set(graph) == {n.key for n in loaded.iter_nodes()} and "incident:INC-042" not in graph
        assert sorted((u, k, v) for u, v, k in graph.edges(keys=True)) == [r.ident for r in loaded.iter_rels()]
        assert graph.nodes["team:payments"]["kind"] == "team"
        call = graph.edges["sym:billing/handlers.py::InvoiceHandler.post", "sym:billing/client.py::charge", "CALLS"]
        assert call["rel"].props == {"resolution": "import", "lines": [12, 15]}
        everything = to_networkx(loaded, include_closed=True)
        assert everything.has_edge("incident:INC-042", "commit:" + "a" * 40, key="CAUSED_BY")

    def test_has_nodes_follows_open_nodes(self, store: GraphStore) -> None:
        assert not store.has_nodes()
        nodes, rels, chunks = sample_graph()
        store.upsert(nodes, rels, chunks, at=T0)
        assert store.has_nodes()
        store.close_sources({n.provenance.source_path for n in nodes}, at=T1)
        assert store.counts().total_nodes == 0 and not store.has_nodes()
        store.upsert(nodes[:1], [], [], at=T2)
        assert store.has_nodes()

    def test_meta_and_source_states(self, store: GraphStore) -> None:
        assert store.get_meta("last_commit") is None
        store.set_meta({"last_commit": "b" * 40, "other": "x"})
        store.set_meta({"other": None})
        assert store.get_meta("last_commit") == "b" * 40 and store.get_meta("other") is None
        store.set_source_states({"a.py": "h1", "b.py": "h2"})
        store.set_source_states({"a.py": None, "b.py": "h3"})
        assert store.source_states() == {"b.py": "h3"}

    def test_written_data_is_seen_by_a_new_store(self, loaded: GraphStore, make_store: MakeStore) -> None:
        loaded.set_meta({"last_commit": "c" * 40})
        again = make_store("alpha")
        assert again.counts().as_dict() == loaded.counts().as_dict()
        assert again.get_node("incident:INC-042").props == {"severity": "sev2"}
        assert again.get_meta("last_commit") == "c" * 40

    # --- projects --------------------------------------------------------------------------------

    def test_projects_never_see_each_other(self, loaded: GraphStore, make_store: MakeStore) -> None:
        other = make_store("beta")
        assert other.get_node("service:billing") is None
        assert other.get_nodes(["service:billing", "team:payments"]) == {}
        assert other.neighbors("service:billing") == []
        assert other.paths("team:payments", "service:billing") == []
        assert other.subgraph(["service:billing"]).nodes == {}
        assert other.get_relationships(["service:billing"]) == []
        assert other.incident_edges(["service:billing"]) == [] and other.expand(["service:billing"]) == []
        assert list(other.iter_nodes()) == [] and list(other.iter_chunks()) == []
        assert other.chunk_ids() == set() and other.get_chunks(["incident:INC-042"]) == []
        assert other.get_chunks_by_id(loaded.chunk_ids()) == {}
        assert other.counts().total_nodes == 0 and other.counts().chunks == 0
        loaded.set_meta({"last_commit": "d" * 40})
        loaded.set_source_states({"a.py": "h"})
        assert other.get_meta("last_commit") is None and other.source_states() == {}
        # the same keys in the other project are separate nodes
        other.upsert([Node("service:billing", "billing-b", prov("x.toml"))])
        assert loaded.get_node("service:billing").name == "billing"
        assert other.neighbors("service:billing") == []
        other.close_sources(["CODEOWNERS", "billing/client.py"])
        other.remove_sources(["billing/handlers.py"])
        assert loaded.get_node("service:billing").is_open
        assert loaded.get_node("sym:billing/handlers.py::InvoiceHandler") is not None
        other.drop_project()
        assert loaded.counts().total_nodes == 10
