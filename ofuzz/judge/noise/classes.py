"""NoiseClasses: the loaded rules, and the questions judging and triage ask of them."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ofuzz.judge.noise.base import Gap, Undefined, _DEFAULT_DOMAINS
from ofuzz.judge.noise.conditions import _Arg, _NodeView, _same
from ofuzz.judge.noise.rules import Family, NodeRule, UnknownShapeRule, UnsupportedRule, engine_matches

# ---------------------------------------------------------------------------------------------
# The loaded classes


@dataclass(frozen=True)
class NoiseClasses:
    """Every loaded rule, with the matchers the oracle calls."""

    unsupported_rules: tuple[UnsupportedRule, ...] = ()
    undefined_rules: tuple[NodeRule, ...] = ()
    reference_gap_rules: tuple[NodeRule, ...] = ()
    sources: tuple[str, ...] = ()
    family_rules: tuple[Family, ...] = ()
    unknown_shape_rules: tuple[UnknownShapeRule, ...] = ()

    def unknown_shape(self, engine: str) -> UnknownShapeRule | None:
        """The rule (backends/<engine>/triage.yaml, upstream_unknown_shape) that keys this engine's upstream failures on a tensor of
        unknown static shape, if any."""
        return next((r for r in self.unknown_shape_rules if engine_matches(engine, r.engines)), None)

    def family(self, engine: str, op: str, n_inputs: int, failure: str = "", rank: int | None = None,
               attrs: dict[str, Any] | None = None, dtype: str | None = None, version: str | None = None) -> Family | None:
        """The engine's operator family a reduced one-node repro belongs to (see backends/<engine>/triage.yaml); `rank` is its
        first input's rank and `dtype` its type (int32, float32 ...), None when unknown (then a family limited to some
        ranks or types does not hold); `attrs` the node's attributes (name -> value). The first family that holds wins."""
        return next(iter(self.families(engine, op, n_inputs, failure, rank, attrs, dtype, version)), None)

    def families(self, engine: str, op: str, n_inputs: int, failure: str = "", rank: int | None = None,
                 attrs: dict[str, Any] | None = None, dtype: str | None = None, version: str | None = None) -> list[Family]:
        """Every family that holds, in file order: one lowering can have two mistakes (MNN's N-ary Min/Max broadcasts
        wrong and drops NaN), two hypotheses each with its own test."""
        return [f for f in self.family_rules if f.holds(engine, op, n_inputs, failure, rank, attrs, dtype, version)]

    def by_design(self, engine: str, op: str, divergence: str) -> Gap | None:
        """The documented design choice of an engine that a wrong output of this operator shows (onnx2tf's
        QuantizeLinear returns float fake-quantised values): a capability gap, not a defect."""
        rule = next((r for r in self.unsupported_rules if r.divergences and r.op == op and divergence in r.divergences
                     and r.covers(engine)), None)
        return Gap(engine, op, rule.attribute, rule.name) if rule else None

    def unsupported(self, engine: str, message: str, log_tail: str = "", op_hint: str | None = None) -> Gap | None:
        """The capability gap a failure message shows; the most specific rule (attribute, then op) wins."""
        gaps = [g for r in self.unsupported_rules if (g := r.match(engine, message, log_tail, op_hint))]
        return max(gaps, key=lambda g: (g.attribute is not None, g.op is not None), default=None)

    def holds_gap(self, gap: Gap, view: _NodeView) -> bool:
        """Does this node hold the construct `gap` names (so a campaign spares the engine the model)?

        By the rule's `skip_when` when it has one; else every node of an operator the engine lacks, and for an attribute
        only a value other than the spec's default. Mere presence was too broad: onnx2tf's refusal of Conv
        auto_pad=SAME_LOWER kept every Conv with an explicit auto_pad from TensorFlow, and TF's rank-6 MirrorPad limit
        every Pad with a mode: TensorFlow ran 4,324 of 13,888 models in the seed-76 campaign."""
        if gap.op != view.node.op_type:
            return False
        rule = next((r for r in self.unsupported_rules if r.name == gap.rule), None)
        if rule is not None and rule.skip_when is not None:
            return all(c(view) is True for c in rule.skip_when)
        if not gap.attribute:
            return True
        if not view.has_attr(gap.attribute):
            return False
        default = view.default(gap.attribute)
        return default is None or not _same(view.attr(gap.attribute), default)

    def gap_in(self, model: onnx.ModelProto, gaps: Iterable[Gap]) -> Gap | None:
        """The first of `gaps` some node of the model holds (shape inference runs only for a model that has their ops)."""
        gaps = [g for g in gaps if g.op]
        nodes = [n for n in _all_nodes(model.graph) if n.domain in _DEFAULT_DOMAINS and any(g.op == n.op_type for g in gaps)]
        if not nodes:
            return None
        opset = next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), onnx.defs.onnx_opset_version())
        facts = _ModelFacts.of(model, {})
        for node in nodes:
            view = _NodeView(node, tuple(facts.arg(name) for name in node.input), opset)
            hit = next((g for g in gaps if self.holds_gap(g, view)), None)
            if hit is not None:
                return hit
        return None

    def undefined(self, node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int = 17,
                  divergence: str | None = None) -> Undefined | None:
        """The spec-undefined case this node hits with these input values (unknown values: not undefined);
        `divergence` is how the blamed engine differed there (compare.py's category), for rules that ask."""
        view = _view(node, inputs, opset, divergence)
        rule = next((r for r in self.undefined_rules if r.evaluate(view) is True), None)
        return Undefined(rule.name, node.op_type, rule.text) if rule else None

    def reference_gap(self, node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int = 17) -> str | None:
        """Why the reference evaluator cannot be trusted on this node (an unknown value counts as a hit)."""
        view = _view(node, inputs, opset)
        return next((r.text for r in self.reference_gap_rules if r.evaluate(view) is not False), None)

    def reference_gaps_in(self, model: onnx.ModelProto, values: dict[str, np.ndarray] | None = None) -> list[str]:
        """Every "<node>: <reason>" for the model's nodes; values not given are taken from initializers
        and Constant nodes, types and ranks from shape inference, and anything else counts as a possible hit."""
        opset = next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), onnx.defs.onnx_opset_version())
        facts = _ModelFacts.of(model, values or {})
        out: list[str] = []
        for i, node in enumerate(_all_nodes(model.graph)):
            view = _NodeView(node, tuple(facts.arg(name) for name in node.input), opset)
            for r in self.reference_gap_rules:
                if r.evaluate(view) is not False:
                    line = f"{node.name or f'{node.op_type}#{i}'}: {r.text}"
                    if line not in out:
                        out.append(line)
        return out


def _view(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int, divergence: str | None = None) -> _NodeView:
    args = tuple(_Arg.of(inputs[i] if i < len(inputs) else None, present=bool(name)) for i, name in enumerate(node.input))
    return _NodeView(node, args, opset, divergence)


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Nodes of a graph and of its subgraphs (If/Loop/Scan bodies run on the reference too)."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                yield from _all_nodes(g)


@dataclass
class _ModelFacts:
    """Known values (given, initializers, Constant nodes) and inferred types/shapes by tensor name."""

    values: dict[str, np.ndarray]
    types: dict[str, tuple[int, tuple[int | None, ...] | None]]

    @staticmethod
    def of(model: onnx.ModelProto, given: dict[str, np.ndarray]) -> _ModelFacts:
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # noqa: BLE001 - a model shape inference rejects is still judged, with less known
            inferred = model
        facts = _ModelFacts({}, {})
        facts._collect(inferred.graph)
        facts.values.update({k: np.asarray(v) for k, v in given.items()})
        return facts

    def _collect(self, g: onnx.GraphProto) -> None:
        for vi in [*g.input, *g.value_info, *g.output]:
            tt = vi.type.tensor_type
            if tt.elem_type:
                dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim) if tt.HasField("shape") else None
                self.types[vi.name] = (tt.elem_type, dims)
        for init in g.initializer:
            self.values[init.name] = numpy_helper.to_array(init)
        for node in g.node:
            if node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS and node.output:
                value = _constant_value(node)
                if value is not None:
                    self.values[node.output[0]] = value
            for a in node.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    self._collect(sub)

    def arg(self, name: str) -> _Arg:
        if not name:
            return _Arg(False)
        elem_type, shape = self.types.get(name, (None, None))
        return _Arg.of(self.values.get(name), True, elem_type, shape)


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.name == "value":
            return numpy_helper.to_array(v)
        if a.name in ("value_float", "value_floats"):
            return np.asarray(v, dtype=np.float32)
        if a.name in ("value_int", "value_ints"):
            return np.asarray(v, dtype=np.int64)
    return None


