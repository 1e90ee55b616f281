"""The names of a project's open nodes (and of its closed code, for questions about history), for
linking a question to them, and the word rules both sides share."""

from __future__ import annotations

import marshal
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from graphmem.model import CLASS_KINDS, Node, NodeKind, is_test_key
from graphmem.stores.base import GraphStore

CACHE_FORMAT = 12  # of Catalog.to_bytes: a saved catalog of another format is built again
FUZZY_KINDS = frozenset({NodeKind.SERVICE, NodeKind.TEAM, NodeKind.PERSON, NodeKind.ENTITY})
# Entity types that say nothing about what an entity is (open extraction, capitalised spans).
GENERIC_ENTITY_TYPES = frozenset({"concept", "entity", "other", "unknown", "misc", "thing"})

WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*[A-Za-z0-9_]|[A-Za-z0-9]")
IDENT_LIKE = re.compile(r"[a-z][A-Z]|_|\.|\(\)")
STOP = frozenset(["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "is", "are", "was", "were", "be", "been", "that", "which", "what", "who", "whom", "whose", "how", "why", "when", "where", "did", "do", "does", "has", "have", "had", "it", "its", "this", "these", "those", "all", "any", "me", "show", "list", "find"])


_DATE_PROPS = {NodeKind.INCIDENT: ("started_at", "date"), NodeKind.COMMIT: ("committed_at", "authored_at"),
               NodeKind.DECISION: ("date",), NodeKind.RELEASE: ("released_at",)}


def node_date(node: Node, kind: NodeKind | None = None) -> str | None:
    """When a dated node happened: an incident's start, a commit's time, a decision's date, a
    release's tagging (ISO).
    ``kind``: the node's kind, when the caller has it already."""
    p = node.props
    for name in _DATE_PROPS.get(kind or node.kind, ()):
        value = p.get(name)
        if isinstance(value, str) and value:
            return f"{value}T00:00:00.000000Z" if len(value) == 10 else value
    return None


def words_of(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@dataclass(slots=True)
class Catalog:
    """Names of the project's open nodes, for linking a question to them."""

    nodes: dict[str, tuple[NodeKind, str, str | None]] = field(default_factory=dict)  # key -> kind, name, date
    by_name: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    by_kind: dict[NodeKind, list[str]] = field(default_factory=dict)
    incidents_by_number: dict[int, str] = field(default_factory=dict)
    root_commits: set[str] = field(default_factory=set)  # commits without parents: they only create
    merge_commits: set[str] = field(default_factory=set)  # several parents: they bring others' changes in
    titles: list[tuple[str, set[str]]] = field(default_factory=list)  # title words, for fuzzy matching
    fuzzy_names: list[str] = field(default_factory=list)  # one-word names that misspellings may mean
    # The relationship types the project holds (open ones); None: not known, so none is ruled out.
    rel_types: frozenset[str] | None = None
    # When each piece of code began and (if it is gone) ended in the graph, and the commits made at
    # each moment: "which release removed X" is answered by the commit at X's end.
    lifetimes: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    commits_at: dict[str, list[str]] = field(default_factory=dict)
    # Names of code that no longer exists (closed nodes, also in ``nodes`` but in no other map),
    # linked only by questions about a history (added, changed, removed).
    closed_by_name: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    # Code files by their names as modules, as spelt ("sessions", "starlette.middleware.sessions"),
    # open and closed, linked only by a word spelt so and written as code or followed by
    # "module": as a plain word, "routing" is a topic.
    modules: dict[str, set[str]] = field(default_factory=dict)
    closed_modules: dict[str, set[str]] = field(default_factory=dict)
    # Members by a last name too short to be a name alone ("Walk", "Get", "run"): linked only by a
    # word spelt exactly so and written as code ("the Walk method", "what does Match call").
    short_members: dict[str, set[str]] = field(default_factory=dict)
    # Types by the last word of their name, singular and in lower case ("middleware" for
    # ``GZipMiddleware`` and ``CORSMiddleware``, "error" for ``ParseError``): the sort of thing a
    # project's naming makes each (see ``graphmem.retrieval.graph.sorts``).
    sorts: dict[str, set[str]] = field(default_factory=dict)
    # The types that name each base in their declaration (``Exception`` of "class X(Exception)", a
    # trait a Rust type implements): the way to "which classes extend Exception?" when the base is
    # not the project's own code.
    implementers: dict[str, set[str]] = field(default_factory=dict)
    # The project's types (classes, structs, interfaces, traits, ...): a base a question names is
    # the project's own only when one of them is spelt so (a method ``Route.Handler`` is not
    # ``http.Handler``).
    types: set[str] = field(default_factory=set)
    # Types, and functions capitalised as types are (Go's exported ``CORSMethodMiddleware``), by
    # their name's words run together, in lower case ("corsmiddleware", "httpendpoint"): a question
    # may write such a name as words ("the CORS middleware", "the CORS method middleware").
    names_by_words: dict[str, set[str]] = field(default_factory=dict)
    # Documents that record the project's history (changelogs, release notes): they mention every
    # part of the code, and answer questions about its history, not about the code.
    changelogs: set[str] = field(default_factory=set)
    # How many distinct nodes stand at the other end of each node's relationships of one type, read
    # from the store the first time a question counts them ("which module is imported by the most
    # files?"): (relationship type, the counted node's end, by file, tests counted) -> key -> count.
    # Not saved.
    degrees: dict[tuple[str, str, bool, bool], dict[str, int]] = field(default_factory=dict)

    def degree(self, store: GraphStore, rel: str, end: str, *, by_file: bool = False,
               tests: bool = True) -> dict[str, int]:
        """``degrees[(rel, end, by_file, tests)]``, read once from ``store``'s open relationships;
        ``by_file``: a symbol's relationships count for its file (importing a module's function
        imports the module); ``tests``: test code counts, at either end."""
        cached = (rel, end, by_file, tests)
        if cached not in self.degrees:
            partners: dict[str, set[str]] = {}
            for r in store.iter_rels():
                if r.type.value == rel:
                    here, there = (r.src, r.dst) if end == "src" else (r.dst, r.src)
                    if not tests and any(is_test_key(k) for k in (here, there)):
                        continue
                    if by_file and here.startswith("sym:"):
                        here = "file:" + here[4:].split("::", 1)[0]
                    partners.setdefault(here, set()).add(there)
            self.degrees[cached] = {key: len(others) for key, others in partners.items()}
        return self.degrees[cached]

    @classmethod
    def build(cls, store: GraphStore, *, fuzzy_min_length: int = 5) -> Catalog:
        cat = cls()
        types: list[tuple[str, str, list[str]]] = []  # open types: key, own name, names of their bases
        capitalised: list[tuple[str, str]] = []  # open functions named as types are: key, own name
        for node in store.iter_nodes(include_closed=True):
            kind = node.kind  # read from the key: once per node, not once per test below
            if kind in (NodeKind.SYMBOL, NodeKind.FILE):
                cat.lifetimes[node.key] = (node.valid_from, node.valid_to)
            if node.valid_to is not None:
                if kind in (NodeKind.SYMBOL, NodeKind.FILE):
                    cat.nodes.setdefault(node.key, (kind, node.name, None))
                    for name in cat._own_names(node, kind):
                        words = tuple(singular(w) for w in words_of(name))
                        if words:
                            cat.closed_by_name.setdefault(words, set()).add(node.key)
                    if kind is NodeKind.FILE:
                        for name in module_names(node.key):
                            cat.closed_modules.setdefault(name, set()).add(node.key)
                continue
            day = node_date(node, kind)
            if kind is NodeKind.COMMIT and day:
                cat.commits_at.setdefault(str(day), []).append(node.key)
            cat.nodes[node.key] = (kind, node.name, day)
            cat.by_kind.setdefault(kind, []).append(node.key)
            for name in cat._names(node, kind):
                words = tuple(singular(w) for w in words_of(name))
                if words:
                    cat.by_name.setdefault(words, set()).add(node.key)
            if kind is NodeKind.FILE:
                for name in module_names(node.key):
                    cat.modules.setdefault(name, set()).add(node.key)
            elif kind is NodeKind.DOCUMENT and node.props.get("doc_type") == "changelog":
                cat.changelogs.add(node.key)
            elif kind is NodeKind.SYMBOL:
                if short := cat._short_member_name(node):
                    cat.short_members.setdefault(short, set()).add(node.key)
                if node.props.get("symbol_kind") == "function" and _type_name(node)[:1].isupper():
                    capitalised.append((node.key, _type_name(node)))
                if node.props.get("symbol_kind") in CLASS_KINDS:
                    declared = node.props.get("bases")  # the traits a Rust type implements
                    types.append((node.key, _type_name(node), base_names(str(node.props.get("signature") or ""))
                                  + (list(declared) if isinstance(declared, list) else [])))
            if kind is NodeKind.COMMIT and node.props.get("parents") == []:
                cat.root_commits.add(node.key)
            parents = node.props.get("parents")
            if kind is NodeKind.COMMIT and isinstance(parents, list) and len(parents) > 1:
                cat.merge_commits.add(node.key)
            if kind is NodeKind.INCIDENT:
                m = re.search(r"(\d+)$", node.key)
                if m:
                    cat.incidents_by_number[int(m.group(1))] = node.key
            if kind in (NodeKind.DECISION, NodeKind.INCIDENT) and node.name:
                cat.titles.append((node.key, {singular(w) for w in words_of(node.name)} - STOP))
        cat.sorts = type_sorts(types)
        cat.types = {key for key, _, _ in types}
        for key, _, bases in types:
            for base in bases:
                cat.implementers.setdefault(base, set()).add(key)
        for key, name in [(key, name) for key, name, _ in types] + capitalised:
            if len(_CAMEL_WORDS.findall(name)) >= 2:
                cat.names_by_words.setdefault(name.replace("_", "").lower(), set()).add(key)
        cat.rel_types = frozenset(store.counts().rels)
        cat.fuzzy_names = sorted({words[0] for words, keys in cat.by_name.items()
                                  if len(words) == 1 and len(words[0]) >= fuzzy_min_length
                                  and any(cat.nodes[k][0] in FUZZY_KINDS for k in keys)})
        return cat

    def to_bytes(self, **stamp: object) -> bytes:
        """The catalog in ``marshal``'s format (plain values only: loading it runs no code, and
        is several times faster than building it), with ``stamp`` (see ``from_bytes``)."""
        return marshal.dumps({
            "format": CACHE_FORMAT, "stamp": stamp,
            "nodes": {key: (kind.value, name, day) for key, (kind, name, day) in self.nodes.items()},
            "by_name": self.by_name, "by_kind": {kind.value: keys for kind, keys in self.by_kind.items()},
            "incidents_by_number": self.incidents_by_number, "root_commits": self.root_commits,
            "merge_commits": self.merge_commits, "titles": self.titles, "fuzzy_names": self.fuzzy_names,
            "rel_types": self.rel_types, "lifetimes": self.lifetimes, "commits_at": self.commits_at,
            "closed_by_name": self.closed_by_name, "modules": self.modules, "closed_modules": self.closed_modules,
            "short_members": self.short_members, "sorts": self.sorts, "changelogs": self.changelogs,
            "names_by_words": self.names_by_words, "implementers": self.implementers, "types": self.types,
        })

    @classmethod
    def from_bytes(cls, data: bytes, **stamp: object) -> Catalog | None:
        """A catalog ``to_bytes`` wrote with this same ``stamp`` (else None). Raises ``ValueError``
        for data that is not such a catalog (a damaged file)."""
        try:
            raw = marshal.loads(data)
            if raw.get("format") != CACHE_FORMAT or raw.get("stamp") != stamp:
                return None
            kinds = {k.value: k for k in NodeKind}
            cat = cls(nodes={key: (kinds[kind], name, day) for key, (kind, name, day) in raw["nodes"].items()},
                      by_kind={kinds[kind]: keys for kind, keys in raw["by_kind"].items()},
                      **{name: raw[name] for name in _SAVED_AS_IS})
        except (EOFError, AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a saved name catalog ({exc.__class__.__name__}: {exc})") from None
        for name, kind in _SAVED_AS_IS.items():
            if not isinstance(getattr(cat, name), kind):
                raise ValueError(f"not a saved name catalog ({name} is a {type(getattr(cat, name)).__name__})")
        return cat

    @staticmethod
    def _names(node: Node, kind: NodeKind) -> list[str]:
        aliases = node.props.get("aliases")
        # Other spellings of the same thing (merged duplicates, "Postgres" for PostgreSQL).
        extra = [a for a in aliases if isinstance(a, str)] if isinstance(aliases, list) else []
        return Catalog._own_names(node, kind) + extra

    @staticmethod
    def _short_member_name(node: Node) -> str | None:
        """A member's last name that ``_own_names`` leaves out for being short (not a dunder)."""
        qual = str(node.props.get("qualname") or node.name or "")
        owner, _, last = qual.rpartition(".")
        if not owner or not last.strip("_") or len(last.lstrip("_")) >= 5 or last.startswith("__") \
                or is_constructor(qual):
            return None
        return last

    @staticmethod
    def _own_names(node: Node, kind: NodeKind) -> list[str]:
        name = node.name or ""
        if kind in (NodeKind.SERVICE, NodeKind.TEAM, NodeKind.TICKET, NodeKind.ENTITY):
            return [name]
        if kind is NodeKind.PERSON:
            email = str(node.props.get("email") or "")
            return [name, email, email.split("@")[0]] if email else [name]
        if kind is NodeKind.FILE:
            path = node.key[5:]
            return [path, path.rsplit("/", 1)[-1]]
        if kind is NodeKind.SYMBOL:
            qual = str(node.props.get("qualname") or name)
            last = qual.rsplit(".", 1)[-1]
            # Short or common last parts ("get", "main", "__init__") would link to everything; a
            # private method's name ("_eval_snippets") is as particular as a public one's.
            dunder = last.startswith("__") and last.endswith("__")
            # "Builder.option" names the member ``Option.Builder.option`` as its owner-qualified tail.
            parts = qual.split(".")
            tails = [".".join(parts[i:]) for i in range(1, len(parts) - 1)]
            own = len(last.lstrip("_")) >= 5 and not dunder and last != qual and not is_constructor(qual)
            return [qual] + tails + ([last] if own else [])
        if kind is NodeKind.DECISION:
            return [f"ADR-{node.props.get('number')}", name]
        if kind is NodeKind.INCIDENT:
            return [node.key.split(":", 1)[1], name]
        if kind is NodeKind.COMMIT:
            # A subject is a name when a question can quote it: one of a word or two ("Elements",
            # "Fix tests") would be found in questions that speak of the code, not of the commit.
            return [name] if len(words_of(name)) >= _COMMIT_NAME_WORDS else []
        if kind is NodeKind.DOCUMENT and isinstance(node.props.get("path"), str):
            # A repository's document is named by its path, as a file is. Its title describes it
            # ("Billing service") and would take the question's words from the node they name;
            # the title is found by words and meaning like the rest of its text. (A passage of a
            # corpus has no path: its title is the name of what it is about.)
            path = str(node.props["path"])
            return [path, path.rsplit("/", 1)[-1]]
        return [name]



# The fewest words of a commit subject that name the commit.
_COMMIT_NAME_WORDS = 3

# Catalog fields saved by to_bytes as they are, and the type each must have.
_SAVED_AS_IS: dict[str, type | tuple[type, ...]] = {
    "by_name": dict, "incidents_by_number": dict, "root_commits": set, "merge_commits": set, "titles": list,
    "fuzzy_names": list, "rel_types": (frozenset, type(None)), "lifetimes": dict, "commits_at": dict,
    "closed_by_name": dict, "modules": dict, "closed_modules": dict, "short_members": dict, "sorts": dict,
    "changelogs": set, "names_by_words": dict, "implementers": dict, "types": set,
}


_CAMEL_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")
_LAST_WORD = re.compile(f"(?:{_CAMEL_WORDS.pattern})$")
# The bases a type's signature names: Python's "class X(Base, metaclass=M)", and "extends A
# implements B, C" of Java, TypeScript and JavaScript.
_PY_BASES = re.compile(r"\bclass\s+\w+\s*(?:\[[^\]]*\])?\s*\(([^)]*)\)")
_EXTENDS = re.compile(r"\b(?:extends|implements)\s+([\w.$<>\[\], ]+)")
_BRACKETED = re.compile(r"<[^<>]*>|\[[^\[\]]*\]")


def _type_name(node: Node) -> str:
    return str(node.props.get("qualname") or node.name or "").rsplit(".", 1)[-1]


def is_constructor(qual: str) -> bool:
    """Whether a qualified name is a constructor named as its class (``Gson.Gson``,
    ``CodeWriter.CodeWriter``): the class's name names the class, not it."""
    owner, _, last = qual.rpartition(".")
    return bool(owner) and last == owner.rsplit(".", 1)[-1]


def spelt_as(keys: Iterable[str], name: str) -> set[str]:
    """The code among ``keys`` whose own name (the last part of its qualified name) is ``name``,
    in the same case: ``sym:a.py::Elements`` for "Elements", not ``sym:a.py::Element``."""
    return {k for k in keys if k.startswith("sym:") and k.rsplit("::", 1)[-1].rsplit(".", 1)[-1] == name}


def sort_word(name: str) -> str | None:
    """The last word of a type's name, singular and in lower case: "middleware" for
    ``GZipMiddleware``, "error" for ``ParseError``, "response" for ``Response``."""
    m = _LAST_WORD.search(name.rstrip("_"))
    if not m:
        return None
    word = m.group()
    return word.lower() if word.isupper() else singular(word.lower())  # an acronym has no plural: "CORS"


def base_names(signature: str) -> list[str]:
    """The last names of the bases a type's signature names (``Exception`` of
    "class ClientDisconnect(Exception)", ``RuntimeException`` of "class X extends RuntimeException")."""
    found = [m.group(1) for m in (_PY_BASES.search(signature), _EXTENDS.search(signature)) if m]
    out = []
    for text in found:
        for _ in range(3):  # generic arguments, nested up to three deep
            text = _BRACKETED.sub("", text)
        for part in text.replace(",", " ").split():
            if "=" not in part and part not in ("implements", "extends") and (last := part.rsplit(".", 1)[-1]):
                out.append(last)
    return out


def type_sorts(types: list[tuple[str, str, list[str]]]) -> dict[str, set[str]]:
    """Types by sort: each type is of the sort its own name's last word makes, and of its bases'
    sorts, through the project's own types too (``ClientDisconnect(Exception)`` is an exception;
    a subclass of ``HTTPException`` is one as well)."""
    by_name: dict[str, set[str]] = {}  # a type's name -> its sorts (same-named types share them)
    for _, name, bases in types:
        words = {w for w in (sort_word(name), *(sort_word(b) for b in bases)) if w}
        by_name.setdefault(name, set()).update(words)
    for _ in range(4):  # bases of bases, a few levels up
        grew = False
        for _, name, bases in types:
            more = set().union(*(by_name.get(b, set()) for b in bases)) - by_name[name] if bases else set()
            if more:
                by_name[name] |= more
                grew = True
        if not grew:
            break
    out: dict[str, set[str]] = {}
    for key, name, _ in types:
        for word in by_name[name]:
            out.setdefault(word, set()).add(key)
    return out


PACKAGE_FILES = frozenset({"__init__", "index", "mod", "package-info"})  # a file that stands for its folder


def module_names(key: str) -> list[str]:
    """A code file's names as a module: its stem and its dotted path ("sessions",
    "starlette.middleware.sessions"); a package's own file (``__init__.py``, ``index.ts``) is
    named by its folder."""
    path = key[5:] if key.startswith("file:") else key
    parts = path.rsplit(".", 1)[0].split("/") if "." in path.rsplit("/", 1)[-1] else path.split("/")
    if parts and parts[-1] in PACKAGE_FILES:
        parts = parts[:-1]
    if not parts or not parts[-1]:
        return []
    names = [parts[-1]]
    if parts[-1].startswith("_") and parts[-1].strip("_"):
        names.append(parts[-1].lstrip("_"))  # "the models module" of httpx is its private _models.py
    if len(parts) > 1:
        names.append(".".join(parts))
        if parts[0] in ("src", "lib") and len(parts) > 2:
            names.append(".".join(parts[1:]))
    return names


def common_noun(key: str) -> bool:
    """Whether a node that one lower-case question word names is likely just that common word: a
    passage titled with it, or an entity of no particular type ("Mother", the film, or "church"
    from open extraction). A typed entity is a name however it is written ("postgres")."""
    if key.startswith("entity:"):
        return key.split(":", 2)[1] in GENERIC_ENTITY_TYPES
    return key.startswith("doc:")
