"""Acceptance check for generation: N models through the full checker and onnxruntime.

    python scripts/check_generated.py [--count 1000] [--blocks 1..30] [--seed 1] [--opset 18..21] [--int-inputs 1]

Prints the checker pass rate, the onnxruntime pass rate with every failure and its
message, degraded blocks, and the per-block / per-op counts over the set.
(A script, not core: it imports onnxruntime directly.)
"""
from __future__ import annotations

import argparse
import collections
import time

import onnx
import onnxruntime as ort

from ofuzz.core.defaults import parse_blocks, parse_opsets
from ofuzz.gen.corpus import load_corpus
from ofuzz.gen.generate import GenerateOptions, generate_one


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--blocks", default="1..30")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--graph", default="mixed")
    ap.add_argument("--opset", default="17", help="N or LO..HI: each model's ONNX version drawn from it (as `ofuzz generate`)")
    ap.add_argument("--int-inputs", type=float, default=0.0, help="share of models with integer inputs (as `ofuzz generate`)")
    ap.add_argument("--only-int", action="store_true", help="count only the models that drew integer inputs")
    a = ap.parse_args()
    ort.set_default_logger_severity(4)
    corpus = load_corpus()
    opts = GenerateOptions(blocks=parse_blocks(a.blocks), graph=a.graph, mutations=True, opsets=parse_opsets(a.opset), int_inputs=a.int_inputs)
    blocks: collections.Counter[str] = collections.Counter()
    versions: collections.Counter[int] = collections.Counter()
    ops: collections.Counter[str] = collections.Counter()
    checker_fail, ort_fail, degraded = [], [], []
    t0 = time.perf_counter()
    int_models = 0
    for i in range(a.count):
        m = generate_one(corpus, a.seed, i, opts)
        ints = sorted({d for d in m.provenance["input_dtypes"].values() if d != "float32"})
        if a.only_int and not ints:
            continue
        int_models += bool(ints)
        blocks.update(m.provenance["blocks"])
        versions[m.model.opset_import[0].version] += 1
        ops.update(n.op_type for n in m.model.graph.node)
        degraded.extend(f"{m.id}: {d}" for d in m.provenance["degraded"])
        try:
            onnx.checker.check_model(m.model, full_check=True)
        except Exception as exc:
            checker_fail.append(f"{m.id}: {str(exc).splitlines()[0][:200]}")
            continue
        try:
            sess = ort.InferenceSession(m.model.SerializeToString(), providers=["CPUExecutionProvider"])
            sess.run(None, m.inputs)
        except Exception as exc:
            ort_fail.append(f"{m.id}: {str(exc).splitlines()[0][:300]}")
    dt = time.perf_counter() - t0
    n = int_models if a.only_int else a.count
    print(f"{n} models (blocks {a.blocks}, graph {a.graph}, opset {a.opset}, mutations on, seed {a.seed}) in {dt:.1f}s")
    print(f"models with integer inputs: {int_models}")
    print("models per opset:", ", ".join(f"{v}: {c}" for v, c in sorted(versions.items())))
    print(f"full onnx checker: {n - len(checker_fail)}/{n} pass ({100 * (n - len(checker_fail)) / n:.1f}%)")
    print(f"onnxruntime {ort.__version__}: {n - len(checker_fail) - len(ort_fail)}/{n} run ({100 * (n - len(checker_fail) - len(ort_fail)) / n:.1f}%)")
    for f in checker_fail + ort_fail:
        print("  FAIL", f)
    print(f"degraded blocks: {len(degraded)}")
    for d in degraded:
        print("  ", d)
    missing = sorted(set(corpus.blocks) - set(blocks))
    print(f"blocks used: {len(blocks)}/{len(corpus)}; missing: {missing or 'none'}")
    print("per-block count:", ", ".join(f"{k}={v}" for k, v in sorted(blocks.items())))
    print(f"ONNX op types emitted: {len(ops)}")
    print("per-op node count:", ", ".join(f"{k}={v}" for k, v in sorted(ops.items())))


if __name__ == "__main__":
    main()
