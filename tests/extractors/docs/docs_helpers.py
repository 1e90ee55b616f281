"""Assertions shared by the document, ownership, policy and secret extractor tests."""

from __future__ import annotations


def assert_valid(extraction) -> None:  # type: ignore[no-untyped-def]
    """Every element passes the graph model's own checks (keys, endpoints, property types)."""
    from graphmem.model import check_node, check_relationship

    for node in extraction.nodes:
        check_node(node)
    for rel in extraction.rels:
        check_relationship(rel)
    ids = [c.id for c in extraction.chunks]
    assert len(ids) == len(set(ids)), "chunk ids must be unique"
    for chunk in extraction.chunks:
        assert chunk.text.strip()
        assert chunk.start_line is None or chunk.start_line <= (chunk.end_line or chunk.start_line)


def rels_of(extraction, rtype: str) -> set[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """``(src, dst)`` pairs of one relationship type."""
    return {(r.src, r.dst) for r in extraction.rels if r.type.value == rtype}
