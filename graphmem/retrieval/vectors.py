"""The FAISS mirror of the graph's chunks.

Vectors are kept by chunk id (the stable 63-bit id of ``graphmem.model.chunk_id``) beside a digest
of the text they were computed from, so a sync re-embeds exactly the chunks whose text changed.
Search is exact inner product (over normalised vectors = cosine) up to ``hnsw_threshold`` vectors,
one matrix-vector product over the vectors the index keeps anyway, and FAISS HNSW above it (FAISS
is imported only then: a small project's process never loads it).

The whole index is one ``.npz`` file written to a temporary name and renamed into place, so a
crash leaves the previous version intact. HNSW cannot delete in place: removed ids are masked and
the graph is rebuilt once masked ids pass a share of the index.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from graphmem.errors import ConfigError, StoreError
from graphmem.retrieval.files import save_npz_atomic

if TYPE_CHECKING:
    import faiss

FORMAT = 1
# Exact search up to this many vectors (a 100,000 x 384 flat scan takes 15-30 ms on two cores; HNSW
# about 2 ms at the same top-10 on bench/bench_retrieval.py's corpus); GRAPHMEM_HNSW_THRESHOLD overrides it.
def _threshold() -> int:
    raw = os.environ.get("GRAPHMEM_HNSW_THRESHOLD", "50000")
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"GRAPHMEM_HNSW_THRESHOLD must be a whole number, not {raw!r}") from None


DEFAULT_HNSW_THRESHOLD = _threshold()
HNSW_M = 32
HNSW_EF_SEARCH = 512  # top-10 recall 1.0 against exact search on the 100k bench corpus; ~2 ms
HNSW_EF_CONSTRUCTION = 80
# Rebuild the HNSW graph once this share of its entries are removed ids.
HNSW_REBUILD_SHARE = 0.2


class VectorIndex:
    """Chunk vectors by id, searchable exactly or with FAISS HNSW; saved atomically as one file."""

    def __init__(self, dim: int, *, model: str = "", hnsw_threshold: int = DEFAULT_HNSW_THRESHOLD) -> None:
        self.dim = dim
        self.model = model
        self.hnsw_threshold = hnsw_threshold
        self._ids = np.zeros(0, dtype=np.int64)
        self._digests = np.zeros(0, dtype=np.int64)
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._pos: dict[int, int] = {}
        self._faiss: faiss.IndexHNSWFlat | None = None  # built once the index is large (see ``kind``)
        # Row of the HNSW graph -> chunk id, the live row of each id, rows removed since the build
        self._faiss_ids = np.zeros(0, dtype=np.int64)
        self._row_of: dict[int, int] = {}
        self._masked: set[int] = set()
        self.replaced_model: str | None = None  # set by load() when the file held another model's vectors

    # --- contents -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self) -> set[int]:
        return set(self._pos)

    def digests(self) -> dict[int, int]:
        """Chunk id -> digest of the text its vector was computed from."""
        return dict(zip(self._ids.tolist(), self._digests.tolist()))

    def vector(self, chunk_id: int) -> np.ndarray | None:
        pos = self._pos.get(chunk_id)
        return None if pos is None else self._vectors[pos]

    @property
    def kind(self) -> str:
        return "hnsw" if len(self._ids) > self.hnsw_threshold else "flat"

    def add(self, ids: Iterable[int], vectors: np.ndarray, digests: Iterable[int] | None = None) -> None:
        """Add or replace vectors (rows of ``vectors``, normalised) under these chunk ids."""
        ids_a = np.asarray(list(ids), dtype=np.int64)
        vecs = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if len(ids_a) != len(vecs):
            raise ValueError(f"{len(ids_a)} ids for {len(vecs)} vectors")
        if len(set(ids_a.tolist())) != len(ids_a):
            raise ValueError("duplicate ids in one add")
        dig = (np.asarray(list(digests), dtype=np.int64) if digests is not None
               else np.zeros(len(ids_a), dtype=np.int64))
        replaced = [i for i in ids_a.tolist() if i in self._pos]
        if replaced:
            self.remove(replaced)
        self._ids = np.concatenate([self._ids, ids_a])
        self._digests = np.concatenate([self._digests, dig])
        self._vectors = np.concatenate([self._vectors, vecs]) if len(self._vectors) else vecs.copy()
        start = len(self._ids) - len(ids_a)
        for offset, i in enumerate(ids_a.tolist()):
            self._pos[i] = start + offset
        self._faiss_add(ids_a, vecs)

    def remove(self, ids: Iterable[int]) -> int:
        """Drop these ids (unknown ids are ignored); return how many were dropped."""
        gone = {i for i in ids if i in self._pos}
        if not gone:
            return 0
        keep = ~np.isin(self._ids, np.fromiter(gone, dtype=np.int64, count=len(gone)))
        self._ids, self._digests, self._vectors = self._ids[keep], self._digests[keep], self._vectors[keep]
        self._pos = {i: p for p, i in enumerate(self._ids.tolist())}
        if self._faiss is not None:
            self._masked |= {self._row_of.pop(i) for i in gone if i in self._row_of}
        return len(gone)

    # --- search ---------------------------------------------------------------------------------

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest chunk ids to a normalised query vector, best first, with cosine scores."""
        if not len(self._ids) or k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(self.dim)
        if self.kind == "flat":
            scores = self._vectors @ q
            fetch = min(k, len(scores))
            top = np.argpartition(-scores, fetch - 1)[:fetch] if fetch < len(scores) else np.arange(len(scores))
            order = top[np.argsort(-scores[top], kind="stable")]  # equal scores: the earlier row first
            return [(cid, float(score)) for cid, score in zip(self._ids[order].tolist(), scores[order].tolist())]
        import faiss

        index = self._index()
        fetch = min(len(self._faiss_ids), k + len(self._masked))
        # The candidate list must be wider than what is asked for, or recall drops sharply.
        params = faiss.SearchParametersHNSW(efSearch=max(HNSW_EF_SEARCH, 2 * fetch))  # type: ignore[attr-defined]
        scores, rows = index.search(q.reshape(1, self.dim), fetch, params=params)
        out: list[tuple[int, float]] = []
        for row, score in zip(rows[0].tolist(), scores[0].tolist()):
            if row < 0 or row in self._masked:
                continue
            out.append((int(self._faiss_ids[row]), float(score)))
            if len(out) == k:
                break
        return out

    def prepare(self) -> None:
        """Build the HNSW graph now (when the index is large enough to use one), so that concurrent
        searches of an index nobody edits only read."""
        if self.kind == "hnsw":
            self._index()

    def _index(self) -> faiss.IndexHNSWFlat:
        if self._faiss is None or len(self._masked) > HNSW_REBUILD_SHARE * max(1, len(self._faiss_ids)):
            self._build()
        assert self._faiss is not None
        return self._faiss

    def _build(self) -> None:
        import faiss

        index = faiss.IndexHNSWFlat(self.dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
        index.add(self._vectors)
        self._faiss, self._faiss_ids = index, self._ids.copy()
        self._row_of = {i: r for r, i in enumerate(self._faiss_ids.tolist())}
        self._masked = set()

    def _faiss_add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        if self._faiss is None:
            return  # built on the first search that needs it
        start = len(self._faiss_ids)
        self._faiss.add(vecs)
        self._faiss_ids = np.concatenate([self._faiss_ids, ids])
        self._row_of.update((i, start + r) for r, i in enumerate(ids.tolist()))

    # --- persistence ----------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the index to ``path`` atomically (temporary file in the same folder, then rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {
            "format": np.array([FORMAT], dtype=np.int64),
            "dim": np.array([self.dim], dtype=np.int64),
            "model": np.array([self.model]),
            "ids": self._ids, "digests": self._digests, "vectors": self._vectors,
        }
        if self.kind == "hnsw":
            import faiss

            index = self._index()
            arrays["hnsw"] = faiss.serialize_index(index)
            arrays["hnsw_ids"] = self._faiss_ids
            arrays["masked"] = np.fromiter(self._masked, dtype=np.int64, count=len(self._masked))
        save_npz_atomic(path, arrays)

    @classmethod
    def load(cls, path: str | Path, *, dim: int, model: str = "",
             hnsw_threshold: int = DEFAULT_HNSW_THRESHOLD) -> VectorIndex:
        """Read an index; a missing file gives an empty one, a damaged one raises ``StoreError``."""
        index = cls(dim, model=model, hnsw_threshold=hnsw_threshold)
        path = Path(path)
        if not path.exists():
            return index
        try:
            with np.load(path, allow_pickle=False) as data:
                if int(data["format"][0]) != FORMAT:
                    raise StoreError(f"vector index {path} has format {int(data['format'][0])}, expected {FORMAT}")
                saved_dim, saved_model = int(data["dim"][0]), str(data["model"][0])
                ids, digests, vectors = data["ids"], data["digests"], data["vectors"]
                hnsw = data["hnsw"] if "hnsw" in data.files else None
                hnsw_ids = data["hnsw_ids"] if "hnsw_ids" in data.files else None
                masked = data["masked"] if "masked" in data.files else None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            raise StoreError(f"vector index {path} is damaged ({exc}); run `graphmem doctor --repair`") from exc
        if saved_dim != dim or (model and saved_model != model):
            # Vectors from another model are useless: start empty (the next sync re-embeds) and
            # say so, so that a search does not quietly find nothing.
            index.replaced_model = saved_model or f"a {saved_dim}-dimensional model"
            return index
        if vectors.shape != (len(ids), dim) or len(digests) != len(ids):
            raise StoreError(f"vector index {path} is inconsistent; run `graphmem doctor --repair`")
        index._ids, index._digests = ids.astype(np.int64), digests.astype(np.int64)
        index._vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        index._pos = {i: p for p, i in enumerate(index._ids.tolist())}
        if hnsw is not None and hnsw_ids is not None:
            import faiss

            index._faiss = faiss.deserialize_index(hnsw)
            index._faiss.hnsw.efSearch = HNSW_EF_SEARCH  # type: ignore[attr-defined]
            index._faiss_ids = hnsw_ids.astype(np.int64)
            index._masked = set(masked.tolist()) if masked is not None else set()
            index._row_of = {i: r for r, i in enumerate(index._faiss_ids.tolist()) if r not in index._masked}
        return index
