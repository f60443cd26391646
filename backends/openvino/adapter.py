"""OpenVINO's CPU plugin reading the ONNX model directly (its ONNX frontend), in float32.

`INFERENCE_PRECISION_HINT: f32` keeps the CPU plugin from running float models in bf16/fp16 where the CPU supports it
(a precision choice, not a defect, that would flood the oracle with drift); one inference thread, as the other engines
run. The model file is read as given: OpenVINO does not rewrite it.

OpenVINO's exceptions nest "Exception from src/...:N:" lines around the one that says what went wrong; the adapter
re-raises with that line as the message, the ONNX node it was validating as `failed_nodes` and the OpenVINO source
line of its failed check as `where` (the unit of a defect, as onnx2tf's handler lines are).
"""
from __future__ import annotations

import re

import numpy as np

_NODE = re.compile(r"While validating ONNX node '<Node\((\w+)\): ([^>]*)>'(?:: Check '.*?' failed at ([^\s:]+):(\d+))?")
_NO_RULE = re.compile(r"No conversion rule found for operations: ([\w\-, ]+)")
_FRAME = re.compile(r"^(Exception from |Check 'false' failed at src/frontends/common_translators|FrontEnd API failed with|Model wasn't fully "
                    r"converted|Summary:|-- |While validating |Shape inference input shapes|\[ GENERAL_ERROR \]|Check '.*' failed at )")


def explained(exc: BaseException) -> BaseException:
    """A RuntimeError saying what OpenVINO's nested exception says, with the node and source line it names."""
    text = str(exc)
    no_rule = _NO_RULE.search(text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if not _FRAME.match(ln)]
    message = (f"No conversion rule found for operations: {no_rule.group(1).strip()}" if no_rule else
               said[-1] if said else next((ln for ln in reversed(lines) if ln.startswith("Check '")), lines[-1] if lines else text))
    out = RuntimeError(message)
    node = _NODE.search(text)
    out.failed_nodes = [node.group(2)] if node else []  # type: ignore[attr-defined]
    out.where = f"{node.group(3)}:{node.group(4)}" if node and node.group(3) else ""  # type: ignore[attr-defined]
    return out


class OpenVINOEngine:

    def __init__(self, device: str = "CPU") -> None:
        import openvino as ov

        self.ov, self.core, self.device = ov, ov.Core(), device

    def version(self) -> str:
        return f"openvino {self.ov.__version__.split('-')[0]}"

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"}
        try:
            self.compiled = self.core.compile_model(model_path, self.device, config)
        except RuntimeError as exc:
            raise explained(exc) from exc
        self.inputs, self.outputs = inputs, outputs
        self.ports = [self.compiled.output(name) for name in outputs]  # a missing output name fails here: a conversion failure

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        try:
            result = self.compiled({name: feeds[name] for name in self.inputs})
        except RuntimeError as exc:
            raise explained(exc) from exc
        return [np.asarray(result[port]) for port in self.ports]
