"""Quality and latency of the three ways to serve retrieval, on the real-code questions, interleaved.

- ``embedded``: the embedded store with its local index files (the default);
- ``neo4j-local``: the Neo4j store with local index files beside the process;
- ``neo4j-server``: the Neo4j store with BM25 and vectors served by Neo4j (``GRAPHMEM_INDEX=neo4j``).

Each repository of the split (built by ``python -m eval.realcode build``) is ingested once into the
embedded store and once into Neo4j (server-side mode, which writes the chunks with their index
entries; the local-index mode then syncs its files from the same graph). Every question is then
asked of the three in turn, the order rotating per question, so load and caches fall alike on each.
Prints R@5 and MRR (``eval.metrics``), p50/p95 of the total and of each stage per configuration,
and the Bolt round trips each question cost (messages flushed to the server, counted by wrapping the
driver's outbox in this process only). The JSON report (``--out``) keeps every question's top keys,
so two runs can be compared ranking for ranking (``--same-as OLD.json``).

``--write-repo NAME`` also times the graph write of one repository (ingest without index sync, into
fresh projects) in the embedded store and in Neo4j.

    PYTHONPATH=. NEO4J_URI=bolt://127.0.0.1:27687 NEO4J_PASSWORD=... \\
        python bench/bench_neo4j_mode.py --split dev --home /tmp/nm-home --out /tmp/nm.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.metrics import mean, percentile, question_metrics  # noqa: E402
from eval.realcode import build as builder  # noqa: E402
from eval.realcode.cli import questions_for  # noqa: E402
from graphmem.api import Graphmem  # noqa: E402
from graphmem.config import Settings  # noqa: E402

CONFIGS = ("embedded", "neo4j-local", "neo4j-server")
STAGES = ("bm25", "vector", "graph", "fusion", "total")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class RoundTrips:
    """Bolt round trips of this process: each flush of a connection's outbox sends a batch of
    messages the driver then waits on (a debugging count for the bench, not part of graphmem)."""

    def __init__(self) -> None:
        from neo4j._sync.io._bolt._common import Outbox  # the driver's internals: bench only

        self.count = 0
        lock = threading.Lock()
        flush = Outbox.flush

        def counted(outbox: Any) -> bool:
            sent = flush(outbox)
            if sent:
                with lock:
                    self.count += 1
            return sent

        Outbox.flush = counted  # type: ignore[method-assign]


def open_three(name: str, home: Path, prefix: str) -> dict[str, Graphmem]:
    """The repository's project in each configuration; both Neo4j ones read the same project."""
    project = f"{prefix}{name}"
    return {
        "embedded": Graphmem(Settings(store="embedded", home=home), name, reranker=None),
        "neo4j-server": Graphmem(Settings.from_env(store="neo4j", home=home, index="neo4j"), project, reranker=None),
        "neo4j-local": Graphmem(Settings.from_env(store="neo4j", home=home, index="local"), project, reranker=None),
    }


def prepare(name: str, home: Path, prefix: str) -> tuple[dict[str, Graphmem], dict[str, float]]:
    repo = builder.home() / "repos" / name
    gms = open_three(name, home, prefix)
    seconds: dict[str, float] = {}
    for config in ("embedded", "neo4j-server"):
        started = time.perf_counter()
        gms[config].ingest(repo, llm=False)
        seconds[config] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    gms["neo4j-local"].sync_indexes()
    seconds["neo4j-local sync"] = round(time.perf_counter() - started, 1)
    for config, gm in gms.items():
        check = gm.check_indexes()
        if not check.ok:
            raise SystemExit(f"{name} {config}: indexes inconsistent: {check.as_dict()}")
    return gms, seconds


def vector_recall(gm: Graphmem, qs: list[dict[str, Any]], depth: int) -> list[float]:
    """Per question: the share of the exact top ``depth`` chunks (a scan of the project's vectors)
    that the vector index's answer holds."""
    out = []
    for q in qs:
        vec = gm.indexes.embedder.encode_query(q["question"])
        ann = {cid for cid, _ in gm.indexes.vectors.search(vec, depth)}
        exact = {cid for cid, _ in gm.indexes.vectors.scan(vec, depth)}
        out.append(len(ann & exact) / max(1, len(exact)))
    return out


def graph_write(name: str, home: Path) -> dict[str, Any]:
    """Seconds of one repository's graph write (no index sync) into fresh projects of both stores."""
    repo = builder.home() / "repos" / name
    out: dict[str, Any] = {"repo": name}
    for store in ("embedded", "neo4j"):
        project = f"gw-{uuid.uuid4().hex[:8]}"
        gm = Graphmem(Settings.from_env(store=store, home=home / "graph-write"), project, reranker=None)
        try:
            gm.store  # connect and apply the schema outside the timing
            started = time.perf_counter()
            report = gm.ingest(repo, index=False, llm=False)
            out[store] = {"seconds": round(time.perf_counter() - started, 2), "files": report.files,
                          "commits": report.commits, "nodes": report.written.nodes, "rels": report.written.rels,
                          "chunks": report.written.chunks}
        finally:
            gm.store.drop_project()
            gm.close()
    shutil.rmtree(home / "graph-write", ignore_errors=True)
    out["ratio"] = round(out["neo4j"]["seconds"] / out["embedded"]["seconds"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="dev")
    ap.add_argument("--only", nargs="*", default=None, help="repository names (default: every one of the split)")
    ap.add_argument("--home", type=Path, required=True, help="graphmem home for the embedded projects and caches")
    ap.add_argument("--prefix", default="nm-", help="prefix of the Neo4j project names")
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--write-repo", default=None, help="also time this repository's graph write in both stores")
    ap.add_argument("--out", type=Path, default=None, help="write the full report as JSON here")
    ap.add_argument("--same-as", type=Path, default=None,
                    help="an earlier --out report: count the questions whose top k differ from it")
    args = ap.parse_args(argv)
    trips = RoundTrips()

    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in CONFIGS}
    recall: list[float] = []
    ingest: dict[str, Any] = {}
    turn = 0
    for manifest in builder.manifests(args.only):
        if args.split != "all" and manifest.split != args.split:
            continue
        qs = questions_for(manifest.name)
        if not (builder.home() / "repos" / manifest.name).is_dir() or not qs:
            log(f"{manifest.name}: not built or no questions; skipped")
            continue
        gms, seconds = prepare(manifest.name, args.home, args.prefix)
        ingest[manifest.name] = seconds
        log(f"{manifest.name}: ingested {seconds}; {len(qs)} questions")
        try:
            for gm in gms.values():  # load models and connections outside the timings
                gm.query(qs[0]["question"], mode=args.mode, k=args.k)
            for q in qs:
                order = CONFIGS[turn % 3:] + CONFIGS[:turn % 3]
                turn += 1
                for config in order:
                    before = trips.count
                    answer = gms[config].query(q["question"], mode=args.mode, k=args.k)
                    rows[config].append({"id": q["id"], "keys": answer.keys,
                                         "metrics": question_metrics(answer.keys, q["gold"]),
                                         "timings": answer.timings_ms, "round_trips": trips.count - before})
            recall += vector_recall(gms["neo4j-server"], qs, 100)
        finally:
            for gm in gms.values():
                gm.close()
    report: dict[str, Any] = {"split": args.split, "mode": args.mode, "ingest_seconds": ingest, "configs": {}}
    for config, rs in rows.items():
        report["configs"][config] = {
            "n": len(rs),
            "recall@5": round(mean([r["metrics"]["recall@5"] for r in rs]), 4),
            "mrr": round(mean([r["metrics"]["mrr"] for r in rs]), 4),
            "ms": {s: {"p50": round(percentile([r["timings"].get(s, 0.0) for r in rs], 50), 1),
                       "p95": round(percentile([r["timings"].get(s, 0.0) for r in rs], 95), 1)} for s in STAGES},
            "round_trips": {"p50": percentile([r["round_trips"] for r in rs], 50),
                            "max": max((r["round_trips"] for r in rs), default=0)},
            "questions": [{"id": r["id"], "keys": r["keys"], "metrics": r["metrics"],
                           "ms": {s: round(r["timings"].get(s, 0.0), 1) for s in STAGES},
                           "round_trips": r["round_trips"]} for r in rs]}
    report["vector_index_recall@100"] = round(mean(recall), 4) if recall else None
    base = rows["neo4j-local"]
    report["same_top5_as_neo4j_local"] = {
        c: round(mean([float(a["keys"][:5] == b["keys"][:5]) for a, b in zip(rows[c], base)]), 4) for c in CONFIGS}
    if args.write_repo:
        report["graph_write"] = graph_write(args.write_repo, args.home)
    if args.same_as:
        old = json.loads(args.same_as.read_text(encoding="utf-8"))["configs"]
        before = {c: {q["id"]: q["keys"] for q in old[c]["questions"]} for c in CONFIGS if c in old}
        report["top_k_differs_from_" + args.same_as.name] = {
            c: sum(1 for q in report["configs"][c]["questions"] if before[c].get(q["id"]) != q["keys"])
            for c in before}
    print(f"{'config':<14}{'n':>5}{'R@5':>8}{'MRR':>8}" + "".join(f"{s + ' p50/p95':>20}" for s in STAGES)
          + f"{'trips p50/max':>16}")
    for config, m in report["configs"].items():
        print(f"{config:<14}{m['n']:>5}{m['recall@5']:>8.3f}{m['mrr']:>8.3f}"
              + "".join(f"{m['ms'][s]['p50']:>11.1f} /{m['ms'][s]['p95']:>7.1f}" for s in STAGES)
              + f"{m['round_trips']['p50']:>11.0f} /{m['round_trips']['max']:>4}")
    if args.same_as:
        print("questions whose top", args.k, "differ from", args.same_as, ":",
              report["top_k_differs_from_" + args.same_as.name])
    print("same top 5 as neo4j-local:", report["same_top5_as_neo4j_local"])
    print("vector index recall@100 against an exact scan:", report["vector_index_recall@100"])
    if "graph_write" in report:
        print("graph write:", json.dumps(report["graph_write"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
