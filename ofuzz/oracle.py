"""The differential oracle: statuses, the paper's comparison rule, triangulation.

Comparison (paper, V.A): per output tensor, the fraction of elements whose
relative error exceeds 0.1% must stay below 0.1%.  Relative error is
|a - b| / max(|a|, |b|, FLOOR) with FLOOR = 1e-2: below 0.01 in magnitude an
element is compared absolutely (1e-5), so float32 rounding around zero (sums
that cancel) does not flood the count.  Shapes and dtype kinds must match.
Non-finite values are compared exactly: NaN vs a number, or +Inf vs -Inf vs
NaN, is a DCF of category `nan` / `inf` however few elements differ.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

REL_TOL = 1e-3
MAX_BAD_FRACTION = 1e-3
FLOOR = 1e-2
REFERENCE = "reference"

MCF, IF, DCF, DCP = "MCF", "IF", "DCF", "DCP"


@dataclass
class Comparison:
    ok: bool
    category: str = ""  # shape | dtype | value | nan | inf | missing
    output: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    bad_fraction: float = 0.0
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _kind(a: np.ndarray) -> str:
    if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
        return "int"
    if np.issubdtype(a.dtype, np.floating):
        return "float"
    return str(a.dtype)


def compare_tensor(got: np.ndarray, want: np.ndarray, name: str = "") -> Comparison:
    with np.errstate(all="ignore"):  # NaN/Inf and huge values are data here, not warnings
        return _compare_tensor(np.asarray(got), np.asarray(want), name)


def _compare_tensor(got: np.ndarray, want: np.ndarray, name: str) -> Comparison:
    if got.shape != want.shape:
        if got.size == want.size and sorted(got.shape) == sorted(want.shape):
            detail = "same elements, permuted dims (layout)"
        else:
            detail = ""
        return Comparison(False, "shape", name, detail=f"{got.shape} vs {want.shape} {detail}".strip())
    kg, kw = _kind(got), _kind(want)
    if kg != kw:
        return Comparison(False, "dtype", name, detail=f"{got.dtype} vs {want.dtype}")
    if got.size == 0:
        return Comparison(True, output=name)
    if kg == "int":
        bad = got.astype(np.int64) != want.astype(np.int64)
        frac = float(bad.mean())
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        ok = frac <= MAX_BAD_FRACTION and not (bad.any() and got.size < 1 / MAX_BAD_FRACTION)
        return Comparison(ok, "" if ok else "value", name, float(diff.max()), float(bad.any()), frac)
    a, b = got.astype(np.float64), want.astype(np.float64)
    fa, fb = np.isfinite(a), np.isfinite(b)
    nan_bad = np.isnan(a) != np.isnan(b)
    inf_bad = (np.isinf(a) | np.isinf(b)) & ~(np.isnan(a) | np.isnan(b)) & (a != b)
    both = fa & fb
    diff = np.abs(np.subtract(a, b, where=both, out=np.zeros_like(a)))
    denom = np.maximum(np.maximum(np.abs(a), np.abs(b)), FLOOR)
    rel = np.divide(diff, denom, where=both, out=np.zeros_like(a))
    bad = (rel > REL_TOL) | nan_bad | inf_bad
    frac = float(bad.mean())
    max_abs = float(diff.max()) if both.any() else 0.0
    max_rel = float(rel.max()) if both.any() else 0.0
    if nan_bad.any():
        return Comparison(False, "nan", name, max_abs, max_rel, frac, f"{int(nan_bad.sum())} NaN mismatches")
    if inf_bad.any():
        return Comparison(False, "inf", name, max_abs, max_rel, frac, f"{int(inf_bad.sum())} Inf mismatches")
    # a tensor with fewer than 1000 elements fails on any bad element (0.1% of it is < 1 element)
    ok = frac < MAX_BAD_FRACTION if a.size >= 1 / MAX_BAD_FRACTION else not bad.any()
    return Comparison(ok, "" if ok else "value", name, max_abs, max_rel, frac)


def compare_outputs(got: dict[str, np.ndarray], want: dict[str, np.ndarray], names: list[str]) -> Comparison:
    """The first failing output decides; otherwise the worst errors are reported."""
    worst = Comparison(True)
    for n in names:
        if n not in got or n not in want:
            return Comparison(False, "missing", n, detail="output not produced")
        c = compare_tensor(got[n], want[n], n)
        if not c.ok:
            return c
        if c.max_rel >= worst.max_rel:
            worst = Comparison(True, "", n, max(worst.max_abs, c.max_abs), c.max_rel, c.bad_fraction)
    return worst


@dataclass
class EngineResult:
    engine: str
    status: str  # MCF | IF | DCF | DCP
    outcome: Any  # client.Outcome of the failing (or last) step
    prepare_time: float = 0.0
    run_time: float = 0.0
    versus: Comparison | None = None  # against the majority representative
    blamed: bool = False


@dataclass
class Verdict:
    results: dict[str, EngineResult]
    majority: list[str] = field(default_factory=list)
    split: bool = False
    expected_from: str = ""
    diverging: dict[str, Any] = field(default_factory=dict)  # engine -> localisation

    @property
    def findings(self) -> list[EngineResult]:
        return [r for r in self.results.values() if r.status != DCP]

    def to_json(self) -> dict[str, Any]:
        return {
            "majority": self.majority, "split": self.split, "expected_from": self.expected_from,
            "diverging": self.diverging,
            "engines": {
                k: {"status": r.status, "blamed": r.blamed, "prepare_time": r.prepare_time, "run_time": r.run_time,
                    "outcome": r.outcome.to_json() if r.outcome is not None else None,
                    "versus": r.versus.to_json() if r.versus else None}
                for k, r in self.results.items()
            },
        }


def family(engine: str) -> str:
    """Variants of one implementation vote once: mnn-arm:n1 and mnn are both 'mnn',
    onnxruntime-noopt is 'onnxruntime' (they share converters and most kernels)."""
    return engine.split(":")[0].removesuffix("-arm").removesuffix("-noopt")


def triangulate(outputs: dict[str, dict[str, np.ndarray]], names: list[str]) -> tuple[list[str], bool]:
    """Cluster engines by agreement; return (majority engines, split?).

    The majority is the largest clique of mutually agreeing engines, counted in
    engine families (variants of one engine share most code, so three MNN builds
    must not outvote one independent engine), when it holds more than half of the
    families; a tie between equally large cliques is broken by the one holding the
    reference evaluator; otherwise the verdict is a split.
    """
    engines = sorted(outputs)
    if len(engines) <= 1:
        return engines, False
    n_fam = len({family(e) for e in engines})
    g = nx.Graph()
    g.add_nodes_from(engines)
    for i, a in enumerate(engines):
        for b in engines[i + 1 :]:
            if compare_outputs(outputs[a], outputs[b], names).ok and compare_outputs(outputs[b], outputs[a], names).ok:
                g.add_edge(a, b)
    size = lambda c: len({family(e) for e in c})  # noqa: E731
    cliques = sorted((sorted(c) for c in nx.find_cliques(g)), key=lambda c: (-size(c), -len(c), c))
    top = [c for c in cliques if size(c) == size(cliques[0])]
    if len(top) > 1:  # same number of families: more engines is no better, unless only one clique is largest outright
        most = max(len(c) for c in top)
        if sum(1 for c in top if len(c) == most) == 1 and size(top[0]) * 2 > n_fam:
            top = [c for c in top if len(c) == most]
    if len(top) == 1 and 2 * size(top[0]) > n_fam:
        return top[0], False
    with_ref = [c for c in top if REFERENCE in c]
    if len(with_ref) == 1:
        return with_ref[0], False
    return [], True


def judge(outcomes: dict[str, tuple[Any, Any]], names: list[str]) -> Verdict:
    """outcomes: engine -> (prepare Outcome, run Outcome or None)."""
    results: dict[str, EngineResult] = {}
    ran: dict[str, dict[str, np.ndarray]] = {}
    for eng, (prep, run) in outcomes.items():
        if not prep.ok:
            results[eng] = EngineResult(eng, MCF, prep, prep.time, 0.0, blamed=True)
        elif run is None or not run.ok:
            results[eng] = EngineResult(eng, IF, run, prep.time, run.time if run else 0.0, blamed=True)
        else:
            results[eng] = EngineResult(eng, DCP, run, prep.time, run.time)
            ran[eng] = run.outputs
    majority, split = triangulate(ran, names)
    v = Verdict(results, majority, split)
    if not ran:
        return v
    rep = REFERENCE if REFERENCE in majority else (majority[0] if majority else (REFERENCE if REFERENCE in ran else sorted(ran)[0]))
    v.expected_from = rep
    for eng in ran:
        r = results[eng]
        r.versus = compare_outputs(ran[eng], ran[rep], names) if eng != rep else Comparison(True)
        if split:
            r.status, r.blamed = DCF, False
        elif eng not in majority:
            r.status, r.blamed = DCF, True
    return v
