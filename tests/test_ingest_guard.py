"""An ingest that would close most of a project is refused before it writes anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
        assert out.returncode == 1 and "refused" in out.stderr and "--force" in out.stderr
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
    out = graphmem("ingest", str(shop), "--project", "shop", "--home", str(home), "--force", "--json",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert status(home, tmp_path)["chunks"] == 0


def git_repo(root: Path, names: list[str], message: str) -> Path:
    make_tree(root, names)
    for args in (["init", "-q"], ["add", "-A"],
                 ["-c", "user.name=T", "-c", "user.email=t@shop.dev", "commit", "-qm", message]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


def test_another_repository_is_refused_a_moved_checkout_is_not(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shop = git_repo(tmp_path / "shop", ["cart", "checkout", "payment"], "Start the shop")
    assert graphmem("ingest", str(shop), "--project", "shop", "--home", str(home), cwd=tmp_path).returncode == 0
    before = status(home, tmp_path)

    # the same repository checked out elsewhere is the same project
    moved = tmp_path / "elsewhere" / "shop"
    subprocess.run(["git", "clone", "-q", str(shop), str(moved)], check=True, capture_output=True)
    out = graphmem("ingest", str(moved), "--project", "shop", "--home", str(home), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["deleted"] == 0

    # a different repository (even with files of the same names) is refused, through the CLI...
    other = git_repo(tmp_path / "other", ["cart", "checkout", "payment"], "Another project")
    out = graphmem("ingest", str(other), "--project", "shop", "--home", str(home), cwd=tmp_path)
    assert out.returncode == 1 and "another repository" in out.stderr and "--force" in out.stderr
    assert status(home, tmp_path)["total_nodes"] == before["total_nodes"]

    # ...and through the MCP server's ingest tool, which never forces
    from graphmem.config import Settings
    from graphmem.errors import IngestRefused
    from graphmem.mcp_server import Service

    service = Service(Settings(store="embedded", home=home), "shop", ingest_roots=[tmp_path])
    try:
        with pytest.raises(IngestRefused):
            service.ingest(str(other))
        empty = tmp_path / "empty"
        empty.mkdir()
        with pytest.raises(IngestRefused):
            service.ingest(str(empty))
    finally:
        service.close()
    after = status(home, tmp_path)
    assert (after["total_nodes"], after["closed_nodes"]) == (before["total_nodes"], before["closed_nodes"])

    out = graphmem("ingest", str(other), "--project", "shop", "--home", str(home), "--force", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
