"""Clustering: a campaign's triaged findings grouped into root causes, each member with how it joined.

A representative's root key comes from its own reduced repro (`pipeline`); here keys are coarsened, families and
the unknown-shape rule of the engine's noise data applied, and the merge rules (`merge_rules`, a registry run to a
fixed point) join root causes that evidence shows to be one defect. Every member records how it joined (`members`),
every merge its evidence (`evidence`), so `ofuzz bugs DIR --explain RC` can say why.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.core.vocab import IF, MCF
from ofuzz.core.vocab import BUG, DCF, PENDING
from ofuzz.judge.noise import Family, NoiseClasses, UnknownShapeRule
from ofuzz.judge.signature import Signature, finding_id
from ofuzz.judge.judging import Policy
from ofuzz.triage.merge_rules import FAMILY, run_merge_rules
from ofuzz.triage.rootcause import SHOWN_TRIGGERS, UPSTREAM, WELL_REDUCED, RootKey, coarsen, crash_like, failure_of
from ofuzz.triage.family_test import families_for
from ofuzz.triage.record import FindingRecord, RootCause
from ofuzz.triage.repro_facts import OneNode, ReproFacts


def cluster(campaign_dir: Path, findings: list[dict[str, Any]], noise: NoiseClasses | None | str = "default") -> dict[str, Any]:
    """Group the triaged findings into root causes (by the representative's reduced repro) and count the classes.
    `noise`: the loaded noise classes whose `families` merge one engine code path's operators (default: the shipped)."""
    if noise == "default":
        noise = Policy.default().noise
    records = _triaged(campaign_dir, findings)
    roots: dict[str, RootCause] = {}
    classes: dict[str, list[str]] = {}
    key_of_fid: dict[str, RootKey] = {}
    for fid, rec in sorted(records.items(), key=lambda kv: "~" in kv[0]):  # a signature's first model before its variants
        klass = rec.klass
        rep = rec if rec.reduced else records.get(rec.attached_to)
        if klass == BUG and rep is None:
            klass = PENDING  # attached to a representative whose export has not finished
        if "~" not in fid:  # a further model of a signature adds root causes, not a signature
            classes.setdefault(klass, []).append(fid)
        if klass != BUG or rep is None:
            continue
        key, severity, joined_by, rule = _clustered_key(campaign_dir, rec, rep, key_of_fid, noise)  # type: ignore[arg-type]
        key_of_fid[fid] = key
        _join(roots, key, severity, rec, rep, joined_by, rule)
    run_merge_rules(roots)  # to a fixed point: a merge can make another rule apply
    for rc in roots.values():
        rc["held"] = sorted(rc["held"])
        for field in ("where", "users_where", "reran_as"):
            if field in rc:
                rc[field] = sorted(rc[field])
    ranked = sorted(roots.values(), key=lambda r: (r["severity"], r["engine"], -r["occurrences"], r["id"]))
    return {"root_causes": ranked, "classes": {k: sorted(v) for k, v in classes.items()}}


def _triaged(campaign_dir: Path, findings: list[dict[str, Any]]) -> dict[str, FindingRecord]:
    """Folder id -> its record (with the store's row), for every finding and further model triaged."""
    records: dict[str, FindingRecord] = {}
    folders = CampaignDir(campaign_dir)
    for f in findings:
        fid = finding_id(f["signature"])
        for folder in [fid, *sorted(p.parent.name for p in folders.repros.glob(f"{fid}~*/finding.json"))]:
            rec = FindingRecord.load(campaign_dir, folder, f)
            if rec is not None:
                records[folder] = rec
    return records


def _clustered_key(campaign_dir: Path, rec: FindingRecord, rep: FindingRecord, key_of_fid: dict[str, RootKey],
                   noise: NoiseClasses | None) -> tuple[RootKey, int, str, Any]:
    """The root key a bug finding joins, its own severity, how it came to join it (said on the root cause's member
    list), and the engine's family or unknown-shape rule that decided it (None: its own key)."""
    nodes, raw_key = rep.nodes, rep.root
    assert raw_key is not None
    failed_op = keyed_failed_op(rep.repro_failure)
    sig = Signature.parse(rep.signature)
    if failed_op is None and crash_like(raw_key.failure) and sig.op in raw_key.ops:
        failed_op = sig.op  # a crash the reducer could not shrink, in the operator its log named (MNN: "... compute LSTM")
    key = coarsen(raw_key, nodes, sig.text, failed_op)
    joined_by = "its own reduced repro" if rec.reduced else f"attached: the same pre-key as {rec.attached_to}, not reduced"
    if rec.revealed_behind:
        behind = rec.revealed_behind
        joined_by = f"its own reduced repro, revealed behind {behind['finding']} once {behind['rewrite']} was written out"
    fid, base = rec.folder, rec.folder.split("~")[0]
    if "~" in fid and "~r" not in fid and nodes > WELL_REDUCED and base in key_of_fid:
        key = key_of_fid[base]  # a further model that did not reduce says nothing new: it joins its signature's root cause
        joined_by = f"a further model of {base}'s signature that did not reduce ({nodes} nodes)"
    severity = key.severity()
    facts = rep.facts(campaign_dir)
    joined = _family(key, facts, nodes, noise, rep.version(key.engine), rep.family_test)
    if joined is not None:  # one code path of the engine under several operator names: one root cause
        fam, how = joined
        return RootKey(key.engine, FAMILY, fam.name, fam.ops, (), (), ""), severity, how, fam
    unknown = _unknown_shape_rule(key, facts, noise)
    if unknown is not None:  # keyed by what produced the tensor of unknown shape, whichever consumer tripped on it
        # the producer, not one rule for all: hand triage 31 found Expand's and ConstantOfShape's at two lines of their
        # own handlers (Expand.py:111-114 permutes a run-time shape only for data of rank > 2; ConstantOfShape.py fills
        # in ONNX order), which the rule had joined, and each seen through several consumers
        return (RootKey(key.engine, FAMILY, unknown.name, key.ops, (), (), ""), severity, f"unknown-shape rule {unknown.name} of {_key_text(key)}",
                unknown)
    return key, severity, joined_by, None


def _key_text(key: RootKey) -> str:
    return f"{key.status} {key.failure} {'+'.join(key.ops) or '-'}" + (f" [{', '.join(key.attrs)}]" if key.attrs else "")


def _join(roots: dict[str, RootCause], key: RootKey, severity: int, rec: FindingRecord, rep: FindingRecord, joined_by: str,
          rule: Any) -> None:
    """Finding `rec` joins the root cause of `key` (made if new): its signature, occurrences, earliest model, source
    lines, how it re-ran, the smallest repro, and a member record saying how it joined."""
    fid = rec.folder
    rc = roots.setdefault(key.id(), {"id": key.id(), "key": key.to_json(), "severity": severity, "engine": key.engine,
                                     "converted_as": rep.campaign_engine or key.engine,
                                     "signatures": [], "findings": [], "occurrences": 0, "first_idx": None, "first_model": None,
                                     "repro": None, "nodes": None, "held": set(), "members": []})
    rc["severity"] = min(rc["severity"], severity)  # a family is as bad as its worst member
    if rule is not None:
        rc["family_why"] = rule.why
        if hasattr(rule, "failures"):  # a family (an unknown-shape rule has none)
            rc["family_failures"] = list(rule.failures)
    rc["members"].append({"finding": fid, "joined_by": joined_by, "why": getattr(rule, "why", "")} if rule is not None else
                         {"finding": fid, "joined_by": joined_by})
    rc["held"] |= set(rep.root.ops if rep.root else ())  # every operator its repros hold, reduced or not
    if key.message in SHOWN_TRIGGERS:  # keyed by the attribute alone: which operators lacked it (or used the shorthand)
        trigger = rep.trigger
        rc["held"] |= {w.split(".", 1)[0] for w in [*trigger.get("omitted", []), *trigger.get("spelled_out", []),
                                                   *trigger.get("schema_default", [])]}
    row = rec.row
    if row["signature"] not in rc["signatures"]:
        rc["signatures"].append(row["signature"])
        rc["occurrences"] += 1 if "~" in fid else int(row.get("count", 1))
    rc["findings"].append(fid)
    first_idx, first_model = rec.first
    if rc["first_idx"] is None or first_idx < rc["first_idx"]:
        rc["first_idx"], rc["first_model"] = first_idx, first_model
    if rec.reduced:
        _own_repro_facts(rc, rec)


def _own_repro_facts(rc: RootCause, rec: FindingRecord) -> None:
    """What a member's own reduced repro adds: where the converter failed, how it re-ran, and the smallest repro."""
    shown = rec.repro_failure
    if shown.get("where"):
        rc.setdefault("where", set()).add(shown["where"])
    if rec.data.get("users_mode_where"):  # the line the repro fails at in the converter's users' mode too
        rc.setdefault("users_where", set()).add(rec.data["users_mode_where"])
    if shown.get("status"):  # "STATUS failure", as a key spells it: "IF exception:InvalidArgumentError"
        failure = failure_of(shown["status"], shown.get("category", ""), shown.get("kind", ""), shown.get("etype", ""))
        rc.setdefault("reran_as", set()).add(f"{shown['status']} {failure}")
    nodes = rec.nodes if "nodes_after" in (rec.data.get("reduction") or {}) else 10**9
    if rc["nodes"] is None or nodes < rc["nodes"]:
        rc["nodes"], rc["repro"], rc["summary"] = nodes, f"repros/{rec.folder}", rec.data.get("summary", "")
        rc["repro_check"] = rec.data.get("repro_check", "")
        rc["drop_fixes"] = rec.drop_fixes  # of the repro shown: merge_rules compares them
        rc["culprits_failing_alone"] = rec.data.get("culprits_failing_alone")  # None: not tested (upstream-superset)
        rc["culprit_where"] = rec.data.get("culprit_where", "")  # the line its one culprit failing alone fails at


def keyed_failed_op(repro_failure: dict[str, Any]) -> str | None:
    """The operator a reduced repro's failure keys on: the one a conversion failed in is where the defect is; the layer
    a run-time failure surfaced in is often only where a wrong shape met its consumer (seed 77: an Expand's layout
    defect failed in a Min 8 nodes down), so it guides the reducer's cut but does not key the root cause."""
    if repro_failure.get("status") == IF:
        return None
    return (repro_failure.get("failed_ops") or [None])[-1]


def _family(key: RootKey, facts: ReproFacts | None, nodes: int, noise: NoiseClasses | None, version: str | None,
            test: dict[str, Any]) -> tuple[Family, str] | None:
    """The engine's operator family (backends/<engine>/triage.yaml) a one-node repro joins, and how: a family with a test
    only when the triage ran it on this repro and the engine was then right (see family_test.py); one without, by its
    operators and failure alone (said so on the member)."""
    culprit = test.get("culprit")
    if culprit and key.failure == UPSTREAM and key.status == MCF and "reading" in test:
        # a reading says which wrong values the culprit computes, and no value is computed at conversion: a converter
        # that fails is not explained by it (hand triage 33: MNN's QuantizeLinear→DequantizeLinear pair loses its
        # output at conversion whatever the zero point; its culprit, read alone, showed the uint8-encoding defect)
        return None
    if culprit and key.failure == UPSTREAM:  # tested on the upstream failure's one culprit, cut out alone
        key, facts, nodes = (RootKey(key.engine, DCF, culprit["failure"], key.ops, (), (), ""),
                             ReproFacts(OneNode(**culprit["one_node"])), 1)
    node = None if facts is None else facts.one_node if nodes == 1 else facts.trigger_node if key.message in SHOWN_TRIGGERS else None
    if noise is None or node is None or not noise.family_rules:
        return None
    candidates = families_for(noise, key, node, version)
    passed = next((f for f in candidates if f.tested and f.name == test.get("family") and test.get("fixed")), None)
    if passed is not None:
        how = (f"its output read as {test['reading']} is the expected one" if "reading" in test else
               f"with {json.dumps(test['rewrite'])}, {key.engine} ran its repro right")
        how += " (the upstream failure's one culprit, cut out alone)" if culprit else ""
        return passed, f"family {passed.name} of {_key_text(key)}: {how}"
    if candidates and not candidates[0].tested:
        return candidates[0], f"family {candidates[0].name} (untested: by operator and failure alone) of {_key_text(key)}"
    return None  # no test ran here, or the engine is still wrong without the trigger: another defect


def _unknown_shape_rule(key: RootKey, facts: ReproFacts | None, noise: NoiseClasses | None) -> UnknownShapeRule | None:
    """The engine's upstream_unknown_shape rule (backends/<engine>/triage.yaml) when this `upstream` failure's culprits hand its
    consumer only tensors of unknown static shape (see witness.hands_on_unknown_shape); else None."""
    rule = noise.unknown_shape(key.engine) if noise is not None and key.failure == UPSTREAM else None
    return rule if rule is not None and facts is not None and facts.unknown_shape_handed else None
