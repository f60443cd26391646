"""Rules for shape-moving, indexing and linear-algebra operators.

Indices are drawn in range (negative ones included), scatter targets are
unique so the result is defined, and every growth (Tile, Expand, Concat,
Gather) is sized against the model's element cap.
"""
from __future__ import annotations

import string
from typing import Any

import numpy as np

from ofuzz.blocks import Block
from ofuzz.solver.adapters import INT64_MAX, cast, fit, norm_axis, reshape, shrink, to_rank
from ofuzz.solver.builder import FLOAT, INT64, Builder, SolverError, T

Params = dict[str, Any]
SOFT_CAP = 1 << 16


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


def flatten(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 1)), x.rank, extra=1)
    return b.op("Flatten", [x], axis=axis)


def transpose(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    if p.get("perm", "random") == "default":
        return b.op("Transpose", [x])
    return b.op("Transpose", [x], perm=[int(v) for v in b.rng.permutation(x.rank)])


def squeeze(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
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


def unsqueeze(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = to_rank(b, ins[0], 5) if ins[0].rank > 5 else ins[0]
    k = min(int(p.get("count", 1)), 6 - x.rank)
    if k < 1:
        raise SolverError("rank too high to unsqueeze")
    out_rank = x.rank + k
    axes = sorted(b.rng.choice(out_rank, size=k, replace=False).tolist())
    if p.get("negative_axes"):
        axes = [a - out_rank for a in axes]
    return b.op("Unsqueeze", [x, b.ints(axes, "axes")])


def expand(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
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


def tile(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = shrink(b, ins[0], SOFT_CAP // 2)
    budget = max(1, SOFT_CAP // max(x.numel, 1))
    reps = []
    for _ in x.shape:
        r = int(b.rng.integers(1, max(1, min(int(p.get("max_repeat", 3)), budget)) + 1))
        budget //= r
        reps.append(r)
    return b.op("Tile", [x, b.ints(reps, "repeats")])


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
    if mode == "constant" and p.get("value_given"):
        args.append(b.const(np.array(p.get("value", 0.5), np.float32), "pad_value"))
    return b.op("Pad", args, mode=mode)


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
    while d % n:
        n -= 1
    return b.op("Split", [x], n, axis=axis)


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


def shrink_axis(b: Builder, t: T, axis: int, limit: int) -> T:
    if t.numel <= limit:
        return t
    rest = t.numel // t.shape[axis]
    keep = max(1, limit // max(rest, 1))
    if keep >= t.shape[axis]:
        return t
    return b.op1("Slice", [t, b.ints([0], "s"), b.ints([keep], "e"), b.ints([axis], "a")])


def gather(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 0)), x.rank)
    d = x.shape[axis]
    ishape = tuple(int(v) for v in p.get("indices_shape", (2,)))
    idx = b.rng.integers(-d if p.get("negative", 1) else 0, d, size=ishape).astype(np.int64)
    return b.op("Gather", [x, b.const(idx, "indices")], axis=axis)


def gather_elements(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    axis = norm_axis(int(p.get("axis", 0)), x.rank)
    a = axis % x.rank
    shape = list(x.shape)
    shape[a] = int(b.rng.integers(1, x.shape[a] + 3))
    d = x.shape[a]
    idx = b.rng.integers(-d if p.get("negative", 1) else 0, d, size=shape).astype(np.int64)
    return b.op("GatherElements", [x, b.const(idx, "indices")], axis=axis)


def gather_nd(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    bd = min(int(p.get("batch_dims", 0)), x.rank - 1)
    m = int(b.rng.integers(1, x.rank - bd + 1))
    k = int(p.get("count", 3))
    batch = list(x.shape[:bd])
    cols = [b.rng.integers(-x.shape[bd + j] if p.get("negative", 1) else 0, x.shape[bd + j], size=batch + [k]) for j in range(m)]
    idx = np.stack(cols, axis=-1).astype(np.int64)
    return b.op("GatherND", [x, b.const(idx, "indices")], batch_dims=bd)


def scatter_nd(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """ScatterND with unique targets (duplicates are undefined for reduction none)."""
    x = ins[0]
    m = int(b.rng.integers(1, x.rank + 1))
    space = int(np.prod(x.shape[:m]))
    k = int(b.rng.integers(1, min(space, int(p.get("count", 4))) + 1))
    flat = b.rng.choice(space, size=k, replace=False)
    idx = np.stack(np.unravel_index(flat, x.shape[:m]), axis=-1).astype(np.int64)
    upd = b.weight((k, *x.shape[m:]), "updates")
    return b.op("ScatterND", [x, b.const(idx, "indices"), upd], reduction=p.get("reduction", "none"))


def scatter_elements(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
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
    upd = b.weight(tuple(shape), "updates")
    return b.op("ScatterElements", [x, b.const(idx, "indices"), upd], axis=axis, reduction=p.get("reduction", "none"))


def shape_rule(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
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


def size_rule(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    return b.op("Size", [ins[0]])


def constant_of_shape(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Fill: ConstantOfShape(Shape(x)) with a drawn value (TF's Fill)."""
    x = ins[0]
    shp = b.with_value(b.op1("Shape", [x]), np.array(x.shape, np.int64))
    val = np.array([p.get("value", 1.0)], np.float32)
    from onnx import numpy_helper

    return b.op("ConstantOfShape", [shp], value=numpy_helper.from_array(val, "value"))


def fill_expand(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Fill as Expand(scalar, Shape(x))."""
    x = ins[0]
    shp = b.with_value(b.op1("Shape", [x]), np.array(x.shape, np.int64))
    return b.op("Expand", [b.const(np.array(p.get("value", 1.0), np.float32), "fill"), shp])


def topk(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    axis = norm_axis(int(p.get("axis", -1)), x.rank)
    d = x.shape[axis]
    k = int(b.rng.integers(1, d + 1))
    return b.op("TopK", [x, b.ints([k], "k")], 2, axis=axis, largest=p.get("largest"), sorted=p.get("sorted"))


def einsum(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Einsum: a random permute/reduce of one operand, or a contraction with a second."""
    x = shrink(b, ins[0], SOFT_CAP)
    letters = string.ascii_lowercase[: x.rank]
    keep = [c for c in letters if b.rng.random() < 0.7] or list(letters[:1])
    out = "".join(b.rng.permutation(keep).tolist()) if p.get("permute", 1) else "".join(keep)
    if p.get("operands", 2) == 1 or x.rank == 0:
        return b.op("Einsum", [x], equation=f"{letters}->{out}")
    shared = [c for c in letters if b.rng.random() < 0.5] or [letters[-1]]
    new = "z"
    yterm = "".join(shared) + new
    yshape = tuple(x.shape[letters.index(c)] for c in shared) + (int(b.rng.integers(1, 9)),)
    y = fit(b, cast(b, ins[1], FLOAT), yshape) if len(ins) > 1 else b.weight(yshape, "E")
    return b.op("Einsum", [x, y], equation=f"{letters},{yterm}->{out}{new}")


def matmul(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    k = x.shape[-1]
    n = int(p.get("n", 8))
    yshape = (k, n) if x.rank < 3 or not p.get("batched") else (*x.shape[:-2], k, n)
    y = fit(b, cast(b, ins[1], FLOAT), yshape) if len(ins) > 1 else b.weight(yshape, "M")
    return b.op("MatMul", [x, y])


def gemm(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Gemm with transA/transB, alpha/beta and C given as [N], [1], [M, N] or omitted."""
    a = to_rank(b, ins[0], 2)
    ta, tb = int(p.get("transA", 0)), int(p.get("transB", 0))
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    n = int(p.get("n", 8))
    bshape = (n, k) if tb else (k, n)
    bt = fit(b, cast(b, ins[1], FLOAT), bshape) if len(ins) > 1 else b.weight(bshape, "Bm")
    c_kind = str(p.get("c", "row"))
    c = {"row": (n,), "scalar": (1,), "full": (m, n), "col": (m, 1)}.get(c_kind)
    args = [a, bt] + ([b.weight(c, "C")] if c is not None else [])
    return b.op("Gemm", args, transA=ta, transB=tb, alpha=p.get("alpha"), beta=p.get("beta"))


def trilu(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    args = [x] + ([b.const(np.array(int(p.get("k", 0)), np.int64), "k")] if p.get("k_given", 1) else [])
    return b.op("Trilu", args, upper=p.get("upper"))


def reverse_sequence(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    ba = int(p.get("batch_axis", 1))
    ta = 1 - ba
    lens = b.rng.integers(1, x.shape[ta] + 1, size=x.shape[ba]).astype(np.int64)
    return b.op("ReverseSequence", [x, b.const(lens, "seq_lens")], batch_axis=ba, time_axis=ta)


def eye_like(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    return b.op("EyeLike", [ins[0]], k=p.get("k"))


def onehot(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """OneHot of indices made from the input (negative indices included)."""
    x = shrink(b, ins[0], SOFT_CAP // 16)
    depth = int(p.get("depth", 5))
    scaled = b.op1("Mul", [x, b.const(np.array(depth, np.float32), "d")])
    idx = cast(b, scaled, INT64)
    vals = b.const(np.array([p.get("off_value", 0.0), p.get("on_value", 1.0)], np.float32), "values")
    return b.op("OneHot", [idx, b.const(np.array(depth, np.int64), "depth"), vals], axis=norm_axis(int(p.get("axis", -1)), x.rank, extra=1))


def det(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    x = ins[0]
    m = min(x.shape[-1], x.shape[-2], int(p.get("max_n", 4)))
    x = fit(b, x, (*x.shape[:-2], m, m))
    return b.op("Det", [x])


RULES_SHAPE = {
    "reshape": reshape_rule,
    "flatten": flatten,
    "transpose": transpose,
    "squeeze": squeeze,
    "unsqueeze": unsqueeze,
    "expand": expand,
    "tile": tile,
    "slice": slice_rule,
    "pad": pad_rule,
    "split": split,
    "concat": concat,
    "gather": gather,
    "gather_elements": gather_elements,
    "gather_nd": gather_nd,
    "scatter_nd": scatter_nd,
    "scatter_elements": scatter_elements,
    "shape": shape_rule,
    "size": size_rule,
    "constant_of_shape": constant_of_shape,
    "fill_expand": fill_expand,
    "topk": topk,
    "einsum": einsum,
    "matmul": matmul,
    "gemm": gemm,
    "trilu": trilu,
    "reverse_sequence": reverse_sequence,
    "eye_like": eye_like,
    "onehot": onehot,
    "det": det,
}
