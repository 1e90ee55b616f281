"""What graph retrieval returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphmem.retrieval.graph.linking import Link
from graphmem.stores.base import Path


@dataclass(slots=True)
class GraphHit:
    key: str
    score: float
    path: Path


@dataclass(slots=True)
class GraphResult:
    hits: list[GraphHit]
    seeds: dict[str, float]
    linked: dict[str, Link]  # key -> why it was linked
    anchored: bool = False  # started from organisation nodes the question names (not only entities)
    named: bool = False  # started from anything the question names (passages and entities too)
    reached: int = 0
    subjects: set[str] = field(default_factory=set)  # named nodes of the asked kind the question is about
    layer: bool = False  # ranked over the entity layer (passages by the PageRank of their entities)
    # Where the question places its answer: packages (directories) it lies outside
    # (``Question.outside``, ``outside_own``), and path prefixes ("src/app/") and module files
    # ("sphinx/directives/patches.py") it lies in (``Question.inside``).
    outside: set[str] = field(default_factory=set)
    inside: set[str] = field(default_factory=set)
    bridged: set[str] = field(default_factory=set)  # layer hits reached through another passage into
    # the entity they are about (the next hop of a multi-hop question)
    # The project's types of the sort the question asks for by a noun ("which middleware ...";
    # ``graphmem.retrieval.graph.sorts``): the answers are among them.
    sort: set[str] = field(default_factory=set)
    # The types whose members the question asks for ("which methods of Client ...").
    owners: set[str] = field(default_factory=set)
    # "Which module is imported by the most files?": the code by that count, most first.
    counted: list[str] = field(default_factory=list)
    # Changelogs, when the question asks nothing of the project's history: they come after the rest.
    records: set[str] = field(default_factory=set)

    def messages(self) -> dict[str, str]:
        """Why each linked node was linked, for people."""
        return {key: link.message for key, link in self.linked.items()}
