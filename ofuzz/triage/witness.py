"""Witnesses: the last operator of a failing repro that runs fine on its own.

A converter that gets a tensor's layout wrong upstream (onnx2tf treating a
dynamic Expand's output as channel-last, or a Slice's axes as ONNX-ordered)
fails at whatever consumes it: Conv, Equal, MatMul, Maximum, Or.  Each reduced
repro then holds the culprit plus one such consumer, and keying root causes on
both split one defect into as many root causes as there were consumers (hand
triage #4: 5 of 15 TensorFlow root causes were such duplicates).

So after reduction, a failure repro's sink node is cut out alone, fed the same
values it got in the repro (from an engine that ran it), and run on the blamed
engine.  If it runs, the sink only *witnesses* a defect upstream: it stays in
the repro (the repro needs it) but leaves the root-cause key.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from ofuzz.exec.pool import Pool
from ofuzz.core import onnx_guard, rewrites
from ofuzz.judge.cut import submodel
from ofuzz.judge.localise import expose_intermediates

MAX_NODES = 6  # larger repros are keyed by their message anyway (rootcause.coarsen)


def sinks(model: onnx.ModelProto, among: list[int] | None = None) -> list[int]:
    """Nodes (of `among`, default all) none of whose outputs feed another of them."""
    among = list(range(len(model.graph.node))) if among is None else among
    consumed = {i for k in among for i in model.graph.node[k].input if i}
    return [k for k in among if not any(o in consumed for o in model.graph.node[k].output if o)]


def witnesses(pool: Pool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], blamed: str, value_engine: str,
              also_runs: Callable[[onnx.ModelProto, dict[str, np.ndarray]], bool] | None = None) -> list[int]:
    """Indices of the repro's nodes that only witness a defect upstream: its single sink if that runs on `blamed` when
    cut out alone, then the single sink of what is left, and so on, while at least one node remains.

    Peeling goes on past the first witness because a wrong layout handed on is carried by every layout-agnostic node
    on the way (ConstantOfShape → Pad → Where fails at Where, and Pad fed the same values runs too): keyed after one
    step that chain and ConstantOfShape → Reshape were two root causes of one defect (hand triage #5).

    `also_runs`: the sink must also run alone there (the same converter in the mode its users run). onnx2tf's
    keep-shape mode feeds a cut-out sink in ONNX layout, which never shows a handler that mishandles channel-last
    inputs; the default mode does (hand triage 11: ReverseSequence after AveragePool, keyed `upstream AveragePool`,
    fails alone in the default mode)."""
    nodes = len(model.graph.node)
    if not 2 <= nodes <= MAX_NODES or len(sinks(model)) != 1 or value_engine == blamed:
        return []
    values = intermediate_values(pool, model, feeds, value_engine)
    if values is None:
        return []
    left, peeled = list(range(nodes)), []
    while len(left) >= 2:
        ends = sinks(model, left)
        if len(ends) != 1 or not _runs_alone(pool, model, ends, values, feeds, blamed, also_runs):
            break
        peeled += ends
        left = [k for k in left if k not in ends]
    return peeled


def intermediate_values(pool: Pool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], value_engine: str) -> dict[str, np.ndarray] | None:
    """Every intermediate of the repro as `value_engine` computes it (None: it could not run the repro)."""
    exposed, _ = expose_intermediates(model)
    prep, run = pool.execute_model(exposed, feeds, [value_engine]).get(value_engine, (None, None))
    return run.outputs if prep is not None and prep.ok and run is not None and run.ok else None


def culprit_alone(pool: Pool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], culprit: int,
                  value_engine: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """Node `culprit` cut out alone and fed the values it gets in the repro (as `value_engine` computes them); None when
    the values cannot be had or the node cannot be cut out. What an upstream failure's one culprit is asked of."""
    values = intermediate_values(pool, model, feeds, value_engine)
    return submodel(model, [culprit], values, feeds) if values is not None else None


def _runs_alone(pool: Pool, model: onnx.ModelProto, nodes: list[int], values: dict[str, np.ndarray], feeds: dict[str, np.ndarray],
                blamed: str, also_runs: Callable[[onnx.ModelProto, dict[str, np.ndarray]], bool] | None) -> bool | None:
    """Do these nodes, cut out alone and fed the values they get in the repro, run on `blamed` (and where `also_runs`
    asks, in the converter's users' mode too)? None when they cannot be cut out."""
    alone = _alone(pool, model, nodes, values, feeds, blamed, also_runs)
    return None if alone is None else alone[0]


def _alone(pool: Pool, model: onnx.ModelProto, nodes: list[int], values: dict[str, np.ndarray], feeds: dict[str, np.ndarray],
           blamed: str, also_runs: Callable[[onnx.ModelProto, dict[str, np.ndarray]], bool] | None) -> tuple[bool, str] | None:
    """`_runs_alone`, and the engine's source line it failed at there ("" when it ran, or cannot tell)."""
    built = submodel(model, nodes, values, feeds)
    if built is None:
        return None
    p1, r1 = pool.execute_model(*built, [blamed]).get(blamed, (None, None))
    if p1 is not None and p1.ok and r1 is not None and r1.ok:
        return (also_runs is None or also_runs(*built)), ""
    failed = r1 if p1 is not None and p1.ok else p1
    return False, str(getattr(failed, "where", "") or "")


def edges_to(model: onnx.ModelProto, peeled: list[int]) -> list[str]:
    """The culprit→witness edges of a repro ("Reshape>Squeeze"): a culprit's output read by a peeled witness."""
    made = {o: n.op_type for i, n in enumerate(model.graph.node) if i not in peeled for o in n.output if o}
    return sorted({f"{made[t]}>{model.graph.node[i].op_type}" for i in peeled for t in model.graph.node[i].input if t in made})


def needs_adjacency(model: onnx.ModelProto, feeds: dict[str, np.ndarray], peeled: list[int],
                    right_without: Callable[[onnx.ModelProto, dict[str, np.ndarray]], bool]) -> list[str]:
    """The culprit→witness edges an upstream failure needs (empty: none): with an Identity on each, the same values
    flow but no culprit feeds its witness directly, and `right_without` (the blamed engine runs the rewritten repro
    right) says the failure went. A bad tensor handed on stays bad through an Identity; a converter's rewrite of the
    pair (onnx2tf folding two consecutive Adds' constants, skipping a Reshape whose consumers are all Squeezes) does
    not happen, so the defect is in the pair, not in the culprit alone."""
    if not peeled:
        return []
    culprits = [i for i in range(len(model.graph.node)) if i not in peeled]
    apart = rewrites.apply("identity_between", model, feeds, frozenset(), {"from": culprits, "to": peeled})
    if apart is None:
        return []
    return edges_to(model, peeled) if right_without(*apart) else []


def failing_alone(pool: Pool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], culprits: list[int], blamed: str,
                  value_engine: str, also_runs: Callable[[onnx.ModelProto, dict[str, np.ndarray]], bool] | None = None,
                  lines: dict[str, str] | None = None) -> list[str] | None:
    """The operators among an upstream failure's culprits that fail on `blamed` cut out alone, fed the values they get
    in the repro (None: the values could not be had). A culprit that runs alone only carries a bad tensor on; one that
    fails alone is a defect of its own (hand triage 25: a GRU after a Reshape, whose own output layout was wrong, had
    joined `upstream Reshape` because its operators held a Reshape). `lines`, when given, gets each failing operator's
    source line there (where the engine can tell)."""
    values = intermediate_values(pool, model, feeds, value_engine)
    if values is None:
        return None
    alone = {i: _alone(pool, model, [i], values, feeds, blamed, also_runs) for i in culprits}
    if None in alone.values():
        return None
    failing = {model.graph.node[i].op_type: got[1] for i, got in alone.items() if got is not None and not got[0]}
    if lines is not None:
        lines.update({op: where for op, where in failing.items() if where})
    return sorted(failing)


def peeled_nodes(model: onnx.ModelProto, witness_ops: list[str]) -> list[int]:
    """The node indices `witnesses` peeled, found again from their operator types (a repro's finding.json records those):
    peeling takes the single sink, then the single sink of what is left, in that order."""
    left, peeled = list(range(len(model.graph.node))), []
    for op in witness_ops:
        ends = sinks(model, left)
        if len(ends) != 1 or model.graph.node[ends[0]].op_type != op:
            return []
        peeled += ends
        left.remove(ends[0])
    return peeled


def hands_on_unknown_shape(model: onnx.ModelProto, peeled: list[int]) -> bool:
    """Does every tensor the culprits hand the peeled witnesses have a static shape ONNX inference leaves unknown (a
    dimension or the rank)? A converter that plans on static shapes mishandles such a tensor whatever produced it:
    onnx2tf takes an all-unknown shape as already channel-last and transposes the other operand (hand triage 15 #15,
    #17; triage 17 #9, #12: Expand, ConstantOfShape and CenterCropPad fed by a run-time shape, one defect)."""
    if not peeled:
        return False
    culprit_outputs = {o for i, n in enumerate(model.graph.node) if i not in peeled for o in n.output if o}
    handed = {t for i in peeled for t in model.graph.node[i].input if t in culprit_outputs}
    if not handed:
        return False
    inferred = onnx_guard.inferred(model)  # out of process: onnx's inference can crash on a fuzzed model
    if inferred is None:  # a model inference rejects tells nothing about its shapes
        return False
    known = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    return all(_unknown_shape(known.get(t)) for t in handed)


def _unknown_shape(value: onnx.ValueInfoProto | None) -> bool:
    if value is None or not value.type.tensor_type.HasField("shape"):
        return True
    return not all(d.HasField("dim_value") for d in value.type.tensor_type.shape.dim)


def without(model: onnx.ModelProto, drop: list[int]) -> onnx.ModelProto:
    """The model's nodes minus `drop`, for keying only (not a runnable model)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    keep = [n for i, n in enumerate(model.graph.node) if i not in set(drop)]
    del out.graph.node[:]
    out.graph.node.extend(keep)
    return out
