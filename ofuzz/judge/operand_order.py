"""Operand order: a commutative operator whose result depends on the order of its operands is wrong under any policy.

The NaN policy (noise/undefined.yaml, onnx/onnx#6003) lets an engine choose what `Max(a, NaN)` gives, but not to
give one thing for `Max(a, NaN)` and another for `Max(NaN, a)`: Max, Min, Add, Mul, Sum and Mean are commutative in
every reading of the spec. So before a NaN-policy divergence is called undefined, the isolated node is run on the
blamed engine with its operands reversed; a different result (NaN positions included) keeps it a bug.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ofuzz.exec.runner import EnginePool

COMMUTATIVE = frozenset({"Max", "Min", "Add", "Mul", "Sum", "Mean", "And", "Or", "Xor", "Equal"})
NAN_POLICY = "nan-policy"  # the prefix of the undefined rules that excuse an engine's NaN handling


def reversed_operands(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The one-node model with its node's operands in reverse order; None when the node is not commutative."""
    if len(model.graph.node) != 1:
        return None
    node = model.graph.node[0]
    if node.op_type not in COMMUTATIVE or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
        return None
    swapped = onnx.ModelProto()
    swapped.CopyFrom(model)
    ins = list(swapped.graph.node[0].input)
    del swapped.graph.node[0].input[:]
    swapped.graph.node[0].input.extend(reversed(ins))
    return swapped


def order_dependence(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str) -> dict[str, Any] | None:
    """Evidence that `engine` gives a commutative node's result differently with its operands reversed (both runs
    succeed and an output differs anywhere, NaN positions included); None otherwise."""
    swapped = reversed_operands(model)
    if swapped is None:
        return None
    runs = [pool.execute_model(m, feeds, engines=[engine]).get(engine) for m in (model, swapped)]
    outs = [r[1].outputs if r is not None and r[1] is not None and r[1].ok else None for r in runs]  # (prepare, run)
    if outs[0] is None or outs[1] is None:
        return None
    for name, a in outs[0].items():
        b = outs[1].get(name)
        if b is None or np.shape(a) != np.shape(b) or not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True):
            op = model.graph.node[0].op_type
            return {"rule": "operand-order", "op": op, "output": name,
                    "why": f"{op} is commutative, and {engine} gives a different result with its operands reversed: wrong under any NaN policy"}
    return None
