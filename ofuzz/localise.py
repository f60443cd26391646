"""Localisation: the first operator whose output diverges between two engines.

The model is rerun with every intermediate tensor exposed as a graph output and
the nodes are walked in order.  Exposing intermediates can change an engine's
fusion, so a divergence that vanishes this way is reported as such.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ofuzz import onnx_guard
from ofuzz.oracle import compare_tensor


def expose_intermediates(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    inferred = onnx_guard.inferred(model) or model  # out of process: onnx can abort on odd models
    vis = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    names = [o.name for o in model.graph.output]
    have = set(names)
    for node in model.graph.node:
        for t in node.output:
            if t and t not in have and t in vis and vis[t].type.tensor_type.HasField("shape"):
                out.graph.output.append(vis[t])
                have.add(t)
                names.append(t)
    return out, names


def localise(pool: Any, model: onnx.ModelProto, inputs: dict[str, np.ndarray], blamed: str, against: str) -> dict[str, Any]:
    exposed, names = expose_intermediates(model)
    with tempfile.TemporaryDirectory(dir=pool.root) as d:
        path = Path(d) / "exposed.onnx"
        onnx.save(exposed, str(path))
        res = pool.execute(path, inputs, names, engines=[blamed, against])
    outs: dict[str, dict[str, np.ndarray]] = {}
    for eng in (blamed, against):
        prep, run = res.get(eng, (None, None))
        if prep is None or not prep.ok or run is None or not run.ok:
            what = (run or prep).summary() if (run or prep) is not None else "not run"
            return {"op": None, "note": f"{eng} failed with intermediates exposed: {what}"}
        outs[eng] = run.outputs
    for node in model.graph.node:
        for t in node.output:
            if t in outs[blamed] and t in outs[against]:
                c = compare_tensor(outs[blamed][t], outs[against][t], t)
                if not c.ok:
                    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
                    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items() if not isinstance(v, onnx.TensorProto)}
                    return {"op": node.op_type, "node": node.name, "output": t, "category": c.category,
                            "max_abs": c.max_abs, "max_rel": c.max_rel, "attrs": _plain(attrs)}
    return {"op": None, "note": "no divergence with intermediates exposed (fusion- or layout-dependent)"}


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
