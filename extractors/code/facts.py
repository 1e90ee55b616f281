"""What parsing one source file yields: plain data that survives a JSON round trip.

``FileFacts`` is the unit the pipeline caches by content hash and ships between worker
processes, so it holds only ``str``/``int``/``bool``/``list``/``dict`` values after ``to_dict()``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Bumped whenever parsing changes what it records, so cached facts are not reused across versions,
# and whenever resolution links them otherwise: a new version has every project's code extracted
# and resolved again on its next ingest, even where no file changed.
FACTS_VERSION = 20


@dataclass(slots=True)
class SymbolFact:
    """One named definition. ``parent`` is the qualname of the enclosing symbol in the same file."""

    qualname: str
    name: str
    kind: str
    start_line: int
    end_line: int
    signature: str = ""
    docstring: str = ""
    parent: str | None = None
    # Docstring lies inside the definition's lines (Python) rather than above it.
    doc_inside: bool = False
    # First line of the comment block (and attributes) above the definition that documents it; 0: none.
    doc_start_line: int = 0
    bases: list[str] = field(default_factory=list)
    # Declared or inferred types: attribute/field name -> type text (class-like symbols).
    fields: dict[str, str] = field(default_factory=dict)
    # Parameter and local variable name -> type text (function-like symbols): the first binding.
    locals: dict[str, str] = field(default_factory=dict)
    # Names bound again with another type in the same function (a closure's `r *http.Request`, then
    # `r := NewRouter()`): name -> [line, type text, end] of every binding in source order, ``end``
    # the last line of the anonymous function whose parameter it is (0: the whole function).
    rebound: dict[str, list[list[Any]]] = field(default_factory=dict)
    # Each local's first binding, as in ``rebound`` (where a later one may replace it).
    local_lines: dict[str, list[Any]] = field(default_factory=dict)
    returns: str = ""
    # Further definitions sharing this key (overloads, property setters, conditional
    # redefinitions): ``[start_line, end_line, doc_start_line]`` each, ``doc_start_line`` 0 when
    # no comment above documents it.
    extra_ranges: list[list[int]] = field(default_factory=list)
    # Other names the module binds to this definition (``export const persist = persistImpl as
    # unknown as Persist``): names a question may use for it.
    aliases: list[str] = field(default_factory=list)

    def ranges(self) -> list[tuple[int, int]]:
        """Every line range of the definitions under this key, the first one first."""
        return [(self.start_line, self.end_line), *((r[0], r[1]) for r in self.extra_ranges)]


@dataclass(slots=True)
class ImportFact:
    """One imported module or name, as written.

    ``module`` is the import path in the language's own spelling (``a.b``, ``./x``,
    ``example.com/p/q``, ``com.acme.Foo``, ``crate::a::b``). ``names`` lists ``[name, alias]``
    pairs for imports of names from a module (alias may be ``""``). ``alias`` binds the module
    itself (``import a.b as ab``, ``import * as ns``, Go package alias, ``const x = require()``).
    """

    module: str
    line: int
    names: list[list[str]] = field(default_factory=list)
    alias: str = ""
    level: int = 0
    wildcard: bool = False
    kind: str = "import"


@dataclass(slots=True)
class CallFact:
    """A call site: ``caller`` is the enclosing symbol's qualname, or ``""`` for module-level code."""

    caller: str
    callee: str
    line: int


@dataclass(slots=True)
class FileFacts:
    """Everything the code extractor learned from one file, independent of the rest of the project."""

    path: str
    language: str
    lines: int
    source: str = ""
    has_syntax_errors: bool = False
    decode_errors: bool = False
    # Nested deeper than the parser reads (``parse.MAX_QUERY_DEPTH``): what lies below is missing.
    too_deep: bool = False
    package: str = ""
    docstring: str = ""
    symbols: list[SymbolFact] = field(default_factory=list)
    imports: list[ImportFact] = field(default_factory=list)
    calls: list[CallFact] = field(default_factory=list)
    # Module-level variable name -> type text.
    module_vars: dict[str, str] = field(default_factory=dict)
    # Inheritance declared away from the type's definition: [type name, base] (Rust `impl T for X`).
    extra_bases: list[list[str]] = field(default_factory=list)
    # Name the file exports as its default (JS/TS ``export default``).
    default_export: str = ""
    # A package manifest's entry points: the subpath an importer writes ("." or "./hooks") -> the
    # files it names, relative to the manifest ("src/index.js", "./hooks/dist/hooks.mjs").
    entries: dict[str, list[str]] = field(default_factory=dict)
    version: int = FACTS_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileFacts:
        values = dict(data)
        values["symbols"] = [SymbolFact(**s) for s in values.get("symbols", [])]
        values["imports"] = [ImportFact(**i) for i in values.get("imports", [])]
        values["calls"] = [CallFact(**c) for c in values.get("calls", [])]
        return cls(**values)
