"""Read-only Cypher for engineers: a checker, a guarded runner and the saved queries in ``cypher/saved/``.

Two guards stand between a query and the graph:

1. :func:`check_read_only` tokenizes the query the way Neo4j's parser reads it (unicode escapes,
   comments, string literals, backtick-quoted names) and refuses anything that writes or administers:
   updating clauses, schema and administration commands, ``LOAD CSV``, ``USE``, ``CALL { } IN
   TRANSACTIONS``, several statements, and every procedure or namespaced function that is not on an
   allow-list of read-only ones.
2. :func:`run_read_only` runs what passed in a READ access-mode transaction with a time limit, so
   the server itself refuses a write the checker might have missed; that refusal is reported as
   :class:`CypherRefused` too.

Queries always get ``$project`` (the store's project) so they can keep to one project's nodes.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
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

#: Procedures a query may CALL: each only reads (checked against the server's own list by the tests).
READ_ONLY_PROCEDURES = frozenset({
    "db.labels", "db.relationshipTypes", "db.propertyKeys",
    "db.schema.visualization", "db.schema.nodeTypeProperties", "db.schema.relTypeProperties",
    "db.index.fulltext.queryNodes", "db.index.fulltext.queryRelationships",
    "db.index.fulltext.listAvailableAnalyzers",
    "db.index.vector.queryNodes", "db.index.vector.queryRelationships",
    "apoc.help",
    # apoc.meta.*: not the ``.of`` variants, which run a Cypher string of their own.
    "apoc.meta.data", "apoc.meta.graph", "apoc.meta.graphSample", "apoc.meta.nodeTypeProperties",
    "apoc.meta.relTypeProperties", "apoc.meta.schema", "apoc.meta.stats", "apoc.meta.subGraph",
    "apoc.path.expand", "apoc.path.expandConfig", "apoc.path.spanningTree", "apoc.path.subgraphAll",
    "apoc.path.subgraphNodes",
    "apoc.neighbors.athop", "apoc.neighbors.athop.count", "apoc.neighbors.byhop",
    "apoc.neighbors.byhop.count", "apoc.neighbors.tohop", "apoc.neighbors.tohop.count",
    "apoc.algo.aStar", "apoc.algo.aStarConfig", "apoc.algo.allSimplePaths", "apoc.algo.dijkstra",
})

#: Namespaces of functions a query may call (unnamespaced built-ins such as ``count`` always can).
#: Functions cannot write, except those that run Cypher of their own (``apoc.cypher.*``), which
#: are not here; nor is anything under ``dbms.`` or ``graph.`` (other databases).
READ_ONLY_FUNCTION_PREFIXES = (
    "date.", "datetime.", "localdatetime.", "localtime.", "time.", "duration.", "point.", "vector.",
    "db.nameFromElementId",
    "apoc.agg.", "apoc.any.", "apoc.bitwise.", "apoc.coll.", "apoc.convert.", "apoc.data.", "apoc.date.",
    "apoc.diff.", "apoc.hashing.", "apoc.json.", "apoc.label.", "apoc.map.", "apoc.math.", "apoc.meta.",
    "apoc.node.", "apoc.nodes.", "apoc.number.", "apoc.path.", "apoc.rel.", "apoc.scoring.",
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


def _is_word_start(ch: str) -> bool:
    return ch.isalpha() or ch == "_"


def _is_word_part(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


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
        if ch.isspace():
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


def _refuse(query: str, tok: _Token, why: str) -> CypherRefused:
    return CypherRefused(f"refused: {why} ({_where(query, tok.at)}); graphmem cypher runs read-only queries")


def check_read_only(query: str) -> None:
    """Raise :class:`CypherRefused` unless ``query`` is one read-only statement.

    What is refused, and why, is named in the message: an updating clause (CREATE, MERGE, SET,
    DELETE, REMOVE, FOREACH...), a schema or administration command, LOAD CSV, USE, CALL { } IN
    TRANSACTIONS, a second statement, a SHOW other than of indexes, constraints, procedures or
    functions, a procedure outside :data:`READ_ONLY_PROCEDURES`, a namespaced function outside
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
                raise _refuse(query, nxt, f"procedure {name} is not on the read-only allow-list "
                                          "(db.labels, db.schema.visualization, apoc.path.expand, ...)")
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

NEEDS_NEO4J = ("raw Cypher needs the Neo4j store; the embedded store has no Cypher engine. Start Neo4j with "
               "`scripts/neo4j-local start` (or `docker compose up neo4j`), ingest into it, then use "
               "`--store neo4j` or GRAPHMEM_STORE=neo4j")


def _driver_of(store: Any) -> Any:
    driver = getattr(store, "driver", None)
    if driver is None:
        raise NotSupported(NEEDS_NEO4J)
    return driver


def run_read_only(store: Any, query: str, params: Mapping[str, Any] | None = None, *, row_limit: int = 1000,
                  timeout_s: float = 30.0) -> CypherResult:
    """Check ``query`` and run it on ``store`` (a Neo4j store) in a READ transaction.

    ``params`` travel as driver parameters, never spliced into the text; ``$project`` is always the
    store's project. At most ``row_limit`` rows are read (``truncated`` tells whether there were
    more); past ``timeout_s`` seconds the server stops the query and :class:`CypherTimeout` says so.
    """
    driver = _driver_of(store)
    check_read_only(query)
    return _execute(driver, getattr(store, "database", None), store.project, query, params,
                    row_limit=row_limit, timeout_s=timeout_s)


def _execute(driver: Any, database: str | None, project: str, query: str, params: Mapping[str, Any] | None,
             *, row_limit: int, timeout_s: float) -> CypherResult:
    """Run ``query`` in a READ transaction, without the checker (the server's guard still holds)."""
    import neo4j
    import neo4j.exceptions as nx

    if row_limit < 1:
        raise CypherError(f"the row limit must be at least 1, not {row_limit}")
    if not timeout_s > 0:
        raise CypherError(f"the time limit must be more than 0 seconds, not {timeout_s}")
    values = dict(params or {})
    if "project" in values and values["project"] != project:
        raise CypherError(f"$project is the project of the store ({project}); choose another with --project")
    values["project"] = project

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
        keys = _Keys(tx)
        rows = [[to_json_value(v, keys) for v in row] for row in raw]
        keys.resolve()
        return columns, [keys.fill(row) for row in rows], truncated

    started = time.perf_counter()
    try:
        with driver.session(database=database, default_access_mode=neo4j.READ_ACCESS,
                            fetch_size=min(row_limit + 1, 1000)) as session:
            columns, rows, truncated = session.execute_read(neo4j.unit_of_work(timeout=timeout_s)(work))
    except (nx.ServiceUnavailable, nx.SessionExpired, nx.AuthError) as exc:
        raise StoreUnavailable(f"Neo4j is not available: {exc}") from exc
    except nx.Neo4jError as exc:
        code = exc.code or ""
        message = " ".join(str(exc.message or exc).split())
        if code in _REFUSAL_CODES or "AccessMode" in code:
            raise CypherRefused(f"refused by Neo4j: the query tried to write in a read-only transaction "
                                f"({message})") from None
        if "IN TRANSACTIONS" in message:  # it must commit on its own, outside this transaction
            raise CypherRefused(f"refused by Neo4j: CALL {{ ... }} IN TRANSACTIONS commits on its own ({message})") \
                from None
        if code in _TIMEOUT_CODES or "TimedOut" in code:
            raise CypherTimeout(f"the query was stopped after the time limit of {timeout_s:g} s; narrow it "
                                "(LIMIT, a smaller depth, a more selective MATCH) or raise --timeout") from None
        raise CypherError(f"Neo4j could not run the query: {code}: {message}") from None
    except nx.DriverError as exc:
        raise CypherError(f"Neo4j could not run the query: {exc}") from None
    return CypherResult(columns, rows, truncated, (time.perf_counter() - started) * 1000)


class _Keys:
    """Graphmem keys of relationship ends the driver did not send (a relationship returned without
    its nodes carries only their element ids), looked up in the same transaction."""

    def __init__(self, tx: Any) -> None:
        self._tx = tx
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
            rows = self._tx.run("UNWIND $ids AS id MATCH (n) WHERE elementId(n) = id RETURN id, n.key AS key",
                                ids=sorted(self._wanted))
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
    "NEEDS_NEO4J",
    "READ_ONLY_FUNCTION_PREFIXES",
    "READ_ONLY_PROCEDURES",
    "CypherError",
    "CypherRefused",
    "CypherResult",
    "CypherTimeout",
    "SavedParam",
    "SavedQuery",
    "bind_saved",
    "check_read_only",
    "get_saved",
    "parse_value",
    "query_parameters",
    "run_read_only",
    "run_saved",
    "saved_queries",
    "to_json_value",
]
