"""An engine family's hypothesis tested on one finding: the family (backends/<engine>/triage.yaml) names the rewrite that
takes its blamed trigger away; a finding whose reduced repro the engine then gets right is that defect and joins the
family, one the engine still gets wrong is another defect and keeps its own key (hand triage: MNN's N-ary family had
absorbed a finding whose model also held a Relu on NaN; families joined by operator name alone hid such defects)."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import numpy as np
import onnx

from ofuzz.core.prose_defaults import schema_defaults_written_out
from ofuzz.core.readings import READINGS
from ofuzz.core.rewrites import apply
from ofuzz.judge.compare import RULE
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.judging import Policy
from ofuzz.judge.noise import Family, NoiseClasses, engine_matches
from ofuzz.judge.signature import Signature
from ofuzz.triage.repro_facts import OneNode, facts_of
from ofuzz.triage.rootcause import SHOWN_TRIGGERS, UPSTREAM, RootKey, crash_like
from ofuzz.core.vocab import DCF, DCP
from ofuzz.triage.triggers import gone_in, rewrite_verdict, settled_verdict
from ofuzz.triage.witness import culprit_alone


def families_for(noise: NoiseClasses | None, key: RootKey, node: OneNode | None, version: str | None) -> list[Family]:
    """The engine's operator families a one-node repro could belong to (its operator, input count, failure, first input's
    rank and type, attributes: `repro_facts.OneNode`), for the engine version the repro ran on, in file order. A key by
    a shown trigger names no operator, only the trigger ("Conv.auto_pad spelled out"): its repro's one node does (MNN's
    one convolution transform reads SAME_LOWER as SAME_UPPER for Conv and ConvTranspose alike, two shown triggers)."""
    ops = key.ops or ((node.op,) if node is not None and key.message in SHOWN_TRIGGERS else ())
    if noise is None or node is None or len(ops) != 1 or key.failure == UPSTREAM or not noise.family_rules:
        return []
    return noise.families(key.engine, node.op, node.inputs, key.failure, node.rank, node.attrs, node.dtype, version)


def run_family_test(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy, status: str,
                    key: RootKey, version: str | None, node: OneNode | None = None) -> dict[str, Any] | None:
    """The record of the family test on this reduced repro: the first family whose rewrite makes the engine right
    (`fixed`), else the first tested family's record (why it is no answer); None when no family with a test holds.
    `node`: the node the families are asked of (default: the repro's one node; a shown trigger's node in a larger one)."""
    first: dict[str, Any] | None = None
    for fam in families_for(policy.noise, key, node or facts_of(model).one_node, version):
        if not fam.tested:
            continue
        record = _tested(pool, model, feeds, engine, policy, status, key, fam)
        if record["fixed"]:
            return record
        first = first or record
    return first


def run_culprit_family_test(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], culprit: int, engine: str,
                            value_engine: str, policy: Policy, version: str | None) -> dict[str, Any] | None:
    """An `upstream` failure's one culprit, cut out alone and fed the values it gets in the repro, tested against the
    engine's families: the culprit alone is the wrong shape or value that its consumer tripped on, so the family whose
    rewrite makes it right holds this root cause too (hand triage 28: MNN's ReduceL2 and ReduceLogSum ignore their
    `axes` input, a family test on one node; a consumer that failed on the wrong shape made each an `upstream` root
    cause of its own). The record carries the culprit's failure and facts, which the clustering keys the family on.
    None when no family of the engine names the culprit's operator, or the culprit alone is not wrong."""
    noise, node = policy.noise, model.graph.node[culprit]
    if noise is None or not any(f.tested and (node.op_type in f.ops or "*" in f.ops) and engine_matches(engine, f.engines)
                                for f in noise.family_rules):
        return None
    built = culprit_alone(pool, model, feeds, culprit, value_engine)
    if built is None:
        return None
    judged = rewrite_verdict(pool, built[0], built[1], engine, policy)
    kinds = [Signature.parse(f.signature).kind for f in judged.findings if f.engine == engine and f.status == DCF]
    if not kinds:
        return None
    one = facts_of(built[0]).one_node
    record = run_family_test(pool, built[0], built[1], engine, policy, DCF, RootKey(engine, DCF, kinds[0], (node.op_type,), (), ()), version)
    if record is None or one is None:
        return None
    return {**record, "culprit": {"failure": kinds[0], "one_node": asdict(one)}}


def _tested(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy, status: str,
            key: RootKey, fam: Family) -> dict[str, Any]:
    """One family's test on the repro: its rewrite applied, the engine judged once (or the repro judged once and the
    engine's outputs read the hypothesis's way)."""
    if fam.test_reading:
        return _read(pool, model, feeds, engine, policy, fam)
    args = json.loads(fam.test_args)
    record: dict[str, Any] = {"family": fam.name, "rewrite": {fam.test_rewrite: args}}
    if fam.test_defaults:
        model, wrote = schema_defaults_written_out(model)
        record["defaults_written"] = wrote
        if wrote and gone_in(settled_verdict(pool, model, feeds, engine, policy), engine, status, crash_like(key.failure)):
            # the control: the defaults alone make the engine right, so the omitted default is the defect, not the
            # family's (hand triage 29: MNN's keepdims default, OnnxReduceL2.cpp:27, had joined its axes-input family)
            return {**record, "fixed": False, "note": "the omitted defaults written out alone make the engine right: that defect, not this family's"}
    got = apply(fam.test_rewrite, model, feeds, frozenset(fam.ops), args)
    if got is None:
        return {**record, "fixed": False, "note": "the rewrite does not apply to this repro (nothing to take away, or no valid model)"}
    judged = settled_verdict(pool, got[0], got[1], engine, policy)  # the answer and why it is no answer
    if gone_in(judged, engine, status, crash_like(key.failure)):
        return {**record, "fixed": True}
    verdict = judged.verdict
    now = verdict.results.get(engine)
    ran = [e for e, r in verdict.results.items() if e != engine and r.status in (DCP, DCF)]
    if status == DCF and (now is None or now.status != DCF or not ran or verdict.split):  # nobody could tell whether it is right now
        return {**record, "fixed": False, "note": f"inconclusive: {engine} {now.status if now else 'did not run'}, voters that ran: {ran}"
                                                    + (", and they disagree" if verdict.split else "")}
    return {**record, "fixed": False}


def _read(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy, fam: Family) -> dict[str, Any]:
    """A reading test: the repro judged on the engine and its voters; every output the engine got wrong, read the
    hypothesis's way, must equal the expected one (ofuzz/core/readings.py)."""
    record: dict[str, Any] = {"family": fam.name, "reading": fam.test_reading}
    judged = rewrite_verdict(pool, model, feeds, engine, policy)
    verdict = judged.verdict
    mine, ref = verdict.results.get(engine), verdict.results.get(verdict.expected_from)
    if mine is None or ref is None or verdict.expected_from == engine or not (mine.outcome and mine.outcome.outputs and ref.outcome and ref.outcome.outputs):
        return {**record, "fixed": False, "note": "inconclusive: no outputs of the engine and an expected engine to read"}
    read, needed = READINGS[fam.test_reading], False
    for name, want in ref.outcome.outputs.items():
        got = mine.outcome.outputs.get(name)
        if got is None:
            return {**record, "fixed": False, "note": f"{engine} gave no {name}"}
        got, want = np.asarray(got), np.asarray(want)
        if RULE.compare_outputs({name: got}, {name: want}, [name]).ok:
            continue
        seen, needed = read(got, want), True
        if seen is None or not RULE.compare_outputs({name: seen}, {name: want}, [name]).ok:
            return {**record, "fixed": False}
    if not needed:  # right as it came this time: the reading shows nothing
        return {**record, "fixed": False, "note": f"inconclusive: {engine} was right on the repro this time"}
    return {**record, "fixed": True}
