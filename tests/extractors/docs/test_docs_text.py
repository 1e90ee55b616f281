"""Markdown helpers: front matter, sections, header blocks, chunking, vocabulary matching."""

from __future__ import annotations

from extractors.text import (
    Vocabulary,
    adr_refs,
    as_list,
    bullet_items,
    full_shas,
    incident_refs,
    parse_header_block,
    parse_markdown,
    short_sha_refs,
    split_front_matter,
    split_paragraphs,
    strip_markdown,
)


def test_front_matter_valid_keeps_zero_padded_numbers_and_body_line() -> None:
    text = "---\nnumber: 0010\nstatus: Accepted\ndate: 2024-01-02\n---\n# Title\nbody\n"
    fm = split_front_matter(text)
    assert fm.present and fm.error is None
    assert fm.data["number"] == "0010"  # not octal 8
    assert fm.data["status"] == "Accepted"
    assert str(fm.data["date"]) == "2024-01-02"
    assert fm.body.startswith("# Title")
    assert fm.body_line == 6


def test_front_matter_invalid_yaml_is_salvaged_with_an_error() -> None:
    text = "---\nstatus: accepted\ntags: [a, b\n---\nbody\n"
    fm = split_front_matter(text)
    assert fm.error and "not valid YAML" in fm.error
    assert fm.data["status"] == "accepted"
    assert fm.body == "body\n"


def test_front_matter_absent_unclosed_or_not_a_mapping() -> None:
    assert split_front_matter("# Just a title\n").present is False
    unclosed = split_front_matter("---\nstatus: x\n# no closing fence\n")
    assert not unclosed.present and unclosed.body.startswith("---")
    listy = split_front_matter("---\n- a\n- b\n---\ntext\n")
    assert listy.error and "not a mapping" in listy.error


def test_sections_ignore_headings_inside_code_fences_and_keep_subsections() -> None:
    body = (
        "# 5. Title\n\nintro line\n\n## Context\n\nctx\n\n```sh\n# not a heading\n## nor this\n```\n\n"
        "## Decision Outcome\n\nchosen\n\n### Consequences\n\n* good\n"
    )
    doc = parse_markdown(body, first_line=3)
    assert doc.title == "5. Title" and doc.title_line == 3
    assert doc.preamble is not None and doc.preamble.text == "intro line"
    assert [s.title for s in doc.sections] == ["Context", "Decision Outcome"]
    assert "# not a heading" in doc.sections[0].text
    assert "### Consequences" in doc.sections[1].text
    assert doc.sections[0].start_line == 3 + 6
    assert doc.section("decision") is doc.sections[1]
    assert doc.section("decision", exact=True) is None


def test_header_block_variants() -> None:
    text = (
        "Status: accepted\n* Deciders: ana, bob\n**Severity:** SEV-2\n- **Date**: 2024-01-02\n"
        "| Owner | payments |\nThis is prose: with a colon that is much too long to be a key name ok\n"
    )
    meta = parse_header_block(text)
    assert meta["status"] == "accepted"
    assert meta["deciders"] == "ana, bob"
    assert meta["severity"] == "SEV-2"
    assert meta["date"] == "2024-01-02"
    assert meta["owner"] == "payments"
    assert len(meta) == 5


def test_split_paragraphs_respects_limit_and_lines() -> None:
    paras = [f"Paragraph {i} " + "word " * 60 for i in range(6)]
    text = "\n\n".join(paras)
    pieces = split_paragraphs(text, 10, 700)
    assert len(pieces) >= 3
    assert all(len(p.text) <= 700 for p in pieces)
    assert pieces[0].start_line == 10
    assert pieces[-1].end_line == 10 + 2 * 5
    # every paragraph survives, whole
    joined = "\n\n".join(p.text for p in pieces)
    assert all(p.strip() in joined for p in paras)


def test_split_paragraphs_hard_splits_one_huge_line() -> None:
    pieces = split_paragraphs("x" * 2500, 1, 1000)
    assert [len(p.text) for p in pieces] == [1000, 1000, 500]


def test_lists_and_values() -> None:
    assert bullet_items("- [ ] one\n- [x] two\n  continued\n1. three\n") == [
        "one",
        "two continued",
        "three",
    ]
    assert as_list("a, b and c") == ["a", "b", "c"]
    assert as_list(["x", "", "y"]) == ["x", "y"]
    assert as_list(None) == []
    assert strip_markdown("**bold** `snake_case` [link](http://x)") == "bold snake_case link"


def test_references() -> None:
    text = "See ADR-0005, adr 7 and [3. Old](0003-old.md); INC-042 and inc-7 and INC-2024-01."
    assert adr_refs(text) == [5, 7]
    assert adr_refs(text, links=True) == [5, 7, 3]
    assert incident_refs(text) == ["INC-042", "INC-7", "INC-2024-01"]
    sha = "3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b"
    assert full_shas(f"fixed by {sha}.") == [sha]
    assert short_sha_refs("Reverted commit 1a2b3c4 and sha: `deadbeef`; 1234567 alone") == [
        "1a2b3c4",
        "deadbeef",
    ]


def test_vocabulary_finds_services_symbols_and_technologies() -> None:
    vocab = Vocabulary.from_symbol_keys(
        services=["billing", "auth-service"],
        symbol_keys=[
            "sym:billing/api.py::InvoiceHandler.post",
            "sym:billing/pay.py::charge_card",
            "sym:billing/run.py::run",
            "sym:a.py::Invoice",
        ],
        teams=["payments"],
    )
    text = (
        "The Billing service calls auth-service via gRPC; `InvoiceHandler.post` uses charge_card "
        "and run() writes to Postgres. We run tests daily. Invoice totals are cached in Redis; "
        "react quickly but do not adopt React."
    )
    found = vocab.find(text)
    assert found.services == ["service:billing", "service:auth-service"]
    syms = dict(found.symbols)
    assert set(syms) == {
        "sym:billing/api.py::InvoiceHandler.post",
        "sym:billing/pay.py::charge_card",
        "sym:billing/run.py::run",
    }  # "Invoice" in prose is not identifier-shaped; "run" counts only as run()
    techs = dict(found.technologies)
    assert set(techs) == {
        "entity:technology:grpc",
        "entity:technology:postgresql",
        "entity:technology:redis",
        "entity:technology:react",
    }
    assert techs["entity:technology:postgresql"] == "PostgreSQL"
    assert vocab.team("@Payments") == "payments"
    assert vocab.team("finance") is None


def test_vocabulary_skips_ambiguous_short_names() -> None:
    keys = [f"sym:m{i}.py::get_item" for i in range(5)]
    vocab = Vocabulary.from_symbol_keys(symbol_keys=keys)
    assert vocab.find("call get_item() here").symbols == []
    two = Vocabulary.from_symbol_keys(symbol_keys=keys[:2])
    found = dict(two.find("call get_item() here").symbols)
    assert found == {keys[0]: 0.5, keys[1]: 0.5}
