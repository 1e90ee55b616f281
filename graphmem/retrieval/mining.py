"""Training data for the reranker, mined from the ingested graph itself.

Every question comes with the nodes that answer it (gold keys) and the passages that stand for
them, read from what ingestion already knows:

- ``docstring``: a symbol's docstring asks for its code chunk;
- ``commit``: a commit's subject asks for the symbols it MODIFIED;
- ``decision`` / ``incident``: a record's title asks for its section chunks;
- ``relation:<TYPE>``: templated questions over graph relations ("Which commit caused INC-042?",
  "What code changed because of ADR-5?", "Who owns billing?", "Which functions call post?").

Hard negatives are what hybrid retrieval ranks high for the question without being an answer;
random chunks add easy ones. Questions are split into training and held-out sets by the node they
are about (hashed with the seed), so evaluation asks nothing the model was trained on. Everything
is deterministic for a seed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from graphmem.model import Chunk, Node, NodeKind, RelType, kind_of

if TYPE_CHECKING:
    from graphmem.retrieval.indexes import Indexes
    from graphmem.stores.base import GraphStore

Progress = Callable[[str, int, int], None]

HELD_OUT = 0.25  # share of question groups kept for evaluation
HARD_NEGATIVES = 4  # per question, from the hybrid ranking's head
RANDOM_NEGATIVES = 1  # per question, any other chunk
MAX_QUESTIONS = 3000  # mining asks hybrid retrieval once per question: bound it on big graphs
MAX_GOLD = 12  # a question with more answers than this says little about any one of them
SEARCH_DEPTH = 20  # how deep hard negatives are looked for (the engine reranks the top 20)
_HEADER = re.compile(r"^[^\n]{0,200}\n\n")  # "ADR-5 Title — Section" line above a section's text


@dataclass(frozen=True, slots=True)
class EvalQuestion:
    """A mined question: the nodes that answer it and the passages that stand for them.

    ``ignore`` holds nodes that are neither answers nor negatives (a commit's own node when the
    question is its subject and the answers are the code it changed).
    """

    query: str
    gold: tuple[str, ...]
    positives: tuple[str, ...]
    source: str
    group: str
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Triple:
    """(question, relevant passage, non-relevant passage), with where it came from."""

    query: str
    positive: str
    negative: str
    source: str
    group: str
    negative_key: str
    hard: bool


@dataclass(slots=True)
class MinedSet:
    """Triples and questions, split into training and held-out parts."""

    train: list[Triple] = field(default_factory=list)
    held_out: list[Triple] = field(default_factory=list)
    train_questions: list[EvalQuestion] = field(default_factory=list)
    eval_questions: list[EvalQuestion] = field(default_factory=list)
    seed: int = 0

    def counts(self) -> dict[str, Any]:
        def by_source(items: Iterable[Any]) -> dict[str, int]:
            out: dict[str, int] = {}
            for item in items:
                out[item.source] = out.get(item.source, 0) + 1
            return dict(sorted(out.items()))

        return {"seed": self.seed, "train_triples": len(self.train), "held_out_triples": len(self.held_out),
                "train_questions": len(self.train_questions), "held_out_questions": len(self.eval_questions),
                "hard_negatives": sum(t.hard for t in self.train),
                "train_by_source": by_source(self.train_questions),
                "held_out_by_source": by_source(self.eval_questions)}


# --- questions ----------------------------------------------------------------------------------


def mine_questions(store: GraphStore) -> list[EvalQuestion]:
    """Every question the graph can answer about itself, merged by question text, in a stable order."""
    nodes = {n.key: n for n in store.iter_nodes()}
    chunks: dict[str, list[Chunk]] = {}
    for chunk in store.iter_chunks():
        chunks.setdefault(chunk.node_key, []).append(chunk)
    for parts in chunks.values():
        parts.sort(key=lambda c: c.ordinal)

    def passages(key: str) -> list[str]:
        # What the engine hands the reranker for a node: a chunk's text, else "name (key)".
        if key in chunks:
            return [c.text for c in chunks[key]]
        node = nodes.get(key)
        return [f"{node.name} ({key})" if node else key]

    # (rel type, direction, node) -> the nodes at the other end
    adjacency: dict[tuple[str, str, str], set[str]] = {}
    for edge in store.incident_edges(sorted(nodes), direction="out"):
        adjacency.setdefault((edge.step.type, "out", edge.step.src), set()).add(edge.step.dst)
        adjacency.setdefault((edge.step.type, "in", edge.step.dst), set()).add(edge.step.src)

    def related(key: str, rel: RelType, direction: str) -> list[str]:
        return sorted(adjacency.get((rel.value, direction, key), ()))

    found: list[EvalQuestion] = []

    def add(query: str, gold: Iterable[str], source: str, group: str, ignore: Iterable[str] = ()) -> None:
        gold = sorted({g for g in gold if g in nodes})
        query = " ".join(query.split())
        if not gold or len(gold) > MAX_GOLD or len(query) < 8:
            return
        pos = tuple(p for g in gold for p in passages(g))
        found.append(EvalQuestion(query, tuple(gold), pos, source, group, tuple(sorted(set(ignore) - set(gold)))))

    for key, node in nodes.items():
        kind = node.kind
        if kind is NodeKind.SYMBOL and key in chunks:
            doc = _first_sentence(str(node.props.get("docstring") or ""))
            if len(doc.split()) >= 3:
                add(doc, [key], "docstring", key)
        elif kind is NodeKind.COMMIT:
            subject = str(node.props.get("subject") or node.name)
            changed = related(key, RelType.MODIFIED, "out")
            add(subject, changed, "commit", key, ignore=[key, *related(key, RelType.CHANGED, "out")])
        elif kind in (NodeKind.DECISION, NodeKind.INCIDENT) and key in chunks:
            title = str(node.props.get("title") or node.name)
            add(title, [key], kind.value, key)

    # Templated questions over relations: the answer is the node at the other end.
    for key, node in nodes.items():
        kind = node.kind
        label = _label(node)
        if kind is NodeKind.INCIDENT:
            add(f"Which commit caused {label}?", related(key, RelType.CAUSED_BY, "out"), "relation:CAUSED_BY", key)
            fixes = related(key, RelType.RESOLVED_BY, "out") + related(key, RelType.FIXES, "in")
            add(f"Which commit fixed {label}?", fixes, "relation:RESOLVED_BY", key)
            add(f"What did {label} affect?", related(key, RelType.AFFECTED, "out"), "relation:AFFECTED", key)
        elif kind is NodeKind.DECISION:
            commits = sorted(set(related(key, RelType.IMPLEMENTS, "in")) | set(related(key, RelType.REFERENCES, "in")))
            commits = [c for c in commits if kind_of(c) is NodeKind.COMMIT]
            code = {s for c in commits for s in related(c, RelType.MODIFIED, "out")}
            code |= {s for s in related(key, RelType.IMPLEMENTS, "in") if kind_of(s) is NodeKind.SYMBOL}
            add(f"What code changed because of {label}?", code, "relation:IMPLEMENTS", key, ignore=commits)
            add(f"Which commits implemented {label}?", commits, "relation:REFERENCES", key)
            add(f"Which decision replaced {label}?", related(key, RelType.SUPERSEDES, "in"),
                "relation:SUPERSEDES", key)
        elif kind is NodeKind.SERVICE:
            add(f"Who owns the {node.name} service?", related(key, RelType.OWNS, "in"), "relation:OWNS", key)
            add(f"Which services depend on {node.name}?", related(key, RelType.DEPENDS_ON, "in"),
                "relation:DEPENDS_ON", key)
            add(f"Which incidents hit the {node.name} service?", related(key, RelType.AFFECTED, "in"),
                "relation:AFFECTED", key)
        elif kind is NodeKind.SYMBOL:
            callers = [c for c in related(key, RelType.CALLS, "in") if kind_of(c) is NodeKind.SYMBOL]
            add(f"Which functions call {node.name}?", callers, "relation:CALLS", key)
        elif kind is NodeKind.COMMIT:
            subject = str(node.props.get("subject") or node.name)
            add(f"Who wrote the commit '{subject}'?", related(key, RelType.AUTHORED, "in"), "relation:AUTHORED", key)
        elif kind is NodeKind.TEAM:
            add(f"Who is on the {node.name} team?", related(key, RelType.MEMBER_OF, "in"), "relation:MEMBER_OF", key)

    # One question per text: identical texts (two clients with one docstring) share their answers.
    merged: dict[str, EvalQuestion] = {}
    for q in found:
        norm = q.query.casefold()
        if norm in merged:
            old = merged[norm]
            gold = tuple(sorted(set(old.gold) | set(q.gold)))
            pos = tuple(dict.fromkeys(old.positives + q.positives))
            ignore = tuple(sorted((set(old.ignore) | set(q.ignore)) - set(gold)))
            merged[norm] = EvalQuestion(old.query, gold, pos, old.source, min(old.group, q.group), ignore)
        else:
            merged[norm] = q
    return [merged[k] for k in sorted(merged)]


def split_questions(questions: list[EvalQuestion], *, held_out: float = HELD_OUT,
                    seed: int = 0) -> tuple[list[EvalQuestion], list[EvalQuestion]]:
    """(train, held out), by a seeded hash of each question's group: every question about one node
    lands on the same side, and no question text is on both."""
    if not 0.0 <= held_out < 1.0:
        raise ValueError("held_out must be in [0, 1)")
    train: list[EvalQuestion] = []
    held: list[EvalQuestion] = []
    for q in questions:
        (held if _unit(f"{seed}:{q.group}") < held_out else train).append(q)
    if held_out > 0 and not held and len(train) > 1:
        held.append(train.pop())
    return train, held


# --- triples ------------------------------------------------------------------------------------


def mine(store: GraphStore, indexes: Indexes, *, seed: int = 0, held_out: float = HELD_OUT,
         hard_negatives: int = HARD_NEGATIVES, random_negatives: int = RANDOM_NEGATIVES,
         max_questions: int = MAX_QUESTIONS, progress: Progress | None = None) -> MinedSet:
    """Questions from the graph, hard negatives from hybrid retrieval, split for training and evaluation."""
    from graphmem.retrieval.engine import Retriever

    note = progress or (lambda stage, done, total: None)
    rng = np.random.default_rng(seed)
    questions = mine_questions(store)
    if len(questions) > max_questions:
        pick = sorted(rng.choice(len(questions), size=max_questions, replace=False).tolist())
        questions = [questions[i] for i in pick]
    train_q, held_q = split_questions(questions, held_out=held_out, seed=seed)
    all_chunks = [(c.node_key, c.text) for c in store.iter_chunks()]
    retriever = Retriever(store, indexes)
    out = MinedSet(train_questions=train_q, eval_questions=held_q, seed=seed)
    for i, q in enumerate(questions):
        # Each question draws from its own generator: the triples do not depend on mining order.
        qrng = np.random.default_rng([seed, int(_unit(q.query) * 2**31)])
        skip = set(q.gold) | set(q.ignore)
        hits = retriever.query(q.query, mode="hybrid", k=SEARCH_DEPTH).results
        pool = [(h.key, h.text) for h in hits if h.key not in skip]
        # Mostly the very top (what the reranker must beat), some from deeper in the head.
        hard = pool[: max(0, hard_negatives - 1)]
        rest = pool[len(hard):]
        if rest and hard_negatives > 0:
            hard.append(rest[int(qrng.integers(len(rest)))])
        easy: list[tuple[str, str]] = []
        for _ in range(random_negatives * 4):
            if len(easy) >= random_negatives or not all_chunks:
                break
            key, text = all_chunks[int(qrng.integers(len(all_chunks)))]
            if key not in skip:
                easy.append((key, text))
        triples = []
        for j, (neg_key, neg_text) in enumerate(hard + easy):
            positive = _training_view(q, q.positives[j % len(q.positives)], qrng)
            triples.append(Triple(q.query, positive, neg_text, q.source, q.group, neg_key, j < len(hard)))
        (out.held_out if q in held_q else out.train).extend(triples)
        note("mine", i + 1, len(questions))
    rng.shuffle(out.train)  # type: ignore[arg-type]
    return out


def _training_view(q: EvalQuestion, passage: str, rng: np.random.Generator) -> str:
    """The positive as trained on. Half the time the words the question was taken from (a docstring,
    a record's title line) are cut out, so the model learns what a passage is about and not only
    that it repeats the question; the other half matches what retrieval hands over."""
    if rng.random() < 0.5:
        return passage
    if q.source == "docstring":
        cut = passage.replace(q.query, " ").strip()
        return cut or passage
    if q.source in ("decision", "incident"):
        cut = _HEADER.sub("", passage, count=1).strip()
        return cut or passage
    return passage


# --- helpers ------------------------------------------------------------------------------------


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.match(r"(.{12,}?[.!?])(\s|$)", text)
    return (match.group(1) if match else text)[:300]


def _label(node: Node) -> str:
    """How a question names a node: its record id (INC-042, ADR-5) or its name."""
    if node.kind is NodeKind.DECISION:
        return f"ADR-{node.key.split(':', 1)[1]}"
    if node.kind is NodeKind.INCIDENT:
        return node.key.split(":", 1)[1]
    return node.name


def _unit(text: str) -> float:
    """A stable number in [0, 1) for a text."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") / 2.0**64


__all__ = ["EvalQuestion", "MinedSet", "Triple", "mine", "mine_questions", "split_questions"]
