"""Loading and validating noise files (noise/*.yaml and each engine's backends/<engine>/triage.yaml): one-line errors naming the fix."""
from __future__ import annotations

import json
import functools
import re
from pathlib import Path
from typing import Any

import onnx
import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ofuzz.core.paths import CHECKOUT, shipped_dir
from ofuzz.core.readings import READINGS
from ofuzz.core.rewrites import REWRITES
from ofuzz.judge.noise.base import ANY_OP, GROUPS, SECTIONS, _Bad, _error
from ofuzz.judge.noise.conditions import DIVERGENCES, FAILURES, compile_condition
from ofuzz.judge.noise.rules import Family, NodeRule, UnknownShapeRule, UnsupportedRule
from ofuzz.judge.noise.classes import NoiseClasses

# ---------------------------------------------------------------------------------------------
# Loading and validation

_FIELDS = {
    "unsupported": ({"name", "engines"}, {"patterns", "op", "attribute", "op_from", "doc", "divergence", "skip_when"}),
    "undefined": ({"name", "ops", "why"}, {"when", "doc", "except_ops"}),
    "reference_gaps": ({"name", "ops", "reason"}, {"when", "doc", "except_ops"}),
    "families": ({"name", "engines", "ops", "why"}, {"min_inputs", "doc", "failures", "input_ranks", "attr_not", "attr_in", "input_dtypes", "versions", "test"}),
    "upstream_unknown_shape": ({"name", "engines", "why"}, {"doc"}),
}


def noise_dir() -> Path:
    """The shipped `noise/` folder: beside the package in a checkout, or inside it when installed."""
    found = shipped_dir("noise")
    if found:
        return found
    raise _error(str(CHECKOUT / "noise"), 0, "top level", "noise/ folder not found beside the ofuzz package",
                     "reinstall with `pip install -e .` from a checkout, or pass the noise files' paths")


def engine_triage_files() -> list[Path]:
    """Each engine's own triage knowledge (backends/<engine>/triage.yaml: its operator families, the versions they were
    seen on), kept beside the engine; noise/ holds what the ONNX spec says."""
    backends = shipped_dir("backends")
    return sorted(backends.glob("*/triage.yaml")) if backends is not None else []


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
    files = _files(paths if paths is not None else [noise_dir(), *engine_triage_files()])
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
    names = _strings(raw, "ops")
    ops = [ANY_OP] if names == [ANY_OP] else [_known_op(o) for o in names]  # '*': a defect of the converter's core, every operator
    n = raw.get("min_inputs", 0)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _Bad(f"min_inputs must be a non-negative integer, got {n!r}", "write min_inputs: 3 (or leave it out)")
    failures = _strings(raw, "failures", required=False)
    unknown = sorted(f for f in failures if f.split(":")[0] not in FAILURES)  # a class, or class:Type (exception:ValueError)
    if unknown:
        raise _Bad(f"unknown failure class(es) {unknown}", f"use {', '.join(FAILURES)}, or one with its type (exception:ValueError)")
    if ops != [ANY_OP] and len(ops) < 2 and len(failures) < 2:  # one operator: one code path failing in several ways (a shape and an exception)
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
    attr_in = raw.get("attr_in", {})
    if not isinstance(attr_in, dict) or not all(isinstance(k, str) and isinstance(v, list) and v and all(isinstance(x, (str, int, float)) for x in v)
                                                for k, v in attr_in.items()):
        raise _Bad(f"attr_in must map attribute names to the list of values the family holds, got {attr_in!r}",
                   "write attr_in: {auto_pad: [SAME_LOWER]} (or leave it out)")
    dtypes = _strings(raw, "input_dtypes", required=False)
    bad = [d for d in dtypes if d not in TENSOR_TYPES]
    if bad:
        raise _Bad(f"unknown input_dtypes {bad}", f"use ONNX type names as numpy spells them: {', '.join(sorted(TENSOR_TYPES))}")
    versions = raw.get("versions", "")
    try:
        SpecifierSet(versions) if isinstance(versions, str) else None
    except InvalidSpecifier:
        versions = None
    if not isinstance(versions, str):
        raise _Bad(f"versions must be a version specifier such as '<=3.6.1', got {raw.get('versions')!r}",
                   "write the versions the family was seen on: versions: '<=3.6.1' (or leave it out)")
    rewrite, args, reading = _family_test(raw.get("test"))
    return Family(raw["name"], tuple(_strings(raw, "engines")), tuple(ops), raw["why"], n, file, tuple(failures), tuple(ranks),
                  tuple((k, float(v)) for k, v in attr_not.items()), tuple(dtypes), versions, rewrite, json.dumps(args), reading,
                  test_defaults=bool((raw.get("test") or {}).get("defaults_written")),
                  attr_in=tuple((k, tuple(v)) for k, v in attr_in.items()))


def _family_test(test: Any) -> tuple[str, Any, str]:
    """A family's `test: {rewrite: NAME, args: ...}` (ofuzz/core/rewrites.py) or `test: {reading: NAME}`
    (ofuzz/core/readings.py); ("", None, "") when it has none."""
    if test is None:
        return "", None, ""
    if isinstance(test, dict) and set(test) == {"reading"} and test["reading"] in READINGS:
        return "", None, test["reading"]
    if (not isinstance(test, dict) or set(test) - {"rewrite", "args", "defaults_written"} or test.get("rewrite") not in REWRITES
            or not isinstance(test.get("defaults_written", False), bool)):
        raise _Bad(f"test must be {{rewrite: NAME, args: ..., defaults_written: true|false}} with NAME one of {', '.join(sorted(REWRITES))}, or {{reading: NAME}} "
                   f"with NAME one of {', '.join(sorted(READINGS))}; got {test!r}",
                   "write e.g. test: {rewrite: set_attributes, args: {dilations: 1}} (or leave it out)")
    return test["rewrite"], test.get("args"), ""


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
