"""Operator-level coverage (paper III.B): OTC, IDC, ODC, SEC, SPC and the weighted OLC.

For operator c of the block corpus BC (n_t operator types) over test set I:
  OTC_op = 1 if c occurs in I
  IDC_op = |in-degrees of c seen| / |in-degrees BC allows c|
  ODC_op = |out-degrees of c seen| / |out-degrees BC allows c|
  SEC_op = |distinct operator types c feeds| / n_t
  SPC_op = min(1, |distinct (input shapes, parameters) vectors of c| / n_maxspc)
Set level: OTC = Σ OTC_op / n_t, and likewise Σ X_op / n_t for the others; OLC is
the weighted mean of the five (per operator: of its five).  A metric whose
range is trivial — every operator allows only degree 1, as in the paper's ODC
example — gets weight 0.  State is a set per operator and metric plus running
sums, so adding a model costs time in its size, never in the test set's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from ofuzz.gen.blocks import Corpus

METRICS = ("OTC", "IDC", "ODC", "SEC", "SPC")


@dataclass(frozen=True)
class OpRecord:
    """One operator occurrence in a model, as coverage sees it."""

    op: str  # operator block name
    in_degree: int
    out_degree: int
    successors: tuple[str, ...]
    spc: str  # canonical (input shapes, parameters) vector

    def to_json(self) -> list[Any]:
        return [self.op, self.in_degree, self.out_degree, list(self.successors), self.spc]

    @staticmethod
    def from_json(v: list[Any]) -> "OpRecord":
        return OpRecord(v[0], int(v[1]), int(v[2]), tuple(v[3]), v[4])


def spc_key(shapes: Iterable[tuple[int, ...]], params: dict[str, Any]) -> str:
    return json.dumps([[list(s) for s in shapes], sorted((k, v) for k, v in params.items())], default=str, separators=(",", ":"))


@dataclass
class _OpState:
    ins: set[int] = field(default_factory=set)
    outs: set[int] = field(default_factory=set)
    succ: set[str] = field(default_factory=set)
    spc: set[str] = field(default_factory=set)


class Coverage:
    def __init__(
        self,
        degrees: dict[str, tuple[frozenset[int], frozenset[int]]],
        n_maxspc: int = 200,
        weights: dict[str, float] | None = None,
        zero_trivial: bool = True,
    ) -> None:
        self.degrees = degrees
        self.n_t = len(degrees)
        self.n_maxspc = n_maxspc
        self.weights = {m: 1.0 for m in METRICS} | dict(weights or {})
        if zero_trivial:
            if all(ins == {1} for ins, _ in degrees.values()):
                self.weights["IDC"] = 0.0
            if all(outs == {1} for _, outs in degrees.values()):
                self.weights["ODC"] = 0.0
        self.state: dict[str, _OpState] = {}
        self.sums = {m: 0.0 for m in METRICS}  # Σ over operators of X_op

    @classmethod
    def for_corpus(cls, corpus: Corpus, **kw: Any) -> "Coverage":
        """Operators are the corpus's operator blocks (subgraphs count through their inner ops)."""
        return cls({b.name: (b.in_degree, b.out_degree) for b in corpus if not b.is_subgraph}, **kw)

    # -- per-operator values -------------------------------------------------
    def _values(self, op: str, st: _OpState | None) -> dict[str, float]:
        if st is None:
            return {m: 0.0 for m in METRICS}
        ins, outs = self.degrees[op]
        return {
            "OTC": 1.0,
            "IDC": len(st.ins & ins) / len(ins),
            "ODC": len(st.outs & outs) / len(outs),
            "SEC": len(st.succ) / self.n_t,
            "SPC": min(1.0, len(st.spc) / self.n_maxspc),
        }

    def op_metrics(self, op: str) -> dict[str, float]:
        vals = self._values(op, self.state.get(op))
        vals["OLC"] = self._weighted(vals)
        return vals

    def _weighted(self, vals: dict[str, float]) -> float:
        total = sum(self.weights[m] for m in METRICS)
        return sum(self.weights[m] * vals[m] for m in METRICS) / total if total else 0.0

    def metrics(self) -> dict[str, float]:
        vals = {m: self.sums[m] / self.n_t if self.n_t else 0.0 for m in METRICS}
        vals["OLC"] = self._weighted(vals)
        return vals

    # -- updates ---------------------------------------------------------------
    def _novel(self, r: OpRecord, st: _OpState | None) -> bool:
        if r.op not in self.degrees:
            return False
        if st is None:
            return True
        ins, outs = self.degrees[r.op]
        return (
            (r.in_degree in ins and r.in_degree not in st.ins)
            or (r.out_degree in outs and r.out_degree not in st.outs)
            or any(s in self.degrees and s not in st.succ for s in r.successors)
            or (len(st.spc) < self.n_maxspc and r.spc not in st.spc)
        )

    def is_new(self, records: Iterable[OpRecord]) -> bool:
        """Would this model add coverage? (Algorithm 1's IsNewCoverage; changes nothing.)"""
        return any(self._novel(r, self.state.get(r.op)) for r in records)

    def add(self, records: Iterable[OpRecord]) -> float:
        """Add a model's operators; return the OLC gain."""
        before = self.metrics()["OLC"]
        for r in records:
            if r.op not in self.degrees:
                continue
            st = self.state.get(r.op)
            old = self._values(r.op, st)
            if st is None:
                st = self.state[r.op] = _OpState()
            ins, outs = self.degrees[r.op]
            if r.in_degree in ins:
                st.ins.add(r.in_degree)
            if r.out_degree in outs:
                st.outs.add(r.out_degree)
            st.succ.update(s for s in r.successors if s in self.degrees)
            if len(st.spc) < self.n_maxspc:
                st.spc.add(r.spc)
            new = self._values(r.op, st)
            for m in METRICS:
                self.sums[m] += new[m] - old[m]
        return self.metrics()["OLC"] - before

    def lowest(self, exclude: Iterable[str] = ()) -> list[str]:
        """Operators by ascending OLC_op (ties by name): the MCTS expansion order."""
        ex = set(exclude)
        return sorted((op for op in self.degrees if op not in ex), key=lambda op: (self.op_metrics(op)["OLC"], op))
