"""Engine-aware steering: models holding an operator an engine keeps failing on are run less often."""
from __future__ import annotations

import dataclasses
import sqlite3

import numpy as np

from ofuzz.campaign.loop import Campaign, CampaignOptions
from ofuzz.gen.corpus import load_corpus
from ofuzz.exec.engines.registry import resolve
from ofuzz.gen.steering import Steering
from tests.helpers import compared_share


def test_steering_learns_which_operator_fails_and_keeps_a_floor():
    s = Steering(strength=2.0, floor=0.1)
    assert s.run_probability({"Sum", "Relu"}, ["tensorflow"]) == 1.0  # nothing learnt: everything runs
    for i in range(20):
        s.observe({"Sum", "Relu"} if i % 2 else {"Relu"}, {"tensorflow": "MCF" if i % 2 else "DCP", "onnxruntime": "DCP"},
                  {"tensorflow": "Sum" if i % 2 else None})
    assert s.run_probability({"Relu"}, ["tensorflow", "onnxruntime"]) == 1.0  # Relu never failed
    p = s.run_probability({"Sum", "Relu"}, ["tensorflow"])
    assert s.floor <= p < 0.25  # Sum failed on all its 10 models
    assert s.run_probability({"Sum"}, ["onnxruntime"]) == 1.0  # only the engine that fails steers
    rng = np.random.default_rng(0)
    reasons = [s.skip_reason({"Sum", "Relu"}, "tensorflow", rng) for _ in range(400)]
    runs = sum(not r for r in reasons)
    assert 20 <= runs <= 100 and s.steered == 400 - runs  # never impossible: the floor keeps a fixed defect visible
    assert all("Sum" in r for r in reasons if r)
    assert not any(s.skip_reason({"Sum"}, "onnxruntime", rng) for _ in range(50))  # only the failing engine is steered


def test_a_campaign_with_steering_compares_more_of_what_it_runs(tmp_path):
    """A test double that fails converting four common operators (naming the node, as the TensorFlow adapter does):
    with steering, a larger share of the models it is sent reach a comparison than without, on the same seed, and the
    other engines still run every model."""
    faulty = dataclasses.replace(resolve(["testdouble"])[0], name="testdouble",
                                 options={"faults": {op: "prepare:raise" for op in ("Reshape", "Pad", "Slice", "Cast")}})
    specs = [faulty, *resolve(["onnxruntime", "reference"])]
    reach = {}
    for steer in (False, True):
        out = tmp_path / f"steer-{steer}"
        c = Campaign(load_corpus(), specs, CampaignOptions(engines=[s.name for s in specs], models=120, blocks=(2, 6), seed=5,
                                                           workers=1, timeout=10, steer=steer), out)
        c.run()
        c.close()
        reach[steer] = compared_share(out, "testdouble")[0]
        if steer:
            assert c.steering is not None and c.steering.steered > 0
            con = sqlite3.connect(str(out / "campaign.sqlite"))
            skipped = dict(con.execute("SELECT engine, COUNT(*) FROM engine_runs WHERE status = 'SKIP' GROUP BY engine").fetchall())
            run = con.execute("SELECT COUNT(*) FROM models WHERE run = 1").fetchone()[0]
            ort = con.execute("SELECT COUNT(*) FROM engine_runs WHERE engine = 'onnxruntime' AND status != 'SKIP'").fetchone()[0]
            con.close()
            assert skipped.get("testdouble", 0) == c.steering.steered and ort == run, (skipped, run, ort)
    assert reach[True] > reach[False] + 0.1, reach


def test_an_engine_that_says_it_does_not_support_an_operator_stops_receiving_it(tmp_path):
    """The test double refuses Relu with a 'not supported' message: after that, models holding a Relu are not sent to
    it (SKIP), and every model without one still is."""
    import json

    import onnx

    faulty = dataclasses.replace(resolve(["testdouble"])[0], name="testdouble", options={"faults": {"Relu": "prepare:unsupported"}})
    specs = [faulty, *resolve(["onnxruntime", "reference"])]
    out = tmp_path / "c"
    c = Campaign(load_corpus(), specs, CampaignOptions(engines=[s.name for s in specs], models=150, blocks=(2, 6), seed=5,
                                                       workers=1, timeout=10, steer=False), out)  # capability gaps alone
    c.run()
    c.close()
    con = sqlite3.connect(str(out / "campaign.sqlite"))
    rows = con.execute("SELECT m.id, r.status FROM models m JOIN engine_runs r ON r.idx = m.idx WHERE r.engine = 'testdouble'").fetchall()
    classes = [json.loads(d).get("klass") for (d,) in con.execute("SELECT detail FROM findings WHERE engine = 'testdouble'")]
    con.close()
    holds = {mid: any(n.op_type == "Relu" for n in onnx.load(str(out / "models" / f"{mid}.onnx")).graph.node) for mid, _ in rows}
    with_relu = [st for mid, st in rows if holds[mid]]
    assert "unsupported" in classes and 1 <= with_relu.count("MCF") <= 2, (with_relu, classes)  # told once (one in flight)
    assert with_relu.count("SKIP") >= 3, with_relu
    assert all(st != "SKIP" for mid, st in rows if not holds[mid])
