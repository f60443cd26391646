"""`ofuzz conformance`: the onnx node tests through real workers; each outcome class, the store's changes between
sweeps, the oracle's ground-truth check (which must be able to fail), one-line errors."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from ofuzz.campaign import conformance as cf
from ofuzz.exec.engines.registry import resolve


def double(name: str, faults: dict[str, str]):
    return dataclasses.replace(resolve(["testdouble"])[0], name=name, options={"faults": faults})


@pytest.fixture(scope="module")
def tests_neg_sin_cos():
    tests, _ = cf.node_tests({"Neg", "Sin", "Cos"})
    assert {t.op for t in tests} == {"Neg", "Sin", "Cos"} and all(t.expected for t in tests)
    return tests


def test_every_outcome_class_and_changes_between_sweeps(tests_neg_sin_cos, tmp_path):
    store = cf.ConformanceStore(tmp_path / "c.sqlite")
    faulty = double("testdouble", {"Neg": "run:wrong", "Sin": "run:raise", "Cos": "prepare:segfault"})
    hangs = dataclasses.replace(double("hangdouble", {"Sin": "prepare:hang"}), timeout=3.0)
    first = cf.run_sweep([faulty, hangs, *resolve(["reference"])], tests_neg_sin_cos, store, tmp_path / "w1", 2)
    counts, failing = cf.summarise(store.results(first))
    assert counts["reference"][cf.PASS] == len(tests_neg_sin_cos)
    assert failing["testdouble"] == {cf.WRONG: ["Neg"], cf.RUN: ["Sin"], cf.CRASH: ["Cos"]}
    assert failing["hangdouble"] == {cf.TIMEOUT: ["Sin"]}  # a step past its time limit is not called a crash
    assert store.oracle(first) == []  # two engines, no majority to be wrong: nothing blamed against the truth
    fixed = double("testdouble", {"Sin": "run:raise", "Cos": "prepare:segfault"})  # "the next release" fixed Neg
    second = cf.run_sweep([fixed], tests_neg_sin_cos, store, tmp_path / "w2", 1)
    ch = cf.changes(store, second, ["testdouble"])
    assert ch and {c["op"] for c in ch} == {"Neg"} and all(c["was"] == cf.WRONG and c["now"] == cf.PASS for c in ch)


def test_the_ground_truth_check_catches_a_wrong_majority(tests_neg_sin_cos, tmp_path):
    """Two wrong engines of different families outvote the reference on Neg: the oracle blames the only correct engine,
    and the check says so (it is a check that can fail)."""
    store = cf.ConformanceStore(tmp_path / "c.sqlite")
    wrong = [double("testdouble", {"Neg": "run:wrong"}), double("otherdouble", {"Neg": "run:wrong"})]
    neg = [t for t in tests_neg_sin_cos if t.op == "Neg"]
    sweep = cf.run_sweep([*wrong, *resolve(["reference"])], neg, store, tmp_path / "w", 1)
    kinds = {(d["kind"], d["engine"]) for d in store.oracle(sweep)}
    assert ("blamed a correct engine", "reference") in kinds and any(k == "expected values were wrong" for k, _ in kinds), kinds


def test_cli_json_and_bad_store(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "conformance", "-e", "onnxruntime,reference", "--ops", "Relu,Abs",
                        "--store", str(tmp_path / "c.sqlite"), "--json", "--workers", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-1000:]
    d = json.loads(r.stdout)
    assert d["counts"]["onnxruntime"][cf.PASS] >= 2 and d["oracle_disagreements"] == [] and d["versions"]["reference"]
    (tmp_path / "bad.sqlite").write_text("not a database")
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "conformance", "-e", "reference", "--ops", "Relu", "--store", str(tmp_path / "bad.sqlite")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "not an ofuzz conformance store" in r.stderr and "Traceback" not in r.stderr, r.stderr[-600:]


def test_a_stopped_sweep_goes_on_where_it_stopped(tests_neg_sin_cos, tmp_path):
    """--resume: the finished tests of the latest sweep of the same engines are not run again (a full TensorFlow sweep
    takes hours and its crashes are slow; it must be able to stop and go on)."""
    store = cf.ConformanceStore(tmp_path / "c.sqlite")
    ref = resolve(["reference"])
    neg = [t for t in tests_neg_sin_cos if t.op == "Neg"]
    first = cf.run_sweep(ref, neg, store, tmp_path / "w1", 1)
    assert store.latest(["reference"]) == first and store.done(first, ["reference"]) == {t.name for t in neg}
    ran: list[str] = []
    again = cf.run_sweep(ref, tests_neg_sin_cos, store, tmp_path / "w2", 1, lambda t: ran.append(t.name), sweep=first)
    assert again == first and sorted(ran) == sorted(t.name for t in tests_neg_sin_cos if t.op != "Neg")
    counts, _ = cf.summarise(store.results(first))
    assert counts["reference"][cf.PASS] == len(tests_neg_sin_cos)
    assert store.latest(["reference", "onnxruntime"]) is None
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "conformance", "-e", "onnxruntime", "--ops", "Neg", "--resume",
                        "--store", str(tmp_path / "c.sqlite")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "holds no sweep of onnxruntime" in r.stderr and "Traceback" not in r.stderr, r.stderr[-600:]
