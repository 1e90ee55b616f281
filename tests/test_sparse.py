"""The numpy sparse matrices of graph retrieval, against dense arithmetic and networkx's Dijkstra."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from graphmem.retrieval.graph.sparse import Csr, cheapest_paths
from tests.graphs import as_csr, random_digraph


def test_repeated_entries_are_summed_and_products_match_dense_arithmetic() -> None:
    rng = np.random.default_rng(0)
    n = 12
    rows, cols = rng.integers(0, n, 80), rng.integers(0, n, 80)
    vals = rng.uniform(0.1, 2.0, 80)
    dense = np.zeros((n, n))
    np.add.at(dense, (rows, cols), vals)
    m = Csr.from_triples(rows, cols, vals, n)
    assert m.nnz == np.count_nonzero(dense)
    assert np.all(np.diff(m.indptr) == np.count_nonzero(dense, axis=1))
    x = rng.uniform(size=n)
    assert np.allclose(m @ x, dense @ x)
    assert np.allclose(m.row_sums(), dense.sum(axis=1))
    assert np.allclose(m.column_sums(), dense.sum(axis=0))
    assert np.allclose(m.transpose() @ x, dense.T @ x)


def test_an_entry_outside_the_matrix_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        Csr.from_triples([0, 3], [1, 0], [1.0, 1.0], 3)


def _random_costs(seed: int) -> tuple[nx.DiGraph, Csr]:
    # Few distinct costs, so equally cheap paths are common.
    g = random_digraph(seed, 60, 0.06, weights=[0.5, 1.0, 2.0])
    return g, as_csr(g)


@pytest.mark.parametrize("seed", range(6))
def test_cheapest_paths_cost_what_dijkstra_finds_and_follow_real_steps(seed: int) -> None:
    g, costs = _random_costs(seed)
    start = {0: 0.0, 7: 1.5, 13: 0.25}
    dist, previous = cheapest_paths(costs, start)
    # networkx: one virtual node before the starts, its steps costing their starting costs.
    h = g.copy()
    for node, cost in start.items():
        h.add_edge("start", node, weight=cost)
    expected = nx.single_source_dijkstra_path_length(h, "start", weight="weight")
    for node in range(costs.n):
        if node in expected:
            assert dist[node] == pytest.approx(expected[node])
            # Walking back reaches a start node, and the steps add up to the cost.
            total, cur, hops = 0.0, node, 0
            while previous[cur] >= 0:
                total += g[int(previous[cur])][cur]["weight"]
                cur, hops = int(previous[cur]), hops + 1
                assert hops <= costs.n
            assert cur in start
            assert total + start[cur] == pytest.approx(dist[node])
        else:
            assert np.isinf(dist[node]) and previous[node] == -1


def test_ties_go_through_the_node_reached_most_cheaply_then_the_lower_number() -> None:
    # 0 -> 1 -> 3 and 0 -> 2 -> 3 cost the same; 1 is reached more cheaply than 2.
    costs = Csr.from_triples([0, 0, 1, 2, 0, 4], [1, 2, 3, 3, 4, 5], [1.0, 2.0, 2.0, 1.0, 1.0, 1.0], 6)
    _, previous = cheapest_paths(costs, {0: 0.0})
    assert previous[3] == 1
    # Two equally cheap ways in through equally cheap nodes: the lower number.
    costs = Csr.from_triples([0, 0, 1, 2], [1, 2, 3, 3], [1.0, 1.0, 1.0, 1.0], 4)
    _, previous = cheapest_paths(costs, {0: 0.0})
    assert previous[3] == 1


def test_a_start_node_begins_its_own_path_unless_another_start_reaches_it_more_cheaply() -> None:
    costs = Csr.from_triples([0, 1], [1, 2], [1.0, 1.0], 3)
    dist, previous = cheapest_paths(costs, {0: 0.0, 1: 5.0, 2: 2.0})
    assert dist.tolist() == [0.0, 1.0, 2.0]
    assert previous.tolist() == [-1, 0, -1]  # 2 costs 2 from itself and 2 through 1: begun there


def test_a_large_matrix_multiplies_as_a_small_one_does() -> None:
    from graphmem.retrieval.graph.sparse import COMPILED_PRODUCT_FROM

    rng = np.random.default_rng(1)
    n, m = 3000, COMPILED_PRODUCT_FROM + 5000
    big = Csr.from_triples(rng.integers(0, n, m), rng.integers(0, n, m), rng.uniform(size=m), n)
    assert big.nnz >= COMPILED_PRODUCT_FROM
    x = rng.uniform(size=n)
    by_rows = np.bincount(big.row, weights=big.data * x[big.indices], minlength=n)
    assert np.allclose(big @ x, by_rows)
    assert np.allclose(big @ x, big @ x)  # the compiled matrix, made on the first product, is kept
