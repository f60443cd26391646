"""Isolation check: blame a node only if it diverges on its own.

Localisation names the first node whose output differs, but a node fed slightly
different inputs (1e-6 from an upstream Tanh) can amplify them past any
tolerance (Acos/Asin/Atanh near +-1, Log near 0) while being perfectly right.
So every diverging node, in graph order, is cut out alone and run on the blamed
engine and on the majority's engines with *identical* inputs (the majority's
values of that node's inputs).  The first node that still diverges is the
defect; a value divergence that stays within the float32 error bound around the
node's float64 result (`precision`) is not.  If no node diverges on its own, the
finding is numerical drift: stored and shown apart, never counted as a bug.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from ofuzz.core.vocab import REFERENCE
from ofuzz.judge.compare import RULE, Comparison
from ofuzz.judge.cut import submodel
from ofuzz.judge.localise import Localisation, node_attrs, pick_voters
from ofuzz.judge.precision import Tolerances, abs_feeds, abs_weights, centering_terms, exact_by_formula, n_terms, preactivation_scale, to_float64, within_float32

DEFECT, DRIFT, UNKNOWN = "defect", "drift", "unknown"  # isolation verdicts (not finding classes)


@dataclass
class Isolation:
    """The outcome: which node is wrong on its own (defect), or none (drift)."""

    verdict: str  # defect | drift | unknown (nothing to isolate: the blamed engine failed with intermediates exposed)
    info: dict[str, Any] = field(default_factory=dict)  # JSON-able: op, node, attrs, category, max_rel, tried, note
    model: onnx.ModelProto | None = None  # the blamed node alone (a ready 1-node repro)
    feeds: dict[str, np.ndarray] = field(default_factory=dict)


def isolate(pool: Any, model: onnx.ModelProto, feeds: dict[str, np.ndarray], blamed: str, majority: list[str],
            loc: Localisation, tolerances: Tolerances | None = None, excluded: dict[str, str] | None = None) -> Isolation:
    if not loc.candidates or not loc.values:
        return Isolation(UNKNOWN if loc.info.get("op") is None and "failed" in loc.info.get("note", "") else DRIFT,
                         {"note": loc.info.get("note", "")})
    voters = pick_voters(majority, blamed, excluded)
    if not voters:
        return Isolation(UNKNOWN, {"note": "no majority engine to compare with"})
    tried: list[str] = []
    tested = 0
    for i in loc.candidates:
        node = model.graph.node[i]
        built = submodel(model, [i], loc.values, feeds)
        if built is None:
            tried.append(f"{node.name}: cannot be cut out")
            continue
        m1, f1 = built
        res = _run(pool, m1, f1, [blamed, *voters])
        if not any(res.get(e, (None, None))[1] is not None and res[e][1].ok for e in voters):
            tried.append(f"{node.name}: no majority engine runs it alone")
            continue
        tested += 1
        why = _diverges_alone(res, blamed, voters, [o.name for o in m1.graph.output])
        if why is None:
            tried.append(f"{node.name}: agrees alone")
            continue
        if why.category == "value" and tolerances is not None and _within_float32(pool, m1, f1, res[blamed][1], node.op_type, tolerances, excluded):
            tried.append(f"{node.name}: within float32 error of the exact result (max rel {why.max_rel:.3g})")
            continue
        info = {"op": node.op_type, "node": node.name, "output": why.output, "category": why.category, "max_abs": why.max_abs,
                "max_rel": why.max_rel, "bad_fraction": why.bad_fraction, "detail": why.detail, "attrs": node_attrs(node),
                "versus": voters, "tried": tried}
        return Isolation(DEFECT, info, m1, f1)
    if not tested:
        return Isolation(UNKNOWN, {"tried": tried, "note": "no diverging node could be run alone on the majority's engines"})
    return Isolation(DRIFT, {"tried": tried, "first": loc.info.get("op"),
                             "note": "no node diverges when fed identical inputs: accumulated or amplified rounding"})


def isolate_single(pool: Any, model: onnx.ModelProto, feeds: dict[str, np.ndarray], blamed: str, versus: Comparison, run: Any,
                   tolerances: Tolerances | None = None, excluded: dict[str, str] | None = None) -> Isolation:
    """A one-node model is its own isolation: every engine already got identical inputs.
    Only the float32 check is left (reduction judges thousands of such candidates)."""
    node = model.graph.node[0]
    if versus.category == "value" and tolerances is not None and run is not None and _within_float32(pool, model, feeds, run, node.op_type, tolerances, excluded):
        return Isolation(DRIFT, {"tried": [f"{node.name}: within float32 error of the exact result (max rel {versus.max_rel:.3g})"],
                                 "first": node.op_type, "note": "the node is within float32 error of its exact result"})
    info = {"op": node.op_type, "node": node.name, "output": versus.output, "category": versus.category, "max_abs": versus.max_abs,
            "max_rel": versus.max_rel, "bad_fraction": versus.bad_fraction, "detail": versus.detail, "attrs": node_attrs(node), "tried": []}
    return Isolation(DEFECT, info, model, dict(feeds))


def _run(pool: Any, m: onnx.ModelProto, feeds: dict[str, np.ndarray], engines: list[str]) -> dict[str, tuple[Any, Any]]:
    return pool.execute_model(m, feeds, engines)


def _diverges_alone(res: dict[str, tuple[Any, Any]], blamed: str, voters: list[str], names: list[str]) -> Comparison | None:
    """How the blamed engine differs from every majority engine that ran the node, or None if it agrees with one."""
    prep, run = res.get(blamed, (None, None))
    ok_voters = [e for e in voters if res.get(e, (None, None))[1] is not None and res[e][1].ok]
    if not ok_voters:
        return None  # nothing to compare with: cannot blame this node
    if prep is None or not prep.ok or run is None or not run.ok:
        what = (run or prep).summary() if (run or prep) is not None else "not run"
        return Comparison(False, "failure", detail=f"the node alone fails on {blamed}: {what}")
    worst: Comparison | None = None
    for e in ok_voters:
        c = RULE.compare_outputs(run.outputs, res[e][1].outputs, names)
        if c.ok:
            return None
        worst = worst or c
    return worst


def _within_float32(pool: Any, m1: onnx.ModelProto, f1: dict[str, np.ndarray], run: Any, op: str, tol: Tolerances,
                    excluded: dict[str, str] | None) -> bool:
    """Is the blamed engine as close to the node's exact (float64) result as float32 allows?"""
    bound = tol.bound_for(op)
    if bound is None or REFERENCE not in getattr(pool, "names", []) or REFERENCE in (excluded or {}):
        return False
    wide = to_float64(m1, f1)
    if wide is None:
        return False
    m64, f64 = wide
    names = [o.name for o in m64.graph.output]
    run64 = _run(pool, m64, f64, [REFERENCE]).get(REFERENCE, (None, None))[1]
    exact_outputs = run64.outputs if run64 is not None and run64.ok else exact_by_formula(m1, f1)
    if exact_outputs is None:
        return False
    magnitude = None
    if bound.accumulation:
        mag = _run(pool, abs_weights(m64), abs_feeds(f64), [REFERENCE]).get(REFERENCE, (None, None))[1]
        magnitude = mag.outputs if mag is not None and mag.ok else None
    got = {n: run.outputs[n] for n in names if n in run.outputs}
    scale = preactivation_scale(m1, f1) if bound.preactivation else 0.0
    centre = centering_terms(m1, f1) if bound.centering else None
    return within_float32(tol.rule, bound, got, exact_outputs, magnitude, n_terms(f1, got, m1), scale, centre)
