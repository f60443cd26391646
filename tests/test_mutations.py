from __future__ import annotations

import math

import numpy as np
import pytest

from ofuzz.gen.genome import Genome, assign_blocks, new_gene
from ofuzz.gen.graphs import rn_dag, ws_dag
from ofuzz.gen.mutations import bna, bnr, gea, ger, pm, select_mutations, tsm


@pytest.mark.parametrize("r", [0.0, 0.1, 0.2])
def test_gea_adds_ceil_nodes_times_r(r):
    g = ws_dag(20, 4, 0.5, np.random.default_rng(0))
    before = g.number_of_edges()
    added = gea(g, r, np.random.default_rng(1))
    assert added == math.ceil(20 * r)
    assert g.number_of_edges() == before + added
    assert all(u < v for u, v in g.edges())


@pytest.mark.parametrize("r", [0.0, 0.1, 0.2])
def test_ger_removes_floor_nodes_times_r(r):
    g = rn_dag(20, 4, 0.9, np.random.default_rng(0))
    before = g.number_of_edges()
    removed = ger(g, r, np.random.default_rng(1))
    assert removed == math.floor(20 * r)
    assert g.number_of_edges() == before - removed


def _genome_with(corpus, block: str) -> Genome:
    g = ws_dag(3, 2, 0.0, np.random.default_rng(0))
    genome = Genome(g, (1, 3, 8, 8), "ws", 2, 0.5)
    rng = np.random.default_rng(0)
    for n in g.nodes:
        g.nodes[n]["gene"] = new_gene(corpus[block], corpus, rng)
    return genome


def _sinks(gene):
    srcs = {s for s, _ in gene.inner_edges}
    return [i for i in range(len(gene.inner)) if i not in srcs]


def _entries(gene):
    dsts = {d for _, d in gene.inner_edges}
    return [i for i in range(len(gene.inner)) if i not in dsts]


@pytest.mark.parametrize("block", ["Conv2d+Relu+Pow+Concat", "Conv2d+Conv2d+Add+Add", "SSD-FeatureConcat", "Conv+BiasAdd+Relu"])
def test_bna_duplicates_one_op_keeping_interface(corpus, block):
    genome = _genome_with(corpus, block)
    before = [(len(genome.gene(n).inner), len(_entries(genome.gene(n)))) for n in genome.graph.nodes]
    assert bna(genome, 1.0, np.random.default_rng(5)) == 3
    for n, (ops, entries) in zip(genome.graph.nodes, before):
        gene = genome.gene(n)
        assert len(gene.inner) == ops + 1
        assert len(_entries(gene)) == entries and len(_sinks(gene)) == 1
        assert all(s < d for s, d in gene.inner_edges)


@pytest.mark.parametrize("block", ["Conv2d+Relu+Pow+Concat", "SSD-FeatureConcat", "Conv+BiasAdd+Mul+Add"])
def test_bnr_removes_one_op_keeping_interface(corpus, block):
    genome = _genome_with(corpus, block)
    before = [(len(genome.gene(n).inner), len(_entries(genome.gene(n)))) for n in genome.graph.nodes]
    assert bnr(genome, 1.0, np.random.default_rng(5)) == 3
    for n, (ops, entries) in zip(genome.graph.nodes, before):
        gene = genome.gene(n)
        assert len(gene.inner) == ops - 1
        assert len(_entries(gene)) == entries and len(_sinks(gene)) == 1


def test_bna_bnr_rate_zero_do_nothing(corpus):
    genome = _genome_with(corpus, "Conv2d+Relu+Pow+Concat")
    assert bna(genome, 0.0, np.random.default_rng(0)) == 0
    assert bnr(genome, 0.0, np.random.default_rng(0)) == 0


def test_tsm_changes_input_shape(corpus):
    genome = _genome_with(corpus, "Relu")
    shapes = {tsm(genome, np.random.default_rng(s)) for s in range(20)}
    assert len(shapes) > 10 and len({len(s) for s in shapes}) > 2


def test_pm_redraws_one_parameter(corpus):
    g = ws_dag(1, 2, 0.0, np.random.default_rng(0))
    genome = Genome(g, (1, 3, 8, 8), "ws", 2, 0.5)
    assign_blocks(g, corpus, np.random.default_rng(0), preferred=["Conv"])
    changed_total = 0
    for seed in range(20):
        trial = genome.copy()
        before = dict(trial.gene(0).params)
        changed = pm(trial, corpus, 1.0, np.random.default_rng(seed))
        after = trial.gene(0).params
        diff = [k for k in before if before[k] != after[k]]
        assert len(diff) <= 1 and changed in (0, 1)
        changed_total += len(diff)
    assert changed_total > 5


def test_selector_picks_non_empty_subset_and_rate():
    for s in range(30):
        names, r = select_mutations(np.random.default_rng(s))
        assert names and r in (0.0, 0.1, 0.2)
