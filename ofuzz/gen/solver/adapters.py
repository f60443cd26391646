"""Adapters: the Cast/Slice/Pad/Reshape glue the paper puts in front of ops.

They bring a tensor to the dtype, rank or exact shape an operator (or an
aggregation such as Add/Concat) needs, so every generated model is valid by
construction instead of by rejection.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ofuzz.gen.solver.builder import BOOL, FLOAT, INT64, Builder, T

INT64_MAX = int(np.iinfo(np.int64).max)


SOFT_CAP = 1 << 16  # elements a growing rule (Tile, Expand, Concat, Gather …) may produce before inputs are shrunk


def cast(b: Builder, t: T, dtype: int) -> T:
    return t if t.dtype == dtype else b.op1("Cast", [t], to=dtype)


def to_bool(b: Builder, t: T) -> T:
    """Float → bool by sign (a plain Cast would make almost every value True)."""
    if t.dtype == BOOL:
        return t
    zero = b.const(np.zeros((), dtype=np.float32 if t.dtype == FLOAT else np.int64), "zero")
    if t.dtype not in (FLOAT, INT64):
        t = cast(b, t, FLOAT)
        zero = b.const(np.zeros((), dtype=np.float32), "zero")
    return b.op1("Greater", [t, zero])


def to_dtype(b: Builder, t: T, accepted: Sequence[int]) -> T:
    if t.dtype in accepted:
        return t
    if accepted[0] == BOOL:
        return to_bool(b, t)
    return cast(b, t, accepted[0])


def reshape(b: Builder, t: T, shape: Sequence[int]) -> T:
    shape = tuple(int(d) for d in shape)
    if shape == t.shape:
        return t
    return b.op1("Reshape", [t, b.ints(shape, "shape")])


def to_rank(b: Builder, t: T, rank: int) -> T:
    """Reshape to `rank` dims: pad with leading 1s, or merge leading dims."""
    if t.rank == rank:
        return t
    if t.rank < rank:
        return reshape(b, t, (1,) * (rank - t.rank) + t.shape)
    k = t.rank - rank
    lead = int(np.prod(t.shape[: k + 1]))
    return reshape(b, t, (lead,) + t.shape[k + 1 :])


def nearest_rank(rank: int, allowed: Sequence[int]) -> int:
    return min(allowed, key=lambda r: (abs(r - rank), r))


def slice_to(b: Builder, t: T, target: Sequence[int | None]) -> T:
    """Slice every dim that is larger than its target (None = keep)."""
    axes = [i for i, (d, td) in enumerate(zip(t.shape, target)) if td is not None and d > td]
    if not axes:
        return t
    return b.op1(
        "Slice",
        [t, b.ints([0] * len(axes), "starts"), b.ints([int(target[i]) for i in axes], "ends"), b.ints(axes, "axes")],
    )


def pad_to(b: Builder, t: T, target: Sequence[int | None], mode: str = "constant") -> T:
    """Pad every dim that is smaller than its target (None = keep), split before/after."""
    before = [0] * t.rank
    after = [0] * t.rank
    for i, (d, td) in enumerate(zip(t.shape, target)):
        if td is not None and d < td:
            extra = int(td) - d
            before[i] = int(b.rng.integers(0, extra + 1)) if mode == "constant" else 0
            after[i] = extra - before[i]
    if not any(before) and not any(after):
        return t
    if mode != "constant" and any(d == 0 for d in t.shape):
        mode = "constant"
    return b.op1("Pad", [t, b.ints(before + after, "pads")], mode=mode)


def fit(b: Builder, t: T, target: Sequence[int], broadcast: bool = False, free_axis: int | None = None) -> T:
    """Bring `t` to exactly `target` (or broadcast-compatible, or free on one axis).

    Same rank: per-dim Slice and Pad.  Different rank: flatten, Slice/Pad the
    element count, Reshape.  A free axis (Concat) keeps as much data as fits.
    """
    target = tuple(int(d) for d in target)
    if free_axis is not None and free_axis < 0:
        free_axis += len(target)
    if t.rank == len(target):
        tgt: list[int | None] = list(target)
        for i, d in enumerate(t.shape):
            if i == free_axis or (broadcast and d == 1):
                tgt[i] = None
        t = slice_to(b, t, tgt)
        return pad_to(b, t, tgt, "constant" if b.rng.random() < 0.7 else "edge")
    if free_axis is not None:
        rest = int(np.prod([d for i, d in enumerate(target) if i != free_axis]))
        m = max(1, min(t.numel // max(rest, 1), 64))
        target = tuple(m if i == free_axis else d for i, d in enumerate(target))
    n = int(np.prod(target)) if target else 1
    flat = reshape(b, t, (t.numel,))
    flat = slice_to(b, flat, (n,))
    flat = pad_to(b, flat, (n,))
    return reshape(b, flat, target)


def shrink(b: Builder, t: T, limit: int) -> T:
    """Slice the largest dims until the tensor holds at most `limit` elements."""
    if t.numel <= limit:
        return t
    shape = list(t.shape)
    while int(np.prod(shape)) > limit:
        i = int(np.argmax(shape))
        shape[i] = max(1, shape[i] // 2)
    return slice_to(b, t, shape)


def guard_domain(b: Builder, t: T, domain: str | None) -> T:
    """Keep most inputs inside an op's domain so NaN does not flood every model."""
    if domain is None or t.dtype != FLOAT:
        return t
    if domain == "unit":
        return b.op1("Tanh", [t])
    a = b.op1("Abs", [t])
    if domain == "nonneg":
        return a
    off = 1.0 if domain == "ge1" else 0.01
    return b.op1("Add", [a, b.const(np.array(off, dtype=np.float32), "off")])


def merge_into(b: Builder, ins: list[T], max_in: int) -> list[T]:
    """Fold inputs beyond an op's arity into its last slot with Add (an aggregation)."""
    if len(ins) <= max_in:
        return ins
    keep = [cast(b, t, FLOAT) for t in ins[: max_in - 1]]
    acc = cast(b, ins[max_in - 1], FLOAT)
    for extra in ins[max_in:]:
        acc = b.op1("Add", [acc, fit(b, cast(b, extra, FLOAT), acc.shape)])
    return keep + [acc]


def norm_axis(a: int, rank: int, extra: int = 0) -> int:
    """Map a drawn axis into [-(rank+extra), rank+extra-1], keeping its sign."""
    r = max(rank + extra, 1)
    if -r <= a < r:
        return a
    m = a % r
    return m - r if a < 0 else m


def shrink_axis(b: Builder, t: T, axis: int, limit: int) -> T:
    """Cut `t` along `axis` until it holds at most `limit` elements (growth ops stay under the element cap)."""
    if t.numel <= limit:
        return t
    rest = t.numel // t.shape[axis]
    keep = max(1, limit // max(rest, 1))
    if keep >= t.shape[axis]:
        return t
    return b.op1("Slice", [t, b.ints([0], "s"), b.ints([keep], "e"), b.ints([axis], "a")])
