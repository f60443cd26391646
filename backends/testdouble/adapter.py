"""TEST DOUBLE engine — deliberately faulty, for testing ofuzz itself.

Runs models with the ONNX reference evaluator but misbehaves whenever the model
contains one of the configured operators: segfault, abort, hang, leak memory,
raise, exit (`exit`: the process; `sysexit`: SystemExit, as onnx2tf's sys.exit(1)), or return wrong values for that operator (so localisation has a
real diverging operator to find).  Faults are "stage:kind" with stage prepare
(conversion) or run (inference); `spin` computes for 1.5 CPU-seconds and then goes on (a slow conversion);
`poison` shows nothing itself and makes the process's next prepare segfault (a heap an earlier model corrupted).  Value faults: `wrong` adds 1, `offby` is 0.5%
off (a real precision defect), `perturb` is 2e-6 off (float noise, far below
the oracle's tolerance); `unsupported` says the operator is not supported;
`handoff` fails conversion at whichever node consumes the operator's output
(as onnx2tf does with a tensor whose layout it got wrong upstream), so the
error names the consumer, not the defective operator; `named` fails conversion
of the operator only when another node feeds it (as onnx2tf fails on a tensor of
dynamic shape), with a message that does not name it, and names the failing node
the way a converter can (`failed_nodes` on the exception); `flip` is wrong on
every other run (a nondeterministic engine); `nanorder` returns the first operand
wherever an operand is NaN (as `a > b ? a : b` does), so a commutative operator's NaN result depends on operand order.
A fault may carry a condition, "run:segfault?omits=strides": it fires only when a node of the operator leaves that
attribute out (as MNN's pools crash without `strides`, which the triage's trigger rewrite finds); "run:wrong?after=Relu"
fires only when a node of the operator consumes a Relu's output (a fusion defect: each node is right alone);
"run:wrong?inputs=3" only when a node of it has 3 or more inputs (an N-ary code path); "run:wrong?has=alpha" only when
a node of it writes that attribute out.  `fallback` gives the faults of a
second conversion mode tried when the first raises (the onnx2tf adapter's
keep-shape mode, then its default mode): only a model both fail on fails.
"""
from __future__ import annotations

import ctypes
import os
import time

import numpy as np


_POISONED = [False]  # a `poison` fault ran in this process: its heap is damaged, and the next prepare crashes


def _fault(kind: str, op: str, node: str = "") -> None:
    if kind == "segfault":
        ctypes.string_at(0)
    elif kind == "abort":
        os.abort()
    elif kind == "hang":
        time.sleep(10**6)
    elif kind == "leak":
        hoard = []
        while True:
            hoard.append(np.ones(1 << 24, dtype=np.uint8))
    elif kind == "exit":
        os._exit(3)
    elif kind == "raise":
        exc = RuntimeError(f"test double: seeded failure on {op}")
        exc.failed_nodes = [node] if node else []  # type: ignore[attr-defined]  # as a converter that knows the node
        raise exc
    elif kind == "unsupported":
        raise NotImplementedError(f"test double: operator {op} is not supported")
    elif kind == "sysexit":  # as onnx2tf gives up: sys.exit(1) from inside the converter
        raise SystemExit(1)
    elif kind == "poison":  # as MNN's negative-step Slice writes past its buffer: nothing shows now, the next model dies
        _POISONED[0] = True
    elif kind == "spin":  # a slow conversion (onnx2tf's permutation searches): 1.5 s of CPU, then on as usual
        end = time.process_time() + 1.5
        while time.process_time() < end:
            pass


_VALUE_FAULTS = {"wrong": None, "offby": 1.005, "perturb": 1 + 2e-6}


class TestDoubleEngine:

    def __init__(self, faults: dict[str, str] | None = None, latency: float = 0.0, fallback: dict[str, str] | None = None) -> None:
        import onnx
        from onnx.reference import ReferenceEvaluator
        from onnx.reference.op_run import OpRun

        self.onnx, self.Evaluator, self.OpRun = onnx, ReferenceEvaluator, OpRun
        self.faults = dict(faults or {})
        self.fallback = dict(fallback) if fallback is not None else None  # the faults of a second conversion mode, tried when the first fails
        self.latency = float(latency)  # seconds slept per run: a latency-bound engine, to measure scaling without using cores
        self.runs = 0  # runs of this worker: `flip` is wrong on odd ones

    def version(self) -> str:
        return f"testdouble (onnx {self.onnx.__version__})"

    def _wrong_op(self, op: str, kind: str = "wrong"):
        base = self.Evaluator  # build a reference implementation of `op` that is off by one
        from onnx.reference.ops import load_op

        impl = load_op("", op, 17)
        factor = _VALUE_FAULTS[kind]

        class Wrong(impl):  # type: ignore[misc, valid-type]
            op_domain = ""

            def _run(self, *args, **kwargs):
                res = super()._run(*args, **kwargs)
                if factor is not None:
                    return tuple(np.asarray(np.asarray(r) * factor, dtype=np.asarray(r).dtype) for r in res)
                return tuple(np.asarray(r) + np.asarray(1, dtype=np.asarray(r).dtype) for r in res)

        Wrong.__name__ = op
        _ = base
        return Wrong

    def _nan_order_op(self, op: str):
        from onnx.reference.ops import load_op

        impl = load_op("", op, 17)

        class FirstOperandOnNaN(impl):  # type: ignore[misc, valid-type]
            op_domain = ""

            def _run(self, *args, **kwargs):
                res = super()._run(*args, **kwargs)
                first = np.broadcast_to(args[0], np.shape(res[0]))
                any_nan = np.zeros(np.shape(res[0]), bool)
                for a in args:
                    any_nan |= np.broadcast_to(np.isnan(a), np.shape(res[0]))
                return (np.where(any_nan, first, res[0]).astype(np.asarray(res[0]).dtype),)

        FirstOperandOnNaN.__name__ = op
        return FirstOperandOnNaN

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        if _POISONED[0]:
            ctypes.string_at(0)
        model = self.onnx.load(model_path)
        self.ops = {n.op_type for n in model.graph.node} - self._conditions_unmet(model)
        self.outputs = outputs
        try:
            self._convert(model, self.faults)
        except Exception:
            if self.fallback is None:
                raise
            self._convert(model, self.fallback)  # as the onnx2tf adapter converts again in its default mode: only both failing fail

    def _conditions_unmet(self, model) -> set[str]:
        """Operators whose fault has a condition ("?omits=strides") that no node of theirs meets: they run right."""
        unmet = set()
        for op, spec in {**self.faults, **(self.fallback or {})}.items():
            _, _, cond = spec.partition("?")
            if cond.startswith("omits="):
                attr = cond.split("=", 1)[1]
                if all(any(a.name == attr for a in n.attribute) for n in model.graph.node if n.op_type == op):
                    unmet.add(op)
            elif cond.startswith("has="):  # only a node that writes the attribute out (a defect of a non-default value)
                attr = cond.split("=", 1)[1]
                if not any(any(a.name == attr for a in n.attribute) for n in model.graph.node if n.op_type == op):
                    unmet.add(op)
            elif cond.startswith("inputs="):  # only an N-ary node (MNN's 3+-input Sum/Max broadcast from the first input)
                least = int(cond.split("=", 1)[1])
                if all(sum(1 for i in n.input if i) < least for n in model.graph.node if n.op_type == op):
                    unmet.add(op)
            elif cond.startswith("after="):
                made_by = {o for n in model.graph.node if n.op_type == cond.split("=", 1)[1] for o in n.output}
                if not any(made_by & set(n.input) for n in model.graph.node if n.op_type == op):
                    unmet.add(op)
        return unmet

    def _convert(self, model, faults: dict[str, str]) -> None:
        new_ops = []
        self.plain = None
        for op, spec in faults.items():
            stage, _, kind = spec.split("?")[0].partition(":")
            if op in self.ops and stage == "prepare" and kind == "handoff":
                self._handoff(model, op)
            elif op in self.ops and stage == "prepare" and kind == "named":
                self._named(model, op)
            elif op in self.ops and stage == "prepare":
                _fault(kind, op, next(n.name for n in model.graph.node if n.op_type == op))
            if op in self.ops and stage == "run" and kind in _VALUE_FAULTS:
                new_ops.append(self._wrong_op(op, kind))
            if op in self.ops and stage == "run" and kind == "nanorder":
                new_ops.append(self._nan_order_op(op))
            if op in self.ops and stage == "run" and kind == "flip":  # nondeterministic: wrong on every other run
                new_ops.append(self._wrong_op(op, "wrong"))
                self.plain = self.Evaluator(model)
        self.ev = self.Evaluator(model, new_ops=new_ops or None)

    @staticmethod
    def _handoff(model, op: str) -> None:
        made = {o for n in model.graph.node if n.op_type == op for o in n.output}
        consumer = next((n for n in model.graph.node if made & set(n.input)), None)
        if consumer is not None:
            raise ValueError(f"test double: {consumer.op_type} got an input in the wrong layout ({consumer.name})")

    @staticmethod
    def _named(model, op: str) -> None:
        made = {o for n in model.graph.node for o in n.output}
        node = next((n for n in model.graph.node if n.op_type == op and made & set(n.input)), None)
        if node is not None:
            exc = ValueError("test double: a layer got an input of unknown shape")
            exc.failed_nodes = [node.name]  # type: ignore[attr-defined]
            raise exc

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.latency:
            time.sleep(self.latency)
        for op, spec in self.faults.items():
            stage, _, kind = spec.split("?")[0].partition(":")
            if op in self.ops and stage == "run" and kind not in _VALUE_FAULTS:
                _fault(kind, op)
        self.runs += 1
        ev = self.plain if self.plain is not None and self.runs % 2 == 0 else self.ev
        with np.errstate(all="ignore"):
            res = ev.run(self.outputs, feeds)
        return dict(zip(self.outputs, res))
