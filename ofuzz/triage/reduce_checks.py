"""The reducer's checks on a candidate model: well formed, within the spec, not hiding a layout defect, and its digest for the cache."""
from __future__ import annotations

import hashlib

import numpy as np
import onnx

from ofuzz.core import onnx_guard


def layout_ambiguous(model: onnx.ModelProto, ones: bool = False) -> bool:
    """An input or output of rank 3-5 whose dims after the batch are all one size > 1 ([1,2,2,2]): its NCHW and NHWC
    layouts have the same shape, so an engine that converts the layout (onnx2tf's default mode) cannot be fed or read
    back by shape, and its right answer looks wrong (hand triage 7: a 1x1 Conv halved to [1,2,2,2] stayed a bug
    though onnx2tf's default mode computes it right). ENGINE-NOTES: distinct sizes make a layout detectable.
    `ones`: size 1 counts too ([1,1,1,1]); its data reads the same either way, but an engine that reads the layout off
    the shape still takes another path for it."""
    return any(looks_alike(vi, ones) for vi in [*model.graph.input, *model.graph.output])

def looks_alike(vi: onnx.ValueInfoProto, ones: bool = False) -> bool:
    """Rank 3-5 with every dim after the batch of one size (> 1, or ≥ 1 with `ones`): NCHW and NHWC shapes coincide."""
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
    return 3 <= len(dims) <= 5 and dims[1] >= (1 if ones else 2) and len(set(dims[1:])) == 1

def well_formed(model: onnx.ModelProto) -> bool:
    """onnx's full checker with strict shape inference, and no tensor left empty: a candidate where a 3x3 kernel
    meets a 1x1 input (attributes dropped) or a Reshape target no longer fits (shapes halved) is not the finding."""
    inferred = onnx_guard.inferred(model, strict=True, check=True)
    if inferred is None:
        return False
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        if any(d.HasField("dim_value") and d.dim_value == 0 for d in vi.type.tensor_type.shape.dim):
            return False
    return not any(breaks_spec(n, inferred) for n in inferred.graph.node)

def redeclared(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model with its graph outputs declared as ONNX inference now gives them (value_info dropped): a candidate whose
    dropped attribute changes an output's shape (Reduce's axes, RoiAlign's output_width) is refused against the old
    declaration, although it is a valid model. None when inference rejects it anyway."""
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.graph.value_info[:]
    for o in bare.graph.output:
        o.type.tensor_type.ClearField("shape")
    inferred = onnx_guard.inferred(bare, strict=True, check=False)
    if inferred is None:
        return None
    for o, io in zip(bare.graph.output, inferred.graph.output):
        o.type.CopyFrom(io.type)
    return bare


def breaks_spec(node: onnx.NodeProto, inferred: onnx.ModelProto) -> bool:
    """Operator rules the ONNX spec states that neither its checker nor shape inference enforces; dropping or
    halving an attribute can break them, and an engine that then refuses the model shows nothing about the finding."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "ConvTranspose" and attrs.get("output_padding"):
        # "Each padding value in output_padding must be less than the corresponding stride/dilation dimension"
        k = len(attrs["output_padding"])
        strides = list(attrs.get("strides") or [1] * k)
        dilations = list(attrs.get("dilations") or [1] * k)
        return any(op >= max(st, dl) for op, st, dl in zip(attrs["output_padding"], strides, dilations))
    if node.op_type == "Mod" and not attrs.get("fmod"):
        # "If the input type is floating point, then fmod attribute must be set to 1"
        types = {vi.name: vi.type.tensor_type.elem_type for vi in [*inferred.graph.input, *inferred.graph.value_info]}
        types.update({t.name: t.data_type for t in inferred.graph.initializer})
        return any(types.get(i) in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16) for i in node.input)
    if node.op_type == "Einsum":
        eq = attrs.get("equation", b"")
        return _einsum_labels_disagree(eq.decode() if isinstance(eq, bytes) else str(eq), node, inferred)
    return False


def _einsum_labels_disagree(equation: str, node: onnx.NodeProto, inferred: onnx.ModelProto) -> bool:
    """A letter of the equation sized differently in two places: "The equation may contain ellipsis ("...") to enable
    broadcasting", so a labelled dimension does not broadcast (hand triage 22 #27: shapes halved gave label `a` size 1
    in one input and 2 in the other, and onnx2tf's refusal of that was reported as a defect)."""
    shapes = {vi.name: [d.dim_value if d.HasField("dim_value") else 0 for d in vi.type.tensor_type.shape.dim]
              for vi in [*inferred.graph.input, *inferred.graph.value_info]}
    shapes.update({t.name: list(t.dims) for t in inferred.graph.initializer})
    sizes: dict[str, set[int]] = {}
    for term, name in zip(equation.replace(" ", "").split("->")[0].split(","), node.input):
        dims = shapes.get(name)
        if dims is None or "..." in term or len(term) != len(dims):
            continue
        for letter, size in zip(term, dims):
            if size:
                sizes.setdefault(letter, set()).add(size)
    return any(len(v) > 1 for v in sizes.values())

def digest(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> str:
    h = hashlib.sha1(model.SerializeToString())
    for k in sorted(feeds):
        a = np.ascontiguousarray(feeds[k])
        h.update(k.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()

def retyped(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> onnx.ModelProto | None:
    """The model with new input shapes; output shapes re-inferred (None when they do not fit)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in feeds:
            vi.type.tensor_type.shape.Clear()
            for d in feeds[vi.name].shape:
                vi.type.tensor_type.shape.dim.add().dim_value = int(d)
    for vo in m.graph.output:
        vo.type.tensor_type.ClearField("shape")
    del m.graph.value_info[:]
    inferred = onnx_guard.inferred(m, strict=True, check=True)  # out of process: onnx can abort on such candidates
    if inferred is None:
        return None
    for vo in inferred.graph.output:
        dims = vo.type.tensor_type.shape.dim
        if not vo.type.tensor_type.HasField("shape") or any(not d.HasField("dim_value") or d.dim_value < 1 for d in dims):
            return None
    del inferred.graph.value_info[:]
    return inferred
