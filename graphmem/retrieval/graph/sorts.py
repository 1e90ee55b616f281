"""The sort of thing a question asks for by a noun, and the types a project's naming makes of it.

"Which middleware compresses responses?" asks for a middleware, a word that is no node kind. Code
names its types after what they are (``GZipMiddleware``, ``CORSMiddleware``; ``ParseError``;
``JSONResponse``), so where several of the project's types end with the noun, those types are
the question's possible answers: fusion puts them before the rest (the engine's scope rules), and a
piece of code found for the question's words brings the type of that sort that holds it (its
class, else the one such type in its file: ``send_with_compression`` in ``gzip.py`` brings
``GZipMiddleware``).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from graphmem.model import NodeKind, RelType, is_test_key
from graphmem.retrieval.graph.catalog import Catalog, singular, spelt_as
from graphmem.retrieval.question import Question

# Python names its exception types "...Error", Java "...Exception": either word asks for both.
_SAME_SORT = {"exception": ("error",), "error": ("exception",)}
_CODE_KINDS = frozenset({NodeKind.SYMBOL, NodeKind.FILE})
_NAME = re.compile(r"\b[A-Z][A-Za-z0-9_]*")  # a type's name as a question writes it


def sort_members(cat: Catalog, q: Question, min_members: int) -> set[str]:
    """The project's types of the sort ``q`` asks for by name, when there are ``min_members`` or more
    and the question asks for code (or no kind at all); else none. Test code's types count only
    when the question asks for tests."""
    if not q.sort_noun or not set(q.answer_kinds) <= _CODE_KINDS:
        return set()
    noun = singular(q.sort_noun)
    keys: set[str] = set()
    for word in (noun, *_SAME_SORT.get(noun, ())):
        keys |= cat.sorts.get(word, set())
    if not q.asks_tests:  # a test's own helper types ("CustomMiddleware") answer no question about the code
        keys = {key for key in keys if not is_test_key(key)}
    return keys if len(keys) >= min_members else set()


def implementers_of_outside_bases(cat: Catalog, q: Question) -> set[str]:
    """"Which classes extend Exception?", "which types implement FromStr?": the project's types
    whose declarations name a base, written in the question as it is spelt, that the project does
    not define itself (its own bases are reached through their INHERITS edges). Test code's types
    count only when the question asks for tests."""
    if q.directions.get(RelType.INHERITS) != "src" or not set(q.answer_kinds) <= _CODE_KINDS:
        return set()
    keys: set[str] = set()
    for name in _NAME.findall(q.text):
        if name in cat.implementers and not spelt_as(cat.by_name.get((singular(name.lower()),), ()), name) & cat.types:
            keys |= cat.implementers[name]
    return keys if q.asks_tests else {key for key in keys if not is_test_key(key)}


def holder_of(key: str, members: Collection[str], by_path: dict[str, list[str]]) -> str | None:
    """The type of the sort that holds the code ``key`` (a symbol or a file): the nearest enclosing
    type among ``members``, else the member defined in its file when the file defines only one
    (``by_path``: members by file path)."""
    if key.startswith("sym:"):
        path, _, qual = key[4:].partition("::")
        parts = qual.split(".")
        for i in range(len(parts) - 1, 0, -1):
            owner = f"sym:{path}::{'.'.join(parts[:i])}"
            if owner in members:
                return owner
    elif key.startswith("file:"):
        path = key[5:]
    else:
        return None
    there = by_path.get(path, [])
    return there[0] if len(there) == 1 and there[0] != key else None


def by_path(members: Collection[str]) -> dict[str, list[str]]:
    """``members`` (symbol keys) by the path of their file, each list sorted."""
    out: dict[str, list[str]] = {}
    for key in sorted(members):
        out.setdefault(key[4:].split("::", 1)[0], []).append(key)
    return out
