"""Validation and in-batch deduplication shared by every store's ``upsert``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from graphmem.model import Chunk, Node, Provenance, Relationship, check_node, check_relationship, kind_of


@dataclass(slots=True)
class Batch:
    """A validated write: at most one entry per node key, relationship and chunk id."""

    nodes: list[Node]
    rels: list[Relationship]
    chunks: list[Chunk]


def merge_props(old: dict, new: dict) -> dict:
    """``old`` updated by ``new``; a ``None`` in ``new`` removes the property."""
    out = dict(old)
    for name, value in new.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


class ProvenanceStamper:
    """Gives provenance without an ingestion time the batch's time, on a shared copy.

    Extractors share one provenance object between many elements, so copies are cached by value:
    equal provenance in a batch maps to one stamped object.
    """

    def __init__(self, ingested_at: str) -> None:
        self.ingested_at = ingested_at
        self._cache: dict[tuple, Provenance] = {}

    def __call__(self, prov: Provenance) -> Provenance:
        if prov.ingested_at is not None:
            return prov
        ident = (prov.source_path, prov.extractor, prov.extractor_version, prov.source_commit, prov.confidence)
        copy = self._cache.get(ident)
        if copy is None:
            copy = self._cache[ident] = replace(prov, ingested_at=self.ingested_at)
        return copy


def prepare_batch(nodes: Iterable[Node], rels: Iterable[Relationship], chunks: Iterable[Chunk]) -> Batch:
    """Validate every element and fold repeats of the same identity into one (later ones win)."""
    by_key: dict[str, Node] = {}
    for node in nodes:
        check_node(node)
        seen = by_key.get(node.key)
        if seen is None:
            by_key[node.key] = node
        else:
            # Same node twice in one batch: merge, as two separate upserts would.
            by_key[node.key] = Node(
                key=node.key,
                name=node.name or seen.name,
                provenance=node.provenance,
                props=merge_props(seen.props, node.props),
                valid_from=seen.valid_from or node.valid_from,
                valid_to=node.valid_to,
                sources=_union_sources(seen, node),
            )
    by_ident: dict[tuple[str, str, str], Relationship] = {}
    for rel in rels:
        check_relationship(rel)
        seen_rel = by_ident.get(rel.ident)
        if seen_rel is None:
            by_ident[rel.ident] = rel
        else:
            by_ident[rel.ident] = Relationship(
                src=rel.src, type=rel.type, dst=rel.dst, provenance=rel.provenance,
                props=merge_props(seen_rel.props, rel.props),
                valid_from=seen_rel.valid_from or rel.valid_from, valid_to=rel.valid_to,
                sources=_union_sources(seen_rel, rel),
            )
    by_id: dict[int, Chunk] = {}
    for chunk in chunks:
        kind_of(chunk.node_key)
        by_id[chunk.id] = chunk
    return Batch(list(by_key.values()), list(by_ident.values()), list(by_id.values()))


def element_sources(element: Node | Relationship) -> tuple[str, ...]:
    """The source paths an incoming element brings: its own, plus any folded in from its batch."""
    return element.sources or (element.provenance.source_path,)


def _union_sources(first: Node | Relationship, second: Node | Relationship) -> tuple[str, ...]:
    return tuple(dict.fromkeys(element_sources(first) + element_sources(second)))
