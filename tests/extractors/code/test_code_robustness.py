"""Broken and unusual input: parsing always completes and keeps what it can."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from extractors.code import FileFacts, build_graph, parse_file, supports
from graphmem.model import RelType, check_node


def test_syntax_error_keeps_what_parses():
    source = b"def good():\n    return 1\n\ndef broken(:\n    pass\n\nclass Later:\n    def m(self):\n        good()\n"
    facts = parse_file("pkg/broken.py", source)
    assert facts.has_syntax_errors
    names = {s.qualname for s in facts.symbols}
    assert "good" in names and "Later" in names
    graph = build_graph({facts.path: facts})
    file_node = next(n for n in graph.nodes if n.key == "file:pkg/broken.py")
    assert file_node.props["has_syntax_errors"] is True


@pytest.mark.parametrize(
    "path,source",
    [
        ("a.js", b"function ok() { return 1 }\nfunction bad( { \n"),
        ("a.ts", b"function ok(): void {}\nclass A { m(): void { } \n interface {"),
        ("a.go", b"package a\nfunc Ok() {}\nfunc (x *T Bad( {\n"),
        ("A.java", b"class A { void ok() {} void bad( { }"),
        ("a.rs", b"fn ok() {}\nfn bad( -> {\n"),
    ],
)
def test_syntax_errors_in_every_language(path, source):
    facts = parse_file(path, source)
    assert facts.has_syntax_errors
    assert any(s.name == "ok" or s.name == "Ok" for s in facts.symbols)


def test_invalid_utf8_is_replaced_and_noted():
    source = b'def caf\xc3\xa9():\n    """Price in \xff\xfe euros."""\n    return 1\n'
    facts = parse_file("m.py", source)
    assert facts.decode_errors
    assert "\ufffd" in facts.source
    (symbol,) = facts.symbols
    assert symbol.qualname == "café" and "\ufffd" in symbol.docstring
    graph = build_graph({"m.py": facts})
    assert next(n for n in graph.nodes if n.key == "file:m.py").props["decode_errors"] is True


@pytest.mark.parametrize("path", ["empty.py", "empty.ts", "empty.go", "Empty.java", "empty.rs", "empty.js"])
def test_empty_file_is_a_file_node_and_nothing_else(path):
    facts = parse_file(path, b"")
    assert facts.lines == 0 and not facts.symbols and not facts.calls and not facts.imports
    graph = build_graph({path: facts})
    assert [n.key for n in graph.nodes] == [f"file:{path}"]
    assert graph.rels == [] and graph.chunks == []


def test_two_megabyte_generated_file_parses():
    body = "".join(f"def f{i}(x):\n    return f{i - 1}(x) + {i}\n\n" for i in range(1, 60_000))
    data = ("def f0(x):\n    return x\n\n" + body).encode()
    assert len(data) > 2_000_000
    started = time.perf_counter()
    facts = parse_file("gen/big.py", data)
    graph = build_graph({facts.path: facts})
    elapsed = time.perf_counter() - started
    print(f"\n2 MB file: {len(facts.symbols)} symbols, {len(graph.rels)} relationships in {elapsed:.1f}s")
    assert len(facts.symbols) == 60_000
    calls = [r for r in graph.rels if r.type is RelType.CALLS]
    assert len(calls) == 59_999
    assert elapsed < 120


def _chain(n: int) -> str:
    return "+".join(f"f{i}(x)" for i in range(n))


# One long expression, as generated code has: finding each call's owner used to walk up the whole
# expression from every call, in time cubic in its length (minutes at this size). Each file starts
# with a short line: one without a line break in its first 8 KiB is minified and never parsed.
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "path, source, owner",
    [
        ("min/app.js", f"// generated\nvar a={_chain(20_000)};", ""),
        ("gen/calc.py", f"@cache\ndef total(x):\n    return {_chain(20_000)}\n", "total"),
        ("gen/calc.ts", f"// generated\nclass C {{ total(x: number) {{ return {_chain(20_000)}; }} }}\n", "C.total"),
        ("gen/calc.go", f"package calc\nfunc Total(x int) int {{ return {_chain(20_000)} }}\n", "Total"),
        ("gen/Calc.java", f"// generated\nclass Calc {{ int total(int x) {{ return {_chain(20_000)}; }} }}\n",
         "Calc.total"),
    ],
)
def test_long_one_line_expression_keeps_every_call(path, source, owner):
    facts = parse_file(path, source.encode())
    calls = [c for c in facts.calls if c.callee != "cache"]
    assert sorted(c.callee for c in calls) == sorted(f"f{i}" for i in range(20_000))
    assert {c.caller for c in calls} == {owner}
    if path.endswith(".py"):
        assert [c.caller for c in facts.calls if c.callee == "cache"] == ["total"]


def test_minified_code_is_recorded_not_parsed():
    """No line break in the first 8 KiB: minified. Its lines are counted, nothing is parsed (an
    expression 85,000 calls deep took tree-sitter's queries over a minute)."""
    facts = parse_file("min/bundle.js", f"var a={_chain(3_000)};function g(){{return a}}".encode())
    assert facts.lines == 1 and not facts.symbols and not facts.calls
    kept = parse_file("min/short.js", b"var a=f0(x);function g(){return a}")
    assert [s.qualname for s in kept.symbols] == ["g"]


# Definitions deep in one expression: finding each one's wrapper and the comment above it used to
# step up (or back) from the root per definition, in time quadratic in the nesting (minutes here).
@pytest.mark.timeout(60)
def test_definitions_deep_in_one_expression_keep_their_docs():
    n = 15_000  # about 30,000 levels: within what the parser reads (MAX_QUERY_DEPTH)
    source = "var a = {" + "".join(f"k{i}: {{ /** Step {i}. */ m{i}() {{ return g(); }},\n" for i in range(n))
    facts = parse_file("min/deep.js", (source + "}" * n + "};\n").encode())
    docs = {s.qualname: s.docstring for s in facts.symbols}
    assert len(docs) == n and docs["m0"] == "Step 0." and docs[f"m{n - 1}"] == f"Step {n - 1}."
    assert len(facts.calls) == n and {c.caller for c in facts.calls} == {f"m{i}" for i in range(n)}


# Calls nested in calls, as a generator or an attacker writes them: tree-sitter's query matching
# took over a minute at 65,000 levels. Below MAX_QUERY_DEPTH nothing is read, and the file says so.
@pytest.mark.timeout(120)
def test_code_nested_deeper_than_the_parser_reads_is_cut_and_reported(tmp_path):
    from graphmem.ingest import ingest
    from graphmem.stores.embedded import EmbeddedStore
    from extractors.code.parse import MAX_QUERY_DEPTH

    n = MAX_QUERY_DEPTH  # each call adds two levels (the call and its arguments)
    source = f"// generated\nfunction outer() {{ return {'f(' * n}1{')' * n}; }}\nfunction after() {{ return g(); }}\n"
    facts = parse_file("gen/deep.js", source.encode())
    assert facts.too_deep
    assert {s.qualname for s in facts.symbols} == {"outer", "after"}
    assert 0 < sum(c.callee == "f" for c in facts.calls) < n
    assert [c.caller for c in facts.calls if c.callee == "g"] == ["after"]
    shallow = parse_file("gen/shallow.js", f"function outer() {{ return {'f(' * 200}1{')' * 200}; }}\n".encode())
    assert not shallow.too_deep and sum(c.callee == "f" for c in shallow.calls) == 200

    repo = tmp_path / "repo"
    (repo / "gen").mkdir(parents=True)
    (repo / "gen" / "deep.js").write_text(source)
    (repo / "ok.py").write_text("def ok():\n    return 1\n")
    store = EmbeddedStore(tmp_path / "home", "deep")
    store.ensure_schema()
    try:
        report = ingest(repo, store, cache_dir=tmp_path / "cache")
        assert any(s.path == "gen/deep.js" and "levels deep" in s.reason for s in report.skipped)
        assert store.get_nodes(["sym:gen/deep.js::after", "sym:ok.py::ok"]).keys() == {
            "sym:gen/deep.js::after", "sym:ok.py::ok"}
    finally:
        store.close()


def test_file_facts_round_trip_through_json(project_facts):
    for facts in project_facts.values():
        data = json.loads(json.dumps(facts.to_dict()))
        again = FileFacts.from_dict(data)
        assert again == facts


def test_graph_from_cached_facts_is_identical(project_facts):
    cached = {p: FileFacts.from_dict(json.loads(json.dumps(f.to_dict()))) for p, f in project_facts.items()}
    first, second = build_graph(project_facts), build_graph(cached)
    assert [(n.key, n.props) for n in first.nodes] == [(n.key, n.props) for n in second.nodes]
    assert [(r.ident, r.props) for r in first.rels] == [(r.ident, r.props) for r in second.rels]


def test_supports():
    for path in ["a.py", "b/c.ts", "x.tsx", "m.go", "A.java", "lib.rs", "w.jsx", "go.mod", "s.mjs", "web/package.json"]:
        assert supports(path), path
    for path in ["README.md", "a.pyc", "Makefile", "x.c", "go.sum", "package-lock.json", "tsconfig.json"]:
        assert not supports(path), path
    with pytest.raises(ValueError):
        parse_file("README.md", b"# hi")


def test_import_does_no_work():
    code = (
        "import sys, extractors.code as c; "
        "assert not [m for m in sys.modules if m.startswith('tree_sitter')], 'grammar loaded at import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_go_mod_gives_module_path():
    facts = parse_file("svc/go.mod", b"module example.com/svc\n\ngo 1.22\n")
    assert facts.language == "gomod" and facts.package == "example.com/svc"


def test_a_package_manifest_gives_its_name_and_entry_points_and_a_broken_one_nothing():
    facts = parse_file("package.json", b"""{"name": "preact", "source": "src/index.js", "main": "dist/preact.js",
      "exports": {".": {"types": "./src/index.d.ts", "default": "./dist/preact.mjs"},
                  "./hooks": {"import": {"default": "./hooks/dist/hooks.mjs"}}, "./*": "./*"}}""")
    assert facts.language == "npmpackage" and facts.package == "preact"
    assert facts.entries == {".": ["src/index.js", "dist/preact.js", "./src/index.d.ts", "./dist/preact.mjs"],
                             "./hooks": ["./hooks/dist/hooks.mjs"]}
    deep = b'{"name": "x", "exports": ' + b'{"a": ' * 500 + b'"./x.js"' + b"}" * 500 + b"}"
    assert parse_file("package.json", deep).entries == {}  # conditions nested past any real manifest
    for broken in (b"{not json", b"[1, 2]", b'{"version": "1.0.0"}', b"\xff\xfe", b"[" * 200_000 + b"]" * 200_000):
        facts = parse_file("package.json", broken)
        assert (facts.package, facts.entries) == ("", {}), broken


@pytest.mark.slow
def test_resolution_of_five_thousand_files_is_fast():
    files = {}
    for i in range(5000):
        package = f"pkg{i % 50}"
        far, near = (i + 7) % 5000, (i + 3) % 5000
        source = (
            f"from pkg{far % 50}.mod{far} import helper_{far}\n"
            f"import pkg{near % 50}.mod{near} as sibling\n\n"
            f"class Thing{i}:\n"
            f"    def run(self):\n"
            f"        helper_{far}()\n"
            f"        sibling.helper_{near}()\n"
            f"        return self.step()\n\n"
            f"    def step(self):\n"
            f"        return helper_{i}()\n\n"
            f"def helper_{i}():\n"
            f"    return Thing{i}().step()\n"
        )
        path = f"{package}/mod{i}.py"
        files[path] = parse_file(path, source.encode())
    started = time.perf_counter()
    graph = build_graph(files)
    elapsed = time.perf_counter() - started
    calls = sum(1 for r in graph.rels if r.type is RelType.CALLS)
    print(f"\n5,000 files: {len(graph.nodes)} nodes, {calls} call edges, built in {elapsed:.1f}s")
    for node in graph.nodes[:50]:
        check_node(node)
    # run -> imported helper, sibling module's helper, self.step; step -> helper; helper -> class, step
    assert calls == 5000 * 6
    assert elapsed < 30
