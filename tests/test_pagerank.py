"""The one personalised PageRank of graph retrieval, against networkx's."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from graphmem.retrieval.graph.pagerank import personalized_pagerank, transition
from graphmem.retrieval.graph.sparse import Csr
from tests.graphs import as_csr, random_digraph


@pytest.mark.parametrize("seed", range(5))
def test_pagerank_equals_networkx_with_the_same_dangling_rule(seed: int) -> None:
    g = random_digraph(seed, 40, 0.12)
    n = g.number_of_nodes()
    adjacency = as_csr(g)
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
    adjacency = as_csr(g)
    restart = np.zeros(7)
    restart[0] = 1.0
    leaky = personalized_pagerank(transition(adjacency), restart, damping=0.85, iterations=100)
    assert leaky.sum() < 1.0
    assert np.argmax(leaky) == 0


def test_no_seed_gives_zero_rank() -> None:
    adjacency = Csr.from_triples([0, 0, 1, 1, 2, 2], [1, 2, 0, 2, 0, 1], np.ones(6), 3)
    assert not personalized_pagerank(transition(adjacency), np.zeros(3), damping=0.5, iterations=5).any()
