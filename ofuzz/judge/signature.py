"""Finding signatures: one root cause, one signature (the paper's deduplication).

Conversion/inference failures: engine, status, failure kind, exception type,
normalised message and failing operator.  Comparison failures: engine,
category and the diverging operator.  Normalisation removes addresses, paths,
numbers and our generated tensor/node names so that the same defect hit by
different models folds into one finding.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from ofuzz.core.vocab import DCF, SPLIT

_NODE = re.compile(r"\bn\d+_([A-Z][A-Za-z0-9]*)")
_TENSOR = re.compile(r"\bt\d+_([A-Z][A-Za-z0-9]*)(?:_\d+)?")
_SUBS = [
    (re.compile(r"(Found:|got:?|Tensor)\s*[\[(].*$"), r"\1 ..."),  # dumped values
    (re.compile(r"\[\[.*?\]\]"), "[...]"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0xADDR"),
    (re.compile(r"(/[\w.+-]+)+/?"), "/PATH"),
    (_NODE, r"<\1>"),
    (_TENSOR, r"<t:\1>"),
    (re.compile(r"\binput_\d+\b"), "<input>"),
    (re.compile(r"-?\d+(\.\d+)?(e-?\d+)?"), "N"),
    (re.compile(r"_N\b"), ""),  # per-model layer suffixes (tf.reshape_3 → tf.reshape)
    (re.compile(r"\s+"), " "),
]


def normalise(msg: str, limit: int = 120) -> str:
    line = next((ln for ln in msg.strip().splitlines() if ln.strip()), "")
    for pat, rep in _SUBS:
        line = pat.sub(rep, line)
    return line.strip()[:limit]


_ONNX_OP = re.compile(r"ONNX::([A-Z][A-Za-z0-9]*)")


FAULTHANDLER = "Fatal Python error: "  # how Python's faulthandler starts the stack it prints when a worker crashes


def failing_op(*texts: str) -> str | None:
    for t in texts:
        m = _NODE.search(t or "") or _TENSOR.search(t or "") or _ONNX_OP.search(t or "")
        if m:
            return m.group(1)
    return None


@dataclass(frozen=True)
class Signature:
    """A finding's signature as a record; `render()` is the string the store keys on, `parse()` its inverse.

    DCF: engine|DCF|category|op.  Failures: engine|status|kind|etype|op|message.
    Why a type: the reducer and the tests used to parse the string by position.
    """

    engine: str
    status: str
    kind: str = ""  # DCF: the mismatch category (value, nan, inf, shape, ...); else exception | crash | timeout | ...
    etype: str = ""  # exception type or signal name (failures only)
    op: str = "?"
    text: str = ""  # normalised message (failures only)

    def render(self) -> str:
        if self.status == DCF:
            return f"{self.engine}|DCF|{self.kind}|{self.op}"
        return f"{self.engine}|{self.status}|{self.kind}|{self.etype}|{self.op}|{self.text}"

    @staticmethod
    def parse(s: str) -> "Signature":
        parts = s.split("|", 5)
        if len(parts) >= 2 and parts[1] == DCF and len(parts) == 4:
            return Signature(parts[0], DCF, parts[2], op=parts[3])
        if parts[0] == SPLIT and len(parts) == 4:
            return Signature(parts[1], parts[2], parts[3], op="?")
        parts += [""] * (6 - len(parts))
        return Signature(parts[0], parts[1], parts[2], parts[3], parts[4] or "?", parts[5])

    @property
    def failure(self) -> str:
        """What a reduction must keep: the failure kind and type (IF/MCF), or the diverging op (DCF)."""
        return self.op if self.status == DCF else f"{self.kind}|{self.etype}"


def signature(engine: str, status: str, outcome: Any, diverging: dict[str, Any] | None = None, category: str = "", op: str | None = None) -> str:
    return make_signature(engine, status, outcome, diverging, category, op).render()


def make_signature(engine: str, status: str, outcome: Any, diverging: dict[str, Any] | None = None, category: str = "",
                   op: str | None = None) -> Signature:
    """`op`: the failing operator when the caller knows it (the engine named the node), else read from the message."""
    if status == DCF:
        op = (diverging or {}).get("op") or "?"
        return Signature(engine, DCF, category or (diverging or {}).get("category", ""), op=op)
    kind = getattr(outcome, "kind", "")
    etype = getattr(outcome, "etype", "") or getattr(outcome, "signal", "")
    msg = getattr(outcome, "message", "") or ""
    tail = getattr(outcome, "log_tail", "") or ""
    op = op or failing_op(msg, tail) or "?"
    text = normalise(msg) if msg else normalise(_last_error_line(tail))
    return Signature(engine, status, kind, etype, op, text)


def _last_error_line(tail: str) -> str:
    tail = tail.split(FAULTHANDLER, 1)[0]  # the worker's stack at a crash is for the report, not the signature
    lines = [ln for ln in tail.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.search(r"error|fail|abort|assert|exception", ln, re.I):
            return ln
    return lines[-1] if lines else ""


def finding_id(signature: str) -> str:
    """A short stable id for a signature: the name of its repro folder and what `ofuzz repro` takes."""
    return hashlib.sha1(signature.encode()).hexdigest()[:10]
