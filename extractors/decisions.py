"""Architecture decision records (Nygard and MADR styles) -> a decision node, its links, chunks.

A record becomes ``adr:<n>`` with its number, title, status, date and deciders; "Superseded by" /
"Supersedes" lines and front-matter fields become ``SUPERSEDES`` (newer -> older); deciders become
``DECIDED`` (person by email, team when the vocabulary knows it); services, symbols and
technologies named in the text become ``MENTIONS``; other ADRs and incidents named become
``REFERENCES``. Each section becomes one or more ``decision`` chunks.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from extractors.base import Extraction, Skipped
from extractors.secrets import redact
from extractors.text import (
    extract_file,
    MarkdownDoc,
    Section,
    Vocabulary,
    adr_refs,
    as_list,
    as_text,
    header_key,
    incident_refs,
    normalise_text,
    parse_header_block,
    parse_markdown,
    section_chunks,
    split_front_matter,
    strip_markdown,
    symbol_key_refs,
)
from graphmem.errors import ModelError
from graphmem.model import (
    Node,
    Provenance,
    Relationship,
    RelType,
    adr_key,
    incident_key,
    person_key,
    to_iso,
)

log = logging.getLogger(__name__)

EXTRACTOR = "adr"
VERSION = "1"
CHUNK_KIND = "decision"

DECISION_DIRS = frozenset(
    {"adr", "adrs", "decisions", "decision-records", "architecture-decisions", "architecture-decision-records"}
)
_FILE_RE = re.compile(r"^(?:adr[-_]?)?(\d{1,5})[-_].+\.(?:md|markdown)$", re.IGNORECASE)
STATUSES = (
    "proposed",
    "accepted",
    "rejected",
    "deprecated",
    "superseded",
    "amended",
    "draft",
    "withdrawn",
    "implemented",
)
_TITLE_NUM = re.compile(r"^(?:ADR[-_ #]*)?0*(\d{1,5})\s*(?:[.:)\]]|\s-|\s—|\s–)\s*(.+)$", re.IGNORECASE)
_TITLE_ADR = re.compile(r"^ADR[-_ #]*0*(\d{1,5})\s*[:.\-—–]?\s*(.*)$", re.IGNORECASE)
_SUPERSEDE = re.compile(
    r"\b(superseded\s+by|replaced\s+by|supersedes|replaces)\b[\s:]*([^\n]*)", re.IGNORECASE
)
_BARE_NUM = re.compile(r"^\s*(?:ADR\s*)?#?0*(\d{1,5})\b", re.IGNORECASE)
_BRACKET_NUM = re.compile(r"\[\s*0*(\d{1,5})\.\s")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_TEAM_HANDLE = re.compile(r"^@[\w.-]+/([\w.-]+)$")
_SAME_DIR_LINK = re.compile(r"\]\((?:\./)?0*(\d{1,5})-[\w.-]*\.md(?:#[^)]*)?\)")


def is_decision_record(path: str) -> bool:
    """Whether a relative path names a decision record: ``NNNN-title.md`` under an ADR folder."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if len(parts) < 2 or not _FILE_RE.match(parts[-1]):
        return False
    return any(part.lower() in DECISION_DIRS for part in parts[:-1])


@dataclass(slots=True)
class DecisionRecord:
    """What a decision record says, before it becomes graph facts."""

    number: int
    title: str
    status: str | None = None
    date: str | None = None
    deciders: list[str] = field(default_factory=list)
    supersedes: list[int] = field(default_factory=list)
    superseded_by: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    doc: MarkdownDoc | None = None
    overview: Section | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return adr_key(self.number)


def parse_decision(path: str, text: str) -> DecisionRecord | Skipped:
    """Read a decision record; a :class:`Skipped` says why a file could not be read as one."""
    if not text.strip():
        return Skipped(path, "empty decision record")
    fm = split_front_matter(normalise_text(text))
    warnings: list[str] = []
    if fm.error:
        warnings.append(fm.error)
        log.warning("%s: %s; read what could be salvaged", path, fm.error)
    meta: dict[str, Any] = {header_key(k): v for k, v in fm.data.items()}
    doc = parse_markdown(fm.body, fm.body_line)
    preamble_text = doc.preamble.text if doc.preamble else ""
    header = parse_header_block(preamble_text)

    title = strip_markdown(as_text(meta.get("title")) or doc.title or "")
    number = _number(meta, title, path)
    if number is None:
        return Skipped(path, "no decision record number in front matter, title or file name")
    title = _clean_title(title) or _title_from_filename(path) or f"ADR {number}"

    status_sec = doc.section("status")
    status_text = as_text(meta.get("status")) or header.get("status") or (
        status_sec.text if status_sec else ""
    )
    date = _date(as_text(meta.get("date")) or header.get("date") or _date_in(status_sec))
    deciders = as_list(
        meta.get("deciders") or meta.get("decision_makers") or meta.get("decided_by")
    ) or as_list(header.get("deciders") or header.get("decision_makers") or header.get("decided_by"))
    deciders = [strip_markdown(d) for d in deciders]

    supersedes: dict[int, None] = {}
    superseded_by: dict[int, None] = {}
    for value in as_list(meta.get("supersedes")) + as_list(meta.get("replaces")):
        _add_num(supersedes, value)
    for value in as_list(meta.get("superseded_by")) + as_list(meta.get("replaced_by")):
        _add_num(superseded_by, value)
    status_lines = "\n".join(
        [status_text, status_sec.text if status_sec else "", preamble_text]
    )
    for match in _SUPERSEDE.finditer(status_lines):
        target = superseded_by if match.group(1).lower().endswith("by") else supersedes
        rest = match.group(2)
        nums = adr_refs(rest) + [int(m.group(1)) for m in _SAME_DIR_LINK.finditer(rest)]
        nums += [int(m.group(1)) for m in _BRACKET_NUM.finditer(rest)]
        if not nums and (bare := _BARE_NUM.match(rest)):
            nums = [int(bare.group(1))]
        for num in nums:
            if num != number:
                target[num] = None

    overview = _overview(doc.preamble)
    return DecisionRecord(
        number=number,
        title=title,
        status=_status(status_text, bool(superseded_by)),
        date=date,
        deciders=list(dict.fromkeys(d for d in deciders if d)),
        supersedes=list(supersedes),
        superseded_by=list(superseded_by),
        tags=as_list(meta.get("tags")),
        doc=doc,
        overview=overview,
        warnings=warnings,
    )


def extract_decision(
    path: str,
    text: str,
    *,
    vocabulary: Vocabulary | None = None,
    source_commit: str | None = None,
) -> Extraction:
    """Graph facts from one decision record at ``path`` (relative POSIX) with content ``text``."""
    out = Extraction()
    record = parse_decision(path, text)
    if isinstance(record, Skipped):
        out.skipped.append(record)
        return out
    vocab = vocabulary if vocabulary is not None else Vocabulary()
    prov = Provenance(path, EXTRACTOR, VERSION, source_commit=source_commit)
    key = record.key
    doc = record.doc
    assert doc is not None

    props: dict[str, Any] = {
        "number": record.number,
        "title": record.title,
        "status": record.status,
        "date": record.date,
        "deciders": record.deciders,
        "sections": [s.title for s in doc.sections],
        "supersedes": [adr_key(n) for n in record.supersedes],
        "superseded_by": [adr_key(n) for n in record.superseded_by],
        "tags": record.tags,
        "summary": _summary(doc),
        "warnings": record.warnings,
    }
    props = {k: v for k, v in props.items() if v not in (None, [], "")}
    out.nodes.append(Node(key=key, name=record.title, provenance=prov, props=props))

    def rel(src: str, rtype: RelType, dst: str, conf: float = 1.0, **extra: Any) -> None:
        p = prov if conf == 1.0 else Provenance(path, EXTRACTOR, VERSION, source_commit, conf)
        out.rels.append(Relationship(src, rtype, dst, p, props=dict(extra)))

    for old in record.supersedes:
        rel(key, RelType.SUPERSEDES, adr_key(old))
    for new in record.superseded_by:
        rel(adr_key(new), RelType.SUPERSEDES, key)

    for decider in record.deciders:
        owner = decider_key(decider, vocab)
        if owner:
            rel(owner, RelType.DECIDED, key)

    body = _full_text(doc)
    mentions = vocab.find(body)
    for service in mentions.services:
        rel(key, RelType.MENTIONS, service)
    symbols = dict(mentions.symbols)
    for sym in symbol_key_refs(body):
        symbols.setdefault(sym, 1.0)
    for sym, conf in symbols.items():
        rel(key, RelType.MENTIONS, sym, conf)
    for ekey, name in mentions.technologies:
        out.nodes.append(
            Node(ekey, name, prov, props={"entity_type": "technology", "canonical_name": name})
        )
        rel(key, RelType.MENTIONS, ekey)

    linked = {record.number, *record.supersedes, *record.superseded_by}
    for num in adr_refs(body) + [int(m.group(1)) for m in _SAME_DIR_LINK.finditer(body)]:
        if num not in linked:
            linked.add(num)
            rel(key, RelType.REFERENCES, adr_key(num))
    for inc in incident_refs(body):
        rel(key, RelType.REFERENCES, incident_key(inc))

    sections = ([record.overview] if record.overview else []) + doc.sections
    out.chunks.extend(
        section_chunks(key, f"ADR-{record.number} {record.title}", sections, CHUNK_KIND, prov)
    )
    return out


def extract_decision_file(root: str | Path, path: str, **options: Any) -> Extraction:
    """Read ``root/path`` and extract it; an unreadable file is reported, not raised."""
    return extract_file(extract_decision, root, path, **options)


def decider_key(decider: str, vocabulary: Vocabulary | None = None) -> str | None:
    """The node a decider names: ``person:<email>``, ``team:<name>``, or None (kept as a prop)."""
    email = _EMAIL.search(decider)
    if email:
        return person_key(email.group(0))
    name = decider.strip()
    handle = _TEAM_HANDLE.match(name)
    if handle:  # "@org/payments" is a team by its syntax alone
        return "team:" + handle.group(1)
    if vocabulary is not None:
        team = vocabulary.team(name)
        if team:
            return "team:" + team
    return None


# --- helpers ------------------------------------------------------------------------------------


def _number(meta: dict[str, Any], title: str, path: str) -> int | None:
    for name in ("number", "adr", "adr_number", "id"):
        value = meta.get(name)
        if value is None or isinstance(value, bool):
            continue
        try:
            return int(adr_key(str(value)).partition(":")[2])
        except ModelError:
            continue
    for rx in (_TITLE_ADR, _TITLE_NUM):
        match = rx.match(title)
        if match:
            return int(match.group(1))
    match = _FILE_RE.match(PurePosixPath(path).name)
    return int(match.group(1)) if match else None


def _clean_title(title: str) -> str:
    for rx in (_TITLE_ADR, _TITLE_NUM):
        match = rx.match(title)
        if match and match.group(2).strip():
            return match.group(2).strip()
    return title.strip()


def _title_from_filename(path: str) -> str:
    stem = PurePosixPath(path).stem
    stem = re.sub(r"^(?:adr[-_]?)?\d+[-_]", "", stem, flags=re.IGNORECASE)
    words = stem.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:]


def _status(text: str, has_successor: bool) -> str | None:
    low = text.lower()
    first = low.strip().splitlines()[0] if low.strip() else ""
    for status in STATUSES:
        if re.search(rf"\b{status}\b", first):
            return status
    for status in STATUSES:
        if re.search(rf"\b{status}\b", low):
            return status
    if has_successor:
        return "superseded"
    first = strip_markdown(first)
    return first[:40] or None


def _date(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    match = re.search(r"\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?", text)
    if match:
        try:
            return to_iso(match.group(0).replace(" ", "T"))[:10]
        except ModelError:
            pass
    return text[:40]


def _date_in(section: Section | None) -> str:
    if section is None:
        return ""
    match = re.search(r"\b\d{4}-\d{2}-\d{2}\b", section.text)
    return match.group(0) if match else ""


def _add_num(target: dict[int, None], value: str) -> None:
    try:
        target[int(adr_key(value.strip()).partition(":")[2])] = None
    except ModelError:
        nums = adr_refs(value) or [int(m.group(1)) for m in _SAME_DIR_LINK.finditer(value)]
        for num in nums:
            target[num] = None


_META_KEYS = frozenset(
    {
        "status", "date", "deciders", "decision_makers", "decided_by", "consulted", "informed",
        "supersedes", "superseded_by", "replaces", "replaced_by", "tags", "number", "id",
    }
)


def _overview(preamble: Section | None) -> Section | None:
    """Prose between the title and the first section, without the metadata lines already read
    into props (other ``Key: value`` lines such as "Technical Story" are content and stay)."""
    if preamble is None:
        return None
    lines = preamble.text.split("\n")
    kept = ["" if _META_KEYS.intersection(parse_header_block(ln)) else ln for ln in lines]
    if not any(ln.strip() for ln in kept):
        return None
    first = next(i for i, ln in enumerate(kept) if ln.strip())
    last = max(i for i, ln in enumerate(kept) if ln.strip())
    return Section(
        "Overview",
        preamble.level,
        "\n".join(kept[first : last + 1]),
        preamble.start_line + first,
        preamble.start_line + last,
    )


def _summary(doc: MarkdownDoc, limit: int = 500) -> str | None:
    """The first paragraph of the decision itself, for quick display."""
    sec = doc.section("decision_outcome", "decision", exact=True)
    if sec is None or not sec.text.strip():
        return None
    para = sec.text.strip().split("\n\n")[0]
    text = redact(strip_markdown(para))[0]
    return text[:limit]


def _full_text(doc: MarkdownDoc) -> str:
    parts = [doc.title or ""]
    if doc.preamble:
        parts.append(doc.preamble.text)
    parts.extend(f"{s.title}\n{s.text}" for s in doc.sections)
    return "\n\n".join(parts)


__all__ = [
    "CHUNK_KIND",
    "DECISION_DIRS",
    "DecisionRecord",
    "EXTRACTOR",
    "VERSION",
    "decider_key",
    "extract_decision",
    "extract_decision_file",
    "is_decision_record",
    "parse_decision",
]
