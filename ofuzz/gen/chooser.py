"""Block choosers (paper III.D): MCTS over operators with UCT, a random baseline, and a Thompson-sampling bandit.

The chosen path's blocks are *preferred* by the generator: a node takes a
chosen block when one fits its in/out-degree, any corpus block otherwise.

Reward (what back-propagation adds to v along the path), in [0, 1]:
  1.0  the model revealed a new unique finding (a signature never seen) — the goal;
  0.5  no new finding, but it added operator-level coverage — the paper's proxy;
  0.0  otherwise, including models discarded before the engines ran them.
v/n is then a success rate, as UCT's v/n + e·sqrt(ln N / n) assumes.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ofuzz.gen.blocks import Corpus
from ofuzz.gen.coverage import Coverage

REWARD_FINDING = 1.0
REWARD_COVERAGE = 0.5
REWARD_FINE = 0.25  # bandit only: a construct some engine had not computed yet (ofuzz.gen.fine_coverage), once OLC is flat


def reward(new_finding: bool, new_coverage: bool, new_fine: bool = False) -> float:
    return REWARD_FINDING if new_finding else REWARD_COVERAGE if new_coverage else REWARD_FINE if new_fine else 0.0


@dataclass
class TreeNode:
    id: int
    block: str | None
    parent: int | None
    depth: int
    children: list[int] = field(default_factory=list)
    n: int = 0
    v: float = 0.0


class MCTSChooser:
    name = "mcts"

    def __init__(self, corpus: Corpus, coverage: Coverage, rng: np.random.Generator,
                 tc1: int = 10, tc2: int = 1, e: float = 1 / math.sqrt(2), max_children: int = 3) -> None:
        self.corpus, self.coverage, self.rng = corpus, coverage, rng
        self.tc1, self.tc2, self.e, self.max_children = tc1, tc2, e, max_children
        self.nodes: list[TreeNode] = [TreeNode(0, None, None, 0)]
        self.dirty: set[int] = {0}  # nodes changed since the last state_delta()
        self._subgraphs_of: dict[str, list[str]] = {}
        for b in corpus:
            for inner in b.ops:
                self._subgraphs_of.setdefault(inner.block, []).append(b.name)

    def path(self, node_id: int) -> list[TreeNode]:
        out = []
        cur: int | None = node_id
        while cur is not None:
            out.append(self.nodes[cur])
            cur = self.nodes[cur].parent
        return out[::-1]

    def uct(self, node: TreeNode, parent: TreeNode) -> float:
        if node.n == 0:
            return math.inf
        return node.v / node.n + self.e * math.sqrt(math.log(max(parent.n, 1)) / node.n)

    def choose(self) -> tuple[list[str], int]:
        """Selection then expansion; returns the path's blocks and the node to back-propagate from."""
        node = self.nodes[0]
        while True:
            can_expand = len(node.children) < self.max_children and node.depth < self.tc1
            if can_expand and (node.id == 0 or node.n >= self.tc2):
                node = self._expand(node)
                break
            if not node.children or (can_expand and node.n < self.tc2):
                break  # simulate this node (again) before it grows
            node = max((self.nodes[c] for c in node.children), key=lambda c: (self.uct(c, node), -c.id))
        return [n.block for n in self.path(node.id) if n.block], node.id

    def _expand(self, node: TreeNode) -> TreeNode:
        taken = {n.block for n in self.path(node.id) if n.block} | {self.nodes[c].block for c in node.children}
        base = {self.corpus[b].ops[0].block if self.corpus[b].is_subgraph else b for b in taken if b}
        for op in self.coverage.lowest(exclude=base):
            options = [op] + [s for s in self._subgraphs_of.get(op, []) if s not in taken]
            block = options[int(self.rng.integers(len(options)))] if len(options) > 1 and self.rng.random() < 0.5 else op
            if block not in taken:
                break
        else:
            return node
        child = TreeNode(len(self.nodes), block, node.id, node.depth + 1)
        self.nodes.append(child)
        node.children.append(child.id)
        self.dirty.update((child.id, node.id))
        return child

    def backprop(self, node_id: int | None, r: float) -> None:
        if node_id is None:
            return
        for n in self.path(node_id):
            n.n += 1
            n.v += r
            self.dirty.add(n.id)

    def state_delta(self) -> list[dict[str, Any]]:
        """The tree nodes changed since the last call (stored incrementally, O(path) per model)."""
        out = [asdict(self.nodes[i]) for i in sorted(self.dirty)]
        self.dirty.clear()
        return out

    def load(self, rows: list[dict[str, Any]]) -> None:
        self.nodes = [TreeNode(**n) for n in sorted(rows, key=lambda r: r["id"])] or self.nodes
        self.dirty.clear()

    def best_path(self) -> list[str]:
        """The path through the children with the highest value per visit (the paper's 'optimal strategy')."""
        node, out = self.nodes[0], []
        while node.children:
            node = max((self.nodes[c] for c in node.children), key=lambda c: (c.v / c.n if c.n else -1, c.n))
            out.append(node.block)
        return [b for b in out if b]


class RandomChooser:
    """Baseline: a uniformly random set of 1..tc1 blocks, no feedback."""

    name = "random"

    def __init__(self, corpus: Corpus, coverage: Coverage, rng: np.random.Generator, tc1: int = 10, **_: Any) -> None:
        self.names = list(corpus.blocks)
        self.rng, self.tc1 = rng, tc1

    def choose(self) -> tuple[list[str], None]:
        k = int(self.rng.integers(1, self.tc1 + 1))
        return [self.names[int(i)] for i in self.rng.choice(len(self.names), size=k, replace=False)], None

    def backprop(self, node_id: int | None, r: float) -> None:
        return None

    def state_delta(self) -> list[dict[str, Any]]:
        return []

    def load(self, rows: list[dict[str, Any]]) -> None:
        return None


class BanditChooser:
    """Thompson sampling over blocks by what their models yield (not a tree): each block keeps a Beta(1 + s, 1 + f)
    belief that a model preferring it reveals something new, where a model's reward r (1 a new bug, counted by
    campaign.rootish so that a reworded signature of a known defect is no reward; 0.5 new coverage; 0 nothing) adds r
    to s and 1 - r to f of every block it preferred. Each model prefers the k blocks (k uniform in 1..tc1) with the
    highest sampled beliefs. Unlike MCTS, whose tree stops learning once OLC saturates (every path then earns the
    same 0), a block keeps earning while it keeps finding new defects."""

    name = "bandit"

    def __init__(self, corpus: Corpus, coverage: Coverage, rng: np.random.Generator, tc1: int = 10, **_: Any) -> None:
        self.names = list(corpus.blocks)
        self.rng, self.tc1 = rng, tc1
        self.s = np.zeros(len(self.names))
        self.f = np.zeros(len(self.names))
        self.pending: dict[int, list[int]] = {}  # token -> block indices, until its reward comes back
        self.next_token = 0
        self.dirty: set[int] = set()

    def choose(self) -> tuple[list[str], int]:
        k = int(self.rng.integers(1, self.tc1 + 1))
        theta = self.rng.beta(1 + self.s, 1 + self.f)
        picked = [int(i) for i in np.argsort(-theta, kind="stable")[:k]]
        token = self.next_token
        self.next_token += 1
        self.pending[token] = picked
        return [self.names[i] for i in picked], token

    def backprop(self, node_id: int | None, r: float) -> None:
        for i in self.pending.pop(node_id, []) if node_id is not None else []:
            self.s[i] += r
            self.f[i] += 1 - r
            self.dirty.add(i)

    def state_delta(self) -> list[dict[str, Any]]:
        out = [{"id": i, "block": self.names[i], "s": float(self.s[i]), "f": float(self.f[i])} for i in sorted(self.dirty)]
        self.dirty.clear()
        return out

    def load(self, rows: list[dict[str, Any]]) -> None:
        index = {n: i for i, n in enumerate(self.names)}
        for r in rows:
            if "s" in r and r.get("block") in index:
                self.s[index[r["block"]]], self.f[index[r["block"]]] = r["s"], r["f"]


def make_chooser(kind: str, corpus: Corpus, coverage: Coverage, rng: np.random.Generator,
                 **kw: Any) -> MCTSChooser | RandomChooser | BanditChooser:
    if kind == "mcts":
        return MCTSChooser(corpus, coverage, rng, **kw)
    if kind == "random":
        return RandomChooser(corpus, coverage, rng, **kw)
    if kind == "bandit":
        return BanditChooser(corpus, coverage, rng, **kw)
    raise ValueError(f"unknown chooser {kind!r}; use mcts, random or bandit")
