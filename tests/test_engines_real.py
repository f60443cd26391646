"""Real engines on every corpus block in its common configuration.

Every engine must agree (DCP) on every block, except the disagreements listed
in EXPECTED: each is a confirmed engine defect or limitation (the other
engines and the spec agree), never a loosened tolerance.  A listed case that
starts passing, or changes status, fails this test so the list stays true.
Engines whose environment is not installed are skipped locally; CI sets
OFUZZ_REQUIRE_ENGINES=1 so a missing engine fails instead.
"""
from __future__ import annotations

import os

import pytest

from ofuzz.exec.engines.envs import python_for
from ofuzz.exec.engines.registry import resolve
from ofuzz.gen.generate import single_block_model
from ofuzz.judge.judging import Policy, judge_model
from ofuzz.exec.runner import EnginePool

ENGINES = ["onnxruntime", "tensorflow", "mnn", "reference"]

EXPECTED: dict[tuple[str, str], tuple[str, str]] = {
    # TensorFlow via onnx2tf 1.29.24 (TF 2.19)
    ("Sum", "tensorflow"): ("MCF", "onnx2tf: tf.math.add_n fails on a constant operand"),
    ("Mean", "tensorflow"): ("MCF", "onnx2tf: tf.stack fails on a constant operand"),
    ("IsInf", "tensorflow"): ("MCF", "onnx2tf: tf.math.maximum type error in IsInf"),
    ("GatherElements", "tensorflow"): ("MCF", "onnx2tf folds GatherElements on constant indices into a non-layer output"),
    ("LayerNormalization", "tensorflow"): ("MCF", "onnx2tf: tf.constant with unsupported shape"),
    ("ReduceL1", "tensorflow"): ("MCF", "onnx2tf: tf.norm conversion error"),
    ("ReduceL2", "tensorflow"): ("MCF", "onnx2tf: tf.norm conversion error"),
    ("EyeLike", "tensorflow"): ("MCF", "onnx2tf: EyeLike on a Keras symbolic input"),
    ("GlobalLpPool", "tensorflow"): ("DCF", "onnx2tf GlobalLpPool(p=1) differs from onnxruntime and MNN"),
    ("Hardmax", "tensorflow"): ("DCF", "onnx2tf Hardmax output comes back with dims permuted (0,3,2,1)"),
    ("Resize", "tensorflow"): ("DCF", "onnx2tf Resize with inputs kept in ONNX layout resizes the wrong axes"),
    ("ResizeBilinear", "tensorflow"): ("DCF", "same as Resize"),
    ("ResizeNearest", "tensorflow"): ("DCF", "same as Resize"),
    ("CropAndResize", "tensorflow"): ("DCF", "onnx2tf RoiAlign output shape wrong"),
    ("ShapeSlice", "tensorflow"): ("DCF", "onnx2tf ignores Shape's start/end"),
    ("RNN", "tensorflow"): ("MCF", "onnx2tf: TypeError converting RNN"),
    ("GRU", "tensorflow"): ("MCF", "onnx2tf: TypeError converting GRU"),
    ("LSTM", "tensorflow"): ("MCF", "onnx2tf: TypeError converting LSTM"),
    ("QuantizeLinear", "tensorflow"): ("DCF", "onnx2tf returns QuantizeLinear as float32, not uint8"),
    ("DequantizeLinear", "tensorflow"): ("DCF", "onnx2tf Q/DQ is off by one quantisation step on ~99% of elements"),
    ("CastLike", "tensorflow"): ("MCF", "onnx2tf has no CastLike ('No module named onnx2tf.ops.CastLike')"),
    ("DFT", "tensorflow"): ("MCF", "onnx2tf: KeyError '' on DFT's omitted optional input (dft_length given as '')"),
    # MNN 3.6.1 (x86)
    ("LSTM", "mnn"): ("MCF", "MNN converter killed by SIGSEGV on LSTM"),
    ("GRU", "mnn"): ("DCF", "MNN GRU values off (max rel ~9%)"),
    ("QuantizeLinear", "mnn"): ("DCF", "MNN QuantizeLinear output wraps (max abs 256)"),
    ("DequantizeLinear", "mnn"): ("DCF", "MNN returns Q/DQ output with dims permuted (3,1,6,5 for 1,3,6,5)"),
    ("IsNaN", "mnn"): ("MCF", "MNN converter: 'These Op Not Support: ONNX::IsNaN'"),
    ("DFT", "mnn"): ("MCF", "MNN converter: 'These Op Not Support: ONNX::DFT'"),
    ("IsInf", "mnn"): ("MCF", "MNN converter: 'These Op Not Support: ONNX::IsInf'"),
    ("Hardmax", "mnn"): ("MCF", "MNN converter: 'These Op Not Support: ONNX::Hardmax'"),
    ("Mean", "mnn"): ("IF", "MNN: Mean with a constant operand gives a shape error (forward returns nothing)"),
    ("Dropout", "mnn"): ("IF", "MNN: Dropout model gives a shape error (forward returns nothing)"),
    ("Shrink", "mnn"): ("DCF", "MNN Shrink(bias=0.25, lambd=0.5) wrong on ~half the elements"),
    ("OneHot", "mnn"): ("DCF", "MNN OneHot ignores negative indices (spec: index + depth)"),
    # ONNX reference evaluator 1.23 (and the split it leaves behind)
    ("DequantizeLinear", "reference"): ("MCF", "reference evaluator implements DequantizeLinear from opset 19 only"),
    ("DequantizeLinear", "onnxruntime"): ("DCF", "no majority once the reference cannot run: onnxruntime, TF and MNN all differ"),
    ("GlobalLpPool", "reference"): ("MCF", "reference evaluator has no GlobalLpPool"),
    ("LpNormalization", "reference"): ("DCF", "reference LpNormalization differs from onnxruntime, TF and MNN"),
    ("GridSample", "reference"): ("IF", "reference implements opset-20 mode names only (bilinear rejected)"),
}


def _installed_or_skip(names: list[str]) -> list:
    from ofuzz.exec.engines.envs import interpreter
    from ofuzz.exec.engines.registry import EngineError

    specs = resolve(names)
    for s in specs:  # an engine whose Python this machine lacks cannot be installed here: an outside reason, said so
        try:
            interpreter(s)
        except EngineError as exc:
            pytest.skip(str(exc))
    missing = [s.name for s in specs if python_for(s) is None]
    if missing and os.environ.get("OFUZZ_REQUIRE_ENGINES"):
        pytest.fail(f"engines not installed: {missing} (run `ofuzz engines --install all`)")
    if missing:
        pytest.skip(f"engines not installed: {missing}")
    return specs


def _judge_on(tmp_path, graph, engines: list[str], feeds: dict):
    """One hand-built graph (opset 17) judged on real engines with the full policy."""
    import onnx
    from onnx import helper

    from ofuzz.judge.judging import Policy, judge_model

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with EnginePool(_installed_or_skip(engines), tmp_path / "pool") as pool:
        pool.start()
        return judge_model(pool, model, path, feeds, policy=Policy.default())


def _pool_or_skip(tmp_path):
    specs = resolve(ENGINES)
    missing = [s.name for s in specs if python_for(s) is None]
    if missing:
        if os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.fail(f"engines not installed: {missing} (run `ofuzz engines --install all`)")
        pytest.skip(f"engines not installed: {missing}")
    pool = EnginePool(specs, tmp_path / "pool")
    started = pool.start()
    bad = {n: o.summary() for n, o in started.items() if not o.ok}
    assert not bad, bad
    return pool


def test_every_block_agrees_across_real_engines(corpus, tmp_path):
    pool = _pool_or_skip(tmp_path)
    unexpected, stale = [], []
    policy = Policy.default()  # isolation, float32 error bounds, reference gaps, noise classes: as a campaign judges
    try:
        for name in corpus.blocks:
            m = single_block_model(corpus, name)
            path = tmp_path / f"{name}.onnx"
            path.write_bytes(m.model.SerializeToString())
            j = judge_model(pool, m.model, path, m.inputs, policy=policy)
            for eng, r in j.verdict.results.items():
                want = EXPECTED.get((name, eng), ("DCP", ""))[0]
                if r.status != want:
                    what = r.outcome.summary() if r.outcome is not None and not r.outcome.ok else (r.versus.to_json() if r.versus else "")
                    (stale if want != "DCP" else unexpected).append(f"{name}/{eng}: {r.status} (expected {want}) {what}")
    finally:
        pool.close()
    assert not unexpected, "\n".join(unexpected)
    assert not stale, "expected findings that changed (update EXPECTED):\n" + "\n".join(stale)


def test_tensorflow_default_layout_mode_runs_nchw_models(tmp_path):
    """onnx2tf's default conversion (NCHW→NHWC) as its own engine: it is fed channel-last inputs and its channel-last
    outputs are transposed back, so a plain Conv model agrees with onnxruntime."""
    import numpy as np
    from onnx import helper, numpy_helper


    w = numpy_helper.from_array(np.random.default_rng(0).uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="n0_Conv", pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"], name="n1_Relu")], "g",
                          [helper.make_tensor_value_info("x", 1, [1, 3, 6, 5])], [helper.make_tensor_value_info("y", 1, [1, 4, 6, 5])], [w])
    j = _judge_on(tmp_path, g, ["onnxruntime", "tensorflow-nhwc", "reference"], {"x": np.random.default_rng(1).uniform(-1, 1, (1, 3, 6, 5)).astype(np.float32)})
    assert j.verdict.results["tensorflow-nhwc"].status == "DCP", j.verdict.results["tensorflow-nhwc"].outcome


def test_onnx2tf_current_release_converts_with_flatbuffer_direct_in_both_layout_modes(tmp_path):
    """onnx2tf 2.x (Python 3.12, its own environment) writes the TFLite flatbuffer itself and LiteRT runs it: a plain
    Conv+Relu agrees with onnxruntime in the keep-shape mode and in onnx2tf's default NHWC mode (whose channel-last
    output is transposed back), and the version names the release and its backend."""
    import numpy as np
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="n0_Conv", pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"], name="n1_Relu")], "g",
                          [helper.make_tensor_value_info("x", 1, [1, 3, 6, 5])], [helper.make_tensor_value_info("y", 1, [1, 4, 6, 5])], [w])
    j = _judge_on(tmp_path, g, ["onnxruntime", "onnx2tf", "onnx2tf-nhwc", "reference"],
                  {"x": np.random.default_rng(1).uniform(-1, 1, (1, 3, 6, 5)).astype(np.float32)})
    for mode in ("onnx2tf", "onnx2tf-nhwc"):
        assert j.verdict.results[mode].status == "DCP", (mode, j.verdict.results[mode].outcome)


def test_openvino_runs_a_model_from_its_onnx_frontend_in_float32(tmp_path):
    """OpenVINO's CPU plugin reads the ONNX file itself; at float32 inference precision a Conv+Relu agrees with
    onnxruntime, and an intermediate tensor the oracle asks for is returned by name."""
    import numpy as np
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="n0_Conv", pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"], name="n1_Relu")], "g",
                          [helper.make_tensor_value_info("x", 1, [1, 3, 6, 5])],
                          [helper.make_tensor_value_info("y", 1, [1, 4, 6, 5]), helper.make_tensor_value_info("c", 1, [1, 4, 6, 5])], [w])
    j = _judge_on(tmp_path, g, ["onnxruntime", "openvino", "reference"], {"x": np.random.default_rng(1).uniform(-1, 1, (1, 3, 6, 5)).astype(np.float32)})
    assert j.verdict.results["openvino"].status == "DCP", j.verdict.results["openvino"].outcome
    assert j.verdict.results["openvino"].outcome.outputs["c"].shape == (1, 4, 6, 5)


def test_openvino_failures_say_what_failed_where_and_in_which_node(tmp_path):
    """OpenVINO nests "Exception from src/...:N:" frames around the line that says what failed: the adapter re-raises
    that line, the OpenVINO source line of the failed check (`where`) and the ONNX node it validated, which OpenVINO
    names by its output tensor (seed 60: a Pad on a ReduceLogSum its frontend made rank 0)."""
    import importlib.util

    from ofuzz.exec.engines.registry import backends_dir

    spec = importlib.util.spec_from_file_location("ov_adapter", backends_dir() / "openvino" / "adapter.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = ("Exception from src/inference/src/cpp/core.cpp:132:\nException from src/inference/src/dev/plugin.cpp:59:\n"
            "Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\n"
            "FrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted. Failed operations detailed log:\n"
            "-- Pad-17 with a message:\nWhile validating ONNX node '<Node(Pad): t5_Pad>': Check 'pads_begin_coord->size() == "
            "static_cast<size_t>(arg_rank_len)' failed at src/core/shape_inference/include/pad_shape_inference.hpp:57:\n"
            "While validating node 'opset12::Pad Pad_1 (...) -> (dynamic[...])' with friendly_name 'Pad_1':\n"
            "length of pads_begin mismatches with rank of input, expect 0, but got 1\n\nSummary:\n-- Conversion is failed for: Pad-17\n")
    e = mod.explained(RuntimeError(text))
    assert str(e) == "length of pads_begin mismatches with rank of input, expect 0, but got 1"
    assert e.where == "src/core/shape_inference/include/pad_shape_inference.hpp:57" and e.failed_nodes == ["t5_Pad"]
    missing = mod.explained(RuntimeError("Exception from src/inference/src/cpp/core.cpp:132:\nModel wasn't fully converted.\nSummary:\n"
                                         "-- No conversion rule found for operations: Det-18\n"))
    assert str(missing) == "No conversion rule found for operations: Det-18" and missing.failed_nodes == []

    from onnx import helper

    from ofuzz.judge.judging import failed_nodes

    g = helper.make_graph([helper.make_node("Pad", ["x", "p"], ["t5_Pad"], name="n5_Pad")], "g", [], [])
    assert failed_nodes(helper.make_model(g), e.__class__) == []  # nothing named
    assert failed_nodes(helper.make_model(g), type("O", (), {"nodes": ["t5_Pad"]})) == [("n5_Pad", "Pad")]


def test_an_engine_whose_python_is_missing_says_which_and_how_to_get_it():
    """engine.yaml may name the Python an engine needs (onnx2tf >= 2.0: 3.12); a machine without it gets one line
    naming the version and how to install it, not a failed venv command."""
    import dataclasses

    from ofuzz.exec.engines.envs import interpreter
    from ofuzz.exec.engines.registry import EngineError

    (spec,) = resolve(["onnx2tf"])
    assert spec.python == "3.12"
    with pytest.raises(EngineError, match=r"engine onnx2tf needs Python 2\.1, which is not on this machine: install it .*pyenv install 2\.1"):
        interpreter(dataclasses.replace(spec, python="2.1"))


def test_tensorflow_default_layout_mode_feeds_an_input_whose_layouts_look_alike(tmp_path):
    """[1,2,2,2]: the NCHW and NHWC shapes are the same, so the shape cannot tell the adapter to transpose; onnx2tf's
    default mode turns every 3-5-D input channel-last, and fed untransposed it looked wrong (hand triage 7, a 1x1 Conv
    kept as a TensorFlow bug that the default mode computes right)."""
    import numpy as np
    from onnx import helper, numpy_helper

    from ofuzz.triage.reduce_checks import layout_ambiguous as _layout_ambiguous

    w = numpy_helper.from_array(np.random.default_rng(0).uniform(-1, 1, (3, 2, 1, 1)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="n0_Conv")], "g",
                          [helper.make_tensor_value_info("x", 1, [1, 2, 2, 2])], [helper.make_tensor_value_info("y", 1, [1, 3, 2, 2])], [w])
    assert _layout_ambiguous(helper.make_model(g))  # the reducer no longer halves shapes into this
    j = _judge_on(tmp_path, g, ["onnxruntime", "tensorflow-nhwc", "reference"], {"x": np.random.default_rng(1).uniform(-1, 1, (1, 2, 2, 2)).astype(np.float32)})
    assert j.verdict.results["tensorflow-nhwc"].status == "DCP", j.verdict.results["tensorflow-nhwc"].versus


def test_mnn_keeps_scalar_inputs_scalar(tmp_path):
    """A 0-d input stays 0-d on its way into MNN (np.ascontiguousarray made it (1,), and MNN's output then
    contradicted the declared scalar: a false shape finding)."""
    import numpy as np
    from onnx import helper


    g = helper.make_graph([helper.make_node("Exp", ["x"], ["y"], name="n0_Exp")], "g", [helper.make_tensor_value_info("x", 1, [])],
                          [helper.make_tensor_value_info("y", 1, [])])
    j = _judge_on(tmp_path, g, ["onnxruntime", "mnn", "reference"], {"x": np.array(0.5, np.float32)})
    assert j.verdict.results["mnn"].status == "DCP" and j.verdict.results["mnn"].outcome.outputs["y"].shape == ()


def _one_node(op: str, shape: list[int], out_type: int = 1, extra_inputs=(), **attrs):
    from onnx import helper

    names = ["x", *[i.name for i in extra_inputs]]
    return helper.make_graph([helper.make_node(op, names, ["y"], name=f"n0_{op}", **attrs)], "g",
                             [helper.make_tensor_value_info("x", 1, shape)], [helper.make_tensor_value_info("y", out_type, shape)],
                             list(extra_inputs))


def test_mnn_flushing_nan_in_tanh_is_a_nan_handling_bug_and_so_is_its_exp_clamp(tmp_path):
    """MNN's vectorised Tanh turns NaN into a number while every finite element agrees: tanh is an elementary
    function, which propagates NaN (IEEE 754; numpy, onnxruntime and the reference do), so this is a bug of severity
    NaN/Inf handling, not policy. Its Exp clamping +Inf to 6e37 is a wrong number for a defined input: a bug too."""
    import numpy as np

    from ofuzz.judge.judging import BUG

    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    x[0, 1, 2] = np.nan
    j = _judge_on(tmp_path, _one_node("Tanh", [2, 3, 4]), ["onnxruntime", "mnn", "reference"], {"x": x})
    (f,) = [f for f in j.findings if f.engine == "mnn"]
    assert f.klass == BUG and "nan" in f.signature and "undefined" not in f.detail, f.detail
    x = np.array([[1.0, 2.0, np.inf, 0.5]], np.float32)
    j = _judge_on(tmp_path, _one_node("Exp", [1, 4]), ["onnxruntime", "mnn", "reference"], {"x": x})
    (f,) = [f for f in j.findings if f.engine == "mnn"]
    assert f.klass == BUG and "inf" in f.signature, f.detail


def test_onnx2tf_fake_quant_quantize_linear_is_a_capability_gap(tmp_path):
    """onnx2tf returns QuantizeLinear's uint8 output as float fake-quant values by design (ENGINE-NOTES): the
    capability table (noise/unsupported.yaml, `divergence: [dtype]`), never a finding."""
    import numpy as np
    from onnx import numpy_helper

    from ofuzz.judge.judging import UNSUPPORTED

    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(128, np.uint8), "z")]
    g = _one_node("QuantizeLinear", [1, 3, 4, 4], 2, inits)
    x = np.random.default_rng(2).uniform(-4, 4, (1, 3, 4, 4)).astype(np.float32)
    j = _judge_on(tmp_path, g, ["onnxruntime", "tensorflow", "reference"], {"x": x})
    (f,) = [f for f in j.findings if f.engine == "tensorflow"]
    assert f.klass == UNSUPPORTED and f.detail["gap"]["rule"] == "onnx2tf-quantize-fake-quant", f.detail


def test_the_users_mode_second_opinion_reads_a_square_output_either_way(tmp_path):
    """Hand triage 10 #16: BatchNormalization on [1, 16, 16] (C = L) is wrong only in onnx2tf's keep-shape mode. The
    default mode computes it right but hands it back channel-last, which the shape cannot show, so the second opinion
    said 'wrong too' and the keep-shape-only defect stayed a bug. Either reading now counts; a wrong expectation does not."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    from ofuzz.triage.second_opinion import SecondOpinions

    rng = np.random.default_rng(3)
    params = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in
              (("s", rng.uniform(0.5, 2, 16)), ("b", rng.uniform(-1, 1, 16)), ("m", rng.uniform(-1, 1, 16)), ("v", rng.uniform(0.5, 2, 16)))]
    g = helper.make_graph([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="n0_BatchNormalization")], "g",
                          [helper.make_tensor_value_info("x", 1, [1, 16, 16])], [helper.make_tensor_value_info("y", 1, [1, 16, 16])], params)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    feeds = {"x": rng.uniform(-1, 1, (1, 16, 16)).astype(np.float32)}
    with EnginePool(resolve(["onnxruntime"]), tmp_path / "pool") as pool:
        pool.start()
        _, run = pool.execute_model(model, feeds, ["onnxruntime"])["onnxruntime"]
    expected = {"y": run.outputs["y"]}
    (spec,) = resolve(["tensorflow-nhwc"])
    opinions = SecondOpinions({"tensorflow-nhwc": spec}, tmp_path / "op")
    try:
        if "tensorflow-nhwc" in opinions._pool("tensorflow-nhwc").unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("TensorFlow is not installed (ofuzz engines --install tensorflow)")
        assert opinions.agrees("tensorflow-nhwc", model, feeds, expected) is True
        assert opinions.agrees("tensorflow-nhwc", model, feeds, {"y": expected["y"] * 1.01 + 0.01}) is False
    finally:
        opinions.close()
    onnx.checker.check_model(model)


def test_tensorflow_names_the_node_a_run_time_failure_happened_in(tmp_path):
    """TensorFlow names the Keras layer that failed at run time, and onnx2tf names layers after the ONNX tensor they
    compute: the adapter maps it to the node, so the reducer cuts to that node's cone in one check instead of searching
    the whole model (TensorFlow's run-time failures took a third of an export's reduction time in ddmin)."""
    import json

    import numpy as np
    import onnx
    from onnx import helper

    from ofuzz.judge.signature import finding_id
    from ofuzz.triage.pipeline import export

    side = [helper.make_node("Sin", ["y"], ["s0"], name="n10_Sin")]  # bystanders the cone drops
    side += [helper.make_node("Cos", [f"s{i}"], [f"s{i + 1}"], name=f"n{11 + i}_Cos") for i in range(5)]
    g = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["t1"], name="n1_ConstantOfShape"),
                           helper.make_node("Greater", ["t1", "y"], ["t2"], name="n2_Greater"), *side], "g",
                          [helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [3]), helper.make_tensor_value_info("y", 1, [4, 2, 3])],
                          [helper.make_tensor_value_info("t2", onnx.TensorProto.BOOL, [4, 2, 3]), helper.make_tensor_value_info("s5", 1, [4, 2, 3])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    feeds = {"s": np.array([4, 2, 3], np.int64), "y": np.random.default_rng(0).uniform(-1, 1, (4, 2, 3)).astype(np.float32)}
    specs = resolve(["onnxruntime", "reference", "tensorflow"])
    with EnginePool(specs, tmp_path / "pool") as pool:
        pool.start()
        if "tensorflow" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("TensorFlow is not installed (ofuzz engines --install tensorflow)")
        j = judge_model(pool, onnx.load(str(path)), path, feeds, policy=Policy.default())
        (f,) = [f for f in j.findings if f.engine == "tensorflow"]
        assert f.status == "IF" and f.detail.get("failed_nodes") == ["n2_Greater"], (f.signature, f.detail)
        row = {"engine": "tensorflow", "status": "IF", "signature": f.signature, "op": f.op, "summary": f.summary, "first_idx": 0,
               "first_model": "m", "count": 1}
        out = tmp_path / "repros" / finding_id(f.signature)
        export({s.name: s for s in specs}, row, path, feeds, out, reduce_budget=20, pool=pool, policy=Policy.default())
    info = json.loads((out / "finding.json").read_text())
    assert info["reduction"]["nodes_after"] == 2 and info["reduction"]["passes"]["cone"]["accepted"] == 1, info["reduction"]


def test_tensorflow_says_which_onnx2tf_line_a_conversion_failed_at(tmp_path):
    """onnx2tf's Clip handler has no branch for a Clip with neither bound (valid since opset 11) and reads a tf_node it
    never set (hand triage 10 #21): the adapter reports the onnx2tf line, which the triage clusters by."""
    import numpy as np
    from onnx import helper

    g = helper.make_graph([helper.make_node("Clip", ["x"], ["y"], name="n0_Clip")], "g", [helper.make_tensor_value_info("x", 1, [2, 3])],
                          [helper.make_tensor_value_info("y", 1, [2, 3])])
    j = _judge_on(tmp_path, g, ["onnxruntime", "tensorflow-nhwc", "reference"], {"x": np.ones((2, 3), np.float32)})
    out = j.verdict.results["tensorflow-nhwc"]
    assert out.status == "MCF" and out.outcome.where.startswith("ops/Clip.py:"), (out.status, out.outcome.where)


def test_a_helper_rejecting_its_callers_axis_names_the_caller(tmp_path):
    """onnx2tf's convert_axis raises IndexError for any out-of-range axis its caller hands it: for a Shape with `end`
    equal to the rank (valid: it is clamped) and for a Squeeze after an elided Reshape alike, two defects at one helper
    line. The adapter names the handler that called it, which the triage's source-line unit then is."""
    import numpy as np
    from onnx import helper

    g = helper.make_graph([helper.make_node("Shape", ["x"], ["y"], name="n0_Shape", end=4)], "g", [helper.make_tensor_value_info("x", 1, [1, 1, 1, 2])],
                          [helper.make_tensor_value_info("y", 7, [4])])
    j = _judge_on(tmp_path, g, ["onnxruntime", "tensorflow-nhwc", "reference"], {"x": np.ones((1, 1, 1, 2), np.float32)})
    out = j.verdict.results["tensorflow-nhwc"]
    assert out.status == "MCF" and out.outcome.where.startswith("utils/common_functions.py:") and " via ops/Shape.py:" in out.outcome.where, out.outcome.where


def test_a_division_by_a_subnormal_that_tensorflow_flushes_is_not_a_bug(tmp_path):
    """TensorFlow's CPU kernels flush subnormals to zero: 0.315 / 5.576e-39 is +inf there and 5.65e37 in onnxruntime
    and the reference (hand triage 11 #14). The spec does not say which, so the finding is `undefined`, not a bug."""
    import numpy as np
    from onnx import helper

    from ofuzz.judge.judging import UNDEFINED

    g = helper.make_graph([helper.make_node("Div", ["a", "b"], ["y"], name="n0_Div")], "g",
                          [helper.make_tensor_value_info("a", 1, [4]), helper.make_tensor_value_info("b", 1, [4])],
                          [helper.make_tensor_value_info("y", 1, [4])])
    feeds = {"a": np.array([0.315, 1.0, 2.0, 3.0], np.float32), "b": np.array([5.576e-39, 1.0, 2.0, 4.0], np.float32)}
    j = _judge_on(tmp_path, g, ["onnxruntime", "tensorflow", "reference"], feeds)
    assert j.verdict.results["tensorflow"].status == "DCF", j.verdict.results["tensorflow"].status
    (f,) = [f for f in j.findings if f.engine == "tensorflow"]
    assert f.klass == UNDEFINED, (f.klass, f.detail)
