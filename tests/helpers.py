"""Small model builders and campaign-store readers shared by the tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from ofuzz.store.campaign_store import Store


def single_op_model(path: Path, op: str, shape=(2, 3, 4, 5), **attrs) -> Path:
    n = helper.make_node(op, ["x"], ["y"], name=f"n0_{op}", **attrs)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", 1, list(shape))], [helper.make_tensor_value_info("y", 1, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, str(path))
    return path


def chain_model(path: Path, ops: list[str], shape=(1, 3, 4, 5)) -> Path:
    nodes, prev = [], "x"
    for i, op in enumerate(ops):
        out = f"t{i}_{op}"
        nodes.append(helper.make_node(op, [prev], [out], name=f"n{i}_{op}"))
        prev = out
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, list(shape))], [helper.make_tensor_value_info(prev, 1, list(shape))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def inputs_for(shape=(2, 3, 4, 5), seed=0) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)}


def compared_share(out: Path, engine: str) -> tuple[float, int]:
    """Of the models a campaign in `out` sent `engine` (SKIPs aside), the share that reached a comparison; and the SKIPs."""
    st = Store(out)
    try:
        rows = st.engine_stats().get(engine, {})
    finally:
        st.close()
    runs = sum(n for k, n in rows.items() if k not in ("SKIP", "time"))
    return (rows.get("DCP", 0) + rows.get("DCF", 0)) / max(runs, 1), rows.get("SKIP", 0)
