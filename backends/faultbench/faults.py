"""The fault benchmark's catalogue: independent defects seeded into a TEST DOUBLE engine over onnxruntime.

Each fault is a trigger (an operator, optionally an attribute corner or the operator that feeds it) and what the
double then does wrong. `active_faults` says which faults a model triggers, statically; the double (adapter.py) and
the benchmark's scoring (scripts/fault_benchmark.py) both ask it, so what was seeded and what is counted are the same.

Kinds: `offset` adds 1 to the node's first output, `scale` multiplies it by 1.5, `nanflush` turns its NaNs into 0,
`decoy` multiplies it by 1 + 1e-7 (below every tolerance: must never be reported); `segfault`, `abort`, `raise` and
`hang` act at the fault's stage (prepare: conversion, run: inference).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Fault:
    id: str
    op: str
    stage: str  # prepare | run
    kind: str  # offset | scale | nanflush | decoy | segfault | abort | raise | hang
    family: str  # what the benchmark counts it as: value, attribute, process, nan, pattern, decoy
    attr_equals: tuple[tuple[str, Any], ...] = ()
    attr_present: str = ""
    attr_absent: str = ""
    after: str = ""  # only when an input of the node comes from a node of this operator
    doc: str = field(default="", compare=False)


VALUE_KINDS = ("offset", "scale", "nanflush", "decoy")

FAULTS: tuple[Fault, ...] = (
    # single operators, wrong values
    Fault("sigmoid-offset", "Sigmoid", "run", "offset", "value"),
    Fault("softsign-scale", "Softsign", "run", "scale", "value"),
    Fault("mish-offset", "Mish", "run", "offset", "value"),
    Fault("reciprocal-scale", "Reciprocal", "run", "scale", "value"),
    # attribute corners: only with the attribute at a value, written out, or left out
    Fault("softmax-axis0", "Softmax", "run", "scale", "attribute", attr_equals=(("axis", 0),)),
    Fault("leakyrelu-alpha-written", "LeakyRelu", "run", "offset", "attribute", attr_present="alpha"),
    Fault("hardsigmoid-beta-written", "HardSigmoid", "run", "offset", "attribute", attr_present="beta"),
    Fault("thresholdedrelu-alpha-omitted", "ThresholdedRelu", "run", "offset", "attribute", attr_absent="alpha"),
    # the process: crashes, raises and hangs, at conversion and at inference
    Fault("maxpool-ceil-convert-segfault", "MaxPool", "prepare", "segfault", "process", attr_equals=(("ceil_mode", 1),)),
    Fault("averagepool-pads-convert-raise", "AveragePool", "prepare", "raise", "process", attr_equals=(("count_include_pad", 1),)),
    Fault("hardmax-convert-hang", "Hardmax", "prepare", "hang", "process"),
    Fault("elu-run-segfault", "Elu", "run", "segfault", "process"),
    Fault("erf-run-raise", "Erf", "run", "raise", "process"),
    Fault("celu-run-hang", "Celu", "run", "hang", "process"),
    Fault("selu-run-abort", "Selu", "run", "abort", "process"),
    # NaN propagation: a NaN operand gives a number
    Fault("exp-nan-flush", "Exp", "run", "nanflush", "nan"),
    Fault("sqrt-nan-flush", "Sqrt", "run", "nanflush", "nan"),
    # multi-node patterns: each node is right alone, the pair is not (a fusion, a pattern rewrite)
    Fault("conv-add", "Add", "run", "offset", "pattern", after="Conv"),
    Fault("matmul-add", "Add", "run", "offset", "pattern", after="MatMul"),
    Fault("add-relu", "Relu", "run", "offset", "pattern", after="Add"),
    Fault("tanh-mul", "Mul", "run", "offset", "pattern", after="Tanh"),
    # below every tolerance: never a finding
    Fault("cos-decoy", "Cos", "run", "decoy", "decoy"),
)
BY_ID = {f.id: f for f in FAULTS}


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def triggered(fault: Fault, node: Any, producers: dict[str, str]) -> bool:
    """Does `node` (producers: tensor name -> the op type that makes it) trigger `fault`?"""
    if node.op_type != fault.op or node.domain not in ("", "ai.onnx"):
        return False
    attrs = _attrs(node)
    if any(attrs.get(k) != v for k, v in fault.attr_equals):
        return False
    if fault.attr_present and fault.attr_present not in attrs:
        return False
    if fault.attr_absent and fault.attr_absent in attrs:
        return False
    return not fault.after or any(producers.get(i) == fault.after for i in node.input)


def active_faults(model: Any, enabled: tuple[str, ...] | None = None) -> list[tuple[Fault, int]]:
    """(fault, node index) for every node of `model` that triggers an enabled fault (None: all of them)."""
    producers = {o: n.op_type for n in model.graph.node for o in n.output}
    faults = [f for f in FAULTS if enabled is None or f.id in enabled]
    return [(f, i) for i, n in enumerate(model.graph.node) for f in faults if triggered(f, n, producers)]
