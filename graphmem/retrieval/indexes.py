"""The BM25 and vector indexes of one project, kept in step with the graph's chunks.

``Indexes.sync`` compares the graph's chunks (id and a digest of their text) with what the indexes
hold and applies the difference: new and changed chunks are (re-)indexed, vanished ones removed.
Vectors are cached by text digest per embedder, so re-ingesting unchanged text embeds nothing.

Both indexes are saved atomically; BM25 first, then the vectors, whose saved digests are the record
of what was indexed: after a crash between the two the next sync simply re-applies the change.

Several threads may query one ``Indexes`` while a ``fork`` of it syncs (``Graphmem`` does so): the
fork loads its own copies, and ``adopt`` swaps them in whole once they are saved, so a query never
sees an index half updated. ``refresh`` notices files another process has saved since they were
loaded (by file identity: two ``stat`` calls) and drops the stale copies.

Over a store shared by processes (Neo4j), a process also notices chunk writes whose sync it never
saw (another server's ingest, with another home): each sync records the store's chunk generation
(``CHUNKS_GENERATION``) it read, and ``follow``, at most every ``FOLLOW_EVERY_S`` seconds, syncs
when the store's is another. Syncs of one index folder take turns across processes (a file lock),
and one that finds the folder synced at that generation meanwhile does nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections import deque
import sqlite3
import threading
import time
import weakref
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphmem.errors import StoreError
from graphmem.model import Chunk
from graphmem.retrieval.bm25 import BM25Index
from graphmem.retrieval.vectors import DEFAULT_HNSW_THRESHOLD, VectorIndex
from graphmem.stores.base import CHUNKS_GENERATION, INCOMPLETE

if TYPE_CHECKING:
    from graphmem.retrieval.embed import Embedder
    from graphmem.stores.base import GraphStore

Progress = Callable[[str, int, int], None]
EMBED_BATCH = 256
# Texts per encode call while syncing: the embedder serves one caller at a time, so a query waiting
# behind an ingest's embedding waits for one such part (a fraction of a second), not a whole batch.
ENCODE_PART = 32
FileId = tuple[int, int, int, int]
# Seconds between two checks of the store's chunk generation (one small read): another process's
# ingest is in this process's answers at most this long (plus the sync) after it ends.
FOLLOW_EVERY_S = 2.0


def file_id(path: Path) -> FileId | None:
    """Identity of a file's current contents (device, inode, size, mtime): an atomic save replaces
    the inode, so a changed identity means another copy was saved. ``None`` when it is missing."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class FairLock:
    """A lock granted in the order it was asked for.

    ``threading.Lock`` lets the thread that releases it take it straight back, so an ingest
    embedding part after part could keep a query waiting for the whole ingest; here the releasing
    thread hands it to the longest waiter.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False

    def acquire(self) -> None:
        with self._mutex:
            if not self._held:
                self._held = True
                return
            gate = threading.Lock()
            gate.acquire()
            self._waiters.append(gate)
        gate.acquire()  # released by the holder, which hands the lock over

    def release(self) -> None:
        with self._mutex:
            if self._waiters:
                self._waiters.popleft().release()  # still held: now by the waiter
            else:
                self._held = False

    @property
    def waiting(self) -> int:
        """How many threads wait for it."""
        with self._mutex:
            return len(self._waiters)

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_ENCODE_LOCKS: weakref.WeakKeyDictionary[Any, FairLock] = weakref.WeakKeyDictionary()
_ENCODE_LOCKS_GUARD = threading.Lock()


def _encode_lock(embedder: Any) -> FairLock:
    """One lock per embedder object, shared by every wrapper of it."""
    with _ENCODE_LOCKS_GUARD:
        try:
            lock = _ENCODE_LOCKS.get(embedder)
            if lock is None:
                lock = _ENCODE_LOCKS[embedder] = FairLock()
        except TypeError:  # not weakly referenceable: a lock of its own wrapper
            lock = FairLock()
        return lock


class SerialEmbedder:
    """An embedder whose encode calls take turns.

    The backends keep per-call state on the model object (the tokenizer's truncation length,
    sentence-transformers' ``max_seq_length``), so two threads encoding at once could truncate each
    other's texts. Everything but the encode calls is passed through.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._lock = _encode_lock(inner)

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        with self._lock:
            return self.inner.encode(texts, **kwargs)

    def encode_query(self, text: str) -> np.ndarray:
        with self._lock:
            return self.inner.encode_query(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


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


def make_embedder(source: Embedder | Callable[[], Embedder] | None) -> SerialEmbedder:
    """The embedder ``source`` gives (an embedder, a function making one, or ``None`` for the
    packaged default), safe to share between threads."""
    if source is None:
        from graphmem.retrieval.embed import load_embedder

        made: Any = load_embedder()
    elif callable(source) and not hasattr(source, "encode"):
        made = source()
    else:
        made = source
    return made if isinstance(made, SerialEmbedder) else SerialEmbedder(made)


class LazyEmbedder:
    """Holds a project's embedder, made from ``_embedder_source`` on first use (so a BM25 query or a
    sync with nothing new never loads a model) and shared by the process's threads."""

    _embedder: Embedder | None
    _embedder_source: Embedder | Callable[[], Embedder] | None
    # The embedder's own lock: making it (a model session, a second or so) on one thread must not
    # hold up another thread loading or searching the indexes.
    _embedder_lock: threading.Lock

    @property
    def embedder_loaded(self) -> bool:
        return self._embedder is not None

    @property
    def embedder(self) -> Embedder:
        embedder = self._embedder
        if embedder is None:
            with self._embedder_lock:
                if self._embedder is None:
                    self._embedder = make_embedder(self._embedder_source)
                embedder = self._embedder
        return embedder


class Indexes(LazyEmbedder):
    """BM25 and FAISS indexes of one project, stored in ``directory``.

    The embedder is loaded only when something needs embedding (or a vector query is asked), so a
    sync that finds nothing new, or a BM25 query, never loads a model.

    Loading and swapping are thread-safe and searching loaded indexes is read-only; ``sync`` edits
    the loaded indexes in place, so while other threads query, sync a ``fork`` and ``adopt`` it.
    """

    def __init__(self, directory: str | Path, *, embedder: Embedder | Callable[[], Embedder] | None = None,
                 cache_dir: str | Path | None = None, hnsw_threshold: int = DEFAULT_HNSW_THRESHOLD,
                 prepare: bool = True) -> None:
        self.directory = Path(directory)
        # Build the search structures as an index is loaded, once, rather than by the first queries
        # at the same time; a fork about to be edited skips it (adopt builds them).
        self._prepare = prepare
        self.cache_dir = Path(cache_dir) if cache_dir is not None else self.directory / "cache"
        self.hnsw_threshold = hnsw_threshold
        self._embedder_source = embedder
        self._embedder: Embedder | None = None
        self._embedder_lock = threading.Lock()
        self._bm25: BM25Index | None = None
        self._vectors: VectorIndex | None = None
        # Identity of the file each loaded index was read from (or saved to): see refresh().
        self._bm25_id: FileId | None = None
        self._vectors_id: FileId | None = None
        self._lock = threading.RLock()
        self._follow_lock = threading.Lock()
        self._followed_at: float | None = None  # time.monotonic() of the last check

    # --- parts ----------------------------------------------------------------------------------

    @property
    def bm25_path(self) -> Path:
        return self.directory / "bm25.npz"

    @property
    def vectors_path(self) -> Path:
        return self.directory / "vectors.npz"

    @property
    def generation_path(self) -> Path:
        """The store's chunk generation the saved indexes were synced at."""
        return self.directory / "generation"

    def synced_generation(self) -> str | None:
        """The chunk generation recorded by the last sync of the saved files (by any process)."""
        try:
            return self.generation_path.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None

    def _record_generation(self, generation: str | None) -> None:
        """Record ``generation`` once both files are saved (atomically: a reader sees one value)."""
        if generation is None or generation == self.synced_generation():
            return
        fd, tmp = tempfile.mkstemp(prefix="generation.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(generation)
            os.replace(tmp, self.generation_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @contextlib.contextmanager
    def _sync_lock(self) -> Iterator[None]:
        """Syncs of this folder take turns, across processes sharing the home."""
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # Windows: saves stay atomic; two syncs may duplicate work
            yield
            return
        with open(self.directory / "sync.lock", "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    @property
    def bm25(self) -> BM25Index:
        index = self._bm25
        if index is None:
            with self._lock:
                if self._bm25 is None:
                    ident = file_id(self.bm25_path)
                    loaded = BM25Index.load(self.bm25_path)
                    if self._prepare:
                        loaded.prepare()
                    self._bm25, self._bm25_id = loaded, ident
                index = self._bm25
        return index

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
        index = self._vectors
        if index is None:
            emb = self.embedder
            with self._lock:
                if self._vectors is None:
                    ident = file_id(self.vectors_path)
                    loaded = VectorIndex.load(self.vectors_path, dim=emb.dim, model=emb.fingerprint(),
                                              hnsw_threshold=self.hnsw_threshold)
                    if self._prepare:
                        loaded.prepare()
                    self._vectors, self._vectors_id = loaded, ident
                index = self._vectors
        return index

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
        with self._lock:
            self._bm25 = self._vectors = None
            self._bm25_id = self._vectors_id = None

    def refresh(self) -> bool:
        """Drop each loaded index whose file another process (or another ``Indexes``) has saved
        since; the next use loads the new one. Cheap enough to call before every query."""
        dropped = False
        with self._lock:
            if self._bm25 is not None and file_id(self.bm25_path) != self._bm25_id:
                self._bm25, self._bm25_id, dropped = None, None, True
            if self._vectors is not None and file_id(self.vectors_path) != self._vectors_id:
                self._vectors, self._vectors_id, dropped = None, None, True
        return dropped

    def follow(self, store: GraphStore) -> SyncReport | None:
        """Catch up with chunk writes this process did not sync (see the module docstring): at
        most every ``FOLLOW_EVERY_S`` seconds, by one thread at a time (the others go on with the
        loaded indexes), and not while an ingest is writing (it syncs when done). Syncs a fork and
        adopts it, as ``Graphmem.sync_indexes`` does; ``None`` when there was nothing to check."""
        now = time.monotonic()
        if self._followed_at is not None and now - self._followed_at < FOLLOW_EVERY_S:
            return None
        if not self._follow_lock.acquire(blocking=False):
            return None
        try:
            self._followed_at = now
            generation = store.get_meta(CHUNKS_GENERATION)
            if generation is None or generation == self.synced_generation() or store.get_meta(INCOMPLETE):
                return None
            fork = self.fork()
            report = fork.sync(store, unless_synced_at=generation)
            self.adopt(fork)
            return report
        finally:
            self._follow_lock.release()

    def fork(self) -> Indexes:
        """Another handle on the same files and embedder with nothing loaded: ``sync`` it while
        this one serves queries, then ``adopt`` it."""
        return Indexes(self.directory, embedder=lambda: self.embedder, cache_dir=self.cache_dir,
                       hnsw_threshold=self.hnsw_threshold, prepare=False)

    def adopt(self, other: Indexes) -> None:
        """Serve from the indexes ``other`` holds (a fork that has synced and saved them): each is
        swapped in whole, so a concurrent query uses the old one or the new one. ``other`` lets go
        of them, so nothing edits them again."""
        with other._lock:
            taken = (other._bm25, other._bm25_id, other._vectors, other._vectors_id)
            other._bm25 = other._vectors = None
            other._bm25_id = other._vectors_id = None
        bm25, bm25_id, vectors, vectors_id = taken
        if vectors is not None and vectors.replaced_model:
            vectors = None
        for index in (bm25, vectors):  # built before the swap: nobody else holds them yet
            if index is not None:
                index.prepare()
        with self._lock:
            if bm25 is not None:
                self._bm25, self._bm25_id = bm25, bm25_id
            if vectors is not None:
                self._vectors, self._vectors_id = vectors, vectors_id

    # --- keeping in step ------------------------------------------------------------------------

    def sync(self, store: GraphStore, *, progress: Progress | None = None, full: bool = False,
             unless_synced_at: str | None = None) -> SyncReport:
        """Bring both indexes in line with the store's chunks. ``full`` re-indexes every chunk;
        ``unless_synced_at``: do nothing if the saved files were synced at this chunk generation
        (by another process, while this one waited for its turn)."""
        with self._sync_lock():
            if unless_synced_at is not None and unless_synced_at == self.synced_generation():
                return SyncReport()
            # Read before the chunks: a write after it leaves a generation this one is not.
            generation = store.get_meta(CHUNKS_GENERATION)
            report = self._sync(store, progress=progress, full=full)
            self._record_generation(generation)
            return report

    def _sync(self, store: GraphStore, *, progress: Progress | None, full: bool) -> SyncReport:
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
            self._bm25, self._bm25_id = BM25Index(), None
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
        self._bm25_id = file_id(self.bm25_path)

        vectors = self._load_vectors() if not full else VectorIndex(
            self.embedder.dim, model=self.embedder.fingerprint(), hnsw_threshold=self.hnsw_threshold)
        vectors.replaced_model = None  # what it lacks is embedded now
        self._vectors = vectors
        # Anything the loaded vector file lacks (another model, a damaged file) is embedded too.
        have = vectors.digests()
        todo = sorted(cid for cid, d in digests.items() if have.get(cid) != d)
        vectors.remove([cid for cid in have if cid not in chunks])
        if todo:
            vecs = embed_chunks(self.embedder, self.cache_dir, [chunks[c] for c in todo], [texts[c] for c in todo],
                                [digests[c] for c in todo], report, note)
            vectors.add(todo, vecs, [digests[c] for c in todo])
        vectors.save(self.vectors_path)
        self._vectors_id = file_id(self.vectors_path)
        report.seconds = time.perf_counter() - started
        return report

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


def embed_chunks(emb: Embedder, cache_dir: Path, chunks: list[Chunk], texts: list[str], digests: list[int],
                 report: SyncReport, note: Progress) -> np.ndarray:
    """Vectors of ``texts`` (the document texts of ``chunks``, with their digests): from the
    embedding cache under ``cache_dir`` where known, else encoded and cached."""
    cache = EmbeddingCache(cache_dir / "embeddings" / f"{_safe(emb.fingerprint())}.sqlite", emb.dim)
    try:
        known = cache.get_many(digests)
        out = np.zeros((len(texts), emb.dim), dtype=np.float32)
        missing = [i for i, d in enumerate(digests) if d not in known]
        for i, d in enumerate(digests):
            if d in known:
                out[i] = known[d]
        report.from_cache += len(texts) - len(missing)
        # Sorted by kind and length, so each small encode call pads about as little as one
        # large call that sorts internally would.
        missing.sort(key=lambda i: (chunks[i].kind, len(texts[i])))
        for start in range(0, len(missing), EMBED_BATCH * 4):
            part = missing[start:start + EMBED_BATCH * 4]
            vecs = np.concatenate([
                emb.encode([texts[i] for i in piece], kinds=[chunks[i].kind for i in piece])
                for piece in (part[j:j + ENCODE_PART] for j in range(0, len(part), ENCODE_PART))])
            out[part] = vecs
            cache.put_many((digests[i], vecs[j]) for j, i in enumerate(part))
            report.embedded += len(part)
            note("embed", report.embedded, len(missing))
        return out
    finally:
        cache.close()


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:120]
