"""Raw session bodies outside the graph, kept within a byte budget.

A raw body is a session's redacted, normalised events (JSON Lines) under
``<project home>/sessions/raw/``; the graph holds only the session node and its digest. The budget:

- **max age**: a body whose session ended more than ``max_age_days`` ago goes, once digested;
- **soft cap**: past ``soft_bytes``, digested bodies go, the oldest session first;
- **hard cap**: past ``hard_bytes``, undigested bodies go too, oldest first, each reported as an
  *overflow* (its session has no digest to fall back on).

Invariant: a body is never dropped before its session's digest exists, except through a reported
hard-cap overflow. Every eviction is appended to ``evictions.jsonl``, which ``graphmem sessions
status`` reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from graphmem.errors import ConfigError
from graphmem.model import now_iso, to_iso
from graphmem.sessions.events import Event

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3}


def parse_size(value: str | int, what: str) -> int:
    """Bytes from ``1048576``, ``512KB``, ``64MiB``, ``2G``."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
    if not match or match.group(2).lower() not in _UNITS:
        raise ConfigError(f"{what} must be a size such as 500MB, 2GiB or 1048576, not {value!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


DEFAULT_SOFT_BYTES = 256 * 1024**2
DEFAULT_HARD_BYTES = 1024**3
DEFAULT_MAX_AGE_DAYS = 90.0


@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """The byte budget of raw session bodies (``GRAPHMEM_SESSIONS_SOFT_CAP``, ``..._HARD_CAP``,
    ``..._MAX_AGE_DAYS``; the ``sessions`` commands take ``--soft-cap``, ``--hard-cap``, ``--max-age-days``)."""

    soft_bytes: int = DEFAULT_SOFT_BYTES
    hard_bytes: int = DEFAULT_HARD_BYTES
    max_age_days: float = DEFAULT_MAX_AGE_DAYS

    def __post_init__(self) -> None:
        for name in ("soft_bytes", "hard_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"sessions retention: {name} must be a positive whole number of bytes, not {value!r}")
        if self.soft_bytes > self.hard_bytes:
            raise ConfigError(f"sessions retention: the soft cap ({self.soft_bytes:,} bytes) is above the hard cap "
                              f"({self.hard_bytes:,} bytes)")
        if not isinstance(self.max_age_days, (int, float)) or not self.max_age_days > 0:
            raise ConfigError(f"sessions retention: max_age_days must be above 0, not {self.max_age_days!r}")

    @classmethod
    def from_env(cls, *, soft: str | int | None = None, hard: str | int | None = None,
                 max_age_days: float | None = None, env: Mapping[str, str] | None = None) -> RetentionConfig:
        """Explicit values win over the environment, which wins over the defaults."""
        env = os.environ if env is None else env
        soft_v = soft if soft is not None else env.get("GRAPHMEM_SESSIONS_SOFT_CAP") or DEFAULT_SOFT_BYTES
        hard_v = hard if hard is not None else env.get("GRAPHMEM_SESSIONS_HARD_CAP") or DEFAULT_HARD_BYTES
        age_raw: Any = max_age_days if max_age_days is not None else env.get("GRAPHMEM_SESSIONS_MAX_AGE_DAYS")
        try:
            age = float(age_raw) if age_raw not in (None, "") else DEFAULT_MAX_AGE_DAYS
        except ValueError:
            raise ConfigError(f"GRAPHMEM_SESSIONS_MAX_AGE_DAYS must be a number of days, not {age_raw!r}") from None
        return cls(parse_size(soft_v, "the soft cap"), parse_size(hard_v, "the hard cap"), age)

    def as_dict(self) -> dict[str, Any]:
        return {"soft_bytes": self.soft_bytes, "hard_bytes": self.hard_bytes, "max_age_days": self.max_age_days}


class EvictionReason(str, Enum):
    """Why a raw body went."""

    MAX_AGE = "max_age"
    SOFT_CAP = "soft_cap"
    HARD_CAP_OVERFLOW = "hard_cap_overflow"  # undigested: reported, the one exception to the invariant


@dataclass(frozen=True, slots=True)
class Eviction:
    at: str
    key: str
    bytes: int
    reason: EvictionReason
    digested: bool

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at, "key": self.key, "bytes": self.bytes, "reason": self.reason.value,
                "digested": self.digested, "overflow": self.reason is EvictionReason.HARD_CAP_OVERFLOW}


class RawStore:
    """Raw bodies of one project's sessions, their index and the eviction log, in ``directory``."""

    def __init__(self, directory: Path, config: RetentionConfig) -> None:
        self.dir = directory
        self.config = config
        self._index_path = directory / "index.json"
        self._log_path = directory / "evictions.jsonl"
        try:
            data = json.loads(self._index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        self.index: dict[str, dict[str, Any]] = data if isinstance(data, dict) else {}

    def _file(self, key: str) -> Path:
        return self.dir / (hashlib.blake2b(key.encode(), digest_size=12).hexdigest() + ".jsonl")

    def has(self, key: str) -> bool:
        return key in self.index and self._file(key).is_file()

    def write(self, key: str, events: Iterable[Event], *, append: bool, ended: str | None) -> None:
        """Store events of ``key`` (after the ones held, with ``append``); the body is undigested
        until :meth:`mark_digested`."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self._file(key)
        data = "".join(json.dumps(e.as_dict(), ensure_ascii=False) + "\n" for e in events).encode("utf-8")
        with path.open("ab" if append and self.has(key) else "wb") as handle:
            handle.write(data)
        entry = self.index.get(key, {})
        entry.update(file=path.name, bytes=path.stat().st_size, stored_at=entry.get("stored_at") or now_iso(),
                     ended=ended or entry.get("ended"), digested=False)
        self.index[key] = entry
        self.save()

    def read(self, key: str) -> list[Event] | None:
        """The events held for ``key`` (None when its body is not held)."""
        if not self.has(key):
            return None
        out = []
        for line in self._file(key).read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append(Event.from_dict(json.loads(line)))
        return out

    def mark_digested(self, key: str) -> None:
        if key in self.index:
            self.index[key]["digested"] = True
            self.save()

    def used(self) -> int:
        return sum(int(e.get("bytes") or 0) for e in self.index.values())

    def enforce(self, now: datetime | None = None) -> list[Eviction]:
        """Apply max age, then the soft cap, then the hard cap; log and return what went."""
        now = now or datetime.now(timezone.utc)
        cutoff = to_iso(now - timedelta(days=self.config.max_age_days))
        order = sorted(self.index, key=lambda k: (str(self.index[k].get("ended") or self.index[k].get("stored_at")), k))
        gone: list[Eviction] = []
        for key in order:
            e = self.index[key]
            if e.get("digested") and str(e.get("ended") or e.get("stored_at")) < cutoff:
                gone.append(self._evict(key, EvictionReason.MAX_AGE, now))
        for key in [k for k in order if k in self.index and self.index[k].get("digested")]:
            if self.used() <= self.config.soft_bytes:
                break
            gone.append(self._evict(key, EvictionReason.SOFT_CAP, now))
        for key in [k for k in order if k in self.index]:
            if self.used() <= self.config.hard_bytes:
                break
            gone.append(self._evict(key, EvictionReason.HARD_CAP_OVERFLOW, now))
        if gone:
            self.save()
        return gone

    def _evict(self, key: str, reason: EvictionReason, now: datetime) -> Eviction:
        entry = self.index.pop(key)
        self._file(key).unlink(missing_ok=True)
        ev = Eviction(to_iso(now), key, int(entry.get("bytes") or 0), reason, bool(entry.get("digested")))
        with self._log_path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(ev.as_dict()) + "\n")
        return ev

    def evictions(self) -> list[dict[str, Any]]:
        """Every eviction logged, oldest first."""
        try:
            lines = self._log_path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a crash says nothing
        return out

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self._index_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.index, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self._index_path)


__all__ = ["Eviction", "EvictionReason", "RawStore", "RetentionConfig", "parse_size"]
