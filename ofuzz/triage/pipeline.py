"""Triage of one finding: re-judge it, reduce it, export its repro and key it by what the repro holds.

For each finding (one signature), in long-lived engine pools:
1. re-judge its first model with the full policy (isolation check, noise
   classes, reference gaps); a finding that does not come back is
   `unconfirmed` and not counted;
2. a finding whose class is not `bug` (drift, unsupported, undefined, split)
   is recorded with its reason and not reduced;
3. a bug is reduced and keyed on its own; one whose pre-key (engine, status,
   isolated operator and modes) already has a representative gets a shorter
   reduction, since a shared look is no evidence of a shared defect;
4. a trigger rewrite that keys the repro is tried on the original model too:
   a bug still there was hidden behind this one and is triaged alone (~r1);
5. `cluster` groups the keyed findings into root causes with the evidence of
   every join. Everything is recomputed from the raw signatures, never changed.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ofuzz.store.campaign_dir import FINDING
from ofuzz.core.npz import load_npz
from ofuzz.core.vocab import BUG, DCF, DCP, IF, MCF, SPLIT, UNCONFIRMED, UNDEFINED
from ofuzz.exec.engines.client import STEP_LIMIT
from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.compare import RULE
from ofuzz.judge.isolate import DEFECT
from ofuzz.judge.judging import Finding, Judged, Policy, declared_shapes, judge_model
from ofuzz.judge.localise import pick_voters, value_source
from ofuzz.judge.signature import Signature, finding_id
from ofuzz.triage.family_test import run_culprit_family_test, run_family_test
from ofuzz.triage.reduce import Target, reduce_model, some_engine_matches_declared
from ofuzz.triage.repro import write_repro
from ofuzz.triage.rootcause import (SHOWN_TRIGGERS, UPSTREAM, RootKey, crash_like, failure_of, ignored_attribute_key, key_of,
                                    omitted_default_key, pattern_key, schema_default_key, spelled_out_key, upstream_of)
from ofuzz.triage.second_opinion import MODE_ONLY, SecondOpinions
from ofuzz.triage.stopwatch import Laps
from ofuzz.triage.repro_facts import facts_of, trigger_ops
from ofuzz.triage.triggers import (_all_but_voters, auto_pad_trigger, culprit_ignored_attribute, goes_away, ignored_attribute_trigger,
                                   negative_axes_trigger, omitted_defaults_trigger, reduce_axes_trigger, resize_axes_trigger, rewrite_original,
                                   schema_defaults_trigger, slice_axes_trigger, slice_steps_trigger)
from ofuzz.triage.undefined_path import undefined_on_the_way
from ofuzz.triage.witness import failing_alone, needs_adjacency, without, witnesses

HANG_WAIT = 1.25  # repro.py's wait on a hang, in multiples of the time the campaign waited


class Representatives:
    """Pre-key -> the finding id reduced for it; shared by the export threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_key: dict[str, str] = {}

    def claim(self, key: str, fid: str) -> str | None:
        """Become the representative of `key`, or get the one that already is."""
        with self.lock:
            if key in self.by_key:
                return self.by_key[key]
            self.by_key[key] = fid
            return None


STARVED = 0.5  # a re-run's timeout spent this share of its time waiting for a CPU is not a hang (hand triage 18 #17)


def pre_key(hit: Finding, judged: Judged) -> str:
    """What two findings must share to be worth one reduction."""
    if hit.status == DCF:
        iso = judged.isolated.get(hit.engine)
        modes = sorted(f"{k}={v}" for k, v in (iso.info.get("attrs", {}) if iso is not None else {}).items() if isinstance(v, str))
        return json.dumps([hit.engine, DCF, (iso.info.get("category") if iso is not None else ""), hit.op, modes])
    return hit.signature


def _hit(judged: Judged, finding: dict[str, Any]) -> Finding | None:
    """The re-run's finding that is this one: same signature, else same engine and status; a blame
    that the current oracle turns into a no-majority split comes back as that split."""
    same = next((f for f in judged.findings if f.signature == finding["signature"]), None)
    same = same or next((f for f in judged.findings if f.engine == finding["engine"] and f.status == finding["status"]), None)
    if same is None and STEP_LIMIT in finding["signature"]:  # cut short in the campaign: whatever the full limit shows
        same = next((f for f in judged.findings if f.engine == finding["engine"]), None)
    if same is None and finding["status"] == DCF and judged.verdict.split:
        same = next((f for f in judged.findings if f.klass == SPLIT and finding["engine"] in f.engine.split("+")), None)
    return same


@dataclass
class Case:
    """One finding on its way through triage: what the re-run showed, and on which engine and pool it is reduced."""

    pool: EnginePool
    specs: dict[str, EngineSpec]
    finding: dict[str, Any]
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    out: Path
    policy: Policy
    opinions: SecondOpinions | None
    judged: Judged
    hit: Finding
    engine: str
    base: dict[str, Any]
    hang: bool = False
    second: str = ""

    @property
    def fid(self) -> str:
        return finding_id(self.finding["signature"]) + (f"~{self.finding['variant']}" if self.finding.get("variant") else "")


ATTACH_BUDGET = 10.0  # seconds to reduce a finding whose pre-key has a representative: its own key is the evidence


def triage_finding(pool: EnginePool, spec_by_name: dict[str, EngineSpec], finding: dict[str, Any], model_path: Path,
                   inputs: dict[str, np.ndarray], out: Path, budget: float, policy: Policy, reps: Representatives | None = None,
                   opinions: SecondOpinions | None = None, depth: int = 0) -> dict[str, Any]:
    """Re-judge, classify, reduce, export and key one finding; returns (and writes) its finding.json."""
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model_path, out / "original.onnx")
    case = _rejudged(pool, spec_by_name, finding, onnx.load(str(model_path)), inputs, out, policy, opinions, t0)
    if not isinstance(case, Case):
        return _record(out, case)
    key = pre_key(case.hit, case.judged)
    # a further model of a signature is reduced to see which operators its message hides, unless the engine named it
    named = case.hit.status != DCF and case.hit.op not in (None, "?")
    rep = reps.claim(key, case.fid) if reps is not None and (not finding.get("variant") or named) else None
    if rep is not None:  # the same pre-key is no evidence of the same defect: reduced on its own, briefly; its key decides
        case.base["pre_key_of"] = rep
        budget = min(budget, ATTACH_BUDGET)
    red_model, red_feeds, red_judged, reduction, value_engine = _reduced(case, budget)
    t1, laps = time.perf_counter(), Laps()
    info = write_repro(out, case.pool, case.specs, {**finding, "engine": case.engine, "op": case.hit.op or finding.get("op")}, red_model, red_feeds,
                       reduction, policy, {**case.base, "pre_key": key}, red_judged)
    laps.lap("repro")
    root, rewrite = _keyed(case, info, red_model, red_feeds, value_engine)
    laps.lap("key")
    # what the reduced repro holds, before clustering: no id here (the root cause's id is the clustered key's, in
    # `ofuzz bugs`; an id of this raw key disagreed with it and misled hand triage 6)
    info["root"] = {k: v for k, v in root.to_json().items() if k != "id"}
    facts = facts_of(red_model, info.get("witnesses"), trigger_ops(root.attrs) if root.message in SHOWN_TRIGGERS else None)
    info["facts"] = facts.to_json()  # what the clustering asks of the repro (repro_facts.py)
    _final_class(case, info, root, red_model, red_feeds, value_engine)
    laps.lap("class")
    if info.get("klass") == BUG and "family_test" not in info:  # an engine family's hypothesis, tested on this repro (the clustering reads the record)
        tested = run_family_test(case.pool, red_model, red_feeds, case.engine, case.policy, case.hit.status, root,
                                 (info.get("versions") or {}).get(case.engine), facts.one_node or facts.trigger_node)
        if tested is not None:
            info["family_test"] = tested
    laps.lap("family")
    if rewrite is not None and depth == 0:
        info["revealed"] = revealed_behind(case, rewrite, budget)
        laps.lap("revealed")
    info["timing"].update(reduce=reduction["seconds"], write=round(time.perf_counter() - t1, 2), total=round(time.perf_counter() - t0, 2), write_parts=laps.seconds)
    return _record(out, info)


def _rejudged(pool: EnginePool, specs: dict[str, EngineSpec], finding: dict[str, Any], model: onnx.ModelProto, inputs: dict[str, np.ndarray],
              out: Path, policy: Policy, opinions: SecondOpinions | None, t0: float) -> Case | dict[str, Any]:
    """The finding re-judged with the full policy (twice before it is unconfirmed), on the mode its users run when it
    fails to convert there too; a Case to reduce, or the finding.json of one that is not a bug."""
    engine = finding["engine"]
    judged = judge_model(pool, model, out / "original.onnx", inputs, policy=policy, skip=_skip_for(pool, finding))
    hit, reruns = _hit(judged, finding), 1
    if hit is None and Signature.parse(finding["signature"]).kind != "timeout":
        # once more before calling it unconfirmed: in the seed-76 export MNN failed to convert two models it had run in
        # the campaign and ran again a moment later (their DCFs, Softmax and LpNormalization, were lost); not a hang,
        # whose re-run costs the engine's whole limit
        judged = judge_model(pool, model, out / "original.onnx", inputs, policy=policy, skip=_skip_for(pool, finding))
        hit, reruns = _hit(judged, finding), 2
    base = {"engine": engine, "status": finding["status"], "signature": finding["signature"], "op": finding.get("op"),
            "first_idx": finding.get("first_idx"), "first_model": finding.get("first_model"), "variant": finding.get("variant", 0),
            "summary": finding["summary"], "versions": pool.versions(), "excluded": judged.verdict.excluded,
            "reruns": reruns, "timing": {"rejudge": round(time.perf_counter() - t0, 2)}, **finding.get("extra", {})}
    if hit is None:
        now = judged.verdict.results.get(engine)
        return {**base, "klass": UNCONFIRMED, "status_on_rerun": now.status if now else "?"}
    base.update({"klass": hit.klass, "rerun_signature": hit.signature, "class_detail": _class_detail(hit)})
    if hit.klass != BUG:
        return base
    step = judged.verdict.results[engine].outcome
    # a hang is a defect in whichever mode it happens, and judging it in the other mode would cost a second engine timeout
    hang = getattr(step, "kind", "") == "timeout"
    if hang and (getattr(step, "starved", None) or 0.0) >= STARVED:
        # the engine was runnable but had no CPU most of the time: the machine was busy, the engine need not hang
        return {**base, "klass": UNCONFIRMED, "status_on_rerun": f"timeout, waiting for a CPU {step.starved:.0%} of the time"}
    case = Case(pool, specs, finding, model, inputs, out, policy, opinions, judged, hit, engine, base, hang,
                specs[engine].second_opinion if engine in specs else "")
    moved = (_in_users_mode(opinions, case.second, pool, engine, model, out / "original.onnx", inputs, hit, policy)
             if hit.status == MCF and not hang else None)
    if moved is not None:  # reduced, exported and keyed on the mode its users run (see second_opinion.py)
        case.pool, case.judged, case.hit = moved
        case.specs = {**specs, case.second: opinions.specs[case.second]}  # type: ignore[union-attr]
        base.update({"engine": case.second, "campaign_engine": engine, "versions": case.pool.versions(), "rerun_signature": case.hit.signature})
        case.engine = case.second
    return case


Reduction = tuple[onnx.ModelProto, dict[str, np.ndarray], Judged | None, dict[str, Any], str]


def _both_wrong(opinions: SecondOpinions, second: str, engine: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], judged: Judged) -> set[str]:
    """The outputs of the model that `engine` and its users' mode `second` both get wrong."""
    expected = _expected(judged)
    mine = judged.verdict.results.get(engine)
    if not expected or mine is None or mine.outcome is None or not mine.outcome.outputs:
        return set()
    engine_wrong = {n for n in expected if n not in mine.outcome.outputs or not RULE.compare_outputs({n: mine.outcome.outputs[n]}, expected, [n]).ok}
    return engine_wrong & (opinions.wrong_outputs(second, model, feeds, expected) or set())


def _expected(judged: Judged) -> dict[str, np.ndarray]:
    """The expected outputs of a verdict (its expected_from engine's)."""
    r = judged.verdict.results.get(judged.verdict.expected_from)
    return dict(r.outcome.outputs) if r is not None and r.outcome is not None and r.outcome.outputs else {}


def _reduced(case: Case, budget: float) -> Reduction:
    """The reduced repro (from the node alone when isolation already cut it), its verdict if the reducer has it, the
    reduction's record and the engine whose values the reduction's cuts are fed with."""
    judged, hit, engine, model = case.judged, case.hit, case.engine, case.model
    must_agree = {e for e, r in judged.verdict.results.items() if r.status == DCP and e not in judged.verdict.excluded}
    iso = judged.isolated.get(engine)
    start_model, start_feeds = model, case.inputs
    start_node = ((judged.verdict.diverging or {}).get(engine) or {}).get("node")
    if hit.status == DCF and iso is not None and iso.verdict == DEFECT and iso.model is not None:
        start_model, start_feeds, start_node = iso.model, iso.feeds, None  # the node alone already shows it
    elif start_node is None and hit.detail.get("failed_nodes"):
        start_node = hit.detail["failed_nodes"][-1]  # the engine named the node it failed on
    elif start_node is None and hit.op:
        start_node = next((n.name for n in model.graph.node if n.op_type == hit.op), None)
    # a failure's sub-models need values from any engine that ran the model, even one outside the majority (the
    # target is the failure, not the values); a divergence needs the majority's
    ran = {e for e, r in judged.verdict.results.items() if r.status in (DCP, DCF) and e != engine and e not in judged.verdict.excluded}
    took = _seconds(judged)  # a voter far slower on this model than the others is asked last
    value_engine = value_source(must_agree or (ran if hit.status != DCF else set()), min(must_agree or ran, default=engine), took)
    # the cheap pass's voters: a failure is blamed only when someone else runs the model, so with no agreeing majority
    # (the others split) the engines that ran stand in; with none at all, only the blamed engine ran and nothing matched
    voters = ran if hit.status != DCF else set()
    reduction: dict[str, Any] = {"nodes_before": len(model.graph.node), "nodes_after": len(start_model.graph.node), "seconds": 0.0, "checks": 0}
    if case.hang:
        reduction["note"] = "hangs are not reduced (each check would cost the engine's timeout)"
        # repro.py waits a quarter longer than the engine's limit, which the campaign and the re-run each saw pass (the
        # export does not run it a third time: see check_repro)
        case.base["hang_after"] = round(HANG_WAIT * max(judged.verdict.results[engine].outcome.time, 1.0), 1)
        return start_model, start_feeds, judged, reduction, value_engine  # its re-run just now is its verdict
    if budget <= 0:
        return start_model, start_feeds, None, reduction, value_engine
    red = reduce_model(case.pool, start_model, start_feeds, Target.of(hit), value_engine, budget=budget, start_node=start_node,
                       policy=case.policy, must_agree=must_agree,
                       cheap=set(pick_voters(sorted(must_agree or voters), engine, judged.verdict.excluded, seconds=took)),
                       focus=hit.detail.get("failed_nodes") or ([start_node] if start_node and hit.status != DCF else None))
    reduction = {"nodes_before": len(model.graph.node), "nodes_after": red.nodes_after, "seconds": round(red.seconds, 2), "checks": red.checks,
                 "one_minimal": red.one_minimal, "isolated_first": start_model is not model,
                 "passes": {k: vars(v) for k, v in red.passes.items()}, "log": red.log[:30],
                 **({"drop_fixes": red.drop_fixes} if red.drop_fixes else {})}
    return red.model, red.inputs, red.judged, reduction, value_engine


def _seconds(judged: Judged) -> dict[str, float]:
    """What each engine took on the judged model (prepare and run)."""
    return {e: r.prepare_time + r.run_time for e, r in judged.verdict.results.items()}


def _keyed(case: Case, info: dict[str, Any], model: onnx.ModelProto, feeds: dict[str, np.ndarray], value_engine: str) -> tuple[RootKey, Any]:
    """The reduced repro's root key: upstream of a sink that runs fine alone, or by the trigger a rewrite showed (the
    rewrite is returned, to look for what it uncovers in the original model)."""
    hit, engine, opinions, second = case.hit, case.engine, case.opinions, case.second
    key = _root_key(engine, hit, case.judged, info, model, feeds)
    # not for a hang: its model is not reduced and each witness check could wait the engine's whole limit (a seed-30
    # onnx2tf hang spent 96 s there and was keyed `upstream Mul`, as if the hang were a bad tensor handed on)
    if hit.status != DCF and not crash_like(key.failure) and not case.hang and len(model.graph.node) >= 2:
        users = ((lambda m, f: opinions.runs(second, m, f) is not False)  # type: ignore[union-attr]
                 if opinions is not None and second and engine != second else None)
        seen_by = witnesses(case.pool, model, feeds, engine, value_engine, users)
        if seen_by:  # the failing sink runs alone: it only shows a defect upstream, which is the root cause
            info["witnesses"] = [model.graph.node[i].op_type for i in seen_by]
            key = _upstream_key(case, info, key, model, feeds, seen_by, value_engine, users)
    if case.hang:
        return key, None
    return _triggered_key(case, info, key, model, feeds)


def _upstream_key(case: Case, info: dict[str, Any], key: RootKey, model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                  seen_by: list[int], value_engine: str, users: Any) -> RootKey:
    """The key of a failure whose witnesses run right alone: `upstream` of its culprits, or the culprit→witness pattern
    when an Identity between them makes the engine right (the converter rewrites the pair). Of an upstream key with
    several culprits, which of them fail alone is recorded: `upstream-superset` joins it to a smaller upstream root
    cause only when its extra operators run alone (they only carry the bad tensor on)."""
    culprits_model = without(model, seen_by)
    edges = needs_adjacency(model, feeds, seen_by, lambda m, f: goes_away(case.pool, m, f, case.engine, case.policy, DCF))
    if edges:
        info["adjacency"] = {"edges": edges, "rewrite": "identity_between",
                             "engine_gave": f"{case.engine} runs the repro right with an Identity on each edge"}
        return pattern_key(upstream_of(key, culprits_model), culprits_model, edges)
    culprits = [i for i in range(len(model.graph.node)) if i not in seen_by]
    if len(culprits) >= 2:
        lines: dict[str, str] = {}  # and the line the one culprit failing alone fails at (merge rule upstream-culprit-line)
        info["culprits_failing_alone"] = failing_alone(case.pool, model, feeds, culprits, case.engine, value_engine, users, lines)
        if len(info["culprits_failing_alone"] or []) == 1 and lines:
            info["culprit_where"] = next(iter(lines.values()))
    elif culprits:  # one culprit: the wrong tensor it hands on may be an engine family's (its test, on the culprit alone)
        tested = run_culprit_family_test(case.pool, model, feeds, culprits[0], case.engine, value_engine, case.policy,
                                         case.pool.versions().get(case.engine))
        if tested is not None:
            info["family_test"] = tested
        else:  # or the engine does not read one of its attributes: keyed by that in _triggered_key
            ignores = culprit_ignored_attribute(case.pool, model, feeds, culprits[0], case.engine, value_engine, case.policy)
            if ignores is not None:
                info["culprit_ignores"] = ignores
    return upstream_of(key, culprits_model)


def _triggered_key(case: Case, info: dict[str, Any], key: RootKey, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[RootKey, Any]:
    """The key by the trigger a rewrite of the repro shows (an omitted default written out at its prose or schema
    default, a shorthand spelled out), with the rewrite; the key unchanged and None when no rewrite makes it go."""
    pool, engine, policy, status = case.pool, case.engine, case.policy, case.hit.status
    crashed, shape = crash_like(key.failure), status == DCF and key.failure == "shape"
    wrote = omitted_defaults_trigger(pool, model, feeds, engine, policy, status, crashed, shape)
    if wrote:  # written out at their spec defaults, the engine runs it and agrees: the omission is the root cause
        info["trigger"] = {"omitted": wrote}
        return omitted_default_key(key, wrote), ("omitted", wrote)
    if (status == DCF and key.failure in ("shape", "value") and len(model.graph.node) == 1) or key.failure == UPSTREAM:
        wrote = schema_defaults_trigger(pool, model, feeds, engine, policy, shape, status)
        if wrote:  # written out at their schema defaults, the engine agrees: it has the default wrong
            info["trigger"] = {"schema_default": wrote}
            return schema_default_key(key, wrote), ("schema_default", wrote)
    spelled = (auto_pad_trigger(pool, model, feeds, engine, policy, status, crashed, shape)
               or slice_axes_trigger(pool, model, feeds, engine, policy, status, crashed, shape)
               or slice_steps_trigger(pool, model, feeds, engine, policy, status, crashed, shape)
               or resize_axes_trigger(pool, model, feeds, engine, policy, status, crashed, shape)
               or reduce_axes_trigger(pool, model, feeds, engine, policy, status, crashed, shape)
               or negative_axes_trigger(pool, model, feeds, engine, policy, status, crashed, shape))
    if spelled:  # with the explicit pads auto_pad stands for, the engine runs it and agrees: auto_pad is the root cause
        info["trigger"] = {"spelled_out": spelled}
        return spelled_out_key(key, spelled), ("spelled_out", spelled)
    if status == DCF and key.failure in ("shape", "value", "nan", "inf") and len(model.graph.node) == 1:
        ignored, seen = ignored_attribute_trigger(pool, model, feeds, engine, policy)
        if ignored:  # set to each value the spec allows, the engine's output stays while the expected one moves
            info["trigger"] = {"ignored": ignored, **seen}
            return ignored_attribute_key(key, ignored), ("ignored", [f"{ignored[0]}={seen['right_as_if']}"])
    if key.failure == UPSTREAM and info.get("culprit_ignores"):  # shown on the culprit alone (triggers.culprit_ignored_attribute)
        seen = info["culprit_ignores"]
        info["trigger"] = seen
        return ignored_attribute_key(key, seen["ignored"]), ("ignored", [f"{seen['ignored'][0]}={seen['right_as_if']}"])
    return key, None


def _final_class(case: Case, info: dict[str, Any], key: RootKey, model: onnx.ModelProto, feeds: dict[str, np.ndarray], value_engine: str) -> None:
    """What the reduced repro makes of the finding: undefined (it passes through a value the spec leaves undefined),
    mode-only (the users' mode gets it right), or unconfirmed (repro.py does not show it)."""
    hit, opinions, second = case.hit, case.opinions, case.second
    if hit.status == IF or (hit.status != DCF and crash_like(key.failure)):  # a refusal to convert seldom depends on values
        und = undefined_on_the_way(case.pool, model, feeds, value_engine, case.policy.noise)
        if und is not None:  # it fails on a value the spec does not define (NaN cast to int64, then Mod by -1)
            info["klass"], info[UNDEFINED], info["class_detail"] = UNDEFINED, und, {UNDEFINED: und}
    if info.get("klass") != UNDEFINED and opinions is not None and second and hit.status in (DCF, IF) and (case.out / "expected.npz").is_file():
        agreed = opinions.agrees(second, model, feeds, load_npz(case.out / "expected.npz"))
        if agreed:
            both = _both_wrong(opinions, second, case.engine, case.model, case.inputs, case.judged) if model is not case.model else set()
            if both:  # the reduction lost the users' mode's failure, not the defect: the original shows both modes wrong
                info["users_mode_too"] = (f"{second} (the mode its users run) runs the reduced repro right but gets the original "
                                          f"model's {', '.join(sorted(both))} wrong too (original.onnx)")
            else:
                info["klass"] = MODE_ONLY
                info["mode_only"] = f"{second} (the same engine as its users run it) runs the reduced repro and matches the expected outputs"
        elif agreed is False:
            _users_mode_where(info, key, model, opinions.last_failure())
    if str(info.get("repro_check", "")).startswith("not reproduced"):
        # the exported repro, run on its own, does not show it: not counted as a bug (the folder stays, to look at)
        info["klass"], info["unconfirmed_because"] = UNCONFIRMED, "repro.py does not reproduce it in a fresh process"


def _users_mode_where(info: dict[str, Any], key: RootKey, model: onnx.ModelProto, failed: tuple[str, list[str]] | None) -> None:
    """Record the converter line a failing repro (IF, or a node that raised) also fails at in the users' mode, when the
    node it fails on there is one of the key's operators: the same converter's handler failing at one line in both
    modes is one defect (hand triage 25: onnx2tf's ReverseSequence.py:79, a run failure of the keep-shape mode and a
    conversion failure of the default one). A wrong value or shape is not joined that way: the users' mode raising on
    it says nothing of which mistake gave the value."""
    if failed is None or not failed[0] or not (key.status == IF or key.failure == "failure"):
        return
    ops = {n.op_type for n in model.graph.node if n.name in set(failed[1])}
    if ops & set(key.ops):
        info["users_mode_where"] = failed[0]


def revealed_behind(case: Case, rewrite: tuple[str, list[str]], budget: float) -> dict[str, Any] | None:
    """A trigger rewrite removes the *first* failure of the finding's model; another defect of the same model may still
    be there (hand triage: MNN's bidirectional GRU and MaxPool-with-Indices sat behind the pools-without-strides crash).
    The same rewrite applied to the original model, re-judged: if the engine still has a bug there, it is triaged as a
    finding of its own (folder `<id>~rN`), reduced and keyed alone. Returns what was found (None: nothing behind)."""
    kind, wrote = rewrite
    rewritten = rewrite_original(case.model, kind, wrote, case.inputs)
    if rewritten is None:
        return None
    out = case.out.parent / revealed_folder(case.fid)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rewritten.onnx"
    onnx.save(rewritten, str(path))
    judged = judge_model(case.pool, rewritten, path, case.inputs, policy=case.policy, skip=_all_but_voters(case.pool, case.engine, "a rewrite's check"))
    hit = next((f for f in judged.findings if f.engine == case.engine and f.klass == BUG), None)
    if hit is None or not some_engine_matches_declared(judged, declared_shapes(rewritten)):  # declared shapes no engine gives: invalid
        shutil.rmtree(out, ignore_errors=True)
        return None
    moved = {"campaign_engine": case.base["campaign_engine"]} if case.base.get("campaign_engine") else {}
    row = {**case.finding, "engine": case.engine, "signature": hit.signature, "status": hit.status, "op": hit.op, "summary": hit.summary,
           "variant": 0, "extra": {"revealed_behind": {"finding": case.fid, "rewrite": {kind: wrote}}, **moved}}  # in the pool it was judged in
    info = triage_finding(case.pool, case.specs, row, path, case.inputs, out, budget, case.policy, None, case.opinions, depth=1)
    return {"folder": out.name, "signature": hit.signature, "klass": info.get("klass")}


def revealed_folder(fid: str) -> str:
    """The folder of a defect revealed behind finding `fid`'s trigger: `<id>~r1` behind a signature's first model,
    `<id>~r{k+1}` behind its k-th further model `<id>~k` (both were once `~r1`, and two export pools then wrote one
    folder at once: the seed-56 export lost one of them to a FileNotFoundError)."""
    base, _, variant = fid.partition("~")
    return f"{base}~r{int(variant or 0) + 1}"


def _in_users_mode(opinions: SecondOpinions | None, second: str, pool: EnginePool, engine: str, model: onnx.ModelProto, path: Path,
                   inputs: dict[str, np.ndarray], hit: Finding, policy: Policy) -> tuple[EnginePool, Judged, Finding] | None:
    """The pool, verdict and finding of a failure to convert judged on the engine's `second` opinion (the same converter
    as its users run it) beside the campaign's cheap voters, when that mode alone fails with the same message; else None
    (the finding is reduced where it was found)."""
    if opinions is None or not second:
        return None
    voters = [pool.specs[e] for e in pick_voters(pool.names, engine, limit=2) if e in pool.specs and pool.families.get(e) != pool.families.get(engine)]
    users = opinions.pool_with(second, voters)
    if users is None:
        return None
    judged = judge_model(users, model, path, inputs, policy=policy)
    want = Target.of(hit).key
    same = next((f for f in judged.findings if f.engine == second and f.status == hit.status and f.klass == BUG and Target.of(f).key == want), None)
    return (users, judged, same) if same is not None else None


def export(spec_by_name: dict[str, EngineSpec], finding: dict[str, Any], model_path: Path, inputs: dict[str, np.ndarray], out: Path,
           reduce_budget: float = 60.0, pool: EnginePool | None = None, policy: Policy | None = None) -> Path:
    """Re-judge the finding's model, classify it, reduce it if it is a bug, and write its folder (see `triage`).

    Pass a started `pool` to reuse its workers across findings: starting the
    engines (TensorFlow alone takes ~3 s) used to cost more than the reduction.
    """
    out.mkdir(parents=True, exist_ok=True)
    if pool is None:
        try:
            with EnginePool(list(spec_by_name.values()), out / ".pool") as own:
                own.start()
                return export(spec_by_name, finding, model_path, inputs, out, reduce_budget, own, policy)
        finally:
            shutil.rmtree(out / ".pool", ignore_errors=True)
    triage_finding(pool, spec_by_name, finding, model_path, inputs, out, reduce_budget, policy or Policy.default())
    return out


def _root_key(engine: str, hit: Finding, judged: Judged, info: dict[str, Any], model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> RootKey:
    """The key of the reduced repro, with its failure class as the repro itself shows it (the original's category
    or message could differ: a 'nan' finding whose repro fails on values is a 'value' root cause)."""
    now = info.get("repro_failure") or {}
    if now.get("status") == hit.status:
        failure = failure_of(hit.status, now.get("category", ""), now.get("kind", ""), now.get("etype", ""))
    else:
        sig = Signature.parse(hit.signature)
        outcome = judged.verdict.results[engine].outcome
        category = (hit.detail.get("diverging") or {}).get("category") or sig.kind
        failure = failure_of(hit.status, category, getattr(outcome, "kind", ""), getattr(outcome, "etype", "") or getattr(outcome, "signal", ""))
    return key_of(engine, hit.status, failure, model, feeds)


def _skip_for(pool: EnginePool, finding: dict[str, Any]) -> dict[str, str]:
    """A value divergence is confirmed against the cheap engines (reference, onnxruntime, ...): a TensorFlow
    conversion per re-run cost more than the rest of the triage.  Failures (IF/MCF) re-run everything."""
    if finding["status"] != DCF or "+" in finding["engine"]:
        return {}
    return _all_but_voters(pool, finding["engine"], "not needed to confirm a value divergence")


def _class_detail(hit: Finding) -> dict[str, Any]:
    d = hit.detail
    for k in (UNDEFINED, "gap", "operand_order"):
        if k in d:
            return {k: d[k]}
    iso = d.get("isolation")
    return {"isolation": {k: iso.get(k) for k in ("verdict", "op", "node", "note", "tried", "first") if k in iso}} if iso else {}


def _record(out: Path, info: dict[str, Any]) -> dict[str, Any]:
    (out / FINDING).write_text(json.dumps(info, indent=1, default=str))
    return info
