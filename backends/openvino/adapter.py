"""OpenVINO's CPU plugin reading the ONNX model directly (its ONNX frontend), in float32.

`INFERENCE_PRECISION_HINT: f32` keeps the CPU plugin from running float models in bf16/fp16 where the CPU supports it
(a precision choice, not a defect, that would flood the oracle with drift); one inference thread, as the other engines
run. The model file is read as given: OpenVINO does not rewrite it.
"""
from __future__ import annotations

import numpy as np


class OpenVINOEngine:

    def __init__(self, device: str = "CPU") -> None:
        import openvino as ov

        self.ov, self.core, self.device = ov, ov.Core(), device

    def version(self) -> str:
        return f"openvino {self.ov.__version__.split('-')[0]}"

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"}
        self.compiled = self.core.compile_model(model_path, self.device, config)
        self.inputs, self.outputs = inputs, outputs
        self.ports = [self.compiled.output(name) for name in outputs]  # a missing output name fails here: a conversion failure

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        result = self.compiled({name: feeds[name] for name in self.inputs})
        return [np.asarray(result[port]) for port in self.ports]
