"""Documentation -> ``doc:<path>`` nodes, one chunk per section, mentions, and conventions.

READMEs, guides under ``docs/``, runbooks, CONTRIBUTING, CHANGELOG, meeting notes and any other
Markdown, reStructuredText, AsciiDoc or plain-text file become a document node (decision records
and postmortems keep their own extractors). Each format has a parser that finds the headings and
keeps 1-based line numbers:

- Markdown: CommonMark block structure by ``markdown-it-py`` (ATX and setext headings; fenced,
  indented and quoted code are never headings), YAML (``---``) or TOML (``+++``) front matter;
- reStructuredText: titles under (and over) lines of any punctuation character, levels in the order
  the styles first appear, as docutils assigns them; directives and literal blocks stay text;
- AsciiDoc: ``=``-prefixed titles outside delimited blocks;
- plain text: one section, split at paragraphs.

Each section becomes a chunk headed by its heading path ("Notifications runbook › Restarting the
worker"), so that every chunk stands alone for BM25 and embeddings; long sections are split at
paragraphs under a size cap, and a tiny section joins its subsection or its predecessor.

The document ``MENTIONS`` what its text names: services, symbols and technologies (the project's
:class:`~extractors.text.Vocabulary`), files (paths, relative links), decision records (ADR-5),
incidents (INC-042), tickets, people (e-mail addresses, @handles) and teams.

Conventions are recognised without any list of phrases from one repository: settings files of
formatters and linters (``.editorconfig``, ``[tool.ruff]`` in ``pyproject.toml``, ``.eslintrc``...)
and convention documents (CONVENTIONS.md, STYLE.md...) are conventions as a whole; in other
documents a section is one when its heading names a convention topic (:data:`CONVENTION_TOPICS`,
extractor configuration) in a place where conventions are written (a CONTRIBUTING file, or under a
heading such as "Guidelines"). :func:`conventions` lists them from a store.

Redaction of secrets and dating from the history are left to the ingest pipeline, which applies
both to every extractor's output alike.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from extractors.base import Extraction, Skipped
from extractors.decisions import is_decision_record
from extractors.git import find_references
from extractors.incidents import is_incident_report
from extractors.text import (
    MAX_CHUNK_CHARS,
    Vocabulary,
    adr_refs,
    as_list,
    as_text,
    incident_refs,
    split_front_matter,
    split_paragraphs,
    strip_markdown,
    symbol_key_refs,
)
from graphmem.model import (
    Chunk,
    Node,
    NodeKind,
    Provenance,
    Relationship,
    RelType,
    adr_key,
    doc_key,
    incident_key,
    person_key,
)

EXTRACTOR = "docs"
VERSION = "1"
CHUNK_KIND = "document"
CONVENTION_CHUNK_KIND = "convention"
HEADING_SEP = " › "

# A longer document is read up to here (the ingest policy already skips files over 1 MiB by default).
MAX_DOC_CHARS = 1_000_000
# Past this many chunks a document's remaining sections are left out (each chunk is embedded).
MAX_CHUNKS = 400
# A section shorter than this joins its first subsection, or the chunk before it.
TINY_SECTION_CHARS = 160
# Share of control characters past which decoded text is binary junk, not a document.
MAX_CONTROL_SHARE = 0.02
MAX_HEADINGS_PROP = 300

# --- which files are documents -----------------------------------------------------------------

PROSE_FORMATS: dict[str, str] = {
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown", ".mkd": "markdown",
    ".rst": "rst", ".rest": "rst",
    ".adoc": "asciidoc", ".asciidoc": "asciidoc",
    ".txt": "text", ".text": "text",
}
# Documents often written without an extension (read as plain text).
BARE_DOCUMENT_NAMES = frozenset({
    "readme", "changelog", "changes", "history", "news", "contributing", "conventions", "hacking",
    "runbook", "authors", "maintainers",
})
# Text files that are legal boilerplate or machine input rather than documentation.
NOT_DOCUMENT_STEMS = frozenset({
    "license", "licence", "copying", "copyright", "notice", "patents", "unlicense",
    "cmakelists", "robots", "requirements", "constraints", "dependency_links", "top_level",
    "sources", "entry_points", "not-zip-safe", "pip-delete-this-directory",
})
_NOT_DOCUMENT_PREFIXES = ("license", "licence", "copying", "requirements", "constraints")

# doc_type from the file name and its folders, first match wins.
_DOC_TYPE_NAMES: tuple[tuple[str, frozenset[str]], ...] = (
    ("readme", frozenset({"readme"})),
    ("changelog", frozenset({"changelog", "changes", "history", "news", "release-notes", "release_notes",
                             "releasenotes", "releases"})),
    ("contributing", frozenset({"contributing", "contribute", "hacking", "development", "developing"})),
    ("convention", frozenset({"conventions", "convention", "style", "styleguide", "style-guide", "style_guide",
                              "coding-style", "coding_style", "code-style", "code_style", "codingstyle",
                              "coding-standards", "coding_standards", "guidelines", "standards"})),
    ("runbook", frozenset({"runbook", "runbooks", "playbook", "playbooks", "oncall", "on-call", "operations",
                           "ops", "sop", "sops"})),
    ("notes", frozenset({"meeting", "meetings", "notes", "minutes", "meeting-notes", "meeting_notes", "retro",
                         "retros", "retrospective", "standup", "standups"})),
)

# Settings files of formatters and linters: base-name glob -> (tool, convention topic). Extractor
# configuration: add a tool by adding a line.
LINTER_FILES: tuple[tuple[str, str, str], ...] = (
    (".editorconfig", "EditorConfig", "formatting"),
    (".eslintrc", "ESLint", "code style"), (".eslintrc.*", "ESLint", "code style"),
    ("eslint.config.*", "ESLint", "code style"),
    (".prettierrc", "Prettier", "formatting"), (".prettierrc.*", "Prettier", "formatting"),
    ("prettier.config.*", "Prettier", "formatting"),
    (".golangci.yml", "golangci-lint", "code style"), (".golangci.yaml", "golangci-lint", "code style"),
    (".golangci.toml", "golangci-lint", "code style"),
    ("checkstyle.xml", "Checkstyle", "code style"), ("checkstyle-*.xml", "Checkstyle", "code style"),
    (".flake8", "flake8", "code style"), (".pylintrc", "pylint", "code style"), ("pylintrc", "pylint", "code style"),
    ("ruff.toml", "ruff", "code style"), (".ruff.toml", "ruff", "code style"),
    (".isort.cfg", "isort", "imports"), ("mypy.ini", "mypy", "typing"), (".mypy.ini", "mypy", "typing"),
    (".pydocstyle", "pydocstyle", "documentation"),
    (".rubocop.yml", "RuboCop", "code style"),
    ("rustfmt.toml", "rustfmt", "formatting"), (".rustfmt.toml", "rustfmt", "formatting"),
    ("clippy.toml", "Clippy", "code style"), (".clippy.toml", "Clippy", "code style"),
    (".clang-format", "clang-format", "formatting"), (".clang-tidy", "clang-tidy", "code style"),
    (".stylelintrc", "stylelint", "code style"), (".stylelintrc.*", "stylelint", "code style"),
    (".markdownlint.*", "markdownlint", "documentation"),
    ("biome.json", "Biome", "code style"), ("biome.jsonc", "Biome", "code style"),
    (".jshintrc", "JSHint", "code style"), ("tslint.json", "TSLint", "code style"),
    (".swiftlint.yml", "SwiftLint", "code style"), (".scalafmt.conf", "scalafmt", "formatting"),
)
# Tables of shared settings files that configure a linter or formatter: ``[tool.<name>...]`` in
# pyproject.toml, ``[<name>...]`` in setup.cfg and tox.ini -> (tool, convention topic).
LINTER_SECTIONS: dict[str, tuple[str, str]] = {
    "ruff": ("ruff", "code style"), "flake8": ("flake8", "code style"), "pylint": ("pylint", "code style"),
    "pycodestyle": ("pycodestyle", "code style"), "pep8": ("pycodestyle", "code style"),
    "black": ("black", "formatting"), "yapf": ("yapf", "formatting"), "autopep8": ("autopep8", "formatting"),
    "isort": ("isort", "imports"), "mypy": ("mypy", "typing"), "pyright": ("pyright", "typing"),
    "pydocstyle": ("pydocstyle", "documentation"),
}
SHARED_SETTINGS_FILES: dict[str, str] = {"pyproject.toml": "toml", "setup.cfg": "ini", "tox.ini": "ini"}

# --- convention topics (configuration of the extractor) ----------------------------------------

# What a heading says a convention is about: topic -> the words or phrases that name it. Intrinsic
# topics are conventions wherever a heading names them ("Commit messages", "Code style"); the others
# only where conventions are written (a convention or contributing document, or under a heading
# with a marker word), since "Testing" in a README usually says how to run the tests.
CONVENTION_TOPICS: dict[str, tuple[str, ...]] = {
    "code style": ("code style", "coding style", "style guide", "lint", "linting", "linter", "linters"),
    "formatting": ("formatting", "formatter", "indentation", "whitespace", "line length"),
    "naming": ("naming",),
    "commit messages": ("commit messages", "commit message", "commits"),
    "code review": ("code review", "code reviews", "review", "reviews", "pull requests", "pull request",
                    "merge requests"),
    "logging": ("logging", "logs", "log messages", "log levels"),
    "error handling": ("error handling", "errors", "error", "exceptions", "exception handling"),
    "testing": ("testing", "tests", "test"),
    "documentation": ("documentation", "docstrings", "comments"),
    "typing": ("typing", "type hints", "type annotations", "types"),
    "imports": ("imports",),
    "dependencies": ("dependencies",),
    "branching": ("branching", "branches", "branch names"),
    "security": ("security", "secrets"),
    "api design": ("api design", "api conventions"),
}
# "Formatting" or "Naming" in a library's guide are as often about what the library formats or names.
INTRINSIC_TOPICS = frozenset({"code style", "commit messages", "code review"})
# Heading words that mark what is under them as conventions ("Coding guidelines", "Conventions").
CONVENTION_MARKERS: tuple[str, ...] = (
    "conventions", "convention", "guidelines", "guideline", "standards", "best practices", "style guide",
    "code style", "coding style", "dos and don'ts",
)
# Document types whose sections may be conventions (a changelog's "Documentation" is a release note).
_CONVENTION_DOC_TYPES = frozenset({"convention", "contributing", "readme", "guide", "notes"})


@dataclass(frozen=True, slots=True)
class DocSpec:
    """How a path is read as a document."""

    format: str  # markdown | rst | asciidoc | text | settings formats (toml, ini, json, yaml, xml, js, editorconfig)
    doc_type: str  # readme | changelog | contributing | convention | runbook | notes | guide
    tool: str | None = None  # a formatter's or linter's settings file
    topic: str | None = None  # its convention topic
    shared_settings: bool = False  # pyproject.toml / setup.cfg / tox.ini: only linter tables count


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _name_words(name: str) -> set[str]:
    """``CODING_STYLE.md`` -> {"coding_style", "coding", "style"}: the stem and its parts."""
    stem = name.lower()
    stem = stem.split(".", 1)[0] if not stem.startswith(".") else stem[1:].split(".", 1)[0]
    return {stem, *re.split(r"[-_ ]+", stem)} - {""}


def _doc_type(path: str) -> str:
    pure = PurePosixPath(path)
    name_words = _name_words(pure.name)
    folder_words = {part.lower() for part in pure.parts[:-1]}
    for doc_type, names in _DOC_TYPE_NAMES:
        if name_words & names:
            return doc_type
    for doc_type, names in _DOC_TYPE_NAMES:
        # A folder says what its files are only for these ("docs/runbooks/", "changes/1.3.rst");
        # a "development" folder holds guides as often as contribution rules.
        if doc_type in ("changelog", "convention", "runbook", "notes") and folder_words & names:
            return doc_type
    return "guide"


@functools.cache
def _linter_rules() -> tuple[tuple[re.Pattern[str], str, str], ...]:
    from extractors.policy import glob_to_regex

    return tuple((re.compile(glob_to_regex(glob) + "$", re.IGNORECASE), tool, topic)
                 for glob, tool, topic in LINTER_FILES)


_SETTINGS_SUFFIXES = {"toml": "toml", "cfg": "ini", "ini": "ini", "json": "json", "jsonc": "json", "yml": "yaml",
                      "yaml": "yaml", "xml": "xml", "js": "js", "cjs": "js", "mjs": "js", "ts": "js"}


def _settings_format(name: str) -> str:
    low = name.lower()
    if low == ".editorconfig":
        return "editorconfig"
    _, dot, suffix = low.lstrip(".").rpartition(".")
    if not dot:  # ".flake8" and ".pylintrc" are INI; ".eslintrc", ".prettierrc", ".clang-format" YAML or JSON
        return "ini" if low in (".flake8", ".pylintrc", "pylintrc", ".pydocstyle") else "yaml"
    return _SETTINGS_SUFFIXES.get(suffix, "text")


def classify(path: str) -> DocSpec | None:
    """How ``path`` is read as a document, or None when it is not one (ADRs and postmortems have
    their own extractors; licences and machine-readable text files are no documentation)."""
    pure = PurePosixPath(path.replace("\\", "/"))
    name = pure.name
    low = name.lower()
    if is_decision_record(path) or is_incident_report(path):
        return None
    for rx, tool, topic in _linter_rules():
        if rx.match(name):
            return DocSpec(_settings_format(name), "convention", tool, topic)
    if low in SHARED_SETTINGS_FILES:
        return DocSpec(SHARED_SETTINGS_FILES[low], "convention", shared_settings=True)
    suffix = pure.suffix.lower()
    stem = low[: -len(suffix)] if suffix else low
    fmt = PROSE_FORMATS.get(suffix)
    if fmt is None:
        if suffix or stem not in BARE_DOCUMENT_NAMES:
            return None
        fmt = "text"
    if stem in NOT_DOCUMENT_STEMS or stem.startswith(_NOT_DOCUMENT_PREFIXES):
        return None
    if fmt == "text" and any(part.lower().endswith(".egg-info") for part in pure.parts[:-1]):
        return None
    return DocSpec(fmt, _doc_type(path))


def is_document(path: str) -> bool:
    """Whether the documentation extractor reads ``path``."""
    return classify(path) is not None


# --- decoding -----------------------------------------------------------------------------------


def decode_document(data: bytes) -> tuple[str | None, list[str]]:
    """Text of a document file and notes on how it was read; ``None`` text for binary content."""
    notes: list[str] = []
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None, ["UTF-16 byte-order mark but undecodable content"]
    else:
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = data.decode("cp1252", errors="replace")
            notes.append(f"not UTF-8 (byte {exc.start}): read as Windows-1252")
    if "\x00" in text:
        return None, ["binary content (NUL characters)"]
    sample = text[:65536]
    control = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v") + sample.count("\ufffd")
    if sample and control / len(sample) > MAX_CONTROL_SHARE:
        return None, [f"binary content ({control / len(sample):.0%} control or undecodable characters)"]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if len(text) > MAX_DOC_CHARS:
        cut = text.rfind("\n", 0, MAX_DOC_CHARS)
        cut = cut if cut > MAX_DOC_CHARS // 2 else MAX_DOC_CHARS
        notes.append(f"read the first {cut:,} of {len(text):,} characters")
        text = text[:cut]
    return text, notes


# --- parsed documents ---------------------------------------------------------------------------


@dataclass(slots=True)
class DocSection:
    """A section: its heading path below the document title, its text and where it lies."""

    heading: tuple[str, ...]
    text: str
    start_line: int
    end_line: int


@dataclass(slots=True)
class ParsedDoc:
    """A document as its parser read it."""

    title: str | None
    sections: list[DocSection] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)  # settings files: the tools they configure
    topics: dict[int, str] = field(default_factory=dict)  # settings files: section index -> topic


@dataclass(slots=True)
class _Heading:
    start: int  # 0-based index of its first line
    end: int  # index past its last line (setext and RST headings span two or three)
    level: int
    title: str


def _trim(lines: list[str], lo: int, hi: int) -> tuple[int, int]:
    while lo < hi and not lines[lo].strip():
        lo += 1
    while hi > lo and not lines[hi - 1].strip():
        hi -= 1
    return lo, hi


def _build(lines: list[str], heads: list[_Heading], first_line: int = 1) -> ParsedDoc:
    """Sections with heading paths from headings found by a format's parser.

    The only heading of the shallowest level, when it comes first, is the document's title: its
    text is the title and what follows it up to the next heading is the overview (heading path
    ``()``). Text before the first heading is part of the overview too.
    """
    doc = ParsedDoc(title=None)
    heads = sorted(heads, key=lambda h: h.start)
    rest = heads
    if heads:
        top = min(h.level for h in heads)
        tops = [h for h in heads if h.level == top]
        if len(tops) == 1 and tops[0] is heads[0]:
            doc.title = heads[0].title
            rest = heads[1:]

    def add(path: tuple[str, ...], lo: int, hi: int) -> None:
        lo, hi = _trim(lines, lo, hi)
        if hi > lo:
            doc.sections.append(DocSection(path, "\n".join(lines[lo:hi]), first_line + lo, first_line + hi - 1))

    # The overview: everything before the first section heading except the title lines.
    first_section = rest[0].start if rest else len(lines)
    if doc.title is not None and heads:
        add((), 0, heads[0].start)
        add((), heads[0].end, first_section)
        if len(doc.sections) == 2:  # text above and below the title: one overview
            a, b = doc.sections
            doc.sections = [DocSection((), f"{a.text}\n\n{b.text}", a.start_line, b.end_line)]
    else:
        add((), 0, first_section)
    stack: list[_Heading] = []
    for i, head in enumerate(rest):
        while stack and stack[-1].level >= head.level:
            stack.pop()
        stack.append(head)
        hi = rest[i + 1].start if i + 1 < len(rest) else len(lines)
        path = tuple(h.title for h in stack)
        before = len(doc.sections)
        add(path, head.end, hi)
        if len(doc.sections) == before:  # a heading with nothing under it still names the section
            doc.sections.append(DocSection(path, "", first_line + head.start, first_line + head.end - 1))
    return doc


def _clean_heading(text: str) -> str:
    text = re.sub(r":[\w:+-]+:`([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", text)  # RST roles: :doc:`Title <path>`
    text = re.sub(r"\{#[^}]*\}\s*$", "", text)  # Markdown heading ids
    return strip_markdown(text.replace("``", "`")).strip()


# --- Markdown -----------------------------------------------------------------------------------


@functools.cache
def _markdown_parser() -> Any:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark")
    # Only the block structure is needed: inline parsing is most of the cost, and heading text
    # keeps its raw form in the inline token's content either way.
    parser.core.ruler.disable(["inline"])
    return parser


def _front_matter(text: str) -> tuple[dict[str, Any], str, int, str | None]:
    """``(metadata, body, first line of the body, problem)`` for YAML ``---`` or TOML ``+++``
    front matter."""
    if text.startswith("+++\n"):
        end = text.find("\n+++", 4)
        if end != -1 and text[end + 4 : end + 5] in ("\n", ""):
            import tomllib

            raw, body = text[4:end], text[end + 5 :]
            first = text.count("\n", 0, end + 5) + 1
            try:
                data = {str(k).lower(): v for k, v in tomllib.loads(raw).items()}
                return data, body, first, None
            except tomllib.TOMLDecodeError as exc:
                return {}, body, first, f"front matter is not valid TOML: {exc}"
    fm = split_front_matter(text)
    return fm.data, fm.body, fm.body_line, fm.error


def parse_markdown_doc(text: str) -> ParsedDoc:
    """Sections of a Markdown document (CommonMark block structure, front matter)."""
    meta, body, first, problem = _front_matter(text)
    lines = body.split("\n")
    tokens = _markdown_parser().parse(body)
    heads: list[_Heading] = []
    warnings = [problem] if problem else []
    for i, tok in enumerate(tokens):
        # Headings inside lists and block quotes (level > 0) do not start sections.
        if tok.type == "heading_open" and tok.level == 0 and tok.map:
            title = tokens[i + 1].content if i + 1 < len(tokens) else ""
            heads.append(_Heading(tok.map[0], tok.map[1], int(tok.tag[1:]), _clean_heading(title)))
        elif tok.type == "fence" and tok.map and tok.level == 0:
            lo, hi = tok.map
            closing = lines[hi - 1].strip() if hi - 1 > lo and hi - 1 < len(lines) else ""
            marker = tok.markup
            if hi >= len(lines) - 1 and not (closing.startswith(marker) and set(closing) == {marker[0]}):
                warnings.append(f"code fence opened at line {first + lo} is never closed: "
                                "the rest of the file is read as code")
    doc = _build(lines, [h for h in heads if h.title], first)
    doc.meta, doc.warnings = meta, warnings
    return doc


# --- reStructuredText ---------------------------------------------------------------------------

_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1*\s*$")


def _adornment(line: str) -> str | None:
    """The character of a section adornment line (three or more of one punctuation character)."""
    stripped = line.rstrip()
    if len(stripped) >= 3 and _RST_ADORNMENT.match(stripped):
        return stripped[0]
    return None


def parse_rst_doc(text: str) -> ParsedDoc:
    """Sections of a reStructuredText document.

    A title is one unindented line under a line of one repeated punctuation character at least as
    long as it (or four characters, as docutils accepts with a warning), optionally with the same
    line over it. Levels follow the order in which adornment styles first appear. Indented text
    (directive bodies such as ``.. code-block::``, literal blocks) is never a title, and stays text.
    """
    lines = text.split("\n")
    styles: dict[tuple[str, bool], int] = {}
    heads: list[_Heading] = []
    n = len(lines)
    i = 0
    while i < n:
        line = lines[i]
        prev_blank = i == 0 or not lines[i - 1].strip() or bool(heads and heads[-1].end == i)
        char = _adornment(line)
        if char and prev_blank and i + 2 < n:
            title, under = lines[i + 1], lines[i + 2]
            if (title.strip() and _adornment(under) == char and len(under.rstrip()) == len(line.rstrip())
                    and (len(title.strip()) <= len(line.rstrip()) or len(line.rstrip()) >= 4)):
                level = styles.setdefault((char, True), len(styles) + 1)
                heads.append(_Heading(i, i + 3, level, _clean_heading(title.strip())))
                i += 3
                continue
        if (line.strip() and not line[0].isspace() and prev_blank and i + 1 < n and not char
                and not line.startswith(".. ")):
            under = lines[i + 1]
            uchar = _adornment(under)
            if uchar and not under[0].isspace() and (len(under.rstrip()) >= len(line.rstrip())
                                                     or len(under.rstrip()) >= 4):
                level = styles.setdefault((uchar, False), len(styles) + 1)
                heads.append(_Heading(i, i + 2, level, _clean_heading(line.strip())))
                i += 2
                continue
        i += 1
    doc = _build(lines, [h for h in heads if h.title])
    # Bibliographic fields in the overview (":author: Ana" under the title) are metadata.
    if doc.sections and not doc.sections[0].heading:
        for line in doc.sections[0].text.split("\n"):
            m = re.match(r"^:([A-Za-z][\w -]*):\s*(.*)$", line)
            if m:
                doc.meta[m.group(1).strip().lower()] = m.group(2).strip()
    return doc


# --- AsciiDoc -----------------------------------------------------------------------------------

_ADOC_TITLE = re.compile(r"^(={1,6}|#{1,6})[ \t]+(\S.*?)[ \t]*(?:\1)?[ \t]*$")
_ADOC_DELIMITER = re.compile(r"^(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|```+|--)[ \t]*$")
_ADOC_ATTRIBUTE = re.compile(r"^:([\w-]+):\s*(.*)$")


def parse_asciidoc_doc(text: str) -> ParsedDoc:
    """Sections of an AsciiDoc document: ``= Title``, ``== Section``... outside delimited blocks
    (listing, literal, example, sidebar, quote, passthrough and comment blocks)."""
    lines = text.split("\n")
    heads: list[_Heading] = []
    meta: dict[str, Any] = {}
    block: str | None = None
    opened = 0
    for i, line in enumerate(lines):
        delim = _ADOC_DELIMITER.match(line)
        if delim:
            marker = delim.group(1)
            if block is None:
                block, opened = marker, i
            elif marker == block:
                block = None
            continue
        if block is not None:
            continue
        m = _ADOC_TITLE.match(line)
        if m and (i == 0 or not lines[i - 1].strip() or lines[i - 1].startswith(("[", ":", "//"))
                  or (heads and heads[-1].end == i)):
            heads.append(_Heading(i, i + 1, len(m.group(1)), _clean_heading(m.group(2))))
            continue
        attr = _ADOC_ATTRIBUTE.match(line)
        if attr and (not heads or heads[-1].level == 1 and len(heads) == 1):
            meta[attr.group(1).lower()] = attr.group(2).strip()
    doc = _build(lines, [h for h in heads if h.title])
    doc.meta = meta
    if block is not None:
        doc.warnings.append(f"block delimited at line {opened + 1} is never closed: the rest of the file "
                            "is read as its content")
    return doc


# --- plain text ---------------------------------------------------------------------------------


def parse_text_doc(text: str) -> ParsedDoc:
    """A plain-text document: one section (chunked at paragraphs); a short first line alone in its
    paragraph is the title."""
    lines = text.split("\n")
    doc = ParsedDoc(title=None)
    lo, hi = _trim(lines, 0, len(lines))
    if hi > lo:
        first = lines[lo].strip()
        if len(first) <= 80 and (lo + 1 >= hi or not lines[lo + 1].strip()):
            doc.title = first.strip("=#*- ") or None
        doc.sections.append(DocSection((), "\n".join(lines[lo:hi]), lo + 1, hi))
    return doc


# --- settings files -----------------------------------------------------------------------------

_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:[#;].*)?$")


def _tables(lines: list[str]) -> list[tuple[str, int, int]]:
    """``(name, first line index, end index)`` of the ``[table]`` sections of a TOML or INI file."""
    found = [(m.group(1).strip().strip('"'), i) for i, line in enumerate(lines) if (m := _TABLE.match(line))]
    return [(name, i, found[j + 1][1] if j + 1 < len(found) else len(lines)) for j, (name, i) in enumerate(found)]


def _linter_of_table(name: str, fmt: str) -> tuple[str, str] | None:
    low = name.lower()
    if fmt == "toml":
        if not low.startswith("tool."):
            return None
        low = low[5:]
    else:
        low = re.sub(r"^tool[:.]", "", low)
    return LINTER_SECTIONS.get(re.split(r"[.:\-\s]", low, maxsplit=1)[0])


def _glob_heading(glob: str) -> str:
    """``[*.py] (python files)``: a section glob with the languages its extensions name, so that
    it is found by the language's name as well."""
    from extractors.code.languages import EXTENSIONS

    exts = re.findall(r"\.([A-Za-z0-9]+)", glob)
    exts += [e for group in re.findall(r"\{([^}]*)\}", glob) for e in group.split(",") if e.isalnum()]
    langs = list(dict.fromkeys(lang for e in exts if (lang := EXTENSIONS.get("." + e.lower()))))
    return f"[{glob}] ({', '.join(langs)} files)" if langs else f"[{glob}]"


def parse_settings_doc(path: str, text: str, spec: DocSpec) -> ParsedDoc:
    """A formatter's or linter's settings as convention sections: a shared settings file
    (pyproject.toml, setup.cfg, tox.ini) by its linter tables only, an EditorConfig file by its
    ``[glob]`` sections, any other settings file as a whole."""
    lines = text.split("\n")
    name = PurePosixPath(path).name
    doc = ParsedDoc(title=None)

    def add(heading: tuple[str, ...], lo: int, hi: int, tool: str, topic: str) -> None:
        lo, hi = _trim(lines, lo, hi)
        if hi > lo:
            doc.topics[len(doc.sections)] = topic
            doc.sections.append(DocSection(heading, "\n".join(lines[lo:hi]), lo + 1, hi))
            if tool not in doc.tools:
                doc.tools.append(tool)

    if spec.shared_settings:
        groups: dict[str, list[tuple[str, int, int, str]]] = {}
        for table, lo, hi in _tables(lines):
            found = _linter_of_table(table, spec.format)
            if found:
                groups.setdefault(found[0], []).append((table, lo, hi, found[1]))
        for tool, parts in groups.items():
            for table, lo, hi, topic in parts:
                add((f"[{table}]",), lo, hi, tool, topic)
    elif spec.format == "editorconfig":
        tables = _tables(lines)
        assert spec.tool is not None and spec.topic is not None
        if tables and tables[0][1] > 0:
            add((), 0, tables[0][1], spec.tool, spec.topic)
        for table, lo, hi in tables:
            add((_glob_heading(table),), lo, hi, spec.tool, spec.topic)
        if not tables:
            add((), 0, len(lines), spec.tool, spec.topic)
    else:
        assert spec.tool is not None and spec.topic is not None
        add((), 0, len(lines), spec.tool, spec.topic)
    if doc.tools:
        doc.title = f"{', '.join(doc.tools)} settings ({name})"
    return doc


PARSERS = {"markdown": parse_markdown_doc, "rst": parse_rst_doc, "asciidoc": parse_asciidoc_doc,
           "text": parse_text_doc}


def parse_document(path: str, text: str, spec: DocSpec | None = None) -> ParsedDoc:
    """Parse ``text`` as the document at ``path`` (format from its name unless ``spec`` says)."""
    spec = spec or classify(path) or DocSpec("text", "guide")
    if spec.tool or spec.shared_settings:
        return parse_settings_doc(path, text, spec)
    return PARSERS.get(spec.format, parse_text_doc)(text)


# --- conventions --------------------------------------------------------------------------------


def _phrase_in(words: list[str], phrase: str) -> bool:
    want = phrase.split()
    return any(words[i : i + len(want)] == want for i in range(len(words) - len(want) + 1))


def topic_of(heading: str) -> str | None:
    """The convention topic one heading names, the longest matching phrase winning."""
    words = _words(heading)
    best: tuple[int, str] | None = None
    for topic, phrases in CONVENTION_TOPICS.items():
        for phrase in phrases:
            if _phrase_in(words, phrase) and (best is None or len(phrase) > best[0]):
                best = (len(phrase), topic)
    return best[1] if best else None


def _marked(heading: str) -> bool:
    words = _words(heading)
    return any(_phrase_in(words, marker) for marker in CONVENTION_MARKERS)


def section_topic(heading: tuple[str, ...], doc_type: str, title: str | None = None) -> str | None:
    """The convention topic of a section with heading path ``heading`` in a ``doc_type`` document,
    or None when the section is no convention (see the module docstring)."""
    if doc_type not in _CONVENTION_DOC_TYPES:
        return None
    named = next((t for h in reversed(heading) if (t := topic_of(h))), None)
    if doc_type == "convention":
        # Every section of a convention document is one; an unknown topic is named by its heading.
        own = " ".join(_words(heading[-1])) if heading else ""
        return named or own or "general"
    marked = any(_marked(h) for h in heading) or bool(title and _marked(title))
    if doc_type == "contributing" or marked:
        return named or ("general" if marked and heading else None)
    own = topic_of(heading[-1]) if heading else None
    return own if own in INTRINSIC_TOPICS else None


# --- mentions -----------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_HANDLE = re.compile(r"(?<![\w@./`-])@([A-Za-z0-9][\w-]*(?:/[A-Za-z0-9][\w.-]*)?)")
_PATHISH = re.compile(r"(?<![\w@:/.~$%-])((?:\.{1,2}/)*[\w@+-][\w.@+-]*(?:/[\w.@+-]+)+/?)")
_FILE_NAME = re.compile(r"(?<![\w@:/.~$%-])([\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/])")
# Cross-document references without a file extension: Sphinx's :doc:`/usage/config` or
# :doc:`title <path>`, AsciiDoc's xref:path[], include::path[].
_DOC_REF = re.compile(r":doc:`(?:[^`<]*<)?([^`<>]+?)>?`|\b(?:xref|include|link):([^\s\[]+)\[")


# Kinds a text names by pattern alone ("SEV-2" looks like a ticket, any address like a person):
# mentions of them are kept only when the project has the node.
CHECKED_KINDS = (NodeKind.DECISION, NodeKind.INCIDENT, NodeKind.TICKET, NodeKind.PERSON, NodeKind.TEAM)
_CHECKED_PREFIXES = tuple(kind.prefix for kind in CHECKED_KINDS)


@dataclass(slots=True)
class DocContext:
    """What documents may mention, beyond the vocabulary: the project's files (path -> node key),
    people (e-mail addresses), and the keys that exist (``None``: do not filter)."""

    vocabulary: Vocabulary = field(default_factory=Vocabulary)
    targets: Mapping[str, str] = field(default_factory=dict)  # file path -> key of the node it is
    people: Iterable[str] = ()  # known e-mail addresses
    known: set[str] | None = None  # existing decision, incident, ticket, person and team keys
    _by_name: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)
    _by_handle: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for path in self.targets:
            self._by_name.setdefault(posixpath.basename(path), []).append(path)
        handles: dict[str, set[str]] = {}
        for email in self.people:
            handles.setdefault(email.partition("@")[0].lower(), set()).add(email.lower())
        # A handle names a person only when exactly one known address has it as its local part.
        self._by_handle = {h: next(iter(e)) for h, e in handles.items() if len(e) == 1}

    @classmethod
    def build(cls, vocabulary: Vocabulary, paths: Iterable[str], code_files: Iterable[str] = (),
              known: Iterable[str] | None = None) -> DocContext:
        """A context for a project with files ``paths``: code files are ``file:`` nodes, documents
        ``doc:`` nodes, decision records and postmortems their ``adr:`` / ``incident:`` nodes.
        ``known`` holds the keys of the project's nodes of :data:`CHECKED_KINDS` (people among them
        resolve @handles); mentions of others of those kinds are left out."""
        code = set(code_files)
        targets: dict[str, str] = {}
        for path in paths:
            key = target_key(path, path in code)
            if key:
                targets[path] = key
        keys = None if known is None else {k for k in known if k.startswith(_CHECKED_PREFIXES)}
        people = [k[len("person:"):] for k in keys or () if k.startswith("person:")]
        return cls(vocabulary, targets, people, keys)

    def resolve(self, ref: str, base: str, suffixes: tuple[str, ...] = ()) -> str | None:
        """The node key of a file reference written in a document in folder ``base``; a
        reference without an extension may take one of ``suffixes``."""
        ref = ref.split("#", 1)[0].split("?", 1)[0].rstrip("/.,;:)")
        if not ref or "://" in ref:
            return None
        while ref.startswith("./"):
            ref = ref[2:]
        for candidate in (posixpath.normpath(posixpath.join(base, ref)) if base and not ref.startswith("/") else None,
                          ref.lstrip("/")):
            for name in (candidate, *(f"{candidate}{s}" for s in suffixes)) if candidate else ():
                if name in self.targets:
                    return self.targets[name]
        if "/" not in ref:
            same = self._by_name.get(ref, [])
            if len(same) == 1:
                return self.targets[same[0]]
        return None

    def person(self, handle: str) -> str | None:
        email = self._by_handle.get(handle.lower())
        return person_key(email) if email else None


def target_key(path: str, is_code: bool) -> str | None:
    """The node a project file is in the graph, if any."""
    if is_code:
        return "file:" + path
    if is_decision_record(path):
        nums = re.findall(r"\d+", PurePosixPath(path).name)
        return adr_key(nums[0]) if nums else None
    if is_incident_report(path):
        refs = incident_refs(PurePosixPath(path).stem)
        return incident_key(refs[0]) if refs else None
    spec = classify(path)
    if spec is not None and not spec.shared_settings:
        return doc_key(path)
    return None


def _mentions(text: str, path: str, context: DocContext) -> tuple[dict[str, float], dict[str, str]]:
    """Keys a document's text names with the confidence of each, and the names of the technologies
    among them (entity key -> canonical name)."""
    found: dict[str, float] = {}

    def add(key: str | None, conf: float = 1.0) -> None:
        if key and (key not in found or found[key] < conf):
            found[key] = conf

    vocab = context.vocabulary
    names = vocab.find(text)
    for service in names.services:
        add(service)
    for sym, conf in names.symbols:
        add(sym, conf)
    for sym in symbol_key_refs(text):
        add(sym)
    for ekey, _ in names.technologies:
        add(ekey)
    for num in adr_refs(text, links=True):
        add(adr_key(num))
    for ref in find_references(text):  # decision records, incidents, tickets
        add(ref.key)
    for email in _EMAIL.findall(text):
        add(person_key(email))
    for handle in _HANDLE.findall(text):
        if "/" in handle:  # "@org/team"
            team = vocab.team(handle.split("/", 1)[1])
            add(f"team:{team}" if team else None)
        else:
            team = vocab.team(handle)
            add(f"team:{team}" if team else context.person(handle))
    base = posixpath.dirname(path)
    for ref in _PATHISH.findall(text):
        add(context.resolve(ref, base))
    for ref in _FILE_NAME.findall(text):
        add(context.resolve(ref, base))
    suffixes = tuple(dict.fromkeys((PurePosixPath(path).suffix.lower(), ".rst", ".md", ".adoc")))
    for role, macro in _DOC_REF.findall(text):
        add(context.resolve(role or macro, base, suffixes))
    found.pop(doc_key(path), None)
    if context.known is not None:
        found = {k: c for k, c in found.items() if not k.startswith(_CHECKED_PREFIXES) or k in context.known}
    return found, dict(names.technologies)


# --- chunks -------------------------------------------------------------------------------------


def _header(title: str, heading: tuple[str, ...], topic: str | None) -> str:
    head = HEADING_SEP.join((title, *heading))
    return f"{head}\nConvention: {topic}" if topic else head


def _chunks(key: str, title: str, sections: list[DocSection], topics: list[str | None], prov: Provenance,
            max_chars: int = MAX_CHUNK_CHARS) -> tuple[list[Chunk], list[str]]:
    """Chunks of a document's sections and the convention topic of each ("" for none).

    A tiny section followed by its own subsection is carried into that subsection's chunk; any
    other tiny section that is no convention joins the chunk before it when that is none either
    and both fit together.
    """
    chunks: list[Chunk] = []
    chunk_topics: list[str] = []
    last_heading: tuple[str, ...] | None = None
    carry: DocSection | None = None  # a tiny parent section, joining its first subsection
    for n, sec in enumerate(sections):
        topic = topics[n]
        if not sec.text.strip():
            continue
        nxt = sections[n + 1] if n + 1 < len(sections) else None
        tiny = len(sec.text) < TINY_SECTION_CHARS
        # The overview (heading ()) stands alone: it is about the whole document, not its first part.
        if tiny and carry is None and sec.heading and nxt is not None and len(nxt.heading) > len(sec.heading) \
                and nxt.heading[: len(sec.heading)] == sec.heading:
            carry = sec
            continue
        # A convention stays a chunk of its own: it is what a list of conventions shows.
        if tiny and carry is None and topic is None and chunks and last_heading is not None \
                and not chunk_topics[-1]:
            prev = chunks[-1]
            shared = 0
            while shared < min(len(last_heading), len(sec.heading)) and last_heading[shared] == sec.heading[shared]:
                shared += 1
            own = HEADING_SEP.join(sec.heading[shared:]) or HEADING_SEP.join(sec.heading)
            joined = f"{prev.text}\n\n{own}\n{sec.text}" if own else f"{prev.text}\n\n{sec.text}"
            if len(joined) <= max_chars:
                prev.text, prev.end_line = joined, sec.end_line
                continue
        header = _header(title, sec.heading, topic)
        body, start = sec.text, sec.start_line
        if carry is not None:
            # Blank lines where the subsection's heading was keep the pieces' line numbers right.
            gap = "\n" * max(1, sec.start_line - carry.end_line)
            body, start = f"{carry.text}{gap}{body}", carry.start_line
            carry = None
        budget = max(200, max_chars - len(header) - 2)
        for piece in split_paragraphs(body, start, budget):
            chunks.append(Chunk(key, len(chunks), f"{header}\n\n{piece.text}",
                                CONVENTION_CHUNK_KIND if topic else CHUNK_KIND, prov,
                                piece.start_line, piece.end_line))
            chunk_topics.append(topic or "")
        last_heading = sec.heading
    return chunks, chunk_topics


# --- extraction ---------------------------------------------------------------------------------


def _title_from_path(path: str) -> str:
    pure = PurePosixPath(path)
    stem = pure.stem if pure.suffix else pure.name
    if stem.lower() in ("readme", "index") and len(pure.parts) > 1:
        return f"{pure.parts[-2]} {stem}"
    return stem.replace("_", " ").replace("-", " ").strip() or pure.name


def _summary(sections: list[DocSection], limit: int = 300) -> str | None:
    for sec in sections:
        for para in sec.text.split("\n\n"):
            plain = strip_markdown(para)
            if plain and not para.lstrip().startswith(("```", "~~~", "..", "|", "<", "[!", "![", "----")):
                return plain[:limit]
    return None


def extract_document(
    path: str,
    data: bytes | str,
    *,
    context: DocContext | None = None,
    vocabulary: Vocabulary | None = None,
    source_commit: str | None = None,
    spec: DocSpec | None = None,
) -> Extraction:
    """Graph facts from the document at ``path`` (relative POSIX) with content ``data``.

    A file that is not documentation, binary or empty gives a :class:`Skipped` with the reason (a
    shared settings file without linter tables gives nothing at all); one read only in part keeps
    what was read and says why in ``warnings`` and a :class:`Skipped` note.
    """
    out = Extraction()
    spec = spec or classify(path)
    if spec is None:
        out.skipped.append(Skipped(path, "not a document"))
        return out
    if isinstance(data, bytes):
        text, notes = decode_document(data)
    else:
        text, notes = decode_document(data.encode("utf-8", "surrogatepass"))
    if text is None:
        out.skipped.append(Skipped(path, f"{notes[0]}; not read as a document"))
        return out
    if not text.strip():
        if not spec.shared_settings:
            out.skipped.append(Skipped(path, "empty document"))
        return out
    doc = parse_document(path, text, spec)
    if spec.shared_settings and not doc.sections:
        return out  # a pyproject.toml without linter tables is no documentation
    warnings = notes + doc.warnings
    if not any(sec.text.strip() for sec in doc.sections):
        out.skipped.append(Skipped(path, "no text besides headings"))
        return out
    context = context or DocContext(vocabulary if vocabulary is not None else Vocabulary())
    key = doc_key(path)
    prov = Provenance(path, EXTRACTOR, VERSION, source_commit=source_commit)
    title = _clean_heading(as_text(doc.meta.get("title"))) or doc.title or _title_from_path(path)
    doc_type = spec.doc_type
    if spec.format in PARSERS and doc_type == "guide" and _marked(title):
        doc_type = "convention"  # "Coding guidelines", "Python style guide"

    # The overview of a document with sections introduces them ("These conventions apply to...",
    # EditorConfig's "root = true"); without sections it is the whole document.
    alone = len(doc.sections) == 1
    topics = [None if not sec.heading and not alone
              else doc.topics.get(i) if doc.topics else section_topic(sec.heading, doc_type, title)
              for i, sec in enumerate(doc.sections)]
    chunks, chunk_topics = _chunks(key, title, doc.sections, topics, prov)
    if len(chunks) > MAX_CHUNKS:
        warnings.append(f"only the first {MAX_CHUNKS} of {len(chunks)} chunks are indexed")
        chunks, chunk_topics = chunks[:MAX_CHUNKS], chunk_topics[:MAX_CHUNKS]
    headings = [HEADING_SEP.join(sec.heading) for sec in doc.sections if sec.heading]
    props: dict[str, Any] = {
        "path": path,
        "format": spec.format,
        "doc_type": doc_type,
        "title": title,
        "headings": list(dict.fromkeys(headings))[:MAX_HEADINGS_PROP],
        "sections": len(doc.sections),
        "lines": text.count("\n") + 1,
        "summary": _summary(doc.sections) if not doc.tools else None,
        "tools": doc.tools,
        "tags": as_list(doc.meta.get("tags")),
        "conventions": sorted({t for t in chunk_topics if t}),
        "chunk_conventions": chunk_topics if any(chunk_topics) else [],
        "warnings": warnings,
    }
    props = {k: v for k, v in props.items() if v not in (None, [], "")}
    out.nodes.append(Node(key, title, prov, props=props))
    out.chunks.extend(chunks)
    for note in warnings:
        out.skipped.append(Skipped(path, f"read in part: {note}"))

    # Mentions, each with the first section that names it (for evidence).
    found: dict[str, float] = {}
    section_of: dict[str, str] = {}
    technologies: dict[str, str] = {}
    for n, sec in enumerate(doc.sections):
        scanned = f"{title}\n{sec.text}" if n == 0 else f"{HEADING_SEP.join(sec.heading)}\n{sec.text}"
        named, techs = _mentions(scanned, path, context)
        technologies.update(techs)
        for mkey, conf in named.items():
            section_of.setdefault(mkey, HEADING_SEP.join((title, *sec.heading)))
            found[mkey] = max(conf, found.get(mkey, 0.0))
    for mkey in sorted(found):
        conf = found[mkey]
        p = prov if conf == 1.0 else Provenance(path, EXTRACTOR, VERSION, source_commit, round(conf, 3))
        out.rels.append(Relationship(key, RelType.MENTIONS, mkey, p, props={"section": section_of[mkey]}))
        if mkey in technologies:
            out.nodes.append(Node(mkey, technologies[mkey], prov,
                                  props={"entity_type": "technology", "canonical_name": technologies[mkey]}))
    return out


# --- listing conventions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Convention:
    """One convention of a repository: its topic, its text and where it is written."""

    topic: str
    text: str
    path: str
    start_line: int | None
    end_line: int | None
    key: str  # the document node
    heading: str

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "text": self.text, "path": self.path, "start_line": self.start_line,
                "end_line": self.end_line, "key": self.key, "heading": self.heading}


def conventions(store: Any, *, topic: str | None = None) -> list[Convention]:
    """The conventions of the project in ``store`` (a :class:`~graphmem.stores.base.GraphStore`),
    ordered by topic, path and line; ``topic`` keeps one topic only."""
    docs = {n.key: n for n in store.iter_nodes([NodeKind.DOCUMENT]) if n.props.get("conventions")}
    if not docs:
        return []
    out: list[Convention] = []
    for chunk in store.get_chunks(list(docs)):
        node = docs.get(chunk.node_key)
        topics = node.props.get("chunk_conventions", []) if node else []
        found = topics[chunk.ordinal] if isinstance(topics, list) and chunk.ordinal < len(topics) else ""
        if not found or (topic is not None and found != topic):
            continue
        head, _, body = chunk.text.partition("\n\n")
        out.append(Convention(found, body or chunk.text, str(node.props.get("path", chunk.node_key[4:])),
                              chunk.start_line, chunk.end_line, chunk.node_key, head.split("\n", 1)[0]))
    out.sort(key=lambda c: (c.topic, c.path, c.start_line or 0))
    return out


__all__ = [
    "CHECKED_KINDS",
    "CHUNK_KIND",
    "CONVENTION_CHUNK_KIND",
    "CONVENTION_MARKERS",
    "CONVENTION_TOPICS",
    "Convention",
    "DocContext",
    "DocSection",
    "DocSpec",
    "EXTRACTOR",
    "INTRINSIC_TOPICS",
    "LINTER_FILES",
    "LINTER_SECTIONS",
    "ParsedDoc",
    "VERSION",
    "classify",
    "conventions",
    "decode_document",
    "extract_document",
    "is_document",
    "parse_asciidoc_doc",
    "parse_document",
    "parse_markdown_doc",
    "parse_rst_doc",
    "parse_settings_doc",
    "parse_text_doc",
    "section_topic",
    "target_key",
    "topic_of",
]
