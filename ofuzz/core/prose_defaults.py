"""Attributes whose default the ONNX spec gives only in prose, and shorthands that stand for explicit values: the
rewrites the triage uses to show that a failure is an engine not supplying a default, or mishandling auto_pad.

Conv, ConvTranspose and the pools say "If not present, the stride defaults to 1 along each spatial axis" (dilations
1, pads 0), but their schemas carry no default value, so an importer that reads the attribute without a fallback
divides by a zero stride. Hand triage 9 found MNN's pools dying with SIGFPE that way; the seed-76 campaign then
reported that one defect as five root causes: the run-time SIGFPE per operator, and a converter SIGILL whenever a
consumer made MNN's converter compute shapes (the consumer kept in each repro). Writing the defaults out is the test (`triage`): if the engine then runs the repro and
agrees, the omitted attribute is the trigger, and that is the root cause. The generator omits them with these values.
"""
from __future__ import annotations

import onnx
from onnx import helper

SPATIAL_OPS = ("Conv", "ConvTranspose", "AveragePool", "MaxPool", "LpPool", "ConvInteger")


def prose_defaults(spatial: int) -> dict[str, list[int]]:
    """The values an omitted strides, dilations and pads stand for on `spatial` axes."""
    return {"strides": [1] * spatial, "dilations": [1] * spatial, "pads": [0] * (2 * spatial)}


def _spatial_rank(node: onnx.NodeProto, model: onnx.ModelProto) -> int | None:
    """From kernel_shape, else from the weight initializer's rank (Conv may leave kernel_shape out)."""
    for a in node.attribute:
        if a.name == "kernel_shape":
            return len(a.ints)
    inits = {t.name: t for t in model.graph.initializer}
    if len(node.input) > 1 and node.input[1] in inits:
        return max(0, len(inits[node.input[1]].dims) - 2)
    return None


def _takes(node: onnx.NodeProto, name: str, opset: int) -> bool:
    try:
        return name in onnx.defs.get_schema(node.op_type, opset, node.domain).attributes
    except onnx.defs.SchemaError:
        return False


def _rank_of(name: str, model: onnx.ModelProto) -> int | None:
    """The rank of a graph input, initializer or inferred tensor (None: unknown)."""
    for t in model.graph.initializer:
        if t.name == name:
            return len(t.dims)
    for v in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        if v.name == name and v.type.tensor_type.HasField("shape"):
            return len(v.type.tensor_type.shape.dim)
    return None


def omitted(node: onnx.NodeProto, model: onnx.ModelProto) -> dict[str, list[int] | int]:
    """The prose-default attributes this node leaves out, with the values they stand for (pads only without auto_pad).
    Also Shape-15's `end`: "If the end axis is omitted, the axes upto the last one will be included" (its schema has no
    default value; hand triage 26: onnx2tf's Shape.py slices only when both start and end are given, a wrong shape in one
    mode and a conversion failure in the other)."""
    if node.op_type == "Shape" and node.domain in ("", "ai.onnx") and node.input:
        rank = _rank_of(node.input[0], model)
        given = {a.name for a in node.attribute}
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
        return {"end": rank} if rank is not None and "end" not in given and _takes(node, "end", opset) else {}
    if node.op_type not in SPATIAL_OPS or node.domain not in ("", "ai.onnx"):
        return {}
    n = _spatial_rank(node, model)
    if not n:
        return {}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    given = {a.name: a for a in node.attribute}
    auto_pad = given["auto_pad"].s.decode() if "auto_pad" in given else "NOTSET"
    return {k: v for k, v in prose_defaults(n).items()
            if k not in given and _takes(node, k, opset) and (k != "pads" or auto_pad == "NOTSET")}


def written_out(model: onnx.ModelProto, only: set[str] | None = None) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every omitted prose default (or only those named in `only`: "strides") written explicitly, and what
    was written ("AveragePool.strides")."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    wrote: list[str] = []
    for node in out.graph.node:
        for name, value in omitted(node, model).items():
            if only is not None and name not in only:
                continue
            node.attribute.append(helper.make_attribute(name, value))
            wrote.append(f"{node.op_type}.{name}")
    return out, sorted(set(wrote))


SAME_PADDED = ("Conv", "AveragePool", "MaxPool", "LpPool", "ConvInteger", "ConvTranspose")


def _auto_pad(node: onnx.NodeProto) -> str:
    return next((a.s.decode() for a in node.attribute if a.name == "auto_pad"), "NOTSET")


def explicit_pads(node: onnx.NodeProto, in_shape: tuple[int, ...], kernel: list[int]) -> list[int] | None:
    """The pads auto_pad=SAME_UPPER/SAME_LOWER stands for on an input of spatial shape `in_shape` (the spec: output
    ceil(in / stride), for ConvTranspose in * stride; the total padding split evenly, the odd one at the end for
    SAME_UPPER, at the start for LOWER). None where no explicit pads say the same (a ConvTranspose with output_shape,
    or one whose kernel is narrower than its stride)."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    mode = _auto_pad(node)
    if mode not in ("SAME_UPPER", "SAME_LOWER") or len(kernel) != len(in_shape):
        return None
    n = len(kernel)
    strides, dil = list(attrs.get("strides", [1] * n)), list(attrs.get("dilations", [1] * n))
    transposed = node.op_type == "ConvTranspose"
    if transposed and "output_shape" in attrs:  # the pads then follow from output_shape, not from auto_pad alone
        return None
    out_pad = list(attrs.get("output_padding", [0] * n))
    begin, end = [], []
    for i in range(n):
        if transposed:  # the spec: output in * stride; total_padding = stride * (in - 1) + output_padding + ((k - 1) * d + 1) - output
            total = strides[i] * (in_shape[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - in_shape[i] * strides[i]
            if total < 0:  # a kernel narrower than its stride: no pads reach that output size
                return None
        else:
            out = -(-in_shape[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in_shape[i])
        small, big = total // 2, total - total // 2
        begin.append(small if mode == "SAME_UPPER" else big)
        end.append(big if mode == "SAME_UPPER" else small)
    return begin + end


def auto_pad_written_out(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every auto_pad=SAME_* of Conv and the pools replaced by the explicit pads it stands for (`shapes`:
    each node input's full shape), and what was replaced ("AveragePool.auto_pad=SAME_LOWER"). The same test as for an
    omitted default: if the engine is right once the shorthand is spelled out, the shorthand is the trigger, whatever
    the failure looked like (onnx2tf's AveragePool with SAME_LOWER came back as four root causes: wrong values, two
    conversion errors, and an upstream failure)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: tuple(t.dims) for t in model.graph.initializer}
    wrote: list[str] = []
    for node in out.graph.node:
        if node.op_type not in SAME_PADDED or node.domain not in ("", "ai.onnx") or not node.input:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        x = shapes.get(node.input[0])
        w = inits.get(node.input[1]) or shapes.get(node.input[1]) if len(node.input) > 1 else None
        kernel = list(attrs.get("kernel_shape", list(w[2:]) if w else []))
        pads = explicit_pads(node, tuple(x[2:]) if x else (), kernel) if x else None
        if pads is None:
            continue
        mode = _auto_pad(node)
        keep = [a for a in node.attribute if a.name not in ("auto_pad", "pads")]
        del node.attribute[:]
        node.attribute.extend(keep)
        node.attribute.append(helper.make_attribute("pads", pads))
        wrote.append(f"{node.op_type}.auto_pad={mode}")
    return out, sorted(set(wrote))


def schema_defaults_written_out(model: onnx.ModelProto, only: set[str] | None = None) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every attribute the schema defaults (keepdims=1, axis=0, ...) and a node leaves out (or only those
    named in `only`: "ReduceSumSquare.keepdims") written at that default, and what was written. The model means the
    same; an engine that now gives the right answer had the default wrong (hand triage 18 #3: MNN's OnnxReduceL2.cpp
    starts from keepDims = false)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    wrote: list[str] = []
    for node in out.graph.node:
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
        except onnx.defs.SchemaError:
            continue
        given = {a.name for a in node.attribute}
        for name, spec in sorted(schema.attributes.items()):
            default = spec.default_value
            if name in given or default is None or default.type == onnx.AttributeProto.UNDEFINED or \
                    (only is not None and f"{node.op_type}.{name}" not in only):
                continue
            attr = onnx.AttributeProto()
            attr.CopyFrom(default)
            attr.name = name
            node.attribute.append(attr)
            wrote.append(f"{node.op_type}.{name}")
    return out, sorted(set(wrote))


def slices_spelled_out(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every Slice over several axes (constant starts, ends, axes, steps) replaced by a chain of one-axis
    Slices, and what was replaced ("Slice.axes"). The same shorthand test as auto_pad: a multi-axis Slice means exactly
    the chain, so an engine right on the chain mishandles the shorthand (hand triage 23: onnx2tf moves `axes` to NHWC
    and leaves starts/ends in place, Slice.py:188, seen as a wrong value in one mode and a consumer's failure in the
    other)."""
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    wrote, nodes = [], []
    for node in out.graph.node:
        parts = _slice_parts(node, inits)
        if parts is None:
            nodes.append(node)
            continue
        src = node.input[0]
        for k, (start, end, axis, step) in enumerate(parts):
            names = [f"{node.output[0]}__one_axis{k}_{w}" for w in ("starts", "ends", "axes", "steps")]
            for name, v in zip(names, (start, end, axis, step)):
                out.graph.initializer.append(numpy_helper.from_array(v.reshape(1), name))
            dst = node.output[0] if k == len(parts) - 1 else f"{node.output[0]}__one_axis{k}"
            nodes.append(helper.make_node("Slice", [src, *names], [dst], name=f"{node.name}__one_axis{k}"))
            src = dst
        wrote.append("Slice.axes")
    if not wrote:
        return out, []
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out, sorted(set(wrote))


def _slice_parts(node: onnx.NodeProto, inits: dict) -> list | None:
    """(start, end, axis, step) per axis of a Slice-10+ node over two or more axes whose slice inputs are constants; None
    for any other node."""
    import numpy as np

    if node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.input) < 3:
        return None
    given = [node.input[i] if i < len(node.input) else "" for i in range(1, 5)]
    if any(g and g not in inits for g in given) or not given[0] or not given[1]:
        return None
    starts, ends = inits[given[0]].reshape(-1), inits[given[1]].reshape(-1)
    if len(starts) < 2 or len(ends) != len(starts):
        return None
    axes = inits[given[2]].reshape(-1) if given[2] else np.arange(len(starts), dtype=starts.dtype)
    steps = inits[given[3]].reshape(-1) if given[3] else np.ones(len(starts), dtype=starts.dtype)
    if len(axes) != len(starts) or len(steps) != len(starts):
        return None
    return [(starts[i:i + 1], ends[i:i + 1], axes[i:i + 1].astype(starts.dtype), steps[i:i + 1].astype(starts.dtype)) for i in range(len(starts))]
