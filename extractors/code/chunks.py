"""Search passages for code: one or more per symbol, and one for a file's module-level code.

Passages are sized for a MiniLM embedder (about 1,000 characters, ~250 tokens). Each starts with a
header naming the path, qualified name and signature, so a passage cut from the middle of a long
body still says what it belongs to. Nested definitions appear in their parent's passage only as
their signature line, and the comment that documents one (a Javadoc, a Go or JSDoc comment above
it) only in its own passage, so nothing is embedded twice and a class or file does not answer, in
its members' words, for what one member does.
"""

from __future__ import annotations

from extractors.code.facts import FileFacts, SymbolFact
from graphmem.model import Chunk, Provenance, file_key, symbol_key

MAX_CHUNK_CHARS = 1000
MAX_HEADER_SIGNATURE_CHARS = 240
MAX_DOC_IN_CHUNK_CHARS = 400
CHUNK_KIND = "code"


def symbol_chunks(
    facts: FileFacts,
    symbol: SymbolFact,
    lines: list[str],
    provenance: Provenance,
    children: list[SymbolFact] | None = None,
) -> list[Chunk]:
    """Passages for one symbol: header, docstring (when it sits outside the code), then code.

    ``children`` are the symbols nested directly in this one (found by scanning when omitted).
    """
    key = symbol_key(facts.path, symbol.qualname)
    signature = symbol.signature[:MAX_HEADER_SIGNATURE_CHARS]
    header = f"{facts.path}::{symbol.qualname} ({symbol.kind}, {facts.language})\n{signature}\n"
    preface = ""
    if symbol.docstring and not symbol.doc_inside:
        preface = symbol.docstring[:MAX_DOC_IN_CHUNK_CHARS] + "\n"
    if children is None:
        children = [s for s in facts.symbols if s.parent == symbol.qualname]
    body = _collapsed_lines(lines, symbol.start_line, symbol.end_line, children)
    # The further definitions under this key (a Java overload, a Python property's setter) belong
    # to this passage, each with the comment that documents it, not to the enclosing class's.
    for start, end, doc_start in symbol.extra_ranges:
        first = doc_start if 0 < doc_start < start else start
        body += _collapsed_lines(lines, first, end, children)
    return _pack(key, header, preface, body, provenance)


def file_chunks(facts: FileFacts, lines: list[str], provenance: Provenance) -> list[Chunk]:
    """Passages for the module-level code of a file (none when every line belongs to a symbol)."""
    top_level = [s for s in facts.symbols if s.parent is None]
    body = _collapsed_lines(lines, 1, len(lines), top_level)
    covered = {n for s in top_level for start, end in s.ranges() for n in range(start, end + 1)}
    if not any(text.strip() for number, text in body if number not in covered):
        return []
    header = f"{facts.path} ({facts.language} file)\n"
    preface = facts.docstring[:MAX_DOC_IN_CHUNK_CHARS] + "\n" if facts.docstring else ""
    return _pack(file_key(facts.path), header, preface, body, provenance)


def _collapsed_lines(
    lines: list[str], start: int, end: int, children: list[SymbolFact]
) -> list[tuple[int, str]]:
    """``(line number, text)`` of lines start..end with each child shown as its first line only,
    and without the comment above a child that documents it (the child's own passage holds it).
    A child's further definitions under the same key (overloads) are shown so too."""
    child_at: dict[int, tuple[SymbolFact, int]] = {}
    documented: set[int] = set()
    for c in children:
        for c_start, c_end, doc_start in ([c.start_line, c.end_line, c.doc_start_line], *c.extra_ranges):
            if start <= c_start <= end:
                child_at[c_start] = (c, c_end)
                if start <= doc_start < c_start:
                    documented.update(range(doc_start, c_start))
    out: list[tuple[int, str]] = []
    number = start
    end = min(end, len(lines))
    while number <= end:
        if number in documented:
            number += 1
            continue
        child, child_end = child_at.get(number, (None, 0))
        if child is not None and child_end > number:
            # Show the declaration line itself (after decorators) so the reader sees a name.
            first = _declaration_line(lines, child, number, child_end)
            out.append((number, first.rstrip() + " ..."))
            number = child_end + 1
            continue
        out.append((number, lines[number - 1]))
        number += 1
    return out


def _declaration_line(lines: list[str], symbol: SymbolFact, start: int, end: int) -> str:
    """The line of lines start..end (one definition of ``symbol``) that declares it: the one that
    opens like its signature, else the one that names it, else the first."""
    last = min(end, len(lines))
    head = symbol.signature.split("\n", 1)[0].strip()
    for probe in (head[:20], symbol.name):
        for number in range(start, last + 1):
            if probe and probe in lines[number - 1]:
                return lines[number - 1]
    return lines[start - 1]


def _pack(
    key: str, header: str, preface: str, body: list[tuple[int, str]], provenance: Provenance
) -> list[Chunk]:
    """Cut ``body`` into passages of at most ``MAX_CHUNK_CHARS``, at line boundaries."""
    # Leading and trailing blank lines carry no meaning and waste the budget.
    while body and not body[0][1].strip():
        body = body[1:]
    while body and not body[-1][1].strip():
        body = body[:-1]
    room = max(MAX_CHUNK_CHARS - len(header), 200)
    pieces = _split_long_lines(body, room)
    chunks: list[Chunk] = []
    current: list[tuple[int, str]] = []
    used = len(preface)
    for number, text in pieces:
        cost = len(text) + 1
        if current and used + cost > room:
            chunks.append(_chunk(key, len(chunks), header, preface if not chunks else "", current, provenance))
            current, used = [], 0
        current.append((number, text))
        used += cost
    if current or not chunks:
        chunks.append(_chunk(key, len(chunks), header, preface if not chunks else "", current, provenance))
    return chunks


def _split_long_lines(body: list[tuple[int, str]], room: int) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for number, text in body:
        text = text.rstrip()
        while len(text) > room:
            out.append((number, text[:room]))
            text = text[room:]
        out.append((number, text))
    return out


def _chunk(
    key: str, ordinal: int, header: str, preface: str, lines: list[tuple[int, str]], provenance: Provenance
) -> Chunk:
    code = "\n".join(text for _, text in lines)
    return Chunk(
        node_key=key,
        ordinal=ordinal,
        text=f"{header}{preface}\n{code}".rstrip() + "\n",
        kind=CHUNK_KIND,
        provenance=provenance,
        start_line=lines[0][0] if lines else None,
        end_line=lines[-1][0] if lines else None,
    )
