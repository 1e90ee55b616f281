"""Retrieval: the FAISS mirror, index sync, question reading, fusion and the engine end to end."""

from __future__ import annotations

import json

import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval.metrics import found_ranks
from graphmem.api import Graphmem
from graphmem.config import Settings
from graphmem.errors import ConfigError, StoreError
from graphmem.model import Chunk, Node, NodeKind, Provenance, RelType
from graphmem.retrieval.config import PRESETS
from graphmem.retrieval.fusion import reciprocal_rank_fusion
from graphmem.retrieval.indexes import Indexes
from graphmem.retrieval.question import parse_question
from graphmem.retrieval.vectors import VectorIndex
from graphmem.stores.embedded import EmbeddedStore
from tests.conftest import NOW

REF = datetime.fromisoformat(NOW).replace(tzinfo=timezone.utc)
DONE_WHEN = ("org-1", "org-2", "org-3")  # the three questions issue-level acceptance names


def unit(rows: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    vecs = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


# --- the vector index -------------------------------------------------------------------------------


def test_exact_search_matches_brute_force_and_follows_replacements() -> None:
    vecs = unit(200)
    ids = list(range(1000, 1200))
    index = VectorIndex(16)
    index.add(ids, vecs)
    query = unit(1, seed=9)[0]
    expected = [ids[i] for i in np.argsort(-(vecs @ query))[:10]]
    assert [cid for cid, _ in index.search(query, 10)] == expected
    # replacing a vector moves its id; removing one drops it
    index.add([expected[0]], -query[None, :])
    index.remove([expected[1]])
    got = [cid for cid, _ in index.search(query, 10)]
    assert expected[0] not in got and expected[1] not in got and got[:8] == expected[2:10]
    assert len(index) == 199 and index.search(-query, 1)[0][0] == expected[0]


def test_hnsw_above_the_threshold_finds_neighbours_and_respects_removals() -> None:
    vecs = unit(600, seed=1)
    ids = np.arange(1, 601)
    index = VectorIndex(16, hnsw_threshold=100)
    index.add(ids.tolist(), vecs)
    assert index.kind == "hnsw"
    hits = 0
    for i in range(0, 600, 30):
        hits += index.search(vecs[i], 1)[0][0] == ids[i]
    assert hits >= 19  # HNSW is approximate, but a stored vector finds itself
    index.remove([int(ids[0])])
    assert all(cid != ids[0] for cid, _ in index.search(vecs[0], 20))
    index.add([int(ids[0])], vecs[0][None, :])  # re-added after removal: found again
    assert index.search(vecs[0], 1)[0][0] == ids[0]


def test_an_index_crossing_the_threshold_both_ways_keeps_finding_what_it_holds() -> None:
    vecs = unit(300, seed=4)
    index = VectorIndex(16, hnsw_threshold=150)
    index.add(range(1, 101), vecs[:100])
    assert index.kind == "flat" and index.search(vecs[7], 1)[0][0] == 8
    index.add(range(101, 301), vecs[100:])  # past the threshold: HNSW from here
    assert index.kind == "hnsw" and index.search(vecs[200], 1)[0][0] == 201
    index.remove(range(1, 201))  # back under it: exact again, and nothing removed comes back
    assert index.kind == "flat" and len(index) == 100
    query = unit(1, seed=5)[0]
    expected = [int(i) for i in 201 + np.argsort(-(vecs[200:] @ query))[:10]]
    assert [cid for cid, _ in index.search(query, 10)] == expected
    index.add(range(1, 101), vecs[:100])  # over it again: the HNSW graph skips the removed rows
    assert index.kind == "hnsw" and all(index.search(vecs[i], 1)[0][0] == i + 1 for i in (0, 50, 250))


def test_exact_search_never_loads_faiss(tmp_path: Path) -> None:
    """A small project's process searches, saves and loads its vectors without importing FAISS
    (whose import costs a first question a tenth of a second)."""
    code = ("import sys, numpy as np; from graphmem.retrieval.vectors import VectorIndex\n"
            "v = np.eye(8, dtype=np.float32); index = VectorIndex(8, model='m'); index.add(range(8), v)\n"
            f"index.save({str(tmp_path / 'v.npz')!r}); index = VectorIndex.load({str(tmp_path / 'v.npz')!r}, dim=8, model='m')\n"
            "index.prepare(); print(index.search(v[3], 2)[0][0], 'faiss' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["3", "False"]


def test_save_is_atomic_and_damage_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    index = VectorIndex(16, model="m1")
    index.add([5, 6, 7], unit(3), [50, 60, 70])
    index.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors.npz"]  # no temporary file left
    loaded = VectorIndex.load(path, dim=16, model="m1")
    assert loaded.digests() == {5: 50, 6: 60, 7: 70}
    np.testing.assert_array_equal(loaded.vector(6), index.vector(6))
    assert len(VectorIndex.load(path, dim=16, model="another-model")) == 0  # vectors of another model are dropped
    hnsw = VectorIndex(16, hnsw_threshold=2)
    hnsw.add([1, 2, 3, 4], unit(4, seed=3))
    hnsw.remove([2])
    hnsw.save(tmp_path / "hnsw.npz")
    again = VectorIndex.load(tmp_path / "hnsw.npz", dim=16, hnsw_threshold=2)
    assert again.ids() == {1, 3, 4} and all(cid != 2 for cid, _ in again.search(unit(4, seed=3)[1], 3))
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(StoreError, match="damaged"):
        VectorIndex.load(path, dim=16)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("format.npy", b"junk")
    with pytest.raises(StoreError):
        VectorIndex.load(path, dim=16)


# --- fusion and question reading --------------------------------------------------------------------


def test_reciprocal_rank_fusion_sums_weighted_reciprocal_ranks() -> None:
    fused = dict(reciprocal_rank_fusion({"a": ["x", "y"], "b": ["y", "z"]}, {"a": 1.0, "b": 2.0}, k=10))
    assert fused["x"] == pytest.approx(1 / 11)
    assert fused["y"] == pytest.approx(1 / 12 + 2 / 11)
    assert fused["z"] == pytest.approx(2 / 12)
    assert list(dict(reciprocal_rank_fusion({"a": ["x", "y"]}, {"a": 0.0}))) == []
    assert set(PRESETS) == {"bm25", "vector", "graph", "rrf", "hybrid", "hybrid-rerank"}


def test_rrf_constant_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphmem.retrieval.fusion import rrf_k

    monkeypatch.setenv("GRAPHMEM_RRF_K", "20")
    assert rrf_k() == 20.0
    monkeypatch.setenv("GRAPHMEM_RRF_K", "many")
    with pytest.raises(ConfigError):
        rrf_k()


@pytest.mark.parametrize(("text", "expected"), [
    ("incidents in the last month", {"start": "2026-05-02T00:00:00.000000Z", "end": None}),
    ("commits in the past 2 weeks", {"start": "2026-05-18T00:00:00.000000Z"}),
    ("decisions before March 2025", {"start": None, "end": "2025-03-01T00:00:00.000000Z"}),
    ("what changed in 2025", {"start": "2025-01-01T00:00:00.000000Z", "end": "2026-01-01T00:00:00.000000Z"}),
    ("incidents after May 2026", {"start": "2026-06-01T00:00:00.000000Z"}),
    ("what was in force as of INC-42", {"as_of": "INC-42"}),
    ("who fixed the latest incident", {"pick": "latest", "pick_kind": "incident"}),
    ("the first commit", {"pick": "earliest", "pick_kind": "commit"}),
    ("what changed in the last release", {"pick": "latest", "pick_kind": "release"}),
])
def test_time_expressions(text: str, expected: dict[str, Any]) -> None:
    got = parse_question(text, REF).time.as_dict()
    assert {k: got[k] for k in expected} == expected


def test_question_reading_finds_answer_kind_relations_and_ids() -> None:
    q = parse_question("Which team owns the service that calls the endpoint that failed in INC-0042 and ADR-5?", REF)
    assert [k.value for k in q.answer_kinds] == ["team"]
    assert {"OWNS", "CALLS", "AFFECTED"} <= {t.value for t in q.rel_types}
    assert q.incident_numbers == (42,) and q.adr_numbers == (5,)
    assert parse_question("Who fixed it?", REF).answer_kinds[0].value == "person"
    # the main clause names what leads to the answer; relative clauses what it is about
    fixed = parse_question("Who fixed the incident that hit the notifications service?", REF)
    assert "FIXES" in {t.value for t in fixed.main_rel_types} and "AFFECTED" not in {t.value for t in fixed.main_rel_types}
    assert "AFFECTED" in {t.value for t in fixed.rel_types}
    # A subordinate clause the question opens with is no part of its main clause.
    opened = parse_question("If the service behind INC-5 fails again, which services that depend on it are at risk?", REF)
    assert RelType.AFFECTED in opened.rel_types and not opened.main_rel_types
    asked_when = parse_question("When was `frozen` added, and who wrote it?", REF)  # "when" asks here
    assert RelType.MODIFIED in asked_when.main_rel_types
    # a release is a tag where there are tags, else the commit that made it (the engine drops the
    # kind a project holds none of); "when was X removed" asks for the change
    assert [k.value for k in parse_question("Which release of h11 removed Connection.foo?", REF).answer_kinds] == [
        "release", "commit"]
    assert [k.value for k in parse_question("When was `frozen` added?", REF).answer_kinds] == ["commit"]
    assert parse_question("Which class has the evolve method?", REF).asks_type
    assert parse_question("evolve is a method of which type?", REF).asks_type
    assert not parse_question("Which functions call evolve?", REF).asks_type
    # a project's name of three words stands between "which" and "type"
    assert parse_question("Which Apache Commons CLI type has handleOption?", REF).asks_type
    # the answer is a function or a method: not the type around it
    assert parse_question("Which method cancels a timeout scheduled with setTimeout?", REF).asks_callable
    assert parse_question("what helper function parses the header?", REF).asks_callable
    assert not parse_question("Which class has the evolve method?", REF).asks_callable  # a type, holding a method
    # the kind word right after the asking word is the one asked for
    assert parse_question("Which functions use the classes method in the symilar code?", REF).asks_callable
    assert not parse_question("Where are the left-over arguments kept?", REF).asks_callable
    # "which sessions" asks for agent sessions, joined to what they touched, in a project that holds
    # some; elsewhere the question is about the code ("which session class ..." asks for code).
    text = "Which agent sessions touched InvoiceHandler.post?"
    sessions = parse_question(text, REF, sessions=True)
    assert sessions.answer_kinds == (NodeKind.SESSION,) and RelType.TOUCHED in sessions.rel_types
    code = parse_question(text, REF)
    assert code.answer_kinds == () and RelType.TOUCHED not in code.rel_types and RelType.MODIFIED in code.rel_types
    assert parse_question("Which session class keeps cookies?", REF).answer_kinds[0] is NodeKind.SYMBOL


@pytest.mark.parametrize("text,end", [
    # passive with the named code between the be-verb and the verb: the answer is the caller
    ("Where is parse_args called from?", "src"),
    ("Which code depends on flush being called?", "src"),
    # passive with the question word as its subject: the answer is what is called
    ("What is called when flush runs?", "dst"),
    ("Which functions are called by flush?", "dst"),
    # code that uses a function calls it
    ("Which functions use parse_args?", "src"),
    ("What does flush use?", "dst"),
    ("Who calls flush?", "src"),
    # a dot inside a name ends no sentence
    ("Where is Writer.flush called from?", "src"),
    ("Where is writer.flush_all() called from?", "src"),
    ("Where is Writer.flush used outside its own package?", "src"),
])
def test_question_reading_finds_which_end_of_a_call_is_asked(text: str, end: str) -> None:
    q = parse_question(text, REF)
    assert q.directions.get(RelType.CALLS) == end, q.directions
    assert q.answer_kinds and q.answer_kinds[0] is NodeKind.SYMBOL


@pytest.mark.parametrize("text", [
    "Which code calls flush indirectly?",
    "Which functions reach flush through one intermediate call?",
    "What calls the callers of flush?",
    "flush is called by a few helpers; which functions call those helpers?",
])
def test_question_reading_finds_a_call_crossed_twice(text: str) -> None:
    q = parse_question(text, REF)
    # the first step leads from flush to its callers, the answer is one more step the same way
    assert q.step == (RelType.CALLS, "src") and q.directions[RelType.CALLS] == "src", (q.step, q.directions)
    assert q.answer_kinds[0] is NodeKind.SYMBOL
    assert parse_question("Who calls flush?", REF).step is None


@pytest.mark.parametrize("text,end", [
    ("What imports starlette.datastructures?", "src"),
    ("Which files import the concurrency module?", "src"),
    ("Where is the sessions module imported?", "src"),
    ("What does routing.py import?", "dst"),
    ("How are imports resolved?", None),  # a plural noun, not a participle
])
def test_question_reading_finds_which_end_of_an_import_is_asked(text: str, end: str | None) -> None:
    assert parse_question(text, REF).directions.get(RelType.IMPORTS) == end


@pytest.mark.parametrize("text,end", [
    ("Which class does FileResponse inherit from?", "dst"),
    ("What does RedirectResponse extend?", "dst"),
    ("What is the base class of FileResponse?", "dst"),
    ("Which classes extend Response?", "src"),
    ("Which classes inherit from HTTPEndpoint?", "src"),
    ("What are the subclasses of Response?", "src"),
    ("How do I extend the router?", None),  # no end asked: a how-to
    ("Which classes implement NodeVisitor?", "src"),  # implementing a type is inheriting from it
    ("Which types implement the `io.Reader` interface?", "src"),
    ("Which types implement the matcher interface?", "src"),
    ("Which interfaces does Element implement?", "dst"),
    ("Which types implement http.Handler?", "src"),  # a dotted name is a type's name
    ("Which types in mux satisfy the http.Handler interface?", "src"),  # Go's word for it
])
def test_question_reading_finds_which_end_of_an_inheritance_is_asked(text: str, end: str | None) -> None:
    q = parse_question(text, REF)
    assert RelType.INHERITS in q.rel_types
    assert q.directions.get(RelType.INHERITS) == end, q.directions
    assert (end is None) or q.answer_kinds[0] is NodeKind.SYMBOL


def test_resolving_is_fixing_only_where_the_question_speaks_of_trouble_or_work() -> None:
    for text in ("Who resolved INC-042?", "How was the outage in billing resolved?",
                 "Which commit resolved the flaky test issue?"):
        assert RelType.RESOLVED_BY in parse_question(text, REF).rel_types, text
    for text in ("How is a group's subcommand resolved from the command line?", "Where are relative imports resolved?"):
        assert not {RelType.RESOLVED_BY, RelType.AUTHORED} & set(parse_question(text, REF).rel_types), text


def test_a_call_after_an_article_is_a_noun_not_the_relationship() -> None:
    for text in ("How does the express adapter turn a request into a tRPC call?", "What happens on each call to fetch?"):
        assert RelType.CALLS not in parse_question(text, REF).rel_types, text
    for text in ("What does a Router call when it matches?", "Which functions does parse call?",
                 "Which functions reach RouteContext() through one intermediate call?"):
        assert RelType.CALLS in parse_question(text, REF).rel_types, text


def test_implementing_behaviour_is_no_inheritance() -> None:
    for text in ("Which function implements retry logic?", "Which transport implements HTTP/2?",
                 "Where does commons-cli implement setLeftPadding()?", "Where do we implement parseArgs?",
                 "Where is the timeout implemented?", "How is retrying implemented?",
                 "Does the parser satisfy the grammar's requirements?"):
        assert RelType.INHERITS not in parse_question(text, REF).rel_types, text


@pytest.mark.parametrize("text,end", [
    ("Which services depend on billing?", "src"),
    ("Which services are depending on billing?", "src"),  # the progressive is active
    ("What does checkout depend on?", "dst"),
    ("What are the dependents of billing?", "src"),
    ("List the dependencies of billing.", "dst"),
    # a noun names no end: the question is about the code, not asking for services
    ("What is the dependency chain between the fixture system and the mark structures?", None),
    ("How do the dependencies between parser modules shape the import order?", None),
    # the verb's own clause asks how, not for one of its ends
    ("What is the failure mechanism when validation fails, and how does this depend on the signature?", None),
])
def test_question_reading_tells_the_verb_depend_from_the_nouns(text: str, end: str | None) -> None:
    q = parse_question(text, REF)
    assert q.directions.get(RelType.DEPENDS_ON) == end, q.directions
    assert (NodeKind.SERVICE in q.answer_kinds) == (end is not None or "services" in text.lower())


@pytest.mark.parametrize("text", [
    "Which services are affected if billing goes down?",
    "What breaks if billing fails?",
    "If the ledger goes down, which services stop working?",
    "Which services would be impacted when billing is unavailable?",
    "What would break if I changed parse_date?",
    "Which call sites break if I change the signature of parse_date?",
])
def test_a_question_about_the_reach_of_a_failure_asks_for_dependents(text: str) -> None:
    """What suffers when the named node fails or changes depends on it (or calls it): no incident's
    AFFECTED, and a hypothetical change is no history."""
    q = parse_question(text, REF)
    assert q.directions.get(RelType.DEPENDS_ON) == "src" and q.directions.get(RelType.CALLS) == "src", q.directions
    assert {RelType.DEPENDS_ON, RelType.CALLS} <= q.main_rel_types, q.main_rel_types
    assert RelType.AFFECTED not in q.rel_types and not q.asks_change, q.as_dict()
    assert NodeKind.COMMIT not in q.answer_kinds and q.answer_kinds, q.answer_kinds


@pytest.mark.parametrize("text", [
    "Which services were affected by INC-042?",
    "Which services were hit by the incident in March?",
    "What failed when the ledger migration was deployed?",
])
def test_what_an_incident_affected_is_no_hypothetical(text: str) -> None:
    q = parse_question(text, REF)
    assert RelType.AFFECTED in q.rel_types and RelType.DEPENDS_ON not in q.directions, q.as_dict()


@pytest.mark.parametrize("text", [
    "Which database does billing use?",
    "What framework does the gateway depend on?",
    "Which logging library does the gateway call?",
])
def test_a_thing_no_node_kind_names_is_not_read_as_the_relationship_s_kind(text: str) -> None:
    """"Which database does billing use": a database is no function, though "use" reads as calling."""
    q = parse_question(text, REF)
    assert q.answer_kinds == () and not q.directions and not q.main_rel_types, q.as_dict()


@pytest.mark.parametrize("text, kind", [
    ("What does billing call?", NodeKind.SYMBOL),
    ("What else does billing call?", NodeKind.SYMBOL),
    ("Which services does billing depend on?", NodeKind.SERVICE),
    ("Which functions does charge call?", NodeKind.SYMBOL),
    ("What internal calls does charge make?", NodeKind.SYMBOL),
])
def test_a_kind_word_or_none_keeps_the_relationship(text: str, kind: NodeKind) -> None:
    q = parse_question(text, REF)
    assert q.answer_kinds[0] is kind and q.directions, q.as_dict()


def test_its_own_is_no_ownership() -> None:
    assert RelType.OWNS not in parse_question("Where is flush used outside its own package?", REF).rel_types
    assert RelType.OWNS not in parse_question("Why does the parser keep their own buffer?", REF).rel_types
    for text in ("Who owns billing?", "Which services do we own?", "Who is the owner of billing?"):
        assert RelType.OWNS in parse_question(text, REF).rel_types, text


def test_who_uses_code_asks_for_code() -> None:
    assert parse_question("Who uses flush from other packages?", REF).answer_kinds == (NodeKind.SYMBOL,)
    assert parse_question("Who owns the billing service?", REF).answer_kinds[0] is NodeKind.PERSON


def test_implement_leads_through_commits_only_beside_a_decision() -> None:
    assert RelType.MODIFIED in parse_question("What code implements ADR-5?", REF).rel_types
    assert RelType.MODIFIED in parse_question("Which decision replaced it, and what code implements it?", REF).rel_types
    q = parse_question("Why does the loader implement its helper as a static method?", REF)
    assert not q.rel_types


@pytest.mark.parametrize("text,kinds", [
    ("What is the reliance of the system-specific environment manager on the platform?", ()),
    ("What file-level locks does the writer take?", ()),
    ("What system-wide services call the ledger?", (NodeKind.SERVICE,)),  # the compound's head still counts
    ("Which services depend on auth?", (NodeKind.SERVICE,)),
])
def test_a_kind_word_opening_a_hyphenated_compound_asks_for_nothing(text: str, kinds: tuple[NodeKind, ...]) -> None:
    assert parse_question(text, REF).answer_kinds == kinds


def test_used_to_and_used_for_give_a_purpose_not_a_relationship() -> None:
    assert RelType.CALLS in parse_question("Which functions use parse_date?", REF).rel_types
    assert RelType.CALLS in parse_question("Where is parse_date used by the loader?", REF).rel_types
    assert RelType.CALLS in parse_question("Which functions use StashKey as a key?", REF).rel_types
    for text in ("Where are the filters used to select rows?", "What is the token cache used for?",
                 "Which class is an object used as a key to a Stash?"):
        q = parse_question(text, REF)
        assert RelType.CALLS not in q.rel_types and not q.directions, text


def test_the_askers_own_call_is_no_relationship() -> None:
    # The asker calling X asks how to use it, not which code calls it.
    for text in ("Which type do I need an instance of to call `handleOption`?", "How do we invoke parse_date?",
                 "What should I import to call parse_date?"):
        q = parse_question(text, REF)
        assert RelType.CALLS not in q.rel_types and RelType.CALLS not in q.directions, text
    for text in ("Which class calls parse_date?", "Who calls parse_date when I run the loader?",
                 "If I change the signature of parse_date, which call sites break?"):
        assert RelType.CALLS in parse_question(text, REF).rel_types, text


@pytest.mark.parametrize("text", [
    "Which fixture provides a temporary path?",
    "Which class checks the authorization header?",
    "Where are editable packages registered?",
    "What is the important part of the extension point?",
    "Which class has the resolveOption method?",
])
def test_a_word_that_only_begins_like_a_relationship_names_none(text: str) -> None:
    assert not parse_question(text, REF).rel_types, text


def test_relationship_words_are_read_in_their_own_forms() -> None:
    for text, rel in (("Who fixed INC-42?", RelType.FIXES), ("What resolved the outage?", RelType.RESOLVED_BY),
                      ("Who authored the change to billing?", RelType.AUTHORED),
                      ("Which files import the ledger client?", RelType.IMPORTS),
                      ("Which class extends BaseHandler?", RelType.INHERITS),
                      ("Which decisions reference ADR-5?", RelType.REFERENCES),
                      ("What code was modified last week?", RelType.MODIFIED)):
        assert rel in parse_question(text, REF).rel_types, text


def test_a_question_is_relational_when_it_asks_for_a_relationship() -> None:
    for text in ("Which functions call evolve?", "Which release of h11 removed Connection.foo?",
                 "Who fixed the incident that hit the notifications service?"):
        assert parse_question(text, REF).relational, text
    for text in ("Where is the code that parses dates?", "Which function converts a timestamp to UTC?"):
        assert not parse_question(text, REF).relational, text


# --- indexes kept in step with the graph ------------------------------------------------------------


WORDS = ["ledger", "invoice", "refund", "retry", "kafka", "timeout", "tax", "payment", "outbox", "idempotent"]
ops = st.lists(st.tuples(st.sampled_from(["add", "edit", "delete"]), st.integers(0, 7), st.integers(0, 9)),
               min_size=1, max_size=12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops)
def test_random_adds_edits_and_deletes_keep_faiss_bm25_and_graph_in_step(
        steps: list[tuple[str, int, int]], embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    home = tmp_path_factory.mktemp("prop")
    store = EmbeddedStore(home, "prop")
    indexes = Indexes(home / "index", embedder=embedder, cache_dir=home / "cache")
    texts: dict[int, str] = {}
    try:
        for n, (op, slot, word) in enumerate(steps):
            path = f"src/f{slot}.py"
            key = f"sym:{path}::fn{slot}"
            prov = Provenance(path, "test")
            if op == "delete":
                store.close_sources([path])
                texts.pop(slot, None)
            else:
                text = f"def fn{slot}(): handles {WORDS[word]} case {n}"
                store.upsert([Node(key, f"fn{slot}", prov)], [], [Chunk(key, 0, text, "code", prov)])
                texts[slot] = text
            if n % 3 == 2:  # sync at random moments, not only at the end
                indexes.sync(store)
        indexes.sync(store)
        graph_ids = store.chunk_ids()
        assert indexes.vectors.ids() == graph_ids == indexes.bm25.ids()
        assert indexes.verify(store).ok
        reloaded = Indexes(home / "index", embedder=embedder, cache_dir=home / "cache")
        assert reloaded.vectors.ids() == graph_ids == reloaded.bm25.ids()
        for slot, text in texts.items():  # the index holds the current text, not an older one
            top = reloaded.bm25.search(text, 1)[0][0]
            assert store.get_chunks_by_id([top])[top].text == text
    finally:
        store.close()


def test_unchanged_text_is_never_embedded_twice(embedder: Any, tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, "cache")
    prov = Provenance("a.py", "test")
    store.upsert([Node("sym:a.py::f", "f", prov)], [], [Chunk("sym:a.py::f", i, f"text {i}", "code", prov)
                                                         for i in range(5)])
    first = Indexes(tmp_path / "i1", embedder=embedder, cache_dir=tmp_path / "cache").sync(store)
    assert (first.embedded, first.from_cache) == (5, 0)
    again = Indexes(tmp_path / "i1", embedder=embedder, cache_dir=tmp_path / "cache").sync(store)
    assert again.embedded == 0 and again.added == 0  # nothing changed: nothing to do
    fresh = Indexes(tmp_path / "i2", embedder=embedder, cache_dir=tmp_path / "cache").sync(store)
    assert (fresh.embedded, fresh.from_cache, fresh.added) == (0, 5, 5)
    store.close()


def test_a_first_question_starts_loading_its_model_once_on_another_thread(embedder: Any, tmp_path: Path) -> None:
    from graphmem.retrieval.engine import Retriever

    made: list[str] = []

    def make() -> Any:
        made.append(threading.current_thread().name)
        time.sleep(0.2)  # a model read from disk: a second question arrives while it loads
        return embedder

    store = EmbeddedStore(tmp_path, "first")
    indexes = Indexes(tmp_path / "index", embedder=make, cache_dir=tmp_path / "cache")
    retriever = Retriever(store, indexes, reranker=None)
    retriever.start_models("Which function parses the config file?", "bm25")
    assert not made and not indexes.embedder_loaded  # BM25 alone needs no model
    for _ in range(3):
        retriever.start_models("Which function parses the config file?", "hybrid")
    deadline = time.monotonic() + 30
    while not indexes.embedder_loaded and time.monotonic() < deadline:
        time.sleep(0.01)
    assert indexes.embedder_loaded and len(made) == 1 and made[0] != threading.current_thread().name
    retriever.start_models("Another question", "hybrid")
    assert indexes.embedder.encode_query("parse").shape == (embedder.dim,) and len(made) == 1
    store.close()


def test_a_command_prepares_its_question_before_asking_it(embedder: Any, tmp_path: Path) -> None:
    """``prepare_for`` loads the graph and the question's model on threads of their own; the
    question then uses them, and nothing is loaded twice."""
    prov = Provenance("src/config.py", "test")
    first = Graphmem(Settings(store="embedded", home=tmp_path), "prep", embedder=embedder, reranker=None)
    key = "sym:src/config.py::parse_config"
    first.store.upsert([Node(key, "parse_config", prov, {"symbol_kind": "function", "qualname": "parse_config"})],
                       [], [Chunk(key, 0, "def parse_config(path): read the settings file", "code", prov)])
    first.sync_indexes()
    first.close()
    made: list[str] = []

    def make() -> Any:
        made.append(threading.current_thread().name)
        return embedder

    gm = Graphmem(Settings(store="embedded", home=tmp_path), "prep", embedder=make, reranker=None)
    gm.prepare_for("Which function reads the settings file?", "hybrid")
    deadline = time.monotonic() + 30
    while not (gm.indexes.embedder_loaded and made) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert made == ["graphmem-models"]
    answer = gm.query("Which function reads the settings file?", mode="hybrid", k=3)
    assert answer.results[0].key == key and made == ["graphmem-models"]
    gm.close()
    # A command that stops before asking (a refused question) closes only once the loads are done.
    quick = Graphmem(Settings(store="embedded", home=tmp_path), "prep", embedder=make, reranker=None)
    quick.prepare_for("Which function reads the settings file?", "hybrid")
    quick.close()
    assert not [t for t in threading.enumerate() if t.name in ("graphmem-models", "graphmem-graph")]


class OtherModel:
    """The default embedder under another fingerprint: what a changed embedding model looks like."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.dim, self.name = inner, inner.dim, "other"

    def fingerprint(self) -> str:
        return self.inner.fingerprint() + "-other"

    def encode(self, texts: Any, kinds: Any = None) -> np.ndarray:
        return self.inner.encode(texts, kinds=kinds)

    def encode_query(self, text: str) -> np.ndarray:
        return self.inner.encode_query(text)


def test_vectors_of_another_model_are_refused_then_rebuilt(embedder: Any, tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, "model")
    prov = Provenance("a.py", "test")
    store.upsert([Node("sym:a.py::f", "f", prov)], [], [Chunk("sym:a.py::f", i, f"text {i}", "code", prov)
                                                         for i in range(3)])
    Indexes(tmp_path / "i", embedder=embedder, cache_dir=tmp_path / "cache").sync(store)
    changed = Indexes(tmp_path / "i", embedder=OtherModel(embedder), cache_dir=tmp_path / "cache")
    with pytest.raises(StoreError, match="doctor --repair"):
        changed.vectors.search(embedder.encode_query("text"), 3)
    assert "the embedder is now" in (changed.verify(store).error or "")
    changed.reload()  # a fresh process: the sync itself notices the other model
    report = Indexes(tmp_path / "i", embedder=OtherModel(embedder), cache_dir=tmp_path / "cache").sync(store)
    changed.reload()
    assert report.embedded == 3 and changed.verify(store).ok and len(changed.vectors) == 3
    store.close()


# --- the engine on the example organisation, on both stores ----------------------------------------


@pytest.fixture(params=["embedded", "neo4j"], scope="module")
def answered(request: pytest.FixtureRequest, example_org: tuple[Path, dict], embedder: Any,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Graphmem, dict]]:
    repo, facts = example_org
    home = tmp_path_factory.mktemp(f"engine-{request.param}")
    store = None
    if request.param == "neo4j":
        store = request.getfixturevalue("neo4j_module_store")
    gm = Graphmem(Settings(store=request.param, home=home), "acme", store=store, embedder=embedder, reranker=None,
                  now=REF)
    gm.ingest(repo)
    yield gm, facts
    if request.param == "embedded":
        gm.close()


@pytest.fixture(scope="module")
def neo4j_module_store(neo4j_schema: Any) -> Iterator[Any]:
    import uuid

    from graphmem.stores.neo4j import Neo4jStore

    store = Neo4jStore(neo4j_schema, f"acme-{uuid.uuid4().hex[:8]}", database=os.environ.get("NEO4J_DATABASE"))
    yield store
    store.drop_project()


def test_a_project_without_sessions_reads_which_session_as_a_code_question(answered: tuple[Graphmem, dict]) -> None:
    gm, _ = answered
    analysis = gm.query("Which session object holds the billing client?", mode="hybrid", k=3).analysis
    assert analysis["answer_kinds"] == [] and "TOUCHED" not in analysis["relationships"]


def found_at(keys: list[str], gold: str) -> int | None:
    return found_ranks(keys, [gold])[gold]


@pytest.mark.parametrize("mode", ["hybrid", "hybrid-rerank"])
def test_the_example_questions_find_their_answers_with_paths(answered: tuple[Graphmem, dict], mode: str) -> None:
    gm, facts = answered
    questions = {q["id"]: q for q in facts["questions"]}
    for qid in DONE_WHEN:
        q = questions[qid]
        answer = gm.query(q["question"], mode=mode, k=5)
        keys = answer.keys
        wanted = min(5, len(q["gold"]))
        found = [g for g in q["gold"] if found_at(keys, g)]
        assert len(found) >= wanted, (qid, keys, q["gold"])
        for hit in answer.results:
            if hit.key in q["gold"]:
                assert hit.evidence, f"{qid}: {hit.key} came without a path"
                path = hit.evidence[0]
                assert path["nodes"][-1] == hit.key
                # every step of the path is a relationship the graph holds
                for step in path["rels"]:
                    rels = gm.store.get_relationships([step["src"]])
                    assert any(r.src == step["src"] and r.type.value == step["type"] and r.dst == step["dst"]
                               for r in rels), step


@pytest.mark.parametrize("qid", ["org-1", "org-3", "org-5", "org-6"])
def test_the_example_questions_rank_the_neighbour_in_the_asked_role_first(answered: tuple[Graphmem, dict],
                                                                          qid: str) -> None:
    """The dependent service, not the incident's own; the calling service's owner, not the failing
    one's; the fix's author, not the cause's; the superseding decision, not the superseded."""
    gm, facts = answered
    q = next(q for q in facts["questions"] if q["id"] == qid)
    assert gm.query(q["question"], mode="hybrid", k=5).keys[0] in q["gold"], qid


def test_which_database_a_service_uses_is_answered_by_what_says_so_not_by_its_code(
        answered: tuple[Graphmem, dict]) -> None:
    gm, _ = answered
    keys = gm.query("Which database does billing use?", mode="hybrid", k=5).keys
    first = gm.store.get_nodes(keys[:1])[keys[0]]
    assert keys[0].startswith(("adr:", "doc:")) and "postgres" in json.dumps(first.props).lower(), keys


def test_what_a_failure_reaches_is_the_services_depending_on_the_failing_one(answered: tuple[Graphmem, dict]) -> None:
    gm, facts = answered
    for service, info in facts["services"].items():
        dependents = {s for s, other in facts["services"].items() if service in other["depends_on"]}
        if not dependents:
            continue
        name = service.split(":", 1)[1]
        answer = gm.query(f"Which services are affected if {name} goes down?", mode="hybrid", k=5)
        assert set(answer.keys[:len(dependents)]) == dependents, (service, answer.keys)


def test_who_last_changed_a_handler_is_the_author_of_its_newest_change(answered: tuple[Graphmem, dict]) -> None:
    """Not the author of the change that created it, who wrote more of the code around it."""
    from graphmem.retrieval.graph.catalog import node_date

    gm, facts = answered
    touched: dict[str, list[str]] = {}
    for commit, symbols in facts["commit_symbols"].items():
        for sym in symbols:
            touched.setdefault(sym, []).append(commit)
    checked = 0
    for sym, commits in sorted(touched.items()):
        if len(commits) < 2 or "." not in sym.rsplit("::", 1)[-1]:
            continue
        dated = gm.store.get_nodes(commits)
        newest = max(commits, key=lambda c: node_date(dated[c]) or "")
        authors = {r.src for r in gm.store.get_relationships([newest]) if r.type is RelType.AUTHORED}
        creators = {r.src for c in commits if c != newest for r in gm.store.get_relationships([c])
                    if r.type is RelType.AUTHORED}
        if authors & creators:
            continue  # the same person: the question cannot tell the rule from PageRank
        name = sym.rsplit("::", 1)[-1]
        keys = gm.query(f"Who last changed {name}?", mode="hybrid", k=5).keys
        assert keys[0] in authors, (sym, newest, authors, keys)
        checked += 1
    assert checked, "the example has a method changed by two people"


def test_the_decision_in_force_is_the_one_that_replaced_the_other(answered: tuple[Graphmem, dict]) -> None:
    gm, facts = answered
    for new, old in facts["supersedes"]:
        topic = facts["adrs"][old]["title"].lower()
        keys = gm.query(f"Which decision is in force for {topic}?", mode="hybrid", k=5).keys
        assert keys[:2] == [new, old], (topic, keys)


def test_the_team_owning_a_service_answers_before_a_person_owning_its_files(answered: tuple[Graphmem, dict]) -> None:
    gm, facts = answered
    service = facts["incidents"]["incident:INC-042"]["services"][0]
    answer = gm.query("Who owns the service that had INC-042?", mode="hybrid", k=5)
    assert answer.keys[0] == facts["services"][service]["team"], answer.keys


def test_a_described_kind_is_taken_next_to_what_the_question_names(answered: tuple[Graphmem, dict]) -> None:
    """"The incident that hit the notifications service" is the one AFFECTED links to that service,
    even when a text search found other incidents first."""
    gm, facts = answered
    q = next(q for q in facts["questions"] if q["id"] == "org-5")
    hit = [k for k, v in facts["incidents"].items() if v["services"] == ["service:notifications"]]
    answer = gm.query(q["question"], mode="hybrid", k=5)
    described = [k for k, why in answer.analysis["linked"].items() if why.startswith("the kind the question")]
    assert described == hit
    assert q["gold"][0] in answer.keys[:2], answer.keys


def test_hybrid_beats_each_single_retriever_on_the_example_questions(answered: tuple[Graphmem, dict]) -> None:
    gm, facts = answered

    def recall(mode: str) -> float:
        total = 0.0
        for q in facts["questions"]:
            keys = gm.query(q["question"], mode=mode, k=5).keys
            total += sum(1 for g in q["gold"] if found_at(keys, g)) / min(5, len(q["gold"]))
        return total / len(facts["questions"])

    scores = {mode: recall(mode) for mode in ("bm25", "vector", "graph", "hybrid")}
    assert scores["hybrid"] >= 0.8, scores
    assert scores["hybrid"] > max(scores["bm25"], scores["vector"]), scores


def test_answers_carry_sources_provenance_and_timings(answered: tuple[Graphmem, dict]) -> None:
    gm, _ = answered
    answer = gm.query("Which commit caused INC-042?", mode="hybrid", k=5)
    data = answer.as_dict()
    assert set(data) >= {"query", "mode", "results", "timings_ms"}
    assert set(data["timings_ms"]) >= {"bm25", "vector", "graph", "fusion", "rerank", "total"}
    assert len({r["key"] for r in data["results"]}) == len(data["results"]) == 5  # distinct keys
    for r in data["results"]:
        assert set(r) >= {"rank", "key", "kind", "score", "text", "source", "evidence", "retrievers"}
        assert set(r["source"]) == {"path", "start_line", "end_line", "commit"} and r["source"]["path"]
        assert r["provenance"]["extractor"] and r["text"]
        assert set(r["retrievers"]) == {"bm25", "vector", "graph"}
    assert data["results"][0]["kind"] == "commit"
    filtered = gm.query("billing invoices", mode="hybrid", k=5, kinds=["file"], path_prefix="services/billing/")
    assert filtered.results and all(h.kind == "file" and h.key.startswith("file:services/billing/")
                                    for h in filtered.results)
    for text in ("billing invoices", "tax rates from requests", "Which commit caused INC-042?"):
        scores = [h.score for h in gm.query(text, mode="hybrid", k=12).results]
        assert scores == sorted(scores, reverse=True), (text, scores)  # the score is the order
    # Entities have no text of their own: only the graph finds them, and it must be told they are asked for.
    held = [n.key for n in gm.store.iter_nodes() if n.kind is NodeKind.ENTITY]
    entities = gm.query("Which technologies does the ledger use?", mode="hybrid", k=5, kinds=["entity"])
    assert held and entities.results and all(h.kind == "entity" for h in entities.results), entities.keys


def test_status_and_doctor_find_and_repair_index_damage(answered: tuple[Graphmem, dict]) -> None:
    gm, _ = answered
    assert gm.check_indexes().ok
    vectors = gm.indexes.vectors
    victim = sorted(vectors.ids())[:3]
    vectors.remove(victim)
    vectors.save(gm.indexes.vectors_path)
    bm25 = gm.indexes.bm25
    bm25.add([(424242, "a document the graph does not hold")])
    bm25.save(gm.indexes.bm25_path)
    bad = gm.check_indexes()
    assert not bad.ok and bad.missing_vectors == victim and bad.extra_bm25 == [424242]
    result = gm.doctor(repair=True)
    assert result["repaired"]["added"] == 3 and result["after"]["ok"]
    assert gm.check_indexes().ok
    gm.indexes.vectors_path.write_bytes(b"garbage")
    assert gm.check_indexes().error
    assert gm.doctor(repair=True)["after"]["ok"]
    gm.indexes.reload()


def test_linking_survives_typos_and_paraphrase(answered: tuple[Graphmem, dict]) -> None:
    gm, facts = answered
    typo = gm.query("Who owns the notifcations service?", mode="graph", k=5)
    assert "service:notifications" in typo.analysis["linked"]
    assert any(h.key == "team:growth" for h in typo.results)
    paraphrase = gm.query("Which commit caused the incident where the ledger booked invoice entries twice?",
                          mode="hybrid", k=5)
    assert "incident:INC-031" in paraphrase.analysis["linked"]
    assert set(facts["incidents"]["incident:INC-031"]["caused_by"]) & set(paraphrase.keys)


def test_a_method_found_brings_its_class_for_which_class_questions(answered: tuple[Graphmem, dict]) -> None:
    """The class comes right after a method found by its words (BM25 alone links nothing), and
    takes the place of a method the question names: the class is the answer, the method the
    evidence, which fusion puts after the classes."""
    gm, _ = answered
    question = "Which class has the `finalize` method?"
    method = "sym:services/billing/invoices/service.py::InvoiceService.finalize"
    keys = gm.query(question, mode="bm25", k=5).keys
    assert method in keys and keys.index(method) + 1 == keys.index(method.rsplit(".", 1)[0]), keys
    named = gm.query(question, mode="hybrid", k=5)
    assert method in named.analysis["linked"]
    assert named.keys[0] == method.rsplit(".", 1)[0], named.keys
    assert not any(key.endswith(".finalize") for key in named.keys[:2]), named.keys


def test_modes_and_bad_requests(answered: tuple[Graphmem, dict]) -> None:
    gm, _ = answered
    from graphmem.errors import GraphmemError

    with pytest.raises(ConfigError, match="unknown mode"):
        gm.query("anything", mode="magic")
    with pytest.raises(GraphmemError):
        gm.query("   ")
    with pytest.raises(GraphmemError, match="question too long"):  # refused before any retriever reads it
        gm.query("billing retries " * 65536, mode="hybrid-rerank")
    hostile = gm.query("'; MATCH (n) DETACH DELETE n //", mode="hybrid", k=3)
    assert hostile.mode == "hybrid" and gm.store.counts().total_nodes > 0



def test_a_relationship_the_graph_holds_none_of_is_forgotten_with_its_direction_and_step() -> None:
    q = parse_question("Which functions call the function that parses the config?")
    assert q.relational and RelType.CALLS in q.rel_types
    q.keep_relationships({RelType.CALLS.value})
    assert q.relational and RelType.CALLS in q.rel_types  # held: kept
    q.keep_relationships({RelType.CONTAINS.value})
    assert not q.relational
    assert not q.rel_types and not q.directions and not q.main_rel_types and q.step is None


def _notes(tmp_path: Path, embedder: Any, files: dict[str, str]) -> Graphmem:
    """A project of markdown notes (no history, no code), ingested into the embedded store."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in files.items():
        (notes / name).write_text(text, encoding="utf-8")
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "notes", embedder=embedder, reranker=None)
    try:
        gm.ingest(notes)
    except BaseException:
        gm.close()
        raise
    return gm


def test_a_relationship_the_project_holds_none_of_is_not_asked_for(tmp_path: Path, embedder: Any) -> None:
    """Over notes without incidents, "what caused the entries to expire" names a relationship no
    edge has: the question asks for none, and the note that tells comes back."""
    gm = _notes(tmp_path, embedder, {
        "cache.md": "# Cache\n\nEntries expire after ten minutes because the store evicts them on a timer.\n",
        "retry.md": "# Retry policy\n\nClients retry three times.\n"})
    try:
        assert not gm.store.counts().rels.get(RelType.CAUSED_BY.value)
        assert RelType.CAUSED_BY in parse_question("What caused the cache entries to expire?").rel_types
        answer = gm.query("What caused the cache entries to expire?", mode="hybrid", k=3)
        assert RelType.CAUSED_BY.value not in answer.analysis["relationships"]
        assert answer.keys[0] == "doc:cache.md"
    finally:
        gm.close()


def test_a_kind_the_project_holds_none_of_is_not_asked_for(tmp_path: Path, embedder: Any) -> None:
    """Over notes without history, "when was the retry policy changed" cannot be answered by a
    commit: the question asks for no kind, and the note that tells comes back."""
    gm = _notes(tmp_path, embedder, {
        "retry.md": "# Retry policy\n\nThe retry policy was changed in March to back off exponentially "
                    "after the third failure.\n",
        "cache.md": "# Cache\n\nEntries expire after ten minutes.\n"})
    try:
        assert not gm.store.counts().nodes.get(NodeKind.COMMIT.value)
        assert parse_question("When was the retry policy changed?").answer_kinds == (NodeKind.COMMIT,)
        answer = gm.query("When was the retry policy changed?", mode="hybrid", k=3)
        assert answer.analysis["answer_kinds"] == []
        assert "doc:retry.md" in answer.keys
    finally:
        gm.close()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text("abcd", min_size=1, max_size=3),
                       st.sampled_from([0.0, 0.25, 1.0]) | st.floats(0.0, 1.0), max_size=60),
       st.integers(0, 15))
def test_the_walk_keeps_its_best_nodes_by_score_then_key(scores: dict[str, float], k: int) -> None:
    # Ties are common (a few repeated scores): the cut at the k-th score must keep them all.
    from graphmem.retrieval.graph.walk import _best

    assert _best(scores, k) == sorted(scores, key=lambda key: (-scores[key], key))[:k]
