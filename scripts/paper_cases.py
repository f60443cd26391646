"""The paper's reported cases, rebuilt as small models and run on today's engines.

    python scripts/paper_cases.py [--engines onnxruntime,tensorflow,mnn,reference,tflite]

Cases: Sigmoid of NaN, division by zero, Concat with more than two inputs, TopK,
ConvTranspose output shapes, Max/Min with NaN.  Prints each engine's status per case
and the models are left in the output folder for `ofuzz run`.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ofuzz.exec.engines.registry import resolve
from ofuzz.judge.judging import judge_model
from ofuzz.exec.runner import EnginePool

F = onnx.TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "case", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def cases():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 3, 4, 5)).astype(np.float32)
    xn = x.copy()
    xn[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    yield "Sigmoid(NaN/±Inf)", model([helper.make_node("Sigmoid", ["x"], ["y"], name="n0_Sigmoid")], [("x", [1, 3, 4, 5])], [("y", F, [1, 3, 4, 5])]), {"x": xn}
    xz = x.copy()
    xz[0, 0, 0, :2] = 0
    zero = numpy_helper.from_array(np.zeros((1, 3, 1, 1), np.float32), "zero")
    yield "Div by zero", model([helper.make_node("Div", ["x", "zero"], ["y"], name="n0_Div")], [("x", [1, 3, 4, 5])], [("y", F, [1, 3, 4, 5])], [zero]), {"x": xz}
    yield "Concat of 4 inputs", model(
        [helper.make_node("Relu", ["x"], ["a"], name="n0_Relu"), helper.make_node("Sigmoid", ["x"], ["b"], name="n1_Sigmoid"),
         helper.make_node("Neg", ["x"], ["c"], name="n2_Neg"), helper.make_node("Concat", ["a", "b", "c", "x"], ["y"], axis=1, name="n3_Concat")],
        [("x", [1, 3, 4, 5])], [("y", F, [1, 12, 4, 5])]), {"x": x}
    for axis, largest in ((-1, 1), (1, 0)):
        k = numpy_helper.from_array(np.array([2], np.int64), "k")
        shp = [1, 3, 4, 2] if axis == -1 else [1, 2, 4, 5]
        yield f"TopK(axis={axis}, largest={largest})", model(
            [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest, name="n0_TopK")],
            [("x", [1, 3, 4, 5])], [("v", F, shp), ("i", onnx.TensorProto.INT64, shp)], [k]), {"x": x}
    for stride, pads, opad in ((2, [0, 0, 0, 0], [0, 0]), (2, [1, 1, 1, 1], [1, 1]), (3, [1, 0, 2, 1], [0, 2])):
        w = numpy_helper.from_array(rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32), "w")
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[stride, stride], pads=pads, output_padding=opad, kernel_shape=[3, 3], name="n0_ConvTranspose")
        m = model([node], [("x", [1, 3, 4, 5])], [("y", F, None)], [w])
        m = onnx.shape_inference.infer_shapes(m)
        yield f"ConvTranspose(s={stride}, pads={pads}, output_padding={opad})", m, {"x": x}
    for op in ("Max", "Min"):
        y = rng.uniform(-1, 1, (1, 3, 4, 5)).astype(np.float32)
        yield f"{op} with NaN", model([helper.make_node(op, ["x", "y"], ["z"], name=f"n0_{op}")], [("x", [1, 3, 4, 5]), ("y", [1, 3, 4, 5])], [("z", F, [1, 3, 4, 5])]), {"x": xn, "y": y}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--engines", default="onnxruntime,tensorflow,mnn,reference,tflite")
    ap.add_argument("--out", type=Path, default=Path("results/paper_cases"))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    with EnginePool(resolve(a.engines.split(",")), a.out / "pool") as pool:
        pool.start()
        print("versions:", pool.versions())
        for name, m, feeds in cases():
            path = a.out / (name.replace(" ", "_").replace("/", "_").replace("(", "").replace(")", "").replace(",", "").replace("=", "") + ".onnx")
            onnx.save(m, str(path))
            np.savez(path.with_suffix(".inputs.npz"), **feeds)
            j = judge_model(pool, m, path, feeds)
            row = "  ".join(f"{e}={r.status}" for e, r in j.verdict.results.items())
            print(f"{name:48s} {row}")
            for f in j.findings:
                print(f"    {f.engine} {f.status}: {f.summary[:150]}")


if __name__ == "__main__":
    main()
