"""The paper's six mutations (III.E), each a small function over graph or genome, registered by name and stage.

To add a mutation: write `fn(genome, corpus, r, rng) -> dict` (what it did, recorded in the model's provenance) and
decorate it with `@mutation("NAME", stage=...)`; the stage says when it runs: "graph" (on the bare graph, before blocks
are assigned), "blocks" (on assigned blocks) or "source" (on the input shape and parameters, before solving).

Model level (rate r): GEA adds ⌈E(g)·r⌉ edges and GER removes ⌊E(g)·r⌋ edges,
where the paper defines E(g) as the *node* count of g (we follow the text);
BNA duplicates and BNR removes one operator inside every subgraph block with
probability r.  Source level: TSM mutates the input tensor shape, PM re-draws
one parameter of a node.  The solver re-validates whatever they produce.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import networkx as nx
import numpy as np

from ofuzz.gen.blocks import Corpus, eval_constraint
from ofuzz.gen.genome import Genome, InnerGene

RATES = (0.0, 0.1, 0.2)
STAGES = ("graph", "blocks", "source")
MutationFn = Callable[[Genome, Corpus, float, np.random.Generator], dict[str, Any]]


@dataclass(frozen=True)
class Mutation:
    name: str
    stage: str  # one of STAGES
    fn: MutationFn


MUTATIONS: dict[str, Mutation] = {}  # in registration order: the selector draws over this order


def mutation(name: str, stage: str) -> Callable[[MutationFn], MutationFn]:
    """Register `fn` as the mutation `name` run at `stage` (see the module docstring)."""
    if stage not in STAGES:
        raise ValueError(f"mutation {name}: stage must be one of {STAGES}, got {stage!r}")

    def register(fn: MutationFn) -> MutationFn:
        MUTATIONS[name] = Mutation(name, stage, fn)
        return fn
    return register


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


@mutation("GEA", stage="graph")
def _gea(genome: Genome, corpus: Corpus, r: float, rng: np.random.Generator) -> dict[str, Any]:
    return {"r": r, "edges_added": gea(genome.graph, r, rng)}


@mutation("GER", stage="graph")
def _ger(genome: Genome, corpus: Corpus, r: float, rng: np.random.Generator) -> dict[str, Any]:
    return {"r": r, "edges_removed": ger(genome.graph, r, rng)}


@mutation("BNA", stage="blocks")
def _bna(genome: Genome, corpus: Corpus, r: float, rng: np.random.Generator) -> dict[str, Any]:
    return {"r": r, "blocks": bna(genome, r, rng)}


@mutation("BNR", stage="blocks")
def _bnr(genome: Genome, corpus: Corpus, r: float, rng: np.random.Generator) -> dict[str, Any]:
    return {"r": r, "blocks": bnr(genome, r, rng)}


@mutation("TSM", stage="source")
def _tsm(genome: Genome, corpus: Corpus, r: float, rng: np.random.Generator) -> dict[str, Any]:
    return {"input_shape": list(tsm(genome, rng))}


@mutation("PM", stage="source")
def _pm(genome: Genome, corpus: Corpus, r: float, rng: np.random.Generator) -> dict[str, Any]:
    return {"r": r, "params": pm(genome, corpus, r, rng)}


ALL_MUTATIONS = tuple(MUTATIONS)


def apply_mutations(genome: Genome, corpus: Corpus, names: list[str], r: float, rng: np.random.Generator, stage: str) -> None:
    """Apply the selected mutations of one stage, in the order selected; each records what it did."""
    for name in names:
        m = MUTATIONS[name]
        if m.stage == stage:
            genome.mutations.append({"name": name, **m.fn(genome, corpus, r, rng)})


def select_mutations(rng: np.random.Generator) -> tuple[list[str], float]:
    """The mutation selector: a random non-empty subset and a rate r from {0, 0.1, 0.2}."""
    mask = rng.random(len(ALL_MUTATIONS)) < 0.5
    if not mask.any():
        mask[int(rng.integers(len(ALL_MUTATIONS)))] = True
    return [m for m, on in zip(ALL_MUTATIONS, mask) if on], float(RATES[int(rng.integers(len(RATES)))])
