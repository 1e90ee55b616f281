"""Recurring errors and the fixes that got agents past them, across sessions and agent flavours.

:func:`detect` reads every open session node (``session:<flavour>:<id>``, through the
:class:`~graphmem.stores.base.GraphStore` protocol, so either store) and groups the errors they
record (:func:`~graphmem.sessions.graph.session_errors`) by fingerprint. A group's *evidence* is
how often the error occurred, in how many sessions, under how many agent flavours, when it was
first and last seen, and the fix steps (commands run and files edited between the error and the
call that then passed) with how many sessions each one got past it. The :class:`EvidenceBar` says
what is enough: at the *promote* floor a group becomes a candidate pattern; at the stricter
*distribute* floor an approved pattern may be proposed for CLAUDE.md and AGENTS.md
(:mod:`graphmem.sessions.proposals`).

Patterns live in a files-first :class:`PatternCatalog` (``<home>/<project>/patterns/``):
``catalog.json`` lists each pattern's status, current version and fingerprints, and
``<id>/v<N>.json`` holds each version's text and evidence, written atomically. A pattern's id comes
from the fingerprint it was first seen with, so it never changes; its version goes up when its
text or evidence changes. A person approves or rejects it (:meth:`PatternCatalog.review`). Nothing
of a transcript is kept beyond the redacted error signature and fix steps.

Bloat guard: a new group that is a near-duplicate of a pattern (or of another new group) joins it
rather than adding an entry, and the catalog holds at most ``max_patterns``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extractors.secrets import redact
from graphmem.errors import ConfigError, GraphmemError
from graphmem.lifecycle import jaccard, words
from graphmem.memory import MAX_REASON_CHARS, _reviewer, _text
from graphmem.model import NodeKind, now_iso
from graphmem.retrieval.files import write_bytes_atomic
from graphmem.sessions.digest import _command_family, _rel
from graphmem.sessions.events import EventKind
from graphmem.sessions.graph import session_errors
from graphmem.sessions.retention import RawStore, RetentionConfig

if TYPE_CHECKING:
    from graphmem.api import Graphmem
    from graphmem.config import Settings
    from graphmem.stores.base import GraphStore

CATALOG_FORMAT = 1
_ID_RE = re.compile(r"^pat-[0-9a-f]{16}$")
_STEP_CHARS = 300
_SIGNATURE_CHARS = 300
_LISTED_STEPS = 5
RERUN = "(the same command, run again)"  # the fix step of a session that passed on a later run alone


class PatternError(GraphmemError):
    """A pattern catalog that cannot be read or a review that cannot be done."""


class PatternStatus(str, Enum):
    """Where a pattern stands with the people who review it."""

    CANDIDATE = "candidate"  # met the promote floor; waits for a person
    APPROVED = "approved"  # a person approved it: it may be proposed for CLAUDE.md / AGENTS.md
    REJECTED = "rejected"  # a person turned it down; it stays out of proposals whatever its evidence


# --- the evidence bar ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Floor:
    """Minimum evidence: occurrences of the error, distinct sessions, distinct agent flavours."""

    occurrences: int
    sessions: int
    flavours: int

    def __post_init__(self) -> None:
        for name in ("occurrences", "sessions", "flavours"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"patterns: {name} must be a whole number >= 1, not {value!r}")
        if self.sessions > self.occurrences:
            raise ConfigError(f"patterns: {self.sessions} sessions need at least as many occurrences, "
                              f"not {self.occurrences}")
        if self.flavours > self.sessions:
            raise ConfigError(f"patterns: {self.flavours} flavours need at least as many sessions, not {self.sessions}")

    @classmethod
    def parse(cls, text: str, what: str) -> Floor:
        """``OCCURRENCES,SESSIONS,FLAVOURS`` (``5,4,2``)."""
        parts = [p.strip() for p in str(text).split(",")]
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ConfigError(f"{what} must be OCCURRENCES,SESSIONS,FLAVOURS such as 5,4,2, not {text!r}")
        return cls(*(int(p) for p in parts))

    def met_by(self, occurrences: int, sessions: int, flavours: int) -> bool:
        return occurrences >= self.occurrences and sessions >= self.sessions and flavours >= self.flavours

    def as_dict(self) -> dict[str, int]:
        return {"occurrences": self.occurrences, "sessions": self.sessions, "flavours": self.flavours}

    def __str__(self) -> str:
        return f"{self.occurrences},{self.sessions},{self.flavours}"


@dataclass(frozen=True, slots=True)
class EvidenceBar:
    """What a recurring error needs to become a pattern, and to be proposed to the agents' files.

    ``promote``: a candidate from this much evidence (default 3 occurrences in 2 sessions of any
    flavour). ``distribute``: an approved pattern is proposed for CLAUDE.md / AGENTS.md only from
    this much (default 5 occurrences in 4 sessions of 2 flavours): files every agent reads deserve
    an error that more than one agent keeps hitting. ``signature_similarity`` and
    ``fix_similarity`` are the bloat guard's thresholds (see :func:`near_duplicate`);
    ``max_patterns`` caps the catalog. Environment: ``GRAPHMEM_PATTERNS_PROMOTE``,
    ``GRAPHMEM_PATTERNS_DISTRIBUTE`` (``O,S,F``), ``GRAPHMEM_PATTERNS_MAX``; the ``patterns``
    commands take ``--promote``, ``--distribute``, ``--max-patterns``."""

    promote: Floor = Floor(3, 2, 1)
    distribute: Floor = Floor(5, 4, 2)
    signature_similarity: float = 0.8
    fix_similarity: float = 0.8
    max_patterns: int = 200

    def __post_init__(self) -> None:
        for name in ("promote", "distribute"):
            if not isinstance(getattr(self, name), Floor):
                raise ConfigError(f"patterns: {name} must be a Floor")
        low, high = self.promote, self.distribute
        if high.occurrences < low.occurrences or high.sessions < low.sessions or high.flavours < low.flavours:
            raise ConfigError(f"patterns: the distribute floor ({high}) must be at least the promote floor ({low}) "
                              "in occurrences, sessions and flavours")
        for name in ("signature_similarity", "fix_similarity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ConfigError(f"patterns: {name} must be in (0, 1], not {value!r}")
        if isinstance(self.max_patterns, bool) or not isinstance(self.max_patterns, int) or self.max_patterns < 1:
            raise ConfigError(f"patterns: max_patterns must be a whole number >= 1, not {self.max_patterns!r}")

    @classmethod
    def from_env(cls, *, promote: str | None = None, distribute: str | None = None, max_patterns: int | None = None,
                 env: Mapping[str, str] | None = None) -> EvidenceBar:
        """Explicit values win over the environment, which wins over the defaults."""
        env = os.environ if env is None else env
        kw: dict[str, Any] = {}
        for name, given, var in (("promote", promote, "GRAPHMEM_PATTERNS_PROMOTE"),
                                 ("distribute", distribute, "GRAPHMEM_PATTERNS_DISTRIBUTE")):
            text = given if given is not None else env.get(var)
            if text:
                kw[name] = Floor.parse(text, f"--{name}" if given is not None else var)
        raw_max: Any = max_patterns if max_patterns is not None else env.get("GRAPHMEM_PATTERNS_MAX")
        if raw_max not in (None, ""):
            try:
                kw["max_patterns"] = int(raw_max)
            except ValueError:
                raise ConfigError(f"GRAPHMEM_PATTERNS_MAX must be a whole number, not {raw_max!r}") from None
        return cls(**kw)

    def as_dict(self) -> dict[str, Any]:
        return {"promote": self.promote.as_dict(), "distribute": self.distribute.as_dict(),
                "signature_similarity": self.signature_similarity, "fix_similarity": self.fix_similarity,
                "max_patterns": self.max_patterns}


# --- evidence -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Evidence:
    """What the sessions say about one error (or a family of near-duplicate ones)."""

    signature: str
    fingerprints: set[str] = field(default_factory=set)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> flavour, occurrences, resolved, seen
    steps: dict[str, set[str]] = field(default_factory=dict)  # fix step -> sessions it got past the error
    commands: Counter[str] = field(default_factory=Counter)  # families of the failing command

    @property
    def occurrences(self) -> int:
        return sum(int(s["occurrences"]) for s in self.sessions.values())

    @property
    def by_flavour(self) -> dict[str, int]:
        return dict(sorted(Counter(str(s["flavour"]) for s in self.sessions.values()).items()))

    @property
    def resolved(self) -> int:
        return sum(1 for s in self.sessions.values() if s["resolved"])

    def fix(self) -> dict[str, Any] | None:
        """The step that got most sessions past the error, and how often it did."""
        if not self.steps:
            return None
        step, keys = min(self.steps.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        return {"untrusted_step": step, "worked": len(keys), "resolved_sessions": self.resolved}

    def merge(self, other: Evidence) -> None:
        self.fingerprints |= other.fingerprints
        for key, rec in other.sessions.items():
            mine = self.sessions.get(key)
            if mine is None:
                self.sessions[key] = dict(rec)
            else:  # one session holding two near-duplicate errors: one session, both counted
                mine["occurrences"] += rec["occurrences"]
                mine["resolved"] = mine["resolved"] or rec["resolved"]
                mine["first"], mine["last"] = min(mine["first"], rec["first"]), max(mine["last"], rec["last"])
        for step, keys in other.steps.items():
            self.steps.setdefault(step, set()).update(keys)
        self.commands.update(other.commands)

    def content(self) -> dict[str, Any]:
        """The pattern's text and evidence as stored (everything redacted again)."""
        seen = [s for rec in self.sessions.values() for s in (rec["first"], rec["last"]) if s]
        steps = sorted(self.steps.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:_LISTED_STEPS]
        fix = self.fix()
        command = self.commands.most_common(1)[0][0] if self.commands else None
        return {
            "untrusted_signature": _clean(self.signature, _SIGNATURE_CHARS),
            "fingerprints": sorted(self.fingerprints),
            "untrusted_command": _clean(command, _STEP_CHARS) if command else None,
            "fix": {**fix, "untrusted_step": _clean(fix["untrusted_step"], _STEP_CHARS)} if fix else None,
            "fix_steps": [{"untrusted_step": _clean(step, _STEP_CHARS), "sessions": len(keys),
                           "recurring": len(keys) > 1} for step, keys in steps],
            "evidence": {
                "occurrences": self.occurrences, "sessions": len(self.sessions), "flavours": self.by_flavour,
                "cross_flavour": len(self.by_flavour) > 1, "resolved_sessions": self.resolved,
                "first_seen": min(seen) if seen else None, "last_seen": max(seen) if seen else None,
                "session_keys": [{"key": k, **{n: v for n, v in rec.items() if n not in ("first", "last")}}
                                 for k, rec in sorted(self.sessions.items())],
            },
        }


def _text_of(content: Mapping[str, Any]) -> tuple[str, str]:
    """What a person approves: the error signature and the fix step (counts may move under it)."""
    return str(content.get("untrusted_signature")), str((content.get("fix") or {}).get("untrusted_step"))


def _clean(text: str, limit: int) -> str:
    """Text from a session as a pattern keeps it: redacted (again), on one line, bounded."""
    flat = " ".join(redact(str(text))[0].split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _steps(error: dict[str, Any], cwd: str) -> list[str]:
    """What a session did between an error and the call that then passed: commands other than the
    failing one run again, and files edited (relative to the session's working folder)."""
    family = _command_family(str(error.get("command") or ""))
    steps = [" ".join(str(c).split()) for c in error.get("fix_commands") or []
             if str(c).strip() and _command_family(str(c)) != family]
    steps += [f"edit {_rel(str(p), cwd)}" for p in error.get("fix_files") or [] if str(p).strip()]
    return list(dict.fromkeys(steps))


def gather(store: GraphStore, raw: RawStore | None = None) -> dict[str, Evidence]:
    """Evidence per error fingerprint from every open session node. Occurrences within a session
    are counted from its raw body while it is held (a session's node keeps one record per
    distinct error), else the session counts once."""
    groups: dict[str, Evidence] = {}
    for node in store.iter_nodes([NodeKind.SESSION]):
        errors = [e for e in session_errors(node) if e.get("fingerprint")]
        if not errors:
            continue
        counts: Counter[str] = Counter()
        events = raw.read(node.key) if raw is not None else None
        for ev in events or []:
            if ev.kind is EventKind.RESULT and ev.ok is False and ev.fingerprint:
                counts[ev.fingerprint] += 1
        flavour = str(node.props.get("flavour") or "unknown")
        cwd = str(node.props.get("cwd") or "")
        started = str(node.props.get("started") or "")
        for err in errors:
            fp = str(err["fingerprint"])
            group = groups.setdefault(fp, Evidence(str(err.get("signature") or "")))
            group.fingerprints.add(fp)
            when = str(err.get("time") or started or "")
            group.sessions[node.key] = {"flavour": flavour, "occurrences": max(1, counts.get(fp, 0)),
                                        "resolved": bool(err.get("resolved")), "first": when, "last": when}
            if err.get("command"):
                group.commands[_command_family(str(err["command"]))] += 1
            if err.get("resolved"):
                for step in _steps(err, cwd) or [RERUN]:
                    group.steps.setdefault(step, set()).add(node.key)
    return groups


# --- the bloat guard ----------------------------------------------------------------------------


def _head(signature: str) -> str:
    """What kind of error a signature names: the exception (``psycopg.OperationalError``) or the
    words before its first colon (``fatal``, ``error[E0308]``)."""
    return signature.partition(":")[0].strip().lower()


def near_duplicate(a: Mapping[str, Any], b: Mapping[str, Any], bar: EvidenceBar) -> bool:
    """Whether two patterns (their stored content) say the same thing.

    The measure is the Jaccard similarity of normalised token sets (:func:`graphmem.lifecycle.words`,
    as memory dedup uses): two signatures are the same error when their tokens overlap at least
    ``signature_similarity`` (what the fingerprint keeps apart, such as ``localhost`` against an
    address, or one more word of a message, weighs one token among many); two errors of the same
    kind (:func:`_head`, when it names one) are one pattern when the fixes that worked overlap at
    least ``fix_similarity`` (a plain rerun says nothing about the cause, so it joins nothing).
    Tokens rather than embeddings: signatures are short, machine-made lines
    whose meaning sits in exact names, the measure is deterministic and explainable, and it needs
    no model."""
    sig_a, sig_b = str(a.get("untrusted_signature") or ""), str(b.get("untrusted_signature") or "")
    if jaccard(words(sig_a), words(sig_b)) >= bar.signature_similarity:
        return True
    step_a, step_b = (str((x.get("fix") or {}).get("untrusted_step") or "") for x in (a, b))
    if not step_a or not step_b or RERUN in (step_a, step_b):
        return False
    head = _head(sig_a)
    return bool(head and not head.startswith("<") and head == _head(sig_b)
                and jaccard(words(step_a), words(step_b)) >= bar.fix_similarity)


def pattern_id(fingerprint: str) -> str:
    """A pattern's id, from the fingerprint it was first seen with."""
    return "pat-" + (fingerprint if re.fullmatch(r"[0-9a-f]{16}", fingerprint)
                     else hashlib.blake2b(fingerprint.encode(), digest_size=8).hexdigest())


# --- the catalog --------------------------------------------------------------------------------


def patterns_dir(settings: Settings, project: str) -> Path:
    """``<project home>/patterns``, beside the project's sessions and indexes."""
    from graphmem.api import index_dir

    return index_dir(settings, project).parent / "patterns"


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so a reader sees the old file or the new one, never half of one."""
    write_bytes_atomic(path, text.encode("utf-8"))


def _dump(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass(slots=True)
class DetectReport:
    """What a detection run found and changed."""

    sessions: int = 0
    fingerprints: int = 0
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)  # a new version
    merged: dict[str, list[str]] = field(default_factory=dict)  # id -> fingerprints a near-duplicate brought in
    below_floor: int = 0  # recurring groups that did not reach the promote floor
    problems: list[str] = field(default_factory=list)
    patterns: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "fingerprints": self.fingerprints, "added": self.added,
                "updated": self.updated, "merged": self.merged, "below_floor": self.below_floor,
                "problems": self.problems, "patterns": self.patterns}


class PatternCatalog:
    """The versioned pattern files of one project (see the module docstring)."""

    def __init__(self, folder: Path, bar: EvidenceBar | None = None) -> None:
        self.dir = folder
        self.bar = bar or EvidenceBar.from_env()
        self.path = folder / "catalog.json"

    # reading -------------------------------------------------------------------------------------

    def _bad(self, path: Path, why: str) -> PatternError:
        return PatternError(f"{path}: {why}; fix it or move it away (patterns are detected again from the sessions)")

    def load(self) -> dict[str, Any]:
        """``catalog.json`` checked: ``{"format", "patterns": {id: entry}, "fingerprints": {fp: id}}``."""
        if not self.path.exists():
            return {"format": CATALOG_FORMAT, "patterns": {}, "fingerprints": {}}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise self._bad(self.path, "not UTF-8 text") from None
        except ValueError as exc:
            raise self._bad(self.path, f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except OSError as exc:
            raise PatternError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        if not isinstance(data, dict) or data.get("format") != CATALOG_FORMAT:
            raise self._bad(self.path, f"not a pattern catalog of format {CATALOG_FORMAT}")
        patterns, fps = data.get("patterns"), data.get("fingerprints")
        if not isinstance(patterns, dict) or not isinstance(fps, dict):
            raise self._bad(self.path, "its patterns or fingerprints are not objects")
        for pid, entry in patterns.items():
            if not _ID_RE.match(str(pid)) or not isinstance(entry, dict) \
                    or entry.get("status") not in {s.value for s in PatternStatus} \
                    or isinstance(entry.get("version"), bool) or not isinstance(entry.get("version"), int) \
                    or entry["version"] < 1:
                raise self._bad(self.path, f"entry {str(pid)[:40]!r} is not a pattern (id, status, version)")
        if any(v not in patterns for v in fps.values()):
            raise self._bad(self.path, "a fingerprint points at a pattern it does not list")
        return data

    def version_path(self, pid: str, version: int) -> Path:
        return self.dir / pid / f"v{version}.json"

    def read_version(self, pid: str, version: int) -> dict[str, Any]:
        path = self.version_path(pid, version)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise self._bad(self.path, f"pattern {pid} version {version} has no file {path.name}") from None
        except (UnicodeDecodeError, ValueError):
            raise self._bad(path, "not a JSON pattern version") from None
        except OSError as exc:
            raise PatternError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if not isinstance(data, dict) or data.get("id") != pid or data.get("version") != version \
                or not isinstance(data.get("untrusted_signature"), str) or not isinstance(data.get("evidence"), dict):
            raise self._bad(path, f"not version {version} of pattern {pid}")
        return data

    def patterns(self, statuses: set[PatternStatus] | None = None) -> list[dict[str, Any]]:
        """Each pattern's current version with its status and review, sorted by id. Every version
        is read, so a damaged file is reported whichever patterns are asked for."""
        data = self.load()
        views = [self._view(pid, entry, self.read_version(pid, entry["version"]))
                 for pid, entry in sorted(data["patterns"].items())]
        return [v for v in views if not statuses or PatternStatus(v["status"]) in statuses]

    def _view(self, pid: str, entry: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
        ev = content["evidence"]
        counts = (int(ev.get("occurrences") or 0), int(ev.get("sessions") or 0), len(ev.get("flavours") or {}))
        floors = {"promote": self.bar.promote.met_by(*counts), "distribute": self.bar.distribute.met_by(*counts)}
        return {**content, "status": entry["status"], "review": entry.get("review"), "meets": floors,
                "file": str(self.version_path(pid, entry["version"]))}

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One writer at a time (a detection and a review must not lose each other's change)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / "lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _save(self, data: dict[str, Any]) -> None:
        data["fingerprints"] = dict(sorted(data["fingerprints"].items()))
        data["patterns"] = dict(sorted(data["patterns"].items()))
        _write_atomic(self.path, _dump(data))

    # detection -----------------------------------------------------------------------------------

    def update(self, groups: dict[str, Evidence], *, at: str | None = None) -> DetectReport:
        """Fold freshly gathered evidence into the catalog (see :func:`detect`)."""
        when = at or now_iso()
        report = DetectReport(fingerprints=len(groups))
        with self.locked():
            data = self.load()
            current = {pid: self.read_version(pid, e["version"]) for pid, e in data["patterns"].items()}
            # Each fingerprint the catalog knows goes to its pattern; the others, in the order they
            # were first seen, join a near-duplicate pattern or new group, or start a group.
            owned: dict[str, Evidence] = {}
            fresh: list[tuple[str, Evidence]] = []  # (first fingerprint, evidence)
            order = sorted(groups.items(), key=lambda kv: (kv[1].content()["evidence"]["first_seen"] or "", kv[0]))
            for fp, ev in order:
                pid = data["fingerprints"].get(fp)
                if pid is None:
                    mine = ev.content()
                    pid = next((p for p, c in sorted(current.items()) if near_duplicate(c, mine, self.bar)), None)
                    if pid is None:
                        twin = next((g for _, g in fresh if near_duplicate(g.content(), mine, self.bar)), None)
                        if twin is not None:
                            twin.merge(ev)
                        else:
                            fresh.append((fp, ev))
                        continue
                    report.merged.setdefault(pid, []).append(fp)
                if pid in owned:
                    owned[pid].merge(ev)
                else:
                    owned[pid] = ev
            for pid, ev in owned.items():
                self._keep_counts(ev, current[pid])
                if self._write(data, pid, ev, current[pid], when):
                    report.updated.append(pid)
            for fp, ev in fresh:
                if not self.bar.promote.met_by(ev.occurrences, len(ev.sessions), len(ev.by_flavour)):
                    report.below_floor += ev.occurrences > 1
                    continue
                if len(data["patterns"]) >= self.bar.max_patterns:
                    report.problems.append(
                        f"the catalog holds {len(data['patterns'])} patterns, its cap (--max-patterns, "
                        f"GRAPHMEM_PATTERNS_MAX): {_clean(ev.signature, 80)!r} was not added; reject or remove "
                        "patterns, or raise the cap")
                    continue
                pid = pattern_id(fp)
                self._write(data, pid, ev, None, when)
                report.added.append(pid)
            self._save(data)
        report.patterns = self.patterns()
        return report

    def _keep_counts(self, ev: Evidence, before: dict[str, Any]) -> None:
        """A session counted before keeps at least its count: its raw body may have aged out since."""
        for item in before["evidence"].get("session_keys") or []:
            rec = ev.sessions.get(str(item.get("key")))
            if rec is not None and isinstance(item.get("occurrences"), int):
                rec["occurrences"] = max(rec["occurrences"], item["occurrences"])

    def _write(self, data: dict[str, Any], pid: str, ev: Evidence, before: dict[str, Any] | None, when: str) -> bool:
        """Write a new version when the text or evidence changed; True when one was written."""
        content = ev.content()
        if before is not None:
            # A pattern keeps every fingerprint it ever took in, so they go on finding it.
            content["fingerprints"] = sorted(set(content["fingerprints"]) | set(before.get("fingerprints") or []))
            if {k: before.get(k) for k in content} == content:
                return False
        entry = data["patterns"].get(pid, {"status": PatternStatus.CANDIDATE.value, "version": 0, "created": when})
        version = entry["version"] + 1
        record = {"id": pid, "version": version, "written": when, **content}
        _write_atomic(self.version_path(pid, version), _dump(record))
        text_changed = before is not None and _text_of(before) != _text_of(content)
        if text_changed and entry["status"] == PatternStatus.APPROVED.value:
            # What a person approved no longer says the same: it waits for them again.
            entry = {**entry, "status": PatternStatus.CANDIDATE.value,
                     "review": {**(entry.get("review") or {}), "note": f"text changed in version {version}"}}
        data["patterns"][pid] = {**entry, "version": version, "updated": when}
        for fp in content["fingerprints"]:
            data["fingerprints"][fp] = pid
        return True

    # review --------------------------------------------------------------------------------------

    def review(self, pid: str, status: PatternStatus, by: str, reason: str | None = None, *,
               at: str | None = None) -> dict[str, Any]:
        """A person approves or rejects pattern ``pid`` (rejecting needs a reason)."""
        verb = "approves" if status is PatternStatus.APPROVED else "rejects"
        reviewer = _reviewer(by, verb)
        why = _text(reason or "", "the reason", MAX_REASON_CHARS)[0] if status is PatternStatus.REJECTED else None
        if status is PatternStatus.CANDIDATE:
            raise PatternError("a review approves or rejects")
        with self.locked():
            data = self.load()
            entry = data["patterns"].get(pid)
            if entry is None:
                known = ", ".join(sorted(data["patterns"])[:10]) or "none"
                raise PatternError(f"no pattern {pid[:60]!r} (patterns: {known}; "
                                   "`graphmem patterns review --all` lists them)")
            if entry["status"] == status.value:
                raise PatternError(f"{pid} is already {status.value}")
            content = self.read_version(pid, entry["version"])  # a damaged version is refused before any write
            review = {"by": reviewer, "at": at or now_iso(), "version": entry["version"]}
            entry.update(status=status.value, review={**review, **({"reason": why} if why else {})})
            self._save(data)
            return self._view(pid, entry, content)


def detect(gm: Graphmem, bar: EvidenceBar | None = None, *, folder: Path | None = None,
           sessions_folder: Path | None = None, at: str | None = None) -> DetectReport:
    """Gather the sessions' evidence and fold it into the project's catalog."""
    from graphmem.sessions.capture import sessions_dir

    raw = RawStore((sessions_folder or sessions_dir(gm)) / "raw", RetentionConfig())  # read only: no caps applied
    groups = gather(gm.store, raw)
    report = PatternCatalog(folder or patterns_dir(gm.settings, gm.project), bar).update(groups, at=at)
    report.sessions = len({k for g in groups.values() for k in g.sessions})
    return report


__all__ = ["RERUN", "DetectReport", "Evidence", "EvidenceBar", "Floor", "PatternCatalog", "PatternError",
           "PatternStatus",
           "detect", "gather", "near_duplicate", "pattern_id", "patterns_dir"]
