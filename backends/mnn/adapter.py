"""MNN adapter: convert ONNX → .mnn with MNN's converter in a child process, run with MNN.nn.

The converter is called through `_tools.mnnconvert` (never the `mnnconvert`
console wrapper, which runs pip and sends telemetry).  It segfaults on some
graphs and exits 0 on failure, so success is judged by the output file and
its log; a converter killed by a signal is reported as such (an MCF finding).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np

CONVERT = "import sys, _tools; _tools.mnnconvert(sys.argv[1:])"


class ConversionError(RuntimeError):
    pass


class ConverterCrash(RuntimeError):
    pass


class MNNEngine:

    def __init__(self, precision: str = "high", backend: str = "CPU", threads: int = 1, convert_timeout: float = 50.0) -> None:
        import MNN

        self.MNN = MNN
        self.config = {"backend": backend, "precision": precision, "numThread": threads}
        self.convert_timeout = convert_timeout
        self.net = None

    def version(self) -> str:
        v = getattr(self.MNN, "version", None)
        return v() if callable(v) else str(getattr(self.MNN, "__version__", "unknown"))

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        dst = os.path.join(workdir, "model.mnn")
        args = ["mnnconvert", "-f", "ONNX", "--modelFile", model_path, "--MNNModel", dst, "--bizCode", "ofuzz"]
        try:
            converter = os.environ.get("OFUZZ_MNN_CONVERTER") or sys.executable  # emulated ARM workers convert natively
            r = subprocess.run([converter, "-c", CONVERT, *args], capture_output=True, text=True, timeout=self.convert_timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"MNN converter did not finish within {self.convert_timeout:.0f}s") from None
        log = (r.stdout + r.stderr).strip()
        lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.startswith("The device supports")]
        if r.returncode < 0:
            try:
                sig = signal.Signals(-r.returncode).name
            except ValueError:
                sig = f"signal {-r.returncode}"
            raise ConverterCrash(f"MNN converter killed by {sig}" + (f" after: {lines[-1][:200]}" if lines else "") + f"\n{log[-1500:]}")
        if r.returncode != 0 or not os.path.exists(dst) or "Converted Success" not in log:
            key = [ln for ln in lines if any(w in ln.lower() for w in ("error", "not support", "fail", "can't", "cannot", "unsupport"))]
            raise ConversionError(f"MNN conversion failed (exit {r.returncode}): {(key or lines or ['no log'])[0][:300]}\n{log[-1500:]}")
        rt = self.MNN.nn.create_runtime_manager((self.config,))
        self.net = self.MNN.nn.load_module_from_file(dst, inputs, outputs, runtime_manager=rt)
        if self.net is None:
            raise RuntimeError("MNN could not load the converted model")
        self.inputs, self.outputs = inputs, outputs

    def _const(self, x: np.ndarray):
        F = self.MNN.expr
        if x.dtype == np.bool_:
            x = x.astype(np.int32)
        if np.issubdtype(x.dtype, np.integer):
            return F.const(x.astype(np.int32), list(x.shape), F.NCHW, F.int)
        return F.const(x.astype(np.float32), list(x.shape), F.NCHW, F.float)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        F = self.MNN.expr
        ys = self.net.forward([self._const(np.array(feeds[n], order="C")) for n in self.inputs])  # keeps 0-d inputs 0-d (ascontiguousarray makes them (1,))
        if not isinstance(ys, (list, tuple)):
            ys = [ys]
        if len(ys) != len(self.outputs):
            raise RuntimeError(f"MNN forward returned {len(ys)} outputs for {len(self.outputs)} (a shape error is reported this way)")
        out = {}
        for name, y in zip(self.outputs, ys):
            if y.data_format == F.NC4HW4:
                y = F.convert(y, F.NCHW)
            out[name] = np.array(y.read())
        return out
