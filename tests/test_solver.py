from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from ofuzz.gen.solver.builder import Builder, SolverError
from ofuzz.gen.solver.rules_spatial import _window
from ofuzz.gen.values import ValuePolicy


def out_size(i: int, k: int, s: int, d: int, pb: int, pe: int) -> int:
    return (i + pb + pe - d * (k - 1) - 1) // s + 1


@pytest.mark.parametrize("size", [1, 2, 5, 7, 16])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_keep_padding_preserves_size_at_stride_1(size, k, d):
    b = Builder(np.random.default_rng(0), ValuePolicy(), 17, 1 << 20)
    k2, d2, pb, pe = _window(b, size, k, 1, d, {"pad_mode": "keep"}, pool=False)
    assert (k2, d2) == (k, d)  # the paper's equations: pb + pe = d (f - 1), so oH = iH
    assert out_size(size, k, 1, d, pb, pe) == size
    assert 0 <= pb <= k * d and 0 <= pe <= k * d


@pytest.mark.parametrize("size", [3, 8, 13])
@pytest.mark.parametrize("s", [2, 3])
def test_keep_padding_gives_same_semantics_with_stride(size, s):
    b = Builder(np.random.default_rng(0), ValuePolicy(), 17, 1 << 20)
    k, d, pb, pe = _window(b, size, 3, s, 1, {"pad_mode": "keep"}, pool=False)
    assert out_size(size, k, s, d, pb, pe) == -(-size // s)


@pytest.mark.parametrize("size", [1, 2, 4])
def test_pool_pads_stay_below_kernel_and_window_fits(size):
    for seed in range(30):
        b = Builder(np.random.default_rng(seed), ValuePolicy(), 17, 1 << 20)
        k, d, pb, pe = _window(b, size, 5, 1, 2, {"pad_mode": "random"}, pool=True)
        assert pb < k and pe < k
        assert size + pb + pe >= d * (k - 1) + 1


def test_valid_window_shrinks_to_fit():
    b = Builder(np.random.default_rng(0), ValuePolicy(), 17, 1 << 20)
    k, d, pb, pe = _window(b, 3, 5, 1, 2, {"pad_mode": "valid"}, pool=False)
    assert (pb, pe) == (0, 0) and d * (k - 1) + 1 <= 3


def test_builder_rejects_tensors_over_cap_and_rolls_back():
    b = Builder(np.random.default_rng(0), ValuePolicy(), 17, 1000)
    x = b.add_input((1, 10, 10, 10))
    mark = b.mark()
    with pytest.raises(SolverError):
        b.op1("Tile", [x, b.ints([1, 2, 1, 1])])
    b.rollback(mark)
    assert b.nodes == [] and b.initializers == []
    with pytest.raises(SolverError):
        b.weight((2000,))


def test_builder_shapes_match_onnx_inference():
    b = Builder(np.random.default_rng(0), ValuePolicy(), 17, 1 << 20)
    x = b.add_input((1, 3, 9, 9))
    y = b.op1("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    assert y.shape == (1, 3, 5, 5)
    graph = helper.make_graph([n.proto for n in b.nodes], "g", [helper.make_tensor_value_info(x.name, 1, x.shape)],
                              [helper.make_tensor_value_info(y.name, 1, y.shape)], b.initializers)
    onnx.checker.check_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), full_check=True)


@pytest.mark.parametrize("omit", [0, 1])
def test_spatial_attributes_at_their_defaults_can_be_left_out(omit):
    """MNN's pools crash (SIGFPE) when `strides` is absent (hand triage 9): the generator wrote every attribute, so an
    engine that mishandles a spec default was never tested. With omit_defaults, strides 1, dilations 1 and pads 0 are
    left out; others stay; and the model is still the same computation (onnxruntime gives the same result)."""
    import onnxruntime as ort

    from ofuzz.gen.solver.rules_spatial import _spatial

    b = Builder(np.random.default_rng(0), ValuePolicy(), 17, 1 << 20)
    x = b.add_input((1, 2, 6, 6))
    p = {"kernel": 3, "stride": 1, "dilation": 1, "pad_mode": "valid", "omit_defaults": omit}
    attrs = _spatial(b, x, p, pool=True)
    assert ("strides" in attrs, "dilations" in attrs, "pads" in attrs) == ((False,) * 3 if omit else (True,) * 3), attrs
    assert _spatial(b, x, {**p, "stride": 2}, pool=True).get("strides") == [2, 2]  # not a default: kept
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 2, 6, 6)).astype(np.float32)}
    outs = []
    for a in (attrs, {"kernel_shape": [3, 3], "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]}):
        g = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], **a)], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        outs.append(ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0])
    np.testing.assert_array_equal(outs[0], outs[1])
