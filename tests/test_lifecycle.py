"""The lifecycle of agent-written memory (graphmem.lifecycle): decay after simulated time, time to
live, dedup on write, consolidation, contradictions, superseded decisions ranked below their
successors, checkpoints and rollback, and erasure.

Every test that needs a store runs on the embedded store and on Neo4j (a real server; see
tests/conftest.py), each on a fresh project; the clock is passed in, nothing sleeps."""

from __future__ import annotations

import json
import math
import sqlite3
import time
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from graphmem import lifecycle, memory
from graphmem.api import Graphmem
from graphmem.config import LLMSettings, Settings
from graphmem.enrich import enrich, load_state
from graphmem.errors import GraphmemError, ModelError
from graphmem.lifecycle import LifecyclePolicy
from graphmem.mcp_server import Service
from graphmem.model import Node, Provenance, to_iso
from tests.llm_double import ChatDouble, naming

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def day(n: float) -> str:
    """The time ``n`` days after T0, as graphmem writes it."""
    return to_iso(T0 + timedelta(days=n))


@pytest.fixture(params=["embedded", "neo4j"])
def gm(request: pytest.FixtureRequest, tmp_path: Path, embedder: Any) -> Iterator[Graphmem]:
    """A Graphmem on a fresh project of each store, with two service nodes that memories can name."""
    home = tmp_path / "home"
    if request.param == "neo4j":
        store = request.getfixturevalue("neo4j_store_factory")("lifecycle")
        g = Graphmem(Settings(store="neo4j", home=home), store.project, store=store, embedder=embedder)
    else:
        g = Graphmem(Settings(store="embedded", home=home), "lifecycle", embedder=embedder)
        g.store.ensure_schema()
    prov = Provenance("graphmem.toml", "test", "1")
    g.store.upsert([Node("service:billing", "billing", prov), Node("service:ledger", "ledger", prov)], at=day(-30))
    yield g
    g.close()


def keys(items: list[dict[str, Any]]) -> list[str]:
    return [m["key"] for m in items]


def index_ids(g: Graphmem) -> tuple[set[int], set[int]]:
    """Chunk ids the BM25 and the vector index hold, as saved."""
    g.indexes.reload()
    return g.indexes.bm25.ids(), set(g.indexes.saved_vector_ids(from_disk=True))


# --- policy -------------------------------------------------------------------------------------


def test_the_policy_is_validated_when_made() -> None:
    policy = LifecyclePolicy(ttl_days={"fact": 30, "lesson": 90.5})
    assert policy.ttl_for("fact") == 30.0 and policy.ttl_for("convention") is None
    with pytest.raises(AttributeError):
        policy.decay_per_day = 1.0  # type: ignore[misc]
    for bad, message in (({"decay_per_day": -0.1}, "decay_per_day"),
                         ({"decay_per_day": math.nan}, "decay_per_day"),
                         ({"evergreen_kinds": frozenset({"rumour"})}, "unknown kinds"),
                         ({"ttl_days": {"rumour": 3}}, "unknown kind"),
                         ({"ttl_days": {"fact": 0}}, "time to live"),
                         ({"dedup_threshold": 1.5}, "dedup_threshold"),
                         ({"consolidate_threshold": 0.9, "dedup_threshold": 0.8}, "must not exceed"),
                         ({"flush_after_uses": 0}, "flush_after_uses")):
        with pytest.raises(ModelError, match=message):
            LifecyclePolicy(**bad)
    assert LifecyclePolicy.from_options(half_life_days=10, ttl=["fact=7"]).ttl_days == (("fact", 7.0),)
    with pytest.raises(ModelError, match="KIND=DAYS"):
        LifecyclePolicy.from_options(ttl=["fact"])


# --- use and decay ------------------------------------------------------------------------------


def test_uses_are_written_in_batches_and_decay_orders_memories(gm: Graphmem) -> None:
    store = gm.store
    policy = LifecyclePolicy(flush_after_uses=1000, flush_after_seconds=3600)  # only explicit flushes here
    used = memory.update_memory(store, "ops/deploy-window", "Deploys happen before 15:00 on weekdays", "user",
                                at=day(0)).key
    idle = memory.update_memory(store, "ops/flaky-suite", "The e2e suite is flaky on Mondays", "user",
                                at=day(0)).key
    convention = memory.update_memory(store, "style/logging", "Log with structured fields, never f-strings",
                                      "user", "convention", at=day(0)).key
    pinned = memory.update_memory(store, "ops/oncall", "The on-call rota lives in PagerDuty", "user",
                                  at=day(0)).key
    lifecycle.pin_memory(store, pinned)

    lifecycle.note_use(store, [used, "service:billing"], at=day(1), policy=policy)
    node = store.get_node(used)
    assert node is not None and "use_count" not in node.props  # deferred: nothing written yet
    assert lifecycle.flush_uses(store, policy=policy) == 1
    node = store.get_node(used)
    assert node is not None and node.props["use_count"] == 1 and node.props["last_used_at"] == day(1)

    listed = memory.list_memories(store, now=day(30), policy=policy)
    assert keys(listed)[:2] in ([convention, pinned], [pinned, convention])  # neither decays
    assert keys(listed)[2:] == [used, idle]  # used a day later, so it decayed a day less
    rel = {m["key"]: m["relevance"] for m in listed}
    assert rel[convention] == rel[pinned] == 1.0
    assert rel[used] == pytest.approx(math.exp(-policy.decay_per_day * 29), rel=1e-5)
    assert rel[idle] == pytest.approx(math.exp(-policy.decay_per_day * 30), rel=1e-5)

    # Forty days on the idle one is used twice and overtakes it.
    lifecycle.note_use(store, [idle], at=day(40), policy=policy)
    lifecycle.note_use(store, [idle], at=day(40), policy=policy)
    lifecycle.flush_uses(store, policy=policy)
    later = memory.list_memories(store, now=day(41), policy=policy)
    assert keys(later)[2:] == [idle, used]
    assert store.get_node(idle).props["use_count"] == 2  # type: ignore[union-attr]
    # The sweep writes the relevance on the node, for retrieval and Cypher.
    assert lifecycle.refresh_relevance(store, policy, day(41)) == 2
    assert store.get_node(idle).props["relevance"] == pytest.approx(  # type: ignore[union-attr]
        math.exp(-policy.decay_per_day), rel=1e-5)

    # What the MCP tools return counts as used (on the real clock): search_memory, get_memory_provenance,
    # get_node and search; memories only, and pending ones never.
    gm.sync_indexes()
    service = Service(gm.settings, gm.project)
    service._gm = gm
    tools = memory.MemoryTools(service)
    assert keys(tools.search_memory(query="deploys weekdays")["memories"]) == [used]
    tools.get_memory_provenance(idle)
    service.get_node(convention)
    service.get_node("service:billing")
    hits = service.search("structured fields f-strings logging", mode="bm25", k=3)["results"]
    assert hits[0]["key"] == convention
    assert lifecycle.flush_uses(store) == 3
    counts = {k: store.get_node(k).props.get("use_count") for k in (used, idle, convention)}  # type: ignore[union-attr]
    assert counts == {used: 2, idle: 3, convention: 2}
    assert "use_count" not in store.get_node("service:billing").props  # type: ignore[union-attr]


def test_a_full_buffer_is_written_by_a_thread_of_its_own(gm: Graphmem) -> None:
    store = gm.store
    key = memory.update_memory(store, "ops/cache-ttl", "The CDN caches invoices for ten minutes", "user").key
    policy = LifecyclePolicy(flush_after_uses=3, flush_after_seconds=3600)
    for _ in range(3):
        lifecycle.note_use(store, [key], policy=policy)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the flush runs on a thread of its own: wait for its write
        node = store.get_node(key)
        if node is not None and node.props.get("use_count") == 3:
            break
        time.sleep(0.05)
    assert store.get_node(key).props.get("use_count") == 3  # type: ignore[union-attr]


# --- time to live -------------------------------------------------------------------------------


def test_expired_memories_close_at_their_expiry(gm: Graphmem) -> None:
    store = gm.store
    policy = LifecyclePolicy(ttl_days={"fact": 10})
    fact = memory.update_memory(store, "billing/promo", "The spring promo code works until further notice",
                                "user", about=["service:billing"], at=day(0)).key
    lesson = memory.update_memory(store, "billing/lesson", "Promo codes need a test per currency", "user",
                                  "lesson", at=day(0)).key
    pinned = memory.update_memory(store, "billing/vat", "VAT is computed per line", "user", at=day(0)).key
    lifecycle.pin_memory(store, pinned)
    gm.sync_indexes()
    chunk = store.get_chunks([fact])[0].id
    assert lifecycle.expire(store, policy, day(9)) == []
    assert lifecycle.expire(store, policy, day(11)) == [fact]
    node = store.get_node(fact)
    assert node is not None and node.valid_to == day(10) and node.props["status"] == "expired"
    history = memory.get_memory_provenance(store, fact)
    assert history["versions"][-1]["status"] == "expired" and history["versions"][-1]["valid_to"] == day(10)
    assert "10 days" in history["untrusted_reason"]
    assert [r for r in store.get_relationships([fact]) if r.src == fact] == []  # closed with it, not deleted
    assert [r.dst for r in store.get_relationships([fact], as_of=day(5)) if r.src == fact] == ["service:billing"]
    assert {lesson, pinned} <= set(keys(memory.list_memories(store)))
    gm.sync_indexes()
    assert chunk not in index_ids(gm)[0] and chunk not in index_ids(gm)[1]
    assert lifecycle.expire(store, policy, day(30)) == []  # closed already; nothing else expires


# --- dedup on write -----------------------------------------------------------------------------


def test_a_near_identical_write_counts_an_observation(gm: Graphmem) -> None:
    store = gm.store
    first = memory.update_memory(store, "billing/pdfs", "Invoice PDFs are rendered by the billing worker, not by "
                                 "the API.", "user:ana@acme.dev", about=["service:billing"], at=day(0))
    again = memory.update_memory(store, "notes/pdf-rendering", "invoice PDFs are rendered by the billing worker -- "
                                 "not by the API", "agent:claude", about=["service:billing"], at=day(2))
    assert again.deduplicated and again.key == first.key and again.observations == 2
    assert again.as_dict()["deduplicated"] is True and "near-identical" in again.note
    assert store.get_node("memory:notes/pdf-rendering") is None  # no new memory
    node = store.get_node(first.key)
    assert node is not None and node.props["observations"] == 2 and node.props["last_observed_at"] == day(2)
    assert node.props["observed_sources"] == ["agent:claude"]
    assert node.props["value"].endswith("not by the API.")  # the first wording stays

    # What differs in a negation, a number, the kind or what it names is another memory.
    negated = memory.update_memory(store, "notes/pdf-2", "Invoice PDFs are rendered by the billing worker, and by "
                                   "the API.", "agent", about=["service:billing"], at=day(3))
    other_kind = memory.update_memory(store, "notes/pdf-3", "Invoice PDFs are rendered by the billing worker, not "
                                      "by the API.", "agent", "lesson", about=["service:billing"], at=day(3))
    elsewhere = memory.update_memory(store, "notes/pdf-4", "Invoice PDFs are rendered by the billing worker, not by "
                                     "the API.", "agent", about=["service:ledger"], at=day(3))
    assert not (negated.deduplicated or other_kind.deduplicated or elsewhere.deduplicated)
    assert {negated.key, other_kind.key, elsewhere.key} <= set(keys(memory.list_memories(store)))
    # More observations weigh more: the observed memory ranks first among equally recent ones.
    listed = {m["key"]: m for m in memory.list_memories(store, now=day(3))}
    assert listed[first.key]["observations"] == 2
    assert listed[first.key]["relevance"] > listed[negated.key]["relevance"]
    # A keyed fact repeats only with the same value.
    memory.update_memory(store, "limits/batch", "AppendBatch takes at most 500 entries", "user",
                         subject="ledger/batch-limit", at=day(4))
    same = memory.update_memory(store, "limits/batch-again", "AppendBatch takes at most 500 entries.", "agent",
                                subject="Ledger/Batch-Limit", at=day(5))
    assert same.deduplicated and same.key == "memory:limits/batch"


# --- consolidation ------------------------------------------------------------------------------

FLAKY = ["test_refund_timeout fails when the payments sandbox is slow; rerun it once before debugging",
         "test_refund_timeout fails when the payments sandbox is slow, so rerun it once",
         "When the payments sandbox is slow, test_refund_timeout fails: retry the test before debugging anything"]


def test_a_sweep_consolidates_similar_memories_and_merges_duplicates(gm: Graphmem) -> None:
    store = gm.store
    policy = LifecyclePolicy()
    words = [lifecycle.words(t) for t in FLAKY]
    assert policy.consolidate_threshold <= lifecycle.jaccard(words[0], words[1]) < policy.dedup_threshold
    originals = [memory.update_memory(store, f"ci/flaky-{i}", text, "agent", "lesson", at=day(i)).key
                 for i, text in enumerate(FLAKY)]
    other = memory.update_memory(store, "ci/exports", "Ledger exports run nightly at two and take forty minutes",
                                 "agent", "lesson", at=day(0)).key
    # Two copies written without dedup (as older versions of graphmem did): the sweep folds them.
    older = memory.update_memory(store, "ops/tz", "Cron schedules are in UTC", "user", at=day(0), dedup=False).key
    copy = memory.update_memory(store, "ops/tz-2", "cron schedules are in UTC.", "agent", at=day(1), dedup=False).key
    decision = memory.update_memory(store, "ci/decision", FLAKY[0], "user", "decision", at=day(0)).key
    memory.approve(store, decision, "ana@acme.dev", at=day(0))

    report = lifecycle.sweep(gm, policy, day(4))
    counts = report.as_dict()["counts"]
    assert counts["consolidated"] == 1 and counts["archived"] == 3 and counts["merged_duplicates"] == 1
    assert report.merged_duplicates == [copy] and sorted(report.archived) == sorted(originals)
    assert report.checkpoint and report.checkpoint.startswith("auto-")
    (merged,) = report.consolidated
    node = store.get_node(merged)
    assert node is not None and node.valid_to is None and node.props["memory_kind"] == "lesson"
    for text in FLAKY:  # nothing lost
        assert text in node.props["value"]
    assert node.props["observations"] == 3
    assert sorted(node.props["consolidates"]) == sorted(f"{k}@v1" for k in originals)
    for key in originals:
        old = store.get_node(key)
        assert old is not None and old.valid_to == day(4) and old.props["status"] == "consolidated"
        assert old.props["consolidated_into"] == f"{merged}@v1"
        assert memory.get_memory_provenance(store, key)["versions"][0]["untrusted_value"] in FLAKY
    assert store.get_node(copy).props["consolidated_into"] == f"{older}@v1"  # type: ignore[union-attr]
    assert store.get_node(older).props["observations"] == 2  # type: ignore[union-attr]
    open_now = set(keys(memory.list_memories(store)))
    assert {merged, other, older, decision} <= open_now and not open_now & set(originals + [copy])
    # Listed with the closed ones, each original comes right after the memory it went into.
    listed = keys(memory.list_memories(store, include_closed=True, now=day(4)))
    assert listed.index(merged) < min(listed.index(k) for k in originals)
    assert listed.index(older) + 1 == listed.index(copy)
    # The indexes follow: the consolidated text is found, the originals' chunks are gone.
    bm25, vectors = index_ids(gm)
    assert bm25 == vectors == {c.id for c in store.iter_chunks()}
    assert gm.query("payments sandbox slow rerun", mode="bm25", k=3).keys[0] == merged
    again = lifecycle.sweep(gm, policy, day(5))
    assert again.as_dict()["counts"] | {"decayed": 0} == {"expired": 0, "merged_duplicates": 0, "consolidated": 0,
                                                          "archived": 0, "decayed": 0}


# --- contradictions and superseded decisions ----------------------------------------------------


def test_a_contradiction_closes_the_older_memory_and_flags_the_pair(gm: Graphmem) -> None:
    store = gm.store
    old = memory.update_memory(store, "ledger/limit-a", "AppendBatch takes at most 500 entries", "user",
                               subject="ledger/batch-limit", about=["service:billing"], at=day(0))
    new = memory.update_memory(store, "ledger/limit-b", "AppendBatch takes at most 1000 entries since PAY-77",
                               "agent", subject="ledger/batch-limit", at=day(3))
    assert new.contradicted == [f"{old.key}@v1"] and "contradicted" in new.note
    closed = store.get_node(old.key)
    assert closed is not None and closed.valid_to == day(3) and closed.props["status"] == "contradicted"
    assert closed.props["contradicted_by"] == f"{new.key}@v1"
    assert store.get_node(new.key).props["contradicts"] == [f"{old.key}@v1"]  # type: ignore[union-attr]
    assert memory.get_memory_provenance(store, old.key)["untrusted_reason"] == \
        f"contradicted by {new.key}@v1 (same subject)"
    assert old.key not in keys(memory.list_memories(store))
    both = memory.list_memories(store, include_closed=True, query="AppendBatch entries")
    assert keys(both)[:2] == [new.key, old.key]
    assert both[0]["contradicts"] == [f"{old.key}@v1"] and both[1]["contradicted_by"] == f"{new.key}@v1"
    gm.sync_indexes()
    assert gm.query("AppendBatch at most entries", mode="bm25", k=5).keys[0] == new.key
    # Over MCP, search shows the one in force citing the one it closed, whose record get_node reads.
    service = Service(gm.settings, gm.project)
    service._gm = gm
    hit = service.search("AppendBatch at most entries", mode="bm25", k=5)["results"][0]
    assert hit["key"] == new.key and hit["contradicts"] == [f"{old.key}@v1"]
    record = service.get_node(f"{old.key}@v1")["node"]
    assert record["valid_to"] == day(3) and "500 entries" in json.dumps(record)
    # Another kind on the same subject, or the same key written again, contradicts nothing.
    lesson = memory.update_memory(store, "ledger/limit-lesson", "AppendBatch limits changed twice in 2026", "agent",
                                  "lesson", subject="ledger/batch-limit", at=day(4))
    assert lesson.contradicted == [] and store.get_node(new.key).valid_to is None  # type: ignore[union-attr]
    with pytest.raises(ModelError, match="no memory of kind fact"):
        memory.update_memory(store, "ledger/x", "text", "user", replaces="ledger/limit-lesson")


def test_a_superseded_decision_ranks_below_the_one_that_replaced_it(gm: Graphmem) -> None:
    store = gm.store
    first = memory.update_memory(store, "ledger/transport", "Ledger entries go through Kafka topics: Kafka for every "
                                 "ledger entry", "user", "decision", at=day(0)).key
    memory.approve(store, first, "ana@acme.dev", at=day(0))
    second = memory.update_memory(store, "ledger/transport-2", "Ledger entries go through the outbox table",
                                  "user", "decision", replaces=first, confidence=0.5, at=day(5))
    assert second.status == "pending" and store.get_node(first).valid_to is None  # type: ignore[union-attr]
    approved = memory.approve(store, second.key, "bo@acme.dev", at=day(6))
    assert approved.contradicted == [f"{first}@v1"]
    node = store.get_node(first)
    assert node is not None and node.valid_to == day(6) and node.props["contradicted_by"] == f"{second.key}@v1"
    assert memory.get_memory_provenance(store, first)["untrusted_reason"] == f"replaced by {second.key}@v1"
    # The old decision matches the question better and was more confident, yet it comes second.
    listed = memory.list_memories(store, kinds=["decision"], query="Kafka ledger entries", include_closed=True)
    assert listed[0]["score"] < listed[1]["score"] and keys(listed) == [second.key, first]
    assert keys(memory.list_memories(store, kinds=["decision"])) == [second.key]


# --- checkpoints and rollback -------------------------------------------------------------------


def test_rollback_restores_graph_and_indexes_to_the_checkpoint_exactly(gm: Graphmem) -> None:
    store = gm.store
    memory.update_memory(store, "billing/retries", "Retries of the billing service reuse the idempotency key",
                         "user", "convention", about=["service:billing"], at=day(0))
    memory.update_memory(store, "billing/retries", "Retries reuse the Idempotency-Key header (billing)", "user",
                         "convention", about=["service:billing"], at=day(1))  # v1 closed, with its MENTIONS
    memory.update_memory(store, "billing/owner", "The payments team owns service:billing", "user", at=day(1))
    memory.ingest_incident(store, "Invoices were sent twice after a retry storm", "SEV2",
                           ["Retry storms need a circuit breaker"], incident_id="INC-900",
                           affected=["service:billing"], source="user", at=day(2))
    memory.update_memory(store, "billing/old", "Invoices were numbered per service:billing shard", "user", at=day(1))
    memory.invalidate_memory(store, "billing/old", "numbering is global now", at=day(2))  # closed: no sources left
    gm.sync_indexes()
    saved = lifecycle.checkpoint(gm, "before-batch", now=day(2))
    # two versions of one memory, another, a closed one with its version, an incident and its lesson
    assert (saved["nodes"], saved["chunks"]) == (7, 4)
    before = lifecycle.identity(lifecycle.snapshot(store))
    ids_before = index_ids(gm)
    assert ids_before[0] == ids_before[1] == {c[0] for c in before["chunks"]}

    # A bad batch: new memories, a new version, a memory closed, a contradiction.
    memory.update_memory(store, "billing/retries", "Retries never reuse keys", "agent", "convention", at=day(3))
    memory.update_memory(store, "junk/a", "The billing service is written in COBOL", "agent", at=day(3))
    memory.update_memory(store, "junk/b", "Nobody owns service:billing", "agent", subject="billing/owner", at=day(3))
    memory.update_memory(store, "junk/c", "The payments team owns nothing", "agent", subject="billing/owner",
                         at=day(3))
    memory.invalidate_memory(store, "billing/owner", "wrong", at=day(3))
    gm.sync_indexes()
    assert lifecycle.identity(lifecycle.snapshot(store)) != before

    result = lifecycle.rollback(gm, to="before-batch")
    assert result["exact"] and result["rels_not_restored"] == 0 and result["saved_before"].startswith("auto-")
    assert lifecycle.identity(lifecycle.snapshot(store)) == before
    assert index_ids(gm) == ids_before and gm.check_indexes().ok
    assert store.get_node("memory:junk/a") is None and store.get_node("memory:junk/c") is None
    current = store.get_node("memory:billing/retries")
    assert current is not None and current.props["version"] == 2 and current.valid_to is None
    assert store.get_node("memory:billing/retries@v1").valid_to == day(1)  # type: ignore[union-attr]
    assert gm.query("Retries reuse Idempotency-Key header", mode="bm25", k=1).keys == ["memory:billing/retries"]
    assert "service:billing" in {r.dst for r in store.get_relationships(["memory:billing/owner"])}

    # The state the rollback replaced was saved: rolling back to it undoes the rollback.
    undo = lifecycle.rollback(gm, to=result["saved_before"])
    assert undo["exact"] and store.get_node("memory:junk/a") is not None
    # --since goes back to the newest checkpoint saved before the date.
    since = lifecycle.rollback(gm, since=day(3)[:10])
    assert since["checkpoint"] == "before-batch" and lifecycle.identity(lifecycle.snapshot(store)) == before
    with pytest.raises(GraphmemError, match="no checkpoint was saved before"):
        lifecycle.rollback(gm, since="2025-01-01")
    with pytest.raises(GraphmemError, match="no checkpoint 'nope'"):
        lifecycle.rollback(gm, to="nope")


# --- erasure ------------------------------------------------------------------------------------

DANA = "dana.k@contractor.example"
SECRET_WORD = "zebrafishprotocol"


def home_bytes(home: Path) -> list[tuple[Path, bytes]]:
    """Every file under the home, and every member of each zip (``.npz``) decompressed."""
    out = []
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out.append((path, data))
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                out += [(path / name, z.read(name)) for name in z.namelist()]
    return out


def test_erasure_leaves_no_trace_of_the_person(gm: Graphmem, tmp_path: Path) -> None:
    from graphmem.retrieval.indexes import document_text, text_digest

    store = gm.store
    home = gm.settings.home
    theirs = [memory.update_memory(store, "ops/fish", f"The {SECRET_WORD} runbook restarts billing workers "
                                   "one by one", f"user:{DANA}", about=["service:billing"], at=day(0)).key,
              memory.update_memory(store, "ops/fish-2", f"Ask before running the {SECRET_WORD} drills", "agent",
                                   agent=DANA, at=day(0)).key]
    memory.update_memory(store, "ops/fish", f"The {SECRET_WORD} runbook restarts billing workers two at a time",
                         f"user:{DANA}", about=["service:billing"], at=day(1))  # a second version of theirs
    theirs.append(memory.update_memory(store, "ops/fish-3", f"The {SECRET_WORD} pager is muted at night",
                                       f"user:{DANA}", at=day(0)).key)
    memory.invalidate_memory(store, theirs[-1], "unmuted", at=day(1))  # closed: its node has no sources left
    memory.ingest_incident(store, f"The {SECRET_WORD} drill paged everyone", "SEV3", [], incident_id="INC-901",
                           source=f"user:{DANA}", at=day(1))
    kept = memory.update_memory(store, "ops/restarts", "Billing workers restart one at a time during deploys",
                                "user:ana@acme.dev", about=["service:billing"], at=day(0)).key
    repeat = memory.update_memory(store, "ops/restarts-dana", "billing workers restart one at a time during deploys",
                                  f"user:{DANA}", about=["service:billing"], at=day(1))
    assert repeat.deduplicated and repeat.key == kept  # their observation sits on ana's memory
    decision = memory.update_memory(store, "ops/freeze", "No deploys on Fridays", "user:ana@acme.dev", "decision",
                                    at=day(0)).key
    memory.approve(store, decision, DANA, at=day(1))  # they reviewed it
    gm.sync_indexes()
    # An LLM (the local double) reads their incident: an entity named from it, its answer cached.
    with ChatDouble(naming([("Zebrafishprotocol", "technology")])) as double:
        llm = LLMSettings(base_url=double.url, model="double", backoff=0.01)
        enriched = enrich(store, replace(gm.settings, llm=llm), kinds=["incident"])
    entity = f"entity:technology:{SECRET_WORD}"
    assert enriched.complete and store.get_node(entity) is not None
    lifecycle.checkpoint(gm, "with-dana", now=day(1))
    digests = {text_digest(document_text(c)) for c in store.get_chunks(theirs + ["incident:INC-901"])}
    assert len(digests) == 3
    # A snapshot of the graph (the embedded store's) holds them too until a write deletes it.
    assert store.save_snapshot() == (gm.settings.store == "embedded")
    assert any(DANA.encode() in data for _, data in home_bytes(home))  # the scan below can see it

    report = lifecycle.erase(gm, person=DANA.upper(), by="privacy-officer", now=day(2))
    assert report["memories"] == 3 and report["incidents"] == 1 and report["chunks_removed"] == 3
    assert store.get_node(entity) is None and load_state(store) == {}
    assert report["checkpoints_rewritten"] == 1 and report["cache_entries_removed"] >= 3

    # The graph: no node, relationship or chunk of theirs, nothing naming them.
    nodes = list(store.iter_nodes(include_closed=True))
    blob = json.dumps([[n.key, n.name, n.props, n.sources] for n in nodes]
                      + [[r.src, r.dst, r.props, r.sources] for r in store.iter_rels(include_closed=True)]
                      + [[c.node_key, c.text] for c in store.iter_chunks()]).lower()
    assert DANA not in blob and SECRET_WORD not in blob
    assert not {n.key for n in nodes} & {*theirs, "memory:ops/fish@v1", "incident:INC-901"}
    # What others wrote stays, without them in it.
    ana = store.get_node(kept)
    assert ana is not None and ana.valid_to is None and ana.props["observations"] == 1
    assert "observed_sources" not in ana.props
    assert memory.get_memory_provenance(store, decision)["versions"][0]["approved_by"] == "[erased]"
    # The indexes hold the graph's chunks and no word of theirs.
    bm25, vectors = index_ids(gm)
    assert bm25 == vectors == {c.id for c in store.iter_chunks()} and gm.check_indexes().ok
    assert gm.indexes.bm25.search(SECRET_WORD, k=5) == []
    # The embedding caches no longer hold vectors of their texts.
    for path in (home / "cache" / "embeddings").glob("*.sqlite"):
        db = sqlite3.connect(path)
        try:
            left = db.execute(f"SELECT count(*) FROM vectors WHERE digest IN ({','.join('?' * len(digests))})",
                              sorted(digests)).fetchone()[0]
        finally:
            db.close()
        assert left == 0, path
    # Not a byte under the home names them or holds their words, the erasure log included.
    for path, data in home_bytes(home):
        low = data.lower()
        assert DANA.encode() not in low and SECRET_WORD.encode() not in low, path
    log = [json.loads(line) for line in Path(report["log"]).read_text().splitlines()]
    assert log[-1]["selector"] == "person" and log[-1]["selector_digest"] == lifecycle.erasure_digest(DANA)
    assert log[-1]["by"] == "privacy-officer" and log[-1]["memories"] == 3
    # A rollback to a checkpoint taken before the erasure does not bring them back.
    lifecycle.rollback(gm, to="with-dana")
    assert store.get_node("memory:ops/fish") is None and store.get_node(kept) is not None
    for path, data in home_bytes(home):
        assert DANA.encode() not in data.lower(), path


def test_erasure_by_source(gm: Graphmem) -> None:
    store = gm.store
    bot = memory.update_memory(store, "ci/bot-note", "The nightly job retries three times", "agent:nightly-bot",
                               at=day(0)).key
    person = memory.update_memory(store, "ci/person-note", "Nightly failures go to #ci-alerts", "user",
                                  at=day(0)).key
    gm.sync_indexes()
    report = lifecycle.erase(gm, source="agent:nightly-bot", now=day(1))
    assert report["memories"] == 1 and store.get_node(bot) is None and store.get_node(person) is not None
    # A person is their whole address: erasing bo@ leaves rabo@, and what others wrote about bo.
    bos = memory.update_memory(store, "ci/bo", "Bo's nightly notes", "user:bo@acme.dev", at=day(0)).key
    rabo = memory.update_memory(store, "ci/rabo", "Rabo's nightly notes", "user:rabo@acme.dev", at=day(0)).key
    about_bo = memory.update_memory(store, "ci/ask-bo", "Ask bo@acme.dev about the nightly job", "user:ana@acme.dev",
                                    at=day(0)).key
    report = lifecycle.erase(gm, person="bo@acme.dev", now=day(1))
    assert report["memories"] == 1 and store.get_node(bos) is None
    assert store.get_node(rabo) is not None and report["still_named_by_others"] == [about_bo]
    assert "ci/ask-bo" not in Path(report["log"]).read_text()
    with pytest.raises(GraphmemError, match="either --person"):
        lifecycle.erase(gm)
    with pytest.raises(ModelError, match="e-mail"):
        lifecycle.erase(gm, person="not-an-address")


# --- command line -------------------------------------------------------------------------------


def test_the_lifecycle_commands(tmp_path: Path, embedder: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from graphmem.cli import main

    home = tmp_path / "home"
    with Graphmem(Settings(store="embedded", home=home), "acme", embedder=embedder) as g:
        g.store.ensure_schema()
        for i, text in enumerate(FLAKY):
            memory.update_memory(g.store, f"ci/flaky-{i}", text, "agent", "lesson", at=day(i))
        memory.update_memory(g.store, "ci/by-bot", "The bot writes this", "agent:bot", at=day(0))
        g.sync_indexes()

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--home", str(home), "--project", "acme", "memory", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, err = run("checkpoint", "start")
    assert code == 0, err
    saved = out.strip().removeprefix("checkpoint start: ")
    assert saved.endswith(" chunks") and " relationships, " in saved, out
    listed = [line for line in run("checkpoints")[1].splitlines() if line.startswith("start  ")]
    assert len(listed) == 1 and listed[0].endswith(f"  {saved}"), listed  # the same counts as when saved
    code, out, err = run("sweep", "--json", "--ttl", "fact=100000")
    assert code == 0, err
    counts = json.loads(out)["counts"]
    assert counts["consolidated"] == 1 and counts["archived"] == 3 and counts["expired"] == 0
    assert "consolidated into: memory:consolidated/lesson-" in run("list", "--include-closed")[1]
    names = [c["name"] for c in json.loads(run("checkpoints", "--json")[1])["checkpoints"]]
    assert "start" in names and any(n.startswith("auto-") for n in names)
    code, out, err = run("rollback", "--to", "start", "--json")
    assert code == 0 and json.loads(out)["exact"] is True, err
    assert "consolidated" not in run("list")[1]
    for args, message in ((("rollback", "--to", "missing"), "no checkpoint 'missing'"),
                          (("rollback",), "either --to"),
                          (("erase", "--source", "agent:bot"), "add --yes"),
                          (("sweep", "--ttl", "fact"), "KIND=DAYS"),
                          (("checkpoint", "start"), "exists")):
        code, out, err = run(*args)
        assert code == 1 and message in err and len(err.strip().splitlines()) == 1, (args, err)
    # A damaged checkpoint file is listed with what is wrong and refused, one line; nothing changes.
    (home / "acme" / "lifecycle" / "checkpoints" / "broken.json").write_text('{"format": 1, "nodes": [{"key": ')
    (home / "acme" / "lifecycle" / "checkpoints" / "other.json").write_bytes(b"\xff\xfe\x00binary")
    listed = {c["name"]: c for c in json.loads(run("checkpoints", "--json")[1])["checkpoints"]}
    assert "cannot be read" in listed["broken"]["error"] and "cannot be read" in listed["other"]["error"]
    before = run("list", "--json")[1]
    for name in ("broken", "other"):
        code, out, err = run("rollback", "--to", name)
        assert code == 1 and "cannot be read" in err and len(err.strip().splitlines()) == 1, err
    assert run("list", "--json")[1] == before
    readable = {name for name, c in listed.items() if "error" not in c}
    code, out, err = run("erase", "--source", "agent:bot", "--yes", "--json")
    assert code == 0 and json.loads(out)["memories"] == 1, err
    assert json.loads(out)["damaged_checkpoints_removed"] == 2  # it may hold what was erased; no rollback can use it
    assert {c["name"] for c in json.loads(run("checkpoints", "--json")[1])["checkpoints"]} == readable
    assert json.loads(run("pin", "ci/flaky-0", "--json")[1]) == {"key": "memory:ci/flaky-0", "pinned": True}
