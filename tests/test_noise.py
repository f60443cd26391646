"""Noise classes (noise/*.yaml through ofuzz/judge/noise/): capability gaps, spec-undefined results,
reference-evaluator gaps, and the loader's one-line errors.

The messages below are verbatim from real engine runs through ofuzz's workers (single-op models,
opset 17, November 2026); log tails are kept from their last relevant line.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ofuzz.judge.noise import Gap, NoiseError, load_noise, noise_dir

MNN_LOG = ("\nThe device supports: i8sdot:0, fp16:0, i8mm: 0, sve2: 0, sme2: 0\nStart to Convert Other Model Format To MNN Model..., "
           "target version: 3.6\n[07:16:17] :46: ONNX Model ir version: 8\n[07:16:17] :47: ONNX Model opset version: 17\n"
           "Start to Optimize the MNN Net...\n")


def mnn_not_support(op: str) -> str:
    # MNN 3.6.1 converter (x86), prepare stage, ConversionError
    line = f"[07:16:17] :220: These Op Not Support: ONNX::{op}"
    return f"MNN conversion failed (exit 0): {line}{MNN_LOG}{line} \nConverted Failed!"


ORT_TAIL = ("    sess.initialize_session(providers, provider_options, disabled_optimizers)\n"
            "onnxruntime.capi.onnxruntime_pybind11_state.NotImplemented: ")

# (engine, message, log_tail, rule, op, attribute)
CAPTURED = [
    # MNN 3.6.1 converter
    ("mnn", mnn_not_support("IsNaN"), "", "mnn-op-not-supported", "IsNaN", None),
    ("mnn", mnn_not_support("IsInf"), "", "mnn-op-not-supported", "IsInf", None),
    ("mnn", mnn_not_support("Hardmax"), "", "mnn-op-not-supported", "Hardmax", None),
    ("mnn", mnn_not_support("Bernoulli"), "", "mnn-op-not-supported", "Bernoulli", None),
    ("mnn", "MNN conversion failed (exit 0): Convert Onnx's Op y , type = LSTM, failed, may be some node is not const" + MNN_LOG
     + "MNN LSTM Don't support activation: HardSigmoid\nConvert Onnx's Op y , type = LSTM, failed, may be some node is not const\n"
     "MNN LSTM Don't support activation: HardSigmoid\nConvert Onnx's Op y , type = LSTM, failed, may be some node is not const\n"
     "[07:16:17] :220: These Op Not Support: ONNX::LSTM \nConverted Failed!", "", "mnn-lstm-activation", "LSTM", "activations"),
    ("mnn", "MNN converter killed by SIGABRT after: corrupted size vs. prev_size" + MNN_LOG.replace("Start to Optimize",
     "[07:16:17] :149: Check it out ==> y has empty input, the index is 3\nStart to Optimize")
     + "MNN LSTM not support sequence_lens, all batch must be seq_length, the result may has error\n"
     "Use While to compute LSTM, if don't want it, add --useOriginRNNImpl \ncorrupted size vs. prev_size", "",
     "mnn-lstm-sequence-lens", "LSTM", "sequence_lens"),
    # onnxruntime 1.32.0 (CPU provider), float64 inputs / layout=1
    ("onnxruntime", "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Acos(7) node with name 'n0_Acos'",
     ORT_TAIL + "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Acos(7) node with name 'n0_Acos'\n",
     "onnxruntime-no-kernel", "Acos", None),
    ("onnxruntime", ("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Hardmax(13) node with name "
                     "'n0_Hardmax'"), "", "onnxruntime-no-kernel", "Hardmax", None),
    ("onnxruntime", ("[ONNXRuntimeError] : 1 : FAIL : Exception during initialization: /onnxruntime_src/onnxruntime/core/providers/cpu/rnn/"
     "lstm_base.h:53 onnxruntime::LSTMBase::LSTMBase(const onnxruntime::OpKernelInfo&) layout_ == 0 was false. Batchwise recurrent "
     "operations (layout == 1) are not supported. If you need support create a github issue with justification.\n"), "",
     "onnxruntime-rnn-batchwise-layout", "LSTM", "layout"),
    ("onnxruntime", ("[ONNXRuntimeError] : 1 : FAIL : Exception during initialization: /onnxruntime_src/onnxruntime/core/providers/cpu/rnn/"
     "deep_cpu_gru.h:56 onnxruntime::DeepCpuGruOp::DeepCpuGruOp(const onnxruntime::OpKernelInfo&) layout_ == 0 was false. Batchwise "
     "recurrent operations (layout == 1) are not supported. If you need support create a github issue with justification.\n"), "",
     "onnxruntime-rnn-batchwise-layout", "GRU", "layout"),
    # onnx 1.23.2 reference evaluator
    ("reference", ("No registered implementation for operator 'GlobalLpPool' and domain '', schema.has_function is False, "
     "schema.has_context_dependent_function is False. You may either add one or skip the test in 'backend_reference_test.py'. "
     "Available implementations:\nAbs, Acos, Acosh, Add, AffineGrid, And, ArgMax, ArgMin, Asin, Asinh,"), "",
     "reference-op-missing", "GlobalLpPool", None),
    ("reference", "No implementation for operator 'DequantizeLinear' domain '' and version 17, found 19, 21, 23, 25, None.", "",
     "reference-op-version-missing", "DequantizeLinear", None),
    ("reference", "GridSample interpolation only supports nearest, linear, and cubic modes.",
     ('  File "/work/main/.venv/lib/python3.11/site-packages/onnx/reference/ops/op_grid_sample.py", line 361, in _run\n'
     "    raise RuntimeError(\nRuntimeError: GridSample interpolation only supports nearest, linear, and cubic modes.\n"),
     "reference-gridsample-mode", "GridSample", "mode"),
    ("reference", "Unknown activation function 'Relu'.",
     ('  File "/work/main/.venv/lib/python3.11/site-packages/onnx/reference/ops/op_rnn.py", line 73, in choose_act\n'
     "    raise RuntimeError(f\"Unknown activation function {name!r}.\")\nRuntimeError: Unknown activation function 'Relu'.\n"),
     "reference-rnn-activation", "RNN", "activations"),
    # onnx2tf 1.29.24 (TensorFlow 2.19); tflite converts with the same onnx2tf and gave the same messages
    ("tensorflow", "\x1b[31mERROR:\x1b[0m storage_order option is not implemented yet.",
     ('  File "/root/.cache/ofuzz/envs/tensorflow-e7fca9eedfe4/lib/python3.11/site-packages/onnx2tf/ops/MaxPool.py", line 206, '
     "in make_node\n    raise NotImplementedError(error_msg)\nNotImplementedError: \x1b[31mERROR:\x1b[0m storage_order option is "
     "not implemented yet.\n"), "onnx2tf-option-not-implemented", "MaxPool", "storage_order"),
    ("tflite", ("\x1b[31mERROR:\x1b[0m MaxPoolWithArgmax with dilations is not yet implemented. Pull requests are welcome. \n"
     "graph_node.name: n0_MaxPool, dilations: [2, 2]"),
     ('  File "/root/.cache/ofuzz/envs/tensorflow-e7fca9eedfe4/lib/python3.11/site-packages/onnx2tf/ops/MaxPool.py", line 194, '
     "in make_node\n    raise NotImplementedError(error_msg)\nNotImplementedError: \x1b[31mERROR:\x1b[0m MaxPoolWithArgmax with "
     "dilations is not yet implemented. Pull requests are welcome. \ngraph_node.name: n0_MaxPool, dilations: [2, 2]\n"),
     "onnx2tf-attribute-not-implemented", "MaxPool", "dilations"),
    ("tensorflow", "No module named 'onnx2tf.ops.CastLike'",
     ("\x1b[31mERROR:\x1b[0m CastLike OP is not yet implemented.\n\nTraceback (most recent call last):\n"
     "ModuleNotFoundError: No module named 'onnx2tf.ops.CastLike'\n"), "onnx2tf-op-missing", "CastLike", None),
    # onnx2tf 2.6.9 (flatbuffer_direct + LiteRT), replaying seed 53's onnx2tf 1.29.24 roots (docs/results.md)
    ("onnx2tf", "RuntimeError: Encountered unresolved custom op: ONNX_LPPOOL.", "", "onnx2tf-custom-op-fallback", "LpPool", None),
    ("onnx2tf-nhwc", "RuntimeError: Encountered unresolved custom op: ONNX_SCATTERND.", "", "onnx2tf-custom-op-fallback", "ScatterND", None),
    ("onnx2tf", "NotImplementedError: flatbuffer_direct validation failed: op=Mod node=n0_Mod reason_code=unsupported_attribute_value message=Mod wi",
     "", "onnx2tf-flatbuffer-validation", "Mod", None),
    ("onnx2tf", "NotImplementedError: AveragePool dilations must be [1,1] for flatbuffer_direct. op=n0_AveragePool dilations=[2, 2]", "",
     "onnx2tf-flatbuffer-validation", "AveragePool", "dilations"),
    ("onnx2tf-nhwc", "NotImplementedError: AveragePool1D lowering currently supports dilations=[1]. op=n0_AveragePool dilations=[2]", "",
     "onnx2tf-flatbuffer-validation", "AveragePool", None),
    ("onnx2tf", "NotImplementedError: Conv auto_pad=SAME_LOWER is not supported in flatbuffer_direct. op=n0_Conv", "",
     "onnx2tf-flatbuffer-validation", "Conv", "auto_pad"),
    ("onnx2tf", "NotImplementedError: AveragePoolND lowering currently supports dilations=[1]. op=n0_AveragePool dilations=[2]", "",
     "onnx2tf-flatbuffer-validation", "AveragePool", None),
    # LiteRT 2.1.2 kernels under onnx2tf 2.6.9 (seed 60, hand triage 24 #8)
    ("onnx2tf-nhwc", "tflite/kernels/elementwise.cc:121 Type INT64 is unsupported by op Abs.Node number 0 (ABS) failed to prepare.", "",
     "litert-kernel-type", "Abs", "INT64"),
    ("onnx2tf", "Unknown input type: 2, only float32, int types and bool are supportedNode number 0 (ARG_MAX) failed to prepare.", "",
     "litert-kernel-type", "ArgMax", None),
    # OpenVINO 2026.4.1 (seed 60), the line its adapter re-raises
    ("openvino", "No conversion rule found for operations: Det-18", "", "openvino-no-conversion-rule", "Det", None),
    # the test double's seeded "prepare:unsupported" fault (backends/testdouble/adapter.py)
    ("testdouble", "test double: operator Celu is not supported", "", "testdouble-unsupported", "Celu", None),
    # onnx2tf 1.29.24 (TF 2.19), Conv auto_pad=SAME_LOWER (AssertionError; the log names onnx2tf/ops/Conv.py)
    ("tensorflow", "\x1b[31mERROR:\x1b[0m Invalid auto_pad attribute: SAME_LOWER",
     'File "/x/site-packages/onnx2tf/ops/Conv.py", line 270, in make_node\n    assert False, error_msg', "onnx2tf-auto-pad-same-lower", "Conv", "auto_pad"),
    # onnx2tf 1.29.24 (TF 2.19), ScatterElements reduction=mul: SystemExit after this line in the log
    ("tensorflow", "1", "\x1b[31mERROR:\x1b[0m ScatterElements currently supports only reduction=['none']. Pull requests are welcome.\n...",
     "onnx2tf-supports-only", "ScatterElements", "reduction"),
    # onnx2tf 1.29.24, ReduceSum noop_with_empty_axes=1 (AssertionError; hand triage 7, rc-97b0dcb2)
    ("tensorflow-nhwc", "\x1b[31mERROR:\x1b[0m TensorFlow does not support noop_with_empty_axes=1 (True).",
     'File "/x/site-packages/onnx2tf/ops/ReduceSum.py", line 84, in make_node\n    assert False, error_msg',
     "onnx2tf-noop-with-empty-axes", "ReduceSum", "noop_with_empty_axes"),
    # TensorFlow 2.19 through onnx2tf 1.29.24, Conv strides 2 + dilations 2 (ValueError; hand triage 7, rc-5668f92c)
    ("tensorflow-nhwc", 'Exception encountered when calling layer "tf.nn.convolution_176" (type TFOpLambda).',
     ('File "/x/site-packages/onnx2tf/ops/Conv.py", line 401, in conv_nobias\n    tf.nn.convolution(\nValueError: Exception '
      'encountered when calling layer "tf.nn.convolution_176" (type TFOpLambda).\n\n`strides > 1` not supported in conjunction '
      'with `dilation_rate > 1`. Received: strides=[2 2] and dilation_rate=[2 2]'), "tensorflow-strided-dilated-convolution", "Conv",
     "dilation_rate"),
    # TensorFlow 2.19 through onnx2tf 1.29.24, LpPool kernel 1x1 strides 2 (ValueError; hand triage 8, rc-28f79054)
    ("tensorflow-nhwc", 'Exception encountered when calling layer "tf.nn.pool_1" (type TFOpLambda).',
     ('File "/x/site-packages/onnx2tf/ops/LpPool.py", line 233, in make_node\n    tf.nn.pool(\nValueError: Exception encountered '
      'when calling layer "tf.nn.pool_1" (type TFOpLambda).\n\n`strides` > `window_shape` not supported due to inconsistency '
      'between CPU and GPU implementations. Received: strides=[2 2] and window_shape=[1, 1]'), "tensorflow-pool-strides-above-window",
     "LpPool", "strides"),
    # TensorFlow 2.19 with TF_ENABLE_ONEDNN_OPTS=0, ConvTranspose dilations 2 at run time (hand triage 7, rc-b9f49c1e)
    ("tensorflow", "Exception encountered when calling layer 'tf.nn.conv2d_transpose_2049' (type TFOpLambda).",
     ("tensorflow.python.framework.errors_impl.InvalidArgumentError: Exception encountered when calling layer "
      "'tf.nn.conv2d_transpose_2049' (type TFOpLambda).\n\nCurrent CPU implementations do not yet support dilation rates larger "
      "than 1. [Op:Conv2DBackpropInput]"), "tensorflow-cpu-kernel-dilation", "ConvTranspose", "dilation"),
    # TensorFlow 2.19 through onnx2tf 1.29.24, Pad mode=edge on a rank-6 tensor at run time (UnimplementedError; hand triage 9)
    ("tensorflow", "{{function_node __wrapped__MirrorPad_device_/job:localhost/replica:0/task:0/device:CPU:0}} inputs rank not in",
     ("{{function_node __wrapped__MirrorPad_device_/job:localhost/replica:0/task:0/device:CPU:0}} inputs rank not in [0,5]: 6 "
      "[Op:MirrorPad] name: n10_Pad"), "tensorflow-mirrorpad-rank", "Pad", "mode"),
]

# Failures that are bugs or something else, never a capability gap (also real messages, same versions).
ORDINARY = [
    ("onnxruntime", ("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input: x for the following indices\n "
     "index: 0 Got: 3 Expected: 2\n Please fix either the inputs/outputs or the model.")),
    ("onnxruntime", ("[ONNXRuntimeError] : 10 : INVALID_GRAPH : Load model from /tmp/noisecap/models/Mish_1.onnx failed:This is an "
     "invalid model. In Node, (\"n0_Mish\", Mish, \"\", -1) : (\"x\": tensor(float),) -> (\"y\": tensor(float),) , Error No Op "
     "registered for Mish with domain_version of 17")),
    ("reference", "cannot reshape array of size 4 into shape (1,2,4)"),
    ("reference", "p < 0, p > 1 or p contains NaNs"),
    ("reference", "No registered schema for operator 'Mish' and domain ''. Did you recompile the sources after updating the repository?"),
    ("tensorflow", "'NoneType' object is not subscriptable"),
    ("tensorflow", ("You are passing KerasTensor(type_spec=TensorSpec(shape=(2, 3, 4, 5), dtype=tf.float32, name='x'), name='x', "
     "description=\"created by layer 'x'\"), an intermediate TF-Keras symbolic input/output, to a TF API that does not allow "
     "registering custom dispatchers")),
    ("mnn", "MNN converter killed by SIGSEGV after: Use While to compute LSTM, if don't want it, add --useOriginRNNImpl" + MNN_LOG),
    ("mnn", "Compute Shape Error for n0_Mean"),
    ("mnn", "code expected at least 16 arguments, got 15"),
]


@pytest.fixture(scope="module")
def nc():
    return load_noise()


# --- unsupported ---------------------------------------------------------------------------------


def test_shipped_files_load(nc):
    assert noise_dir() == Path(__file__).resolve().parents[1] / "noise"
    assert {Path(s).name for s in nc.sources} == {"unsupported.yaml", "undefined.yaml", "reference_gaps.yaml", "triage.yaml"}
    assert {Path(s).parent.name for s in nc.sources if Path(s).name == "triage.yaml"} == {"mnn", "openvino", "reference", "tensorflow"}
    assert len(nc.unsupported_rules) >= 10 and len(nc.undefined_rules) >= 10 and len(nc.reference_gap_rules) >= 10


def test_every_unsupported_rule_matches_a_captured_message(nc):
    unmatched = [r.name for r in nc.unsupported_rules if r.patterns and not any(r.match(e, m, t) for e, m, t, *_ in CAPTURED)]
    assert not unmatched, f"rules without a captured message: {unmatched}"


@pytest.mark.parametrize("engine,message,tail,rule,op,attribute", CAPTURED, ids=[f"{c[0]}-{c[3]}-{c[4]}" for c in CAPTURED])
def test_captured_message_is_a_gap(nc, engine, message, tail, rule, op, attribute):
    assert nc.unsupported(engine, message, tail) == Gap(engine, op, attribute, rule)


@pytest.mark.parametrize("engine,message", ORDINARY)
def test_ordinary_failures_are_not_gaps(nc, engine, message):
    assert nc.unsupported(engine, message, message) is None


def test_engine_families_are_explicit(nc):
    msg = mnn_not_support("IsNaN")
    for engine in ("mnn", "mnn-arm:n1", "mnn-arm:a53", "mnn35"):
        assert nc.unsupported(engine, msg).op == "IsNaN", engine
    for engine in ("onnxruntime", "reference", "tensorflow", "mnnx", "my_engine.py:Mnn"):
        assert nc.unsupported(engine, msg) is None, engine
    tf_msg = "\x1b[31mERROR:\x1b[0m storage_order option is not implemented yet."
    assert nc.unsupported("tflite", tf_msg, op_hint="MaxPool").key() == "tflite|MaxPool|storage_order"
    assert nc.unsupported("onnxruntime-noopt", CAPTURED[6][1]).op == "Acos"


def test_op_falls_back_to_the_hint_and_must_be_an_onnx_op(nc):
    tf_msg = "\x1b[31mERROR:\x1b[0m storage_order option is not implemented yet."
    assert nc.unsupported("tensorflow", tf_msg).op is None  # no traceback, no hint: unknown, not guessed
    assert nc.unsupported("tensorflow", tf_msg, op_hint="MaxPool").op == "MaxPool"
    assert nc.unsupported("tensorflow", tf_msg, op_hint="NotAnOp").op is None
    assert nc.unsupported("mnn", "These Op Not Support: ONNX::Frobnicate").key() == "mnn||"


# --- undefined -----------------------------------------------------------------------------------


def node(op: str, n_in: int = 1, n_out: int = 1, **attrs) -> onnx.NodeProto:
    return helper.make_node(op, [f"i{k}" for k in range(n_in)], [f"o{k}" for k in range(n_out)], **attrs)


SEEN_ON = {"reference": "1.23.2"}  # the versions the shipped families were seen on (MNN: 3.6.1)


def family_of(nc, engine, *args, **kw):
    """nc.family on the version the shipped families were seen on."""
    return nc.family(engine, *args, **kw, version=SEEN_ON.get(engine, "3.6.1"))


F, I32 = np.float32, np.int32


def test_cast_float_to_int(nc):
    cast = node("Cast", to=TensorProto.INT32)
    assert nc.undefined(cast, [np.array([np.nan, 1], F)]).rule == "cast-nan-to-int"
    assert nc.undefined(cast, [np.array([-np.inf, 1], F)]).rule == "cast-inf-to-int"
    assert nc.undefined(cast, [np.array([3e9, 1], F)]).rule == "cast-out-of-range-to-int"
    assert nc.undefined(cast, [np.array([0.5, 1], F)]) is None
    assert nc.undefined(cast, [np.array([2147483520.0, -2147483648.0], F)]) is None  # the extremes float32 can hold
    assert nc.undefined(node("Cast", to=TensorProto.UINT8), [np.array([-1.5], F)]).rule == "cast-out-of-range-to-int"
    assert nc.undefined(node("Cast", to=TensorProto.UINT8), [np.array([-0.5, 255.9], F)]) is None  # truncation stays in range
    assert nc.undefined(node("Cast", to=TensorProto.BOOL), [np.array([np.nan], F)]) is None  # spec: all else to True
    assert nc.undefined(node("Cast", to=TensorProto.INT8), [np.array([200], np.int16)]) is None  # int->int wraps, defined
    assert "undefined if OOR" in nc.undefined(cast, [np.array([np.nan], F)]).why


def test_castlike_uses_the_second_inputs_type(nc):
    assert nc.undefined(node("CastLike", 2), [np.array([300.0], F), np.zeros(1, np.int8)]).rule == "castlike-out-of-range-to-int"
    assert nc.undefined(node("CastLike", 2), [np.array([100.0], F), np.zeros(1, np.int8)]) is None
    assert nc.undefined(node("CastLike", 2), [np.array([np.nan], F), np.zeros(1, F)]) is None


def test_integer_division_by_zero(nc):
    assert nc.undefined(node("Div", 2), [np.array([1, 2], I32), np.array([0, 1], I32)]).rule == "int-div-by-zero"
    assert nc.undefined(node("Div", 2), [np.array([1, 2], F), np.array([0, 1], F)]) is None  # IEEE: ±Inf/NaN
    assert nc.undefined(node("Div", 2), [np.array([1, 2], I32), np.array([3, 1], I32)]) is None
    assert nc.undefined(node("Div", 2), [np.array([1, 2], I32), None]) is None  # unknown divisor: not claimed
    assert nc.undefined(node("Mod", 2), [np.array([5], np.int64), np.array([0], np.int64)]).rule == "int-mod-by-zero"
    assert nc.undefined(node("Mod", 2, fmod=1), [np.array([5], F), np.array([0], F)]) is None  # spec: NaN


def test_integer_overflow_is_undefined_only_on_large_integers(nc):
    """Integer models draw -8..8; a product chain or a cast of a large float can leave int32's range, where engines
    wrap, saturate or compute in float: spec-undefined. Small integers and float inputs stay judged."""
    mul = node("Mul", 2)
    assert nc.undefined(mul, [np.array([40000, 1], I32), np.array([40000, 2], I32)]).rule == "int-overflow"
    assert nc.undefined(node("ReduceSum", 1), [np.array([-2**20], np.int64)]).rule == "int-overflow"
    assert nc.undefined(mul, [np.array([8, -8], I32), np.array([7, 3], I32)]) is None
    assert nc.undefined(mul, [np.array([1e6], F), np.array([1e6], F)]) is None  # float: IEEE, defined
    assert nc.undefined(node("Transpose", 1), [np.array([2**40], np.int64)]) is None  # moves values, no arithmetic


def test_any_int_input_above_wants_a_count(tmp_path):
    bad = tmp_path / "undefined.yaml"
    bad.write_text("undefined:\n  - {name: u, ops: [Mul], why: w, when: [{any_int_input_above: big}]}\n")
    with pytest.raises(NoiseError, match="any_int_input_above takes a non-negative integer"):
        load_noise([bad])


def test_indices_out_of_range(nc):
    data = np.zeros((3, 5), F)
    gather = node("Gather", 2, axis=1)
    assert nc.undefined(gather, [data, np.array([0, 7], np.int64)]).rule == "index-out-of-range"
    assert nc.undefined(gather, [data, np.array([0, -5, 4], np.int64)]) is None
    assert nc.undefined(gather, [data, np.array([-6], np.int64)]).rule == "index-out-of-range"
    assert nc.undefined(node("Gather", 2), [data, np.array([4], np.int64)]).rule == "index-out-of-range"  # axis 0 has size 3
    ge = node("GatherElements", 2, axis=-1)
    assert nc.undefined(ge, [data, np.array([[0, 5]] * 3, np.int64)]).rule == "index-out-of-range"
    assert nc.undefined(ge, [data, np.array([[0, 4]] * 3, np.int64)]) is None
    assert nc.undefined(node("GatherND", 2), [data, np.array([[2, 5]], np.int64)]).rule == "nd-index-out-of-range"
    assert nc.undefined(node("GatherND", 2), [data, np.array([[2, 4], [-3, -5]], np.int64)]) is None
    assert nc.undefined(node("GatherND", 2, batch_dims=1), [data, np.array([[5]] * 3, np.int64)]).rule == "nd-index-out-of-range"
    se = node("ScatterElements", 3, axis=1)
    assert nc.undefined(se, [data, np.array([[9]], np.int64), np.ones((1, 1), F)]).rule == "index-out-of-range"
    assert nc.undefined(node("ScatterND", 3), [data, np.array([[3, 0]], np.int64), np.ones(1, F)]).rule == "nd-index-out-of-range"


def test_scatter_duplicates_and_other_spec_gaps(nc):
    data = np.zeros((3, 5), F)
    se = node("ScatterElements", 3, axis=1)
    assert nc.undefined(se, [data, np.array([[1, -4]], np.int64), np.ones((1, 2), F)]).rule == "scatter-elements-duplicate-indices"
    assert nc.undefined(se, [data, np.array([[1, 2]], np.int64), np.ones((1, 2), F)]) is None
    add = node("ScatterElements", 3, axis=1, reduction="add")
    assert nc.undefined(add, [data, np.array([[1, 1]], np.int64), np.ones((1, 2), F)]) is None
    assert nc.undefined(se, [data, np.array([[1], [1]], np.int64), np.ones((2, 1), F)]) is None  # different rows: no clash
    snd = node("ScatterND", 3)
    assert nc.undefined(snd, [data, np.array([[0], [-3]], np.int64), np.ones((2, 5), F)]).rule == "scatter-nd-duplicate-indices"
    assert nc.undefined(snd, [data, np.array([[0], [1]], np.int64), np.ones((2, 5), F)]) is None
    assert nc.undefined(node("TopK", 2, 2, sorted=0), [np.ones(4, F), np.array([2], np.int64)]).rule == "topk-unsorted"
    assert nc.undefined(node("TopK", 2, 2), [np.ones(4, F), np.array([2], np.int64)]) is None
    assert nc.undefined(node("Bernoulli"), [np.full(3, 0.5, F)]).rule == "bernoulli-sampling"
    dropout = node("Dropout", 3)
    assert nc.undefined(dropout, [np.ones(3, F), np.array(0.5, F), np.array(True)]).rule == "dropout-training"
    assert nc.undefined(dropout, [np.ones(3, F), np.array(0.5, F), np.array(False)]) is None
    assert nc.undefined(dropout, [np.ones(3, F), np.array(0.0, F), np.array(True)]) is None


# --- reference gaps ------------------------------------------------------------------------------


def recurrent(op: str, *, seq_lens: bool = False, **attrs) -> onnx.NodeProto:
    ins = ["X", "W", "R", "B", "sequence_lens"] if seq_lens else ["X", "W", "R"]
    return helper.make_node(op, ins, ["Y"], hidden_size=4, **attrs)


X4, X3 = np.ones((1, 2, 4, 4), F), np.ones((1, 2, 4), F)
REFERENCE_GAPS = [
    # (rule, node, inputs, opset) hit, then its near miss
    ("lpnormalization-p1", node("LpNormalization", p=1), [X4], 17),
    ("globalmaxpool-rank", node("GlobalMaxPool"), [X3], 17),
    ("maxpool-indices", node("MaxPool", 1, 2, kernel_shape=[2, 2]), [X4], 17),
    ("maxpool-same-lower", node("MaxPool", kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER"), [X4], 17),
    ("maxpool-same-upper-not-2d", node("MaxPool", kernel_shape=[2], auto_pad="SAME_UPPER"), [X3], 17),
    ("maxpool-ceil-pads", node("MaxPool", kernel_shape=[2, 2], ceil_mode=1, pads=[1, 0, 0, 0]), [X4], 17),
    ("recurrent-clip", recurrent("LSTM", clip=0.5), [None] * 3, 17),
    ("recurrent-activations", recurrent("RNN", activations=["Relu"]), [None] * 3, 17),
    ("recurrent-sequence-lens", recurrent("GRU", seq_lens=True), [None] * 5, 17),
    ("lstm-input-forget", recurrent("LSTM", input_forget=1), [None] * 3, 17),
    ("lppool-nan", node("LpPool", kernel_shape=[2, 2]), [np.where(X4 > 0, np.nan, X4)], 17),
    ("lppool-ceil-mode", node("LpPool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), [X4], 18),
    ("convtranspose-group", node("ConvTranspose", 2, group=2), [X4, np.ones((2, 1, 2, 2), F)], 17),
    ("gridsample-opset16-modes", node("GridSample", 2, mode="bilinear"), [X4, np.zeros((1, 2, 2, 2), F)], 17),
    ("globallppool-missing", node("GlobalLpPool"), [X4], 17),
    ("dequantizelinear-below-19", node("DequantizeLinear", 2), [np.ones(3, np.uint8), np.array(0.1, F)], 17),
    ("gatherelements-negative-axis", node("GatherElements", 2, axis=-1), [X4, np.zeros((1, 2, 4, 2), np.int64)], 17),
    ("convtranspose-output-shape", node("ConvTranspose", 2, output_shape=[5, 5]), [X4, np.ones((2, 1, 2, 2), F)], 17),
    ("clip-default-max-inf", node("Clip", 2), [np.array([1.0, np.inf], F), np.array(0.0, F)], 17),
    ("lrn-batch-as-channels", node("LRN", size=3), [X4], 17),
]
NEAR_MISSES = [
    ("lpnormalization-p1", node("LpNormalization", p=2), [X4], 17),
    ("globalmaxpool-rank", node("GlobalMaxPool"), [X4], 17),
    ("maxpool-indices", node("MaxPool", kernel_shape=[2, 2]), [X4], 17),
    ("maxpool-same-lower", node("MaxPool", kernel_shape=[2, 2], auto_pad="VALID"), [X4], 17),
    ("maxpool-same-upper-not-2d", node("MaxPool", kernel_shape=[2, 2], auto_pad="SAME_UPPER"), [X4], 17),
    ("maxpool-ceil-pads", node("MaxPool", kernel_shape=[2, 2], ceil_mode=1), [X4], 17),
    ("maxpool-ceil-pads", node("MaxPool", kernel_shape=[2, 2], pads=[1, 0, 0, 0]), [X4], 17),
    ("recurrent-clip", recurrent("LSTM", direction="reverse"), [None] * 3, 17),
    ("recurrent-activations", recurrent("GRU", linear_before_reset=1), [None] * 3, 17),
    ("recurrent-sequence-lens", recurrent("GRU"), [None] * 3, 17),
    ("lstm-input-forget", recurrent("LSTM", input_forget=0), [None] * 3, 17),
    ("lppool-nan", node("LpPool", kernel_shape=[2, 2]), [X4], 17),
    ("lppool-ceil-mode", node("LpPool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=0), [X4], 18),
    ("convtranspose-group", node("ConvTranspose", 2, group=1), [X4, np.ones((2, 1, 2, 2), F)], 17),
    ("gridsample-opset16-modes", node("GridSample", 2), [X4, np.zeros((1, 2, 2, 2), F)], 17),
    ("gridsample-opset16-modes", node("GridSample", 2, mode="nearest"), [X4, np.zeros((1, 2, 2, 2), F)], 17),
    ("globallppool-missing", node("GlobalAveragePool"), [X4], 17),
    ("dequantizelinear-below-19", node("DequantizeLinear", 2), [np.ones(3, np.uint8), np.array(0.1, F)], 19),
    ("gatherelements-negative-axis", node("GatherElements", 2, axis=3), [X4, np.zeros((1, 2, 4, 2), np.int64)], 17),
    ("convtranspose-output-shape", node("ConvTranspose", 2), [X4, np.ones((2, 1, 2, 2), F)], 17),
    ("clip-default-max-inf", node("Clip", 3), [np.array([1.0, np.inf], F), np.array(0.0, F), np.array(0.5, F)], 17),
    ("clip-default-max-inf", node("Clip", 2), [np.array([1.0, 2.0], F), np.array(0.0, F)], 17),
    ("lrn-batch-as-channels", node("LpNormalization"), [X4], 17),
]


def test_every_reference_gap_rule_is_exercised(nc):
    assert {r.name for r in nc.reference_gap_rules} == {c[0] for c in REFERENCE_GAPS} == {c[0] for c in NEAR_MISSES}


@pytest.mark.parametrize("rule,n,inputs,opset", REFERENCE_GAPS, ids=[c[0] for c in REFERENCE_GAPS])
def test_reference_gap_hit(nc, rule, n, inputs, opset):
    text = next(r.text for r in nc.reference_gap_rules if r.name == rule)
    assert nc.reference_gap(n, inputs, opset) == text


@pytest.mark.parametrize("rule,n,inputs,opset", NEAR_MISSES, ids=[f"{c[0]}-{c[1].op_type}" for c in NEAR_MISSES])
def test_reference_gap_near_miss(nc, rule, n, inputs, opset):
    assert nc.reference_gap(n, inputs, opset) is None


def lppool_model(x_as_initializer: np.ndarray | None = None, rank: int = 4, op: str = "LpPool") -> onnx.ModelProto:
    shape = [1, 2, 4, 4][:rank]
    attrs = {"kernel_shape": [2] * (rank - 2)} if op == "LpPool" else {}
    n = helper.make_node(op, ["x"], ["y"], name="pool", **attrs)
    inits = [numpy_helper.from_array(x_as_initializer, "x")] if x_as_initializer is not None else []
    ins = [] if inits else [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    g = helper.make_graph([n], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_reference_gaps_in_a_model(nc):
    lppool_nan = next(r.text for r in nc.reference_gap_rules if r.name == "lppool-nan")
    assert nc.reference_gaps_in(lppool_model()) == [f"pool: {lppool_nan}"]  # input values unknown: possibly NaN
    assert nc.reference_gaps_in(lppool_model(), {"x": X4}) == []
    assert nc.reference_gaps_in(lppool_model(), {"x": np.where(X4 > 0, np.nan, X4)}) == [f"pool: {lppool_nan}"]
    assert nc.reference_gaps_in(lppool_model(X4)) == []  # an initializer without NaN is known
    assert nc.reference_gaps_in(lppool_model(rank=3, op="GlobalMaxPool"))[0].startswith("pool: reference GlobalMaxPool")
    assert nc.reference_gaps_in(lppool_model(rank=4, op="GlobalMaxPool")) == []  # rank from the graph input


# --- loader errors -------------------------------------------------------------------------------

GOOD_UNSUPPORTED = "unsupported:\n  - name: ok\n    engines: [mnn]\n    patterns: ['Not Support: (?P<op>\\w+)']\n"
BAD_FILES = [
    ("unknown key", "unsupported:\n  - name: bad1\n    engines: [mnn]\n    patterns: ['x']\n    colour: red\n",
     "entry 1 (bad1): unknown key"),
    ("bad regex", GOOD_UNSUPPORTED + "  - name: bad2\n    engines: [mnn]\n    patterns: ['Not (Support']\n", "entry 2 (bad2): pattern"),
    ("bad group", "unsupported:\n  - name: bad3\n    engines: [mnn]\n    patterns: ['(?P<operator>\\w+) failed']\n", "(bad3): pattern"),
    ("empty match", "unsupported:\n  - name: bad4\n    engines: [mnn]\n    patterns: ['.*']\n", "matches an empty message"),
    ("unknown predicate", "undefined:\n  - name: bad5\n    ops: [Div]\n    why: w\n    when:\n      - has_nans: 1\n",
     "unknown predicate 'has_nans'"),
    ("unknown op", "reference_gaps:\n  - name: bad6\n    ops: [MaxPooling]\n    reason: r\n", "unknown ONNX op type 'MaxPooling'"),
    ("not a list", "undefined:\n  - name: bad7\n    ops: Cast\n    why: w\n", "ops must be a non-empty list"),
    ("when not a list", "undefined:\n  - name: bad8\n    ops: [Cast]\n    why: w\n    when: {has_nan: 0}\n", "when must be a list"),
    ("unknown attribute", ("undefined:\n  - name: bad9\n    ops: [LpNormalization, Div]\n    why: w\n    when:\n"
     "      - attr_equals: {p: 1}\n"), "unknown attribute 'p' for op Div"),
    ("input index", "undefined:\n  - name: bad10\n    ops: [Div]\n    why: w\n    when:\n      - has_zero: 2\n",
     "beyond the inputs of Div"),
    ("missing key", "reference_gaps:\n  - name: bad11\n    ops: [Div]\n", "missing key(s) ['reason']"),
    ("duplicate", GOOD_UNSUPPORTED + GOOD_UNSUPPORTED.split("\n", 1)[1], "entry 2 (ok): duplicate name"),
    ("yaml syntax", "unsupported:\n  - name: bad13\n    engines: [mnn\n    patterns: ['x']\n",
     "entry 0 (top level): YAML syntax error at line"),
    ("unknown section", "unsupported: []\nundefind: []\n", "unknown section(s) ['undefind']"),
    ("family of one", "families:\n  - name: bad14\n    engines: [mnn]\n    ops: [Sum]\n    why: w\n", "two operators, or one operator and two failure"),
    ("family of one, one failure", "families:\n  - name: bad14b\n    engines: [mnn]\n    ops: [Sum]\n    why: w\n    failures: [value]\n",
     "two operators, or one operator and two failure"),
    ("family failure type", "families:\n  - name: bad14c\n    engines: [mnn]\n    ops: [Sum, Max]\n    why: w\n    failures: [\"raise:Oops\"]\n",
     "unknown failure class"),
    ("family min_inputs", "families:\n  - name: bad15\n    engines: [mnn]\n    ops: [Sum, Max]\n    why: w\n    min_inputs: many\n",
     "min_inputs must be a non-negative integer"),
    ("family input_ranks", "families:\n  - name: bad15b\n    engines: [mnn]\n    ops: [Conv, ConvTranspose]\n    why: w\n    input_ranks: 3\n",
     "input_ranks must be a list of non-negative integers"),
    ("family failures", "families:\n  - name: bad16\n    engines: [mnn]\n    ops: [Exp, Softplus]\n    why: w\n    failures: [values]\n",
     "unknown failure class(es) ['values']"),
    ("patterns and divergence", "unsupported:\n  - name: bad17\n    engines: [tflite]\n    op: Cast\n    patterns: ['x y']\n"
     "    divergence: [dtype]\n", "exactly one of patterns, divergence"),
    ("divergence without op", "unsupported:\n  - name: bad18\n    engines: [tflite]\n    divergence: [dtype]\n", "needs op:"),
    ("star with ops", "undefined:\n  - name: bad19\n    ops: ['*', Tanh]\n    why: w\n", "mixes '*' with operator names"),
    ("except_ops without star", "undefined:\n  - name: bad20\n    ops: [Tanh]\n    except_ops: [Exp]\n    why: w\n",
     "except_ops is only for ops: ['*']"),
    ("bad divergence", "undefined:\n  - name: bad21\n    ops: ['*']\n    why: w\n    when:\n      - divergence: [nans]\n",
     "divergence must be a list"),
    ("skip_when not a list", GOOD_UNSUPPORTED + "    skip_when: {attr_equals: {auto_pad: SAME_LOWER}}\n", "skip_when must be a non-empty list"),
    ("skip_when attribute", GOOD_UNSUPPORTED.replace("patterns: ['Not Support: (?P<op>\\w+)']", "op: Conv\n    patterns: ['no conv']")
     + "    skip_when: [attr_any_above: {stride: 1}]\n", "unknown attribute 'stride' for op Conv"),
    ("skip_when bound", GOOD_UNSUPPORTED + "    skip_when: [attr_any_above: {strides: [1]}]\n", "takes a number or another attribute"),
]


@pytest.mark.parametrize("what,text,expected", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_malformed_file_gives_one_line(tmp_path, what, text, expected):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(NoiseError) as exc:
        load_noise([path])
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{path}: entry "), msg
    assert expected in msg and "; " in msg, msg


def test_user_file_extends_the_shipped_ones(tmp_path):
    (tmp_path / "mine.yaml").write_text(GOOD_UNSUPPORTED.replace("ok", "my-rule").replace("[mnn]", "[myengine]"))
    nc = load_noise([noise_dir(), tmp_path])
    assert nc.unsupported("myengine", "Not Support: Relu") == Gap("myengine", "Relu", None, "my-rule")
    assert nc.unsupported("mnn", mnn_not_support("IsNaN")).rule == "mnn-op-not-supported"


def test_colour_codes_are_removed_before_matching(tmp_path):
    (tmp_path / "mine.yaml").write_text("unsupported:\n  - name: anchored\n    engines: [tensorflow]\n"
                                        "    patterns: ['^ERROR: (?P<attribute>\\w+) option']\n")
    gap = load_noise([tmp_path]).unsupported("tensorflow", "\x1b[31mERROR:\x1b[0m storage_order option is not implemented yet.")
    assert gap is not None and gap.attribute == "storage_order"


def test_noise_imports_no_engine_library():
    code = "import sys, ofuzz.judge.noise; bad = {'onnxruntime', 'MNN', 'tensorflow', 'onnx2tf'} & set(sys.modules); assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def test_nan_policy_of_the_max_min_family_is_undefined(nc):
    nan = np.array([1.0, np.nan], F)
    assert nc.undefined(node("Max", 2), [np.array([2.0, 1.0], F), nan]).rule == "nan-policy-max-min"
    assert nc.undefined(node("Max", 2), [np.array([2.0, 1.0], F), np.array([0.5, 3.0], F)]) is None
    assert nc.undefined(node("Relu"), [nan]).rule == "nan-policy-clamp"
    assert nc.undefined(node("Sigmoid"), [nan]) is None  # Sigmoid(NaN) is NaN by definition: a real NaN bug stays a bug
    assert nc.undefined(node("Elu"), [nan]).rule == "nan-policy-piecewise"  # piecewise by x < 0: NaN takes no piece
    assert nc.undefined(node("Elu"), [np.array([1.0, -2.0], F)]) is None


def test_nan_propagation_is_policy_only_for_operators_defined_by_comparisons(nc):
    """IEEE 754 arithmetic and the elementary functions propagate NaN: an engine that turns a NaN into a number in
    Tanh, Exp, Softplus, Conv or a recurrent cell without `clip` has a defect (severity NaN/Inf handling). Only
    operators defined by comparisons (TopK, Hardmax, quantisation's clamp, a recurrent `clip`) leave NaN's fate to
    the engine, and only when NaN handling is all that differs (`nan`)."""
    nan = np.array([1.0, np.nan], F)
    for op in ("Tanh", "Exp", "Sigmoid", "Softplus", "Softmax"):
        assert nc.undefined(node(op), [nan], 17, "nan") is None, op
    assert nc.undefined(node("RNN", 3), [nan, np.ones(2, F), np.ones(2, F)], 17, "nan") is None
    assert nc.undefined(node("RNN", 3, clip=1.0), [nan, np.ones(2, F), np.ones(2, F)], 17, "nan").rule == "nan-policy-recurrent-clip"
    assert nc.undefined(node("TopK", 2), [nan, np.array([1], np.int64)], 17, "nan").rule == "nan-policy-comparison-built"
    assert nc.undefined(node("TopK", 2), [nan, np.array([1], np.int64)], 17, "value") is None  # a wrong number stays a bug
    assert nc.undefined(node("Hardmax"), [np.array([1.0, 2.0], F)], 17, "nan") is None  # NaN made from numbers: a bug


def test_roialign_max_mode_is_undefined_and_avg_is_not(nc):
    x, rois, idx = np.ones((1, 1, 4, 4), F), np.array([[0, 0, 2, 2]], F), np.array([0], np.int64)
    assert nc.undefined(node("RoiAlign", 3, mode="max"), [x, rois, idx], 17, "value").rule == "roialign-max-mode"
    assert nc.undefined(node("RoiAlign", 3), [x, rois, idx], 17, "value") is None  # avg (the default) is defined
    # hand triage 13: the dispute is over values; a wrong output shape in max mode is onnx2tf's layout defect
    assert nc.undefined(node("RoiAlign", 3, mode="max"), [x, rois, idx], 17, "shape") is None


def test_by_design_divergence_is_a_capability_gap(nc):
    gap = nc.by_design("tensorflow@1.28.8", "QuantizeLinear", "dtype")
    assert gap is not None and gap.rule == "onnx2tf-quantize-fake-quant" and gap.key() == "tensorflow@1.28.8|QuantizeLinear|integer output"
    assert nc.by_design("tensorflow", "QuantizeLinear", "value") is None  # wrong values are not by design
    assert nc.by_design("mnn", "QuantizeLinear", "dtype") is None and nc.by_design("tensorflow", "Cast", "dtype") is None
    assert nc.unsupported("tensorflow", "QuantizeLinear") is None  # a divergence rule matches no message


def test_pinned_versions_answer_to_their_engines_rules(nc):
    assert nc.unsupported("mnn@3.5.0", mnn_not_support("IsNaN")).op == "IsNaN"
    assert nc.unsupported("onnxruntime@1.17.3", CAPTURED[6][1]).op == "Acos"


def test_families_name_one_code_path_per_engine(nc):
    """MNN's N-ary elementwise family holds Sum/Min/Max/Mean with 3+ inputs, for MNN and its versions only."""
    fam = family_of(nc, "mnn", "Max", 3)
    assert fam is not None and fam.name == "mnn-nary-eltwise" and family_of(nc, "mnn@3.5.0", "Sum", 4) == fam
    assert family_of(nc, "mnn", "Max", 2) is None and family_of(nc, "tensorflow", "Sum", 3) is None and family_of(nc, "mnn", "Add", 3) is None
    # a family can be limited to failure classes: MNN's Exp clamp gives wrong values and Infs, not crashes
    assert family_of(nc, "mnn", "Softplus", 1, "value").name == family_of(nc, "mnn@3.5.0", "Exp", 1, "inf").name == "mnn-exp-kernel"
    assert family_of(nc, "mnn", "Exp", 1, "crash") is None and family_of(nc, "mnn", "LpPool", 1, "value").name == "mnn-avgpool-divisor"
    # one operator, the ways one defect of it shows: the reference's MaxPool pads order raises ValueError or RuntimeError
    # (hand triage 9); its ceil_mode shape defect, a TypeError or another engine stay apart
    pads = family_of(nc, "reference", "MaxPool", 1, "exception:ValueError")
    assert pads is not None and pads == family_of(nc, "reference", "MaxPool", 1, "exception:RuntimeError")
    assert family_of(nc, "reference", "MaxPool", 1, "shape") == pads  # unequal pads misread also give wrong shapes (seed 76)
    assert family_of(nc, "reference", "MaxPool", 1, "value") is None and family_of(nc, "reference", "MaxPool", 1, "exception:TypeError") is None
    assert family_of(nc, "onnxruntime", "MaxPool", 1, "exception:ValueError") is None
    assert family_of(nc, "mnn", "Equal", 2, "value") == family_of(nc, "mnn", "Less", 2, "value") != None  # noqa: E711
    assert family_of(nc, "mnn", "GatherND", 2, "value") == family_of(nc, "mnn", "GatherElements", 2, "value") != None  # noqa: E711
    # a family can be limited to ranks of the first input: MNN's 1-D Conv and ConvTranspose come back rank 4 (triage 13)
    conv1d = family_of(nc, "mnn", "Conv", 3, "shape", 3)
    assert conv1d is not None and conv1d == family_of(nc, "mnn", "ConvTranspose", 2, "shape", 3)
    assert family_of(nc, "mnn", "Conv", 3, "shape", 4) is None and family_of(nc, "mnn", "Conv", 3, "shape") is None
    assert family_of(nc, "mnn", "Conv", 3, "value", 3) is None
    # a family can be limited to attribute values: MNN reads SAME_LOWER as SAME_UPPER for Conv and ConvTranspose alike
    lower = family_of(nc, "mnn", "ConvTranspose", 2, "value", 4, {"auto_pad": "SAME_LOWER"})
    assert lower is not None and lower.name == "mnn-conv-same-lower" and lower == family_of(nc, "mnn", "Conv", 2, "shape", 4, {"auto_pad": "SAME_LOWER"})
    assert family_of(nc, "mnn", "Conv", 2, "value", 4, {"auto_pad": "SAME_UPPER"}) is None and family_of(nc, "mnn", "Conv", 2, "value", 4) is None
    # MNN's one Reduce transform ignores the axes input of opset 18 under five names; the opset-17 form (one input),
    # its wrong values and the Reduce ops it converts elsewhere (ReduceSum) stay apart
    axes = family_of(nc, "mnn", "ReduceL2", 2, "shape")
    assert axes is not None and axes == family_of(nc, "mnn", "ReduceLogSum", 2, "shape") == family_of(nc, "mnn", "ReduceSumSquare", 2, "shape")
    assert family_of(nc, "mnn", "ReduceL2", 1, "shape") is None and family_of(nc, "mnn", "ReduceSum", 2, "shape") is None
    assert family_of(nc, "mnn", "ReduceL1", 2, "value") is None and family_of(nc, "mnn", "ReduceLogSumExp", 1, "value").name == "mnn-exp-kernel"
    # MNN never reads pool dilations: a dilated MaxPool, AveragePool or LpPool is one defect, shape or values; an
    # undilated pool's wrong values stay with the divisor defect, and dilations of 1 are no dilations
    dil = family_of(nc, "mnn", "MaxPool", 1, "shape", 4, {"dilations": [2, 1], "kernel_shape": [2, 2]})
    assert dil is not None and dil.name == "mnn-pool-dilations"
    assert dil == family_of(nc, "mnn", "LpPool", 1, "value", 4, {"dilations": [1, 3]}) == family_of(nc, "mnn", "AveragePool", 1, "shape", 4, {"dilations": [2, 2]})
    assert family_of(nc, "mnn", "MaxPool", 1, "shape", 4, {"dilations": [1, 1]}) is None and family_of(nc, "mnn", "MaxPool", 1, "shape", 4) is None
    assert family_of(nc, "mnn", "AveragePool", 1, "value", 4, {"pads": [0, 0, 1, 1], "count_include_pad": 1}).name == "mnn-avgpool-divisor"
    # the divisor counts the padding: without count_include_pad=1 an AveragePool's wrong value is another defect
    assert family_of(nc, "mnn", "AveragePool", 1, "value", 4, {"pads": [0, 0, 1, 1]}) is None


def test_a_family_can_hold_only_for_integer_inputs(nc, tmp_path):
    """mnn-integer-matmul (hand triage 17): MNN's integer MatMul, also reached through Einsum, is one defect; the same
    operators on floats are not it (and a repro whose input type is unknown is not claimed)."""
    fam = family_of(nc, "mnn", "Einsum", 2, "value", 4, {"equation": "abcd,bcdz->dcz"}, "int32")
    assert fam is not None and fam.name == "mnn-integer-matmul"
    assert family_of(nc, "mnn", "MatMul", 2, "value", 2, {}, "int64") == fam
    assert family_of(nc, "mnn", "MatMul", 2, "value", 2, {}, "float32") is None
    assert family_of(nc, "mnn", "MatMul", 2, "value", 2, {}) is None
    # hand triage 18 #4: MNN's ArgMax kernel reads integers as floats, a defect apart from select_last_index
    assert family_of(nc, "mnn", "ArgMin", 1, "value", 1, {}, "int64").name == "mnn-argmax-integer"
    assert family_of(nc, "mnn", "ArgMax", 1, "value", 4, {"select_last_index": 1}, "float32").name == "mnn-argmax-argmin"
    bad = tmp_path / "families.yaml"
    bad.write_text("families:\n  - {name: f, engines: [mnn], ops: [MatMul, Einsum], why: w, input_dtypes: [int]}\n")
    with pytest.raises(NoiseError, match="unknown input_dtypes"):
        load_noise([bad])


def test_a_family_attr_not_must_map_names_to_numbers(tmp_path):
    from ofuzz.judge.noise import NoiseError, load_noise

    bad = tmp_path / "families.yaml"
    bad.write_text("families:\n  - {name: f, engines: [mnn], ops: [MaxPool, AveragePool], why: w, attr_not: [dilations]}\n")
    with pytest.raises(NoiseError, match="attr_not must map attribute names"):
        load_noise([bad])
    bad.write_text("families:\n  - {name: f, engines: [mnn], ops: [Conv, ConvTranspose], why: w, attr_in: {auto_pad: SAME_LOWER}}\n")
    with pytest.raises(NoiseError, match="attr_in must map attribute names to the list of values"):
        load_noise([bad])


def test_mvn_of_a_constant_tensor_is_undefined(nc):
    """Hand triage 7: MVN of 2.421227 everywhere; the spec's E[X^2]-E[X]^2 is -4.77e-7 in float32, so NaN (onnxruntime,
    reference, MNN) and 0 (TensorFlow, exact) are both what the formula gives. A non-constant input stays defined."""
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"])
    const = np.full((1, 2, 3, 3), 2.421227, np.float32)
    assert nc.undefined(node, [const]) is not None
    assert nc.undefined(node, [const + np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)]) is None


# --- which models hold a gap (what a campaign no longer sends the engine) --------------------------------------------

def one_node(op: str, shape: list[int], **attrs) -> onnx.ModelProto:
    n = helper.make_node(op, ["x"], ["y"], name="n", **attrs)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def pad_model(mode: str, rank: int) -> onnx.ModelProto:
    pads = numpy_helper.from_array(np.ones(2 * rank, np.int64), "pads")
    n = helper.make_node("Pad", ["x", "pads"], ["y"], name="n", mode=mode)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2] * rank)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[pads])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_gap_holds_only_where_its_limit_does(nc):
    """The seed-76 campaign kept TensorFlow from 9,564 of 13,888 models: onnx2tf's refusal of Conv auto_pad=SAME_LOWER
    had kept every Conv that wrote auto_pad, and TF's rank-6 MirrorPad limit every Pad that wrote a mode."""
    x4 = [1, 2, 6, 6]
    same_lower = nc.unsupported("tensorflow", "\x1b[31mERROR:\x1b[0m Invalid auto_pad attribute: SAME_LOWER",
                                'File "/x/onnx2tf/ops/Conv.py", line 270')
    assert same_lower == Gap("tensorflow", "Conv", "auto_pad", "onnx2tf-auto-pad-same-lower")
    conv = lambda **a: one_node("Conv", x4, **a)  # noqa: E731 (W is missing: shape facts do not matter here)
    assert nc.gap_in(conv(kernel_shape=[3, 3], auto_pad="SAME_LOWER"), [same_lower]) == same_lower
    assert nc.gap_in(conv(kernel_shape=[3, 3], auto_pad="SAME_UPPER"), [same_lower]) is None
    assert nc.gap_in(conv(kernel_shape=[3, 3], auto_pad="NOTSET"), [same_lower]) is None

    mirror = Gap("tensorflow", "Pad", "mode", "tensorflow-mirrorpad-rank")
    assert nc.gap_in(pad_model("reflect", 6), [mirror]) == mirror  # rank from shape inference
    assert nc.gap_in(pad_model("edge", 6), [mirror]) == mirror
    assert nc.gap_in(pad_model("reflect", 5), [mirror]) is None
    assert nc.gap_in(pad_model("constant", 6), [mirror]) is None

    window = Gap("tensorflow", "LpPool", "strides", "tensorflow-pool-strides-above-window")
    assert nc.gap_in(one_node("LpPool", x4, kernel_shape=[1, 1], strides=[2, 2]), [window]) == window
    assert nc.gap_in(one_node("LpPool", x4, kernel_shape=[2, 2], strides=[2, 2]), [window]) is None
    assert nc.gap_in(one_node("LpPool", x4, kernel_shape=[2, 2]), [window]) is None


def test_without_skip_when_an_attribute_gap_holds_for_a_value_other_than_the_default(nc):
    """storage_order=1 is what onnx2tf refuses; storage_order=0 written out is the default, which it converts. A gap
    from a known-bugs store (no rule name) is judged the same way; an operator gap holds for every node of it."""
    order = nc.unsupported("tensorflow", "\x1b[31mERROR:\x1b[0m storage_order option is not implemented yet.",
                           'File "/x/onnx2tf/ops/MaxPool.py", line 206')
    assert order == Gap("tensorflow", "MaxPool", "storage_order", "onnx2tf-option-not-implemented")
    x4 = [1, 2, 6, 6]
    for gap in (order, Gap("tensorflow", "MaxPool", "storage_order", "")):
        assert nc.gap_in(one_node("MaxPool", x4, kernel_shape=[2, 2], storage_order=1), [gap]) == gap
        assert nc.gap_in(one_node("MaxPool", x4, kernel_shape=[2, 2], storage_order=0), [gap]) is None
        assert nc.gap_in(one_node("MaxPool", x4, kernel_shape=[2, 2]), [gap]) is None
    isnan = nc.unsupported("mnn", mnn_not_support("IsNaN"))
    assert nc.gap_in(one_node("IsNaN", x4), [isnan]) == isnan
    assert nc.gap_in(one_node("Relu", x4), [isnan]) is None


def test_a_subnormal_operand_is_the_platforms_choice_not_a_defect(nc):
    """Hand triage 11 #14: TensorFlow flushes subnormals to zero by design; Div by 5.6e-39 gave +inf."""
    div = node("Div", 2)
    assert nc.undefined(div, [np.array([0.315], F), np.array([5.576e-39], F)]).rule == "subnormal-operands"
    assert nc.undefined(div, [np.array([0.315], F), np.array([1.2e-38], F)]) is None  # the smallest normal is 1.18e-38
    assert nc.undefined(div, [np.array([0.315], F), np.array([0.0], F)]) is None
    assert nc.undefined(node("Greater", 2), [np.array([2e-41], F), np.array([0.0], F)]).rule == "subnormal-operands"
    assert nc.undefined(node("Add", 2), [np.array([1], np.int32), np.array([0], np.int32)]) is None


def test_upstream_unknown_shape_rules_name_their_engines(tmp_path):
    """The shipped rule covers onnx2tf's three engines and no other; an entry without engines is refused by name."""
    from ofuzz.judge.noise import NoiseError, load_noise

    nc = load_noise()
    assert nc.unknown_shape("tensorflow-nhwc").name == "onnx2tf-unknown-shape-operand" and nc.unknown_shape("tflite") is not None
    assert nc.unknown_shape("mnn") is None and nc.unknown_shape("onnxruntime") is None
    bad = tmp_path / "families.yaml"
    bad.write_text("upstream_unknown_shape:\n  - {name: u, why: w}\n")
    with pytest.raises(NoiseError, match="missing key"):
        load_noise([bad])


def test_a_family_holds_only_on_the_engine_versions_it_was_seen_on(nc):
    """A family cites one release's sources: when a later release fixes a member, the family must stop merging there."""
    from ofuzz.judge.noise import version_within

    fam = next(f for f in nc.family_rules if f.name == "mnn-nary-eltwise")
    assert fam.versions == "<=3.6.1"
    assert nc.family("mnn", "Sum", 3, "value", version="3.6.1") is fam
    assert nc.family("mnn", "Sum", 3, "value", version="3.7.0") is None
    assert nc.family("mnn", "Sum", 3, "value", version=None) is None  # unknown version: no evidence it applies
    assert version_within("tensorflow 2.19.0, onnx2tf 1.29.24", "<=1.29.24") and not version_within("tensorflow 2.19.0, onnx2tf 2.6.9", "<=1.29.24")


def test_a_family_with_a_bad_versions_field_is_one_line_naming_the_fix(tmp_path):
    bad = tmp_path / "triage.yaml"
    bad.write_text("families:\n  - name: f\n    engines: [mnn]\n    ops: [Sum, Max]\n    versions: 'three point six'\n    why: x\n")
    with pytest.raises(NoiseError) as e:
        load_noise([bad])
    assert "versions must be a version specifier" in str(e.value) and "\n" not in str(e.value)


def test_a_family_test_is_a_known_rewrite_or_reading_and_a_bad_one_is_one_line_naming_the_choices(tmp_path):
    """A family's hypothesis is tested by a rewrite of the repro or, where no rewrite can make the engine right, by a
    reading of its output (MNN's QuantizeLinear encoding); a name that is neither is refused in one line."""
    from ofuzz.core.readings import READINGS

    nc = load_noise()
    quant = next(f for f in nc.family_rules if f.name == "mnn-quantizelinear-uint8-encoding")
    assert quant.tested and quant.test_reading == "other_8bit_encoding" and not quant.test_rewrite
    assert all(f.tested for f in nc.family_rules), [f.name for f in nc.family_rules if not f.tested]
    bad = tmp_path / "triage.yaml"
    bad.write_text("families:\n  - name: f\n    engines: [mnn]\n    ops: [Sum, Max]\n    test: {reading: squint}\n    why: x\n")
    with pytest.raises(NoiseError) as e:
        load_noise([bad])
    assert "reading: NAME" in str(e.value) and "other_8bit_encoding" in str(e.value) and "\n" not in str(e.value)
    q = np.array([160, 3], np.uint8)
    assert READINGS["other_8bit_encoding"](q.view(np.int8), q).tolist() == [160, 3]  # int8 bits of the uint8 answer
    want = np.array([-5, 100], np.int8)
    off = ((want.astype(np.int16) + 128 + 128) % 256 - 128).astype(np.int8)  # the uint8 encoding of an int8 zero point
    assert READINGS["other_8bit_encoding"](off, want).tolist() == [-5, 100]
    assert READINGS["without_unit_axes"](np.zeros((1, 3, 1, 1)), np.zeros((1, 3, 1))).shape == (1, 3, 1)
    assert READINGS["without_unit_axes"](np.zeros((1, 3, 2)), np.zeros((1, 2, 3))) is None


def test_a_family_of_a_converters_core_holds_for_every_operator_on_its_versions(nc):
    """onnx2tf 2.6.9 writes every rank-0 tensor as rank 1 (hand triage 24: Det, Greater, Add, PRelu, Mean): a family
    over '*' holds for any operator's wrong shape on that converter's versions, and nowhere else."""
    v = "ai-edge-litert 2.1.2, onnx2tf 2.6.9 (flatbuffer_direct)"
    assert nc.family("onnx2tf", "Det", 1, "shape", version=v).name == "onnx2tf-scalar-as-rank1"
    assert nc.family("onnx2tf-nhwc", "Greater", 2, "shape", version=v).name == "onnx2tf-scalar-as-rank1"
    assert nc.family("onnx2tf", "Det", 1, "value", version=v) is None
    assert nc.family("onnx2tf", "Det", 1, "shape", version="ai-edge-litert 2.1.2, onnx2tf 2.7.0 (flatbuffer_direct)") is None
    assert nc.family("tensorflow", "Det", 1, "shape", version="tensorflow 2.19.0, onnx2tf 1.29.24") is None


def test_mnns_exp_clamp_family_holds_its_nan_and_logsoftmax_faces(nc):
    """MNN's EXP kernel clamps to [-87, 87] with comparisons, so Exp(NaN) = exp(-87); LogSoftmax is lowered through it
    (hand triage 20 #15): one defect under Exp, Softplus, ReduceLogSumExp and LogSoftmax, for values, Inf and NaN."""
    fam = family_of(nc, "mnn", "Exp", 1, "nan")
    assert fam is not None and fam.name == "mnn-exp-kernel" and family_of(nc, "mnn", "LogSoftmax", 1, "nan") == fam
    # _AVX_MNNSoftmax runs its full packs of 8 through MNNExp (MathFunctions.cpp:184, 3.6.1; hand triage 31 #11)
    assert family_of(nc, "mnn", "Softmax", 1, "nan") == fam and family_of(nc, "mnn", "Hardmax", 1, "nan") is None
