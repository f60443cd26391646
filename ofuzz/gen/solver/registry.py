"""The solver's rules: how a block is made to fit the shapes at hand, one function each, registered by name.

To add a rule: write `fn(b: Builder, ins: list[T], p: dict, blk: Block) -> list[T]` in the rules_*.py module of its kind
and decorate it with `@rule("name", reads=(...))`, listing every parameter it reads; a corpus block then says `rule: name`
and may only give parameters the rule reads (or, for `passthrough` rules, ONNX attributes of its operator).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ofuzz.gen.blocks import Block
from ofuzz.gen.solver.builder import Builder, T

RuleFn = Callable[[Builder, list[T], dict[str, Any], Block], list[T]]


@dataclass(frozen=True)
class Rule:
    name: str
    fn: RuleFn
    max_in: int  # inputs it takes; more are merged first
    passthrough: bool  # every parameter becomes an ONNX attribute
    scalar_ok: bool  # accepts rank-0 inputs as they are
    known: frozenset[str]  # the parameters it reads (the corpus may give no others)
    doc: str = ""


RULES: dict[str, Rule] = {}


def rule(name: str, *, reads: tuple[str, ...] = (), max_in: int = 1, passthrough: bool = False,
         scalar_ok: bool = False) -> Callable[[RuleFn], RuleFn]:
    """Register `fn` as the rule `name` (see the module docstring)."""
    def register(fn: RuleFn) -> RuleFn:
        if name in RULES:
            raise ValueError(f"solver rule {name!r} is registered twice ({RULES[name].fn.__module__} and {fn.__module__})")
        RULES[name] = Rule(name, fn, max_in, passthrough, scalar_ok, frozenset(reads), (fn.__doc__ or "").strip().split("\n")[0])
        return fn
    return register
