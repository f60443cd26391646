from __future__ import annotations

import json
import subprocess
import sys

import onnx
from onnx import helper

from tests.helpers import single_op_model


def ofuzz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ofuzz.cli", *args], capture_output=True, text=True, timeout=300)


def test_run_passes_on_agreeing_engines(tmp_path):
    m = single_op_model(tmp_path / "relu.onnx", "Relu")
    r = ofuzz("run", str(m), "--engines", "onnxruntime,reference", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {k: v["status"] for k, v in doc["verdict"]["engines"].items()} == {"onnxruntime": "DCP", "reference": "DCP"}
    assert doc["findings"] == []


def test_run_exits_nonzero_on_a_finding_and_names_the_op(tmp_path):
    from tests.helpers import chain_model

    m = chain_model(tmp_path / "m.onnx", ["Relu", "Neg"])
    r = ofuzz("run", str(m), "--engines", "onnxruntime,reference,testdouble", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    f = doc["findings"][0]
    assert f["engine"] == "testdouble" and f["status"] == "DCF" and f["op"] == "Neg"


def test_run_on_generated_model_uses_its_inputs(tmp_path):
    out = tmp_path / "gen"
    assert ofuzz("generate", "-n", "1", "--blocks", "3", "--seed", "9", "--out", str(out)).returncode == 0
    model = next(out.glob("*.onnx"))
    r = ofuzz("run", str(model), "--engines", "onnxruntime,reference")
    assert r.returncode in (0, 1), r.stderr
    assert "onnxruntime" in r.stdout and "reference" in r.stdout


def test_free_dimensions_fixed_with_a_warning(tmp_path):
    n = helper.make_node("Relu", ["x"], ["y"])
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", 1, ["batch", 3])], [helper.make_tensor_value_info("y", 1, ["batch", 3])])
    p = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(p))
    r = ofuzz("run", str(p), "--engines", "onnxruntime,reference")
    assert r.returncode == 0, r.stderr
    assert "free dimensions fixed to 1" in r.stderr and "x:batch" in r.stderr


def test_invalid_model_and_unknown_engine_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    r = ofuzz("run", str(bad), "--engines", "onnxruntime")
    assert r.returncode == 2 and "not a valid ONNX model" in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) == 1
    m = single_op_model(tmp_path / "relu.onnx", "Relu")
    r = ofuzz("run", str(m), "--engines", "onnxruntim")
    assert r.returncode == 2 and "unknown engine 'onnxruntim'" in r.stderr


def test_engines_lists_versions_and_install_hints():
    r = ofuzz("engines")
    assert r.returncode == 0
    assert "onnxruntime" in r.stdout and "reference" in r.stdout and "testdouble" in r.stdout


def test_plugin_engine_from_a_file(tmp_path):
    plugin = tmp_path / "my_engine.py"
    plugin.write_text('''
import numpy as np

class MyEngine:
    name = "myengine"

    def version(self):
        return "1.0"

    def prepare(self, model_path, workdir, inputs, outputs):
        self.outputs = outputs

    def run(self, feeds):
        x = next(iter(feeds.values()))
        return {self.outputs[0]: np.maximum(x, 0)}
''')
    m = single_op_model(tmp_path / "relu.onnx", "Relu")
    r = ofuzz("run", str(m), "--engines", f"onnxruntime,reference,{plugin}:MyEngine", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["verdict"]["engines"]["myengine"]["status"] == "DCP"
