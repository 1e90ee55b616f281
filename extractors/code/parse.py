"""Phase one: one file's bytes -> ``FileFacts``, with tree-sitter queries (pure, no project context).

The ``.scm`` query of each language finds the interesting nodes (definitions, imports,
inheritance, call sites, type facts); the code here turns those nodes into plain facts: qualified
names from the nesting of definitions, signatures, docstrings and line ranges.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from dataclasses import dataclass, field
from typing import Any

from extractors.code.facts import CallFact, FileFacts, ImportFact, SymbolFact
from extractors.code.languages import language_for, looks_minified, parser, query
from graphmem.model import CLASS_KINDS, FUNCTION_KINDS

# Beyond this size a file is recorded (node, line count) but not parsed: such files are generated
# data, and parsing them costs more than their symbols are worth.
MAX_PARSE_BYTES = 8 * 1024 * 1024
# Query patterns start at most this many levels below a file's root. Written code nests a few dozen
# levels; a generated or hostile expression nested tens of thousands deep made tree-sitter's query
# matching take minutes (its in-progress matches grow with the depth). Below this depth nothing is
# read, and the file says so (``FileFacts.too_deep``).
MAX_QUERY_DEPTH = 32_000
MAX_SIGNATURE_CHARS = 400
MAX_CALLEE_CHARS = 200
MAX_DOC_CHARS = 2000

_COMMENT_TYPES = frozenset({"comment", "line_comment", "block_comment"})
# Wrappers a definition may sit in; comments above them document the definition.
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "lexical_declaration", "variable_declaration"})
# Nodes `_anchor` and `_comment_doc` step from (besides captured ones): wrappers, Go's type
# declarations, and what may sit above a definition.
_NEIGHBOURS_KEPT = _WRAPPERS | _COMMENT_TYPES | {"type_declaration", "attribute_item"}
_WHITESPACE = re.compile(r"\s+")
_TYPE_ARGS = re.compile(r"<[^<>()]*>")
_TURBOFISH = re.compile(r"::<[^()]*>")
_PUNCT_SPACE = re.compile(r"\s*([.()\[\]:<>,?!&*])\s*")
_REFERENCE_PREFIX = re.compile(r"^[\s*&]*(?:'\w+\s+)?(?:mut\s+|dyn\s+)?")
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_SIMPLE_VAR = re.compile(r"^(?:(?:self|this)\.)?[A-Za-z_$][\w$]*$")


# PEP 263: a coding declaration in one of the first two lines (other languages' files rarely have one).
# One well-formed multi-byte UTF-8 character: a legacy (8-bit) text almost never contains one.
_UTF8_SEQUENCE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)


def decode(data: bytes) -> tuple[str, bool]:
    """Text of a file and whether it was not UTF-8.

    Text that is not UTF-8 is read in the encoding it declares (PEP 263); else, when it holds no
    well-formed UTF-8 character at all, as Windows-1252 (then Latin-1, which reads any bytes), so a
    legacy identifier such as ``café`` keeps its name instead of being cut at a replacement
    character the grammars do not accept; else as UTF-8 with the bad bytes replaced.
    """
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        pass
    head = b"\n".join(data.split(b"\n", 2)[:2])
    declared = _CODING.search(head)
    if not declared and _UTF8_SEQUENCE.search(data):
        # Mostly UTF-8 with a few bad bytes: reading it all as a legacy encoding would garble the
        # good characters, so only the bad bytes are replaced.
        return data.decode("utf-8", errors="replace"), True
    for encoding in ([declared.group(1).decode("ascii")] if declared else []) + ["cp1252", "latin-1"]:
        try:
            return data.decode(encoding), True
        except (UnicodeDecodeError, LookupError):
            continue
    return data.decode("utf-8", errors="replace"), True  # not reached: Latin-1 decodes any bytes


def count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def parse_file(path: str, data: bytes) -> FileFacts:
    """Facts about one file. ``path`` is POSIX and relative to the repository root.

    Never raises on content: syntax errors leave a partial tree (recorded in
    ``has_syntax_errors``), text that is not UTF-8 is read in a legacy encoding (``decode_errors``).
    """
    language = language_for(path)
    if language is None:
        raise ValueError(f"the code extractor does not read {path!r}")
    text, decode_errors = decode(data)
    facts = FileFacts(
        path=path, language=language, lines=count_lines(text), source=text, decode_errors=decode_errors
    )
    if language == "gomod":
        match = re.search(r"^\s*module\s+(\S+)", text, re.MULTILINE)
        facts.package = match.group(1).strip('"') if match else ""
        return facts
    if language == "npmpackage":
        facts.package, facts.entries = _npm_manifest(text)
        return facts
    if not text.strip() or len(data) > MAX_PARSE_BYTES or looks_minified(data):
        return facts  # a version in history too (commit hunks are mapped onto symbols with this)
    # Re-encode so that byte offsets agree with the (transcoded) text.
    source = text.encode("utf-8") if decode_errors else data
    tree = parser(language).parse(source)
    _FileParser(facts, source, tree).run()
    return facts


# Fields of a package manifest that name its main entry point, the source first ("source" is the
# bundlers' name for the unbuilt file).
_NPM_MAIN_FIELDS = ("source", "types", "typings", "module", "main", "browser")
_NPM_MAX_DEPTH = 8  # conditions nest a few levels ("import" > "types" > "default"); deeper is no manifest


def _npm_manifest(text: str) -> tuple[str, dict[str, list[str]]]:
    """A ``package.json``'s name and entry points (see ``FileFacts.entries``); nothing for text
    that is not such a manifest."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return "", {}
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return "", {}
    entries: dict[str, list[str]] = {}

    def collect(subpath: str, value: object, depth: int = 0) -> None:
        # A target is a path, or conditions ("import", "types", "default") nested to any depth.
        if isinstance(value, str) and value.strip() and "://" not in value:
            entries.setdefault(subpath, []).append(value.strip())
        elif isinstance(value, (dict, list)) and depth < _NPM_MAX_DEPTH:
            for inner in value.values() if isinstance(value, dict) else value:
                collect(subpath, inner, depth + 1)

    for key in _NPM_MAIN_FIELDS:
        collect(".", data.get(key))
    exports = data.get("exports")
    if isinstance(exports, dict) and any(isinstance(k, str) and k.startswith(".") for k in exports):
        for subpath, value in exports.items():
            if isinstance(subpath, str) and subpath.startswith(".") and "*" not in subpath:
                collect(subpath, value)
    else:
        collect(".", exports)  # a single entry, or conditions for the package's root
    return data["name"], {subpath: list(dict.fromkeys(paths)) for subpath, paths in entries.items()}


# --- per-file parsing ---------------------------------------------------------------------------

# Expressions that only wrap another for the type checker or for precedence.
_VALUE_WRAPPERS = frozenset({"as_expression", "satisfies_expression", "parenthesized_expression", "non_null_expression",
                             "type_assertion"})


@dataclass(slots=True)
class _Def:
    node: Any
    kind: str
    name: str
    receiver: str = ""
    qualname: str = ""
    symbol: SymbolFact | None = None


@dataclass(slots=True)
class _Scope:
    """A Rust ``impl`` block: not a symbol, but it names the type its functions belong to."""

    node: Any
    type_name: str


@dataclass
class _FileParser:
    facts: FileFacts
    source: bytes
    tree: Any
    defs: dict[int, _Def] = field(default_factory=dict)
    impls: dict[int, _Scope] = field(default_factory=dict)
    # Per captured node id, from one top-down walk (see `_place_nodes`).
    owners: dict[int, _Def | None] = field(default_factory=dict)
    # Module-level names bound to another name: (name, the name it is bound to).
    aliases: list[tuple[str, str]] = field(default_factory=list)
    scopes: dict[int, _Def | _Scope | None] = field(default_factory=dict)
    closures: dict[int, Any] = field(default_factory=dict)
    # Parent and previous named sibling of captured nodes, wrappers and comments (`_anchor`,
    # `_comment_doc`): tree-sitter finds either by searching down from the root.
    parents: dict[int, Any] = field(default_factory=dict)
    prev_named: dict[int, Any] = field(default_factory=dict)

    @property
    def language(self) -> str:
        return self.facts.language

    def text(self, node: Any) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def run(self) -> None:
        root = self.tree.root_node
        self.facts.has_syntax_errors = root.has_error
        matches = _matches(self.language, root)
        self._collect_definitions(matches)
        for match in matches:
            if "import" in match or "import.require" in match or "import.mod" in match:
                self._import(match)
            elif "call" in match:
                self._call(match)
            elif "inherit.owner" in match:
                self._inherit(match)
            elif "macro.args" in match:
                self._macro_calls(match["macro.args"][0])
            elif "bind.var" in match or "field.var" in match:
                self._bind(match)
            elif "package" in match and not self.facts.package:
                self.facts.package = _WHITESPACE.sub("", self.text(match["package"][0]))
            elif "export.default" in match:
                self.facts.default_export = self.text(match["export.default"][0])
            elif "alias.name" in match:
                self._alias(match)
        if self.language == "python":
            self.facts.docstring = _python_docstring(self, root)
        self._finish_symbols()
        if self.aliases:
            top = {s.qualname: s for s in self.facts.symbols if not s.parent}
            for name, target in self.aliases:
                if target in top and name != target and name not in top and name not in top[target].aliases:
                    top[target].aliases.append(name)

    def _alias(self, match: dict[str, list[Any]]) -> None:
        """``const persist = persistImpl as unknown as Persist``: ``persist`` names ``persistImpl``
        (through type assertions, parentheses and non-null marks)."""
        value = match["alias.value"][0]
        while value.type in _VALUE_WRAPPERS and value.named_children:
            value = value.named_children[0]
        if value.type == "identifier":
            self.aliases.append((self.text(match["alias.name"][0]), self.text(value)))

    # definitions

    def _collect_definitions(self, matches: list[dict[str, list[Any]]]) -> None:
        for match in matches:
            if "impl" in match:
                node = match["impl"][0]
                type_name = _type_name(self.text(match["impl.type"][0]))
                if type_name:
                    self.impls[node.id] = _Scope(node, type_name)
                continue
            if "impl.trait" in match:
                self.facts.extra_bases.append(
                    [_type_name(self.text(match["impl.type"][0])), _strip_type_args(self.text(match["impl.trait"][0]))]
                )
                continue
            kind = next((key[4:] for key in match if key.startswith("def.")), None)
            if kind is None:
                continue
            node = match["def." + kind][0]
            existing = self.defs.get(node.id)
            # A node matched by a specific and a generic pattern keeps the specific kind.
            if existing is not None and (existing.kind != "type" or kind == "type"):
                continue
            receiver = _type_name(self.text(match["receiver"][0])) if "receiver" in match else ""
            if "owner" in match:
                owner = _assigned_owner(self.text(match["owner"][0]))
                if owner is None:
                    continue
                receiver, kind = owner, kind if owner else "function"
            self.defs[node.id] = _Def(node, kind, self.text(match["name"][0]), receiver)
        self._place_nodes({node.id for match in matches for nodes in match.values() for node in nodes})
        # Document order keeps parents before children and first overloads first.
        for item in sorted(self.defs.values(), key=lambda d: d.node.start_byte):
            self._qualify(item)

    def _place_nodes(self, wanted: set[int]) -> None:
        """Record, for each node in ``wanted``, its owner (``_enclosing_def``), its scope
        (``_enclosing``) and the anonymous function it sits in (``_closure_end``), in one walk
        down the tree.

        Walking up instead costs the tree's depth per step: tree-sitter finds a node's parent by
        searching down from the root. Once per call site, that made a long one-line expression
        (minified code) take cubic time.
        """
        cursor = self.tree.walk()
        # What the nodes of each open level inherit: owner, scope, anonymous function below the
        # owner, and the definition a `decorator` child counts its calls for.
        inherited: list[tuple[_Def | None, _Def | _Scope | None, Any, _Def | None]] = [(None, None, None, None)]
        lineage: list[Any] = [None]  # the open nodes, the root's (absent) parent first
        last_named: list[Any] = [None]  # per open level, the named child seen last
        while True:
            node = cursor.node
            owner, scope, closure, decorated = inherited[-1]
            if node.id in wanted or node.type in _NEIGHBOURS_KEPT:
                self.parents[node.id], self.prev_named[node.id] = lineage[-1], last_named[-1]
            if node.is_named:
                last_named[-1] = node
            if node.type == "decorator" and decorated is not None:
                # `@fixture`, `@conan_subcommand()` and `@given(simple_classes())` are calls made
                # for the definition they decorate: they count as its calls.
                owner = decorated
                inner_closure = None
            else:
                inner_closure = node if node.type in _ANONYMOUS_FUNCTIONS else closure
            if node.id in wanted:
                self.owners[node.id], self.scopes[node.id], self.closures[node.id] = owner, scope, closure
            if cursor.goto_first_child():
                definition = self.defs.get(node.id)
                target = node.child_by_field_name("definition") if node.type == "decorated_definition" else None
                inherited.append((
                    definition or owner,
                    definition or self.impls.get(node.id) or scope,
                    None if definition is not None else inner_closure,
                    self.defs.get(target.id) if target is not None else None,
                ))
                lineage.append(node)
                last_named.append(None)
                if len(lineage) > MAX_QUERY_DEPTH:  # checked only when stepping down, not at every node
                    self.facts.too_deep = True
                continue
            while not cursor.goto_next_sibling():
                if not cursor.goto_parent():
                    return
                inherited.pop()
                lineage.pop()
                last_named.pop()

    def _anchor(self, node: Any) -> Any:
        """The outermost wrapper of a definition (decorators, export, `const x = ...`)."""
        anchor = node
        parent = self._parent(anchor)
        while parent is not None and (parent.type in _WRAPPERS or (
                parent.type in ("expression_statement", "assignment_expression")
                and anchor.type == "assignment_expression")):
            anchor, parent = parent, self._parent(parent)
        if anchor.type == "type_spec" and parent is not None and parent.named_child_count == 1:
            anchor = parent
        return anchor

    def _parent(self, node: Any) -> Any | None:
        return self.parents[node.id] if node.id in self.parents else node.parent

    def _prev_named(self, node: Any) -> Any | None:
        return self.prev_named[node.id] if node.id in self.prev_named else node.prev_named_sibling

    def _enclosing(self, node: Any) -> _Def | _Scope | None:
        """The definition or Rust ``impl`` block ``node`` sits in."""
        return self.scopes[node.id]

    def _qualify(self, item: _Def) -> None:
        outer = self._enclosing(item.node)
        parent_qual = ""
        if isinstance(outer, _Def):
            parent_qual = outer.qualname
            if item.kind == "function" and (outer.kind in CLASS_KINDS or outer.kind == "trait"):
                item.kind = "method"
        elif isinstance(outer, _Scope):
            parent_qual = outer.type_name
            if item.kind == "function":
                item.kind = "method"
        if item.receiver:
            parent_qual = item.receiver
        item.qualname = f"{parent_qual}.{item.name}" if parent_qual else item.name
        anchor = self._anchor(item.node)
        start, end = anchor.start_point.row + 1, item.node.end_point.row + 1
        symbol = SymbolFact(
            qualname=item.qualname,
            name=item.name,
            kind=item.kind,
            start_line=start,
            end_line=max(end, anchor.end_point.row + 1),
            signature=self._signature(item.node),
            parent=parent_qual or None,
        )
        if self.language == "python":
            symbol.docstring = _python_docstring(self, item.node.child_by_field_name("body"))
            symbol.doc_inside = bool(symbol.docstring)
        else:
            symbol.docstring, symbol.doc_start_line = self._comment_doc(anchor)
        if item.kind in FUNCTION_KINDS:
            symbol.returns = self._return_type(item.node)
        item.symbol = symbol

    def _signature(self, node: Any) -> str:
        start_node = node
        parent = self._parent(node)
        if node.type == "variable_declarator" and parent is not None:
            start_node = parent
        elif node.type == "type_spec" and parent is not None and parent.named_child_count == 1:
            start_node = parent
        body = _body_of(node)
        if body is not None and body.start_byte > start_node.start_byte:
            raw = self.source[start_node.start_byte : body.start_byte].decode("utf-8", errors="replace")
        else:
            raw = self.text(start_node).split("\n", 1)[0]
        lines = [line.rstrip() for line in raw.strip().splitlines()]
        signature = "\n".join(line for line in lines if line.strip()).rstrip("{:= \t").rstrip()
        if signature.endswith("=>"):
            signature = signature[:-2].rstrip()
        return signature[:MAX_SIGNATURE_CHARS]

    def _return_type(self, node: Any) -> str:
        target = node
        if node.type == "variable_declarator":
            target = node.child_by_field_name("value") or node
        for field_name in ("return_type", "result", "type"):
            child = target.child_by_field_name(field_name)
            if child is not None:
                return _WHITESPACE.sub(" ", self.text(child)).lstrip(":").strip()
        return ""

    def _comment_doc(self, anchor: Any) -> tuple[str, int]:
        """The comment block directly above a definition (attributes may sit between), and the line
        it starts on (0 when there is none)."""
        parts: list[str] = []
        start_row = anchor.start_point.row
        sibling = self._prev_named(anchor)
        while sibling is not None:
            if sibling.type == "attribute_item" and sibling.end_point.row >= start_row - 1:
                start_row = sibling.start_point.row
            elif sibling.type in _COMMENT_TYPES and (
                    sibling.end_point.row >= start_row - 1
                    # A /** doc comment is one by intent, even a blank line above its definition
                    # (a common JSDoc layout: `/** Set the status. */`, a blank, `res.status = ...`).
                    or (not parts and sibling.end_point.row == start_row - 2
                        and self.source[sibling.start_byte:sibling.start_byte + 3] == b"/**")):
                comment = self.text(sibling)
                if self.language == "rust" and not comment.startswith(("///", "/**")):
                    break
                parts.append(comment)
                start_row = sibling.start_point.row
            else:
                break
            sibling = self._prev_named(sibling)
        return _clean_comment("\n".join(reversed(parts))), (start_row + 1 if parts else 0)

    def _finish_symbols(self) -> None:
        by_qualname: dict[str, SymbolFact] = {}
        for item in sorted(self.defs.values(), key=lambda d: d.node.start_byte):
            symbol = item.symbol
            assert symbol is not None
            first = by_qualname.get(symbol.qualname)
            if first is None:
                by_qualname[symbol.qualname] = symbol
            else:
                # Overloads and redefinitions share one key; the first keeps the signature.
                first.extra_ranges.append([symbol.start_line, symbol.end_line, symbol.doc_start_line])
                first.bases.extend(b for b in symbol.bases if b not in first.bases)
                _merge_locals(first, symbol)
                for name, type_text in symbol.fields.items():
                    first.fields.setdefault(name, type_text)
        # A parent named only by an impl block or Go receiver may live in another file.
        for symbol in by_qualname.values():
            if symbol.parent is not None and symbol.parent not in by_qualname:
                symbol.parent = None
        self.facts.symbols = list(by_qualname.values())

    # imports, calls, inheritance, type facts

    def _import(self, match: dict[str, list[Any]]) -> None:
        if "import.mod" in match:
            node = match["import.mod"][0]
            name = self.text(node)
            line = node.start_point.row + 1
            self.facts.imports.append(ImportFact(module="self::" + name, line=line, alias=name, kind="mod"))
            return
        if "import.require" in match:
            self.facts.imports.extend(_js_require(self, match["import.require"][0]))
            return
        node = match["import"][0]
        reader = _IMPORT_READERS[self.language]
        self.facts.imports.extend(reader(self, node))

    def _call(self, match: dict[str, list[Any]]) -> None:
        call = match["call"][0]
        callee_node = match["callee"][0]
        if self.language == "java" and call.type == "method_invocation":
            receiver = call.child_by_field_name("object")
            callee = self.text(callee_node)
            if receiver is not None:
                callee = self.text(receiver) + "." + callee
        else:
            callee = self.text(callee_node)
        callee = _normalise_callee(callee)
        if not callee:
            return
        owner = self._enclosing_def(call)
        self.facts.calls.append(CallFact(owner.qualname if owner else "", callee, call.start_point.row + 1))

    def _macro_calls(self, token_tree: Any) -> None:
        """Call-shaped token runs (`a.b(`, `T::f(`) inside a Rust macro's arguments."""
        owner = self._enclosing_def(token_tree)
        caller = owner.qualname if owner else ""
        pending = [token_tree]
        while pending:
            tree = pending.pop()
            kids = tree.children
            for i, kid in enumerate(kids):
                if kid.type != "token_tree":
                    continue
                pending.append(kid)
                if not kid.child_count or kid.children[0].type != "(":
                    continue
                parts: list[str] = []
                j = i - 1
                while j >= 0 and kids[j].type in ("identifier", "self", "super", "crate"):
                    parts.append(self.text(kids[j]))
                    if j >= 1 and kids[j - 1].type in (".", "::"):
                        parts.append(kids[j - 1].type)
                        j -= 2
                    else:
                        break
                if parts and parts[-1] not in (".", "::"):
                    callee = "".join(reversed(parts))
                    self.facts.calls.append(CallFact(caller, callee, kid.start_point.row + 1))

    def _enclosing_def(self, node: Any) -> _Def | None:
        """The definition ``node`` (a captured node) belongs to: the nearest one above it, or the
        one a decorator it sits in decorates."""
        return self.owners[node.id]

    def _closure_end(self, node: Any) -> int:
        """Last line of the anonymous function ``node`` is bound in, below its owner; 0: none."""
        closure = self.closures[node.id]
        return int(closure.end_point.row + 1) if closure is not None else 0

    def _inherit(self, match: dict[str, list[Any]]) -> None:
        owner = self.defs.get(match["inherit.owner"][0].id)
        if owner is None or owner.symbol is None:
            return
        base = _strip_type_args(self.text(match["inherit.base"][0]))
        if base and base not in owner.symbol.bases:
            owner.symbol.bases.append(base)

    def _bind(self, match: dict[str, list[Any]]) -> None:
        is_field = "field.var" in match
        var_node = match["field.var" if is_field else "bind.var"][0]
        var = _WHITESPACE.sub("", self.text(var_node))
        if not _SIMPLE_VAR.match(var):
            return
        if "bind.call" in match:
            type_text = "()" + _normalise_callee(self.text(match["bind.call"][0]))
        elif "bind.alias" in match:
            # `self.x = x`: the type x was declared with in the enclosing function.
            function = self._enclosing_def(var_node)
            alias = self.text(match["bind.alias"][0])
            type_text = function.symbol.locals.get(alias, "") if function and function.symbol else ""
        else:
            type_text = _WHITESPACE.sub(" ", self.text(match["field.type" if is_field else "bind.type"][0]))
        if not type_text or type_text in ("var", "()"):
            return
        owner = self._enclosing_def(var_node)
        member = var.split(".", 1)[1] if "." in var else ""
        if is_field or member:
            # `self.x = ...`, `this.x = ...` and TS parameter properties describe the class.
            cls = owner
            while cls is not None and cls.kind not in CLASS_KINDS:
                cls = self._enclosing_def(cls.node)
            if cls is not None and cls.symbol is not None:
                cls.symbol.fields.setdefault(member or var, type_text)
            return
        if owner is None:
            self.facts.module_vars.setdefault(var, type_text)
        elif owner.symbol is not None and owner.kind in CLASS_KINDS:
            owner.symbol.fields.setdefault(var, type_text)
        elif owner.symbol is not None:
            symbol, line = owner.symbol, var_node.start_point.row + 1
            binding = [line, type_text, self._closure_end(var_node)]
            if var not in symbol.locals:
                symbol.locals[var] = type_text
                symbol.local_lines[var] = binding
            elif var in symbol.rebound:
                symbol.rebound[var].append(binding)
            elif symbol.locals[var] != type_text:
                symbol.rebound[var] = [symbol.local_lines[var], binding]


def _merge_locals(first: SymbolFact, other: SymbolFact) -> None:
    """An overload's parameters and variables into the first definition of its key: a name typed
    otherwise there is bound again, for the overload's lines only (``SymbolFact.rebound``)."""
    for name, type_text in other.locals.items():
        bindings = other.rebound.get(name) or [other.local_lines.get(name, [other.start_line, type_text, 0])]
        bindings = [[at, text, end or other.end_line] for at, text, end in bindings]
        if name not in first.locals:
            first.locals[name] = type_text
            first.local_lines[name] = bindings[0]
            if len(bindings) > 1:
                first.rebound[name] = bindings
        elif name in first.rebound or any(text != first.locals[name] for _, text, _ in bindings):
            known = first.rebound.get(name) or [first.local_lines.get(name, [first.start_line, first.locals[name], 0])]
            first.rebound[name] = sorted(known + bindings, key=lambda b: b[0])


# Functions without a name of their own: their parameters are bound only inside them.
_ANONYMOUS_FUNCTIONS = frozenset({"func_literal", "lambda", "arrow_function", "function_expression", "function",
                                  "lambda_expression", "closure_expression"})


def _matches(language: str, root: Any) -> list[dict[str, list[Any]]]:
    import tree_sitter

    cursor = tree_sitter.QueryCursor(query(language))
    cursor.set_max_start_depth(MAX_QUERY_DEPTH)
    return [captures for _, captures in cursor.matches(root)]


def _body_of(node: Any) -> Any | None:
    body = node.child_by_field_name("body")
    if body is None and node.type == "variable_declarator":
        value = node.child_by_field_name("value")
        body = value.child_by_field_name("body") if value is not None else None
    if body is None and node.type == "type_spec":
        type_node = node.child_by_field_name("type")
        if type_node is not None and type_node.type == "struct_type" and type_node.named_child_count:
            body = type_node.named_children[0]
    return body


def _python_docstring(reader: _FileParser, body: Any | None) -> str:
    if body is None or body.named_child_count == 0:
        return ""
    first = body.named_children[0]
    if first.type != "expression_statement" or first.named_child_count == 0:
        return ""
    string = first.named_children[0]
    if string.type != "string":
        return ""
    raw = reader.text(string)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw.strip("\"'rRbBuUfF")
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return inspect.cleandoc(str(value))[:MAX_DOC_CHARS]


_COMMENT_MARKERS = re.compile(r"^\s*(?:/\*\*?|\*/|\*(?!/)|///?!?|#)\s?")


def _clean_comment(text: str) -> str:
    if not text:
        return ""
    lines = []
    for line in text.splitlines():
        line = line.rstrip()
        if line.endswith("*/"):
            line = line[:-2]
        lines.append(_COMMENT_MARKERS.sub("", line, count=1).rstrip())
    return inspect.cleandoc("\n".join(lines)).strip()[:MAX_DOC_CHARS]


def _normalise_callee(text: str) -> str:
    # Drop layout (chained calls span lines) but keep `new Foo` apart.
    text = _PUNCT_SPACE.sub(r"\1", _WHITESPACE.sub(" ", text).strip())
    text = _TURBOFISH.sub("", text).replace("?.", ".")
    if "<" in text:  # type arguments: `new ArrayList<>()`, `make<T>`
        text = _TYPE_ARGS.sub("", _TYPE_ARGS.sub("", text))
    return text[:MAX_CALLEE_CHARS]


def _strip_type_args(text: str) -> str:
    text = _WHITESPACE.sub("", text)
    for opener in "<[(":
        cut = text.find(opener)
        if cut > 0:
            text = text[:cut]
    return text


def _assigned_owner(text: str) -> str | None:
    """What a function assigned to a property is set on, as a qualified name: ``Router.prototype``
    -> ``Router``, ``exports`` -> "" (the module itself); None for anything but a dotted name
    (``this``, ``a[0]``, ``f()``)."""
    text = _WHITESPACE.sub("", text).removesuffix(".prototype")
    if text in ("exports", "module.exports"):
        return ""
    if not _DOTTED.fullmatch(text) or text == "this" or text.startswith("this."):
        return None
    return text


def _type_name(text: str) -> str:
    """The bare type a receiver or impl names: ``*Repo`` -> ``Repo``, ``Foo<T>`` -> ``Foo``."""
    text = _strip_type_args(_REFERENCE_PREFIX.sub("", text))
    return text.split("::")[-1].split(".")[-1]


# --- import statements, per language ------------------------------------------------------------


def _python_imports(reader: _FileParser, node: Any) -> list[ImportFact]:
    line = node.start_point.row + 1
    if node.type == "import_statement":
        out = []
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                name = reader.text(child.child_by_field_name("name"))
                alias = reader.text(child.child_by_field_name("alias"))
            else:
                name, alias = reader.text(child), ""
            out.append(ImportFact(module=name, line=line, alias=alias))
        return out
    module_node = node.child_by_field_name("module_name")
    if module_node is None:
        return []
    level = 0
    module = reader.text(module_node)
    if module_node.type == "relative_import":
        dots = len(module) - len(module.lstrip("."))
        level, module = dots, module[dots:]
    fact = ImportFact(module=module, line=line, level=level, kind="from")
    for child in node.children_by_field_name("name"):
        if child.type == "aliased_import":
            fact.names.append(
                [reader.text(child.child_by_field_name("name")), reader.text(child.child_by_field_name("alias"))]
            )
        else:
            fact.names.append([reader.text(child), ""])
    fact.wildcard = any(child.type == "wildcard_import" for child in node.named_children)
    return [fact]


def _string_value(reader: _FileParser, node: Any | None) -> str:
    if node is None:
        return ""
    return reader.text(node).strip("'\"`")


def _js_imports(reader: _FileParser, node: Any) -> list[ImportFact]:
    line = node.start_point.row + 1
    module = _string_value(reader, node.child_by_field_name("source"))
    if not module:
        return []
    fact = ImportFact(module=module, line=line, kind="import" if node.type == "import_statement" else "reexport")
    for child in node.named_children:
        if child.type == "import_clause":
            for part in child.named_children:
                if part.type == "identifier":
                    fact.names.append(["default", reader.text(part)])
                elif part.type == "namespace_import":
                    fact.alias = reader.text(part.named_children[-1]) if part.named_children else ""
                elif part.type == "named_imports":
                    fact.names.extend(_specifiers(reader, part, "import_specifier"))
        elif child.type == "export_clause":
            fact.names.extend(_specifiers(reader, child, "export_specifier"))
        elif child.type == "namespace_export":
            fact.alias = reader.text(child.named_children[-1]) if child.named_children else ""
    if node.type == "export_statement" and not fact.names and not fact.alias:
        fact.wildcard = True  # export * from '...'
    return [fact]


def _specifiers(reader: _FileParser, node: Any, kind: str) -> list[list[str]]:
    out = []
    for spec in node.named_children:
        if spec.type != kind:
            continue
        name = spec.child_by_field_name("name")
        alias = spec.child_by_field_name("alias")
        if name is not None:
            out.append([reader.text(name), reader.text(alias) if alias is not None else ""])
    return out


def _js_require(reader: _FileParser, call: Any) -> list[ImportFact]:
    args = call.child_by_field_name("arguments")
    module = _string_value(reader, args.named_children[0]) if args is not None and args.named_children else ""
    if not module:
        return []
    fact = ImportFact(module=module, line=call.start_point.row + 1, kind="require")
    parent = reader._parent(call)
    if parent is not None and parent.type == "variable_declarator":
        target = parent.child_by_field_name("name")
        if target is not None and target.type == "identifier":
            fact.alias = reader.text(target)
        elif target is not None and target.type == "object_pattern":
            for part in target.named_children:
                if part.type == "shorthand_property_identifier_pattern":
                    fact.names.append([reader.text(part), ""])
                elif part.type == "pair_pattern":
                    key, value = part.child_by_field_name("key"), part.child_by_field_name("value")
                    if key is not None and value is not None:
                        fact.names.append([reader.text(key), reader.text(value)])
    return [fact]


def _go_imports(reader: _FileParser, node: Any) -> list[ImportFact]:
    module = _string_value(reader, node.child_by_field_name("path"))
    alias_node = node.child_by_field_name("name")
    alias = reader.text(alias_node) if alias_node is not None else ""
    if not module:
        return []
    return [ImportFact(module=module, line=node.start_point.row + 1, alias=alias, wildcard=alias == ".")]


def _java_imports(reader: _FileParser, node: Any) -> list[ImportFact]:
    path_node = next((c for c in node.named_children if c.type in ("scoped_identifier", "identifier")), None)
    if path_node is None:
        return []
    is_static = any(c.type == "static" for c in node.children)
    wildcard = any(c.type == "asterisk" for c in node.named_children)
    return [
        ImportFact(
            module=_WHITESPACE.sub("", reader.text(path_node)),
            line=node.start_point.row + 1,
            wildcard=wildcard,
            kind="static" if is_static else "import",
        )
    ]


def _rust_imports(reader: _FileParser, node: Any) -> list[ImportFact]:
    argument = node.child_by_field_name("argument")
    line = node.start_point.row + 1
    out: list[ImportFact] = []

    def walk(tree: Any, prefix: str) -> None:
        def join(path: str) -> str:
            return f"{prefix}::{path}" if prefix else path

        if tree.type == "use_as_clause":
            path = _WHITESPACE.sub("", reader.text(tree.child_by_field_name("path")))
            alias = reader.text(tree.child_by_field_name("alias"))
            out.append(ImportFact(module=join(path), line=line, alias=alias, kind="use"))
        elif tree.type == "scoped_use_list":
            path_node = tree.child_by_field_name("path")
            inner = join(_WHITESPACE.sub("", reader.text(path_node))) if path_node is not None else prefix
            list_node = tree.child_by_field_name("list")
            if list_node is not None:
                walk(list_node, inner)
        elif tree.type == "use_list":
            for child in tree.named_children:
                walk(child, prefix)
        elif tree.type == "use_wildcard":
            path_node = tree.named_children[0] if tree.named_children else None
            path = join(_WHITESPACE.sub("", reader.text(path_node))) if path_node is not None else prefix
            out.append(ImportFact(module=path, line=line, wildcard=True, kind="use"))
        elif tree.type in ("identifier", "scoped_identifier", "crate", "self", "super"):
            path = _WHITESPACE.sub("", reader.text(tree))
            if path == "self" and prefix:
                out.append(ImportFact(module=prefix, line=line, kind="use"))
            else:
                out.append(ImportFact(module=join(path), line=line, kind="use"))

    if argument is not None:
        walk(argument, "")
    return out


_IMPORT_READERS = {
    "python": _python_imports,
    "javascript": _js_imports,
    "typescript": _js_imports,
    "tsx": _js_imports,
    "go": _go_imports,
    "java": _java_imports,
    "rust": _rust_imports,
}
