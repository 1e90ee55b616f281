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

``--what-if`` measures a change to the store without making it: ``source-only-provenance`` writes
every element's provenance as its ``source_path`` alone (both stores), as if the other fields were
kept once per source; ``no-rel-indexes``, ``no-chunk-indexes`` and ``no-node-indexes`` drop those
graphmem indexes before each Neo4j write. Indexes belong to the whole database, not to a project:
use a scratch Neo4j for those (graphmem creates them again whenever it opens a store).
``--writers`` and ``--batch-size`` set the Neo4j store's writer threads and rows per transaction.

    PYTHONPATH=. NEO4J_URI=bolt://127.0.0.1:7687 NEO4J_PASSWORD=... \\
        python bench/bench_write.py [--repo DIR] [--repeat 3] [--parts nodes,all] [--out /tmp/write.json]
        [--what-if source-only-provenance] [--writers 2] [--batch-size 10000]
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
# --what-if index drops: the graphmem index names each one matches (see graphmem/cypher/schema.cypher)
INDEX_DROPS = {"no-rel-indexes": ("graphmem_rel_",),
               "no-chunk-indexes": ("graphmem_chunk_node", "graphmem_chunk_source"),
               "no-node-indexes": ("graphmem_node_source", "graphmem_node_multi")}
WHAT_IF = ("source-only-provenance", *INDEX_DROPS)


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


def source_only_provenance() -> None:
    """From now on, in this process, both stores write each element's provenance as its source path
    alone: what a store keeping the other fields once per source would write with each element.
    (A what-if for this bench only; nothing written this way is read back.)"""
    from graphmem.model import Provenance

    Provenance.as_props = lambda self: {"source_path": self.source_path}  # type: ignore[method-assign]


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


def drop_indexes(store: Any, prefixes: tuple[str, ...]) -> None:
    """Drop the database's graphmem indexes whose names start with one of ``prefixes``."""
    with store.session() as session:
        names = [name for (name,) in session.run("SHOW INDEXES YIELD name RETURN name").values()
                 if name.startswith(prefixes)]
        for name in names:
            session.run(f"DROP INDEX `{name}` IF EXISTS").consume()


def write_neo4j(batch: tuple[list[Any], ...], client_cpu: list[float], *, drops: tuple[str, ...] = (),
                **store_kw: Any) -> float:
    """Wall seconds of the upsert; appends this process's CPU seconds in it (every thread: building
    rows and encoding them for Bolt) to ``client_cpu``. The rest is the server's work and waiting.
    ``drops``: prefixes of index names dropped before the write."""
    from graphmem.stores.neo4j import Neo4jStore

    store = Neo4jStore.connect(f"bench-write-{uuid.uuid4().hex[:8]}", **store_kw)
    try:
        store.ensure_schema()
        if drops:
            drop_indexes(store, drops)
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
    parser.add_argument("--what-if", default="", help=f"comma-separated, from {', '.join(WHAT_IF)} (see above)")
    parser.add_argument("--writers", type=int, default=None, help="Neo4j writer threads (store default: 2)")
    parser.add_argument("--batch-size", type=int, default=None, help="Neo4j rows per transaction (default 10000)")
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    stores = [s for s in args.stores.split(",") if s]
    what_if = [w for w in args.what_if.split(",") if w]
    if set(parts) - set(PARTS) or set(stores) - {"embedded", "neo4j"} or set(what_if) - set(WHAT_IF):
        parser.error(f"--parts from {', '.join(PARTS)}; --stores from embedded, neo4j; "
                     f"--what-if from {', '.join(WHAT_IF)}")
    if (args.writers is not None and args.writers < 1) or (args.batch_size is not None and args.batch_size < 1):
        parser.error("--writers and --batch-size must be at least 1")
    store_kw = {k: v for k, v in (("writers", args.writers), ("batch_size", args.batch_size)) if v is not None}
    drops = tuple(prefix for w in what_if for prefix in INDEX_DROPS.get(w, ()))
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
        if "source-only-provenance" in what_if:
            source_only_provenance()
        times: dict[str, dict[str, list[float]]] = {p: {s: [] for s in stores} for p in parts}
        cpu: dict[str, list[float]] = {p: [] for p in parts}
        for i in range(max(1, args.repeat)):
            for part in parts:
                batch = selected(part, nodes, rels, chunks)
                for store in stores:
                    seconds = (write_embedded(work, batch) if store == "embedded"
                               else write_neo4j(batch, cpu[part], drops=drops, **store_kw))
                    times[part][store].append(round(seconds, 2))
                    log(f"run {i + 1}: {part} into {store}: {seconds:.2f} s (load {os.getloadavg()[0]:.1f})")
    result = {"repo": str(repo), "what_if": what_if, **store_kw,
              "nodes": len(nodes), "rels": len(rels), "chunks": len(chunks),
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
