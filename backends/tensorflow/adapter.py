"""TensorFlow and TFLite adapter via onnx2tf (its own pinned environment).

onnx2tf rewrites the file it is given (we convert a private copy), tries to
download calibration images when inputs look like images (patched out: nothing
here reaches the network), and by default moves NCHW to NHWC.  Inputs are first
kept in ONNX layout with `keep_shape_absolutely_input_names`; when that mode
fails to convert, the model is converted again in onnx2tf's default mode (its
layout-sensitive ops — SpaceToDepth, Pow after BatchNormalization,
AveragePool→Mean — mix layouts in the first mode and fail on models the
default mode converts and runs correctly: those MCFs were ours, not onnx2tf's),
and inputs the converted model takes channel-last are transposed to it.  Only
a model both modes fail on is an MCF.  Whatever layout the outputs come back in
is genuine converter behaviour for the oracle.
"""
from __future__ import annotations

import glob
import os
import shutil
import sys

import numpy as np
from onnx2tf_io import (channel_last_inputs, litert_outputs, name_failed_nodes, name_layer_node, restore_layout, set_litert_input,
                       to_channel_last)


class TensorFlowEngine:

    def __init__(self, tflite: bool = False, input_layout: str = "absolute") -> None:
        import onnx2tf
        import tensorflow as tf

        sys.modules["onnx2tf.onnx2tf"].download_test_image_data = lambda: np.random.rand(20, 128, 128, 3).astype(np.float32)
        tf.config.set_visible_devices([], "GPU")
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        self.onnx2tf, self.tf, self.tflite = onnx2tf, tf, tflite
        self.input_layout = input_layout
        if tflite:
            from ai_edge_litert.interpreter import Interpreter

            self.Interpreter = Interpreter

    def version(self) -> str:
        v = f"tensorflow {self.tf.__version__}, onnx2tf {self.onnx2tf.__version__}"
        if self.tflite:
            import ai_edge_litert

            v += f", ai-edge-litert {getattr(ai_edge_litert, '__version__', '?')}"
        return v

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        private = os.path.join(workdir, "model.onnx")
        shutil.copyfile(model_path, private)
        self.inputs, self.outputs = inputs, outputs
        import onnx

        model = onnx.load(model_path)
        self.node_of_output = {o: n.name for n in model.graph.node for o in n.output if o and n.name}
        self.onnx_shapes = [tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in model.graph.output]
        self.onnx_inputs = {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim) for i in model.graph.input}
        layout = {}
        if inputs and self.input_layout == "absolute":
            layout["keep_shape_absolutely_input_names"] = list(inputs)
        elif inputs and self.input_layout == "nchw":
            layout["keep_ncw_or_nchw_or_ncdhw_input_names"] = list(inputs)
        self.mode = self.input_layout
        try:
            self.km = self._convert(private, workdir, layout)
        except Exception as first:
            if not layout:
                name_failed_nodes(first, first)
                raise
            shutil.copyfile(model_path, private)  # onnx2tf rewrote it
            shutil.rmtree(os.path.join(workdir, "tf"), ignore_errors=True)
            self.mode = "default"
            try:
                self.km = self._convert(private, workdir, {})
            except BaseException as second:
                name_failed_nodes(second, first, second)
                raise
        self.channel_last = self._channel_last_inputs()
        if self.tflite:
            found = sorted(glob.glob(os.path.join(workdir, "tf", "*_float32.tflite")))
            if not found:
                raise RuntimeError("onnx2tf wrote no *_float32.tflite")
            self.interp = self.Interpreter(model_path=found[0])
            self.interp.allocate_tensors()

    def _convert(self, private: str, workdir: str, layout: dict) -> object:
        return self.onnx2tf.convert(
            input_onnx_file_path=private, output_folder_path=os.path.join(workdir, "tf"), non_verbose=True,
            verbosity="error", disable_model_save=not self.tflite, not_use_onnxsim=True, **layout,
        )

    def _channel_last_inputs(self) -> set[str]:
        """Inputs the default-mode model takes as the channel-last permutation of their ONNX shape."""
        if self.mode != "default" or self.km is None:
            return set()
        got = [tuple(int(d) if d is not None else -1 for d in t.shape) for t in getattr(self.km, "inputs", []) or []]
        return channel_last_inputs(self.inputs, self.onnx_inputs, got)

    def _feed(self, name: str, x: np.ndarray) -> np.ndarray:
        return to_channel_last(x) if name in self.channel_last else x

    def _restore_layout(self, ys: list[np.ndarray]) -> list[np.ndarray]:
        return restore_layout(ys, self.onnx_shapes)

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        try:
            return self._run(feeds)
        except BaseException as exc:
            self._name_layer_node(exc)
            raise

    def _name_layer_node(self, exc: BaseException) -> None:
        name_layer_node(exc, self.node_of_output)

    def _run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if not self.tflite:
            ys = self.km([self._feed(n, feeds[n]) for n in self.inputs])
            if not isinstance(ys, (list, tuple)):
                ys = [ys]
            return self._restore_layout([np.asarray(y) for y in ys])
        details = self.interp.get_input_details()
        for i, d in enumerate(details):
            name = next((n for n in self.inputs if n in d["name"]), self.inputs[i] if i < len(self.inputs) else None)
            set_litert_input(self.interp, d, self._feed(name, feeds[name]))
        self.interp.invoke()
        return self._restore_layout(litert_outputs(self.interp, self.outputs, [lambda got, n: got == n or got.endswith(n) or n in got]))
