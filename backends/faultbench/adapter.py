"""TEST DOUBLE engine for the fault benchmark — onnxruntime with seeded, independent defects (faults.py).

Not a real engine: it measures ofuzz's own triage. Every model runs on onnxruntime, rewritten so that each node that
triggers a value fault has its first output altered (Add 1, Mul 1.5, NaN -> 0, or a decoy below tolerance); a process
fault (segfault, abort, raise, hang) acts at its stage. A model that triggers no fault runs exactly as onnxruntime
runs it, so any root cause ofuzz reports on this engine holds a fault, or is a false report.
"""
from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from faults import VALUE_KINDS, active_faults

_FACTORS = {"offset": None, "scale": 1.5, "decoy": 1.0 + 1.2e-7}


_PROCESS_FAULTS = {"segfault": lambda: ctypes.string_at(0), "abort": os.abort, "hang": lambda: time.sleep(10**6)}


def _act(kind: str, fault_id: str) -> None:
    """A process fault: the worker dies by a signal, hangs, or the engine raises."""
    if kind == "raise":
        raise RuntimeError(f"faultbench: seeded failure ({fault_id})")
    _PROCESS_FAULTS[kind]()


class FaultBenchEngine:

    def __init__(self, faults: list[str] | None = None) -> None:
        import onnx
        import onnxruntime as ort

        self.onnx, self.ort = onnx, ort
        ort.set_default_logger_severity(3)
        # a subset for a short run: the option, or OFUZZ_FAULTBENCH_FAULTS (a comma-separated list of fault ids)
        chosen = faults or [f for f in os.environ.get("OFUZZ_FAULTBENCH_FAULTS", "").split(",") if f]
        self.enabled = tuple(chosen) if chosen else None

    def version(self) -> str:
        return f"faultbench 1 (onnxruntime {self.ort.__version__})"

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        model = self.onnx.load(model_path)
        active = active_faults(model, self.enabled)
        for fault, _ in active:
            if fault.stage == "prepare":
                _act(fault.kind, fault.id)
        self.run_faults = [f for f, _ in active if f.stage == "run" and f.kind not in VALUE_KINDS]
        for fault, i in sorted(((f, i) for f, i in active if f.kind in VALUE_KINDS), key=lambda fi: -fi[1]):
            self._alter(model, i, fault.kind, fault.id)
        so = self.ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
        self.sess = self.ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self.outputs = outputs or [o.name for o in self.sess.get_outputs()]

    def _alter(self, model, i: int, kind: str, fault_id: str) -> None:
        """Rewire node i's first output through the fault's nodes, inserted right after it (the order stays topological)."""
        helper, g = self.onnx.helper, model.graph
        node = g.node[i]
        out = node.output[0]
        pre = f"{out}__{fault_id}"
        node.output[0] = pre
        const = f"{pre}__c"
        if kind == "nanflush":
            zero = helper.make_tensor(const, self.onnx.TensorProto.FLOAT, [], [0.0])
            g.initializer.append(zero)
            new = [helper.make_node("IsNaN", [pre], [f"{pre}__isnan"]), helper.make_node("CastLike", [const, pre], [f"{pre}__zero"]),
                   helper.make_node("Where", [f"{pre}__isnan", f"{pre}__zero", pre], [out])]
        else:
            factor = _FACTORS[kind]
            g.initializer.append(helper.make_tensor(const, self.onnx.TensorProto.FLOAT, [], [1.0 if factor is None else factor]))
            new = [helper.make_node("CastLike", [const, pre], [f"{pre}__k"]),
                   helper.make_node("Add" if factor is None else "Mul", [pre, f"{pre}__k"], [out])]
        for k, n in enumerate(new):
            g.node.insert(i + 1 + k, n)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for fault in self.run_faults:
            _act(fault.kind, fault.id)
        return dict(zip(self.outputs, self.sess.run(self.outputs, feeds)))
