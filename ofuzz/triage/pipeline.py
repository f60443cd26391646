"""Triage: turn a campaign's raw findings into root causes a maintainer can trust.

For each finding (one signature), in long-lived engine pools:
1. re-judge its first model with the full policy (isolation check, noise
   classes, reference gaps); a finding that does not come back is
   `unconfirmed` and not counted;
2. a finding whose class is not `bug` (drift, unsupported, undefined, split)
   is recorded with its reason and not reduced;
3. a bug is reduced, unless a finding with the same pre-key (engine, status,
   isolated operator and its string-valued modes, or the same signature) is
   already the representative of its cluster: then it is attached to it;
4. `cluster` keys every representative by its reduced repro (`rootcause`) and
   writes the root causes to the store, ranked by severity.
Everything is recomputed from the raw signatures, which are never changed.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx

from ofuzz.core import onnx_guard
from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.exec.engines.client import STEP_LIMIT
from ofuzz.judge.isolate import DEFECT
from ofuzz.judge.judging import BUG, SPLIT, UNDEFINED, Finding, Judged, Policy, judge_in_memory, judge_model
from ofuzz.judge.localise import pick_voters, value_source
from ofuzz.judge.oracle import DCF, DCP
from ofuzz.triage.reduce import Target, reduce_model
from ofuzz.triage.repro import write_repro
from ofuzz.triage.rootcause import (SHOWN_TRIGGERS, UPSTREAM, WELL_REDUCED, RootKey, coarsen, crash_like, crash_or_hang,
                             failure_of, key_of, omitted_default_key, omitted_input_key, schema_default_key, spelled_out_key, upstream_of)
from ofuzz.core.npz import load_npz
from ofuzz.core.prose_defaults import auto_pad_written_out, schema_defaults_written_out, written_out
from ofuzz.exec.runner import EnginePool
from ofuzz.triage.second_opinion import MODE_ONLY, SecondOpinions
from ofuzz.judge.signature import Signature, finding_id
from ofuzz.triage.undefined_path import undefined_on_the_way
from ofuzz.triage.witness import hands_on_unknown_shape, peeled_nodes, without, witnesses

UNCONFIRMED = "unconfirmed"
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
    if hit.status == "DCF":
        iso = judged.isolated.get(hit.engine)
        modes = sorted(f"{k}={v}" for k, v in (iso.info.get("attrs", {}) if iso is not None else {}).items() if isinstance(v, str))
        return json.dumps([hit.engine, "DCF", (iso.info.get("category") if iso is not None else ""), hit.op, modes])
    return hit.signature


def _hit(judged: Judged, finding: dict[str, Any]) -> Finding | None:
    """The re-run's finding that is this one: same signature, else same engine and status; a blame
    that the current oracle turns into a no-majority split comes back as that split."""
    same = next((f for f in judged.findings if f.signature == finding["signature"]), None)
    same = same or next((f for f in judged.findings if f.engine == finding["engine"] and f.status == finding["status"]), None)
    if same is None and STEP_LIMIT in finding["signature"]:  # cut short in the campaign: whatever the full limit shows
        same = next((f for f in judged.findings if f.engine == finding["engine"]), None)
    if same is None and finding["status"] == "DCF" and judged.verdict.split:
        same = next((f for f in judged.findings if f.klass == SPLIT and finding["engine"] in f.engine.split("+")), None)
    return same


def triage_finding(pool: EnginePool, spec_by_name: dict[str, EngineSpec], finding: dict[str, Any], model_path: Path,
                   inputs: dict[str, np.ndarray], out: Path, budget: float, policy: Policy, reps: Representatives | None = None,
                   opinions: SecondOpinions | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    model = onnx.load(str(model_path))
    shutil.copyfile(model_path, out / "original.onnx")
    engine = finding["engine"]
    judged = judge_model(pool, model, out / "original.onnx", inputs, policy=policy, skip=_skip_for(pool, finding))
    hit = _hit(judged, finding)
    reruns = 1
    if hit is None and Signature.parse(finding["signature"]).kind != "timeout":
        # once more before calling it unconfirmed: in the seed-76 export MNN failed to convert two models it had run in
        # the campaign and ran again a moment later (their DCFs, Softmax and LpNormalization, were lost); not a hang,
        # whose re-run costs the engine's whole limit
        judged = judge_model(pool, model, out / "original.onnx", inputs, policy=policy, skip=_skip_for(pool, finding))
        hit, reruns = _hit(judged, finding), 2
    base = {"engine": engine, "status": finding["status"], "signature": finding["signature"], "op": finding.get("op"),
            "first_idx": finding.get("first_idx"), "first_model": finding.get("first_model"), "variant": finding.get("variant", 0),
            "summary": finding["summary"], "versions": pool.versions(), "excluded": judged.verdict.excluded,
            "reruns": reruns, "timing": {"rejudge": round(time.perf_counter() - t0, 2)}}
    if hit is None:
        now = judged.verdict.results.get(engine)
        return _record(out, {**base, "klass": UNCONFIRMED, "status_on_rerun": now.status if now else "?"})
    base.update({"klass": hit.klass, "rerun_signature": hit.signature, "class_detail": _class_detail(hit)})
    if hit.klass != BUG:
        return _record(out, base)
    step = judged.verdict.results[engine].outcome
    # a hang is a defect in whichever mode it happens, and judging it in the other mode would cost a second engine timeout
    hang = getattr(step, "kind", "") == "timeout"
    if hang and (getattr(step, "starved", None) or 0.0) >= STARVED:
        # the engine was runnable but had no CPU most of the time: the machine was busy, the engine need not hang
        return _record(out, {**base, "klass": UNCONFIRMED, "status_on_rerun": f"timeout, waiting for a CPU {step.starved:.0%} of the time"})
    second = spec_by_name[engine].second_opinion if engine in spec_by_name else ""
    moved = (_in_users_mode(opinions, second, pool, engine, model, out / "original.onnx", inputs, hit, policy)
             if hit.status == "MCF" and not hang else None)
    if moved is not None:  # reduced, exported and keyed on the mode its users run (see second_opinion.py)
        pool, judged, hit = moved
        spec_by_name = {**spec_by_name, second: opinions.specs[second]}  # type: ignore[union-attr]
        base.update({"engine": second, "campaign_engine": engine, "versions": pool.versions(), "rerun_signature": hit.signature})
        engine = second
    key = pre_key(hit, judged)
    fid = finding_id(finding["signature"]) + (f"~{finding['variant']}" if finding.get("variant") else "")
    # a further model of a signature is reduced to see which operators its message hides, unless the engine named it
    named = hit.status != DCF and hit.op not in (None, "?")
    rep = reps.claim(key, fid) if reps is not None and (not finding.get("variant") or named) else None
    if rep is not None:
        return _record(out, {**base, "attached_to": rep, "pre_key": key})
    must_agree = {e for e, r in judged.verdict.results.items() if r.status == DCP and e not in judged.verdict.excluded}
    iso = judged.isolated.get(engine)
    start_model, start_feeds = model, inputs
    start_node = ((judged.verdict.diverging or {}).get(engine) or {}).get("node")
    if hit.status == "DCF" and iso is not None and iso.verdict == DEFECT and iso.model is not None:
        start_model, start_feeds, start_node = iso.model, iso.feeds, None  # the node alone already shows it
    elif start_node is None and hit.detail.get("failed_nodes"):
        start_node = hit.detail["failed_nodes"][-1]  # the engine named the node it failed on
    elif start_node is None and hit.op:
        start_node = next((n.name for n in model.graph.node if n.op_type == hit.op), None)
    # a failure's sub-models need values from any engine that ran the model, even one outside the majority (the
    # target is the failure, not the values); a divergence needs the majority's
    ran = {e for e, r in judged.verdict.results.items() if r.status in (DCP, DCF) and e != engine and e not in judged.verdict.excluded}
    value_engine = value_source(must_agree or (ran if hit.status != "DCF" else set()), min(must_agree or ran, default=engine))
    # the cheap pass's voters: a failure is blamed only when someone else runs the model, so with no agreeing majority
    # (the others split) the engines that ran stand in; with none at all, only the blamed engine ran and nothing matched
    voters = ran if hit.status != DCF else set()
    reduction: dict[str, Any] = {"nodes_before": len(model.graph.node), "nodes_after": len(start_model.graph.node), "seconds": 0.0, "checks": 0}
    red_model, red_feeds, red_judged = start_model, start_feeds, None
    outcome = judged.verdict.results[engine].outcome
    if hang:
        budget = 0  # every check of a hang costs the engine's whole timeout: keep the model as found
        reduction["note"] = "hangs are not reduced (each check would cost the engine's timeout)"
        # repro.py waits a quarter longer than the engine's limit, which the campaign and the re-run each saw pass (the
        # export does not run it a third time: see check_repro)
        base["hang_after"] = round(HANG_WAIT * max(outcome.time, 1.0), 1)
        red_judged = judged  # the model stays as found: its re-run just now is its verdict (not a second engine timeout)
    if budget > 0:
        red = reduce_model(pool, start_model, start_feeds, Target.of(hit), value_engine, budget=budget, start_node=start_node,
                           policy=policy, must_agree=must_agree, cheap=set(pick_voters(sorted(must_agree or voters), engine, judged.verdict.excluded)),
                           focus=hit.detail.get("failed_nodes") or ([start_node] if start_node and hit.status != DCF else None))
        reduction = {"nodes_before": len(model.graph.node), "nodes_after": red.nodes_after, "seconds": round(red.seconds, 2), "checks": red.checks,
                     "one_minimal": red.one_minimal, "isolated_first": start_model is not model,
                     "passes": {k: vars(v) for k, v in red.passes.items()}, "log": red.log[:30]}
        red_model, red_feeds, red_judged = red.model, red.inputs, red.judged
    t1 = time.perf_counter()
    info = write_repro(out, pool, spec_by_name, {**finding, "engine": engine, "op": hit.op or finding.get("op")}, red_model, red_feeds, reduction, policy,
                       {**base, "pre_key": key}, red_judged)
    key = _root_key(engine, hit, judged, info, red_model, red_feeds)
    if hit.status != DCF and not crash_like(key.failure) and len(red_model.graph.node) >= 2:
        users = ((lambda m, f: opinions.runs(second, m, f) is not False)  # type: ignore[union-attr]
                 if opinions is not None and second and engine != second else None)
        seen_by = witnesses(pool, red_model, red_feeds, engine, value_engine, users)
        if seen_by:  # the failing sink runs alone: it only shows a defect upstream, which is the root cause
            info["witnesses"] = [red_model.graph.node[i].op_type for i in seen_by]
            key = upstream_of(key, without(red_model, seen_by))
    crashed = crash_like(key.failure)
    wrote = [] if hang else omitted_defaults_trigger(pool, red_model, red_feeds, engine, policy, hit.status, crashed)
    if wrote:  # written out at their spec defaults, the engine runs it and agrees: the omission is the root cause
        info["trigger"] = {"omitted": wrote}
        key = omitted_default_key(key, wrote)
    if not wrote and not hang and hit.status == DCF and key.failure == "shape" and len(red_model.graph.node) == 1:
        wrote = schema_defaults_trigger(pool, red_model, red_feeds, engine, policy)
        if wrote:  # written out at their schema defaults, the engine agrees: it has the default wrong
            info["trigger"] = {"schema_default": wrote}
            key = schema_default_key(key, wrote)
    spelled = [] if hang or wrote else auto_pad_trigger(pool, red_model, red_feeds, engine, policy, hit.status, crashed)
    if spelled:  # with the explicit pads auto_pad stands for, the engine runs it and agrees: auto_pad is the root cause
        info["trigger"] = {"spelled_out": spelled}
        key = spelled_out_key(key, spelled)
    # what the reduced repro holds, before clustering: no id here (the root cause's id is the clustered key's, in
    # `ofuzz bugs`; an id of this raw key disagreed with it and misled hand triage 6)
    info["root"] = {k: v for k, v in key.to_json().items() if k != "id"}
    if hit.status == "IF" or (hit.status != DCF and crash_like(key.failure)):  # a refusal to convert seldom depends on values
        und = undefined_on_the_way(pool, red_model, red_feeds, value_engine, policy.noise)
        if und is not None:  # it fails on a value the spec does not define (NaN cast to int64, then Mod by -1)
            info["klass"], info["undefined"], info["class_detail"] = UNDEFINED, und, {"undefined": und}
    if info.get("klass") != UNDEFINED and opinions is not None and second and hit.status in (DCF, "IF") and (out / "expected.npz").is_file():
        if opinions.agrees(second, red_model, red_feeds, load_npz(out / "expected.npz")):
            info["klass"] = MODE_ONLY
            info["mode_only"] = f"{second} (the same engine as its users run it) runs the reduced repro and matches the expected outputs"
    if str(info.get("repro_check", "")).startswith("not reproduced"):
        # the exported repro, run on its own, does not show it: not counted as a bug (the folder stays, to look at)
        info["klass"], info["unconfirmed_because"] = UNCONFIRMED, "repro.py does not reproduce it in a fresh process"
    info["timing"].update({"reduce": reduction["seconds"], "write": round(time.perf_counter() - t1, 2), "total": round(time.perf_counter() - t0, 2)})
    return _record(out, info)


def omitted_defaults_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str,
                             policy: Policy, status: str, crashed: bool = False) -> list[str]:
    """The omitted prose-default attributes ("MaxPool.strides", see prose_defaults) a reduced repro's failure needs:
    written out at their defaults, `engine` runs the repro (a failure, `status` IF/MCF) or also agrees with two voters
    (a wrong value). All of them first, then each attribute alone, to name the one that matters (the pools' strides,
    not their pads). Empty when nothing was omitted or it still fails."""
    def fixes(only: set[str] | None) -> list[str]:
        fixed, wrote = written_out(model, only)
        return wrote if wrote and _goes_away(pool, fixed, feeds, engine, policy, status, crashed) else []

    every = fixes(None)
    names = sorted({w.split(".", 1)[1] for w in every})
    alone = [w for name in names for w in fixes({name})] if len(names) > 1 else []
    return alone or every


def schema_defaults_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str,
                            policy: Policy) -> list[str]:
    """The omitted schema-default attributes ("ReduceSumSquare.keepdims") a one-node repro's wrong shape needs: with them
    written at their defaults (see prose_defaults.schema_defaults_written_out) `engine` agrees with two voters. All of
    them first, then each alone, to name the one that matters. Only for a wrong shape, where a misread default
    (keepdims, axis) shows, so the export spends one extra judgement on few findings; empty when nothing was omitted or
    it still fails."""
    def fixes(only: set[str] | None) -> list[str]:
        fixed, wrote = schema_defaults_written_out(model, only)
        return wrote if wrote and _goes_away(pool, fixed, feeds, engine, policy, DCF) else []

    every = fixes(None)
    alone = [w for name in every for w in fixes({name})] if len(every) > 1 else []
    return alone or every


def auto_pad_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy,
                     status: str, crashed: bool = False) -> list[str]:
    """The auto_pad shorthands ("AveragePool.auto_pad=SAME_LOWER") a reduced repro's failure needs: with the explicit pads
    they stand for, `engine` runs it (a failure) or also agrees with two voters (a wrong value). Empty otherwise."""
    if not any(a.name == "auto_pad" and a.s in (b"SAME_UPPER", b"SAME_LOWER") for n in model.graph.node for a in n.attribute):
        return []
    inferred = onnx_guard.inferred(model, strict=False, check=False)
    if inferred is None:
        return []
    shapes = {vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
              for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]}
    shapes.update({k: tuple(np.shape(v)) for k, v in feeds.items()})
    fixed, wrote = auto_pad_written_out(model, shapes)
    return wrote if wrote and _goes_away(pool, fixed, feeds, engine, policy, status, crashed) else []


def _goes_away(pool: EnginePool, fixed: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy, status: str,
               crashed: bool = False) -> bool:
    """Does `engine` run the rewritten repro (a failure, `status` IF/MCF) or also agree with two voters (a wrong value)?
    A failure only has to go: MNN's MaxPool with strides written out converts, and its ReduceSumSquare consumer is then
    wrong (another defect, keepdims), which the repro does not show. A crash (`crashed`) only has to stop crashing:
    MNN's AveragePool→Mean without strides dies with SIGILL in the converter, and with strides its two-input Mean fails
    cleanly (another defect; hand triage 11 found that pair as a root cause of its own)."""
    judged = judge_in_memory(pool, fixed, feeds, do_localise=False, policy=policy,
                             skip=_all_but_voters(pool, engine, "not needed to test a rewritten trigger"))
    now = judged.verdict.results.get(engine)
    if now is None:
        return False
    if crashed and now.status != DCF and now.outcome is not None and not now.outcome.ok:
        return not crash_like(failure_of(now.status, kind=now.outcome.kind, etype=now.outcome.etype or now.outcome.signal))
    return now.status in ((DCP,) if status == DCF else (DCP, DCF))


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
    if finding["status"] != "DCF" or "+" in finding["engine"]:
        return {}
    return _all_but_voters(pool, finding["engine"], "not needed to confirm a value divergence")


def _all_but_voters(pool: EnginePool, engine: str, why: str) -> dict[str, str]:
    """Skip every engine but `engine` and its two cheap voters."""
    keep = set(pick_voters(pool.names, engine, limit=2)) | {engine}
    return {e: why for e in pool.names if e not in keep}


def _class_detail(hit: Finding) -> dict[str, Any]:
    d = hit.detail
    for k in ("undefined", "gap"):
        if k in d:
            return {k: d[k]}
    iso = d.get("isolation")
    return {"isolation": {k: iso.get(k) for k in ("verdict", "op", "node", "note", "tried", "first") if k in iso}} if iso else {}


def _record(out: Path, info: dict[str, Any]) -> dict[str, Any]:
    (out / "finding.json").write_text(json.dumps(info, indent=1, default=str))
    return info


def cluster(campaign_dir: Path, findings: list[dict[str, Any]], noise: Any = "default") -> dict[str, Any]:
    """Group the triaged findings into root causes (by the representative's reduced repro) and count the classes.
    `noise`: the loaded noise classes whose `families` merge one engine code path's operators (default: the shipped)."""
    if noise == "default":
        noise = Policy.default().noise
    infos: dict[str, dict[str, Any]] = {}
    for f in findings:
        fid = finding_id(f["signature"])
        for p in [campaign_dir / "repros" / fid / "finding.json", *sorted((campaign_dir / "repros").glob(f"{fid}~*/finding.json"))]:
            if p.is_file():
                infos[p.parent.name] = {**json.loads(p.read_text()), "_row": f}
    roots: dict[str, dict[str, Any]] = {}
    classes: dict[str, list[str]] = {}
    key_of_fid: dict[str, RootKey] = {}
    for fid, info in sorted(infos.items(), key=lambda kv: "~" in kv[0]):  # a signature's first model before its variants
        klass = info.get("klass", UNCONFIRMED)
        rep = info if "root" in info else infos.get(info.get("attached_to", ""), {})
        if klass == BUG and "root" not in rep:
            klass = "pending"  # attached to a representative whose export has not finished
        variant = "~" in fid
        if not variant:  # a further model of a signature adds root causes, not a signature
            classes.setdefault(klass, []).append(fid)
        if klass != BUG:
            continue
        nodes = rep.get("reduction", {}).get("nodes_after", 0)
        failed_op = keyed_failed_op(rep.get("repro_failure") or {})
        sig, raw_key = Signature.parse(rep["signature"]), RootKey.from_json(rep["root"])
        if failed_op is None and crash_like(raw_key.failure) and sig.op in raw_key.ops:
            failed_op = sig.op  # a crash the reducer could not shrink, in the operator its log named (MNN: "... compute LSTM")
        key = coarsen(raw_key, nodes, sig.text, failed_op)
        if failed_op and key.status != "DCF" and key.message not in SHOWN_TRIGGERS:
            key = omitted_input_key(key, sig.text, _node_of(campaign_dir, rep_folder(fid, info), failed_op)) or key
        base = fid.split("~")[0]
        if variant and nodes > WELL_REDUCED and base in key_of_fid:
            key = key_of_fid[base]  # a further model that did not reduce says nothing new: it joins its signature's root cause
        severity = key.severity()
        fam = _family(campaign_dir, key, rep_folder(fid, info), nodes, noise)
        if fam is not None:  # one code path of the engine under several operator names: one root cause
            key = RootKey(key.engine, FAMILY, fam.name, fam.ops, (), (), "")
        unknown = _unknown_shape_rule(campaign_dir, key, rep_folder(fid, info), rep.get("witnesses") or [], noise)
        if unknown is not None:  # whatever produced the tensor of unknown shape, and whichever consumer tripped on it
            key = RootKey(key.engine, FAMILY, unknown.name, (), (), (), "")
        key_of_fid[fid] = key
        rc = roots.setdefault(key.id(), {"id": key.id(), "key": key.to_json(), "severity": severity, "engine": key.engine,
                                         "converted_as": rep.get("campaign_engine", key.engine),
                                         "signatures": [], "findings": [], "occurrences": 0, "first_idx": None, "first_model": None,
                                         "repro": None, "nodes": None, "held": set()})
        rc["severity"] = min(rc["severity"], severity)  # a family is as bad as its worst member
        if fam is not None:
            rc["family_why"] = fam.why
            rc["family_failures"] = list(fam.failures)
        if unknown is not None:
            rc["family_why"] = unknown.why
        rc["held"] |= set(RootKey.from_json(rep["root"]).ops)  # every operator its repros hold, reduced or not
        if key.message in SHOWN_TRIGGERS:  # keyed by the attribute alone: which operators lacked it (or used the shorthand)
            trigger = rep.get("trigger") or {}
            rc["held"] |= {w.split(".", 1)[0] for w in [*trigger.get("omitted", []), *trigger.get("spelled_out", []),
                                                       *trigger.get("schema_default", [])]}
        row = info["_row"]
        if row["signature"] not in rc["signatures"]:
            rc["signatures"].append(row["signature"])
            rc["occurrences"] += 1 if variant else int(row.get("count", 1))
        rc["findings"].append(fid)
        first_idx = info.get("first_idx", row["first_idx"])
        if rc["first_idx"] is None or first_idx < rc["first_idx"]:
            rc["first_idx"], rc["first_model"] = first_idx, info.get("first_model", row["first_model"])
        if "root" in info and (info.get("repro_failure") or {}).get("where"):
            rc.setdefault("where", set()).add(info["repro_failure"]["where"])
        if "root" in info and (info.get("repro_failure") or {}).get("status"):
            shown = info["repro_failure"]  # "STATUS failure", as a key spells it: "IF exception:InvalidArgumentError"
            failure = failure_of(shown["status"], shown.get("category", ""), shown.get("kind", ""), shown.get("etype", ""))
            rc.setdefault("reran_as", set()).add(f"{shown['status']} {failure}")
        if "root" in info:
            nodes = info.get("reduction", {}).get("nodes_after", 10**9)
            if rc["nodes"] is None or nodes < rc["nodes"]:
                rc["nodes"], rc["repro"], rc["summary"] = nodes, f"repros/{fid}", info.get("summary", "")
                rc["repro_check"] = info.get("repro_check", "")
    absorb_shown_triggers(roots)
    absorb_supersets(roots)
    absorb_unreduced(roots)
    absorb_consumers_of_upstream(roots)
    absorb_upstream_into_wrong_shape(roots)
    absorb_upstream_into_its_signature(roots)
    absorb_failed_node_into_its_run_failure(roots)
    absorb_across_modes(roots)
    absorb_refusal_into_crash(roots)
    absorb_wrong_values_into_wrong_shape(roots)
    absorb_same_source_line(roots)
    for rc in roots.values():
        rc["held"] = sorted(rc["held"])
        for field in ("where", "reran_as"):
            if field in rc:
                rc[field] = sorted(rc[field])
    ranked = sorted(roots.values(), key=lambda r: (r["severity"], r["engine"], -r["occurrences"], r["id"]))
    return {"root_causes": ranked, "classes": {k: sorted(v) for k, v in classes.items()}}


def keyed_failed_op(repro_failure: dict[str, Any]) -> str | None:
    """The operator a reduced repro's failure keys on: the one a conversion failed in is where the defect is; the layer
    a run-time failure surfaced in is often only where a wrong shape met its consumer (seed 77: an Expand's layout
    defect failed in a Min 8 nodes down), so it guides the reducer's cut but does not key the root cause."""
    if repro_failure.get("status") == "IF":
        return None
    return (repro_failure.get("failed_ops") or [None])[-1]


FAMILY = "family"


def rep_folder(fid: str, info: dict[str, Any]) -> str:
    """The folder of the reduced repro a finding's root key comes from (its own, or its representative's)."""
    return fid if "root" in info else info.get("attached_to", "")


def _node_of(campaign_dir: Path, folder: str, op: str) -> onnx.NodeProto | None:
    path = campaign_dir / "repros" / folder / "model.onnx"
    if not folder or not path.is_file():
        return None
    return next((n for n in onnx.load(str(path)).graph.node if n.op_type == op), None)


def _family(campaign_dir: Path, key: RootKey, folder: str, nodes: int, noise: Any) -> Any:
    """The engine's operator family (noise/families.yaml) of a one-node repro, counting the node's inputs."""
    if noise is None or nodes != 1 or len(key.ops) != 1 or key.failure == UPSTREAM or not noise.family_rules:
        return None
    path = campaign_dir / "repros" / folder / "model.onnx"
    if not folder or not path.is_file():
        return None
    model = onnx.load(str(path))
    node = model.graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return noise.family(key.engine, node.op_type, sum(1 for i in node.input if i), key.failure, _first_input_rank(model), attrs,
                        _first_input_type(model))


def _unknown_shape_rule(campaign_dir: Path, key: RootKey, folder: str, witness_ops: list[str], noise: Any) -> Any:
    """The engine's upstream_unknown_shape rule (noise/families.yaml) when this `upstream` failure's culprits hand its
    consumer only tensors of unknown static shape (see witness.hands_on_unknown_shape); else None."""
    rule = noise.unknown_shape(key.engine) if noise is not None and key.failure == UPSTREAM and witness_ops else None
    path = campaign_dir / "repros" / folder / "model.onnx"
    if rule is None or not folder or not path.is_file():
        return None
    model = onnx.load(str(path))
    return rule if hands_on_unknown_shape(model, peeled_nodes(model, list(witness_ops))) else None


def _first_input(model: onnx.ModelProto) -> onnx.TensorProto | onnx.ValueInfoProto | None:
    """The initializer or graph input that feeds a one-node model's first input (None: neither)."""
    name = model.graph.node[0].input[0] if model.graph.node and model.graph.node[0].input else ""
    return next((t for t in model.graph.initializer if t.name == name), None) or \
        next((v for v in model.graph.input if v.name == name), None)


def _first_input_rank(model: onnx.ModelProto) -> int | None:
    """The rank of a one-node model's first input (None: unknown)."""
    src = _first_input(model)
    if isinstance(src, onnx.TensorProto):
        return len(src.dims)
    if src is not None and src.type.tensor_type.HasField("shape"):
        return len(src.type.tensor_type.shape.dim)
    return None


def _first_input_type(model: onnx.ModelProto) -> str | None:
    """The element type of a one-node model's first input as numpy names it (int32, float32; None: unknown)."""
    src = _first_input(model)
    code = src.data_type if isinstance(src, onnx.TensorProto) else (src.type.tensor_type.elem_type if src is not None else 0)
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(code).name if code else None
    except (KeyError, ValueError, TypeError):
        return None


def absorb_shown_triggers(roots: dict[str, dict[str, Any]]) -> None:
    """Root causes keyed by the same shown trigger of one converter (an omitted prose default written out, or a
    shorthand spelled out, made the failure go) are one, whatever the failure or the converter's mode: MNN's pools
    without strides crash (SIGFPE, converter SIGILL) or, on some shapes, report a shape error; onnx2tf's AveragePool
    with SAME_LOWER gives wrong values in one mode and fails to convert in the other (seed 76). They join the worst of
    them, so the root cause keeps the crash's severity."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for rid, r in roots.items():
        if r["key"].get("message") in SHOWN_TRIGGERS:
            groups.setdefault((_converter(r), r["key"]["message"], tuple(r["key"]["attrs"])), []).append(rid)
    _merge_groups(roots, groups.values())


def _merge_groups(roots: dict[str, dict[str, Any]], groups: Any) -> None:
    """Each group of root cause ids becomes one: into the worst, then the earliest (the severity and the first model
    stay the group's)."""
    for ids in groups:
        into = min(ids, key=lambda i: (roots[i]["severity"], roots[i]["first_idx"] if roots[i]["first_idx"] is not None else 10**12, i))
        for rid in sorted(ids):
            if rid != into:
                _merge(roots, rid, roots[into])


def absorb_unreduced(roots: dict[str, dict[str, Any]]) -> None:
    """A failure whose repro the reducer could not bring down (keyed without operators) joins the one reduced root cause
    of the same engine, status, failure and message whose operators its repro holds: MNN's converter crashing on an
    LSTM came back as a 1-node root cause and as two 5- and 8-node ones holding that LSTM (hand triage 6).  Only when
    exactly one reduced root cause fits: with two candidates nothing tells which the big repro shows."""
    def fits(r: dict[str, Any], o: dict[str, Any]) -> bool:
        k, ko = r["key"], o["key"]
        return (o["engine"] == r["engine"] and ko["status"] == k["status"] and ko["failure"] == k["failure"]
                and ko.get("message", "") == k.get("message", "") and bool(ko["ops"]) and set(ko["ops"]) <= set(r["held"]))

    _absorb_into_one(roots, lambda r: (not r["key"]["ops"] and r["key"]["status"] != "DCF" and bool(r["held"])
                                      and r["key"].get("message") not in SHOWN_TRIGGERS), fits)


def _absorb_into_one(roots: dict[str, dict[str, Any]], wants: Callable[[dict[str, Any]], bool],
                     fits: Callable[[dict[str, Any], dict[str, Any]], bool]) -> None:
    """Each root cause that `wants` picks joins the other root cause that `fits` it, when exactly one does (with two,
    nothing tells which of them it is)."""
    for rid in sorted(roots):
        r = roots.get(rid)
        if r is None or not wants(r):
            continue
        into = [o for o in roots.values() if o is not r and fits(r, o)]
        if len(into) == 1:
            _merge(roots, rid, into[0])


def _merge(roots: dict[str, dict[str, Any]], rid: str, target: dict[str, Any]) -> None:
    """Root cause `rid` joins `target`: its signatures, findings, occurrences, source lines and earliest model."""
    r = roots.pop(rid)
    target["signatures"] += [s for s in r["signatures"] if s not in target["signatures"]]
    target["findings"] += r["findings"]
    target["occurrences"] += r["occurrences"]
    target.setdefault("absorbed", []).append(rid)
    if r.get("where"):  # the converter source lines its repros failed at
        target.setdefault("where", set()).update(r["where"])
    if "severity" in r:  # as bad as its worst member
        target["severity"] = min(target.get("severity", r["severity"]), r["severity"])
    if r["first_idx"] is not None and (target["first_idx"] is None or r["first_idx"] < target["first_idx"]):
        target["first_idx"], target["first_model"] = r["first_idx"], r["first_model"]


def absorb_supersets(roots: dict[str, dict[str, Any]]) -> None:
    """A failure keyed `upstream` (its failing operator runs alone, so the defect lies in what feeds it) whose operators
    include all of a smaller upstream failure's, of the same engine and status, joins that smaller root cause: the extra
    operators are consumers the reducer could not remove, which carry the same bad tensor further (onnx2tf's
    dynamic-shape Expand reached Conv, Equal, MatMul, Slice→Pad: one root cause, not five).  Only into another upstream
    root cause: an operator that fails on its own (a grouped Conv1D) is a defect of its own, not the source of others."""
    def ops(r: dict[str, Any]) -> set[str]:
        return set(r["key"]["ops"])

    for rid in sorted(roots, key=lambda i: -len(ops(roots[i]))):  # largest first, so chains collapse onto the smallest
        r = roots[rid]
        if r["key"]["failure"] != UPSTREAM or not ops(r):
            continue
        into = [o for o in roots.values() if o is not r and o["engine"] == r["engine"] and o["key"]["status"] == r["key"]["status"]
                and o["key"]["failure"] == UPSTREAM and o["key"]["ops"] and ops(o) < ops(r)]
        if not into:
            continue
        _merge(roots, rid, min(into, key=lambda o: (len(ops(o)), o["id"])))


def absorb_consumers_of_upstream(roots: dict[str, dict[str, Any]]) -> None:
    """A failure keyed by how a consumer complained (its exception and message) whose repro holds the producer of an
    `upstream` root cause of the same engine and status, plus more, joins it: the consumer fails because of what that
    producer hands it (hand triage 7: onnx2tf's ConstantOfShape layout as `upstream ConstantOfShape` and again as
    ConstantOfShape+GatherElements raising InvalidArgumentError; its Expand defect again in an unreduced 8-node repro).
    Only when exactly one upstream root cause fits, and never a crash or a hang: those are defects wherever they happen
    (an unreduced 16-node onnx2tf hang had joined an `upstream Slice` root cause because its model held a Slice)."""
    def wants(r: dict[str, Any]) -> bool:
        k = r["key"]
        return (k["status"] in ("IF", "MCF") and k["failure"] != UPSTREAM and not crash_or_hang(k["failure"])
                and k.get("message") not in SHOWN_TRIGGERS)  # its trigger was shown, not guessed

    def fits(r: dict[str, Any], o: dict[str, Any]) -> bool:
        ko = o["key"]
        return (o["engine"] == r["engine"] and ko["status"] == r["key"]["status"] and ko["failure"] == UPSTREAM and bool(ko["ops"])
                and set(ko["ops"]) < (set(r["key"]["ops"]) or set(r["held"])))

    _absorb_into_one(roots, wants, fits)


def absorb_upstream_into_wrong_shape(roots: dict[str, dict[str, Any]]) -> None:
    """A failure keyed `upstream X` (its consumer runs fine alone, so X hands it something bad) joins the engine's one
    root cause `DCF shape` in X alone: a wrong output shape is exactly what makes consumers fail (hand triage 7: MNN
    ignoring MaxPool's dilations came back as `DCF shape MaxPool` and as `IF upstream MaxPool`, whose consumer failed
    on the 6x8 output). A wrong value or dtype does not make a consumer fail, so only shape.

    Across the modes of one converter too: a conversion failure moved to the mode users run (`tensorflow-nhwc`,
    `converted_as` the campaign's `tensorflow`) is the same converter's handler (hand triage 8: onnx2tf's Shape
    ignoring a lone `start` was `DCF shape Shape` in keep-shape mode and `MCF upstream Shape` in the default one)."""
    _absorb_into_one(roots, lambda r: r["key"]["failure"] == UPSTREAM and len(r["key"]["ops"]) == 1,
                     lambda r, o: _converter(o) == _converter(r) and _wrong_shape_in(o, r["key"]["ops"]))


def absorb_upstream_into_its_signature(roots: dict[str, dict[str, Any]]) -> None:
    """A failure keyed `upstream X` joins the engine's one root cause in which X fails alone, at the same status, when
    the two share a signature (the same failure and message in the campaign): the reducer kept a consumer of X in one
    model of that signature and not in the other. Hand triage 13: the reference's Pad on negative pads came back as
    `IF upstream Pad` (2 nodes, the signature's first model) and `IF exception:ValueError Pad` (1 node, its further
    model), one message "index can't contain negative values"."""
    _absorb_into_one(roots, lambda r: r["key"]["failure"] == UPSTREAM and len(r["key"]["ops"]) == 1,
                     lambda r, o: (o["engine"] == r["engine"] and o["key"]["status"] == r["key"]["status"]
                                   and o["key"]["failure"] != UPSTREAM and list(o["key"]["ops"]) == list(r["key"]["ops"])
                                   and bool(set(o["signatures"]) & set(r["signatures"]))))


def absorb_failed_node_into_its_run_failure(roots: dict[str, dict[str, Any]]) -> None:
    """A `DCF failure` root cause (the blamed engine failed to compute the diverging node once its intermediates were
    exposed) whose repros all re-run as a run failure (IF) of exception type E joins the engine's one `IF exception:E`
    root cause of the same operator: the node fails to run either way. Hand triage 14 (#19): onnx2tf's RoiAlign
    dividing by H-1 = 0 came back as `DCF failure RoiAlign` and as `IF exception:InvalidArgumentError RoiAlign`, one
    source line and one message on re-run; the same pair appeared in every small-model campaign checked."""
    def failed_node(r: dict[str, Any]) -> bool:
        reran = set(r.get("reran_as") or ())
        return (r["key"]["status"] == "DCF" and r["key"]["failure"] == "failure" and len(r["key"]["ops"]) == 1
                and len(reran) == 1 and next(iter(reran)).startswith("IF exception:"))

    def fits(r: dict[str, Any], o: dict[str, Any]) -> bool:
        return (o["engine"] == r["engine"] and f"{o['key']['status']} {o['key']['failure']}" == next(iter(r["reran_as"]))
                and list(o["key"]["ops"]) == list(r["key"]["ops"]))

    _absorb_into_one(roots, failed_node, fits)


def absorb_across_modes(roots: dict[str, dict[str, Any]]) -> None:
    """A one-operator failure in one mode of a converter (a repro of up to three nodes keyed by one operator, or
    `upstream X`) joins the converter's one root cause of that operator in its other mode: a wrong shape, or the
    operator failing alone. One
    handler serves both modes, and the mode decides only how its mistake shows (hand triage 10: onnx2tf's OneHot.py:137
    adds a negative axis twice, a wrong shape in keep-shape mode and a ValueError in the default one; its RoiAlign on a
    1x1 map divides by H-1 = 0 and fails alone in keep-shape mode, and in the default one in the Add that consumes it).
    Only across modes (two engines, one converter), never a crash, and only when exactly one root cause fits."""
    def one_op_failure(r: dict[str, Any]) -> bool:
        k = r["key"]
        return (k["status"] in ("IF", "MCF") and not crash_or_hang(k["failure"]) and len(k["ops"]) == 1
                and k.get("message") not in SHOWN_TRIGGERS and (k["failure"] == UPSTREAM or (r.get("nodes") or 99) <= WELL_REDUCED))

    def fits(r: dict[str, Any], o: dict[str, Any]) -> bool:
        fails_alone = one_op_failure(o) and o["key"]["failure"] != UPSTREAM
        return (o["engine"] != r["engine"] and _converter(o) == _converter(r) and list(o["key"]["ops"]) == list(r["key"]["ops"])
                and (_wrong_shape_in(o, r["key"]["ops"]) or fails_alone))

    _absorb_into_one(roots, one_op_failure, fits)


def _converter(root: dict[str, Any]) -> str:
    """The engine whose conversion a root cause shows: the campaign's engine of a failure moved to its users' mode."""
    return str(root.get("converted_as") or root["engine"])


def _wrong_shape_in(root: dict[str, Any], ops: Any) -> bool:
    """Is `root` a `DCF shape` root cause in exactly these operators, or a family of them whose failures include a wrong
    shape (the target other symptoms of one defect join)? Hand triage 12: the reference MaxPool's misread pad order,
    a family, and its wrong shape surfacing in a Where (`upstream MaxPool`) were two root causes."""
    k = root["key"]
    if k["status"] == FAMILY:
        return "shape" in (root.get("family_failures") or []) and set(ops) <= set(k["ops"])
    return k["status"] == "DCF" and k["failure"] == "shape" and list(k["ops"]) == list(ops)


def absorb_refusal_into_crash(roots: dict[str, dict[str, Any]]) -> None:
    """A one-node failure with a message joins the engine's one crash in that same operator alone, at the same stage
    (run or conversion): a crash carries no message to tell it apart, and an operator whose lowering is broken crashes
    on some shapes and refuses others (hand triages 7 and 8: MNN's 2-input Mean segfaults when its inputs broadcast
    and says "Create execution error" when they do not: one lowering, two root causes).  Into the crash, so the root
    cause keeps the worst severity; only when exactly one crash fits."""
    def one_op(r: dict[str, Any]) -> bool:
        return r["nodes"] == 1 and len(r["key"]["ops"]) == 1

    _absorb_into_one(roots, lambda r: (r["key"]["status"] in ("IF", "MCF") and r["key"]["failure"] != UPSTREAM
                                      and not crash_or_hang(r["key"]["failure"]) and one_op(r)),
                     lambda r, o: (o["engine"] == r["engine"] and o["key"]["status"] == r["key"]["status"]
                                   and crash_like(o["key"]["failure"]) and one_op(o) and o["key"]["ops"] == r["key"]["ops"]))


def absorb_wrong_values_into_wrong_shape(roots: dict[str, dict[str, Any]]) -> None:
    """A one-operator `DCF value` root cause joins the engine's one `DCF shape` root cause in that operator with the same
    attributes: an operator that selects the wrong elements gives a wrong shape or only wrong values depending on the
    case (hand triage 8: onnx2tf's Slice begin_mask with a negative step returned the whole axis — `shape` — or index 1
    instead of 0 — `value`). Different modes or attributes keep them apart (MNN's Resize: output size vs align_corners),
    and with two shape root causes to choose from nothing tells which."""
    _absorb_into_one(roots, lambda r: r["key"]["status"] == "DCF" and r["key"]["failure"] == "value" and len(r["key"]["ops"]) == 1,
                     lambda r, o: (o["engine"] == r["engine"] and _wrong_shape_in(o, r["key"]["ops"])
                                   and list(o["key"].get("attrs", [])) == list(r["key"].get("attrs", []))))


def absorb_same_source_line(roots: dict[str, dict[str, Any]]) -> None:
    """Failures of one converter whose reduced repros fail at the same line of its source (the adapter's `where`,
    "ops/ScatterElements.py:240:make_node") are one root cause, whatever operator or message keyed them: that line is
    the unit of a defect to its maintainer, and the hand triages' rule for duplicates. In a shared helper (a function
    outside the per-operator handlers, utils/...) the function is the unit: one misuse in two branches of it is one
    defect. Seed 77: onnx2tf's ScatterElements.py:240 as a ValueError and an InvalidArgumentError; Div and Sub both in
    explicit_broadcast; ReduceL1 and ReduceL2 at two lines of define_reduceXXX (hand triage 11 #24). Never a crash
    (no line) and only roots with one place; into the worst, then earliest."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rid, r in roots.items():
        places = {_place(w) for w in r.get("where") or set()}
        if len(places) == 1 and r["key"]["status"] in ("IF", "MCF") and not crash_or_hang(r["key"]["failure"]):
            groups.setdefault((_converter(r), next(iter(places))), []).append(rid)
    _merge_groups(roots, groups.values())


def _place(where: str) -> str:
    """The unit of a defect at `where` ("path:line:function"): the line in a per-operator handler, the function in a
    shared helper (utils/)."""
    path, _, rest = where.partition(":")
    line, _, function = rest.partition(":")
    return f"{path}:{function}" if path.startswith("utils/") and function else f"{path}:{line}"
