"""An engine family's hypothesis tested on one finding: the family (backends/<engine>/triage.yaml) names the rewrite that
takes its blamed trigger away; a finding whose reduced repro the engine then gets right is that defect and joins the
family, one the engine still gets wrong is another defect and keeps its own key (hand triage: MNN's N-ary family had
absorbed a finding whose model also held a Relu on NaN; families joined by operator name alone hid such defects)."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx

from ofuzz.core.rewrites import apply
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.judging import Policy
from ofuzz.judge.noise import Family, NoiseClasses
from ofuzz.triage.rootcause import UPSTREAM, RootKey, crash_like
from ofuzz.core.vocab import DCF, DCP
from ofuzz.triage.triggers import gone_in, rewrite_verdict


def family_for(noise: NoiseClasses | None, key: RootKey, model: onnx.ModelProto, version: str | None) -> Family | None:
    """The engine's operator family of a one-node repro (its operator, input count, failure, first input's rank and
    type, attributes), for the engine version the repro ran on; None for any other repro."""
    if noise is None or len(model.graph.node) != 1 or len(key.ops) != 1 or key.failure == UPSTREAM or not noise.family_rules:
        return None
    node = model.graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return noise.family(key.engine, node.op_type, sum(1 for i in node.input if i), key.failure, _first_input_rank(model), attrs,
                        _first_input_type(model), version)


def run_family_test(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy, status: str,
                  key: RootKey, version: str | None) -> dict[str, Any] | None:
    """The record of the family test on this reduced repro: the family, the rewrite and whether the engine is right
    after it (`fixed`); None when no family with a test holds for the repro."""
    fam = family_for(policy.noise, key, model, version)
    if fam is None or not fam.test_rewrite:
        return None
    args = json.loads(fam.test_args)
    record: dict[str, Any] = {"family": fam.name, "rewrite": {fam.test_rewrite: args}}
    got = apply(fam.test_rewrite, model, feeds, frozenset(fam.ops), args)
    if got is None:
        return {**record, "fixed": False, "note": "the rewrite does not apply to this repro (nothing to take away, or no valid model)"}
    judged = rewrite_verdict(pool, got[0], got[1], engine, policy)  # judged once: the answer and why it is no answer
    if gone_in(judged, engine, status, crash_like(key.failure)):
        return {**record, "fixed": True}
    verdict = judged.verdict
    now = verdict.results.get(engine)
    ran = [e for e, r in verdict.results.items() if e != engine and r.status in (DCP, DCF)]
    if status == DCF and (now is None or now.status != DCF or not ran or verdict.split):  # nobody could tell whether it is right now
        return {**record, "fixed": False, "note": f"inconclusive: {engine} {now.status if now else 'did not run'}, voters that ran: {ran}"
                                                    + (", and they disagree" if verdict.split else "")}
    return {**record, "fixed": False}


def _first_input(model: onnx.ModelProto) -> onnx.TensorProto | onnx.ValueInfoProto | None:
    """The initializer or graph input that feeds a one-node model's first input (None: neither)."""
    name = model.graph.node[0].input[0] if model.graph.node and model.graph.node[0].input else ""
    return next((t for t in model.graph.initializer if t.name == name), None) or \
        next((v for v in model.graph.input if v.name == name), None)


def _first_input_rank(model: onnx.ModelProto) -> int | None:
    """The rank of a one-node model's first input (None: unknown)."""
    src = _first_input(model)
    if isinstance(src, onnx.TensorProto):
        return len(src.dims)
    if src is not None and src.type.tensor_type.HasField("shape"):
        return len(src.type.tensor_type.shape.dim)
    return None


def _first_input_type(model: onnx.ModelProto) -> str | None:
    """The element type of a one-node model's first input as numpy names it (int32, float32; None: unknown)."""
    src = _first_input(model)
    code = src.data_type if isinstance(src, onnx.TensorProto) else (src.type.tensor_type.elem_type if src is not None else 0)
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(code).name if code else None
    except (KeyError, ValueError, TypeError):
        return None
