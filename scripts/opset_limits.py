"""Which ONNX versions each engine loads and runs: one ReduceMax model per opset (axes as an attribute before 18, an
input from 18), stamped with the lowest IR version for that opset, on every engine named.  The highest version that
runs correctly is what `max_opset` in an engine.yaml records.

    python scripts/opset_limits.py [ENGINES] [LO..HI]      (default: the default engines, 17..24)
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from ofuzz.core.defaults import DEFAULT_ENGINES, parse_opsets
from ofuzz.gen.emit import ir_version_for
from ofuzz.exec.engines.registry import resolve
from ofuzz.exec.runner import EnginePool


def model_at(opset: int) -> onnx.ModelProto:
    axes_input = opset >= 18
    node = helper.make_node("ReduceMax", ["x", "ax"] if axes_input else ["x"], ["y"], **({} if axes_input else {"axes": [1]}))
    inits = [onnx.numpy_helper.from_array(np.array([1], np.int64), "ax")] if axes_input else []
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 3, 4, 5])], [helper.make_tensor_value_info("y", 1, [1, 1, 4, 5])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version_for(opset))


def main() -> None:
    engines = sys.argv[1].split(",") if len(sys.argv) > 1 else list(DEFAULT_ENGINES)
    lo, hi = parse_opsets(sys.argv[2]) if len(sys.argv) > 2 else (17, 24)
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 4, 5)).astype(np.float32)
    want = x.max(axis=1, keepdims=True)
    best: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="ofuzz-opsets-") as d, EnginePool(resolve(engines), Path(d) / "pool") as pool:
        pool.start()
        for v in range(lo, hi + 1):
            res = pool.execute_model(model_at(v), {"x": x})
            row = []
            for e, (prep, run) in sorted(res.items()):
                ok = prep.ok and run is not None and run.ok and np.allclose(run.outputs["y"], want)
                if ok and best.get(e, v - 1) == v - 1:
                    best[e] = v
                row.append(f"{e}={'ok' if ok else (prep.summary() if not prep.ok else run.summary() if run and not run.ok else 'wrong')[:50]}")
            print(f"opset {v} (IR {ir_version_for(v)}): " + " | ".join(row))
    print("max_opset (highest of an unbroken run from", lo, "):", ", ".join(f"{e} {v}" for e, v in sorted(best.items())))


if __name__ == "__main__":
    main()
