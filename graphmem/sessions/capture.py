"""``graphmem sessions ingest``: transcripts -> raw bodies, session nodes and digests, incrementally.

Each transcript file has a cursor (``cursors.json`` beside the raw bodies): its size, modification
time, the byte offset read up to and a hash of the bytes before that offset. A file whose size and
time are unchanged is skipped without being opened; one that grew with its consumed prefix intact is
read from the offset alone (an agent appends to its transcript); any other change (rewritten,
truncated) is read again from the start. Only sessions with new events are written, so a run over
unchanged transcripts writes nothing to the graph.

Runs hold a lock on the project's sessions folder, so a hook firing while a manual run works waits
for it rather than reading the same lines twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extractors.policy import secret_reason
from graphmem.errors import GraphmemError
from graphmem.sessions.adapters import detect_flavour, parse, peek_setting
from graphmem.sessions.digest import deterministic_digest, llm_digest, session_facts
from graphmem.sessions.events import Event, Flavour
from graphmem.sessions.graph import CommitIndex, display_path, session_key, write_session
from graphmem.sessions.retention import RawStore, RetentionConfig

if TYPE_CHECKING:
    from graphmem.api import Graphmem

CURSOR_VERSION = 1
_SINGLE_SESSION = (Flavour.CLAUDE_CODE, Flavour.CODEX)


def sessions_dir(gm: Graphmem) -> Path:
    """``<project home>/sessions``: beside the project's indexes (embedded or Neo4j alike)."""
    from graphmem.api import index_dir

    return index_dir(gm.settings, gm.project).parent / "sessions"


def default_sources(env: dict[str, str] | None = None) -> list[Path]:
    """The current user's Claude Code and Codex transcript folders that exist."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or Path.home())
    claude = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude") / "projects"
    codex = Path(env.get("CODEX_HOME") or home / ".codex") / "sessions"
    return [p for p in (claude, codex) if p.is_dir()]


def _inside(path: str, root: str) -> bool:
    path, root = os.path.normpath(path), os.path.normpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(slots=True)
class IngestReport:
    """What a run did."""

    files_seen: int = 0
    files_unchanged: int = 0
    files_read: int = 0
    bytes_read: int = 0
    lines: int = 0
    sessions: list[str] = field(default_factory=list)  # keys written
    outside_root: list[str] = field(default_factory=list)  # sessions left out: their cwd is not in the project
    digests: dict[str, int] = field(default_factory=dict)  # digest source -> count (llm, deterministic, fallback)
    evicted: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"files_seen": self.files_seen, "files_unchanged": self.files_unchanged,
                "files_read": self.files_read, "bytes_read": self.bytes_read, "lines": self.lines,
                "sessions_written": len(self.sessions), "sessions": self.sessions,
                "outside_root": self.outside_root, "digests": self.digests, "evicted": self.evicted,
                "overflows": [e for e in self.evicted if e.get("overflow")], "problems": self.problems}


def _prefix_hash(path: Path, length: int) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as handle:
        remaining = length
        while remaining > 0:
            block = handle.read(min(remaining, 1 << 20))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
    return digest.hexdigest()


def transcripts(paths: Iterable[Path], problems: list[str]) -> Iterator[Path]:
    """Transcript files named or found (``*.jsonl``, recursively) under ``paths``, each once."""
    seen: set[Path] = set()
    for path in paths:
        path = Path(path).expanduser()
        if not path.exists():
            problems.append(f"{path}: no such file or folder: skipped")
            continue
        found = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
        for file in found:
            resolved = file.resolve()
            if resolved in seen or not resolved.is_file():
                continue
            if secret_reason(str(file)):
                problems.append(f"{file}: {secret_reason(str(file))}")
                continue
            seen.add(resolved)
            yield resolved


class SessionIngest:
    """Ingest transcripts into one project (a :class:`~graphmem.api.Graphmem`)."""

    def __init__(self, gm: Graphmem, *, retention: RetentionConfig | None = None, llm: bool | None = None,
                 now: datetime | None = None, folder: Path | None = None) -> None:
        self.gm = gm
        self.dir = folder or sessions_dir(gm)
        self.raw = RawStore(self.dir / "raw", retention or RetentionConfig.from_env())
        self.llm = gm.settings.llm.configured if llm is None else llm
        if self.llm:
            gm.settings.llm.require()
        self.now = now
        self._cursor_path = self.dir / "cursors.json"

    @contextmanager
    def locked(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the project's sessions lock; wait at most ``timeout`` seconds (None: as long as it takes)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / "lock").open("a") as handle:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | (fcntl.LOCK_NB if deadline is not None else 0))
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:  # type: ignore[operator]
                        raise GraphmemError(f"another sessions ingest is running on {self.dir} "
                                            f"(waited {timeout:g} s); the next run reads these transcripts") from None
                    time.sleep(0.1)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _cursors(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self._cursor_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data.get("files", {}) if isinstance(data, dict) and data.get("version") == CURSOR_VERSION else {}

    def _save_cursors(self, cursors: dict[str, dict[str, Any]]) -> None:
        tmp = self._cursor_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": CURSOR_VERSION, "files": cursors}, indent=1, sort_keys=True),
                       encoding="utf-8")
        os.replace(tmp, self._cursor_path)

    def run(self, paths: Iterable[Path] | None = None, *, lock_timeout: float | None = None) -> IngestReport:
        """Ingest ``paths`` (files or folders); without, the user's Claude Code and Codex folders,
        keeping only sessions whose working folder lies in the project's root when it is known.
        ``lock_timeout``: how long to wait for another run on the same project (None: until it ends)."""
        report = IngestReport()
        store = self.gm.store
        root = store.get_meta("root")
        only_root = root if paths is None else None
        sources = list(paths) if paths is not None else default_sources()
        commits = CommitIndex(store)
        with self.locked(lock_timeout):
            cursors = self._cursors()
            for path in transcripts(sources, report.problems):
                report.files_seen += 1
                try:
                    self._file(path, cursors, report, root, only_root, commits)
                except OSError as exc:
                    report.problems.append(f"{path}: cannot read ({exc.strerror or exc}): skipped")
                self._save_cursors(cursors)
            report.evicted = [e.as_dict() for e in self.raw.enforce(self.now)]
        if report.sessions:
            self.gm.sync_indexes()
        return report

    def _file(self, path: Path, cursors: dict[str, dict[str, Any]], report: IngestReport, root: str | None,
              only_root: str | None, commits: CommitIndex) -> None:
        stat = path.stat()
        name = str(path)
        cur = cursors.get(name)
        if cur and cur.get("size") == stat.st_size and cur.get("mtime_ns") == stat.st_mtime_ns:
            report.files_unchanged += 1
            return
        flavour_name = (cur or {}).get("flavour")
        flavour = Flavour(flavour_name) if flavour_name else detect_flavour(path)
        if flavour is None:
            report.problems.append(f"{path}: not a Claude Code, Codex or generic session transcript "
                                   "(or binary): skipped")
            cursors[name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "flavour": None, "offset": 0}
            return
        if only_root and flavour in _SINGLE_SESSION and not (cur or {}).get("sessions"):
            cwd, sid = peek_setting(path, flavour)
            if cwd and not _inside(cwd, only_root):  # another project's session: not read further
                report.outside_root.append(session_key(flavour, sid or path.stem))
                cursors[name] = {"flavour": flavour.value, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                                 "offset": 0, "outside_cwd": cwd}
                return
        start = 0
        if cur and cur.get("offset") and stat.st_size >= cur["offset"] \
                and _prefix_hash(path, cur["offset"]) == cur.get("prefix_hash"):
            start = int(cur["offset"])
        known: list[str] = list((cur or {}).get("sessions") or []) if start else []
        single = known[0] if known and flavour in _SINGLE_SESSION else None
        batch = parse(path, flavour, start, single)
        if start and any(not self.raw.index.get(session_key(flavour, sid), {}).get("digested")
                         and sid not in (cur or {}).get("outside", []) for sid in batch.events):
            # A session whose raw body was evicted, or whose last write stopped before its digest:
            # read the transcript whole again rather than append to a body that is gone or partial.
            start, batch = 0, parse(path, flavour, 0)
        report.files_read += 1
        report.bytes_read += batch.end - start
        report.lines += batch.lines
        report.problems += batch.problems
        transcript = display_path(path)
        outside = set((cur or {}).get("outside", [])) if start else set()
        for sid, new in batch.events.items():
            key = session_key(flavour, sid)
            before: list[Event] = (self.raw.read(key) or []) if start else []
            events = before + new
            facts = session_facts(flavour, sid, events)
            if sid in outside or (only_root and facts.cwd and not _inside(facts.cwd, only_root)):
                outside.add(sid)
                report.outside_root.append(key)
                continue
            self.raw.write(key, new, append=bool(start), ended=facts.ended)
            digest = deterministic_digest(facts)
            if self.llm:
                digest = llm_digest(self.gm.settings.llm, facts, digest)
            label = digest.source if not digest.note else "fallback"
            report.digests[label] = report.digests.get(label, 0) + 1
            if digest.note:
                report.problems.append(f"{key}: {digest.note}")
            write_session(self.gm.store, facts, digest, transcript=transcript, root=root, commits=commits)
            self.raw.mark_digested(key)
            report.sessions.append(key)
            if sid not in known:
                known.append(sid)
        cursors[name] = {"flavour": flavour.value, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                         "offset": batch.end, "prefix_hash": _prefix_hash(path, batch.end),
                         "sessions": known, "outside": sorted(outside)}


def sessions_status(gm: Graphmem, retention: RetentionConfig | None = None, *, recent: int = 20,
                    folder: Path | None = None) -> dict[str, Any]:
    """Sessions in the graph, raw bytes held against the caps, and what was evicted."""
    from graphmem.model import NodeKind

    config = retention or RetentionConfig.from_env()
    folder = folder or sessions_dir(gm)
    raw = RawStore(folder / "raw", config)
    flavours: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    digests: dict[str, int] = {}
    total = 0
    for node in gm.store.iter_nodes([NodeKind.SESSION]):
        total += 1
        for counter, name in ((flavours, "flavour"), (outcomes, "outcome"), (digests, "digest_source")):
            value = str(node.props.get(name) or "unknown")
            counter[value] = counter.get(value, 0) + 1
    evictions = raw.evictions()
    by_reason: dict[str, int] = {}
    for e in evictions:
        by_reason[str(e.get("reason"))] = by_reason.get(str(e.get("reason")), 0) + 1
    try:
        cursors = json.loads((folder / "cursors.json").read_text(encoding="utf-8")).get("files", {})
    except (OSError, ValueError, AttributeError):
        cursors = {}
    used = raw.used()
    return {
        "project": gm.project, "sessions": total, "by_flavour": flavours, "by_outcome": outcomes,
        "digests": digests, "transcripts_tracked": len(cursors),
        "raw": {"bodies": len(raw.index), "bytes": used,
                "undigested": sorted(k for k, e in raw.index.items() if not e.get("digested")),
                "soft_cap_used": round(used / config.soft_bytes, 4),
                "hard_cap_used": round(used / config.hard_bytes, 4),
                "folder": str(raw.dir)},
        "caps": config.as_dict(),
        "evicted": {"total": len(evictions), "bytes": sum(int(e.get("bytes") or 0) for e in evictions),
                    "by_reason": by_reason, "overflows": [e for e in evictions if e.get("overflow")][-recent:],
                    "recent": evictions[-recent:]},
    }


__all__ = ["IngestReport", "SessionIngest", "default_sources", "sessions_dir", "sessions_status", "transcripts"]
