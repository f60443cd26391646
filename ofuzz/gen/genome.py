"""The genome: a DAG whose nodes carry blocks and drawn parameters.

Mutations act on the genome (a small, serialisable structure) and the solver
turns it into a model; keeping the two apart lets mutations stay pure and
lets a stored genome be replayed byte for byte.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable

import networkx as nx
import numpy as np

from ofuzz.gen.blocks import Block, Corpus


@dataclass
class InnerGene:
    block: str
    params: dict[str, Any]
    pins: dict[str, tuple[Any, ...]] = field(default_factory=dict)


@dataclass
class NodeGene:
    block: str
    params: dict[str, Any] = field(default_factory=dict)
    inner: list[InnerGene] | None = None  # subgraph blocks: a private copy for BNA/BNR
    inner_edges: list[tuple[int, int]] | None = None


@dataclass
class Genome:
    graph: nx.MultiDiGraph
    input_shape: tuple[int, ...]
    graph_model: str
    k: int
    p: float
    shared_input: bool = True
    mutations: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def gene(self, node: int) -> NodeGene:
        return self.graph.nodes[node]["gene"]

    def copy(self) -> "Genome":
        return copy.deepcopy(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "graph_model": self.graph_model,
            "k": self.k,
            "p": self.p,
            "input_shape": list(self.input_shape),
            "shared_input": self.shared_input,
            "edges": [[int(u), int(v)] for u, v, _ in sorted(self.graph.edges(keys=True))],
            "nodes": [
                {
                    "id": int(n),
                    "block": self.gene(n).block,
                    "params": _jsonable(self.gene(n).params),
                    **(
                        {"inner": [{"block": g.block, "params": _jsonable(g.params)} for g in self.gene(n).inner or []],
                         "inner_edges": [list(e) for e in self.gene(n).inner_edges or []]}
                        if self.gene(n).inner is not None else {}
                    ),
                }
                for n in sorted(self.graph.nodes)
            ],
            "mutations": self.mutations,
            "notes": self.notes,
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def effective_in_degree(g: nx.MultiDiGraph, n: int) -> int:
    """Sources read the graph input, so they count as in-degree 1."""
    return max(1, int(g.in_degree(n)))


def candidates(corpus: Corpus, d_in: int, d_out: int, pool: Iterable[Block] | None = None) -> list[Block]:
    blocks = list(pool) if pool is not None else list(corpus)
    return [b for b in blocks if d_in in b.in_degree and d_out in b.out_degree]


def new_gene(block: Block, corpus: Corpus, rng: np.random.Generator, canonical: bool = False) -> NodeGene:
    """A node's gene: drawn parameters (or the block's common configuration)."""
    def params(b: Block, pins: dict[str, tuple[Any, ...]] | None = None) -> dict[str, Any]:
        return b.canonical_params(pins) if canonical else b.sample_params(rng, pins)

    if not block.is_subgraph:
        return NodeGene(block.name, params(block))
    inner = [InnerGene(o.block, params(corpus[o.block], o.params), dict(o.params)) for o in block.ops]
    return NodeGene(block.name, {}, inner, [tuple(e) for e in block.edges])


def single_block_genome(corpus: Corpus, name: str, input_shape: tuple[int, ...], canonical: bool = True) -> Genome:
    """A one-node genome (plus as many source inputs as the block's in-degree)."""
    blk = corpus[name]
    d_in = min(blk.in_degree)
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(d_in + (1 if d_in > 1 else 0)))
    rng = np.random.default_rng(0)
    if d_in > 1:
        for i in range(d_in):
            g.nodes[i]["gene"] = new_gene(corpus["Identity"], corpus, rng, True)
            g.add_edge(i, d_in)
    target = d_in if d_in > 1 else 0
    g.nodes[target]["gene"] = new_gene(blk, corpus, rng, canonical)
    genome = Genome(g, input_shape, "single", 0, 0.0, shared_input=False)
    return genome


def assign_blocks(
    g: nx.MultiDiGraph, corpus: Corpus, rng: np.random.Generator, preferred: list[str] | None = None, prefer: float = 1.0
) -> list[str]:
    """Match a block to every node by in-degree (and out-degree); return notes on repairs.

    Blocks from `preferred` (the chooser's pick) win when one fits the node's
    degrees (for each node with probability `prefer`, 1 = the paper's rule);
    otherwise any corpus block that fits is used.  A node no block
    fits loses in-edges until one does (recorded in the notes).
    """
    notes = []
    pref = [corpus[b] for b in preferred] if preferred else None
    for n in sorted(g.nodes):
        while True:
            d_in, d_out = effective_in_degree(g, n), int(g.out_degree(n))
            use_pref = pref and (prefer >= 1.0 or rng.random() < prefer)
            cands = (candidates(corpus, d_in, d_out, pref) if use_pref else []) or candidates(corpus, d_in, d_out)
            if cands:
                break
            if any(d_in in b.in_degree for b in corpus) and d_out > 0:
                u, v, key = sorted(g.out_edges(n, keys=True))[-1]
            else:
                u, v, key = sorted(g.in_edges(n, keys=True))[-1]
            g.remove_edge(u, v, key)
            notes.append(f"node {n}: dropped edge {u}->{v} (no block has in-degree {d_in} with out-degree {d_out})")
        blk = cands[int(rng.integers(len(cands)))]
        g.nodes[n]["gene"] = new_gene(blk, corpus, rng)
    return notes
