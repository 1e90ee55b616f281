"""Decision records: Nygard and MADR, front matter or none, supersession, mentions, chunks."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from docs_helpers import assert_valid, rels_of

from extractors.decisions import (
    decider_key,
    extract_decision,
    extract_decision_file,
    is_decision_record,
    parse_decision,
)
from extractors.text import Vocabulary

SYMBOLS = [
    "sym:billing/api/handlers.py::InvoiceHandler",
    "sym:billing/api/handlers.py::InvoiceHandler.post",
    "sym:billing/pay.py::charge_card",
    "sym:ledger/writer.go::LedgerWriter",
]


@pytest.fixture()
def vocab() -> Vocabulary:
    return Vocabulary.from_symbol_keys(
        services=["billing", "ledger", "checkout"], symbol_keys=SYMBOLS, teams=["payments", "platform"]
    )


def load(fixtures: Path, name: str, vocab: Vocabulary | None = None):  # type: ignore[no-untyped-def]
    ex = extract_decision_file(fixtures, f"adr/{name}", vocabulary=vocab, source_commit="c" * 40)
    assert_valid(ex)
    return ex


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("docs/adr/0005-use-postgresql.md", True),
        ("adrs/0001-record.md", True),
        ("decisions/12-something.markdown", True),
        ("docs/architecture/decisions/0002-x.md", True),
        ("doc/adr/adr-0003-x.md", True),
        ("docs/adr/README.md", False),
        ("docs/adr/template.md", False),
        ("docs/notes/0005-use-postgresql.md", False),
        ("0005-use-postgresql.md", False),
        ("docs/adr/0005-use-postgresql.txt", False),
    ],
)
def test_is_decision_record(path: str, expected: bool) -> None:
    assert is_decision_record(path) is expected


def test_nygard_record(fixtures: Path, vocab: Vocabulary) -> None:
    ex = load(fixtures, "0005-use-postgresql.md", vocab)
    node = next(n for n in ex.nodes if n.key == "adr:5")
    assert node.name == "Use PostgreSQL"
    assert node.props["number"] == 5
    assert node.props["title"] == "Use PostgreSQL"
    assert node.props["status"] == "accepted"
    assert node.props["date"] == "2023-06-12"
    assert node.props["sections"] == ["Status", "Context", "Decision", "Consequences"]
    assert node.provenance.source_path == "adr/0005-use-postgresql.md"
    assert node.provenance.source_commit == "c" * 40
    assert node.provenance.extractor == "adr"

    assert rels_of(ex, "SUPERSEDES") == {("adr:5", "adr:3")}
    assert rels_of(ex, "REFERENCES") == {("adr:5", "adr:1"), ("adr:5", "incident:INC-042")}
    mentions = {dst for _, dst in rels_of(ex, "MENTIONS")}
    assert {"service:billing", "service:ledger"} <= mentions
    assert "sym:billing/api/handlers.py::InvoiceHandler.post" in mentions
    assert "sym:billing/pay.py::charge_card" in mentions
    assert "sym:ledger/writer.go::LedgerWriter" in mentions
    for tech in ("postgresql", "redis", "kafka", "mysql"):
        assert f"entity:technology:{tech}" in mentions
        assert any(n.key == f"entity:technology:{tech}" for n in ex.nodes)
    entity = next(n for n in ex.nodes if n.key == "entity:technology:postgresql")
    assert entity.name == "PostgreSQL" and entity.props["entity_type"] == "technology"


def test_nygard_chunks_are_per_section_prefixed_and_redacted(fixtures: Path) -> None:
    ex = load(fixtures, "0005-use-postgresql.md")
    titles = [c.text.split("\n", 1)[0] for c in ex.chunks]
    assert titles == [
        "ADR-5 Use PostgreSQL — Status",
        "ADR-5 Use PostgreSQL — Context",
        "ADR-5 Use PostgreSQL — Decision",
        "ADR-5 Use PostgreSQL — Consequences",
    ]
    assert all(c.kind == "decision" and c.node_key == "adr:5" for c in ex.chunks)
    assert [c.ordinal for c in ex.chunks] == [0, 1, 2, 3]
    context = ex.chunks[1]
    lines = (fixtures / "adr/0005-use-postgresql.md").read_text().splitlines()
    assert lines[context.start_line - 1].startswith("The billing service stores invoices")
    assert lines[context.end_line - 1].startswith("We also cache hot invoices")
    decision = ex.chunks[2].text
    assert "hunter2-prod" not in decision and "[REDACTED:url-password]" in decision
    # the heading inside the code block stayed in its section
    assert "# Not a heading" in ex.chunks[3].text


def test_superseded_record_links_newer_to_older(fixtures: Path) -> None:
    ex = load(fixtures, "0003-use-mysql.md")
    node = ex.nodes[0]
    assert node.key == "adr:3"
    assert node.props["status"] == "superseded"
    assert node.props["superseded_by"] == ["adr:5"]
    assert rels_of(ex, "SUPERSEDES") == {("adr:5", "adr:3")}
    assert not rels_of(ex, "REFERENCES")  # the supersession link is not repeated as a reference


def test_madr_with_front_matter(fixtures: Path, vocab: Vocabulary) -> None:
    ex = load(fixtures, "0007-event-bus.md", vocab)
    node = ex.nodes[0]
    assert node.key == "adr:7"  # number from the file name
    assert node.name == "Use Kafka as the event bus"
    assert node.props["status"] == "accepted"
    assert node.props["date"] == "2024-02-20"
    assert node.props["deciders"] == ["Ana Souza <ana@example.com>", "payments", "Bob from finance"]
    assert node.props["tags"] == ["messaging", "events"]
    assert node.props["summary"].startswith('Chosen option: "Kafka"')
    assert rels_of(ex, "DECIDED") == {("person:ana@example.com", "adr:7"), ("team:payments", "adr:7")}
    assert rels_of(ex, "SUPERSEDES") == {("adr:7", "adr:6")}
    mentions = {dst for _, dst in rels_of(ex, "MENTIONS")}
    assert {"entity:technology:kafka", "entity:technology:rabbitmq", "entity:technology:grpc"} <= mentions
    assert {"service:checkout", "service:billing"} <= mentions
    # MADR's "### Consequences" stays inside "Decision Outcome"
    outcome = next(c for c in ex.chunks if "— Decision Outcome" in c.text)
    assert "Bad, because we must operate a Kafka cluster." in outcome.text


def test_madr_without_vocabulary_keeps_team_names_as_props(fixtures: Path) -> None:
    ex = load(fixtures, "0007-event-bus.md")
    assert rels_of(ex, "DECIDED") == {("person:ana@example.com", "adr:7")}
    assert "payments" in ex.nodes[0].props["deciders"]


def test_madr2_bullet_metadata(fixtures: Path) -> None:
    ex = load(fixtures, "0008-feature-flags.md")
    node = ex.nodes[0]
    assert node.key == "adr:8"
    assert node.props["status"] == "proposed"
    assert node.props["date"] == "2024-03-05"
    assert rels_of(ex, "DECIDED") == {("team:platform", "adr:8"), ("person:carol@example.com", "adr:8")}
    overview = ex.chunks[0]
    assert overview.text.startswith("ADR-8 Use feature flags for risky releases — Overview")
    assert "Technical Story: rollouts of the billing service" in overview.text
    assert "Status" not in overview.text and "Deciders" not in overview.text


def test_broken_front_matter_is_ingested_with_a_warning(
    fixtures: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        ex = load(fixtures, "0009-broken-front-matter.md")
    node = ex.nodes[0]
    assert node.key == "adr:9"
    assert node.props["status"] == "accepted"  # salvaged from the broken block
    assert any("not valid YAML" in w for w in node.props["warnings"])
    assert "not valid YAML" in caplog.text
    assert ("person:ana@example.com", "adr:9") in rels_of(ex, "DECIDED")
    assert len(ex.chunks) == 2


def test_empty_and_unknown_files_are_skipped_with_reasons(fixtures: Path) -> None:
    empty = load(fixtures, "0010-empty.md")
    assert len(empty) == 0 and empty.skipped[0].reason == "empty decision record"
    notes = load(fixtures, "notes.txt")
    assert len(notes) == 0 and "no decision record number" in notes.skipped[0].reason
    missing = extract_decision_file(fixtures, "adr/0099-missing.md")
    assert missing.skipped and "cannot read" in missing.skipped[0].reason


def test_title_forms_and_status_variants() -> None:
    text = "# ADR-0012: Adopt gRPC\n\n## Status\n\nDeprecated in favour of REST\n\n## Decision\n\nx\n"
    rec = parse_decision("docs/adr/notes.md", text)
    assert not isinstance(rec, type(None))
    assert rec.number == 12 and rec.title == "Adopt gRPC" and rec.status == "deprecated"  # type: ignore[union-attr]
    fm = "---\nnumber: 0010\nsuperseded_by: [ADR-12]\n---\n# Old way\n"
    rec2 = parse_decision("docs/adr/old.md", fm)
    assert rec2.number == 10 and rec2.superseded_by == [12] and rec2.status == "superseded"  # type: ignore[union-attr]


def test_long_sections_split_at_paragraphs_under_the_limit() -> None:
    paras = [f"Paragraph {i}. " + "The ledger keeps every posting. " * 12 for i in range(10)]
    text = "# 42. Long record\n\n## Context\n\n" + "\n\n".join(paras) + "\n\n## Decision\n\nShort.\n"
    ex = extract_decision("docs/adr/0042-long.md", text)
    assert_valid(ex)
    context = [c for c in ex.chunks if "— Context" in c.text]
    assert len(context) > 1
    assert all(len(c.text) <= 1000 for c in ex.chunks)
    assert all(c.text.startswith("ADR-42 Long record — Context\n\n") for c in context)
    body = "\n\n".join(c.text.split("\n\n", 1)[1] for c in context)
    assert all(p.strip() in body for p in paras)
    assert context[0].start_line == 5
    assert context[-1].end_line == 5 + 2 * 9


def test_decider_key() -> None:
    vocab = Vocabulary(teams=["payments"])
    assert decider_key("Ana <ANA@Example.com>") == "person:ana@example.com"
    assert decider_key("@acme/payments") == "team:payments"
    assert decider_key("payments", vocab) == "team:payments"
    assert decider_key("payments") is None
    assert decider_key("Bob", vocab) is None
