"""The corpus's types: blocks, their parameter spaces, the corpus container.

Types only, at the bottom of the package: the solver's rules and the generator read them; the loader
(`ofuzz.gen.corpus`) builds them from YAML and validates them with the solver's rules, so it sits above `solver/`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

DEFAULT_OUT_DEGREE = frozenset(range(0, 6))
KNOWN_DTYPES = ("float32", "int64", "int32", "bool")
KNOWN_DOMAINS = ("positive", "nonneg", "unit", "ge1")
BLOCK_FIELDS = {
    "name", "op", "rule", "in_degree", "out_degree", "params", "constraints", "dtypes",
    "ranks", "domain", "ops", "edges", "paper", "doc", "opsets",
}


class CorpusError(ValueError):
    """A corpus file is malformed; the message names file, block and field."""


@dataclass(frozen=True)
class ParamSpec:
    """One parameter's space: an enumeration, a float range or an int range."""

    name: str
    kind: str  # "choice" | "range" | "int"
    values: tuple[Any, ...] = ()
    weights: tuple[float, ...] | None = None
    lo: float = 0.0
    hi: float = 0.0

    def sample(self, rng: np.random.Generator) -> Any:
        if self.kind == "choice":
            if len(self.values) == 1:
                return self.values[0]
            if self.weights is not None:
                idx = int(rng.choice(len(self.values), p=np.asarray(self.weights) / sum(self.weights)))
            else:
                idx = int(rng.integers(len(self.values)))
            return self.values[idx]
        if self.kind == "int":
            return int(rng.integers(int(self.lo), int(self.hi) + 1))
        return round(float(rng.uniform(self.lo, self.hi)), 5)

    @property
    def cardinality(self) -> float:
        if self.kind == "choice":
            return len(self.values)
        if self.kind == "int":
            return int(self.hi) - int(self.lo) + 1
        return math.inf


@dataclass(frozen=True)
class InnerOp:
    """An operator inside a subgraph block: a reference to an op block, params pinned."""

    block: str
    params: dict[str, tuple[Any, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Block:
    name: str
    source: str
    op: str | None = None
    rule: str = "unary"
    in_degree: frozenset[int] = frozenset({1})
    out_degree: frozenset[int] = DEFAULT_OUT_DEGREE
    params: tuple[ParamSpec, ...] = ()
    constraints: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("float32",)
    ranks: tuple[int, ...] | None = None
    domain: str | None = None
    ops: tuple[InnerOp, ...] = ()
    edges: tuple[tuple[int, int], ...] = ()
    paper: str | None = None
    doc: str = ""
    opsets: tuple[int, int] = (1, 99)  # ONNX versions the block exists at (Mish: 18..); placed only in models of those

    def at(self, opset: int) -> bool:
        return self.opsets[0] <= opset <= self.opsets[1]

    @property
    def is_subgraph(self) -> bool:
        return bool(self.ops)

    def sample_params(self, rng: np.random.Generator, pinned: dict[str, tuple[Any, ...]] | None = None) -> dict[str, Any]:
        """Draw every parameter; constraints are met by rejection sampling."""
        specs = self.params
        for _ in range(200):
            p = {}
            for s in specs:
                if pinned and s.name in pinned:
                    vals = pinned[s.name]
                    p[s.name] = vals[int(rng.integers(len(vals)))] if len(vals) > 1 else vals[0]
                else:
                    p[s.name] = s.sample(rng)
            if all(eval_constraint(c, p) for c in self.constraints):
                return p
        raise CorpusError(f"{self.source}: block {self.name}: field constraints: no parameter draw satisfies them")

    def canonical_params(self, pinned: dict[str, tuple[Any, ...]] | None = None) -> dict[str, Any]:
        """The block's common configuration: the most likely choice, the middle of a range."""
        p: dict[str, Any] = {}
        for s in self.params:
            if pinned and s.name in pinned:
                p[s.name] = pinned[s.name][0]
            elif s.kind == "choice":
                w = s.weights or (1.0,) * len(s.values)
                p[s.name] = s.values[max(range(len(s.values)), key=lambda i: (w[i], -i))]
            elif s.kind == "int":
                p[s.name] = min(max(1, int(s.lo)), int(s.hi))
            else:
                p[s.name] = round((s.lo + s.hi) / 2, 5)
        return p

    def spec(self, name: str) -> ParamSpec | None:
        for s in self.params:
            if s.name == name:
                return s
        return None


def eval_constraint(expr: str, params: dict[str, Any]) -> bool:
    return bool(eval(expr, {"__builtins__": {}, "abs": abs, "min": min, "max": max}, dict(params)))  # noqa: S307


@dataclass
class Corpus:
    blocks: dict[str, Block]
    files: tuple[str, ...] = ()

    def __iter__(self) -> Iterable[Block]:
        return iter(self.blocks.values())

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, name: str) -> Block:
        return self.blocks[name]

    def at(self, opset: int) -> "Corpus":
        """The blocks a model of this ONNX version may hold (a subgraph needs every inner block there); cached."""
        cache = self.__dict__.setdefault("_at", {})
        if opset not in cache:
            keep = {n: b for n, b in self.blocks.items()
                    if b.at(opset) and all(o.block not in self.blocks or self.blocks[o.block].at(opset) for o in b.ops)}
            cache[opset] = self if len(keep) == len(self.blocks) else Corpus(keep, self.files)
        return cache[opset]

    def within(self, lo: int, hi: int) -> "Corpus":
        """The blocks some version in lo..hi has: what a campaign's chooser and coverage may count on."""
        keep = {n: b for n, b in self.blocks.items() if b.opsets[0] <= hi and b.opsets[1] >= lo}
        return self if len(keep) == len(self.blocks) else Corpus(keep, self.files)

    @property
    def operator_types(self) -> list[str]:
        """Distinct ONNX operator types the corpus can emit (for coverage n_t)."""
        return sorted({b.op for b in self.blocks.values() if b.op})


def subgraph_entries(block: Block) -> int:
    """External inputs of a subgraph: one per inner op that has no inner predecessor."""
    has_pred = {dst for _, dst in block.edges}
    return sum(1 for i in range(len(block.ops)) if i not in has_pred)
