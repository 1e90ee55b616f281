"""Incident postmortems (Markdown or JSON) -> an incident node, its links, chunks.

An incident becomes ``incident:<ID>`` with its title, severity, start and end times, affected
services, root cause and action items. Commits that triggered or resolved it become
``CAUSED_BY`` / ``RESOLVED_BY`` when given as full shas; abbreviated shas are kept in
``caused_by_refs`` / ``resolved_by_refs`` for the pipeline to resolve against git history.
Decisions and other incidents named become ``REFERENCES``; symbols, services and technologies
named in the text become ``MENTIONS``. Each section becomes one or more ``incident`` chunks.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from extractors.base import Extraction, Skipped
from extractors.secrets import redact
from extractors.text import (
    extract_file,
    Section,
    Vocabulary,
    adr_refs,
    as_list,
    as_text,
    bullet_items,
    full_shas,
    header_key,
    incident_refs,
    normalise_text,
    parse_header_block,
    parse_markdown,
    section_chunks,
    short_sha_refs,
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
    commit_key,
    incident_key,
    person_key,
    service_key,
    to_iso,
)

log = logging.getLogger(__name__)

EXTRACTOR = "incident"
VERSION = "1"
CHUNK_KIND = "incident"

INCIDENT_DIRS = frozenset(
    {"incidents", "incident", "postmortems", "postmortem", "post-mortems", "incident-reports", "retrospectives"}
)
_SUFFIXES = frozenset({".md", ".markdown", ".json"})
_NOT_REPORTS = frozenset({"readme", "index", "template", "_template", "postmortem-template", "incident-template"})

_ID_RE = re.compile(r"(?<![A-Za-z0-9])INC[-_ ]?\d+(?:-\d+)*(?![0-9])", re.IGNORECASE)
_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
_SERVICE_NAME = re.compile(r"[A-Za-z0-9][\w.-]{0,99}")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")

# Field aliases, after ``header_key`` normalisation; the first name is the canonical one.
_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "incident", "incident_id", "key", "ref"),
    "title": ("title", "name", "headline"),
    "severity": ("severity", "sev", "priority", "level"),
    "status": ("status", "state"),
    "started_at": ("started_at", "start", "started", "start_time", "began_at", "date"),
    "ended_at": ("ended_at", "end", "ended", "end_time", "resolved_at", "resolved"),
    "detected_at": ("detected_at", "detected", "detection_time"),
    "services": ("services", "affected_services", "service", "affected", "components", "systems"),
    "root_cause": ("root_cause", "root_causes", "cause"),
    "caused_by": ("caused_by", "triggered_by", "trigger", "causing_commits", "bad_commits"),
    "resolved_by": ("resolved_by", "fixed_by", "fix_commits", "resolution_commits"),
    "action_items": ("action_items", "actions", "follow_ups", "followups", "follow_up_actions"),
    "decisions": ("decisions", "adrs", "related_decisions"),
    "authors": ("authors", "author", "owner", "owners"),
    "commander": ("incident_commander", "commander", "ic"),
}
# Sections whose text is chunked, in the order a JSON report's fields are presented.
_TEXT_FIELDS = (
    ("summary", "Summary"),
    ("description", "Description"),
    ("impact", "Impact"),
    ("detection", "Detection"),
    ("timeline", "Timeline"),
    ("root_cause", "Root Cause"),
    ("contributing_factors", "Contributing Factors"),
    ("resolution", "Resolution"),
    ("mitigation", "Mitigation"),
    ("action_items", "Action Items"),
    ("lessons_learned", "Lessons Learned"),
)
_META_SECTIONS = ("metadata", "details", "incident_details", "overview", "facts", "key_facts", "summary")
_ROOT_CAUSE_SECTIONS = ("root_cause", "root_causes", "cause", "causes", "what_went_wrong")
_RESOLUTION_SECTIONS = ("resolution", "mitigation", "fix", "recovery", "remediation")
_ACTION_SECTIONS = ("action_items", "follow_up", "follow_ups", "followups", "corrective_actions", "next_steps")
_IMPACT_SECTIONS = ("summary", "impact", "description", "overview")


def is_incident_report(path: str) -> bool:
    """Whether a relative path names a postmortem: a .md or .json file under an incidents folder."""
    pure = PurePosixPath(path.replace("\\", "/"))
    if len(pure.parts) < 2 or pure.suffix.lower() not in _SUFFIXES:
        return False
    if pure.stem.lower() in _NOT_REPORTS:
        return False
    return any(part.lower() in INCIDENT_DIRS for part in pure.parts[:-1])


@dataclass(slots=True)
class IncidentReport:
    """What a postmortem says, before it becomes graph facts."""

    id: str
    title: str
    severity: str | None = None
    status: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    detected_at: str | None = None
    services: list[str] = field(default_factory=list)
    services_explicit: bool = False
    root_cause: str | None = None
    caused_by: list[str] = field(default_factory=list)
    resolved_by: list[str] = field(default_factory=list)
    action_items: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    authors: list[str] = field(default_factory=list)
    commander: str | None = None
    sections: list[Section] = field(default_factory=list)
    raw_times: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return incident_key(self.id)


def parse_incidents(path: str, text: str) -> tuple[list[IncidentReport], list[Skipped]]:
    """Read a postmortem file: Markdown gives one report, JSON one or a list of them."""
    if not text.strip():
        return [], [Skipped(path, "empty incident report")]
    text = normalise_text(text)
    suffix = PurePosixPath(path).suffix.lower()
    if suffix == ".json" or (suffix not in (".md", ".markdown") and text.lstrip().startswith(("{", "["))):
        return _parse_json(path, text)
    report = _parse_markdown(path, text)
    if isinstance(report, Skipped):
        return [], [report]
    return [report], []


def extract_incident(
    path: str,
    text: str,
    *,
    vocabulary: Vocabulary | None = None,
    source_commit: str | None = None,
) -> Extraction:
    """Graph facts from one postmortem file at ``path`` (relative POSIX) with content ``text``."""
    out = Extraction()
    reports, skipped = parse_incidents(path, text)
    out.skipped.extend(skipped)
    vocab = vocabulary if vocabulary is not None else Vocabulary()
    for report in reports:
        out.extend(_facts(path, report, vocab, source_commit))
    return out


def extract_incident_file(root: str | Path, path: str, **options: Any) -> Extraction:
    """Read ``root/path`` and extract it; an unreadable file is reported, not raised."""
    return extract_file(extract_incident, root, path, **options)


# --- facts --------------------------------------------------------------------------------------


def _facts(path: str, report: IncidentReport, vocab: Vocabulary, commit: str | None) -> Extraction:
    out = Extraction()
    prov = Provenance(path, EXTRACTOR, VERSION, source_commit=commit)
    key = report.key

    def rel(rtype: RelType, dst: str, conf: float = 1.0, src: str = key) -> None:
        p = prov if conf == 1.0 else Provenance(path, EXTRACTOR, VERSION, commit, conf)
        out.rels.append(Relationship(src, rtype, dst, p))

    body = "\n\n".join(f"{s.title}\n{s.text}" for s in report.sections)
    mentions = vocab.find(body)

    affected: dict[str, float] = {}
    for item in report.services:
        target = _code_or_service(item)
        if target:
            affected.setdefault(target, 1.0)
    if not report.services_explicit:
        # No declared list: services the summary or impact names were most likely hit.
        impact_text = "\n".join(s.text for s in report.sections if _is(s, _IMPACT_SECTIONS))
        for svc in vocab.find(impact_text).services if impact_text else []:
            affected.setdefault(svc, 0.6)
    for target, conf in affected.items():
        rel(RelType.AFFECTED, target, conf)

    caused_refs: list[str] = []
    for ref in report.caused_by:
        target = _commit_or_code(ref)
        if target:
            rel(RelType.CAUSED_BY, target)
        else:
            caused_refs.append(ref)
    resolved_refs: list[str] = []
    for ref in report.resolved_by:
        if _FULL_SHA.match(ref):
            rel(RelType.RESOLVED_BY, commit_key(ref))
        else:
            resolved_refs.append(ref)

    for svc in mentions.services:
        if svc not in affected:
            rel(RelType.MENTIONS, svc)
    symbols = dict(mentions.symbols)
    for sym in symbol_key_refs(body):
        symbols.setdefault(sym, 1.0)
    for sym, conf in symbols.items():
        if sym not in affected:
            rel(RelType.MENTIONS, sym, conf)
    for ekey, name in mentions.technologies:
        out.nodes.append(
            Node(ekey, name, prov, props={"entity_type": "technology", "canonical_name": name})
        )
        rel(RelType.MENTIONS, ekey)

    adrs: dict[str, None] = {}
    for ref in report.decisions + [f"ADR-{n}" for n in adr_refs(body)]:
        try:
            adrs[adr_key(ref)] = None
        except ModelError:
            for num in adr_refs(ref):
                adrs[adr_key(num)] = None
    for akey in adrs:
        rel(RelType.REFERENCES, akey)
    for other in incident_refs(body):
        if other != report.id:
            rel(RelType.REFERENCES, incident_key(other))
    for author in report.authors:
        email = _EMAIL.search(author)
        if email:
            rel(RelType.AUTHORED, key, src=person_key(email.group(0)))

    props: dict[str, Any] = {
        "id": report.id,
        "title": report.title,
        "severity": report.severity,
        "status": report.status,
        "started_at": report.started_at,
        "ended_at": report.ended_at,
        "detected_at": report.detected_at,
        "duration_minutes": _minutes(report.started_at, report.ended_at),
        "services": [t.partition(":")[2] for t in affected if t.startswith("service:")],
        "root_cause": _clean(report.root_cause, 2000),
        "action_items": [_clean(a, 500) or "" for a in report.action_items],
        "caused_by_refs": caused_refs,
        "resolved_by_refs": resolved_refs,
        "decisions": list(adrs),
        "authors": report.authors,
        "commander": report.commander,
        "sections": [s.title for s in report.sections],
        "warnings": report.warnings,
    }
    for name, raw in report.raw_times.items():
        props[f"{name}_text"] = raw
    props = {k: v for k, v in props.items() if v not in (None, [], "")}
    out.nodes.insert(0, Node(key, report.title or report.id, prov, props=props))
    out.chunks.extend(
        section_chunks(key, f"{report.id} {report.title}".strip(), report.sections, CHUNK_KIND, prov)
    )
    return out


# --- Markdown -----------------------------------------------------------------------------------


def _parse_markdown(path: str, text: str) -> IncidentReport | Skipped:
    fm = split_front_matter(text)
    warnings: list[str] = []
    if fm.error:
        warnings.append(fm.error)
        log.warning("%s: %s; read what could be salvaged", path, fm.error)
    doc = parse_markdown(fm.body, fm.body_line)
    meta_text = [doc.preamble.text] if doc.preamble else []
    meta_text += [s.text for s in doc.sections if _is(s, _META_SECTIONS)]
    header = parse_header_block("\n".join(meta_text))
    meta = _canonical({**header, **{header_key(k): v for k, v in fm.data.items()}})

    sections: list[Section] = []
    if doc.preamble:
        rest = _drop_meta_lines(doc.preamble)
        if rest is not None:
            sections.append(rest)
    sections.extend(s for s in doc.sections if s.text.strip())
    if not sections and not doc.title and not meta:
        return Skipped(path, "no title, metadata or sections: not an incident report")

    title = strip_markdown(as_text(meta.get("title")) or doc.title or "")
    ident = _ident(meta.get("id"), title, path)
    title = _strip_id(title, ident) or _title_from_filename(path)

    report = _report(ident, title, meta, warnings)
    report.sections = sections
    if report.root_cause is None:
        sec = _first(doc.sections, _ROOT_CAUSE_SECTIONS)
        if sec is not None:
            report.root_cause = sec.text.strip()
    if not report.caused_by:
        sec = _first(doc.sections, _ROOT_CAUSE_SECTIONS)
        if sec is not None:
            report.caused_by = full_shas(sec.text) + short_sha_refs(sec.text)
    if not report.resolved_by:
        sec = _first(doc.sections, _RESOLUTION_SECTIONS)
        if sec is not None:
            report.resolved_by = full_shas(sec.text) + short_sha_refs(sec.text)
    if not report.action_items:
        sec = _first(doc.sections, _ACTION_SECTIONS)
        if sec is not None:
            report.action_items = _action_items(sec.text)
    return report


def _drop_meta_lines(preamble: Section) -> Section | None:
    meta = parse_header_block(preamble.text)
    lines = preamble.text.split("\n")
    kept = [
        "" if (ln.strip() and _is_meta_line(ln, meta)) else ln
        for ln in lines
    ]
    if not any(ln.strip() for ln in kept):
        return None
    first = next(i for i, ln in enumerate(kept) if ln.strip())
    last = max(i for i, ln in enumerate(kept) if ln.strip())
    return Section(
        "Overview",
        0,
        "\n".join(kept[first : last + 1]),
        preamble.start_line + first,
        preamble.start_line + last,
    )


def _is_meta_line(line: str, meta: dict[str, str]) -> bool:
    if set(line.strip()) <= set("|-: "):
        return True  # table borders
    one = parse_header_block(line)
    return bool(one) and all(meta.get(k) == v for k, v in one.items())


def _action_items(text: str) -> list[str]:
    items = bullet_items(text)
    if items:
        return [strip_markdown(i) for i in items]
    rows = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("|")]
    out: list[str] = []
    for n, row in enumerate(rows):
        cells = [c.strip() for c in row.strip("|").split("|")]
        if n == 0 or all(set(c) <= set("-: ") for c in cells):
            continue  # the header row and the separator
        cells = [strip_markdown(c) for c in cells if c]
        if cells:
            out.append(" — ".join(cells))
    return out


# --- JSON ---------------------------------------------------------------------------------------


def _parse_json(path: str, text: str) -> tuple[list[IncidentReport], list[Skipped]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [Skipped(path, f"not valid JSON (line {exc.lineno}): {exc.msg}")]
    if isinstance(data, dict) and isinstance(data.get("incidents"), list):
        data = data["incidents"]
    items = data if isinstance(data, list) else [data]
    if not items:
        return [], [Skipped(path, "JSON holds no incident objects")]
    reports: list[IncidentReport] = []
    skipped: list[Skipped] = []
    for n, item in enumerate(items):
        where = path if len(items) == 1 else f"{path}#{n}"
        if not isinstance(item, dict):
            skipped.append(Skipped(where, f"expected a JSON object, got {type(item).__name__}"))
            continue
        meta = _canonical({header_key(str(k)): v for k, v in item.items()})
        if not meta.get("id") and not meta.get("title"):
            skipped.append(Skipped(where, "JSON object has neither an id nor a title"))
            continue
        title = strip_markdown(as_text(meta.get("title")))
        ident = _ident(meta.get("id"), title, path if len(items) == 1 else "")
        if any(r.id == ident for r in reports):
            skipped.append(Skipped(where, f"duplicate incident id {ident} in one file; first one kept"))
            continue
        report = _report(ident, _strip_id(title, ident) or ident, meta, [])
        report.sections = _json_sections(meta, item, text)
        reports.append(report)
    return reports, skipped


def _json_sections(meta: dict[str, Any], item: dict[str, Any], text: str) -> list[Section]:
    sections: list[Section] = []
    raw_keys = {header_key(str(k)): str(k) for k in item}
    for name, title in _TEXT_FIELDS:
        value = meta.get(name, item.get(raw_keys.get(name, ""), None))
        if value in (None, "", []):
            continue
        if name == "timeline":
            body = _timeline_text(value)
        elif name == "action_items":
            body = "\n".join(f"- {a}" for a in _action_list(value))
        else:
            body = as_text(value)
        if not body.strip():
            continue
        line = _json_line(text, raw_keys.get(name, name))
        sections.append(Section(title, 2, body.strip(), line, line + body.strip().count("\n")))
    return sections


def _json_line(text: str, name: str) -> int:
    match = re.search(rf'"{re.escape(name)}"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _timeline_text(value: Any) -> str:
    if not isinstance(value, list):
        return as_text(value)
    lines = []
    for entry in value:
        if isinstance(entry, dict):
            when = as_text(entry.get("time") or entry.get("at") or entry.get("timestamp"))
            what = as_text(entry.get("event") or entry.get("description") or entry.get("text"))
            lines.append(f"- {when} — {what}" if when else f"- {what}")
        else:
            lines.append(f"- {as_text(entry)}")
    return "\n".join(lines)


def _action_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return bullet_items(value) or [value.strip()]
    out: list[str] = []
    for entry in value if isinstance(value, list) else [value]:
        if isinstance(entry, dict):
            what = as_text(
                entry.get("title") or entry.get("description") or entry.get("action") or entry.get("text")
            )
            extra = [
                f"{k}: {as_text(entry[k])}"
                for k in ("owner", "ticket", "status", "due")
                if entry.get(k) not in (None, "")
            ]
            out.append(f"{what} ({', '.join(extra)})" if extra else what)
        elif entry not in (None, ""):
            out.append(as_text(entry))
    return [o for o in out if o]


# --- shared -------------------------------------------------------------------------------------


def _canonical(raw: dict[str, Any]) -> dict[str, Any]:
    """Rename field aliases to their canonical names (first alias present wins)."""
    out: dict[str, Any] = dict(raw)
    for canon, names in _ALIASES.items():
        for name in names:
            if raw.get(name) not in (None, "", []):
                out[canon] = raw[name]
                break
    return out


def _report(ident: str, title: str, meta: dict[str, Any], warnings: list[str]) -> IncidentReport:
    report = IncidentReport(id=ident, title=title, warnings=warnings)
    report.severity = _severity(meta.get("severity"))
    report.status = as_text(meta.get("status")).lower() or None
    for name in ("started_at", "ended_at", "detected_at"):
        value = meta.get(name)
        if value in (None, ""):
            continue
        iso = _time(value)
        if iso:
            setattr(report, name, iso)
        else:
            report.raw_times[name] = as_text(value)[:80]
            report.warnings.append(f"{name}: not a time graphmem can read: {as_text(value)[:80]!r}")
    if meta.get("services") not in (None, "", []):
        report.services = [strip_markdown(s) for s in as_list(meta.get("services"))]
        report.services_explicit = True
    root = meta.get("root_cause")
    report.root_cause = (as_text(root).strip() or None) if root is not None else None
    report.caused_by = _refs(meta.get("caused_by"))
    report.resolved_by = _refs(meta.get("resolved_by"))
    if meta.get("action_items") not in (None, "", []):
        report.action_items = _action_list(meta.get("action_items"))
    report.decisions = as_list(meta.get("decisions"))
    report.authors = as_list(meta.get("authors"))
    report.commander = as_text(meta.get("commander")) or None
    return report


def _refs(value: Any) -> list[str]:
    """Commit / symbol references from a field: strings, or objects with a ``sha`` or ``key``."""
    out: list[str] = []
    for item in value if isinstance(value, list) else ([value] if value else []):
        if isinstance(item, dict):
            item = item.get("sha") or item.get("commit") or item.get("key") or item.get("id")
        text = strip_markdown(as_text(item)) if item is not None else ""
        if text.startswith(("sym:", "file:")):
            out.append(text)  # a key: its qualname never holds the separators split on below
        else:
            out.extend(p for p in re.split(r"[\s,;]+", text) if p)
    return list(dict.fromkeys(out))


def _ident(value: Any, title: str, path: str) -> str:
    text = as_text(value).strip() if not isinstance(value, (bool, list, dict)) and value is not None else ""
    if text:
        if re.fullmatch(r"\d+", text):
            return f"INC-{text}"
        return _norm_id(text)
    for source in (title, PurePosixPath(path).name if path else ""):
        match = _ID_RE.search(source)
        if match:
            return _norm_id(match.group(0))
    stem = PurePosixPath(path).stem if path else ""
    return _norm_id(stem or title or "UNKNOWN")


def _norm_id(text: str) -> str:
    text = re.sub(r"^(INC)[_ ](\d)", r"\1-\2", text.strip(), flags=re.IGNORECASE)
    # Ids end up in keys: no whitespace, and nothing that would end a key with ":".
    text = re.sub(r"\s+", "-", text).strip(":-")[:120]
    return text.upper() or "UNKNOWN"


def _strip_id(title: str, ident: str) -> str:
    """"INC-042: Checkout outage" -> "Checkout outage"."""
    pattern = re.escape(ident).replace(r"\-", "[-_ ]?")
    stripped = re.sub(rf"^\s*(?:incident\s+)?{pattern}\s*[:.\-—–]?\s*", "", title, flags=re.IGNORECASE)
    return stripped.strip()


def _title_from_filename(path: str) -> str:
    stem = PurePosixPath(path).stem
    stem = _ID_RE.sub("", stem)
    stem = re.sub(r"^\d{4}-\d{2}-\d{2}", "", stem)
    words = " ".join(stem.replace("_", " ").replace("-", " ").split())
    return words[:1].upper() + words[1:]


def _severity(value: Any) -> str | None:
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return f"SEV{value}"
    text = strip_markdown(str(value)).strip()
    match = re.fullmatch(r"(?i)sev(?:erity)?[-_ ]?(\d)(?:\b.*)?", text)
    if match:
        return f"SEV{match.group(1)}"
    match = re.fullmatch(r"(?i)p[-_ ]?(\d)(?:\b.*)?", text)
    if match:
        return f"P{match.group(1)}"
    return text[:40] or None


def _time(value: Any) -> str | None:
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, date):
        return to_iso(datetime(value.year, value.month, value.day))
    text = strip_markdown(as_text(value))
    text = re.sub(r"\s*\(?\bUTC\b\)?\s*$", "", text, flags=re.IGNORECASE)
    text = re.sub(r"^(\d{4}-\d{2}-\d{2})[ T]+(\d{1,2}:\d{2})", r"\1T\2", text)
    text = re.sub(r"T(\d):", r"T0\1:", text)
    try:
        return to_iso(text)
    except ModelError:
        return None


def _minutes(start: str | None, end: str | None) -> int | None:
    if not start or not end:
        return None
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
    delta = datetime.strptime(end, fmt) - datetime.strptime(start, fmt)
    minutes = int(delta.total_seconds() // 60)
    return minutes if minutes >= 0 else None


def _code_or_service(item: str) -> str | None:
    item = item.strip().strip("`")
    if not item:
        return None
    if item.startswith(("sym:", "file:")):
        return item
    if item.startswith("service:"):
        item = item[len("service:") :]
    name = item.split("(")[0].strip()
    return service_key(name) if _SERVICE_NAME.fullmatch(name) else None


def _commit_or_code(ref: str) -> str | None:
    if _FULL_SHA.match(ref):
        return commit_key(ref)
    if ref.startswith("commit:") and _FULL_SHA.match(ref[7:]):
        return commit_key(ref[7:])
    if ref.startswith(("sym:", "file:")):
        return ref
    return None


def _is(section: Section, names: tuple[str, ...]) -> bool:
    return any(section.key == n or section.key.startswith(n + "_") for n in names)


def _first(sections: list[Section], names: tuple[str, ...]) -> Section | None:
    return next((s for s in sections if _is(s, names)), None)


def _clean(text: str | None, limit: int) -> str | None:
    if not text:
        return None
    return redact(text.strip())[0][:limit]


__all__ = [
    "CHUNK_KIND",
    "EXTRACTOR",
    "INCIDENT_DIRS",
    "IncidentReport",
    "VERSION",
    "extract_incident",
    "extract_incident_file",
    "is_incident_report",
    "parse_incidents",
]
