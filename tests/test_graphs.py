from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from ofuzz.gen.graphs import rn_dag, ws_dag


@pytest.mark.parametrize("n,k", [(10, 2), (10, 4), (15, 6), (30, 4)])
def test_ws_edge_count_and_dag(n, k):
    g = ws_dag(n, k, 0.5, np.random.default_rng(n * k))
    assert nx.is_directed_acyclic_graph(g)
    assert g.number_of_edges() == n * k // 2  # rewiring keeps the lattice's edge count
    assert all(u < v for u, v in g.edges())
    assert nx.is_weakly_connected(g)


def test_ws_small_graphs():
    rng = np.random.default_rng(0)
    assert ws_dag(1, 4, 0.5, rng).number_of_edges() == 0
    assert ws_dag(2, 4, 0.5, rng).number_of_edges() == 1
    g = ws_dag(4, 6, 0.5, rng)  # k >= n: k capped to the largest even k < n (a ring here)
    assert g.number_of_edges() == 4
    assert ws_dag(7, 6, 0.5, rng).number_of_edges() == 7 * 6 // 2


@pytest.mark.parametrize("n,k,p", [(10, 2, 0.9), (12, 4, 0.9), (20, 6, 0.9), (20, 4, 1.0)])
def test_rn_degrees_and_line(n, k, p):
    g = rn_dag(n, k, p, np.random.default_rng(7))
    assert nx.is_directed_acyclic_graph(g)
    for i in range(n - 1):
        assert g.has_edge(i, i + 1)
    for v in g.nodes:
        assert g.in_degree(v) + g.out_degree(v) <= max(k, 2)
    assert all(u < v for u, v in g.edges())


def test_rn_with_p_zero_is_a_line():
    g = rn_dag(8, 4, 0.0, np.random.default_rng(1))
    assert sorted(g.edges()) == [(i, i + 1) for i in range(7)]


def test_rn_adds_residual_edges():
    g = rn_dag(20, 4, 1.0, np.random.default_rng(3))
    assert g.number_of_edges() > 19
    assert any(v - u > 1 for u, v in g.edges())
