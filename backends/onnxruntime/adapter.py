"""onnxruntime adapter (CPU EP, one thread; optimisations on or off)."""
from __future__ import annotations

import numpy as np


class OnnxRuntimeEngine:

    def __init__(self, optimize: bool = True, threads: int = 1) -> None:
        import onnxruntime as ort

        self.ort = ort
        ort.set_default_logger_severity(3)
        self.optimize = optimize
        self.threads = threads
        self.sess = None

    def version(self) -> str:
        return self.ort.__version__

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        so = self.ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = (
            self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL if self.optimize else self.ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        )
        self.sess = self.ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
        self.outputs = outputs or [o.name for o in self.sess.get_outputs()]

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        res = self.sess.run(self.outputs, feeds)
        return dict(zip(self.outputs, res))
