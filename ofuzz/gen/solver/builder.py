"""Graph builder: the solver's scratchpad for one model.

Rules emit nodes through `Builder.op`, which asks onnx's own per-node shape
inference for the output shapes.  That keeps every shape we record identical to
what `onnx.checker` will later infer, and lets rules concentrate on *choosing*
parameters instead of re-implementing each operator's shape formula.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from onnx import NodeProto, TensorProto, defs, helper, numpy_helper, shape_inference

from ofuzz.gen.values import ValuePolicy

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
INT32 = TensorProto.INT32
BOOL = TensorProto.BOOL

DTYPE_NAMES = {
    "float32": TensorProto.FLOAT,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "bool": TensorProto.BOOL,
}
DTYPE_BY_CODE = {v: k for k, v in DTYPE_NAMES.items()}
SHAPE_PRESERVING = frozenset({"MeanVarianceNormalization", "GroupNormalization"})
NP_DTYPE = {FLOAT: np.float32, INT64: np.int64, INT32: np.int32, BOOL: np.bool_}


class SolverError(Exception):
    """A rule's parameter choice does not fit the shapes at hand; the caller retries."""


@dataclass(frozen=True)
class T:
    """A static tensor in the model being built (value known only for constants)."""

    name: str
    shape: tuple[int, ...]
    dtype: int
    value: np.ndarray | None = field(default=None, compare=False, hash=False)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass
class EmittedNode:
    proto: NodeProto
    block: str  # corpus block (or "adapter") this node realises
    node_id: int  # generator node index, -1 for adapters outside a block


class Builder:
    """Accumulates nodes, initializers and graph inputs with rollback support."""

    def __init__(self, rng: np.random.Generator, values: ValuePolicy, opset: int, cap: int) -> None:
        self.rng = rng
        self.values = values
        self.opset = opset
        self.cap = cap
        self.nodes: list[EmittedNode] = []
        self.initializers: list[TensorProto] = []
        self.inputs: list[T] = []
        self.input_arrays: dict[str, np.ndarray] = {}
        self._count = 0
        self.current_block = "adapter"
        self.current_node = -1
        self._schemas: dict[str, Any] = {}
        self.input_dtype: int | None = None  # integer graph inputs for blocks that take them (GenerateOptions.int_inputs)

    # -- bookkeeping ---------------------------------------------------------
    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def mark(self) -> tuple[int, int, int]:
        return len(self.nodes), len(self.initializers), len(self.inputs)

    def rollback(self, mark: tuple[int, int, int]) -> None:
        n, i, g = mark
        del self.nodes[n:]
        del self.initializers[i:]
        for t in self.inputs[g:]:
            self.input_arrays.pop(t.name, None)
        del self.inputs[g:]

    # -- tensors -------------------------------------------------------------
    def input_for(self, accepted: Sequence[str], shape: Sequence[int]) -> T:
        """A graph input for a block taking `accepted` dtypes: the model's integer type when the block takes it (integer
        kernels are separate code in every engine, and float-only inputs never reach them), else float32."""
        dt = self.input_dtype
        return self.add_input(shape, dt if dt is not None and DTYPE_BY_CODE.get(dt) in accepted else FLOAT)

    def add_input(self, shape: Sequence[int], dtype: int = FLOAT) -> T:
        name = f"input_{len(self.inputs)}"
        t = T(name, tuple(int(d) for d in shape), dtype)
        self.inputs.append(t)
        self.input_arrays[name] = self.values.input_array(self.rng, t.shape, NP_DTYPE[dtype])
        return t

    def const(self, arr: np.ndarray, hint: str = "c") -> T:
        arr = np.asarray(arr)
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would turn a 0-D scalar into 1-D)
            arr = arr.copy(order="C")
        name = self.fresh(hint)
        proto = numpy_helper.from_array(arr, name)
        self.initializers.append(proto)
        dtype = helper.np_dtype_to_tensor_dtype(arr.dtype)
        return T(name, tuple(arr.shape), dtype, arr)

    def ints(self, values: Sequence[int], hint: str = "i") -> T:
        return self.const(np.asarray(list(values), dtype=np.int64), hint)

    def weight(self, shape: Sequence[int], hint: str = "w", dtype: int = FLOAT) -> T:
        shape = tuple(int(d) for d in shape)
        if int(np.prod(shape, dtype=np.int64)) > self.cap:
            raise SolverError(f"weight {shape} over the size cap")
        return self.const(self.values.weight_array(self.rng, shape, NP_DTYPE[dtype]), hint)

    # -- nodes ---------------------------------------------------------------
    def _schema(self, op: str) -> Any:
        s = self._schemas.get(op)
        if s is None:
            s = defs.get_schema(op, self.opset)
            self._schemas[op] = s
        return s

    def op(self, op_type: str, ins: Sequence[T | None], n_out: int = 1, **attrs: Any) -> list[T]:
        """Emit one node; output shapes come from onnx shape inference."""
        idx = len(self.nodes)
        out_names = [f"t{idx}_{op_type}_{k}" if n_out > 1 else f"t{idx}_{op_type}" for k in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = helper.make_node(
            op_type,
            [t.name if t is not None else "" for t in ins],
            out_names,
            name=f"n{idx}_{op_type}",
            **attrs,
        )
        types = {t.name: helper.make_tensor_type_proto(t.dtype, t.shape) for t in ins if t is not None}
        data = {t.name: numpy_helper.from_array(t.value, t.name) for t in ins if t is not None and t.value is not None}
        try:
            inferred = shape_inference.infer_node_outputs(self._schema(op_type), node, types, input_data=data)
        except Exception as exc:  # onnx raises InferenceError and friends
            raise SolverError(f"{op_type}: {str(exc).splitlines()[0][:200]}") from None
        outs: list[T] = []
        for name in out_names:
            tp = inferred.get(name)
            if (tp is None or not tp.tensor_type.HasField("shape")) and op_type in SHAPE_PRESERVING and ins and ins[0] is not None:
                tp = helper.make_tensor_type_proto(ins[0].dtype, ins[0].shape)  # function ops onnx cannot infer per node
            if tp is None or not tp.tensor_type.HasField("shape"):
                raise SolverError(f"{op_type}: output shape not inferable")
            dims = tp.tensor_type.shape.dim
            if any(not d.HasField("dim_value") for d in dims):
                raise SolverError(f"{op_type}: dynamic output shape")
            shape = tuple(int(d.dim_value) for d in dims)
            if any(d <= 0 for d in shape):
                raise SolverError(f"{op_type}: empty output {shape}")
            t = T(name, shape, tp.tensor_type.elem_type)
            if t.numel > self.cap:
                raise SolverError(f"{op_type}: output {shape} over the size cap")
            outs.append(t)
        self.nodes.append(EmittedNode(node, self.current_block, self.current_node))
        return outs

    def op1(self, op_type: str, ins: Sequence[T | None], **attrs: Any) -> T:
        return self.op(op_type, ins, 1, **attrs)[0]

    def with_value(self, t: T, value: np.ndarray) -> T:
        """Attach a statically known value (e.g. the result of Shape) to a tensor."""
        return T(t.name, t.shape, t.dtype, value)
