"""Session-start verification of a 500-file repository (``graphmem.registry.verify``).

Builds a git repository of 500 source files (Python modules in 25 packages, with docstrings and
functions), ingests it, and times ``verify`` over the unchanged tree (stat only: no file is read),
then with five files edited (those five are read and hashed). Prints p50 / p95 over the repeats.

    python bench/bench_verify.py [--files 500] [--repeats 50] [--store embedded|neo4j]

With ``--store neo4j`` the graph lives in Neo4j (``NEO4J_*`` settings; a throwaway project).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from graphmem.ingest import StatCache, ingest
from graphmem.registry import Verdict, verify

GIT_ENV = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def build(repo: Path, files: int) -> list[Path]:
    """``files`` Python modules in packages of 20, each with a docstring and a few functions."""
    made = []
    for i in range(files):
        package = repo / "src" / f"pkg{i // 20:02d}"
        package.mkdir(parents=True, exist_ok=True)
        body = [f'"""Module {i}: helpers for part {i % 7} of the pipeline."""\n']
        for j in range(6):
            body.append(f"\n\ndef step_{i}_{j}(value: int) -> int:\n"
                        f'    """Step {j} of module {i}: adds {j} after scaling."""\n'
                        f"    return value * {i % 5 + 1} + {j}\n")
        path = package / f"mod{i:03d}.py"
        path.write_text("".join(body))
        made.append(path)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Generated modules")
    return made


def timed(store: Any, repo: Path, cache: Path, repeats: int) -> tuple[list[float], Any]:
    """Times of ``repeats`` verifications, and the first one's report."""
    times, reports = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        reports.append(verify(store, repo, cache_dir=cache))
        times.append((time.perf_counter() - t) * 1000)
    return times, reports[0]


def figures(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"p50_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
            "max_ms": round(ordered[-1], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--store", choices=("embedded", "neo4j"), default="embedded")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="graphmem-bench-verify-"))
    repo = work / "repo"
    made = build(repo, args.files)
    # A file written within StatCache.RACY_NS of being recorded is re-read on every check (its
    # timestamp cannot tell a same-tick rewrite); a checkout's files are older than that.
    time.sleep(StatCache.RACY_NS / 1e9 + 0.1)
    if args.store == "neo4j":
        from graphmem.config import Settings
        from graphmem.stores import open_store

        store = open_store(Settings.from_env(store="neo4j", home=work / "home"), f"bench-verify-{uuid.uuid4().hex[:8]}")
    else:
        from graphmem.stores.embedded import EmbeddedStore

        store = EmbeddedStore(work / "home", "bench")
    cache = work / "cache"
    try:
        t = time.perf_counter()
        report = ingest(repo, store, cache_dir=cache)
        ingest_s = time.perf_counter() - t
        unchanged, check = timed(store, repo, cache, args.repeats)
        assert check.counts()[Verdict.MATCH.value] == report.files and check.read == 0, check.counts()
        for path in made[:5]:
            path.write_text(path.read_text() + "\n\ndef added() -> None:\n    pass\n")
        # The edits are younger than StatCache.RACY_NS: they are read on every check until they are not.
        edited, check = timed(store, repo, cache, args.repeats)
        assert check.counts()[Verdict.CHANGED.value] == 5, check.counts()
        print(json.dumps({
            "store": args.store, "files": report.files, "ingest_s": round(ingest_s, 2), "repeats": args.repeats,
            "verify_unchanged": {**figures(unchanged), "files_read": 0},
            "verify_5_edited": {**figures(edited), "files_read_first": check.read},
        }, indent=2))
    finally:
        if args.store == "neo4j":
            store.drop_project()
        store.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
