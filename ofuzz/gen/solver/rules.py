"""The per-block dispatch: adapters (arity, dtype, rank, domain), then the block's rule from the registry.

The corpus says *which* operators and *which* parameter ranges; a rule says
*how* to make one fit the shapes at hand.  Adding an operator that behaves
like an existing one is a YAML edit; a new kind of operator is one function.
"""
from __future__ import annotations

from typing import Any

from onnx import defs

from ofuzz.gen.blocks import Block, CorpusError
from ofuzz.gen.solver.adapters import guard_domain, merge_into, nearest_rank, norm_axis, reshape, to_dtype, to_rank
from ofuzz.gen.solver.builder import DTYPE_NAMES, Builder, T
from ofuzz.gen.solver import rules_basic, rules_index, rules_linalg, rules_seq, rules_shape, rules_signal, rules_spatial  # noqa: F401  (they register their rules)
from ofuzz.gen.solver.registry import RULES, Rule  # noqa: F401  (Rule: the type callers see)

OPSET = 17


def validate_block(blk: Block, blocks: dict[str, Block]) -> None:
    """Check a block against its rule and the ONNX schema; raise CorpusError naming the field."""
    where = f"{blk.source}: block {blk.name}"
    if blk.is_subgraph:
        return
    rule = RULES.get(blk.rule)
    if rule is None:
        raise CorpusError(f"{where}: field rule: unknown rule {blk.rule!r}; known rules: {', '.join(sorted(RULES))}")
    at = max(OPSET, blk.opsets[0])  # a block of a later version (Mish: 18) is checked at that version
    try:
        schema = defs.get_schema(blk.op, at)
    except Exception:
        raise CorpusError(f"{where}: field op: {blk.op!r} is not an ONNX operator at opset {at}"
                          + ("" if blk.opsets[0] > OPSET else "; give the version it appeared in with opsets: [N]")) from None
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
    accepted = [DTYPE_NAMES[d] for d in _dtypes(b, blk)]
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


def _dtypes(b: Builder, blk: Block) -> tuple[str, ...]:
    """The dtypes a block keeps in this model: a float block's integer forms only in a model with integer inputs, so
    float models (`--int-inputs 0`, the paper's) stay what they were: an integer tensor met there is cast to float."""
    if b.input_dtype is not None or "float32" not in blk.dtypes:
        return blk.dtypes
    return tuple(d for d in blk.dtypes if d not in ("int32", "int64"))
