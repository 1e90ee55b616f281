"""The answer plays the role the question's main clause gives it, not a neighbour's: the dependent
of the incident's service, not that service; the fix's author, not the cause's; the owner of the
calling service, not of the called one; a member of the owning team, not the team."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from graphmem.model import Node, Provenance, Relationship, RelType
from graphmem.retrieval.config import WalkConfig
from graphmem.retrieval.graph import GraphRetriever
from graphmem.retrieval.question import parse_question
from graphmem.stores.embedded import EmbeddedStore

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
CAUSE, FIX = "commit:" + "a1" * 20, "commit:" + "b2" * 20


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStore]:
    """Orders (hit by INC-7) is used by checkout and web; orders itself uses stock and mail, and
    has more relationships than any of them, so a walk from INC-7 reaches it first and most. Kim
    owns orders' files."""
    st = EmbeddedStore(tmp_path_factory.mktemp("roles"), "roles")
    prov = Provenance("ops", "test")
    services = ("orders", "checkout", "web", "stock", "mail")
    nodes = [Node(f"service:{s}", s, prov) for s in services]
    nodes += [Node(f"team:{t}", t, prov) for t in ("fulfilment", "storefront", "warehouse")]
    nodes += [Node("incident:INC-7", "Orders stopped accepting payments", prov,
                   {"started_at": "2026-05-20T10:00:00Z"}),
              Node(CAUSE, "Switch the orders queue to batches", prov, {"authored_at": "2026-05-19T09:00:00Z"}),
              Node(FIX, "Revert batching of the orders queue", prov, {"authored_at": "2026-05-20T12:00:00Z"}),
              Node("person:ivy@example.dev", "Ivy", prov), Node("person:oz@example.dev", "Oz", prov),
              Node("person:kim@example.dev", "Kim", prov)]
    files = [f"file:orders/{name}.py" for name in ("queue", "batch", "retry")]
    nodes += [Node(f, f[5:], prov) for f in files]
    rel = [("service:checkout", RelType.DEPENDS_ON, "service:orders"),
           ("service:web", RelType.DEPENDS_ON, "service:checkout"),
           ("service:orders", RelType.DEPENDS_ON, "service:stock"),
           ("service:orders", RelType.DEPENDS_ON, "service:mail"),
           ("team:fulfilment", RelType.OWNS, "service:orders"),
           ("team:storefront", RelType.OWNS, "service:checkout"),
           ("team:storefront", RelType.OWNS, "service:web"),
           ("team:warehouse", RelType.OWNS, "service:stock"),
           ("incident:INC-7", RelType.AFFECTED, "service:orders"),
           ("incident:INC-7", RelType.CAUSED_BY, CAUSE),
           ("incident:INC-7", RelType.RESOLVED_BY, FIX),
           ("person:ivy@example.dev", RelType.AUTHORED, CAUSE),
           ("person:oz@example.dev", RelType.AUTHORED, FIX),
           ("person:kim@example.dev", RelType.MEMBER_OF, "team:fulfilment"),
           ("person:oz@example.dev", RelType.MEMBER_OF, "team:storefront")]
    for f in files:
        rel += [("service:orders", RelType.CONTAINS, f), ("team:fulfilment", RelType.OWNS, f),
                ("person:kim@example.dev", RelType.OWNS, f)]
    st.upsert(nodes, [Relationship(s, t, d, prov) for s, t, d in rel], [])
    yield st
    st.close()


def first(store: EmbeddedStore, text: str, config: WalkConfig | None = None) -> str:
    hits = GraphRetriever(store, walk_config=config).retrieve(parse_question(text, NOW), k=5).hits
    return hits[0].key


@pytest.mark.parametrize("text, answer", [
    ("Which services depend on the service that INC-7 hit?", "service:checkout"),
    ("Which services depend on a service that had an incident in the last month?", "service:checkout"),
    ("Which services call orders?", "service:checkout"),  # what it names stands at the other end
    ("Who fixed INC-7?", "person:oz@example.dev"),
    ("Who fixed the incident that hit orders?", "person:oz@example.dev"),
    ("Which team owns the service that calls the service INC-7 hit?", "team:storefront"),
    ("Who owns the service that INC-7 hit?", "team:fulfilment"),  # not Kim, who owns its files
    ("Who is on the team that owns orders?", "person:kim@example.dev"),  # a member, not the team
])
def test_the_answer_plays_the_role_the_main_clause_asks_for(store: EmbeddedStore, text: str, answer: str) -> None:
    assert first(store, text) == answer


def test_the_role_order_is_a_setting(store: EmbeddedStore) -> None:
    """Without it the walk's PageRank puts the incident's own service, one step from INC-7, first."""
    text = "Which services depend on the service that INC-7 hit?"
    assert first(store, text, WalkConfig(role_order=False)) == "service:orders"
    assert first(store, text, WalkConfig()) == "service:checkout"


def test_a_service_named_beside_a_thing_no_node_kind_is_asked_about_not_the_answer(store: EmbeddedStore) -> None:
    """"Which message broker does orders use?" asks for a broker, which no node kind is: orders is
    what it asks about (it leads the walk without the rule), and "broker" names no breakage."""
    text = "Which message broker does orders use?"
    q = parse_question(text, NOW)
    assert q.asks_other_thing and not q.rel_types
    assert GraphRetriever(store).retrieve(q, k=5).hits[0].key != "service:orders"
    q.asks_other_thing = False
    assert GraphRetriever(store).retrieve(q, k=5).hits[0].key == "service:orders"
    assert parse_question("What broke orders?", NOW).rel_types  # a breakage still reads as one


def test_a_callers_caller_comes_before_what_merely_lies_next_to_the_named_function(tmp_path) -> None:
    """``merge`` is called by ``build`` alone, which ``send`` and ``stream`` call; ``merge`` itself
    calls ``parse``, which many functions call, so PageRank from ``merge`` reaches ``parse`` more
    than ``build``'s callers. Asked who calls ``merge``, ``build`` answers, then those that reach
    ``merge`` through it; ``parse`` (a callee, the wrong end) comes after them."""
    st = EmbeddedStore(tmp_path, "calls")
    prov = Provenance("client.py", "test")
    names = ["merge", "build", "send", "stream", "parse", *(f"helper_{i}" for i in range(6))]
    nodes = [Node(f"sym:client.py::{n}", n, prov) for n in names]
    calls = [("build", "merge"), ("send", "build"), ("stream", "build"), ("merge", "parse"),
             *((f"helper_{i}", "parse") for i in range(6))]
    rels = [Relationship(f"sym:client.py::{a}", RelType.CALLS, f"sym:client.py::{b}", prov) for a, b in calls]
    st.upsert(nodes, rels, [])
    try:
        hits = GraphRetriever(st).retrieve(parse_question("Which functions call merge?", NOW), k=6).hits
        keys = [h.key.rsplit("::", 1)[1] for h in hits]
        assert keys[0] == "build"
        assert set(keys[1:3]) == {"send", "stream"}
        assert "parse" not in keys[:3]
    finally:
        st.close()


def test_an_inheritance_question_answers_with_the_end_it_asks_for(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"Which class does FileResponse inherit from" asks for its base, "which classes extend
    Response" for its subclasses; neither answers with the class it names, nor with the other end."""
    st = EmbeddedStore(tmp_path, "classes")
    prov = Provenance("web/responses.py", "test")
    base, file_, redirect, small = (f"sym:web/responses.py::{n}" for n in
                                    ("Response", "FileResponse", "RedirectResponse", "SmallFileResponse"))
    nodes = [Node("file:web/responses.py", "web/responses.py", prov)]
    nodes += [Node(k, k.rsplit("::", 1)[1], prov, {"symbol_kind": "class", "qualname": k.rsplit("::", 1)[1]})
              for k in (base, file_, redirect, small)]
    rels = [Relationship("file:web/responses.py", RelType.CONTAINS, k, prov) for k in (base, file_, redirect, small)]
    rels += [Relationship(file_, RelType.INHERITS, base, prov), Relationship(redirect, RelType.INHERITS, base, prov),
             Relationship(small, RelType.INHERITS, file_, prov)]
    st.upsert(nodes, rels, [])
    graph = GraphRetriever(st)

    def hits(text: str) -> list[str]:
        return [h.key for h in graph.retrieve(parse_question(text)).hits]

    for text in ("Which class does FileResponse inherit from?", "What is the base class of FileResponse?",
                 "What does FileResponse extend?"):
        assert hits(text)[0] == base, (text, hits(text))
    for text in ("Which classes extend Response?", "What are the subclasses of Response?"):
        assert set(hits(text)[:2]) == {file_, redirect}, (text, hits(text))
    st.close()


def test_a_change_to_a_method_is_a_change_to_its_class(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"Which commits changed StaticFiles": a commit that changed only one of its methods changed
    it, and ranks above a commit that changed a neighbouring class of the same file."""
    from graphmem.retrieval.config import LinkConfig

    st = EmbeddedStore(tmp_path, "members")
    prov = Provenance("web/static.py", "test")
    git = Provenance("git", "test")
    cls, method, other, other_method = ("sym:web/static.py::StaticFiles", "sym:web/static.py::StaticFiles.lookup_path",
                                        "sym:web/static.py::Mount", "sym:web/static.py::Mount.url")
    own, neighbour = "commit:" + "1" * 40, "commit:" + "2" * 40
    nodes = [Node("file:web/static.py", "web/static.py", prov)]
    nodes += [Node(k, k.rsplit("::", 1)[1], prov, {"qualname": k.rsplit("::", 1)[1]}) for k in (cls, method, other, other_method)]
    nodes += [Node(own, "More robust path check", git, {"committed_at": "2024-01-01T00:00:00Z", "parents": ["a" * 40]}),
              Node(neighbour, "Tidy url building", git, {"committed_at": "2024-02-01T00:00:00Z", "parents": ["b" * 40]})]
    rels = [Relationship("file:web/static.py", RelType.CONTAINS, k, prov) for k in (cls, other)]
    rels += [Relationship(cls, RelType.CONTAINS, method, prov), Relationship(other, RelType.CONTAINS, other_method, prov),
             Relationship(own, RelType.MODIFIED, method, git), Relationship(neighbour, RelType.MODIFIED, other_method, git),
             Relationship(neighbour, RelType.MODIFIED, other, git), Relationship(own, RelType.CHANGED, "file:web/static.py", git),
             Relationship(neighbour, RelType.CHANGED, "file:web/static.py", git)]
    st.upsert(nodes, rels, [])

    def commits(config: LinkConfig) -> list[str]:
        hits = GraphRetriever(st, link_config=config).retrieve(parse_question("Which commits changed StaticFiles?")).hits
        return [h.key for h in hits if h.key.startswith("commit:")]

    assert commits(LinkConfig())[0] == own
    assert commits(LinkConfig(member_weight=0.0))[0] == neighbour  # without it, the neighbour's change won
    st.close()


def test_what_imports_a_module_is_the_files_that_import_its_definitions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An import names the class it takes ("from web.data import URL"): "what imports web.data"
    answers with the importing files, not with the module's own classes."""
    st = EmbeddedStore(tmp_path, "imports")
    prov = Provenance("web", "test")
    data, url, headers = "file:web/data.py", "sym:web/data.py::URL", "sym:web/data.py::Headers"
    requests, routing, other = "file:web/requests.py", "file:web/routing.py", "file:web/other.py"
    nodes = [Node(k, k[5:], prov) for k in (data, requests, routing, other)]
    nodes += [Node(k, k.rsplit("::", 1)[1], prov, {"symbol_kind": "class", "qualname": k.rsplit("::", 1)[1]})
              for k in (url, headers)]
    rels = [Relationship(data, RelType.CONTAINS, url, prov), Relationship(data, RelType.CONTAINS, headers, prov),
            Relationship(requests, RelType.IMPORTS, url, prov), Relationship(routing, RelType.IMPORTS, headers, prov),
            Relationship(data, RelType.IMPORTS, other, prov)]
    st.upsert(nodes, rels, [])
    graph = GraphRetriever(st)
    for text in ("What imports web.data?", "Where is the data module imported?"):
        hits = [h.key for h in graph.retrieve(parse_question(text)).hits]
        assert set(hits[:2]) == {requests, routing}, (text, hits)
    hits = [h.key for h in graph.retrieve(parse_question("What does web.data import?")).hits]
    assert hits[0] == other, hits
    st.close()


def test_who_wrote_most_of_a_file_counts_the_changes_each_person_authored(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"Who wrote most of regexp.go": the author of the most changes to it comes first, not the
    maintainer whose merge commits brought others' changes in, nor the one who wrote much nearby."""
    st = EmbeddedStore(tmp_path, "most")
    git = Provenance("git", "test")
    prov = Provenance("regexp.go", "test")
    writer, maintainer = "person:writer@example.com", "person:maintainer@example.com"
    nodes = [Node("file:regexp.go", "regexp.go", prov), Node("file:mux.go", "mux.go", prov),
             Node(writer, "Writer", git, {"email": "writer@example.com"}),
             Node(maintainer, "Maintainer", git, {"email": "maintainer@example.com"})]
    rels = []
    for i in range(12):  # commit 0 is the root; 1-3 are the writer's; 4-7 the maintainer's merges; 8-11 elsewhere
        sha = f"{i:02d}" * 20
        parents = [] if i == 0 else ([f"{i - 1:02d}" * 20, "ff" * 20] if 4 <= i <= 7 else [f"{i - 1:02d}" * 20])
        nodes.append(Node(f"commit:{sha}", f"change {i}", git,
                          {"parents": parents, "committed_at": f"2024-01-{i + 1:02d}T00:00:00Z"}))
        author = writer if 1 <= i <= 3 else maintainer
        rels.append(Relationship(author, RelType.AUTHORED, f"commit:{sha}", git))
        rels.append(Relationship(f"commit:{sha}", RelType.CHANGED, "file:mux.go" if i >= 8 else "file:regexp.go", git))
    st.upsert(nodes, rels, [])
    hits = [h.key for h in GraphRetriever(st).retrieve(parse_question("Who wrote most of regexp.go?")).hits]
    assert hits[0] == writer, hits
    st.close()
