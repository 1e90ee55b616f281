"""Git hooks that keep the graph up to date: after commit, merge and rewrite, in the background.

A hook never blocks or fails the git command: it starts ``graphmem ingest`` detached, with a lock
so two updates never overlap and a pending mark so a commit made during an update is ingested
right after it, and appends what it did to ``<git dir>/graphmem-hook.log``.
"""

from __future__ import annotations

import shlex
import stat
import subprocess
import sys
from pathlib import Path

from graphmem.errors import GraphmemError

HOOKS = ("post-commit", "post-merge", "post-rewrite")
MARKER = "# graphmem: keep the knowledge graph up to date"

_SCRIPT = """#!/bin/sh
{marker}
# Runs in the background and always exits 0: it never blocks or fails a git command.
# Updates never overlap and none is lost: each hook marks an update as pending, then waits for the
# lock; whoever takes the lock with the mark still set clears it and ingests (which covers every
# commit made before it started), so hooks that queued behind it find nothing left to do.
repo="$(git rev-parse --show-toplevel 2>/dev/null)" || exit 0
log="$(git rev-parse --absolute-git-dir 2>/dev/null)/graphmem-hook.log"
(
  : >"$log.pending"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$log.lock"
    flock 9
  fi
  [ -e "$log.pending" ] || {{ echo "$(date -u +%FT%TZ) {hook}: covered by the update that just ran" >>"$log"; exit 0; }}
  rm -f "$log.pending"
  echo "$(date -u +%FT%TZ) {hook}: ingest started" >>"$log"
  if {command} ingest "$repo" >>"$log" 2>&1; then
    echo "$(date -u +%FT%TZ) {hook}: ingest done" >>"$log"
  else
    echo "$(date -u +%FT%TZ) {hook}: ingest failed (exit $?)" >>"$log"
  fi
) </dev/null >/dev/null 2>&1 &
exit 0
"""


def hooks_dir(repo: Path) -> Path:
    """The repository's hooks directory (honours ``core.hooksPath``)."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--git-path", "hooks"],
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise GraphmemError(f"not a git repository: {repo}") from exc
    hooks = Path(out.stdout.strip())
    return hooks if hooks.is_absolute() else (repo / hooks)


def graphmem_command(options: list[str]) -> str:
    """The command a hook runs: this interpreter's graphmem, with the given global options."""
    return " ".join(shlex.quote(p) for p in [sys.executable, "-m", "graphmem.cli", *options])


def install(repo: str | Path, options: list[str], *, force: bool = False) -> list[Path]:
    """Write the hooks; an existing hook that is not graphmem's is kept unless ``force``."""
    repo = Path(repo).resolve()
    hooks = hooks_dir(repo)
    hooks.mkdir(parents=True, exist_ok=True)
    written = []
    for hook in HOOKS:
        path = hooks / hook
        if path.exists() and MARKER not in path.read_text(errors="replace") and not force:
            raise GraphmemError(f"{path} exists and is not graphmem's; use --force to replace it")
        path.write_text(_SCRIPT.format(marker=MARKER, hook=hook, command=graphmem_command(options)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        written.append(path)
    return written


def uninstall(repo: str | Path) -> list[Path]:
    """Remove graphmem's hooks (and only those)."""
    hooks = hooks_dir(Path(repo).resolve())
    removed = []
    for hook in HOOKS:
        path = hooks / hook
        if path.exists() and MARKER in path.read_text(errors="replace"):
            path.unlink()
            removed.append(path)
    return removed


def global_options(store: str, home: Path, project: str) -> list[str]:
    """The global options that make a hook write where the installing command would."""
    return ["--store", store, "--home", str(home.resolve()), "--project", project]


__all__ = ["HOOKS", "MARKER", "global_options", "install", "uninstall"]
