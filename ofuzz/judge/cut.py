"""A subset of a model's nodes as a model of its own, fed with known values.

Why: once every tensor's value is known (one run with intermediates exposed),
any subset of nodes forms a valid model whose crossing tensors become graph
inputs.  Reduction cuts models this way; isolation cuts out a single node to
run it on every engine with identical inputs.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper


def submodel(model: onnx.ModelProto, keep: list[int], values: dict[str, np.ndarray], feeds: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """The model restricted to nodes `keep`; crossing tensors become inputs with known values."""
    g = model.graph
    nodes = [g.node[i] for i in sorted(keep)]
    inits = {t.name: t for t in g.initializer}
    produced = {o for n in nodes for o in n.output if o}
    consumed = {i for n in nodes for i in n.input if i}
    new_inputs: dict[str, np.ndarray] = {}
    for name in sorted(consumed - produced - set(inits)):
        if name in feeds:
            new_inputs[name] = feeds[name]
        elif name in values:
            new_inputs[name] = values[name]
        else:
            return None
    graph_outs = {o.name for o in g.output}
    outs = [t for n in nodes for t in n.output if t and (t not in consumed or t in graph_outs) and t in values]
    if not outs:
        return None
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in new_inputs.items()]
    vo = [helper.make_tensor_value_info(t, helper.np_dtype_to_tensor_dtype(values[t].dtype), list(values[t].shape)) for t in outs]
    used_inits = [inits[i] for i in sorted(consumed & set(inits))]
    graph = helper.make_graph(nodes, g.name + "_reduced", vi, vo, used_inits)
    m = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version, producer_name="ofuzz-reduce")
    return m, new_inputs
