"""The real-code evaluation set: reproducible assembly from archives, the Python oracle, and the
questions made from oracle facts."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from eval.realcode import build as builder
from eval.realcode.oracles.python_ast import analyse
from eval.realcode.questions import Definition, describe, generate, third_person

V1 = {
    "pkg/__init__.py": "from .core import parse\n",
    "pkg/core.py": '''"""Core."""
from .util import clean, helper


def parse(text):
    """Parse a config text into a dict of settings."""
    return helper(clean(text))


def render(data):
    """Render settings back to text."""
    return str(data)


class Loader:
    """A loader of settings files."""

    def load(self, path):
        """Read the file at path and parse it."""
        return self.decode(parse(path))

    def decode(self, data):
        return data

    def reload(self, path):
        return unknown(path)  # not defined anywhere: left out
''',
    "pkg/util.py": '''def clean(text):
    """Strip comments and blank lines from the text."""
    return text.strip()


def helper(text):
    return {"text": text}
''',
    "tests/test_core.py": "from pkg.core import parse\n\n\ndef test_parse():\n    assert parse('a')\n",
    "docs/index.md": "# docs\n",
}


def _tarball(files: dict[str, str], top: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime = len(data), 0
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _manifest(tmp: Path, releases: list[tuple[str, dict[str, str], str]]) -> builder.Manifest:
    rels = []
    for version, files, date in releases:
        data = _tarball(files, f"pkg-{version}")
        path = tmp / f"pkg-{version}.tar.gz"
        path.write_bytes(data)
        rels.append(builder.Release(version, date, path.as_uri(), hashlib.sha256(data).hexdigest()))
    return builder.Manifest(name="pkg", language="python", split="dev", source="pypi", releases=tuple(rels),
                            project_words=("pkg",), exclude=("docs/*",), author=("pkg maintainers", "m@pkg.invalid"))


def test_two_builds_of_one_manifest_have_the_same_commits(tmp_path: Path) -> None:
    v2 = dict(V1)
    v2["pkg/util.py"] = V1["pkg/util.py"].replace("text.strip()", "text.strip().lower()")
    del v2["pkg/__init__.py"]
    manifest = _manifest(tmp_path, [("1.0", V1, "2024-01-02T03:04:05.123456+00:00"),
                                    ("1.1", v2, "2024-06-01T00:00:00Z".replace("Z", "+00:00"))])
    first = builder.build(manifest, tmp_path / "a")
    second = builder.build(manifest, tmp_path / "b")
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert [r["sha"] for r in a["releases"]] == [r["sha"] for r in b["releases"]]
    assert len({r["sha"] for r in a["releases"]}) == 2
    repo = tmp_path / "a" / "repos" / "pkg"
    assert (repo / "pkg" / "core.py").exists() and not (repo / "docs").exists()  # stripped top dir, excluded docs
    assert not (repo / "pkg" / "__init__.py").exists()  # removed in 1.1
    changed = {d["qualname"]: d["body_sha"] for d in a["releases"][1]["facts"]["definitions"]}
    before = {d["qualname"]: d["body_sha"] for d in a["releases"][0]["facts"]["definitions"]}
    assert changed["clean"] != before["clean"] and changed["helper"] == before["helper"]


def test_a_wrong_checksum_is_refused(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, [("1.0", V1, "2024-01-02T00:00:00+00:00")])
    release = builder.Release("1.0", "2024-01-02T00:00:00+00:00", manifest.releases[0].url, "0" * 64)
    with pytest.raises(builder.BuildError, match="sha256"):
        builder.fetch(release, tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*"))  # nothing unverified is cached


def test_the_python_oracle_reads_definitions_and_only_certain_calls(tmp_path: Path) -> None:
    for name, text in V1.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    facts = analyse(tmp_path)
    defs = {f"{d['path']}::{d['qualname']}": d for d in facts["definitions"]}
    assert set(defs) == {"pkg/core.py::parse", "pkg/core.py::render", "pkg/core.py::Loader",
                         "pkg/core.py::Loader.load", "pkg/core.py::Loader.decode", "pkg/core.py::Loader.reload",
                         "pkg/util.py::clean", "pkg/util.py::helper", "tests/test_core.py::test_parse"}
    assert defs["pkg/core.py::Loader.load"]["kind"] == "method"
    assert defs["pkg/core.py::Loader.load"]["container"] == "Loader"
    assert defs["pkg/core.py::parse"]["doc"] == "Parse a config text into a dict of settings."
    assert defs["tests/test_core.py::test_parse"]["test"] and not defs["pkg/core.py::parse"]["test"]
    calls = {(c["caller"], c["callee"]) for c in facts["calls"]}
    assert calls == {("pkg/core.py::parse", "pkg/util.py::helper"), ("pkg/core.py::parse", "pkg/util.py::clean"),
                     ("pkg/core.py::Loader.load", "pkg/core.py::Loader.decode"),
                     ("pkg/core.py::Loader.load", "pkg/core.py::parse"),
                     ("tests/test_core.py::test_parse", "pkg/core.py::parse")}


def _record() -> dict[str, Any]:
    def d(path: str, qual: str, kind: str = "function", doc: str = "", container: str | None = None,
          body: str = "x") -> dict[str, Any]:
        return {"path": path, "qualname": qual, "name": qual.rsplit(".", 1)[-1], "kind": kind, "container": container,
                "start_line": 1, "end_line": 2, "doc": doc, "signature": "", "body_sha": body, "test": False}

    base = [d("a/core.py", "parse_config", doc="Parse a configuration text into settings for the loader."),
            d("a/core.py", "Loader", "class", doc="A loader of settings files from disk."),
            d("a/core.py", "Loader.load_file", "method", container="Loader", doc="Read the file and parse it."),
            d("b/util.py", "strip_comments", doc="Strip comments and blank lines from the text."),
            d("b/util.py", "old_helper")]
    later = [x for x in base if x["qualname"] != "old_helper"] + [d("b/util.py", "new_helper")]
    later = [dict(x, body_sha="y") if x["qualname"] == "strip_comments" else x for x in later]
    calls = [{"caller": "a/core.py::parse_config", "callee": "b/util.py::strip_comments"},
             {"caller": "a/core.py::Loader.load_file", "callee": "a/core.py::parse_config"},
             {"caller": "a/core.py::parse_config", "callee": "b/util.py::new_helper"}]
    return {"name": "demo", "project_words": ["demo"], "releases": [
        {"version": "1", "sha": "1" * 40, "facts": {"definitions": base, "calls": []}},
        {"version": "2", "sha": "2" * 40, "facts": {"definitions": later, "calls": calls}}]}


def test_questions_come_from_the_facts_with_gold_the_oracle_knows() -> None:
    record = _record()
    qs = generate(record)
    assert qs == generate(record)  # deterministic
    by_type: dict[str, list[dict[str, Any]]] = {}
    for q in qs:
        by_type.setdefault(q["type"], []).append(q)
    known = {f"sym:{d['path']}::{d['qualname']}" for r in record["releases"] for d in r["facts"]["definitions"]}
    known |= {f"commit:{r['sha']}" for r in record["releases"]}
    assert all(set(q["gold"]) <= known and q["question"] and q["repo"] == "demo" for q in qs)
    callers = [q for q in by_type["callers"] if "strip_comments" in q["question"]]
    assert callers and callers[0]["gold"] == ["sym:a/core.py::parse_config"]
    assert {tuple(q["gold"]) for q in by_type["history"]} >= {("commit:" + "2" * 40,)}
    assert by_type["method-type"][0]["gold"] == ["sym:a/core.py::Loader"]
    # two calls away: load_file -> parse_config -> strip_comments (and new_helper)
    assert all(q["gold"] == ["sym:a/core.py::Loader.load_file"] for q in by_type["two-hop"]) and by_type["two-hop"]
    assert by_type["cross-package"][0]["gold"] == ["sym:a/core.py::parse_config"]
    for q in by_type["concept"]:  # a concept question never spells the name it asks for
        name = q["gold"][0].rsplit("::", 1)[-1].rsplit(".", 1)[-1]
        assert name not in q["question"]


def test_docs_become_descriptions_without_the_name() -> None:
    assert third_person("Return") == "returns" and third_person("Apply") == "applies"
    assert third_person("Match") == "matches" and third_person("Creates") == "creates"
    d = Definition("sym:x.go::Format", "x.go", "Frame.Format", "Format", "method", "Frame",
                   "Format formats the frame according to the fmt.Formatter interface.", False)
    assert describe(d) == "formats the frame according to the fmt.Formatter interface"
    short = Definition("sym:x.py::f", "x.py", "f", "f", "function", None, "Do it.", False)
    assert describe(short) is None
