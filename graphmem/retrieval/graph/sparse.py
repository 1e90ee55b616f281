"""Square sparse matrices for graph retrieval, in numpy alone.

Graph retrieval asks three things of a weighted graph held as a matrix: building it from (row,
column, value) triples with repeated pairs summed, multiplying it by a vector (PageRank's power
iteration) and the cheapest paths through it (evidence). Importing ``scipy.sparse`` and its graph
algorithms costs a new process more than a warm question takes, and the graphs a question walks
hold thousands of entries, so these few operations are written here with numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Csr", "cheapest_paths"]

# From this many entries (a passage corpus's whole entity layer, not a question's walk) a product
# goes through scipy's compiled one, several times faster than numpy's gather and sum; scipy is
# imported then, and only then.
COMPILED_PRODUCT_FROM = 50_000


@dataclass(slots=True)
class Csr:
    """An ``n`` x ``n`` matrix in compressed rows: entry ``i`` is ``(row[i], indices[i], data[i])``,
    rows in order and columns ascending within a row (``row`` is kept beside ``indptr``, since
    every operation here reads it)."""

    indptr: np.ndarray  # int64, n + 1
    row: np.ndarray  # int64, the row of each entry
    indices: np.ndarray  # int64, the column of each entry
    data: np.ndarray  # float64
    n: int
    _compiled: Any = field(default=None, repr=False, compare=False)  # scipy's matrix, made once when large

    @classmethod
    def from_triples(cls, rows: object, cols: object, vals: object, n: int) -> Csr:
        """The matrix holding ``vals`` at ``(rows, cols)``; values of a repeated pair are summed in
        the order given."""
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        c = np.asarray(cols, dtype=np.int64).reshape(-1)
        v = np.asarray(vals, dtype=np.float64).reshape(-1)
        if not r.shape == c.shape == v.shape:
            raise ValueError("rows, columns and values differ in length")
        if r.size and (min(int(r.min()), int(c.min())) < 0 or max(int(r.max()), int(c.max())) >= n):
            raise ValueError(f"an entry lies outside a {n} x {n} matrix")
        key = r * max(n, 1) + c
        order = np.argsort(key, kind="stable")
        key = key[order]
        head = np.ones(key.size, dtype=bool)
        head[1:] = key[1:] != key[:-1]
        starts = np.flatnonzero(head)
        data = np.add.reduceat(v[order], starts) if starts.size else np.empty(0, dtype=np.float64)
        row, col = np.divmod(key[starts], max(n, 1))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
        return cls(indptr, row, col, data, n)

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def __matmul__(self, vector: np.ndarray) -> np.ndarray:
        """The matrix times a vector."""
        if self.nnz >= COMPILED_PRODUCT_FROM:
            if self._compiled is None:
                import scipy.sparse as sp

                self._compiled = sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.n, self.n))
            return self._compiled @ vector
        return np.bincount(self.row, weights=self.data * vector[self.indices], minlength=self.n)

    def row_sums(self) -> np.ndarray:
        return np.bincount(self.row, weights=self.data, minlength=self.n)

    def column_sums(self) -> np.ndarray:
        return np.bincount(self.indices, weights=self.data, minlength=self.n)

    def with_data(self, data: np.ndarray) -> Csr:
        """The same entries holding other values."""
        return Csr(self.indptr, self.row, self.indices, np.asarray(data, dtype=np.float64), self.n)

    def transpose(self) -> Csr:
        return Csr.from_triples(self.indices, self.row, self.data, self.n)


def cheapest_paths(costs: Csr, start: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest way to every node from any start node, which costs its own starting cost to
    begin at; an entry ``(a, b)`` of ``costs`` is a step from ``a`` to ``b`` (costs must be positive).

    Returns ``(cost, previous)``: a node's cost (``inf`` where no path reaches it) and the node
    before it on its cheapest path (``-1`` where the path begins there). Among equally cheap ways
    into a node the one through the node reached most cheaply comes first, then the lower number:
    the choice Dijkstra's algorithm makes when it settles nodes in that order. The costs are found
    by relaxing all steps out of the nodes that changed, round after round, on whole arrays; a
    question's graph is shallow, so a few rounds settle it."""
    n = costs.n
    dist = np.full(n, np.inf)
    for node, cost in start.items():
        dist[node] = min(dist[node], float(cost))
    begin = dist.copy()
    row, col, data = costs.row, costs.indices, costs.data
    changed = np.isfinite(dist)
    for _ in range(n):  # a cheapest path has fewer than n steps
        out = np.flatnonzero(changed[row])
        if not out.size:
            break
        best = dist.copy()
        np.minimum.at(best, col[out], dist[row[out]] + data[out])
        changed = best < dist
        dist = best
    previous = np.full(n, -1, dtype=np.int64)
    reach = dist[row] + data
    tight = np.flatnonzero(np.isfinite(reach) & (reach == dist[col]) & (dist[row] < dist[col]))
    if tight.size:
        before, after = row[tight], col[tight]
        order = np.lexsort((before, dist[before], after))
        after, before = after[order], before[order]
        first = np.ones(after.size, dtype=bool)
        first[1:] = after[1:] != after[:-1]
        previous[after[first]] = before[first]
    previous[np.isfinite(begin) & (dist == begin)] = -1  # begun here at no more than any way in
    return dist, previous
