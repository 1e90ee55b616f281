"""The emitted graph: valid elements, provenance, chunks."""

from __future__ import annotations

from code_test_helpers import fixture_text
from extractors.code import build_graph, parse_file
from extractors.code.chunks import MAX_CHUNK_CHARS
from graphmem.model import RelType, check_node, check_relationship, file_key, symbol_key


def test_every_element_passes_the_model_validators(project_graph):
    for node in project_graph.nodes:
        check_node(node)
    for rel in project_graph.rels:
        check_relationship(rel)
    keys = [n.key for n in project_graph.nodes]
    assert len(keys) == len(set(keys))
    node_keys = set(keys)
    for rel in project_graph.rels:
        assert rel.src in node_keys and rel.dst in node_keys, rel.ident


def test_provenance(project_graph):
    for element in [*project_graph.nodes, *project_graph.rels, *project_graph.chunks]:
        prov = element.provenance
        assert prov.extractor == "code" and prov.extractor_version == "test"
        assert prov.source_commit == "a" * 40
    for rel in project_graph.rels:
        if rel.type in (RelType.IMPORTS, RelType.CALLS) and rel.src.startswith("file:"):
            assert rel.provenance.source_path == rel.src[5:]


def test_node_properties(project_graph):
    nodes = {n.key: n for n in project_graph.nodes}
    file_node = nodes["file:python/shop/models.py"]
    assert file_node.props["language"] == "python"
    assert file_node.props["lines"] == len(fixture_text("python/shop/models.py").splitlines())
    assert file_node.props["has_syntax_errors"] is False
    method = nodes["sym:python/shop/models.py::Invoice.total"]
    assert method.props["symbol_kind"] == "method"
    assert method.props["language"] == "python"
    assert method.props["signature"] == "def total(self) -> float"
    assert method.props["start_line"] < method.props["end_line"]
    assert nodes["sym:rust/src/ledger.rs::Balance"].props["symbol_kind"] == "trait"
    assert nodes["sym:go/internal/store/store.go::Store"].props["symbol_kind"] == "interface"
    assert nodes["sym:java/src/main/java/com/acme/billing/Invoice.java::Invoice"].props["symbol_kind"] == "class"


def test_every_symbol_has_chunks_with_header_and_lines(project_graph):
    by_node: dict[str, list] = {}
    for chunk in project_graph.chunks:
        by_node.setdefault(chunk.node_key, []).append(chunk)
    symbols = [n for n in project_graph.nodes if n.key.startswith("sym:")]
    for node in symbols:
        chunks = sorted(by_node[node.key], key=lambda c: c.ordinal)
        assert [c.ordinal for c in chunks] == list(range(len(chunks)))
        first = chunks[0]
        path = node.props["path"]
        assert first.text.startswith(f"{path}::{node.name}")
        assert node.props["signature"].split("\n")[0] in first.text
        assert first.kind == "code"
        assert node.props["start_line"] <= first.start_line <= node.props["end_line"]
    # Go doc comments sit above the code: the chunk carries them.
    save = by_node["sym:go/internal/store/memory.go::MemoryStore.Save"][0]
    assert "Save stores an order." in save.text
    # Module-level code gives the file a chunk.
    assert "file:python/shop/billing.py" in by_node
    assert 'if __name__ == "__main__":' in by_node["file:python/shop/billing.py"][0].text


def test_long_bodies_split_at_line_boundaries():
    body = "".join(f"    total += compute_value_number_{i}(argument_one, argument_two)\n" for i in range(120))
    source = f"def long_function(argument_one, argument_two):\n    total = 0\n{body}    return total\n"
    facts = parse_file("pkg/long.py", source.encode())
    graph = build_graph({facts.path: facts})
    chunks = sorted(
        (c for c in graph.chunks if c.node_key == symbol_key("pkg/long.py", "long_function")), key=lambda c: c.ordinal
    )
    assert len(chunks) > 5
    covered = []
    for chunk in chunks:
        assert len(chunk.text) <= MAX_CHUNK_CHARS + 50
        assert chunk.text.startswith("pkg/long.py::long_function")
        assert "def long_function(argument_one, argument_two)" in chunk.text.split("\n")[1]
        covered.append((chunk.start_line, chunk.end_line))
    # Consecutive, non-overlapping line ranges covering the whole function.
    assert covered[0][0] == 1 and covered[-1][1] == source.count("\n")
    for (_, end), (start, _) in zip(covered, covered[1:]):
        assert start == end + 1
    assert len({c.id for c in chunks}) == len(chunks)


def test_class_chunk_shows_methods_as_signatures_only(project_graph):
    chunk = next(c for c in project_graph.chunks if c.node_key == "sym:python/shop/billing.py::BillingService")
    assert "def bill(self, customer, amount): ..." in chunk.text
    assert "new_invoice(customer, amount)" not in chunk.text  # that line lives in the method's chunk


def test_overloads_share_one_key():
    source = b"""
class Pad {
    String pad(String s) { return s; }
    String pad(String s, int n) { return s; }
}
"""
    facts = parse_file("Pad.java", source)
    assert [s.qualname for s in facts.symbols] == ["Pad", "Pad.pad"]
    graph = build_graph({"Pad.java": facts})
    assert sum(1 for n in graph.nodes if n.key == "sym:Pad.java::Pad.pad") == 1


def test_every_definition_under_one_key_is_in_its_own_passages_not_its_class():
    """A second overload (with its Javadoc) and a property's setter read as part of the method,
    and their parent class shows them as a declaration line only."""
    java = b"""class Pad {
    /** Pads with spaces. */
    String pad(String s) { return s + " "; }

    /**
     Pads with a repeated filler character.
     */
    String pad(String s, int n) {
        return s + "filler".repeat(n);
    }
}
"""
    python = b"""class Box:
    @property
    def size(self):
        return self._size

    @size.setter
    def size(self, value):
        self._size = clamp(value)
"""
    for path, source, owner, method, inner in (
            ("Pad.java", java, "Pad", "Pad.pad", ['"filler".repeat(n)', "repeated filler character"]),
            ("box.py", python, "Box", "Box.size", ["clamp(value)"])):
        graph = build_graph({path: parse_file(path, source)})
        text = {key: "".join(c.text for c in graph.chunks if c.node_key == key)
                for key in (symbol_key(path, owner), symbol_key(path, method))}
        for line in inner:
            assert line in text[symbol_key(path, method)]
            assert line not in text[symbol_key(path, owner)]
    assert "String pad(String s, int n) { ..." in "".join(
        c.text for c in build_graph({"Pad.java": parse_file("Pad.java", java)}).chunks
        if c.node_key == "sym:Pad.java::Pad")


def test_calls_from_module_level_code_start_at_the_file():
    a = parse_file("app/a.py", b"from app.b import go\n\ngo()\n")
    b = parse_file("app/b.py", b"def go():\n    pass\n")
    graph = build_graph({"app/a.py": a, "app/b.py": b})
    calls = [r for r in graph.rels if r.type is RelType.CALLS]
    assert [(r.src, r.dst) for r in calls] == [(file_key("app/a.py"), symbol_key("app/b.py", "go"))]
    assert calls[0].props["resolution"] == "import" and calls[0].props["lines"] == [3]


def test_src_layout_and_relative_imports():
    files = {
        "src/pkg/__init__.py": parse_file("src/pkg/__init__.py", b""),
        "src/pkg/core.py": parse_file("src/pkg/core.py", b"def work():\n    pass\n"),
        "src/pkg/sub/__init__.py": parse_file("src/pkg/sub/__init__.py", b""),
        "src/pkg/sub/use.py": parse_file(
            "src/pkg/sub/use.py", b"from ..core import work\nimport pkg.core\n\ndef a():\n    work()\n    pkg.core.work()\n"
        ),
    }
    graph = build_graph(files)
    calls = {(r.src, r.dst, r.props["resolution"]) for r in graph.rels if r.type is RelType.CALLS}
    target = symbol_key("src/pkg/core.py", "work")
    src = symbol_key("src/pkg/sub/use.py", "a")
    # `work()` and `pkg.core.work()` both reach the same function: one edge, both lines.
    assert [(s, d) for s, d, _ in calls] == [(src, target)]
    edge = next(r for r in graph.rels if r.type is RelType.CALLS and r.src == src)
    assert edge.props["lines"] == [5, 6]


def test_unknown_names_make_no_edges():
    facts = parse_file("x.py", b"def f(obj):\n    obj.frobnicate_widget()\n    undefined_thing()\n")
    graph = build_graph({"x.py": facts})
    assert not [r for r in graph.rels if r.type is RelType.CALLS]
    node = next(n for n in graph.nodes if n.key == "sym:x.py::f")
    assert node.props["unresolved_calls"] == ["obj.frobnicate_widget", "undefined_thing"]


def test_a_members_documentation_is_in_its_own_passage_only():
    """A Javadoc or Go comment above a definition goes with that definition's passage, not with the
    class or file around it (else the class answers, in its members' words, for what one member does)."""
    java = ("package a;\n\n/** Something a command line may hold. */\npublic class Option {\n"
            "    private String longOpt;\n\n    /**\n     * Tests whether this option has a long name.\n     */\n"
            "    public boolean hasLongOpt() {\n        return longOpt != null;\n    }\n}\n")
    go = ("package mw\n\n// SetHeader is a convenience handler to set a response header.\n"
          "func SetHeader(key, value string) {\n\tprintln(key, value)\n}\n\nvar level = 1\n")
    texts: dict[str, str] = {}
    for path, source in (("a/Option.java", java), ("mw/header.go", go)):
        graph = build_graph({path: parse_file(path, source.encode())})
        for chunk in graph.chunks:
            texts[chunk.node_key] = texts.get(chunk.node_key, "") + chunk.text
    assert "Tests whether this option has a long name." in texts[symbol_key("a/Option.java", "Option.hasLongOpt")]
    option = texts[symbol_key("a/Option.java", "Option")]
    assert "Something a command line may hold." in option  # its own documentation stays
    assert "public boolean hasLongOpt() {" in option  # the member shown by its declaration
    assert "long name" not in option
    assert "convenience handler" in texts[symbol_key("mw/header.go", "SetHeader")]
    header_file = texts[file_key("mw/header.go")]  # the file keeps its module-level code
    assert "var level = 1" in header_file and "convenience handler" not in header_file


def test_a_project_class_named_like_a_type_wrapper_types_its_fields():
    """``Option`` wraps a type in Rust; in a Java project it can be a class of its own, and a field
    of that type resolves the calls made through it."""
    option = parse_file("cli/Option.java", b"package cli;\npublic class Option {\n    public String getArgName() { return \"\"; }\n}\n")
    formatter = parse_file("cli/help/Formatter.java", b"""package cli.help;
import cli.Option;
public class Formatter {
    private final Option option;
    Formatter(Option option) { this.option = option; }
    public String getArgName() { return option.getArgName(); }
}
""")
    graph = build_graph({"cli/Option.java": option, "cli/help/Formatter.java": formatter})
    calls = {(r.src, r.dst) for r in graph.rels if r.type is RelType.CALLS}
    # Both classes define the method: only the field's type tells which one is called.
    assert (symbol_key("cli/help/Formatter.java", "Formatter.getArgName"),
            symbol_key("cli/Option.java", "Option.getArgName")) in calls


def test_a_go_variable_assigned_from_a_typed_one_has_its_type():
    source = b"""package tree

type node struct{}

type nodes []*node

func (n *node) findEdge(label byte) *node { return n }

func (ns nodes) findEdge(label byte) *node { return nil }

func (n *node) findPattern(pattern string) bool {
	nn := n
	return nn.findEdge(pattern[0]) != nil
}
"""
    graph = build_graph({"tree.go": parse_file("tree.go", source)})
    calls = {(r.src, r.dst) for r in graph.rels if r.type is RelType.CALLS}
    # Two types define the method: only the variable's type tells which one is called.
    assert (symbol_key("tree.go", "node.findPattern"), symbol_key("tree.go", "node.findEdge")) in calls
    assert (symbol_key("tree.go", "node.findPattern"), symbol_key("tree.go", "nodes.findEdge")) not in calls


def test_a_name_bound_again_takes_the_type_in_force_where_it_is_called():
    """A closure's parameter ``r`` and a later ``r := NewRouter()`` in one function: each call
    through ``r`` reads the binding in force on its line."""
    source = b"""package chi

type Mux struct{}
type Request struct{}

func NewRouter() *Mux { return &Mux{} }
func (mx *Mux) With(f func(r *Request)) *Mux { return mx }
func (mx *Mux) Get(pattern string) {}
func (req *Request) Context() int { return 0 }

func TestMuxWith() {
	mw := func(r *Request) {
		r.Context()
	}
	r := NewRouter()
	r.With(func(r *Request) {
		r.Context()
	})
	r.Get("/")
	_ = mw
}
"""
    graph = build_graph({"mux_test.go": parse_file("mux_test.go", source)})
    calls = {(r.src, r.dst) for r in graph.rels if r.type is RelType.CALLS}
    test = symbol_key("mux_test.go", "TestMuxWith")
    assert {(test, symbol_key("mux_test.go", "Mux.With")), (test, symbol_key("mux_test.go", "Mux.Get")),
            (test, symbol_key("mux_test.go", "Request.Context")), (test, symbol_key("mux_test.go", "NewRouter"))} <= calls


def test_java_overloads_and_nested_types_type_their_own_parameters():
    """Two overloads share one key but each reads its own parameter's type, and a type nested in
    the enclosing class is named by its simple name (another class defines both methods too)."""
    options = parse_file("cli/Options.java", b"""package cli;
public class Options {
    public java.util.List<String> getOptions() { return null; }
}
class Group {
    public java.util.List<String> getOptions() { return null; }
    public int getWidth() { return 0; }
}
""")
    formatter = parse_file("cli/help/Formatter.java", b"""package cli.help;
import cli.Options;
public class Formatter {
    public static class Builder {
        public int getWidth() { return 80; }
    }
    private final int width;
    protected Formatter(final Builder builder) {
        this.width = builder.getWidth();
    }
    public void print(final Iterable<String> options) {
        options.iterator();
    }
    public void print(final Options options) {
        print(options.getOptions());
    }
}
""")
    graph = build_graph({"cli/Options.java": options, "cli/help/Formatter.java": formatter})
    calls = {(r.src, r.dst) for r in graph.rels if r.type is RelType.CALLS}
    path = "cli/help/Formatter.java"
    assert (symbol_key(path, "Formatter.print"), symbol_key("cli/Options.java", "Options.getOptions")) in calls
    assert (symbol_key(path, "Formatter.Formatter"), symbol_key(path, "Formatter.Builder.getWidth")) in calls


def test_a_go_embedded_struct_is_a_field_named_after_its_type():
    source = b"""package middleware

type basicWriter struct{ code int }

func (b *basicWriter) flush() {}

type flushWriter struct {
	basicWriter
}

func (f *flushWriter) Flush() {
	f.basicWriter.flush()
}

type other struct{}

func (o *other) flush() {}
"""
    graph = build_graph({"wrap_writer.go": parse_file("wrap_writer.go", source)})
    calls = {(r.src, r.dst) for r in graph.rels if r.type is RelType.CALLS}
    assert (symbol_key("wrap_writer.go", "flushWriter.Flush"), symbol_key("wrap_writer.go", "basicWriter.flush")) in calls


def test_a_python_decorator_is_called_for_the_definition_it_decorates():
    helpers = parse_file("pkg/cli.py", b"def subcommand(**kw):\n    return lambda f: f\n\n\ndef fixture(f):\n    return f\n\n\ndef classes():\n    return []\n")
    commands = parse_file("pkg/commands.py", b"""from pkg.cli import subcommand, fixture, classes


@subcommand(formatters={})
def clean(api):
    pass


class TestMake:
    @fixture
    def home(self):
        pass

    @staticmethod
    @subcommand(strategy=classes())
    def test_fields():
        pass
""")
    graph = build_graph({"pkg/cli.py": helpers, "pkg/commands.py": commands})
    calls = {(r.src, r.dst) for r in graph.rels if r.type is RelType.CALLS}
    cmd, cli = "pkg/commands.py", "pkg/cli.py"
    assert {(symbol_key(cmd, "clean"), symbol_key(cli, "subcommand")),
            (symbol_key(cmd, "TestMake.home"), symbol_key(cli, "fixture")),
            (symbol_key(cmd, "TestMake.test_fields"), symbol_key(cli, "subcommand")),
            (symbol_key(cmd, "TestMake.test_fields"), symbol_key(cli, "classes"))} <= calls
    assert not any(src == file_key(cmd) for src, _ in calls)  # none is the module's own call


def test_functions_assigned_to_properties_at_module_level_are_definitions():
    """CommonJS code defines its API by assignment (`res.send = function send() {}`, a prototype's
    methods, `exports.x = ...`): each is a symbol with its JSDoc, and calls to it resolve."""
    source = b"""'use strict';
var res = Object.create(null);
module.exports = res;

/**
 * Send a response body.
 */

res.send = function send(body) {
  return this.end(body);
};

res.json = function json(obj) {
  return this.send(JSON.stringify(obj));
};

function Router() {}

/** Add a route. */
Router.prototype.route = function (path) {
  return path;
};

exports.parse = (text) => text.trim();

/** Set the Content-Type. */
res.contentType =
res.type = function contentType(type) {
  return this.set('Content-Type', type);
};

function later() {
  window.onload = function () { return 1; };
  this.handler = function () { return 2; };
}
"""
    for path in ("lib/response.js", "lib/response.ts"):
        facts = parse_file(path, source)
        symbols = {s.qualname: s for s in facts.symbols}
        assert {"res.send", "res.json", "Router.route", "parse"} <= set(symbols), path
        assert not {"window.onload", "onload", "handler", "later.handler"} & set(symbols), path
        assert symbols["res.send"].kind == "method" and symbols["parse"].kind == "function"
        assert symbols["res.type"].docstring == "Set the Content-Type." and "res.contentType" not in symbols
        assert symbols["res.send"].docstring == "Send a response body."
        assert symbols["Router.route"].parent == "Router" and symbols["Router.route"].docstring == "Add a route."
        graph = build_graph({path: facts})
        calls = {(r.src, r.dst) for r in graph.rels if r.type is RelType.CALLS}
        assert (symbol_key(path, "res.json"), symbol_key(path, "res.send")) in calls, path


def test_a_go_type_implements_the_interfaces_its_methods_cover():
    """Go writes no "implements": a type whose methods (in any file of its package) include an
    interface's, its embedded interfaces' too, inherits from it. An interface that embeds one from
    outside the project has methods no one knows, so nothing is said to implement it."""
    files = {
        "match/match.go": b"""package match

type Matcher interface {
    Match(path string) bool
}

type Named interface {
    Matcher
    Name() string
}

type Flusher interface {
    io.Writer
    Flush() error
}
""",
        "match/prefix.go": b"""package match

type Prefix struct{ p string }

func (m Prefix) Match(path string) bool { return true }
func (m Prefix) Name() string { return m.p }
func (m Prefix) Flush() error { return nil }
""",
        "match/other.go": b"""package match

type Half struct{}

func (h *Half) Name() string { return "" }
""",
    }
    graph = build_graph({path: parse_file(path, data) for path, data in files.items()})
    implemented = {(r.src, r.dst) for r in graph.rels if r.type is RelType.INHERITS}
    prefix = symbol_key("match/prefix.go", "Prefix")
    assert (prefix, symbol_key("match/match.go", "Matcher")) in implemented
    assert (prefix, symbol_key("match/match.go", "Named")) in implemented
    assert (prefix, symbol_key("match/match.go", "Flusher")) not in implemented
    assert not any(src == symbol_key("match/other.go", "Half") for src, _ in implemented)
