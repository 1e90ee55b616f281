"""The SWE-QA adapter: answers' citations become file keys of one release tree, or nothing."""

from __future__ import annotations

import json
from pathlib import Path

from eval.realcode import sweqa

REPO_ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted((REPO_ROOT / "eval" / "realcode" / "sweqa").glob("*.jsonl"))

TREE = {
    "src/proj/__init__.py": "from proj.core import Engine\nfrom proj import util\n",
    "src/proj/core.py": "class Engine:\n    def start(self):\n        pass\n\n    def metadata(self):\n        pass\n",
    "src/proj/util.py": "def helper():\n    pass\n\ndef run_once(metadata):\n    pass\n",
    "src/proj/plugins/__init__.py": "",
    "src/proj/plugins/web.py": "class WebPlugin:\n    def run_once(self):\n        pass\n",
    "tests/test_core.py": "def test_engine_starts():\n    pass\n",
    "docs/guide.rst": "Guide\n=====\n",
    "build/generated.py": "class Generated:\n    pass\n",
}

BENCHMARK = [
    # Path with the clone's prefix, then a fenced snippet whose header names a file: the code in
    # the fence (``WebPlugin()``) is not a citation.
    {"question": "How does the engine start?",
     "answer": "See `/workspace/src/proj/core.py` and:\n```10:12:src/proj/util.py\nWebPlugin()\n```\n"},
    # Dotted module, a name re-exported by the package, and a unique class in prose.
    {"question": "Where do plugins live?",
     "answer": "In `proj.plugins.web`; `proj.Engine` drives WebPlugin instances."},
    # ``run_once`` is defined in two files: ambiguous, so only the test function maps.
    {"question": "What does run_once do?",
     "answer": "The `run_once` hook; see `test_engine_starts`."},
    # Nothing here names a tree file: a doc page, an excluded file, a plain word that is also a
    # parameter elsewhere (``Engine.metadata`` exists, but so does ``run_once(metadata)``), prose.
    {"question": "What is the guide about?",
     "answer": "Read `docs/guide.rst` and `Generated`; `metadata` is a parameter; helper text."},
    # Method on a class, a bare file name that is unique, and a package given as a directory.
    {"question": "How is a plugin run?", "category": "Architecture",
     "answer": "`WebPlugin.run_once` in web.py, registered from src/proj/plugins/."},
]


def _tree(root: Path) -> Path:
    for rel, text in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_convert_maps_only_citations_that_name_one_file(tmp_path: Path) -> None:
    index = sweqa.index_tree(_tree(tmp_path / "tree"), exclude=["build/**", "docs/**"])
    lines, total = sweqa.convert(BENCHMARK, index, "proj")
    assert total == 5
    assert lines == [
        {"id": "proj-1", "question": "How does the engine start?",
         "gold": ["file:src/proj/core.py", "file:src/proj/util.py"], "type": "sweqa-question", "repo": "proj"},
        {"id": "proj-2", "question": "Where do plugins live?",
         "gold": ["file:src/proj/plugins/web.py", "file:src/proj/core.py"], "type": "sweqa-question",
         "repo": "proj"},
        {"id": "proj-3", "question": "What does run_once do?",
         "gold": ["file:tests/test_core.py"], "type": "sweqa-question", "repo": "proj"},
        {"id": "proj-5", "question": "How is a plugin run?",
         "gold": ["file:src/proj/plugins/web.py", "file:src/proj/plugins/__init__.py"],
         "type": "sweqa-Architecture", "repo": "proj"},
    ]


def test_command_line_writes_the_dataset(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree")
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(row) + "\n" for row in BENCHMARK), encoding="utf-8")
    manifest = tmp_path / "proj.json"
    manifest.write_text(json.dumps({"name": "proj", "exclude": ["build/**", "docs/**"]}), encoding="utf-8")
    out = tmp_path / "out" / "proj.jsonl"
    assert sweqa.main(["--benchmark", str(bench), "--tree", str(tree), "--repo", "proj",
                       "--manifest", str(manifest), "--out", str(out)]) == 0
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in written] == ["proj-1", "proj-2", "proj-3", "proj-5"]


def test_committed_datasets_are_well_formed() -> None:
    assert COMMITTED, "eval/realcode/sweqa/*.jsonl missing"
    for path in COMMITTED:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert lines, path
        ids = [line["id"] for line in lines]
        assert len(ids) == len(set(ids)), path
        for line in lines:
            assert line["question"].strip(), (path, line["id"])
            assert line["gold"] and all(key.startswith("file:") and len(key) > 5 for key in line["gold"]), \
                (path, line["id"])
            assert line["repo"] == path.stem and line["id"].startswith(f"{path.stem}-")
            assert line["type"].startswith("sweqa-")
