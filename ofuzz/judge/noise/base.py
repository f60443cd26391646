"""The noise classes' shared pieces: errors, the results they give (Gap, Undefined), operator and type facts."""
from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper


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


