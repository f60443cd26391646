"""Noise classes as data: engine capability gaps, spec-undefined results, reference-evaluator gaps.

A differential fuzzer drowns in disagreements that are not bugs: an engine that lacks an operator,
engines differing where the ONNX spec defines no result, and the reference evaluator being wrong
itself. Which cases those are is policy, kept in `noise/*.yaml` (format in `noise/README.md`) so a
user extends it without code; this module only loads and validates the files and implements the
small predicate vocabulary they compose. It imports no engine library (stdlib, numpy, onnx, yaml).
Modules: base (errors, results, operator facts), conditions (the `when:` vocabulary), rules, classes, loader.
"""
from ofuzz.judge.noise.base import ANY_OP, Cond, GROUPS, Gap, KINDS, NoiseError, SECTIONS, Tri, Undefined, canonical_op  # noqa: F401
from ofuzz.judge.noise.conditions import DIVERGENCES, FAILURES, PREDICATES, compile_condition  # noqa: F401
from ofuzz.judge.noise.rules import Family, NodeRule, UnknownShapeRule, UnsupportedRule, engine_matches, version_within  # noqa: F401
from ofuzz.judge.noise.classes import NoiseClasses  # noqa: F401
from ofuzz.judge.noise.loader import TENSOR_TYPES, engine_triage_files, load_noise, noise_dir  # noqa: F401
