"""Rules of shape and layout: Reshape, Flatten, Transpose, (Un)Squeeze, Expand, Tile, Slice, Pad, Split, Concat, Shape, Size, ConstantOfShape.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ofuzz.gen.blocks import Block
from ofuzz.gen.solver.registry import rule
from ofuzz.gen.solver.adapters import INT64_MAX, SOFT_CAP, cast, fit, norm_axis, reshape, shrink, shrink_axis, to_rank
from ofuzz.gen.solver.builder import FLOAT, NP_DTYPE, Builder, SolverError, T

Params = dict[str, Any]


def _factor(b: Builder, n: int, rank: int) -> list[int]:
    """A random shape with `rank` dims and `n` elements."""
    dims = [1] * rank
    rem = n
    primes = []
    p = 2
    while rem > 1 and p * p <= rem:
        while rem % p == 0:
            primes.append(p)
            rem //= p
        p += 1
    if rem > 1:
        primes.append(rem)
    for f in primes:
        dims[int(b.rng.integers(rank))] *= f
    return dims


@rule("reshape", reads=("copy_dim", "infer_dim", "rank"))
def reshape_rule(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Reshape to a random factorisation, with -1 and 0 (copy) entries at times."""
    x = ins[0]
    rank = int(p.get("rank", 4))
    dims = _factor(b, x.numel, rank)
    spec = list(dims)
    if p.get("infer_dim") and rank:
        spec[int(b.rng.integers(rank))] = -1
    if p.get("copy_dim"):
        for i in range(min(rank, x.rank)):
            if dims[i] == x.shape[i] and spec[i] != -1:
                spec[i] = 0
                break
    return b.op("Reshape", [x, b.ints(spec, "shape")])


@rule("flatten", reads=("axis",))
def flatten(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Flatten at a normalised axis."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 1)), x.rank, extra=1)
    if axis < -x.rank:  # Flatten takes [-r, r]: -(r+1) (and -1 on a scalar) would be invalid
        axis += x.rank + 1
    return b.op("Flatten", [x], axis=axis)


@rule("transpose", reads=("perm",))
def transpose(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Transpose with a drawn permutation (or the default reversal)."""
    x = ins[0]
    if p.get("perm", "random") == "default":
        return b.op("Transpose", [x])
    return b.op("Transpose", [x], perm=[int(v) for v in b.rng.permutation(x.rank)])


@rule("squeeze", reads=("axes", "negative_axes"))
def squeeze(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Squeeze size-1 axes (made so first), axes given or omitted, possibly negative."""
    x = ins[0]
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if not ones:
        pos = int(b.rng.integers(x.rank + 1))
        x = reshape(b, x, x.shape[:pos] + (1,) + x.shape[pos:])
        ones = [pos]
    if p.get("axes", "given") == "omitted":
        return b.op("Squeeze", [x])
    k = int(b.rng.integers(1, len(ones) + 1))
    axes = sorted(b.rng.choice(ones, size=k, replace=False).tolist())
    if p.get("negative_axes"):
        axes = [a - x.rank for a in axes]
    return b.op("Squeeze", [x, b.ints(axes, "axes")])


@rule("unsqueeze", reads=("count", "negative_axes"))
def unsqueeze(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Unsqueeze `count` new axes, possibly negative."""
    x = to_rank(b, ins[0], 5) if ins[0].rank > 5 else ins[0]
    k = min(int(p.get("count", 1)), 6 - x.rank)
    if k < 1:
        raise SolverError("rank too high to unsqueeze")
    out_rank = x.rank + k
    axes = sorted(b.rng.choice(out_rank, size=k, replace=False).tolist())
    if p.get("negative_axes"):
        axes = [a - out_rank for a in axes]
    return b.op("Unsqueeze", [x, b.ints(axes, "axes")])


@rule("expand", reads=("new_dims",))
def expand(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Expand to a broadcast-compatible shape with new leading dims."""
    x = shrink(b, ins[0], SOFT_CAP)
    lead = int(p.get("new_dims", 0)) if x.rank < 5 else 0
    budget = max(1, SOFT_CAP // max(x.numel, 1))
    shape = [int(b.rng.integers(1, 4)) for _ in range(lead)]
    for d in x.shape:
        if d == 1 and budget > 1:
            nd = int(b.rng.integers(1, min(4, budget) + 1))
            budget //= nd
            shape.append(nd)
        else:
            shape.append(1 if (d > 1 and b.rng.random() < 0.3) else d)
    return b.op("Expand", [x, b.ints(shape, "shape")])


@rule("tile", reads=("max_repeat",))
def tile(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Tile with small repeats, kept under the element cap."""
    x = shrink(b, ins[0], SOFT_CAP // 2)
    budget = max(1, SOFT_CAP // max(x.numel, 1))
    reps = []
    for _ in x.shape:
        r = int(b.rng.integers(1, max(1, min(int(p.get("max_repeat", 3)), budget)) + 1))
        budget //= r
        reps.append(r)
    return b.op("Tile", [x, b.ints(reps, "repeats")])


@rule("slice", reads=("explicit_steps", "negative", "omit_axes", "steps"))
def slice_rule(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Slice / StridedSlice: negative starts, ends and steps, omitted axes/steps."""
    x = ins[0]
    steps_space = [int(s) for s in p.get("steps", (1,))]
    k = int(b.rng.integers(1, x.rank + 1)) if x.rank else 0
    if k == 0:
        raise SolverError("cannot slice a scalar")
    axes = sorted(b.rng.choice(x.rank, size=k, replace=False).tolist())
    starts, ends, steps = [], [], []
    neg = bool(p.get("negative", 0))
    for a in axes:
        d = x.shape[a]
        s = int(b.rng.choice(steps_space))
        if s > 0:
            st = int(b.rng.integers(0, d))
            en = int(b.rng.integers(st + 1, d + 1))
            st_e = st - d if neg and b.rng.random() < 0.5 else st
            en_e = INT64_MAX if en == d and b.rng.random() < 0.3 else (en - d if neg and en < d and b.rng.random() < 0.5 else en)
        else:
            st = int(b.rng.integers(0, d))
            en = int(b.rng.integers(-1, st))
            st_e = st - d if neg and b.rng.random() < 0.5 else st
            en_e = -d - 1 if en == -1 else (en - d if neg and b.rng.random() < 0.5 else en)
        starts.append(st_e), ends.append(en_e), steps.append(s)
    if neg:
        axes = [a - x.rank if b.rng.random() < 0.5 else a for a in axes]
    args: list[T | None] = [x, b.ints(starts, "starts"), b.ints(ends, "ends")]
    full_axes = axes == list(range(x.rank))
    if not (full_axes and p.get("omit_axes")) or any(s != 1 for s in steps):
        args.append(b.ints(axes, "axes"))
    if any(s != 1 for s in steps) or p.get("explicit_steps"):
        if len(args) == 3:
            args.append(b.ints(axes, "axes"))
        args.append(b.ints(steps, "steps"))
    return b.op("Slice", args)


@rule("pad", reads=("max_pad", "mode", "negative", "value", "value_given"))
def pad_rule(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Pad in constant/reflect/edge mode; constant may crop with negative pads."""
    x = shrink(b, ins[0], SOFT_CAP)
    mode = str(p.get("mode", "constant"))
    mx = int(p.get("max_pad", 2))
    pads_b, pads_e = [], []
    for d in x.shape:
        hi = min(mx, d - 1) if mode == "reflect" else mx
        lo = -min(mx, (d - 1) // 2) if (mode == "constant" and p.get("negative")) else 0
        pads_b.append(int(b.rng.integers(lo, max(hi, lo) + 1)))
        pads_e.append(int(b.rng.integers(lo, max(hi, lo) + 1)))
    args: list[T | None] = [x, b.ints(pads_b + pads_e, "pads")]
    if b.opset >= 18 and b.rng.random() < 0.4:  # opset 18's `axes` input: pads for some axes only (maybe negative)
        axes = sorted(b.rng.choice(x.rank, size=int(b.rng.integers(1, x.rank + 1)), replace=False).tolist())
        args[1] = b.ints([pads_b[a] for a in axes] + [pads_e[a] for a in axes], "pads")
        given = [a - x.rank if b.rng.random() < 0.3 else a for a in axes]
        value = b.const(_pad_value(p, x.dtype), "pad_value") if mode == "constant" and p.get("value_given") else None
        return b.op("Pad", [x, args[1], value, b.ints(given, "axes")], mode=mode)
    if mode == "constant" and p.get("value_given"):
        args.append(b.const(_pad_value(p, x.dtype), "pad_value"))
    return b.op("Pad", args, mode=mode)


@rule("center_crop_pad", reads=("axes_given", "max_change"))
def center_crop_pad(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """CenterCropPad (18): each dimension cropped or zero-padded about its centre to a drawn size, for all axes or
    for a subset given as `axes` (possibly negative)."""
    x = shrink(b, ins[0], SOFT_CAP)
    mx = int(p.get("max_change", 3))
    axes = list(range(x.rank))
    if p.get("axes_given") and x.rank > 1:
        axes = sorted(b.rng.choice(x.rank, size=int(b.rng.integers(1, x.rank + 1)), replace=False).tolist())
    sizes = [max(1, x.shape[a] + int(b.rng.integers(-mx, mx + 1))) for a in axes]
    if not p.get("axes_given"):
        return b.op("CenterCropPad", [x, b.ints(sizes, "shape")])
    given = [a - x.rank if b.rng.random() < 0.3 else a for a in axes]
    return b.op("CenterCropPad", [x, b.ints(sizes, "shape")], axes=given)


@rule("split", reads=("axis", "outputs", "split_given"))
def split(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Split into 2..4 parts, equal (no split input) or uneven (split given)."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 1)), x.rank)
    d = x.shape[axis]
    n = int(p.get("outputs", 2))
    if d < 2:
        x = fit(b, x, tuple(2 * n if i == axis % x.rank else s for i, s in enumerate(x.shape)))
        d = x.shape[axis]
    n = max(1, min(n, d))
    if p.get("split_given", 1):
        cuts = sorted(b.rng.choice(np.arange(1, d), size=n - 1, replace=False).tolist()) if n > 1 else []
        sizes = np.diff([0, *cuts, d]).tolist()
        return b.op("Split", [x, b.ints(sizes, "split")], n, axis=axis)
    if b.opset >= 18:  # num_outputs (required without `split` from 18); the last chunk may be smaller
        while n > 1 and -(-d // n) * (n - 1) >= d:
            n -= 1
        return b.op("Split", [x], n, axis=axis, num_outputs=n)
    while d % n:
        n -= 1
    return b.op("Split", [x], n, axis=axis)


@rule("concat", reads=("axis", "self"), max_in=8)
def concat(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Concat of 1..n inputs; others fitted to the first except on the axis."""
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 1)), x.rank)
    a = axis % x.rank
    rest = max(1, x.numel // max(x.shape[a], 1))
    keep = max(1, (SOFT_CAP * 4) // (rest * len(ins)))  # each part's share of the output budget
    parts = [x] + [cast(b, fit(b, shrink_axis(b, t, a, keep * (t.numel // max(t.shape[a], 1))) if t.rank == x.rank else t,
                               x.shape, free_axis=axis), x.dtype) for t in ins[1:]]
    if len(parts) == 1 and p.get("self", 0):
        parts = [x] * int(p.get("self", 2))
    total = sum(t.numel for t in parts)
    if total > SOFT_CAP * 4:
        lim = max(1, (SOFT_CAP * 4) // len(parts))
        a = axis % x.rank
        parts = [shrink_axis(b, t, a, lim) for t in parts]
    return b.op("Concat", parts, axis=axis)


@rule("shape", reads=("end", "start"))
def shape_rule(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Shape, optionally sliced by start/end."""
    x = ins[0]
    start = p.get("start")
    end = p.get("end")
    start = norm_axis(int(start), x.rank) if start is not None and x.rank else None
    end = norm_axis(int(end), x.rank, extra=1) if end is not None and x.rank else None
    if start is not None and end is not None and np.arange(x.rank)[start:end].size == 0:
        end = None  # an empty slice would make an empty tensor; keep the rest of the dims
    out = b.op1("Shape", [x], start=start, end=end)
    val = np.array(x.shape, np.int64)[slice(start, end)]
    return [b.with_value(out, val)]


@rule("size")
def size_rule(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Size (a scalar int64)."""
    return b.op("Size", [ins[0]])


@rule("constant_of_shape", reads=("value",))
def constant_of_shape(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Fill: ConstantOfShape(Shape(x)) with a drawn value (TF's Fill)."""
    x = ins[0]
    shp = b.with_value(b.op1("Shape", [x]), np.array(x.shape, np.int64))
    val = np.array([p.get("value", 1.0)], np.float32)
    from onnx import numpy_helper

    return b.op("ConstantOfShape", [shp], value=numpy_helper.from_array(val, "value"))


@rule("fill_expand", reads=("value",))
def fill_expand(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Fill as Expand(scalar, Shape(x))."""
    x = ins[0]
    shp = b.with_value(b.op1("Shape", [x]), np.array(x.shape, np.int64))
    return b.op("Expand", [b.const(np.array(p.get("value", 1.0), np.float32), "fill"), shp])


def _pad_value(p: Params, dtype: int) -> np.ndarray:
    """Pad's constant in the data's type (an integer tensor pads with an integer: 0.5 -> 4 on the inputs' -8..8 scale)."""
    v = float(p.get("value", 0.5))
    return np.array(v if dtype == FLOAT else round(v * 8), NP_DTYPE[dtype])
