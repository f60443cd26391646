"""Rules for convolution, pooling, resampling and space/depth/batch moves.

Padding follows the paper's equations (III.G): with stride s, dilation d and
kernel f, oH = (iH + pb + pe - d·(f-1) - 1)/s + 1, and a "keep" draw solves
pb + pe = d·(f-1) so that oH = iH at stride 1 (SAME semantics otherwise),
with 0 <= p < f for pooling (onnxruntime requires pads below the kernel).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ofuzz.gen.blocks import Block
from ofuzz.core.prose_defaults import prose_defaults
from ofuzz.gen.solver.registry import rule
from ofuzz.gen.solver.adapters import pad_to, reshape, shrink, slice_to
from ofuzz.gen.solver.builder import Builder, SolverError, T

Params = dict[str, Any]


def _window(b: Builder, size: int, k: int, s: int, d: int, p: Params, pool: bool) -> tuple[int, int, int, int]:
    """Choose (kernel, dilation, pad_begin, pad_end) for one spatial dim."""
    mode = str(p.get("pad_mode", "keep"))
    for _ in range(8):
        e = d * (k - 1) + 1
        if mode == "keep":
            total = e - 1 if s == 1 else max(0, (-(-size // s) - 1) * s + e - size)
            pb = total // 2
            pe = total - pb
            if b.rng.random() < 0.3:
                pb, pe = pe, pb
        elif mode == "valid":
            pb = pe = 0
        else:  # random pads, bounded as in the paper (p <= f; p < f for pooling)
            hi = max(k - 1, 0) if pool else k
            pb, pe = int(b.rng.integers(0, hi + 1)), int(b.rng.integers(0, hi + 1))
        if pool and (pb >= k or pe >= k):
            pb, pe = min(pb, k - 1), min(pe, k - 1)
        if size + pb + pe >= e:
            return k, d, pb, pe
        if d > 1:
            d -= 1
        elif k > 1:
            k -= 1
    return 1, 1, 0, 0


def _spatial(b: Builder, x: T, p: Params, pool: bool) -> dict[str, Any]:
    n_sp = x.rank - 2
    ks, ds, ss, pbs, pes = [], [], [], [], []
    for i in range(n_sp):
        k = int(p.get("kernel", 3))
        if p.get("kernel_rect") and i == n_sp - 1:
            k = int(b.rng.choice([1, 2, 3, 5]))
        s = int(p.get("stride", 1))
        d = int(p.get("dilation", 1))
        k, d, pb, pe = _window(b, x.shape[2 + i], k, s, d, p, pool)
        ks.append(k), ds.append(d), ss.append(s), pbs.append(pb), pes.append(pe)
    auto_pad = str(p.get("auto_pad", "NOTSET"))
    attrs: dict[str, Any] = {"kernel_shape": ks, "strides": ss}
    if "dilation" in p:
        attrs["dilations"] = ds
    if auto_pad == "NOTSET":
        attrs["pads"] = pbs + pes
    else:
        attrs["auto_pad"] = auto_pad
        if auto_pad == "VALID" and any(x.shape[2 + i] < ds[i] * (ks[i] - 1) + 1 for i in range(n_sp)):
            raise SolverError("VALID window larger than input")
    if p.get("omit_defaults"):  # left out when they equal the spec's defaults: engines must supply them (MNN's pools
        # divide by a missing stride: hand triage 9; the generator always wrote them, so that was never found)
        defaults = prose_defaults(n_sp)
        attrs = {k: v for k, v in attrs.items() if defaults.get(k) != v}
    return attrs


@rule("conv", reads=("auto_pad", "bias", "dilation", "group", "kernel", "kernel_rect", "multiplier", "omit_defaults", "out_channels", "pad_mode", "stride"))
def conv(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Conv in its group modes: 1, depthwise (group = C) and a divisor of C."""
    x = _fit_budget(b, ins[0], int(p.get("out_channels", 8)) * int(p.get("multiplier", 1)))
    c = x.shape[1]
    attrs = _spatial(b, x, p, pool=False)
    mode = str(p.get("group", "one"))
    if mode == "depthwise":
        g, m = c, c * int(p.get("multiplier", 1))
    elif mode == "split":
        divs = [d for d in range(2, c + 1) if c % d == 0]
        g = int(b.rng.choice(divs)) if divs else 1
        m = g * max(1, int(p.get("out_channels", 8)) // g)
    else:
        g, m = 1, int(p.get("out_channels", 8))
    w = b.weight((m, c // g, *attrs["kernel_shape"]), "W")
    args = [x, w] + ([b.weight((m,), "B")] if p.get("bias", 1) else [])
    return b.op("Conv", args, group=g, **attrs)


def _fit_budget(b: Builder, x: T, growth: int) -> T:
    """Shrink an input so that `growth` times its spatial size stays well under the cap."""
    limit = max(1, b.cap // (4 * max(growth, 1)))
    spatial = x.numel // max(x.shape[1], 1)
    if spatial * x.shape[0] <= limit:
        return x
    return shrink(b, x, max(x.shape[1], limit * x.shape[1] // max(spatial * x.shape[0], 1)))


@rule("conv_transpose", reads=("auto_pad", "bias", "dilation", "group", "kernel", "out_channels", "output_padding", "output_shape_attr", "stride"))
def conv_transpose(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """ConvTranspose with weights sized to the input channels (group, stride, dilation, padding or auto_pad, output_padding/output_shape)."""
    x = _fit_budget(b, ins[0], int(p.get("out_channels", 4)) * int(p.get("stride", 1)) ** 2 * 4)
    c = x.shape[1]
    n_sp = x.rank - 2
    k, s, d = int(p.get("kernel", 3)), int(p.get("stride", 1)), int(p.get("dilation", 1))
    g = c if p.get("group") == "depthwise" else 1
    m = int(p.get("out_channels", 4))
    m = g * max(1, m // g) if g > 1 else m
    e = d * (k - 1) + 1
    attrs: dict[str, Any] = {"kernel_shape": [k] * n_sp, "strides": [s] * n_sp, "dilations": [d] * n_sp, "group": g}
    auto_pad = str(p.get("auto_pad", "NOTSET"))
    op = int(p.get("output_padding", 0))
    if op and op >= max(s, d):
        op = 0
    if auto_pad != "NOTSET":
        attrs["auto_pad"] = auto_pad
    elif p.get("output_shape_attr"):
        attrs["output_shape"] = [s * (x.shape[2 + i] - 1) + e - (k - 1) for i in range(n_sp)]
    else:
        pads_b, pads_e = [], []
        for i in range(n_sp):
            full = s * (x.shape[2 + i] - 1) + op + e
            hi = min(k - 1, full - 1)
            pb = int(b.rng.integers(0, max(hi, 0) + 1))
            pe = int(b.rng.integers(0, max(min(k - 1, full - 1 - pb), 0) + 1))
            pads_b.append(pb), pads_e.append(pe)
        attrs["pads"] = pads_b + pads_e
        if op:
            attrs["output_padding"] = [op] * n_sp
    w = b.weight((c, m // g, *attrs["kernel_shape"]), "W")
    args = [x, w] + ([b.weight((m,), "B")] if p.get("bias", 1) else [])
    return b.op("ConvTranspose", args, **attrs)


@rule("pool", reads=("auto_pad", "ceil_mode", "count_include_pad", "dilation", "kernel", "kernel_rect", "omit_defaults", "p", "pad_mode", "storage_order",
                     "stride", "with_indices"))
def pool(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """MaxPool/AveragePool/LpPool with ceil_mode, count_include_pad, dilations, Indices."""
    x = ins[0]
    attrs = _spatial(b, x, p, pool=True)
    for key in ("ceil_mode", "count_include_pad", "storage_order", "p"):
        if key in p:
            attrs[key] = p[key]
    if attrs.get("ceil_mode") and attrs.get("auto_pad", "NOTSET") != "NOTSET":
        attrs["ceil_mode"] = 0
    if attrs.get("ceil_mode") and _last_window_outside(x, attrs):
        raise SolverError("ceil_mode window would start past the input (onnx inference and runtimes disagree)")
    n_out = 2 if blk.op == "MaxPool" and p.get("with_indices") else 1
    outs = b.op(blk.op, [x], n_out, **attrs)
    return outs


def _last_window_outside(x: T, attrs: dict[str, Any]) -> bool:
    """True when ceil_mode adds a window that starts beyond input + left pad.

    onnx 1.23's shape inference counts that window, onnxruntime (and PyTorch)
    drop it, so the declared and the runtime shapes would differ.
    """
    n_sp = x.rank - 2
    pads = attrs.get("pads", [0] * (2 * n_sp))
    for i in range(n_sp):
        k, s = attrs["kernel_shape"][i], attrs.get("strides", [1] * n_sp)[i]
        d = attrs.get("dilations", [1] * n_sp)[i]
        span = x.shape[2 + i] + pads[i] + pads[i + n_sp] - d * (k - 1) - 1
        out = -(-span // s) + 1
        if out != span // s + 1 and (out - 1) * s >= x.shape[2 + i] + pads[i]:
            return True
    return False


@rule("resize", reads=("by", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value", "mode", "nearest_mode", "scale_h", "scale_w"))
def resize(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """Resize in every mode; scales or sizes; roi for tf_crop_and_resize."""
    x = ins[0]
    mode = str(p.get("mode", "nearest"))
    ctm = str(p.get("coordinate_transformation_mode", "half_pixel"))
    scales_hw = [float(p.get("scale_h", 2.0)), float(p.get("scale_w", 2.0))]
    x = _fit_budget(b, x, int(max(scales_hw[0], 1) * max(scales_hw[1], 1) * 4))
    scales_hw = [sc if x.shape[2 + i] * sc >= 1 else 1.0 for i, sc in enumerate(scales_hw)]  # no empty output
    roi = None
    if ctm == "tf_crop_and_resize":
        lo = np.round(b.rng.uniform(0, 0.4, 2), 3)
        hi = np.round(b.rng.uniform(0.6, 1.0, 2), 3)
        roi = b.const(np.array([0, 0, lo[0], lo[1], 1, 1, hi[0], hi[1]], np.float32), "roi")
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": ctm}
    if mode == "nearest":
        attrs["nearest_mode"] = p.get("nearest_mode", "round_prefer_floor")
    if mode == "cubic":
        attrs["cubic_coeff_a"] = p.get("cubic_coeff_a", -0.75)
        attrs["exclude_outside"] = p.get("exclude_outside", 0)
    if ctm == "tf_crop_and_resize":
        attrs["extrapolation_value"] = p.get("extrapolation_value", 0.0)
    if b.opset >= 18 and roi is None:  # opset 18: antialias, keep_aspect_ratio_policy, and scales/sizes for given axes only
        if mode in ("linear", "cubic") and b.rng.random() < 0.3:
            attrs["antialias"] = 1
        if b.rng.random() < 0.3:
            attrs["axes"] = [2, 3] if b.rng.random() < 0.5 else [-2, -1]
            if p.get("by", "scales") == "sizes":
                if b.rng.random() < 0.4:
                    attrs["keep_aspect_ratio_policy"] = str(b.rng.choice(["not_larger", "not_smaller"]))
                sizes = [max(1, int(round(x.shape[2 + i] * scales_hw[i]))) for i in range(2)]
                return b.op("Resize", [x, None, None, b.ints(sizes, "sizes")], **attrs)
            return b.op("Resize", [x, None, b.const(np.array(scales_hw, np.float32), "scales")], **attrs)
    if p.get("by", "scales") == "sizes":
        sizes = [x.shape[0], x.shape[1]] + [max(1, int(round(x.shape[2 + i] * scales_hw[i]))) for i in range(2)]
        return b.op("Resize", [x, roi, None, b.ints(sizes, "sizes")], **attrs)
    scales = b.const(np.array([1.0, 1.0] + scales_hw, np.float32), "scales")
    return b.op("Resize", [x, roi, scales], **attrs)


@rule("roi_align", reads=("coordinate_transformation_mode", "mode", "num_rois", "output_height", "output_width", "sampling_ratio", "spatial_scale"))
def roi_align(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """RoiAlign: the closest ONNX form of TF's CropAndResize."""
    x = ins[0]
    n, _, h, w = x.shape
    k = int(p.get("num_rois", 2))
    x1 = b.rng.uniform(0, w - 1, k) if w > 1 else np.zeros(k)
    y1 = b.rng.uniform(0, h - 1, k) if h > 1 else np.zeros(k)
    x2 = x1 + b.rng.uniform(0.5, max(w - x1.min(), 1.0), k)
    y2 = y1 + b.rng.uniform(0.5, max(h - y1.min(), 1.0), k)
    rois = b.const(np.round(np.stack([x1, y1, x2, y2], 1), 3).astype(np.float32), "rois")
    idx = b.const(b.rng.integers(0, n, k).astype(np.int64), "batch_idx")
    return b.op(
        "RoiAlign", [x, rois, idx], mode=p.get("mode"), output_height=p.get("output_height"), output_width=p.get("output_width"),
        sampling_ratio=p.get("sampling_ratio"), spatial_scale=p.get("spatial_scale"),
        coordinate_transformation_mode=p.get("coordinate_transformation_mode"),
    )


@rule("grid_sample", reads=("align_corners", "mode", "out_h", "out_w", "padding_mode"))
def grid_sample(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """GridSample with a drawn grid of out_h × out_w (mode, padding_mode, align_corners)."""
    x = ins[0]
    ho, wo = int(p.get("out_h", 4)), int(p.get("out_w", 4))
    grid = b.const(np.round(b.rng.uniform(-1.1, 1.1, (x.shape[0], ho, wo, 2)), 4).astype(np.float32), "grid")
    mode = p.get("mode")
    if b.opset >= 20 and mode is not None:  # opset 20 renamed the modes (and made them N-d)
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(str(mode), mode)
    return b.op("GridSample", [x, grid], mode=mode, padding_mode=p.get("padding_mode"), align_corners=p.get("align_corners"))


def _round_to(b: Builder, x: T, dims: dict[int, int]) -> T:
    """Slice (or pad, when too small) the given dims to a multiple of their factor."""
    tgt: list[int | None] = [None] * x.rank
    for i, f in dims.items():
        d = x.shape[i]
        tgt[i] = (d // f) * f if d >= f else f
    x = slice_to(b, x, tgt)
    return pad_to(b, x, tgt)


@rule("depth_to_space", reads=("blocksize", "mode"))
def depth_to_space(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """DepthToSpace: channels made a multiple of blocksize² first (DCR or CRD)."""
    bs = int(p.get("blocksize", 2))
    x = _round_to(b, ins[0], {1: bs * bs})
    return b.op("DepthToSpace", [x], blocksize=bs, mode=p.get("mode", "DCR"))


@rule("space_to_depth", reads=("blocksize",))
def space_to_depth(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """SpaceToDepth: spatial dims made multiples of blocksize first."""
    bs = int(p.get("blocksize", 2))
    x = _round_to(b, ins[0], {2: bs, 3: bs})
    return b.op("SpaceToDepth", [x], blocksize=bs)


@rule("space_to_batch", reads=("blocksize",))
def space_to_batch(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """TF SpaceToBatchND as ONNX: Pad → Reshape → Transpose → Reshape."""
    bs = int(p.get("blocksize", 2))
    x = ins[0]
    n, c, h, w = x.shape
    hp, wp = -(-h // bs) * bs, -(-w // bs) * bs
    if (hp, wp) != (h, w):
        x = pad_to(b, x, [None, None, hp, wp])
        n, c, h, w = x.shape
    y = reshape(b, x, (n, c, h // bs, bs, w // bs, bs))
    y = b.op1("Transpose", [y], perm=[3, 5, 0, 1, 2, 4])
    return [reshape(b, y, (bs * bs * n, c, h // bs, w // bs))]


@rule("batch_to_space", reads=("blocksize", "crop"))
def batch_to_space(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """TF BatchToSpaceND as ONNX: Reshape → Transpose → Reshape → crop (Slice)."""
    bs = int(p.get("blocksize", 2))
    x = ins[0]
    if x.shape[0] % (bs * bs):
        x = b.op1("Tile", [x, b.ints([bs * bs, 1, 1, 1], "reps")])
    n, c, h, w = x.shape
    nb = n // (bs * bs)
    y = reshape(b, x, (bs, bs, nb, c, h, w))
    y = b.op1("Transpose", [y], perm=[2, 3, 4, 0, 5, 1])
    y = reshape(b, y, (nb, c, h * bs, w * bs))
    crop = int(p.get("crop", 0))
    if crop and h * bs > crop and w * bs > crop:
        y = b.op1("Slice", [y, b.ints([crop, 0], "starts"), b.ints([h * bs, w * bs - crop], "ends"), b.ints([2, 3], "axes")])
    return [y]


@rule("lrn", reads=("alpha", "beta", "bias", "size"))
def lrn(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """LRN across channels (size, alpha, beta, bias) on rank-4 inputs."""
    return b.op("LRN", [ins[0]], size=p.get("size"), alpha=p.get("alpha"), beta=p.get("beta"), bias=p.get("bias"))


@rule("global_pool", reads=("p",))
def global_pool(b: Builder, ins: list[T], p: Params, blk: Block) -> list[T]:
    """GlobalAveragePool / GlobalMaxPool / GlobalLpPool (p) on rank ≥ 3 inputs."""
    return b.op(blk.op, [ins[0]], **({"p": p["p"]} if "p" in p else {}))
