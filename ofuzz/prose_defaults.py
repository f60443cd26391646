"""Attributes whose default the ONNX spec gives only in prose, and whether a failure is an engine not supplying it.

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


def omitted(node: onnx.NodeProto, model: onnx.ModelProto) -> dict[str, list[int]]:
    """The prose-default attributes this node leaves out, with the values they stand for (pads only without auto_pad)."""
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


