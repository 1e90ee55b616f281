"""The Go oracle on a tiny module: exact definitions and exactly the calls it can be sure of."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from eval.realcode.oracles import go as go_oracle

FILES = {
    "go.mod": "module example.com/tiny\n\ngo 1.21\n",
    "shapes/shapes.go": '''// Package shapes holds geometry.
package shapes

// Shape is anything with an area.
//
// This second paragraph is not part of the doc.
type Shape interface {
	// Area returns the area.
	Area() float64
}

// Stack is a generic
// stack.
type Stack[T any] struct {
	items []T
}

// Push adds v on top.
func (s *Stack[T]) Push(v T) {
	s.items = append(s.items, v)
	s.grow()
}

//go:noinline
func (s *Stack[T]) grow() {}

// Square is a square.
type Square struct{ Side float64 }

// Area is the side squared.
func (q Square) Area() float64 { return q.Side * q.Side }

type (
	// Meters is a length.
	Meters float64
	Alias  = Square
)

// NewSquare makes a square.
func NewSquare(side float64) *Square {
	return &Square{Side: side}
}
''',
    "shapes/shapes_test.go": """package shapes_test

import (
	"testing"

	"example.com/tiny/shapes"
)

func TestArea(t *testing.T) {
	if shapes.NewSquare(1).Area() != 1 {
		t.Fatal("area")
	}
}
""",
    "app/app.go": """package app

import (
	"fmt"

	geo "example.com/tiny/shapes"
)

// Run measures shapes.
func Run(s geo.Shape) float64 {
	sq := geo.NewSquare(2)
	a := sq.Area()
	st := &geo.Stack[int]{}
	st.Push(1)
	fmt.Println(a, platform())
	local()
	return s.Area()
}

func helper() {}

func local() {
	helper := func() {}
	helper()
}
""",
    "app/os_linux.go": 'package app\n\nfunc platform() string { return "linux" }\n',
    "app/os_other.go": '//go:build !linux\n\npackage app\n\nfunc platform() string { return "other" }\n',
    "app/app_test.go": """package app

import "testing"

type fixture struct{ n int }

// Double doubles n.
func (f *fixture) Double() int { return f.n * 2 }

func (f *fixture) check(t *testing.T) {
	if f.Double() != 2 {
		t.Fatal("double")
	}
}

func TestRun(t *testing.T) {
	// row is one case.
	type row struct{ in int }
	var fx fixture
	fx.check(t)
	Run(nil)
	helper()
}
""",
    "testdata/ignored.go": "package ignored\n\nfunc Hidden() {}\n",
    "vendor/x/x.go": "package x\n\nfunc Vendored() {}\n",
}

S, A = "shapes/shapes.go", "app/app.go"
EXPECTED_DEFINITIONS = {
    # (path, qualname): (kind, container, doc, test)
    ("app/app.go", "Run"): ("function", None, "Run measures shapes.", False),
    ("app/app.go", "helper"): ("function", None, "", False),
    ("app/app.go", "local"): ("function", None, "", False),
    ("app/app_test.go", "fixture"): ("struct", None, "", True),
    ("app/app_test.go", "fixture.Double"): ("method", "fixture", "Double doubles n.", True),
    ("app/app_test.go", "fixture.check"): ("method", "fixture", "", True),
    ("app/app_test.go", "TestRun"): ("function", None, "", True),
    ("app/app_test.go", "TestRun.row"): ("struct", None, "row is one case.", True),
    ("app/os_linux.go", "platform"): ("function", None, "", False),
    ("app/os_other.go", "platform"): ("function", None, "", False),
    (S, "Shape"): ("interface", None, "Shape is anything with an area.", False),
    (S, "Shape.Area"): ("method", "Shape", "Area returns the area.", False),
    (S, "Stack"): ("struct", None, "Stack is a generic stack.", False),
    (S, "Stack.Push"): ("method", "Stack", "Push adds v on top.", False),
    (S, "Stack.grow"): ("method", "Stack", "", False),  # a directive is not documentation
    (S, "Square"): ("struct", None, "Square is a square.", False),
    (S, "Square.Area"): ("method", "Square", "Area is the side squared.", False),
    (S, "Meters"): ("type", None, "Meters is a length.", False),
    (S, "Alias"): ("type", None, "", False),
    (S, "NewSquare"): ("function", None, "NewSquare makes a square.", False),
    ("shapes/shapes_test.go", "TestArea"): ("function", None, "", True),
}

EXPECTED_CALLS = {
    # through an import of the same module
    ("app/app.go::Run", "shapes/shapes.go::NewSquare"),
    # through the declared result type of a resolved constructor
    ("app/app.go::Run", "shapes/shapes.go::Square.Area"),
    # through a composite literal of a generic type
    ("app/app.go::Run", "shapes/shapes.go::Stack.Push"),
    # through the receiver
    ("shapes/shapes.go::Stack.Push", "shapes/shapes.go::Stack.grow"),
    ("app/app_test.go::fixture.check", "app/app_test.go::fixture.Double"),
    # a variable declared with an explicit type, and same-package calls from a test file
    ("app/app_test.go::TestRun", "app/app_test.go::fixture.check"),
    ("app/app_test.go::TestRun", "app/app.go::Run"),
    ("app/app_test.go::TestRun", "app/app.go::helper"),
    # an external test package importing the package under test
    ("shapes/shapes_test.go::TestArea", "shapes/shapes.go::NewSquare"),
    ("shapes/shapes_test.go::TestArea", "shapes/shapes.go::Square.Area"),
    ("app/app.go::Run", "app/app.go::local"),
    # Left out: platform() (two build-tag variants), s.Area() (interface dispatch), fmt.Println
    # (outside the tree), helper() inside local (a local variable shadows the function).
}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return go_oracle.command(tmp_path_factory.mktemp("cache"))


def _run(oracle: list[str], tmp_path: Path) -> dict:
    root = tmp_path / "tiny"
    for rel, text in FILES.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    result = subprocess.run([*oracle, str(root)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_definitions_and_calls(oracle: list[str], tmp_path: Path) -> None:
    out = _run(oracle, tmp_path)
    assert out["language"] == "go"
    definitions = {(d["path"], d["qualname"]): d for d in out["definitions"]}
    assert len(definitions) == len(out["definitions"])
    got = {key: (d["kind"], d["container"], d["doc"], d["test"]) for key, d in definitions.items()}
    assert got == EXPECTED_DEFINITIONS
    assert {(c["caller"], c["callee"]) for c in out["calls"]} == EXPECTED_CALLS
    assert len(out["calls"]) == len(EXPECTED_CALLS)

    push = definitions[(S, "Stack.Push")]
    assert (push["name"], push["start_line"], push["end_line"]) == ("Push", 19, 22)
    assert push["signature"] == "func (s *Stack[T]) Push(v T)"
    source = (tmp_path / "tiny" / S).read_text().splitlines(keepends=True)
    assert push["body_sha"] == hashlib.sha1("".join(source[18:22]).rstrip("\n").encode()).hexdigest()
    assert definitions[(S, "Stack")]["signature"] == "type Stack[T any] struct"
    assert definitions[(S, "Meters")]["start_line"] == definitions[(S, "Meters")]["end_line"] == 35
    assert definitions[("app/app_test.go", "TestRun.row")]["start_line"] == 18


def test_output_is_sorted_and_stable(oracle: list[str], tmp_path: Path) -> None:
    out = _run(oracle, tmp_path)
    keys = [(d["path"], d["start_line"], d["qualname"]) for d in out["definitions"]]
    assert keys == sorted(keys)
    calls = [(c["caller"], c["callee"]) for c in out["calls"]]
    assert calls == sorted(calls)
    assert _run(oracle, tmp_path / "again") == out


def test_binary_is_built_once_per_source(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = go_oracle.command(cache)
    mtime = Path(first[0]).stat().st_mtime_ns
    assert go_oracle.command(cache) == first
    assert Path(first[0]).stat().st_mtime_ns == mtime
