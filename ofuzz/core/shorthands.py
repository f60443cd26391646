"""Shorthands spelled out: a node that says in few words what other nodes say at length, rewritten into the long form.

The ONNX spec defines some inputs and attributes as shorthands: a Slice stepping backward selects exactly what a Gather
of those indices selects, a Resize-18 with `axes` resizes exactly as one whose scales (or sizes) cover every axis with
1 (or the dimension) on the others. An engine that is right on the long form and wrong on the short one mishandles the
shorthand, whatever its failure looked like: that is a trigger the triage can show (`triggers.py`) and key a root cause
by. Each function returns the rewritten copy and what it replaced ("Slice.steps"); nothing is replaced when a value it
needs (a constant, a static shape) is unknown, or when the long form would not be the same function.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def negative_steps_spelled_out(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every Slice that steps backward along an axis (constant starts, ends, axes, steps; `shapes`: each
    Slice input's full shape) replaced by a Gather of exactly the elements it selects on that axis, after a Slice over its
    forward-stepping axes if any, and what was replaced ("Slice.steps"). The spec: "If a negative value is passed for
    step, it represents slicing backward"; the Gather spells that out, so an engine right on it mishandles the backward
    step (hand triage 23: MNN's negative-step Slice came back as a one-node wrong value and as a three-node repro whose
    Slice crashed)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    wrote, nodes = [], []
    for node in out.graph.node:
        plan = _backward_axes(node, inits, shapes.get(node.input[0]) if node.input else None)
        if plan is None:
            nodes.append(node)
            continue
        forward, backward = plan
        src = node.input[0]
        if forward:
            names = [f"{node.output[0]}__forward_{w}" for w in ("starts", "ends", "axes", "steps")]
            for name, values in zip(names, zip(*forward)):
                out.graph.initializer.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
            src = f"{node.output[0]}__forward" if backward else node.output[0]
            nodes.append(helper.make_node("Slice", [node.input[0], *names], [src], name=f"{node.name}__forward"))
        for k, (axis, picked) in enumerate(backward):
            idx = f"{node.output[0]}__backward{k}_indices"
            out.graph.initializer.append(numpy_helper.from_array(np.array(picked, dtype=np.int64), idx))
            dst = node.output[0] if k == len(backward) - 1 else f"{node.output[0]}__backward{k}"
            nodes.append(helper.make_node("Gather", [src, idx], [dst], name=f"{node.name}__backward{k}", axis=int(axis)))
            src = dst
        wrote.append("Slice.steps")
    if not wrote:
        return out, []
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    read = {i for n in nodes for i in n.input}
    kept = [t for t in out.graph.initializer if t.name in read]  # the replaced Slices' starts, ends, axes and steps go
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept)
    return out, sorted(set(wrote))


def backward_steps_reversed(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every backward-stepping Slice (as negative_steps_spelled_out takes them) stepping forward over the
    same elements instead: the same handler, the same elements, in ascending order. The control of the backward-step
    trigger: a Gather in its place may also dodge a defect of the Slice handler that has nothing to do with the step's
    sign (onnx2tf's default mode mishandles a Slice's layout either way)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    wrote = []
    for node in out.graph.node:
        plan = _backward_axes(node, inits, shapes.get(node.input[0]) if node.input else None)
        if plan is None:
            continue
        forward, backward = plan
        parts = forward + [(picked[-1], picked[0] + 1, axis, -(picked[1] - picked[0]) if len(picked) > 1 else 1) for axis, picked in backward]
        names = [f"{node.output[0]}__reversed_{w}" for w in ("starts", "ends", "axes", "steps")]
        for name, values in zip(names, zip(*parts)):
            out.graph.initializer.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        node.input[1:5] = names
        wrote.append("Slice.steps")
    return out, sorted(set(wrote))


def _backward_axes(node: onnx.NodeProto, inits: dict, shape: tuple[int, ...] | None) -> tuple[list, list] | None:
    """Of a Slice-10+ node with constant slice inputs, a known input shape and a negative step: its forward-stepping
    (start, end, axis, step) and, per backward-stepping axis, (axis, the indices it selects); None otherwise (or when a
    backward axis selects nothing, or starts before the first element, where the spec's clamping and numpy's differ)."""
    if node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.input) < 5 or not shape or not all(shape):
        return None
    given = node.input[1:5]
    if any(g and g not in inits for g in given) or not all(given[:2]) or not given[3]:
        return None
    starts, ends, steps = (inits[g].reshape(-1).astype(np.int64) for g in (given[0], given[1], given[3]))
    axes = inits[given[2]].reshape(-1).astype(np.int64) if given[2] else np.arange(len(starts), dtype=np.int64)
    if not (len(starts) == len(ends) == len(axes) == len(steps)) or not (steps < 0).any() or (steps == 0).any():
        return None
    forward, backward = [], []
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = int(axis) + len(shape) if axis < 0 else int(axis)
        if not 0 <= axis < len(shape):
            return None
        if step > 0:
            forward.append((int(start), int(end), axis, int(step)))
            continue
        dim = shape[axis]
        first = int(start) + dim if start < 0 else int(start)
        if first < 0:  # the spec clamps such a start to 0, numpy (and the reference) select nothing: leave it alone
            return None
        first = min(first, dim - 1)
        last = min(max(int(end) + dim if end < 0 else int(end), -1), dim - 1)
        picked = list(range(first, last, int(step)))
        if not picked:
            return None
        backward.append((axis, picked))
    return forward, backward


def resize_axes_spelled_out(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every Resize that names `axes` (constant roi, scales or sizes; `shapes`: its input's full shape)
    rewritten without them: scales 1, sizes the input's dimension and roi [0, 1] on the axes it left out. The spec:
    "If provided, it specifies a subset of axes that 'roi', 'scales' and 'sizes' refer to". Left alone when a
    keep_aspect_ratio_policy other than stretch reads sizes (its ratio is taken over the named axes only). The issue's
    Resize-18 `axes` defect of MNN came back as a wrong shape and as a run failure."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: t for t in out.graph.initializer}
    wrote = []
    for node in out.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        shape = shapes.get(node.input[0]) if node.input else None
        if node.op_type != "Resize" or "axes" not in attrs or not shape or not all(shape):
            continue
        rank = len(shape)
        axes = [a + rank if a < 0 else a for a in attrs["axes"]]
        given = [node.input[i] if i < len(node.input) else "" for i in range(1, 4)]  # roi, scales, sizes
        if sorted(set(axes)) != sorted(axes) or not all(0 <= a < rank for a in axes) or any(g and g not in inits for g in given):
            continue
        if given[2] and attrs.get("keep_aspect_ratio_policy", b"stretch") not in (b"stretch", "stretch"):
            continue
        full: dict[str, np.ndarray] = {}
        for k, (name, fill) in enumerate(zip(given, ("roi", 1.0, None))):
            if not name:
                continue
            v = numpy_helper.to_array(inits[name]).reshape(-1)
            if k == 0:  # roi: the named axes' starts, then their ends
                if len(v) != 2 * len(axes):
                    break
                starts, ends = np.zeros(rank, v.dtype), np.ones(rank, v.dtype)
                starts[axes], ends[axes] = v[:len(axes)], v[len(axes):]
                full[name] = np.concatenate([starts, ends])
            else:
                if len(v) != len(axes):
                    break
                whole = np.array(shape, v.dtype) if fill is None else np.full(rank, fill, v.dtype)
                whole[axes] = v
                full[name] = whole
        else:
            for name, v in full.items():
                inits[name].CopyFrom(numpy_helper.from_array(v, name))
            keep = [a for a in node.attribute if a.name != "axes"]
            del node.attribute[:]
            node.attribute.extend(keep)
            wrote.append("Resize.axes")
    return out, sorted(set(wrote))


REDUCE_OPS = ("ReduceMax", "ReduceMin", "ReduceMean", "ReduceSum", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
              "ReduceLogSumExp", "ReduceSumSquare")


def reduce_axes_spelled_out(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every Reduce that leaves its axes out (and is not a no-op without them) given every axis explicitly,
    as an attribute or an input as its opset takes them, and what was replaced ("Reduce.axes", one label for the whole
    operator group: the spec words it alike for each, "Default is to reduce over all the dimensions"). Hand triage 26:
    onnx2tf rewrites a Reduce without axes for its own validation run and then mishandles its consumer, as ReduceMin
    and ReduceMean alike; with the axes written out both convert."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    taken = {t.name for t in model.graph.initializer} | {o for n in model.graph.node for o in n.output}
    wrote = []
    for k, node in enumerate(out.graph.node):
        if node.op_type not in REDUCE_OPS or node.domain not in ("", "ai.onnx") or not node.input:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        shape = shapes.get(node.input[0])
        if shape is None or attrs.get("noop_with_empty_axes", 0) or "axes" in attrs or (len(node.input) > 1 and node.input[1]):
            continue
        every = list(range(len(shape)))
        try:
            as_attribute = "axes" in onnx.defs.get_schema(node.op_type, opset).attributes
        except onnx.defs.SchemaError:
            continue
        if as_attribute:
            node.attribute.append(helper.make_attribute("axes", every))
        else:
            name = f"{node.output[0]}__every_axis"
            while name in taken:
                name += "_"
            taken.add(name)
            out.graph.initializer.append(numpy_helper.from_array(np.array(every, np.int64), name))
            if len(node.input) > 1:
                node.input[1] = name
            else:
                node.input.append(name)
        wrote.append("Reduce.axes")
    return out, sorted(set(wrote))


# operators whose `axis` counts the output's axes, one more than the first input has (OneHot: "Accepted range is [-r-1, r]")
_AXIS_OF_OUTPUT = {"OneHot"}
# operators whose `axes` (attribute before opset 13, input from 13) count the output's axes (Unsqueeze: "r + len(axes)")
_AXES_OF_OUTPUT = {"Unsqueeze"}
# operators whose constant `axes` input (position 1) names axes of their first input
_AXES_INPUT = frozenset({"Squeeze", "Unsqueeze", *REDUCE_OPS})


def negative_axes_spelled_out(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> tuple[onnx.ModelProto, list[str]]:
    """A copy with every negative `axis` or `axes` (an attribute, or the constant `axes` input of Squeeze, Unsqueeze and
    the Reduce operators) written as the non-negative axis it counts from the back, and what was rewritten
    ("OneHot.axis<0"). The spec: "Negative value means counting dimensions from the back"; the non-negative axis
    spells that out, so an engine right on it mishandles the negative one (hand triage 28: onnx2tf's OneHot adds a
    negative axis twice, a wrong shape in one mode and a conversion failure in the other). Nothing is rewritten when a
    rank is unknown."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: t for t in out.graph.initializer}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    wrote: list[str] = []
    for node in out.graph.node:
        shape = shapes.get(node.input[0]) if node.input and node.input[0] else None
        if shape is None:
            continue
        default = _negative_axis_default(node, opset)
        if default is not None:  # an omitted axis whose default counts from the back (OneHot, Softmax-13: -1)
            node.attribute.append(helper.make_attribute("axis", default))
        for a in node.attribute:
            if a.name == "axis" and a.type == onnx.AttributeProto.INT and a.i < 0:
                a.i += len(shape) + (node.op_type in _AXIS_OF_OUTPUT)
                wrote.append(f"{node.op_type}.axis<0")
            elif a.name == "axes" and a.type == onnx.AttributeProto.INTS and any(v < 0 for v in a.ints):
                rank = len(shape) + (len(a.ints) if node.op_type in _AXES_OF_OUTPUT else 0)
                a.ints[:] = [v + rank if v < 0 else v for v in a.ints]
                wrote.append(f"{node.op_type}.axes<0")
        held = inits.get(node.input[1]) if node.op_type in _AXES_INPUT and len(node.input) > 1 else None
        if held is not None:
            axes = numpy_helper.to_array(held)
            if axes.ndim == 1 and (axes < 0).any():
                rank = len(shape) + (axes.size if node.op_type in _AXES_OF_OUTPUT else 0)
                fixed = numpy_helper.from_array(np.where(axes < 0, axes + rank, axes).astype(axes.dtype), f"{held.name}__spelled")
                out.graph.initializer.append(fixed)
                node.input[1] = fixed.name
                wrote.append(f"{node.op_type}.axes<0")
    return out, sorted(set(wrote))


def _negative_axis_default(node: onnx.NodeProto, opset: int) -> int | None:
    """The schema's default `axis` of a node that leaves it out, when that default is negative; else None."""
    if node.domain not in ("", "ai.onnx") or any(a.name == "axis" for a in node.attribute):
        return None
    try:
        attr = onnx.defs.get_schema(node.op_type, opset, node.domain).attributes.get("axis")
    except onnx.defs.SchemaError:
        return None
    if attr is None or not attr.default_value.HasField("i"):
        return None
    return int(attr.default_value.i) if attr.default_value.i < 0 else None
