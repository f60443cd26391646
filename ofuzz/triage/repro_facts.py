"""The facts about a reduced repro that the clustering asks, recorded by the triage while the model is in memory.

Why a record: the clustering (`cluster.py`) runs in `ofuzz bugs`, long after the triage, over hundreds of folders. It
used to load each repro's model.onnx again to ask what the triage had known (the one node's operator, rank, type and
attributes, for the engine families; whether the culprits of an upstream failure hand their consumer tensors of
unknown shape, for the unknown-shape rules). The triage now writes the answers into
finding.json (`facts`); a folder triaged before that gets them computed once from its model.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import onnx

from ofuzz.triage.witness import hands_on_unknown_shape, peeled_nodes


@dataclass(frozen=True)
class OneNode:
    """A one-node repro as an engine family matches it (backends/<engine>/triage.yaml)."""
    op: str
    inputs: int  # inputs given (an empty name is not given)
    rank: int | None  # of the first input (None: unknown)
    dtype: str | None  # of the first input, as numpy names it (None: unknown)
    attrs: dict[str, Any] = field(default_factory=dict)  # name -> value (strings decoded; tensors and graphs left out)


@dataclass(frozen=True)
class ReproFacts:
    one_node: OneNode | None = None
    unknown_shape_handed: bool = False  # the culprits hand the peeled witnesses only tensors of unknown static shape
    # in a repro of several nodes, the one node of the operator a shown trigger names ("Conv.auto_pad spelled out"): the
    # engine families are asked of it (MNN's Conv SAME_LOWER repro kept an Add and a second output)
    trigger_node: OneNode | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "ReproFacts":
        one, trig = d.get("one_node"), d.get("trigger_node")
        return ReproFacts(OneNode(**one) if one else None, bool(d.get("unknown_shape_handed")), OneNode(**trig) if trig else None)


def facts_of(model: onnx.ModelProto, witnesses: list[str] | None = None, trigger_ops: set[str] | None = None) -> ReproFacts:
    """The facts of a reduced repro (`witnesses`: the operators the triage peeled as running right alone; `trigger_ops`:
    the operators a shown trigger names)."""
    one = _node_facts(model, 0) if len(model.graph.node) == 1 else None
    handed = bool(witnesses) and hands_on_unknown_shape(model, peeled_nodes(model, list(witnesses or [])))
    named = [i for i, n in enumerate(model.graph.node) if n.op_type in (trigger_ops or set())]
    return ReproFacts(one, handed, _node_facts(model, named[0]) if one is None and len(named) == 1 else None)


def trigger_ops(attrs: tuple[str, ...] | list[str]) -> set[str]:
    """The operators a shown trigger's marks name: "Conv" of "Conv.auto_pad spelled out" ("strides omitted" names none)."""
    return {a.split(" ", 1)[0].split(".", 1)[0] for a in attrs if "." in a.split(" ", 1)[0]}


def facts_of_folder(folder: Path, info: dict[str, Any]) -> ReproFacts | None:
    """A triaged folder's facts: recorded, or (a folder triaged before they were) computed once from its model."""
    if "facts" in info:
        return ReproFacts.from_json(info["facts"])
    path = folder / "model.onnx"
    return facts_of(onnx.load(str(path)), info.get("witnesses") or []) if path.is_file() else None


def _node_facts(model: onnx.ModelProto, index: int) -> OneNode:
    node = model.graph.node[index]
    attrs = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.TENSOR, onnx.AttributeProto.GRAPH, onnx.AttributeProto.TENSORS, onnx.AttributeProto.GRAPHS,
                      onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS, onnx.AttributeProto.TYPE_PROTO,
                      onnx.AttributeProto.TYPE_PROTOS):
            continue
        value = onnx.helper.get_attribute_value(a)
        attrs[a.name] = value.decode(errors="replace") if isinstance(value, bytes) else \
            [v.decode(errors="replace") if isinstance(v, bytes) else v for v in value] if isinstance(value, list) else value
    return OneNode(node.op_type, sum(1 for i in node.input if i), _first_input_rank(model, node), _first_input_type(model, node), attrs)


def _first_input(model: onnx.ModelProto, node: onnx.NodeProto) -> onnx.TensorProto | onnx.ValueInfoProto | None:
    """The initializer or graph input that feeds the node's first input (None: neither, e.g. another node's output)."""
    name = node.input[0] if node.input else ""
    return next((t for t in model.graph.initializer if t.name == name), None) or \
        next((v for v in model.graph.input if v.name == name), None)


def _first_input_rank(model: onnx.ModelProto, node: onnx.NodeProto) -> int | None:
    src = _first_input(model, node)
    if isinstance(src, onnx.TensorProto):
        return len(src.dims)
    if src is not None and src.type.tensor_type.HasField("shape"):
        return len(src.type.tensor_type.shape.dim)
    return None


def _first_input_type(model: onnx.ModelProto, node: onnx.NodeProto) -> str | None:
    src = _first_input(model, node)
    code = src.data_type if isinstance(src, onnx.TensorProto) else (src.type.tensor_type.elem_type if src is not None else 0)
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(code).name if code else None
    except (KeyError, ValueError, TypeError):
        return None
