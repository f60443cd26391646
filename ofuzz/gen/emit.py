"""Emission: builder contents → `onnx.ModelProto`, provenance in metadata_props.

IR version 8 at opset 17 is what every target engine accepts here (onnx 1.23
writes IR 12 by default, which the older onnxruntime pinned by onnx2tf refuses);
a later opset gets the lowest IR version that may carry it (opset 19: IR 9).
"""
from __future__ import annotations

import json
from typing import Any

import onnx
from onnx import helper

from ofuzz.gen.solver.builder import Builder, T

IR_VERSION = 8


def ir_version_for(opset: int) -> int:
    """The lowest IR version onnx's version table pairs with this ai.onnx opset (at least IR_VERSION)."""
    irs = [ir for _, ir, ai_onnx, *_ in helper.VERSION_TABLE if ai_onnx is not None and ai_onnx >= opset]
    return max(IR_VERSION, min(irs, default=IR_VERSION))


def _vi(t: T) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(t.name, t.dtype, list(t.shape))


def emit_model(b: Builder, outputs: list[T], name: str, provenance: dict[str, Any]) -> onnx.ModelProto:
    graph = helper.make_graph(
        [n.proto for n in b.nodes],
        name,
        inputs=[_vi(t) for t in b.inputs],
        outputs=[_vi(t) for t in outputs],
        initializer=b.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", b.opset)],
        ir_version=ir_version_for(b.opset),
        producer_name="ofuzz",
        producer_version=provenance.get("ofuzz_version", ""),
    )
    meta = {
        "ofuzz.id": str(provenance["id"]),
        "ofuzz.seed": str(provenance["seed"]),
        "ofuzz.graph_model": str(provenance["graph_model"]),
        "ofuzz.blocks": json.dumps(provenance["blocks"]),
        "ofuzz.mutations": json.dumps(provenance["mutations"]),
    }
    helper.set_model_props(model, meta)
    return model


def check_model(model: onnx.ModelProto) -> None:
    """Full onnx checker (includes strict shape inference); raises on any defect."""
    onnx.checker.check_model(model, full_check=True)
