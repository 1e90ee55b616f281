"""An incremental BM25 index over chunks identified by int64 ids.

Documents are kept as per-document term counts (term ids and counts, tokenised once with
``graphmem.retrieval.tokenize``). Searching uses, as bm25s does, a precomputed sparse CSC matrix of
``idf(term) * tf-part(doc, term)`` weights: a query sums its terms' columns into a dense score array
and takes the top k with ``np.argpartition``. Adding or removing documents only marks the matrix
stale; the next search rebuilds it from the kept counts with vectorised numpy (N, average length and
every idf change with each edit, so all weights are recomputed anyway). A saved index holds the
matrix beside the counts, so a loaded one searches at once.

Scoring, for a document D and a query with distinct terms q:

    score(D) = sum_q idf(q) * tf(q, D) * (k1 + 1) / (tf(q, D) + k1 * (1 - b + b * |D| / avgdl))

- ``idf="lucene"`` (default): ``log(1 + (N - df + 0.5) / (df + 0.5))``, never negative.
- ``idf="okapi"``: ``log(N - df + 0.5) - log(df + 0.5)`` with negative values replaced by
  ``epsilon * mean idf`` (mean over all indexed terms), exactly as ``rank_bm25.BM25Okapi``.

A term repeated in the query counts once (``rank_bm25`` would add it once per repetition; with a
query of distinct tokens the okapi scores are the same). Ties are broken by ascending id, so results
do not depend on the order in which documents were added.

The index is saved as one ``.npz`` file (no pickle) written to a temporary file in the same folder
and renamed into place. Not safe for concurrent writers; searches after the last edit are read-only
except for the lazy rebuild.
"""

from __future__ import annotations

import math
import operator
import zipfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np

from graphmem.errors import StoreError
from graphmem.retrieval.files import save_npz_atomic
from graphmem.retrieval.tokenize import tokenize

__all__ = ["BM25Index", "IdfKind"]

FORMAT = 1
IdfKind = Literal["lucene", "okapi"]
_INT64_MIN, _INT64_END = -(2**63), 2**63
_EMPTY_DOC = np.empty((2, 0), dtype=np.int32)
_EMPTY_DOC.flags.writeable = False


class _Vocab(dict[str, int]):
    """term -> id; an unknown term read with ``[]`` gets the next id (use ``.get`` to only look)."""

    def __init__(self, terms: Iterable[str] = ()) -> None:
        self.terms: list[str] = []
        super().__init__()
        for term in terms:
            self.__missing__(term)

    @classmethod
    def of_distinct(cls, terms: list[str]) -> _Vocab:
        """The vocabulary of ``terms``, known to be distinct, numbered in order (a saved index's,
        read in one step rather than a term at a time)."""
        vocab = cls()
        vocab.update(zip(terms, range(len(terms))))
        vocab.terms = terms
        return vocab

    def __missing__(self, term: str) -> int:
        tid = self[term] = len(self.terms)
        self.terms.append(term)
        return tid


class BM25Index:
    """BM25 over documents ``(id, text)``; ids are int64 (graphmem chunk ids are positive 63-bit)."""

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, idf: IdfKind = "lucene", epsilon: float = 0.25) -> None:
        if not (math.isfinite(k1) and k1 >= 0):
            raise ValueError(f"k1 must be a finite number >= 0, got {k1!r}")
        if not (math.isfinite(b) and 0 <= b <= 1):
            raise ValueError(f"b must be between 0 and 1, got {b!r}")
        if idf not in ("lucene", "okapi"):
            raise ValueError(f"idf must be 'lucene' or 'okapi', got {idf!r}")
        if not math.isfinite(epsilon):
            raise ValueError(f"epsilon must be finite, got {epsilon!r}")
        self.k1, self.b, self.idf, self.epsilon = float(k1), float(b), idf, float(epsilon)
        self._vocab = _Vocab()
        # id -> int32 array of shape (2, m): row 0 term ids, row 1 their counts (> 0) in the document.
        self._docs: dict[int, np.ndarray] = {}
        self._stale = True
        # Built state, valid while not stale: ids in ascending order, CSC weights (docs x terms).
        self._ids = np.empty(0, dtype=np.int64)
        self._indptr = np.zeros(1, dtype=np.int64)
        self._indices = np.empty(0, dtype=np.int32)
        self._data = np.empty(0, dtype=np.float32)

    # --- editing ---------------------------------------------------------------------------------

    def add(self, items: Iterable[tuple[int, str]]) -> None:
        """Index ``(id, text)`` pairs; an id already present has its text replaced."""
        vocab_id = self._vocab.__getitem__
        docs = self._docs
        for doc_id, text in items:
            doc_id = operator.index(doc_id)
            if not _INT64_MIN <= doc_id < _INT64_END:
                raise ValueError(f"document id {doc_id} does not fit in int64")
            counts = Counter(tokenize(text))
            if counts:
                docs[doc_id] = np.array((list(map(vocab_id, counts)), list(counts.values())), dtype=np.int32)
            else:
                docs[doc_id] = _EMPTY_DOC  # still a document: it counts in N and the average length
            self._stale = True

    def remove(self, ids: Iterable[int]) -> None:
        """Forget documents by id; unknown ids are ignored."""
        docs = self._docs
        for doc_id in ids:
            if docs.pop(doc_id, None) is not None:
                self._stale = True

    def ids(self) -> set[int]:
        """The ids of all indexed documents."""
        return set(self._docs)

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    # --- searching -------------------------------------------------------------------------------

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """BM25 score of every document: ``(ids ascending as int64, float32 scores aligned with them)``."""
        self._build()
        return self._ids.copy(), self._score_all(self._query_terms(query))

    def search(self, query: str, k: int = 10) -> list[tuple[int, float]]:
        """The ``k`` best ``(id, score)`` pairs, best first (ties by ascending id); only scores > 0."""
        self._build()
        terms = self._query_terms(query)
        if k <= 0 or not terms or not len(self._ids):
            return []
        scores = self._score_all(terms)
        if k < len(scores):
            kth = float(scores[np.argpartition(-scores, k - 1)[:k]].min())
            # Every document tied with the k-th score is kept, so the id tie-break below is exact.
            cand = np.flatnonzero(scores >= kth) if kth > 0 else np.flatnonzero(scores > 0)
        else:
            cand = np.flatnonzero(scores > 0)
        cand_scores = scores[cand]
        order = np.lexsort((self._ids[cand], -cand_scores))[:k]
        return list(zip(self._ids[cand[order]].tolist(), cand_scores[order].astype(np.float64).tolist()))

    def prepare(self) -> None:
        """Build the weight matrix now, so that concurrent searches of an index nobody edits only read."""
        self._build()

    def _query_terms(self, query: str) -> list[int]:
        """Distinct known term ids of the query, in first-seen order (a repeated term counts once)."""
        get = self._vocab.get
        return [t for t in dict.fromkeys(map(get, tokenize(query))) if t is not None]

    def _score_all(self, terms: list[int]) -> np.ndarray:
        scores = np.zeros(len(self._ids), dtype=np.float32)
        indptr, indices, data = self._indptr, self._indices, self._data
        spans = [(indptr[t], indptr[t + 1]) for t in terms if t < len(indptr) - 1]
        if spans:
            # One scatter-add over all the query's columns: about twice as fast as one per column.
            np.add.at(scores, np.concatenate([indices[lo:hi] for lo, hi in spans]),
                      np.concatenate([data[lo:hi] for lo, hi in spans]))
        return scores

    # --- building --------------------------------------------------------------------------------

    def _pack(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All documents in ascending id order: ``(ids, terms per doc, (2, total) term ids and counts)``."""
        n = len(self._docs)
        ids = np.fromiter(self._docs.keys(), dtype=np.int64, count=n)
        order = np.argsort(ids, kind="stable")
        arrays = list(self._docs.values())
        arrays = [arrays[i] for i in order.tolist()]
        nnz = np.fromiter((a.shape[1] for a in arrays), dtype=np.int64, count=n)
        packed = np.concatenate(arrays, axis=1) if arrays else np.empty((2, 0), dtype=np.int32)
        return ids[order], nnz, packed

    def _idf(self, df: np.ndarray, n_docs: int) -> np.ndarray:
        """idf per term id from document frequencies (0 for terms no document holds)."""
        idf = np.zeros(len(df), dtype=np.float64)
        live = df > 0
        d = df[live].astype(np.float64)
        if self.idf == "lucene":
            idf[live] = np.log1p((n_docs - d + 0.5) / (d + 0.5))
        else:
            raw = np.log(n_docs - d + 0.5) - np.log(d + 0.5)
            if raw.size:
                # rank_bm25: the mean is taken before the floor, over every indexed term. fsum is
                # exact, so the mean does not depend on the order terms were first seen in.
                raw[raw < 0] = self.epsilon * (math.fsum(raw.tolist()) / raw.size)
            idf[live] = raw
        return idf

    def _compact_vocab(self, df: np.ndarray) -> None:
        """Drop terms no document holds any more and renumber the kept ones."""
        live = np.flatnonzero(df > 0)
        remap = np.full(len(df), -1, dtype=np.int32)
        remap[live] = np.arange(len(live), dtype=np.int32)
        for doc_id, arr in self._docs.items():
            if arr.shape[1]:
                new = arr.copy()  # arrays may be read-only views of a loaded file
                new[0] = remap[arr[0]]
                self._docs[doc_id] = new
        terms = self._vocab.terms
        self._vocab = _Vocab(terms[i] for i in live.tolist())

    def _build(self) -> None:
        """Recompute the weight matrix from the per-document counts when documents changed."""
        if not self._stale:
            return
        n_terms = len(self._vocab.terms)
        ids, nnz, packed = self._pack()
        df = np.bincount(packed[0], minlength=n_terms)
        # Edits leave terms no document uses; once they outnumber the live ones, renumber so the
        # matrix and the vocabulary stay proportional to the live corpus.
        dead = n_terms - int(np.count_nonzero(df))
        if dead > max(10_000, n_terms // 2):
            self._compact_vocab(df)
            n_terms = len(self._vocab.terms)
            ids, nnz, packed = self._pack()
            df = np.bincount(packed[0], minlength=n_terms)
        self._ids = ids
        self._indptr, self._indices, self._data = self._matrix(nnz, packed, df)
        self._stale = False

    def _matrix(self, nnz: np.ndarray, packed: np.ndarray, df: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The weight matrix in CSC form ``(indptr, document positions, weights)`` of documents in
        order (``nnz`` terms each, ``packed`` their term ids and counts), ``df`` per term id."""
        n_terms = len(df)
        n_docs = len(nnz)
        terms = packed[0]
        doc_ptr = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(nnz, out=doc_ptr[1:])
        # Integer sums keep avgdl bit-identical whatever the order documents were added in.
        csum = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(packed[1], out=csum[1:])
        doc_len = csum[doc_ptr[1:]] - csum[doc_ptr[:-1]]
        del csum
        total = int(doc_len.sum())
        avgdl = total / n_docs if n_docs else 0.0
        data = np.zeros(len(terms), dtype=np.float32)
        if avgdl > 0:
            idf = self._idf(df, n_docs)
            norm = self.k1 * (1 - self.b + self.b * doc_len / avgdl)
            # float64 arithmetic, stored as float32; done in slices of documents so the temporaries
            # stay small (a few MB) instead of several arrays the size of the whole matrix.
            step = 16_384
            for d0 in range(0, n_docs, step):
                d1 = min(d0 + step, n_docs)
                lo, hi = int(doc_ptr[d0]), int(doc_ptr[d1])
                tf = packed[1, lo:hi].astype(np.float64)
                w = np.repeat(norm[d0:d1], nnz[d0:d1])
                w += tf
                np.divide(tf, w, out=w)
                w *= self.k1 + 1
                w *= idf[terms[lo:hi]]
                data[lo:hi] = w
        # The packed arrays are already CSR (documents in order); a stable sort by term makes them
        # CSC, each column's documents still in ascending order. Sorting 16-bit keys is a radix
        # sort, several times faster; most vocabularies fit.
        keys = terms.astype(np.uint16) if n_terms <= 1 << 16 else terms
        order = np.argsort(keys, kind="stable")
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        doc_of = np.repeat(np.arange(n_docs, dtype=np.int32), nnz)
        return indptr, doc_of[order], data[order]

    # --- persistence -----------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the index to ``path`` atomically (temporary file in the same folder, then rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        ids, nnz, packed = self._pack()
        # Save only the terms some document holds, renumbered densely.
        df = np.bincount(packed[0], minlength=len(self._vocab.terms))
        live = np.flatnonzero(df > 0)
        remap = np.full(len(df), -1, dtype=np.int32)
        remap[live] = np.arange(len(live), dtype=np.int32)
        vocab = "\n".join(self._vocab.terms[i] for i in live.tolist()).encode("utf-8", "surrogatepass")
        terms = remap[packed[0]]
        # The weight matrix too: a new process then searches without building it first.
        indptr, indices, data = self._matrix(nnz, np.stack((terms, packed[1])), df[live])
        arrays: dict[str, np.ndarray] = {
            "format": np.array([FORMAT], dtype=np.int64),
            "params": np.array([self.k1, self.b, self.epsilon], dtype=np.float64),
            "idf": np.array([self.idf]),
            "ids": ids,
            "nnz": nnz,
            "terms": terms,
            "counts": packed[1],
            "matrix_indptr": indptr,
            "matrix_docs": indices,
            "matrix_weights": data,
            "vocab_size": np.array([len(live)], dtype=np.int64),
            # Tokens never contain whitespace, so one newline-joined UTF-8 blob holds the vocabulary
            # compactly (a numpy string array would pad every term to the longest one).
            "vocab": np.frombuffer(vocab, dtype=np.uint8),
        }
        save_npz_atomic(path, arrays)

    @classmethod
    def load(cls, path: str | Path, *, k1: float = 1.5, b: float = 0.75, idf: IdfKind = "lucene",
             epsilon: float = 0.25) -> BM25Index:
        """Read an index saved by ``save``. A missing file gives an empty index with the given
        parameters; a saved one keeps its own. A damaged file raises ``StoreError``."""
        path = Path(path)
        if not path.exists():
            return cls(k1=k1, b=b, idf=idf, epsilon=epsilon)
        try:
            with np.load(path, allow_pickle=False) as data:
                fmt = int(data["format"][0])
                if fmt != FORMAT:
                    raise StoreError(f"BM25 index {path} has format {fmt}, expected {FORMAT}")
                params = data["params"].astype(np.float64)
                idf_kind = str(data["idf"][0])
                ids, nnz = data["ids"].astype(np.int64), data["nnz"].astype(np.int64)
                terms, counts = data["terms"].astype(np.int32), data["counts"].astype(np.int32)
                vocab_size = int(data["vocab_size"][0])
                vocab_blob = data["vocab"].astype(np.uint8).tobytes()
                # Absent from files of earlier versions: their matrix is built at the first search.
                matrix = (tuple(data[name] for name in ("matrix_indptr", "matrix_docs", "matrix_weights"))
                          if "matrix_weights" in data.files else None)
            vocab = vocab_blob.decode("utf-8", "surrogatepass").split("\n") if vocab_size else []
            index = cls(k1=float(params[0]), b=float(params[1]), idf=idf_kind,  # type: ignore[arg-type]
                        epsilon=float(params[2]))
        except StoreError:
            raise
        except (OSError, ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError, zipfile.BadZipFile,
                EOFError) as exc:
            raise StoreError(f"BM25 index {path} is damaged ({exc.__class__.__name__}: {exc}); "
                             "delete it to rebuild from the graph") from exc
        problem = _check_arrays(ids, nnz, terms, counts, vocab, vocab_size)
        if problem:
            raise StoreError(f"BM25 index {path} is inconsistent ({problem}); delete it to rebuild from the graph")
        index._vocab = _Vocab.of_distinct(vocab)
        packed = np.stack((terms, counts))
        ends = np.cumsum(nnz).tolist()
        starts = [0, *ends[:-1]]
        # Views into one packed array: cheap to make, and a replaced document simply drops its view.
        index._docs = {doc_id: packed[:, lo:hi] if hi > lo else _EMPTY_DOC
                       for doc_id, lo, hi in zip(ids.tolist(), starts, ends)}
        if matrix is not None:
            problem = _check_matrix(*matrix, n_terms=vocab_size, n_docs=len(ids), nnz=len(terms))
            if problem:
                raise StoreError(f"BM25 index {path} is inconsistent ({problem}); delete it to rebuild from the graph")
            index._ids = ids
            index._indptr, index._indices, index._data = matrix
            index._stale = False
        return index


def _check_matrix(indptr: np.ndarray, docs: np.ndarray, weights: np.ndarray, *, n_terms: int, n_docs: int,
                  nnz: int) -> str | None:
    """What is wrong with a loaded weight matrix, or None."""
    if (indptr.dtype != np.int64 or docs.dtype != np.int32 or weights.dtype != np.float32
            or indptr.shape != (n_terms + 1,) or docs.shape != (nnz,) or weights.shape != (nnz,)):
        return "weight matrix has the wrong shape or type"
    if int(indptr[0]) != 0 or int(indptr[-1]) != nnz or (np.diff(indptr) < 0).any():
        return "weight matrix column pointers are out of order"
    if nnz and (int(docs.min()) < 0 or int(docs.max()) >= n_docs or not np.isfinite(weights).all()):
        return "weight matrix entry out of range"
    return None


def _check_arrays(ids: np.ndarray, nnz: np.ndarray, terms: np.ndarray, counts: np.ndarray, vocab: list[str],
                  vocab_size: int) -> str | None:
    """What is wrong with loaded arrays, or None."""
    if ids.ndim != 1 or nnz.shape != ids.shape:
        return "ids and per-document term counts differ in length"
    ordered = np.sort(ids)  # not np.unique: on numpy 2 its first call imports numpy.ma (50 ms)
    if (ordered[1:] == ordered[:-1]).any():
        return "duplicate document ids"
    if (nnz < 0).any() or int(nnz.sum()) != len(terms) or counts.shape != terms.shape:
        return "term arrays do not match the documents"
    if len(vocab) != vocab_size or len(set(vocab)) != len(vocab):
        return "vocabulary size mismatch or duplicate terms"
    if len(terms) and (int(terms.min()) < 0 or int(terms.max()) >= vocab_size or int(counts.min()) <= 0):
        return "term id or count out of range"
    return None
