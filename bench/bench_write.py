"""The graph write alone, by part: one repository's facts written into fresh projects of both stores.

A repository (by default the ``django/`` package of ``bench_scale.py``'s Django history, built and
cached by that script's code) is ingested once into an embedded store, without indexes; its nodes,
relationships and chunks are read back, and then written in one upsert each into a fresh project of
each store, the two stores interleaved, ``--repeat`` times:

- ``nodes``: the nodes alone;
- ``nodes+rels``: the nodes and their relationships;
- ``nodes+chunks``: the nodes and their chunks;
- ``all``: everything, as a first ingest writes it.

The differences between parts say where a store's write time goes, without the parse that dominates
a whole ingest. Parsing, history and the withdrawal of what changed are not in these figures.

    PYTHONPATH=. NEO4J_URI=bolt://127.0.0.1:7687 NEO4J_PASSWORD=... \\
        python bench/bench_write.py [--repo DIR] [--repeat 3] [--parts nodes,all] [--out /tmp/write.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

PARTS = ("nodes", "nodes+rels", "nodes+chunks", "all")
DJANGO_PACKAGE = ("tests/**", "docs/**", "js_tests/**")  # what bench_scale.py leaves out for django/


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def facts(repo: Path, work: Path) -> tuple[list[Any], list[Any], list[Any]]:
    """The repository's nodes, relationships and chunks as an embedded ingest (HEAD only) stores them."""
    from graphmem.api import Graphmem
    from graphmem.config import Settings

    with Graphmem(Settings(store="embedded", home=work / "home", replay=0), "source", reranker=None) as gm:
        t = time.perf_counter()
        gm.ingest(repo, llm=False, index=False)
        log(f"ingested {repo} in {time.perf_counter() - t:.0f} s")
        store = gm.store
        return (list(store.iter_nodes(include_closed=True)), list(store.iter_rels(include_closed=True)),
                list(store.iter_chunks()))


def selected(part: str, nodes: list[Any], rels: list[Any], chunks: list[Any]) -> tuple[list[Any], ...]:
    return (nodes, rels if part in ("nodes+rels", "all") else [], chunks if part in ("nodes+chunks", "all") else [])


def write_embedded(work: Path, batch: tuple[list[Any], ...]) -> float:
    from graphmem.stores.embedded import EmbeddedStore

    with tempfile.TemporaryDirectory(dir=work) as home:
        store = EmbeddedStore(home, "write")
        try:
            t = time.perf_counter()
            store.upsert(*batch)
            return time.perf_counter() - t
        finally:
            store.close()


def write_neo4j(batch: tuple[list[Any], ...], client_cpu: list[float]) -> float:
    """Wall seconds of the upsert; appends this process's CPU seconds in it (every thread: building
    rows and encoding them for Bolt) to ``client_cpu``. The rest is the server's work and waiting."""
    from graphmem.stores.neo4j import Neo4jStore

    store = Neo4jStore.connect(f"bench-write-{uuid.uuid4().hex[:8]}")
    try:
        store.ensure_schema()
        t, cpu = time.perf_counter(), time.process_time()
        store.upsert(*batch)
        client_cpu.append(round(time.process_time() - cpu, 2))
        return time.perf_counter() - t
    finally:
        store.drop_project()
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None,
                        help="a git repository (default: the django/ package of bench_scale.py's history)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--stores", default="embedded,neo4j")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    stores = [s for s in args.stores.split(",") if s]
    if set(parts) - set(PARTS) or set(stores) - {"embedded", "neo4j"}:
        parser.error(f"--parts from {', '.join(PARTS)}; --stores from embedded, neo4j")
    if "neo4j" in stores:
        from bench_scale import neo4j_reachable

        neo4j_reachable()
    repo = args.repo
    if repo is None:
        from bench_scale import history

        repo, _ = history(DJANGO_PACKAGE)
    with tempfile.TemporaryDirectory(prefix="graphmem-write-") as tmp:
        work = Path(tmp)
        nodes, rels, chunks = facts(repo, work)
        log(f"{len(nodes)} nodes, {len(rels)} relationships, {len(chunks)} chunks")
        times: dict[str, dict[str, list[float]]] = {p: {s: [] for s in stores} for p in parts}
        cpu: dict[str, list[float]] = {p: [] for p in parts}
        for i in range(max(1, args.repeat)):
            for part in parts:
                batch = selected(part, nodes, rels, chunks)
                for store in stores:
                    seconds = write_embedded(work, batch) if store == "embedded" else write_neo4j(batch, cpu[part])
                    times[part][store].append(round(seconds, 2))
                    log(f"run {i + 1}: {part} into {store}: {seconds:.2f} s (load {os.getloadavg()[0]:.1f})")
    result = {"repo": str(repo), "nodes": len(nodes), "rels": len(rels), "chunks": len(chunks),
              "seconds": times, "neo4j_client_cpu_s": cpu,
              "median": {p: {s: statistics.median(v) for s, v in by.items()} for p, by in times.items()}}
    both = len(stores) == 2
    print(f"| part | {' | '.join(stores)} (median s) |" + (" ratio | Neo4j client CPU (median s) |" if both else ""))
    print("|---|" + "---|" * len(stores) + ("---|---|" if both else ""))
    for part in parts:
        med = result["median"][part]
        extra = (f" {med['neo4j'] / med['embedded']:.1f}× | {statistics.median(cpu[part]):.2f} |"
                 if both and med["embedded"] else "")
        print(f"| {part} | " + " | ".join(f"{med[s]:.2f}" for s in stores) + " |" + extra)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
