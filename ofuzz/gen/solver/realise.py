"""Turn a genome into nodes: walk the DAG in order, expand subgraphs, run rules.

A rule whose drawn parameters do not fit is retried with fresh parameters;
only if every retry fails is the block skipped (recorded as `degraded`), so
the model stays valid by construction and the count tells us about defects.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ofuzz.gen.blocks import Block, Corpus
from ofuzz.gen.coverage import OpRecord, spc_key
from ofuzz.gen.genome import Genome, NodeGene
from ofuzz.gen.solver.builder import Builder, SolverError, T
from ofuzz.gen.solver.rules import apply_block

RETRIES = 4


@dataclass
class Realised:
    outputs: list[T]
    degraded: list[str] = field(default_factory=list)
    used_params: dict[int, Any] = field(default_factory=dict)
    records: list[OpRecord] = field(default_factory=list)


def _run_block(b: Builder, blk: Block, ins: list[T], params: dict[str, Any], pins: dict[str, tuple[Any, ...]], degraded: list[str], where: str) -> tuple[list[T], dict[str, Any]]:
    """Run one operator block, retrying with fresh parameters when the draw does not fit."""
    last = ""
    for _ in range(RETRIES):
        mark = b.mark()
        try:
            return apply_block(b, blk, list(ins), params), params
        except SolverError as exc:
            b.rollback(mark)
            last = str(exc)
            params = blk.sample_params(b.rng, pins)
    degraded.append(f"{where} {blk.name}: {last}")
    return [ins[0]], params


def realise(genome: Genome, corpus: Corpus, b: Builder) -> Realised:
    g = genome.graph
    res = Realised([])
    produced: dict[int, list[T]] = {}
    shared: T | None = None
    for n in nx.lexicographical_topological_sort(g):
        gene = genome.gene(n)
        blk = corpus[gene.block]
        in_edges = sorted(g.in_edges(n, keys=True))
        if in_edges:
            ins = [_edge_tensor(g, produced, u, v, k) for u, v, k in in_edges]
        else:
            if genome.shared_input:
                shared = shared or b.input_for(blk.dtypes, genome.input_shape)
                ins = [shared]
            else:
                ins = [b.input_for(blk.dtypes, genome.input_shape)]
        b.current_block, b.current_node = blk.name, int(n)
        succ = tuple(sorted({_entry_block(genome.gene(v)) for v in g.successors(n)}))
        if gene.inner is None:
            outs, used = _run_block(b, blk, ins, gene.params, {}, res.degraded, f"node {n}")
            res.used_params[int(n)] = used
            res.records.append(OpRecord(blk.name, max(1, len(in_edges)), int(g.out_degree(n)), succ, spc_key([t.shape for t in ins], used)))
        else:
            outs, used_inner = _run_subgraph(b, corpus, gene, ins, res.degraded, n, int(g.out_degree(n)), succ, res.records)
            res.used_params[int(n)] = used_inner
        produced[n] = outs
    b.current_block, b.current_node = "adapter", -1
    consumed: set[str] = set()
    for u, v, k in g.edges(keys=True):
        consumed.add(_edge_tensor(g, produced, u, v, k).name)
    seen: set[str] = set()
    input_names = {t.name for t in b.inputs}
    for n in sorted(g.nodes):
        for t in produced[n]:
            if t.name in seen or (g.out_degree(n) and t.name in consumed):
                continue
            seen.add(t.name)
            if t.name in input_names or t.value is not None:
                t = b.op1("Identity", [t])
            res.outputs.append(t)
    return res


def _edge_tensor(g: nx.MultiDiGraph, produced: dict[int, list[T]], u: int, v: int, k: int) -> T:
    outs = produced[u]
    order = sorted(g.out_edges(u, keys=True)).index((u, v, k))
    return outs[order % len(outs)]


def _entry_block(gene: NodeGene) -> str:
    """The operator a data flow into this node reaches first (a subgraph's first entry op)."""
    if gene.inner is None:
        return gene.block
    dsts = {d for _, d in gene.inner_edges or []}
    return next(g.block for j, g in enumerate(gene.inner) if j not in dsts)


def _run_subgraph(
    b: Builder, corpus: Corpus, gene: Any, ins: list[T], degraded: list[str], n: int,
    out_degree: int, succ: tuple[str, ...], records: list[OpRecord],
) -> tuple[list[T], list[dict[str, Any]]]:
    edges = gene.inner_edges or []
    srcs = {s for s, _ in edges}
    sink = [j for j in range(len(gene.inner)) if j not in srcs][-1]
    preds: dict[int, list[int]] = defaultdict(list)
    for s, d in edges:
        preds[d].append(s)
    ext = list(ins)
    outs: dict[int, list[T]] = {}
    used: list[dict[str, Any]] = []
    ext_i = 0
    for j, inner in enumerate(gene.inner):
        blk = corpus[inner.block]
        if preds[j]:
            args = [outs[s][0] for s in preds[j]]
        else:
            args = [ext[ext_i % len(ext)]] if ext else []
            ext_i += 1
        if not args:
            raise SolverError("subgraph op without input")
        o, p = _run_block(b, blk, args, inner.params, inner.pins, degraded, f"node {n}.{j}")
        outs[j] = o
        used.append({"block": inner.block, "params": p})
        inner_succ = {gene.inner[d].block for s, d in edges if s == j}
        n_out = sum(1 for s, _ in edges if s == j) + (out_degree if j == sink else 0)
        records.append(OpRecord(blk.name, len(args), n_out, tuple(sorted(inner_succ | (set(succ) if j == sink else set()))),
                                spc_key([t.shape for t in args], p)))
    return outs[sink], used


