"""A first ingest's history replay checks commits out into temporary git worktrees: none is left
behind (not on SIGTERM, not by a process killed outright), and credential files are never in one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from graphmem.ingest import checked_out, replay_history
from graphmem.stores.embedded import EmbeddedStore

REPO = Path(__file__).resolve().parents[1]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def make_repo(repo: Path, commits: int) -> Path:
    """A repository whose first commit holds credential files, then ``commits`` - 1 more of code."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Ada"), git(repo, "config", "user.email", "ada@example.com")
    (repo / ".env").write_text("DB_PASSWORD=not-for-disk\n")
    (repo / "deploy").mkdir()
    (repo / "deploy" / "ID_RSA").write_text("not-for-disk\n")
    (repo / "deploy" / ".ssh").mkdir()
    (repo / "deploy" / ".ssh" / "config").write_text("Host prod\n")
    (repo / "src" / "credentials").mkdir(parents=True)  # a package named like a credentials file
    (repo / "src" / "credentials" / "store.py").write_text("def load():\n    return 1\n")
    for i in range(commits):
        lines = [f"def handler_{i}_{j}(event):\n    return handler_{i}_{j - 1}(event) if {j} else event\n"
                 for j in range(40)]
        (repo / "src" / f"module_{i}.py").write_text("".join(lines))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"add module {i}")
    return repo


def replay_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("graphmem-replay-*"))


def worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


def test_sigterm_during_replay_leaves_no_checkout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", 30)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "--home", str(tmp_path / "home"), "ingest", str(repo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp), "GRAPHMEM_REPLAY": "12"})
    try:
        deadline = time.monotonic() + 120
        # Kill once a snapshot is checked out: the replay is under way.
        while not any((f / "tree" / "src").is_dir() for f in replay_folders(tmp)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the replay never started"
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, err
    assert replay_folders(tmp) == [], err
    assert worktrees(repo) == [f"worktree {repo}"]


def test_checkouts_left_by_a_dead_process_are_removed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", 3)
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"graphmem-replay-{gone.pid}-abc" / "tree"
    live = tmp_path / f"graphmem-replay-{os.getpid()}-def" / "tree"
    for tree in (stale, live):
        git(repo, "worktree", "add", "--quiet", "--detach", str(tree), "HEAD")
    store = EmbeddedStore(tmp_path / "home", "shop")
    store.ensure_schema()
    try:
        assert replay_history(repo, store, cache_dir=tmp_path / "cache", points=2)
    finally:
        store.close()
    assert not stale.parent.exists()
    assert live.is_dir()  # its process (this one) may still be using it
    assert sorted(worktrees(repo)) == sorted([f"worktree {repo}", f"worktree {live}"])


def test_credential_files_are_not_checked_out(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", 2)
    with checked_out(repo, git(repo, "rev-parse", "HEAD").strip()) as tree:
        files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file() and p.name != ".git")
        assert files == ["src/credentials/store.py", "src/module_0.py", "src/module_1.py"]
        assert git(tree, "status", "--porcelain") == ""  # nothing looks deleted to the ingest
