"""What every extractor returns, and the context it is given."""

from __future__ import annotations

from dataclasses import dataclass, field

from extractors.secrets import redact
from graphmem.model import Chunk, Node, Relationship

# Longest skip reason kept: reasons are echoed to stderr, hook logs and MCP answers, and may quote
# input (a CODEOWNERS token, a config value) of any length.
REASON_LIMIT = 200


def clean_reason(text: str, limit: int = REASON_LIMIT) -> str:
    """``text`` with secrets redacted, then clipped to ``limit`` characters (an ellipsis marks a cut).

    Redacted before clipping: a cut could leave a secret's prefix that no rule recognises.
    """
    text = redact(text)[0]
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@dataclass(slots=True)
class Skipped:
    """An input an extractor could not use, and why (shown to the user, never fatal).

    The reason is redacted and clipped here, where every skip is recorded, because it may quote the
    input it rejects and is written to stderr, hook logs and MCP answers.
    """

    path: str
    reason: str

    def __post_init__(self) -> None:
        self.reason = clean_reason(str(self.reason))


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
