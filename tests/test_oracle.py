from __future__ import annotations

import numpy as np
import pytest

from ofuzz.exec.engines.client import Outcome
from ofuzz.judge.oracle import DCF, DCP, IF, MCF, compare_tensor, judge_outcomes, triangulate
from ofuzz.judge.signature import failing_op, normalise, signature


def test_identical_and_tiny_errors_pass():
    a = np.random.default_rng(0).uniform(-1, 1, (4, 5)).astype(np.float32)
    assert compare_tensor(a, a).ok
    assert compare_tensor(a * (1 + 1e-5), a).ok


def test_relative_error_rule_counts_elements():
    want = np.ones(10_000, np.float32)
    got = want.copy()
    got[:5] = 1.01  # 0.05% of elements off by 1%: under the 0.1% budget
    assert compare_tensor(got, want).ok
    got[:20] = 1.01  # 0.2% of elements: over
    c = compare_tensor(got, want)
    assert not c.ok and c.category == "value" and c.bad_fraction == pytest.approx(0.002)


def test_small_tensor_fails_on_any_bad_element():
    want = np.ones(10, np.float32)
    got = want.copy()
    got[3] = 1.5
    assert not compare_tensor(got, want).ok


def test_floor_keeps_near_zero_noise_quiet_but_catches_real_errors():
    want = np.zeros(100, np.float32)
    assert compare_tensor(want + 1e-6, want).ok  # float32 noise around zero
    assert not compare_tensor(want + 1e-3, want).ok  # a real error near zero


@pytest.mark.parametrize("got, want, cat", [
    (np.array([np.nan, 1.0]), np.array([0.5, 1.0]), "nan"),
    (np.array([0.5, 1.0]), np.array([np.nan, 1.0]), "nan"),
    (np.array([np.inf, 1.0]), np.array([-np.inf, 1.0]), "inf"),
    (np.array([np.inf, 1.0]), np.array([1e30, 1.0]), "inf"),
    (np.array([np.nan, 1.0]), np.array([np.inf, 1.0]), "nan"),
])
def test_non_finite_values_compared_explicitly(got, want, cat):
    big_want = np.concatenate([want, np.ones(5000)])
    big_got = np.concatenate([got, np.ones(5000)])
    c = compare_tensor(big_got, big_want)  # one element in 5000 still fails
    assert not c.ok and c.category == cat


def test_nan_category_means_only_nan_handling_differs():
    """`nan` is kept for outputs whose finite elements agree (the NaN-policy class relies on it); wrong numbers
    beside a NaN mismatch are `value`, the worse defect."""
    want = np.array([np.nan, 1.0, 2.0, 3.0])
    assert compare_tensor(np.array([0.0, 1.0, 2.0, 3.0]), want).category == "nan"
    c = compare_tensor(np.array([0.0, 1.0, 2.5, 3.0]), want)
    assert c.category == "value" and "1 NaN" in c.detail


def test_matching_non_finite_values_agree():
    a = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert compare_tensor(a, a.copy()).ok


def test_shape_and_dtype_mismatch_are_their_own_kinds():
    a = np.zeros((1, 3, 4, 5), np.float32)
    c = compare_tensor(a.transpose(0, 2, 3, 1), a)
    assert c.category == "shape" and "permuted" in c.detail
    assert compare_tensor(a.astype(np.int64), a).category == "dtype"
    assert compare_tensor(np.array([1, 2], np.int32), np.array([1, 2], np.int64)).ok  # widths do not matter
    assert compare_tensor(np.array([True, False]), np.array([1, 0], np.int32)).ok


def _outs(v: float) -> dict:
    return {"y": np.full(4, v, np.float32)}


def test_triangulation_majority_and_tie_break():
    maj, split = triangulate({"a": _outs(1), "b": _outs(1), "c": _outs(2)}, ["y"])
    assert maj == ["a", "b"] and not split
    # the reference alone against one other engine breaks no tie: it is one implementation among others
    maj, split = triangulate({"onnxruntime": _outs(1), "reference": _outs(2)}, ["y"])
    assert maj == [] and split
    maj, split = triangulate({"onnxruntime": _outs(1), "reference": _outs(2), "mnn": _outs(3)}, ["y"])
    assert maj == [] and split
    maj, split = triangulate({"a": _outs(1), "b": _outs(2), "c": _outs(3)}, ["y"])
    assert split and maj == []
    maj, split = triangulate({"a": _outs(1), "b": _outs(1), "c": _outs(2), "reference": _outs(2)}, ["y"])
    assert maj == ["c", "reference"] and not split


def test_judge_statuses():
    ok = Outcome("prepare", "ok")
    out = {
        "onnxruntime": (ok, Outcome("run", "ok", outputs=_outs(1))),
        "reference": (ok, Outcome("run", "ok", outputs=_outs(1))),
        "mnn": (ok, Outcome("run", "ok", outputs=_outs(3))),
        "tensorflow": (Outcome("prepare", "exception", etype="ValueError", message="bad"), None),
        "tflite": (ok, Outcome("run", "crash", signal="SIGSEGV")),
    }
    v = judge_outcomes(out, ["y"])
    st = {k: r.status for k, r in v.results.items()}
    assert st == {"onnxruntime": DCP, "reference": DCP, "mnn": DCF, "tensorflow": MCF, "tflite": IF}
    assert v.results["mnn"].blamed and v.expected_from == "reference"


def test_signature_normalises_addresses_paths_numbers_and_names():
    a = normalise("Error at 0x7ffe12 in /tmp/abc/x.onnx node n12_Conv: shape 3 vs 5")
    b = normalise("Error at 0x1234ab in /tmp/zzz/y.onnx node n7_Conv: shape 8 vs 1")
    assert a == b and "<Conv>" in a
    assert failing_op("while running MaxPool node. Name:'n3_MaxPool'") == "MaxPool"
    assert failing_op("These Op Not Support: ONNX::IsNaN") == "IsNaN"
    o1 = Outcome("prepare", "exception", etype="E", message="fail in n3_Tile at 0xdead")
    o2 = Outcome("prepare", "exception", etype="E", message="fail in n9_Tile at 0xbeef")
    assert signature("mnn", MCF, o1) == signature("mnn", MCF, o2)
    assert signature("mnn", DCF, None, {"op": "Conv"}, "value") != signature("mnn", DCF, None, {"op": "Add"}, "value")


def test_engine_variants_vote_as_one_family():
    from ofuzz.exec.engines.registry import builtin_engines

    fams = {n: s.family_name for n, s in builtin_engines().items()}  # as the engine.yaml files declare them
    assert fams["mnn-arm:n1"] == fams["mnn-arm:a53"] == fams["mnn"] and fams["onnxruntime-noopt"] == fams["onnxruntime"]
    # three MNN builds agreeing on a wrong value must not outvote onnxruntime + reference
    outs = {"onnxruntime": _outs(1), "reference": _outs(1), "mnn": _outs(2), "mnn-arm:n1": _outs(2), "mnn-arm:a53": _outs(2)}
    maj, split = triangulate(outs, ["y"], fams)
    assert maj == ["onnxruntime", "reference"] and not split
    # without the declared families the three builds would be three votes
    assert triangulate(outs, ["y"])[0] == ["mnn", "mnn-arm:a53", "mnn-arm:n1"]
    # an ARM-only divergence: x86 MNN sides with onnxruntime
    maj, split = triangulate({"onnxruntime": _outs(1), "mnn": _outs(1), "mnn-arm:n1": _outs(3), "mnn-arm:a53": _outs(3)}, ["y"], fams)
    assert maj == ["mnn", "onnxruntime"] and not split
    # only two independent implementations and no reference: nobody can be blamed
    maj, split = triangulate({"onnxruntime": _outs(1), "mnn": _outs(2), "mnn-arm:n1": _outs(2)}, ["y"], fams)
    assert split
    # TensorFlow and TFLite run one onnx2tf conversion: agreeing on its wrong MaxPool they must not outvote onnxruntime
    # (the conformance sweep's test_maxpool_2d_same_lower, the reference excluded by a reference gap)
    assert fams["tflite"] == fams["tensorflow"] == fams["tensorflow-nhwc"]
    maj, split = triangulate({"onnxruntime": _outs(1), "tensorflow": _outs(2), "tflite": _outs(2)}, ["y"], fams)
    assert split and maj == []
    # a TFLite kernel's own wrong value is still outvoted by TensorFlow, onnxruntime and the reference
    maj, split = triangulate({"onnxruntime": _outs(1), "reference": _outs(1), "tensorflow": _outs(1), "tflite": _outs(2)}, ["y"], fams)
    assert maj == ["onnxruntime", "reference", "tensorflow"] and not split


def test_reference_breaks_a_tie_only_between_cliques_of_two_families():
    # two against two: the clique holding the reference wins
    maj, split = triangulate({"onnxruntime": _outs(1), "reference": _outs(1), "mnn": _outs(2), "tensorflow": _outs(2)}, ["y"])
    assert maj == ["onnxruntime", "reference"] and not split
    # reference alone vs a pair and a single: nobody has a majority, the reference cannot help
    maj, split = triangulate({"onnxruntime": _outs(1), "reference": _outs(3), "mnn": _outs(2), "tensorflow": _outs(2)}, ["y"])
    assert split


def test_an_output_contradicting_shape_inference_never_becomes_expected():
    ok = Outcome("prepare", "ok")
    right = {"y": np.ones((1, 1, 2, 1), np.float32)}
    wrong = {"y": np.ones((1, 1, 1, 1), np.float32)}
    out = {"reference": (ok, Outcome("run", "ok", outputs=wrong)), "onnxruntime": (ok, Outcome("run", "ok", outputs=right))}
    v = judge_outcomes(out, ["y"], declared={"y": (1, 1, 2, 1)})
    assert v.expected_from == "onnxruntime" and v.results["reference"].blamed and v.results["reference"].status == DCF
    assert v.results["reference"].versus.category == "shape" and not v.results["onnxruntime"].blamed
    # nobody matches the declaration: the declaration is suspect, the engines are judged by vote alone
    v = judge_outcomes(out, ["y"], declared={"y": (3, 3)})
    assert v.split


def test_an_excluded_reference_neither_votes_nor_is_blamed():
    ok = Outcome("prepare", "ok")
    out = {"reference": (ok, Outcome("run", "ok", outputs=_outs(5))), "onnxruntime": (ok, Outcome("run", "ok", outputs=_outs(1))),
           "mnn": (ok, Outcome("run", "ok", outputs=_outs(1)))}
    v = judge_outcomes(out, ["y"], excluded={"reference": "LpNormalization p=1 sums x, not |x|"})
    assert v.majority == ["mnn", "onnxruntime"] and not v.results["reference"].blamed
    assert v.results["reference"].status == DCF and v.excluded


def test_shape_inference_does_not_outrank_two_engine_families_that_agree_against_it():
    # seen: ConvTranspose SAME_UPPER stride 3 on a 1x1 input: the spec says 3x3, the reference and MNN give 3x3,
    # onnx shape inference and onnxruntime 2x2 — inference must not turn onnxruntime into the majority
    ok = Outcome("prepare", "ok")
    three = {"y": np.ones((1, 1, 3, 3), np.float32)}
    two = {"y": np.ones((1, 1, 2, 2), np.float32)}
    out = {"reference": (ok, Outcome("run", "ok", outputs=three)), "mnn": (ok, Outcome("run", "ok", outputs=three)),
           "onnxruntime": (ok, Outcome("run", "ok", outputs=two))}
    v = judge_outcomes(out, ["y"], declared={"y": (1, 1, 2, 2)})
    assert v.majority == ["mnn", "reference"] and v.results["onnxruntime"].blamed


def test_a_clean_refusal_needs_a_witness_that_the_model_runs():
    ok = Outcome("prepare", "ok")
    bad = lambda: (ok, Outcome("run", "exception", etype="ValueError", message="index out of bounds"))  # noqa: E731
    # every engine refuses: the model is what is wrong, nobody is blamed
    v = judge_outcomes({"onnxruntime": bad(), "reference": bad(), "tensorflow": (Outcome("prepare", "exception", etype="ValueError"), None)}, ["y"])
    assert not any(r.blamed for r in v.results.values())
    # one engine runs it and two families refuse: still no witness strong enough
    v = judge_outcomes({"onnxruntime": (ok, Outcome("run", "ok", outputs=_outs(1))), "reference": bad(), "mnn": bad()}, ["y"])
    assert not v.results["reference"].blamed and not v.results["mnn"].blamed
    # two families run it: the refusing engine is blamed; a crash is blamed whatever the others did
    v = judge_outcomes({"onnxruntime": (ok, Outcome("run", "ok", outputs=_outs(1))), "reference": (ok, Outcome("run", "ok", outputs=_outs(1))),
               "mnn": bad()}, ["y"])
    assert v.results["mnn"].blamed
    v = judge_outcomes({"onnxruntime": bad(), "mnn": (ok, Outcome("run", "crash", signal="SIGSEGV"))}, ["y"])
    assert v.results["mnn"].blamed and not v.results["onnxruntime"].blamed
    # MNN's converter crashing in its child process comes back as an exception of type ConverterCrash: still a crash,
    # blamed beside onnx2tf's refusal when one family runs the model (seed 76: the blame flipped with the signal)
    converter_crash = (Outcome("prepare", "exception", etype="ConverterCrash", message="MNN converter killed by SIGSEGV"), None)
    v = judge_outcomes({"onnxruntime": (ok, Outcome("run", "ok", outputs=_outs(1))), "mnn": converter_crash,
                        "tensorflow": (Outcome("prepare", "exception", etype="TypeError"), None)}, ["y"])
    assert v.results["mnn"].blamed and v.results["tensorflow"].blamed


def test_expected_outputs_come_from_onnxruntime_before_another_majority_member():
    """MNN's uninitialised ConstantOfShape gave 1e-14 where onnxruntime gave 0: within tolerance, so both are the
    majority, and the alphabetically first (mnn) became the repro's expected output (hand triage 7)."""
    import numpy as np

    from ofuzz.exec.engines.client import Outcome
    from ofuzz.judge.oracle import judge_outcomes

    ok = lambda y: (Outcome("prepare", "ok"), Outcome("run", "ok", outputs={"y": np.array(y, np.float32)}))  # noqa: E731
    v = judge_outcomes({"mnn": ok([1e-14, 1.0]), "onnxruntime": ok([0.0, 1.0]), "tensorflow": ok([5.0, 1.0])}, ["y"])
    assert sorted(v.majority) == ["mnn", "onnxruntime"] and v.expected_from == "onnxruntime", (v.majority, v.expected_from)
