"""The normalised model every transcript adapter produces: events of one session, redacted.

An :class:`Event` is one thing that happened in a session: a prompt, a reply, a tool call, the
result of a call (joined to it by ``call_id``), a commit, a summary, or a change of the session's
setting (``meta``: working folder, branch, model). Events are built through :func:`make_event`,
which redacts every text field, so nothing an adapter read reaches disk, the graph or a log with a
secret in it.

Errors carry a *fingerprint*: the error line with numbers, paths, hex ids and quoted values
replaced by placeholders, hashed. The same failure in two sessions (another file, another line,
another temporary folder) gets the same fingerprint, which is what a pattern detector groups on.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from extractors.secrets import redact

TEXT_CHARS = 2000  # a prompt, reply or edit excerpt kept per event
OUTPUT_CHARS = 1200  # the excerpt of a tool's output kept per result
ERROR_CHARS = 800  # the error message kept per failed result


class Flavour(str, Enum):
    """Which agent wrote the transcript."""

    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    GENERIC = "generic"


class EventKind(str, Enum):
    """What an event is."""

    META = "meta"  # the session's setting changed or became known (cwd, branch, model, agent version)
    PROMPT = "prompt"  # a person's message to the agent
    REPLY = "reply"  # the agent's text
    TOOL = "tool"  # the agent called a tool (command run, files read or edited)
    RESULT = "result"  # what a tool call returned (ok or error), joined to its call by call_id
    COMMIT = "commit"  # a commit the session made (sha from `git commit` output)
    SUMMARY = "summary"  # a summary the agent itself wrote (Claude Code's summary records)


@dataclass(slots=True)
class Event:
    """One normalised, redacted event. Empty fields are left out of the stored form."""

    kind: EventKind
    time: str | None = None
    text: str = ""
    tool: str = ""
    call_id: str = ""
    command: str = ""
    files_read: list[str] = field(default_factory=list)
    files_edited: list[str] = field(default_factory=list)
    ok: bool | None = None  # results: whether the call succeeded
    error: str = ""  # results: the error message, when it failed
    fingerprint: str = ""  # results that failed: see error_fingerprint()
    signature: str = ""  # the normalised error line the fingerprint hashes
    commit: str = ""  # commits: the sha as printed (short or full)
    sidechain: bool = False  # Claude Code: a sub-agent's work, not the main thread
    meta: dict[str, str] = field(default_factory=dict)  # META: cwd, branch, model, version, head

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v not in ("", None, [], {}, False)}
        out["kind"] = self.kind.value
        if self.ok is not None:
            out["ok"] = self.ok
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        known = {k: data[k] for k in cls.__slots__ if k in data}  # type: ignore[attr-defined]
        known["kind"] = EventKind(data["kind"])
        return cls(**known)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Of a huge output only this much is redacted: far more than any field keeps, so the cut (which may
# split a secret) lies in the part the final clip drops.
SCAN_CHARS = 65_536


def _clean(value: Any, limit: int, *, tail: bool = False) -> str:
    """Text of a field, redacted, then bounded to ``limit`` from its start (or end, with ``tail``)."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    text = (text[-SCAN_CHARS:] if tail else text[:SCAN_CHARS]).strip()
    clean = redact(text)[0]
    return _tail(clean, limit) if tail else _clip(clean, limit)


def make_event(kind: EventKind, *, time: str | None = None, text: Any = "", tool: Any = "", call_id: Any = "",
               command: Any = "", files_read: list[str] | None = None, files_edited: list[str] | None = None,
               ok: bool | None = None, error: Any = "", commit: str = "", sidechain: bool = False,
               meta: dict[str, Any] | None = None) -> Event:
    """An event with every text field redacted and bounded; a failed result gets its fingerprint."""
    err = _clean(error, ERROR_CHARS * 4, tail=True)
    sig = error_signature(err) if err else ""
    return Event(
        kind=kind, time=time, text=_clean(text, OUTPUT_CHARS if kind is EventKind.RESULT else TEXT_CHARS),
        tool=_clean(tool, 120), call_id=_clean(call_id, 120), command=_clean(command, 1000),
        files_read=[_clean(p, 500) for p in files_read or [] if p],
        files_edited=[_clean(p, 500) for p in files_edited or [] if p],
        ok=ok, error=_tail(err, ERROR_CHARS), signature=sig,
        fingerprint=hashlib.blake2b(sig.encode(), digest_size=8).hexdigest() if sig else "",
        commit=commit, sidechain=sidechain,
        meta={str(k): _clean(v, 300) for k, v in (meta or {}).items() if v not in (None, "")},
    )


def _tail(text: str, limit: int) -> str:
    """The end of a long text: tracebacks and compiler output say what went wrong last."""
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


# --- error fingerprints -------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# An exception named with its message ("psycopg.OperationalError: ..."), wherever the line puts it
# (pytest's "E   ..." and "FAILED test - ..." lines name the same one).
_EXCEPTION = re.compile(r"(?<![\w.])(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Failure|Exit)\b(?::.*)?$")
# Otherwise a line that says something failed: "error: ...", "fatal: ...", "command not found".
_ERROR_LINE = re.compile(r"(?:^|\s)(?:error|fatal|failed|panic|fail)(?:\[\w+\])?\s*:|\bnot found\b|"
                         r"\bpermission denied\b|\bno such file\b|\bcannot\b|\bcan't\b|\bunable to\b", re.IGNORECASE)
_NOISE_LINE = re.compile(r"^\s*(?:File \"|at |Traceback|\^+\s*$|~+\s*$|-+\s*$|=+\s*$|\d+ (?:passed|failed))")
_PLACEHOLDERS = (
    (re.compile(r"\[REDACTED:[\w-]+\]"), "<secret>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"), "<hex>"),
    (re.compile(r"\"[^\"\n]{0,300}\"|'[^'\n]{0,300}'|`[^`\n]{0,300}`"
                r"|‘[^’\n]{0,300}’|“[^”\n]{0,300}”"), "<str>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:[/\\][\w.@+-]+){2,}[/\\]?|\b[\w.-]+(?:[/\\][\w.@+-]+)+"), "<path>"),
    (re.compile(r"\b[\w-]+\.(?:py|js|ts|tsx|go|rs|java|rb|c|h|cpp|json|toml|yaml|yml|md|txt|lock|cfg|ini)\b"),
     "<path>"),
    (re.compile(r"\b\d+(?:\.\d+)*(?:ms|s|kb|mb|gb|b)?\b", re.IGNORECASE), "<n>"),
)


def error_signature(message: str) -> str:
    """The line of ``message`` that names the failure, with what varies between occurrences
    (numbers, paths, hex ids, uuids, quoted values) replaced by placeholders."""
    lines = [ln.strip() for ln in _ANSI.sub("", message).splitlines() if ln.strip()]
    named = [m.group(0) for ln in lines for m in [_EXCEPTION.search(ln)] if m]
    said = [ln for ln in lines if _ERROR_LINE.search(ln) and not _NOISE_LINE.match(ln)]
    plain = [ln for ln in lines if not _NOISE_LINE.match(ln)] or lines or [""]
    line = named[-1] if named else said[-1] if said else plain[0]
    for pattern, placeholder in _PLACEHOLDERS:
        line = pattern.sub(placeholder, line)
    return " ".join(line.split())[:300]


def error_fingerprint(message: str) -> str:
    """A stable 16-hex fingerprint of an error message (see :func:`error_signature`)."""
    return hashlib.blake2b(error_signature(redact(message)[0]).encode(), digest_size=8).hexdigest()


__all__ = ["Event", "EventKind", "Flavour", "error_fingerprint", "error_signature", "make_event"]
