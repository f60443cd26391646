"""Conditions over a node and its actual inputs (the `when:` of undefined and reference-gap rules), compiled from YAML."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ofuzz.core.attribute_values import schema_default
from ofuzz.core.vocab import EXCEPTION, PROCESS_DIED, TIMEOUT
from ofuzz.judge.noise.base import ANY_OP, Cond, KINDS, Tri, _Bad, _elem_type_of, _int_range, _kind_of_type, _op_facts

# ---------------------------------------------------------------------------------------------
# What a condition sees: one node, what is known about its inputs, the opset


@dataclass(frozen=True)
class _Arg:
    """One node input: omitted, or given with its value, element type and shape when known."""

    present: bool
    value: np.ndarray | None = None
    elem_type: int | None = None
    shape: tuple[int | None, ...] | None = None

    @staticmethod
    def of(value: np.ndarray | None, present: bool = True, elem_type: int | None = None, shape: tuple | None = None) -> _Arg:
        if value is not None:
            value = np.asarray(value)
            return _Arg(present, value, _elem_type_of(value) or elem_type, tuple(value.shape))
        return _Arg(present, None, elem_type, shape)

    @property
    def kind(self) -> str | None:
        if self.elem_type is not None:
            return _kind_of_type(self.elem_type)
        if self.value is not None:
            return {"f": "float", "i": "int", "u": "uint", "b": "bool", "c": "complex", "U": "string", "S": "string", "O": "string"}.get(
                self.value.dtype.kind)
        return None


@dataclass(frozen=True)
class _NodeView:
    node: onnx.NodeProto
    args: tuple[_Arg, ...]
    opset: int
    divergence: str | None = None  # how the blamed engine's output differs (compare.py's category), when judging one

    def arg(self, i: int) -> _Arg:
        return self.args[i] if i < len(self.args) else _Arg(False)

    def has_attr(self, name: str) -> bool:
        return any(a.name == name for a in self.node.attribute)

    def attr(self, name: str) -> Any:
        """The attribute's value, else the schema default at this opset, else None."""
        for a in self.node.attribute:
            if a.name == name:
                return _plain(helper.get_attribute_value(a))
        return self.default(name)

    def default(self, name: str) -> Any:
        """The schema's default of the attribute at this opset, None if it has none."""
        value = schema_default(self.node.op_type, name, self.opset)
        return None if value is None else _plain(value)


def _plain(v: Any) -> Any:
    """Attribute values as YAML would write them: str not bytes, lists not repeated fields."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v).tolist()
    if isinstance(v, (list, tuple)) or type(v).__name__.startswith("Repeated"):
        return [_plain(x) for x in v]
    return v


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    numbers = (int, float, np.integer, np.floating)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return bool(a == b)


# ---------------------------------------------------------------------------------------------
# Three-valued logic: an unknown value makes a condition unknown, and the caller decides


def _all(results: Iterator[Tri]) -> Tri:
    unknown = False
    for r in results:
        if r is False:
            return False
        unknown |= r is None
    return None if unknown else True


def _any(results: Iterator[Tri]) -> Tri:
    unknown = False
    for r in results:
        if r is True:
            return True
        unknown |= r is None
    return None if unknown else False


def _values(a: _Arg, test: Callable[[np.ndarray], bool]) -> Tri:
    """False for an omitted input, unknown without a value, else the test on the value."""
    if not a.present:
        return False
    return None if a.value is None else bool(test(a.value))


def _floats(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float64) if v.dtype.kind not in "fc" else v


# ---------------------------------------------------------------------------------------------
# The predicate vocabulary. Each builder validates its YAML argument and returns a condition.


def _index(x: Any, what: str, ops: tuple[str, ...]) -> int:
    if not isinstance(x, int) or isinstance(x, bool) or x < 0:
        raise _Bad(f"{what} must be an input index (0, 1, ...), got {x!r}", "number inputs from 0 as in the operator's schema")
    for op in ops:
        if op != ANY_OP and x >= _op_facts(op)[1]:
            raise _Bad(f"{what} {x} is beyond the inputs of {op} (it has {_op_facts(op)[1]})", "use an input index the operator has")
    return x


def _attr_name(x: Any, ops: tuple[str, ...]) -> str:
    if not isinstance(x, str):
        raise _Bad(f"attribute name must be a string, got {x!r}", "write the ONNX attribute's name")
    for op in ops:
        if op != ANY_OP and x not in _op_facts(op)[0]:
            known = ", ".join(sorted(_op_facts(op)[0])) or "none"
            raise _Bad(f"unknown attribute {x!r} for op {op}", f"use one of its attributes ({known}) or list only ops that have it")
    return x


def _one_pair(arg: Any, pred: str) -> tuple[str, Any]:
    if not isinstance(arg, dict) or len(arg) != 1:
        raise _Bad(f"{pred} takes one ATTRIBUTE: VALUE pair, got {arg!r}", f"write e.g. {pred}: {{axis: 0}}")
    return next(iter(arg.items()))


def _keys(arg: Any, pred: str, required: set[str], optional: set[str] = frozenset()) -> dict[str, Any]:
    if not isinstance(arg, dict):
        fields = ", ".join(f"{k}: ..." for k in sorted(required))
        raise _Bad(f"{pred} takes a mapping with {sorted(required)}, got {arg!r}", f"write {pred}: {{{fields}}}")
    missing, unknown = required - set(arg), set(arg) - required - optional
    if missing or unknown:
        raise _Bad(f"{pred}: missing {sorted(missing)}, unknown {sorted(unknown)}", f"{pred} takes {sorted(required | optional)}")
    return arg


def _list_of(x: Any, what: str, ok: Callable[[Any], bool] = lambda _: True, hint: str = "") -> list:
    if not isinstance(x, list) or not all(ok(v) for v in x):
        raise _Bad(f"{what} must be a list{hint}, got {x!r}", f"write {what} as [a, b, ...]")
    return x


def _kinds(x: Any, what: str) -> list[str]:
    return _list_of(x, what, lambda k: k in KINDS, f" of kinds {list(KINDS)}")


def p_attr_present(arg: Any, ops: tuple[str, ...]) -> Cond:
    name = _attr_name(arg, ops)
    return lambda n: n.has_attr(name)


def p_attr_equals(arg: Any, ops: tuple[str, ...]) -> Cond:
    name, want = _one_pair(arg, "attr_equals")
    _attr_name(name, ops)
    return lambda n: _same(n.attr(name), want)


def p_attr_in(arg: Any, ops: tuple[str, ...]) -> Cond:
    name, wants = _one_pair(arg, "attr_in")
    _attr_name(name, ops)
    _list_of(wants, f"attr_in {name}")
    return lambda n: any(_same(n.attr(name), w) for w in wants)


def p_attr_any_above(arg: Any, ops: tuple[str, ...]) -> Cond:
    """attr_any_above: {dilations: 1} (an element above a number) or {strides: kernel_shape} (above the same element of
    another attribute): the limits engines state this way ("strides > 1 with dilation_rate > 1", "strides > window")."""
    name, bound = _one_pair(arg, "attr_any_above")
    _attr_name(name, ops)
    if isinstance(bound, str):
        _attr_name(bound, ops)
    elif isinstance(bound, bool) or not isinstance(bound, (int, float)):
        raise _Bad(f"attr_any_above {name} takes a number or another attribute's name, got {bound!r}",
                   "write e.g. attr_any_above: {dilations: 1} or attr_any_above: {strides: kernel_shape}")

    def cond(n: _NodeView) -> Tri:
        a = n.attr(name)
        b = n.attr(bound) if isinstance(bound, str) else bound
        if a is None:
            return False
        if b is None:
            return None
        xs = a if isinstance(a, list) else [a]
        return any(x > y for x, y in zip(xs, b)) if isinstance(b, list) else any(x > b for x in xs)
    return cond


def p_attr_dtype_kind(arg: Any, ops: tuple[str, ...]) -> Cond:
    name, kinds = _one_pair(arg, "attr_dtype_kind")
    _attr_name(name, ops)
    _kinds(kinds, f"attr_dtype_kind {name}")
    return lambda n: _kind_of_type(n.attr(name)) in kinds


def p_input_present(arg: Any, ops: tuple[str, ...]) -> Cond:
    i = _index(arg, "input_present", ops)
    return lambda n: n.arg(i).present


def p_input_kind(arg: Any, ops: tuple[str, ...]) -> Cond:
    a = _keys(arg, "input_kind", {"input", "in"})
    i, kinds = _index(a["input"], "input", ops), _kinds(a["in"], "input_kind in")
    return lambda n: False if not n.arg(i).present else (None if n.arg(i).kind is None else n.arg(i).kind in kinds)


def p_input_rank(arg: Any, ops: tuple[str, ...]) -> Cond:
    a = _keys(arg, "input_rank", {"input", "in"})
    i = _index(a["input"], "input", ops)
    ranks = _list_of(a["in"], "input_rank in", lambda r: isinstance(r, int) and r >= 0, " of ranks")
    return lambda n: False if not n.arg(i).present else (None if n.arg(i).shape is None else len(n.arg(i).shape) in ranks)


def _value_test(test: Callable[[np.ndarray], bool], name: str) -> Callable[[Any, tuple[str, ...]], Cond]:
    def build(arg: Any, ops: tuple[str, ...]) -> Cond:
        i = _index(arg, name, ops)
        return lambda n: _values(n.arg(i), test)
    return build


def _is_float(v: np.ndarray) -> bool:
    return v.dtype.kind in "fc" or v.dtype.name.startswith(("bfloat", "float"))


p_has_nan = _value_test(lambda v: _is_float(v) and bool(np.isnan(_floats(v)).any()), "has_nan")
p_has_inf = _value_test(lambda v: _is_float(v) and bool(np.isinf(_floats(v)).any()), "has_inf")
p_has_zero = _value_test(lambda v: bool((v == 0).any()), "has_zero")
p_has_nonzero = _value_test(lambda v: bool((v != 0).any()), "has_nonzero")
p_all_equal = _value_test(lambda v: v.size > 1 and bool((v == v.flat[0]).all()), "all_equal")  # a constant tensor


def p_any_input_has_nan(arg: Any, ops: tuple[str, ...]) -> Cond:
    if arg is not True:
        raise _Bad(f"any_input_has_nan takes true, got {arg!r}", "write any_input_has_nan: true")

    def nan(v: np.ndarray) -> bool:
        return _is_float(v) and bool(np.isnan(_floats(v)).any())

    return lambda n: _any(_values(a, nan) for a in n.args)


def p_any_input_has_subnormal(arg: Any, ops: tuple[str, ...]) -> Cond:
    """Some float input holds a nonzero value smaller in magnitude than its type's smallest normal number."""
    if arg is not True:
        raise _Bad(f"any_input_has_subnormal takes true, got {arg!r}", "write any_input_has_subnormal: true")

    def subnormal(v: np.ndarray) -> bool:
        if not (_is_float(v) and v.dtype.kind == "f"):
            return False
        a = np.abs(v[np.isfinite(v)])
        return bool(((a > 0) & (a < np.finfo(v.dtype).tiny)).any())

    return lambda n: _any(_values(a, subnormal) for a in n.args)


def p_any_int_input_above(arg: Any, ops: tuple[str, ...]) -> Cond:
    """Some integer input holds a value of magnitude above N: arithmetic on it may leave the type's range."""
    if isinstance(arg, bool) or not isinstance(arg, int) or arg < 0:
        raise _Bad(f"any_int_input_above takes a non-negative integer, got {arg!r}", "write any_int_input_above: 32767")

    def big(v: np.ndarray) -> bool:
        return v.dtype.kind in "iu" and v.size > 0 and bool((np.abs(v.astype(np.float64)) > arg).any())

    return lambda n: _any(_values(a, big) for a in n.args)


DIVERGENCES = ("shape", "dtype", "missing", "value", "nan", "inf", "failure")
FAILURES = (*DIVERGENCES, *PROCESS_DIED, TIMEOUT, EXCEPTION, "upstream")  # a root key's failure class


def p_divergence(arg: Any, ops: tuple[str, ...]) -> Cond:
    kinds = _list_of(arg, "divergence", lambda k: k in DIVERGENCES, f" from {', '.join(DIVERGENCES)}")
    return lambda n: None if n.divergence is None else n.divergence in kinds


def p_outside_int_range(arg: Any, ops: tuple[str, ...]) -> Cond:
    a = _keys(arg, "outside_int_range", {"input"}, {"type_attr", "type_of_input"})
    if ("type_attr" in a) == ("type_of_input" in a):
        raise _Bad("outside_int_range needs exactly one of type_attr, type_of_input",
                   "write {input: 0, type_attr: to} or {input: 0, type_of_input: 1}")
    i = _index(a["input"], "input", ops)
    attr = _attr_name(a["type_attr"], ops) if "type_attr" in a else None
    j = _index(a["type_of_input"], "type_of_input", ops) if attr is None else 0

    def cond(n: _NodeView) -> Tri:
        src = n.arg(i)
        if not src.present or (src.kind is not None and src.kind != "float"):
            return False
        target = n.attr(attr) if attr is not None else n.arg(j).elem_type
        if target is None:
            return None
        bounds = _int_range(target)
        if bounds is None:
            return False
        return _values(src, lambda v: _outside(_floats(v), *bounds))
    return cond


def _outside(v: np.ndarray, lo: int, hi_excl: int) -> bool:
    """Truncated finite values outside [lo, hi_excl); the bounds are powers of two, exact in float64."""
    t = np.trunc(v[np.isfinite(v)])
    return bool(((t < lo) | (t >= hi_excl)).any())


def _index_args(arg: Any, pred: str, ops: tuple[str, ...], with_axis: bool) -> tuple[int, int, str | None]:
    a = _keys(arg, pred, {"data", "indices"} | ({"axis"} if with_axis else set()))
    return _index(a["data"], "data", ops), _index(a["indices"], "indices", ops), _attr_name(a["axis"], ops) if with_axis else None


def _axis_case(n: _NodeView, d: int, k: int, axis_attr: str) -> tuple[np.ndarray, int, int] | Tri:
    """(indices, axis, size) for an axis-indexed op, or the Tri verdict when they cannot be known."""
    data, idx = n.arg(d), n.arg(k)
    if not data.present or not idx.present:
        return False
    if idx.value is None or data.shape is None:
        return None
    axis, rank = int(n.attr(axis_attr) or 0), len(data.shape)
    axis += rank if axis < 0 else 0
    if not 0 <= axis < rank or data.shape[axis] is None:
        return None
    return idx.value.astype(np.int64), axis, int(data.shape[axis])


def _nd_case(n: _NodeView, d: int, k: int) -> tuple[np.ndarray, list[int]] | Tri:
    """(index tuples as rows, the data sizes they index) for GatherND/ScatterND, or a Tri verdict."""
    data, idx = n.arg(d), n.arg(k)
    if not data.present or not idx.present:
        return False
    if idx.value is None or data.shape is None or idx.value.ndim < 1:
        return None
    b = int(n.attr("batch_dims") or 0)  # None where the op has no batch_dims (ScatterND)
    width = idx.value.shape[-1]
    dims = list(data.shape[b:b + width])
    if width == 0 or len(dims) < width or any(s is None for s in dims):
        return None if width else False
    return idx.value.astype(np.int64).reshape(-1, width), [int(s) for s in dims]


def p_indices_out_of_range(arg: Any, ops: tuple[str, ...]) -> Cond:
    d, k, axis_attr = _index_args(arg, "indices_out_of_range", ops, True)

    def cond(n: _NodeView) -> Tri:
        case = _axis_case(n, d, k, axis_attr)
        if not isinstance(case, tuple):
            return case
        v, _, size = case
        return bool(((v < -size) | (v > size - 1)).any())
    return cond


def p_nd_indices_out_of_range(arg: Any, ops: tuple[str, ...]) -> Cond:
    d, k, _ = _index_args(arg, "nd_indices_out_of_range", ops, False)

    def cond(n: _NodeView) -> Tri:
        case = _nd_case(n, d, k)
        if not isinstance(case, tuple):
            return case
        rows, dims = case
        size = np.asarray(dims, dtype=np.int64)
        return bool(((rows < -size) | (rows > size - 1)).any())
    return cond


def p_duplicate_indices(arg: Any, ops: tuple[str, ...]) -> Cond:
    d, k, axis_attr = _index_args(arg, "duplicate_indices", ops, True)

    def cond(n: _NodeView) -> Tri:
        case = _axis_case(n, d, k, axis_attr)
        if not isinstance(case, tuple):
            return case
        v, axis, size = case
        if v.size < 2:
            return False
        coords = np.indices(v.shape).reshape(v.ndim, -1)
        coords[axis] = np.where(v < 0, v + size, v).reshape(-1)
        return np.unique(coords.T, axis=0).shape[0] < coords.shape[1]
    return cond


def p_nd_duplicate_indices(arg: Any, ops: tuple[str, ...]) -> Cond:
    d, k, _ = _index_args(arg, "nd_duplicate_indices", ops, False)

    def cond(n: _NodeView) -> Tri:
        case = _nd_case(n, d, k)
        if not isinstance(case, tuple):
            return case
        rows, dims = case
        size = np.asarray(dims, dtype=np.int64)
        rows = np.where(rows < 0, rows + size, rows)
        return rows.shape[0] > 1 and np.unique(rows, axis=0).shape[0] < rows.shape[0]
    return cond


def _count(arg: Any, pred: str) -> int:
    if not isinstance(arg, int) or isinstance(arg, bool) or arg < 0:
        raise _Bad(f"{pred} takes a non-negative integer, got {arg!r}", f"write e.g. {pred}: 2")
    return arg


def p_opset_below(arg: Any, ops: tuple[str, ...]) -> Cond:
    k = _count(arg, "opset_below")
    return lambda n: n.opset < k


def p_outputs_at_least(arg: Any, ops: tuple[str, ...]) -> Cond:
    k = _count(arg, "outputs_at_least")
    return lambda n: sum(1 for o in n.node.output if o) >= k


def p_unknown(arg: Any, ops: tuple[str, ...]) -> Cond:
    """unknown: 'why' — which nodes hold it cannot be told from a node (a converter's fallback for some configurations
    the message does not name): never known to hold, so a campaign spares no node of the operator."""
    if not isinstance(arg, str) or not arg.strip():
        raise _Bad(f"unknown takes the reason as text, got {arg!r}", "write unknown: 'why the node cannot tell'")
    return lambda n: None


def p_not(arg: Any, ops: tuple[str, ...]) -> Cond:
    inner = compile_condition(arg, ops)

    def cond(n: _NodeView) -> Tri:
        r = inner(n)
        return None if r is None else not r
    return cond


def p_any(arg: Any, ops: tuple[str, ...]) -> Cond:
    inner = [compile_condition(c, ops) for c in _list_of(arg, "any")]
    return lambda n: _any(c(n) for c in inner)


PREDICATES: dict[str, Callable[[Any, tuple[str, ...]], Cond]] = {
    name[2:]: fn for name, fn in list(globals().items()) if name.startswith("p_") and callable(fn)
}


def compile_condition(raw: Any, ops: tuple[str, ...]) -> Cond:
    """One YAML condition ({predicate: argument}) into a function of a node view."""
    if not isinstance(raw, dict) or len(raw) != 1:
        raise _Bad(f"a condition is one {{predicate: argument}} mapping, got {raw!r}",
                   "write one predicate per list item, e.g. - has_nan: 0")
    (name, arg), = raw.items()
    if name not in PREDICATES:
        raise _Bad(f"unknown predicate {name!r}", f"use one of {', '.join(sorted(PREDICATES))} (noise/README.md)")
    return PREDICATES[name](arg, ops)


# ---------------------------------------------------------------------------------------------
