"""Engine versions as names (mnn@3.5.0, onnxruntime@1.17.3): their pinned environments, one family for voting, and
which root causes differ between versions."""
from __future__ import annotations

import subprocess
import sys

import onnx
import pytest

from ofuzz.exec.engines.registry import EngineError, resolve
from ofuzz.campaign.versions import differences, version_of


def test_a_version_is_the_base_engine_pinned_in_an_environment_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("OFUZZ_CACHE", str(tmp_path))
    mnn, old, ort = resolve(["mnn", "mnn@3.5.0", "onnxruntime@1.17.3"])
    assert old.family_name == mnn.family_name == "mnn" and old.adapter == mnn.adapter and old.options == mnn.options
    lines = open(old.env).read().splitlines()
    assert "MNN==3.5.0" in lines and "MNN==3.6.1" not in lines and any(x.startswith("numpy") for x in lines)
    assert old.env_id != mnn.env_id and old.env_id.startswith("mnn@3.5.0-")
    assert ort.family_name == "onnxruntime" and "onnxruntime==1.17.3" in open(ort.env).read().splitlines() and ort.env != "core"
    assert resolve(["mnn@3.5.0"])[0].env_id == old.env_id  # the same version reuses its environment
    tf, tf_old = resolve(["tensorflow", "tensorflow@1.28.8"])  # a TensorFlow version pins the converter, onnx2tf
    pins = open(tf_old.env).read().splitlines()
    assert "onnx2tf==1.28.8" in pins and "onnx2tf==1.29.24" not in pins and "tensorflow==2.19.0" in pins
    assert tf_old.family_name == tf.family_name == "tensorflow"


@pytest.mark.parametrize("name, needle", [("reference@1.0", "has no versions"), ("mnn@latest", "is not a version number"),
                                          ("nosuch@1.0", "unknown engine")])
def test_bad_version_names_get_one_line_errors(name, needle, tmp_path):
    with pytest.raises(EngineError, match=needle):
        resolve([name])
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "replay", str(tmp_path), "-e", name], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr


def test_differences_say_regression_or_fix_by_which_version_is_newer():
    families = {"mnn@3.6.1": "mnn", "mnn@3.5.0": "mnn", "onnxruntime": "onnxruntime"}
    status = {(1, "mnn@3.5.0"): "DCP", (2, "mnn@3.6.1"): "DCP", (3, "mnn@3.5.0"): "DCF"}
    roots = [{"id": "rc-new", "engine": "mnn@3.6.1", "first_idx": 1}, {"id": "rc-old", "engine": "mnn@3.5.0", "first_idx": 2},
             {"id": "rc-both", "engine": "mnn@3.6.1", "first_idx": 3}, {"id": "rc-ort", "engine": "onnxruntime", "first_idx": 1}]
    got = {d["id"]: d["kind"] for d in differences(roots, families, {}, lambda i, e: status.get((i, e)))}
    assert got == {"rc-new": "regression", "rc-old": "fixed"}
    # the other version passed the model but fails the reduced repro too: the versions differ on the model, not the defect
    got = {d["id"] for d in differences(roots, families, {}, lambda i, e: status.get((i, e)), lambda r, e: r["id"] != "rc-old")}
    assert got == {"rc-new"}
    assert str(version_of("mnn", {"mnn": "3.6.1"})) == "3.6.1" and version_of("reference", {}) is None


def test_a_real_older_onnxruntime_installs_on_first_use_and_runs_beside_the_current_one(tmp_path):
    """onnxruntime@1.17.3 from the package index (installed once into the cache, reused after) judges the same models
    as the core environment's onnxruntime, in one family."""
    import json
    import sqlite3

    out = tmp_path / "c"
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--engines", "onnxruntime,onnxruntime@1.17.3,reference", "--models", "16",
                        "--seed", "3", "--no-reduce", "--no-report", "--out", str(out), "--workers", "1", "--opset", "20..21", "--run-all"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    con = sqlite3.connect(str(out / "campaign.sqlite"))
    versions = json.loads(con.execute("SELECT value FROM meta WHERE key = 'versions'").fetchone()[0])
    runs = con.execute("SELECT r.status, m.id FROM engine_runs r JOIN models m ON m.idx = r.idx WHERE r.engine = 'onnxruntime@1.17.3'").fetchall()
    con.close()
    assert versions["onnxruntime@1.17.3"] == "1.17.3" and versions["onnxruntime"] != "1.17.3", versions
    opset = {mid: onnx.load(str(out / "models" / f"{mid}.onnx")).opset_import[0].version for _, mid in runs if (out / "models" / f"{mid}.onnx").is_file()}
    # its max_opset is 20 (measured): opset-21 models are not sent to it, opset-20 ones are judged
    assert opset and all((status == "SKIP") == (opset[mid] > 20) for status, mid in runs if mid in opset), (runs, opset)
    assert {20, 21} <= set(opset.values())


def test_a_repro_of_a_pinned_engine_carries_its_requirements(tmp_path):
    """A maintainer reproduces with the exact pins: the repro folder of an MNN finding holds the engine's
    requirements.txt and REPORT.md says to install it (a version's own pins for mnn@X)."""
    from pathlib import Path

    from ofuzz.exec.engines.envs import python_for
    from ofuzz.triage.pipeline import export

    bug = Path(__file__).parent / "data" / "bugs" / "mnn-argmax-select-last-index"
    specs = resolve(["mnn", "onnxruntime", "reference"])
    if python_for(specs[0]) is None:
        pytest.skip("the mnn environment is not installed (ofuzz engines --install mnn)")
    import numpy as np

    feeds = dict(np.load(bug / "inputs.npz"))
    finding = {"engine": "mnn", "status": "DCF", "signature": "mnn|DCF|value|ArgMax", "op": "ArgMax", "summary": "ArgMax select_last_index"}
    out = export({s.name: s for s in specs}, finding, bug / "model.onnx", feeds, tmp_path / "repro", reduce_budget=10)
    assert "MNN==3.6.1" in (out / "requirements.txt").read_text().splitlines()
    assert "pip install -r requirements.txt" in (out / "REPORT.md").read_text()


def test_the_report_lists_version_differences(monkeypatch, tmp_path):
    """The report's section takes the stored root causes (first_idx lives in their detail) to `campaign_differences`."""
    import ofuzz.campaign.versions as versions
    from ofuzz.campaign.report import _version_section

    seen = []

    def fake(campaign_dir, roots):
        seen.extend(roots)
        return [{"id": "rc-1", "engine": "mnn@3.0.0", "other": "mnn", "kind": "fixed", "text": "fixed in mnn (only mnn@3.0.0 fails)"}]

    monkeypatch.setattr(versions, "campaign_differences", fake)
    roots = [{"id": "rc-1", "engine": "mnn@3.0.0", "key": {"ops": ["PRelu"]}, "repro": "repros/abc", "detail": {"first_idx": 7}}]
    page = _version_section(tmp_path, roots)
    assert "Version differences: 1" in page and "fixed in mnn" in page and "PRelu" in page and seen[0]["first_idx"] == 7
    assert _version_section(tmp_path, []) == ""
