"""Incident postmortems: Markdown with front matter or a header block, JSON, broken inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docs_helpers import assert_valid, rels_of

from extractors.incidents import extract_incident, extract_incident_file, is_incident_report
from extractors.text import Vocabulary

SYMBOLS = [
    "sym:billing/api/handlers.py::InvoiceHandler.post",
    "sym:billing/money.py::round_amount",
    "sym:ledger/writer.go::LedgerWriter.flush",
]


@pytest.fixture()
def vocab() -> Vocabulary:
    return Vocabulary.from_symbol_keys(services=["billing", "ledger", "checkout"], symbol_keys=SYMBOLS)


def load(fixtures: Path, name: str, vocab: Vocabulary | None = None):  # type: ignore[no-untyped-def]
    ex = extract_incident_file(fixtures, f"incidents/{name}", vocabulary=vocab)
    assert_valid(ex)
    return ex


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("incidents/INC-042.md", True),
        ("docs/postmortems/2024-05-02-ledger.md", True),
        ("ops/post-mortems/inc.json", True),
        ("incidents/README.md", False),
        ("incidents/template.md", False),
        ("incidents/graph.png", False),
        ("docs/INC-042.md", False),
        ("INC-042.md", False),
    ],
)
def test_is_incident_report(path: str, expected: bool) -> None:
    assert is_incident_report(path) is expected


def test_markdown_with_front_matter(fixtures: Path, vocab: Vocabulary) -> None:
    ex = load(fixtures, "INC-042-checkout-outage.md", vocab)
    node = ex.nodes[0]
    assert node.key == "incident:INC-042"  # "inc-042" upper-cased
    assert node.name == "Checkout outage after invoice rounding change"
    props = node.props
    assert props["severity"] == "SEV1"
    assert props["started_at"] == "2024-03-01T14:05:00.000000Z"
    assert props["ended_at"] == "2024-03-01T15:35:00.000000Z"
    assert props["duration_minutes"] == 90
    assert props["services"] == ["billing", "checkout"]
    assert props["root_cause"].startswith("A change to `round_amount`")
    assert props["action_items"] == [
        "Add a property test for round_amount",
        "Alert on checkout error rate above 5%",
        "Document cache flush in the runbook (owner: payments)",
    ]
    assert props["caused_by_refs"] == ["9e8d7c6"]  # a short sha waits for the pipeline
    assert rels_of(ex, "AFFECTED") == {
        ("incident:INC-042", "service:billing"),
        ("incident:INC-042", "service:checkout"),
    }
    assert rels_of(ex, "CAUSED_BY") == {
        ("incident:INC-042", "commit:3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b")
    }
    assert rels_of(ex, "RESOLVED_BY") == {
        ("incident:INC-042", "commit:a1b2c3d4e5f60718293a4b5c6d7e8f9012345678")
    }
    assert rels_of(ex, "REFERENCES") == {("incident:INC-042", "adr:5"), ("incident:INC-042", "adr:3")}
    mentions = {dst for _, dst in rels_of(ex, "MENTIONS")}
    assert "sym:billing/api/handlers.py::InvoiceHandler.post" in mentions
    assert "sym:billing/money.py::round_amount" in mentions
    assert "entity:technology:redis" in mentions
    assert rels_of(ex, "AUTHORED") == {("person:ana@example.com", "incident:INC-042")}


def test_markdown_chunks_per_section_and_redacted(fixtures: Path) -> None:
    ex = load(fixtures, "INC-042-checkout-outage.md")
    heads = [c.text.split("\n", 1)[0] for c in ex.chunks]
    prefix = "INC-042 Checkout outage after invoice rounding change — "
    assert heads == [prefix + s for s in ("Summary", "Impact", "Timeline", "Root Cause", "Resolution", "Action Items")]
    assert all(c.kind == "incident" and c.node_key == "incident:INC-042" for c in ex.chunks)
    impact = ex.chunks[1].text
    assert "Tr0ub4dor" not in impact and "DB_PASSWORD=[REDACTED:" in impact
    lines = (fixtures / "incidents/INC-042-checkout-outage.md").read_text().splitlines()
    assert lines[ex.chunks[0].start_line - 1].startswith("For 90 minutes")


def test_markdown_with_header_block(fixtures: Path, vocab: Vocabulary) -> None:
    ex = load(fixtures, "2024-05-02-ledger-lag.md", vocab)
    node = ex.nodes[0]
    assert node.key == "incident:INC-057"
    assert node.name == "Ledger replication lag"
    assert node.props["severity"] == "SEV2"
    assert node.props["started_at"] == "2024-05-02T07:00:00.000000Z"
    assert node.props["ended_at"] == "2024-05-02T08:30:00.000000Z"  # +02:00 converted to UTC
    assert node.props["duration_minutes"] == 90
    assert rels_of(ex, "AFFECTED") == {("incident:INC-057", "service:ledger")}
    assert node.props["caused_by_refs"] == ["1a2b3c4d"]
    assert not rels_of(ex, "CAUSED_BY")
    assert rels_of(ex, "RESOLVED_BY") == {
        ("incident:INC-057", "commit:0123456789abcdef0123456789abcdef01234567")
    }
    assert node.props["action_items"] == [
        "Add query plan checks to CI — platform — OPS-12",
        "Alert on replication lag — payments — OPS-13",
    ]
    assert ("incident:INC-057", "incident:INC-042") in rels_of(ex, "REFERENCES")
    mentions = rels_of(ex, "MENTIONS")
    assert ("incident:INC-057", "sym:ledger/writer.go::LedgerWriter.flush") in mentions
    assert ("incident:INC-057", "service:billing") in mentions


def test_json_report(fixtures: Path) -> None:
    ex = load(fixtures, "INC-061.json")
    node = ex.nodes[0]
    assert node.key == "incident:INC-061"
    assert node.props["severity"] == "SEV2"
    assert node.props["duration_minutes"] == 45
    assert node.props["caused_by_refs"] == ["deadbeef12"]
    assert node.props["action_items"] == [
        "Rotate secrets with overlap (owner: payments, ticket: PAY-7)",
        "Add a synthetic webhook check",
    ]
    assert rels_of(ex, "AFFECTED") == {
        ("incident:INC-061", "service:billing"),
        ("incident:INC-061", "sym:billing/webhooks.py::WebhookRouter.dispatch"),
    }
    assert rels_of(ex, "CAUSED_BY") == {
        ("incident:INC-061", "sym:billing/webhooks.py::verify_signature"),
        ("incident:INC-061", "commit:0fedcba9876543210fedcba9876543210fedcba9"),
    }
    assert rels_of(ex, "RESOLVED_BY") == {("incident:INC-061", "commit:" + "1" * 40)}
    assert rels_of(ex, "REFERENCES") == {("incident:INC-061", "adr:7")}
    heads = [c.text.split("\n", 1)[0].split(" — ")[1] for c in ex.chunks]
    assert heads == ["Summary", "Timeline", "Root Cause", "Action Items"]
    timeline = ex.chunks[1].text
    assert "- 08:00 — Provider reports failed deliveries" in timeline
    lines = (fixtures / "incidents/INC-061.json").read_text().splitlines()
    assert '"root_cause"' in lines[ex.chunks[2].start_line - 1]


def test_json_list_of_incidents_and_bad_items() -> None:
    data = [
        {"id": 7, "title": "Numeric id", "services": "billing, ledger"},
        "not an object",
        {"severity": "P1"},
        {"title": "INC-9: Title carries the id", "severity": "p1", "started_at": "yesterday"},
    ]
    ex = extract_incident("postmortems/all.json", json.dumps(data))
    assert_valid(ex)
    keys = [n.key for n in ex.nodes]
    assert keys == ["incident:INC-7", "incident:INC-9"]
    assert ex.nodes[0].props["services"] == ["billing", "ledger"]
    second = ex.nodes[1]
    assert second.name == "Title carries the id" and second.props["severity"] == "P1"
    assert second.props["started_at_text"] == "yesterday"
    assert any("started_at" in w for w in second.props["warnings"])
    reasons = sorted(s.reason for s in ex.skipped)
    assert reasons == ["JSON object has neither an id nor a title", "expected a JSON object, got str"]


def test_broken_inputs_never_crash(fixtures: Path) -> None:
    bad = load(fixtures, "bad.json")
    assert len(bad) == 0 and bad.skipped[0].reason.startswith("not valid JSON")
    empty = load(fixtures, "INC-090-empty.md")
    assert len(empty) == 0 and empty.skipped[0].reason == "empty incident report"
    broken = load(fixtures, "INC-080-broken.md")
    node = broken.nodes[0]
    assert node.key == "incident:INC-080"
    assert node.props["severity"] == "SEV1"  # salvaged
    assert any("not valid YAML" in w for w in node.props["warnings"])
    assert len(broken.chunks) == 1
    missing = extract_incident_file(fixtures, "incidents/nope.md")
    assert "cannot read" in missing.skipped[0].reason


def test_without_explicit_services_impact_mentions_count_as_affected(vocab: Vocabulary) -> None:
    text = "# Slow checkout\n\n## Impact\n\ncheckout was slow for EU users.\n\n## Timeline\n\nledger restarted\n"
    ex = extract_incident("incidents/2024-07-01-slow-checkout.md", text, vocabulary=vocab)
    assert_valid(ex)
    node = ex.nodes[0]
    assert node.key == "incident:2024-07-01-SLOW-CHECKOUT"  # no id anywhere: the file name
    assert node.name == "Slow checkout"
    affected = [r for r in ex.rels if r.type.value == "AFFECTED"]
    assert [(r.dst, r.provenance.confidence) for r in affected] == [("service:checkout", 0.6)]
    assert ("incident:2024-07-01-SLOW-CHECKOUT", "service:ledger") in rels_of(ex, "MENTIONS")
