"""Git hooks bring the graph up to date in the background and never fail a git command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@acme.dev",
                               "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@acme.dev", **(env or {})})


def graphmem(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "graphmem.cli", *args, cwd=cwd, env={"PYTHONPATH": str(REPO)})


def test_hooks_update_the_graph_after_a_commit(tmp_path: Path, example_org: tuple) -> None:
    repo = tmp_path / "acme"
    shutil.copytree(example_org[0], repo, symlinks=True)
    home = tmp_path / "home"
    assert graphmem("--home", str(home), "ingest", str(repo), cwd=tmp_path).returncode == 0
    out = graphmem("--home", str(home), "hooks", "install", str(repo), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert {p.name for p in (repo / ".git" / "hooks").iterdir() if "graphmem" in p.read_text(errors="replace")} \
        >= {"post-commit", "post-merge", "post-rewrite"}

    (repo / "services" / "billing" / "audit.py").write_text('def audit(event):\n    """Record it."""\n    return event\n')
    run("git", "add", "-A", cwd=repo)
    started = time.monotonic()
    commit = run("git", "commit", "-q", "-m", "Add audit trail", cwd=repo, env={"PYTHONPATH": str(REPO)})
    assert commit.returncode == 0 and time.monotonic() - started < 5  # git is not kept waiting
    # a second commit while the first update runs is not skipped: it is ingested after it
    (repo / "services" / "billing" / "retain.py").write_text('def retain(event):\n    return event\n')
    run("git", "add", "-A", cwd=repo)
    assert run("git", "commit", "-q", "-m", "Retain events", cwd=repo, env={"PYTHONPATH": str(REPO)}).returncode == 0
    head = run("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()

    deadline = time.monotonic() + 120
    status: dict = {}
    while time.monotonic() < deadline:
        out = graphmem("--home", str(home), "status", "--json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr  # status works while the hook's ingest writes
        status = json.loads(out.stdout)
        if status["last_ingested_commit"] == head:
            break
        time.sleep(0.5)
    assert status["last_ingested_commit"] == head
    log = (repo / ".git" / "graphmem-hook.log").read_text()
    assert "post-commit: ingest started" in log and "already running" not in log
    found = graphmem("--home", str(home), "query", "--mode", "bm25", "retain", "--json", cwd=tmp_path)
    assert "retain" in found.stdout, found.stderr

    # a broken graphmem never fails git: point the hook at a store that cannot be reached
    assert graphmem("--home", str(home), "--store", "neo4j", "hooks", "install", str(repo), cwd=tmp_path,
                    ).returncode == 0
    (repo / "README.md").write_text("changed\n")
    run("git", "add", "-A", cwd=repo)
    failing = run("git", "commit", "-q", "-m", "Docs", cwd=repo, env={"NEO4J_URI": "bolt://127.0.0.1:9"})
    assert failing.returncode == 0

    assert graphmem("hooks", "uninstall", str(repo), cwd=tmp_path).returncode == 0
    assert not (repo / ".git" / "hooks" / "post-commit").exists()


def test_foreign_hooks_are_kept(tmp_path: Path) -> None:
    run("git", "init", "-q", str(tmp_path / "r"), cwd=tmp_path)
    hook = tmp_path / "r" / ".git" / "hooks" / "post-commit"
    hook.write_text("#!/bin/sh\necho mine\n")
    out = graphmem("--home", str(tmp_path / "h"), "hooks", "install", str(tmp_path / "r"), cwd=tmp_path)
    assert out.returncode != 0 and "--force" in out.stderr
    assert hook.read_text() == "#!/bin/sh\necho mine\n"
    assert graphmem("hooks", "uninstall", str(tmp_path / "r"), cwd=tmp_path).returncode == 0
    assert hook.exists()
