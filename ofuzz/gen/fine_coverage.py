"""Fine-grained coverage: the constructs engines break on that operator-level coverage (OLC) does not see.

OLC saturates within minutes (OTC, IDC and ODC reach ~100% in a 5-minute campaign), after which it rewards nothing,
while defects keep turning up in attribute values, input values and types. Each model yields keys, per operator:
every enum/bool/small-int attribute value given (and which schema attributes were left at their default), the sign
pattern of integer-list attributes (axes, pads, steps), the operator version the model's opset selects, the input's
element type and rank, and the value classes (NaN, ±Inf, zero, negative, large, ties, empty) of graph inputs it reads
— each prefixed by every engine that actually compared the model (DCP or DCF), so a construct counts as covered for an
engine only once that engine computed it.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import onnx
from onnx import defs

_SMALL_INT = 8


def _attr_keys(node: onnx.NodeProto, opset: int) -> set[str]:
    out: set[str] = set()
    given = set()
    for a in node.attribute:
        given.add(a.name)
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            out.add(f"{a.name}={v.decode(errors='replace')[:24]}")
        elif isinstance(v, int):
            out.add(f"{a.name}={v}" if abs(v) <= _SMALL_INT else f"{a.name}={'neg' if v < 0 else 'big'}")
        elif isinstance(v, float):
            out.add(f"{a.name}:{'neg' if v < 0 else 'zero' if v == 0 else 'pos'}")
        elif isinstance(v, list) and v and all(isinstance(x, int) for x in v):
            out.add(f"{a.name}:" + "".join("-" if x < 0 else "0" if x == 0 else "+" for x in v[:6]))
    try:
        schema = defs.get_schema(node.op_type, opset, node.domain)
        out.update(f"{name}=default" for name in schema.attributes if name not in given)
        out.add(f"version={schema.since_version}")  # the operator version the model's opset selects (Pad-18's axes input)
    except Exception:  # noqa: BLE001  (an op without a schema: its given attributes are enough)
        pass
    return out


def value_classes(a: np.ndarray) -> set[str]:
    a = np.asarray(a)
    if a.size == 0:
        return {"empty"}
    out: set[str] = set()
    if np.issubdtype(a.dtype, np.floating):
        if np.isnan(a).any():
            out.add("nan")
        if np.isinf(a).any():
            out.add("inf")
        fin = a[np.isfinite(a)]
        if fin.size and (np.abs(fin) > 1e4).any():
            out.add("large")
    if np.issubdtype(a.dtype, np.number):
        if (a == 0).any():
            out.add("zero")
        if (a < 0).any():
            out.add("negative")
        if a.size > 1 and np.unique(a).size < a.size:
            out.add("ties")
    return out


def fine_keys(model: onnx.ModelProto, inputs: dict[str, np.ndarray], engines: Iterable[str]) -> set[str]:
    """The model's fine-grained coverage keys for each engine that compared it."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    try:
        model = onnx.shape_inference.infer_shapes(model)  # the intermediate tensors' types and ranks
    except Exception:  # noqa: BLE001  (keys from the graph's own declarations are still worth having)
        pass
    types: dict[str, tuple[int, int]] = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        tt = vi.type.tensor_type
        types[vi.name] = (tt.elem_type, len(tt.shape.dim) if tt.HasField("shape") else -1)
    classes = {name: value_classes(v) for name, v in inputs.items()}
    keys: set[str] = set()
    for node in model.graph.node:
        op = node.op_type
        keys.update(f"{op}|{k}" for k in _attr_keys(node, opset))
        if node.input and node.input[0] in types:
            et, rank = types[node.input[0]]
            keys.add(f"{op}|dtype={onnx.helper.tensor_dtype_to_np_dtype(et).name if et else '?'}")
            keys.add(f"{op}|rank={rank}")
        for t in node.input:
            keys.update(f"{op}|values={c}" for c in classes.get(t, ()))
    return {f"{e}|{k}" for e in engines for k in keys}
