"""Ingestion speed on a real open-source project: a released package's source from PyPI.

Copies an installed package's source tree (default: networkx, a dependency, so it is always
here) into a fresh git repository and measures, on the embedded store:

- a full ingest: files per second (parsing runs on both cores);
- a verification pass over the unchanged tree (read, hash, compare);
- a one-file commit brought up to date.

    python bench/bench_ingest.py [--package networkx]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from graphmem.ingest import ingest
from graphmem.stores.embedded import EmbeddedStore

GIT_ENV = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", default="networkx")
    args = parser.parse_args()
    source = Path(importlib.import_module(args.package).__file__).parent  # type: ignore[arg-type]
    work = Path(tempfile.mkdtemp(prefix="graphmem-bench-ingest-"))
    repo = work / args.package
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Import the released source")
    store = EmbeddedStore(work / "home", "bench")

    t = time.perf_counter()
    full = ingest(repo, store, cache_dir=work / "cache")
    full_s = time.perf_counter() - t

    passes = []
    for _ in range(5):
        t = time.perf_counter()
        again = ingest(repo, store, cache_dir=work / "cache")
        passes.append(time.perf_counter() - t)
    assert again.changed == 0

    target = sorted(p for p in repo.rglob("*.py") if p.stat().st_size > 2000)[0]
    target.write_text(target.read_text() + "\n\ndef bench_added(x):\n    return x\n")
    git(repo, "commit", "-q", "-am", "Add a function")
    t = time.perf_counter()
    one = ingest(repo, store, cache_dir=work / "cache")
    one_s = time.perf_counter() - t
    assert one.changed == 1 and one.commits == 1

    counts = store.counts()
    print(json.dumps({
        "package": args.package,
        "files": full.files,
        "code_files": sum(1 for _ in repo.rglob("*.py")),
        "nodes": counts.total_nodes,
        "relationships": counts.total_rels,
        "chunks": counts.chunks,
        "full_ingest_s": round(full_s, 2),
        "files_per_s": round(full.files / full_s, 1),
        "verification_pass_ms_median": round(sorted(passes)[len(passes) // 2] * 1000, 1),
        "one_file_commit_s": round(one_s, 3),
    }, indent=2))
    store.close()
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
