"""The one personalised PageRank of graph retrieval, against networkx's."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from graphmem.retrieval.graph.pagerank import personalized_pagerank, transition
from graphmem.retrieval.graph.sparse import Csr


def _matrix(g: nx.DiGraph) -> Csr:
    edges = list(g.edges(data="weight", default=1.0))
    return Csr.from_triples([a for a, _, _ in edges], [b for _, b, _ in edges], [w for _, _, w in edges],
                            g.number_of_nodes())


def _random_graph(seed: int, n: int = 40, p: float = 0.12) -> nx.DiGraph:
    rng = np.random.default_rng(seed)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for a in range(n):
        for b in range(n):
            if a != b and rng.random() < p:
                g.add_edge(a, b, weight=float(rng.uniform(0.1, 3.0)))
    return g


@pytest.mark.parametrize("seed", range(5))
def test_pagerank_equals_networkx_with_the_same_dangling_rule(seed: int) -> None:
    g = _random_graph(seed)
    n = g.number_of_nodes()
    adjacency = _matrix(g)
    rng = np.random.default_rng(100 + seed)
    restart = np.zeros(n)
    restart[rng.choice(n, size=3, replace=False)] = rng.uniform(0.5, 2.0, size=3)
    ours = personalized_pagerank(transition(adjacency), restart, damping=0.85, iterations=200,
                                 dangling_to_restart=True)
    personalization = {i: float(restart[i]) for i in range(n)}
    theirs = nx.pagerank(g, alpha=0.85, personalization=personalization, dangling=personalization,
                         weight="weight", tol=1e-12, max_iter=1000)
    assert np.allclose(ours, [theirs[i] for i in range(n)], atol=1e-8)


def test_without_the_dangling_rule_mass_leaks_but_order_among_connected_nodes_holds() -> None:
    g = nx.cycle_graph(6, create_using=nx.DiGraph)
    g.add_edge(0, 6)  # node 6 has no way out
    adjacency = _matrix(g)
    restart = np.zeros(7)
    restart[0] = 1.0
    leaky = personalized_pagerank(transition(adjacency), restart, damping=0.85, iterations=100)
    assert leaky.sum() < 1.0
    assert np.argmax(leaky) == 0


def test_no_seed_gives_zero_rank() -> None:
    adjacency = Csr.from_triples([0, 0, 1, 1, 2, 2], [1, 2, 0, 2, 0, 1], np.ones(6), 3)
    assert not personalized_pagerank(transition(adjacency), np.zeros(3), damping=0.5, iterations=5).any()
