"""The lifecycle of memory agents and people write (:mod:`graphmem.memory`): use and decay, time to
live, deduplication, consolidation, checkpoints with rollback, and erasure.

Only memory-derived elements take part: memory nodes, their version records, agent-reported
incidents, and the relationships and chunks whose source path starts with ``memory:``. Facts
extracted from the repository follow the repository (an ingest opens and closes them).

- **Use and decay.** A memory returned by ``search``, ``search_memory``, ``get_memory_provenance``
  or ``get_node`` counts as used: :func:`note_use` adds it to an in-process buffer and the write
  (``use_count``, ``last_used_at`` and a ``relevance`` snapshot on the node) happens in one batch,
  on a thread of its own, once the buffer holds ``flush_after_uses`` uses or its oldest is
  ``flush_after_seconds`` old (and at the end of a command, and before a sweep, checkpoint or
  rollback), so an answer never waits for it. :func:`relevance` is
  ``base * exp(-decay_per_day * days since last use)`` with ``base = confidence * (1 + ln
  observations)``; pinned memories and evergreen kinds keep their base.
- **Time to live** per kind: a sweep closes (never deletes) a memory whose version in force is
  older than its kind's TTL, with its validity ending at the expiry, not at the sweep.
- **Dedup on write** (:func:`find_duplicate`): see its docstring for the similarity used and why.
- **Consolidation**: a cluster of similar memories (same kind and linked keys) becomes one memory
  holding every original text; the originals close as ``consolidated`` and cite it.
- **Contradictions** (:func:`graphmem.memory.update_memory`'s ``subject`` and ``replaces``) close
  the older memory as ``contradicted``.

Links between memories (``consolidated_into``, ``consolidates``, ``contradicts``,
``contradicted_by``) are properties holding version citations (``memory:<key>@v<N>``), not
relationships: closing a node closes its relationships ("a fact about a node that no longer holds
cannot hold either"), and these links must outlive the memory they point from.
- **Checkpoints** snapshot every memory-derived node, relationship and chunk (ids included) in a
  JSON file beside the project's indexes; a rollback replaces the memory-derived part of the graph
  with a snapshot and syncs the indexes, so keys, relationships and chunk ids are as they were.
- **Erasure** removes everything one person or source contributed from the graph, the chunks, the
  indexes, the embedding caches and the checkpoints, and logs what it did without the erased text
  or the selector itself (only a digest of it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphmem.errors import GraphmemError, ModelError
from graphmem.memory import (
    CHUNK_KIND,
    MAX_VALUE_CHARS,
    PREFIX,
    MemoryKind,
    MemoryVersion,
    Status,
    _close_memory,
    _update_main,
    _WRITE_LOCK,
    chunk_text,
    is_version_key,
    memory_key,
    memory_of,
    resolve_mentions,
    update_memory,
    version_key,
)
from graphmem.model import Chunk, Node, NodeKind, Provenance, Relationship, RelType, now_iso, parse_day, to_iso
from graphmem.stores.base import Keep

if TYPE_CHECKING:
    import click

    from graphmem.api import Graphmem
    from graphmem.stores.base import GraphStore

CHECKPOINT_FORMAT = 1
LIFECYCLE_SOURCE = "agent:graphmem-lifecycle"  # the source of consolidated memories
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_WORD = re.compile(r"\w+")
# Words that flip a statement: two texts differing in one of these (or in a number) say different
# things however many words they share. English only, like the rest of the memory text handling.
_NEGATIONS = frozenset({"not", "no", "never", "none", "nor", "without", "t", "cannot"})
_MAX_OBSERVED_SOURCES = 50
_ERASED = "[erased]"
_LOG = logging.getLogger(__name__)


# --- policy -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LifecyclePolicy:
    """Every lifecycle setting in one place, validated at construction.

    ``ttl_days`` maps a memory kind to its time to live in days (kinds not named never expire);
    give it as a mapping, it is kept as sorted pairs so the policy stays immutable."""

    decay_per_day: float = math.log(2) / 30  # relevance halves after 30 days without use
    evergreen_kinds: frozenset[str] = frozenset({MemoryKind.CONVENTION.value, MemoryKind.DECISION.value})
    ttl_days: Mapping[str, float] | tuple[tuple[str, float], ...] = ()
    dedup_threshold: float = 0.85  # token Jaccard at or above which a new text is the same memory
    consolidate_threshold: float = 0.5  # token Jaccard at or above which memories cluster
    flush_after_uses: int = 64
    flush_after_seconds: float = 30.0
    keep_auto_checkpoints: int = 10

    def __post_init__(self) -> None:
        kinds = {k.value for k in MemoryKind}
        if not (math.isfinite(self.decay_per_day) and self.decay_per_day >= 0):
            raise ModelError(f"decay_per_day must be a finite number >= 0, not {self.decay_per_day!r}")
        unknown = set(self.evergreen_kinds) - kinds
        if unknown:
            raise ModelError(f"evergreen_kinds names unknown kinds {sorted(unknown)}; one of {sorted(kinds)}")
        object.__setattr__(self, "evergreen_kinds", frozenset(self.evergreen_kinds))
        pairs = sorted(dict(self.ttl_days).items())
        for kind, days in pairs:
            if kind not in kinds:
                raise ModelError(f"ttl_days names unknown kind {kind!r}; one of {sorted(kinds)}")
            if isinstance(days, bool) or not (isinstance(days, (int, float)) and math.isfinite(days) and days > 0):
                raise ModelError(f"the time to live of {kind} must be a number of days > 0, not {days!r}")
        object.__setattr__(self, "ttl_days", tuple((k, float(d)) for k, d in pairs))
        for name in ("dedup_threshold", "consolidate_threshold"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value <= 1):
                raise ModelError(f"{name} must be in (0, 1], not {value!r}")
        if self.consolidate_threshold > self.dedup_threshold:
            raise ModelError("consolidate_threshold must not exceed dedup_threshold (duplicates are the closest)")
        if not (isinstance(self.flush_after_uses, int) and self.flush_after_uses >= 1):
            raise ModelError("flush_after_uses must be an integer >= 1")
        if not (math.isfinite(self.flush_after_seconds) and self.flush_after_seconds >= 0):
            raise ModelError("flush_after_seconds must be a finite number >= 0")
        if not (isinstance(self.keep_auto_checkpoints, int) and self.keep_auto_checkpoints >= 0):
            raise ModelError("keep_auto_checkpoints must be an integer >= 0")

    def ttl_for(self, kind: str) -> float | None:
        return dict(self.ttl_days).get(kind)  # type: ignore[arg-type]

    @classmethod
    def from_options(cls, *, half_life_days: float | None = None, ttl: Iterable[str] = ()) -> LifecyclePolicy:
        """From command-line options: a half-life in days and ``KIND=DAYS`` entries."""
        days: dict[str, float] = {}
        for item in ttl:
            kind, sep, value = item.partition("=")
            try:
                days[kind.strip().lower()] = float(value)
            except ValueError:
                raise ModelError(f"--ttl takes KIND=DAYS (e.g. fact=180), not {item!r}") from None
            if not sep:
                raise ModelError(f"--ttl takes KIND=DAYS (e.g. fact=180), not {item!r}")
        if half_life_days is not None and not (math.isfinite(half_life_days) and half_life_days > 0):
            raise ModelError("the half-life must be a number of days > 0")
        if half_life_days:
            return cls(decay_per_day=math.log(2) / half_life_days, ttl_days=days)
        return cls(ttl_days=days)


DEFAULT_POLICY = LifecyclePolicy()


def _when(value: str) -> datetime:
    return datetime.fromisoformat(to_iso(value).replace("Z", "+00:00"))


def _days(later: str, earlier: str) -> float:
    return (_when(later) - _when(earlier)).total_seconds() / 86400.0


def last_use(node: Node) -> str:
    """When a memory was last used, observed or (its version in force) written."""
    p = node.props
    return max(str(x) for x in (p.get("last_used_at"), p.get("last_observed_at"), p.get("version_from"),
                                node.valid_from, p.get("created_at")) if x)


def relevance(node: Node, policy: LifecyclePolicy = DEFAULT_POLICY, now: str | None = None) -> float:
    """``confidence * (1 + ln observations) * exp(-decay_per_day * days since last use)``; pinned
    memories and evergreen kinds do not decay."""
    p = node.props
    base = node.provenance.confidence * (1.0 + math.log(max(1, int(p.get("observations") or 1))))
    if p.get("pinned") or p.get("memory_kind") in policy.evergreen_kinds:
        return base
    idle = max(0.0, _days(now or now_iso(), last_use(node)))
    return base * math.exp(-policy.decay_per_day * idle)


# --- access tracking ----------------------------------------------------------------------------


class AccessTracker:
    """Uses of memories, buffered per store and written in batches (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # store -> (memory key -> [uses, last use], monotonic time of the oldest buffered use)
        self._pending: weakref.WeakKeyDictionary[Any, tuple[dict[str, list[Any]], float]] = \
            weakref.WeakKeyDictionary()
        self._flushing: weakref.WeakSet[Any] = weakref.WeakSet()

    def note(self, store: GraphStore, keys: Iterable[str], *, at: str | None = None,
             policy: LifecyclePolicy = DEFAULT_POLICY) -> None:
        when = to_iso(at) if at else now_iso()
        wanted = [k for k in keys if k.startswith(PREFIX) and not is_version_key(k)]
        if not wanted:
            return
        with self._lock:
            uses, since = self._pending.get(store, ({}, time.monotonic()))
            for key in wanted:
                entry = uses.setdefault(key, [0, when])
                entry[0] += 1
                entry[1] = max(entry[1], when)
            self._pending[store] = (uses, since)
            due = (sum(n for n, _ in uses.values()) >= policy.flush_after_uses
                   or time.monotonic() - since >= policy.flush_after_seconds)
            if not due or store in self._flushing:
                return
            self._flushing.add(store)

        def run() -> None:
            try:
                self.flush(store, policy=policy)
            except Exception as exc:  # noqa: BLE001 - a thread of its own: report, keep the uses for later
                _LOG.warning("memory uses not written yet (%s: %s); the next flush retries", type(exc).__name__, exc)
            finally:
                with self._lock:
                    self._flushing.discard(store)

        threading.Thread(target=run, name="graphmem-memory-uses", daemon=True).start()

    def flush(self, store: GraphStore, *, policy: LifecyclePolicy = DEFAULT_POLICY) -> int:
        """Write the buffered uses of ``store``'s memories now; returns how many memories changed."""
        with self._lock:
            uses, _ = self._pending.pop(store, ({}, 0.0))
        if not uses:
            return 0
        try:
            with _WRITE_LOCK, store.atomic():
                nodes = store.get_nodes(sorted(uses))
                changed = []
                for key, (count, last) in sorted(uses.items()):
                    node = nodes.get(key)
                    if node is None or node.valid_to is not None:
                        continue
                    props = {"use_count": int(node.props.get("use_count") or 0) + count,
                             "last_used_at": max(str(node.props.get("last_used_at") or ""), last)}
                    seen = Node(node.key, node.name, node.provenance, {**node.props, **props})
                    props["relevance"] = round(relevance(seen, policy, last), 6)
                    props["relevance_at"] = last
                    changed.append(Node(node.key, node.name, node.provenance, props))
                if changed:
                    store.upsert(changed, at=max(u[1] for u in uses.values()))
        except Exception:
            with self._lock:  # keep the uses for the next flush
                mine, since = self._pending.get(store, ({}, time.monotonic()))
                for key, (count, last) in uses.items():
                    entry = mine.setdefault(key, [0, last])
                    entry[0] += count
                    entry[1] = max(entry[1], last)
                self._pending[store] = (mine, since)
            raise
        return len(changed)

    def forget(self, store: GraphStore, keys: Iterable[str] | None = None) -> None:
        """Drop buffered uses (of ``keys``, or all): a rollback or an erasure made them moot."""
        with self._lock:
            if keys is None:
                self._pending.pop(store, None)
                return
            uses, _ = self._pending.get(store, ({}, 0.0))
            for key in keys:
                uses.pop(key, None)


TRACKER = AccessTracker()


def note_use(store: GraphStore, keys: Iterable[str], *, at: str | None = None,
             policy: LifecyclePolicy = DEFAULT_POLICY) -> None:
    """Count ``keys`` (memory keys; others are ignored) as used at ``at`` (default now)."""
    TRACKER.note(store, keys, at=at, policy=policy)


def flush_uses(store: GraphStore, *, policy: LifecyclePolicy = DEFAULT_POLICY) -> int:
    """Write the uses buffered for ``store`` now (before a process ends)."""
    return TRACKER.flush(store, policy=policy)


def cite_replaced(store: GraphStore, hits: list[dict[str, Any]], keys: Iterable[str]) -> None:
    """Add to each search hit on a memory in ``keys`` the citations of the memories it contradicted
    (``contradicts``) or merged (``consolidates``): their version records, readable with ``get_node``."""
    nodes = store.get_nodes([k for k in keys if k.startswith(PREFIX)])
    for hit in hits:
        node = nodes.get(hit["key"])
        for name in ("contradicts", "consolidates"):
            if node is not None and node.props.get(name):
                hit[name] = [str(x) for x in node.props[name]]


def pin_memory(store: GraphStore, key: str, pinned: bool = True) -> dict[str, Any]:
    """Pin (or unpin) a memory: a pinned memory neither decays, expires nor merges into another."""
    mkey = memory_key(key)
    with _WRITE_LOCK, store.atomic():
        node = store.get_node(mkey)
        if node is None:
            raise GraphmemError(f"no memory {mkey[:120]!r} in project {store.project}")
        _update_main(store, node, {"pinned": True if pinned else None}, at=now_iso())
    return {"key": mkey, "pinned": pinned}


# --- similarity and dedup -----------------------------------------------------------------------


def words(text: str) -> frozenset[str]:
    """The normalised tokens of a text: lower-case runs of letters and digits, every word kept."""
    return frozenset(_WORD.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def same_claims(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two texts hold the same numbers and negations (then only wording differs)."""
    return not any(t in _NEGATIONS or any(ch.isdigit() for ch in t) for t in a ^ b)


def _open_memories(store: GraphStore, kind: str | None = None) -> list[Node]:
    return [n for n in store.iter_nodes([NodeKind.MEMORY]) if not is_version_key(n.key)
            and (kind is None or n.props.get("memory_kind") == kind)]


def find_duplicate(store: GraphStore, kind: str, text: str, *, subject: str | None = None,
                   about: Iterable[str] = (), policy: LifecyclePolicy | None = None) -> Node | None:
    """The memory in force that a new text of ``kind`` repeats, if any.

    Near-identical means: same kind, same subject (a keyed fact's subject, else the same set of
    linked keys: what the text names plus ``about``), the same numbers and negations, and a Jaccard
    similarity of normalised tokens of at least ``dedup_threshold`` (a keyed fact: identical
    tokens, since another value for its subject is a contradiction, not a repeat).

    Token Jaccard rather than the packaged embedder: it runs in microseconds on the write path
    without loading a model (a first embedding costs seconds in a fresh process), it is
    deterministic and explainable, and it is strict where embeddings are lenient: sentences that
    differ in a number or a "not" embed close together but are not the same memory."""
    rules = policy or DEFAULT_POLICY
    mine = words(text)
    close = []
    for node in _open_memories(store, kind):
        if (node.props.get("subject") or None) != subject:
            continue
        theirs = words(str(node.props.get("value") or ""))
        score = jaccard(mine, theirs)
        if (score < 1.0 if subject else score < rules.dedup_threshold) or not same_claims(mine, theirs):
            continue
        close.append((score, node))
    if not close:
        return None
    if subject is None:  # no subject key: the same things named
        linked = set(resolve_mentions(store, text, about=about))
        close = [(s, n) for s, n in close if set(n.props.get("mentions") or []) == linked]
    close.sort(key=lambda t: (-t[0], str(t[1].valid_from or ""), t[1].key))
    return close[0][1] if close else None


def observe(store: GraphStore, node: Node, source: str, *, at: str) -> int:
    """Count one more observation of ``node`` (by ``source``); returns the count. The caller holds
    the memory write lock."""
    count = int(node.props.get("observations") or 1) + 1
    seen = [str(s) for s in node.props.get("observed_sources") or []]
    if source not in seen:
        seen = (seen + [source])[-_MAX_OBSERVED_SOURCES:]
    _update_main(store, node, {"observations": count, "last_observed_at": at, "observed_sources": seen}, at=at)
    return count


# --- sweep: expiry, duplicates, consolidation, decay --------------------------------------------


@dataclass(slots=True)
class SweepReport:
    """What a sweep did (counts) and the keys it closed or wrote."""

    checkpoint: str | None = None
    uses_written: int = 0
    expired: list[str] = field(default_factory=list)
    merged_duplicates: list[str] = field(default_factory=list)
    consolidated: list[str] = field(default_factory=list)  # the memories written
    archived: list[str] = field(default_factory=list)  # the originals closed into them
    decayed: int = 0  # memories whose relevance was recomputed (not pinned, not evergreen)
    index: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "uses_written": self.uses_written,
                "counts": {"expired": len(self.expired), "merged_duplicates": len(self.merged_duplicates),
                           "consolidated": len(self.consolidated), "archived": len(self.archived),
                           "decayed": self.decayed},
                "expired": self.expired, "merged_duplicates": self.merged_duplicates,
                "consolidated": self.consolidated, "archived": self.archived, "index": self.index}


def expire(store: GraphStore, policy: LifecyclePolicy = DEFAULT_POLICY, now: str | None = None) -> list[str]:
    """Close every unpinned memory whose version in force outlived its kind's time to live; its
    validity ends at the expiry."""
    at = to_iso(now) if now else now_iso()
    closed = []
    with _WRITE_LOCK, store.atomic():
        for node in _open_memories(store):
            kind = str(node.props.get("memory_kind"))
            ttl = policy.ttl_for(kind)
            if ttl is None or node.props.get("pinned"):
                continue
            start = str(node.props.get("version_from") or node.valid_from)
            expiry = to_iso(_when(start) + timedelta(days=ttl))
            if expiry > at:
                continue
            _close_memory(store, node, f"expired: {kind} memories live {ttl:g} days", Status.EXPIRED, at=expiry,
                          props={"expired_at": expiry})
            closed.append(node.key)
    return closed


def _group_key(node: Node) -> tuple[str, str, tuple[str, ...]]:
    p = node.props
    return (str(p.get("memory_kind")), str(p.get("subject") or ""), tuple(sorted(p.get("mentions") or [])))


def _candidates(store: GraphStore) -> dict[tuple[str, str, tuple[str, ...]], list[Node]]:
    """Open, unpinned memories that may merge, by (kind, subject, linked keys), oldest first.
    Decisions are left out: a merged decision would be a new decision no person approved."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[Node]] = {}
    for node in _open_memories(store):
        if node.props.get("pinned") or node.props.get("memory_kind") == MemoryKind.DECISION.value:
            continue
        groups.setdefault(_group_key(node), []).append(node)
    for nodes in groups.values():
        nodes.sort(key=lambda n: (str(n.props.get("version_from") or n.valid_from or ""), n.key))
    return groups


def merge_duplicates(store: GraphStore, policy: LifecyclePolicy = DEFAULT_POLICY,
                     now: str | None = None) -> list[str]:
    """Fold memories in force that repeat an older one (as :func:`find_duplicate` judges) into it:
    the older one counts their observations and cites them; they close as consolidated into it."""
    at = to_iso(now) if now else now_iso()
    merged: list[str] = []
    with _WRITE_LOCK, store.atomic():
        for nodes in _candidates(store).values():
            keepers: list[Node] = []
            for node in nodes:
                mine = words(str(node.props.get("value") or ""))
                subject = node.props.get("subject")
                for keeper in keepers:
                    theirs = words(str(keeper.props.get("value") or ""))
                    score = jaccard(mine, theirs)
                    if (score >= 1.0 if subject else score >= policy.dedup_threshold) and same_claims(mine, theirs):
                        keeper = store.get_node(keeper.key) or keeper
                        target = version_key(keeper.key, int(keeper.props.get("version") or 0))
                        _close_memory(store, node, f"a duplicate of {target}", Status.CONSOLIDATED, at=at,
                                      props={"consolidated_into": target})
                        count = int(keeper.props.get("observations") or 1) + int(node.props.get("observations") or 1)
                        cited = [str(x) for x in keeper.props.get("consolidates") or []]
                        _update_main(store, keeper, {"observations": count, "last_observed_at": at,
                                                     "consolidates": cited + [version_key(node.key, int(
                                                         node.props.get("version") or 0))]}, at=at)
                        merged.append(node.key)
                        break
                else:
                    keepers.append(node)
    return merged


def consolidate(store: GraphStore, policy: LifecyclePolicy = DEFAULT_POLICY,
                now: str | None = None) -> list[tuple[str, list[str]]]:
    """Turn each cluster of similar memories in force (same kind and linked keys; token Jaccard at
    least ``consolidate_threshold``, joined transitively; keyed facts are left to dedup and
    contradictions, one value per subject) into one memory holding every
    original text, oldest first; the originals close as consolidated into it and it cites them.
    Returns (new key, original keys) per cluster. A cluster whose texts would not fit one memory,
    or whose consolidated text would wait for review, is left as it is."""
    at = to_iso(now) if now else now_iso()
    out: list[tuple[str, list[str]]] = []
    for (kind, subject, _), nodes in sorted(_candidates(store).items()):
        if len(nodes) < 2 or subject:  # keyed facts: one value per subject (duplicates merge, others contradict)
            continue
        toks = [words(str(n.props.get("value") or "")) for n in nodes]
        parent = list(range(len(nodes)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i in range(len(nodes)):
            for j in range(i + 1, len(nodes)):
                if jaccard(toks[i], toks[j]) >= policy.consolidate_threshold:
                    parent[root(j)] = root(i)
        clusters: dict[int, list[Node]] = {}
        for i, node in enumerate(nodes):
            clusters.setdefault(root(i), []).append(node)
        for members in clusters.values():
            if len(members) < 2:
                continue
            value = "\n".join(f"- {m.props.get('value')}" for m in members)
            if len(value) > MAX_VALUE_CHARS:
                continue
            name = "consolidated/" + kind + "-" + hashlib.blake2b(
                "\n".join(m.key for m in members).encode(), digest_size=6).hexdigest()
            about = sorted({str(k) for m in members for k in m.props.get("about") or []})
            write = update_memory(store, name, value, LIFECYCLE_SOURCE, kind, about=about, at=at,
                                  confidence=max(m.provenance.confidence for m in members), dedup=False)
            if write.status != Status.APPROVED.value:
                continue
            with _WRITE_LOCK, store.atomic():
                target = version_key(write.key, int(write.version or 0))
                for m in members:
                    _close_memory(store, store.get_node(m.key) or m, f"consolidated into {target}",
                                  Status.CONSOLIDATED, at=at, props={"consolidated_into": target})
                new = store.get_node(write.key)
                _update_main(store, new, {  # type: ignore[arg-type]
                    "observations": sum(int(m.props.get("observations") or 1) for m in members),
                    "consolidates": [version_key(m.key, int(m.props.get("version") or 0)) for m in members]}, at=at)
            out.append((write.key, [m.key for m in members]))
    return out


def refresh_relevance(store: GraphStore, policy: LifecyclePolicy = DEFAULT_POLICY, now: str | None = None) -> int:
    """Write each memory's relevance at ``now`` on its node (``relevance``, ``relevance_at``), for
    retrieval and Cypher; returns how many decay (neither pinned nor evergreen)."""
    at = to_iso(now) if now else now_iso()
    with _WRITE_LOCK, store.atomic():
        nodes = _open_memories(store)
        store.upsert([Node(n.key, n.name, n.provenance, {"relevance": round(relevance(n, policy, at), 6),
                                                         "relevance_at": at}) for n in nodes], at=at)
    return sum(1 for n in nodes if not n.props.get("pinned") and n.props.get("memory_kind") not in
               policy.evergreen_kinds)


def sweep(gm: Graphmem, policy: LifecyclePolicy = DEFAULT_POLICY, now: str | None = None,
          *, checkpoint_first: bool = True) -> SweepReport:
    """Run the lifecycle once: write buffered uses, checkpoint (``auto-...``), expire, merge
    duplicates, consolidate, recompute relevance, then bring the indexes in step."""
    at = to_iso(now) if now else now_iso()
    store = gm.store
    report = SweepReport(uses_written=flush_uses(store, policy=policy))
    if checkpoint_first:
        report.checkpoint = checkpoint(gm, None, auto=True, policy=policy)["name"]
    report.expired = expire(store, policy, at)
    report.merged_duplicates = merge_duplicates(store, policy, at)
    for new, originals in consolidate(store, policy, at):
        report.consolidated.append(new)
        report.archived += originals
    report.decayed = refresh_relevance(store, policy, at)
    report.index = gm.sync_indexes().as_dict()
    return report


# --- checkpoints and rollback -------------------------------------------------------------------


def lifecycle_dir(gm: Graphmem) -> Path:
    """Where a project's checkpoints and erasure log live: beside its indexes."""
    from graphmem.api import index_dir

    return index_dir(gm.settings, gm.project).parent / "lifecycle"


def _memory_derived(element: Node | Relationship) -> bool:
    # The provenance, not the sources: an element closed by a withdrawal has given its sources up.
    return element.provenance.source_path.startswith(PREFIX) or any(s.startswith(PREFIX) for s in element.sources)


def memory_nodes(store: GraphStore) -> list[Node]:
    """Every memory-derived node, open or closed: memories, their versions, agent incidents."""
    return [n for n in store.iter_nodes([NodeKind.MEMORY, NodeKind.INCIDENT], include_closed=True)
            if _memory_derived(n)]


def _delete(store: GraphStore, nodes: list[Node], also: Iterable[str] = ()) -> Any:
    """Delete ``nodes`` with their relationships and chunks, and whatever else comes from the
    source paths ``also``, in one withdrawal. The protocol deletes by source path, and a node closed
    by a withdrawal has given its sources up, so each such node first takes its own source path
    back (its validity unchanged)."""
    sourceless = [n for n in nodes if not n.sources]
    if sourceless:
        store.upsert([Node(n.key, n.name, n.provenance, {}, valid_from=n.valid_from, valid_to=n.valid_to)
                      for n in sourceless])
    return store.remove_sources({s for n in nodes for s in n.sources} | {n.provenance.source_path for n in nodes}
                                | set(also))


def snapshot(store: GraphStore) -> dict[str, Any]:
    """Every memory-derived node (memories, versions, agent incidents), every relationship that
    comes from one or touches one, and their chunks, open or closed, as plain data."""
    nodes = memory_nodes(store)
    keys = {n.key for n in nodes}
    # iter_rels is not part of GraphStore: both stores have it, and closed relationships (the
    # history a rollback must restore too) can be read no other way.
    rels = [r for r in store.iter_rels(include_closed=True)  # type: ignore[attr-defined]
            if r.src in keys or r.dst in keys or _memory_derived(r)]
    chunks = [c for c in store.get_chunks(sorted(keys)) if c.provenance.source_path.startswith(PREFIX)]
    return {
        "nodes": [{"key": n.key, "name": n.name, "props": n.props, "provenance": n.provenance.as_props(),
                   "sources": list(n.sources), "valid_from": n.valid_from, "valid_to": n.valid_to}
                  for n in sorted(nodes, key=lambda n: n.key)],
        "rels": [{"src": r.src, "type": r.type.value, "dst": r.dst, "props": r.props,
                  "provenance": r.provenance.as_props(), "sources": list(r.sources), "valid_from": r.valid_from,
                  "valid_to": r.valid_to} for r in sorted(rels, key=lambda r: r.ident)],
        "chunks": [{"id": c.id, "node_key": c.node_key, "ordinal": c.ordinal, "kind": c.kind, "text": c.text,
                    "start_line": c.start_line, "end_line": c.end_line, "provenance": c.provenance.as_props()}
                   for c in sorted(chunks, key=lambda c: c.id)],
    }


def identity(snap: dict[str, Any]) -> dict[str, Any]:
    """What a rollback must restore exactly: node keys and relationships with their validity and
    sources, chunk ids with their node and a digest of their text."""
    return {"nodes": sorted((n["key"], n["valid_from"], n["valid_to"], tuple(n["sources"])) for n in snap["nodes"]),
            "rels": sorted((r["src"], r["type"], r["dst"], r["valid_from"], r["valid_to"], tuple(r["sources"]))
                           for r in snap["rels"]),
            "chunks": sorted((c["id"], c["node_key"], hashlib.blake2b(c["text"].encode(), digest_size=8).hexdigest())
                             for c in snap["chunks"])}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False, separators=(",", ":"))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _checkpoint_files(gm: Graphmem) -> list[Path]:
    folder = lifecycle_dir(gm) / "checkpoints"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _read_checkpoint(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GraphmemError(f"checkpoint {path.stem} cannot be read ({exc.__class__.__name__}); it is left as it is") \
            from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT or not all(
            isinstance(data.get(k), list) for k in ("nodes", "rels", "chunks")):
        raise GraphmemError(f"checkpoint {path.stem} is not a graphmem checkpoint (format {CHECKPOINT_FORMAT})")
    return data


def list_checkpoints(gm: Graphmem) -> list[dict[str, Any]]:
    """Checkpoints, oldest first: name, when, and how many nodes, relationships and chunks."""
    out = []
    for path in _checkpoint_files(gm):
        try:
            data = _read_checkpoint(path)
        except GraphmemError as exc:
            out.append({"name": path.stem, "error": str(exc)})
            continue
        out.append({"name": data["name"], "created_at": data["created_at"], "auto": bool(data.get("auto")),
                    "nodes": len(data["nodes"]), "rels": len(data["rels"]), "chunks": len(data["chunks"])})
    return sorted(out, key=lambda d: (str(d.get("created_at") or ""), d["name"]))


def checkpoint(gm: Graphmem, name: str | None = None, *, auto: bool = False, now: str | None = None,
               policy: LifecyclePolicy = DEFAULT_POLICY) -> dict[str, Any]:
    """Save the memory-derived part of the graph as checkpoint ``name`` (default: the time).
    Automatic checkpoints (before a sweep or rollback) keep only the newest ``keep_auto_checkpoints``."""
    at = to_iso(now) if now else now_iso()
    stamp = re.sub(r"[^0-9T]", "", at)
    name = name or (f"auto-{stamp}" if auto else f"cp-{stamp}")
    if not _NAME_RE.match(name):
        raise ModelError(f"invalid checkpoint name {name[:80]!r}: 1-64 letters, digits, '.', '_' or '-'")
    path = lifecycle_dir(gm) / "checkpoints" / f"{name}.json"
    if path.exists():
        raise GraphmemError(f"checkpoint {name} exists; choose another name")
    store = gm.store
    flush_uses(store, policy=policy)
    with _WRITE_LOCK:
        snap = snapshot(store)
    data = {"format": CHECKPOINT_FORMAT, "name": name, "created_at": at, "project": gm.project, "auto": auto,
            **snap}
    _write_json(path, data)
    if auto:
        autos = [c for c in list_checkpoints(gm) if c.get("auto")]
        for old in autos[:max(0, len(autos) - policy.keep_auto_checkpoints)]:
            (lifecycle_dir(gm) / "checkpoints" / f"{old['name']}.json").unlink(missing_ok=True)
    return {"name": name, "created_at": at, "nodes": len(snap["nodes"]), "rels": len(snap["rels"]),
            "chunks": len(snap["chunks"])}


def _restore(store: GraphStore, snap: dict[str, Any], *, at: str) -> int:
    """Write a snapshot into a graph holding none of its elements; returns the relationships that
    could not be restored (an end outside memory is closed or gone now)."""
    def node(d: dict[str, Any], *, open_: bool) -> Node:
        return Node(d["key"], d["name"], Provenance.from_props(d["provenance"]), d["props"],
                    valid_from=d["valid_from"], valid_to=None if open_ else d["valid_to"], sources=tuple(d["sources"]))

    # Open first, so relationships (open or closed) find both ends; then close what was closed.
    store.upsert([node(d, open_=True) for d in snap["nodes"]], at=at)
    summary = store.upsert([], [Relationship(d["src"], RelType(d["type"]), d["dst"],
                                             Provenance.from_props(d["provenance"]), d["props"],
                                             d["valid_from"], d["valid_to"], tuple(d["sources"]))
                                for d in snap["rels"]],
                           [Chunk(d["node_key"], d["ordinal"], d["text"], d["kind"],
                                  Provenance.from_props(d["provenance"]), d["start_line"], d["end_line"], d["id"])
                            for d in snap["chunks"]], at=at)
    store.upsert([node(d, open_=False) for d in snap["nodes"] if d["valid_to"] is not None], at=at)
    # Writing gave every element its source path; those a withdrawal had closed held none.
    bare = [d for d in snap["nodes"] + snap["rels"] if not d["sources"]]
    if bare:
        keep = Keep(nodes=frozenset(d["key"] for d in snap["nodes"] if d["sources"]),
                    rels=frozenset((d["src"], d["type"], d["dst"]) for d in snap["rels"] if d["sources"]),
                    chunks=frozenset(d["id"] for d in snap["chunks"]))
        store.close_sources({d["provenance"]["source_path"] for d in bare}, at=at, keep=keep)
    return summary.missing_endpoints


def rollback(gm: Graphmem, *, to: str | None = None, since: str | None = None,
             policy: LifecyclePolicy = DEFAULT_POLICY) -> dict[str, Any]:
    """Put the memory-derived part of the graph back as checkpoint ``to`` saved it, or as the newest
    checkpoint saved before ``since`` (a date or time) held it; then sync the indexes. The state
    replaced is checkpointed first (``auto-...``), so a rollback can itself be undone."""
    if (to is None) == (since is None):
        raise GraphmemError("give either --to CHECKPOINT or --since DATE")
    if to is not None:
        path = lifecycle_dir(gm) / "checkpoints" / f"{to}.json"
        if not _NAME_RE.match(to) or not path.is_file():
            known = ", ".join(c["name"] for c in list_checkpoints(gm)) or "none"
            raise GraphmemError(f"no checkpoint {to[:80]!r} in project {gm.project} (checkpoints: {known})")
    else:
        day = parse_day(since, "--since")
        limit = to_iso(day) if day else ""
        before = [c for c in list_checkpoints(gm) if "error" not in c and str(c["created_at"]) <= limit]
        if not before:
            raise GraphmemError(f"no checkpoint was saved before {since}; `graphmem memory checkpoints` lists them")
        path = lifecycle_dir(gm) / "checkpoints" / f"{before[-1]['name']}.json"
    target = _read_checkpoint(path)
    store = gm.store
    saved = checkpoint(gm, None, auto=True, policy=policy)["name"]
    TRACKER.forget(store)
    at = now_iso()
    with _WRITE_LOCK, store.atomic():
        removed = _delete(store, memory_nodes(store))
        missing = _restore(store, target, at=at)
    index = gm.sync_indexes().as_dict()
    after = identity(snapshot(store))
    return {"checkpoint": target["name"], "saved_before": saved, "exact": after == identity(target),
            "nodes": len(target["nodes"]), "rels": len(target["rels"]), "chunks": len(target["chunks"]),
            "removed": {"nodes": removed.removed_nodes, "rels": removed.removed_rels,
                        "chunks": removed.removed_chunks},
            "rels_not_restored": missing, "index": index}


# --- erasure ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Selector:
    """Whom an erasure is about: ``names`` finds them in a label (an address as a whole word, or a
    source and its sub-sources), ``contributed`` in a node's properties."""

    kind: str  # "person" or "source"
    value: str  # normalised
    names: Callable[[str], bool]

    def contributed(self, props: dict[str, Any]) -> bool:
        fields = ("source", "agent", "session") if self.kind == "person" else ("source",)
        return any(self.names(str(props.get(f) or "")) for f in fields)


def _selector(person: str | None, source: str | None) -> _Selector:
    if (person is None) == (source is None):
        raise GraphmemError("give either --person EMAIL or --source SOURCE")
    if person is not None:
        email = person.strip().lower()
        if not re.fullmatch(r"[^@\s]+@[^@\s]+", email):
            raise ModelError(f"--person takes an e-mail address, not {person[:80]!r}")
        whole = re.compile(rf"(?<![\w.+-]){re.escape(email)}(?![\w-]|\.\w)", re.IGNORECASE)
        return _Selector("person", email, lambda text: bool(whole.search(text)))
    wanted = source.strip().lower()  # type: ignore[union-attr]
    if not wanted:
        raise ModelError("--source is empty")
    return _Selector("source", wanted, lambda text: text.lower() == wanted or text.lower().startswith(wanted + ":"))


def _scrub(props: dict[str, Any], who: _Selector, gone: set[str]) -> dict[str, Any]:
    """Property changes that take the erased contributor and erased memories out of a node kept."""
    change: dict[str, Any] = {}
    for name in ("approved_by", "reviewed_by", "invalidated_by"):
        if who.names(str(props.get(name) or "")):
            change[name] = _ERASED
    seen = [str(s) for s in props.get("observed_sources") or []]
    kept = [s for s in seen if not who.names(s)]
    if len(kept) != len(seen):
        change["observed_sources"] = kept or None
        change["observations"] = max(1, int(props.get("observations") or 1) - (len(seen) - len(kept)))
    for name in ("contradicts", "consolidates"):
        cited = [str(x) for x in props.get(name) or []]
        left = [c for c in cited if memory_of(c) not in gone]
        if len(left) != len(cited):
            change[name] = left or None
    for name in ("contradicted_by", "consolidated_into", "replaces"):
        if props.get(name) and memory_of(str(props[name])) in gone:
            change[name] = None
            change["reason"] = "closed by a memory since erased"
    return change


def _cache_digests(nodes: Iterable[Node], chunks: Iterable[Chunk]) -> set[int]:
    """Digests under which the embedding caches may hold vectors of these nodes' texts: the chunks
    they have, every version's chunk text, and their names."""
    from graphmem.retrieval.indexes import document_text, text_digest

    out = {text_digest(document_text(c)) for c in chunks}
    for node in nodes:
        out.add(text_digest(node.name))
        if node.key.startswith(PREFIX) and node.props.get("value") is not None:
            rec = MemoryVersion.from_node(node)
            text = chunk_text(rec)
            out.add(text_digest(document_text(Chunk(rec.key, 0, text, CHUNK_KIND,
                                                     Provenance(rec.key, "", "")))))
    return out


def _purge_sqlite(path: Path, table: str | None = None, column: str = "", values: Iterable[Any] = ()) -> int:
    """Delete the rows of ``table`` whose ``column`` is one of ``values`` (a cache's entries), then
    rewrite the file and empty its write-ahead log so no freed page keeps erased bytes."""
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    try:
        removed = 0
        wanted = sorted(set(values))
        if table and wanted and db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                                           (table,)).fetchone():
            for start in range(0, len(wanted), 500):
                part = wanted[start:start + 500]
                removed += db.execute(f"DELETE FROM {table} WHERE {column} IN ({','.join('?' * len(part))})",
                                      part).rowcount
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed
    finally:
        db.close()


def erase(gm: Graphmem, *, person: str | None = None, source: str | None = None, by: str | None = None,
          now: str | None = None) -> dict[str, Any]:
    """Erase everything one person (by e-mail: the memories and agent incidents whose source, agent
    or session names them) or one source (``user:...``, ``agent:...``, ``tool:...``, a whole type
    such as ``tool``) contributed.

    A memory any version of which they wrote goes whole, with every version (later versions may
    restate it), as does a consolidated memory that holds one. Removed: the nodes, their
    relationships and chunks, their vectors and BM25 entries, their vectors in the embedding caches,
    what an LLM extracted from their incidents (facts, cached answers, enrichment records),
    and their copies in every checkpoint (a checkpoint file that cannot be read is removed); the
    person's name is taken out of the memories kept
    (reviewer fields, observations). The SQLite files under the project and the caches are
    rewritten so freed pages hold nothing erased. The erasure log records when, by whom, counts and
    a digest of the selector: not the erased text, not the selector itself.

    Not reached: files outside graphmem's home, and on Neo4j the database's own files and
    transaction logs until Neo4j reuses or prunes them."""
    from graphmem.enrich import STATE_SHARDS, collect_units, load_state, save_state

    who = _selector(person, source)
    at = to_iso(now) if now else now_iso()
    store = gm.store
    flush_uses(store)
    with _WRITE_LOCK, store.atomic():
        mem_nodes = list(store.iter_nodes([NodeKind.MEMORY], include_closed=True))
        gone = {memory_of(n.key) for n in mem_nodes if who.contributed(n.props)}
        incidents = [n for n in store.iter_nodes([NodeKind.INCIDENT], include_closed=True)
                     if n.props.get("agent_written") and who.contributed(n.props)]
        while True:  # what consolidated an erased memory holds its text
            more = {memory_of(n.key) for n in mem_nodes if memory_of(n.key) not in gone
                    and any(memory_of(str(c)) in gone for c in n.props.get("consolidates") or [])}
            if not more:
                break
            gone |= more
        erased_nodes = [n for n in mem_nodes if memory_of(n.key) in gone] + incidents
        chunks = store.get_chunks([n.key for n in erased_nodes])
        digests = _cache_digests(erased_nodes, chunks)
        # What an LLM read in their incidents (graphmem.enrich): its facts, answers and records.
        units = [u for u in collect_units(store, kinds=["incident"], min_chars=0)
                 if u.source_key in {n.key for n in incidents}]
        # One withdrawal: the embedded store forgets the sources of relationships a node deletion
        # took only for the paths withdrawn, so the LLM's paths go with the nodes they read.
        removed = _delete(store, erased_nodes, {u.path for u in units})
        if units:
            state = load_state(store)
            for u in units:
                state.pop(u.id, None)
            save_state(store, state, STATE_SHARDS)
        paths = {p for n in erased_nodes for p in (*n.sources, n.provenance.source_path)} | {u.path for u in units}
        scrubbed = 0
        naming = []  # what others wrote about them stays: their text is not this person's contribution
        for node in store.iter_nodes([NodeKind.MEMORY, NodeKind.INCIDENT], include_closed=True):
            change = _scrub(node.props, who, gone)
            if change:
                store.upsert([Node(node.key, node.name, node.provenance, change, valid_from=node.valid_from,
                                   valid_to=node.valid_to)], at=at)
                scrubbed += 1
            if node.valid_to is None and who.kind == "person" and who.names(
                    f"{node.props.get('value') or ''} {node.props.get('summary') or ''}"):
                naming.append(node.key)
    TRACKER.forget(store, gone)
    gone_keys = gone | {n.key for n in incidents}
    rewritten = dropped = 0
    for path in _checkpoint_files(gm):
        try:
            data = _read_checkpoint(path)
        except GraphmemError:  # no rollback can use it, and what it holds cannot be sorted out: it goes
            path.unlink(missing_ok=True)
            dropped += 1
            continue
        before = json.dumps(data, sort_keys=True)
        data["nodes"] = [d for d in data["nodes"] if memory_of(d["key"]) not in gone_keys
                         and not (d["key"].startswith("incident:") and who.contributed(d["props"]))]
        kept = {d["key"] for d in data["nodes"]}
        data["rels"] = [d for d in data["rels"] if (d["src"] in kept or not d["src"].startswith((PREFIX, "incident:")))
                        and (d["dst"] in kept or not d["dst"].startswith((PREFIX, "incident:")))
                        and not set(d["sources"]) & paths]
        data["chunks"] = [d for d in data["chunks"] if d["node_key"] in kept]
        for d in data["nodes"]:
            d["props"] = {k: v for k, v in {**d["props"], **_scrub(d["props"], who, gone)}.items()
                          if v is not None}
        if json.dumps(data, sort_keys=True) != before:
            _write_json(path, data)
            rewritten += 1
    index = gm.sync_indexes().as_dict()
    cache_removed, not_compacted = 0, []
    purges: list[tuple[Path, str | None, str, Iterable[Any]]] = [
        (gm.cache_dir / "embeddings", "vectors", "digest", digests),  # vectors of texts and names
        (gm.cache_dir / "llm", "answers", "text_hash", [u.text_hash for u in units]),  # what an LLM answered
        (lifecycle_dir(gm).parent, None, "", ())]  # the embedded graph: only its freed pages
    for folder, table, column, values in purges:
        for path in sorted(folder.glob("*.sqlite")) if folder.is_dir() else []:
            try:
                cache_removed += _purge_sqlite(path, table, column, values)
            except sqlite3.Error as exc:  # another process holds it: the rows are gone, its free pages not yet
                not_compacted.append(f"{path.name}: {exc}")
    entry = {"at": at, "by": by, "selector": who.kind,
             "selector_digest": erasure_digest(who.value),
             "memories": len({k for k in gone if k.startswith(PREFIX)}), "incidents": len(incidents),
             "nodes_removed": removed.removed_nodes, "rels_removed": removed.removed_rels,
             "chunks_removed": removed.removed_chunks, "nodes_scrubbed": scrubbed,
             "cache_entries_removed": cache_removed, "checkpoints_rewritten": rewritten,
             "damaged_checkpoints_removed": dropped,
             "files_not_compacted": len(not_compacted)}
    log = lifecycle_dir(gm) / "erasures.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
    # Not logged: the keys could name the person.
    return {**entry, "index": index, "log": str(log), "not_compacted": not_compacted,
            "still_named_by_others": sorted(naming)}


def erasure_digest(value: str) -> str:
    """The digest the erasure log records for a selector (to check whether someone was erased)."""
    return hashlib.blake2b(value.strip().lower().encode(), digest_size=16).hexdigest()


# --- command line -------------------------------------------------------------------------------


def add_lifecycle_commands(group: click.Group, pass_context: Callable[[Any], Any],
                           json_option: Callable[[Any], Any]) -> None:
    """``graphmem memory sweep|checkpoint|checkpoints|rollback|erase|pin`` on the memory group."""
    import click

    def work(ctx: Any, fn: Callable[[Graphmem], Any]) -> Any:
        project = ctx.existing_project()
        ctx.announce(project)
        gm = ctx.graphmem(project)
        try:
            return fn(gm)
        finally:
            flush_uses(gm.store)
            gm.close()

    def echo(data: Any, as_json: bool, text: Callable[[Any], str]) -> None:
        click.echo(json.dumps(data, indent=2, default=str) if as_json else text(data))

    def counts(d: dict[str, Any]) -> str:
        # One wording for a checkpoint's size wherever it is shown, so the listing matches the save.
        return f"{d['nodes']} nodes, {d['rels']} relationships, {d['chunks']} chunks"

    @group.command("sweep")
    @click.option("--ttl", multiple=True, metavar="KIND=DAYS", help="Time to live of a kind (repeatable), "
                  "e.g. --ttl fact=180. Kinds not named never expire.")
    @click.option("--half-life-days", type=float, default=None,
                  help="Days without use after which relevance halves (default 30).")
    @json_option
    @pass_context
    def sweep_(ctx: Any, ttl: tuple[str, ...], half_life_days: float | None, as_json: bool) -> None:
        """Run the memory lifecycle: expire, merge duplicates, consolidate, decay; report counts."""
        policy = LifecyclePolicy.from_options(half_life_days=half_life_days, ttl=ttl)
        data = work(ctx, lambda gm: sweep(gm, policy).as_dict())
        echo(data, as_json, lambda d: "; ".join(f"{k} {v}" for k, v in d["counts"].items())
             + f" (checkpoint {d['checkpoint']} saved before)")

    @group.command("checkpoint")
    @click.argument("name", required=False)
    @json_option
    @pass_context
    def checkpoint_(ctx: Any, name: str | None, as_json: bool) -> None:
        """Save the memories (graph elements and chunks) as checkpoint NAME (default: the time)."""
        data = work(ctx, lambda gm: checkpoint(gm, name))
        echo(data, as_json, lambda d: f"checkpoint {d['name']}: {counts(d)}")

    @group.command("checkpoints")
    @json_option
    @pass_context
    def checkpoints_(ctx: Any, as_json: bool) -> None:
        """The checkpoints saved, oldest first."""
        data = work(ctx, list_checkpoints)
        echo({"checkpoints": data}, as_json, lambda d: "\n".join(
            f"{c['name']}  {c.get('created_at', '?')}  " + (c["error"] if "error" in c else counts(c))
            for c in d["checkpoints"]) or "no checkpoints")

    @group.command("rollback")
    @click.option("--to", "to", default=None, help="The checkpoint to go back to.")
    @click.option("--since", default=None, help="Undo what changed since this date: back to the newest "
                  "checkpoint saved before it.")
    @json_option
    @pass_context
    def rollback_(ctx: Any, to: str | None, since: str | None, as_json: bool) -> None:
        """Put the memories back as a checkpoint holds them (the state replaced is checkpointed first)."""
        data = work(ctx, lambda gm: rollback(gm, to=to, since=since))
        echo(data, as_json, lambda d: f"rolled back to {d['checkpoint']}: {counts(d)}"
             + ("" if d["exact"] else f" ({d['rels_not_restored']} relationships could not be restored)")
             + f"; the state before is checkpoint {d['saved_before']}")

    @group.command("erase")
    @click.option("--person", default=None, help="E-mail of the person whose contributions go.")
    @click.option("--source", default=None, help="Source whose contributions go (agent:NAME, tool:NAME, ...).")
    @click.option("--yes", is_flag=True, help="Confirm: erasure cannot be undone, not even by a rollback.")
    @click.option("--by", default=None, help="Who asks (for the erasure log).")
    @json_option
    @pass_context
    def erase_(ctx: Any, person: str | None, source: str | None, yes: bool, by: str | None, as_json: bool) -> None:
        """Erase everything one person or source contributed (graph, chunks, indexes, caches, checkpoints)."""
        if not yes:
            raise GraphmemError("erasure deletes for good (checkpoints included): add --yes to confirm")
        data = work(ctx, lambda gm: erase(gm, person=person, source=source, by=by))
        echo(data, as_json, lambda d: f"erased {d['memories']} memories and {d['incidents']} incidents "
                                      f"({d['nodes_removed']} nodes, {d['chunks_removed']} chunks, "
                                      f"{d['cache_entries_removed']} cached vectors); logged in {d['log']}")

    @group.command("pin")
    @click.argument("key")
    @click.option("--off", is_flag=True, help="Unpin.")
    @json_option
    @pass_context
    def pin_(ctx: Any, key: str, off: bool, as_json: bool) -> None:
        """Pin memory KEY: it neither decays, expires nor merges into another."""
        data = work(ctx, lambda gm: pin_memory(gm.store, key, not off))
        echo(data, as_json, lambda d: f"{d['key']}: {'pinned' if d['pinned'] else 'unpinned'}")


__all__ = [
    "DEFAULT_POLICY",
    "AccessTracker",
    "LifecyclePolicy",
    "SweepReport",
    "add_lifecycle_commands",
    "checkpoint",
    "cite_replaced",
    "consolidate",
    "erase",
    "erasure_digest",
    "expire",
    "find_duplicate",
    "flush_uses",
    "identity",
    "jaccard",
    "list_checkpoints",
    "merge_duplicates",
    "note_use",
    "observe",
    "pin_memory",
    "refresh_relevance",
    "relevance",
    "rollback",
    "snapshot",
    "sweep",
    "words",
]
