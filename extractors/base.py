"""What every extractor returns, and the context it is given."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphmem.model import Chunk, Node, Relationship


@dataclass(slots=True)
class Skipped:
    """An input an extractor could not use, and why (shown to the user, never fatal)."""

    path: str
    reason: str


@dataclass(slots=True)
class Extraction:
    """Graph facts from one or more sources. Extractors return these; the pipeline writes them."""

    nodes: list[Node] = field(default_factory=list)
    rels: list[Relationship] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def extend(self, other: Extraction) -> Extraction:
        self.nodes.extend(other.nodes)
        self.rels.extend(other.rels)
        self.chunks.extend(other.chunks)
        self.skipped.extend(other.skipped)
        return self

    def __len__(self) -> int:
        return len(self.nodes) + len(self.rels) + len(self.chunks)
