"""A session in the graph: node ``session:<flavour>:<id>``, its digest chunk, TOUCHED relationships.

The node holds the session's setting, counts, outcome, error fingerprints and digest; its chunk (the
digest) makes it searchable with everything else; ``TOUCHED`` joins it to what it worked on, with
``how`` saying in what way: ``read`` and ``edited`` files (paths resolved against the session's
working folder and the project root), ``edited`` symbols (a symbol of an edited file whose name the
edit holds), ``committed`` commits (short shas from ``git commit`` output resolved against the
commits in the graph), and ``mentioned`` symbols, services, decisions and more (the mention
resolution agent memory uses). Only nodes that exist and are open are joined.

Every element has the source path ``<transcript path>#<session id>`` (the home folder written
``~``), so re-ingesting a session replaces what it said before and never touches what a repository
ingest wrote.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphmem.errors import ModelError
from graphmem.memory import resolve_mentions
from graphmem.model import (Chunk, Node, NodeKind, Provenance, Relationship, RelType, commit_key, file_key, now_iso,
                            to_iso)
from graphmem.sessions.digest import Digest, SessionFacts
from graphmem.sessions.events import Flavour
from graphmem.stores.base import NAMES_STAMP, Keep

if TYPE_CHECKING:
    from graphmem.stores.base import GraphStore

EXTRACTOR = "agent-sessions"
EXTRACTOR_VERSION = "1"
CHUNK_KIND = "session"
PREFIX = NodeKind.SESSION.prefix  # "session:"
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def session_key(flavour: Flavour, session_id: str) -> str:
    """``session:<flavour>:<id>``; characters a key should not hold become ``-``."""
    sid = _ID_UNSAFE.sub("-", session_id).strip("-")[:120]
    if not sid:
        raise ModelError(f"a session needs an id, got {session_id[:40]!r}")
    return f"{PREFIX}{flavour.value}:{sid}"


def display_path(path: Path) -> str:
    """A transcript's path as stored: absolute, the user's home written ``~``."""
    text = str(path.resolve())
    home = str(Path.home())
    return "~" + text[len(home):] if home not in ("", "/") and (text == home or text.startswith(home + "/")) else text


def _project_path(raw: str, cwd: str, root: str | None) -> str | None:
    """A path a session named, relative to the project root (or to its working folder when the
    root is unknown or elsewhere); None when it lies outside both."""
    raw = raw.replace("\\", "/")
    absolute = raw if raw.startswith("/") else posixpath.normpath(posixpath.join(cwd or "/", raw)) if cwd else None
    bases = [b for b in (root, cwd) if b]
    if absolute is None:
        rel = posixpath.normpath(raw)
        return None if rel.startswith("../") or rel == ".." else rel
    for base in bases:
        base = posixpath.normpath(base)
        if absolute == base or absolute.startswith(base.rstrip("/") + "/"):
            return posixpath.relpath(absolute, base)
    return None


@dataclass(slots=True)
class SessionWrite:
    """What writing a session did."""

    key: str
    touched: dict[str, list[str]]  # key -> how


class CommitIndex:
    """Full shas of the graph's commits, for the short shas ``git commit`` prints (read once, on need)."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self._shas: list[str] | None = None

    def resolve(self, sha: str) -> str | None:
        sha = sha.lower()
        if len(sha) == 40:
            return commit_key(sha)
        if self._shas is None:
            self._shas = sorted(n.key[len("commit:"):] for n in self.store.iter_nodes([NodeKind.COMMIT]))
        hits = [s for s in self._shas if s.startswith(sha)]
        return commit_key(hits[0]) if len(hits) == 1 else None


def _defines(text: str, name: str) -> bool:
    """Whether an edit holds the definition line of ``name`` (``def post(``, ``func (s *Store) AppendBatch(``,
    ``public void send(``, ``class Store``): a bare use such as ``.get(`` is not an edit of ``get``."""
    n = re.escape(name)
    return bool(re.search(
        rf"\b(?:def|func|function|fn|class|struct|interface|trait|enum|type|impl)\s+(?:\([^)\n]*\)\s*)?{n}\b"
        rf"|\b(?:public|private|protected|static|async|void|final|override)\s+(?:[\w<>\[\],.?]+\s+)*{n}\s*\(", text))


MENTION_FLOOR = 0.5  # a name shared by several symbols (``post``) names none of them well enough
_NESTING = 3  # file -> class -> method -> nested function


def _touched(store: GraphStore, facts: SessionFacts, root: str | None, commits: CommitIndex,
             exclude: str) -> dict[str, tuple[list[str], float]]:
    """Keys the session touched -> (how, confidence)."""
    how: dict[str, tuple[list[str], float]] = {}

    def add(key: str, way: str, confidence: float = 1.0) -> None:
        ways, conf = how.get(key, ([], 0.0))
        if way not in ways:
            ways.append(way)
        how[key] = (ways, max(conf, confidence))

    edited_files: dict[str, str] = {}
    for raw, way in [(p, "read") for p in facts.files_read] + [(p, "edited") for p in facts.files_edited]:
        rel = _project_path(raw, facts.cwd, root)
        if rel is None:
            continue
        try:
            key = file_key(rel)
        except ModelError:
            continue
        add(key, way)
        if way == "edited":
            edited_files[key] = edited_files.get(key, "") + "\n" + facts.edit_text.get(raw, "")
    for sha in facts.commits:
        key = commits.resolve(sha)
        if key:
            add(key, "committed")
    existing = store.get_nodes(sorted(how))
    how = {k: v for k, v in how.items() if k in existing and existing[k].valid_to is None}
    # A symbol of an edited file is edited when the edit names it (its definition or a use).
    frontier = {k: t for k, t in edited_files.items() if k in how and t.strip()}
    for _ in range(_NESTING):
        inner: dict[str, str] = {}
        for rel in store.get_relationships(sorted(frontier)):
            if rel.type is RelType.CONTAINS and rel.src in frontier and rel.dst.startswith("sym:"):
                text = frontier[rel.src]
                name = rel.dst.rpartition("::")[2].rpartition(".")[2]
                if name and _defines(text, name):
                    add(rel.dst, "edited")
                inner[rel.dst] = text
        frontier = inner
        if not frontier:
            break
    for key, conf in resolve_mentions(store, facts.mention_text, exclude=exclude).items():
        if conf >= MENTION_FLOOR:
            add(key, "mentioned", conf)
    return how


def _short(key: str) -> str:
    """How a touched key reads in a digest: a symbol's qualified name and file, a file's path."""
    if key.startswith("sym:"):
        path, _, qual = key[4:].partition("::")
        return f"{qual} ({path})"
    return key.partition(":")[2] if key.startswith(("file:", "service:", "team:")) else key


def write_session(store: GraphStore, facts: SessionFacts, digest: Digest, *, transcript: str, root: str | None,
                  commits: CommitIndex, at: str | None = None) -> SessionWrite:
    """Upsert the session's node, chunk and relationships, and withdraw what it said before and no longer says."""
    key = session_key(facts.flavour, facts.session_id)
    source = f"{transcript}#{facts.session_id}"
    prov = Provenance(source, EXTRACTOR, EXTRACTOR_VERSION)
    touched = _touched(store, facts, root, commits, key)
    fingerprints = list(dict.fromkeys(e.fingerprint for e in facts.errors if e.fingerprint))
    unresolved = list(dict.fromkeys(e.fingerprint for e in facts.errors if e.fingerprint and not e.resolved))
    started = _iso(facts.started)
    props: dict[str, Any] = {
        "flavour": facts.flavour.value, "session_id": facts.session_id, "started": started,
        "ended": _iso(facts.ended), "cwd": facts.cwd or None, "branch": facts.branch or None,
        "model": facts.model or None, "agent": facts.agent or None, "outcome": facts.outcome.value,
        "prompts": facts.prompts, "replies": facts.replies, "tool_calls": facts.tool_calls,
        "errors": len(facts.errors), "error_fingerprints": fingerprints, "unresolved_fingerprints": unresolved,
        "error_details": _error_details(facts),
        "commands": facts.commands[:50], "files_edited": facts.files_edited[:200], "files_read": facts.files_read[:200],
        "commits": facts.commits, "sidechain_events": facts.sidechain_events, "transcript": transcript,
        "agent_written": True, **digest.as_props(),
    }
    day = (started or "")[:16].replace("T", " ")
    header = f"Agent session {facts.flavour.value} {facts.session_id[:12]} ({day or 'undated'}" + (
        f", branch {facts.branch}" if facts.branch else "") + ")"
    text = digest.render(header, [_short(k) for k in sorted(touched) if not k.startswith("person:")][:60])
    # Valid from the session's start, so the graph "as of" an earlier day shows what was worked on then.
    node = Node(key, f"{facts.flavour.value} session {facts.session_id[:12]}: {facts.task[:80]}".strip(": "),
                prov, props, valid_from=started)
    rels = [Relationship(key, RelType.TOUCHED, dst, Provenance(source, EXTRACTOR, EXTRACTOR_VERSION, confidence=conf),
                         {"how": ways}, valid_from=started) for dst, (ways, conf) in sorted(touched.items())]
    chunk = Chunk(key, 0, text, CHUNK_KIND, prov)
    when = to_iso(at) if at else None
    with store.atomic():
        store.upsert([node], [], [], at=when)
        store.upsert([], rels, [chunk], at=when)
        store.close_sources([source], at=when, keep=Keep.of([node], rels, [chunk]))
        store.set_meta({NAMES_STAMP: now_iso()})
    return SessionWrite(key, {k: ways for k, (ways, _) in touched.items()})


def _error_details(facts: SessionFacts) -> list[str]:
    """One JSON object per distinct error fingerprint (the resolved occurrence first): signature,
    command, whether the session got past it and how. Kept on the node because raw bodies age out,
    and a pattern detector groups these across sessions and flavours (see :func:`session_errors`)."""
    best: dict[str, Any] = {}
    for err in facts.errors:
        if err.fingerprint and (err.fingerprint not in best or (err.resolved and not best[err.fingerprint].resolved)):
            best[err.fingerprint] = err
    return [json.dumps({k: v for k, v in e.as_dict().items() if k != "message"} | {"message": e.message[:300]},
                       sort_keys=True) for e in list(best.values())[:50]]


def session_errors(node: Node) -> list[dict[str, Any]]:
    """The errors a session node records (``error_details``), as dicts."""
    out = []
    for item in node.props.get("error_details") or []:
        try:
            out.append(json.loads(str(item)))
        except ValueError:
            continue
    return out


def _iso(value: str | None) -> str | None:
    try:
        return to_iso(value) if value else None
    except ModelError:
        return None


__all__ = ["CHUNK_KIND", "EXTRACTOR", "CommitIndex", "SessionWrite", "display_path", "session_errors", "session_key",
           "write_session"]
