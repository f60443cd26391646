"""MNN's aarch64 kernels under qemu user-mode emulation, next to x86 MNN.

Needs qemu-user-static and debootstrap and `ofuzz engines --install mnn-arm:n1` (about 35 s);
skipped when that environment is missing, unless OFUZZ_REQUIRE_ARM=1 (CI sets it).
"""
from __future__ import annotations

import os

import pytest

from ofuzz.exec.engines.envs import python_for
from ofuzz.exec.engines.registry import resolve
from ofuzz.gen.generate import single_block_model
from ofuzz.judge.judging import judge_model
from ofuzz.exec.runner import EnginePool

ARM = ["mnn-arm:n1", "mnn-arm:a53"]
BLOCKS = ["Conv", "DepthwiseConv", "MaxPool", "AveragePool", "BatchNormalization", "SpaceToBatchND", "ResizeBilinear", "Sigmoid", "Conv+BiasAdd+Relu"]


def test_arm_mnn_agrees_with_x86_mnn_on_the_paper_ops(corpus, tmp_path):
    specs = resolve(["onnxruntime", "mnn", *ARM])
    missing = [s.name for s in specs if python_for(s) is None]
    if missing:
        if os.environ.get("OFUZZ_REQUIRE_ARM"):
            pytest.fail(f"not installed: {missing}; run `ofuzz engines --install mnn-arm:n1`")
        pytest.skip(f"not installed: {missing}")
    with EnginePool(specs, tmp_path / "pool") as pool:
        started = pool.start()
        assert all(o.ok for o in started.values()), {k: o.summary() for k, o in started.items()}
        for name in BLOCKS:
            m = single_block_model(corpus, name)
            path = tmp_path / f"{name}.onnx"
            path.write_bytes(m.model.SerializeToString())
            j = judge_model(pool, m.model, path, m.inputs, do_localise=False)
            st = {e: r.status for e, r in j.verdict.results.items()}
            assert set(st.values()) == {"DCP"}, (name, st, [f.summary for f in j.findings])
            # the emulated workers really are aarch64 and report the same MNN version
        versions = pool.versions()
        assert versions["mnn-arm:n1"] == versions["mnn"]
