"""The paper's six mutations (III.E), each a small function over graph or genome.

Model level (rate r): GEA adds ⌈E(g)·r⌉ edges and GER removes ⌊E(g)·r⌋ edges,
where the paper defines E(g) as the *node* count of g (we follow the text);
BNA duplicates and BNR removes one operator inside every subgraph block with
probability r.  Source level: TSM mutates the input tensor shape, PM re-draws
one parameter of a node.  The solver re-validates whatever they produce.
"""
from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np

from ofuzz.blocks import Corpus, eval_constraint
from ofuzz.genome import Genome, InnerGene

MODEL_LEVEL = ("GEA", "GER", "BNA", "BNR")
SOURCE_LEVEL = ("TSM", "PM")
ALL_MUTATIONS = MODEL_LEVEL + SOURCE_LEVEL
RATES = (0.0, 0.1, 0.2)


def gea(g: nx.MultiDiGraph, r: float, rng: np.random.Generator) -> int:
    """Graph Edges Addition: add ⌈|V|·r⌉ forward edges between unconnected nodes."""
    n = g.number_of_nodes()
    want = math.ceil(n * r)
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if not g.has_edge(u, v)]
    added = 0
    for idx in rng.permutation(len(pairs))[:want]:
        u, v = pairs[int(idx)]
        g.add_edge(u, v)
        added += 1
    return added


def ger(g: nx.MultiDiGraph, r: float, rng: np.random.Generator) -> int:
    """Graph Edges Removal: delete ⌊|V|·r⌋ random edges."""
    want = math.floor(g.number_of_nodes() * r)
    edges = sorted(g.edges(keys=True))
    removed = 0
    for idx in sorted(rng.permutation(len(edges))[:want].tolist(), reverse=True):
        g.remove_edge(*edges[idx])
        removed += 1
    return removed


def _sinks(n_ops: int, edges: list[tuple[int, int]]) -> list[int]:
    srcs = {s for s, _ in edges}
    return [i for i in range(n_ops) if i not in srcs]


def bna(genome: Genome, r: float, rng: np.random.Generator) -> int:
    """Block Nodes Addition: in each subgraph block (prob. r) duplicate one operator in series."""
    done = 0
    for n in sorted(genome.graph.nodes):
        gene = genome.gene(n)
        if gene.inner is None or rng.random() >= r:
            continue
        i = int(rng.integers(len(gene.inner)))
        dup = InnerGene(gene.inner[i].block, dict(gene.inner[i].params), dict(gene.inner[i].pins))
        shift = lambda x: x + 1 if x > i else x  # noqa: E731
        edges = [(i + 1 if s == i else shift(s), shift(d)) for s, d in gene.inner_edges or []]
        edges.append((i, i + 1))
        gene.inner.insert(i + 1, dup)
        gene.inner_edges = sorted(edges)
        done += 1
    return done


def bnr(genome: Genome, r: float, rng: np.random.Generator) -> int:
    """Block Nodes Removal: in each subgraph block (prob. r) remove one inner operator.

    Only an operator with an inner predecessor is removed, its predecessors
    rewired to its successors, so the block keeps its in-degree and one output.
    """
    done = 0
    for n in sorted(genome.graph.nodes):
        gene = genome.gene(n)
        if gene.inner is None or len(gene.inner) <= 2 or rng.random() >= r:
            continue
        edges = gene.inner_edges or []
        for j in rng.permutation(len(gene.inner)).tolist():
            preds = [s for s, d in edges if d == j]
            succs = [d for s, d in edges if s == j]
            if not preds:
                continue
            new = [(s, d) for s, d in edges if j not in (s, d)] + [(s, d) for s in preds for d in succs]
            remap = lambda x: x - 1 if x > j else x  # noqa: E731
            new = sorted((remap(s), remap(d)) for s, d in new)
            if len(_sinks(len(gene.inner) - 1, new)) != 1:
                continue
            del gene.inner[j]
            gene.inner_edges = new
            done += 1
            break
    return done


def random_input_shape(rng: np.random.Generator, rank: int | None = None) -> tuple[int, ...]:
    """TSM's shape space: rank 1..5 with distinct-ish small dims (default NCHW, rank 4)."""
    rank = int(rng.choice([1, 2, 3, 4, 5], p=[0.05, 0.15, 0.2, 0.45, 0.15])) if rank is None else rank
    if rank == 4:
        return (int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(3, 25)), int(rng.integers(3, 25)))
    budget = 1 << 13
    dims = []
    for _ in range(rank):
        d = int(rng.integers(1, min(33, max(2, budget)) + 1))
        budget = max(1, budget // d)
        dims.append(d)
    return tuple(dims)


def tsm(genome: Genome, rng: np.random.Generator) -> tuple[int, ...]:
    """Tensor Shape Mutation: a new rank and dims for the network input."""
    genome.input_shape = random_input_shape(rng)
    genome.shared_input = bool(rng.random() < 0.7)
    return genome.input_shape


def pm(genome: Genome, corpus: Corpus, r: float, rng: np.random.Generator) -> int:
    """Parameters Mutation: re-draw one parameter (new enum value / value in range)."""
    changed = 0
    p_node = max(r, 0.1)
    for n in sorted(genome.graph.nodes):
        if rng.random() >= p_node:
            continue
        gene = genome.gene(n)
        targets: list[tuple[Any, dict[str, Any], dict[str, tuple[Any, ...]]]] = []
        if gene.inner is None:
            targets.append((corpus[gene.block], gene.params, {}))
        else:
            targets.extend((corpus[g.block], g.params, g.pins) for g in gene.inner)
        blk, params, pins = targets[int(rng.integers(len(targets)))]
        free = [s for s in blk.params if s.name not in pins and s.cardinality > 1]
        if not free:
            continue
        spec = free[int(rng.integers(len(free)))]
        trial = dict(params)
        trial[spec.name] = spec.sample(rng)

        if all(eval_constraint(c, trial) for c in blk.constraints):
            params.update(trial)
            changed += 1
    return changed


def apply_mutations(genome: Genome, corpus: Corpus, names: list[str], r: float, rng: np.random.Generator, stage: str) -> None:
    """Apply the selected mutations of one stage ("graph", "blocks" or "source")."""
    for name in names:
        if stage == "graph" and name == "GEA":
            genome.mutations.append({"name": "GEA", "r": r, "edges_added": gea(genome.graph, r, rng)})
        elif stage == "graph" and name == "GER":
            genome.mutations.append({"name": "GER", "r": r, "edges_removed": ger(genome.graph, r, rng)})
        elif stage == "blocks" and name == "BNA":
            genome.mutations.append({"name": "BNA", "r": r, "blocks": bna(genome, r, rng)})
        elif stage == "blocks" and name == "BNR":
            genome.mutations.append({"name": "BNR", "r": r, "blocks": bnr(genome, r, rng)})
        elif stage == "source" and name == "TSM":
            genome.mutations.append({"name": "TSM", "input_shape": list(tsm(genome, rng))})
        elif stage == "source" and name == "PM":
            genome.mutations.append({"name": "PM", "r": r, "params": pm(genome, corpus, r, rng)})


def select_mutations(rng: np.random.Generator) -> tuple[list[str], float]:
    """The mutation selector: a random non-empty subset and a rate r from {0, 0.1, 0.2}."""
    mask = rng.random(len(ALL_MUTATIONS)) < 0.5
    if not mask.any():
        mask[int(rng.integers(len(ALL_MUTATIONS)))] = True
    return [m for m, on in zip(ALL_MUTATIONS, mask) if on], float(RATES[int(rng.integers(len(RATES)))])
