"""Write throughput of the graph stores.

Generates a code-like graph (files, symbols, CONTAINS and CALLS/IMPORTS relationships) of at least
200,000 nodes and 600,000 relationships and writes it into each store in batches; prints elements
per second and peak memory. Each store runs in its own process so peak memory is its own.

    python bench/bench_stores.py                      # both stores (Neo4j from NEO4J_* / local script)
    python bench/bench_stores.py --stores embedded --nodes 50000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator

from graphmem.model import Node, Provenance, Relationship, RelType


def generate(n_nodes: int, rels_per_node: int, seed: int = 7) -> Iterator[tuple[list[Node], list[Relationship]]]:
    """Yield (nodes, relationships) one file group at a time: ~50 symbols per file."""
    rng = random.Random(seed)
    per_file = 50
    n_files = max(1, n_nodes // (per_file + 1))
    for f in range(n_files):
        path = f"pkg{f // 100}/mod{f}.py"
        prov = Provenance(path, "bench", "1")
        fkey = f"file:{path}"
        nodes = [Node(fkey, f"mod{f}.py", prov, {"language": "python", "lines": 1000})]
        rels: list[Relationship] = []
        for s in range(per_file):
            key = f"sym:{path}::f{s}"
            nodes.append(Node(key, f"f{s}", prov, {"symbol_kind": "function", "start_line": s * 20 + 1,
                                                   "end_line": s * 20 + 19, "signature": f"def f{s}(x, y)"}))
            rels.append(Relationship(fkey, RelType.CONTAINS, key, prov))
            # calls into this file or earlier ones, so every endpoint already exists
            for _ in range(rels_per_node - 1):
                g = rng.randrange(0, f + 1)
                t = rng.randrange(0, per_file if g < f else s + 1)
                rels.append(Relationship(key, RelType.CALLS, f"sym:pkg{g // 100}/mod{g}.py::f{t}", prov,
                                         {"lines": [s * 20 + 3]}))
        yield nodes, rels


def run_one(store_name: str, n_nodes: int, rels_per_node: int, group: int, neo4j_batch: int,
            warmup: int = 0) -> dict[str, object]:
    """Write the generated graph into one store; return the measurements."""
    if store_name == "embedded":
        from graphmem.stores.embedded import EmbeddedStore

        home = tempfile.mkdtemp(prefix="graphmem-bench-")
        store = EmbeddedStore(home, "bench")
    else:
        from graphmem.stores.neo4j import Neo4jStore

        store = Neo4jStore.connect(f"bench-{uuid.uuid4().hex[:6]}", batch_size=neo4j_batch)
    store.ensure_schema()
    if store_name == "neo4j" and warmup:
        # A server just started runs its first transactions interpreted; a throwaway project of
        # the same shape lets the JIT compile the write path before the timed run, as in a
        # server that has been up for a while.
        from graphmem.stores.neo4j import Neo4jStore

        warm = Neo4jStore.connect(f"bench-warmup-{uuid.uuid4().hex[:6]}", batch_size=neo4j_batch)
        for nodes, rels in generate(warmup, rels_per_node, seed=1):
            warm.upsert(nodes, rels)
        warm.drop_project()
        warm.close()
    nodes_total = rels_total = 0
    batch_nodes: list[Node] = []
    batch_rels: list[Relationship] = []
    write_s = 0.0
    started = time.perf_counter()
    for nodes, rels in generate(n_nodes, rels_per_node):
        batch_nodes += nodes
        batch_rels += rels
        if len(batch_nodes) >= group:
            t = time.perf_counter()
            summary = store.upsert(batch_nodes, batch_rels)
            write_s += time.perf_counter() - t
            nodes_total += summary.nodes
            rels_total += summary.rels
            batch_nodes, batch_rels = [], []
    if batch_nodes:
        t = time.perf_counter()
        summary = store.upsert(batch_nodes, batch_rels)
        write_s += time.perf_counter() - t
        nodes_total += summary.nodes
        rels_total += summary.rels
    total_s = time.perf_counter() - started
    counts = store.counts()
    reopen_s = None
    if store_name == "embedded":
        from graphmem.stores.embedded import EmbeddedStore

        t = time.perf_counter()
        EmbeddedStore(home, "bench").counts()
        reopen_s = round(time.perf_counter() - t, 2)
    else:
        store.drop_project()
    store.close()
    elements = nodes_total + rels_total
    return {
        "store": store_name,
        "nodes": nodes_total,
        "relationships": rels_total,
        "stored_nodes": counts.total_nodes,
        "stored_relationships": counts.total_rels,
        "write_seconds": round(write_s, 2),
        "elements_per_second": round(elements / write_s),
        "elements_per_second_incl_generation": round(elements / total_s),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "reopen_seconds": reopen_s,
        "warmup_nodes": warmup if store_name == "neo4j" else 0,
    }


def neo4j_server_rss_mb() -> int | None:
    """Resident memory of the local Neo4j server, when its pid file is where the script puts it."""
    try:
        import psutil
    except ImportError:
        return None
    for proc in psutil.process_iter(["cmdline"]):
        if any("CommunityEntryPoint" in part for part in proc.info["cmdline"] or []):
            return round(proc.memory_info().rss / 2**20)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="embedded,neo4j")
    parser.add_argument("--nodes", type=int, default=204_000)
    parser.add_argument("--rels-per-node", type=int, default=3)
    parser.add_argument("--group", type=int, default=20_000, help="nodes per upsert call")
    parser.add_argument("--neo4j-batch", type=int, default=10_000, help="rows per Neo4j transaction")
    parser.add_argument("--warmup", type=int, default=40_000,
                        help="Neo4j: nodes written to a throwaway project first, untimed (0: none)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.nodes, args.rels_per_node, args.group, args.neo4j_batch,
                                 args.warmup)))
        return
    results = []
    for name in args.stores.split(","):
        out = subprocess.run(
            [sys.executable, __file__, "--one", name, "--nodes", str(args.nodes),
             "--rels-per-node", str(args.rels_per_node), "--group", str(args.group),
             "--neo4j-batch", str(args.neo4j_batch), "--warmup", str(args.warmup)],
            capture_output=True, text=True, env=os.environ.copy())
        if out.returncode != 0:
            print(f"{name}: failed\n{out.stderr}", file=sys.stderr)
            continue
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if name == "neo4j":
            result["neo4j_server_rss_mb"] = neo4j_server_rss_mb()
        results.append(result)
        print(json.dumps(result))
    print()
    print(f"{'store':<10} {'nodes':>8} {'rels':>8} {'write s':>8} {'elements/s':>11} {'peak MB':>8}")
    for r in results:
        print(f"{r['store']:<10} {r['nodes']:>8} {r['relationships']:>8} {r['write_seconds']:>8} "
              f"{r['elements_per_second']:>11} {r['peak_rss_mb']:>8}")


if __name__ == "__main__":
    main()
