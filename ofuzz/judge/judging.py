"""Judge one model end to end: run the engines, apply the oracle, localise and isolate DCFs, classify, sign.

Every finding gets a class, because a maintainer needs to know which findings
are defects of the blamed engine:
- `bug`: a crash, hang, conversion or inference failure, or a node that
  diverges when fed identical inputs;
- `drift`: outputs differ but no node diverges on its own (accumulated or
  amplified float rounding);
- `unsupported`: the engine says it does not support a construct (a capability
  gap, listed once per engine x operator x attribute);
- `undefined`: the blamed node's actual inputs are ones whose result the ONNX
  spec leaves undefined;
- `split`: no majority, nobody to blame.
Classes are recomputable (the triage phase re-judges); raw signatures are kept.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ofuzz.core.vocab import BUG, REFERENCE, SPLIT, UNDEFINED, UNSUPPORTED
from ofuzz.core.vocab import DRIFT as DRIFT_FINDING
from ofuzz.judge.isolate import DEFECT, DRIFT, isolate, isolate_single
from ofuzz.judge.localise import localise
from ofuzz.judge.noise import NoiseClasses
from ofuzz.judge.precision import Tolerances
from ofuzz.judge.operand_order import NAN_POLICY, order_dependence
from ofuzz.judge.oracle import DCF, DCP, Verdict, judge_outcomes
from ofuzz.exec.runner import EnginePool, output_names
from ofuzz.judge.signature import failing_op, signature

DRIFT_CLASS = DRIFT_FINDING  # the finding class; isolate.DRIFT is the isolation verdict


@dataclass
class Policy:
    """What the judge knows beyond the engines' outputs: noise classes (data) and float32 tolerances (data)."""

    noise: NoiseClasses | None = None
    tolerances: Tolerances | None = None
    isolate: bool = True

    @staticmethod
    def default() -> "Policy":
        from ofuzz.judge.noise import load_noise
        from ofuzz.judge.precision import load_tolerances

        return Policy(load_noise(), load_tolerances())


@dataclass
class Finding:
    engine: str
    status: str
    signature: str
    op: str | None
    summary: str
    blamed: bool
    detail: dict[str, Any] = field(default_factory=dict)
    klass: str = BUG

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class Judged:
    verdict: Verdict
    findings: list[Finding]
    isolated: dict[str, Any] = field(default_factory=dict)  # engine -> Isolation (with the 1-node model)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.to_json(), "findings": [f.to_json() for f in self.findings]}


def failed_nodes(model: onnx.ModelProto, outcome: Any) -> list[tuple[str, str]]:
    """(name, op type) of the model's nodes the engine said it failed on, first to last (adapters that know set them).
    An engine may name a node by its output tensor (OpenVINO's ONNX frontend does): that is the node that computes it."""
    ops = {n.name: (n.name, n.op_type) for n in model.graph.node if n.name}
    by_output = {o: (n.name, n.op_type) for n in model.graph.node if n.name for o in n.output if o}
    return [ops.get(n) or by_output[n] for n in (getattr(outcome, "nodes", None) or []) if n in ops or n in by_output]


def declared_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Output shapes the model declares, where fully static (the generator declares what ONNX inference gives)."""
    out: dict[str, tuple[int, ...]] = {}
    for o in model.graph.output:
        tt = o.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            out[o.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    return out


def excluded_voters(pool: EnginePool, model: onnx.ModelProto, inputs: dict[str, np.ndarray], policy: Policy) -> dict[str, str]:
    """Engines that may not vote on this model: the reference evaluator where it is known wrong or missing."""
    if policy.noise is None or REFERENCE not in pool.names:
        return {}
    values = dict(inputs)
    values.update({t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer})
    reasons = policy.noise.reference_gaps_in(model, values)
    return {REFERENCE: "; ".join(sorted(set(reasons)))[:300]} if reasons else {}


def judge_model(pool: EnginePool, model: onnx.ModelProto, model_path: Path, inputs: dict[str, np.ndarray], do_localise: bool = True,
                policy: Policy | None = None, skip: dict[str, str] | None = None) -> Judged:
    """`skip`: engine -> why the model is not sent to it (a construct it already said it does not support)."""
    policy = policy or Policy()
    names = output_names(model)
    excluded = excluded_voters(pool, model, inputs, policy)
    engines = [e for e in pool.names if e not in (skip or {})]
    v = judge_outcomes(pool.execute(model_path, inputs, names, engines=engines), names, declared_shapes(model), excluded, pool.families)
    v.skipped = dict(skip or {})
    findings: list[Finding] = []
    isolated: dict[str, Any] = {}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    for eng, r in v.results.items():
        if r.status == DCP or not r.blamed:
            continue
        if r.status == DCF:
            findings.append(_dcf_finding(pool, model, inputs, v, eng, do_localise, policy, excluded, opset, isolated))
        else:
            o = r.outcome
            failed = failed_nodes(model, o)
            op = failed[-1][1] if failed else (failing_op(o.message, o.log_tail) if o is not None else None)
            f = Finding(eng, r.status, signature(eng, r.status, o, op=op), op, o.summary() if o else r.status, True,
                        {"log_tail": o.log_tail[-1500:] if o else ""})
            if failed:
                f.detail["failed_nodes"] = [name for name, _ in failed]
            if o is not None and o.where:
                f.detail["where"] = o.where
            # a clean refusal is a capability gap; a crash, hang or exit on the way is a defect whatever the engine said first
            clean = o is not None and o.kind == "exception"
            gap = policy.noise.unsupported(eng, o.message, o.log_tail, op) if policy.noise is not None and clean else None
            if gap is not None:
                f.klass = UNSUPPORTED
                f.detail["gap"] = {"engine": gap.engine, "op": gap.op, "attribute": gap.attribute, "rule": gap.rule, "key": gap.key()}
            findings.append(f)
    if v.split:
        ran = sorted(e for e, r in v.results.items() if r.status == DCF and e not in excluded)
        worst = max((v.results[e].versus for e in ran if v.results[e].versus and not v.results[e].versus.ok),
                    key=lambda c: c.max_rel, default=None)
        cat = worst.category if worst else "value"
        summary = f"no majority among {', '.join(ran)}" + (f": {cat} mismatch on {worst.output}, max rel {worst.max_rel:.3g}" if worst else "")
        findings.append(Finding("+".join(ran), DCF, f"split|{'+'.join(ran)}|DCF|{cat}", None, summary, False, {}, SPLIT))
    if excluded:
        for f in findings:
            f.detail["excluded"] = excluded
    return Judged(v, findings, isolated)


def judge_in_memory(pool: EnginePool, model: onnx.ModelProto, inputs: dict[str, np.ndarray], **kw: Any) -> Judged:
    """`judge_model` for a model held in memory (a reduction candidate, a repro with its defaults written out): saved to
    a temporary file in the pool's folder first."""
    with tempfile.TemporaryDirectory(dir=pool.root) as d:
        path = Path(d) / "model.onnx"
        onnx.save(model, str(path))
        return judge_model(pool, model, path, inputs, **kw)


def _dcf_finding(pool: EnginePool, model: onnx.ModelProto, inputs: dict[str, np.ndarray], v: Verdict, eng: str, do_localise: bool,
                 policy: Policy, excluded: dict[str, str], opset: int, isolated: dict[str, Any]) -> Finding:
    r = v.results[eng]
    c = r.versus
    cat = c.category if c else ""
    summary = c.describe() if c else "mismatch"
    div: dict[str, Any] = {}
    klass = BUG
    detail: dict[str, Any] = {}
    if do_localise and v.majority:
        iso, first = None, None
        if len(model.graph.node) == 1 and c is not None:  # a one-node model is its own isolation
            first = model.graph.node[0].op_type
            if policy.isolate:
                iso = isolate_single(pool, model, inputs, eng, c, r.outcome, policy.tolerances, excluded)
        else:
            loc = localise(pool, model, inputs, eng, v.majority, excluded)
            div, first = dict(loc.info), loc.info.get("op")
            if policy.isolate:
                iso = isolate(pool, model, inputs, eng, v.majority, loc, policy.tolerances, excluded)
        if iso is not None:
            isolated[eng] = iso
            detail["isolation"] = {"verdict": iso.verdict, **iso.info}
            if iso.verdict == DEFECT:
                div = {k: iso.info[k] for k in ("op", "node", "output", "category", "max_abs", "max_rel", "attrs")}
                cat = iso.info["category"]
                gap = policy.noise.by_design(eng, div["op"], cat) if policy.noise is not None else None
                und = _undefined(policy, model, iso, opset)
                if gap is not None:  # the engine's documented choice (onnx2tf's float QuantizeLinear): its capability table
                    klass = UNSUPPORTED
                    detail["gap"] = {"engine": gap.engine, "op": gap.op, "attribute": gap.attribute, "rule": gap.rule, "key": gap.key()}
                elif und is not None and und["rule"].startswith(NAN_POLICY) and iso.model is not None \
                        and (order := order_dependence(pool, iso.model, iso.feeds, eng)) is not None:
                    detail["operand_order"] = order  # a policy may choose NaN's fate, not by operand order: still a bug
                elif und is not None:
                    klass = UNDEFINED
                    detail[UNDEFINED] = und
            elif iso.verdict == DRIFT:
                klass = DRIFT_CLASS
                div = {"op": "~drift", "first": first, "note": iso.info.get("note", "")}
        v.diverging[eng] = div
    detail["diverging"] = div
    return Finding(eng, DCF, signature(eng, DCF, r.outcome, div, cat), div.get("op"), summary, True, detail, klass)


def _undefined(policy: Policy, model: onnx.ModelProto, iso: Any, opset: int) -> dict[str, str] | None:
    """The isolated node's actual inputs fall where the spec defines no result?"""
    if policy.noise is None or iso.model is None:
        return None
    node = iso.model.graph.node[0]
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in iso.model.graph.initializer}
    ins = [iso.feeds.get(n, inits.get(n)) if n else None for n in node.input]
    u = policy.noise.undefined(node, ins, opset, iso.info.get("category"))
    return {"rule": u.rule, "op": u.op, "why": u.why} if u is not None else None
