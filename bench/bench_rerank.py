"""Reranker speed per backend and max length, and what reranking does to held-out questions.

Builds the example organisation (``examples/make_example_org.py``) in ``--workdir``, ingests it,
syncs its indexes and trains the project's reranker if none is saved (``--retrain`` forces it).
Then it reports:

- speed: pairs scored per second (64 pairs), and p50 latency of one rerank of 20 and of 50
  candidates, for each backend (torch fp32, ONNX fp32, ONNX int8) and max length;
- quality: MRR@10 and Recall@5 of the hybrid fused order, of the reranked order (with the fitted
  rank prior, as ``hybrid-rerank`` would use it) and of the model's logits alone, on the mined
  questions held out from training, by source, and on the example organisation's own questions.

    python bench/bench_rerank.py                                  # train if needed, all backends
    python bench/bench_rerank.py --retrain --lengths 128,192,256 --json /tmp/rerank.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from graphmem.ingest import ingest
from graphmem.retrieval.indexes import Indexes
from graphmem.retrieval.mining import EvalQuestion, mine
from graphmem.retrieval.rerank import (
    META_FILE,
    CrossEncoderReranker,
    default_reranker_dir,
    score_questions,
    summarise,
    train_reranker,
)
from graphmem.stores.embedded import EmbeddedStore

NOW = "2026-06-01"


def prepare(workdir: Path) -> tuple[EmbeddedStore, Indexes, dict[str, Any], Path]:
    if not (workdir / "facts.json").is_file():
        subprocess.run([sys.executable, str(REPO / "examples" / "make_example_org.py"), str(workdir), "--now", NOW],
                       check=True, capture_output=True)
    home = workdir / "home"
    store = EmbeddedStore(home, "acme")
    ingest(workdir / "acme", store, cache_dir=home / "cache")
    indexes = Indexes(home / "acme" / "index", cache_dir=home / "cache")
    indexes.sync(store)
    return store, indexes, json.loads((workdir / "facts.json").read_text()), home


def speed(model: Path, texts: list[str], query: str, backends: list[str], lengths: list[int],
          repeats: int) -> list[dict[str, Any]]:
    rows = []
    for length in lengths:
        for backend in backends:
            rr = CrossEncoderReranker(model, backend=backend, max_length=length)
            rr.logits(query, texts[:4])  # load, export, warm up
            t = time.perf_counter()
            rr.logits(query, texts[:64])
            pairs_s = 64 / (time.perf_counter() - t)
            lat = {}
            for n in (20, 50):
                runs = []
                for _ in range(repeats):
                    t = time.perf_counter()
                    rr.logits(query, texts[:n])
                    runs.append(1000 * (time.perf_counter() - t))
                lat[n] = statistics.median(runs)
            rows.append({"backend": backend, "max_length": length, "pairs_per_s": round(pairs_s, 1),
                         "p50_ms_20": round(lat[20], 1), "p50_ms_50": round(lat[50], 1)})
            print(f"  {backend:<10} len {length:<4} {pairs_s:8.1f} pairs/s   20: {lat[20]:7.1f} ms   "
                  f"50: {lat[50]:7.1f} ms", flush=True)
    return rows


def quality_table(name: str, summary: dict[str, Any]) -> str:
    return (f"{name:<22} {summary['questions']:>4}   {summary['fused_mrr@10']:.3f}  {summary['rerank_mrr@10']:.3f}"
            f"  {summary['logits_mrr@10']:.3f}   {summary['fused_recall@5']:.3f}  {summary['rerank_recall@5']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/graphmem-bench-rerank"))
    ap.add_argument("--retrain", action="store_true", help="train even if a model is saved")
    ap.add_argument("--backends", default="torch,onnx,onnx-int8")
    ap.add_argument("--lengths", default="128,192,256")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()

    store, indexes, facts, home = prepare(args.workdir)
    model = default_reranker_dir(home, "acme")
    t = time.perf_counter()
    mined = mine(store, indexes, seed=args.seed)
    print(f"mined {mined.counts()} in {time.perf_counter() - t:.1f} s", flush=True)
    if args.retrain or not (model / META_FILE).is_file():
        t = time.perf_counter()
        report = train_reranker(store, indexes, model, mined=mined, seed=args.seed)
        print(f"trained in {time.perf_counter() - t:.1f} s: {report.pairs} triples, {report.steps} steps, "
              f"loss {report.first_loss:.3f} -> {report.last_loss:.3f}", flush=True)
    meta = json.loads((model / META_FILE).read_text())
    print(f"model: {model} (trained {meta['trained_at']}, {meta['pairs']} triples in {meta['train_seconds']} s, "
          f"prior weight {meta['prior_weight']})")

    print("\nspeed (model logits only; load and export excluded)")
    texts = [t.positive for t in mined.held_out] + [t.negative for t in mined.held_out]
    texts = (texts * (64 // max(1, len(texts)) + 1))[:64]
    query = mined.held_out[0].query if mined.held_out else "which code posts ledger entries"
    speeds = speed(model, texts, query, args.backends.split(","), [int(x) for x in args.lengths.split(",")],
                   args.repeats)

    reranker = CrossEncoderReranker(model)
    rows = score_questions(store, indexes, reranker, mined.eval_questions)
    org = [EvalQuestion(q["question"], tuple(q["gold"]), (), "org", q["id"]) for q in facts["questions"]]
    org_rows = score_questions(store, indexes, reranker, org)
    w = reranker.prior_weight
    print(f"\nquality (hybrid head of 20; rerank = logits + prior weight {w}; backend {reranker.backend})")
    print(f"{'questions':<22} {'n':>4}   {'MRR@10 fused rerank logits':<27} {'R@5 fused rerank'}")
    results = {"all held-out": summarise(rows, w)}
    for source in sorted({r["source"] for r in rows}):
        results[f"  {source}"] = summarise([r for r in rows if r["source"] == source], w)
    results["example org questions"] = summarise(org_rows, w)
    for name, summary in results.items():
        print(quality_table(name, summary))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "speed": speeds,
                                          "quality": {k.strip(): v for k, v in results.items()}}, indent=2))


if __name__ == "__main__":
    main()
