"""Read-only Cypher for engineers: a checker, a guarded runner and the saved queries in ``cypher/saved/``.

Three guards stand between a query and the graph:

1. :func:`check_read_only` tokenizes the query the way Neo4j's parser reads it (unicode escapes,
   comments, string literals, backtick-quoted names) and refuses anything that writes or administers:
   updating clauses, schema and administration commands, ``LOAD CSV``, ``USE``, ``CALL { } IN
   TRANSACTIONS``, several statements, and every procedure or namespaced function that is not on an
   allow-list.
2. :func:`scope_to_project` keeps the query to one project: every node pattern, wherever it stands
   (MATCH, pattern predicates, ``EXISTS``/``COUNT``/``COLLECT`` subqueries, pattern comprehensions,
   ``shortestPath``, quantified paths), gets ``project: $project`` in its property map, and the
   only procedures allowed return schema, never nodes. Relationships are reached only through
   their end nodes, and graphmem never links nodes of two projects, so they are scoped too.
3. :func:`run_read_only` runs the result in a READ access-mode transaction with a time limit (at
   most :func:`max_timeout_s`), so the server itself refuses a write the checker might have missed;
   that refusal is :class:`CypherRefused`, a query stopped by the time limit :class:`CypherTimeout`,
   one stopped by Neo4j's memory guards :class:`CypherOutOfMemory`. Neo4j checks its time limit
   between rows only, not while it evaluates one expression (a ``reduce`` or list comprehension over
   a huge ``range`` runs to its end), so the runner also keeps a deadline of its own: past it, it
   terminates the server-side transaction, drops the connection and raises :class:`CypherTimeout`.

``$project`` is always the store's project.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import re
import threading
import time
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from graphmem.errors import GraphmemError, NotSupported, StoreUnavailable


class CypherError(GraphmemError):
    """A Cypher query could not be run: bad parameters, a syntax error, an unknown saved query."""


class CypherRefused(CypherError):
    """The query would write to or administer the database; only read-only Cypher runs here."""


class CypherTimeout(CypherError):
    """The query ran past its time limit and was stopped."""


class CypherOutOfMemory(CypherError):
    """Neo4j stopped the query because it needed more memory than the server allows one query."""


# --- the checker ----------------------------------------------------------------------------------

# Clause keywords that change data or schema. Checked on bare words only: a word inside a string,
# behind backticks, after ``.``/``:``/``$`` (property, label, parameter) or before ``:`` (map key)
# is a name, not a keyword.
_WRITE_WORDS = {
    "CREATE": "CREATE writes to the graph",
    "MERGE": "MERGE writes to the graph",
    "SET": "SET writes to the graph",
    "DELETE": "DELETE writes to the graph",
    "DETACH": "DETACH DELETE writes to the graph",
    "REMOVE": "REMOVE writes to the graph",
    "INSERT": "INSERT writes to the graph",
    "FOREACH": "FOREACH runs updating clauses",
    "DROP": "DROP changes the schema or the databases",
    "LOAD": "LOAD CSV reads files or URLs on the server",
    "USE": "USE switches to another database",
    "ALTER": "ALTER is an administration command",
    "GRANT": "GRANT is an administration command",
    "DENY": "DENY is an administration command",
    "REVOKE": "REVOKE is an administration command",
    "RENAME": "RENAME is an administration command",
    "TERMINATE": "TERMINATE stops other transactions",
    "ENABLE": "ENABLE SERVER is an administration command",
    "DEALLOCATE": "DEALLOCATE is an administration command",
    "REALLOCATE": "REALLOCATE is an administration command",
    "DRYRUN": "DRYRUN is an administration command",
}
# START/STOP are common variable names (``(start)-->(stop)``); only ``START DATABASE`` is a command.
_DATABASE_COMMANDS = frozenset({"START", "STOP"})

# SHOW is read-only, but only the catalogue of the schema is harmless: SHOW TRANSACTIONS reveals
# other users' queries and parameters, SHOW SETTINGS/USERS/... the server's configuration.
_SHOW_ALLOWED = frozenset({"INDEX", "INDEXES", "CONSTRAINT", "CONSTRAINTS", "PROCEDURE", "PROCEDURES",
                           "FUNCTION", "FUNCTIONS"})
_SHOW_MODIFIERS = frozenset({"ALL", "RANGE", "FULLTEXT", "TEXT", "POINT", "VECTOR", "LOOKUP", "BTREE",
                             "UNIQUE", "UNIQUENESS", "NODE", "RELATIONSHIP", "REL", "KEY", "EXIST", "EXISTS",
                             "EXISTENCE", "PROPERTY", "TYPE", "BUILT", "IN", "USER", "DEFINED"})

#: Procedures a query may CALL: each only reads schema (labels, types, property keys, indexes),
#: never nodes or relationships, so none can reach another project's data (checked against the
#: server's own list by the tests).
READ_ONLY_PROCEDURES = frozenset({
    "db.labels", "db.relationshipTypes", "db.propertyKeys",
    "db.schema.visualization", "db.schema.nodeTypeProperties", "db.schema.relTypeProperties",
    "db.index.fulltext.listAvailableAnalyzers",
    "apoc.help",
})

# Read-only procedures that are refused all the same, and why: each returns or counts nodes of
# every project, which no rewrite of the query can confine to one.
_CROSS_PROJECT_PROCEDURES = {
    "db.index.fulltext.": "full-text index search returns the nodes of every project (use `graphmem query`)",
    "db.index.vector.": "vector index search returns the nodes of every project (use `graphmem query`)",
    "apoc.meta.": "apoc.meta reads and counts the nodes of every project",
    "apoc.path.": "apoc.path expands from node ids, past the project's own nodes (use a MATCH pattern)",
    "apoc.neighbors.": "apoc.neighbors expands from node ids, past the project's own nodes (use a MATCH pattern)",
    "apoc.algo.": "apoc.algo walks from node ids, past the project's own nodes (use shortestPath in MATCH)",
    "apoc.nodes.": "apoc.nodes reads nodes by id, whatever their project",
}

#: Namespaces of functions a query may call (unnamespaced built-ins such as ``count`` always can).
#: Functions cannot write, except those that run Cypher of their own (``apoc.cypher.*``), which
#: are not here; nor is anything under ``dbms.`` or ``graph.`` (other databases), nor what reads
#: nodes by id or counts them across projects (``apoc.nodes.*``, ``apoc.meta.nodes.count``).
READ_ONLY_FUNCTION_PREFIXES = (
    "date.", "datetime.", "localdatetime.", "localtime.", "time.", "duration.", "point.", "vector.",
    "db.nameFromElementId",
    "apoc.agg.", "apoc.any.", "apoc.bitwise.", "apoc.coll.", "apoc.convert.", "apoc.data.", "apoc.date.",
    "apoc.diff.", "apoc.hashing.", "apoc.json.", "apoc.label.", "apoc.map.", "apoc.math.", "apoc.meta.cypher.",
    "apoc.node.", "apoc.number.", "apoc.path.", "apoc.rel.", "apoc.scoring.",
    "apoc.temporal.", "apoc.text.", "apoc.util.", "apoc.version",
)

_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word" (bare), "name" (backtick-quoted), "string", "number", "symbol"
    text: str
    at: int  # offset in the original query text


def _decode_unicode_escapes(query: str) -> tuple[str, list[int]]:
    """The text Neo4j's lexer sees, and for each of its characters the offset it came from.

    Neo4j replaces ``\\uXXXX`` everywhere before it splits the text into tokens (as Java source
    does), so ``\\u0027`` can end a string and ``\\u0053ET`` is ``SET``. A backslash that is itself
    escaped (``\\\\u``) starts no escape, and a character produced by an escape starts none either.
    """
    out: list[str] = []
    origin: list[int] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch != "\\":
            out.append(ch)
            origin.append(i)
            i += 1
        elif i + 1 < n and query[i + 1] == "\\":
            out += ["\\", "\\"]
            origin += [i, i + 1]
            i += 2
        elif i + 1 < n and query[i + 1] == "u":
            digits = query[i + 2:i + 6]
            if not _HEX4.fullmatch(digits):
                raise CypherRefused(f"cannot check the query: malformed unicode escape {query[i:i + 6]!r} "
                                    f"({_where(query, i)})")
            out.append(chr(int(digits, 16)))
            origin.append(i)
            i += 6
        else:
            out.append(ch)
            origin.append(i)
            i += 1
    return "".join(out), origin


def _where(query: str, offset: int) -> str:
    line = query.count("\n", 0, offset) + 1
    column = offset - (query.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


# Neo4j's names follow Java's identifier rules, which take more characters than Python's isalnum:
# letter numbers and connecting punctuation may start one; combining marks, currency signs, format
# characters and the "ignorable" controls may continue one (measured against Neo4j 5.26's parser).
# Splitting a name where Neo4j does not could hide a node pattern from scope_to_project.
_NAME_START_CATEGORIES = frozenset({"Nl", "Pc"})
_NAME_PART_CATEGORIES = frozenset({"Nl", "Pc", "Mn", "Mc", "Sc", "Cf"})


def _is_ignorable_control(ch: str) -> bool:
    code = ord(ch)
    return code <= 0x08 or 0x0E <= code <= 0x1B or 0x7F <= code <= 0x9F


def _is_word_start(ch: str) -> bool:
    return ch.isalpha() or ch == "_" or unicodedata.category(ch) in _NAME_START_CATEGORIES


def _is_word_part(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or unicodedata.category(ch) in _NAME_PART_CATEGORIES or \
        _is_ignorable_control(ch)


def _is_space(ch: str) -> bool:
    # U+0085 is white space to Python but a part of a name to Neo4j.
    return ch.isspace() and ch != "\x85"


def _tokens(query: str) -> list[_Token]:
    """Tokens of a query, with comments and whitespace dropped.

    The rules follow Neo4j's lexer exactly where a mismatch could hide text: ``//`` comments end at
    ``\\n`` or ``\\r`` only, ``/* */`` comments do not nest, a backslash escapes the next character
    inside a string literal, and a doubled backtick is a backtick inside a quoted name. Elsewhere
    the split may be finer than Neo4j's (more words, so more keywords seen), never coarser.
    """
    text, origin = _decode_unicode_escapes(query)
    tokens: list[_Token] = []
    i, n = 0, len(text)

    def fail(what: str, start: int) -> CypherRefused:
        return CypherRefused(f"cannot check the query: {what} ({_where(query, origin[start])})")

    while i < n:
        ch = text[i]
        if _is_space(ch):
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] not in "\n\r":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise fail("unterminated /* comment", i)
            i = end + 2
        elif ch in "'\"":
            start, i = i, i + 1
            while i < n and text[i] != ch:
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                raise fail("unterminated string literal", start)
            tokens.append(_Token("string", text[start + 1:i], origin[start]))
            i += 1
        elif ch == "`":
            start, i, parts = i, i + 1, []
            while True:
                end = text.find("`", i)
                if end < 0:
                    raise fail("unterminated `quoted name`", start)
                parts.append(text[i:end])
                if text.startswith("``", end):
                    parts.append("`")
                    i = end + 2
                    continue
                i = end + 1
                break
            tokens.append(_Token("name", "".join(parts), origin[start]))
        elif ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            start = i
            i += 1
            while i < n and text[i].isdigit():
                i += 1
            if i + 1 < n and text[i] == "." and text[i + 1].isdigit() and "." not in text[start:i]:
                i += 1
                while i < n and text[i].isdigit():
                    i += 1
            tokens.append(_Token("number", text[start:i], origin[start]))
        elif _is_word_start(ch):
            start = i
            while i < n and _is_word_part(text[i]):
                i += 1
            tokens.append(_Token("word", text[start:i], origin[start]))
        else:
            tokens.append(_Token("symbol", ch, origin[i]))
            i += 1
    return tokens


def _is_name_token(tok: _Token) -> bool:
    return tok.kind in ("word", "name")


def _keyword(tokens: list[_Token], i: int) -> str | None:
    """The upper-cased keyword at ``tokens[i]``, or None when it is a name in that position."""
    tok = tokens[i]
    if tok.kind != "word":
        return None
    prev = tokens[i - 1].text if i > 0 and tokens[i - 1].kind == "symbol" else ""
    nxt = tokens[i + 1].text if i + 1 < len(tokens) and tokens[i + 1].kind == "symbol" else ""
    if prev in (".", ":", "$") or nxt == ":":
        return None  # property key, label or type, parameter, map key
    # ``upper`` maps look-alikes such as the long s (U+017F) onto ASCII keywords; Neo4j would not,
    # but seeing one keyword too many only refuses a query, it never lets a write through.
    return tok.text.upper()


def _dotted_name(tokens: list[_Token], i: int) -> tuple[str, int]:
    """The dotted name starting at ``tokens[i]`` (``apoc.path.expand``) and the index after it."""
    parts = [tokens[i].text]
    j = i + 1
    while j + 1 < len(tokens) and tokens[j].kind == "symbol" and tokens[j].text == "." and \
            _is_name_token(tokens[j + 1]):
        parts.append(tokens[j + 1].text)
        j += 2
    return ".".join(parts), j


def _refuse(query: str, tok: _Token, why: str, rule: str = "graphmem cypher runs read-only queries") -> CypherRefused:
    return CypherRefused(f"refused: {why} ({_where(query, tok.at)}); {rule}")


def check_read_only(query: str) -> None:
    """Raise :class:`CypherRefused` unless ``query`` is one read-only statement.

    What is refused, and why, is named in the message: an updating clause (CREATE, MERGE, SET,
    DELETE, REMOVE, FOREACH...), a schema or administration command, LOAD CSV, USE, CALL { } IN
    TRANSACTIONS, a second statement, a SHOW other than of indexes, constraints, procedures or
    functions, a procedure outside :data:`READ_ONLY_PROCEDURES` (schema only: index searches and
    APOC's path and meta procedures read every project), a namespaced function outside
    :data:`READ_ONLY_FUNCTION_PREFIXES`.
    """
    if not isinstance(query, str) or not query.strip():
        raise CypherError("the query is empty")
    tokens = _tokens(query)
    if not tokens:
        raise CypherError("the query is empty (only comments)")
    procedure_end = 0  # tokens before this index name a CALLed procedure
    for i, tok in enumerate(tokens):
        if tok.kind == "symbol" and tok.text == ";" and i + 1 < len(tokens):
            raise _refuse(query, tokens[i + 1], "only one statement may run (text follows ';')")
        word = _keyword(tokens, i)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if word in _WRITE_WORDS:
            raise _refuse(query, tok, _WRITE_WORDS[word])
        if word in _DATABASE_COMMANDS and nxt is not None and nxt.kind == "word" and \
                nxt.text.upper() in ("DATABASE", "COMPOSITE"):
            raise _refuse(query, tok, f"{word} DATABASE is an administration command")
        if word == "TRANSACTIONS" and i > 0 and tokens[i - 1].kind == "word" and \
                tokens[i - 1].text.upper() in ("IN", "CONCURRENT"):
            raise _refuse(query, tok, "CALL { ... } IN TRANSACTIONS commits on its own")
        if word == "SHOW":
            _check_show(query, tokens, i)
        if word == "CALL" and nxt is not None and _is_name_token(nxt):
            name, procedure_end = _dotted_name(tokens, i + 1)
            if name.split(".")[0].lower() == "dbms":
                raise _refuse(query, nxt, f"procedure {name}: dbms.* administers the server")
            if name not in READ_ONLY_PROCEDURES:
                why = next((why for prefix, why in _CROSS_PROJECT_PROCEDURES.items() if name.startswith(prefix)),
                           "it is not on the allow-list of schema procedures (db.labels, db.relationshipTypes, "
                           "db.propertyKeys, db.schema.visualization, ...)")
                raise _refuse(query, nxt, f"procedure {name}: {why}", _SCOPE_RULE)
            continue
        # A namespaced function call: a dotted name, not itself after a dot, followed by "(". (After
        # CALL the name is a procedure, checked above.)
        if i >= procedure_end and _is_name_token(tok) and \
                not (i > 0 and tokens[i - 1].kind == "symbol" and tokens[i - 1].text == "."):
            name, j = _dotted_name(tokens, i)
            if "." in name and j < len(tokens) and tokens[j].kind == "symbol" and tokens[j].text == "(":
                if name.split(".")[0].lower() == "dbms":
                    raise _refuse(query, tok, f"function {name}: dbms.* administers the server")
                if not name.startswith(READ_ONLY_FUNCTION_PREFIXES):
                    raise _refuse(query, tok, f"function {name} is not on the read-only allow-list")


def _check_show(query: str, tokens: list[_Token], i: int) -> None:
    for tok in tokens[i + 1:]:
        what = tok.text.upper() if tok.kind == "word" else ""
        if what in _SHOW_ALLOWED:
            return
        if what not in _SHOW_MODIFIERS:
            break
    shown = " ".join(t.text.upper() for t in tokens[i:i + 3] if t.kind == "word")
    raise _refuse(query, tokens[i], f"{shown} is not allowed (SHOW only indexes, constraints, procedures "
                                    "and functions)")


def query_parameters(query: str) -> set[str]:
    """Names of the ``$parameters`` a query uses."""
    tokens = _tokens(query)
    return {tokens[i + 1].text for i in range(len(tokens) - 1)
            if tokens[i].kind == "symbol" and tokens[i].text == "$"
            and tokens[i + 1].kind in ("word", "name", "number")}


# --- keeping a query to one project -----------------------------------------------------------------

_SCOPE_RULE = "graphmem cypher reads only the project's own nodes"
#: What every node pattern gets in its property map (``$project`` is always the store's project).
PROJECT_PROPERTY = "project: $project"

# Neo4j reads these as the lines and heads of relationship arrows, besides - < > (measured against
# its parser): a pattern drawn with them is a pattern all the same.
_DASHES = frozenset("-\u00ad\u2010\u2011\u2012\u2013\u2014\u2015\ufe58\ufe63\uff0d")
_LEFT_HEADS = frozenset("<\u27e8\u3008\ufe64\uff1c")
_RIGHT_HEADS = frozenset(">\u27e9\u3009\ufe65\uff1e")
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}
# Words that start a clause: the body of EXISTS { } / COUNT { } / COLLECT { } starting with one is a
# full subquery (its MATCH clauses are scoped like any other); otherwise it is a list of patterns.
_CLAUSE_WORDS = frozenset({"MATCH", "OPTIONAL", "WITH", "UNWIND", "CALL", "RETURN", "UNION", "USE", "FINISH",
                           "LET", "FILTER", "ORDER", "SKIP", "LIMIT", "OFFSET", "LOAD", "CREATE", "MERGE",
                           "SHOW", "FOREACH", "INSERT"})
# Words between MATCH and a path: ANY SHORTEST, ALL SHORTEST, SHORTEST 2 GROUPS, ANY 3 PATHS...
_SELECTOR_WORDS = frozenset({"ANY", "ALL", "SHORTEST", "PATH", "PATHS", "GROUP", "GROUPS"})
_SHORTEST_FUNCTIONS = frozenset({"SHORTESTPATH", "ALLSHORTESTPATHS"})
# After these (or the IS opening a label expression), a word in a node pattern is a label.
_LABEL_OPERATORS = frozenset({":", "|", "&", "!"})


class _Scoper:
    """Finds every node pattern of a checked query and where ``project: $project`` goes in it.

    The walk follows Cypher's grammar where patterns can stand: the pattern list of MATCH and of
    ``EXISTS``/``COUNT``/``COLLECT { pattern }``, and, inside any expression, a path that starts
    with a node pattern followed by a relationship (a pattern predicate, a pattern comprehension,
    an argument of ``exists()`` or ``shortestPath()``). Neo4j parses no other node pattern in a
    read query (CREATE and MERGE are refused before). Where the walk meets something that looks
    like a pattern but cannot be read as one, the query is refused: nothing unscoped runs.
    """

    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens = _tokens(query)
        self.n = len(self.tokens)
        self.partner = self._pair_brackets()
        self.inserts: list[tuple[int, str]] = []  # (offset in the query, text to insert there)

    # -- tokens ----------------------------------------------------------------------------------

    def _pair_brackets(self) -> dict[int, int]:
        partner: dict[int, int] = {}
        stack: list[int] = []
        for i, tok in enumerate(self.tokens):
            if tok.kind != "symbol":
                continue
            if tok.text in _OPENERS:
                stack.append(i)
            elif tok.text in _CLOSERS:
                if not stack or self.tokens[stack[-1]].text != _CLOSERS[tok.text]:
                    raise CypherError(f"SyntaxError: {tok.text!r} closes nothing ({_where(self.query, tok.at)})")
                opener = stack.pop()
                partner[opener], partner[i] = i, opener
        if stack:
            tok = self.tokens[stack[-1]]
            raise CypherError(f"SyntaxError: {tok.text!r} is never closed ({_where(self.query, tok.at)})")
        return partner

    def sym(self, i: int) -> str:
        """The symbol at ``i`` with arrow look-alikes folded onto - < >, or "" for anything else."""
        if not 0 <= i < self.n or self.tokens[i].kind != "symbol":
            return ""
        ch = self.tokens[i].text
        return "-" if ch in _DASHES else "<" if ch in _LEFT_HEADS else ">" if ch in _RIGHT_HEADS else ch

    def word(self, i: int) -> str:
        """The upper-cased bare word at ``i``, or "" (backtick-quoted names are never keywords)."""
        return self.tokens[i].text.upper() if 0 <= i < self.n and self.tokens[i].kind == "word" else ""

    def keyword(self, i: int) -> str:
        return (_keyword(self.tokens, i) or "") if 0 <= i < self.n else ""

    def is_name(self, i: int) -> bool:
        return 0 <= i < self.n and _is_name_token(self.tokens[i])

    def refuse(self, i: int, what: str, hint: str = "") -> CypherRefused:
        tok = self.tokens[min(i, self.n - 1)]
        return _refuse(self.query, tok, f"cannot keep {what} to the project{'; ' + hint if hint else ''}",
                       _SCOPE_RULE)

    def insert_before(self, i: int, text: str) -> None:
        self.inserts.append((self.tokens[i].at, text))

    # -- the walk --------------------------------------------------------------------------------

    def scan(self, lo: int, hi: int) -> None:
        """Walk tokens ``lo``..``hi`` (clauses and expressions), scoping the patterns met."""
        i = lo
        while i < hi:
            word = self.keyword(i)
            if word == "MATCH" and self.word(i - 1) != "AS" and self.pattern_follows(i + 1, hi):
                i = self.pattern_list(i + 1, hi)
                continue
            if word in ("EXISTS", "COUNT", "COLLECT") and self.sym(i + 1) == "{":
                close = self.partner[i + 1]
                if self.keyword(i + 2) in _CLAUSE_WORDS:
                    self.scan(i + 2, close)
                elif i + 2 < close:
                    end = self.pattern_list(i + 2, close)
                    self.scan(end, close)  # the WHERE after the patterns
                i = close + 1
                continue
            if self.sym(i) == "(" and self.path_starts(i, hi):
                i = self.path(i, hi)
                continue
            i += 1

    def pattern_follows(self, i: int, hi: int) -> bool:
        """Whether MATCH at ``i - 1`` starts a clause. Only a symbol other than ``(`` (or the end)
        after it, or AS before it, makes it a variable's name (``WITH 1 AS match RETURN match.x``);
        anything else is read as a pattern list, which refuses the query when it is none."""
        return i < hi and (self.sym(i) == "(" or self.tokens[i].kind != "symbol")

    def pattern_list(self, i: int, hi: int) -> int:
        """Scope ``[var =] [selector] path, ...`` starting at ``i``; the index after it."""
        while True:
            if self.is_name(i) and self.sym(i + 1) == "=":
                i += 2
            while i < hi and (self.word(i) in _SELECTOR_WORDS or self.tokens[i].kind == "number"):
                i += 1
            i = self.path(i, hi)
            if self.sym(i) != ",":
                return i
            i += 1

    def path_starts(self, i: int, hi: int) -> bool:
        """Whether the ``(`` at ``i``, met inside an expression, starts a path: a node pattern
        followed by a relationship and another ``(``, or by a parenthesized path."""
        if not self.node_shaped(i):
            return False
        after = self.partner[i] + 1
        if self.sym(after) == "(":
            return True
        end = self.relationship(after, hi, scope=False)
        return end is not None and self.sym(end) == "("

    def node_shaped(self, i: int) -> bool:
        """Whether the parentheses at ``i`` can hold a node pattern: ``(var :Label {..} WHERE ..)``,
        each part optional. Liberal on purpose: a false yes costs a syntax error, a false no a leak."""
        close = self.partner[i]
        j = i + 1
        if j == close or self.sym(j) in (":", "{", "$") or self.word(j) in ("IS", "WHERE"):
            return True
        return self.is_name(j) and (j + 1 == close or self.sym(j + 1) in (":", "{", "$")
                                    or self.word(j + 1) in ("IS", "WHERE"))

    def path(self, i: int, hi: int) -> int:
        """Scope the path starting at ``i`` (node patterns, relationships, parenthesized and
        quantified paths, shortestPath); the index after it."""
        if self.word(i) in _SHORTEST_FUNCTIONS and self.sym(i + 1) == "(":
            close = self.partner[i + 1]
            if self.path(i + 2, close) != close:
                raise self.refuse(i, "this shortest path")
            return close + 1
        while True:
            if self.sym(i) != "(" or i >= hi:
                raise self.refuse(i, "this pattern", "a node pattern was expected here")
            close = self.partner[i]
            if self.sym(i + 1) == "(" or (self.is_name(i + 1) and self.sym(i + 2) == "="):
                self.parenthesized_path(i, close)
                i = self.quantifier(close + 1)
            else:
                self.node(i, close)
                i = close + 1
            if self.sym(i) == "(":  # a quantified path next to a node: (a) ((x)-->(y))+ (b)
                continue
            end = self.relationship(i, hi, scope=True)
            if end is None:
                return i
            i = end

    def parenthesized_path(self, i: int, close: int) -> None:
        j = i + 1
        if self.is_name(j) and self.sym(j + 1) == "=":
            j += 2
        end = self.path(j, close)
        if end != close:
            if self.keyword(end) != "WHERE":
                raise self.refuse(end, "this parenthesized path")
            self.scan(end + 1, close)

    def quantifier(self, i: int) -> int:
        if self.sym(i) in ("+", "*"):
            return i + 1
        if self.sym(i) == "{" and self.is_quantifier(i):
            return self.partner[i] + 1
        return i

    def is_quantifier(self, i: int) -> bool:
        """``{m,n}`` (numbers and a comma) rather than a map or a subquery body."""
        return all(t.kind == "number" or (t.kind == "symbol" and t.text == ",")
                   for t in self.tokens[i + 1:self.partner[i]])

    def relationship(self, i: int, hi: int, *, scope: bool) -> int | None:
        """The index after the relationship pattern at ``i`` (``-[..]->``, ``<--``, ``--``, with
        a quantifier), or None when there is none; with ``scope``, walks what the brackets hold."""
        j = i
        if self.sym(j) == "<":
            j += 1
        if self.sym(j) != "-":
            return None
        j += 1
        inside: tuple[int, int] | None = None
        if self.sym(j) == "[":
            inside = (j + 1, self.partner[j])
            j = self.partner[j] + 1
        if self.sym(j) != "-":
            return None
        j += 1
        if self.sym(j) == ">":
            j += 1
        if j >= hi:
            return None
        j = self.quantifier(j)
        if scope and inside is not None:
            self.scan(*inside)  # property maps and WHERE of the relationship
        return j

    def node(self, i: int, close: int) -> None:
        """Put ``project: $project`` into the property map of the node pattern at ``i``..``close``."""
        j = i + 1
        if self.is_name(j) and (j + 1 == close or self.sym(j + 1) in (":", "{", "$")
                                or self.word(j + 1) in ("IS", "WHERE")):
            j += 1  # the variable
        props: int | None = None
        where: int | None = None
        k = j
        while k < close:
            # After : | & ! or the IS that opens the label expression, a word is a label (even one
            # called WHERE or IS) and $ starts a dynamic label.
            in_label = self.sym(k - 1) in _LABEL_OPERATORS or (k - 1 == j and self.word(j) == "IS")
            symbol = self.sym(k)
            if symbol == "{":
                props = k
                break
            if symbol == "$" and not in_label:
                raise self.refuse(k, "a node pattern with a $parameter map",
                                  "write the map out, e.g. {key: $props.key}")
            if self.word(k) == "WHERE" and not in_label:
                where = k
                break
            if symbol in ("(", "["):
                self.scan(k + 1, self.partner[k])  # a dynamic label: $(expression)
                k = self.partner[k]
            k += 1
        if props is not None:
            end = self.partner[props]
            self.scan(props + 1, end)
            self.insert_before(end, PROJECT_PROPERTY if end == props + 1 else f", {PROJECT_PROPERTY}")
            after = end + 1
            if after != close:
                if self.word(after) != "WHERE":
                    raise self.refuse(after, "this node pattern")
                where = after
        elif where is not None:
            self.insert_before(where, f"{{{PROJECT_PROPERTY}}} ")
        else:
            self.insert_before(close, f" {{{PROJECT_PROPERTY}}}")
        if where is not None:
            self.scan(where + 1, close)

    def rewritten(self) -> str:
        out: list[str] = []
        last = 0
        for at, text in sorted(self.inserts, key=lambda item: item[0]):
            out.append(self.query[last:at])
            out.append(text)
            last = at
        out.append(self.query[last:])
        return "".join(out)


def scope_to_project(query: str) -> str:
    """``query`` with ``project: $project`` in the property map of every node pattern.

    ``(n:Service)`` becomes ``(n:Service {project: $project})``, ``(:File {path: $p})`` becomes
    ``(:File {path: $p, project: $project})`` (a map key given twice must match both values, so a
    query cannot name another project), ``()`` becomes ``( {project: $project})``. Every node a
    query reads comes from a node pattern, a procedure or a function: the procedures and functions
    that could return another project's nodes are refused by :func:`check_read_only`, so the
    rewritten query reads the project's nodes only, and the relationships between them (graphmem
    creates relationships only between nodes of one project). Raises :class:`CypherRefused` for
    a pattern it cannot scope. Expects a query :func:`check_read_only` has passed.
    """
    scoper = _Scoper(query)
    try:
        scoper.scan(0, scoper.n)
    except RecursionError:
        raise CypherRefused("refused: the query nests subqueries and patterns too deeply to be checked; "
                            f"{_SCOPE_RULE}") from None
    return scoper.rewritten()


# --- running --------------------------------------------------------------------------------------


@dataclass(slots=True)
class CypherResult:
    """Rows of a read-only query, as JSON-ready values (see :func:`to_json_value`)."""

    columns: list[str]
    rows: list[list[Any]]
    truncated: bool  # more rows existed than the row limit allowed
    elapsed_ms: float

    def records(self) -> list[dict[str, Any]]:
        """The rows as ``{column: value}`` maps."""
        return [dict(zip(self.columns, row)) for row in self.rows]

    def as_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": self.rows, "row_count": len(self.rows),
                "truncated": self.truncated, "elapsed_ms": round(self.elapsed_ms, 3)}


# Server error codes that mean "this transaction may not do that".
_REFUSAL_CODES = ("Neo.ClientError.Statement.AccessMode", "Neo.ClientError.Security.Forbidden",
                  "Neo.ClientError.Transaction.ForbiddenDueToTransactionType")
_TIMEOUT_CODES = ("Neo.ClientError.Transaction.TransactionTimedOut",
                  "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration")
# db.memory.transaction.max / .total.max reached (MemoryPoolOutOfMemoryError), or the heap itself
# exhausted by one query (OutOfMemoryError: Neo4j fails that query and keeps serving).
_MEMORY_CODES = ("Neo.TransientError.General.MemoryPoolOutOfMemoryError",
                 "Neo.TransientError.General.OutOfMemoryError",
                 "Neo.TransientError.General.TransactionMemoryLimit",
                 "Neo.ClientError.General.TransactionOutOfMemoryError")

NEEDS_NEO4J = ("raw Cypher needs the Neo4j store; the embedded store has no Cypher engine. Start Neo4j with "
               "`scripts/neo4j-local start` (or `docker compose up neo4j`), ingest into it, then use "
               "`--store neo4j` or GRAPHMEM_STORE=neo4j")

#: The longest time limit a query may ask for, unless GRAPHMEM_CYPHER_MAX_TIMEOUT (seconds) says
#: otherwise: a query is an exploration, and a long one holds a server others share.
DEFAULT_MAX_TIMEOUT_S = 30.0


def max_timeout_s() -> float:
    """The longest time limit a query may ask for: ``GRAPHMEM_CYPHER_MAX_TIMEOUT`` or 30 seconds."""
    text = os.environ.get("GRAPHMEM_CYPHER_MAX_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_MAX_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        from graphmem.errors import ConfigError

        raise ConfigError(f"GRAPHMEM_CYPHER_MAX_TIMEOUT must be a number of seconds above 0, not {text!r}")
    return value


def _driver_of(store: Any) -> Any:
    driver = getattr(store, "driver", None)
    if driver is None:
        raise NotSupported(NEEDS_NEO4J)
    return driver


def run_read_only(store: Any, query: str, params: Mapping[str, Any] | None = None, *, row_limit: int = 1000,
                  timeout_s: float = 30.0) -> CypherResult:
    """Check ``query``, keep it to the store's project and run it on ``store`` (a Neo4j store) in a
    READ transaction.

    ``params`` travel as driver parameters, never spliced into the text; ``$project`` is always the
    store's project, and every node pattern is held to it (:func:`scope_to_project`). At most
    ``row_limit`` rows are read (``truncated`` tells whether there were more); past ``timeout_s``
    seconds (at most :func:`max_timeout_s`) the server stops the query, or the runner gives up on it
    a few seconds later and terminates its transaction, and :class:`CypherTimeout` says so; a query
    stopped by the server's memory limits raises :class:`CypherOutOfMemory`.
    """
    driver = _driver_of(store)
    check_read_only(query)
    _check_limits(row_limit, timeout_s)
    scoped = scope_to_project(query)
    return _execute(driver, getattr(store, "database", None), store.project, scoped, params,
                    row_limit=row_limit, timeout_s=timeout_s)


def _check_limits(row_limit: int, timeout_s: float) -> None:
    if row_limit < 1:
        raise CypherError(f"the row limit must be at least 1, not {row_limit}")
    if not timeout_s > 0:
        raise CypherError(f"the time limit must be more than 0 seconds, not {timeout_s}")
    cap = max_timeout_s()
    if timeout_s > cap:
        raise CypherError(f"the time limit may be at most {cap:g} s, not {timeout_s:g} s; narrow the query "
                          "(LIMIT, a smaller depth, a more selective MATCH) or raise GRAPHMEM_CYPHER_MAX_TIMEOUT")


#: Seconds past its time limit a query gets for the server's own stop to arrive before the client
#: gives up: Neo4j looks for transactions past their limit every 2 s (db.transaction.monitor.check.interval)
#: and the query notices between rows.
DEADLINE_GRACE_S = 3.0
#: Seconds the client waits for Neo4j to confirm it terminated a transaction that ran past its
#: deadline (a server busy collecting garbage may answer late; the caller is not kept waiting).
TERMINATE_WAIT_S = 3.0
#: The transaction metadata key that names a runner's transaction, so it can be found and terminated.
TAG_KEY = "graphmem_cypher"


def _execute(driver: Any, database: str | None, project: str, query: str, params: Mapping[str, Any] | None,
             *, row_limit: int, timeout_s: float) -> CypherResult:
    """Run ``query`` in a READ transaction, without the checker (the server's guard still holds).

    The server's time limit stops a query between rows; it does not interrupt the evaluation of one
    expression (``reduce`` or a list comprehension over a huge ``range``), which may run for minutes.
    So the query runs on a worker thread, and when it is not done ``DEADLINE_GRACE_S`` after its
    limit the runner gives up: it terminates the server-side transaction (found by its metadata
    tag), closes the worker's connection and raises :class:`CypherTimeout`.
    """
    import neo4j

    _check_limits(row_limit, timeout_s)
    values = dict(params or {})
    if "project" in values and values["project"] != project:
        raise CypherError(f"$project is the project of the store ({project}); choose another with --project")
    values["project"] = project
    tag = uuid.uuid4().hex
    box: dict[str, Any] = {}
    done = threading.Event()

    def work(tx: Any) -> tuple[list[str], list[list[Any]], bool]:
        result = tx.run(query, values)
        columns = list(result.keys())
        raw: list[Any] = []
        truncated = False
        for record in result:
            if len(raw) == row_limit:
                truncated = True  # the rest is discarded when the transaction ends
                break
            raw.append(record.values())
        keys = _Keys(tx, project)
        rows = [[to_json_value(v, keys) for v in row] for row in raw]
        keys.resolve()
        return columns, [keys.fill(row) for row in rows], truncated

    def worker() -> None:
        try:
            with driver.session(database=database, default_access_mode=neo4j.READ_ACCESS,
                                fetch_size=min(row_limit + 1, 1000)) as session:
                box["session"] = session
                # An explicit transaction, not execute_read: the driver would retry a query stopped by
                # the memory limits (a "transient" error) again and again for half a minute.
                with session.begin_transaction(timeout=timeout_s, metadata={TAG_KEY: tag}) as tx:
                    box["result"] = work(tx)
                    tx.rollback()  # it only read; nothing to commit
        except BaseException as exc:  # noqa: BLE001 - handed over to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    started = time.perf_counter()
    threading.Thread(target=worker, name="graphmem-cypher", daemon=True).start()
    try:
        finished = done.wait(timeout_s + DEADLINE_GRACE_S)
    except BaseException:  # Ctrl-C while waiting: the server must not go on with it either
        _abandon(driver, database, tag, box)
        raise
    if not finished:
        _abandon(driver, database, tag, box)
        raise CypherTimeout(f"the query timed out after {timeout_s:g} s (the time limit of {timeout_s:g} s): Neo4j "
                            "was still evaluating it, so its transaction was terminated; narrow it (LIMIT, smaller "
                            "ranges, lists and strings built in the query) or raise --timeout")
    if "error" in box:
        raise _translate(box["error"], timeout_s) from None
    columns, rows, truncated = box["result"]
    return CypherResult(columns, rows, truncated, (time.perf_counter() - started) * 1000)


def _translate(exc: BaseException, timeout_s: float) -> BaseException:
    """The error to raise for what the driver raised on the worker thread."""
    import neo4j.exceptions as nx

    if isinstance(exc, (nx.ServiceUnavailable, nx.SessionExpired, nx.AuthError)):
        return StoreUnavailable(f"Neo4j is not available: {exc}")
    if isinstance(exc, nx.Neo4jError):
        code = exc.code or ""
        message = " ".join(str(exc.message or exc).split())
        if code in _REFUSAL_CODES or "AccessMode" in code:
            return CypherRefused(f"refused by Neo4j: the query tried to write in a read-only transaction ({message})")
        if "IN TRANSACTIONS" in message:  # it must commit on its own, outside this transaction
            return CypherRefused(f"refused by Neo4j: CALL {{ ... }} IN TRANSACTIONS commits on its own ({message})")
        if code in _TIMEOUT_CODES or "TimedOut" in code:
            return CypherTimeout(f"the query timed out after {timeout_s:g} s (the time limit of {timeout_s:g} s) "
                                 "and Neo4j stopped it; narrow it (LIMIT, a smaller depth, a more selective MATCH) "
                                 "or raise --timeout")
        if code in _MEMORY_CODES or "OutOfMemory" in code or "MemoryLimit" in code:
            what = "ran the server's heap out of memory" if code.endswith(".General.OutOfMemoryError") else \
                "needed more memory than the server allows one transaction"
            return CypherOutOfMemory(f"Neo4j stopped the query: it {what} ({message}); narrow it (LIMIT, fewer "
                                     "rows collected or sorted, smaller values built in the query)")
        if code.endswith(".Statement.ExecutionFailed") and _is_negative_size(message):
            # Java's NegativeArraySizeException, whose message is the size: a string or list built in
            # the query outgrew the largest array the JVM can hold, before a memory guard counted it
            # (string concatenation is not tracked) or the heap ran out.
            return CypherOutOfMemory(f"Neo4j stopped the query: it built a value larger than the server can hold "
                                     f"(size {message}); narrow it (LIMIT, fewer rows collected or sorted, smaller "
                                     "values built in the query)")
        return CypherError(f"Neo4j could not run the query: {code}: {message}")
    if isinstance(exc, nx.DriverError):
        return CypherError(f"Neo4j could not run the query: {exc}")
    return exc


def _is_negative_size(message: str) -> bool:
    """Whether an error message is only a negative number (an array size that overflowed)."""
    return message.startswith("-") and message[1:].isdigit()


def _abandon(driver: Any, database: str | None, tag: str, box: dict[str, Any]) -> None:
    """Stop a query the caller no longer waits for: terminate its server-side transaction, then
    close the worker's connection so the worker thread ends too.

    The termination runs on its own thread, waited for at most ``TERMINATE_WAIT_S``: a server deep
    in garbage collection answers late, and the caller's error must not wait for it.
    """
    stopper = threading.Thread(target=_terminate, args=(driver, database, tag), name="graphmem-cypher-stop",
                               daemon=True)
    stopper.start()
    stopper.join(TERMINATE_WAIT_S)
    # Killing its connection (the driver's own "close the socket, no goodbye") is the only way to
    # wake a thread blocked on a read, as sessions are not thread-safe; the driver then drops the
    # connection quietly, and the server terminates the transaction of a connection that went away,
    # should the command above not have got through.
    kill = getattr(getattr(box.get("session"), "_connection", None), "kill", None)
    if callable(kill):
        with contextlib.suppress(Exception):
            kill()


def _terminate(driver: Any, database: str | None, tag: str) -> None:
    """Terminate the transactions tagged ``tag`` (``SHOW TRANSACTIONS`` and ``TERMINATE TRANSACTIONS``
    work on Neo4j 5 Community for the user's own transactions); best effort."""
    import neo4j

    with contextlib.suppress(Exception), driver.session(database=database) as session:
        ids = [r["id"] for r in session.run(neo4j.Query(
            f"SHOW TRANSACTIONS YIELD transactionId AS id, metaData WHERE metaData.{TAG_KEY} = $tag RETURN id",
            timeout=TERMINATE_WAIT_S), tag=tag)]
        if ids:
            session.run(neo4j.Query("TERMINATE TRANSACTIONS $ids", timeout=TERMINATE_WAIT_S), ids=ids).consume()


class _Keys:
    """Graphmem keys of relationship ends the driver did not send (a relationship returned without
    its nodes carries only their element ids), looked up in the same transaction."""

    def __init__(self, tx: Any, project: str) -> None:
        self._tx = tx
        self._project = project
        self._wanted: set[str] = set()
        self._found: dict[str, Any] = {}

    def key_of(self, node: Any) -> Any:
        if node is None:
            return None
        if len(node.keys()) or not node.element_id:
            return node.get("key")
        self._wanted.add(node.element_id)
        return _Pending(node.element_id)

    def resolve(self) -> None:
        if self._wanted:
            rows = self._tx.run("UNWIND $ids AS id MATCH (n {project: $project}) WHERE elementId(n) = id "
                                "RETURN id, n.key AS key", ids=sorted(self._wanted), project=self._project)
            self._found = {r["id"]: r["key"] for r in rows}

    def fill(self, value: Any) -> Any:
        if isinstance(value, _Pending):
            return self._found.get(value.element_id)
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        return value


@dataclass(frozen=True, slots=True)
class _Pending:
    element_id: str


def to_json_value(value: Any, keys: _Keys | None = None) -> Any:
    """A driver value as JSON: nodes as ``{"labels", "key", "properties"}``, relationships as
    ``{"type", "start", "end", "properties"}`` (ends by key), paths as the list of their nodes and
    relationships, temporal values as ISO strings, points as ``{"srid", "coordinates"}``."""
    from neo4j.graph import Node, Path, Relationship
    from neo4j.spatial import Point

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Node):
        return {"labels": sorted(value.labels), "key": value.get("key"),
                "properties": {k: to_json_value(v, keys) for k, v in value.items()}}
    if isinstance(value, Relationship):
        ends = [keys.key_of(n) if keys else (n.get("key") if n is not None else None)
                for n in (value.start_node, value.end_node)]
        return {"type": value.type, "start": ends[0], "end": ends[1],
                "properties": {k: to_json_value(v, keys) for k, v in value.items()}}
    if isinstance(value, Path):
        out: list[Any] = [to_json_value(value.start_node, keys)]
        for rel, node in zip(value.relationships, value.nodes[1:]):
            out += [to_json_value(rel, keys), to_json_value(node, keys)]
        return out
    if isinstance(value, Point):  # a tuple of coordinates with a coordinate system
        return {"srid": value.srid, "coordinates": list(value)}
    iso = getattr(value, "iso_format", None)
    if callable(iso):  # neo4j.time Date, Time, DateTime and Duration (a tuple: test before lists)
        return iso()
    if isinstance(value, (list, tuple)):
        return [to_json_value(v, keys) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_json_value(v, keys) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):  # datetime, date, time from the standard library
        return isoformat()
    return str(value)


# --- saved queries --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SavedParam:
    """A parameter of a saved query; ``required`` when its header gives no default."""

    name: str
    description: str
    default: Any = None
    required: bool = True


@dataclass(frozen=True, slots=True)
class SavedQuery:
    """A query from ``cypher/saved/<name>.cypher``: its header says what it answers and its parameters."""

    name: str
    description: str
    params: list[SavedParam] = field(default_factory=list)
    text: str = ""

    @property
    def summary(self) -> str:
        """The first sentence of the description."""
        text = " ".join(self.description.split())
        return text.split(". ")[0].rstrip(".") + "." if text else ""


_PARAM_LINE = re.compile(r"^@param\s+([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*?)\s*(?:\(default:\s*(.*)\))?\s*$")


def _show(value: Any) -> str:
    return "null" if value is None else json.dumps(value) if isinstance(value, bool) else str(value)


def parse_value(text: str) -> Any:
    """A ``--param`` value from the command line: ``null``, ``true``/``false``, integers, decimals,
    JSON lists and maps become those; anything else stays text."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered == "null":
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    if re.fullmatch(r"[+-]?\d+", stripped):
        return int(stripped)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", stripped):
        return float(stripped)
    if stripped[:1] in "[{":
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return text
    return text


def _parse_saved(name: str, text: str) -> SavedQuery:
    from graphmem.errors import ConfigError

    description: list[str] = []
    params: list[SavedParam] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("//"):
            break
        body = stripped[2:].strip()
        match = _PARAM_LINE.match(body)
        if match:
            pname, pdesc, default = match.groups()
            params.append(SavedParam(pname, pdesc, parse_value(default) if default is not None else None,
                                     required=default is None))
        elif body.startswith("@"):
            raise ConfigError(f"saved query {name}: cannot read header line {stripped!r}")
        elif not params:
            description.append(body)
    if not description:
        raise ConfigError(f"saved query {name}: the file must start with // lines saying what it answers")
    return SavedQuery(name, "\n".join(description).strip(), params, text)


def saved_queries() -> dict[str, SavedQuery]:
    """The saved queries in ``cypher/saved/*.cypher``, by name (the file name without ``.cypher``)."""
    from graphmem.cypher import cypher_dir

    folder = cypher_dir() / "saved"
    if not folder.is_dir():
        return {}
    return {path.stem: _parse_saved(path.stem, path.read_text(encoding="utf-8"))
            for path in sorted(folder.glob("*.cypher"))}


def _coerce(saved: SavedQuery, param: SavedParam, value: Any) -> Any:
    """A value given as text converted like the parameter's default (text stays text for keys)."""
    if not isinstance(value, str):
        return value
    default = param.default
    if value.strip().lower() == "null" and not param.required:
        return None
    try:
        if isinstance(default, bool):
            if value.strip().lower() not in ("true", "false", "yes", "no", "1", "0"):
                raise ValueError(value)
            return value.strip().lower() in ("true", "yes", "1")
        if isinstance(default, int):
            return int(value.strip())
        if isinstance(default, float):
            return float(value.strip())
    except ValueError:
        kind = "true or false" if isinstance(default, bool) else \
            "a whole number" if isinstance(default, int) else "a number"
        raise CypherError(f"saved query {saved.name}: --param {param.name} must be {kind}, not {value!r}") \
            from None
    return value


def bind_saved(saved: SavedQuery, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parameters to run ``saved`` with: defaults filled in, values converted, mistakes named."""
    given = dict(params or {})
    known = {p.name: p for p in saved.params}
    expected = ", ".join(f"{p.name} (required)" if p.required else f"{p.name} (default {_show(p.default)})"
                         for p in saved.params) or "none"
    unknown = sorted(set(given) - set(known) - {"project"})
    if unknown:
        raise CypherError(f"saved query {saved.name} has no parameter {', '.join(unknown)}; it takes: {expected}")
    missing = [p.name for p in saved.params if p.required and given.get(p.name) in (None, "")]
    if missing:
        raise CypherError(f"saved query {saved.name} needs --param {', '.join(f'{m}=...' for m in missing)}; "
                          f"it takes: {expected}")
    bound = {name: _coerce(saved, p, given[name]) if name in given else p.default for name, p in known.items()}
    if "project" in given:  # run_read_only checks it is the store's own
        bound["project"] = given["project"]
    return bound


def get_saved(name: str) -> SavedQuery:
    """The saved query called ``name``, or a :class:`CypherError` listing the ones there are."""
    queries = saved_queries()
    if name not in queries:
        raise CypherError(f"no saved query {name!r}; there are: {', '.join(queries) or 'none'} "
                          "(graphmem cypher --list)")
    return queries[name]


def run_saved(store: Any, name: str, params: Mapping[str, Any] | None = None, *, row_limit: int = 1000,
              timeout_s: float = 30.0) -> CypherResult:
    """Run the saved query ``name`` with ``params`` (text values are converted) through
    :func:`run_read_only`."""
    _driver_of(store)  # before the parameters: "needs Neo4j" is the first thing to know
    saved = get_saved(name)
    return run_read_only(store, saved.text, bind_saved(saved, params), row_limit=row_limit, timeout_s=timeout_s)


__all__ = [
    "DEADLINE_GRACE_S",
    "DEFAULT_MAX_TIMEOUT_S",
    "NEEDS_NEO4J",
    "PROJECT_PROPERTY",
    "READ_ONLY_FUNCTION_PREFIXES",
    "READ_ONLY_PROCEDURES",
    "CypherError",
    "CypherOutOfMemory",
    "CypherRefused",
    "CypherResult",
    "CypherTimeout",
    "SavedParam",
    "SavedQuery",
    "TERMINATE_WAIT_S",
    "bind_saved",
    "check_read_only",
    "get_saved",
    "max_timeout_s",
    "parse_value",
    "query_parameters",
    "run_read_only",
    "run_saved",
    "saved_queries",
    "scope_to_project",
    "to_json_value",
]
