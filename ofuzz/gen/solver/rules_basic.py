"""Rules for element-wise, aggregation, normalisation and reduction operators.

A rule receives inputs already brought to the block's dtype and rank, plus the
parameters drawn from the corpus, and *chooses* whatever the shapes demand
(constant operands, axes, scales).  Output shapes come from onnx inference.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ofuzz.gen.blocks import Block
from ofuzz.gen.solver.registry import rule
from ofuzz.gen.solver.adapters import cast, fit, norm_axis, to_bool
from ofuzz.gen.solver.builder import BOOL, FLOAT, INT32, INT64, NP_DTYPE, Builder, T

Params = dict[str, Any]
INTS = (INT32, INT64)  # integer tensors a block may keep (its corpus `dtypes`): constants beside them take their type


def _attrs(p: Params, skip: tuple[str, ...] = ()) -> Params:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items() if k not in skip}


@rule("unary", passthrough=True, scalar_ok=True)
def unary(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """One node, every parameter an attribute (Relu, Elu, ArgMax, Softmax, LRN …)."""
    return b.op(blk.op, [ins[0]], **_attrs(p))


def _const_operand(b: Builder, x: T, kind: str, dtype: int) -> T:
    r = x.rank
    if kind == "scalar" or r == 0:
        shape: tuple[int, ...] = ()
    elif kind == "channel" and r >= 2:
        shape = (x.shape[1],) + (1,) * (r - 2)
    elif kind == "row":
        shape = (x.shape[-1],)
    else:
        shape = x.shape
    return b.weight(shape, "k", dtype) if dtype != BOOL else b.const(b.rng.random(shape) < 0.5, "k")


@rule("binary", reads=("broadcast", "const_shape", "operand", "swap"), max_in=2, scalar_ok=True)
def binary(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Add/Sub/Mul/Div/Pow/PRelu/comparisons/logic; a lone input gets a constant or itself."""
    x = ins[0]
    attrs = _attrs(p, ("operand", "const_shape", "broadcast"))
    int_div = blk.op == "Div" and x.dtype in INTS  # its divisor: a non-zero constant (division by zero is undefined)
    if len(ins) >= 2 and not int_div:
        y = fit(b, ins[1], x.shape, broadcast=bool(p.get("broadcast", 0)))
        y = cast(b, y, x.dtype)
    elif p.get("operand") == "self" and not int_div:
        y = x
    else:
        y = _const_operand(b, x, str(p.get("const_shape", "full")), x.dtype)
        if int_div and y.value is not None and (y.value == 0).any():
            y = b.const(np.where(y.value == 0, 1, y.value).astype(y.value.dtype), "k")
    if blk.op == "PRelu" and y.rank > x.rank:
        y = b.weight((), "slope")  # the slope must broadcast to X unidirectionally
    if p.get("swap") and blk.op != "PRelu" and not int_div:
        x, y = y, x
    return b.op(blk.op, [x, y], **{k: v for k, v in attrs.items() if k != "swap"})


@rule("variadic", reads=("broadcast", "const_shape", "operand"), max_in=8, scalar_ok=True)
def variadic(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Sum/Mean/Max/Min over all inputs at once (1..n inputs, broadcast allowed)."""
    x = ins[0]
    rest = [cast(b, fit(b, t, x.shape, broadcast=bool(p.get("broadcast", 0))), x.dtype) for t in ins[1:]]
    if not rest and p.get("operand") == "const":
        rest = [_const_operand(b, x, str(p.get("const_shape", "full")), x.dtype)]
    return b.op(blk.op, [x, *rest])


@rule("mod", reads=("const_shape", "fmod", "scale"), max_in=2, scalar_ok=True)
def mod(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Mod: floats need fmod=1; fmod=0 runs on integers with a non-zero divisor."""
    x = ins[0]
    if int(p.get("fmod", 1)) == 0:
        if x.dtype not in INTS:
            x = cast(b, b.op1("Mul", [x, b.const(np.array(p.get("scale", 10.0), np.float32), "s")]), INT64)
        d = b.rng.integers(1, 6, size=x.shape if p.get("const_shape") == "full" else ()) * b.rng.choice([-1, 1])
        return b.op("Mod", [x, b.const(np.asarray(d, NP_DTYPE[x.dtype]), "div")], fmod=0)
    if x.dtype in INTS:  # fmod=1 on integers: C's fmod, a non-zero divisor of the same type
        d = b.rng.integers(1, 6, size=x.shape if p.get("const_shape") == "full" else ()) * b.rng.choice([-1, 1])
        return b.op("Mod", [x, b.const(np.asarray(d, NP_DTYPE[x.dtype]), "div")], fmod=1)
    y = fit(b, ins[1], x.shape) if len(ins) > 1 else _const_operand(b, x, str(p.get("const_shape", "full")), FLOAT)
    return b.op("Mod", [x, y], fmod=1)


@rule("where", reads=("const_shape",), max_in=3, scalar_ok=True)
def where(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Where: the condition made from the first input; branches from the other inputs (fitted) or constants."""
    base = ins[0]
    cond = to_bool(b, base)
    shape = base.shape
    dt = base.dtype if base.dtype in INTS else FLOAT  # integer branches where the model's values are integers
    x = cast(b, fit(b, ins[1], shape), dt) if len(ins) > 1 else b.weight(shape if p.get("const_shape") != "scalar" else (), "x", dt)
    y = cast(b, fit(b, ins[2], shape), dt) if len(ins) > 2 else b.weight(shape if p.get("const_shape") != "row" else shape[-1:], "y", dt)
    return b.op("Where", [cond, x, y])


@rule("clip", reads=("given", "max", "min"), scalar_ok=True)
def clip(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Clip with min/max given, omitted or one of them (Relu6 pins 0 and 6)."""
    given = str(p.get("given", "both"))
    x = ins[0]
    lo_v, hi_v = float(p.get("min", -0.5)), float(p.get("max", 0.5))
    if x.dtype in INTS:  # bounds on the integers' scale (inputs draw -8..8)
        lo_v, hi_v = np.floor(lo_v * 8), np.ceil(hi_v * 8)
    lo = b.const(np.array(lo_v, NP_DTYPE[x.dtype]), "min") if given in ("both", "min") else None
    hi = b.const(np.array(hi_v, NP_DTYPE[x.dtype]), "max") if given in ("both", "max") else None
    args: list[T | None] = [ins[0], lo, hi]
    while args and args[-1] is None:
        args.pop()
    return b.op("Clip", args)


@rule("batchnorm", reads=("epsilon", "momentum"))
def batchnorm(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """BatchNormalization with per-channel scale, bias, mean and positive variance constants."""
    x = ins[0]
    c = x.shape[1]
    scale, bias, mean = b.weight((c,), "gamma"), b.weight((c,), "beta"), b.weight((c,), "mean")
    var = b.const((np.abs(b.rng.uniform(-1, 1, c)) + 0.05).astype(np.float32), "var")
    return b.op("BatchNormalization", [x, scale, bias, mean, var], epsilon=p.get("epsilon"), momentum=p.get("momentum"))


@rule("instancenorm", reads=("epsilon",))
def instancenorm(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """InstanceNormalization with per-channel scale and bias constants."""
    x = ins[0]
    c = x.shape[1]
    return b.op("InstanceNormalization", [x, b.weight((c,), "gamma"), b.weight((c,), "beta")], epsilon=p.get("epsilon"))


@rule("groupnorm", reads=("epsilon", "groups"))
def groupnorm(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """GroupNormalization-21 with a divisor of C as num_groups, scale and bias per channel (version 18's per-group
    scale is deprecated: onnx's checker rejects it, so the corpus places this block only at opset 21 and later)."""
    x = ins[0]
    c = x.shape[1]
    divisors = [g for g in range(1, c + 1) if c % g == 0]
    want = int(p.get("groups", 2))
    g = min(divisors, key=lambda d: (abs(d - want), d))
    return b.op("GroupNormalization", [x, b.weight((c,), "scale"), b.weight((c,), "bias")], num_groups=g, epsilon=p.get("epsilon"))


@rule("layernorm", reads=("axis", "bias", "epsilon"))
def layernorm(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """LayerNormalization over the trailing axes from `axis` (with or without bias)."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", -1)), x.rank)
    norm_shape = x.shape[axis:]
    bias = b.weight(norm_shape, "beta") if p.get("bias", 1) else None
    args = [x, b.weight(norm_shape, "gamma")] + ([bias] if bias is not None else [])
    return b.op("LayerNormalization", args, axis=axis, epsilon=p.get("epsilon"))[:1]


def _pick_axes(b: Builder, rank: int, p: Params) -> list[int]:
    k = int(b.rng.integers(1, rank + 1)) if rank else 0
    axes = sorted(b.rng.choice(rank, size=k, replace=False).tolist()) if rank else []
    if p.get("negative_axes"):
        axes = [a - rank for a in axes]
    return axes


@rule("reduce", reads=("axes", "keepdims", "negative_axes", "noop_with_empty_axes"))
def reduce(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Reduce* over a random axis subset (possibly negative) or all axes."""
    x = ins[0]
    mode = str(p.get("axes", "subset"))
    keepdims = int(p.get("keepdims", 1))
    axes = _pick_axes(b, x.rank, p) if mode == "subset" else None
    if blk.op == "ReduceSum" or b.opset >= 18:  # axes became an input: ReduceSum at 13, every other Reduce* at 18
        noop = int(p.get("noop_with_empty_axes", 0)) if axes is None else None
        ax = b.ints(axes, "axes") if axes is not None else None
        return b.op(blk.op, [x, ax] if ax is not None else [x], keepdims=keepdims, noop_with_empty_axes=noop)
    return b.op(blk.op, [x], keepdims=keepdims, axes=axes)


@rule("axis", passthrough=True)
def axis_op(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Ops whose only shape-dependent parameter is `axis` (already normalised)."""
    return b.op(blk.op, [ins[0]], **_attrs(p))


@rule("cumsum", reads=("axis", "exclusive", "reverse"))
def cumsum(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """CumSum along a normalised axis (exclusive, reverse)."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 0)), x.rank)
    ax = b.const(np.array(axis, np.int64), "axis")  # the spec wants a 0-D axis (onnxruntime also takes 1-D)
    return b.op("CumSum", [x, ax], exclusive=p.get("exclusive"), reverse=p.get("reverse"))


CAST_TYPES = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6, "int64": 7, "bool": 9, "float16": 10, "double": 11}


@rule("cast", reads=("prescale", "to"), scalar_ok=True)
def cast_op(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Cast to `to`, optionally after scaling the input so integer targets see a useful range."""
    x = ins[0]
    if p.get("prescale", 1) and x.dtype == FLOAT and p.get("to") not in ("float16", "double", "float32"):
        x = b.op1("Mul", [x, b.const(np.array(8.0, np.float32), "s")])
    return b.op("Cast", [x], to=CAST_TYPES[str(p.get("to", "int32"))])


def const_like(b: Builder, t: T, hint: str) -> T:
    return b.const(np.asarray(b.values.weight_array(b.rng, t.shape, NP_DTYPE[t.dtype])), hint)
