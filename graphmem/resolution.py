"""Entity resolution: one node per thing, however the sources spell it.

Extractors write an entity node per spelling they meet ("Postgres" in one document, "PostgreSQL"
in another, "psql" in a commit). :func:`resolve_entities` finds the nodes that name the same thing
and merges each group into one survivor, in stages from the surest to the loosest:

1. **exact** - the same name once case, accents, punctuation, spacing and camel case are set aside
   ("auth-service", "auth service", "AuthService"), and company or service suffixes dropped
   ("Apple Inc." / "Apple", "billing service" / "billing");
2. **alias** - a known alias table ("Postgres" / "PostgreSQL" / "psql", "k8s" / "Kubernetes", and
   the technology gazetteer of :mod:`extractors.text`);
3. **acronym** - an all-capitals name that spells the initials of exactly one longer name
   ("AWS" / "Amazon Web Services");
4. **person** - people's name variants ("J. Smith" / "John Smith" / "Smith, John", "Bob" for
   "Robert"), unless an initial fits several people;
5. **fuzzy** - misspellings (rapidfuzz ratio), only between names of six or more letters, with the
   same first letter, the same numbers and Roman numerals ("Python 2" is not "Python 3", "Lothair I"
   not "Lothair II"), and word by word explained by typos ("billing service" is not "billing worker");
6. **embedding** - cosine similarity of the names' vectors above :data:`EMBED_THRESHOLD` (only when an
   embedder is given), under the same number guards.

A group never joins two nodes whose entity types say they are different kinds of thing (a person
and a company); untyped entities (``concept``) join any. Entities that name a service, team or
person already in the graph are merged into that node ("billing service" -> ``service:billing``)
when their type agrees, so documents that mention them point at the service itself; an untyped
entity that merely spells the name is linked to it instead (``RELATED_TO {predicate: "names"}``),
as is an entity that names exactly one code symbol.

A merge keeps everything: the survivor gains the merged nodes' names (``aliases``), keys
(``merged_from``) and sources, and a copy of their open relationships; the merged nodes and those
relationships are *closed* (``valid_to``), not deleted, so questions about an earlier time still see
them. Each merge is recorded in the project's meta data (a :class:`MergeRecord`) and
:func:`unmerge` / :func:`undo_last` undo it exactly, reopening the merged nodes with their
relationships and taking back what the survivor gained; an undone pair is kept apart in later runs.

Resolution writes no chunks, so the indexes need no sync afterwards.
"""

from __future__ import annotations

import itertools
import json
import re
import time
import unicodedata
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from graphmem.errors import ModelError
from graphmem.model import (
    ORG_KINDS,
    Node,
    NodeKind,
    Provenance,
    Relationship,
    RelType,
    check_relationship,
    now_iso,
)
from graphmem.stores.base import NAMES_STAMP, GraphStore

if TYPE_CHECKING:
    from graphmem.retrieval.embed import Embedder

EXTRACTOR = "resolution"
EXTRACTOR_VERSION = "1"

# Fuzzy matching (rapidfuzz ``ratio``, 0-100). Measured on tests/fixtures/entity_duplicates.json:
# misspellings of one letter in names of 6-13 letters score 88-97; different words of similar
# spelling ("smith"/"smyth" 80, "maria"/"mario" 80) stay below the per-word floor.
FUZZY_CUTOFF = 88.0
WORD_TYPO = 85.0  # every word of the two names must be at least this close
GIVEN_NAME_TYPO = 90.0  # people's first names are short: "Jon" / "John" (86) may be two people
FUZZY_MIN_LENGTH = 6
ACRONYM_MIN_LENGTH = 3  # "US", "AD", "BC" have too many expansions; two-letter ones come from the alias table
# Cosine similarity of name vectors (the default embedder, bge-small-en-v1.5) above which two names are merged
# (under the number, type and person guards): the highest threshold that reaches the best recall on
# tests/fixtures/entity_duplicates.json before precision falls (the curve is in the README, "Entity resolution").
EMBED_THRESHOLD = 0.92
MAX_CONFLICT_PAIRS = 10_000  # pairs checked before uniting two groups (groups are small in practice)

META_ACTIVE = "resolution.active"
META_RECORD = "resolution.merge."
META_APART = "resolution.apart"

GENERIC_TYPES = frozenset({"", "concept", "entity", "other", "unknown", "misc", "thing", "term", "name"})
_FAMILIES: dict[str, tuple[str, ...]] = {
    "technology": ("technology", "tool", "framework", "library", "language", "programming language", "database",
                   "datastore", "software", "product", "platform", "protocol", "format", "standard", "cloud"),
    "organization": ("organization", "organisation", "company", "org", "vendor", "business", "institution"),
    "person": ("person", "people", "engineer", "author", "user", "human", "developer"),
    "service": ("service", "system", "component", "application", "app", "microservice", "api", "module"),
    "team": ("team", "group", "squad", "department"),
    "place": ("place", "location", "city", "country", "region", "gpe"),
    "date": ("date", "time", "year", "period"),
}
FAMILY_OF = {t: fam for fam, types in _FAMILIES.items() for t in types}
# A suffix that says an untyped name means an organisation node ("payments team").
_ORG_SUFFIX = {"service": ("service", "microservice", "server"), "team": ("team", "squad")}

# Words dropped before comparing: company forms, ".com", the ".js" of JavaScript libraries.
_DROP_TRAILING = frozenset({"inc", "incorporated", "corp", "corporation", "ltd", "limited", "llc", "co", "company",
                            "plc", "gmbh", "ag", "com", "js"})
_ABBREVIATIONS = {"svc": "service", "svcs": "services"}  # "auth-svc" is "auth service"
_DROP_LEADING = frozenset({"the", "apache"})  # "Apache Cassandra" is Cassandra
_ACRONYM_SKIP = frozenset({"of", "and", "the", "for", "in", "to", "a", "an", "at", "by", "de"})
_ROMAN = frozenset({"i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii", "xiii", "xiv", "xv"})

# Names that mean the same thing without sharing letters. Each group lists spellings as written.
ALIAS_GROUPS: tuple[tuple[str, ...], ...] = (
    ("PostgreSQL", "Postgres", "psql", "pgsql", "Postgre"),
    ("Kubernetes", "k8s", "kube"),
    ("Amazon Web Services", "AWS"),
    ("Google Cloud Platform", "GCP", "Google Cloud"),
    ("Microsoft Azure", "Azure"),
    ("JavaScript", "JS", "ECMAScript"),
    ("TypeScript", "TS"),
    ("Node.js", "Node"),
    ("MongoDB", "Mongo"),
    ("Elasticsearch", "Elastic Search"),
    ("Microsoft SQL Server", "SQL Server", "MSSQL", "MS SQL"),
    ("OpenTelemetry", "OTel"),
    ("GitHub Actions", "GH Actions"),
    ("Golang", "Go lang"),
    ("United States", "US", "USA", "U.S.", "U.S.A.", "United States of America"),
    ("United Kingdom", "UK", "U.K."),
)
# Pairs that rules would join but are different things.
DISTINCT: tuple[tuple[str, str], ...] = (("Angular", "AngularJS"), ("Java", "JavaScript"))
NICKNAMES: dict[str, str] = {
    "bob": "robert", "rob": "robert", "bobby": "robert", "bill": "william", "will": "william", "liam": "william",
    "jim": "james", "jimmy": "james", "mike": "michael", "mick": "michael", "liz": "elizabeth", "beth": "elizabeth",
    "kate": "katherine", "kathy": "katherine", "katie": "katherine", "tom": "thomas", "dave": "david",
    "dan": "daniel", "danny": "daniel", "alex": "alexander", "chris": "christopher", "sam": "samuel",
    "joe": "joseph", "jon": "jonathan", "ben": "benjamin", "nick": "nicholas", "matt": "matthew",
    "steve": "steven", "tony": "anthony", "rick": "richard", "dick": "richard", "ed": "edward", "ted": "edward",
    "andy": "andrew", "pat": "patricia", "sue": "susan", "jen": "jennifer", "jenny": "jennifer",
}


# --- names --------------------------------------------------------------------------------------


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_INITIAL = re.compile(r"^[A-Z]\.?$|^[A-Z]\.-?[A-Z]\.?$")
_PERSON_WORD = re.compile(r"^[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)*$|^(?:O'|Mc|Mac)[A-Z][a-z]+$")


def name_words(name: str) -> list[str]:
    """A name's words, lower case: camel case and punctuation split them ("AuthService" ->
    ["auth", "service"], "auth-service" and "auth_service" alike)."""
    folded = _fold(name)
    folded = re.sub(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])", "", folded)  # "Python3" stays one word
    return [_ABBREVIATIONS.get(w, w) for w in re.split(r"[^a-z0-9]+", _CAMEL.sub(" ", folded).lower()) if w]


def _core(words: list[str]) -> list[str]:
    out = list(words)
    while len(out) > 1 and out[0] in _DROP_LEADING:
        out = out[1:]
    while len(out) > 1 and out[-1] in _DROP_TRAILING:
        out = out[:-1]
    return out


@dataclass(slots=True)
class NameForm:
    """One spelling, parsed once for every stage."""

    text: str
    words: list[str]
    compact: str  # the words run together: "authservice"
    key: str  # the compact form without company / service suffixes: "auth"
    numbers: tuple[str, ...]
    romans: tuple[str, ...]
    acronym: str | None  # "aws" when the name is written as an acronym
    initials: tuple[str, ...]  # initials of a multi-word name ("aws" for Amazon Web Services)
    person: tuple[str, tuple[str, ...], str] | None  # (first, middles, last) of a person-like name

    @classmethod
    def parse(cls, text: str) -> NameForm:
        words = name_words(text)
        core = _core(words)
        compact, key = "".join(words), "".join(core)
        # Roman numerals count only as a name's last word ("Lothair II", "World War I").
        romans = (words[-1],) if len(words) > 1 and words[-1] in _ROMAN else ()
        raw = re.sub(r"[.&]", "", _fold(text).strip())
        acronym = raw.lower() if (ACRONYM_MIN_LENGTH <= len(raw) <= 6 and raw.isalpha() and raw.isupper()) else None
        initials: tuple[str, ...] = ()
        if len(core) >= 2:
            every = "".join(w[0] for w in core)
            some = "".join(w[0] for w in core if w not in _ACRONYM_SKIP)
            initials = tuple(dict.fromkeys(i for i in (every, some) if len(i) >= ACRONYM_MIN_LENGTH))
        return cls(text, words, compact, key or compact, tuple(re.findall(r"\d+", _fold(text))), romans,
                   acronym, initials, _person(text))


def _person(text: str) -> tuple[str, tuple[str, ...], str] | None:
    """``(first, middles, last)`` of a name shaped like a person's ("John Smith", "J. Smith",
    "Smith, John", "Priya S. Patel"); first and middles may be initials (one letter)."""
    folded = _fold(text).strip()
    if folded.count(",") == 1:
        last, first = (p.strip() for p in folded.split(","))
        folded = f"{first} {last}"
    parts = folded.split()
    if not 2 <= len(parts) <= 4 or not _PERSON_WORD.match(parts[-1]):
        return None
    given = parts[:-1]
    if not all(_PERSON_WORD.match(p) or _INITIAL.match(p) for p in given):
        return None
    first, *middles = [re.sub(r"[^a-z]", "", p.lower()) for p in given]
    if not first:
        return None
    return first, tuple(m for m in middles if m), re.sub(r"[^a-z]", "", parts[-1].lower())


def _given_match(a: str, b: str) -> bool:
    """Whether two first names can be one person's: equal, a nickname ("Bob" / "Robert"), or an
    initial of the other (of its full form too: "R." for "Bob")."""
    if len(a) == 1 or len(b) == 1:
        initial, full = (a, b) if len(a) == 1 else (b, a)
        return initial[0] in (full[0], NICKNAMES.get(full, full)[0])
    return NICKNAMES.get(a, a) == NICKNAMES.get(b, b)


def _persons_match(p: tuple[str, tuple[str, ...], str], q: tuple[str, tuple[str, ...], str]) -> bool:
    """Whether two parsed names are one person's, spelt the same (up to initials and nicknames)."""
    if p[2] != q[2] or not _given_match(p[0], q[0]):
        return False
    return _middles_match(p[1], q[1])


def _middles_match(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Middle names agree: the same (initials standing for names), or only initials on one side
    ("Priya S. Patel" / "Priya Patel"). A whole middle word on one side only is a different name
    ("World Trade Organization" / "World Tourism Organization", "Olympic Winter Games")."""
    if not a or not b:
        return all(len(m) == 1 for m in a + b)
    return len(a) == len(b) and all(_given_match(x, y) for x, y in zip(a, b))


def _persons_compatible(p: tuple[str, tuple[str, ...], str], q: tuple[str, tuple[str, ...], str]) -> bool:
    """Whether two parsed names may be one person's once a misspelt first name is allowed for
    ("Kathrine" / "Katherine"); "Jane" / "John" and "Smith" / "Smyth" stay apart."""
    from rapidfuzz import fuzz

    if _persons_match(p, q):
        return True
    return p[2] == q[2] and len(p[0]) > 1 and len(q[0]) > 1 and fuzz.ratio(p[0], q[0]) >= GIVEN_NAME_TYPO \
        and _middles_match(p[1], q[1])


_ALIAS_INDEX: dict[str, int] = {}
for _i, _group in enumerate(ALIAS_GROUPS):
    for _spelling in _group:
        _ALIAS_INDEX.setdefault(NameForm.parse(_spelling).key, _i)
try:  # the technology gazetteer the document extractors use (canonical name and other spellings)
    from extractors.text import TECHNOLOGIES as _TECHNOLOGIES
except ImportError:  # pragma: no cover - extractors are installed with graphmem
    _TECHNOLOGIES = ()
for _j, (_canonical, _others, _case) in enumerate(_TECHNOLOGIES):
    _keys = [NameForm.parse(s).key for s in (_canonical, *_others)]
    _gid = next((_ALIAS_INDEX[k] for k in _keys if k in _ALIAS_INDEX), len(ALIAS_GROUPS) + _j)
    for _k in _keys:
        _ALIAS_INDEX.setdefault(_k, _gid)
_DISTINCT = {frozenset(NameForm.parse(n).key for n in pair) for pair in DISTINCT}
_CANONICAL = {NameForm.parse(g[0]).key for g in ALIAS_GROUPS} | {NameForm.parse(t[0]).key for t in _TECHNOLOGIES}


# --- clustering ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Item:
    """One thing to cluster: a node (its name and aliases) or a bare name."""

    ident: str
    forms: list[NameForm]
    family: str | None = None  # None: untyped, joins any family
    org: bool = False  # a service, team or person node: never merged away, never two in a group
    suffixed: str | None = None  # the organisation family an untyped name's suffix points at
    sources: frozenset[str] = frozenset()  # where a node was read (none for a bare name)

    @property
    def form(self) -> NameForm:
        return self.forms[0]


class _Groups:
    """Union-find over items; uniting two groups is refused when any pair of their members conflicts."""

    def __init__(self, items: list[_Item], apart: set[frozenset[str]]) -> None:
        self.items = items
        self.parent = list(range(len(items)))
        self.members: dict[int, list[int]] = {i: [i] for i in range(len(items))}
        self.stages: dict[int, set[str]] = {i: set() for i in range(len(items))}
        self.apart = apart

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def unite(self, a: int, b: int, stage: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        ma, mb = self.members[ra], self.members[rb]
        strong = stage in ("exact", "alias")
        if self._conflict(self.items[a], self.items[b], strong, direct=True):
            return False
        if len(ma) * len(mb) > MAX_CONFLICT_PAIRS or any(self._conflict(self.items[x], self.items[y], strong)
                                                         for x in ma for y in mb):
            return False
        if len(ma) < len(mb):
            ra, rb, ma, mb = rb, ra, mb, ma
        self.parent[rb] = ra
        ma.extend(mb)
        self.stages[ra] |= self.stages.pop(rb) | {stage}
        del self.members[rb]
        return True

    def _conflict(self, x: _Item, y: _Item, strong: bool, direct: bool = False) -> bool:
        """Whether two items must stay apart. ``strong`` evidence (the same name, a known alias)
        overrides numbers and the person-name shape ("k8s"; "Google Cloud" looks like a person's
        name too). The two names a union is made on (``direct``) must carry the same numbers
        ("Python" is not "Python 3"); the rest of their groups must not carry different ones (an
        alias "k8s" does not keep "Kubernets" out of the Kubernetes group)."""
        if frozenset((x.ident, y.ident)) in self.apart:
            return True
        if x.org and y.org:
            return True
        for org, other in ((x, y), (y, x)):
            # An organisation node takes entities of its own family, or untyped ones whose suffix
            # says so ("payments team"); a bare untyped "Billing" is linked, not merged.
            if org.org and not other.org and other.family != org.family \
                    and not (other.family is None and other.suffixed == org.family):
                return True
        if x.family and y.family and x.family != y.family:
            return True
        fx, fy = x.form, y.form
        if frozenset((fx.key, fy.key)) in _DISTINCT:
            return True
        if strong:  # the same letters, or a known alias ("k8s"): numbers and name shapes do not matter
            return False
        for mine, theirs in ((fx.numbers, fy.numbers), (fx.romans, fy.romans)):
            if mine != theirs and (direct or (mine and theirs)):
                return True
        return bool(fx.person and fy.person and not _persons_compatible(fx.person, fy.person))

    def groups(self) -> list[tuple[list[int], set[str]]]:
        return [(sorted(m), self.stages[r]) for r, m in self.members.items()]


def _stage_exact_and_alias(g: _Groups) -> None:
    first: dict[str, int] = {}
    alias: dict[int, int] = {}
    for i, item in enumerate(g.items):
        for form in item.forms:
            for k in dict.fromkeys((form.key, form.compact)):
                if k in first:
                    g.unite(first[k], i, "exact")
                else:
                    first[k] = i
            gid = _ALIAS_INDEX.get(form.key, _ALIAS_INDEX.get(form.compact))
            if gid is not None:
                if gid in alias:
                    g.unite(alias[gid], i, "alias")
                else:
                    alias[gid] = i


def _stage_acronyms(g: _Groups) -> None:
    expansions: dict[str, set[int]] = {}
    for i, item in enumerate(g.items):
        for form in item.forms:
            for initials in form.initials:
                expansions.setdefault(initials, set()).add(i)
    for i, item in enumerate(g.items):
        for form in item.forms:
            if not form.acronym:
                continue
            own = g.members[g.find(i)]
            if any(form.acronym in f.initials for j in own for f in g.items[j].forms):
                continue  # already with its expansion ("USA" and "United States of America")
            # A node's acronym needs a source that also spells the expansion out ("International
            # Monetary Fund (IMF)"): across a corpus, "RIT" is not "Religion in Turkey" just
            # because nothing else has those initials.
            roots = {g.find(j) for j in expansions.get(form.acronym, ()) if g.find(j) != g.find(i)
                     and (not item.sources or item.sources & g.items[j].sources)}
            if len(roots) == 1:  # one expansion only: "ABC" with several is left alone
                g.unite(i, next(iter(roots)), "acronym")


def _people(g: _Groups) -> list[list[tuple[int, tuple[str, tuple[str, ...], str]]]]:
    by_last: dict[str, list[tuple[int, tuple[str, tuple[str, ...], str]]]] = {}
    for i, item in enumerate(g.items):
        p = item.form.person
        if p:
            by_last.setdefault(p[2], []).append((i, p))
    return [people for people in by_last.values() if len(people) > 1]


def _stage_persons(g: _Groups) -> None:
    """Full first names that are equal or nicknames ("Bob" / "Robert"), same last name."""
    for people in _people(g):
        full = [(i, p) for i, p in people if len(p[0]) > 1]
        for i, p in full:
            for j, q in full:
                if i < j and _persons_match(p, q):
                    g.unite(i, j, "person")


def _stage_initials(g: _Groups) -> None:
    """An initial ("J. Smith") joins the one person it fits, if only one: run last, once the
    spellings of each full name are grouped."""
    for people in _people(g):
        full = [(i, p) for i, p in people if len(p[0]) > 1]
        for i, p in people:
            if len(p[0]) > 1:
                continue
            fits = {g.find(j) for j, q in full if _persons_match(p, q)}
            if len(fits) == 1:
                g.unite(i, next(iter(fits)), "person")


def _word_typo(x: str, y: str, floor: float = WORD_TYPO) -> bool:
    """One word misspelt as the other. A word that only gains an ending is another word, bar a
    plural ("German" / "Germany", "Italic" / "Italica"; "Olympic" / "Olympics" is a typo)."""
    from rapidfuzz import fuzz

    if x == y:
        return True
    short, long = sorted((x, y), key=len)
    if long.startswith(short) and long[len(short):] not in ("s", "es"):
        return False
    return fuzz.ratio(x, y) >= floor


def _typo_explained(a: NameForm, b: NameForm) -> bool:
    """Whether two names differ only by typos: word by word when they have as many words, else as
    one run of letters - unless one name is the other plus whole words ("European Union law")."""
    if a.person and b.person:
        return a.person[2] != b.person[2] and _word_typo(a.person[2], b.person[2]) and a.person[0] == b.person[0] \
            or a.person[2] == b.person[2] and _word_typo(a.person[0], b.person[0], GIVEN_NAME_TYPO)
    if len(a.words) == len(b.words) > 1:
        return all(_word_typo(x, y) for x, y in zip(a.words, b.words))
    short, long = sorted((a.words, b.words), key=len)
    if any(long[i:i + len(short)] == short for i in range(len(long) - len(short) + 1)):
        return False
    return _word_typo(a.compact, b.compact)


def _stage_fuzzy(g: _Groups, cutoff: float) -> None:
    from rapidfuzz import fuzz, process

    blocks: dict[str, list[tuple[int, NameForm]]] = {}
    for i, item in enumerate(g.items):
        for form in item.forms:
            if len(form.compact) >= FUZZY_MIN_LENGTH:
                blocks.setdefault(form.compact[0], []).append((i, form))
    for entries in blocks.values():
        if len(entries) < 2:
            continue
        texts = [f.compact for _, f in entries]
        scores = process.cdist(texts, texts, scorer=fuzz.ratio, score_cutoff=cutoff, dtype=np.uint8, workers=1)
        rows, cols = np.nonzero(scores)
        for a, b in zip(rows.tolist(), cols.tolist()):
            if a >= b:
                continue
            (i, fa), (j, fb) = entries[a], entries[b]
            if g.find(i) != g.find(j) and _typo_explained(fa, fb):
                g.unite(i, j, "fuzzy")


def _stage_embedding(g: _Groups, embedder: Embedder, threshold: float) -> None:
    texts = [item.form.text for item in g.items]
    if len(texts) < 2:
        return
    vectors = np.asarray(embedder.encode(texts), dtype=np.float32)
    for start in range(0, len(texts), 2048):
        sims = vectors[start:start + 2048] @ vectors.T
        rows, cols = np.nonzero(sims >= threshold)
        for a, b in zip((rows + start).tolist(), cols.tolist()):
            if a < b and min(len(g.items[a].form.compact), len(g.items[b].form.compact)) >= 3:
                g.unite(a, b, "embedding")


def _cluster(items: list[_Item], *, embedder: Embedder | None, threshold: float | None,
             fuzzy_cutoff: float | None, apart: set[frozenset[str]] | None = None,
             ) -> list[tuple[list[int], set[str]]]:
    g = _Groups(items, apart or set())
    _stage_exact_and_alias(g)
    _stage_acronyms(g)
    _stage_persons(g)
    _stage_fuzzy(g, FUZZY_CUTOFF if fuzzy_cutoff is None else fuzzy_cutoff)
    if embedder is not None:
        _stage_embedding(g, embedder, EMBED_THRESHOLD if threshold is None else threshold)
    _stage_initials(g)
    return g.groups()


def cluster_names(names: Iterable[str], *, embedder: Embedder | None = None, threshold: float | None = None,
                  fuzzy_cutoff: float | None = None) -> list[set[str]]:
    """Group spellings that name the same thing (every stage but type checks; see the module
    docstring). Every distinct name is in exactly one group; groups come in order of first name."""
    distinct = list(dict.fromkeys(n for n in names if n and n.strip()))
    items = [_Item(n, [NameForm.parse(n)]) for n in distinct]
    groups = _cluster(items, embedder=embedder, threshold=threshold, fuzzy_cutoff=fuzzy_cutoff)
    return [{distinct[i] for i in members} for members, _ in sorted(groups, key=lambda g: g[0][0])]


# --- records ------------------------------------------------------------------------------------


def _node_dict(n: Node) -> dict[str, Any]:
    return {"key": n.key, "name": n.name, "provenance": n.provenance.as_props(), "props": n.props,
            "valid_from": n.valid_from, "valid_to": n.valid_to, "sources": list(n.sources)}


def _node_of(d: dict[str, Any]) -> Node:
    return Node(d["key"], d["name"], Provenance.from_props(d["provenance"]), dict(d["props"]), d["valid_from"],
                d["valid_to"], tuple(d["sources"]))


def _rel_dict(r: Relationship) -> dict[str, Any]:
    return {"src": r.src, "type": r.type.value, "dst": r.dst, "provenance": r.provenance.as_props(),
            "props": r.props, "valid_from": r.valid_from, "valid_to": r.valid_to, "sources": list(r.sources)}


def _rel_of(d: dict[str, Any]) -> Relationship:
    return Relationship(d["src"], RelType(d["type"]), d["dst"], Provenance.from_props(d["provenance"]),
                        dict(d["props"]), d["valid_from"], d["valid_to"], tuple(d["sources"]))


@dataclass(slots=True)
class MergeRecord:
    """What one merge (or one set of links) changed, enough to undo it exactly.

    ``survivor_before`` and ``survivor_rels_before`` are the survivor and those of its relationships
    the merge wrote into, as they were; ``merged`` and ``merged_rels`` the merged nodes and the open
    relationships the merge closed; ``created`` the relationships it created."""

    id: str
    at: str
    stage: str
    survivor: str | None
    survivor_before: dict[str, Any] | None = None
    survivor_rels_before: list[dict[str, Any]] = field(default_factory=list)
    merged: list[dict[str, Any]] = field(default_factory=list)
    merged_rels: list[dict[str, Any]] = field(default_factory=list)
    created: list[list[str]] = field(default_factory=list)
    added_sources: list[str] = field(default_factory=list)

    @property
    def merged_keys(self) -> list[str]:
        return [d["key"] for d in self.merged]

    def to_json(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__slots__}, separators=(",", ":"))  # type: ignore[attr-defined]

    @classmethod
    def from_json(cls, text: str) -> MergeRecord:
        return cls(**json.loads(text))


@dataclass(slots=True)
class ResolutionReport:
    """What :func:`resolve_entities` did."""

    entities: int = 0
    merges: int = 0
    merged_nodes: int = 0
    links: int = 0
    by_stage: dict[str, int] = field(default_factory=dict)
    skipped: int = 0  # groups left unmerged (a relationship the survivor's kind cannot take)
    merge_ids: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"entities": self.entities, "merges": self.merges, "merged_nodes": self.merged_nodes,
                "links": self.links, "by_stage": dict(self.by_stage), "skipped": self.skipped,
                "merge_ids": list(self.merge_ids), "seconds": round(self.seconds, 2)}


def _active(store: GraphStore) -> list[dict[str, Any]]:
    raw = store.get_meta(META_ACTIVE)
    return json.loads(raw) if raw else []


def _apart(store: GraphStore) -> set[frozenset[str]]:
    raw = store.get_meta(META_APART)
    return {frozenset(p) for p in json.loads(raw)} if raw else set()


def merge_history(store: GraphStore) -> list[dict[str, Any]]:
    """The merges in force, oldest first: ``{"id", "stage", "survivor", "merged", "at"}``."""
    return _active(store)


def get_record(store: GraphStore, merge_id: str) -> MergeRecord | None:
    raw = store.get_meta(META_RECORD + merge_id)
    return MergeRecord.from_json(raw) if raw else None


# --- resolving ----------------------------------------------------------------------------------


def _family(node: Node) -> str | None:
    if node.kind in ORG_KINDS:
        return ORG_KINDS[node.kind]
    etype = str(node.props.get("entity_type") or node.key.split(":", 2)[1]).strip().lower()
    if etype in GENERIC_TYPES:
        return None
    return FAMILY_OF.get(etype, etype)


def _item(node: Node) -> _Item:
    aliases = node.props.get("aliases")
    names = [node.name or node.key.split(":")[-1]]
    if isinstance(aliases, list):
        names += [a for a in aliases if isinstance(a, str) and a.strip()]
    if node.kind is NodeKind.TEAM:  # "payments team" names the team "payments"
        names.append(f"{names[0]} team")
    if node.kind is NodeKind.SERVICE:  # "billing service", "billing-svc" name the service "billing"
        names.append(f"{names[0]} service")
    forms = [NameForm.parse(n) for n in dict.fromkeys(names)]
    org = node.kind in ORG_KINDS
    suffixed = None
    words = forms[0].words
    for fam, suffixes in _ORG_SUFFIX.items():
        if len(words) > 1 and words[-1] in suffixes:
            suffixed = fam
    return _Item(node.key, forms, _family(node), org, suffixed, frozenset(node.sources))


def _survivor(members: list[Node], degree: dict[str, int]) -> Node:
    """An organisation node if there is one; else a typed entity, one spelt as the alias table's
    canonical name ("PostgreSQL"), the most connected, the most sourced, one spelt out rather than
    an acronym ("International Monetary Fund" over "IMF")."""
    def rank(n: Node) -> tuple:
        form = NameForm.parse(n.name or n.key)
        return (n.kind in ORG_KINDS, _family(n) is not None, form.key in _CANONICAL, degree.get(n.key, 0),
                len(n.sources), form.acronym is None, len(form.words), -len(n.key), n.key)

    return max(members, key=rank)


_STAGES = ("exact", "alias", "acronym", "person", "fuzzy", "embedding")


def _str_list(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _code_shaped(name: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?", name)) and (
        "_" in name or "." in name or name.endswith("()")
        or (any(c.isupper() for c in name[1:]) and any(c.islower() for c in name)))


def resolve_entities(store: GraphStore, *, embedder: Embedder | None = None, threshold: float | None = None,
                     fuzzy_cutoff: float | None = None, link: bool = True) -> ResolutionReport:
    """Merge the project's duplicate entity nodes and link entities to the services, teams, people
    and code symbols they name (see the module docstring). Safe to run again: what is resolved
    stays resolved, new spellings join their group's survivor."""
    started = time.perf_counter()
    at = now_iso()
    report = ResolutionReport()
    entities = list(store.iter_nodes([NodeKind.ENTITY]))
    report.entities = len(entities)
    if not entities:
        return report
    org_nodes = list(store.iter_nodes(list(ORG_KINDS)))
    nodes = entities + org_nodes
    by_key = {n.key: n for n in nodes}
    items = [_item(n) for n in nodes]
    groups = _cluster(items, embedder=embedder, threshold=threshold, fuzzy_cutoff=fuzzy_cutoff,
                      apart=_apart(store))
    merging = [(members, stages) for members, stages in groups
               if len(members) > 1 and sum(not items[i].org for i in members) >= 1]
    keys = sorted({items[i].ident for members, _ in merging for i in members})
    rels = store.get_relationships(keys) if keys else []
    degree: dict[str, int] = {}
    touching: dict[str, list[Relationship]] = {}
    for r in rels:
        for end in {r.src, r.dst}:
            degree[end] = degree.get(end, 0) + 1
            touching.setdefault(end, []).append(r)
    existing = {r.ident: r for r in rels}
    plan: list[tuple[Node, list[Node], str]] = []
    for members, stages in merging:
        group = [by_key[items[i].ident] for i in members]
        survivor = _survivor(group, degree)
        dups = [n for n in group if n.key != survivor.key and n.kind is NodeKind.ENTITY]
        if dups:
            plan.append((survivor, dups, max(stages, key=_STAGES.index) if stages else "exact"))
    mapping = {d.key: survivor.key for survivor, dups, _ in plan for d in dups}
    # A group whose relationships the survivor's kind cannot take stays unmerged. Endpoint rules
    # hold end by end, so dropping a group (its ends become the entities they were) cannot make
    # another group's relationships invalid: one pass settles it.
    valid = []
    for survivor, dups, stage in plan:
        try:
            for d in dups:
                for r in touching.get(d.key, []):
                    src, dst = mapping.get(r.src, r.src), mapping.get(r.dst, r.dst)
                    if src != dst:
                        check_relationship(Relationship(src, r.type, dst, r.provenance))
            valid.append((survivor, dups, stage))
        except ModelError:
            report.skipped += 1
            for d in dups:
                mapping.pop(d.key, None)

    survivors: list[Node] = []
    images: dict[tuple[str, str, str], Relationship] = {}
    closing: list[Relationship] = []
    closed_nodes: list[Node] = []
    kept_records: list[MergeRecord] = []
    for survivor, dups, stage in valid:
        moved = {r.ident: r for d in dups for r in touching.get(d.key, [])}
        mine: list[tuple[str, str, str]] = []
        for r in moved.values():
            src, dst = mapping.get(r.src, r.src), mapping.get(r.dst, r.dst)
            if src == dst:
                continue  # between two spellings of the same thing
            image = Relationship(src, r.type, dst, r.provenance, dict(r.props), None, None, r.sources)
            if image.ident in images:  # several spellings said it: one relationship, every source
                prior = images[image.ident]
                image.props = {**prior.props, **image.props}
                image.sources = tuple(dict.fromkeys(prior.sources + image.sources))
            images[image.ident] = image
            mine.append(image.ident)
        aliases = _str_list(survivor.props.get("aliases"))
        for d in dups:
            for name in [d.name, *_str_list(d.props.get("aliases"))]:
                if name and name != survivor.name and name not in aliases:
                    aliases.append(name)
        merged_from = _str_list(survivor.props.get("merged_from"))
        merged_from += [d.key for d in dups if d.key not in merged_from]
        added = list(dict.fromkeys(s for d in dups for s in d.sources if s not in survivor.sources))
        rec = MergeRecord(f"m-{uuid.uuid4().hex[:12]}", at, stage, survivor.key,
                          survivor_before=_node_dict(survivor),
                          survivor_rels_before=[_rel_dict(existing[i]) for i in dict.fromkeys(mine) if i in existing],
                          merged=[_node_dict(d) for d in dups], merged_rels=[_rel_dict(r) for r in moved.values()],
                          created=[list(i) for i in dict.fromkeys(mine) if i not in existing], added_sources=added)
        survivors.append(Node(survivor.key, survivor.name, survivor.provenance,
                              {"aliases": aliases, "merged_from": merged_from}, survivor.valid_from, None,
                              tuple(survivor.sources) + tuple(added)))
        closing += [Relationship(r.src, r.type, r.dst, r.provenance, dict(r.props), r.valid_from, at, r.sources)
                    for r in moved.values()]
        closed_nodes += [Node(d.key, d.name, d.provenance, dict(d.props), d.valid_from, at, d.sources)
                         for d in dups]
        kept_records.append(rec)
        report.merges += 1
        report.merged_nodes += len(dups)
        report.by_stage[stage] = report.by_stage.get(stage, 0) + 1

    link_record = _links(store, entities, org_nodes, groups, items, mapping, at) if link else None
    if link_record is not None:
        kept_records.append(link_record)
        report.links = len(link_record.created)
    if not kept_records:
        report.seconds = time.perf_counter() - started
        return report
    # The records go first: whatever happens to the writes after them, they say how to undo it.
    active = _active(store) + [{"id": r.id, "stage": r.stage, "survivor": r.survivor, "merged": r.merged_keys,
                                "at": r.at} for r in kept_records]
    store.set_meta({**{META_RECORD + r.id: r.to_json() for r in kept_records}, META_ACTIVE: json.dumps(active)})
    link_rels = [_rel_of(d) for d in (link_record.merged_rels if link_record else [])]
    # Survivors and copies first (every end still open), then the merged spellings' relationships
    # are closed, then the spellings themselves (a relationship cannot be written to a closed node).
    store.upsert(survivors, list(images.values()) + link_rels, at=at)
    store.upsert((), closing, at=at)
    store.upsert(closed_nodes, (), at=at)
    store.set_meta({NAMES_STAMP: now_iso()})
    report.merge_ids = [r.id for r in kept_records]
    report.seconds = time.perf_counter() - started
    return report


def _links(store: GraphStore, entities: list[Node], org_nodes: list[Node], groups: list[tuple[list[int], set[str]]],
           items: list[_Item], mapping: dict[str, str], at: str) -> MergeRecord | None:
    """``RELATED_TO {predicate: "names"}`` from entities (that stay) to the organisation node or
    the one code symbol their name spells, when they were not merged into it."""
    org_by_key: dict[str, list[Node]] = {}
    for n in org_nodes:
        org_by_key.setdefault(NameForm.parse(n.name).key, []).append(n)
    symbols: dict[str, list[str]] = {}
    if any(_code_shaped(e.name) for e in entities):
        for s in store.iter_nodes([NodeKind.SYMBOL]):
            qual = s.key.partition("::")[2]
            for name in {qual, qual.rsplit(".", 1)[-1]}:
                symbols.setdefault(name, []).append(s.key)
    grouped_with_org = {items[i].ident for members, _ in groups for i in members
                        if any(items[j].org for j in members)}
    created: list[Relationship] = []
    for e in entities:
        if e.key in mapping or e.key in grouped_with_org:
            continue
        targets = [n.key for n in org_by_key.get(NameForm.parse(e.name).key, [])]
        bare = e.name.strip("`").removesuffix("()")
        if _code_shaped(e.name) and len(symbols.get(bare, [])) == 1:
            targets.append(symbols[bare][0])
        for target in targets[:1] if len(targets) == 1 else []:
            prov = Provenance(source_path=e.provenance.source_path, extractor=EXTRACTOR,
                              extractor_version=EXTRACTOR_VERSION, confidence=0.8)
            created.append(Relationship(e.key, RelType.RELATED_TO, target, prov, {"predicate": "names"},
                                        sources=e.sources))
    existing = {r.ident for r in store.get_relationships([r.src for r in created])} if created else set()
    created = [r for r in created if r.ident not in existing]
    if not created:
        return None
    return MergeRecord(f"l-{uuid.uuid4().hex[:12]}", at, "link", None, merged_rels=[_rel_dict(r) for r in created],
                       created=[list(r.ident) for r in created])


# --- undoing ------------------------------------------------------------------------------------


def _resolve_chain(mapping: dict[str, str], key: str) -> str:
    seen = set()
    while key in mapping and key not in seen:
        seen.add(key)
        key = mapping[key]
    return key


def unmerge(store: GraphStore, merge_id: str, *, keep_apart: bool = True) -> list[str]:
    """Undo a merge (or a set of links) recorded by :func:`resolve_entities`; later merges that
    build on it are undone first. The merged nodes and their relationships are reopened as they
    were, the survivor loses the names, sources and relationships it gained, and with
    ``keep_apart`` later runs do not merge the pair again. Returns the undone ids, in order."""
    active = _active(store)
    ids = [a["id"] for a in active]
    if merge_id not in ids:
        raise ModelError(f"no merge {merge_id!r} in force (see graphmem.resolution.merge_history)")
    pos = ids.index(merge_id)
    first = active[pos]
    touched = {first["survivor"], *first["merged"]} - {None}
    chain = [first]
    for later in active[pos + 1:]:
        keys = {later["survivor"], *later["merged"]} - {None}
        if keys & touched:
            chain.append(later)
            touched |= keys
    done: list[str] = []
    for entry in reversed(chain):
        _undo(store, entry["id"], keep_apart=keep_apart)
        done.append(entry["id"])
    return done


def undo_last(store: GraphStore, *, keep_apart: bool = True) -> list[str]:
    """Undo the most recent merge in force (see :func:`unmerge`); ``[]`` when there is none."""
    active = _active(store)
    return unmerge(store, active[-1]["id"], keep_apart=keep_apart) if active else []


def _undo(store: GraphStore, merge_id: str, *, keep_apart: bool) -> None:
    rec = get_record(store, merge_id)
    active = [a for a in _active(store) if a["id"] != merge_id]
    if rec is None:
        store.set_meta({META_ACTIVE: json.dumps(active)})
        return
    at = now_iso()
    created = {tuple(i) for i in rec.created}
    if rec.survivor is None:  # links only: close them
        current = {r.ident: r for r in store.get_relationships(sorted({i[0] for i in created}))}
        store.upsert((), [Relationship(r.src, r.type, r.dst, r.provenance, r.props, r.valid_from, at, r.sources)
                          for i, r in current.items() if i in created], at=at)
    else:
        # Where each end of the merged spellings' relationships is now: with this merge in force
        # (the copies to take back) and without it (where to reopen them).
        others = {d: a["survivor"] for a in active for d in a["merged"]}
        merged_keys = set(rec.merged_keys)
        with_it = {**others, **{k: rec.survivor for k in merged_keys}}
        survivor = store.get_node(rec.survivor)
        if survivor is None:
            raise ModelError(f"merge {merge_id}: its survivor {rec.survivor} is gone; cannot undo")
        before = _node_of(rec.survivor_before or {})
        rels_before = {r.ident: r for r in map(_rel_of, rec.survivor_rels_before)}
        current = {r.ident: r for r in store.get_relationships([rec.survivor])}
        moved = list(map(_rel_of, rec.merged_rels))
        copies = {(_resolve_chain(with_it, r.src), r.type.value, _resolve_chain(with_it, r.dst)) for r in moved}
        writes: list[Relationship] = []
        rel_sources: dict[tuple[str, str, str], list[str]] = {}
        for ident in sorted(copies):
            now = current.get(ident)
            if now is None or ident[0] == ident[2]:
                continue
            old = rels_before.get(ident)
            if old is None:  # a copy the merge made: closed again
                writes.append(Relationship(now.src, now.type, now.dst, now.provenance, now.props, now.valid_from,
                                           at, now.sources))
            else:  # a relationship the merge wrote into: as it was
                props: dict[str, Any] = {k: None for k in now.props if k not in old.props}
                props.update(old.props)
                writes.append(Relationship(old.src, old.type, old.dst, old.provenance, props, old.valid_from,
                                           old.valid_to, old.sources))
                rel_sources[ident] = list(old.sources)
        for r in moved:  # the merged spellings' relationships: reopened (to where their other end is now)
            src = r.src if r.src in merged_keys else _resolve_chain(others, r.src)
            dst = r.dst if r.dst in merged_keys else _resolve_chain(others, r.dst)
            writes.append(Relationship(src, r.type, dst, r.provenance, r.props, r.valid_from, None, r.sources))
        props = {name: before.props.get(name) for name in ("aliases", "merged_from")}
        restored = Node(survivor.key, survivor.name, survivor.provenance, props, survivor.valid_from,
                        survivor.valid_to, survivor.sources)
        reopened = [Node(n.key, n.name, n.provenance, n.props, n.valid_from, None, n.sources)
                    for n in map(_node_of, rec.merged)]
        store.upsert([restored, *reopened], writes, at=at)
        sources = [s for s in survivor.sources if s not in rec.added_sources] or list(before.sources)
        store.set_sources({survivor.key: sources}, rel_sources)
    changes: dict[str, str | None] = {META_RECORD + merge_id: None, META_ACTIVE: json.dumps(active),
                                      NAMES_STAMP: now_iso()}
    if keep_apart and rec.survivor is not None:  # every pair of the group: it was wrong as a whole
        group = sorted({rec.survivor, *rec.merged_keys})
        apart = _apart(store) | {frozenset(p) for p in itertools.combinations(group, 2)}
        changes[META_APART] = json.dumps(sorted(sorted(p) for p in apart))
    store.set_meta(changes)


__all__ = [
    "ALIAS_GROUPS",
    "EMBED_THRESHOLD",
    "FUZZY_CUTOFF",
    "MergeRecord",
    "NameForm",
    "ResolutionReport",
    "cluster_names",
    "get_record",
    "merge_history",
    "name_words",
    "resolve_entities",
    "undo_last",
    "unmerge",
]


