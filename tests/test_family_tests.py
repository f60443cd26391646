"""Engine families as hypotheses with a test: a finding joins a family only when the family's rewrite, which takes the
blamed trigger away, makes the engine right on its reduced repro; otherwise it is another defect, keyed on its own."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from onnx import helper

from ofuzz.core.rewrites import apply
from ofuzz.exec.engines.registry import resolve
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.judging import Policy, judge_in_memory
from ofuzz.judge.noise import Family, NoiseClasses, load_noise
from ofuzz.triage.cluster import cluster
from ofuzz.triage.family_test import run_family_test
from ofuzz.triage.rootcause import RootKey

F = onnx.TensorProto.FLOAT


def one_node(op: str, n_inputs: int, shape: list[int], opset: int = 17, **attrs) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(n_inputs)]
    g = helper.make_graph([helper.make_node(op, names, ["y"], name=f"n0_{op}", **attrs)], "g",
                          [helper.make_tensor_value_info(n, F, shape) for n in names], [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_binary_chain_computes_the_same_function():
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    for op in ("Sum", "Min", "Max", "Mean"):
        m = one_node(op, 4, [2, 3])
        feeds = {f"x{i}": rng.uniform(-1, 1, (2, 3)).astype(np.float32) for i in range(4)}
        chained, _ = apply("binary_chain", m, feeds, frozenset({op}))
        assert len(chained.graph.node) >= 3 and all(len(n.input) == 2 for n in chained.graph.node)
        run = lambda mm: ort.InferenceSession(mm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]  # noqa: E731
        np.testing.assert_allclose(run(chained), run(m), rtol=1e-6)
    assert apply("binary_chain", one_node("Sum", 2, [2]), {}, frozenset({"Sum"})) is None  # two inputs: nothing to take away


def test_broadcast_inputs_writes_the_operands_out_at_the_output_shape():
    """MNN's N-ary family blames broadcasting: its test writes every operand out at the output's shape (same function,
    nothing left to broadcast); operands of one shape already have nothing to take away (hand triage 23: a 3-input Max
    dropping a NaN without broadcasting is another mistake, which a binary chain had 'fixed')."""
    import onnxruntime as ort

    g = helper.make_graph([helper.make_node("Max", ["x0", "x1", "c"], ["y"], name="n0_Max")], "g",
                          [helper.make_tensor_value_info("x0", F, [2, 3]), helper.make_tensor_value_info("x1", F, [1, 3])],
                          [helper.make_tensor_value_info("y", F, [2, 3])], [onnx.numpy_helper.from_array(np.array([0.5], np.float32), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    rng = np.random.default_rng(0)
    feeds = {"x0": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "x1": rng.uniform(-1, 1, (1, 3)).astype(np.float32)}
    full, f = apply("broadcast_inputs", m, feeds, frozenset({"Max"}))
    onnx.checker.check_model(full, full_check=True)
    assert f["x1"].shape == (2, 3) and onnx.numpy_helper.to_array(full.graph.initializer[0]).shape == (2, 3)
    run = lambda mm, ff: ort.InferenceSession(mm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, ff)[0]  # noqa: E731
    np.testing.assert_array_equal(run(full, f), run(m, feeds))
    same = {f"x{i}": np.zeros((2, 3), np.float32) for i in range(3)}
    assert apply("broadcast_inputs", one_node("Max", 3, [2, 3]), same, frozenset({"Max"})) is None


def test_pad_rewrites_keep_a_valid_pool_and_spell_out_same_padding():
    m = one_node("AveragePool", 1, [1, 1, 5, 5], kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER")
    feeds = {"x0": np.zeros((1, 1, 5, 5), np.float32)}
    sym, _ = apply("symmetric_pads", m, feeds, frozenset({"AveragePool"}))
    attrs = {a.name: helper.get_attribute_value(a) for a in sym.graph.node[0].attribute}
    assert "auto_pad" not in attrs and attrs["pads"] == [1, 1, 1, 1]  # SAME_UPPER on 5 with k2 s2 pads 0 before, 1 after
    m = one_node("MaxPool", 1, [1, 1, 1, 3], kernel_shape=[3, 3], pads=[2, 1, 0, 0])
    uni, _ = apply("uniform_pads", m, {}, frozenset({"MaxPool"}))
    assert [helper.get_attribute_value(a) for a in uni.graph.node[0].attribute if a.name == "pads"] == [[2, 2, 2, 2]]
    wide = one_node("MaxPool", 1, [1, 1, 1, 2], kernel_shape=[2, 5], pads=[0, 2, 1, 2])
    uni, _ = apply("uniform_pads", wide, {}, frozenset({"MaxPool"}))  # a pad of 2 on a kernel of 2 is no valid pool: 1
    assert [helper.get_attribute_value(a) for a in uni.graph.node[0].attribute if a.name == "pads"] == [[1, 1, 1, 1]]
    unit = one_node("MaxPool", 1, [1, 1, 2, 2], kernel_shape=[1, 3], pads=[0, 1, 0, 2])
    assert apply("uniform_pads", unit, {}, frozenset({"MaxPool"})) is None  # a kernel of 1 allows no pad: nothing to test


def test_input_rewrites_change_only_what_the_hypothesis_blames():
    feeds = {"x0": np.array([-2.5, -0.0, np.nan, 0.4], np.float32), "x1": np.array([1, -3], np.int64)}
    m = one_node("Equal", 2, [4])
    _, f = apply("ordinary_inputs", m, {"x0": feeds["x0"], "x1": feeds["x0"]}, frozenset({"Equal"}))
    assert f["x0"].tolist() == [2.5, 0.0, 0.0, np.float32(0.4)] and not np.signbit(f["x0"]).any()
    g = helper.make_graph([helper.make_node("GatherElements", ["x0", "x1"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("x0", F, [4]), helper.make_tensor_value_info("x1", onnx.TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", F, [2])])
    gm = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    _, f = apply("clamp_inputs", gm, dict(feeds), frozenset({"GatherElements"}), {"min": 0, "inputs": [1]})
    assert f["x1"].tolist() == [1, 0] and np.isnan(f["x0"][2])  # only the indices
    mm = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                                             [helper.make_tensor_value_info("a", onnx.TensorProto.INT32, [1, 2])],
                                             [helper.make_tensor_value_info("y", onnx.TensorProto.INT32, [1, 1])],
                                             initializer=[onnx.numpy_helper.from_array(np.array([[1], [2]], np.int32), "b")]),
                           opset_imports=[helper.make_opsetid("", 17)])
    fm, f = apply("inputs_as_float", mm, {"a": np.array([[3, -4]], np.int32)}, frozenset({"MatMul"}))
    onnx.checker.check_model(fm, full_check=True)
    assert f["a"].dtype == np.float32 and fm.graph.output[0].type.tensor_type.elem_type == F


def double_family(fault: str) -> tuple[list, Policy]:
    """The TEST DOUBLE wrong on Sum (always, or only with 3+ inputs), and a family hypothesis over its Sum and Mean
    blaming the N-ary path, tested by chaining."""
    spec = dataclasses.replace(resolve(["testdouble"])[0], options={"faults": {"Sum": fault}})
    fam = Family("td-nary", ("testdouble",), ("Sum", "Mean"), "test double: an N-ary path", 3, test_rewrite="binary_chain")
    return [spec, *resolve(["onnxruntime", "reference"])], Policy(NoiseClasses(family_rules=(fam,)), Policy.default().tolerances)


@pytest.mark.parametrize("fault, fixed", [("run:wrong?inputs=3", True), ("run:wrong", False)])
def test_a_family_holds_a_finding_only_when_its_rewrite_makes_the_engine_right(tmp_path, fault, fixed):
    specs, policy = double_family(fault)
    m = one_node("Sum", 3, [2, 3])
    feeds = {f"x{i}": np.full((2, 3), i + 1.0, np.float32) for i in range(3)}
    key = RootKey("testdouble", "DCF", "value", ("Sum",), (), ())
    with EnginePool(specs, tmp_path / "pool") as pool:
        pool.start()
        assert judge_in_memory(pool, m, feeds, policy=policy).findings  # the repro shows a finding at all
        got = run_family_test(pool, m, feeds, "testdouble", policy, "DCF", key, None)
    assert got == {"family": "td-nary", "rewrite": {"binary_chain": None}, "fixed": fixed}, got


def test_a_repro_two_families_could_hold_joins_the_one_whose_test_fixes_it(tmp_path):
    """One lowering, two mistakes (MNN's N-ary Min/Max: broadcasting, and a NaN dropped): each hypothesis has its own
    test, tried in file order; the TEST DOUBLE's fault needs 3+ inputs and no broadcasting, so the broadcast family's
    test has nothing to take away and the N-ary one's chain fixes it."""
    spec = dataclasses.replace(resolve(["testdouble"])[0], options={"faults": {"Sum": "run:wrong?inputs=3"}})
    first = Family("td-broadcast", ("testdouble",), ("Sum",), "test double: broadcasting", 3, test_rewrite="broadcast_inputs")
    second = Family("td-nary", ("testdouble",), ("Sum",), "test double: an N-ary path", 3, test_rewrite="binary_chain")
    policy = Policy(NoiseClasses(family_rules=(first, second)), Policy.default().tolerances)
    m = one_node("Sum", 3, [2, 3])
    feeds = {f"x{i}": np.full((2, 3), i + 1.0, np.float32) for i in range(3)}
    with EnginePool([spec, *resolve(["onnxruntime", "reference"])], tmp_path / "pool") as pool:
        pool.start()
        got = run_family_test(pool, m, feeds, "testdouble", policy, "DCF", RootKey("testdouble", "DCF", "value", ("Sum",), (), ()), None)
    assert got == {"family": "td-nary", "rewrite": {"binary_chain": None}, "fixed": True}, got


@pytest.mark.parametrize("test, joins", [({"fixed": True}, True), ({"fixed": False}, False), (None, False)])
def test_the_clustering_joins_a_tested_family_only_on_its_passed_test(tmp_path, test, joins):
    """MNN's N-ary Max: keyed by the family when the triage recorded its test fixed on the repro; by its own key when
    the test failed (another defect) or never ran (no evidence)."""
    sig = "mnn|DCF|value|Max"
    d = tmp_path / "repros" / "f1"
    d.mkdir(parents=True)
    onnx.save(one_node("Max", 3, [2, 3]), str(d / "model.onnx"))
    info = {"klass": "bug", "signature": sig, "status": "DCF", "first_idx": 0, "first_model": "m", "versions": {"mnn": "3.6.1"},
            "root": RootKey("mnn", "DCF", "value", ("Max",), (), ()).to_json(), "reduction": {"nodes_after": 1}}
    if test is not None:
        info["family_test"] = {"family": "mnn-nary-eltwise", "rewrite": {"binary_chain": None}, **test}
    (d / "finding.json").write_text(json.dumps(info))
    from ofuzz.judge.signature import finding_id
    (tmp_path / "repros" / "f1").rename(tmp_path / "repros" / finding_id(sig))
    (rc,) = cluster(tmp_path, [{"signature": sig, "first_idx": 0, "first_model": "m", "count": 1}], noise=load_noise())["root_causes"]
    assert (rc["key"]["failure"] == "mnn-nary-eltwise") == joins, rc["key"]
    if joins:
        assert "ran its repro right" in rc["members"][0]["joined_by"]


def test_a_slice_over_several_axes_spelled_out_computes_the_same_function():
    """The shorthand test for Slice: one Slice per axis (negative steps and negative starts included) is the same
    function as the multi-axis Slice it replaces."""
    import onnxruntime as ort

    from ofuzz.core.prose_defaults import slices_spelled_out

    consts = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
              (("s", [0, -1, 1]), ("e", [2, -5, 4]), ("ax", [0, 2, 3]), ("st", [1, -1, 2]))]
    g = helper.make_graph([helper.make_node("Slice", ["x", "s", "e", "ax", "st"], ["y"], name="n0_Slice")], "g",
                          [helper.make_tensor_value_info("x", F, [3, 2, 6, 5])], [helper.make_tensor_value_info("y", F, None)], consts)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    out, wrote = slices_spelled_out(m)
    assert wrote == ["Slice.axes"] and len(out.graph.node) == 3 and all(len(n.input) == 5 for n in out.graph.node)
    x = {"x": np.random.default_rng(0).uniform(-1, 1, (3, 2, 6, 5)).astype(np.float32)}
    run = lambda mm: ort.InferenceSession(mm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]  # noqa: E731
    np.testing.assert_array_equal(run(out), run(m))
    one = helper.make_graph([helper.make_node("Slice", ["x", "s1", "e1"], ["y"])], "g", [helper.make_tensor_value_info("x", F, [4])],
                            [helper.make_tensor_value_info("y", F, None)],
                            [onnx.numpy_helper.from_array(np.array([1], np.int64), "s1"), onnx.numpy_helper.from_array(np.array([3], np.int64), "e1")])
    assert slices_spelled_out(helper.make_model(one))[1] == []  # one axis: nothing to spell out


def test_a_slice_stepping_backward_spelled_out_as_a_gather_computes_the_same_function():
    """The shorthand test for a backward step: the elements a negative-step Slice selects, gathered, after a Slice over
    its forward axes, are the same function (on 300 random Slices, onnxruntime and the reference alike); a start before
    the first element, where the spec's clamping and numpy's differ, is left alone."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    from ofuzz.core.shorthands import backward_steps_reversed, negative_steps_spelled_out

    rng, checked = np.random.default_rng(0), 0
    for _ in range(300):
        shape = tuple(int(d) for d in rng.integers(1, 6, size=rng.integers(1, 4)))
        k = int(rng.integers(1, len(shape) + 1))
        values = (rng.integers(-8, 8, size=k), rng.integers(-8, 8, size=k), rng.permutation(len(shape))[:k], rng.choice([-3, -1, 1, 2], size=k))
        consts = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in zip(("s", "e", "ax", "st"), values)]
        g = helper.make_graph([helper.make_node("Slice", ["x", "s", "e", "ax", "st"], ["y"], name="n0_Slice")], "g",
                              [helper.make_tensor_value_info("x", F, shape)], [helper.make_tensor_value_info("y", F, None)], consts)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        out, wrote = negative_steps_spelled_out(m, {"x": shape})
        if not wrote:
            continue
        checked += 1
        assert wrote == ["Slice.steps"] and "Gather" in {n.op_type for n in out.graph.node} and {t.name for t in out.graph.initializer}.isdisjoint({"s", "e", "st"})
        x = {"x": rng.uniform(-1, 1, shape).astype(np.float32)}
        want = ReferenceEvaluator(m).run(None, x)[0]
        np.testing.assert_array_equal(ReferenceEvaluator(out).run(None, x)[0], want)
        np.testing.assert_array_equal(ort.InferenceSession(out.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0], want)
        forward, _ = backward_steps_reversed(m, {"x": shape})  # the trigger's control: the same elements, stepping forward
        assert {n.op_type for n in forward.graph.node} == {"Slice"}
        backward = [int(a) for a, st in zip(values[2], values[3]) if st < 0]
        np.testing.assert_array_equal(ReferenceEvaluator(forward).run(None, x)[0], np.flip(want, axis=backward))
    assert checked > 50
    before = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s", [-9]), ("e", [-10]), ("ax", [0]), ("st", [-1]))]
    g = helper.make_graph([helper.make_node("Slice", ["x", "s", "e", "ax", "st"], ["y"])], "g", [helper.make_tensor_value_info("x", F, [4])],
                          [helper.make_tensor_value_info("y", F, None)], before)
    assert negative_steps_spelled_out(helper.make_model(g), {"x": (4,)})[1] == []


def test_a_resize_over_named_axes_spelled_out_over_every_axis_computes_the_same_function():
    """The shorthand test for Resize-18's `axes`: scales 1 (sizes the dimension, roi [0, 1]) on the axes it leaves out is
    the same function, for scales and sizes, in every mode (onnxruntime and the reference alike); a sizes Resize whose
    keep_aspect_ratio_policy takes its ratio over the named axes only is left alone."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    from ofuzz.core.shorthands import resize_axes_spelled_out

    rng = np.random.default_rng(0)
    cases = [({"mode": "nearest"}, [2, 3], "scales", [2.0, 3.0]), ({"mode": "linear"}, [3], "scales", [0.5]),
             ({"mode": "cubic"}, [-1, -2], "scales", [1.5, 2.0]), ({"mode": "nearest"}, [1, 3], "sizes", [5, 7]),
             ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, [2, 3], "scales+roi", [2.0, 2.0])]
    for attrs, axes, kind, values in cases:
        consts = [onnx.numpy_helper.from_array(np.array(values, np.int64 if kind == "sizes" else np.float32), "v")]
        inputs = ["x", "", "v"] if kind == "scales" else ["x", "", "", "v"] if kind == "sizes" else ["x", "roi", "v"]
        if kind == "scales+roi":
            consts.append(onnx.numpy_helper.from_array(np.array([0.1, 0.2, 0.9, 0.7], np.float32), "roi"))
        g = helper.make_graph([helper.make_node("Resize", inputs, ["y"], name="n0_Resize", axes=axes, **attrs)], "g",
                              [helper.make_tensor_value_info("x", F, [1, 2, 4, 5])], [helper.make_tensor_value_info("y", F, None)], consts)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
        out, wrote = resize_axes_spelled_out(m, {"x": (1, 2, 4, 5)})
        assert wrote == ["Resize.axes"] and not any(a.name == "axes" for a in out.graph.node[0].attribute), (attrs, axes, kind)
        x = {"x": rng.uniform(-1, 1, (1, 2, 4, 5)).astype(np.float32)}
        run = lambda mm: ort.InferenceSession(mm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]  # noqa: E731
        want = run(m)  # the reference rejects negative Resize axes ("axes don't match array"): onnxruntime judges the original
        np.testing.assert_allclose(run(out), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ReferenceEvaluator(out).run(None, x)[0], want, rtol=1e-5, atol=1e-5)
    ratio = helper.make_graph([helper.make_node("Resize", ["x", "", "", "v"], ["y"], axes=[2, 3], keep_aspect_ratio_policy="not_larger")], "g",
                              [helper.make_tensor_value_info("x", F, [1, 2, 4, 5])], [helper.make_tensor_value_info("y", F, None)],
                              [onnx.numpy_helper.from_array(np.array([8, 8], np.int64), "v")])
    assert resize_axes_spelled_out(helper.make_model(ratio, opset_imports=[helper.make_opsetid("", 19)]), {"x": (1, 2, 4, 5)})[1] == []


def test_a_family_no_rewrite_can_test_is_tested_by_reading_the_output(tmp_path):
    """Real MNN 3.6.1: every QuantizeLinear comes back in the uint8 encoding in an int8 tensor, so no rewrite makes it
    right; its family is tested by reading the output in the other 8-bit encoding. A per-tensor zero point reads right
    (the family's defect); per-channel zero points do not (hand triage 23: MNN also uses the first zero point for every
    channel, another defect, which no longer hides in the family)."""
    import os

    u8 = onnx.TensorProto.UINT8

    def quantize(zero_points: list[int]) -> onnx.ModelProto:
        axis = {"axis": 1} if len(zero_points) > 1 else {}
        n = len(zero_points)
        g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="n0_QuantizeLinear", **axis)], "g",
                              [helper.make_tensor_value_info("x", F, [1, 3, 2, 2])], [helper.make_tensor_value_info("y", u8, [1, 3, 2, 2])],
                              [onnx.numpy_helper.from_array(np.full([n] if n > 1 else [], 0.02, np.float32), "s"),
                               onnx.numpy_helper.from_array(np.array(zero_points if n > 1 else zero_points[0], np.uint8), "z")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    feeds = {"x": np.random.default_rng(0).uniform(-1, 1, (1, 3, 2, 2)).astype(np.float32)}
    key = RootKey("mnn", "DCF", "value", ("QuantizeLinear",), (), ())
    specs = resolve(["mnn", "onnxruntime", "reference"])
    with EnginePool(specs, tmp_path / "pool") as pool:
        pool.start()
        if "mnn" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("mnn is not installed (ofuzz engines --install mnn)")
        per_tensor = run_family_test(pool, quantize([100]), feeds, "mnn", Policy.default(), "DCF", key, "3.6.1")
        per_channel = run_family_test(pool, quantize([100, 20, 200]), feeds, "mnn", Policy.default(), "DCF", key, "3.6.1")
    assert per_tensor == {"family": "mnn-quantizelinear-uint8-encoding", "reading": "other_8bit_encoding", "fixed": True}, per_tensor
    assert per_channel == {"family": "mnn-quantizelinear-uint8-encoding", "reading": "other_8bit_encoding", "fixed": False}, per_channel


def test_mnns_matmul_clamp_and_abs_on_nan_are_tested_families(tmp_path):
    """Real MNN 3.6.1 (hand triages 25 and 26): its matrix-multiply kernels clamp results to ±FLT_MAX, so a Conv (and a
    GRU, whose gates are MatMuls) on infinite inputs gives ±3.4e38 where the spec's arithmetic gives ±inf or NaN: read
    with the bounds as those, the output is the expected one. Its Abs turns NaN into 0, and ReduceL1 is lowered to
    Sum(Abs): with NaN inputs as 0 both are right. A value wrong besides the clamp reads wrong: not that family."""
    import os

    from onnx import numpy_helper

    def conv(w: np.ndarray) -> onnx.ModelProto:
        g = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], name="n0_Conv")], "g", [helper.make_tensor_value_info("x", F, [1, 2, 2, 2])],
                              [helper.make_tensor_value_info("y", F, [1, 2, 2, 2])], [numpy_helper.from_array(w, "W")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    def unary(op: str, out: list[int], **attrs) -> onnx.ModelProto:
        g = helper.make_graph([helper.make_node(op, ["a"], ["y"], name=f"n0_{op}", **attrs)], "g", [helper.make_tensor_value_info("a", F, [4])],
                              [helper.make_tensor_value_info("y", F, out)])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    w = np.array([[[[1.0]], [[-1.0]]], [[[0.0]], [[2.0]]]], np.float32)
    infinite = {"x": np.array([[[[np.inf, 1.0], [2.0, -np.inf]], [[0.5, np.inf], [1.0, 2.0]]]], np.float32)}
    nan = {"a": np.array([np.nan, -1.0, 2.0, 3.0], np.float32)}
    with EnginePool(resolve(["mnn", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "mnn" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("mnn is not installed (ofuzz engines --install mnn)")
        clamped = run_family_test(pool, conv(w), infinite, "mnn", Policy.default(), "DCF", RootKey("mnn", "DCF", "nan", ("Conv",), (), ()), "3.6.1")
        absolute = run_family_test(pool, unary("Abs", [4]), nan, "mnn", Policy.default(), "DCF", RootKey("mnn", "DCF", "nan", ("Abs",), (), ()), "3.6.1")
        l1 = run_family_test(pool, unary("ReduceL1", [], keepdims=0), nan, "mnn", Policy.default(), "DCF",
                             RootKey("mnn", "DCF", "nan", ("ReduceL1",), (), ()), "3.6.1")
    assert clamped == {"family": "mnn-matmul-clamp", "reading": "non_finite_clamped", "fixed": True}, clamped
    assert absolute["family"] == "mnn-abs-nan" and absolute["fixed"] and l1["family"] == "mnn-abs-nan" and l1["fixed"], (absolute, l1)
    from ofuzz.core.readings import non_finite_clamped

    top = np.finfo(np.float32).max
    assert non_finite_clamped(np.array([top, 1.0], np.float32), np.array([np.inf, 2.0], np.float32)).tolist() == [np.inf, 1.0]  # 1 vs 2 stays wrong
    assert non_finite_clamped(np.array([-top], np.float32), np.array([np.inf], np.float32)) is None  # the other sign is no clamp


def test_the_reference_pads_order_family_is_tested_where_its_largest_pad_reaches_a_kernel(tmp_path):
    """The reference evaluator (onnx 1.23) reads MaxPool's 2-D pads as [top, bottom, left, right]. Pads [0,1,2,0] on a
    [3,2] kernel over a 1x1 input make it raise (a (0, 2) output); the family's uniform-pads test once needed the largest
    pad, 2, which is no valid pool on the 2-wide axis, so that raise stayed a root of its own (hand triage 27 #14). Every
    pad 1 is valid, the order no longer matters, and the reference is right: the family holds it."""
    m = one_node("MaxPool", 1, [1, 1, 1, 1], kernel_shape=[3, 2], pads=[0, 1, 2, 0])
    feeds = {"x0": np.array([[[[0.5]]]], np.float32)}
    key = RootKey("reference", "IF", "exception:RuntimeError", ("MaxPool",), (), ())
    with EnginePool(resolve(["reference", "onnxruntime"]), tmp_path / "pool") as pool:
        pool.start()
        raised = judge_in_memory(pool, m, feeds, policy=Policy.default()).verdict.results["reference"]
        record = run_family_test(pool, m, feeds, "reference", Policy.default(), "IF", key, "1.23.2")
    assert raised.status == "IF", raised
    assert record == {"family": "reference-maxpool-pads-order", "rewrite": {"uniform_pads": None}, "fixed": True}, record


def test_a_crash_rewrite_that_crashes_is_judged_again_in_a_fresh_process(tmp_path):
    """An engine whose heap one model damages dies on the next model it is given (MNN's negative-step Slice: the Gather
    spelling of that Slice crashed MNN's converter right after the reducer's candidates, and ran in a fresh process, so
    the crash kept a root cause of its own). The TEST DOUBLE's `poison` on Abs shows nothing and makes the next prepare
    segfault: a clean rewrite judged right after it crashes, and judged again in a fresh process it runs, whether the
    finding was a crash or a wrong value (the Slice's wrong values damage the heap too)."""
    from ofuzz.judge.judging import judge_in_memory
    from ofuzz.triage.triggers import goes_away, rewrite_verdict

    spec = dataclasses.replace(resolve(["testdouble"])[0], options={"faults": {"Abs": "run:poison"}})
    feeds = {"x0": np.ones((2, 3), np.float32)}
    with EnginePool([spec, *resolve(["onnxruntime", "reference"])], tmp_path / "pool") as pool:
        pool.start()
        got = []
        for crashed in (False, True):  # a wrong value's rewrite and a crash's rewrite alike
            judge_in_memory(pool, one_node("Abs", 1, [2, 3]), feeds, policy=Policy.default())  # damages the process, shows nothing
            got.append(goes_away(pool, one_node("Relu", 1, [2, 3]), feeds, "testdouble", Policy.default(), "DCF" if not crashed else "IF",
                                 crashed=crashed))
        judge_in_memory(pool, one_node("Abs", 1, [2, 3]), feeds, policy=Policy.default())
        first = rewrite_verdict(pool, one_node("Relu", 1, [2, 3]), feeds, "testdouble", Policy.default()).verdict.results["testdouble"].status
    assert first == "MCF" and got == [True, True], (first, got)  # judged once it crashes; judged again fresh it runs


def test_an_upstream_failures_one_culprit_is_tested_against_the_engines_families(tmp_path):
    """Real MNN 3.6.1 (hand triage 28): its Reduce transform ignores the opset-18 `axes` input and reduces every axis,
    and starts from keepdims = false. A Reshape that needs the right shape then fails, so the repro is an `upstream`
    failure of ReduceL2, which no one-node family test saw. Its culprit cut out alone is tested instead: with its
    omitted defaults written out and the axes input dropped, MNN is right, and the clustering keys the root cause by
    the family. A culprit that is right alone (Relu) is tested against no family."""
    import os

    from ofuzz.triage.cluster import _family
    from ofuzz.triage.family_test import run_culprit_family_test

    g = helper.make_graph([helper.make_node("ReduceL2", ["x", "axes"], ["r"], name="n0_ReduceL2"),
                           helper.make_node("Reshape", ["r", "shape"], ["y"], name="n1_Reshape"),
                           helper.make_node("Relu", ["x"], ["z"], name="n2_Relu")], "g",
                          [helper.make_tensor_value_info("x", F, [1, 2, 3, 4])],
                          [helper.make_tensor_value_info("y", F, [2, 4]), helper.make_tensor_value_info("z", F, [1, 2, 3, 4])],
                          [onnx.numpy_helper.from_array(np.array([2], np.int64), "axes"), onnx.numpy_helper.from_array(np.array([2, 4], np.int64), "shape")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    feeds = {"x": np.random.default_rng(0).uniform(-1, 1, (1, 2, 3, 4)).astype(np.float32)}
    policy = Policy.default()
    with EnginePool(resolve(["mnn", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "mnn" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("mnn is not installed (ofuzz engines --install mnn)")
        record = run_culprit_family_test(pool, m, feeds, 0, "mnn", "onnxruntime", policy, "3.6.1")
        right = run_culprit_family_test(pool, m, feeds, 2, "mnn", "onnxruntime", policy, "3.6.1")
    assert record is not None and record["family"] == "mnn-reduce-axes-input" and record["fixed"], record
    assert record["culprit"]["failure"] == "shape" and "ReduceL2.keepdims" in record["defaults_written"], record
    assert right is None
    joined = _family(RootKey("mnn", "IF", "upstream", ("ReduceL2",), (), ()), None, 3, policy.noise, "3.6.1", record)
    assert joined is not None and joined[0].name == "mnn-reduce-axes-input" and "cut out alone" in joined[1], joined


def test_a_conversion_failure_is_not_joined_to_a_family_by_its_culprits_reading():
    """Hand triage 33: MNN's QuantizeLinear→DequantizeLinear pair loses its output at conversion (with a uint8 zero point
    too), and joined the uint8-encoding family because its culprit QuantizeLinear, read alone, shows that encoding. A
    reading tells which wrong values the culprit computes; no value is computed at conversion, so a conversion
    failure keeps its own key. The same reading still joins a run failure, and a rewrite a conversion failure."""
    from ofuzz.triage.cluster import _family

    noise = load_noise()
    one = {"op": "QuantizeLinear", "inputs": 3, "rank": 4, "dtype": "float32", "attrs": {}}
    reading = {"family": "mnn-quantizelinear-uint8-encoding", "reading": "other_8bit_encoding", "fixed": True,
               "culprit": {"failure": "value", "one_node": one}}
    key = ("mnn", "upstream", ("QuantizeLinear",), (), ())
    assert _family(RootKey(key[0], "MCF", *key[1:]), None, 2, noise, "3.6.1", reading) is None
    joined = _family(RootKey(key[0], "IF", *key[1:]), None, 2, noise, "3.6.1", reading)
    assert joined is not None and joined[0].name == "mnn-quantizelinear-uint8-encoding", joined


def test_negative_axes_spelled_out_compute_the_same_function(tmp_path):
    """A negative axis counts from the back; written as the axis it counts (an omitted default -1 too), every operator
    computes the same function (onnxruntime on both), so an engine right on the long form mishandles the negative one.
    Real onnx2tf 1.29.24 (hand triage 28): its keep-shape OneHot without `axis` adds the default -1 twice and gives a
    wrong shape; with axis=4 written out it is right, the trigger the triage keys the root cause by."""
    import os

    import onnxruntime as ort

    from ofuzz.core.shorthands import negative_axes_spelled_out
    from ofuzz.triage.triggers import negative_axes_trigger, static_shapes

    I64 = onnx.TensorProto.INT64

    def model(node: onnx.NodeProto, x_type: int, shape: list[int], inits: list, opset: int = 19) -> onnx.ModelProto:
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", x_type, shape)], [helper.make_tensor_value_info("y", x_type if node.op_type != "OneHot" else F, None)], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)

    arr = onnx.numpy_helper.from_array
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    cases = [
        (model(helper.make_node("Softmax", ["x"], ["y"], axis=-2), F, [2, 3, 4], []), {"x": x}, ["Softmax.axis<0"]),
        (model(helper.make_node("Softmax", ["x"], ["y"]), F, [2, 3, 4], []), {"x": x}, ["Softmax.axis<0"]),  # default -1
        (model(helper.make_node("Concat", ["x", "x"], ["y"], axis=-3), F, [2, 3, 4], []), {"x": x}, ["Concat.axis<0"]),
        (model(helper.make_node("Unsqueeze", ["x", "a"], ["y"]), F, [2, 3, 4], [arr(np.array([-1, -3], np.int64), "a")]), {"x": x}, ["Unsqueeze.axes<0"]),
        (model(helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=0), F, [2, 3, 4], [arr(np.array([-1], np.int64), "a")]), {"x": x}, ["ReduceSum.axes<0"]),
        (model(helper.make_node("ReduceMax", ["x"], ["y"], axes=[-2]), F, [2, 3, 4], [], opset=17), {"x": x}, ["ReduceMax.axes<0"]),
        (model(helper.make_node("OneHot", ["x", "d", "v"], ["y"]), I64, [1, 2], [arr(np.array(5, np.int64), "d"), arr(np.array([0, 3], np.float32), "v")]),
         {"x": np.array([[1, -2]], np.int64)}, ["OneHot.axis<0"]),
        (model(helper.make_node("OneHot", ["x", "d", "v"], ["y"], axis=-3), I64, [1, 2], [arr(np.array(5, np.int64), "d"), arr(np.array([0, 3], np.float32), "v")]),
         {"x": np.array([[1, 4]], np.int64)}, ["OneHot.axis<0"]),
    ]
    run = lambda mm, ff: ort.InferenceSession(mm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, ff)[0]  # noqa: E731
    for m, feeds, label in cases:
        spelled, wrote = negative_axes_spelled_out(m, static_shapes(m, feeds))
        assert wrote == label, (m.graph.node[0].op_type, wrote)
        np.testing.assert_array_equal(run(spelled, feeds), run(m, feeds))
    positive = model(helper.make_node("Softmax", ["x"], ["y"], axis=1), F, [2, 3, 4], [])
    assert negative_axes_spelled_out(positive, static_shapes(positive, {"x": x}))[1] == []

    g = helper.make_graph([helper.make_node("OneHot", ["x", "d", "v"], ["y"], name="n0_OneHot")], "g", [helper.make_tensor_value_info("x", I64, [1, 1, 1, 2])],
                          [helper.make_tensor_value_info("y", F, [1, 1, 1, 2, 5])], [arr(np.array(5, np.int64), "d"), arr(np.array([0, 3], np.float32), "v")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    feeds = {"x": np.array([[[[1, 3]]]], np.int64)}
    with EnginePool(resolve(["tensorflow", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "tensorflow" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("tensorflow is not installed (ofuzz engines --install tensorflow)")
        wrong = judge_in_memory(pool, m, feeds, policy=Policy.default()).verdict.results["tensorflow"].status
        shown = negative_axes_trigger(pool, m, feeds, "tensorflow", Policy.default(), "DCF", shape=True)
    assert (wrong, shown) == ("DCF", ["OneHot.axis<0"]), (wrong, shown)


def test_an_attribute_the_engine_does_not_read_is_a_shown_trigger(tmp_path):
    """An attribute the engine never reads: set to each value the spec allows, its output stays the same while the
    expected one moves, and with one value it is right. Real onnx2tf 1.29.24 (hand triage 28 #21): its Resize.py never
    reads nearest_mode, so a nearest Resize with `floor` and one with the default round_prefer_floor were two root
    causes; both now key as "Resize.nearest_mode ignored". onnxruntime reads the attribute: no such trigger for it, and
    none where the attribute does not matter on the input (scale 1: every mode picks the same pixels). At opset 19
    onnx2tf ignores coordinate_transformation_mode too (Resize.py reads it only up to opset 17) and a 1x2 image doubled
    keeps its output under another mode it does read: two attributes look ignored, the input cannot tell which of them
    the engine got wrong, so no trigger."""
    import os

    from ofuzz.core.attribute_values import varied_attributes
    from ofuzz.triage.triggers import ignored_attribute_trigger

    def resize(scales: list[float], opset: int = 17, **attrs) -> onnx.ModelProto:
        g = helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], name="n0_Resize", mode="nearest", **attrs)], "g",
                              [helper.make_tensor_value_info("x", F, [1, 1, 2, 3])], [helper.make_tensor_value_info("y", F, [1, 1, int(2 * scales[2]), int(3 * scales[3])])],
                              [onnx.numpy_helper.from_array(np.array(scales, np.float32), "s")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)

    feeds = {"x": np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)}
    floor, default, unit = resize([1, 1, 3, 2.5], nearest_mode="floor"), resize([1, 1, 3, 2.5]), resize([1, 1, 1, 1], nearest_mode="floor")
    small = helper.make_model(helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest", nearest_mode="floor")], "g",
                                                [helper.make_tensor_value_info("x", F, [1, 1, 1, 2])], [helper.make_tensor_value_info("y", F, [1, 1, 3, 4])],
                                                [onnx.numpy_helper.from_array(np.array([1, 1, 3, 2], np.float32), "s")]),
                              opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    assert [a for a, _, _ in varied_attributes(default.graph.node[0], 17)] == ["mode", "coordinate_transformation_mode", "nearest_mode", "exclude_outside"]
    assert "half_pixel_symmetric" not in varied_attributes(default.graph.node[0], 17)[1][2]  # a value of opset 19
    with EnginePool(resolve(["tensorflow", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "tensorflow" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("tensorflow is not installed (ofuzz engines --install tensorflow)")
        wrong = [judge_in_memory(pool, m, feeds, policy=Policy.default()).verdict.results["tensorflow"].status for m in (floor, default)]
        shown = [ignored_attribute_trigger(pool, m, feeds, "tensorflow", Policy.default()) for m in (floor, default)]
        reads = ignored_attribute_trigger(pool, floor, feeds, "onnxruntime", Policy.default())
        moot = ignored_attribute_trigger(pool, unit, feeds, "tensorflow", Policy.default())
        ambiguous = [ignored_attribute_trigger(pool, small, {"x": np.array([[[[1, 2]]]], np.float32)}, "tensorflow", Policy.default()),
                     ignored_attribute_trigger(pool, resize([1, 1, 3, 2.5], opset=19), feeds, "tensorflow", Policy.default())]
    assert wrong == ["DCF", "DCF"], wrong
    assert [s[0] for s in shown] == [["Resize.nearest_mode"], ["Resize.nearest_mode"]], shown
    assert shown[0][1]["given"] == "floor" and shown[1][1]["given"] == "round_prefer_floor" and shown[0][1]["right_as_if"] in ("round_prefer_ceil", "ceil")
    assert reads == ([], {}) and moot == ([], {}) and ambiguous == [([], {}), ([], {})], (reads, moot, ambiguous)


def test_same_lower_spelled_out_joins_conv_and_conv_transpose_in_one_mnn_family(tmp_path):
    """auto_pad SAME_* written as the explicit pads it stands for computes the same function, ConvTranspose included
    (its pads follow from an output of in * stride; onnxruntime and the reference on both forms). Real MNN 3.6.1 (hand
    triage 28 #5): its one convolution transform reads SAME_LOWER as SAME_UPPER, so a Conv and a ConvTranspose with
    SAME_LOWER were two shown-trigger roots; the family's test (the pads spelled out) makes MNN right on both, and the
    clustering keys both by the family. MNN gets SAME_UPPER right: the split it uses for both."""
    import os

    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    from ofuzz.core.onnx_guard import static_shapes
    from ofuzz.core.prose_defaults import auto_pad_written_out
    from ofuzz.triage.cluster import _family
    from ofuzz.triage.repro_facts import facts_of
    from ofuzz.triage.rootcause import SPELLED_OUT

    rng = np.random.default_rng(0)

    def conv(op: str, mode: str, h: int, w: int, **attrs) -> onnx.ModelProto:
        weight = onnx.numpy_helper.from_array(rng.uniform(-1, 1, (3, 2, 3, 3) if op == "ConvTranspose" else (2, 3, 3, 3)).astype(np.float32), "w")
        g = helper.make_graph([helper.make_node(op, ["x", "w"], ["y"], name=f"n0_{op}", auto_pad=mode, **attrs)], "g",
                              [helper.make_tensor_value_info("x", F, [1, 3, h, w])], [helper.make_tensor_value_info("y", F, None)], [weight])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)

    for mode in ("SAME_UPPER", "SAME_LOWER"):
        for attrs in ({"strides": [2, 2]}, {"strides": [2, 3], "dilations": [1, 2], "output_padding": [1, 0]}):
            m = conv("ConvTranspose", mode, 3, 4, **attrs)
            feeds = {"x": rng.uniform(-1, 1, (1, 3, 3, 4)).astype(np.float32)}
            spelled, wrote = auto_pad_written_out(m, static_shapes(m, feeds))
            assert wrote == [f"ConvTranspose.auto_pad={mode}"], wrote
            for run in (lambda mm: ort.InferenceSession(mm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0],
                        lambda mm: ReferenceEvaluator(mm).run(None, feeds)[0]):
                np.testing.assert_allclose(run(spelled), run(m), atol=1e-5)
    assert auto_pad_written_out(conv("ConvTranspose", "SAME_LOWER", 3, 4, strides=[4, 4]), {"x": (1, 3, 3, 4), "w": (3, 2, 3, 3)})[1] == []  # kernel < stride

    policy = Policy.default()
    cases = {"ConvTranspose": conv("ConvTranspose", "SAME_LOWER", 1, 2, strides=[2, 2]), "Conv": conv("Conv", "SAME_LOWER", 4, 5, strides=[2, 2]),
             "upper": conv("Conv", "SAME_UPPER", 4, 5, strides=[2, 2])}
    with EnginePool(resolve(["mnn", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "mnn" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("mnn is not installed (ofuzz engines --install mnn)")
        got = {}
        for name, m in cases.items():
            feeds = {"x": rng.uniform(-1, 1, tuple(d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim)).astype(np.float32)}
            status = judge_in_memory(pool, m, feeds, policy=policy).verdict.results["mnn"].status
            op = m.graph.node[0].op_type
            key = RootKey("mnn", "DCF", "value", (), (f"{op}.auto_pad spelled out",), (), SPELLED_OUT)
            got[name] = (status, run_family_test(pool, m, feeds, "mnn", policy, "DCF", key, "3.6.1"), key, m)
    for name in ("ConvTranspose", "Conv"):
        status, record, key, m = got[name]
        assert status == "DCF" and record is not None and record["family"] == "mnn-conv-same-lower" and record["fixed"], (name, status, record)
        joined = _family(key, facts_of(m), 1, policy.noise, "3.6.1", record)
        assert joined is not None and joined[0].name == "mnn-conv-same-lower", joined
    assert got["upper"][0] == "DCP", got["upper"]  # SAME_UPPER is the split MNN uses for both
    # a repro the reducer left with a consumer (seed 57: the Conv kept an Add): the families are asked of the node the
    # shown trigger names
    two = cases["Conv"]
    two.graph.node.append(helper.make_node("Add", ["y", "y"], ["z"], name="n1_Add"))
    two.graph.output[0].name = "z"
    facts = facts_of(two, None, {"Conv"})
    assert facts.one_node is None and facts.trigger_node is not None and facts.trigger_node.attrs["auto_pad"] == "SAME_LOWER"
    with EnginePool(resolve(["mnn", "onnxruntime", "reference"]), tmp_path / "pool2") as pool:
        pool.start()
        feeds = {"x": rng.uniform(-1, 1, (1, 3, 4, 5)).astype(np.float32)}
        key = RootKey("mnn", "DCF", "value", (), ("Conv.auto_pad spelled out",), (), SPELLED_OUT)
        record = run_family_test(pool, two, feeds, "mnn", policy, "DCF", key, "3.6.1", facts.trigger_node)
    assert record is not None and record["fixed"], record
    joined = _family(key, facts, 2, policy.noise, "3.6.1", record)
    assert joined is not None and joined[0].name == "mnn-conv-same-lower", joined


def test_a_family_whose_defaults_alone_make_the_engine_right_does_not_hold(tmp_path):
    """The control of a family test that writes the omitted defaults out first: when they alone make the engine right,
    the omitted default is the defect, not the family's. Real MNN 3.6.1 (hand triage 29): a ReduceLogSum over an input of
    ones only ([1,1,1,1], axes [-4,-3] as an input, keepdims omitted) is wrong because MNN's Reduce transform starts from
    keepdims = false (OnnxReduceL2.cpp:27); the axes it ignores cannot show on axes of size 1. It had joined the
    axes-input family, whose test writes keepdims out before dropping the axes. With axes over a size-2 axis, the
    defaults alone leave MNN wrong (it still reduces every axis) and the family holds."""
    import os

    from ofuzz.triage.rootcause import SCHEMA_DEFAULT

    def reduce(shape: list[int], axes: list[int]) -> onnx.ModelProto:
        g = helper.make_graph([helper.make_node("ReduceLogSum", ["x", "axes"], ["y"], name="n0_ReduceLogSum")], "g",
                              [helper.make_tensor_value_info("x", F, shape)], [helper.make_tensor_value_info("y", F, None)],
                              [onnx.numpy_helper.from_array(np.array(axes, np.int64), "axes")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)

    policy = Policy.default()
    ones, axis = reduce([1, 1, 1, 1], [-4, -3]), reduce([1, 2, 3, 1], [1])
    with EnginePool(resolve(["mnn", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "mnn" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("mnn is not installed (ofuzz engines --install mnn)")
        key = RootKey("mnn", "DCF", "shape", (), ("keepdims omitted",), (), SCHEMA_DEFAULT)
        defaults_only = run_family_test(pool, ones, {"x": np.full((1, 1, 1, 1), 2.0, np.float32)}, "mnn", policy, "DCF", key, "3.6.1")
        axes_too = run_family_test(pool, axis, {"x": np.random.default_rng(0).uniform(1, 2, (1, 2, 3, 1)).astype(np.float32)}, "mnn", policy, "DCF",
                                   RootKey("mnn", "DCF", "shape", ("ReduceLogSum",), (), ()), "3.6.1")
    assert defaults_only is not None and not defaults_only["fixed"] and "alone" in defaults_only["note"], defaults_only
    assert axes_too is not None and axes_too["family"] == "mnn-reduce-axes-input" and axes_too["fixed"], axes_too


def test_mnn_cast_to_bool_family_holds_cast_and_castlike_whatever_the_magnitude(tmp_path):
    """Real MNN 3.6.1 maps ONNX BOOL to INT32 for Cast and CastLike alike (onnxOpConverter.cpp:213): Cast(0.2154) gives 0
    (False), CastLike(5801.9) gives 5801, where the spec gives True. The family's test (inputs made 0 or 1, where a cast
    to int32 is a cast to bool) makes MNN right on both; the test it had before (rounding away from zero) left 5801.9
    wrong, and hand triage 29 found that CastLike as a root of its own beside the family."""
    import os

    x = np.array([[0.2154, 5801.9, -0.5, 0.0, -3.7, 1e-3]], np.float32)

    def model(op: str) -> onnx.ModelProto:
        if op == "Cast":
            node, inits = helper.make_node("Cast", ["x"], ["y"], name="n0_Cast", to=onnx.TensorProto.BOOL), []
        else:
            node, inits = helper.make_node("CastLike", ["x", "like"], ["y"], name="n0_CastLike"), [onnx.numpy_helper.from_array(np.array([True]), "like")]
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [1, 6])], [helper.make_tensor_value_info("y", onnx.TensorProto.BOOL, [1, 6])], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)

    policy = Policy.default()
    with EnginePool(resolve(["mnn", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "mnn" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("mnn is not installed (ofuzz engines --install mnn)")
        got = {}
        for op in ("Cast", "CastLike"):
            status = judge_in_memory(pool, model(op), {"x": x}, policy=policy).verdict.results["mnn"].status
            got[op] = (status, run_family_test(pool, model(op), {"x": x}, "mnn", policy, "DCF", RootKey("mnn", "DCF", "value", (op,), (), ()), "3.6.1"))
    for op, (status, record) in got.items():
        assert status == "DCF" and record is not None and record["family"] == "mnn-cast-to-bool" and record["fixed"], (op, status, record)


def test_a_recurrent_direction_the_engine_does_not_read_is_a_shown_trigger(tmp_path):
    """Real MNN 3.6.1 (hand triage 29): its converter only asks whether an RNN's direction is "bidirectional", so
    direction=reverse runs forward; the one-way directions swap without changing any shape, so they are varied like any
    mode, and the repro keys as "RNN.direction ignored" (it was keyed by `direction=reverse` and hidden_size).
    onnxruntime reads it: no trigger."""
    import os

    from ofuzz.triage.triggers import ignored_attribute_trigger

    rng = np.random.default_rng(3)
    inits = [onnx.numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)
             for name, shape in (("W", [1, 4, 3]), ("R", [1, 4, 4]), ("B", [1, 8]))]
    node = helper.make_node("RNN", ["x", "W", "R", "B"], ["y"], name="n0_RNN", hidden_size=4, direction="reverse")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [5, 1, 3])], [helper.make_tensor_value_info("y", F, [5, 1, 1, 4])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"x": rng.uniform(-1, 1, (5, 1, 3)).astype(np.float32)}
    with EnginePool(resolve(["mnn", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "mnn" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("MNN is not installed (ofuzz engines --install mnn)")
        assert judge_in_memory(pool, model, feeds, policy=Policy.default()).verdict.results["mnn"].status == "DCF"
        shown = ignored_attribute_trigger(pool, model, feeds, "mnn", Policy.default())
        reads = ignored_attribute_trigger(pool, model, feeds, "onnxruntime", Policy.default())
    assert shown[0] == ["RNN.direction"] and shown[1]["given"] == "reverse" and shown[1]["right_as_if"] == "forward", shown
    assert reads == ([], {})


def test_mnns_softmax_runs_through_its_exp_clamp(tmp_path):
    """Real MNN 3.6.1 (hand triage 31 #11): _AVX_MNNSoftmax sends each full pack of 8 through MNNExp, whose clamp reads
    NaN as -87, so a row holding +inf (inf - inf = NaN) comes out finite instead of NaN; with the inputs inside the
    clamp the engine is right, and the exp-kernel family holds it."""
    import os

    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(1, 16)
    x[0, 0] = np.inf
    m = one_node("Softmax", 1, [1, 16])
    key = RootKey("mnn", "DCF", "nan", ("Softmax",), (), ("inf",))
    with EnginePool(resolve(["mnn", "onnxruntime", "reference"]), tmp_path / "pool") as pool:
        pool.start()
        if "mnn" in pool.unavailable and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("mnn is not installed (ofuzz engines --install mnn)")
        feeds = {m.graph.input[0].name: x}
        assert judge_in_memory(pool, m, feeds, policy=Policy.default()).verdict.results["mnn"].status == "DCF"
        got = run_family_test(pool, m, feeds, "mnn", Policy.default(), "DCF", key, "3.6.1")
    assert got == {"family": "mnn-exp-kernel", "rewrite": {"clamp_inputs": {"min": -80, "max": 80}}, "fixed": True}, got


def test_dilations_are_varied_to_their_prose_default_of_ones_per_node():
    """`dilations` has no schema default but a prose one, 1 along each spatial axis: its one alternative is ONES, written
    per node at that node's own length (a 1-D and a 2-D pool in one model each get theirs), and a node without
    dilations, or with all ones, is not varied."""
    from ofuzz.core.attribute_values import ONES, varied_attributes, with_value

    pool2d = helper.make_node("AveragePool", ["x"], ["y"], name="a", kernel_shape=[2, 2], dilations=[3, 1])
    pool1d = helper.make_node("MaxPool", ["u"], ["v"], name="b", kernel_shape=[2], dilations=[2])
    plain = helper.make_node("AveragePool", ["x"], ["z"], name="c", kernel_shape=[2, 2], dilations=[1, 1])
    assert ("dilations", [3, 1], (ONES,)) in varied_attributes(pool2d, 19)
    assert not [v for v in varied_attributes(plain, 19) if v[0] == "dilations"]
    g = helper.make_graph([pool2d, pool1d], "g", [helper.make_tensor_value_info("x", F, [1, 1, 6, 6]), helper.make_tensor_value_info("u", F, [1, 1, 6])],
                          [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("v", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    for op, length in (("AveragePool", 2), ("MaxPool", 1)):
        node = next(n for n in with_value(m, op, "dilations", ONES).graph.node if n.op_type == op)
        assert [list(helper.get_attribute_value(a)) for a in node.attribute if a.name == "dilations"] == [[1] * length]


def test_onnx2tf_ignoring_pool_dilations_is_one_shown_trigger_in_both_modes(tmp_path):
    """Real onnx2tf 1.29.24 computes a dilated AveragePool as an undilated one, in both modes (hand triage 31: a wrong
    shape in keep-shape mode, `MCF upstream AveragePool` in the default mode where the consumer fails on that shape;
    two root causes of one defect). Its output with dilations is bit for bit its output with dilations at their
    default (handed back channel-last where the declared shape cannot be restored), while the expected one moves: the
    keep-shape repro and the default mode's culprit, cut out alone, both show `AveragePool.dilations ignored`.
    onnxruntime reads dilations: no trigger."""
    import os

    from ofuzz.triage.triggers import culprit_ignored_attribute, ignored_attribute_trigger

    def model(nodes: list, out: str, shape: list[int], elem: int = F) -> onnx.ModelProto:
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, shape)], [helper.make_tensor_value_info(out, elem, None)])
        return onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9))

    alone = model([helper.make_node("AveragePool", ["x"], ["y"], name="n0_AveragePool", kernel_shape=[2, 2], dilations=[3, 3])], "y", [1, 1, 5, 4])
    pool = helper.make_node("AveragePool", ["x"], ["p"], name="n0_AveragePool", kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1],
                            count_include_pad=1)
    consumed = model([pool, helper.make_node("GreaterOrEqual", ["x", "p"], ["z"], name="n1_GreaterOrEqual")], "z", [1, 1, 1, 2], onnx.TensorProto.BOOL)
    rng = np.random.default_rng(0)
    policy = Policy.default()
    with EnginePool(resolve(["tensorflow", "tensorflow-nhwc", "onnxruntime", "reference"]), tmp_path / "pool") as engines:
        engines.start()
        if {"tensorflow", "tensorflow-nhwc"} & set(engines.unavailable) and not os.environ.get("OFUZZ_REQUIRE_ENGINES"):
            pytest.skip("onnx2tf is not installed (ofuzz engines --install tensorflow)")
        feeds = {"x": rng.uniform(0.5, 1, (1, 1, 5, 4)).astype(np.float32)}
        keep_shape = ignored_attribute_trigger(engines, alone, feeds, "tensorflow", policy)
        reads = ignored_attribute_trigger(engines, alone, feeds, "onnxruntime", policy)
        default_mode = culprit_ignored_attribute(engines, consumed, {"x": rng.uniform(0.5, 1, (1, 1, 1, 2)).astype(np.float32)}, 0,
                                                 "tensorflow-nhwc", "onnxruntime", policy)
    assert keep_shape[0] == ["AveragePool.dilations"] and keep_shape[1]["right_as_if"] == "ones", keep_shape
    assert default_mode is not None and default_mode["ignored"] == ["AveragePool.dilations"], default_mode
    assert reads == ([], {})


def test_a_family_condition_on_an_attribute_binds_only_the_operators_that_have_it():
    """MNN's average-pool divisor family holds AveragePool with count_include_pad=1 and LpPool, which has no such
    attribute (MNN lowers it counting the padding). Hand triage 32: an AveragePool with SAME_LOWER and
    count_include_pad=0 joined it, because symmetric pads also take its own defect away (SAME_LOWER read as
    SAME_UPPER); it is not the divisor's."""
    fam = next(f for f in load_noise().family_rules if f.name == "mnn-avgpool-divisor")
    assert fam.holds("mnn", "LpPool", 1, "value", 4, {"kernel_shape": [2, 2], "pads": [0, 0, 1, 1]}, "float32", "3.6.1")
    assert fam.holds("mnn", "AveragePool", 1, "value", 4, {"count_include_pad": 1, "pads": [0, 0, 1, 1]}, "float32", "3.6.1")
    assert not fam.holds("mnn", "AveragePool", 1, "value", 4, {"auto_pad": "SAME_LOWER"}, "float32", "3.6.1")
