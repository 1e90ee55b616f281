"""A code-aware tokenizer for lexical retrieval (BM25).

``tokenize(text)`` finds words and identifiers (runs of word characters joined by ``.`` or ``-``)
and turns each into tokens:

- everything is lower-cased;
- a compound identifier is kept whole *and* split into parts on dots, underscores, hyphens,
  camelCase, PascalCase and acronyms: ``InvoiceHandler.post`` gives ``invoicehandler.post``,
  ``invoicehandler``, ``invoice``, ``handler``, ``post``; ``HTTPServer`` gives ``httpserver``,
  ``http``, ``server``; ``charge_card`` gives ``charge_card``, ``charge``, ``card``;
- record ids such as ``ADR-0005`` or ``INC-42`` give a normalised id token (``adr-5``, ``inc-42``:
  digits without leading zeros) plus the parts (``adr``, ``5``), so ``ADR-0005`` matches ``ADR-5``;
  digit parts always lose their leading zeros;
- parts found in a short English stop-word list are dropped (a whole compound never is);
- word parts (letters only) go through a light stemmer for plurals and third-person verbs
  (see ``stem``); whole compound identifiers are kept verbatim.

Each distinct raw token is analysed once and the result memoised, so the hot path of ``tokenize``
is one regex scan plus C-level dictionary lookups (about 0.1 µs per token on a warm cache).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import chain
from sys import intern

__all__ = ["STOP_WORDS", "stem", "tokenize"]

# Short on purpose: only words that carry no meaning in a question about code. Verbs that carry the
# question ("owns", "calls", "depends", "changed") must stay.
STOP_WORDS: frozenset[str] = frozenset((
    "a", "an", "the", "and", "or", "but", "if", "then", "else", "of", "in", "on", "at", "to", "for", "from", "by",
    "with", "about", "as", "into", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that", "these",
    "those", "there", "which", "what", "who", "whose", "when", "where", "why", "how", "do", "does", "did", "has",
    "have", "had", "i", "me", "my", "we", "our", "you", "your", "they", "them", "their", "not", "no", "so", "than",
    "can", "will", "would", "should", "s", "t",
))

# Identifiers and words: word characters, possibly joined by dots or hyphens (qualified names,
# kebab-case, record ids). A trailing sentence dot is not part of a token.
_TOKEN = re.compile(r"\w+(?:[.\-]\w+)*")
# Splits a separator-free segment into camelCase / PascalCase / ACRONYM / digit / other-letter runs.
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+|[^\W\d_A-Za-z]+")
_SUBSEP = re.compile(r"[_\-]+")
# A record id: letters, one hyphen, digits, not glued to further letters or digits.
_RECORD_ID = re.compile(r"(?<![^\W_])([A-Za-z]+)-([0-9]+)(?![^\W_])")

# Plurals whose naive stem would not meet the singular's stem.
_STEM_EXCEPTIONS = {"caches": "cache", "aches": "ache", "niches": "niche", "avalanches": "avalanche"}
# Endings after which a final "s" is part of the word: class, status, analysis.
_KEEP_S = ("ss", "us", "is")


def stem(word: str) -> str:
    """Strip plural / third-person ``s`` from a lower-case word of letters; deterministic and cheap.

    Rules, first match wins, only for words of four letters or more:
    ``-sses`` -> ``-ss`` (classes), ``-ies`` -> ``-y`` (dependencies, applies; needs 5+ letters),
    ``-xes``/``-ches``/``-shes``/``-zzes`` -> drop ``es`` (indexes, patches), words ending in
    ``ss``/``us``/``is`` are kept (class, status, analysis), else a final ``s`` is dropped
    (incidents, services, calls, depends). No ``-ed``/``-ing`` stripping: too lossy for identifiers.
    """
    if len(word) < 4 or word[-1] != "s":
        return word
    special = _STEM_EXCEPTIONS.get(word)
    if special is not None:
        return special
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("xes", "ches", "shes", "zzes")):
        return word[:-2]
    if word.endswith(_KEEP_S):
        return word
    return word[:-1]


def _part(part: str) -> str | None:
    """Normalise one lower-case part: stop word -> None, digits lose leading zeros, letters are stemmed."""
    if part in STOP_WORDS:
        return None
    if part.isdigit():
        return part.lstrip("0") or "0"
    if part.isalpha():
        return stem(part)
    return part


def _segment_parts(segment: str) -> list[str]:
    """Split a segment without dots into lower-case parts (snake, kebab, camel, acronyms, digits)."""
    parts: list[str] = []
    for piece in _SUBSEP.split(segment):
        if not piece:
            continue
        # Camel splitting only knows ASCII case; other scripts stay whole.
        if piece.isdigit() or not piece.isascii() or (piece.isalpha() and (piece.islower() or piece.isupper())):
            parts.append(piece.lower())
        else:
            parts.extend(p.lower() for p in _CAMEL.findall(piece))
    return parts


def _analyse(raw: str) -> tuple[str, ...]:
    """All tokens of one raw word/identifier, in a stable order, without repeats.

    Tokens are interned: the memo tables and an index's vocabulary then share one object per token,
    which saves memory and turns most dictionary key comparisons into identity checks.
    """
    if raw.isalpha() and (raw.islower() or raw.isupper() or raw[1:].islower()):
        # Fast path for plain words ("service", "Service", "HTTP"): one part, no compound.
        word = raw.lower()
        return () if word in STOP_WORDS else (intern(stem(word)),)
    if raw.isdigit():
        return (intern(raw.lstrip("0") or "0"),)
    out: list[str] = []
    for m in _RECORD_ID.finditer(raw):
        out.append(f"{m.group(1).lower()}-{m.group(2).lstrip('0') or '0'}")
    segments = [s for s in raw.split(".") if s]
    all_parts: list[str] = []
    seg_parts: list[list[str]] = []
    for seg in segments:
        parts = _segment_parts(seg)
        seg_parts.append(parts)
        all_parts.extend(parts)
    # A pure record id ("ADR-0005") is fully described by its normalised id and its parts; anything
    # else made of several parts is a compound identifier worth matching verbatim.
    is_record_id = len(out) == 1 and _RECORD_ID.fullmatch(raw) is not None
    if len(all_parts) > 1 and not is_record_id:
        out.append(raw.lower())
        if len(segments) > 1:
            out.extend(seg.lower() for seg, parts in zip(segments, seg_parts) if len(parts) > 1)
    for p in all_parts:
        norm = _part(p)
        if norm is not None:
            out.append(norm)
    return tuple(map(intern, dict.fromkeys(out)))


class _Memo(dict[str, tuple[str, ...]]):
    """key -> its tokens, computed on first sight by ``analyse``. Cleared when it grows past ``limit``."""

    def __init__(self, analyse: Callable[[str], tuple[str, ...]], limit: int) -> None:
        super().__init__()
        self.analyse = analyse
        self.limit = limit

    def __missing__(self, key: str) -> tuple[str, ...]:
        if len(self) >= self.limit:
            self.clear()  # crude but bounded; a miss costs only a few microseconds
        result = self[key] = self.analyse(key)
        return result


_findall = _TOKEN.findall
_flatten = chain.from_iterable
# Two levels: raw tokens ("InvoiceHandler.post") and whitespace-separated chunks ("handler.post(req),").
# Scanning the whole text with ``_TOKEN`` costs ~3x more than ``str.split``; chunks repeat a lot in
# code and prose, so most of them are a single dictionary hit.
_WORDS = _Memo(_analyse, 200_000)
_lookup_word = _WORDS.__getitem__
_CHUNKS = _Memo(lambda chunk: tuple(_flatten(map(_lookup_word, _findall(chunk)))), 200_000)
_lookup_chunk = _CHUNKS.__getitem__


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` for indexing and querying (see the module docstring for the rules)."""
    return list(_flatten(map(_lookup_chunk, text.split())))
