"""All retrievers side by side on a synthetic organisation of 10,000 and 100,000 chunks.

Builds (once, cached under --home) an embedded graph of services, files, symbols, commits, people,
teams, decisions and incidents with code-like chunk texts, syncs its BM25 and FAISS indexes
(embedding is cached by text, so a second run embeds nothing), then times every mode of
``graphmem query`` per stage, beside two plain baselines: rank-bm25 over the same tokens and
sentence-transformers + FAISS (flat inner product). Reports p50/p95 per stage and memory.

    python bench/bench_retrieval.py [--sizes 10000,100000] [--queries 200] [--home DIR]

``--vectors hashed`` (with ``--no-baselines``) replaces the embedding model by feature-hashed bags of
tokens, for sizes the model cannot embed in reasonable time on two cores (1,000,000 chunks): the
vectors have no semantic quality, so that run measures latency, build time and memory only.
``--indexes-only`` builds and times the BM25 and FAISS indexes alone (no graph store, no graph
retrieval): the embedded store holds the whole graph in memory, which at 1,000,000 chunks is more
than this machine has to spare (see the README's growth curve).

``--store neo4j`` builds the graph in a Neo4j project (``bench-n<size>``, from ``NEO4J_*``) with the
server-side indexes (``GRAPHMEM_INDEX=neo4j``: BM25 in a full-text index, vectors in a vector index,
written with the chunks), so the server holds what the embedded store would keep in this process.
The build is timed in two parts: writing the graph with its index entries, then waiting until Neo4j
has populated both indexes.

Goals on a 2-core machine at 100,000 chunks: ``hybrid`` p95 <= 50 ms, ``hybrid-rerank`` p95 <= 300 ms.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import statistics
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from graphmem.model import Chunk, Node, Provenance, Relationship, RelType
from graphmem.retrieval.engine import Retriever
from graphmem.retrieval.indexes import Indexes, document_text
from graphmem.retrieval.tokenize import tokenize
from graphmem.stores.embedded import EmbeddedStore

WORDS = ["invoice", "ledger", "payment", "refund", "retry", "timeout", "kafka", "outbox", "idempotent", "tax", "currency", "customer", "account", "balance", "entry", "webhook", "email", "statement", "notification", "gateway", "route", "auth", "token", "rate", "limit", "cache", "redis", "postgres", "query", "index", "batch", "consumer", "producer", "publish", "schedule", "job", "report", "audit", "export", "import", "parse", "render", "validate", "serialize", "encode", "decode", "stream", "buffer", "queue", "worker", "session", "user", "order", "cart"]
VERBS = ["get", "set", "create", "update", "delete", "load", "save", "send", "handle", "apply", "compute", "build", "check", "find", "list", "sync"]
LANGS = (("py", "python"), ("go", "go"), ("ts", "typescript"), ("java", "java"))


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class HashedEmbedder:
    """Feature hashing of a text's tokens into ``dim`` signed buckets, L2-normalised: deterministic
    and about a thousand times faster than the model, with no semantic quality (latency only)."""

    name = "hashed-tokens"

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    def fingerprint(self) -> str:
        return f"{self.name}/{self.dim}"

    def encode(self, texts: Sequence[str], *, kinds: Sequence[str] | None = None,
               batch_size: int | None = None) -> np.ndarray:
        rows: list[int] = []
        hashes: list[int] = []
        for i, text in enumerate(texts):
            for token in tokenize(text):
                rows.append(i)
                hashes.append(zlib.crc32(token.encode()))
        h = np.asarray(hashes, dtype=np.int64)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        np.add.at(out, (np.asarray(rows, dtype=np.int64), h % self.dim), np.where(h & 0x80000000, 1.0, -1.0))
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def build(store: EmbeddedStore, chunks_wanted: int, seed: int = 7) -> dict[str, list[str]]:
    """A deterministic organisation with about ``chunks_wanted`` chunks; returns keys by kind."""
    rng = random.Random(seed)
    n_services = max(8, chunks_wanted // 2500)
    n_symbols = int(chunks_wanted * 0.8)
    n_files = max(n_services, n_symbols // 8)
    n_commits = chunks_wanted - n_symbols - 200
    nodes: list[Node] = []
    rels: list[Relationship] = []
    chunks: list[Chunk] = []
    keys: dict[str, list[str]] = {k: [] for k in ("service", "file", "symbol", "commit", "person", "team",
                                                    "decision", "incident")}
    P = lambda path: Provenance(path, "bench")

    services = [f"{rng.choice(WORDS)}-{i}" for i in range(n_services)]
    for name in services:
        nodes.append(Node(f"service:{name}", name, P("graphmem.toml")))
        keys["service"].append(f"service:{name}")
    teams = [f"team-{i}" for i in range(max(4, n_services // 3))]
    people = [f"dev{i}@acme.dev" for i in range(60)]
    for t in teams:
        nodes.append(Node(f"team:{t}", t, P("graphmem.toml")))
        keys["team"].append(f"team:{t}")
    for i, email in enumerate(people):
        nodes.append(Node(f"person:{email}", f"Dev {i}", P("CODEOWNERS"), {"email": email}))
        keys["person"].append(f"person:{email}")
        rels.append(Relationship(f"person:{email}", RelType.MEMBER_OF, f"team:{teams[i % len(teams)]}",
                                 P("graphmem.toml")))
    for i, name in enumerate(services):
        rels.append(Relationship(f"team:{teams[i % len(teams)]}", RelType.OWNS, f"service:{name}", P("CODEOWNERS")))
        for other in rng.sample(services, 2):
            if other != name:
                rels.append(Relationship(f"service:{name}", RelType.DEPENDS_ON, f"service:{other}", P("x")))
    files = []
    for i in range(n_files):
        svc = services[i % n_services]
        ext, lang = LANGS[i % len(LANGS)]
        path = f"services/{svc}/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{i}.{ext}"
        files.append((path, lang, svc))
        nodes.append(Node(f"file:{path}", path, P(path), {"language": lang}))
        keys["file"].append(f"file:{path}")
        rels.append(Relationship(f"service:{svc}", RelType.CONTAINS, f"file:{path}", P(path)))
    symbols = []
    for i in range(n_symbols):
        path, lang, _ = files[i % n_files]
        cls = f"{rng.choice(WORDS).title()}{rng.choice(WORDS).title()}"
        name = f"{rng.choice(VERBS)}_{rng.choice(WORDS)}" if lang == "python" else \
            f"{rng.choice(VERBS)}{rng.choice(WORDS).title()}"
        qual = f"{cls}.{name}{i}"
        key = f"sym:{path}::{qual}"
        doc = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16)))
        body = " ".join(f"{rng.choice(VERBS)}_{rng.choice(WORDS)}({rng.choice(WORDS)})" for _ in range(rng.randint(8, 30)))
        text = f"{path}::{qual} (method, {lang})\ndef {name}{i}(self, {rng.choice(WORDS)}):\n    \"\"\"{doc}.\"\"\"\n    {body}\n"
        nodes.append(Node(key, qual, P(path), {"qualname": qual, "docstring": doc}))
        chunks.append(Chunk(key, 0, text, "code", P(path), 1, 20))
        rels.append(Relationship(f"file:{path}", RelType.CONTAINS, key, P(path)))
        symbols.append(key)
        keys["symbol"].append(key)
    for key in symbols:
        for other in rng.sample(symbols, 2):
            rels.append(Relationship(key, RelType.CALLS, other, P(key[4:].split("::")[0])))
    for i in range(100):
        nodes.append(Node(f"adr:{i + 1}", f"Use {rng.choice(WORDS)} for {rng.choice(WORDS)}", P(f"docs/adr/{i + 1}.md"),
                          {"number": i + 1, "date": f"2025-{1 + i % 12:02d}-01"}))
        keys["decision"].append(f"adr:{i + 1}")
        chunks.append(Chunk(f"adr:{i + 1}", 0, f"ADR-{i + 1} " + " ".join(rng.choice(WORDS) for _ in range(60)),
                            "decision", P(f"docs/adr/{i + 1}.md")))
    for i in range(n_commits):
        sha = f"{rng.getrandbits(160):040x}"
        key = f"commit:{sha}"
        msg = f"{rng.choice(VERBS).title()} {rng.choice(WORDS)} {rng.choice(WORDS)} " + \
            (f"(ADR-{rng.randint(1, 100)})" if i % 7 == 0 else f"(PAY-{i})")
        nodes.append(Node(key, msg, P(f"git:{sha}"), {"committed_at": f"2025-{1 + i % 12:02d}-15T10:00:00.000000Z"}))
        chunks.append(Chunk(key, 0, msg, "commit", P(f"git:{sha}")))
        rels.append(Relationship(f"person:{people[i % len(people)]}", RelType.AUTHORED, key, P(f"git:{sha}")))
        for target in rng.sample(symbols, 2):
            rels.append(Relationship(key, RelType.MODIFIED, target, P(f"git:{sha}")))
        if i % 7 == 0:
            rels.append(Relationship(key, RelType.IMPLEMENTS, f"adr:{msg.split('ADR-')[1].rstrip(')')}",
                                     P(f"git:{sha}")))
        keys["commit"].append(key)
    for i in range(100):
        key = f"incident:INC-{i + 1:03d}"
        svc = rng.choice(services)
        nodes.append(Node(key, f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} outage", P(f"docs/incidents/{i}.md"),
                          {"started_at": f"2025-{1 + i % 12:02d}-20T08:00:00.000000Z"}))
        chunks.append(Chunk(key, 0, f"INC-{i + 1:03d} " + " ".join(rng.choice(WORDS) for _ in range(80)), "incident",
                            P(f"docs/incidents/{i}.md")))
        rels.append(Relationship(key, RelType.AFFECTED, f"service:{svc}", P(f"docs/incidents/{i}.md")))
        rels.append(Relationship(key, RelType.CAUSED_BY, rng.choice(keys["commit"]), P(f"docs/incidents/{i}.md")))
        keys["incident"].append(key)
    store.upsert(nodes, [], [])
    store.upsert([], rels, chunks)
    return keys


class ChunkSink:
    """Keeps the chunks ``build`` writes and nothing else: all ``Indexes.sync`` reads of a store."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    def upsert(self, nodes: list[Node], rels: list[Relationship], chunks: list[Chunk]) -> None:
        self.chunks.extend(chunks)

    def iter_chunks(self) -> list[Chunk]:
        return self.chunks

    def get_meta(self, name: str) -> None:
        return None  # no metadata: nothing but these chunks is ever written here


def run_indexes_only(size: int, home: Path, n_queries: int, *, hashed: bool) -> None:
    """Build time, memory and search latency of the two indexes alone, at the depth the engine
    fetches (``chunk_candidates``)."""
    from graphmem.retrieval.config import CandidateConfig

    fetch = CandidateConfig().chunk_candidates
    t = time.perf_counter()
    sink = ChunkSink()
    keys = build(sink, size)  # type: ignore[arg-type]
    gc.collect()
    print(f"[{size}] generated {len(sink.chunks)} chunks in {time.perf_counter() - t:.1f} s; RSS {rss_mb():.0f} MB, "
          f"peak {peak_mb():.0f} MB")
    indexes = Indexes(home / f"n{size}" / ("indexes-only-hashed" if hashed else "indexes-only"),
                      cache_dir=home / "cache", embedder=HashedEmbedder() if hashed else None)
    t = time.perf_counter()
    report = indexes.sync(sink)  # type: ignore[arg-type]
    print(f"[{size}] index sync {time.perf_counter() - t:.1f} s (embedded {report.embedded}, from cache "
          f"{report.from_cache}); vector index {indexes.vectors.kind}; RSS {rss_mb():.0f} MB, peak {peak_mb():.0f} MB")
    qs = questions(keys, n_queries)
    bm25, vectors, embedder = indexes.bm25, indexes.vectors, indexes.embedder
    bm25.search(qs[0], fetch)
    vectors.search(embedder.encode_query(qs[0]), fetch)
    lat: dict[str, list[float]] = {"bm25": [], "vector": []}
    for q in qs:
        t = time.perf_counter()
        bm25.search(q, fetch)
        lat["bm25"].append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        vectors.search(embedder.encode_query(q), fetch)
        lat["vector"].append((time.perf_counter() - t) * 1000)
    for name, values in lat.items():
        print(f"[{size}] {name:<7} top-{fetch} p50 / p95 {pct(values, 50):.1f} / {pct(values, 95):.1f} ms")
    print(f"[{size}] peak RSS {peak_mb():.0f} MB")


def questions(keys: dict[str, list[str]], n: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        form = i % 5
        if form == 0:
            out.append(f"Which commit caused {rng.choice(keys['incident'])[9:]}?")
        elif form == 1:
            out.append(f"Which team owns the service {rng.choice(keys['service'])[8:]}?")
        elif form == 2:
            out.append(f"What code changed because of ADR-{rng.randint(1, 100)}?")
        elif form == 3:
            out.append(f"{rng.choice(VERBS)} {rng.choice(WORDS)} {rng.choice(WORDS)} when the {rng.choice(WORDS)} "
                       f"times out")
        else:
            out.append(f"Who calls {rng.choice(keys['symbol']).split('::')[1]}?")
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


class SlicedWriter:
    """Passes ``build``'s two upserts on in slices: a Neo4j upsert holds its rows, index fields
    and vectors for every element it is given, which at 1,000,000 chunks is more memory than the
    elements themselves."""

    def __init__(self, store: Any, size: int = 100_000) -> None:
        self.store, self.size = store, size

    def upsert(self, nodes: list[Node], rels: list[Relationship], chunks: list[Chunk]) -> None:
        for start in range(0, max(len(nodes), len(rels), len(chunks), 1), self.size):
            end = start + self.size
            self.store.upsert(nodes[start:end], rels[start:end], chunks[start:end])


def open_neo4j(size: int, home: Path, hashed: bool) -> tuple[Any, Any]:
    """A Neo4j project of ``size`` chunks with server-side indexes, built on first use."""
    from graphmem.api import _server_indexes
    from graphmem.stores.neo4j import Neo4jStore

    store = Neo4jStore.connect(f"bench-n{size}" + ("-hashed" if hashed else ""))
    store.ensure_schema()
    # As `GRAPHMEM_INDEX=neo4j` sets them up: schema, then attached to the store's chunk writes.
    indexes = _server_indexes(store, HashedEmbedder() if hashed else None, home / "cache")  # type: ignore[arg-type]
    if store.counts().chunks == 0:
        t = time.perf_counter()
        build(SlicedWriter(store), size)  # type: ignore[arg-type]
        written = time.perf_counter() - t
        t = time.perf_counter()
        with store.driver.session(database=store.database) as session:
            session.run("CALL db.awaitIndexes(86400)").consume()
        print(f"[{size}] Neo4j: graph and index entries written in {written:.1f} s, indexes populated "
              f"{time.perf_counter() - t:.1f} s later; client peak RSS {peak_mb():.0f} MB")
    return store, indexes


def run_size(size: int, home: Path, n_queries: int, modes: list[str], *, hashed: bool = False,
             baselines: bool = True, backend: str = "embedded") -> None:
    if backend == "neo4j":
        store, indexes = open_neo4j(size, home, hashed)
    else:
        store = EmbeddedStore(home / f"n{size}", "bench")
        if store.counts().chunks == 0:
            t = time.perf_counter()
            build(store, size)
            print(f"[{size}] built graph in {time.perf_counter() - t:.1f} s")
        # Hashed vectors live apart, so they never replace the model's.
        indexes = Indexes(home / f"n{size}" / ("index-hashed" if hashed else "index"), cache_dir=home / "cache",
                          embedder=HashedEmbedder() if hashed else None)
    keys = {k: [n.key for n in store.iter_nodes()] for k in ("all",)}
    by_kind: dict[str, list[str]] = {}
    for key in keys["all"]:
        by_kind.setdefault(key.split(":", 1)[0].replace("sym", "symbol").replace("adr", "decision"), []).append(key)
    counts = store.counts()
    t = time.perf_counter()
    report = indexes.sync(store, progress=None)
    print(f"[{size}] {counts.chunks} chunks, {counts.total_nodes} nodes, {counts.total_rels} rels; index sync "
          f"{time.perf_counter() - t:.1f} s (embedded {report.embedded}, from cache {report.from_cache})")
    from graphmem.api import _load_reranker

    # Latency only: any trained reranker will do (by default the one of the example organisation).
    reranker = _load_reranker(Path(os.environ.get("GRAPHMEM_HOME", ".graphmem")),
                              os.environ.get("GRAPHMEM_RERANK_PROJECT", "acme"))
    gc.collect()
    base_rss = rss_mb()
    retriever = Retriever(store, indexes, reranker=reranker)
    qs = questions({"incident": by_kind.get("incident", []), "service": by_kind.get("service", []),
                    "symbol": by_kind.get("symbol", [])}, n_queries)
    retriever.query(qs[0], mode="hybrid")  # load models and the catalog once
    loaded_rss = rss_mb()
    print(f"[{size}] memory: {base_rss:.0f} MB before retrieval, {loaded_rss:.0f} MB with indexes, catalog and "
          f"models loaded; peak so far {peak_mb():.0f} MB")
    header = f"{'mode':<14}" + "".join(f"{s + ' p50/p95':>20}" for s in
                                       ("bm25", "vector", "graph", "fusion", "rerank", "total"))
    print(header)
    for mode in modes:
        if mode == "hybrid-rerank" and reranker is None:
            print(f"{mode:<14} (no trained reranker: run `graphmem reranker train` first)")
            continue
        stages: dict[str, list[float]] = {}
        for q in qs:
            answer = retriever.query(q, mode=mode, k=10)
            for name, ms in answer.timings_ms.items():
                stages.setdefault(name, []).append(ms)
        print(f"{mode:<14}" + "".join(f"{pct(stages[s], 50):>10.1f}/{pct(stages[s], 95):<9.1f}"
                                        for s in ("bm25", "vector", "graph", "fusion", "rerank", "total")))
    if not baselines:
        print(f"[{size}] peak RSS {peak_mb():.0f} MB")
        store.close()
        return

    # Baselines: plain rank-bm25 and plain sentence-transformers + FAISS over the same chunks.
    from rank_bm25 import BM25Okapi

    chunks = list(store.iter_chunks())
    docs = [tokenize(document_text(c)) for c in chunks]
    t = time.perf_counter()
    okapi = BM25Okapi(docs)
    build_s = time.perf_counter() - t
    lat = []
    for q in qs[: 20 if size > 20_000 else 100]:
        t = time.perf_counter()
        scores = okapi.get_scores(tokenize(q))
        np.argpartition(-scores, 10)[:10]
        lat.append((time.perf_counter() - t) * 1000)
    print(f"{'rank-bm25':<14}{'':>20}{'':>20}{'':>20}{'':>20}{'':>20}{pct(lat, 50):>10.1f}/{pct(lat, 95):<9.1f}"
          f"(index build {build_s:.1f} s)")
    import faiss
    from sentence_transformers import SentenceTransformer

    from graphmem.retrieval.embed import default_model_path

    st_model = SentenceTransformer(str(default_model_path()), device="cpu")
    flat = faiss.IndexFlatIP(indexes.vectors.dim)
    flat.add(np.stack([indexes.vectors.vector(c.id) for c in chunks]))
    lat = []
    for q in qs:
        t = time.perf_counter()
        vec = st_model.encode([q], normalize_embeddings=True)
        flat.search(np.asarray(vec, dtype=np.float32), 10)
        lat.append((time.perf_counter() - t) * 1000)
    print(f"{'st+faiss':<14}{'':>20}{'':>20}{'':>20}{'':>20}{'':>20}{pct(lat, 50):>10.1f}/{pct(lat, 95):<9.1f}")
    print(f"[{size}] peak RSS {peak_mb():.0f} MB; p50 of medians {statistics.median(lat):.1f} ms")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--modes", default="bm25,vector,graph,hybrid,hybrid-rerank")
    parser.add_argument("--home", type=Path, default=Path.home() / ".cache" / "graphmem" / "bench-retrieval")
    parser.add_argument("--vectors", choices=("model", "hashed"), default="model",
                        help="embed with the model, or hash tokens (latency and memory only)")
    parser.add_argument("--no-baselines", dest="baselines", action="store_false",
                        help="skip plain rank-bm25 and sentence-transformers + FAISS")
    parser.add_argument("--indexes-only", action="store_true",
                        help="build and time the BM25 and vector indexes alone, without a graph store")
    parser.add_argument("--store", choices=("embedded", "neo4j"), default="embedded",
                        help="where the graph lives; neo4j (NEO4J_*) also serves BM25 and vectors")
    args = parser.parse_args()
    if args.store == "neo4j" and (args.indexes_only or args.baselines):
        parser.error("--store neo4j times graphmem's own modes: add --no-baselines, and leave out --indexes-only")
    for size in (int(s) for s in args.sizes.split(",")):
        if args.indexes_only:
            run_indexes_only(size, args.home, args.queries, hashed=args.vectors == "hashed")
            continue
        run_size(size, args.home, args.queries, args.modes.split(","), hashed=args.vectors == "hashed",
                 baselines=args.baselines, backend=args.store)


if __name__ == "__main__":
    main()
