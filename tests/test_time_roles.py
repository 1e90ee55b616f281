"""Answers that depend on when things happened: the newest change to what the question names (or
its author), and the decision still in force rather than the one it replaced."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from graphmem.model import Node, Provenance, Relationship, RelType
from graphmem.retrieval.graph import GraphRetriever
from graphmem.retrieval.question import parse_question
from graphmem.stores.embedded import EmbeddedStore

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
OLD, MID, NEW = ("commit:" + c * 40 for c in "abc")
OLDER = [f"commit:{i:040x}" for i in range(1, 13)]
ANA, BO = "person:ana@example.dev", "person:bo@example.dev"
POST = "sym:api/handlers.py::Handler.post"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStore]:
    """Ana wrote `post`, owns it, changed it often and wrote most of the code around it; Bo changed
    `post` last. ADR-2 replaced
    ADR-1 on how billing talks to the ledger; INC-7 happened between the two."""
    st = EmbeddedStore(tmp_path_factory.mktemp("time-roles"), "time")
    prov = Provenance("test", "test")
    others = [f"sym:api/handlers.py::Handler.helper{i}" for i in range(6)]
    nodes = [Node(POST, "Handler.post", prov), Node(ANA, "Ana", prov), Node(BO, "Bo", prov),
             Node(OLD, "Add the invoice API handlers", prov, {"authored_at": "2026-01-05T10:00:00Z"}),
             Node(MID, "Tidy the handler helpers", prov, {"authored_at": "2026-02-05T10:00:00Z"}),
             Node(NEW, "Idempotency keys for invoice posts", prov, {"authored_at": "2026-03-05T10:00:00Z"}),
             Node("service:billing", "billing", prov), Node("service:ledger", "ledger", prov),
             Node("adr:1", "Communication between billing and the ledger over HTTP", prov, {"date": "2026-01-10"}),
             Node("adr:2", "Events instead of synchronous calls", prov, {"date": "2026-04-01"}),
             Node("incident:INC-7", "Ledger timeouts", prov, {"started_at": "2026-02-20T10:00:00Z"})]
    nodes += [Node(key, key.rsplit("::", 1)[1], prov) for key in others]
    nodes += [Node(key, f"Rework handlers, part {i}", prov, {"authored_at": f"2025-{i:02d}-01T10:00:00Z"})
              for i, key in enumerate(OLDER, start=1)]
    rel = [(ANA, RelType.AUTHORED, OLD), (ANA, RelType.AUTHORED, MID), (BO, RelType.AUTHORED, NEW),
           (OLD, RelType.MODIFIED, POST), (NEW, RelType.MODIFIED, POST),
           ("adr:2", RelType.SUPERSEDES, "adr:1"),
           ("adr:1", RelType.MENTIONS, "service:billing"), ("adr:1", RelType.MENTIONS, "service:ledger"),
           ("adr:2", RelType.MENTIONS, "service:billing"), ("adr:2", RelType.MENTIONS, "service:ledger"),
           ("incident:INC-7", RelType.AFFECTED, "service:ledger")]
    rel += [(ANA, RelType.OWNS, POST)] + [(ANA, RelType.AUTHORED, key) for key in OLDER]
    rel += [(key, RelType.MODIFIED, POST) for key in OLDER]
    for key in others:  # Ana's other work on the same class pulls PageRank towards her
        rel += [(OLD, RelType.MODIFIED, key), (MID, RelType.MODIFIED, key), (POST, RelType.CALLS, key)]
        rel += [(c, RelType.MODIFIED, key) for c in OLDER] + [(ANA, RelType.OWNS, key)]
    # ADR-1 is the better known: commits and the incident refer to it, it names both services often.
    rel += [(c, RelType.REFERENCES, "adr:1") for c in OLDER] + [("incident:INC-7", RelType.REFERENCES, "adr:1")]
    st.upsert(nodes, [Relationship(s, t, d, prov) for s, t, d in rel], [])
    yield st
    st.close()


def ranked(store: EmbeddedStore, text: str) -> list[str]:
    return [h.key for h in GraphRetriever(store).retrieve(parse_question(text, NOW), k=5).hits]


@pytest.mark.parametrize("text, answer", [
    ("Who last changed Handler.post?", BO),
    ("Who made the most recent change to Handler.post?", BO),
    ("Which commit last modified Handler.post?", NEW),
])
def test_the_newest_change_to_what_is_named_answers_who_last_changed_it(store: EmbeddedStore, text: str,
                                                                          answer: str) -> None:
    assert ranked(store, text)[0] == answer


def test_the_author_of_the_newest_change_comes_before_its_co_authors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Bo wrote the newest change to ``post`` with Ana as a ``Co-authored-by`` helper; Ana, who
    wrote much more around it, is named after him."""
    st = EmbeddedStore(tmp_path, "coauthors")
    prov = Provenance("test", "test")
    others = [f"sym:api/handlers.py::Handler.helper{i}" for i in range(6)]
    nodes = [Node(POST, "Handler.post", prov), Node(ANA, "Ana", prov), Node(BO, "Bo", prov),
             Node(NEW, "Idempotency keys for invoice posts", prov,
                  {"authored_at": "2026-03-05T10:00:00Z", "author_email": "bo@example.dev"})]
    nodes += [Node(key, key.rsplit("::", 1)[1], prov) for key in others]
    nodes += [Node(key, f"Rework handlers, part {i}", prov, {"authored_at": f"2025-{i:02d}-01T10:00:00Z"})
              for i, key in enumerate(OLDER, start=1)]
    rel = [(BO, RelType.AUTHORED, NEW), (ANA, RelType.AUTHORED, NEW), (NEW, RelType.MODIFIED, POST)]
    rel += [(ANA, RelType.AUTHORED, key) for key in OLDER] + [(key, RelType.MODIFIED, POST) for key in OLDER]
    rel += [(c, RelType.MODIFIED, key) for c in OLDER for key in others] + [(ANA, RelType.OWNS, POST)]
    st.upsert(nodes, [Relationship(s, t, d, prov) for s, t, d in rel], [])
    try:
        assert ranked(st, "Who last changed Handler.post?")[:2] == [BO, ANA]
    finally:
        st.close()


def test_without_last_the_author_of_most_changes_may_come_first(store: EmbeddedStore) -> None:
    """The rule belongs to "last": asked who changed it at all, PageRank decides as before."""
    assert set(ranked(store, "Who changed Handler.post?")[:2]) == {ANA, BO}


@pytest.mark.parametrize("text, answer", [
    ("Which decision is in force for communication between billing and the ledger?", "adr:2"),
    ("What is the current decision on communication between billing and the ledger?", "adr:2"),
    ("Which decision was in force for billing and the ledger when INC-7 happened?", "adr:1"),
])
def test_a_superseded_decision_is_not_in_force(store: EmbeddedStore, text: str, answer: str) -> None:
    q = parse_question(text, NOW)
    assert q.asks_in_force
    assert ranked(store, text)[0] == answer


def test_in_force_is_read_only_for_decisions() -> None:
    assert not parse_question("Which function holds the current user?", NOW).asks_in_force
    assert not parse_question("Which decision replaced ADR-1?", NOW).asks_in_force


@pytest.fixture(scope="module")
def shallow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStore]:
    """A shallow clone: one root commit created every function; the functions call each other."""
    st = EmbeddedStore(tmp_path_factory.mktemp("shallow"), "shallow")
    prov = Provenance("test", "test")
    root = "commit:" + "d" * 40
    funcs = [f"sym:app/steps.py::{name}" for name in
             ("load_order", "check_stock", "reserve_items", "charge_card", "send_receipt", "ship_order")]
    nodes = [Node(root, "Import the project", prov, {"authored_at": "2026-01-05T10:00:00Z", "parents": []}),
             Node(ANA, "Ana", prov)] + [Node(key, key.rsplit("::", 1)[1], prov,
                                             {"symbol_kind": "function", "qualname": key.rsplit("::", 1)[1]})
                                        for key in funcs]
    rel = [(ANA, RelType.AUTHORED, root)] + [(root, RelType.MODIFIED, key) for key in funcs]
    rel += [(a, RelType.CALLS, b) for a, b in zip(funcs, funcs[1:])]
    st.upsert(nodes, [Relationship(s, t, d, prov) for s, t, d in rel], [])
    yield st
    st.close()


def test_the_commit_that_created_everything_answers_no_question_about_code(shallow: EmbeddedStore) -> None:
    """It touches every node the question names, so PageRank would put it first."""
    root = "commit:" + "d" * 40
    assert ranked(shallow, "How do check_stock, reserve_items and send_receipt depend on each other?")[0] != root
    assert ranked(shallow, "Which commit added charge_card?")[0] == root
    assert root in ranked(shallow, "When was charge_card created?")[:2]
