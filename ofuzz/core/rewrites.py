"""Named rewrites of a reduced repro that take one suspected trigger away: the tests of the engines' family hypotheses.

A family (backends/<engine>/triage.yaml) says "these operators share one code path, and this is its defect"; its `test`
names one of these rewrites. Applied to a member's reduced repro, the rewrite removes exactly what the hypothesis blames
(dilations set to 1, negative indices made non-negative, an N-ary node chained as binary ones ...): when the engine is
then right, the finding is that defect and joins the family; when it is still wrong, it is some other defect and is keyed
on its own. Each rewrite returns the new (model, feeds), or None when it does not apply (nothing to take away).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx
from onnx import defs, helper, numpy_helper

from ofuzz.core.onnx_guard import static_shapes
from ofuzz.core.prose_defaults import auto_pad_written_out

Feeds = dict[str, np.ndarray]
Rewrite = Callable[[onnx.ModelProto, Feeds, frozenset[str], Any], "tuple[onnx.ModelProto, Feeds] | None"]
REWRITES: dict[str, Rewrite] = {}


def rewrite(name: str) -> Callable[[Rewrite], Rewrite]:
    def register(fn: Rewrite) -> Rewrite:
        REWRITES[name] = fn
        return fn
    return register


def apply(name: str, model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any = None) -> tuple[onnx.ModelProto, Feeds] | None:
    """Rewrite `name` applied to the nodes of `ops`; None when it changes nothing."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    return REWRITES[name](m, {k: np.array(v) for k, v in feeds.items()}, ops, args)


def _nodes(model: onnx.ModelProto, ops: frozenset[str]) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type in ops]


@rewrite("set_attributes")
def set_attributes(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: dict[str, Any]) -> tuple[onnx.ModelProto, Feeds] | None:
    """Each named attribute the node gives set to the value (every element of a list attribute): `{dilations: 1}`."""
    changed = False
    for node in _nodes(model, ops):
        for a in node.attribute:
            if a.name in args:
                old = helper.get_attribute_value(a)
                new = [args[a.name]] * len(old) if isinstance(old, list) else args[a.name]
                if new != old:
                    a.CopyFrom(helper.make_attribute(a.name, new))
                    changed = True
    return (model, feeds) if changed else None


@rewrite("drop_attributes")
def drop_attributes(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: list[str]) -> tuple[onnx.ModelProto, Feeds] | None:
    """The named attributes left out (their defaults apply): `[select_last_index]`."""
    changed = False
    for node in _nodes(model, ops):
        keep = [a for a in node.attribute if a.name not in args]
        if len(keep) < len(node.attribute):
            del node.attribute[:]
            node.attribute.extend(keep)
            changed = True
    return (model, feeds) if changed else None


@rewrite("drop_inputs")
def drop_inputs(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: list[int]) -> tuple[onnx.ModelProto, Feeds] | None:
    """The node's inputs at these positions left out (optional trailing inputs: a Reduce's `axes`)."""
    changed = False
    for node in _nodes(model, ops):
        names = list(node.input)
        for i in sorted(args, reverse=True):
            if i < len(names) and names[i]:
                names[i] = ""
                changed = True
        while names and not names[-1]:
            names.pop()
        del node.input[:]
        node.input.extend(names)
    return (_prune_inputs(model, feeds) if changed else None)


@rewrite("binary_chain")
def binary_chain(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any) -> tuple[onnx.ModelProto, Feeds] | None:
    """An N-ary Sum/Min/Max/Mean (3+ inputs) as a chain of two-input nodes (Mean: a Sum chain times 1/N): the same
    function through the engine's binary path."""
    out: list[onnx.NodeProto] = []
    changed = False
    for node in model.graph.node:
        if node.op_type not in ops or node.op_type not in ("Sum", "Min", "Max", "Mean") or len(node.input) < 3:
            out.append(node)
            continue
        changed = True
        op = "Sum" if node.op_type == "Mean" else node.op_type
        acc = node.input[0]
        for k, nxt in enumerate(node.input[1:]):
            last = k == len(node.input) - 2 and node.op_type != "Mean"
            name = node.output[0] if last else f"{node.output[0]}__chain{k}"
            out.append(helper.make_node(op, [acc, nxt], [name], name=f"{node.name}__chain{k}"))
            acc = name
        if node.op_type == "Mean":
            scale = f"{node.output[0]}__inv_n"
            model.graph.initializer.append(numpy_helper.from_array(np.array(1.0 / len(node.input), dtype=_dtype_of(model, feeds, node.input[0])), scale))
            out.append(helper.make_node("Mul", [acc, scale], [node.output[0]], name=f"{node.name}__mean"))
    if not changed:
        return None
    del model.graph.node[:]
    model.graph.node.extend(out)
    return model, feeds


@rewrite("broadcast_inputs")
def broadcast_inputs(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any) -> tuple[onnx.ModelProto, Feeds] | None:
    """The operands of an elementwise node broadcast to its output shape beforehand (the graph inputs and initializers
    it reads, written out at full shape): the same values with no broadcasting left for the engine to do. None when
    the operands already share one shape, or one of them is computed in the graph (nothing to write out)."""
    inits = {t.name: t for t in model.graph.initializer}
    declared = {vi.name: vi for vi in model.graph.input}
    changed = False
    for node in _nodes(model, ops):
        names = [i for i in node.input if i]
        if not names or any(i not in feeds and i not in inits for i in names):
            continue
        values = {i: feeds[i] if i in feeds else numpy_helper.to_array(inits[i]) for i in names}
        try:
            target = np.broadcast_shapes(*(v.shape for v in values.values()))
        except ValueError:
            continue
        for name, v in values.items():
            if v.shape == target:
                continue
            full = np.ascontiguousarray(np.broadcast_to(v, target))
            changed = True
            if name in feeds:
                feeds[name] = full
                if name in declared:
                    dims = declared[name].type.tensor_type.shape
                    del dims.dim[:]
                    for d in target:
                        dims.dim.add().dim_value = d
            else:
                inits[name].CopyFrom(numpy_helper.from_array(full, name))
    return (model, feeds) if changed else None


def _dtype_of(model: onnx.ModelProto, feeds: Feeds, name: str) -> np.dtype:
    if name in feeds:
        return feeds[name].dtype
    init = next((t for t in model.graph.initializer if t.name == name), None)
    return numpy_helper.to_array(init).dtype if init is not None else np.dtype(np.float32)


def _map_inputs(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], positions: list[int] | None,
                fn: Callable[[np.ndarray], np.ndarray]) -> tuple[onnx.ModelProto, Feeds] | None:
    """`fn` applied to the values (feeds or initializers) that the nodes' inputs at `positions` (None: all) read."""
    names = {n.input[i] for n in _nodes(model, ops) for i in range(len(n.input)) if n.input[i] and (positions is None or i in positions)}
    changed = False
    for name in names:
        if name in feeds:
            new = fn(feeds[name])
            changed |= not np.array_equal(new, feeds[name], equal_nan=new.dtype.kind == "f")
            feeds[name] = new
        for t in model.graph.initializer:
            if t.name == name:
                old = numpy_helper.to_array(t)
                new = fn(old)
                changed |= not np.array_equal(new, old, equal_nan=new.dtype.kind == "f")
                t.CopyFrom(numpy_helper.from_array(new, name))
    return (model, feeds) if changed else None


@rewrite("clamp_inputs")
def clamp_inputs(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: dict[str, Any]) -> tuple[onnx.ModelProto, Feeds] | None:
    """The values the node reads clamped to [min, max] (NaN to 0, infinities to the bounds): `{min: -80, max: 80}`, or
    only some inputs, `{min: 0, inputs: [1]}` (negative indices made 0)."""
    lo, hi = args.get("min"), args.get("max")

    def clamp(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind == "f":
            x = np.nan_to_num(x, nan=0.0, posinf=hi if hi is not None else np.finfo(x.dtype).max,
                              neginf=lo if lo is not None else np.finfo(x.dtype).min)
        elif x.dtype.kind not in "iu":
            return x
        return np.clip(x, lo, hi).astype(x.dtype) if (lo is not None or hi is not None) else x
    return _map_inputs(model, feeds, ops, args.get("inputs"), clamp)


@rewrite("ordinary_inputs")
def ordinary_inputs(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any) -> tuple[onnx.ModelProto, Feeds] | None:
    """The float values the node reads made non-negative and not NaN (|x|, -0 as +0, NaN as 0): where comparing the raw
    bit patterns as integers gives the float answer."""
    return _map_inputs(model, feeds, ops, None, lambda x: (np.nan_to_num(np.abs(x), nan=0.0, posinf=np.inf) + 0.0).astype(x.dtype)
                       if x.dtype.kind == "f" else x)


def _spatial_input_shape(model: onnx.ModelProto, feeds: Feeds, name: str) -> list[int] | None:
    if name in feeds:
        return list(np.shape(feeds[name]))[2:]
    vi = next((v for v in model.graph.input if v.name == name), None)
    dims = [d.dim_value for d in vi.type.tensor_type.shape.dim] if vi is not None else []
    return dims[2:] if dims and all(dims) else None


def _explicit_pads(model: onnx.ModelProto, feeds: Feeds, node: onnx.NodeProto) -> list[int] | None:
    """The node's pads as [begins..., ends...], auto_pad SAME_* worked out from its input's shape (None: unknown)."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    auto = attrs.get("auto_pad", b"NOTSET")
    kernel = list(attrs.get("kernel_shape", []))
    if auto not in (b"SAME_UPPER", b"SAME_LOWER"):
        return list(attrs.get("pads", [0] * 2 * len(kernel)))
    spatial = _spatial_input_shape(model, feeds, node.input[0])
    if spatial is None or len(spatial) != len(kernel):
        return None
    strides = list(attrs.get("strides", [1] * len(kernel)))
    dil = list(attrs.get("dilations", [1] * len(kernel)))
    total = [max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0) for n, s, k, d in zip(spatial, strides, kernel, dil)]
    small, big = [t // 2 for t in total], [t - t // 2 for t in total]
    return (small + big) if auto == b"SAME_UPPER" else (big + small)


def _set_pads(node: onnx.NodeProto, pads: list[int]) -> None:
    keep = [a for a in node.attribute if a.name not in ("pads", "auto_pad")]
    del node.attribute[:]
    node.attribute.extend([*keep, helper.make_attribute("pads", pads)])


@rewrite("auto_pad_spelled_out")
def auto_pad_spelled_out(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any) -> tuple[onnx.ModelProto, Feeds] | None:
    """auto_pad=SAME_UPPER/SAME_LOWER of the nodes written as the explicit pads it stands for (the same function,
    prose_defaults.auto_pad_written_out): a defect of the shorthand goes, one of the padding itself stays."""
    shapes = static_shapes(model, feeds)
    if shapes is None or not _nodes(model, ops):
        return None
    fixed, wrote = auto_pad_written_out(model, shapes)
    return (fixed, feeds) if any(w.split(".", 1)[0] in ops for w in wrote) else None


@rewrite("symmetric_pads")
def symmetric_pads(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any) -> tuple[onnx.ModelProto, Feeds] | None:
    """Each spatial axis padded the same at both ends (the larger of the two; SAME_* spelled out first): a defect of
    asymmetric padding goes, and the model stays valid (padding is only added)."""
    changed = False
    for node in _nodes(model, ops):
        pads = _explicit_pads(model, feeds, node)
        if pads is None:
            return None
        half = len(pads) // 2
        sym = [max(pads[i], pads[i + half]) for i in range(half)] * 2
        if sym != pads or any(a.name == "auto_pad" for a in node.attribute):
            _set_pads(node, sym)
            changed = True
    return (model, feeds) if changed else None


@rewrite("uniform_pads")
def uniform_pads(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any) -> tuple[onnx.ModelProto, Feeds] | None:
    """Every pad of the node the same: the order the pads are read in no longer matters. The largest pad that every
    axis's kernel allows (a pad must stay below its kernel): pads [0,1,2,0] on a [3,2] kernel become all 1, where their
    largest, 2, is no valid pool on the 2-wide axis (the reference's pads-order defect raised there and went untested).
    None when no pad is left (a kernel of 1, or no padding): taking the padding away tells nothing of its order."""
    changed = False
    for node in _nodes(model, ops):
        pads = _explicit_pads(model, feeds, node)
        kernel = next((list(helper.get_attribute_value(a)) for a in node.attribute if a.name == "kernel_shape"), [])
        if pads is None or not pads:
            return None
        top = min([max(pads), *(k - 1 for k in kernel)])
        if top <= 0:
            return None
        if pads != [top] * len(pads):
            _set_pads(node, [top] * len(pads))
            changed = True
    return (model, feeds) if changed else None


@rewrite("zero_or_one_inputs")
def zero_or_one_inputs(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any) -> tuple[onnx.ModelProto, Feeds] | None:
    """The float values the node reads as 1 where they are not zero (NaN too: the spec casts it to True) and 0 where
    they are: a cast to bool done as a cast to an integer gives the right answer on these and on nothing else (0.5
    truncates to False, 5801.9 stays 5801; rounding away from zero, this test's first form, only cured the first)."""
    return _map_inputs(model, feeds, ops, None, lambda x: (x != 0).astype(x.dtype) if x.dtype.kind == "f" else x)


@rewrite("inputs_as_float")
def inputs_as_float(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: Any) -> tuple[onnx.ModelProto, Feeds] | None:
    """Integer graph inputs and initializers the node reads as float32, and the outputs whose type follows the input's
    (the schema's type variable) declared float32 too: the same values through the engine's float path."""
    nodes = _nodes(model, ops)
    names = {i for n in nodes for i in n.input if i}
    changed = False
    for vi in model.graph.input:
        if vi.name in names and vi.name in feeds and feeds[vi.name].dtype.kind in "iu":
            vi.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
            feeds[vi.name] = feeds[vi.name].astype(np.float32)
            changed = True
    for t in model.graph.initializer:
        if t.name in names and numpy_helper.to_array(t).dtype.kind in "iu" and _follows_input(model, t.name, nodes):
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
            changed = True
    if not changed:
        return None
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    outs = {o.name: o for o in model.graph.output}
    for n in nodes:
        schema = defs.get_schema(n.op_type, opset)
        first = schema.inputs[0].type_str if schema.inputs else ""
        for k, o in enumerate(n.output):
            if o in outs and k < len(schema.outputs) and schema.outputs[k].type_str == first:
                outs[o].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    return model, feeds


@rewrite("identity_between")
def identity_between(model: onnx.ModelProto, feeds: Feeds, ops: frozenset[str], args: dict[str, list[int]]) -> tuple[onnx.ModelProto, Feeds] | None:
    """An Identity on every edge from the nodes at indices `args["from"]` to those at `args["to"]`: the same values
    flow, but the producer no longer feeds its consumer directly. A converter that rewrites the pair as a pattern (folds
    two Adds' constants, skips a Reshape whose only consumers are Squeezes) then takes its plain path."""
    src, dst = set(args["from"]), set(args["to"])
    made = {o for i, n in enumerate(model.graph.node) if i in src for o in n.output if o}
    taken = ({o for n in model.graph.node for o in [*n.output, n.name]} | {i.name for i in model.graph.input}
             | {t.name for t in model.graph.initializer})
    nodes: list[onnx.NodeProto] = []
    for i, node in enumerate(model.graph.node):
        if i in dst:
            for k, name in enumerate(node.input):
                if name in made:
                    fresh = _fresh(f"{name}_apart", taken)
                    nodes.append(helper.make_node("Identity", [name], [fresh], name=_fresh(f"apart_{len(nodes)}", taken)))
                    node.input[k] = fresh
        nodes.append(node)
    if len(nodes) == len(model.graph.node):
        return None
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model, feeds


def _fresh(name: str, taken: set[str]) -> str:
    """`name`, or it with a number, not yet used in the graph (and now taken)."""
    out, k = name, 0
    while out in taken:
        k += 1
        out = f"{name}{k}"
    taken.add(out)
    return out


def _follows_input(model: onnx.ModelProto, name: str, nodes: list[onnx.NodeProto]) -> bool:
    """Is `name` a data input (not an index or shape input) of the nodes: read at a position whose type variable is
    the first input's?"""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    for n in nodes:
        schema = defs.get_schema(n.op_type, opset)
        formal = list(schema.inputs)
        for i, inp in enumerate(n.input):  # a variadic last input (Einsum's) types every position after it
            if inp == name and formal and formal[min(i, len(formal) - 1)].type_str == formal[0].type_str:
                return True
    return False


def _prune_inputs(model: onnx.ModelProto, feeds: Feeds) -> tuple[onnx.ModelProto, Feeds]:
    """Graph inputs and initializers no node reads any more left out."""
    used = {i for n in model.graph.node for i in n.input if i}
    keep_in = [vi for vi in model.graph.input if vi.name in used]
    keep_init = [t for t in model.graph.initializer if t.name in used]
    del model.graph.input[:]
    model.graph.input.extend(keep_in)
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep_init)
    return model, {k: v for k, v in feeds.items() if k in used}
