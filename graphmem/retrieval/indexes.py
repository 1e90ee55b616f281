"""The BM25 and vector indexes of one project, kept in step with the graph's chunks.

``Indexes.sync`` compares the graph's chunks (id and a digest of their text) with what the indexes
hold and applies the difference: new and changed chunks are (re-)indexed, vanished ones removed.
Vectors are cached by text digest per embedder, so re-ingesting unchanged text embeds nothing.

Both indexes are saved atomically; BM25 first, then the vectors, whose saved digests are the record
of what was indexed: after a crash between the two the next sync simply re-applies the change.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphmem.errors import StoreError
from graphmem.model import Chunk
from graphmem.retrieval.bm25 import BM25Index
from graphmem.retrieval.vectors import DEFAULT_HNSW_THRESHOLD, VectorIndex

if TYPE_CHECKING:
    from graphmem.retrieval.embed import Embedder
    from graphmem.stores.base import GraphStore

Progress = Callable[[str, int, int], None]
EMBED_BATCH = 256


def document_text(chunk: Chunk) -> str:
    """What is indexed for a chunk: its node's key (names, paths, ids) and its text."""
    return f"{chunk.node_key}\n{chunk.text}"


def text_digest(text: str) -> int:
    """Signed 64-bit digest of a text (fits an int64 array and SQLite's INTEGER)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "big", signed=True)


class EmbeddingCache:
    """Vectors by text digest for one embedder fingerprint, in SQLite (WAL, shared by processes)."""

    def __init__(self, path: Path, dim: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.dim = dim
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (digest INTEGER PRIMARY KEY, vec BLOB NOT NULL)")

    def get_many(self, digests: Sequence[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for start in range(0, len(digests), 500):
            part = list(digests[start:start + 500])
            rows = self._db.execute(
                f"SELECT digest, vec FROM vectors WHERE digest IN ({','.join('?' * len(part))})", part)
            for digest, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape == (self.dim,):
                    out[digest] = vec
        return out

    def put_many(self, items: Iterable[tuple[int, np.ndarray]]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                                 ((d, np.asarray(v, dtype=np.float32).tobytes()) for d, v in items))

    def close(self) -> None:
        self._db.close()


@dataclass(slots=True)
class SyncReport:
    """What one sync changed."""

    added: int = 0
    updated: int = 0
    removed: int = 0
    embedded: int = 0
    from_cache: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(getattr(self, k), 2) if k == "seconds" else getattr(self, k)) for k in self.__slots__}


@dataclass(slots=True)
class Consistency:
    """How the indexes compare with the graph's chunks."""

    chunks: int = 0
    vectors: int = 0
    bm25: int = 0
    missing_vectors: list[int] = field(default_factory=list)
    extra_vectors: list[int] = field(default_factory=list)
    stale_vectors: list[int] = field(default_factory=list)
    missing_bm25: list[int] = field(default_factory=list)
    extra_bm25: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not (self.missing_vectors or self.extra_vectors or self.stale_vectors
                                           or self.missing_bm25 or self.extra_bm25)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "chunks": self.chunks, "vectors": self.vectors, "bm25": self.bm25,
                "missing_vectors": len(self.missing_vectors), "extra_vectors": len(self.extra_vectors),
                "stale_vectors": len(self.stale_vectors), "missing_bm25": len(self.missing_bm25),
                "extra_bm25": len(self.extra_bm25), "error": self.error}


class Indexes:
    """BM25 and FAISS indexes of one project, stored in ``directory``.

    The embedder is loaded only when something needs embedding (or a vector query is asked), so a
    sync that finds nothing new, or a BM25 query, never loads a model.
    """

    def __init__(self, directory: str | Path, *, embedder: Embedder | Callable[[], Embedder] | None = None,
                 cache_dir: str | Path | None = None, hnsw_threshold: int = DEFAULT_HNSW_THRESHOLD) -> None:
        self.directory = Path(directory)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else self.directory / "cache"
        self.hnsw_threshold = hnsw_threshold
        self._embedder_source = embedder
        self._embedder: Embedder | None = None
        self._bm25: BM25Index | None = None
        self._vectors: VectorIndex | None = None

    # --- parts ----------------------------------------------------------------------------------

    @property
    def bm25_path(self) -> Path:
        return self.directory / "bm25.npz"

    @property
    def vectors_path(self) -> Path:
        return self.directory / "vectors.npz"

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._make_embedder()
        return self._embedder

    def _make_embedder(self) -> Embedder:
        source = self._embedder_source
        if source is None:
            from graphmem.retrieval.embed import load_embedder

            return load_embedder()
        if callable(source) and not hasattr(source, "encode"):
            return source()
        return source  # type: ignore[return-value]

    @property
    def bm25(self) -> BM25Index:
        if self._bm25 is None:
            self._bm25 = BM25Index.load(self.bm25_path)
        return self._bm25

    @property
    def vectors(self) -> VectorIndex:
        """The vector index, for searching: one built by another embedder is an error, not an empty
        index (``sync`` rebuilds it)."""
        index = self._load_vectors()
        if index.replaced_model:
            raise StoreError(f"the vector index holds vectors of {index.replaced_model}, not of "
                             f"{self.embedder.fingerprint()}: run `graphmem doctor --repair` (or ingest again)")
        return index

    def _load_vectors(self) -> VectorIndex:
        if self._vectors is None:
            emb = self.embedder
            self._vectors = VectorIndex.load(self.vectors_path, dim=emb.dim, model=emb.fingerprint(),
                                             hnsw_threshold=self.hnsw_threshold)
        return self._vectors

    def saved_vector_ids(self, *, from_disk: bool = False) -> dict[int, int]:
        """Chunk id -> digest of what the vector index holds (as saved with ``from_disk``), read
        without loading the embedder."""
        if self._vectors is not None and not from_disk:
            return self._vectors.digests()
        if not self.vectors_path.exists():
            return {}
        try:
            with np.load(self.vectors_path, allow_pickle=False) as data:
                return dict(zip(data["ids"].tolist(), data["digests"].tolist()))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise StoreError(f"vector index {self.vectors_path} is damaged ({exc})") from exc

    def saved_vector_model(self) -> str | None:
        """The embedder fingerprint the saved vectors were made with."""
        if not self.vectors_path.exists():
            return None
        try:
            with np.load(self.vectors_path, allow_pickle=False) as data:
                return str(data["model"][0])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise StoreError(f"vector index {self.vectors_path} is damaged ({exc})") from exc

    def reload(self) -> None:
        """Forget loaded indexes (another process may have synced)."""
        self._bm25 = self._vectors = None

    # --- keeping in step ------------------------------------------------------------------------

    def sync(self, store: GraphStore, *, progress: Progress | None = None, full: bool = False) -> SyncReport:
        """Bring both indexes in line with the store's chunks. ``full`` re-indexes every chunk."""
        started = time.perf_counter()
        report = SyncReport()
        note = progress or (lambda stage, done, total: None)
        chunks = {c.id: c for c in store.iter_chunks()}
        texts = {cid: document_text(c) for cid, c in chunks.items()}
        digests = {cid: text_digest(t) for cid, t in texts.items()}
        try:
            indexed = {} if full else self.saved_vector_ids()
            # Vectors of another embedder (the model or its settings changed) count as missing.
            if indexed and self.saved_vector_model() != self.embedder.fingerprint():
                indexed = {}
        except StoreError:
            indexed = {}
        if full:
            self._bm25 = BM25Index()
        changed = [cid for cid, d in digests.items() if indexed.get(cid) != d]
        removed = [cid for cid in indexed if cid not in chunks]
        bm25 = self.bm25
        bm25_ids = bm25.ids()
        bm25_add = set(changed) | (set(chunks) - bm25_ids)
        bm25_remove = bm25_ids - set(chunks)
        if not changed and not removed and not bm25_add and not bm25_remove and self.vectors_path.exists():
            report.seconds = time.perf_counter() - started
            return report
        report.added = sum(1 for cid in changed if cid not in indexed)
        report.updated = len(changed) - report.added
        report.removed = len(removed)

        if bm25_add or bm25_remove:
            bm25.remove(bm25_remove)
            bm25.add((cid, texts[cid]) for cid in sorted(bm25_add))
        bm25.save(self.bm25_path)

        vectors = self._load_vectors() if not full else VectorIndex(
            self.embedder.dim, model=self.embedder.fingerprint(), hnsw_threshold=self.hnsw_threshold)
        vectors.replaced_model = None  # what it lacks is embedded now
        self._vectors = vectors
        # Anything the loaded vector file lacks (another model, a damaged file) is embedded too.
        have = vectors.digests()
        todo = sorted(cid for cid, d in digests.items() if have.get(cid) != d)
        vectors.remove([cid for cid in have if cid not in chunks])
        if todo:
            vecs = self._embed([chunks[c] for c in todo], [texts[c] for c in todo], [digests[c] for c in todo],
                               report, note)
            vectors.add(todo, vecs, [digests[c] for c in todo])
        vectors.save(self.vectors_path)
        report.seconds = time.perf_counter() - started
        return report

    def _embed(self, chunks: list[Chunk], texts: list[str], digests: list[int], report: SyncReport,
               note: Progress) -> np.ndarray:
        emb = self.embedder
        cache = EmbeddingCache(self.cache_dir / "embeddings" / f"{_safe(emb.fingerprint())}.sqlite", emb.dim)
        try:
            known = cache.get_many(digests)
            out = np.zeros((len(texts), emb.dim), dtype=np.float32)
            missing = [i for i, d in enumerate(digests) if d not in known]
            for i, d in enumerate(digests):
                if d in known:
                    out[i] = known[d]
            report.from_cache = len(texts) - len(missing)
            for start in range(0, len(missing), EMBED_BATCH * 4):
                part = missing[start:start + EMBED_BATCH * 4]
                vecs = emb.encode([texts[i] for i in part], kinds=[chunks[i].kind for i in part])
                out[part] = vecs
                cache.put_many((digests[i], vecs[j]) for j, i in enumerate(part))
                report.embedded += len(part)
                note("embed", report.embedded, len(missing))
            return out
        finally:
            cache.close()

    def verify(self, store: GraphStore) -> Consistency:
        """Compare the indexes with the store's chunks (ids, and text digests for the vectors)."""
        result = Consistency()
        digests = {c.id: text_digest(document_text(c)) for c in store.iter_chunks()}
        result.chunks = len(digests)
        try:
            indexed = self.saved_vector_ids(from_disk=True)
            bm25_ids = BM25Index.load(self.bm25_path).ids()
        except StoreError as exc:
            result.error = str(exc)
            return result
        saved_model = self.saved_vector_model()
        if indexed and saved_model is not None and saved_model != self.embedder.fingerprint():
            result.error = (f"the vectors were made by {saved_model}; the embedder is now "
                            f"{self.embedder.fingerprint()}")
            return result
        result.vectors, result.bm25 = len(indexed), len(bm25_ids)
        result.missing_vectors = sorted(set(digests) - set(indexed))
        result.extra_vectors = sorted(set(indexed) - set(digests))
        result.stale_vectors = sorted(c for c, d in digests.items() if c in indexed and indexed[c] != d)
        result.missing_bm25 = sorted(set(digests) - bm25_ids)
        result.extra_bm25 = sorted(bm25_ids - set(digests))
        return result


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:120]
