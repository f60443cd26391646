"""Noise classes as data: engine capability gaps, spec-undefined results, reference-evaluator gaps.

A differential fuzzer drowns in disagreements that are not bugs: an engine that lacks an operator,
engines differing where the ONNX spec defines no result, and the reference evaluator being wrong
itself. Which cases those are is policy, kept in `noise/*.yaml` (format in `noise/README.md`) so a
user extends it without code; this module only loads and validates the files and implements the
small predicate vocabulary they compose. It imports no engine library (stdlib, numpy, onnx, yaml).
"""
from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper, numpy_helper

from ofuzz.core.paths import CHECKOUT, shipped_dir

Tri = bool | None  # a condition over unknown values is unknown (None), not false
Cond = Callable[["_NodeView"], Tri]
SECTIONS = ("unsupported", "undefined", "reference_gaps", "families", "upstream_unknown_shape")
KINDS = ("float", "int", "uint", "bool", "string", "complex")
GROUPS = {"op", "attribute"}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DEFAULT_DOMAINS = ("", "ai.onnx")
ANY_OP = "*"  # an undefined rule for every operator (the NaN policy)


class NoiseError(ValueError):
    """A noise file is malformed. One line: "<file>: entry <n> (<name>): <problem>; <how to fix>"."""


def _error(file: str, n: int, name: str, problem: str, fix: str) -> NoiseError:
    """The one-line error; entries count from 1, entry 0 is the file itself."""
    return NoiseError(re.sub(r"\s*\n\s*", " ", f"{file}: entry {n} ({name}): {problem}; {fix}"))


class _Bad(Exception):
    """A problem inside one entry; the loader adds file, entry number and name."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem, self.fix = problem, fix


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Gap:
    """An engine capability gap recognised in a failure message."""

    engine: str
    op: str | None
    attribute: str | None
    rule: str

    def key(self) -> str:
        """"engine|op|attribute" (unknown parts empty), the row of a capability table."""
        return f"{self.engine}|{self.op or ''}|{self.attribute or ''}"


@dataclass(frozen=True)
class Undefined:
    """A node whose result the ONNX spec leaves undefined for the given inputs."""

    rule: str
    op: str
    why: str


# ---------------------------------------------------------------------------------------------
# ONNX facts (cached: the schema tables are large and never change within a process)


@functools.lru_cache(maxsize=1)
def _op_table() -> dict[str, str]:
    """Canonical ONNX operator names keyed by lower case without underscores (`op_lstm.py` -> LSTM)."""
    return {s.name.lower().replace("_", ""): s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in _DEFAULT_DOMAINS}


@functools.cache
def _op_facts(op: str) -> tuple[frozenset[str], int]:
    """Attribute names over every version of an operator, and its largest input count."""
    schemas = [s for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain in _DEFAULT_DOMAINS]
    return frozenset(a for s in schemas for a in s.attributes), max((s.max_input for s in schemas), default=0)


@functools.cache
def _schema(op: str, opset: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return None


def canonical_op(text: str | None) -> str | None:
    """The ONNX operator a name refers to (case and underscores ignored), None if it is not one."""
    return _op_table().get(text.lower().replace("_", "")) if text else None


def _type_name(elem_type: Any) -> str:
    try:
        return TensorProto.DataType.Name(int(elem_type))
    except (ValueError, TypeError):
        return ""


def _kind_of_type(elem_type: Any) -> str | None:
    name = _type_name(elem_type)
    if name.startswith(("FLOAT", "BFLOAT", "DOUBLE")):
        return "float"
    if name.startswith(("UINT", "INT")):
        return "uint" if name.startswith("U") else "int"
    return {"BOOL": "bool", "STRING": "string", "COMPLEX64": "complex", "COMPLEX128": "complex"}.get(name)


def _int_range(elem_type: Any) -> tuple[int, int] | None:
    """[lo, hi + 1) of an integer element type; None for every other type."""
    m = re.fullmatch(r"(U?)INT(\d+)", _type_name(elem_type))
    if not m:
        return None
    bits = int(m.group(2))
    return (0, 2**bits) if m.group(1) else (-(2 ** (bits - 1)), 2 ** (bits - 1))


def _elem_type_of(a: np.ndarray) -> int | None:
    try:
        return helper.np_dtype_to_tensor_dtype(a.dtype)
    except (KeyError, ValueError, TypeError):
        return None


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
        schema = _schema(self.node.op_type, self.opset)
        spec = schema.attributes.get(name) if schema is not None else None
        if spec is None or spec.default_value.type == onnx.AttributeProto.UNDEFINED:
            return None
        return _plain(helper.get_attribute_value(spec.default_value))


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
FAILURES = (*DIVERGENCES, "crash", "exit", "oom", "timeout", "exception", "upstream")  # a root key's failure class


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
# Rules


def engine_matches(engine: str, patterns: tuple[str, ...]) -> bool:
    """fnmatch patterns over an engine's name; a pinned version (mnn@3.5.0) also answers to its engine's name,
    since a version speaks with the same messages and code paths unless a rule names versions itself."""
    names = {engine, engine.partition("@")[0]}
    return any(fnmatch.fnmatchcase(n, p) for n in names for p in patterns)


@dataclass(frozen=True)
class Family:
    """Operators one engine implements with one code path: a defect there is one root cause under every name."""

    name: str
    engines: tuple[str, ...]
    ops: tuple[str, ...]
    why: str
    min_inputs: int = 0  # only nodes with at least this many inputs (N-ary forms)
    source: str = ""
    failures: tuple[str, ...] = ()  # only these failure classes (value, inf, crash, exception:ValueError ...); empty: any
    input_ranks: tuple[int, ...] = ()  # only nodes whose first input has one of these ranks (MNN's 1-D Conv); empty: any
    # only nodes that give each of these attributes a value other than the one that leaves it unused (dilations 1):
    # MNN ignores pool dilations, so a pool's wrong shape is that defect only where dilations are set
    attr_not: tuple[tuple[str, float], ...] = ()
    input_dtypes: tuple[str, ...] = ()  # only nodes whose first input has one of these types (MNN's integer MatMul)

    def holds(self, engine: str, op: str, n_inputs: int, failure: str = "", rank: int | None = None,
              attrs: dict[str, Any] | None = None, dtype: str | None = None) -> bool:
        return (op in self.ops and n_inputs >= self.min_inputs and engine_matches(engine, self.engines)
                and (not self.failures or failure in self.failures or failure.split(":")[0] in self.failures)
                and (not self.input_ranks or rank in self.input_ranks)
                and (not self.input_dtypes or dtype in self.input_dtypes)
                and all(_differs(attrs or {}, name, unused) for name, unused in self.attr_not))


def _differs(attrs: dict[str, Any], name: str, unused: float) -> bool:
    """The node gives `name` and some element of it is not `unused` (a list attribute counts element-wise)."""
    if name not in attrs:
        return False
    value = attrs[name]
    return any(v != unused for v in (value if isinstance(value, (list, tuple)) else [value]))


@dataclass(frozen=True)
class UnknownShapeRule:
    """An engine that plans a converted graph on static shapes: an `upstream` failure (the consumer runs fine alone on
    the values it got) whose culprit hands on a tensor of unknown static shape is one defect, whatever produced the
    tensor (Expand, ConstantOfShape, CenterCropPad with a run-time shape) and whichever consumer tripped on it."""

    name: str
    engines: tuple[str, ...]
    why: str
    source: str = ""


@dataclass(frozen=True)
class UnsupportedRule:
    """Failure messages of some engines that mean a construct is not supported."""

    name: str
    engines: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    op: str | None = None
    attribute: str | None = None
    op_from: tuple[re.Pattern[str], ...] = ()
    source: str = ""
    divergences: tuple[str, ...] = ()  # instead of patterns: the engine runs `op` but by design differs this way (dtype, ...)
    skip_when: tuple[Cond, ...] | None = None  # which nodes of the op hold the gap (None: see NoiseClasses.holds_gap)

    def covers(self, engine: str) -> bool:
        return engine_matches(engine, self.engines)

    def match(self, engine: str, message: str, log_tail: str = "", op_hint: str | None = None) -> Gap | None:
        """The gap this rule sees in a failure (message first, then the log tail), if any."""
        if not self.patterns or not self.covers(engine):
            return None
        texts = [_ANSI.sub("", message or ""), _ANSI.sub("", log_tail or "")]
        m = _first_match(self.patterns, texts)
        if m is None:
            return None
        groups = m.groupdict()
        found = [f.group("op") for rx in self.op_from for t in texts if (f := rx.search(t))]
        candidates = [groups.get("op"), self.op, *found, op_hint]
        op = next((c for c in map(canonical_op, candidates) if c), None)
        return Gap(engine, op, groups.get("attribute") or self.attribute, self.name)


def _first_match(patterns: tuple[re.Pattern[str], ...], texts: list[str]) -> re.Match[str] | None:
    for rx in patterns:
        for t in texts:
            m = rx.search(t)
            if m:
                return m
    return None


@dataclass(frozen=True)
class NodeRule:
    """Conditions (all must hold) on one node of some ops; `text` is the spec quote or the reason."""

    name: str
    ops: frozenset[str]
    when: tuple[Cond, ...]
    text: str
    source: str = ""
    except_ops: frozenset[str] = frozenset()  # with ops ['*']: operators whose spec does say (Ceil/Floor/Round/Mod on NaN)

    def evaluate(self, view: _NodeView) -> Tri:
        op = view.node.op_type
        if (ANY_OP not in self.ops and op not in self.ops) or op in self.except_ops or view.node.domain not in _DEFAULT_DOMAINS:
            return False
        return _all(c(view) for c in self.when)


# ---------------------------------------------------------------------------------------------
# The loaded classes


@dataclass(frozen=True)
class NoiseClasses:
    """Every loaded rule, with the matchers the oracle calls."""

    unsupported_rules: tuple[UnsupportedRule, ...] = ()
    undefined_rules: tuple[NodeRule, ...] = ()
    reference_gap_rules: tuple[NodeRule, ...] = ()
    sources: tuple[str, ...] = ()
    family_rules: tuple[Family, ...] = ()
    unknown_shape_rules: tuple[UnknownShapeRule, ...] = ()

    def unknown_shape(self, engine: str) -> UnknownShapeRule | None:
        """The rule (noise/families.yaml, upstream_unknown_shape) that keys this engine's upstream failures on a tensor of
        unknown static shape, if any."""
        return next((r for r in self.unknown_shape_rules if engine_matches(engine, r.engines)), None)

    def family(self, engine: str, op: str, n_inputs: int, failure: str = "", rank: int | None = None,
               attrs: dict[str, Any] | None = None, dtype: str | None = None) -> Family | None:
        """The engine's operator family a reduced one-node repro belongs to (see noise/families.yaml); `rank` is its
        first input's rank and `dtype` its type (int32, float32 ...), None when unknown (then a family limited to some
        ranks or types does not hold); `attrs` the node's attributes (name -> value). The first family that holds wins."""
        return next((f for f in self.family_rules if f.holds(engine, op, n_inputs, failure, rank, attrs, dtype)), None)

    def by_design(self, engine: str, op: str, divergence: str) -> Gap | None:
        """The documented design choice of an engine that a wrong output of this operator shows (onnx2tf's
        QuantizeLinear returns float fake-quantised values): a capability gap, not a defect."""
        rule = next((r for r in self.unsupported_rules if r.divergences and r.op == op and divergence in r.divergences
                     and r.covers(engine)), None)
        return Gap(engine, op, rule.attribute, rule.name) if rule else None

    def unsupported(self, engine: str, message: str, log_tail: str = "", op_hint: str | None = None) -> Gap | None:
        """The capability gap a failure message shows; the most specific rule (attribute, then op) wins."""
        gaps = [g for r in self.unsupported_rules if (g := r.match(engine, message, log_tail, op_hint))]
        return max(gaps, key=lambda g: (g.attribute is not None, g.op is not None), default=None)

    def holds_gap(self, gap: Gap, view: _NodeView) -> bool:
        """Does this node hold the construct `gap` names (so a campaign spares the engine the model)?

        By the rule's `skip_when` when it has one; else every node of an operator the engine lacks, and for an attribute
        only a value other than the spec's default. Mere presence was too broad: onnx2tf's refusal of Conv
        auto_pad=SAME_LOWER kept every Conv with an explicit auto_pad from TensorFlow, and TF's rank-6 MirrorPad limit
        every Pad with a mode: TensorFlow ran 4,324 of 13,888 models in the seed-76 campaign."""
        if gap.op != view.node.op_type:
            return False
        rule = next((r for r in self.unsupported_rules if r.name == gap.rule), None)
        if rule is not None and rule.skip_when is not None:
            return all(c(view) is True for c in rule.skip_when)
        if not gap.attribute:
            return True
        if not view.has_attr(gap.attribute):
            return False
        default = view.default(gap.attribute)
        return default is None or not _same(view.attr(gap.attribute), default)

    def gap_in(self, model: onnx.ModelProto, gaps: Iterable[Gap]) -> Gap | None:
        """The first of `gaps` some node of the model holds (shape inference runs only for a model that has their ops)."""
        gaps = [g for g in gaps if g.op]
        nodes = [n for n in _all_nodes(model.graph) if n.domain in _DEFAULT_DOMAINS and any(g.op == n.op_type for g in gaps)]
        if not nodes:
            return None
        opset = next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), onnx.defs.onnx_opset_version())
        facts = _ModelFacts.of(model, {})
        for node in nodes:
            view = _NodeView(node, tuple(facts.arg(name) for name in node.input), opset)
            hit = next((g for g in gaps if self.holds_gap(g, view)), None)
            if hit is not None:
                return hit
        return None

    def undefined(self, node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int = 17,
                  divergence: str | None = None) -> Undefined | None:
        """The spec-undefined case this node hits with these input values (unknown values: not undefined);
        `divergence` is how the blamed engine differed there (compare.py's category), for rules that ask."""
        view = _view(node, inputs, opset, divergence)
        rule = next((r for r in self.undefined_rules if r.evaluate(view) is True), None)
        return Undefined(rule.name, node.op_type, rule.text) if rule else None

    def reference_gap(self, node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int = 17) -> str | None:
        """Why the reference evaluator cannot be trusted on this node (an unknown value counts as a hit)."""
        view = _view(node, inputs, opset)
        return next((r.text for r in self.reference_gap_rules if r.evaluate(view) is not False), None)

    def reference_gaps_in(self, model: onnx.ModelProto, values: dict[str, np.ndarray] | None = None) -> list[str]:
        """Every "<node>: <reason>" for the model's nodes; values not given are taken from initializers
        and Constant nodes, types and ranks from shape inference, and anything else counts as a possible hit."""
        opset = next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), onnx.defs.onnx_opset_version())
        facts = _ModelFacts.of(model, values or {})
        out: list[str] = []
        for i, node in enumerate(_all_nodes(model.graph)):
            view = _NodeView(node, tuple(facts.arg(name) for name in node.input), opset)
            for r in self.reference_gap_rules:
                if r.evaluate(view) is not False:
                    line = f"{node.name or f'{node.op_type}#{i}'}: {r.text}"
                    if line not in out:
                        out.append(line)
        return out


def _view(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int, divergence: str | None = None) -> _NodeView:
    args = tuple(_Arg.of(inputs[i] if i < len(inputs) else None, present=bool(name)) for i, name in enumerate(node.input))
    return _NodeView(node, args, opset, divergence)


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Nodes of a graph and of its subgraphs (If/Loop/Scan bodies run on the reference too)."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                yield from _all_nodes(g)


@dataclass
class _ModelFacts:
    """Known values (given, initializers, Constant nodes) and inferred types/shapes by tensor name."""

    values: dict[str, np.ndarray]
    types: dict[str, tuple[int, tuple[int | None, ...] | None]]

    @staticmethod
    def of(model: onnx.ModelProto, given: dict[str, np.ndarray]) -> _ModelFacts:
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # noqa: BLE001 - a model shape inference rejects is still judged, with less known
            inferred = model
        facts = _ModelFacts({}, {})
        facts._collect(inferred.graph)
        facts.values.update({k: np.asarray(v) for k, v in given.items()})
        return facts

    def _collect(self, g: onnx.GraphProto) -> None:
        for vi in [*g.input, *g.value_info, *g.output]:
            tt = vi.type.tensor_type
            if tt.elem_type:
                dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim) if tt.HasField("shape") else None
                self.types[vi.name] = (tt.elem_type, dims)
        for init in g.initializer:
            self.values[init.name] = numpy_helper.to_array(init)
        for node in g.node:
            if node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS and node.output:
                value = _constant_value(node)
                if value is not None:
                    self.values[node.output[0]] = value
            for a in node.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    self._collect(sub)

    def arg(self, name: str) -> _Arg:
        if not name:
            return _Arg(False)
        elem_type, shape = self.types.get(name, (None, None))
        return _Arg.of(self.values.get(name), True, elem_type, shape)


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.name == "value":
            return numpy_helper.to_array(v)
        if a.name in ("value_float", "value_floats"):
            return np.asarray(v, dtype=np.float32)
        if a.name in ("value_int", "value_ints"):
            return np.asarray(v, dtype=np.int64)
    return None


# ---------------------------------------------------------------------------------------------
# Loading and validation

_FIELDS = {
    "unsupported": ({"name", "engines"}, {"patterns", "op", "attribute", "op_from", "doc", "divergence", "skip_when"}),
    "undefined": ({"name", "ops", "why"}, {"when", "doc", "except_ops"}),
    "reference_gaps": ({"name", "ops", "reason"}, {"when", "doc", "except_ops"}),
    "families": ({"name", "engines", "ops", "why"}, {"min_inputs", "doc", "failures", "input_ranks", "attr_not", "input_dtypes"}),
    "upstream_unknown_shape": ({"name", "engines", "why"}, {"doc"}),
}


def noise_dir() -> Path:
    """The shipped `noise/` folder: beside the package in a checkout, or inside it when installed."""
    found = shipped_dir("noise")
    if found:
        return found
    raise _error(str(CHECKOUT / "noise"), 0, "top level", "noise/ folder not found beside the ofuzz package",
                     "reinstall with `pip install -e .` from a checkout, or pass the noise files' paths")


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
        elif p.is_file():
            out.append(p)
        else:
            raise _error(str(p), 0, "top level", "no such file or folder", "pass a noise YAML file or a folder of them")
    return list(dict.fromkeys(f.resolve() for f in out))  # a file named twice (folder and file) loads once


def load_noise(paths: list[Path] | None = None) -> NoiseClasses:
    """Load and validate noise files (default: the shipped `noise/` folder); a folder means its *.yaml files."""
    files = _files(paths if paths is not None else [noise_dir()])
    return _load_cached(tuple((str(f.resolve()), f.stat().st_mtime_ns) for f in files))


@functools.lru_cache(maxsize=16)
def _load_cached(key: tuple[tuple[str, int], ...]) -> NoiseClasses:
    sections: dict[str, list] = {s: [] for s in SECTIONS}
    sources = []
    for file, _ in key:
        doc = _read(Path(file))
        sources += [file] if doc else []
        for section, entries in doc.items():
            for n, raw in enumerate(entries, 1):
                sections[section].append(_entry(section, raw, file, n, sections[section]))
    return NoiseClasses(tuple(sections["unsupported"]), tuple(sections["undefined"]), tuple(sections["reference_gaps"]), tuple(sources),
                        tuple(sections["families"]), tuple(sections["upstream_unknown_shape"]))


def _read(path: Path) -> dict[str, list]:
    """A file's sections, each a list of raw entries."""
    src = str(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise _error(src, 0, "top level", f"YAML syntax error{where}: {getattr(exc, 'problem', None) or exc}",
                         "fix the YAML (indentation; put regexes in single quotes)") from None
    if doc is None or (isinstance(doc, dict) and not set(doc) & set(SECTIONS)):
        return {}  # another consumer's data in the same folder (tolerances.yaml belongs to ofuzz/judge/precision.py)
    if not isinstance(doc, dict) or set(doc) - set(SECTIONS):
        bad = sorted(map(str, set(doc) - set(SECTIONS))) if isinstance(doc, dict) else type(doc).__name__
        raise _error(src, 0, "top level", f"unknown section(s) {bad}", f"a noise file's top level holds only {', '.join(SECTIONS)}")
    for section, entries in doc.items():
        if not isinstance(entries, list):
            raise _error(src, 0, section, f"section {section} must be a list of entries, got {type(entries).__name__}",
                             "start each entry with '- name: ...'")
    return doc


def _entry(section: str, raw: Any, file: str, n: int, earlier: list) -> UnsupportedRule | NodeRule | Family | UnknownShapeRule:
    name = raw.get("name") if isinstance(raw, dict) and isinstance(raw.get("name"), str) else "?"
    try:
        if not isinstance(raw, dict):
            raise _Bad(f"an entry must be a mapping, got {raw!r}", "write '- name: ...' followed by its fields")
        _check_fields(section, raw)
        if any(r.name == name for r in earlier):
            raise _Bad(f"duplicate name in section {section}", "give every entry of a section a unique name")
        if section == "families":
            return _family(raw, file)
        if section == "upstream_unknown_shape":
            return UnknownShapeRule(raw["name"], tuple(_strings(raw, "engines")), raw["why"], file)
        return _unsupported_rule(raw, file) if section == "unsupported" else _node_rule(section, raw, file)
    except _Bad as bad:
        raise _error(file, n, name, bad.problem, bad.fix) from None


def _family(raw: dict, file: str) -> Family:
    ops = [_known_op(o) for o in _strings(raw, "ops")]
    n = raw.get("min_inputs", 0)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _Bad(f"min_inputs must be a non-negative integer, got {n!r}", "write min_inputs: 3 (or leave it out)")
    failures = _strings(raw, "failures", required=False)
    unknown = sorted(f for f in failures if f.split(":")[0] not in FAILURES)  # a class, or class:Type (exception:ValueError)
    if unknown:
        raise _Bad(f"unknown failure class(es) {unknown}", f"use {', '.join(FAILURES)}, or one with its type (exception:ValueError)")
    if len(ops) < 2 and len(failures) < 2:  # one operator: one code path failing in several ways (a shape and an exception)
        raise _Bad(f"a family needs two operators, or one operator and two failure classes; got ops {ops}, failures {failures}",
                   "list every operator the engine implements with that code path, or the failure classes one defect shows")
    ranks = raw.get("input_ranks", [])
    if not isinstance(ranks, list) or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks):
        raise _Bad(f"input_ranks must be a list of non-negative integers, got {ranks!r}", "write input_ranks: [3] (or leave it out)")
    attr_not = raw.get("attr_not", {})
    if not isinstance(attr_not, dict) or not all(isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for k, v in attr_not.items()):
        raise _Bad(f"attr_not must map attribute names to the number that leaves them unused, got {attr_not!r}",
                   "write attr_not: {dilations: 1} (or leave it out)")
    dtypes = _strings(raw, "input_dtypes", required=False)
    bad = [d for d in dtypes if d not in TENSOR_TYPES]
    if bad:
        raise _Bad(f"unknown input_dtypes {bad}", f"use ONNX type names as numpy spells them: {', '.join(sorted(TENSOR_TYPES))}")
    return Family(raw["name"], tuple(_strings(raw, "engines")), tuple(ops), raw["why"], n, file, tuple(failures), tuple(ranks),
                  tuple((k, float(v)) for k, v in attr_not.items()), tuple(dtypes))


TENSOR_TYPES = frozenset({"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16",
                          "uint32", "uint64", "bool"})


def _check_fields(section: str, raw: dict) -> None:
    required, optional = _FIELDS[section]
    unknown, missing = set(raw) - required - optional, required - set(raw)
    if unknown:
        raise _Bad(f"unknown key(s) {sorted(unknown)}", f"{section} entries take {sorted(required | optional)}")
    if missing:
        raise _Bad(f"missing key(s) {sorted(missing)}", f"{section} entries need {sorted(required)}")
    for key in ("name", "why", "reason", "doc", "attribute", "op"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise _Bad(f"{key} must be a non-empty string, got {raw[key]!r}", f"write {key}: some text (quote it if it has ': ')")


def _strings(raw: dict, key: str, required: bool = True) -> list[str]:
    v = raw.get(key, [] if not required else None)
    if not isinstance(v, list) or (required and not v) or not all(isinstance(x, str) and x for x in v):
        what = "non-empty list" if required else "list"
        raise _Bad(f"{key} must be a {what} of strings, got {v!r}", f"write {key}: [a, b] even for one item")
    return v


def _known_op(op: str) -> str:
    if not onnx.defs.has(op):
        raise _Bad(f"unknown ONNX op type {op!r}", "use the operator's exact name from onnx.ai/onnx/operators (case matters)")
    return op


def _regex(p: str, need_op: bool = False) -> re.Pattern[str]:
    try:
        rx = re.compile(p)
    except re.error as exc:
        raise _Bad(f"pattern {p!r} does not compile ({exc})",
                   "fix the regular expression; in YAML single quotes backslashes stay literal") from None
    if set(rx.groupindex) - GROUPS or (need_op and "op" not in rx.groupindex):
        raise _Bad(f"pattern {p!r} has groups {sorted(rx.groupindex)}",
                   "name groups only (?P<op>...) and (?P<attribute>...); op_from needs (?P<op>...)")
    if rx.search("") is not None:
        raise _Bad(f"pattern {p!r} matches an empty message, so it would match every failure", "anchor it on the engine's own words")
    return rx


def _unsupported_rule(raw: dict, file: str) -> UnsupportedRule:
    if ("patterns" in raw) == ("divergence" in raw):
        raise _Bad("an unsupported entry needs exactly one of patterns, divergence",
                   "patterns: [...] for a failure message; divergence: [dtype] with op: for a wrong output by design")
    divergences = _strings(raw, "divergence", required=False)
    if divergences and ("op" not in raw or set(divergences) - set(DIVERGENCES)):
        raise _Bad(f"divergence {divergences} needs op: and categories from {', '.join(DIVERGENCES)}",
                   "write op: QuantizeLinear and divergence: [dtype]")
    op = _known_op(raw["op"]) if "op" in raw else None
    skip_when = raw.get("skip_when")
    if skip_when is not None and (not isinstance(skip_when, list) or not skip_when):
        raise _Bad(f"skip_when must be a non-empty list of conditions, got {skip_when!r}",
                   "write skip_when: followed by '- predicate: argument' items (the when: language of undefined)")
    return UnsupportedRule(
        name=raw["name"], engines=tuple(_strings(raw, "engines")),
        patterns=tuple(_regex(p) for p in _strings(raw, "patterns")) if "patterns" in raw else (),
        op=op, attribute=raw.get("attribute"),
        op_from=tuple(_regex(p, need_op=True) for p in _strings(raw, "op_from", required=False)), source=file,
        divergences=tuple(divergences),
        skip_when=None if skip_when is None else tuple(compile_condition(c, (op,) if op else (ANY_OP,)) for c in skip_when),
    )


def _node_rule(section: str, raw: dict, file: str) -> NodeRule:
    names = _strings(raw, "ops")
    if ANY_OP in names and names != [ANY_OP]:
        raise _Bad(f"ops {names} mixes '*' with operator names", "write ops: ['*'] alone for every operator, or list operators")
    ops = (ANY_OP,) if names == [ANY_OP] else tuple(_known_op(op) for op in names)
    if "except_ops" in raw and ops != (ANY_OP,):
        raise _Bad("except_ops is only for ops: ['*']", "list the operators in ops instead")
    excluded = frozenset(_known_op(op) for op in _strings(raw, "except_ops", required=False))
    when = raw.get("when", [])
    if not isinstance(when, list):
        raise _Bad(f"when must be a list of conditions, got {when!r}", "write when: followed by '- predicate: argument' items")
    text = raw["why"] if section == "undefined" else raw["reason"]
    return NodeRule(raw["name"], frozenset(ops), tuple(compile_condition(c, ops) for c in when), text, file, excluded)
