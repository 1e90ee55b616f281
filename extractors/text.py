"""Shared helpers for Markdown documents: front matter, header blocks, sections, chunking, references.

Decision records and incident postmortems are both "a title, some metadata, then sections"; this
module parses that shape once, keeping 1-based line numbers so chunks can point back at the source.
It also holds :class:`Vocabulary`, the names a document may mention (services, code symbols,
teams, technologies), and the matcher that finds them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from extractors.base import Extraction, Skipped
from extractors.secrets import redact as redact_text
from graphmem.model import Chunk, Provenance, entity_key, normalise_name, service_key

log = logging.getLogger(__name__)

MAX_CHUNK_CHARS = 1000

# --- reading ------------------------------------------------------------------------------------


def read_text(path: str | Path) -> str:
    """A file's text as UTF-8; undecodable bytes become U+FFFD instead of failing the ingest."""
    data = Path(path).read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


# --- front matter -------------------------------------------------------------------------------


@dataclass(slots=True)
class FrontMatter:
    """A document split into its YAML front matter and body.

    ``body_line`` is the 1-based line number of the body's first line in the original text.
    ``error`` is set when a front matter block was present but was not a YAML mapping; ``data``
    then holds whatever ``key: value`` lines could be salvaged from it.
    """

    data: dict[str, Any]
    body: str
    body_line: int = 1
    present: bool = False
    error: str | None = None


_FENCE_OPEN = re.compile(r"\A---[ \t]*\n")
_FENCE_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)
_SIMPLE_KV = re.compile(r"^([A-Za-z_][\w -]{0,40}?)\s*:\s*(.*?)\s*$")


def _yaml_loader() -> type:
    """A safe YAML loader that keeps zero-padded numbers ("0010") as strings.

    YAML 1.1 reads ``0010`` as octal 8; ADR numbers and incident ids are zero-padded decimals.
    """
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    resolvers = {
        ch: [(tag, rx) for tag, rx in items if tag != "tag:yaml.org,2002:int"]
        for ch, items in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _Loader.yaml_implicit_resolvers = resolvers
    _Loader.add_implicit_resolver(
        "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*))$"), list("-+0123456789")
    )
    return _Loader


_LOADER: type | None = None


def load_yaml(text: str) -> Any:
    """Parse YAML with the project's safe loader (raises ``yaml.YAMLError`` on bad input)."""
    import yaml

    global _LOADER
    if _LOADER is None:
        _LOADER = _yaml_loader()
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader subclass


def normalise_text(text: str) -> str:
    """Text as the parsers expect it: ``\n`` line ends, no byte-order mark."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_front_matter(text: str) -> FrontMatter:
    """Split ``---``-fenced YAML front matter off a document. Never raises on bad YAML."""
    opening = _FENCE_OPEN.match(text)
    if not opening:
        return FrontMatter(data={}, body=text)
    closing = _FENCE_CLOSE.search(text, opening.end())
    if not closing:
        # An opening fence with no closing one is a horizontal rule, not front matter.
        return FrontMatter(data={}, body=text)
    raw = text[opening.end() : closing.start()]
    rest = text[closing.end() :]
    if rest.startswith("\n"):
        rest = rest[1:]
    body_line = text.count("\n", 0, closing.end()) + 2
    error: str | None = None
    data: dict[str, Any] = {}
    try:
        import yaml

        try:
            loaded = load_yaml(raw)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 2}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            error = f"front matter is not valid YAML{where}: {problem}"
            loaded = None
    except ImportError:  # pragma: no cover - PyYAML is a declared dependency
        loaded, error = None, "PyYAML is not installed; front matter read as plain key: value lines"
    if loaded is None and error is None:
        loaded = {}
    if isinstance(loaded, dict):
        data = {str(k).strip().lower(): v for k, v in loaded.items()}
    else:
        if error is None:
            error = f"front matter is a {type(loaded).__name__}, not a mapping"
        data = _salvage(raw)
    return FrontMatter(data=data, body=rest, body_line=body_line, present=True, error=error)


def _salvage(raw: str) -> dict[str, Any]:
    """``key: value`` pairs from front matter YAML could not read, so one bad line costs little."""
    out: dict[str, Any] = {}
    for line in raw.splitlines():
        match = _SIMPLE_KV.match(line)
        if match and match.group(2):
            value = match.group(2).strip().strip("[]{}").strip().strip("'\"")
            out[match.group(1).strip().lower()] = value
    return out


# --- header blocks ------------------------------------------------------------------------------

# "Status: accepted", "* Deciders: a, b", "**Severity:** SEV-2", "- **Date**: 2024-01-02",
# "| Severity | SEV2 |"
_HEADER_LINE = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?([A-Za-z][A-Za-z0-9 _/()-]{0,40}?)(?::(?:\*\*|__)|(?:\*\*|__):|:)"
    r"[ \t]*(.*?)\s*$"
)
_TABLE_ROW = re.compile(r"^\s*\|\s*\**([A-Za-z][A-Za-z0-9 _/()-]{0,40}?)\**\s*\|\s*(.*?)\s*\|\s*$")


# Words that mark "Something is this: ..." as a sentence rather than a metadata key.
_PROSE_WORDS = frozenset(
    "is are was were be been this that these we i it they he she you there here has have had "
    "not but because so if when which what who why how our my your".split()
)


def header_key(name: str) -> str:
    """``"Root Cause"`` -> ``"root_cause"``: the form metadata keys are compared in."""
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def parse_header_block(text: str) -> dict[str, str]:
    """``Key: value`` metadata lines (plain, bulleted, bold or as a two-column table).

    Only lines that look like metadata count; prose lines with a colon usually have long keys
    and are ignored by the 40-character key limit.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        match = _HEADER_LINE.match(line) or _TABLE_ROW.match(line)
        if not match:
            continue
        key, value = header_key(match.group(1)), match.group(2).strip()
        words = key.split("_")
        if len(words) > 4 or _PROSE_WORDS.intersection(words):
            continue
        value = value.strip("*_ ").strip()
        if key and value and not set(value) <= set("-| :") and key not in out:
            out[key] = value
    return out


# --- sections -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Section:
    """A heading and the text under it (up to the next heading of the same or a higher level)."""

    title: str
    level: int
    text: str
    start_line: int
    end_line: int

    @property
    def key(self) -> str:
        return header_key(self.title)


@dataclass(slots=True)
class MarkdownDoc:
    """A Markdown body: its H1 title (if any), the text before the first section, the sections."""

    title: str | None
    title_line: int | None
    preamble: Section | None
    sections: list[Section] = field(default_factory=list)

    def section(self, *names: str, exact: bool = False) -> Section | None:
        """The section titled by the earliest of ``names`` that matches (normalised); without
        ``exact``, a title that starts with the name also counts ("root_cause_analysis")."""
        wanted = [header_key(n) for n in names]
        for name in wanted:
            for sec in self.sections:
                if sec.key == name:
                    return sec
        if exact:
            return None
        for name in wanted:
            for sec in self.sections:
                if sec.key.startswith(name + "_"):
                    return sec
        return None


_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```+|~~~+)")


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """``(index, level, text)`` of ATX headings outside fenced code blocks."""
    out: list[tuple[int, int, str]] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        fmatch = _FENCE.match(line)
        if fmatch:
            marker = fmatch.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        hmatch = _ATX.match(line)
        if hmatch:
            out.append((i, len(hmatch.group(1)), hmatch.group(2).strip()))
    return out


def parse_markdown(body: str, first_line: int = 1) -> MarkdownDoc:
    """Split a Markdown body into title, preamble and top-level sections.

    The title is the first level-1 heading. Sections split at the shallowest heading level among
    the other headings, so deeper headings (MADR's ``### Consequences``) stay inside their parent.
    ``first_line`` is the line number ``body`` starts at in the original file.
    """
    lines = body.split("\n")
    heads = _headings(lines)
    title: str | None = None
    title_idx: int | None = None
    for idx, level, text in heads:
        if level == 1:
            title, title_idx = text, idx
            break
    rest = [h for h in heads if h[0] != title_idx]
    # Headings above the title (rare) are ignored as sections; they belong to nothing.
    if title_idx is not None:
        rest = [h for h in rest if h[0] > title_idx]
    split_level = min((lvl for _, lvl, _ in rest), default=None)
    starts = [h for h in rest if h[1] == split_level] if split_level else []

    def make(name: str, level: int, lo: int, hi: int) -> Section | None:
        chunk = lines[lo:hi]
        while chunk and not chunk[0].strip():
            chunk, lo = chunk[1:], lo + 1
        while chunk and not chunk[-1].strip():
            chunk = chunk[:-1]
        if not chunk:
            return None
        return Section(
            title=name,
            level=level,
            text="\n".join(chunk),
            start_line=first_line + lo,
            end_line=first_line + lo + len(chunk) - 1,
        )

    pre_lo = title_idx + 1 if title_idx is not None else 0
    pre_hi = starts[0][0] if starts else len(lines)
    preamble = make("", 0, pre_lo, pre_hi)
    sections: list[Section] = []
    for n, (idx, level, text) in enumerate(starts):
        hi = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        sec = make(text, level, idx + 1, hi)
        if sec is None:
            sec = Section(text, level, "", first_line + idx, first_line + idx)
        sections.append(sec)
    return MarkdownDoc(
        title=title,
        title_line=first_line + title_idx if title_idx is not None else None,
        preamble=preamble,
        sections=sections,
    )


# --- lists and values ---------------------------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*\S)\s*$")


def bullet_items(text: str) -> list[str]:
    """Top-level list items of a Markdown list (checkboxes and numbering removed)."""
    items: list[str] = []
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        match = _BULLET.match(line)
        if match and indent < 2:
            items.append(match.group(1))
        elif items and line.strip() and indent >= 2 and not match:
            items[-1] += " " + line.strip()  # a wrapped continuation line
    return items


def as_list(value: Any) -> list[str]:
    """A front-matter value as a list of non-empty strings ("a, b" and ["a", "b"] alike)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        out: list[str] = []
        for item in value:
            out.extend(as_list(item) if isinstance(item, (list, tuple)) else [_scalar(item)])
        return [s for s in out if s]
    if isinstance(value, Mapping):
        return [str(k).strip() for k in value if str(k).strip()]  # {name: details} lists names
    text = _scalar(value)
    parts = re.split(r"\s*[,;]\s*|\s+and\s+", text) if text else []
    parts = [p.strip().strip("'\"").strip() for p in parts]
    return [p for p in parts if p]


def _scalar(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return str(value).strip()


def as_text(value: Any) -> str:
    """A front-matter value as one string (lists joined by newlines)."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "\n".join(as_text(v) for v in value)
    return _scalar(value)


def strip_markdown(text: str) -> str:
    """Plain text of a short Markdown span (links to their text, emphasis and code marks off)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("`", "")
    # Emphasis marks only where they wrap words, so snake_case names keep their underscores.
    text = re.sub(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", r"\2", text)
    text = re.sub(r"(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\1(?![\w*])", r"\2", text)
    return " ".join(text.split())


# --- chunking -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Piece:
    """A slice of a section's text with its line span."""

    text: str
    start_line: int
    end_line: int


def split_paragraphs(text: str, start_line: int, max_chars: int) -> list[Piece]:
    """Split text into pieces of at most ``max_chars`` at paragraph, then line, then word breaks.

    Secrets are redacted first, line count kept: a key block with a blank line in it (PGP armour)
    or longer than a piece, or a sentence cut before its password, would escape the redaction of
    each piece on its own.
    """
    text = redact_text(text, keep_lines=True)[0]
    lines = text.split("\n")
    paras: list[tuple[list[str], int]] = []
    cur: list[str] = []
    cur_start = start_line
    for i, line in enumerate(lines):
        if line.strip():
            if not cur:
                cur_start = start_line + i
            cur.append(line)
        elif cur:
            paras.append((cur, cur_start))
            cur = []
    if cur:
        paras.append((cur, cur_start))

    units: list[Piece] = []
    for para, first in paras:
        ptext = "\n".join(para)
        if len(ptext) <= max_chars:
            units.append(Piece(ptext, first, first + len(para) - 1))
            continue
        for j, line in enumerate(para):  # a long paragraph: fall back to lines, then words
            for part in _hard_split(line, max_chars):
                units.append(Piece(part, first + j, first + j))

    pieces: list[Piece] = []
    for unit in units:
        if pieces and len(pieces[-1].text) + 2 + len(unit.text) <= max_chars:
            last = pieces[-1]
            # Lines of one split paragraph rejoin with a newline, paragraphs with a blank line.
            sep = "\n" if unit.start_line <= last.end_line + 1 else "\n\n"
            pieces[-1] = Piece(last.text + sep + unit.text, last.start_line, unit.end_line)
        else:
            pieces.append(unit)
    return pieces


def _hard_split(line: str, max_chars: int) -> list[str]:
    if len(line) <= max_chars:
        return [line]
    out: list[str] = []
    rest = line
    while len(rest) > max_chars:
        cut = rest.rfind(" ", 0, max_chars)
        if cut < max_chars // 2:
            cut = max_chars
        out.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        out.append(rest)
    return out


def section_chunks(
    node_key: str,
    prefix: str,
    sections: Iterable[Section],
    kind: str,
    provenance: Provenance,
    *,
    max_chars: int = MAX_CHUNK_CHARS,
    redact: bool = True,
) -> list[Chunk]:
    """One chunk per section (more for long ones), each text headed ``"<prefix> — <section>"``.

    The heading repeats in every piece so each chunk stands alone for BM25 and embeddings.
    """
    chunks: list[Chunk] = []
    for sec in sections:
        if not sec.text.strip():
            continue
        head = f"{prefix} — {sec.title}" if sec.title else prefix
        budget = max(200, max_chars - len(head) - 2)
        for piece in split_paragraphs(sec.text, sec.start_line, budget):
            body = redact_text(piece.text)[0] if redact else piece.text
            chunks.append(
                Chunk(
                    node_key=node_key,
                    ordinal=len(chunks),
                    text=f"{head}\n\n{body}",
                    kind=kind,
                    provenance=provenance,
                    start_line=piece.start_line,
                    end_line=piece.end_line,
                )
            )
    return chunks


# --- references ---------------------------------------------------------------------------------

_ADR_REF = re.compile(r"(?<![\w-])ADR[-_ #]?0*(\d{1,5})(?!\w)", re.IGNORECASE)
# adr-tools links: "[7. Use Y](0007-use-y.md)"
_ADR_LINK = re.compile(r"\]\((?:[^)\s]*/)?0*(\d{1,5})-[^)\s]*\.md\)")
_INCIDENT_REF = re.compile(r"(?<![\w-])INC-\d+(?:-\d+)*(?![\w-])", re.IGNORECASE)
_SYM_REF = re.compile(r"\bsym:[\w./-]+::[A-Za-z_][\w.]*")
_FULL_SHA = re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{40}(?![0-9a-fA-F])")
_SHORT_SHA_CTX = re.compile(
    r"\b(?:commit|sha|revert(?:ed|s)?|cherry-pick(?:ed)?|PR merged as)\s*:?\s*`?([0-9a-f]{7,39})\b",
    re.IGNORECASE,
)


def adr_refs(text: str, *, links: bool = False) -> list[int]:
    """ADR numbers named in text ("ADR-5", "adr 0005"; with ``links`` also ``0005-x.md`` links)."""
    seen: dict[int, None] = {}
    for match in _ADR_REF.finditer(text):
        seen[int(match.group(1))] = None
    if links:
        for match in _ADR_LINK.finditer(text):
            seen[int(match.group(1))] = None
    return list(seen)


def incident_refs(text: str) -> list[str]:
    """Incident ids named in text, upper case, in order of first mention."""
    return list(dict.fromkeys(m.group(0).upper() for m in _INCIDENT_REF.finditer(text)))


def symbol_key_refs(text: str) -> list[str]:
    """Literal ``sym:path::qualname`` keys written in text."""
    return list(dict.fromkeys(m.group(0).rstrip(".") for m in _SYM_REF.finditer(text)))


def full_shas(text: str) -> list[str]:
    """40-hex commit shas in text."""
    return list(dict.fromkeys(m.group(0) for m in _FULL_SHA.finditer(text)))


def short_sha_refs(text: str) -> list[str]:
    """Abbreviated shas introduced by "commit"/"sha"/"revert" (bare short hex is too ambiguous)."""
    return list(dict.fromkeys(m.group(1).lower() for m in _SHORT_SHA_CTX.finditer(text)))


# --- vocabulary ---------------------------------------------------------------------------------

# (canonical name, other spellings, case sensitive). Case-sensitive entries are ordinary English
# words in lower case ("react", "spark"), so only their proper-noun spelling counts.
TECHNOLOGIES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("PostgreSQL", ("Postgres",), False),
    ("MySQL", ("MariaDB",), False),
    ("SQLite", (), False),
    ("Redis", (), False),
    ("Memcached", (), False),
    ("Kafka", ("Apache Kafka",), False),
    ("RabbitMQ", (), False),
    ("NATS", (), True),
    ("Pulsar", ("Apache Pulsar",), True),
    ("Amazon SQS", ("SQS",), False),
    ("Amazon SNS", ("SNS",), False),
    ("Kinesis", (), False),
    ("Amazon S3", ("S3",), True),
    ("DynamoDB", (), False),
    ("MongoDB", ("Mongo",), False),
    ("Cassandra", (), False),
    ("Elasticsearch", ("Elastic Search",), False),
    ("OpenSearch", (), False),
    ("ClickHouse", (), False),
    ("BigQuery", (), False),
    ("Snowflake", (), True),
    ("Redshift", (), False),
    ("CockroachDB", (), False),
    ("Neo4j", (), False),
    ("etcd", (), False),
    ("ZooKeeper", (), False),
    ("Consul", (), True),
    ("HashiCorp Vault", (), False),
    ("gRPC", (), False),
    ("GraphQL", (), False),
    ("Protocol Buffers", ("Protobuf", "protobufs"), False),
    ("Avro", (), True),
    ("OpenAPI", ("Swagger",), False),
    ("WebSocket", ("WebSockets",), False),
    ("Kubernetes", ("k8s",), False),
    ("Docker", (), False),
    ("Helm", (), True),
    ("Terraform", (), False),
    ("Istio", (), False),
    ("Envoy", (), True),
    ("Linkerd", (), False),
    ("Nginx", (), False),
    ("HAProxy", (), False),
    ("Prometheus", (), False),
    ("Grafana", (), False),
    ("OpenTelemetry", ("OTel",), False),
    ("Jaeger", (), False),
    ("Datadog", (), False),
    ("Sentry", (), True),
    ("PagerDuty", (), False),
    ("Celery", (), False),
    ("Airflow", (), False),
    ("Spark", ("Apache Spark",), True),
    ("Flink", (), False),
    ("Debezium", (), False),
    ("Django", (), False),
    ("Flask", (), True),
    ("FastAPI", (), False),
    ("SQLAlchemy", (), False),
    ("Spring Boot", (), False),
    ("React", (), True),
    ("Next.js", ("NextJS",), False),
    ("Node.js", ("NodeJS",), False),
    ("TypeScript", (), False),
    ("Python", (), True),
    ("Golang", (), False),
    ("Rust", (), True),
    ("Java", (), True),
    ("Kotlin", (), False),
    ("OAuth", ("OAuth2", "OAuth 2.0"), False),
    ("OpenID Connect", ("OIDC",), False),
    ("JWT", ("JSON Web Token", "JSON Web Tokens"), False),
    ("Stripe", (), True),
    ("Keycloak", (), False),
    ("Auth0", (), False),
    ("GitHub Actions", (), False),
    ("Argo CD", ("ArgoCD",), False),
    ("Jenkins", (), False),
    ("AWS Lambda", (), False),
)


@dataclass(slots=True)
class Mentions:
    """What a text names, as graph keys."""

    services: list[str] = field(default_factory=list)
    symbols: list[tuple[str, float]] = field(default_factory=list)  # (key, confidence)
    technologies: list[tuple[str, str]] = field(default_factory=list)  # (entity key, name)


def _name_pattern(names: Iterable[str]) -> str:
    ordered = sorted({n for n in names if n}, key=len, reverse=True)
    return "|".join(re.escape(n) for n in ordered)


class Vocabulary:
    """Names a document may mention: services, code symbols (by short name), teams, technologies.

    ``symbols`` maps a name as written in prose ("InvoiceHandler", "InvoiceHandler.post",
    "charge_card") to the symbol keys it may mean; :meth:`from_symbol_keys` builds it from keys.
    """

    def __init__(
        self,
        services: Iterable[str] = (),
        symbols: Mapping[str, Iterable[str]] | None = None,
        teams: Iterable[str] = (),
        technologies: Iterable[tuple[str, tuple[str, ...], bool]] = TECHNOLOGIES,
        *,
        max_symbol_candidates: int = 3,
    ) -> None:
        self.services = sorted({s.strip() for s in services if s and s.strip()})
        self.symbols: dict[str, list[str]] = {
            k: sorted(set(v)) for k, v in (symbols or {}).items() if k
        }
        self.teams = {t.strip().lstrip("@").lower(): t.strip().lstrip("@") for t in teams if t}
        self.max_symbol_candidates = max_symbol_candidates
        self._service_rx = (
            re.compile(rf"(?<![\w-])({_name_pattern(self.services)})(?![\w-])", re.IGNORECASE)
            if self.services
            else None
        )
        self._tech: dict[str, str] = {}
        ci: list[str] = []
        cs: list[str] = []
        for canonical, aliases, case_sensitive in technologies:
            for spelling in (canonical, *aliases):
                self._tech[spelling if case_sensitive else spelling.casefold()] = canonical
                (cs if case_sensitive else ci).append(spelling)
        self._tech_ci = re.compile(rf"(?<![\w.-])({_name_pattern(ci)})(?![\w-])", re.IGNORECASE) if ci else None
        self._tech_cs = re.compile(rf"(?<![\w.-])({_name_pattern(cs)})(?![\w-])") if cs else None

    @classmethod
    def from_symbol_keys(
        cls, services: Iterable[str] = (), symbol_keys: Iterable[str] = (), teams: Iterable[str] = (), **kw: Any
    ) -> Vocabulary:
        """Index symbol keys by their short name and by every dotted suffix of their qualname."""
        index: dict[str, set[str]] = {}
        for key in symbol_keys:
            if not key.startswith("sym:") or "::" not in key:
                continue
            qual = key.partition("::")[2]
            parts = qual.split(".")
            for i in range(len(parts)):
                index.setdefault(".".join(parts[i:]), set()).add(key)
        return cls(services, {k: sorted(v) for k, v in index.items()}, teams, **kw)

    def team(self, name: str) -> str | None:
        """The declared spelling of a team name, or None if the name is not a known team."""
        return self.teams.get(name.strip().lstrip("@").lower())

    def find(self, text: str) -> Mentions:
        """Services, symbols and technologies named in ``text`` (each once, in order)."""
        out = Mentions()
        if self._service_rx is not None:
            canon = {s.lower(): s for s in self.services}
            seen: dict[str, None] = {}
            for match in self._service_rx.finditer(text):
                seen[service_key(canon[match.group(1).lower()])] = None
            out.services = list(seen)
        out.symbols = self._find_symbols(text)
        techs: dict[str, str] = {}
        for rx, fold in ((self._tech_ci, True), (self._tech_cs, False)):
            if rx is None:
                continue
            for match in rx.finditer(text):
                spelled = match.group(1)
                canonical = self._tech.get(spelled.casefold() if fold else spelled)
                if canonical:
                    techs.setdefault(entity_key("technology", canonical), canonical)
        out.technologies = list(techs.items())
        return out

    _IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")

    def _find_symbols(self, text: str) -> list[tuple[str, float]]:
        if not self.symbols:
            return []
        found: dict[str, float] = {}
        for match in self._IDENT.finditer(text):
            name = match.group(0)
            keys = self.symbols.get(name)
            if not keys or len(keys) > self.max_symbol_candidates:
                continue
            if not self._looks_like_code(name, text, match.start(), match.end()):
                continue
            conf = 1.0 / len(keys)
            for key in keys:
                found[key] = max(found.get(key, 0.0), conf)
        return list(found.items())

    @staticmethod
    def _looks_like_code(name: str, text: str, start: int, end: int) -> bool:
        """Only identifier-shaped words count: prose words like "run" or "Invoice" would be noise."""
        if "." in name or "_" in name:
            return True
        if any(c.isupper() for c in name[1:]) and any(c.islower() for c in name):
            return True  # CamelCase / mixedCase
        before = text[start - 1] if start > 0 else ""
        after = text[end : end + 1]
        return before == "`" or after in ("`", "(")


def service_names_from_keys(keys: Iterable[str]) -> list[str]:
    """``service:billing`` -> ``billing``."""
    return [k.partition(":")[2] for k in keys if k.startswith("service:")]


__all__ = [
    "FrontMatter",
    "MAX_CHUNK_CHARS",
    "MarkdownDoc",
    "Mentions",
    "Piece",
    "Section",
    "TECHNOLOGIES",
    "Vocabulary",
    "adr_refs",
    "as_list",
    "as_text",
    "bullet_items",
    "full_shas",
    "header_key",
    "incident_refs",
    "load_yaml",
    "normalise_name",
    "normalise_text",
    "parse_header_block",
    "parse_markdown",
    "read_text",
    "section_chunks",
    "short_sha_refs",
    "split_front_matter",
    "split_paragraphs",
    "strip_markdown",
    "symbol_key_refs",
]


def extract_file(extract: Callable[..., Extraction], root: str | Path, path: str, **options: Any) -> Extraction:
    """``extract(path, text, **options)`` on the file ``root/path``; an unreadable file is reported."""
    try:
        text = read_text(Path(root) / path)
    except OSError as exc:
        return Extraction(skipped=[Skipped(path, f"cannot read: {exc.strerror or exc}")])
    return extract(path, text, **options)
