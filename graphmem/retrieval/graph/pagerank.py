"""The one personalised PageRank of graph retrieval (the organisation walk and the entity layer).

Power iteration over a weighted graph: ``rank = d * P^T rank + (1 - d) * restart``, where ``P`` is
row-stochastic. A node without outgoing weight keeps its mass out of the walk (it leaks), as
``networkx.pagerank`` does not: there, a dangling node's mass is redistributed by the
personalisation vector. Both give the same order on graphs without dangling nodes, and the tests
compare the two.
"""

from __future__ import annotations

import numpy as np

from graphmem.retrieval.graph.sparse import Csr


def transition(matrix: Csr) -> Csr:
    """The transposed row-stochastic transition matrix of a weighted adjacency matrix (rows
    without weight stay zero)."""
    out_weight = matrix.row_sums()
    out_weight[out_weight == 0] = 1.0
    return matrix.with_data(matrix.data / out_weight[matrix.row]).transpose()


def personalized_pagerank(transposed: Csr, restart: np.ndarray, *, damping: float,
                          iterations: int, dangling_to_restart: bool = False) -> np.ndarray:
    """Rank of every node for a restart vector (any non-negative weights; normalised here).

    ``dangling_to_restart`` sends the mass of nodes without outgoing weight back to the restart
    distribution (``networkx.pagerank``'s rule) instead of letting it leak."""
    total = float(restart.sum())
    if total <= 0:
        return np.zeros_like(restart, dtype=np.float64)
    restart = restart.astype(np.float64) / total
    dangling = transposed.column_sums() == 0 if dangling_to_restart else None
    rank = restart.copy()
    for _ in range(iterations):
        walked = transposed @ rank
        if dangling is not None:
            walked = walked + rank[dangling].sum() * restart
        rank = damping * walked + (1 - damping) * restart
    return rank
