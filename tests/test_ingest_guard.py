"""An ingest that would close most of a project is refused before it writes anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def graphmem(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphmem.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})


def make_tree(root: Path, names: list[str]) -> Path:
    root.mkdir(parents=True)
    for name in names:
        (root / f"{name}.py").write_text(f'def {name}_handler(event):\n    """Handle {name}."""\n    return event\n')
    return root


def status(home: Path, cwd: Path) -> dict:
    out = graphmem("status", "--json", "--home", str(home), "--project", "shop", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_empty_or_unrelated_folder_is_refused_and_nothing_is_lost(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shop = make_tree(tmp_path / "shop", [f"part{i}" for i in range(12)])
    # options after the command name work as the README shows them
    first = graphmem("ingest", str(shop), "--project", "shop", "--home", str(home), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = status(home, tmp_path)
    assert before["total_nodes"] > 12 and before["chunks"] >= 12

    empty = tmp_path / "empty"
    empty.mkdir()
    unrelated = make_tree(tmp_path / "other", ["alpha", "beta"])
    for folder in (empty, unrelated):
        out = graphmem("ingest", str(folder), "--project", "shop", "--home", str(home), cwd=tmp_path)
        assert out.returncode == 1 and "refused" in out.stderr and "--allow-removal" in out.stderr
        assert "Traceback" not in out.stderr
        after = status(home, tmp_path)
        assert (after["total_nodes"], after["chunks"], after["closed_nodes"]) == \
               (before["total_nodes"], before["chunks"], before["closed_nodes"])

    # a few files really removed is an ordinary ingest
    for i in range(3):
        (shop / f"part{i}.py").unlink()
    out = graphmem("ingest", str(shop), "--project", "shop", "--home", str(home), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["deleted"] == 3

    # most of them removed, confirmed by the caller
    for i in range(3, 12):
        (shop / f"part{i}.py").unlink()
    assert graphmem("ingest", str(shop), "--project", "shop", "--home", str(home), cwd=tmp_path).returncode == 1
    out = graphmem("ingest", str(shop), "--project", "shop", "--home", str(home), "--allow-removal", "--json",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert status(home, tmp_path)["chunks"] == 0
