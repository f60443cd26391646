"""ONNX reference evaluator adapter: the spec, used as the tie-breaker."""
from __future__ import annotations

import warnings

import numpy as np


class ReferenceEngine:

    def __init__(self) -> None:
        import onnx
        from onnx.reference import ReferenceEvaluator

        self.onnx = onnx
        self.Evaluator = ReferenceEvaluator
        self.ev = None

    def version(self) -> str:
        return self.onnx.__version__

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        self.ev = self.Evaluator(model_path)
        self.outputs = outputs or list(self.ev.output_names)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            res = self.ev.run(self.outputs, feeds)
        return dict(zip(self.outputs, res))
