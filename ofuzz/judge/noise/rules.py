"""The rule types of the noise files: unsupported messages, node rules, engine families (with the versions seen on) and the unknown-shape rule."""
from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from typing import Any

import onnx
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ofuzz.judge.noise.base import ANY_OP, Cond, Gap, Tri, _ANSI, _DEFAULT_DOMAINS, canonical_op
from ofuzz.judge.noise.conditions import _NodeView, _all

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
    # the engine versions the family was seen on (a PEP 440 specifier, "<=3.6.1"): a later release may fix one member,
    # and then the family must not keep merging; empty: any version
    versions: str = ""
    # the hypothesis's test: a rewrite of ofuzz/core/rewrites.py that takes the blamed trigger away, and its arguments
    # as JSON; a member joins only if the engine is right on its repro so rewritten (empty: an untested family)
    test_rewrite: str = ""
    test_args: str = "null"
    # or a reading of ofuzz/core/readings.py: where no rewrite can help, the engine's output read the way the hypothesis
    # says it is wrong must equal the expected one
    test_reading: str = ""
    # the node's omitted schema defaults written out before the rewrite (the same model by the spec): another defect of an
    # omitted default (MNN's keepdims) must not hide the answer of this hypothesis's test
    test_defaults: bool = False
    # only nodes whose attribute takes one of these values ({auto_pad: [SAME_LOWER]}): MNN reads SAME_LOWER as
    # SAME_UPPER, and its Conv and ConvTranspose are other defects' operators too
    attr_in: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @property
    def tested(self) -> bool:
        return bool(self.test_rewrite or self.test_reading)

    def holds(self, engine: str, op: str, n_inputs: int, failure: str = "", rank: int | None = None,
              attrs: dict[str, Any] | None = None, dtype: str | None = None, version: str | None = None) -> bool:
        return ((op in self.ops or ANY_OP in self.ops) and n_inputs >= self.min_inputs and engine_matches(engine, self.engines)
                and version_within(version, self.versions)
                and (not self.failures or failure in self.failures or failure.split(":")[0] in self.failures)
                and (not self.input_ranks or rank in self.input_ranks)
                and (not self.input_dtypes or dtype in self.input_dtypes)
                and all(_differs(attrs or {}, name, unused) for name, unused in self.attr_not)
                and all((attrs or {}).get(name) in values for name, values in self.attr_in if _in_schema(op, name)))


@functools.cache
def _in_schema(op: str, attr: str) -> bool:
    """Does the operator have this attribute at all? An `attr_in` condition speaks of the operators that do: MNN's
    average-pool divisor needs count_include_pad=1 of an AveragePool, while its LpPool has no such attribute and always
    counts the padding (an unknown operator: the condition stands)."""
    try:
        return attr in onnx.defs.get_schema(op).attributes
    except onnx.defs.SchemaError:
        return True


_VERSION = re.compile(r"\d+(?:\.\d+)+")


def version_within(version: str | None, spec: str) -> bool:
    """Does an engine's version string ("3.6.1"; "tensorflow 2.19.0, onnx2tf 1.29.24": its last number, the converter's)
    satisfy `spec` ("<=3.6.1")? An empty spec holds for any version; an unknown version for none."""
    if not spec:
        return True
    found = _VERSION.findall(version or "")
    return bool(found) and SpecifierSet(spec).contains(Version(found[-1]), prereleases=True)


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


