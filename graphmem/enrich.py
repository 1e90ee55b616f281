"""LLM enrichment: the optional stage after ingest that adds extracted entities and relationships.

Ingestion writes the deterministic graph (code, history, decisions, incidents, ownership and the
rule-based mentions) first; it is complete and usable without any LLM. :func:`enrich` then reads
the texts of that graph back - decision records, postmortems and other documents (their chunks),
commit messages and docstrings - asks the configured endpoint (:mod:`extractors.llm`) for the
entities and relationships each names, and writes what the text supports:

* an entity becomes an ``Entity`` node (``entity:<type>:<name>``), unless it names what the graph
  already holds - a service, a team, a code symbol, a known technology - which it then links to;
* the source node ``MENTIONS`` it (props: the mention as written, its character ``span`` in the
  chunk or field it was found in, the entity type);
* relationships become ``RELATED_TO`` between entities, the ``predicate`` in their props;
* provenance: extractor ``llm``, version ``<prompt version>+<model>``, the model's confidence, and
  source path ``llm:<unit>`` (a unit is one text: a node's field or a window of its chunks).

Each unit has its own source path, so re-extracting one withdraws exactly what it said before.
What was enriched is recorded per unit in store meta (``llm_enrichment:<shard>``: text hash, cache
key, outcome): a re-run only does units that are new, whose text changed, or whose model or prompt
version changed; answers come from the cache (:class:`extractors.llm.AnswerCache`) when the same
text was asked before, so re-enriching costs no calls. Units whose text changed or vanished have
their old facts withdrawn, also by :func:`withdraw_stale` when an ingest runs without the LLM.

Failures never touch the deterministic graph. An endpoint that is down, times out, rate limits or
fails (after retries) stops the run: units not done are listed in the report with the reason and
are tried again by the next run. A unit whose answers stay invalid after one repair is recorded as
failed and skipped by later runs unless ``retry_failed``.

:func:`write_extractions` writes precomputed extractions (e.g. OpenIE triples per passage) through
the same path: grounding, linking, ``MENTIONS``, ``RELATED_TO`` and provenance.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from extractors.llm import (
    EXTRACTOR,
    PROMPT_VERSION,
    SOURCE_KINDS,
    AnswerError,
    Cancelled,
    EndpointError,
    Entity,
    Extracted,
    LLMError,
    LLMExtractor,
    Relation,
    cache_key,
    ground,
    normalise_type,
    text_hash,
)
from extractors.text import TECHNOLOGIES, Vocabulary
from graphmem.config import LLMSettings, Settings
from graphmem.errors import ModelError
from graphmem.model import (
    Node,
    NodeKind,
    Props,
    Provenance,
    Relationship,
    RelType,
    entity_key,
    incident_key,
    key_contains,
    normalise_name,
    now_iso,
    service_key,
    team_key,
)
from graphmem.stores.base import NAMES_STAMP, GraphStore, Keep

Progress = Callable[[str, int, int], None]

# Extractors whose entity nodes and relationships extraction may merge into; anything else in the
# graph (the deterministic extractors' facts) is linked to, never overwritten.
EXTRACTION_EXTRACTORS = frozenset({EXTRACTOR, "openie"})
STATE_PREFIX = "llm_enrichment:"
STATE_SHARDS = "0123456789abcdef"  # one meta entry per first hex digit of the unit id's hash
MAX_UNIT_CHARS = 6000  # a longer document is split into windows at chunk boundaries
WRITE_EVERY = 32  # units per write batch (and per state checkpoint)

KIND_OF_NODE: dict[NodeKind, str] = {
    NodeKind.DECISION: "decision",
    NodeKind.INCIDENT: "incident",
    NodeKind.DOCUMENT: "document",
    NodeKind.TICKET: "document",
    NodeKind.COMMIT: "commit",
    NodeKind.SYMBOL: "docstring",
    NodeKind.FILE: "docstring",
}
_FIELD_OF_KIND = {NodeKind.COMMIT: "message", NodeKind.SYMBOL: "docstring", NodeKind.FILE: "docstring"}

# Entity types that may name a service, a code symbol, or a technology of the gazetteer.
_SERVICE_TYPES = frozenset({"service", "component", "api", "product"})
_SYMBOL_TYPES = frozenset({"code_symbol", "api", "component"})
_NOT_TECHNOLOGY = frozenset({"person", "team", "location", "date", "event", "metric", "work", "error"})
_CODE_SHAPED = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?:\(\))?$")


# --- what is extracted --------------------------------------------------------------------------


@dataclass(slots=True)
class SourceExtraction:
    """Entities and relationships read from one text of one source node, ready to be written.

    ``text`` is what grounding checks names against (``None``: trust every name). ``source_path``
    is the provenance source of everything written for it (default ``<extractor>:<source_key>``):
    withdrawing that path withdraws these facts and nothing else. ``anchors`` map offsets in
    ``text`` to where the text lives (``(offset, "chunk", ordinal)``, ``(0, "field", "message")``)
    so spans can be recorded relative to that place.
    """

    source_key: str
    text: str | None
    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    extractor: str = "openie"
    extractor_version: str = "1"
    source_path: str | None = None
    source_commit: str | None = None
    anchors: tuple[tuple[int, str, str | int], ...] = ()
    malformed: int = 0  # input items that were not well formed (skipped before writing)

    @property
    def path(self) -> str:
        return self.source_path or f"{self.extractor}:{self.source_key}"

    @classmethod
    def from_triples(
        cls,
        source_key: str,
        text: str | None,
        triples: Iterable[Sequence[Any]],
        *,
        entities: Iterable[str] = (),
        entity_type: str = "concept",
        confidence: float = 1.0,
        **options: Any,
    ) -> SourceExtraction:
        """An extraction from ``(subject, predicate, object)`` triples and entity names (OpenIE
        output); the ends of every triple are entities too. Malformed triples are counted."""
        etype = normalise_type(entity_type) or "concept"
        out = cls(source_key, text, **options)
        names: dict[str, None] = {}
        for name in entities:
            if isinstance(name, str) and name.strip():
                names[" ".join(name.split())] = None
            else:
                out.malformed += 1
        for triple in triples:
            if (not isinstance(triple, (list, tuple)) or len(triple) != 3
                    or not all(isinstance(t, str) and t.strip() for t in triple)):
                out.malformed += 1
                continue
            s, p, o = (" ".join(t.split()) for t in triple)
            names[s] = None
            names[o] = None
            out.relations.append(Relation(s, p, o, confidence))
        out.entities = [Entity(n, etype, confidence) for n in names]
        return out


@dataclass(slots=True)
class WriteReport:
    """What writing extractions did."""

    sources: int = 0
    entities: int = 0  # entity nodes written (created or merged into)
    linked: int = 0  # mentions resolved to nodes the graph already had (services, symbols, ...)
    mentions: int = 0
    related: int = 0
    dropped_entities: int = 0  # names not found in their text
    dropped_relations: int = 0  # relationships with an end that was dropped or not an entity
    malformed: int = 0
    missing_endpoints: int = 0  # relationships whose source node is not in the graph
    withdrawn_rels: int = 0
    withdrawn_nodes: int = 0

    def add(self, other: WriteReport) -> WriteReport:
        for name in self.__slots__:  # type: ignore[attr-defined]
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


# --- linking ------------------------------------------------------------------------------------


def _technology_index() -> dict[str, str]:
    """Spelling -> canonical name of the gazetteer; case-sensitive spellings under themselves."""
    index: dict[str, str] = {}
    for canonical, aliases, case_sensitive in TECHNOLOGIES:
        for spelling in (canonical, *aliases):
            index[spelling if case_sensitive else spelling.casefold()] = canonical
    return index


_TECH_INDEX = _technology_index()


def vocabulary_of(store: GraphStore) -> Vocabulary:
    """The services, teams and code symbols of the graph, as a :class:`Vocabulary`."""
    services = [n.name for n in store.iter_nodes([NodeKind.SERVICE])]
    teams = [n.name for n in store.iter_nodes([NodeKind.TEAM])]
    symbols = [n.key for n in store.iter_nodes([NodeKind.SYMBOL])]
    return Vocabulary.from_symbol_keys(services, symbols, teams)


def people_of(store: GraphStore) -> dict[str, str]:
    """Person keys by name (lower case), for the names only one person in the graph has."""
    seen: dict[str, list[str]] = {}
    for node in store.iter_nodes([NodeKind.PERSON]):
        if node.name and "@" not in node.name:
            seen.setdefault(node.name.casefold(), []).append(node.key)
    return {name: keys[0] for name, keys in seen.items() if len(keys) == 1}


_ADR_NAME = re.compile(r"^ADR[-_ #]?0*(\d{1,5})$", re.IGNORECASE)
_INCIDENT_NAME = re.compile(r"^INC-\d+(?:-\d+)*$", re.IGNORECASE)


class _Linker:
    """Where an extracted entity goes: existing nodes it may name first, its own key last."""

    def __init__(self, vocabulary: Vocabulary | None, people: dict[str, str] | None = None) -> None:
        self.vocabulary = vocabulary
        self.people = people or {}
        self._services = {s.casefold(): s for s in vocabulary.services} if vocabulary else {}

    def options(self, name: str, etype: str, source_key: str) -> tuple[list[str], str, str, Props]:
        """``(existing keys to prefer, own key, own name, own props)``."""
        vocab = self.vocabulary
        prefer: list[str] = []
        if (adr := _ADR_NAME.match(name)) is not None:
            prefer.append(f"adr:{int(adr.group(1))}")
        elif _INCIDENT_NAME.match(name):
            prefer.append(incident_key(name))
        if etype == "person" and (person := self.people.get(" ".join(name.split()).casefold())):
            prefer.append(person)
        if vocab is not None:
            if etype == "team" and (team := vocab.team(name)):
                prefer.append(team_key(team))
            if etype in _SERVICE_TYPES:
                folded = name.casefold()
                for suffix in ("", " service", "-service", " api"):
                    if folded.endswith(suffix) and (svc := self._services.get(folded[: len(folded) - len(suffix)])):
                        prefer.append(service_key(svc))
                        break
            bare = name.strip("`").removesuffix("()")
            if (etype in _SYMBOL_TYPES or _looks_like_code(bare)) and _CODE_SHAPED.match(bare):
                keys = vocab.symbols.get(bare, [])
                if len(keys) > 1 and source_key.startswith(("sym:", "file:")):
                    path = source_key[4:].partition("::")[0] if source_key.startswith("sym:") else source_key[5:]
                    keys = [k for k in keys if k[4:].partition("::")[0] == path]
                if len(keys) == 1:
                    prefer.append(keys[0])
        if etype not in _NOT_TECHNOLOGY:
            canonical = _TECH_INDEX.get(name) or _TECH_INDEX.get(name.casefold())
            if canonical:
                return prefer, entity_key("technology", canonical), canonical, {
                    "entity_type": "technology", "canonical_name": canonical}
        return prefer, entity_key(etype, name), name, {"entity_type": etype}


def _looks_like_code(name: str) -> bool:
    if "_" in name or "." in name or name.endswith("()"):
        return True
    return any(c.isupper() for c in name[1:]) and any(c.islower() for c in name)


# --- writing ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Pending:
    ex: SourceExtraction
    entities: list[tuple[list[str], str, Node, Props, float]]  # prefer, own key, own node, mention props, conf
    relations: list[tuple[str, str, Relation]]  # subject name, object name (normalised), relation
    replace: bool


class FactWriter:
    """Grounds, links and writes extractions in batches (one store round per batch)."""

    def __init__(self, store: GraphStore, vocabulary: Vocabulary | None = None, *, ground_names: bool = True,
                 people: dict[str, str] | None = None) -> None:
        self.store = store
        self.linker = _Linker(vocabulary, people)
        self.ground_names = ground_names
        self.report = WriteReport()
        self._pending: list[_Pending] = []

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, ex: SourceExtraction, *, replace: bool = False) -> None:
        """Queue one extraction; with ``replace``, what its source path said before is withdrawn."""
        grounded = ground(ex.entities, ex.relations, ex.text if self.ground_names else None)
        self.report.sources += 1
        self.report.malformed += ex.malformed
        self.report.dropped_entities += len(grounded.dropped_entities)
        self.report.dropped_relations += grounded.dropped_relations
        entities = []
        for ent in grounded.entities:
            prefer, own, own_name, props = self.linker.options(ent.name, ent.type, ex.source_key)
            prov = Provenance(ex.path, ex.extractor, ex.extractor_version, ex.source_commit, ent.confidence)
            node = Node(own, own_name, prov, props)
            mention: Props = {"mention": ent.mention, "entity_type": ent.type}
            if ex.text is not None and self.ground_names:
                mention.update(_span_props(ex.anchors, ent.start, ent.end))
            entities.append((prefer, own, node, mention, ent.confidence))
        relations = [(normalise_name(r.subject), normalise_name(r.object), r) for r in grounded.relations]
        self._pending.append(_Pending(ex, entities, relations, replace))

    def flush(self) -> WriteReport:
        """Write what is queued; returns the running totals."""
        pending, self._pending = self._pending, []
        if not pending:
            return self.report
        wanted = {p.ex.source_key for p in pending}
        for p in pending:
            for prefer, own, _, _, _ in p.entities:
                wanted.update(prefer)
                wanted.add(own)
        existing = self.store.get_nodes(wanted)

        def is_open(key: str) -> bool:
            node = existing.get(key)
            return node is not None and node.valid_to is None

        def ours(extractor: str) -> bool:
            return extractor in EXTRACTION_EXTRACTORS

        # Repeats (two texts naming one entity) stay separate: the store folds them into one
        # element with both sources, so withdrawing one text keeps what the other says.
        nodes: list[Node] = []
        rels: list[Relationship] = []
        predicates: dict[tuple[str, str, str], str] = {}  # every predicate stated for a RELATED_TO
        per_source: list[tuple[_Pending, list[Node], list[Relationship]]] = []
        subjects: set[str] = set()
        for p in pending:
            chosen: dict[str, str] = {}  # normalised entity name -> key written for it
            mine_nodes: list[Node] = []
            mine_rels: list[Relationship] = []
            for prefer, own, node, mention, conf in p.entities:
                key = next((k for k in prefer if is_open(k)), None)
                if key is None:
                    key = own
                    old = existing.get(own)
                    if old is None or old.valid_to is not None or ours(old.provenance.extractor):
                        mine_nodes.append(node)
                    if old is not None and old.valid_to is None:
                        self.report.linked += 1
                else:
                    self.report.linked += 1
                chosen[normalise_name(mention["mention"])] = key  # type: ignore[arg-type]
                if key == p.ex.source_key or key_contains(key, p.ex.source_key) or \
                        key_contains(p.ex.source_key, key):
                    continue  # a text naming its own node (or what holds it) says nothing new
                prov = Provenance(p.ex.path, p.ex.extractor, p.ex.extractor_version, p.ex.source_commit, conf)
                mine_rels.append(Relationship(p.ex.source_key, RelType.MENTIONS, key, prov, dict(mention)))
            for s_name, o_name, relation in p.relations:
                src, dst = chosen.get(s_name), chosen.get(o_name)
                if src is None or dst is None or src == dst:
                    self.report.dropped_relations += 1
                    continue
                prov = Provenance(p.ex.path, p.ex.extractor, p.ex.extractor_version, p.ex.source_commit,
                                  relation.confidence)
                rel = Relationship(src, RelType.RELATED_TO, dst, prov, {"predicate": relation.predicate})
                predicates[rel.ident] = _merge_predicates(predicates.get(rel.ident), relation.predicate)
                mine_rels.append(rel)
                subjects.add(src)
            nodes += mine_nodes
            rels += mine_rels
            per_source.append((p, mine_nodes, mine_rels))

        # Facts the deterministic extractors already state are theirs: not overwritten, not doubled.
        before = {r.ident: r for r in self.store.get_relationships(wanted & ({p.ex.source_key for p in pending}
                                                                             | subjects))}
        # A mention of what the source is already joined to (an incident AFFECTED a service, a
        # commit REFERENCES a decision) adds nothing.
        joined = {(r.src, r.dst) for r in before.values() if not ours(r.provenance.extractor)}
        joined |= {(dst, src) for src, dst in joined}
        for ident, old in before.items():
            if ident in predicates and ours(old.provenance.extractor):
                merged = old.props.get("predicate")
                for part in predicates[ident].split(" | "):
                    merged = _merge_predicates(merged, part)
                predicates[ident] = str(merged)
        kept: list[Relationship] = []
        for rel in rels:
            old = before.get(rel.ident)
            if (rel.type is RelType.MENTIONS and (rel.src, rel.dst) in joined) or \
                    (old is not None and not ours(old.provenance.extractor)):
                continue
            if rel.type is RelType.RELATED_TO:
                rel.props["predicate"] = predicates[rel.ident]  # the store keeps the last: make it all
            kept.append(rel)
        self.report.entities += len({n.key for n in nodes})
        self.report.mentions += len({r.ident for r in kept if r.type is RelType.MENTIONS})
        self.report.related += len({r.ident for r in kept if r.type is RelType.RELATED_TO})
        if nodes:
            self.store.upsert(nodes, (), ())
        if kept:
            self.report.missing_endpoints += self.store.upsert((), kept, ()).missing_endpoints
        for p, mine_nodes, mine_rels in per_source:
            if p.replace:
                summary = self.store.close_sources([p.ex.path], keep=Keep.of(mine_nodes, mine_rels))
                self.report.withdrawn_nodes += summary.closed_nodes
                self.report.withdrawn_rels += summary.closed_rels
        return self.report


def _merge_predicates(old: object, new: str) -> str:
    parts = [p for p in str(old or "").split(" | ") if p]
    if new not in parts:
        parts.append(new)
    return " | ".join(parts)


def _span_props(anchors: Sequence[tuple[int, str, str | int]], start: int, end: int) -> Props:
    base, name, value = 0, "", ""
    for offset, n, v in anchors:
        if offset <= start:
            base, name, value = offset, n, v
    out: Props = {"span": [start - base, end - base]}
    if name:
        out[name] = value
    return out


def write_extractions(
    store: GraphStore,
    extractions: Iterable[SourceExtraction],
    *,
    vocabulary: Vocabulary | None = None,
    ground_names: bool = True,
    replace: bool = False,
    batch: int = 500,
    resolve: bool = True,
) -> WriteReport:
    """Write precomputed extractions (one per source text) into the graph.

    The path LLM enrichment takes: names are grounded in each extraction's text (unless
    ``ground_names`` is off or its text is ``None``), linked to what ``vocabulary`` knows, written as
    entity nodes with ``MENTIONS`` from the source node and ``RELATED_TO`` (``predicate`` prop)
    between entities, with each extraction's provenance. With ``replace``, what each source path
    said before is withdrawn. Source nodes must exist already (relationships from a missing one
    are counted in ``missing_endpoints``). Example, OpenIE triples of imported passages::

        write_extractions(gm.store, [
            SourceExtraction.from_triples(passage.key, f"{passage.title}\\n{passage.text}", doc["extracted_triples"],
                                          entities=doc["extracted_entities"], extractor="openie",
                                          source_path=f"dataset:musique/{passage.id}")
            for passage, doc in matched])
    """
    writer = FactWriter(store, vocabulary, ground_names=ground_names)
    for ex in extractions:
        writer.add(ex, replace=replace)
        if len(writer) >= batch:
            writer.flush()
    report = writer.flush()
    if report.entities or report.mentions or report.related:
        store.set_meta({NAMES_STAMP: now_iso()})
        if resolve:
            resolve_entities(store)
    return report


# --- units: the texts enrichment reads ----------------------------------------------------------


@dataclass(slots=True)
class Unit:
    """One text to extract from: a field of a node, or a window of its chunks."""

    id: str  # the node key, "#<n>" for a document's later windows
    source_key: str
    kind: str
    text: str
    title: str
    source_path: str
    source_commit: str | None
    anchors: tuple[tuple[int, str, str | int], ...]

    @property
    def path(self) -> str:
        """The provenance source of the facts written for this unit."""
        return f"{EXTRACTOR}:{self.id}"

    @property
    def text_hash(self) -> str:
        return text_hash(self.text)


def _title(node: Node) -> str:
    if node.key.startswith("adr:"):
        return f"ADR-{node.key[4:]}: {node.name}"
    if node.key.startswith("incident:"):
        return f"{node.key[9:]}: {node.name}"
    if node.key.startswith("sym:"):
        return f"{node.props.get('qualname', node.name)} in {node.provenance.source_path}"
    if node.key.startswith("commit:"):
        return f"commit {node.key[7:19]}"
    return node.name or node.key


def collect_units(store: GraphStore, *, kinds: Iterable[str] | None = None, min_chars: int = 40) -> list[Unit]:
    """The texts of the graph an LLM may enrich, in id order. Texts under ``min_chars`` are left out."""
    wanted = set(kinds) if kinds is not None else set(SOURCE_KINDS)
    unknown = wanted - set(SOURCE_KINDS)
    if unknown:
        raise ModelError(f"unknown source kind {min(unknown)!r}: choose from {', '.join(SOURCE_KINDS)}")
    node_kinds = [k for k, v in KIND_OF_NODE.items() if v in wanted]
    units: list[Unit] = []
    chunked: list[Node] = []
    for node in store.iter_nodes(node_kinds):
        kind = KIND_OF_NODE[node.kind]
        name = _FIELD_OF_KIND.get(node.kind)
        if name is None:
            chunked.append(node)
            continue
        text = node.props.get(name)
        if isinstance(text, str) and len(text.strip()) >= min_chars:
            text = text[:MAX_UNIT_CHARS]  # a novel in a commit message: its start says what it is about
            units.append(Unit(node.key, node.key, kind, text, _title(node), node.provenance.source_path,
                              node.provenance.source_commit, ((0, "field", name),)))
    for i in range(0, len(chunked), 200):
        part = chunked[i:i + 200]
        by_node: dict[str, list[Any]] = {}
        for chunk in store.get_chunks([n.key for n in part]):
            by_node.setdefault(chunk.node_key, []).append(chunk)
        for node in part:
            chunks = sorted(by_node.get(node.key, []), key=lambda c: c.ordinal)
            windows: list[tuple[str, list[tuple[int, str, str | int]]]] = []
            text, anchors = "", []
            for chunk in chunks:
                if text and len(text) + 2 + len(chunk.text) > MAX_UNIT_CHARS:
                    windows.append((text, anchors))
                    text, anchors = "", []
                if text:
                    text += "\n\n"
                anchors.append((len(text), "chunk", chunk.ordinal))
                text += chunk.text
            if text:
                windows.append((text, anchors))
            for n, (text, anchors) in enumerate(windows):
                if len(text.strip()) >= min_chars:
                    units.append(Unit(node.key if n == 0 else f"{node.key}#{n}", node.key, KIND_OF_NODE[node.kind],
                                      text, _title(node), node.provenance.source_path,
                                      node.provenance.source_commit, tuple(anchors)))
    return sorted(units, key=lambda u: u.id)


# --- state --------------------------------------------------------------------------------------

State = dict[str, list[str]]  # unit id -> [text hash, cache key, "done" | "failed", kind]


def _shard(unit_id: str) -> str:
    return hashlib.blake2b(unit_id.encode(), digest_size=4).hexdigest()[0]


def load_state(store: GraphStore) -> State:
    """What enrichment recorded per unit."""
    state: State = {}
    for shard in STATE_SHARDS:
        raw = store.get_meta(STATE_PREFIX + shard)
        if raw:
            try:
                state.update(json.loads(raw))
            except ValueError:
                pass  # a damaged shard only means those units are done again
    return state


def save_state(store: GraphStore, state: State, shards: Iterable[str]) -> None:
    values: dict[str, str | None] = {}
    for shard in set(shards):
        part = {k: v for k, v in state.items() if _shard(k) == shard}
        values[STATE_PREFIX + shard] = json.dumps(part, sort_keys=True, separators=(",", ":")) if part else None
    if values:
        store.set_meta(values)


def withdraw_stale(store: GraphStore, *, units: list[Unit] | None = None, kinds: Iterable[str] | None = None,
                   min_chars: int = 40, state: State | None = None) -> int:
    """Withdraw the enrichment of units whose text changed or vanished since it was made (no
    endpoint needed); returns how many units. Used by ingest when it runs without the LLM."""
    if state is None:
        if store.get_meta("llm_last_enriched_at") is None:
            return 0  # never enriched: nothing to withdraw (one lookup instead of every shard)
        state = load_state(store)
    if not state:
        return 0
    wanted = set(kinds) if kinds is not None else set(SOURCE_KINDS)
    if units is None:
        units = collect_units(store, kinds=wanted, min_chars=min_chars)
    current = {u.id: u.text_hash for u in units}
    stale = [uid for uid, entry in state.items()
             if (entry[3] if len(entry) > 3 else None) in wanted and current.get(uid) != entry[0]]
    if stale:
        store.close_sources([f"{EXTRACTOR}:{uid}" for uid in stale])
        for uid in stale:
            del state[uid]
        save_state(store, state, {_shard(uid) for uid in stale})
        store.set_meta({NAMES_STAMP: now_iso()})
    return len(stale)


# --- the stage ----------------------------------------------------------------------------------


@dataclass(slots=True)
class EnrichReport:
    """What one enrichment run did, and what it could not do."""

    model: str
    prompt_version: str = PROMPT_VERSION
    units: int = 0  # texts eligible for enrichment
    up_to_date: int = 0  # enriched before with the same text, model and prompt version
    from_cache: int = 0  # written from cached answers, no call
    called: int = 0  # answered by the endpoint in this run
    withdrawn: int = 0  # units whose text changed or vanished: their old facts withdrawn
    not_enriched: list[dict[str, str]] = field(default_factory=list)  # {unit, source, path, reason}
    stopped: str | None = None  # why the run stopped early (endpoint unavailable)
    written: WriteReport = field(default_factory=WriteReport)
    usage: dict[str, int] = field(default_factory=dict)
    resolution: Any = None
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.not_enriched

    @property
    def enriched(self) -> int:
        return self.from_cache + self.called

    def as_dict(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for item in self.not_enriched:
            reasons[item["reason"]] = reasons.get(item["reason"], 0) + 1
        return {
            "model": self.model, "prompt_version": self.prompt_version, "units": self.units,
            "up_to_date": self.up_to_date, "enriched": self.enriched, "from_cache": self.from_cache,
            "called": self.called, "withdrawn": self.withdrawn, "complete": self.complete,
            "not_enriched": len(self.not_enriched), "not_enriched_reasons": reasons,
            "not_enriched_sources": self.not_enriched, "stopped": self.stopped,
            "written": self.written.as_dict(), "usage": self.usage, "resolution": self.resolution,
            "seconds": round(self.seconds, 2),
        }


def resolve_entities(store: GraphStore) -> Any:
    """Merge duplicate entity nodes with :func:`graphmem.resolution.resolve_entities` when that
    module is installed; its report (``None`` without it)."""
    if importlib.util.find_spec("graphmem.resolution") is None:
        return None
    module = importlib.import_module("graphmem.resolution")
    result = module.resolve_entities(store)
    if hasattr(result, "as_dict"):
        return result.as_dict()
    return result if isinstance(result, (dict, list, str, int, float, type(None))) else str(result)


def enrich(
    store: GraphStore,
    settings: Settings,
    *,
    llm: LLMSettings | None = None,
    kinds: Iterable[str] | None = None,
    retry_failed: bool = False,
    limit: int | None = None,
    progress: Progress | None = None,
    resolve: bool = True,
    sleep: Callable[[float], None] | None = None,
) -> EnrichReport:
    """Enrich the graph with LLM-extracted entities and relationships (see the module docstring).

    ``llm`` overrides ``settings.llm``; answers are cached under ``<home>/cache/llm``. ``limit``
    caps the units sent to the endpoint in this run (cached answers are always written). Raises
    :class:`~graphmem.errors.ConfigError` without an endpoint; endpoint failures are reported, not
    raised.
    """
    started = time.perf_counter()
    conf = (llm or settings.llm).require()
    note = progress or (lambda stage, done, total: None)
    report = EnrichReport(model=str(conf.model))
    wanted = set(kinds) if kinds is not None else set(SOURCE_KINDS)
    units = collect_units(store, kinds=wanted, min_chars=conf.min_chars)
    report.units = len(units)
    state = load_state(store)
    report.withdrawn = withdraw_stale(store, units=units, kinds=wanted, state=state)
    dirty: set[str] = set()

    cancel = threading.Event()
    extractor = LLMExtractor(conf, settings.home / "cache" / "llm", cancel=cancel, sleep=sleep)
    writer = FactWriter(store, vocabulary_of(store), people=people_of(store))
    todo: list[tuple[Unit, str, bool]] = []

    def skip(unit: Unit, reason: str) -> None:
        report.not_enriched.append({"unit": unit.id, "source": unit.source_key, "path": unit.source_path,
                                    "reason": reason})

    def written(unit: Unit, digest: str, result: Extracted, replace: bool) -> None:
        writer.add(_extraction(unit, result, extractor.version), replace=replace)
        state[unit.id] = [unit.text_hash, digest, "done", unit.kind]
        dirty.add(_shard(unit.id))

    def failed(unit: Unit, digest: str) -> None:
        # Recorded, so later runs do not pay for the same invalid answers again (--retry-failed does).
        state[unit.id] = [unit.text_hash, digest, "failed", unit.kind]
        dirty.add(_shard(unit.id))

    def checkpoint(force: bool = False) -> None:
        if force or len(writer) >= WRITE_EVERY:
            wrote = len(writer)
            writer.flush()
            save_state(store, state, dirty)
            dirty.clear()
            if wrote:
                store.set_meta({NAMES_STAMP: now_iso(), "llm_last_enriched_at": now_iso()})

    try:
        for unit in units:
            digest = cache_key(unit.kind, extractor.prepare(unit.text), extractor.model)
            entry = state.get(unit.id)
            if entry and entry[1] == digest:
                if entry[2] == "done":
                    report.up_to_date += 1
                    continue
                if not retry_failed:
                    skip(unit, "invalid answers in an earlier run (use --retry-failed)")
                    continue
            replace = entry is not None
            hit = extractor.cached(unit.kind, unit.text)
            if hit is not None:
                written(unit, digest, hit, replace)
                report.from_cache += 1
                checkpoint()
            else:
                todo.append((unit, digest, replace))
        if limit is not None and len(todo) > limit:
            for unit, _, _ in todo[limit:]:
                skip(unit, f"over the limit of {limit} units per run")
            todo = todo[:limit]
        note("enrich", 0, len(todo))
        _call_all(extractor, todo, conf.concurrency, cancel, report, skip, written, failed, checkpoint, note)
        checkpoint(force=True)
    except BaseException:
        cancel.set()
        with contextlib.suppress(Exception):  # the error that stopped the run is the one to see
            checkpoint(force=True)  # what was answered is kept: the next run resumes from there
        raise
    finally:
        report.usage = extractor.client.usage.as_dict()
        extractor.close()
    report.written = writer.report
    if resolve and (report.enriched or report.withdrawn):
        report.resolution = resolve_entities(store)
    report.seconds = time.perf_counter() - started
    return report


def _extraction(unit: Unit, result: Extracted, version: str) -> SourceExtraction:
    return SourceExtraction(unit.source_key, result.text, list(result.answer.entities),
                            list(result.answer.relations), extractor=EXTRACTOR, extractor_version=version,
                            source_path=unit.path, source_commit=unit.source_commit, anchors=unit.anchors)


def _call_all(
    extractor: LLMExtractor,
    todo: list[tuple[Unit, str, bool]],
    concurrency: int,
    cancel: threading.Event,
    report: EnrichReport,
    skip: Callable[[Unit, str], None],
    written: Callable[[Unit, str, Extracted, bool], None],
    failed: Callable[[Unit, str], None],
    checkpoint: Callable[[], None],
    note: Progress,
) -> None:
    """Ask the endpoint about ``todo`` with at most ``concurrency`` requests in flight; writing
    stays on this thread. Units with the same text share one request. The first endpoint failure
    stops new requests."""
    if not todo:
        return
    groups: dict[str, list[tuple[Unit, str, bool]]] = {}
    for item in todo:
        groups.setdefault(item[1], []).append(item)
    queue = iter(groups.values())
    running: dict[Future[Extracted], list[tuple[Unit, str, bool]]] = {}
    done = 0
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="graphmem-llm") as pool:
        try:
            while True:
                while report.stopped is None and len(running) < concurrency:
                    group = next(queue, None)
                    if group is None:
                        break
                    unit = group[0][0]
                    running[pool.submit(extractor.extract, unit.kind, unit.text, title=unit.title)] = group
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    group = running.pop(future)
                    done += len(group)
                    try:
                        result = future.result()
                    except EndpointError as exc:
                        if report.stopped is None:
                            report.stopped = f"endpoint unavailable: {exc}"
                            cancel.set()
                        reason = report.stopped if isinstance(exc, Cancelled) else f"endpoint unavailable: {exc}"
                        for unit, _, _ in group:
                            skip(unit, reason)
                    except AnswerError as exc:
                        for unit, digest, _ in group:
                            skip(unit, str(exc))
                            failed(unit, digest)
                    except LLMError as exc:
                        for unit, _, _ in group:
                            skip(unit, str(exc))
                    else:
                        for n, (unit, digest, replace) in enumerate(group):
                            written(unit, digest, result, replace)
                            if result.cached or n:  # answered for another unit with the same text
                                report.from_cache += 1
                            else:
                                report.called += 1
                        checkpoint()
                    note("enrich", done, len(todo))
        finally:
            cancel.set()
            pool.shutdown(wait=True, cancel_futures=True)
    for group in queue:
        for unit, _, _ in group:
            skip(unit, f"not attempted: {report.stopped}")
