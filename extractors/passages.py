"""Entities of passage corpora by rule, without a model (HippoRAG-style graph over Wikipedia-like text).

Each passage is *about* the entity its title names; the capitalised names and the dates in its text
are entities it *mentions*. A mention that spells another passage's title is that title's entity, so
two passages meet in the graph through the entity one is about and the other names:

    doc:lothair-ii -MENTIONS-> entity:concept:ermengarde of tours <-MENTIONS {role: about}- doc:ermengarde-of-tours

Names and titles share one entity type (``concept``, as the OpenIE graph's names do), so a title, a
capitalised span and an OpenIE name that spell the same thing are one node. Dates are entities of
type ``date`` named in ISO form (``1982-12-08``, or the year alone).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from graphmem.model import (
    Node,
    Provenance,
    Relationship,
    RelType,
    entity_key,
    normalise_name,
)

EXTRACTOR = "passages-rules"
EXTRACTOR_VERSION = "1"
NAME_TYPE = "concept"
DATE_TYPE = "date"
MAX_TITLE_WORDS = 12

# Lower-case words that may sit inside a name ("Ermengarde of Tours", "Ludwig van Beethoven").
_CONNECTORS = frozenset({"of", "de", "da", "del", "della", "der", "den", "van", "von", "la", "le", "du", "des",
                         "di", "y", "al", "bin", "ibn", "the", "for"})
# Capitalised words that start sentences or are too common to be names on their own.
_STOP = frozenset({"a", "an", "the", "this", "that", "these", "those", "there", "here", "his", "her", "hers",
    "its", "their", "our", "my", "your", "he", "she", "it", "they", "we", "i", "you", "in", "on", "at", "by",
    "for", "from", "to", "of", "and", "or", "but", "if", "when", "while", "after", "before", "during", "since",
    "until", "as", "with", "without", "about", "between", "into", "through", "over", "under", "upon", "also",
    "however", "although", "though", "because", "so", "then", "thus", "yet", "not", "no", "yes", "is", "was",
    "were", "are", "be", "been", "being", "has", "have", "had", "do", "does", "did", "who", "whom", "whose",
    "which", "what", "where", "why", "how", "all", "any", "both", "each", "every", "many", "more", "most",
    "other", "some", "such", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "first", "second", "third", "last", "several", "following", "according", "known", "born", "died",
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mr",
    "mrs", "ms", "dr", "st", "sir", "saint"})
_MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"], start=1)}
_MONTH_RX = "(" + "|".join(m.capitalize() for m in _MONTHS) + ")"
_DATE_MDY = re.compile(rf"\b{_MONTH_RX}\s+(\d{{1,2}}),?\s+(\d{{3,4}})\b")
_DATE_DMY = re.compile(rf"\b(\d{{1,2}})\s+{_MONTH_RX},?\s+(\d{{3,4}})\b")
_YEAR = re.compile(r"(?<![\d.,])\b(1[0-9]{3}|20[0-9]{2})\b(?![\d.,]\d)")
# Words: letters (any script) with inner apostrophes, hyphens and dots ("O'Brien", "Jean-Luc", "J."),
# or numbers. Anything else between two words (punctuation other than a space) ends a name.
_TOKEN = re.compile(r"[^\W\d_]\.(?=[ ]?[^\W\d_])|[^\W\d_](?:[\w'’\-]*[\w])?|\d+")
_POSSESSIVE = re.compile(r"['’]s?$")
_PARENS = re.compile(r"\s*\([^)]*\)\s*")


def _word_form(word: str) -> str:
    ascii_ = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "", ascii_.lower())


def match_form(text: str) -> tuple[str, ...]:
    """The words of a name as compared: lower case, accents and punctuation dropped."""
    return tuple(f for f in (_word_form(m.group(0)) for m in _TOKEN.finditer(text)) if f)


def title_name(title: str) -> str:
    """A title without its disambiguation ("Hello Love (song)" -> "Hello Love")."""
    return " ".join(_PARENS.sub(" ", title).split()) or " ".join(title.split())


@dataclass(slots=True)
class _Token:
    text: str
    start: int
    end: int
    form: str  # match form of this one word ("" for a word that has none, e.g. only accents)


@dataclass(slots=True)
class PassageMentions:
    """What one passage is about and what it mentions (entity keys, with the names as written)."""

    about: str
    mentions: dict[str, str] = field(default_factory=dict)  # key -> name as first written


class TitleIndex:
    """Every passage title by its match form, for finding titles inside other passages' text."""

    def __init__(self, titles: Iterable[str]) -> None:
        self.by_form: dict[tuple[str, ...], str] = {}
        self.first_words: set[str] = set()
        for title in titles:
            name = title_name(title)
            form = match_form(name)
            if form and len(form) <= MAX_TITLE_WORDS:
                self.by_form.setdefault(form, name)
                self.first_words.add(form[0])

    def key_of(self, name: str) -> str:
        return entity_key(NAME_TYPE, name)

    def longest_at(self, forms: Sequence[str], i: int) -> int:
        """Length of the longest title starting at word ``i`` (0 if none)."""
        if forms[i] not in self.first_words:
            return 0
        for n in range(min(MAX_TITLE_WORDS, len(forms) - i), 0, -1):
            if tuple(forms[i:i + n]) in self.by_form:
                return n
        return 0


def _tokens(text: str) -> list[_Token]:
    return [_Token(m.group(0), m.start(), m.end(), _word_form(m.group(0))) for m in _TOKEN.finditer(text)]


def _joined(text: str, a: _Token, b: _Token) -> bool:
    """Whether only spaces separate two words (a name does not run across punctuation)."""
    gap = text[a.end:b.start]
    return gap.strip() == "" and "\n" not in gap


def _sentence_start(text: str, tok: _Token) -> bool:
    before = text[:tok.start].rstrip(" \"'“‘(")
    return not before or before[-1] in ".!?:;\n"


def _is_cap(tok: _Token) -> bool:
    return tok.text[:1].isupper()


def dates(text: str) -> dict[str, str]:
    """ISO names of the full dates and the years a text gives -> the text as written."""
    out: dict[str, str] = {}
    for m in _DATE_MDY.finditer(text):
        month, day, year = _MONTHS[m.group(1).lower()], int(m.group(2)), int(m.group(3))
        if 1 <= day <= 31:
            out.setdefault(f"{year:04d}-{month:02d}-{day:02d}", m.group(0))
    for m in _DATE_DMY.finditer(text):
        day, month, year = int(m.group(1)), _MONTHS[m.group(2).lower()], int(m.group(3))
        if 1 <= day <= 31:
            out.setdefault(f"{year:04d}-{month:02d}-{day:02d}", m.group(0))
    for m in _YEAR.finditer(text):
        out.setdefault(m.group(1), m.group(1))
    return out


def title_mentions(text: str, titles: TitleIndex) -> list[str]:
    """The passage titles a text spells (starting with a capital), longest first where they overlap."""
    toks = _tokens(text)
    forms = [t.form for t in toks]
    out: list[str] = []
    i = 0
    while i < len(toks):
        n = titles.longest_at(forms, i) if _is_cap(toks[i]) else 0
        if n and all(_joined(text, toks[j], toks[j + 1]) for j in range(i, i + n - 1)):
            out.append(titles.by_form[tuple(forms[i:i + n])])
            i += n
        else:
            i += 1
    return out


def names(text: str, titles: TitleIndex | None = None) -> list[str]:
    """The names a text mentions: other passages' titles wherever they are spelt (starting with a
    capital), and the remaining runs of capitalised words (joined by "of", "van", ...). A single
    word that only starts a sentence is no name ("The", "Snow moved to ...")."""
    toks = _tokens(text)
    forms = [t.form for t in toks]
    used = [False] * len(toks)
    out: list[str] = []
    if titles is not None:
        i = 0
        while i < len(toks):
            n = titles.longest_at(forms, i) if _is_cap(toks[i]) else 0
            if n and all(_joined(text, toks[j], toks[j + 1]) for j in range(i, i + n - 1)):
                out.append(titles.by_form[tuple(forms[i:i + n])])
                used[i:i + n] = [True] * n
                i += n
            else:
                i += 1
    i = 0
    while i < len(toks):
        tok = toks[i]
        if used[i] or not _is_cap(tok):
            i += 1
            continue
        j = i
        end = i  # last capitalised word of the span
        while j + 1 < len(toks) and not used[j + 1] and _joined(text, toks[j], toks[j + 1]):
            nxt = toks[j + 1]
            if _is_cap(nxt):
                end = j = j + 1
            elif nxt.text in _CONNECTORS and j + 2 < len(toks) and _is_cap(toks[j + 2]) \
                    and not used[j + 2] and _joined(text, nxt, toks[j + 2]):
                j += 1
            else:
                break
        span = toks[i:end + 1]
        # Leading function words ("In", "The", "His") start sentences; they are not the name.
        while span and span[0].form in _STOP:
            span = span[1:]
        while span and span[-1].text in _CONNECTORS:
            span = span[:-1]
        if span and (len(span) > 1 or not _sentence_start(text, span[0])) and span[0].form \
                and not (len(span) == 1 and len(span[0].form) < 2):
            # "Curtiz's films": the name is "Curtiz".
            out.append(_POSSESSIVE.sub("", text[span[0].start:span[-1].end]))
        i = end + 1
    return out


def passage_mentions(title: str, text: str, titles: TitleIndex | None = None) -> PassageMentions:
    """The entity a passage is about (its title) and the ones it mentions."""
    about = entity_key(NAME_TYPE, title_name(title))
    found = PassageMentions(about)
    for name in names(text, titles):
        key = entity_key(NAME_TYPE, name)
        if key != about and normalise_name(name):
            found.mentions.setdefault(key, name)
    for iso in dates(text):
        found.mentions.setdefault(entity_key(DATE_TYPE, iso), iso)
    return found


def passage_graph(passages: Iterable[tuple[str, str, str]], *, source: str, extractor: str = EXTRACTOR,
                  titles: TitleIndex | None = None) -> tuple[list[Node], list[Relationship]]:
    """Entity nodes and MENTIONS relationships for ``(doc key, title, text)`` passages.

    ``source`` formats each passage's source path from its doc key (``"dataset:2wiki/{id}"`` with
    ``{id}`` the part after ``doc:``). The title entity is joined with ``role = "about"``. Every
    passage that names an entity is one of its sources. ``titles`` defaults to these passages' own.
    """
    items = list(passages)
    titles = titles or TitleIndex(t for _, t, _ in items)
    entities: dict[str, Node] = {}
    sources: dict[str, dict[str, None]] = {}
    rels: dict[tuple[str, str, str], Relationship] = {}
    for doc, title, text in items:
        prov = Provenance(source_path=source.format(id=doc.partition(":")[2]), extractor=extractor,
                          extractor_version=EXTRACTOR_VERSION)
        found = passage_mentions(title, text, titles)
        name = title_name(title)
        pairs = [(found.about, name, NAME_TYPE, "about")]
        pairs += [(key, written, key.split(":", 2)[1], "mention") for key, written in found.mentions.items()]
        for key, written, etype, role in pairs:
            if key not in entities:
                props: dict = {"entity_type": etype}
                entities[key] = Node(key, written, prov, props=props)
            if role == "about" and title != name:
                aliases = entities[key].props.setdefault("aliases", [])
                if title not in aliases:
                    aliases.append(title)
            sources.setdefault(key, {})[prov.source_path] = None
            ident = (doc, RelType.MENTIONS.value, key)
            if ident not in rels:
                rels[ident] = Relationship(doc, RelType.MENTIONS, key, prov,
                                           props={"role": role} if role == "about" else {})
    for key, node in entities.items():
        node.sources = tuple(sources[key])
    return list(entities.values()), list(rels.values())


__all__ = ["DATE_TYPE", "EXTRACTOR", "NAME_TYPE", "PassageMentions", "TitleIndex", "dates", "match_form",
           "names", "passage_graph", "passage_mentions", "title_name"]
