"""Rules of the later signal and image operators: DFT (17, axis as an input from 20), Col2Im (18), AffineGrid (20).

Each shapes its input to what the operator needs (fit/reshape of the block's input, so the data still flows from
upstream) and draws the attributes engines break on: inverse and one-sided transforms, a dft_length that pads or
truncates, negative axes; Col2Im's strides, dilations and pads; AffineGrid's align_corners.
"""
from __future__ import annotations

import numpy as np

from ofuzz.gen.blocks import Block
from ofuzz.gen.solver.adapters import fit
from ofuzz.gen.solver.builder import Builder, SolverError, T
from ofuzz.gen.solver.registry import rule

Params = dict


@rule("dft", reads=("axis", "complex", "dft_length", "inverse", "onesided"))
def dft(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """DFT over axis 1 or 2 of a [B, H, W, 1|2] signal (real or complex), forward or inverse, full or one-sided."""
    c = 2 if p.get("complex") else 1
    h, w = int(b.rng.integers(2, 9)), int(b.rng.integers(2, 9))
    x = fit(b, ins[0], (int(b.rng.integers(1, 3)), h, w, c))
    inverse = int(p.get("inverse", 0))
    onesided = int(p.get("onesided", 0)) if c == 1 and not inverse else 0  # one-sided forward needs a real signal
    axis = int(p.get("axis", 1))  # 1, 2 or their negative forms -3, -2
    n = x.shape[axis % 4]
    length = None
    if p.get("dft_length"):
        length = b.const(np.array(max(2, n + int(b.rng.integers(-1, 3))), np.int64), "dft_length")
    if b.opset >= 20:
        return b.op("DFT", [x, length, b.const(np.array(axis, np.int64), "axis")], inverse=inverse, onesided=onesided)
    if axis < 0:
        axis += 4
    return b.op("DFT", [x, length], inverse=inverse, onesided=onesided, axis=axis)


@rule("col2im", reads=("channels", "dilation", "kernel", "pad", "stride"))
def col2im(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Col2Im of [N, C·kh·kw, L] columns into an image [N, C, H, W]; L follows from image, block, strides, dilations, pads."""
    k, s, d, pad = int(p.get("kernel", 2)), int(p.get("stride", 1)), int(p.get("dilation", 1)), int(p.get("pad", 0))
    kh, kw = k, max(1, k - int(b.rng.integers(0, 2)))
    hw = [int(b.rng.integers(d * (kk - 1) + 1, d * (kk - 1) + 8)) for kk in (kh, kw)]
    blocks = [(hw[i] + 2 * pad - d * ((kh, kw)[i] - 1) - 1) // s + 1 for i in range(2)]
    if min(blocks) < 1:
        raise SolverError("Col2Im: no block fits the image")
    cch = int(p.get("channels", 1))
    x = fit(b, ins[0], (int(b.rng.integers(1, 3)), cch * kh * kw, blocks[0] * blocks[1]))
    return b.op("Col2Im", [x, b.ints(hw, "image_shape"), b.ints([kh, kw], "block_shape")],
                strides=[s, s], dilations=[d, d], pads=[pad, pad, pad, pad])


@rule("affine_grid", reads=("align_corners",))
def affine_grid(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """AffineGrid (20): 2-D sampling grids [N, H, W, 2] from the block's input shaped as theta [N, 2, 3]."""
    n = int(b.rng.integers(1, 3))
    theta = fit(b, ins[0], (n, 2, 3))
    size = [n, int(b.rng.integers(1, 4)), int(b.rng.integers(2, 9)), int(b.rng.integers(2, 9))]
    return b.op("AffineGrid", [theta, b.ints(size, "size")], align_corners=int(p.get("align_corners", 0)))
