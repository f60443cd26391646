"""Rules of linear algebra: MatMul, Gemm, Einsum, Trilu, EyeLike, Det (operand shapes made to match).
"""
from __future__ import annotations

import string
from typing import Any

import numpy as np

from ofuzz.gen.blocks import Block
from ofuzz.gen.solver.registry import rule
from ofuzz.gen.solver.adapters import SOFT_CAP, cast, fit, shrink, to_rank
from ofuzz.gen.solver.builder import FLOAT, Builder, T

Params = dict[str, Any]


@rule("einsum", reads=("operands", "permute"), max_in=2)
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
    y = fit(b, cast(b, ins[1], x.dtype), yshape) if len(ins) > 1 else b.weight(yshape, "E", x.dtype)
    return b.op("Einsum", [x, y], equation=f"{letters},{yterm}->{out}{new}")


@rule("matmul", reads=("batched", "n"), max_in=2)
def matmul(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """MatMul against a constant (or the second input) whose shape matches, batched or not."""
    x = ins[0]
    k = x.shape[-1]
    n = int(p.get("n", 8))
    yshape = (k, n) if x.rank < 3 or not p.get("batched") else (*x.shape[:-2], k, n)
    y = fit(b, cast(b, ins[1], x.dtype), yshape) if len(ins) > 1 else b.weight(yshape, "M", x.dtype)
    return b.op("MatMul", [x, y])


@rule("gemm", reads=("alpha", "beta", "c", "n", "transA", "transB"), max_in=2)
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


@rule("trilu", reads=("k", "k_given", "upper"))
def trilu(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Trilu (upper or lower) with offset k given or omitted."""
    x = ins[0]
    args = [x] + ([b.const(np.array(int(p.get("k", 0)), np.int64), "k")] if p.get("k_given", 1) else [])
    return b.op("Trilu", args, upper=p.get("upper"))


@rule("eye_like", reads=("k",))
def eye_like(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """EyeLike of a rank-2 view of the input, diagonal offset k."""
    return b.op("EyeLike", [ins[0]], k=p.get("k"))


@rule("det", reads=("max_n",))
def det(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Det of a batch of square matrices (the last two dims cut to at most max_n)."""
    x = ins[0]
    m = min(x.shape[-1], x.shape[-2], int(p.get("max_n", 4)))
    x = fit(b, x, (*x.shape[:-2], m, m))
    return b.op("Det", [x])
