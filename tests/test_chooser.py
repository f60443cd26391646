from __future__ import annotations

import numpy as np

from ofuzz.gen.chooser import MCTSChooser, RandomChooser, reward
from ofuzz.gen.coverage import Coverage


def test_mcts_expands_towards_lowest_coverage_and_limits_children(corpus):
    cov = Coverage.for_corpus(corpus)
    ch = MCTSChooser(corpus, cov, np.random.default_rng(0))
    seen = []
    for _ in range(40):
        blocks, node = ch.choose()
        assert 1 <= len(blocks) <= ch.tc1
        assert len(set(blocks)) == len(blocks)  # an operator is not repeated on a path
        seen.append(node)
        ch.backprop(node, reward(False, True))
    assert all(len(n.children) <= 3 for n in ch.nodes)
    root = ch.nodes[0]
    assert len(root.children) == 3 and root.n == 40
    # first expansion: the lowest-coverage operator (all zero → alphabetical) or a subgraph containing it
    first = ch.nodes[root.children[0]].block
    lowest = cov.lowest()[0]
    assert first == lowest or lowest in [o.block for o in corpus[first].ops]


def test_uct_prefers_rewarded_children(corpus):
    cov = Coverage.for_corpus(corpus)
    ch = MCTSChooser(corpus, cov, np.random.default_rng(1))
    for _ in range(3):
        _, node = ch.choose()
        ch.backprop(node, 0.0)
    good = ch.nodes[ch.nodes[0].children[1]]
    for _ in range(5):
        ch.backprop(good.id, 1.0)
    picks = [ch.path(ch.choose()[1])[1].id for _ in range(10)]
    assert picks.count(good.id) >= 5


def test_state_delta_and_reload_rebuild_the_tree(corpus):
    cov = Coverage.for_corpus(corpus)
    ch = MCTSChooser(corpus, cov, np.random.default_rng(2))
    rows: dict[int, dict] = {}
    for _ in range(25):
        _, node = ch.choose()
        ch.backprop(node, 0.5)
        for r in ch.state_delta():
            rows[r["id"]] = r
    again = MCTSChooser(corpus, cov, np.random.default_rng(2))
    again.load(list(rows.values()))
    assert [(n.id, n.block, n.n, n.v, n.children) for n in again.nodes] == [(n.id, n.block, n.n, n.v, n.children) for n in ch.nodes]


def test_random_chooser_draws_blocks():
    class C:
        blocks = {f"b{i}": None for i in range(20)}

    ch = RandomChooser(C(), None, np.random.default_rng(0))
    sets = [tuple(ch.choose()[0]) for _ in range(10)]
    assert len(set(sets)) > 5 and all(1 <= len(s) <= 10 for s in sets)


def test_reward_definition():
    assert reward(True, False) == 1.0 and reward(False, True) == 0.5 and reward(False, False) == 0.0


def test_bandit_learns_which_blocks_pay_and_survives_a_reload(corpus):
    from ofuzz.gen.chooser import BanditChooser

    cov = Coverage.for_corpus(corpus)
    b = BanditChooser(corpus, cov, np.random.default_rng(0), tc1=3)
    good = "Sinh"
    for _ in range(300):  # models preferring `good` reveal new findings, the rest nothing
        blocks, token = b.choose()
        b.backprop(token, 1.0 if good in blocks else 0.0)
    picks = [b.choose()[0] for _ in range(100)]
    assert sum(good in p for p in picks) > 80  # the posterior has learned it
    again = BanditChooser(corpus, cov, np.random.default_rng(1), tc1=3)
    again.load(b.state_delta())
    assert sum(good in again.choose()[0] for _ in range(100)) > 80
