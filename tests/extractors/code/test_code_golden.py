"""Golden tests per language: definitions, qualified names, line ranges, docs, imports, bases, calls."""

from __future__ import annotations

import pytest

from code_test_helpers import line_of
from graphmem.model import RelType


def symbols(facts, path):
    return {s.qualname: s for s in facts[path].symbols}


def rels(graph, rel_type):
    return {(r.src, r.dst) for r in graph.rels if r.type is rel_type}


def callees(facts, path, caller):
    return {c.callee for c in facts[path].calls if c.caller == caller}


# --- Python -------------------------------------------------------------------------------------

PY_MODELS = "python/shop/models.py"
PY_BILLING = "python/shop/billing.py"


def test_python_definitions(project_facts):
    syms = symbols(project_facts, PY_MODELS)
    assert set(syms) == {
        "Invoice", "Invoice.total", "Invoice.tax_rate",
        "PaidInvoice", "PaidInvoice.total", "PaidInvoice.receipt", "make_invoice",
    }
    invoice = syms["Invoice"]
    # A decorated class starts at its decorator.
    assert invoice.start_line == line_of(PY_MODELS, "@dataclass")
    assert invoice.end_line == line_of(PY_MODELS, "return 0.2")
    assert invoice.kind == "class" and invoice.docstring == "An amount owed by a customer."
    total = syms["Invoice.total"]
    assert total.kind == "method" and total.parent == "Invoice"
    assert total.signature == "def total(self) -> float"
    assert total.docstring == "The amount with tax, rounded."
    assert (total.start_line, total.end_line) == (
        line_of(PY_MODELS, "def total(self)"),
        line_of(PY_MODELS, "return round_cents("),
    )
    assert syms["make_invoice"].kind == "function" and syms["make_invoice"].parent is None
    assert syms["PaidInvoice"].bases == ["Invoice"]
    assert project_facts[PY_MODELS].docstring == "Domain objects."


def test_python_nested_function_qualname(project_facts):
    syms = symbols(project_facts, PY_BILLING)
    assert syms["BillingService._audit.describe"].kind == "function"
    assert syms["BillingService._audit.describe"].parent == "BillingService._audit"


def test_python_imports(project_facts):
    imports = {(i.module, i.level, tuple(map(tuple, i.names)), i.alias) for i in project_facts[PY_BILLING].imports}
    assert ("shop.util.money", 0, (), "") in imports
    assert ("shop", 0, (("models", ""),), "") in imports
    assert ("shop.models", 0, (("PaidInvoice", ""), ("make_invoice", "new_invoice")), "") in imports
    assert ("util", 1, (("money", "m"),), "") in imports


def test_python_calls_as_written(project_facts):
    assert {"new_invoice", "self.ledger.record", "self._audit"} <= callees(project_facts, PY_BILLING, "BillingService.bill")
    assert "shop.util.money.format_money" in callees(project_facts, PY_BILLING, "BillingService.settle")
    lines = {c.line for c in project_facts[PY_BILLING].calls if c.callee == "self._audit"}
    assert lines == {line_of(PY_BILLING, "self._audit(invoice)")}


def test_python_graph_edges(project_graph):
    imports = rels(project_graph, RelType.IMPORTS)
    f = "file:" + PY_BILLING
    assert (f, "file:python/shop/util/money.py") in imports  # import shop.util.money, from .util import money
    assert (f, "file:python/shop/models.py") in imports  # from shop import models (a submodule)
    assert (f, "sym:python/shop/models.py::PaidInvoice") in imports
    assert (f, "sym:python/shop/models.py::make_invoice") in imports
    # Library imports make no edge.
    assert not any(dst.endswith("logging.py") for src, dst in imports)
    inherits = rels(project_graph, RelType.INHERITS)
    assert ("sym:python/shop/models.py::PaidInvoice", "sym:python/shop/models.py::Invoice") in inherits
    contains = rels(project_graph, RelType.CONTAINS)
    assert ("file:" + PY_MODELS, "sym:python/shop/models.py::Invoice") in contains
    assert ("sym:python/shop/models.py::Invoice", "sym:python/shop/models.py::Invoice.total") in contains


def test_a_python_base_written_with_type_arguments_is_a_base():
    """``class BoolParamType(ParamType[bool])`` extends ``ParamType``: the subscript is the
    base's type arguments, not another base."""
    from extractors.code import build_graph, parse_file

    files = {"types.py": parse_file("types.py", b"""import typing as t

class ParamType(t.Generic[V], abc.ABC):
    pass

class BoolParamType(ParamType[bool]):
    pass

class Pair(ParamType[tuple[int, str]], t.Generic[V]):
    pass
""")}
    syms = symbols(files, "types.py")
    assert syms["BoolParamType"].bases == ["ParamType"]
    assert syms["Pair"].bases == ["ParamType", "t.Generic"]
    graph = build_graph(files, extractor_version="test", commit="a" * 40)
    assert {("sym:types.py::BoolParamType", "sym:types.py::ParamType"),
            ("sym:types.py::Pair", "sym:types.py::ParamType")} <= rels(graph, RelType.INHERITS)


def test_python_reexport_through_package_init(project_facts):
    from extractors.code import build_graph

    graph = build_graph(project_facts)
    imports = rels(graph, RelType.IMPORTS)
    # shop/__init__.py re-exports Invoice from .models.
    assert ("file:python/shop/__init__.py", "sym:python/shop/models.py::Invoice") in imports


# --- JavaScript ---------------------------------------------------------------------------------

JS_FORMAT = "javascript/lib/format.js"


def test_javascript_definitions_and_requires(project_facts):
    syms = symbols(project_facts, JS_FORMAT)
    assert set(syms) == {"formatTitle", "Formatter", "Formatter.constructor", "Formatter.format", "Formatter.formatAll"}
    assert syms["Formatter"].start_line == line_of(JS_FORMAT, "class Formatter")
    assert syms["Formatter"].end_line == line_of(JS_FORMAT, "module.exports") - 2
    assert syms["Formatter.format"].kind == "method"
    requires = {(i.module, tuple(map(tuple, i.names)), i.alias) for i in project_facts[JS_FORMAT].imports}
    assert ("path", (), "path") in requires
    assert ("./text", (("slugify", ""),), "") in requires
    text_syms = symbols(project_facts, "javascript/lib/text.js")
    assert text_syms["slugify"].docstring == "Lower-case words joined by dashes."


def test_javascript_default_export_and_esm_import(project_facts, project_graph):
    assert project_facts["javascript/lib/logger.js"].default_export == "log"
    imports = rels(project_graph, RelType.IMPORTS)
    assert ("file:javascript/app.js", "sym:javascript/lib/logger.js::log") in imports
    # './lib/format.js' resolves with its extension, the named import to the class.
    assert ("file:javascript/app.js", "sym:javascript/lib/format.js::Formatter") in imports
    assert ("file:" + JS_FORMAT, "sym:javascript/lib/text.js::slugify") in imports


# --- TypeScript ---------------------------------------------------------------------------------

TS_USER = "typescript/src/models/user.ts"
TS_SERVICE = "typescript/src/services/userService.ts"


def test_typescript_definitions(project_facts):
    syms = symbols(project_facts, TS_USER)
    assert syms["Identified"].kind == "interface"
    assert syms["Identified.id"].kind == "method"
    assert syms["User"].kind == "class" and syms["User"].docstring == "A registered user."
    assert syms["User"].start_line == line_of(TS_USER, "export class User")
    assert syms["User"].bases == ["Identified"]
    assert syms["User.greet"].signature == "greet(): string"
    service = symbols(project_facts, TS_SERVICE)
    assert service["makeService"].kind == "function"
    assert service["UserService"].docstring == "Registers users and announces them."
    assert service["UserService"].bases == ["EventEmitter"]


def test_typescript_imports_and_inheritance(project_graph):
    imports = rels(project_graph, RelType.IMPORTS)
    f = "file:" + TS_SERVICE
    assert (f, "sym:typescript/src/models/user.ts::User") in imports  # default import
    assert (f, "sym:typescript/src/models/user.ts::normalise") in imports
    assert (f, "file:typescript/src/services/repo.ts") in imports  # namespace import
    inherits = rels(project_graph, RelType.INHERITS)
    assert ("sym:typescript/src/models/user.ts::User", "sym:typescript/src/models/user.ts::Identified") in inherits
    # EventEmitter comes from a library: no edge is invented.
    assert not any(src.endswith("::UserService") for src, _ in inherits)


def test_a_function_value_under_a_type_assertion_is_a_function_and_is_called():
    """`export const createStore = ((s) => ...) as CreateStore` (zustand's form) defines a
    function, and `createStore(s)` in a file that imports it by its `.ts` name calls it."""
    from extractors.code import build_graph, parse_file

    files = {
        "src/vanilla.ts": parse_file("src/vanilla.ts", b"""const createStoreImpl = (s: S) => s
export const createStore = ((createState) =>
  createState ? createStoreImpl(createState) : createStoreImpl) as CreateStore
export const check = ((x: number) => x > 0) satisfies Check
"""),
        "src/react.ts": parse_file("src/react.ts", b"""import { createStore } from './vanilla.ts'
const createImpl = (createState: S) => {
  const api = createStore(createState)
  return api
}
"""),
        "src/legacy.js": parse_file("src/legacy.js", b"const wrap = (function () { return 1 })\n"),
    }
    assert {s.qualname: s.kind for s in files["src/vanilla.ts"].symbols} == {
        "createStoreImpl": "function", "createStore": "function", "check": "function"}
    assert {s.qualname for s in files["src/legacy.js"].symbols} == {"wrap"}
    calls = rels(build_graph(files, extractor_version="test", commit="a" * 40), RelType.CALLS)
    assert ("sym:src/react.ts::createImpl", "sym:src/vanilla.ts::createStore") in calls
    assert ("sym:src/vanilla.ts::createStore", "sym:src/vanilla.ts::createStoreImpl") in calls


def test_a_name_bound_to_a_definition_at_module_level_is_another_name_for_it():
    """`export const persist = persistImpl as unknown as Persist` (zustand's middlewares) and
    `const run = main` give the definition another name, which its node carries and through which
    it is imported and called; a constant bound to a value, or to a name the module does not
    define, gives none."""
    from extractors.code import build_graph, parse_file

    files = {"src/persist.ts": parse_file("src/persist.ts", b"""const persistImpl = (config: C) => (set, get, api) => config(set, get, api)
export const persist = persistImpl as unknown as Persist
const again = (persistImpl)
const limit = 3
export const fetchIt = fetch as typeof fetch
export function wrap(config: C) { return again(config) }
"""), "src/index.ts": parse_file("src/index.ts", b"""import { persist } from './persist.ts'
export function useIt(config: C) { return persist(config) }
""")}
    symbols = {s.qualname: s for s in files["src/persist.ts"].symbols}
    assert symbols["persistImpl"].aliases == ["persist", "again"]
    assert all(not s.aliases for name, s in symbols.items() if name != "persistImpl")
    graph = build_graph(files, extractor_version="test", commit="a" * 40)
    nodes = {n.key: n.props for n in graph.nodes}
    assert nodes["sym:src/persist.ts::persistImpl"]["aliases"] == ["persist", "again"]
    impl = "sym:src/persist.ts::persistImpl"
    assert ("file:src/index.ts", impl) in rels(graph, RelType.IMPORTS)
    calls = rels(graph, RelType.CALLS)
    assert ("sym:src/index.ts::useIt", impl) in calls and ("sym:src/persist.ts::wrap", impl) in calls


def test_a_go_package_is_imported_by_its_own_name_not_its_external_tests():
    """A directory whose first file (by name) is an external test (`package toml_test`) is still
    imported as the package `toml`: `toml.Marshal` in another test file calls `Marshal`."""
    from extractors.code import build_graph, parse_file

    sources = {
        "go.mod": b"module github.com/acme/toml/v2\n\ngo 1.21\n",
        "audit_test.go": b"package toml_test\n\nimport \"testing\"\n\nfunc TestAudit(t *testing.T) {}\n",
        "marshal.go": b"package toml\n\nfunc Marshal(v any) ([]byte, error) { return nil, nil }\n",
        # A namesake elsewhere: the call is resolved through the import, not by a unique name.
        "unstable/marshal.go": b"package unstable\n\nfunc Marshal(v any) ([]byte, error) { return nil, nil }\n",
        "marshal_test.go": b"""package toml_test

import (
\t"testing"

\t"github.com/acme/toml/v2"
)

func TestMarshal(t *testing.T) { toml.Marshal(1) }
""",
    }
    files = {path: parse_file(path, data) for path, data in sorted(sources.items())}
    calls = rels(build_graph(files, extractor_version="test", commit="a" * 40), RelType.CALLS)
    assert ("sym:marshal_test.go::TestMarshal", "sym:marshal.go::Marshal") in calls
    assert ("sym:marshal_test.go::TestMarshal", "sym:unstable/marshal.go::Marshal") not in calls


def test_a_go_type_records_the_standard_interfaces_its_methods_satisfy():
    """A Go type never says it implements ``error``: a method ``Error() string``, in any file of
    its package, makes it one, and ``ServeHTTP(http.ResponseWriter, *http.Request)`` a handler.
    A method of the same name but another shape does not."""
    from extractors.code import build_graph, parse_file

    sources = {
        "go.mod": b"module github.com/acme/route\n\ngo 1.21\n",
        "errors.go": b"package route\n\ntype MatchError struct{ path string }\n\ntype Router struct{}\n\ntype Buf []byte\n",
        "methods.go": b"""package route

import "net/http"

func (e *MatchError) Error() string { return e.path }

func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {}

func (b Buf) Error(code int) string { return "" }

func (b Buf) Read(p []byte) (n int, err error) { return 0, nil }
""",
    }
    files = {path: parse_file(path, data) for path, data in sorted(sources.items())}
    nodes = {n.key: n.props for n in build_graph(files, extractor_version="test", commit="a" * 40).nodes}
    assert nodes["sym:errors.go::MatchError"]["bases"] == ["error"]
    assert nodes["sym:errors.go::Router"]["bases"] == ["Handler"]
    assert nodes["sym:errors.go::Buf"]["bases"] == ["Reader"]  # its Error takes an argument


def test_a_package_imports_itself_by_the_name_its_manifest_gives():
    """Preact's compat layer imports the core as "preact" and the hooks as "preact/hooks": the
    manifests' names and entry points (read back from built output to source) lead to the
    project's own files; a package the project does not hold stays outside."""
    from extractors.code import build_graph, parse_file

    sources = {
        "package.json": b"""{"name": "preact", "source": "src/index.js", "main": "dist/preact.js",
          "exports": {".": "./dist/preact.mjs", "./hooks": {"import": "./hooks/dist/hooks.mjs"}}}""",
        "src/index.js": b"export { createElement } from './create-element';\n",
        "src/create-element.js": b"export function createElement(type, props) { return { type, props }; }\n",
        "hooks/src/index.js": b"export function useState(initial) { return [initial, () => {}]; }\n",
        "compat/src/index.js": b"""import { createElement } from 'preact';
import { useState } from 'preact/hooks';
import { render } from 'react-dom';
export function h(type) { useState(0); render(); return createElement(type, {}); }
""",
    }
    files = {path: parse_file(path, data) for path, data in sorted(sources.items())}
    graph = build_graph(files, extractor_version="test", commit="a" * 40)
    calls = rels(graph, RelType.CALLS)
    assert ("sym:compat/src/index.js::h", "sym:src/create-element.js::createElement") in calls
    assert ("sym:compat/src/index.js::h", "sym:hooks/src/index.js::useState") in calls
    assert not any(dst.endswith("::render") for _, dst in calls)


def test_a_go_interface_that_embeds_standard_ones_is_implemented_by_their_methods():
    """``ReadCloser`` embeds ``io.Reader`` and ``io.Closer``, whose one method each Go's standard
    library fixes: ``File`` has both and implements it. An interface that embeds one whose
    methods are unknown (``json.Marshaler``) is implemented by nothing graphmem can tell."""
    from extractors.code import build_graph, parse_file

    sources = {
        "go.mod": b"module github.com/acme/store\n\ngo 1.21\n",
        "store.go": b"""package store

import (
\t"encoding/json"
\t"io"
)

type ReadCloser interface {
\tio.Reader
\tio.Closer
}

type Document interface {
\tjson.Marshaler
\tClose() error
}

type File struct{}

func (f *File) Read(p []byte) (int, error) { return 0, nil }

func (f *File) Close() error { return nil }

func (f *File) MarshalJSON() ([]byte, error) { return nil, nil }
""",
    }
    files = {path: parse_file(path, data) for path, data in sorted(sources.items())}
    inherits = rels(build_graph(files, extractor_version="test", commit="a" * 40), RelType.INHERITS)
    assert ("sym:store.go::File", "sym:store.go::ReadCloser") in inherits
    assert ("sym:store.go::File", "sym:store.go::Document") not in inherits


def test_tsx_component(project_facts):
    path = "typescript/src/components/UserCard.tsx"
    facts = project_facts[path]
    assert facts.language == "tsx" and not facts.has_syntax_errors
    syms = symbols(project_facts, path)
    assert syms["UserCard"].kind == "function" and syms["Props"].kind == "type"
    # The arrow function in JSX has no name: its call belongs to the component.
    assert "service.register" in callees(project_facts, path, "UserCard")


# --- Go -----------------------------------------------------------------------------------------

GO_MEMORY = "go/internal/store/memory.go"
GO_CHECKOUT = "go/internal/checkout/checkout.go"


def test_go_definitions(project_facts):
    store = symbols(project_facts, "go/internal/store/store.go")
    assert store["Order"].kind == "struct" and store["Order"].docstring == "Order is a customer order."
    assert store["Store"].kind == "interface"
    assert store["Store.Save"].kind == "method"
    assert store["Validate"].start_line == line_of("go/internal/store/store.go", "func Validate")
    memory = symbols(project_facts, GO_MEMORY)
    save = memory["MemoryStore.Save"]
    assert save.kind == "method" and save.parent == "MemoryStore"
    assert save.signature == "func (m *MemoryStore) Save(o Order) error"
    assert save.docstring == "Save stores an order."
    assert (save.start_line, save.end_line) == (
        line_of(GO_MEMORY, "func (m *MemoryStore) Save"),
        line_of(GO_MEMORY, "func (m *MemoryStore) Get") - 3,
    )
    assert project_facts[GO_MEMORY].package == "store"


def test_go_imports_use_go_mod(project_graph):
    imports = rels(project_graph, RelType.IMPORTS)
    main = "file:go/cmd/server/main.go"
    assert (main, "file:" + GO_CHECKOUT) in imports
    assert (main, "file:go/internal/store/store.go") in imports
    assert (main, "file:" + GO_MEMORY) in imports


def test_go_embedding_and_receiver_calls(project_facts):
    assert callees(project_facts, GO_CHECKOUT, "Service.Checkout") >= {"s.store.Save", "s.audit.Note", "describe"}


# --- Java ---------------------------------------------------------------------------------------

JAVA = "java/src/main/java/com/acme/"


def test_java_definitions(project_facts):
    path = JAVA + "billing/InvoiceService.java"
    syms = symbols(project_facts, path)
    assert syms["InvoiceService"].kind == "class"
    assert syms["InvoiceService"].docstring == "Issues invoices."
    assert syms["InvoiceService"].bases == ["BaseService"]
    assert syms["InvoiceService.issue"].kind == "method"
    assert syms["InvoiceService.issue"].start_line == line_of(path, "public Invoice issue")
    assert project_facts[path].package == "com.acme.billing"
    repo = symbols(project_facts, JAVA + "billing/Repository.java")
    assert repo["Repository"].kind == "interface" and repo["Repository.save"].kind == "method"


def test_java_imports_and_inheritance(project_graph):
    imports = rels(project_graph, RelType.IMPORTS)
    f = "file:" + JAVA + "billing/InvoiceService.java"
    assert (f, "sym:" + JAVA + "util/Strings.java::Strings") in imports
    assert (f, "sym:" + JAVA + "util/Strings.java::Strings.normalize") in imports  # static import
    inherits = rels(project_graph, RelType.INHERITS)
    assert (
        "sym:" + JAVA + "billing/InMemoryRepository.java::InMemoryRepository",
        "sym:" + JAVA + "billing/Repository.java::Repository",
    ) in inherits
    assert (
        "sym:" + JAVA + "billing/InvoiceService.java::InvoiceService",
        "sym:" + JAVA + "billing/BaseService.java::BaseService",
    ) in inherits


# --- Rust ---------------------------------------------------------------------------------------

RS_LEDGER = "rust/src/ledger.rs"


def test_rust_definitions(project_facts):
    syms = symbols(project_facts, RS_LEDGER)
    assert syms["Balance"].kind == "trait"
    assert syms["Balance.balance"].kind == "method" and syms["Balance.describe"].kind == "method"
    assert syms["Entry"].kind == "struct" and syms["Entry"].docstring == "One movement of money."
    # Attributes between the doc comment and the item do not hide the doc or move the start.
    assert syms["Entry"].start_line == line_of(RS_LEDGER, "pub struct Entry")
    new = syms["Ledger.new"]
    assert new.kind == "method" and new.parent == "Ledger" and new.docstring == "An empty ledger."
    assert syms["Ledger.balance"].kind == "method"  # from `impl Balance for Ledger`
    assert syms["Ledger.fmt"].start_line == line_of(RS_LEDGER, "fn fmt(")
    # A file's type alias is a definition; a trait impl's associated type (`type Err = String;`)
    # is part of that impl, not a symbol named after the implementing type.
    assert syms["Cents"].kind == "type" and syms["Cents"].docstring == "Money in cents."
    assert syms["Entry.from_str"].kind == "method" and "Entry.Err" not in syms


def test_rust_use_mod_and_trait_impl(project_graph):
    imports = rels(project_graph, RelType.IMPORTS)
    lib = "file:rust/src/lib.rs"
    assert (lib, "file:" + RS_LEDGER) in imports  # pub mod ledger;
    assert (lib, "sym:rust/src/ledger.rs::Ledger") in imports
    assert (lib, "sym:rust/src/ledger.rs::Entry") in imports
    assert ("file:" + RS_LEDGER, "sym:rust/src/util/fmt.rs::cents") in imports
    assert ("file:rust/src/util/mod.rs", "file:rust/src/util/fmt.rs") in imports
    inherits = rels(project_graph, RelType.INHERITS)
    assert ("sym:rust/src/ledger.rs::Ledger", "sym:rust/src/ledger.rs::Balance") in inherits
    # Every trait a type implements, the standard library's too, is on the type: what sort it is.
    props = {n.key: n.props for n in project_graph.nodes}
    assert props["sym:rust/src/ledger.rs::Ledger"]["bases"] == ["Balance", "Display"]
    assert props["sym:rust/src/ledger.rs::Entry"]["bases"] == ["FromStr"]


def test_rust_calls_inside_macros(project_facts):
    assert "self.describe" in callees(project_facts, RS_LEDGER, "Ledger.summary")
    assert "self.summary" in callees(project_facts, RS_LEDGER, "Ledger.fmt")


@pytest.mark.parametrize(
    "path,language",
    [
        ("python/shop/models.py", "python"),
        ("javascript/app.js", "javascript"),
        ("typescript/src/models/user.ts", "typescript"),
        ("typescript/src/components/UserCard.tsx", "tsx"),
        ("go/cmd/server/main.go", "go"),
        ("java/src/main/java/com/acme/util/Strings.java", "java"),
        ("rust/src/lib.rs", "rust"),
    ],
)
def test_every_fixture_parses_cleanly(project_facts, path, language):
    facts = project_facts[path]
    assert facts.language == language
    assert not facts.has_syntax_errors and not facts.decode_errors
    assert facts.symbols
