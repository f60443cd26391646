"""`ofuzz replay`: every outcome from real workers (test doubles with chosen faults stand in for engine versions), the
JUnit file read back by a JUnit parser, the exit status, the known-bugs store as a source, one-line errors."""
from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from junitparser import JUnitXml

from ofuzz.campaign import replay as rp
from ofuzz.exec.engines.registry import resolve
from ofuzz.exec.runner import EnginePool
from ofuzz.triage.pipeline import export
from tests.test_reduce import two_fault_model

import onnx


def double(name: str, faults: dict[str, str], family: str = ""):
    return dataclasses.replace(resolve(["testdouble"])[0], name=name, options={"faults": faults}, family=family)


@pytest.fixture(scope="module")
def neg_repro(tmp_path_factory) -> Path:
    """A real repro folder: the test double's Neg fault, reduced and exported."""
    tmp = tmp_path_factory.mktemp("repro")
    path = tmp / "m.onnx"
    onnx.save(two_fault_model(), str(path))
    feeds = {"x": np.random.default_rng(1).uniform(-1, 1, (1, 3, 4, 5)).astype(np.float32)}
    specs = resolve(["testdouble", "onnxruntime", "reference"])
    finding = {"engine": "testdouble", "status": "DCF", "signature": "testdouble|DCF|value|Neg", "op": "Neg", "summary": "seeded Neg fault"}
    return export({s.name: s for s in specs}, finding, path, feeds, tmp / "repros" / "neg", reduce_budget=60)


def test_each_outcome_from_real_workers(neg_repro, tmp_path):
    specs = [resolve(["testdouble"])[0],  # still failing
             double("testdouble@fixed", {}, family="testdouble"),  # another version of it, without the fault: fixed
             double("testdouble@raises", {"Neg": "run:raise"}, family="testdouble"),  # fails another way: changed
             double("otherdouble", {"Neg": "run:offby"}),  # another engine, not in the campaign, now wrong: newly failing
             *resolve(["onnxruntime"])]  # ran in the campaign and still gives what it gave: passes
    (case,) = rp.load_cases(neg_repro.parent)
    assert case.engine == "testdouble" and case.status == "DCF" and "onnxruntime" in case.recorded
    fam = {s.name: s.family_name for s in specs}
    with EnginePool(specs, tmp_path / "pool") as pool:
        pool.start()
        results = rp.replay(pool, [case], pool.names, lambda e: fam.get(e, e))
    got = {r.engine: r.outcome for r in results}
    assert got == {"testdouble": rp.STILL, "testdouble@fixed": rp.FIXED, "testdouble@raises": rp.CHANGED,
                   "otherdouble": rp.NEW, "onnxruntime": rp.PASSES}, got
    xml = tmp_path / "r.xml"
    xml.write_text(rp.junit_xml(results, 1.0))
    suites = JUnitXml.fromfile(str(xml))
    cases = {(s.name, c.name): c for s in suites for c in s}
    assert len(cases) == 5
    assert cases[("testdouble@fixed", case.id)].is_passed and not cases[("otherdouble", case.id)].is_passed
    assert cases[("testdouble", case.id)].result[0].type == rp.STILL


def test_an_engine_whose_outcome_differs_between_runs_is_flaky_not_a_regression(neg_repro, tmp_path):
    """A version of the blamed engine that gets Neg wrong on every other run (as MNN gave different values to one repro
    between runs): with --repeat 2 it is flaky, not still failing or fixed; a deterministic one keeps its outcome."""
    specs = [double("testdouble@flip", {"Neg": "run:flip"}, family="testdouble"), resolve(["testdouble"])[0]]
    (case,) = rp.load_cases(neg_repro.parent)
    fam = {s.name: s.family_name for s in specs}
    with EnginePool(specs, tmp_path / "pool") as pool:
        pool.start()
        once = {r.engine: r.outcome for r in rp.replay(pool, [case], pool.names, lambda e: fam.get(e, e))}
        twice = rp.replay(pool, [case], pool.names, lambda e: fam.get(e, e), repeat=2)
    got = {r.engine: r.outcome for r in twice}
    assert once["testdouble"] == rp.STILL and got == {"testdouble@flip": rp.FLAKY, "testdouble": rp.STILL}, (once, got)
    flaky = next(r for r in twice if r.outcome == rp.FLAKY)
    assert "still failing" in flaky.now.detail and "fixed" in flaky.now.detail
    xml = tmp_path / "r.xml"
    xml.write_text(rp.junit_xml(twice, 1.0))
    cases = {(s.name, c.name): c for s in JUnitXml.fromfile(str(xml)) for c in s}
    assert cases[("testdouble@flip", case.id)].is_skipped


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ofuzz.cli", "replay", *args], capture_output=True, text=True, timeout=300)


def test_cli_exit_status_json_and_junit(neg_repro, tmp_path):
    r = cli(str(neg_repro.parent), "-e", "testdouble,onnxruntime", "--json", "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 0, r.stderr[-800:]  # still failing is no regression
    d = json.loads(r.stdout)
    assert d["counts"]["testdouble"][rp.STILL] == 1 and d["counts"]["onnxruntime"][rp.PASSES] == 1
    assert sum(1 for s in JUnitXml.fromfile(str(tmp_path / "j.xml")) for _ in s) == 2
    # the same repro as if blamed on an engine the test double is not: the double's wrong Neg is newly failing → exit 1
    other = tmp_path / "other" / "neg"
    shutil.copytree(neg_repro, other)
    info = json.loads((other / "finding.json").read_text())
    info.update(engine="someengine", repro_engine="someengine", versions={k: v for k, v in info["versions"].items() if k != "testdouble"})
    (other / "finding.json").write_text(json.dumps(info))
    r = cli(str(other.parent), "-e", "testdouble")
    assert r.returncode == 1 and rp.NEW in r.stdout, r.stdout + r.stderr[-500:]


def test_known_bugs_store_keeps_the_repros_it_replays(neg_repro, tmp_path):
    from ofuzz.store.known import KnownBugs

    store = tmp_path / "known.sqlite"
    k = KnownBugs(store)
    k.remember([{"id": "rc-test", "engine": "testdouble", "key": {}, "repro": "repros/neg"}], [], "c", neg_repro.parent.parent)
    k.close()
    (case,) = rp.load_cases(store)
    assert case.id == "rc-test" and case.engine == "testdouble" and case.recorded.get("onnxruntime") is not None


@pytest.mark.parametrize("make, needle", [
    (lambda d: d / "missing", "no such file or folder"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "no repro folders here"),
    (lambda d: [(d / "bad.sqlite").write_text("not sqlite"), d / "bad.sqlite"][1], "not a known-bugs store"),
])
def test_bad_sources_get_one_line_errors(tmp_path, make, needle):
    r = cli(str(make(tmp_path)), "-e", "onnxruntime")
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr[-600:]
