"""The TypeScript/JavaScript oracle of the real-code evaluation on a tiny package."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eval.realcode.oracles import javascript, typescript

SHAPES_TS = """\
import { area as sideProduct } from './util';

/**
 * A rectangle with a width and a height.
 *
 * Only the first paragraph is the doc.
 */
export class Rect {
  constructor(private w: number, private h: number) {}

  /** The area, see {@link sideProduct}. */
  area(): number {
    return sideProduct(this.w, this.h);
  }

  /** Twice the {@link Rect.area | area}. */
  double(): number {
    return this.area() * 2;
  }

  get width(): number {
    return this.w;
  }
}

/** Parses a value. */
export function parse(value: string): number;
export function parse(value: number): number;
export function parse(value: string | number): number {
  return typeof value === 'string' ? Number(value) : value;
}

export interface Shape {
  area(): number;
}

export type Size = { w: number; h: number };

export enum Unit { Px, Em }

/** Scales a rectangle's area. */
export const scale = (r: Rect, k: number): number => {
  const inner = (x: number) => x * k;
  return inner(r.area()) + parse('1');
};
"""

UTIL_TS = """\
/** Multiplies two sides. */
export function area(w: number, h: number): number {
  return w * h;
}

export function run(parse: (s: string) => number): number {
  // `parse` is the parameter here, not a function of the tree: left out.
  return parse('2') + area(1, 2);
}
"""

CHECK_JS = """\
const { area } = require('../src/util');
const helpers = require('./helpers');

function check() {
  return area(2, 3) + helpers.twice(2) + missing() + new Helper().go();
}

class Helper {
  go() {
    const obj = { go() { return 1; } };
    return obj.go() + this.go.length;
  }
}

module.exports = { check };
"""


@pytest.fixture(scope="module")
def oracle_command(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    # One npm install for the module: the cache is shared by both commands below.
    cache = tmp_path_factory.mktemp("oracle-cache")
    first = typescript.command(cache)
    assert javascript.command(cache) == first
    return first


def _run(command: list[str], root: Path) -> dict[str, Any]:
    proc = subprocess.run([*command, str(root)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def test_definitions_and_calls(oracle_command: list[str], tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "test").mkdir()
    (tmp_path / "src" / "shapes.ts").write_text(SHAPES_TS)
    (tmp_path / "src" / "util.ts").write_text(UTIL_TS)
    (tmp_path / "test" / "check.js").write_text(CHECK_JS)
    # Left out: type declarations, bundles next to sources, dependencies.
    (tmp_path / "src" / "shapes.d.ts").write_text("export declare function parse(v: string): number;\n")
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "index.js").write_text("function bundled() {}\n")
    (tmp_path / "node_modules" / "dep").mkdir(parents=True)
    (tmp_path / "node_modules" / "dep" / "index.js").write_text("function dep() {}\n")

    out = _run(oracle_command, tmp_path)
    assert out["language"] == "typescript"
    got = [
        (d["path"], d["qualname"], d["kind"], d["container"], d["start_line"], d["end_line"], d["doc"], d["test"])
        for d in out["definitions"]
    ]
    assert got == [
        ("src/shapes.ts", "Rect", "class", None, 8, 24, "A rectangle with a width and a height.", False),
        ("src/shapes.ts", "Rect.constructor", "method", "Rect", 9, 9, "", False),
        ("src/shapes.ts", "Rect.area", "method", "Rect", 12, 14, "The area, see sideProduct.", False),
        ("src/shapes.ts", "Rect.double", "method", "Rect", 17, 19, "Twice the area.", False),
        ("src/shapes.ts", "Rect.width", "method", "Rect", 21, 23, "", False),
        # Overloads share one qualname; the definition spans the signatures and the body.
        ("src/shapes.ts", "parse", "function", None, 27, 31, "Parses a value.", False),
        ("src/shapes.ts", "Shape", "interface", None, 33, 35, "", False),
        ("src/shapes.ts", "Size", "type", None, 37, 37, "", False),
        ("src/shapes.ts", "Unit", "enum", None, 39, 39, "", False),
        ("src/shapes.ts", "scale", "function", None, 42, 45, "Scales a rectangle's area.", False),
        ("src/shapes.ts", "scale.inner", "function", None, 43, 43, "", False),
        ("src/util.ts", "area", "function", None, 2, 4, "Multiplies two sides.", False),
        ("src/util.ts", "run", "function", None, 6, 9, "", False),
        ("test/check.js", "check", "function", None, 4, 6, "", True),
        ("test/check.js", "Helper", "class", None, 8, 13, "", True),
        ("test/check.js", "Helper.go", "method", "Helper", 9, 12, "", True),
    ]
    by_key = {f"{d['path']}::{d['qualname']}": d for d in out["definitions"]}
    assert by_key["src/shapes.ts::parse"]["signature"] == "export function parse(value: string): number"
    assert by_key["src/shapes.ts::scale"]["signature"] == "export const scale = (r: Rect, k: number): number"
    assert by_key["src/shapes.ts::Rect"]["signature"] == "export class Rect"
    # The declaration's text: from `area(` (JSDoc and indentation left out) to its closing brace.
    area_text = "".join(SHAPES_TS.splitlines(keepends=True)[11:14]).strip()
    assert by_key["src/shapes.ts::Rect.area"]["body_sha"] == hashlib.sha1(area_text.encode()).hexdigest()

    calls = [(c["caller"], c["callee"]) for c in out["calls"]]
    assert calls == [
        ("src/shapes.ts::Rect.area", "src/util.ts::area"),  # relative import under another name
        ("src/shapes.ts::Rect.double", "src/shapes.ts::Rect.area"),  # this.m() in the declaring class
        ("src/shapes.ts::scale", "src/shapes.ts::parse"),  # top-level function of the same file
        ("src/util.ts::run", "src/util.ts::area"),
        ("test/check.js::check", "src/util.ts::area"),  # destructured require
    ]
    # Left out: the shadowed `parse`, the nested `inner`, `helpers.twice`, `missing`, `new Helper`,
    # an object literal's `go` called on `obj`.


def test_javascript_package(oracle_command: list[str], tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "twice.js").write_text(
        "/**\n * Doubles a number.\n * @param {number} n\n */\nconst twice = (n) => n * 2;\nmodule.exports = twice;\n"
    )
    (tmp_path / "lib" / "quad.mjs").write_text(
        "import twice from './twice.js';\nexport default function quad(n) {\n  return twice(twice(n));\n}\n"
    )
    (tmp_path / "lib" / "quad.test.cjs").write_text(
        "const twice = require('./twice');\nconst quad = require('./quad.mjs');\nlet later = () => 1;\n"
        "function t() { return later() + quad(1) + twice(1); }\n"
    )
    out = _run(oracle_command, tmp_path)
    assert out["language"] == "javascript"
    assert [(d["path"], d["qualname"], d["doc"], d["test"]) for d in out["definitions"]] == [
        ("lib/quad.mjs", "quad", "", False),
        ("lib/quad.test.cjs", "later", "", True),
        ("lib/quad.test.cjs", "t", "", True),
        ("lib/twice.js", "twice", "Doubles a number.", False),
    ]
    # Left out: `later` is a `let` (it may be reassigned); requiring an ES module gives its
    # namespace, not its default export.
    assert [(c["caller"], c["callee"]) for c in out["calls"]] == [
        ("lib/quad.mjs::quad", "lib/twice.js::twice"),  # default import of `module.exports = twice`
        ("lib/quad.test.cjs::t", "lib/twice.js::twice"),  # require without an extension
    ]
