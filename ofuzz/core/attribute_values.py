"""The values the ONNX spec allows for attributes that name one of a few behaviours (a string mode, a 0/1 flag).

The triage asks of a one-node wrong output whether the engine reads such an attribute at all (`triggers.
ignored_attribute_trigger`): set to each allowed value in turn, an engine that ignores it gives the same output while
the expected one changes. The lists are the spec's own (operator docs, opsets 13-24); an attribute not listed here is
never varied. Attributes that change the output's shape with the value (keepdims, transA) are left out: a wrong shape
would be "the same output" by nothing but accident. Per-axis `dilations` are the exception: their one alternative is
their prose default (1 along each axis), and an engine whose output with the given dilations is bit for bit its output
without them computes an undilated window.
"""
from __future__ import annotations

import functools
from typing import Any

import onnx
from onnx import helper

FLAG = (0, 1)

ALLOWED: dict[tuple[str, str], tuple[str | int, ...]] = {
    ("Resize", "mode"): ("nearest", "linear", "cubic"),
    ("Resize", "coordinate_transformation_mode"): ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                                   "asymmetric"),  # tf_crop_and_resize needs a roi input: not a plain swap
    ("Resize", "nearest_mode"): ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"),
    ("Resize", "exclude_outside"): FLAG,
    ("Upsample", "mode"): ("nearest", "linear"),
    ("GridSample", "mode"): ("linear", "nearest", "cubic"),
    ("GridSample", "padding_mode"): ("zeros", "border", "reflection"),
    ("GridSample", "align_corners"): FLAG,
    ("AffineGrid", "align_corners"): FLAG,
    ("RoiAlign", "mode"): ("avg", "max"),
    ("RoiAlign", "coordinate_transformation_mode"): ("half_pixel", "output_half_pixel"),
    ("Pad", "mode"): ("constant", "reflect", "edge", "wrap"),
    ("DepthToSpace", "mode"): ("DCR", "CRD"),
    ("Gelu", "approximate"): ("none", "tanh"),
    ("AveragePool", "count_include_pad"): FLAG,
    ("MaxPool", "ceil_mode"): FLAG,  # changes the shape only on some inputs: the comparison is of whole outputs
    ("AveragePool", "ceil_mode"): FLAG,
    ("ArgMax", "select_last_index"): FLAG,
    ("ArgMin", "select_last_index"): FLAG,
    ("CumSum", "exclusive"): FLAG,
    ("CumSum", "reverse"): FLAG,
    ("Trilu", "upper"): FLAG,
    ("Mod", "fmod"): FLAG,
    ("IsInf", "detect_negative"): FLAG,
    ("IsInf", "detect_positive"): FLAG,
    ("TopK", "largest"): FLAG,
    ("NonMaxSuppression", "center_point_box"): FLAG,
    # `bidirectional` doubles num_directions (the shape of W and of the outputs): only the two one-way values swap
    ("RNN", "direction"): ("forward", "reverse"),
    ("GRU", "direction"): ("forward", "reverse"),
    ("LSTM", "direction"): ("forward", "reverse"),
    ("GRU", "linear_before_reset"): FLAG,
    ("LSTM", "input_forget"): FLAG,
    ("ScatterElements", "reduction"): ("none", "add", "mul", "max", "min"),
    ("ScatterND", "reduction"): ("none", "add", "mul", "max", "min"),
    ("DFT", "inverse"): FLAG,
    ("LpNormalization", "p"): (1, 2),
}

# per-axis attributes whose prose default is 1 along each spatial axis ("If not present, the dilation defaults is 1
# along each spatial axis"): their one other value is that default, given as ONES (a list as long as the node's own).
# An engine that computes a dilated window as an undilated one ignores the attribute: onnx2tf's AveragePool does in both
# of its modes, and came back as a wrong shape in one mode and as its consumer failing in the other (hand triage 31)
PER_AXIS_ONES = frozenset({("AveragePool", "dilations"), ("MaxPool", "dilations"), ("LpPool", "dilations"), ("Conv", "dilations"),
                           ("ConvTranspose", "dilations")})
ONES = "ones"

# values the spec added later than their attribute
SINCE = {("Resize", "half_pixel_symmetric"): 19, ("Pad", "wrap"): 19, ("ScatterElements", "max"): 18, ("ScatterElements", "min"): 18,
         ("ScatterND", "max"): 18, ("ScatterND", "min"): 18}


def current_value(node: onnx.NodeProto, attr: str, opset: int) -> str | int | None:
    """The attribute's value on the node: as given, else its schema default; None when neither (no default)."""
    given = next((a for a in node.attribute if a.name == attr), None)
    v = helper.get_attribute_value(given) if given is not None else schema_default(node.op_type, attr, opset, node.domain)
    return v.decode() if isinstance(v, bytes) else v


@functools.cache
def schema_default(op_type: str, attr: str, opset: int, domain: str = "") -> Any:
    """The schema's default of the attribute at this opset (the attribute's value as onnx.helper reads it), None if it
    has none or the operator is unknown."""
    try:
        spec = onnx.defs.get_schema(op_type, opset, domain).attributes.get(attr)
    except onnx.defs.SchemaError:
        return None
    if spec is None or spec.default_value is None or spec.default_value.type == onnx.AttributeProto.UNDEFINED:
        return None
    return helper.get_attribute_value(spec.default_value)


def with_value(model: onnx.ModelProto, op: str, attr: str, value: str | int) -> onnx.ModelProto:
    """A copy with `attr` of every `op` node set to `value` (ONES: 1 along each of that node's own axes)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for node in out.graph.node:
        if node.op_type != op:
            continue
        keep = [a for a in node.attribute if a.name != attr]
        given = next((a for a in node.attribute if a.name == attr), None)
        if value == ONES and (op, attr) in PER_AXIS_ONES:
            if given is None:
                continue  # absent: already at its default
            written: Any = [1] * len(helper.get_attribute_value(given))
        else:
            written = value
        del node.attribute[:]
        node.attribute.extend([*keep, helper.make_attribute(attr, written)])
    return out


def varied_attributes(node: onnx.NodeProto, opset: int) -> list[tuple[str, str | int, tuple[str | int, ...]]]:
    """The node's attributes the spec gives a few values for: (name, its value here, the other allowed values)."""
    out = []
    for (op, attr), allowed in ALLOWED.items():
        if op != node.op_type or node.domain not in ("", "ai.onnx"):
            continue
        now = current_value(node, attr, opset)
        if now is None or now not in allowed:
            continue
        out.append((attr, now, tuple(v for v in allowed if v != now and SINCE.get((op, v), 0) <= opset)))
    for op, attr in sorted(PER_AXIS_ONES):
        given = next((a for a in node.attribute if a.name == attr), None) if op == node.op_type and node.domain in ("", "ai.onnx") else None
        per_axis = list(helper.get_attribute_value(given)) if given is not None else []
        if any(v != 1 for v in per_axis):
            out.append((attr, per_axis, (ONES,)))  # type: ignore[arg-type]
    return out
