"""The Java oracle on a two-file tree: definitions (nesting, overloads, constructors, Javadoc) and
only the calls it can resolve with certainty."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from eval.realcode.oracles.java import command
from extractors.code.parse import parse_file

SHAPES = """\
package demo;

import java.util.List;

/**
 * Geometry helpers.
 *
 * <p>Second paragraph, not part of the doc.
 */
public class Shapes {
    private final Util util = new Util();

    /** Builds an empty {@code Shapes}. */
    public Shapes() {
        reset();
    }

    /**
     * Area of a square with side {@link #side(int) side}, see {@link Util#twice}.
     * @param side the side
     */
    public int area(int side) {
        return side * side;
    }

    public int area(int w, int h) {
        return Util.twice(w) * h;
    }

    void reset() {
        Circle c = new Circle();
        c.radius();
        util.helper();
        Object o = c;
        o.toString();
        List<String> names = null;
        names.size();
        area(2);
    }

    /** A round shape. */
    static class Circle {
        int radius() {
            return Util.twice(1);
        }

        void paint(Runnable r) {
            r.run();
            new Thread(r).start();
        }
    }
}
"""

UTIL = """\
package demo;

class Base {
    void helper() {}
}

/** Small utilities. */
class Util extends Base {
    static int twice(int x) {
        return 2 * x;
    }

    void helper(String s) {}

    void call(Base b) {
        helper();
        b.helper();
    }
}
"""


@pytest.fixture(scope="session")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return command(tmp_path_factory.mktemp("java-oracle-cache"))


def test_java_oracle_definitions_and_calls(oracle: list[str], tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "Shapes.java").write_text(SHAPES, encoding="utf-8")
    (tmp_path / "demo" / "UtilTest.java").write_text(UTIL, encoding="utf-8")
    proc = subprocess.run([*oracle, str(tmp_path)], capture_output=True, text=True, check=True)
    facts = json.loads(proc.stdout)
    assert facts["language"] == "java"

    defs = {(d["path"], d["qualname"]): d for d in facts["definitions"]}
    shapes, util = "demo/Shapes.java", "demo/UtilTest.java"
    summary = {k: (d["kind"], d["container"], d["start_line"], d["end_line"], d["test"]) for k, d in defs.items()}
    assert summary == {
        (shapes, "Shapes"): ("class", None, 10, 52, False),
        (shapes, "Shapes.Shapes"): ("method", "Shapes", 14, 16, False),
        # Overloads share one key: the first keeps lines, signature and doc.
        (shapes, "Shapes.area"): ("method", "Shapes", 22, 24, False),
        (shapes, "Shapes.reset"): ("method", "Shapes", 30, 39, False),
        (shapes, "Shapes.Circle"): ("class", None, 42, 51, False),
        (shapes, "Shapes.Circle.radius"): ("method", "Shapes.Circle", 43, 45, False),
        (shapes, "Shapes.Circle.paint"): ("method", "Shapes.Circle", 47, 50, False),
        (util, "Base"): ("class", None, 3, 5, True),
        (util, "Base.helper"): ("method", "Base", 4, 4, True),
        (util, "Util"): ("class", None, 8, 19, True),
        (util, "Util.twice"): ("method", "Util", 9, 11, True),
        (util, "Util.helper"): ("method", "Util", 13, 13, True),
        (util, "Util.call"): ("method", "Util", 15, 18, True),
    }
    assert defs[(shapes, "Shapes")]["doc"] == "Geometry helpers."
    assert defs[(shapes, "Shapes.Shapes")]["doc"] == "Builds an empty Shapes."
    assert defs[(shapes, "Shapes.area")]["doc"] == "Area of a square with side side, see Util.twice."
    assert defs[(shapes, "Shapes.area")]["signature"] == "public int area(int side)"
    assert defs[(shapes, "Shapes.Circle")]["signature"] == "static class Circle"
    assert defs[(shapes, "Shapes.reset")]["doc"] == ""
    assert len(defs[(shapes, "Shapes.area")]["body_sha"]) == 40

    calls = {(c["caller"], c["callee"]) for c in facts["calls"]}
    assert calls == {
        (f"{shapes}::Shapes", f"{util}::Util"),  # field initialiser: new Util()
        (f"{shapes}::Shapes.Shapes", f"{shapes}::Shapes.reset"),
        (f"{shapes}::Shapes.area", f"{util}::Util.twice"),  # static call across files
        (f"{shapes}::Shapes.reset", f"{shapes}::Shapes.Circle"),
        (f"{shapes}::Shapes.reset", f"{shapes}::Shapes.Circle.radius"),  # typed local variable
        (f"{shapes}::Shapes.reset", f"{shapes}::Shapes.area"),
        (f"{shapes}::Shapes.Circle.radius", f"{util}::Util.twice"),
        (f"{util}::Util.call", f"{util}::Base.helper"),
        # Left out: util.helper() and the unqualified helper() (Util declares helper(String), Base
        # helper(), so overload resolution decides), o.toString(), names.size(), r.run(), start().
    }


def test_java_oracle_keys_match_graphmem(oracle: list[str], tmp_path: Path) -> None:
    """The oracle names definitions as graphmem's keys do (SPEC.md "Identifiers")."""
    files = {"demo/Shapes.java": SHAPES, "demo/UtilTest.java": UTIL}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    proc = subprocess.run([*oracle, str(tmp_path)], capture_output=True, text=True, check=True)
    ours = {(d["path"], d["qualname"], d["start_line"], d["end_line"]) for d in json.loads(proc.stdout)["definitions"]}
    theirs = {(rel, s.qualname, s.start_line, s.end_line)
              for rel, text in files.items() for s in parse_file(rel, text.encode()).symbols}
    assert ours == theirs
