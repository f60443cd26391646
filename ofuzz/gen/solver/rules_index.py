"""Rules of indexing and selection: Gather*, Scatter*, TopK, ReverseSequence, OneHot (indices kept in range).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ofuzz.gen.blocks import Block
from ofuzz.gen.solver.registry import rule
from ofuzz.gen.solver.adapters import SOFT_CAP, cast, norm_axis, shrink
from ofuzz.gen.solver.builder import INT64, Builder, T

Params = dict[str, Any]


@rule("gather", reads=("axis", "indices_shape", "negative"))
def gather(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Gather along an axis with in-range (optionally negative) indices of a drawn shape."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 0)), x.rank)
    d = x.shape[axis]
    ishape = tuple(int(v) for v in p.get("indices_shape", (2,)))
    idx = b.rng.integers(-d if p.get("negative", 1) else 0, d, size=ishape).astype(np.int64)
    return b.op("Gather", [x, b.const(idx, "indices")], axis=axis)


@rule("gather_elements", reads=("axis", "negative"))
def gather_elements(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """GatherElements with in-range (optionally negative) indices."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 0)), x.rank)
    a = axis % x.rank
    shape = list(x.shape)
    shape[a] = int(b.rng.integers(1, x.shape[a] + 3))
    d = x.shape[a]
    idx = b.rng.integers(-d if p.get("negative", 1) else 0, d, size=shape).astype(np.int64)
    return b.op("GatherElements", [x, b.const(idx, "indices")], axis=axis)


@rule("gather_nd", reads=("batch_dims", "count", "negative"))
def gather_nd(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """GatherND with in-range index tuples and batch_dims."""
    x = ins[0]
    bd = min(int(p.get("batch_dims", 0)), x.rank - 1)
    m = int(b.rng.integers(1, x.rank - bd + 1))
    k = int(p.get("count", 3))
    batch = list(x.shape[:bd])
    cols = [b.rng.integers(-x.shape[bd + j] if p.get("negative", 1) else 0, x.shape[bd + j], size=batch + [k]) for j in range(m)]
    idx = np.stack(cols, axis=-1).astype(np.int64)
    return b.op("GatherND", [x, b.const(idx, "indices")], batch_dims=bd)


@rule("scatter_nd", reads=("count", "reduction"))
def scatter_nd(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """ScatterND with unique targets (duplicates are undefined for reduction none)."""
    x = ins[0]
    m = int(b.rng.integers(1, x.rank + 1))
    space = int(np.prod(x.shape[:m]))
    k = int(b.rng.integers(1, min(space, int(p.get("count", 4))) + 1))
    flat = b.rng.choice(space, size=k, replace=False)
    idx = np.stack(np.unravel_index(flat, x.shape[:m]), axis=-1).astype(np.int64)
    upd = b.weight((k, *x.shape[m:]), "updates", x.dtype)
    return b.op("ScatterND", [x, b.const(idx, "indices"), upd], reduction=p.get("reduction", "none"))


@rule("scatter_elements", reads=("axis", "negative", "reduction"))
def scatter_elements(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """ScatterElements with unique in-range indices, so the result is defined (reduction none/add/mul/max/min)."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 0)), x.rank)
    a = axis % x.rank
    d = x.shape[a]
    k = int(b.rng.integers(1, d + 1))
    shape = list(x.shape)
    shape[a] = k
    order = np.argsort(b.rng.random(tuple(x.shape)), axis=a)
    idx = np.take(order, np.arange(k), axis=a).astype(np.int64)
    if p.get("negative", 1):
        idx = np.where(b.rng.random(idx.shape) < 0.3, idx - d, idx)
    upd = b.weight(tuple(shape), "updates", x.dtype)
    return b.op("ScatterElements", [x, b.const(idx, "indices"), upd], axis=axis, reduction=p.get("reduction", "none"))


@rule("topk", reads=("axis", "largest", "sorted"))
def topk(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """TopK along an axis with K in range (largest, sorted)."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", -1)), x.rank)
    d = x.shape[axis]
    k = int(b.rng.integers(1, d + 1))
    return b.op("TopK", [x, b.ints([k], "k")], 2, axis=axis, largest=p.get("largest"), sorted=p.get("sorted"))


@rule("reverse_sequence", reads=("batch_axis",))
def reverse_sequence(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """ReverseSequence with in-range sequence lengths (batch and time axes swapped or not)."""
    x = ins[0]
    ba = int(p.get("batch_axis", 1))
    ta = 1 - ba
    lens = b.rng.integers(1, x.shape[ta] + 1, size=x.shape[ba]).astype(np.int64)
    return b.op("ReverseSequence", [x, b.const(lens, "seq_lens")], batch_axis=ba, time_axis=ta)


@rule("onehot", reads=("axis", "depth", "off_value", "on_value"))
def onehot(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """OneHot of indices made from the input (negative indices included)."""
    x = shrink(b, ins[0], SOFT_CAP // 16)
    depth = int(p.get("depth", 5))
    scaled = b.op1("Mul", [x, b.const(np.array(depth, np.float32), "d")])
    idx = cast(b, scaled, INT64)
    vals = b.const(np.array([p.get("off_value", 0.0), p.get("on_value", 1.0)], np.float32), "values")
    return b.op("OneHot", [idx, b.const(np.array(depth, np.int64), "depth"), vals], axis=norm_axis(int(p.get("axis", -1)), x.rank, extra=1))
