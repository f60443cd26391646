"""The fault benchmark, short: a campaign on the `faultbench` TEST DOUBLE (onnxruntime with seeded faults) whose every
reached fault must come back as exactly one root cause, with no root holding two faults or none, and never the decoy.
The full run is `python scripts/fault_benchmark.py --budget 10m` (figures in docs/results.md)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import helper

ROOT = Path(__file__).resolve().parents[1]
# frequent operators, so a minute reaches several: a value fault, a crash at inference, a multi-node pattern, the decoy
SUBSET = "softsign-scale,erf-run-raise,tanh-mul,conv-add,sigmoid-offset,cos-decoy"


def test_the_catalogue_triggers_each_fault_on_its_own_corner():
    sys.path.insert(0, str(ROOT / "backends" / "faultbench"))
    try:
        from faults import BY_ID, FAULTS, active_faults
    finally:
        sys.path.pop(0)
    assert len([f for f in FAULTS if f.family != "decoy"]) >= 20 and len([f for f in FAULTS if f.family == "pattern"]) >= 4
    F = onnx.TensorProto.FLOAT

    def model(nodes):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3])], [helper.make_tensor_value_info("y", F, [2, 3])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])

    tanh_mul = model([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Mul", ["t", "x"], ["y"])])
    assert [f.id for f, _ in active_faults(tanh_mul)] == ["tanh-mul"]
    assert active_faults(model([helper.make_node("Mul", ["x", "x"], ["y"])])) == []  # Mul alone: no fault
    assert [f.id for f, _ in active_faults(model([helper.make_node("Softmax", ["x"], ["y"], axis=0)]))] == ["softmax-axis0"]
    assert active_faults(model([helper.make_node("Softmax", ["x"], ["y"])])) == []  # the default axis: no fault
    assert BY_ID["cos-decoy"].kind == "decoy"


def test_a_short_fault_benchmark_gives_every_reached_fault_back_once(tmp_path):
    out = tmp_path / "campaign"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "fault_benchmark.py"), "--budget", "75s", "--seed", "3", "--workers", "2",
                        "--faults", SUBSET, "--out", str(out), "--json", str(tmp_path / "fb.json")],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    s = json.loads((tmp_path / "fb.json").read_text())
    assert len(s["reached"]) >= 2, r.stdout
    assert s["missed"] == [] and s["split"] == {}, r.stdout
    assert s["roots_with_two_faults"] == [] and s["roots_without_fault"] == [], r.stdout
    assert s["decoy_reported"] == {}, r.stdout
