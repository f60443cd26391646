"""Repros that judge themselves right: a plug-in split in two files, a check that cannot load the engine, and an
engine that corrupts its process after giving the wrong answer."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import onnx

from ofuzz.exec.engines.registry import resolve
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.judging import Policy, judge_model
from ofuzz.judge.signature import finding_id
from ofuzz.triage.cluster import cluster
from ofuzz.triage.pipeline import export
from tests.test_triage import relu_model

# A TEST DOUBLE plug-in, not a real engine: the ONNX reference evaluator, with the seeded fault in a module beside it.
ENGINE = '''
import atexit
import os

from two_file_faults import seeded_relu_fault


class TwoFileEngine:
    name = "twofile"

    def __init__(self, abort_at_exit=False):
        self.abort_at_exit = abort_at_exit

    def version(self):
        return "1.0 (test double)"

    def prepare(self, model_path, workdir, inputs, outputs):
        import onnx
        from onnx.reference import ReferenceEvaluator
        self.ev, self.outputs = ReferenceEvaluator(onnx.load(model_path)), outputs

    def run(self, feeds):
        outs = dict(zip(self.outputs, self.ev.run(self.outputs, feeds)))
        if self.abort_at_exit:  # as an engine whose heap is corrupt: the answer is given, the process dies at teardown
            atexit.register(os.abort)
        return {k: seeded_relu_fault(v) for k, v in outs.items()}
'''
FAULTS = '''
def seeded_relu_fault(y):
    return y + 1  # the seeded fault: every Relu output is off by one
'''


def two_file_plugin(tmp_path, **options):
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "two_file_engine.py").write_text(ENGINE)
    (folder / "two_file_faults.py").write_text(FAULTS)
    (spec,) = resolve([f"{folder / 'two_file_engine.py'}:TwoFileEngine"])
    return dataclasses.replace(spec, options=options)


def exported(tmp_path, plugin):
    specs = [plugin, *resolve(["onnxruntime", "reference"])]
    path, feeds = relu_model(tmp_path)
    with EnginePool(specs, tmp_path / "pool") as pool:
        pool.start()
        (f,) = judge_model(pool, onnx.load(str(path)), path, feeds, policy=Policy.default()).findings
        row = {"engine": f.engine, "status": f.status, "signature": f.signature, "op": f.op, "summary": f.summary,
               "first_idx": 0, "first_model": path.name, "count": 1}
        out = tmp_path / "c" / "repros" / finding_id(f.signature)
        export({s.name: s for s in specs}, row, path, feeds, out, reduce_budget=20, pool=pool, policy=Policy.default())
    return row, out


def test_a_plugin_split_in_two_files_gets_a_reproducing_repro_and_a_root_cause(tmp_path):
    row, out = exported(tmp_path, two_file_plugin(tmp_path))
    info = json.loads((out / "finding.json").read_text())
    assert (out / "two_file_faults.py").is_file(), "the module beside the adapter is copied with it"
    assert info["repro_check"] == "reproduced" and info["klass"] == "bug", (info["repro_check"], info["klass"])
    r = subprocess.run([sys.executable, "repro.py"], cwd=out, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "REPRODUCED" in r.stdout, r.stdout + r.stderr[-500:]
    (root,) = cluster(tmp_path / "c", [row])["root_causes"]
    assert root["engine"] == "twofile" and root["findings"] == [out.name]


def test_a_repro_that_cannot_load_its_engine_says_so_and_is_not_a_verdict(tmp_path):
    _, out = exported(tmp_path, two_file_plugin(tmp_path))
    (out / "two_file_faults.py").unlink()  # as a repro folder written before the siblings were copied
    r = subprocess.run([sys.executable, "repro.py"], cwd=out, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout.startswith("repro could not run: ModuleNotFoundError"), r.stdout + r.stderr[-500:]


def test_a_mismatch_printed_before_a_crash_at_teardown_counts_as_reproduced(tmp_path):
    _, out = exported(tmp_path, two_file_plugin(tmp_path, abort_at_exit=True))
    r = subprocess.run([sys.executable, "repro.py"], cwd=out, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr[-500:]
    assert "differs from the expected" in r.stdout and "crashed the process at exit: SIGABRT" in r.stdout, r.stdout
