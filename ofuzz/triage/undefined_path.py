"""Does a failure's reduced repro pass through a value the spec leaves undefined?

Why: the isolation check classes a wrong *value* as `undefined` when the diverging node's inputs are ones whose result
the spec does not define (Cast of NaN to an integer, integer division by zero).  A crash or a failure to run has no
diverging node, so it was counted as a bug even when its repro feeds NaN through Cast(to=int64) into Mod(., -1): MNN
and (inside onnx2tf's dummy inference) onnxruntime 1.23 trap on INT64_MIN % -1, and the INT64_MIN came from an undefined
cast (hand triage 8: two of thirty sampled root causes).  Here every node of the reduced repro is checked against the
same noise rules, with the values a trusted engine computes for its inputs; a hit makes the failure `undefined` — shown
with its rule, not counted as a bug (a defect that also fails on defined values shows up again from such a model).
"""
from __future__ import annotations


import numpy as np
import onnx

from ofuzz.exec.pool import Pool
from ofuzz.judge.noise import NoiseClasses
from ofuzz.judge.localise import expose_intermediates


def undefined_on_the_way(pool: Pool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], value_engine: str,
                         noise: NoiseClasses | None) -> dict[str, str] | None:
    """The first node whose actual inputs fall where the spec defines no result, as {rule, op, node, why}; None when
    there is none or the values cannot be had (the value engine fails on the model with its intermediates exposed)."""
    if noise is None or not getattr(noise, "undefined_rules", ()) or not value_engine:
        return None
    exposed, _ = expose_intermediates(model)
    prep, run = pool.execute_model(exposed, feeds, [value_engine]).get(value_engine, (None, None))
    if prep is None or not prep.ok or run is None or not run.ok:
        return None
    values: dict[str, np.ndarray] = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    values.update(feeds)
    values.update(run.outputs)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    for node in model.graph.node:
        ins = [values.get(name) if name else None for name in node.input]
        u = noise.undefined(node, ins, opset)
        if u is not None:
            return {"rule": u.rule, "op": u.op, "node": node.name, "why": u.why}
    return None
