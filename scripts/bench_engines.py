"""Per engine: median convert (prepare) and run time per model, and the worker round-trip overhead.

    python scripts/bench_engines.py [--engines onnxruntime,tensorflow,mnn,reference] [--models 40] [--runs 3]

The round trip is measured on a trivial model (one Identity on 1 element):
what the process boundary costs per step, independent of the engine's work.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from ofuzz.core.defaults import DEFAULT_ENGINES
from ofuzz.gen.corpus import load_corpus
from ofuzz.exec.engines.client import Worker
from ofuzz.exec.engines.envs import python_for
from ofuzz.exec.engines.registry import resolve
from ofuzz.gen.generate import GenerateOptions, generate_one
from ofuzz.core.npz import npz_bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=10)
    a = ap.parse_args()
    corpus = load_corpus()
    d = Path(tempfile.mkdtemp())
    models = []
    for i in range(a.models):
        m = generate_one(corpus, 11, i, GenerateOptions(blocks=(a.blocks, a.blocks)))
        p = m.save(d)
        models.append((p, d / f"{m.id}.inputs.npz", [x.name for x in m.model.graph.input], [o.name for o in m.model.graph.output]))
    triv = d / "trivial.onnx"
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "t", [helper.make_tensor_value_info("x", 1, [1])], [helper.make_tensor_value_info("y", 1, [1])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(triv))
    (d / "triv.npz").write_bytes(npz_bytes({"x": np.ones(1, np.float32)}))
    print(f"{'engine':12s} {'startup s':>9s} {'prepare ms (median)':>20s} {'run ms (median)':>16s} {'round trip ms':>14s}   ({a.models} models x {a.runs} runs, {a.blocks} blocks)")
    for spec in resolve(a.engines.split(",")):
        py = python_for(spec)
        if py is None:
            print(f"{spec.name:12s} not installed")
            continue
        w = Worker(spec, py, d / f"w-{spec.name}")
        st = w.start()
        if not st.ok:
            print(f"{spec.name:12s} cannot start: {st.summary()}")
            continue
        prep, run, rt = [], [], []
        for _ in range(a.runs):
            for p, x, ins, outs in models:
                o = w.prepare(p, ins, outs)
                if o.ok:
                    prep.append(o.time)
                    r = w.run(x)
                    if r.ok:
                        run.append(r.time)
            for _ in range(50):
                t0 = time.perf_counter()
                w.prepare(triv, ["x"], ["y"])
                w.run(d / "triv.npz")
                rt.append(time.perf_counter() - t0)
        w.close()
        med = lambda v: 1000 * statistics.median(v) if v else float("nan")  # noqa: E731
        print(f"{spec.name:12s} {w.startup_time:9.2f} {med(prep):20.2f} {med(run):16.2f} {med(rt):14.2f}")


if __name__ == "__main__":
    main()
