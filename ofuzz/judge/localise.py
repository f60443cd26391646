"""Localisation: which operators' outputs diverge between the blamed engine and the majority.

The model is rerun with every intermediate tensor exposed as a graph output on
the blamed engine and on the majority's engines, and the nodes are walked in
order.  A tensor diverges when the blamed engine disagrees with more than half
of the majority engines that produced it: comparing with one engine let that
engine's own quirks (MNN's NaN handling) relabel the diverging operator.

Localisation only says where values first differ; `isolate` then decides which
of these nodes is wrong on its own.  Exposing intermediates can change an
engine's fusion, so a divergence that vanishes this way is reported as such.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import onnx

from ofuzz.exec.pool import Pool
from ofuzz.core import onnx_guard
from ofuzz.exec.engines.registry import cost_of, spec_close_first
from ofuzz.judge.compare import RULE

MAX_CANDIDATES = 6
MAX_VOTERS = 2  # majority engines compared with the blamed one, cheapest first (a TensorFlow conversion costs ~0.5 s)


SLOW_ON_MODEL = 1.0  # seconds an engine took on this model above which (and 10 times the quickest voter's) it is asked last


def pick_voters(majority: list[str], blamed: str, excluded: dict[str, str] | None = None, limit: int = MAX_VOTERS,
                seconds: dict[str, float] | None = None) -> list[str]:
    """The majority engines to compare with: all but the blamed and excluded ones, cheapest first, at most `limit`.
    `seconds`: what each took on this very model; one far slower there than the others is asked last, whatever its usual
    cost (the reference evaluator's GridSample is Python loops: 15 s a check, 46 s to reduce one MNN repro in 3 checks)."""
    pool = [e for e in majority if e != blamed and e not in (excluded or {})]
    took = {e: (seconds or {}).get(e, 0.0) for e in pool}
    quickest = min(took.values(), default=0.0)
    slow = {e for e, t in took.items() if t > max(SLOW_ON_MODEL, 10 * quickest)}
    return sorted(pool, key=lambda e: (e in slow, cost_of(e), e))[:limit]


@dataclass
class Localisation:
    """Where the blamed engine first diverges, and what isolation needs to go on from there."""

    info: dict[str, Any]  # JSON-able: op, node, output, category, max_abs, max_rel, attrs | note
    candidates: list[int] = field(default_factory=list)  # indices of diverging nodes, in graph order
    values: dict[str, np.ndarray] = field(default_factory=dict)  # every tensor's value on `value_engine`
    value_engine: str = ""


def expose_intermediates(model: onnx.ModelProto, shapeless: bool = False) -> tuple[onnx.ModelProto, list[str]]:
    """The model with every intermediate tensor of known shape also a graph output, and the output names.

    `shapeless`: those of known type and unknown shape too, for a run whose values only feed cuts (the reducer's). An
    engine under test is not given them: onnx2tf fails on such an output (GroupNormalization-21's) or plans its layouts
    differently, and a ConstantOfShape+TopK fusion defect of seed 42 then looked like drift."""
    inferred = onnx_guard.inferred(model) or model  # out of process: onnx can abort on odd models
    vis = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    names = [o.name for o in model.graph.output]
    have = set(names)
    for node in model.graph.node:
        for t in node.output:
            tt = vis[t].type.tensor_type if t in vis else None
            if t and t not in have and tt is not None and tt.elem_type and (shapeless or tt.HasField("shape")):
                out.graph.output.append(vis[t])
                have.add(t)
                names.append(t)
    return out, names


def node_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as plain JSON values (tensors left out)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items() if not isinstance(v, (onnx.TensorProto, onnx.GraphProto))}
    return _plain(attrs)


def localise(pool: Pool, model: onnx.ModelProto, inputs: dict[str, np.ndarray], blamed: str, majority: list[str] | str,
             excluded: dict[str, str] | None = None) -> Localisation:
    """Run the exposed model on `blamed` and the majority (up to MAX_VOTERS of it); list the nodes whose outputs diverge."""
    against = [majority] if isinstance(majority, str) else pick_voters(majority, blamed, excluded)
    exposed, _ = expose_intermediates(model)
    res = pool.execute_model(exposed, inputs, [blamed, *against])
    outs: dict[str, dict[str, np.ndarray]] = {}
    for eng in (blamed, *against):
        prep, run = res.get(eng, (None, None))
        if prep is None or not prep.ok or run is None or not run.ok:
            if eng == blamed:
                what = (run or prep).summary() if (run or prep) is not None else "not run"
                return Localisation({"op": None, "note": f"{eng} failed with intermediates exposed: {what}"})
            continue
        outs[eng] = run.outputs
    voters = [e for e in against if e in outs]
    if not voters:
        return Localisation({"op": None, "note": "no majority engine ran with intermediates exposed"})
    value_engine = value_source(voters, voters[0])
    loc = Localisation({"op": None, "note": "no divergence with intermediates exposed (fusion- or layout-dependent)"},
                       values=dict(outs[value_engine]), value_engine=value_engine)
    for i, node in enumerate(model.graph.node):
        worst = _diverges(node, outs, blamed, voters)
        if worst is None:
            continue
        if not loc.candidates:
            loc.info = {"op": node.op_type, "node": node.name, "output": worst.output, "category": worst.category,
                        "max_abs": worst.max_abs, "max_rel": worst.max_rel, "attrs": node_attrs(node)}
        loc.candidates.append(i)
        if len(loc.candidates) >= MAX_CANDIDATES:
            break
    return loc


def _diverges(node: onnx.NodeProto, outs: dict[str, dict[str, np.ndarray]], blamed: str, voters: list[str]) -> Any:
    """The first output of `node` on which `blamed` disagrees with most majority engines, or None."""
    for t in node.output:
        if not t or t not in outs[blamed]:
            continue
        have = [e for e in voters if t in outs[e]]
        cmps = [RULE.compare(outs[blamed][t], outs[e][t], t) for e in have]
        bad = [c for c in cmps if not c.ok]
        if have and 2 * len(bad) > len(have):
            return bad[0]
    return None


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.generic,)):
        return v.item()
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


def value_source(agreeing: Iterable[str], fallback: str, seconds: dict[str, float] | None = None) -> str:
    """The engine whose intermediate values stand for the majority's (localisation, isolation, reduction): the reference
    evaluator or onnxruntime when they agree with the majority (cheapest to run with every tensor exposed), else
    `fallback` (another agreeing engine, chosen by the caller). `seconds`: as for pick_voters, one far slower on this
    model is taken last."""
    close = spec_close_first(agreeing)
    return next(iter(pick_voters(close, "", limit=len(close), seconds=seconds) if seconds else close), fallback)
