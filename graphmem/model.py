"""The graph model: node kinds and their keys, relationship types, provenance, validity, chunks.

Every store, extractor and retriever speaks these types. Keys follow SPEC.md (``service:billing``,
``sym:billing/api.py::Handler.post``, ...); the kind of a node is read off its key prefix, so a key
alone says what it names.

Validity: a node or relationship is *open* while ``valid_to`` is ``None``. A fact that stops holding
(a deleted function, a call that disappeared) is *closed* by setting ``valid_to``; it is kept, so
questions "as of" an earlier time still see it. Upserting a closed element reopens it.

Property values are what both Neo4j and JSON can hold: ``str``, ``int``, ``float``, ``bool``, or a
list of one of those. ``None`` removes a property on upsert.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Union

from graphmem.errors import ModelError

Scalar = Union[str, int, float, bool]
PropValue = Union[Scalar, list]
Props = dict[str, PropValue]


class NodeKind(str, Enum):
    """What a node is. ``prefix`` starts its keys; ``label`` is its Neo4j label."""

    SERVICE = "service"
    FILE = "file"
    SYMBOL = "symbol"
    COMMIT = "commit"
    PERSON = "person"
    TEAM = "team"
    DECISION = "decision"
    INCIDENT = "incident"
    TICKET = "ticket"
    DOCUMENT = "document"
    ENTITY = "entity"
    MEMORY = "memory"  # what an agent or a person told graphmem (a fact, convention, lesson...)
    SESSION = "session"  # a coding agent's session, captured from its transcript (graphmem.sessions)
    RELEASE = "release"  # a git tag: the commits it released for the first time point at it

    @property
    def label(self) -> str:
        return self.value.capitalize()

    @property
    def prefix(self) -> str:
        return _PREFIXES[self] + ":"


_PREFIXES: dict[NodeKind, str] = {k: k.value for k in NodeKind} | {
    NodeKind.SYMBOL: "sym",
    NodeKind.DECISION: "adr",
    NodeKind.DOCUMENT: "doc",
}
KIND_BY_PREFIX: dict[str, NodeKind] = {p: k for k, p in _PREFIXES.items()}
KIND_BY_LABEL: dict[str, NodeKind] = {k.label: k for k in NodeKind}
# The organisation's own kinds: what entity resolution may merge a name into (with the entity
# family that names each), and what a question names when it names a part of the organisation.
ORG_KINDS: dict[NodeKind, str] = {NodeKind.SERVICE: "service", NodeKind.TEAM: "team", NodeKind.PERSON: "person"}

# The label every graphmem node carries in Neo4j besides its kind's label; lookups go through it.
NODE_LABEL = "Node"

_ANY = frozenset(NodeKind)
_CODE = frozenset({NodeKind.FILE, NodeKind.SYMBOL})
_DOCS = frozenset({NodeKind.DECISION, NodeKind.INCIDENT, NodeKind.DOCUMENT, NodeKind.TICKET, NodeKind.MEMORY})
_OWNERS = frozenset({NodeKind.TEAM, NodeKind.PERSON})


class RelType(str, Enum):
    """Relationship types. Each names the node kinds it may join (see ``REL_ENDPOINTS``)."""

    CONTAINS = "CONTAINS"  # service -> file, file -> symbol, symbol -> nested symbol
    IMPORTS = "IMPORTS"  # file -> file / symbol it imports
    CALLS = "CALLS"  # symbol -> symbol (or file for module-level code)
    INHERITS = "INHERITS"  # class -> base class, struct/class -> interface it implements
    DEPENDS_ON = "DEPENDS_ON"  # service -> service
    OWNS = "OWNS"  # team / person -> file, service, symbol
    MEMBER_OF = "MEMBER_OF"  # person -> team
    AUTHORED = "AUTHORED"  # person -> commit
    PARENT = "PARENT"  # commit -> parent commit
    CHANGED = "CHANGED"  # commit -> file
    MODIFIED = "MODIFIED"  # commit -> symbol whose lines the commit touched
    REFERENCES = "REFERENCES"  # commit / document -> decision, incident, ticket, document
    FIXES = "FIXES"  # commit -> incident / ticket it fixes
    SUPERSEDES = "SUPERSEDES"  # decision -> the decision it replaces
    DECIDED = "DECIDED"  # person / team -> decision they took
    MENTIONS = "MENTIONS"  # document -> anything its text names
    AFFECTED = "AFFECTED"  # incident -> service / symbol it hit
    CAUSED_BY = "CAUSED_BY"  # incident -> commit (or symbol) that triggered it
    RESOLVED_BY = "RESOLVED_BY"  # incident -> commit that resolved it
    IMPLEMENTS = "IMPLEMENTS"  # file / symbol / commit -> decision it carries out
    RELATED_TO = "RELATED_TO"  # entity -> entity (extracted relations; predicate in props)
    TOUCHED = "TOUCHED"  # session -> file, symbol, commit, decision... it read, edited, made or named (``how``)
    RELEASED_IN = "RELEASED_IN"  # commit -> the first release (git tag) that contains it


REL_ENDPOINTS: dict[RelType, tuple[frozenset[NodeKind], frozenset[NodeKind]]] = {
    RelType.CONTAINS: (frozenset({NodeKind.SERVICE, NodeKind.FILE, NodeKind.SYMBOL}), _CODE),
    RelType.IMPORTS: (_CODE, _CODE | {NodeKind.SERVICE}),
    RelType.CALLS: (_CODE, _CODE),
    RelType.INHERITS: (frozenset({NodeKind.SYMBOL}), frozenset({NodeKind.SYMBOL})),
    RelType.DEPENDS_ON: (frozenset({NodeKind.SERVICE}), frozenset({NodeKind.SERVICE})),
    RelType.OWNS: (_OWNERS, frozenset({NodeKind.SERVICE}) | _CODE),
    RelType.MEMBER_OF: (frozenset({NodeKind.PERSON}), frozenset({NodeKind.TEAM})),
    RelType.AUTHORED: (frozenset({NodeKind.PERSON}), frozenset({NodeKind.COMMIT}) | _DOCS),
    RelType.PARENT: (frozenset({NodeKind.COMMIT}), frozenset({NodeKind.COMMIT})),
    RelType.CHANGED: (frozenset({NodeKind.COMMIT}), frozenset({NodeKind.FILE})),
    RelType.MODIFIED: (frozenset({NodeKind.COMMIT}), frozenset({NodeKind.SYMBOL})),
    RelType.REFERENCES: (frozenset({NodeKind.COMMIT}) | _DOCS | _CODE, _DOCS | {NodeKind.COMMIT}),
    RelType.FIXES: (frozenset({NodeKind.COMMIT}), frozenset({NodeKind.INCIDENT, NodeKind.TICKET})),
    RelType.SUPERSEDES: (frozenset({NodeKind.DECISION}), frozenset({NodeKind.DECISION})),
    RelType.DECIDED: (_OWNERS, frozenset({NodeKind.DECISION})),
    RelType.MENTIONS: (_DOCS | {NodeKind.COMMIT} | _CODE, _ANY),
    RelType.AFFECTED: (frozenset({NodeKind.INCIDENT}), frozenset({NodeKind.SERVICE}) | _CODE),
    RelType.CAUSED_BY: (frozenset({NodeKind.INCIDENT}), frozenset({NodeKind.COMMIT}) | _CODE),
    RelType.RESOLVED_BY: (frozenset({NodeKind.INCIDENT}), frozenset({NodeKind.COMMIT})),
    RelType.IMPLEMENTS: (_CODE | {NodeKind.COMMIT, NodeKind.SERVICE}, frozenset({NodeKind.DECISION})),
    RelType.RELATED_TO: (_ANY, _ANY),
    RelType.TOUCHED: (frozenset({NodeKind.SESSION}), _ANY),
    RelType.RELEASED_IN: (frozenset({NodeKind.COMMIT}), frozenset({NodeKind.RELEASE})),
}

# Property names the stores manage themselves; extractors may not set them through ``props``.
PROVENANCE_FIELDS = (
    "source_path",
    "source_commit",
    "extractor",
    "extractor_version",
    "confidence",
    "ingested_at",
)
RESERVED_PROPS = frozenset(
    {"project", "key", "kind", "name", "sources", "valid_from", "valid_to", "src", "dst", "type"}
    | set(PROVENANCE_FIELDS)
)


# --- time ---------------------------------------------------------------------------------------


def to_iso(when: datetime | str | None = None) -> str:
    """UTC timestamp in one fixed-width form, so that strings compare in time order.

    ``2025-03-01T12:00:00.000000Z``; a naive datetime is taken as UTC.
    """
    if when is None:
        when = datetime.now(timezone.utc)
    elif isinstance(when, str):
        text = when.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            when = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ModelError(f"not an ISO-8601 time: {when!r}") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_iso() -> str:
    """The current time as :func:`to_iso` writes it."""
    return to_iso(None)


# --- keys ---------------------------------------------------------------------------------------

_PROJECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_ADR_RE = re.compile(r"^(?:adr[-_ ]?)?0*(\d+)$", re.IGNORECASE)


def check_project(name: str) -> str:
    """A project name is a short identifier that is also safe as a directory name."""
    if not isinstance(name, str) or not _PROJECT_RE.match(name):
        raise ModelError(
            f"invalid project name {name!r}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def project_from_path(path: str) -> str:
    """The default project name for an ingested folder: its name, made safe."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", path.rstrip("/").split("/")[-1]).strip("-._")
    return check_project(base[:64] or "default")


def normalise_name(name: str) -> str:
    """Lower case, single spaces: the form names take inside entity keys."""
    return " ".join(name.casefold().split())


def _posix(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    if not path or path.startswith("/") or ".." in path.split("/"):
        raise ModelError(f"path must be relative to the ingested root: {path!r}")
    return path


def service_key(name: str) -> str:
    return "service:" + name.strip()


def file_key(path: str) -> str:
    return "file:" + _posix(path)


def symbol_key(path: str, qualname: str) -> str:
    if not qualname:
        raise ModelError("a symbol needs a qualified name")
    return f"sym:{_posix(path)}::{qualname}"


def commit_key(sha: str) -> str:
    sha = sha.strip().lower()
    if not _SHA_RE.match(sha):
        raise ModelError(f"a commit key needs the full 40-hex sha, got {sha!r}")
    return "commit:" + sha


def person_key(email: str) -> str:
    return "person:" + email.strip().lower()


def team_key(name: str) -> str:
    return "team:" + name.strip().lstrip("@")


def adr_key(number: int | str) -> str:
    """``adr:5`` for 5, "5", "0005" or "ADR-0005"."""
    match = _ADR_RE.match(str(number).strip())
    if not match:
        raise ModelError(f"not a decision record number: {number!r}")
    return f"adr:{int(match.group(1))}"


def incident_key(ident: str) -> str:
    return "incident:" + ident.strip().upper()


def ticket_key(ident: str) -> str:
    return "ticket:" + ident.strip().upper()


def doc_key(path_or_id: str) -> str:
    return "doc:" + path_or_id.strip()


def release_key(tag: str) -> str:
    """``release:<tag name>``, the tag as git names it (``v2.1.0``, ``release/1.4``)."""
    tag = tag.strip()
    if not tag:
        raise ModelError("a release key needs a tag name")
    return "release:" + tag


def entity_key(entity_type: str, name: str) -> str:
    return f"entity:{normalise_name(entity_type)}:{normalise_name(name)}"


def parse_day(value: str | None, what: str = "the date") -> datetime | None:
    """A date or time a user gave (ISO 8601; UTC when it names no zone). ``None`` and "" give None."""
    if not value:
        return None
    try:
        day = datetime.fromisoformat(value)
    except ValueError:
        raise ModelError(f"{what} must be a date such as 2026-06-01, not {value!r}") from None
    return day if day.tzinfo else day.replace(tzinfo=timezone.utc)


# The ``symbol_kind`` values of symbol nodes that are types, and of those that are callables.
CLASS_KINDS = frozenset({"class", "interface", "struct", "enum", "trait", "type"})
FUNCTION_KINDS = frozenset({"function", "method"})


def kind_of(key: str) -> NodeKind:
    """The node kind a key names, from its prefix."""
    prefix, sep, rest = key.partition(":")
    kind = KIND_BY_PREFIX.get(prefix)
    if kind is None or not sep or not rest:
        raise ModelError(f"not a graphmem key: {key!r} (expected e.g. 'service:billing')")
    return kind


def symbol_parts(key: str) -> tuple[str, str]:
    """``(path, qualname)`` of a symbol key."""
    if not key.startswith("sym:") or "::" not in key:
        raise ModelError(f"not a symbol key: {key!r}")
    path, _, qual = key[4:].partition("::")
    return path, qual


# Test code by the conventions of the languages graphmem reads: test folders, test_*.py, *_test.go,
# *.test.ts / *.spec.js, FooTest.java.
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing|__tests__|spec)/|(?:^|/)test_[^/]+$|_test\.[a-z]+$"
                        r"|\.(?:test|spec)\.[a-z]+$|Tests?\.java$|(?:^|/)[^/]+Test[s]?\.[a-z]+$")


def path_of_key(key: str) -> str | None:
    """The repository path of a file or symbol key (None for other kinds)."""
    if key.startswith("file:"):
        return key[5:]
    if key.startswith("sym:") and "::" in key:
        return symbol_parts(key)[0]
    return None


def is_test_path(path: str) -> bool:
    """Whether a repository path holds test code."""
    return bool(_TEST_PATH.search(path))


def is_declaration_key(key: str) -> bool:
    """Whether a symbol is declared in a TypeScript declaration file (``typings/index.d.ts``):
    its types and signatures, without the code that does the work."""
    return key.startswith("sym:") and key[4:].partition("::")[0].endswith((".d.ts", ".d.mts", ".d.cts"))


# A test module written inside a source file (Rust's ``#[cfg(test)] mod tests``).
_TEST_MODULE = re.compile(r"(?:\w+_)?tests?")


def is_test_key(key: str) -> bool:
    """Whether a node is test code: in a test file (``is_test_path``), or a symbol inside a test
    module of its file (``src/uri/path.rs::tests.compares_with_a_string``)."""
    path = path_of_key(key)
    if path and is_test_path(path):
        return True
    if not key.startswith("sym:"):
        return False
    owners = key.partition("::")[2].split(".")[:-1]
    return any(_TEST_MODULE.fullmatch(part) for part in owners)


def key_contains(outer: str, inner: str) -> bool:
    """Whether ``inner`` equals ``outer`` or lies inside it (symbol in file, method in class)."""
    if inner == outer:
        return True
    if outer.startswith("file:") and inner.startswith("sym:"):
        return inner[4:].partition("::")[0] == outer[5:]
    if outer.startswith("sym:") and inner.startswith("sym:"):
        return inner.startswith(outer + ".")
    return False


# --- elements -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Provenance:
    """Where a fact came from."""

    source_path: str
    extractor: str
    extractor_version: str = "1"
    source_commit: str | None = None
    confidence: float = 1.0
    ingested_at: str | None = None

    def as_props(self) -> Props:
        out: Props = {
            "source_path": self.source_path,
            "extractor": self.extractor,
            "extractor_version": self.extractor_version,
            "confidence": float(self.confidence),
        }
        if self.source_commit is not None:
            out["source_commit"] = self.source_commit
        if self.ingested_at is not None:
            out["ingested_at"] = self.ingested_at
        return out

    @classmethod
    def from_props(cls, props: Mapping[str, object]) -> Provenance:
        return cls(
            source_path=str(props.get("source_path", "")),
            extractor=str(props.get("extractor", "")),
            extractor_version=str(props.get("extractor_version", "")),
            source_commit=props.get("source_commit"),  # type: ignore[arg-type]
            confidence=float(props.get("confidence", 1.0)),  # type: ignore[arg-type]
            ingested_at=props.get("ingested_at"),  # type: ignore[arg-type]
        )


class _Validity:
    """Shared by nodes and relationships: open while ``valid_to`` is unset."""

    __slots__ = ()
    valid_from: str | None
    valid_to: str | None

    @property
    def is_open(self) -> bool:
        return self.valid_to is None

    def valid_at(self, when: str | None) -> bool:
        """Valid at ``when`` (ISO time), or open when ``when`` is None."""
        return _valid_at(self.valid_from, self.valid_to, when)


@dataclass(slots=True)
class Node(_Validity):
    """A typed node. ``kind`` follows from the key; ``props`` holds the domain properties."""

    key: str
    name: str
    provenance: Provenance
    props: Props = field(default_factory=dict)
    valid_from: str | None = None
    valid_to: str | None = None
    sources: tuple[str, ...] = ()

    @property
    def kind(self) -> NodeKind:
        return kind_of(self.key)


@dataclass(slots=True)
class Relationship(_Validity):
    """A typed, directed relationship; ``(src, type, dst)`` identifies it within a project."""

    src: str
    type: RelType
    dst: str
    provenance: Provenance
    props: Props = field(default_factory=dict)
    valid_from: str | None = None
    valid_to: str | None = None
    sources: tuple[str, ...] = ()

    @property
    def ident(self) -> tuple[str, str, str]:
        # ``_value_`` rather than ``value``: the enum property is slow on hot paths.
        return (self.src, self.type._value_, self.dst)


@dataclass(slots=True)
class Chunk:
    """A passage of text for BM25 and vector search, belonging to one node.

    ``id`` is a stable 63-bit integer derived from the node key and the ordinal, so the FAISS
    index can name a chunk without a lookup table.
    """

    node_key: str
    ordinal: int
    text: str
    kind: str
    provenance: Provenance
    start_line: int | None = None
    end_line: int | None = None
    id: int = 0

    def __post_init__(self) -> None:
        if not self.id:
            self.id = chunk_id(self.node_key, self.ordinal)


def chunk_id(node_key: str, ordinal: int) -> int:
    """Stable positive 63-bit id of a node's n-th chunk (FAISS ids are signed 64-bit)."""
    digest = hashlib.blake2b(f"{node_key}#{ordinal}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF) or 1


def _valid_at(valid_from: str | None, valid_to: str | None, when: str | None) -> bool:
    if when is None:
        return valid_to is None
    if valid_from is not None and valid_from > when:
        return False
    return valid_to is None or valid_to > when


# --- validation ---------------------------------------------------------------------------------


_SCALARS = frozenset({str, int, float, bool})
# Allowed endpoint key prefixes per relationship type name: plain strings, cheap to check.
_ENDPOINT_PREFIXES = {
    t._value_: (frozenset(_PREFIXES[k] for k in src), frozenset(_PREFIXES[k] for k in dst))
    for t, (src, dst) in REL_ENDPOINTS.items()
}


def _describe(owner: object) -> str:
    if isinstance(owner, Relationship):
        return f"{owner.src} -{owner.type}-> {owner.dst}"
    if isinstance(owner, Node):
        return owner.key
    return str(owner)


def check_props(props: Mapping[str, object], owner: object) -> Props:
    """Reject values neither Neo4j nor JSON can hold the same way, and reserved names.

    ``owner`` (a node, relationship or description) only names the culprit in the error.
    """
    for name, value in props.items():
        if name in RESERVED_PROPS:
            raise ModelError(f"{_describe(owner)}: property {name!r} is managed by graphmem")
        if value is None or isinstance(value, (str, bool, int, float)):
            continue
        if isinstance(value, (list, tuple)):
            first = type(value[0]) if value else str
            if first not in _SCALARS or any(type(v) is not first for v in value):
                raise ModelError(f"{_describe(owner)}: list property {name!r} must hold one scalar type")
            continue
        raise ModelError(f"{_describe(owner)}: property {name!r} has unsupported type {type(value).__name__}")
    return dict(props)  # type: ignore[arg-type]


def check_node(node: Node) -> Node:
    """Raise :class:`ModelError` unless the node fits the model."""
    kind_of(node.key)
    if not node.provenance.source_path or not node.provenance.extractor:
        raise ModelError(f"{node.key}: provenance needs a source path and an extractor")
    if node.props:
        check_props(node.props, node)
    return node


def check_relationship(rel: Relationship, *, strict_endpoints: bool = True) -> Relationship:
    """Raise :class:`ModelError` unless the relationship fits the model.

    A type given as a string is converted to :class:`RelType` in place.
    """
    if not isinstance(rel.type, RelType):
        try:
            rel.type = RelType(rel.type)
        except ValueError as exc:
            raise ModelError(f"unknown relationship type {rel.type!r}") from exc
    src, dst = rel.src, rel.dst
    src_prefix, dst_prefix = src[: src.find(":")], dst[: dst.find(":")]
    allowed_src, allowed_dst = _ENDPOINT_PREFIXES[rel.type._value_]
    if src_prefix not in allowed_src or dst_prefix not in allowed_dst:
        src_kind, dst_kind = kind_of(src), kind_of(dst)  # raises for keys that are not keys at all
        if strict_endpoints:
            raise ModelError(
                f"{rel.type._value_} cannot join {src_kind.value} {src!r} to {dst_kind.value} {dst!r}"
            )
    elif src.endswith(":") or dst.endswith(":"):
        raise ModelError(f"empty key in {_describe(rel)}")
    if not rel.provenance.source_path or not rel.provenance.extractor:
        raise ModelError(f"{_describe(rel)}: provenance needs a source path and an extractor")
    if rel.props:
        check_props(rel.props, rel)
    return rel


__all__ = [
    "Chunk",
    "KIND_BY_LABEL",
    "KIND_BY_PREFIX",
    "NODE_LABEL",
    "Node",
    "NodeKind",
    "PROVENANCE_FIELDS",
    "Props",
    "Provenance",
    "REL_ENDPOINTS",
    "RESERVED_PROPS",
    "RelType",
    "Relationship",
    "adr_key",
    "check_node",
    "check_project",
    "check_props",
    "check_relationship",
    "chunk_id",
    "commit_key",
    "doc_key",
    "entity_key",
    "file_key",
    "incident_key",
    "key_contains",
    "kind_of",
    "normalise_name",
    "now_iso",
    "person_key",
    "release_key",
    "project_from_path",
    "service_key",
    "symbol_key",
    "symbol_parts",
    "team_key",
    "ticket_key",
    "to_iso",
]
