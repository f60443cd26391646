"""Operator-level coverage, including the paper's worked example (Table II) exactly."""
from __future__ import annotations

import pytest

from ofuzz.gen.coverage import Coverage, OpRecord
from ofuzz.gen.generate import GenerateOptions, generate_one

D012 = frozenset({0, 1, 2})
TABLE_I = {"Conv2d": (frozenset({1}), D012), "Relu": (frozenset({1}), D012), "Add": (frozenset({2}), D012)}

# NHWC shapes; conv v1: 3→16 channels, v2: 3→1 channel (so Add can broadcast o2 onto o1)
V1, V2 = "in=1x8x8x3,k=3,out=16", "in=1x8x8x3,k=3,out=1"
A1, A2, A3 = "1x8x8x16+1x8x8x16", "1x8x8x16+1x8x8x1", "1x8x8x1+1x8x8x1"
R1 = "1x8x8x16"

# NN1: ConvA ⇉ Add1 → Relu → Add2 ← ConvB      NN2: ConvC ⇉ Add3      NN3: ConvD → Add4 ← ConvE
NN1 = [
    OpRecord("Conv2d", 1, 2, ("Add",), V1), OpRecord("Add", 2, 1, ("Relu",), A1), OpRecord("Relu", 1, 1, ("Add",), R1),
    OpRecord("Conv2d", 1, 1, ("Add",), V2), OpRecord("Add", 2, 0, (), A2),
]
NN2 = [OpRecord("Conv2d", 1, 2, ("Add",), V2), OpRecord("Add", 2, 0, (), A3)]
NN3 = [OpRecord("Conv2d", 1, 1, ("Add",), V1), OpRecord("Conv2d", 1, 1, ("Add",), V2), OpRecord("Add", 2, 0, (), A2)]

TABLE_II = {  # OTC, IDC, ODC, SEC, SPC, OLC (percent, as printed)
    "Conv2d": (100, 100, 66.7, 33.3, 20, 64),
    "Relu": (100, 100, 33.3, 33.3, 10, 55.3),
    "Add": (100, 100, 66.7, 33.3, 30, 66),
    "I": (100, 100, 55.6, 33.3, 20, 61.8),
}


def test_table_ii_exactly():
    cov = Coverage(TABLE_I, n_maxspc=10)
    for nn in (NN1, NN2, NN3):
        cov.add(nn)
    for op, row in TABLE_II.items():
        m = cov.metrics() if op == "I" else cov.op_metrics(op)
        got = tuple(round(100 * m[k], 1) for k in ("OTC", "IDC", "ODC", "SEC", "SPC", "OLC"))
        assert got == pytest.approx(row, abs=0.051), (op, got, row)


def test_is_new_matches_add_and_changes_nothing():
    cov = Coverage(TABLE_I, n_maxspc=10)
    assert cov.is_new(NN1)
    cov.add(NN1)
    assert not cov.is_new(NN1)
    assert cov.is_new(NN2)
    before = cov.metrics()
    cov.is_new(NN2)
    assert cov.metrics() == before


def test_spc_caps_at_100_percent():
    cov = Coverage({"Relu": (frozenset({1}), D012)}, n_maxspc=3)
    for i in range(10):
        cov.add([OpRecord("Relu", 1, 1, (), f"v{i}")])
    assert cov.op_metrics("Relu")["SPC"] == 1.0
    assert not cov.is_new([OpRecord("Relu", 1, 1, (), "v99")])


def test_trivial_metric_gets_weight_zero():
    only1 = {"A": (frozenset({1}), frozenset({1})), "B": (frozenset({1}), frozenset({1}))}
    cov = Coverage(only1)
    assert cov.weights["IDC"] == 0 and cov.weights["ODC"] == 0
    assert Coverage(TABLE_I).weights["IDC"] == 1  # Table II keeps IDC


def test_lowest_coverage_order():
    cov = Coverage(TABLE_I, n_maxspc=10)
    cov.add(NN2)
    assert cov.lowest()[0] == "Relu"
    assert "Relu" not in cov.lowest(exclude=["Relu"])


def test_incremental_work_is_proportional_to_the_model(corpus, monkeypatch):
    """add() evaluates only the operators of the model it adds, whatever came before."""
    cov = Coverage.for_corpus(corpus)
    calls = []
    real = Coverage._values
    monkeypatch.setattr(Coverage, "_values", lambda self, op, st: calls.append(op) or real(self, op, st))
    for i in range(300):
        recs = generate_one(corpus, 5, i, GenerateOptions(blocks=(10, 10))).records
        calls.clear()
        cov.add(recs)
        assert len(calls) == 2 * len([r for r in recs if r.op in cov.degrees])


def test_fine_keys_see_attribute_values_defaults_types_and_input_values():
    import numpy as np
    from onnx import helper

    from ofuzz.gen.fine_coverage import fine_keys

    n = helper.make_node("ArgMax", ["x"], ["y"], axis=-1)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", 1, [2, 3])], [helper.make_tensor_value_info("y", 7, [2, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.array([[1.0, np.nan, 1.0], [0.0, -2.0, 3.0]], np.float32)
    keys = fine_keys(m, {"x": x}, ["mnn", "onnxruntime"])
    for k in ("ArgMax|axis=-1", "ArgMax|keepdims=default", "ArgMax|select_last_index=default", "ArgMax|dtype=float32",
              "ArgMax|rank=2", "ArgMax|version=13", "ArgMax|values=nan", "ArgMax|values=negative", "ArgMax|values=zero", "ArgMax|values=ties"):
        assert f"mnn|{k}" in keys and f"onnxruntime|{k}" in keys, k
    m21 = helper.make_model(helper.make_graph([helper.make_node("Pad", ["x", "p"], ["y"])], "g", [helper.make_tensor_value_info("x", 1, [2, 3]),
                            helper.make_tensor_value_info("p", 7, [4])], [helper.make_tensor_value_info("y", 1, None)]),
                            opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    assert "mnn|Pad|version=21" in fine_keys(m21, {}, ["mnn"])  # Pad-21 at opset 21, Pad-13 at 17: two versions to cover
    assert fine_keys(m, {"x": x}, []) == set()  # nothing is covered for an engine that did not compare the model
