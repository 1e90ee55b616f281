"""Random weighted graphs for the tests of graph retrieval's matrices, and their matrices."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from graphmem.retrieval.graph.sparse import Csr


def random_digraph(seed: int, n: int, p: float, weights: Sequence[float] | None = None) -> nx.DiGraph:
    """``n`` nodes, each ordered pair joined with chance ``p``; a weight drawn from ``weights``, or
    uniformly from 0.1 to 3 without them."""
    rng = np.random.default_rng(seed)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for a in range(n):
        for b in range(n):
            if a != b and rng.random() < p:
                w = rng.choice(weights) if weights is not None else rng.uniform(0.1, 3.0)
                g.add_edge(a, b, weight=float(w))
    return g


def as_csr(g: nx.DiGraph) -> Csr:
    """The weighted adjacency matrix of a graph whose nodes are 0 .. n - 1 (weight 1 by default)."""
    edges = list(g.edges(data="weight", default=1.0))
    return Csr.from_triples([a for a, _, _ in edges], [b for _, b, _ in edges], [w for _, _, w in edges],
                            g.number_of_nodes())
