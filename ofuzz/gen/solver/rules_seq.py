"""Rules for recurrent and quantisation operators (RNN/GRU/LSTM, Quantize/DequantizeLinear, CastLike)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ofuzz.gen.blocks import Block
from ofuzz.gen.solver.registry import rule
from ofuzz.gen.solver.builder import Builder, T

Params = dict[str, Any]
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
QTYPES = {"uint8": np.uint8, "int8": np.int8}


@rule("recurrent", reads=("bias", "clip", "direction", "hidden_size", "initial_c", "initial_h", "layout", "linear_before_reset", "with_state"))
def recurrent(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """RNN/GRU/LSTM on X = [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1)."""
    x = ins[0]
    layout = int(p.get("layout", 0))
    batch = x.shape[1] if layout == 0 else x.shape[0]
    hidden = int(p.get("hidden_size", 4))
    direction = str(p.get("direction", "forward"))
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[blk.op]
    w = b.weight((nd, g * hidden, x.shape[2]), "W")
    r = b.weight((nd, g * hidden, hidden), "R")
    bias = b.weight((nd, 2 * g * hidden), "B") if p.get("bias", 1) else None
    h0_shape = (nd, batch, hidden) if layout == 0 else (batch, nd, hidden)
    h0 = b.weight(h0_shape, "h0") if p.get("initial_h", 0) else None
    args: list[T | None] = [x, w, r, bias, None, h0]
    if blk.op == "LSTM" and p.get("initial_c", 0):
        args.append(b.weight(h0_shape, "c0"))
    while args[-1] is None:
        args.pop()
    attrs: dict[str, Any] = {"hidden_size": hidden, "direction": direction, "layout": layout}
    if p.get("clip"):
        attrs["clip"] = float(p["clip"])
    if blk.op == "GRU":
        attrs["linear_before_reset"] = int(p.get("linear_before_reset", 0))
    n_out = 2 if p.get("with_state", 0) else 1
    return b.op(blk.op, args, n_out, **attrs)


def _scale_zp(b: Builder, x: T, p: Params) -> tuple[T, T, int | None]:
    qt = QTYPES[str(p.get("zero_point_type", "uint8"))]
    per_axis = bool(p.get("per_axis", 0)) and x.rank >= 2
    n = x.shape[1] if per_axis else None
    shape = (n,) if per_axis else ()
    scale = b.const((np.abs(b.rng.uniform(0.002, 0.05, shape)) + 1e-3).astype(np.float32), "scale")
    lo, hi = np.iinfo(qt).min, np.iinfo(qt).max
    zp = b.const(np.asarray(b.rng.integers(lo // 2 if lo < 0 else 100, hi // 2 if lo < 0 else 156, size=shape)).astype(qt), "zp")
    return scale, zp, (1 if per_axis else None)


@rule("quantize", reads=("per_axis", "zero_point_type"))
def quantize(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """QuantizeLinear with a positive scale, per tensor or per axis, uint8 or int8 zero point."""
    x = ins[0]
    scale, zp, axis = _scale_zp(b, x, p)
    return b.op("QuantizeLinear", [x, scale, zp], axis=axis)


@rule("dequantize", reads=("per_axis", "zero_point_type"))
def dequantize(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """DequantizeLinear of the input quantised with the same scale and zero point (a Q/DQ pair)."""
    x = ins[0]
    scale, zp, axis = _scale_zp(b, x, p)
    q = b.op1("QuantizeLinear", [x, scale, zp], axis=axis)
    return b.op("DequantizeLinear", [q, scale, zp], axis=axis)


CAST_LIKE = {"int32": np.int32, "int64": np.int64, "float16": np.float16, "double": np.float64, "bool": np.bool_}


@rule("cast_like", reads=("to",))
def cast_like(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """CastLike: the target dtype comes from a constant of dtype `to`."""
    x = ins[0]
    target = b.const(np.zeros((1,), CAST_LIKE[str(p.get("to", "int32"))]), "like")
    return b.op("CastLike", [x, target])
