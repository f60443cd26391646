"""onnx2tf 2.x with its `flatbuffer_direct` backend (its default since 2.4.0) and the LiteRT interpreter.

onnx2tf's users have moved to this path: it writes the TFLite flatbuffer itself, without TensorFlow, and its maintainer
asks for ONNX models that break it. Needs Python >= 3.12 (engine.yaml says so). Traps handled here: `convert()`
rewrites the file it is given (a private copy is converted); when its lowering fails it may silently fall back to
custom-op lowering and write a .tflite with `ONNX_*` custom ops that LiteRT cannot prepare: the interpreter is built in
`prepare`, so that is a conversion failure (MCF), not a run-time one. Two layout modes as for onnx2tf 1.x: the
inputs kept in ONNX layout (`keep_shape_absolutely_input_names`) or onnx2tf's default NCHW→NHWC, which its users run;
outputs that come back channel-last are transposed back where the shape shows it unambiguously (onnx2tf_io).
"""
from __future__ import annotations

import glob
import os
import shutil

import numpy as np
from onnx2tf_io import channel_last_inputs, litert_outputs, name_failed_nodes, restore_layout, set_litert_input, to_channel_last


class FlatbufferEngine:

    def __init__(self, input_layout: str = "absolute") -> None:
        os.environ.setdefault("TQDM_DISABLE", "1")  # its progress bars would flood the worker's log
        import onnx2tf
        from ai_edge_litert.interpreter import Interpreter

        self.onnx2tf, self.Interpreter, self.input_layout = onnx2tf, Interpreter, input_layout

    def version(self) -> str:
        import ai_edge_litert

        # the converter's version last: families and version differences read the last version number in the string
        return f"ai-edge-litert {getattr(ai_edge_litert, '__version__', '?')}, onnx2tf {self.onnx2tf.__version__} (flatbuffer_direct)"

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        import onnx

        model = onnx.load(model_path)
        self.inputs, self.outputs = inputs, outputs
        self.onnx_shapes = [tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in model.graph.output]
        self.onnx_inputs = {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim) for i in model.graph.input}
        layout = {"keep_shape_absolutely_input_names": list(inputs)} if inputs and self.input_layout == "absolute" else {}
        private, folder = os.path.join(workdir, "model.onnx"), os.path.join(workdir, "tflite")
        shutil.copyfile(model_path, private)
        shutil.rmtree(folder, ignore_errors=True)
        try:
            self.onnx2tf.convert(input_onnx_file_path=private, output_folder_path=folder, tflite_backend="flatbuffer_direct",
                                 not_use_onnxsim=True, non_verbose=True, verbosity="error", **layout)
        except BaseException as exc:
            name_failed_nodes(exc, exc)
            raise
        found = sorted(glob.glob(os.path.join(folder, "*_float32.tflite")))
        if not found:
            raise RuntimeError("onnx2tf wrote no *_float32.tflite")
        self.interp = self.Interpreter(model_path=found[0])  # custom ONNX_* ops of a fallback lowering fail here
        self.interp.allocate_tensors()
        details = self.interp.get_input_details()
        self.input_index = {n: self._detail_for(n, i, details) for i, n in enumerate(inputs)}
        got = [tuple(int(v) for v in self.input_index[n]["shape"]) for n in inputs]
        self.channel_last = channel_last_inputs(inputs, self.onnx_inputs, got) if not layout else set()

    def _detail_for(self, name: str, i: int, details: list[dict]) -> dict:
        """The interpreter input of ONNX input `name`: by name (onnx2tf keeps it, sanitised), else by position."""
        return next((d for d in details if d["name"] == name), None) or \
            next((d for d in details if name in d["name"]), details[i] if i < len(details) else details[-1])

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        for name in self.inputs:
            x = np.asarray(feeds[name])
            set_litert_input(self.interp, self.input_index[name], to_channel_last(x) if name in self.channel_last else x)
        self.interp.invoke()
        exact, within = (lambda got, n: got == n), (lambda got, n: n in got)
        return restore_layout(litert_outputs(self.interp, self.outputs, [exact, within]), self.onnx_shapes)
