"""LLM extraction and enrichment against a local chat completions server (tests/llm_double.py).

The server is the only double: stores, cache and the ingest pipeline are the real ones. Each test
checks what users rely on: ingestion always completes with the deterministic graph intact,
enrichment adds only entities the text names, failures are reported per source, and nothing is
paid for twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from extractors.llm import (
    PROMPT_VERSION,
    AnswerCache,
    Entity,
    InvalidAnswer,
    LLMExtractor,
    Relation,
    ground,
    parse_answer,
)
from graphmem.config import LLMSettings, Settings
from graphmem.enrich import (
    SourceExtraction,
    collect_units,
    enrich,
    load_state,
    write_extractions,
)
from graphmem.errors import ConfigError
from graphmem.ingest import ingest
from graphmem.model import Chunk, Node, Provenance, RelType
from tests.llm_double import ChatDouble, Reply, is_repair, naming, refused_url, text_of

REPO = Path(__file__).resolve().parents[1]
MODEL = "test-model"

KNOWN = [("Kafka", "technology"), ("ledger", "service"), ("billing", "service"), ("Redis", "datastore"),
         ("idempotency keys", "concept"), ("InvoiceHandler", "code_symbol"), ("EventPublisher", "code_symbol"),
         ("eventually consistent", "concept")]
RELATIONS = [("billing", "publishes entries to", "Kafka"), ("ledger", "consumes entries from", "Kafka"),
             ("Kafka", "replaces", "Oracle")]
ABSENT = [("Oracle", "datastore")]  # named in every answer, in no text: must never reach the graph


def llm(url: str, model: str = MODEL, **kw: Any) -> LLMSettings:
    """Settings for the double: short timeouts and backoff keep failure tests fast."""
    options: dict[str, Any] = {"timeout": 2.0, "max_retries": 2, "backoff": 0.01, "backoff_max": 2.0,
                               "concurrency": 4}
    options.update(kw)
    return LLMSettings(base_url=url, model=model, **options)


def settings(home: Path, url: str, **kw: Any) -> Settings:
    return Settings(home=home, llm=llm(url, **kw))


def snapshot(store: Any) -> tuple[list, list, list]:
    """Every node, relationship and chunk, open or closed, with its properties and provenance."""
    nodes = sorted((n.key, n.name, json.dumps(n.props, sort_keys=True), n.valid_to, n.provenance.extractor,
                    n.sources) for n in store.iter_nodes(include_closed=True))
    rels = sorted((r.src, r.type.value, r.dst, json.dumps(r.props, sort_keys=True), r.valid_to,
                   r.provenance.extractor, r.sources) for r in store.iter_rels(include_closed=True))
    chunks = sorted((c.id, c.text) for c in store.iter_chunks())
    return nodes, rels, chunks


def llm_rels(store: Any) -> list[Any]:
    return [r for r in store.iter_rels() if r.provenance.extractor == "llm"]


@pytest.fixture
def acme(example_org: tuple[Path, dict], tmp_path: Path, embedded_store_factory: Callable[[str], Any]) -> Any:
    """The example organisation ingested without an LLM (embedded store)."""
    store = embedded_store_factory("acme")
    ingest(example_org[0], store, cache_dir=tmp_path / "cache")
    return store


# --- answers and grounding ----------------------------------------------------------------------


def test_grounding_keeps_only_names_the_text_contains() -> None:
    text = "Billing publishes to the Kafka\n   topic; the `ledger.entries` stream feeds Postgres-backed ledgers."
    out = ground(
        [Entity("kafka topic", "component", 0.9), Entity("Kafka", "technology", 0.8),
         Entity("Oracle", "datastore", 0.9), Entity("ledger", "service", 0.9), Entity("Postgres", "datastore", 0.7),
         Entity("Post", "concept", 0.9)],
        [Relation("Kafka", "replaces", "Oracle"), Relation("kafka topic", "feeds", "Postgres"),
         Relation("Kafka", "is", "kafka")],
        text)
    found = {e.name: e for e in out.entities}
    # Case and whitespace do not matter: the name is the text's, the mention exactly as written.
    topic = found["Kafka topic"]
    assert topic.mention == "Kafka\n   topic" == text[topic.start:topic.end] and topic.type == "component"
    assert text[found["Postgres"].start:found["Postgres"].end] == "Postgres"
    assert text[found["ledger"].start:found["ledger"].end + 8] == "ledger.entries"
    # Absent names are dropped, and so are names found only inside a longer word.
    assert out.dropped_entities == ["Oracle", "Post"]
    assert [(r.subject, r.object) for r in out.relations] == [("Kafka topic", "Postgres")]
    assert out.dropped_relations == 2  # one to a dropped entity, one to itself


def test_answers_are_validated_and_fenced_json_is_accepted() -> None:
    fenced = '```json\n{"entities": [{"name": "Kafka", "type": "Technology", "confidence": 0.7}]}\n```'
    answer, problems = parse_answer(fenced)
    assert answer.entities == [Entity("Kafka", "technology", 0.7)] and not problems
    with pytest.raises(InvalidAnswer, match="not valid JSON"):
        parse_answer('{"entities": [')
    with pytest.raises(InvalidAnswer, match="is not one of"):
        parse_answer('{"entities": [{"name": "Kafka", "type": "spaceship", "confidence": 1}]}')
    # With no repair left, malformed items are dropped and the rest is kept.
    answer, problems = parse_answer('{"entities": [{"name": "Kafka", "type": "spaceship"}, '
                                    '{"name": "Redis", "type": "datastore", "confidence": 0.6}]}', final=True)
    assert answer.entities == [Entity("Redis", "datastore", 0.6)] and len(problems) == 1


def test_text_is_redacted_before_it_is_sent(tmp_path: Path) -> None:
    secret = "AKIA" + "Q7ZK4M2XW9RTB3LD"
    with ChatDouble(naming(KNOWN)) as double:
        extractor = LLMExtractor(llm(double.url), tmp_path)
        result = extractor.extract("commit", f"Rotate the Kafka credentials; old key {secret} is revoked.")
        extractor.close()
    sent = text_of(double.requests[0])
    assert secret not in json.dumps(double.requests[0]) and "[REDACTED:" in sent
    assert result.text == sent and [e.name for e in result.answer.entities] == ["Kafka"]
    assert double.requests[0]["response_format"]["type"] == "json_schema"


# --- enrichment ---------------------------------------------------------------------------------


def test_enrichment_adds_grounded_entities_and_leaves_the_deterministic_graph(acme: Any, tmp_path: Path) -> None:
    store = acme
    before = store.counts()
    nodes_before, rels_before, chunks_before = snapshot(store)
    with ChatDouble(naming(KNOWN, RELATIONS, extra=ABSENT)) as double:
        report = enrich(store, settings(tmp_path / "home", double.url))
    assert report.complete and report.units == len(collect_units(store)) > 50
    assert report.called + report.from_cache == report.units
    after = store.counts()
    # Nothing deterministic changed: every node but entities, every relationship an extractor
    # other than the LLM wrote, every chunk.
    nodes_now, rels_now, chunks_now = snapshot(store)
    assert [n for n in nodes_now if not n[0].startswith("entity:")] == \
        [n for n in nodes_before if not n[0].startswith("entity:")]
    assert [r for r in rels_now if r[5] != "llm"] == rels_before
    assert chunks_now == chunks_before
    assert {k: v for k, v in after.nodes.items() if k != "entity"} == \
        {k: v for k, v in before.nodes.items() if k != "entity"}

    mentions = {(r.src, r.dst): r for r in llm_rels(store) if r.type is RelType.MENTIONS}
    targets = {dst for _, dst in mentions}
    # Names of what the graph holds link to it instead of duplicating it.
    assert "service:ledger" in targets and "entity:service:ledger" not in targets
    assert any(t.startswith("sym:") and t.endswith("::InvoiceHandler") for t in targets)
    assert store.get_node("entity:datastore:redis") is None  # Redis is the gazetteer's technology
    assert "entity:concept:idempotency keys" in targets
    assert store.get_node("entity:concept:idempotency keys").provenance.extractor == "llm"
    # What a deterministic extractor already states stays theirs, not doubled or overwritten.
    adr_kafka = [r for r in store.iter_rels() if (r.src, r.dst) == ("adr:5", "entity:technology:kafka")]
    assert [r.provenance.extractor for r in adr_kafka] == ["adr"]
    # Names absent from the text are dropped, with the relationships that need them.
    assert not [n for n in store.iter_nodes(include_closed=True) if "oracle" in n.key]
    assert report.written.dropped_entities >= report.units and report.written.dropped_relations > 0
    related = {(r.src, r.dst): r for r in llm_rels(store) if r.type is RelType.RELATED_TO}
    assert related[("service:billing", "entity:technology:kafka")].props["predicate"] == "publishes entries to"
    assert not any("oracle" in k for pair in related for k in pair)

    # Spans point at the mention in the chunk or field the text came from; provenance says llm.
    adr5 = mentions[("adr:5", "entity:concept:eventually consistent")]
    chunk = {c.ordinal: c for c in store.get_chunks(["adr:5"])}[adr5.props["chunk"]]
    start, end = adr5.props["span"]
    assert chunk.text[start:end] == adr5.props["mention"] == "eventually consistent"
    assert adr5.props["entity_type"] == "concept"
    assert adr5.provenance.extractor_version == f"{PROMPT_VERSION}+{MODEL}"
    assert adr5.provenance.confidence == pytest.approx(0.9) and adr5.provenance.source_path == "llm:adr:5"
    commit_mentions = [r for r in mentions.values() if r.src.startswith("commit:")]
    assert commit_mentions and all(r.props["field"] == "message" for r in commit_mentions)
    some = commit_mentions[0]
    message = store.get_node(some.src).props["message"]
    assert message[some.props["span"][0]:some.props["span"][1]] == some.props["mention"]

    # Token usage is recorded, in the report and beside each cached answer.
    assert report.usage["requests"] == double.calls
    assert report.usage["total_tokens"] == report.usage["prompt_tokens"] + report.usage["completion_tokens"] > 0
    cache = AnswerCache(tmp_path / "home" / "cache" / "llm")
    assert cache.usage().total_tokens == report.usage["total_tokens"]
    cache.close()


def test_re_enriching_and_re_ingesting_an_unchanged_corpus_makes_no_calls(
        acme: Any, example_org: tuple[Path, dict], tmp_path: Path, embedded_store_factory: Callable) -> None:
    home = tmp_path / "home"
    with ChatDouble(naming(KNOWN, RELATIONS)) as double:
        first = enrich(acme, settings(home, double.url))
        calls = double.calls
        graph = snapshot(acme)
        again = enrich(acme, settings(home, double.url))
        assert double.calls == calls and again.up_to_date == first.units and again.enriched == 0
        assert snapshot(acme) == graph

        # Through the API, as `graphmem ingest --llm` does: the ingest finds nothing new, and
        # enrichment nothing to do.
        from graphmem.api import Graphmem

        gm = Graphmem(Settings(home=tmp_path / "home", llm=llm(double.url)), "acme", store=acme)
        report = gm.ingest(example_org[0], index=False, llm=True)
        assert report.changed == 0 and report.enrichment["up_to_date"] == first.units
        assert double.calls == calls

        # A fresh graph from the same corpus: every answer comes from the cache.
        other = embedded_store_factory("acme-copy")
        ingest(example_org[0], other, cache_dir=tmp_path / "cache2")
        copy = enrich(other, settings(home, double.url))
        assert double.calls == calls and copy.from_cache == first.units and copy.called == 0
        assert copy.usage["requests"] == 0
        assert {(r.src, r.dst) for r in llm_rels(other)} == {(r.src, r.dst) for r in llm_rels(acme)}


def test_the_cache_is_keyed_by_model_and_prompt_version(acme: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    with ChatDouble(naming(KNOWN, RELATIONS)) as double:
        first = enrich(acme, settings(home, double.url, model="model-a"))
        calls = double.calls
        second = enrich(acme, settings(home, double.url, model="model-b"))
        assert second.enriched == first.units and second.called == first.called and double.calls == 2 * calls
        assert {r["model"] for r in double.requests[calls:]} == {"model-b"}
        # The facts of the earlier model are withdrawn: what holds now is what model-b said.
        assert {r.provenance.extractor_version for r in llm_rels(acme)} == {f"{PROMPT_VERSION}+model-b"}
        # Back to model-a: its answers are still cached.
        third = enrich(acme, settings(home, double.url, model="model-a"))
        assert third.from_cache == first.units and double.calls == 2 * calls
        # A new prompt version asks again.
        import extractors.llm as llm_module

        monkeypatch.setattr(llm_module, "PROMPT_VERSION", "test-next")
        fourth = enrich(acme, settings(home, double.url, model="model-a"))
        assert fourth.enriched == first.units and double.calls == 3 * calls
        assert {r.provenance.extractor_version for r in llm_rels(acme)} == {"test-next+model-a"}


def test_an_invalid_answer_is_repaired_by_one_retry(acme: Any, tmp_path: Path) -> None:
    valid = naming(KNOWN, RELATIONS)
    with ChatDouble(lambda req: valid(req) if is_repair(req) else Reply.malformed()) as double:
        report = enrich(acme, settings(tmp_path / "home", double.url), kinds=["decision"])
    assert report.complete and report.called == report.units == 6
    assert double.calls == 2 * report.units
    repair = next(r for r in double.requests if is_repair(r))["messages"]
    assert repair[-2]["role"] == "assistant" and "not valid JSON" in repair[-1]["content"]
    assert ("adr:5", "entity:concept:eventually consistent") in {(r.src, r.dst) for r in llm_rels(acme)}


def test_answers_invalid_twice_fail_their_source_until_retried(acme: Any, tmp_path: Path) -> None:
    valid = naming(KNOWN, RELATIONS)

    def respond(req: dict) -> Reply:  # garbage about Kafka texts, good answers otherwise
        return Reply.malformed() if "kafka" in text_of(req).casefold() else valid(req)

    home = tmp_path / "home"
    with ChatDouble(respond) as double:
        report = enrich(acme, settings(home, double.url), kinds=["decision", "incident"])
    bad = {item["source"] for item in report.not_enriched}
    assert bad and "adr:5" in bad and report.called == report.units - len(bad)
    assert all("invalid answer after one repair" in item["reason"] for item in report.not_enriched)
    assert all(item["path"] for item in report.not_enriched)
    assert not any(r.src in bad for r in llm_rels(acme))
    # A later run does not pay for the same invalid answers again...
    with ChatDouble(valid) as double:
        again = enrich(acme, settings(home, double.url), kinds=["decision", "incident"])
        assert double.calls == 0 and {i["source"] for i in again.not_enriched} == bad
        assert "retry-failed" in again.not_enriched[0]["reason"]
        # ...unless asked to.
        retried = enrich(acme, settings(home, double.url), kinds=["decision", "incident"], retry_failed=True)
        assert retried.complete and retried.called == len(bad) == double.calls
    assert any(r.src == "adr:5" for r in llm_rels(acme))


FAILURES: dict[str, tuple[Callable[[], Reply] | None, dict[str, Any], str]] = {
    # name: (reply to every request (None: nothing listens), settings, reason in the report)
    "timeout": (lambda: Reply.answer(delay=1.5), {"timeout": 0.3, "max_retries": 1}, "no answer within 0.3 s"),
    "429 forever": (lambda: Reply.http(429, retry_after="0"), {}, "rate limited (HTTP 429)"),
    "429 wait too long": (lambda: Reply.http(429, retry_after="3600"), {}, "asks to wait 3600 s"),
    "500": (lambda: Reply.http(500), {}, "server error (HTTP 500)"),
    "garbage": (Reply.garbage, {}, "unreadable response"),
    "connection refused": (None, {}, "cannot connect"),
    "401": (lambda: Reply.http(401), {}, "HTTP 401"),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_ingestion_completes_whatever_the_endpoint_does(failure: str, example_org: tuple[Path, dict],
                                                        tmp_path: Path, embedded_store_factory: Callable) -> None:
    from graphmem.api import Graphmem

    reply, options, reason = FAILURES[failure]
    plain = embedded_store_factory("plain")
    ingest(example_org[0], plain, cache_dir=tmp_path / "plain-cache")
    store = embedded_store_factory("acme")
    started = time.monotonic()
    if reply is None:
        url, double = refused_url(), None
    else:
        double = ChatDouble(lambda req: reply()).__enter__()
        url = double.url
    try:
        # HEAD alone, as the plain ingest above reads it: the graphs are compared element for element.
        gm = Graphmem(Settings(home=tmp_path / "home", llm=llm(url, **options), replay=0), "acme", store=store)
        report = gm.ingest(example_org[0], index=False, llm=True)
    finally:
        if double is not None:
            double.__exit__(None, None, None)
    assert time.monotonic() - started < 30
    # The deterministic graph is complete and exactly what an ingest without the LLM makes.
    assert store.counts().as_dict() == plain.counts().as_dict()
    assert report.commits == 34 and not llm_rels(store)
    e = report.enrichment
    assert e is not None and not e["complete"] and e["enriched"] == 0
    assert e["not_enriched"] == e["units"] == len(e["not_enriched_sources"]) > 50
    assert reason in e["stopped"] and any(reason in r for r in e["not_enriched_reasons"])
    assert {"adr:5", "incident:INC-042"} <= {item["source"] for item in e["not_enriched_sources"]}
    if double is not None:  # the first failure stops the run: no request per source
        assert double.calls <= 4 * (options.get("max_retries", 2) + 1)


def test_429_with_retry_after_is_honoured_then_succeeds(acme: Any, tmp_path: Path) -> None:
    with ChatDouble(naming(KNOWN, RELATIONS)) as double:
        double.script = [Reply.http(429, retry_after="1")]
        report = enrich(acme, settings(tmp_path / "home", double.url, concurrency=1), kinds=["decision"])
    assert report.complete and report.called == 6 and double.calls == 7
    assert double.times[1] - double.times[0] >= 0.95  # waited as told, not the 0.01 s backoff
    assert report.usage["requests"] == 6  # the 429 answered nothing and cost no tokens


def test_transient_5xx_and_dropped_connections_are_retried(acme: Any, tmp_path: Path) -> None:
    with ChatDouble(naming(KNOWN, RELATIONS)) as double:
        double.script = [Reply.http(503), Reply(drop=True), Reply.http(502)]
        report = enrich(acme, settings(tmp_path / "home", double.url, concurrency=1, max_retries=3),
                        kinds=["decision"])
    assert report.complete and report.called == 6 and double.calls == 9


def test_servers_without_structured_output_are_asked_without_it(tmp_path: Path) -> None:
    refusal = b'{"error": {"message": "response_format json_schema is not supported by this model"}}'
    with ChatDouble(naming(KNOWN)) as double:
        double.script = [Reply.http(400, body=refusal)]
        extractor = LLMExtractor(llm(double.url), tmp_path)
        first = extractor.extract("commit", "Publish ledger entries to Kafka from billing.")
        second = extractor.extract("commit", "Keep idempotency keys in Redis for a day.")
        extractor.close()
    assert [e.name for e in first.answer.entities] == ["Kafka", "ledger", "billing"]
    assert [e.name for e in second.answer.entities] == ["Redis", "idempotency keys"]
    assert "response_format" in double.requests[0]
    assert all("response_format" not in r for r in double.requests[1:]) and double.calls == 3


def test_an_interrupted_run_resumes_with_what_is_missing(acme: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    valid = naming(KNOWN, RELATIONS)
    served = []

    def flaky(req: dict) -> Reply:  # answers 20 requests, then fails for good
        served.append(1)
        return valid(req) if len(served) <= 20 else Reply.http(500)

    with ChatDouble(flaky) as double:
        first = enrich(acme, settings(home, double.url, concurrency=1))
    assert first.called == 20 and len(first.not_enriched) == first.units - first.enriched
    assert "server error (HTTP 500)" in first.stopped
    done = {uid for uid, entry in load_state(acme).items() if entry[2] == "done"}
    assert len(done) == first.enriched
    with ChatDouble(valid) as double:
        second = enrich(acme, settings(home, double.url))
        assert second.complete and second.up_to_date == first.enriched
        assert second.enriched == first.units - first.enriched and second.called == double.calls


def test_changed_text_withdraws_what_was_read_from_it(tmp_path: Path, embedded_store_factory: Callable) -> None:
    from tests.test_ingest import git

    repo = tmp_path / "repo"
    (repo / "docs" / "adr").mkdir(parents=True)
    adr = repo / "docs" / "adr" / "0001-use-kafka.md"
    adr.write_text("# 1. Use Kafka\n\n## Status\n\nAccepted\n\n## Decision\n\nBilling publishes invoices to "
                   "Kafka and keeps idempotency keys in Redis.\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "Record the decision to use Kafka")
    store = embedded_store_factory("repo")
    from graphmem.api import Graphmem

    with ChatDouble(naming(KNOWN, RELATIONS)) as double:
        gm = Graphmem(Settings(home=tmp_path / "home", llm=llm(double.url)), "repo", store=store)
        gm.ingest(repo, index=False, llm=True)
        assert double.calls == 1  # the record; the commit message is too short to be worth a call
        read = {r.dst for r in llm_rels(store) if r.src == "adr:1"}
        assert "entity:concept:idempotency keys" in read
        # What the record's own extractor already links (Kafka, Redis) is not written twice.
        assert "entity:technology:kafka" not in read
        assert ("adr:1", "entity:technology:kafka") in {(r.src, r.dst) for r in store.iter_rels()}
        adr.write_text(adr.read_text().replace(" and keeps idempotency keys in Redis", ""))
        git(repo, "commit", "-q", "-am", "Drop Redis from the Kafka decision record")
        # Without the LLM, what was read from the old text is withdrawn all the same.
        gm.ingest(repo, index=False, llm=False)
        assert not [r for r in llm_rels(store) if r.src == "adr:1"]
        assert store.get_node("entity:concept:idempotency keys").valid_to is not None
        report = gm.ingest(repo, index=False, llm=True)
        # Only the changed record and the new commit are asked about.
        assert report.enrichment["called"] == double.calls - 1 == 2
    now = {r.dst for r in llm_rels(store) if r.src == "adr:1"}
    assert "entity:service:billing" in now and "entity:concept:idempotency keys" not in now
    assert store.get_node("entity:concept:idempotency keys").valid_to is not None


def test_write_extractions_imports_precomputed_triples(tmp_path: Path, embedded_store_factory: Callable) -> None:
    store = embedded_store_factory("passages")
    prov = Provenance("dataset:sample/p1", "dataset-sample")
    text = "The Journal of Mathematical Physics is published by the American Institute of Physics."
    store.upsert([Node("doc:p1", "Journal of Mathematical Physics", prov)], (), [Chunk("doc:p1", 0, text, "document", prov)])
    extraction = SourceExtraction.from_triples(
        "doc:p1", text,
        [["Journal of Mathematical Physics", "published by", "American Institute of Physics"],
         ["Journal of Mathematical Physics", "edited by", "Jan Philip Solovej"],  # not in this text
         ["broken triple"]],
        entities=["Journal of Mathematical Physics", "Physics"], extractor="openie",
        source_path="dataset:sample/p1")
    missing = SourceExtraction.from_triples("doc:nowhere", None, [["A", "b", "C"]])
    report = write_extractions(store, [extraction, missing])
    assert report.malformed == 1 and report.dropped_entities == 1 and report.dropped_relations == 1
    journal = store.get_node("entity:concept:journal of mathematical physics")
    assert journal is not None and journal.provenance.extractor == "openie"
    rel = [r for r in store.iter_rels() if r.type is RelType.RELATED_TO and r.src == journal.key]
    assert [(r.dst, r.props["predicate"]) for r in rel] == [
        ("entity:concept:american institute of physics", "published by")]
    mentions = {r.dst: r for r in store.iter_rels() if r.type is RelType.MENTIONS and r.src == "doc:p1"}
    assert set(mentions) == {journal.key, "entity:concept:american institute of physics", "entity:concept:physics"}
    assert mentions[journal.key].props["span"] == [4, 35]
    assert report.missing_endpoints == 2  # doc:nowhere is not in the graph: its two mentions
    # Withdrawing the passage withdraws what was read from it.
    store.close_sources(["dataset:sample/p1"])
    assert store.get_node(journal.key).valid_to is not None


def test_long_documents_are_read_in_windows_with_spans_per_chunk(tmp_path: Path,
                                                                  embedded_store_factory: Callable) -> None:
    store = embedded_store_factory("docs")
    prov = Provenance("docs/runbook.md", "test")
    paragraphs = [f"Step {i}: drain the queue before the Kafka broker restarts." + " Wait." * 120 for i in range(8)]
    store.upsert([Node("doc:docs/runbook.md", "Runbook", prov)], (),
                 [Chunk("doc:docs/runbook.md", i, text, "document", prov) for i, text in enumerate(paragraphs)])
    units = collect_units(store)
    assert [u.id for u in units] == ["doc:docs/runbook.md", "doc:docs/runbook.md#1"]
    assert all(len(u.text) <= 6000 for u in units)
    with ChatDouble(naming([("Kafka broker", "component")])) as double:
        report = enrich(store, settings(tmp_path / "home", double.url))
    assert report.complete and double.calls == 2
    (mention,) = llm_rels(store)
    chunk = paragraphs[mention.props["chunk"]]
    assert chunk[mention.props["span"][0]:mention.props["span"][1]] == "Kafka broker"
    assert set(mention.sources) == {"llm:doc:docs/runbook.md", "llm:doc:docs/runbook.md#1"}


def test_without_an_endpoint_ingestion_is_rule_based(acme: Any, example_org: tuple[Path, dict]) -> None:
    # Commit messages and docstrings get the vocabulary matching documents get.
    rels = [r for r in acme.iter_rels() if r.type is RelType.MENTIONS and r.provenance.extractor == "mentions"]
    commits = {(r.src, r.dst) for r in rels if r.src.startswith("commit:")}
    kafka_commits = [n.key for n in acme.iter_nodes() if n.key.startswith("commit:")
                     and "Kafka" in str(n.props.get("message"))]
    assert kafka_commits and all((c, "entity:technology:kafka") in commits for c in kafka_commits)
    assert any(dst.startswith("service:") for _, dst in commits)
    assert any(r.src.startswith(("sym:", "file:")) for r in rels)
    assert not any(r.src == r.dst for r in rels)
    with pytest.raises(ConfigError, match="GRAPHMEM_LLM_BASE_URL"):
        enrich(acme, Settings(llm=LLMSettings()))


# --- command line -------------------------------------------------------------------------------


def graphmem(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    return subprocess.run([sys.executable, "-m", "graphmem.cli", *args], check=False, capture_output=True,
                          text=True, env={**clean, **(env or {})}, cwd=REPO, timeout=300)


def test_cli_llm_without_an_endpoint_is_a_one_line_error(tmp_path: Path, example_org: tuple[Path, dict]) -> None:
    out = graphmem("--home", str(tmp_path), "ingest", str(example_org[0]), "--llm")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and "GRAPHMEM_LLM_BASE_URL" in out.stderr
    assert not (tmp_path / "acme").exists()  # nothing was ingested


def test_cli_enrich_reports_and_resumes(tmp_path: Path, example_org: tuple[Path, dict]) -> None:
    from graphmem.stores.embedded import EmbeddedStore

    home = tmp_path / "home"
    store = EmbeddedStore(home, "acme")
    ingest(example_org[0], store, cache_dir=home / "cache")
    store.close()
    env = {"GRAPHMEM_LLM_MODEL": MODEL, "GRAPHMEM_LLM_BACKOFF": "0.01", "GRAPHMEM_LLM_MAX_RETRIES": "1"}
    down = graphmem("--home", str(home), "--project", "acme", "enrich", "--kind", "decision",
                    env={**env, "GRAPHMEM_LLM_BASE_URL": refused_url()})
    assert down.returncode == 1 and "Traceback" not in down.stderr
    assert "6 of 6 texts not enriched" in down.stderr and "adr:5" in down.stderr
    with ChatDouble(naming(KNOWN, RELATIONS)) as double:
        env["GRAPHMEM_LLM_BASE_URL"] = double.url
        up = graphmem("--home", str(home), "--project", "acme", "enrich", "--kind", "decision", "--json", env=env)
        assert up.returncode == 0, up.stderr
        result = json.loads(up.stdout)
        assert result["complete"] and result["called"] == 6 == double.calls
        assert result["usage"]["total_tokens"] > 0 and result["written"]["mentions"] > 0
        again = graphmem("--home", str(home), "--project", "acme", "enrich", "--kind", "decision", env=env)
        assert again.returncode == 0 and "6 up to date" in again.stdout and double.calls == 6


# --- Neo4j --------------------------------------------------------------------------------------


@pytest.mark.neo4j
def test_enrichment_on_neo4j(neo4j_store_factory: Callable, example_org: tuple[Path, dict], tmp_path: Path,
                             embedded_store_factory: Callable) -> None:
    store = neo4j_store_factory("llm")
    store.ensure_schema()
    ingest(example_org[0], store, cache_dir=tmp_path / "cache")
    before = store.counts()
    home = tmp_path / "home"
    with ChatDouble(naming(KNOWN, RELATIONS, extra=ABSENT)) as double:
        report = enrich(store, settings(home, double.url), kinds=["decision", "incident", "commit"])
        assert report.complete and report.called == double.calls == report.units
        after = store.counts()
        assert {k: v for k, v in after.nodes.items() if k != "entity"} == \
            {k: v for k, v in before.nodes.items() if k != "entity"}
        assert after.nodes["entity"] > before.nodes["entity"] and after.rels["RELATED_TO"] > 0
        mentions = [r for r in llm_rels(store) if r.type is RelType.MENTIONS]
        assert ("adr:5", "entity:concept:eventually consistent") in {(r.src, r.dst) for r in mentions}
        assert store.get_node("entity:datastore:oracle") is None
        again = enrich(store, settings(home, double.url), kinds=["decision", "incident", "commit"])
        assert again.up_to_date == report.units and double.calls == report.units
    # The same answers on the embedded store give the same facts.
    other = embedded_store_factory("llm")
    ingest(example_org[0], other, cache_dir=tmp_path / "cache2")
    copy = enrich(other, settings(home, "http://127.0.0.1:9/v1"), kinds=["decision", "incident", "commit"])
    assert copy.from_cache == report.units
    key = lambda r: (r.src, r.type.value, r.dst, json.dumps(r.props, sort_keys=True))
    assert sorted(map(key, llm_rels(store))) == sorted(map(key, llm_rels(other)))
