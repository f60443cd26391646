"""Rule registry and the per-block dispatch (adapters, then the block's rule).

The corpus says *which* operators and *which* parameter ranges; a rule says
*how* to make one fit the shapes at hand.  Adding an operator that behaves
like an existing one is a YAML edit; a new kind of operator is one function.
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable

from onnx import defs

from ofuzz.blocks import Block, CorpusError
from ofuzz.solver.adapters import guard_domain, merge_into, nearest_rank, norm_axis, reshape, to_dtype, to_rank
from ofuzz.solver.builder import DTYPE_NAMES, Builder, T
from ofuzz.solver.rules_basic import RULES_BASIC
from ofuzz.solver.rules_seq import RULES_SEQ
from ofuzz.solver.rules_shape import RULES_SHAPE
from ofuzz.solver.rules_spatial import RULES_SPATIAL

RuleFn = Callable[[Builder, list[T], dict[str, Any], Block], list[T]]
OPSET = 17


@dataclass(frozen=True)
class Rule:
    fn: RuleFn
    max_in: int
    passthrough: bool  # every parameter becomes an ONNX attribute
    scalar_ok: bool  # accepts rank-0 inputs as they are
    known: frozenset[str]


_MAX_IN = {"binary": 2, "mod": 2, "where": 3, "variadic": 8, "concat": 8, "einsum": 2, "matmul": 2, "gemm": 2}
_PASSTHROUGH = {"unary", "axis"}
_SCALAR_OK = {"unary", "binary", "variadic", "mod", "where", "clip", "cast"}


def _known_params(fn: RuleFn) -> frozenset[str]:
    """Parameter names a rule reads (p.get("x"), p["x"], "x" in p), from its source and its helpers'."""
    seen: set[Any] = set()
    todo = [fn]
    src = ""
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        src += inspect.getsource(f)
        for name in f.__code__.co_names:
            g = f.__globals__.get(name)
            if inspect.isfunction(g) and g.__module__ == f.__module__:
                todo.append(g)
    names = set(re.findall(r'p(?:\.get\(|\[)"(\w+)"', src)) | set(re.findall(r'"(\w+)" in p\b', src))
    for group in re.findall(r"for key in \(([^)]*)\)", src):
        names |= set(re.findall(r'"(\w+)"', group))
    return frozenset(names)


RULES: dict[str, Rule] = {
    name: Rule(fn, _MAX_IN.get(name, 1), name in _PASSTHROUGH, name in _SCALAR_OK, _known_params(fn))
    for name, fn in {**RULES_BASIC, **RULES_SPATIAL, **RULES_SHAPE, **RULES_SEQ}.items()
}


def validate_block(blk: Block, blocks: dict[str, Block]) -> None:
    """Check a block against its rule and the ONNX schema; raise CorpusError naming the field."""
    where = f"{blk.source}: block {blk.name}"
    if blk.is_subgraph:
        return
    rule = RULES.get(blk.rule)
    if rule is None:
        raise CorpusError(f"{where}: field rule: unknown rule {blk.rule!r}; known rules: {', '.join(sorted(RULES))}")
    try:
        schema = defs.get_schema(blk.op, OPSET)
    except Exception:
        raise CorpusError(f"{where}: field op: {blk.op!r} is not an ONNX operator at opset {OPSET}") from None
    for spec in blk.params:
        if rule.passthrough:
            if spec.name not in schema.attributes:
                raise CorpusError(
                    f"{where}: field params.{spec.name}: {blk.op} has no attribute {spec.name!r} (attributes: {', '.join(sorted(schema.attributes)) or 'none'})"
                )
        elif spec.name not in rule.known:
            raise CorpusError(
                f"{where}: field params.{spec.name}: rule {blk.rule!r} does not read {spec.name!r} (it reads: {', '.join(sorted(rule.known)) or 'nothing'})"
            )


def apply_block(b: Builder, blk: Block, ins: list[T], params: dict[str, Any]) -> list[T]:
    """Adapt inputs (arity, dtype, rank, domain) and run the block's rule."""
    rule = RULES[blk.rule]
    ins = merge_into(b, ins, rule.max_in)
    accepted = [DTYPE_NAMES[d] for d in blk.dtypes]
    ins = [to_dtype(b, t, accepted) for t in ins]
    first = ins[0]
    if blk.ranks:
        first = to_rank(b, first, nearest_rank(first.rank, blk.ranks))
    elif first.rank == 0 and (not rule.scalar_ok or "axis" in params):
        first = reshape(b, first, (1,))
    if blk.domain and b.rng.random() < 0.9:
        first = guard_domain(b, first, blk.domain)
    ins[0] = first
    p = dict(params)
    if rule.passthrough and isinstance(p.get("axis"), int) and first.rank:
        p["axis"] = norm_axis(p["axis"], first.rank)
    return rule.fn(b, ins, p, blk)
