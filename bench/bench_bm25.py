"""Speed of the BM25 index against bm25s and rank_bm25 on synthetic code-like chunks.

Generates deterministic chunks of ~60 whitespace-separated words (prose words, camelCase /
snake_case / dotted identifiers, call fragments, ADR/INC ids, some one-off names and numbers)
drawn from Zipf-like distributions, and ~10-token queries from the same distributions. For each
size and engine, in its own process (so peak memory is its own), it reports:

- build: tokenising + adding every chunk (for bm25s / rank_bm25: tokenising + indexing, with the
  same tokenizer);
- rebuild: the first search after the adds (BM25Index builds its matrix lazily), and after
  replacing 1% of the chunks;
- query latency p50 / p95 over the queries (bm25s: ``get_scores`` + ``np.argpartition``);
- peak RSS.

    python bench/bench_bm25.py                          # 10k and 100k; rank_bm25 on 10k only
    python bench/bench_bm25.py --sizes 10000 --engines graphmem,bm25s
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

WORDS = [
    "service", "owns", "invoice", "handler", "calls", "charge", "card", "payment", "gateway", "retry", "timeout",
    "database", "connection", "pool", "error", "request", "fails", "cache", "user", "account", "billing", "order",
    "refund", "webhook", "queue", "worker", "schedule", "job", "token", "session", "login", "auth", "permission",
    "role", "admin", "config", "setting", "deploy", "release", "build", "pipeline", "test", "fixture", "mock",
    "client", "server", "response", "status", "code", "header", "body", "json", "parse", "serialize", "encode",
    "decode", "stream", "buffer", "file", "path", "read", "write", "lock", "transaction", "commit", "rollback",
    "migration", "schema", "table", "index", "query", "filter", "sort", "page", "limit", "offset", "cursor",
    "event", "handler", "listener", "emit", "publish", "subscribe", "topic", "message", "retry", "backoff",
    "circuit", "breaker", "metric", "log", "trace", "span", "latency", "throughput", "memory", "leak", "crash",
    "panic", "exception", "raise", "catch", "validate", "sanitize", "escape", "render", "template", "view",
    "model", "controller", "route", "middleware", "proxy", "balance", "shard", "replica", "primary", "secondary",
    "failover", "health", "check", "alert", "incident", "decision", "record", "adr", "postmortem", "owner", "team",
    "depends", "changed", "fixed", "bug", "feature", "refactor", "cleanup",
]
PROSE = [
    "the", "a", "of", "to", "in", "and", "is", "that", "for", "when", "which", "what", "this", "with", "on", "by",
    "from", "it", "as", "be", "are", "was", "should", "must", "can", "will", "not", "we", "they", "our", "after",
    "before", "because", "so", "then", "also", "only",
]


class _Zipf:
    """Sampler of indices in [0, n) with a Zipf-like skew (rank r has weight 1 / (r + 1) ** a)."""

    def __init__(self, rng: np.random.Generator, n: int, a: float) -> None:
        self.rng = rng
        self.cdf = np.cumsum(1.0 / np.arange(1, n + 1) ** a)
        self.cdf /= self.cdf[-1]

    def __call__(self, size: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(size)), len(self.cdf) - 1)


def _synthetic_words(rng: np.random.Generator, n: int) -> list[str]:
    """Pronounceable made-up words, to give the corpus a long tail of rare terms."""
    cons, vows = list("bcdfghklmnprstvz"), list("aeiou")
    out = set()
    while len(out) < n:
        k = int(rng.integers(2, 4))
        out.add("".join(str(rng.choice(cons)) + str(rng.choice(vows)) for _ in range(k)))
    return sorted(out)


def _identifier(rng: np.random.Generator, parts: list[str]) -> str:
    style = int(rng.integers(0, 5))
    if style == 0:
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    if style == 1:
        return "".join(p.capitalize() for p in parts)
    if style == 2:
        return "_".join(parts)
    if style == 3:
        return "".join(p.capitalize() for p in parts[:-1]) + "." + parts[-1]
    return "self." + "_".join(parts) + "()"


def corpus(n_docs: int, n_queries: int, seed: int = 11) -> tuple[list[str], list[str]]:
    """``n_docs`` chunks of ~60 words and ``n_queries`` queries of ~10 tokens, deterministic for a seed."""
    rng = np.random.default_rng(seed)
    vocab = WORDS + _synthetic_words(rng, 20_000)
    part = _Zipf(rng, len(vocab), 1.1)
    idents = [_identifier(rng, [vocab[i] for i in part(int(rng.integers(2, 4)))]) for _ in range(30_000)]
    # Prose and domain words are the most frequent; made-up words form the tail.
    word_pool = np.array(PROSE + vocab, dtype=object)
    ident_pool = np.array(idents, dtype=object)
    pick_word, pick_ident = _Zipf(rng, len(word_pool), 1.0), _Zipf(rng, len(ident_pool), 0.9)

    def text(n_words: int, n_ids: int, extras: bool) -> str:
        items = list(word_pool[pick_word(n_words)])
        items += list(ident_pool[pick_ident(n_ids)])
        if extras:
            items.append(f"ADR-{int(rng.integers(1, 400)):04d}" if rng.random() < 0.5 else f"INC-{int(rng.integers(1, 900))}")
            items.append(f"tmp_{int(rng.integers(0, 10**9))}")  # one-off names: a long tail, cache misses
            items.append(str(int(rng.integers(0, 10**6))))
        rng.shuffle(items)
        return " ".join(items)

    docs = [text(40, 17, True) for _ in range(n_docs)]
    queries = [text(4, 2, False) for _ in range(n_queries)]
    return docs, queries


def _percentiles(samples: list[float]) -> tuple[float, float]:
    arr = np.array(samples) * 1000
    return round(float(np.percentile(arr, 50)), 3), round(float(np.percentile(arr, 95)), 3)


def run_one(engine: str, size: int, n_queries: int) -> dict[str, object]:
    """Build one engine's index over ``size`` chunks and time it; runs in its own process."""
    from graphmem.retrieval.tokenize import tokenize

    docs, queries = corpus(size, n_queries)
    result: dict[str, object] = {"engine": engine, "docs": size, "queries": len(queries)}
    latencies: list[float] = []
    if engine == "graphmem":
        from graphmem.retrieval.bm25 import BM25Index

        index = BM25Index()
        t = time.perf_counter()
        index.add(enumerate(docs, start=1))
        result["build_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        index.search(queries[0], 10)
        result["rebuild_s"] = round(time.perf_counter() - t, 3)
        changed = max(1, size // 100)
        index.add((i + 1, docs[(i * 7) % size]) for i in range(changed))
        t = time.perf_counter()
        index.search(queries[0], 10)
        result["rebuild_after_1pct_s"] = round(time.perf_counter() - t, 3)
        for q in queries:
            t = time.perf_counter()
            index.search(q, 10)
            latencies.append(time.perf_counter() - t)
    elif engine == "bm25s":
        import bm25s

        t = time.perf_counter()
        tokens = [tokenize(d) for d in docs]
        retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
        retriever.index(tokens, show_progress=False)
        result["build_s"] = round(time.perf_counter() - t, 2)
        for q in queries:
            t = time.perf_counter()
            q_tokens = [tok for tok in dict.fromkeys(tokenize(q)) if tok in retriever.vocab_dict]
            scores = retriever.get_scores(q_tokens) if q_tokens else np.zeros(size)
            top = np.argpartition(-scores, 9)[:10]
            top[np.argsort(-scores[top])]
            latencies.append(time.perf_counter() - t)
    elif engine == "rank_bm25":
        from rank_bm25 import BM25Okapi

        t = time.perf_counter()
        okapi = BM25Okapi([tokenize(d) for d in docs])
        result["build_s"] = round(time.perf_counter() - t, 2)
        for q in queries:
            t = time.perf_counter()
            scores = okapi.get_scores(list(dict.fromkeys(tokenize(q))))
            top = np.argpartition(-scores, 9)[:10]
            top[np.argsort(-scores[top])]
            latencies.append(time.perf_counter() - t)
    else:
        raise SystemExit(f"unknown engine {engine}")
    result["p50_ms"], result["p95_ms"] = _percentiles(latencies)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--engines", default="graphmem,bm25s,rank_bm25")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rank-bm25-max", type=int, default=10_000,
                        help="largest size rank_bm25 runs on with all queries; above it, 20 queries")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        engine, size, n_queries = args.one.split(":")
        print(json.dumps(run_one(engine, int(size), int(n_queries))))
        return
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        for engine in args.engines.split(","):
            n_queries = args.queries
            if engine == "rank_bm25" and size > args.rank_bm25_max:
                n_queries = min(n_queries, 20)
            out = subprocess.run([sys.executable, __file__, "--one", f"{engine}:{size}:{n_queries}"],
                                 check=False, capture_output=True, text=True, env=os.environ.copy())
            if out.returncode != 0:
                print(f"{engine} {size}: failed\n{out.stderr}", file=sys.stderr)
                continue
            result = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(result)
            print(json.dumps(result), flush=True)
    print()
    print(f"{'engine':<10} {'docs':>7} {'queries':>7} {'build s':>8} {'rebuild s':>9} {'1% edit s':>9} "
          f"{'p50 ms':>8} {'p95 ms':>8} {'peak MB':>8}")
    for r in results:
        print(f"{r['engine']:<10} {r['docs']:>7} {r['queries']:>7} {r['build_s']:>8} {r.get('rebuild_s', '-'):>9} "
              f"{r.get('rebuild_after_1pct_s', '-'):>9} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['peak_rss_mb']:>8}")


if __name__ == "__main__":
    main()
