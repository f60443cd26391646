"""Merge rules: when two root causes are one defect, and the evidence that says so.

Each rule is registered with its name and the evidence it rests on (`@merge_rule`); `run_merge_rules` runs them in
order, then again, until a whole pass merges nothing (a fixed point, as Hypothesis runs its shrink passes), and every
merge is recorded on the root cause it lands in (`evidence`: rule, what it merged, the shared fact), so `ofuzz bugs
--explain RC` can print why two findings are counted as one. To add a rule: write a function of `roots` that calls
`_merge`/`_merge_groups`/`_absorb_into_one`, decorate it, and say what it rests on.
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any, Callable

from ofuzz.core.vocab import DCF, FAILED, crash_or_hang
from ofuzz.triage.record import RootCause
from ofuzz.triage.rootcause import IGNORED_ATTRIBUTE, PATTERN, SHOWN_TRIGGERS, UPSTREAM

Roots = dict[str, RootCause]
FAMILY = "family"  # the status of a root key that stands for an engine's operator family (backends/<engine>/triage.yaml)


EVIDENCE_KINDS = {
    "rewrite": "the same rewrite of the repro makes the engine right on both",
    "source-line": "the engine reports the same source line for both",
    "witness": "the failing consumer runs right alone: the defect is in what feeds it",
    "re-run": "the repro, re-run, fails as the other root cause does",
    "structure": "the same operator alone, by the shape of the keys only (no experiment): weaker evidence",
}


@dataclass(frozen=True)
class MergeRule:
    name: str
    evidence: str  # what shows that the root causes it merges are one defect
    run: Callable[[Roots], None]
    kind: str = "structure"  # one of EVIDENCE_KINDS


RULES: list[MergeRule] = []
_ACTIVE: contextvars.ContextVar[MergeRule | None] = contextvars.ContextVar("merge_rule", default=None)


def merge_rule(name: str, evidence: str, kind: str) -> Callable[[Callable[[Roots], None]], Callable[[Roots], None]]:
    """Register a merge rule; calling it (from `run_merge_rules` or directly) records its merges under `name`."""
    if kind not in EVIDENCE_KINDS:
        raise ValueError(f"merge rule {name}: evidence kind {kind!r} is not one of {sorted(EVIDENCE_KINDS)}")

    def wrap(fn: Callable[[Roots], None]) -> Callable[[Roots], None]:
        rule = MergeRule(name, evidence, fn, kind)

        def run(roots: Roots) -> None:
            token = _ACTIVE.set(rule)
            try:
                fn(roots)
            finally:
                _ACTIVE.reset(token)

        run.__doc__, run.__name__ = fn.__doc__, fn.__name__
        RULES.append(MergeRule(name, evidence, run, kind))
        return run
    return wrap


MAX_PASSES = 5


def run_merge_rules(roots: Roots, passes: int = MAX_PASSES) -> int:
    """Every registered rule, in order, until a pass merges nothing (at most `passes`); returns the passes run."""
    for n in range(1, passes + 1):
        before = len(roots)
        for rule in RULES:
            rule.run(roots)
        if len(roots) == before:
            return n
    return passes


def key_text(root: dict[str, Any]) -> str:
    """A root key in one line, as `ofuzz bugs` shows it."""
    k = root["key"]
    text = f"{root.get('engine', k.get('engine', '?'))} {k['status']} {k['failure']} {'+'.join(k.get('ops', [])) or '-'}"
    return text + (f" [{', '.join(k['attrs'])}]" if k.get("attrs") else "") + (f" \"{k['message']}\"" if k.get("message") else "")


@merge_rule("shown-trigger", "the same rewrite of the repro (an omitted default written out, a shorthand spelled out) makes one converter right on both", "rewrite")
def absorb_shown_triggers(roots: Roots) -> None:
    """Root causes keyed by the same shown trigger of one converter (an omitted prose default written out, or a
    shorthand spelled out, made the failure go) are one, whatever the failure or the converter's mode: MNN's pools
    without strides crash (SIGFPE, converter SIGILL) or, on some shapes, report a shape error; onnx2tf's AveragePool
    with SAME_LOWER gives wrong values in one mode and fails to convert in the other (seed 76). They join the worst of
    them, so the root cause keeps the crash's severity."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for rid, r in roots.items():
        if r["key"].get("message") in SHOWN_TRIGGERS:
            groups.setdefault((_converter(r), r["key"]["message"], tuple(r["key"]["attrs"])), []).append(rid)
    _merge_groups(roots, groups)


def _merge_groups(roots: Roots, groups: dict[Any, list[str]]) -> None:
    """Each group of root cause ids becomes one: into the worst, then the earliest (the severity and the first model
    stay the group's); the group's key is the shared fact recorded."""
    for shared, ids in groups.items():
        into = min(ids, key=lambda i: (roots[i]["severity"], roots[i]["first_idx"] if roots[i]["first_idx"] is not None else 10**12, i))
        for rid in sorted(ids):
            if rid != into:
                _merge(roots, rid, roots[into], shared=list(shared) if isinstance(shared, tuple) else shared)


@merge_rule("upstream-superset", "an upstream failure whose operators include a smaller upstream root cause's, and whose extra operators each run right alone on the engine", "witness")
def absorb_supersets(roots: Roots) -> None:
    """A failure keyed `upstream` (its failing operator runs alone, so the defect lies in what feeds it) whose operators
    include all of a smaller upstream failure's, of the same engine and status, joins that smaller root cause when each
    extra operator, cut out alone and fed the values it gets in the repro, runs on the engine (`culprits_failing_alone`,
    recorded by the triage): then they only carry the same bad tensor further (onnx2tf's dynamic-shape Expand reached
    Conv, Equal, MatMul, Slice→Pad: one root cause, not five). An extra operator that fails alone is a defect of its own
    (hand triage 25: a GRU whose own output layout was wrong had joined `upstream Reshape` because the Reshape fed it);
    a root cause without that record joins nothing. Only into another upstream root cause."""
    def ops(r: dict[str, Any]) -> set[str]:
        return set(r["key"]["ops"])

    for rid in sorted(roots, key=lambda i: -len(ops(roots[i]))):  # largest first, so chains collapse onto the smallest
        r = roots[rid]
        failing = r.get("culprits_failing_alone")
        if r["key"]["failure"] != UPSTREAM or not ops(r) or failing is None:
            continue
        into = [o for o in roots.values() if o is not r and o["engine"] == r["engine"] and o["key"]["status"] == r["key"]["status"]
                and o["key"]["failure"] == UPSTREAM and o["key"]["ops"] and ops(o) < ops(r) and not (ops(r) - ops(o)) & set(failing)]
        if not into:
            continue
        o = min(into, key=lambda o: (len(ops(o)), o["id"]))
        _merge(roots, rid, o, carriers=sorted(ops(r) - ops(o)), engine_gave=f"{r['engine']} runs each of them right alone")


@merge_rule("unreduced-into-reduced", "an unreduced failure with the same status, failure and message holds the operators of exactly one reduced root cause", "structure")
def absorb_unreduced(roots: Roots) -> None:
    """A failure whose repro the reducer could not bring down (keyed without operators) joins the one reduced root cause
    of the same engine, status, failure and message whose operators its repro holds: MNN's converter crashing on an
    LSTM came back as a 1-node root cause and as two 5- and 8-node ones holding that LSTM (hand triage 6).  Only when
    exactly one reduced root cause fits: with two candidates nothing tells which the big repro shows."""
    def fits(r: dict[str, Any], o: dict[str, Any]) -> bool:
        k, ko = r["key"], o["key"]
        return (o["engine"] == r["engine"] and ko["status"] == k["status"] and ko["failure"] == k["failure"]
                and ko.get("message", "") == k.get("message", "") and bool(ko["ops"]) and set(ko["ops"]) <= set(r["held"]))

    _absorb_into_one(roots, lambda r: (not r["key"]["ops"] and r["key"]["status"] != DCF and bool(r["held"])
                                      and r["key"].get("message") not in SHOWN_TRIGGERS), fits)


def _absorb_into_one(roots: Roots, wants: Callable[[dict[str, Any]], bool],
                     fits: Callable[[dict[str, Any], dict[str, Any]], bool],
                     shared: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None) -> None:
    """Each root cause that `wants` picks joins the other root cause that `fits` it, when exactly one does (with two,
    nothing tells which of them it is); `shared` names the fact the two share, recorded with the merge."""
    for rid in sorted(roots):
        r = roots.get(rid)
        if r is None or not wants(r):
            continue
        into = [o for o in roots.values() if o is not r and fits(r, o)]
        if len(into) == 1:
            _merge(roots, rid, into[0], **(shared(r, into[0]) if shared else {}))


def _merge(roots: Roots, rid: str, target: dict[str, Any], **shared: Any) -> None:
    """Root cause `rid` joins `target`: its signatures, findings, occurrences, source lines and earliest model; the
    active rule's evidence and the `shared` fact (a source line, a trigger) are recorded on `target`."""
    r = roots.pop(rid)
    target["signatures"] += [s for s in r["signatures"] if s not in target["signatures"]]
    target["findings"] += r["findings"]
    target["occurrences"] += r["occurrences"]
    target.setdefault("absorbed", []).append(rid)
    rule = _ACTIVE.get()
    target.setdefault("evidence", []).append({"rule": rule.name if rule else "direct", "why": rule.evidence if rule else "",
                                              "kind": rule.kind if rule else "structure",
                                              "merged": rid, "merged_key": key_text(r), "into_key": key_text(target),
                                              "findings": list(r["findings"]), **shared})
    target["evidence"] += r.get("evidence", [])
    if r.get("members"):
        target.setdefault("members", []).extend(r["members"])
    if r.get("where"):  # the converter source lines its repros failed at
        target.setdefault("where", set()).update(r["where"])
    if r.get("users_where"):  # and failed at in the converter's users' mode
        target.setdefault("users_where", set()).update(r["users_where"])
    if "severity" in r:  # as bad as its worst member
        target["severity"] = min(target.get("severity", r["severity"]), r["severity"])
    if r["first_idx"] is not None and (target["first_idx"] is None or r["first_idx"] < target["first_idx"]):
        target["first_idx"], target["first_model"] = r["first_idx"], r["first_model"]


@merge_rule("consumer-of-upstream", "a consumer failure whose repro holds the producer of exactly one upstream root cause of the same engine and status", "witness")
def absorb_consumers_of_upstream(roots: Roots) -> None:
    """A failure keyed by how a consumer complained (its exception and message) whose repro holds the producer of an
    `upstream` root cause of the same engine and status, plus more, joins it: the consumer fails because of what that
    producer hands it (hand triage 7: onnx2tf's ConstantOfShape layout as `upstream ConstantOfShape` and again as
    ConstantOfShape+GatherElements raising InvalidArgumentError; its Expand defect again in an unreduced 8-node repro).
    Only when exactly one upstream root cause fits, and never a crash or a hang: those are defects wherever they happen
    (an unreduced 16-node onnx2tf hang had joined an `upstream Slice` root cause because its model held a Slice)."""
    def wants(r: dict[str, Any]) -> bool:
        k = r["key"]
        return (k["status"] in FAILED and k["failure"] not in (UPSTREAM, PATTERN) and not crash_or_hang(k["failure"])
                and k.get("message") not in SHOWN_TRIGGERS)  # its trigger was shown, not guessed

    def fits(r: dict[str, Any], o: dict[str, Any]) -> bool:
        ko = o["key"]
        return (o["engine"] == r["engine"] and ko["status"] == r["key"]["status"] and ko["failure"] == UPSTREAM and bool(ko["ops"])
                and set(ko["ops"]) < (set(r["key"]["ops"]) or set(r["held"])))

    _absorb_into_one(roots, wants, fits)


@merge_rule("upstream-into-wrong-shape", "its culprit operator alone gives a wrong shape on the same engine and mode, which makes consumers fail", "witness")
def absorb_upstream_into_wrong_shape(roots: Roots) -> None:
    """A failure keyed `upstream X` (its consumer runs fine alone, so X hands it something bad) joins the engine's one
    root cause `DCF shape` in X alone: a wrong output shape is exactly what makes consumers fail (hand triage 7: MNN
    ignoring MaxPool's dilations came back as `DCF shape MaxPool` and as `IF upstream MaxPool`, whose consumer failed
    on the 6x8 output). A wrong value or dtype does not make a consumer fail, so only shape.

    Across the modes of one converter too: a conversion failure moved to the mode users run (`tensorflow-nhwc`,
    `converted_as` the campaign's `tensorflow`) is the same converter's handler (hand triage 8: onnx2tf's Shape
    ignoring a lone `start` was `DCF shape Shape` in keep-shape mode and `MCF upstream Shape` in the default one) — no
    longer: within one mode only. The witness (the consumer runs right alone) speaks for one mode; across modes the same
    operator can be two defects (hand triage 22: onnx2tf's OneHot with axis=0 puts the depth axis wrong in the default
    mode, another defect than the keep-shape mode's negative-axis arithmetic at OneHot.py:137, and was hidden under it)."""
    _absorb_into_one(roots, lambda r: r["key"]["failure"] == UPSTREAM and len(r["key"]["ops"]) == 1,
                     lambda r, o: o["engine"] == r["engine"] and _wrong_shape_in(o, r["key"]["ops"]))


@merge_rule("upstream-same-signature", "one campaign signature whose models reduced to the operator alone and to it with a consumer", "witness")
def absorb_upstream_into_its_signature(roots: Roots) -> None:
    """A failure keyed `upstream X` joins the engine's one root cause in which X fails alone, at the same status, when
    the two share a signature (the same failure and message in the campaign): the reducer kept a consumer of X in one
    model of that signature and not in the other. Hand triage 13: the reference's Pad on negative pads came back as
    `IF upstream Pad` (2 nodes, the signature's first model) and `IF exception:ValueError Pad` (1 node, its further
    model), one message "index can't contain negative values"."""
    _absorb_into_one(roots, lambda r: r["key"]["failure"] == UPSTREAM and len(r["key"]["ops"]) == 1,
                     lambda r, o: (o["engine"] == r["engine"] and o["key"]["status"] == r["key"]["status"]
                                   and o["key"]["failure"] != UPSTREAM and list(o["key"]["ops"]) == list(r["key"]["ops"])
                                   and bool(set(o["signatures"]) & set(r["signatures"]))))


@merge_rule("failed-node-is-run-failure", "every repro of the divergence re-runs as the same exception in the same operator", "re-run")
def absorb_failed_node_into_its_run_failure(roots: Roots) -> None:
    """A `DCF failure` root cause (the blamed engine failed to compute the diverging node once its intermediates were
    exposed) whose repros all re-run as a run failure (IF) of exception type E joins the engine's one `IF exception:E`
    root cause of the same operator: the node fails to run either way. Hand triage 14 (#19): onnx2tf's RoiAlign
    dividing by H-1 = 0 came back as `DCF failure RoiAlign` and as `IF exception:InvalidArgumentError RoiAlign`, one
    source line and one message on re-run; the same pair appeared in every small-model campaign checked."""
    def failed_node(r: dict[str, Any]) -> bool:
        reran = set(r.get("reran_as") or ())
        return (r["key"]["status"] == DCF and r["key"]["failure"] == "failure" and len(r["key"]["ops"]) == 1
                and len(reran) == 1 and next(iter(reran)).startswith("IF exception:"))

    def fits(r: dict[str, Any], o: dict[str, Any]) -> bool:
        return (o["engine"] == r["engine"] and f"{o['key']['status']} {o['key']['failure']}" == next(iter(r["reran_as"]))
                and list(o["key"]["ops"]) == list(r["key"]["ops"]))

    _absorb_into_one(roots, failed_node, fits)


OUTPUT_MISMATCHES = ("shape", "value", "nan", "inf")  # how a divergence's outputs differ (not `failure`: its node raised)


@merge_rule("same-attribute-drop", "one operator's wrong output on one engine, which the same attribute back at its default makes right on both repros", "rewrite")
def absorb_by_shared_attribute_drop(roots: Roots) -> None:
    """A divergence in one operator joins the engine's one other divergence of that operator, status and failure whose
    fixing rewrites are among its own: the reducer set each attribute back to its default and recorded which made the
    engine right (`drop_fixes`); when every rewrite that fixes the other repro also fixes this one, the same change of
    the same operator shows both (hand triage 22 #15: onnx2tf's RoiAlign handing NCHW to crop_and_resize was keyed once
    by output_height and output_width, once by output_width alone, as the reducer found each repro needed). The keys
    alone would merge nothing: which attributes a repro keeps is not evidence, what their defaults do is. A wrong
    shape and a wrong value join too, the rewrite being the evidence (an AveragePool ignoring `dilations` gives either,
    as its pads allow: hand triage 22 #16). A root keyed by an attribute the engine ignores names its operator in that
    attribute (`AveragePool.dilations ignored`): the ignored `dilations` of one repro and the dropped `dilations` of
    its wrong-shape sibling, whose pads kept the ignored test from holding, are one defect (seed 30, c30k)."""
    def wants(r: dict[str, Any]) -> bool:
        k = r["key"]
        return k["status"] == DCF and k["failure"] in OUTPUT_MISMATCHES and len(_operators(k)) == 1 and bool(r.get("drop_fixes"))

    def fits(r: dict[str, Any], o: dict[str, Any]) -> bool:
        return (wants(o) and o["engine"] == r["engine"] and _operators(o["key"]) == _operators(r["key"])
                and set(o["drop_fixes"]) <= set(r["drop_fixes"]))

    _absorb_into_one(roots, wants, fits, lambda r, o: {"rewrite": {"drop_attributes": sorted(o["drop_fixes"])},
                                                       "engine_gave": f"{r['engine']} right on both repros"})


def _operators(key: dict[str, Any]) -> list[str]:
    """The key's operators; of a key by an ignored attribute (no operators), the one its attribute names."""
    if key.get("ops") or key.get("message") != IGNORED_ATTRIBUTE:
        return list(key.get("ops") or [])
    return sorted({a.split(".", 1)[0] for a in key.get("attrs") or []})


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
    return k["status"] == DCF and k["failure"] == "shape" and list(k["ops"]) == list(ops)


@merge_rule("same-source-line", "the reduced repros fail at the same line of the converter source", "source-line")
def absorb_same_source_line(roots: Roots) -> None:
    """Failures of one converter whose reduced repros fail at the same line of its source (the adapter's `where`,
    "ops/ScatterElements.py:240:make_node") are one root cause, whatever operator or message keyed them: that line is
    the unit of a defect to its maintainer, and the hand triages' rule for duplicates. In a shared helper (a function
    outside the per-operator handlers, utils/...) the function is the unit: one misuse in two branches of it is one
    defect. Seed 77: onnx2tf's ScatterElements.py:240 as a ValueError and an InvalidArgumentError; Div and Sub both in
    explicit_broadcast; ReduceL1 and ReduceL2 at two lines of define_reduceXXX (hand triage 11 #24). Never a crash
    (no line) and only roots with one place; into the worst, then earliest. A divergence whose node raised once exposed
    counts: the line is the engine's, whichever stage met it."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rid, r in roots.items():
        places = {_place(w) for w in r.get("where") or set()}
        if len(places) == 1 and _raised(r["key"]):
            groups.setdefault((_converter(r), next(iter(places))), []).append(rid)
    _merge_groups(roots, groups)


def _raised(key: dict[str, Any]) -> bool:
    """Did the engine raise in the key's own operators (at a source line it can report)? A conversion or run failure,
    or a divergence whose node failed once its intermediates were exposed (`DCF failure`): hand triage 22 found
    onnx2tf's CenterCropPad.py:149 as a `DCF failure` of the keep-shape mode and as a default-mode conversion failure,
    two root causes of one line. Not an `upstream` or `pattern` failure: it raised in a witness, whose line shows where
    the bad tensor was met, not the defect (onnx2tf's Mean.py:83 tf.stack raised for Mean's own unequal shapes and as
    the witness of an Add handing on an NCHW tensor: two defects)."""
    return key["failure"] not in (UPSTREAM, PATTERN) and _failed_to_run(key)


def _failed_to_run(key: dict[str, Any]) -> bool:
    """A conversion or run failure that is no crash or hang, or a divergence whose node raised once exposed."""
    return (key["status"] in FAILED and not crash_or_hang(key["failure"])) or (key["status"] == DCF and key["failure"] == "failure")


def _place(where: str) -> str:
    """The unit of a defect at `where` ("path:line:function"): the line in a per-operator handler, the function in a
    shared helper (utils/), and the caller's line when the helper raised itself ("... via ops/Squeeze.py:80:make_node":
    it rejected what the caller handed it; onnx2tf's convert_axis raises IndexError on any out-of-range axis, for a
    Shape's `end` and for a Squeeze after an elided Reshape alike, two defects)."""
    where, _, caller = where.partition(" via ")
    if caller:
        return _place(caller)
    path, _, rest = where.partition(":")
    line, _, function = rest.partition(":")
    return f"{path}:{function}" if path.startswith("utils/") and function else f"{path}:{line}"


def _own_place(r: dict[str, Any]) -> str | None:
    """The one converter line (`_place`) a root cause's own repros raised at, or None."""
    places = {_place(w) for w in r.get("where") or set()}
    return next(iter(places)) if len(places) == 1 and _raised(r["key"]) else None


@merge_rule("same-line-in-users-mode", "the repro, re-run in the converter's users' mode, fails in its own operator at the line the other root cause fails at", "re-run")
def absorb_same_line_in_users_mode(roots: Roots) -> None:
    """A failure of a converter's other mode (onnx2tf's keep-shape run failure, which has no converter line) whose repro,
    re-run in the mode users run, fails in one of its own operators at line L, joins the one root cause of that converter
    failing at L (`same-source-line`'s unit): hand triage 25 found onnx2tf's ReverseSequence.py:79 passing ONNX axes to
    tf.reverse_sequence as a keep-shape run failure and as a default-mode conversion failure, two root causes."""
    def users_place(r: dict[str, Any]) -> str | None:
        # its users'-mode line is one of its own operators' (checked at export), an upstream culprit's included
        places = {_place(w) for w in r.get("users_where") or set()}
        return next(iter(places)) if len(places) == 1 and not r.get("where") and _failed_to_run(r["key"]) else None

    _absorb_into_one(roots, lambda r: users_place(r) is not None,
                     lambda r, o: _converter(o) == _converter(r) and _own_place(o) == users_place(r),
                     lambda r, o: {"line": users_place(r), "engine_gave": f"{o['engine']} fails at it on both repros"})


@merge_rule("upstream-culprit-line", "an upstream failure's one culprit, cut out alone, fails at the converter line the other root cause fails at", "witness")
def absorb_upstream_by_culprit_line(roots: Roots) -> None:
    """An `upstream` failure whose one culprit failing alone fails there at line L of the converter joins the one root
    cause of that converter failing at L (`same-source-line`'s unit): the culprit raises on its own inputs at that line,
    and the repro only met the same mistake later, at run time, through a tensor of unknown shape. Hand triage 32:
    onnx2tf's Sum as tf.add_n without broadcasting (Sum.py:80) failed a keep-shape run after a ConstantOfShape
    (`IF upstream ConstantOfShape+Sum`) and the default mode's conversion (`MCF … Sum`): two root causes of one line."""
    def culprit_place(r: dict[str, Any]) -> str | None:
        one = len(r.get("culprits_failing_alone") or []) == 1
        return _place(r["culprit_where"]) if r["key"]["failure"] == UPSTREAM and one and r.get("culprit_where") else None

    _absorb_into_one(roots, lambda r: culprit_place(r) is not None,
                     lambda r, o: _converter(o) == _converter(r) and _own_place(o) == culprit_place(r),
                     lambda r, o: {"line": culprit_place(r), "engine_gave": f"{r['engine']} fails at it on the culprit alone"})
