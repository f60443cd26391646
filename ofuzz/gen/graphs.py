"""Random network topologies: Watts–Strogatz and the paper's Residual Network.

Both become DAGs by orienting every edge from the lower to the higher node
index (as RandWire does), so node order is a valid execution order.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

GRAPH_MODELS = ("ws", "rn", "mixed")
DEFAULT_P = {"ws": 0.5, "rn": 0.9}
K_CHOICES = (2, 4, 6)


def ws_dag(n: int, k: int, p: float, rng: np.random.Generator) -> nx.MultiDiGraph:
    """Watts–Strogatz small world (ring lattice, rewired with probability p), as a DAG."""
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(n))
    if n <= 1:
        return g
    if n == 2:
        g.add_edge(0, 1)
        return g
    k_eff = max(2, min(k, n - 1))  # a ring lattice needs k < n neighbours, and an even k
    k_eff -= k_eff % 2
    und = nx.connected_watts_strogatz_graph(n, k_eff, p, tries=100, seed=int(rng.integers(2**31)))
    for u, v in sorted(tuple(sorted(e)) for e in und.edges()):
        g.add_edge(u, v)
    return g


def rn_dag(n: int, k: int, p: float, rng: np.random.Generator) -> nx.MultiDiGraph:
    """RN(k, p, n), exactly as section III.G: a line, then forward residual edges.

    Nodes 0..n-1 sit in a line (i → i+1).  For each node i whose neighbour count
    k_cur[i] is below k, repeat k − k_cur[i] times: with probability p add an
    edge i → j to a node j > i with k_cur[j] < k (not already a neighbour).
    """
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(n))
    for i in range(n - 1):
        g.add_edge(i, i + 1)
    k_cur = [int(g.in_degree(i) + g.out_degree(i)) for i in range(n)]
    for i in range(n):
        if k_cur[i] >= k:
            continue
        for _ in range(k - k_cur[i]):
            if rng.random() >= p:
                continue
            cands = [j for j in range(i + 1, n) if k_cur[j] < k and not g.has_edge(i, j)]
            if not cands:
                break
            j = int(cands[int(rng.integers(len(cands)))])
            g.add_edge(i, j)
            k_cur[i] += 1
            k_cur[j] += 1
    return g


def make_graph(model: str, n: int, k: int, p: float | None, rng: np.random.Generator) -> nx.MultiDiGraph:
    if model == "ws":
        return ws_dag(n, k, DEFAULT_P["ws"] if p is None else p, rng)
    if model == "rn":
        return rn_dag(n, k, DEFAULT_P["rn"] if p is None else p, rng)
    raise ValueError(f"unknown graph model {model!r}; use ws or rn")
