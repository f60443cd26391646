"""Trigger rewrites: the smallest change that makes the engine right on a reduced repro (an omitted default written
out, a shorthand spelled out), which names the root cause by its trigger instead of by how it failed.

Each rewrite is judged on the blamed engine and its two cheap voters only: a rewrite's question is whether the failure
goes, not who else is right.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from ofuzz.core.onnx_guard import static_shapes
from ofuzz.core.attribute_values import PER_AXIS_ONES, varied_attributes, with_value
from ofuzz.core.prose_defaults import auto_pad_written_out, schema_defaults_written_out, slices_spelled_out, written_out
from ofuzz.core.shorthands import (REDUCE_OPS, backward_steps_reversed, negative_axes_spelled_out, negative_steps_spelled_out,
                                   reduce_axes_spelled_out,
                                   resize_axes_spelled_out)
from ofuzz.core.vocab import DCF, DCP
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.judging import Judged, Policy, declared_shapes, judge_in_memory
from ofuzz.judge.localise import pick_voters
from ofuzz.judge.signature import Signature
from ofuzz.triage.reduce_checks import redeclared
from ofuzz.triage.rootcause import crash_like, failure_of
from ofuzz.triage.witness import culprit_alone


def omitted_defaults_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str,
                             policy: Policy, status: str, crashed: bool = False, shape: bool = False) -> list[str]:
    """The omitted prose-default attributes ("MaxPool.strides", see prose_defaults) a reduced repro's failure needs:
    written out at their defaults, `engine` runs the repro (a failure, `status` IF/MCF) or also agrees with two voters
    (a wrong value). All of them first, then each attribute alone, to name the one that matters (the pools' strides,
    not their pads). Empty when nothing was omitted or it still fails."""
    def fixes(only: set[str] | None) -> list[str]:
        fixed, wrote = written_out(model, only)
        return wrote if wrote and goes_away(pool, fixed, feeds, engine, policy, status, crashed, shape) else []

    every = fixes(None)
    names = sorted({w.split(".", 1)[1] for w in every})
    alone = [w for name in names for w in fixes({name})] if len(names) > 1 else []
    return alone or every


def schema_defaults_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str,
                            policy: Policy, shape: bool = False, status: str = DCF) -> list[str]:
    """The omitted schema-default attributes ("ReduceSumSquare.keepdims") a one-node repro's wrong output, or an upstream
    failure, needs: with them written at their defaults (see prose_defaults.schema_defaults_written_out) `engine` agrees
    with two voters (`status` DCF) or runs the repro (IF/MCF). All of them first, then each alone, to name the one that
    matters. Asked of few findings (a misread default shows as a wrong shape, or as the bad tensor a culprit hands on:
    hand triage 26 found MNN's keepdims default of ReduceL1/L2 behind two `upstream` run failures); empty when nothing
    was omitted or it still fails."""
    def fixes(only: set[str] | None) -> list[str]:
        fixed, wrote = schema_defaults_written_out(model, only)
        return wrote if wrote and goes_away(pool, fixed, feeds, engine, policy, status, shape=shape) else []

    every = fixes(None)
    alone = [w for name in every for w in fixes({name})] if len(every) > 1 else []
    return alone or every


def auto_pad_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy,
                     status: str, crashed: bool = False, shape: bool = False) -> list[str]:
    """The auto_pad shorthands ("AveragePool.auto_pad=SAME_LOWER") a reduced repro's failure needs: with the explicit pads
    they stand for, `engine` runs it (a failure) or also agrees with two voters (a wrong value). Empty otherwise."""
    if not any(a.name == "auto_pad" and a.s in (b"SAME_UPPER", b"SAME_LOWER") for n in model.graph.node for a in n.attribute):
        return []
    return _spelled(auto_pad_written_out, pool, model, feeds, engine, policy, status, crashed, shape)


def slice_axes_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy,
                       status: str, crashed: bool = False, shape: bool = False) -> list[str]:
    """["Slice.axes"] when a reduced repro's failure needs a Slice over several axes: spelled out as one Slice per axis
    (prose_defaults.slices_spelled_out), `engine` runs it (a failure) or also agrees with two voters (a wrong value)."""
    fixed, wrote = slices_spelled_out(model)
    return wrote if wrote and goes_away(pool, fixed, feeds, engine, policy, status, crashed, shape) else []


def slice_steps_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy,
                        status: str, crashed: bool = False, shape: bool = False) -> list[str]:
    """["Slice.steps"] when a reduced repro's failure needs a Slice that steps backward: with the elements it selects
    gathered instead (prose_defaults.negative_steps_spelled_out), `engine` runs it (a failure) or also agrees with two
    voters (a wrong value), and so it does with the same Slice stepping forward over the same elements
    (backward_steps_reversed): the step's sign is the trigger, not the Slice handler as such (onnx2tf's default mode
    mishandles a Slice's layout whichever way it steps, which a Gather in its place dodges too)."""
    wrote = _spelled(negative_steps_spelled_out, pool, model, feeds, engine, policy, status, crashed, shape)
    return wrote and _spelled(backward_steps_reversed, pool, model, feeds, engine, policy, status, crashed, shape)


def resize_axes_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy,
                        status: str, crashed: bool = False, shape: bool = False) -> list[str]:
    """["Resize.axes"] when a reduced repro's failure needs a Resize that names `axes`: with its roi, scales or sizes
    covering every axis instead (shorthands.resize_axes_spelled_out), `engine` runs it (a failure) or also agrees with
    two voters (a wrong value)."""
    if not any(n.op_type == "Resize" and any(a.name == "axes" for a in n.attribute) for n in model.graph.node):
        return []
    return _spelled(resize_axes_spelled_out, pool, model, feeds, engine, policy, status, crashed, shape)


def reduce_axes_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy,
                        status: str, crashed: bool = False, shape: bool = False) -> list[str]:
    """["Reduce.axes"] when a reduced repro's failure needs a Reduce that leaves its axes out: with every axis written
    (shorthands.reduce_axes_spelled_out), `engine` runs it (a failure) or also agrees with two voters (a wrong value)."""
    if not any(n.op_type in REDUCE_OPS for n in model.graph.node):
        return []
    return _spelled(reduce_axes_spelled_out, pool, model, feeds, engine, policy, status, crashed, shape)


def negative_axes_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy,
                          status: str, crashed: bool = False, shape: bool = False) -> list[str]:
    """["OneHot.axis<0"] when a reduced repro's failure needs a negative axis: with it written as the non-negative axis
    it counts from the back (shorthands.negative_axes_spelled_out), `engine` runs it (a failure) or also agrees with two
    voters (a wrong value)."""
    return _spelled(negative_axes_spelled_out, pool, model, feeds, engine, policy, status, crashed, shape)


def ignored_attribute_trigger(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str,
                              policy: Policy) -> tuple[list[str], dict[str, object]]:
    """(["Resize.nearest_mode"], what was seen) when a one-node repro's wrong output comes from an attribute the engine
    does not read: set to each value the spec allows (core/attribute_values.py), `engine` gives the very same outputs
    while the expected ones change, and with one of those values it is right (it computes as if the attribute had
    that value). Empty and {} otherwise. Each piece of evidence is needed: outputs that change show the attribute read;
    expected outputs that stay show nothing (the attribute does not matter on this input); an engine right on no value
    is wrong in some other way too. And only one attribute may look ignored: on a small input an attribute the engine
    does read can leave its output unchanged (onnx2tf's nearest Resize of a 1x2 image gives the same pixels under
    half_pixel and asymmetric), and then the input cannot tell which attribute the engine got wrong."""
    if len(model.graph.node) != 1:
        return [], {}
    node = model.graph.node[0]
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    varied = varied_attributes(node, opset)
    if not varied:
        return [], {}
    base = _outputs(rewrite_verdict(pool, model, feeds, engine, policy), engine)
    if base[0] is None or base[1] is None:
        return [], {}
    looks_ignored: list[tuple[str, object, list[object], object]] = []
    for attr, now, others in varied:
        expected_changed, right_with = False, None
        for value in others:
            varied_model = with_value(model, node.op_type, attr, value)
            if (node.op_type, attr) in PER_AXIS_ONES:  # the output's shape moves with it: declared anew (an adapter's layout
                # restoration reads the declared shape)
                varied_model = redeclared(varied_model) or varied_model
            judged = rewrite_verdict(pool, varied_model, feeds, engine, policy)
            mine, expected = _outputs(judged, engine)
            if mine is None or not _same(mine, base[0]):
                break  # the engine's output moved (or it failed): it reads the attribute
            expected_changed = expected_changed or (expected is not None and not _same(expected, base[1]))
            if right_with is None and gone_in(judged, engine, DCF):
                right_with = value
        else:
            if expected_changed and right_with is not None:
                looks_ignored.append((f"{node.op_type}.{attr}", now, list(others), right_with))
    if len(looks_ignored) != 1:
        return [], {}
    label, now, others, right_with = looks_ignored[0]
    return [label], {"attribute": label, "given": now, "tried": others, "right_as_if": right_with}


def culprit_ignored_attribute(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], culprit: int, engine: str,
                              value_engine: str, policy: Policy) -> dict[str, object] | None:
    """An upstream failure's one culprit, cut out alone and fed its values in the repro, asked whether the engine reads
    its attributes (`ignored_attribute_trigger`): what the consumer tripped on is then that attribute ignored, the same
    defect as the culprit's own wrong output keyed so (hand triage 31: onnx2tf's AveragePool ignoring `dilations`
    failed its consumer in the default mode and gave a wrong shape in keep-shape mode). None when it reads them all."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    if not varied_attributes(model.graph.node[culprit], opset):
        return None
    built = culprit_alone(pool, model, feeds, culprit, value_engine)
    if built is None:
        return None
    ignored, seen = ignored_attribute_trigger(pool, built[0], built[1], engine, policy)
    return {"ignored": ignored, **seen, "culprit": model.graph.node[culprit].name} if ignored else None


def _outputs(judged: Judged, engine: str) -> tuple[dict[str, np.ndarray] | None, dict[str, np.ndarray] | None]:
    """The engine's outputs and the expected ones in a verdict (None where there are none)."""
    verdict = judged.verdict
    mine, ref = verdict.results.get(engine), verdict.results.get(verdict.expected_from)
    got = mine.outcome.outputs if mine is not None and mine.outcome is not None and mine.outcome.ok and mine.outcome.outputs else None
    want = (ref.outcome.outputs if verdict.expected_from != engine and ref is not None and ref.outcome is not None and ref.outcome.ok
            and ref.outcome.outputs else None)
    return got, want


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Bit for bit the same outputs (NaN equal to NaN): one computation run twice, not two that happen to be close. A
    tensor handed back channel-last in one run and channel-first in the other is the same computation: an adapter
    restores the ONNX layout only where the output has its declared shape (onnx2tf's undilated AveragePool came back
    as 1x2x3x1 where 1x1x1x2 was declared, and as 1x1x2x3 once that was the declared shape)."""
    def equal(x: np.ndarray, y: np.ndarray) -> bool:
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape and x.ndim == y.ndim >= 3 and x.shape == (y.shape[0], *y.shape[2:], y.shape[1]):
            x = np.moveaxis(x, -1, 1)
        elif x.shape != y.shape and x.ndim == y.ndim >= 3 and y.shape == (x.shape[0], *x.shape[2:], x.shape[1]):
            y = np.moveaxis(y, -1, 1)
        return np.array_equal(x, y, equal_nan=x.dtype.kind in "fc" and y.dtype.kind in "fc")
    return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)


def _spelled(spell: Callable[[onnx.ModelProto, dict[str, tuple[int, ...]]], tuple[onnx.ModelProto, list[str]]], pool: EnginePool,
             model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy, status: str, crashed: bool,
             shape: bool) -> list[str]:
    """What `spell` (a shorthand rewrite that needs static shapes) replaced, when `engine` then runs the repro or also
    agrees with two voters; empty when it replaced nothing, shapes are unknown, or the failure stays."""
    shapes = static_shapes(model, feeds)
    if shapes is None:
        return []
    fixed, wrote = spell(model, shapes)
    return wrote if wrote and goes_away(pool, fixed, feeds, engine, policy, status, crashed, shape) else []


VALUE_KINDS = {"value", "nan", "inf"}  # mismatch categories of values, compared once the shapes agree


def goes_away(pool: EnginePool, fixed: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy, status: str,
              crashed: bool = False, shape: bool = False) -> bool:
    """Does `engine` run the rewritten repro (a failure, `status` IF/MCF) or also agree with two voters (a wrong value)?
    A failure only has to go: MNN's MaxPool with strides written out converts, and its ReduceSumSquare consumer is then
    wrong (another defect, keepdims), which the repro does not show. A crash (`crashed`) only has to stop crashing:
    MNN's AveragePool→Mean without strides dies with SIGILL in the converter, and with strides its two-input Mean fails
    cleanly (another defect; hand triage 11 found that pair as a root cause of its own). A wrong shape (`shape`) only
    has to become the right shape: values are compared only once shapes agree, so a wrong shape hides any wrong value
    behind it (hand triage 22: MNN's ReduceLogSumExp without keepdims also showed its Exp clamp once keepdims was
    written out; the trigger's revealed-behind check then triages that value on its own)."""
    return gone_in(settled_verdict(pool, fixed, feeds, engine, policy), engine, status, crashed, shape,
                   declared_shapes(fixed) if shape else None)


def settled_verdict(pool: EnginePool, fixed: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy) -> Judged:
    """`rewrite_verdict`, judged once more in a fresh engine process when the engine crashed on the rewritten repro: an
    engine whose heap an earlier model damaged dies on the next model it is given (MNN's negative-step Slice, wrong
    values or a crash: its Gather spelling then crashed MNN's converter right after the reducer's candidates and ran in
    a fresh process, so the Slice kept roots of its own beside the negative-step defect). A rewrite that crashes for
    real crashes again; that costs one more run."""
    judged = rewrite_verdict(pool, fixed, feeds, engine, policy)
    now = judged.verdict.results.get(engine)
    if now is None or now.outcome is None or now.outcome.ok or engine not in pool.workers:
        return judged
    if not crash_like(failure_of(now.status, kind=now.outcome.kind, etype=now.outcome.etype or now.outcome.signal)):
        return judged
    pool.workers[engine].close()  # the next prepare starts a fresh process
    return rewrite_verdict(pool, fixed, feeds, engine, policy)


def gone_in(judged: Judged, engine: str, status: str, crashed: bool = False, shape: bool = False,
            declared: dict[str, tuple[int, ...]] | None = None) -> bool:
    """`goes_away`'s answer from a rewritten repro's verdict already at hand (`declared`: the rewritten repro's output
    shapes by ONNX inference, for a wrong shape)."""
    now = judged.verdict.results.get(engine)
    if now is None:
        return False
    if shape and status == DCF and now.status == DCF:
        kinds = {Signature.parse(f.signature).kind for f in judged.findings if f.engine == engine and f.status == DCF}
        if kinds:
            return kinds <= VALUE_KINDS
        # nobody blamed, the engines split on values: the shape is right when it is the declared one. A rewrite can
        # leave values no two engines agree on: onnxruntime's one-node MaxPool SAME_UPPER with dilations, halved to a
        # 1-element input, spelled out becomes one window of padding only, so the repro kept a key of its own beside
        # its shown-trigger sibling (hand triage 30)
        return judged.verdict.split and _declared_shapes(now, declared)
    if crashed and now.status != DCF and now.outcome is not None and not now.outcome.ok:
        return not crash_like(failure_of(now.status, kind=now.outcome.kind, etype=now.outcome.etype or now.outcome.signal))
    return now.status in ((DCP,) if status == DCF else (DCP, DCF))


def _declared_shapes(result: object, declared: dict[str, tuple[int, ...]] | None) -> bool:
    """Every output the engine gave has the shape ONNX inference declares (and it gave them all)."""
    outputs = getattr(getattr(result, "outcome", None), "outputs", None)
    if not declared or not outputs:
        return False
    return all(name in outputs and tuple(np.shape(outputs[name])) == tuple(shape) for name, shape in declared.items())


def rewrite_verdict(pool: EnginePool, fixed: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str, policy: Policy) -> Judged:
    """A rewritten repro judged on `engine` and its two cheap voters only."""
    return judge_in_memory(pool, fixed, feeds, do_localise=False, policy=policy,
                           skip=_all_but_voters(pool, engine, "not needed to test a rewritten trigger"))


def _all_but_voters(pool: EnginePool, engine: str, why: str) -> dict[str, str]:
    """Skip every engine but `engine` and its two cheap voters."""
    keep = set(pick_voters(pool.names, engine, limit=2)) | {engine}
    return {e: why for e in pool.names if e not in keep}


def rewrite_original(model: onnx.ModelProto, kind: str, wrote: list[str], feeds: dict[str, np.ndarray]) -> onnx.ModelProto | None:
    """The finding's original model with the rewrite a trigger showed on its repro (the same attributes written out)."""
    if kind == "ignored":  # "Resize.nearest_mode=floor": every such node given the value the engine computes as
        op_attr, _, value = wrote[0].partition("=")
        op, _, attr = op_attr.partition(".")
        varied = with_value(model, op, attr, int(value) if value.lstrip("-").isdigit() else value)  # ONES: per node
        return (redeclared(varied) or varied) if (op, attr) in PER_AXIS_ONES else varied  # its output shapes move with it
    if kind == "omitted":  # "MaxPool.strides": written_out names the attribute alone
        fixed, did = written_out(model, {w.split(".", 1)[1] for w in wrote})
    elif kind == "schema_default":  # "Resize.mode": schema_defaults_written_out names operator and attribute
        fixed, did = schema_defaults_written_out(model, set(wrote))
    elif wrote == ["Slice.axes"]:  # a Slice over several axes, as one Slice per axis
        fixed, did = slices_spelled_out(model)
    else:
        shapes = static_shapes(model, feeds)
        if shapes is None:
            return None
        # a Slice stepping backward, as a Gather of what it selects; a Resize's axes, as scales over every axis; else
        # auto_pad as the pads it stands for
        spell = {"Slice.steps": negative_steps_spelled_out, "Resize.axes": resize_axes_spelled_out,
                 "Reduce.axes": reduce_axes_spelled_out}.get(wrote[0] if len(wrote) == 1 else "", auto_pad_written_out)
        fixed, did = spell(model, shapes)
    return fixed if did else None
