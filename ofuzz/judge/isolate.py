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

from ofuzz.exec.pool import Pool
from ofuzz.core.vocab import REFERENCE
from ofuzz.judge.compare import RULE, Comparison
from ofuzz.judge.cut import submodel
from ofuzz.judge.localise import Localisation, expose_intermediates, node_attrs, pick_voters
from ofuzz.judge.precision import Tolerances, abs_feeds, abs_weights, centering_terms, exact_by_formula, n_terms, preactivation_scale, to_float64, within_float32

DEFECT, DRIFT, UNKNOWN = "defect", "drift", "unknown"  # isolation verdicts (not finding classes)


@dataclass
class Isolation:
    """The outcome: which node is wrong on its own (defect), or none (drift)."""

    verdict: str  # defect | drift | unknown (nothing to isolate: the blamed engine failed with intermediates exposed)
    info: dict[str, Any] = field(default_factory=dict)  # JSON-able: op, node, attrs, category, max_rel, tried, note
    model: onnx.ModelProto | None = None  # the blamed node alone (a ready 1-node repro)
    feeds: dict[str, np.ndarray] = field(default_factory=dict)


def isolate(pool: Pool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], blamed: str, majority: list[str],
            loc: Localisation, tolerances: Tolerances | None = None, excluded: dict[str, str] | None = None) -> Isolation:
    if not loc.values:
        return Isolation(UNKNOWN if loc.info.get("op") is None and "failed" in loc.info.get("note", "") else DRIFT,
                         {"note": loc.info.get("note", "")})
    voters = pick_voters(majority, blamed, excluded)
    if not voters:
        return Isolation(UNKNOWN, {"note": "no majority engine to compare with"})
    if not loc.candidates:  # exposing the intermediates made the divergence go: a fusion of the nodes that make the outputs?
        tried: list[str] = []
        ends = [i for i, n in enumerate(model.graph.node) if set(n.output) & {o.name for o in model.graph.output}]
        fused = fusion_window(pool, model, feeds, loc.values, ends, blamed, voters, tolerances, excluded, tried)
        return fused or Isolation(DRIFT, {"note": loc.info.get("note", ""), "tried": tried})
    tried: list[str] = []
    tested = 0
    agreed: list[int] = []  # nodes that agree alone outright (not merely within float32 error): a window may end there
    untested: list[int] = []
    for i in loc.candidates:
        node = model.graph.node[i]
        built = submodel(model, [i], loc.values, feeds)
        if built is None:
            tried.append(f"{node.name}: cannot be cut out")
            untested.append(i)
            continue
        m1, f1 = built
        res = _run(pool, m1, f1, [blamed, *voters])
        if not any(res.get(e, (None, None))[1] is not None and res[e][1].ok for e in voters):
            tried.append(f"{node.name}: no majority engine runs it alone")
            untested.append(i)
            continue
        tested += 1
        why = _diverges_alone(res, blamed, voters, [o.name for o in m1.graph.output])
        if why is None:
            tried.append(f"{node.name}: agrees alone")
            agreed.append(i)
            continue
        if why.category == "value" and tolerances is not None and _within_float32(pool, m1, f1, res[blamed][1], node.op_type, tolerances, excluded):
            tried.append(f"{node.name}: within float32 error of the exact result (max rel {why.max_rel:.3g})")
            continue
        info = {"op": node.op_type, "node": node.name, "output": why.output, "category": why.category, "max_abs": why.max_abs,
                "max_rel": why.max_rel, "bad_fraction": why.bad_fraction, "detail": why.detail, "attrs": node_attrs(node),
                "versus": voters, "tried": tried}
        return Isolation(DEFECT, info, m1, f1)
    if not tested or loc.candidates[0] in untested:
        # the divergence starts at a node nobody could run alone: the later ones agreeing says nothing about it (onnx2tf's
        # Reshape after GroupNormalization, whose input was not exposed, was called drift and lost, hand triage 20 #24)
        return Isolation(UNKNOWN, {"tried": tried, "note": "the first diverging node could not be run alone on the majority's engines"})
    # the first diverging node, if it agrees alone: a node only within float32 error of its exact result is noisy alone,
    # and a window ending there adds upstream rounding to that noise (MNN's MVN+Conv on a cancelling Conv, seed 41)
    ends = [i for i in loc.candidates[:1] if i in agreed]
    fused = fusion_window(pool, model, feeds, loc.values, ends, blamed, voters, tolerances, excluded, tried)
    if fused is not None:
        return fused
    return Isolation(DRIFT, {"tried": tried, "first": loc.info.get("op"),
                             "note": "no node diverges when fed identical inputs: accumulated or amplified rounding"})


MAX_WINDOWS = 6  # windows tried per divergence before it is called drift (each costs one run on blamed and voters)
# operators whose output jumps at a threshold: an intermediate one rounding step off flips them (BatchNormalization fused
# differently, then LessOrEqual on a tie, seed 43), so a window ending in one shows rounding, not a fused defect
DISCONTINUOUS = frozenset({"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal", "Floor", "Ceil", "Round", "Sign", "Cast",
                           "CastLike", "ArgMax", "ArgMin", "TopK", "Hardmax", "Mod", "IsInf", "IsNaN", "NonZero", "QuantizeLinear",
                           "DynamicQuantizeLinear", "BitShift", "Unique", "NonMaxSuppression"})


def producers(model: onnx.ModelProto, i: int) -> list[int]:
    """The nodes that make node i's inputs, in graph order."""
    wanted = set(model.graph.node[i].input)
    return [j for j, n in enumerate(model.graph.node[:i]) if wanted & set(n.output)]


def windows(model: onnx.ModelProto, end: int) -> list[list[int]]:
    """Connected windows of two and three nodes that end at node `end`: it with a producer, with a producer and that
    producer's producer, or with two producers: the shapes an optimizer's fusion or a converter's pattern takes."""
    out: list[list[int]] = []
    ps = producers(model, end)
    out += [[p, end] for p in ps]
    out += [[pp, p, end] for p in ps for pp in producers(model, p)]
    out += [[a, b, end] for k, a in enumerate(ps) for b in ps[k + 1:]]
    unique = {tuple(sorted(w)): w for w in reversed(out)}  # one per node set, the first listed
    return [w for w in out if unique[tuple(sorted(w))] is w]


def fusion_window(pool: Pool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], values: dict[str, np.ndarray], ends: list[int],
                  blamed: str, voters: list[str], tolerances: Tolerances | None, excluded: dict[str, str] | None,
                  tried: list[str]) -> Isolation | None:
    """A window of two or three connected nodes that diverges on identical inputs while each of its nodes agrees alone:
    a multi-node (fusion, pattern-rewrite) defect, not drift. The window is the isolated model (its repro starts there)
    and its operators, in order, are the pattern it is keyed by."""
    for w in [w for e in ends if model.graph.node[e].op_type not in DISCONTINUOUS for w in windows(model, e)][:MAX_WINDOWS]:
        built = submodel(model, w, values, feeds)
        if built is None:
            continue
        m1, f1 = built
        pattern = "+".join(model.graph.node[i].op_type for i in sorted(w))
        res = _run(pool, m1, f1, [blamed, *voters])
        why = _diverges_alone(res, blamed, voters, [o.name for o in m1.graph.output])
        last = model.graph.node[max(w)]
        if why is None or why.category == "failure":
            tried.append(f"window {pattern}: agrees" if why is None else f"window {pattern}: fails alone ({why.detail})")
            continue
        if why.category == "nan" and any(np.issubdtype(np.asarray(v).dtype, np.floating) and np.isnan(v).any() for v in f1.values()):
            tried.append(f"window {pattern}: differs only in NaN handling of a NaN input")
            continue
        if why.category == "value" and tolerances is not None and _within_float32(pool, m1, f1, res[blamed][1], last.op_type, tolerances, excluded):
            tried.append(f"window {pattern}: within float32 error of the exact result (max rel {why.max_rel:.3g})")
            continue
        if _own_intermediates_explain(pool, m1, f1, res[blamed][1].outputs, blamed, voters):
            tried.append(f"window {pattern}: the engine's own intermediates, fed to the majority, give its result (amplified rounding)")
            continue
        info = {"op": last.op_type, "node": last.name, "output": why.output, "category": why.category, "max_abs": why.max_abs,
                "max_rel": why.max_rel, "bad_fraction": why.bad_fraction, "detail": why.detail, "attrs": node_attrs(last),
                "versus": voters, "tried": tried, "fusion": pattern.split("+"),
                "note": f"the nodes {pattern} diverge together on identical inputs while each agrees alone"}
        return Isolation(DEFECT, info, m1, f1)
    return None


def _own_intermediates_explain(pool: Pool, window: onnx.ModelProto, feeds: dict[str, np.ndarray], got: dict[str, np.ndarray],
                                blamed: str, voters: list[str]) -> bool:
    """Does the majority, fed the blamed engine's own intermediate values, give the blamed engine's window result? Then
    the window only amplifies a difference each node keeps within tolerance (Sqrt 2e-6 off, then Acos near 1): drift.
    A fusion's result is not what the engine's own unfused steps give. Unknown (the engine cannot expose them): True,
    so nothing is called a fusion without that check."""
    exposed, _ = expose_intermediates(window)
    prep, run = _run(pool, exposed, feeds, [blamed]).get(blamed, (None, None))
    if prep is None or not prep.ok or run is None or not run.ok:
        return True
    last = len(window.graph.node) - 1
    built = submodel(window, [last], {**run.outputs, **feeds}, feeds)
    if built is None:
        return True
    m_last, f_last = built
    again = _run(pool, m_last, f_last, voters)
    names = [o.name for o in m_last.graph.output if o.name in got]
    outs = [r[1] for r in again.values() if r[1] is not None and r[1].ok]
    return not names or any(RULE.compare_outputs({n: got[n] for n in names}, o.outputs, names).ok for o in outs)


def isolate_single(pool: Pool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], blamed: str, versus: Comparison, run: Any,
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


def _run(pool: Pool, m: onnx.ModelProto, feeds: dict[str, np.ndarray], engines: list[str]) -> dict[str, tuple[Any, Any]]:
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


def _within_float32(pool: Pool, m1: onnx.ModelProto, f1: dict[str, np.ndarray], run: Any, op: str, tol: Tolerances,
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
