"""Block corpus: operators and subgraphs as data (`opsets/*.yaml`).

A user extends the corpus by editing YAML; every problem is reported as one
line naming file, block and field, because a fuzzer that dies on a typo in a
data file after an hour of work is worse than one that refuses to start.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import numpy as np
import yaml

from ofuzz.core.paths import shipped_dir
from ofuzz.gen.blocks import (BLOCK_FIELDS, DEFAULT_OUT_DEGREE, KNOWN_DOMAINS, KNOWN_DTYPES, Block, Corpus, CorpusError, InnerOp,
                          ParamSpec)
from ofuzz.gen.solver.rules import validate_block

# ---------------------------------------------------------------------------
# loading and validation
# ---------------------------------------------------------------------------

def default_corpus_dir() -> Path:
    """`opsets/` beside the package (source checkout) or inside it (installed)."""
    found = shipped_dir("opsets")
    if found:
        return found
    raise CorpusError("default corpus not found: expected an opsets/ folder beside the ofuzz package; pass --corpus PATH")


def _degrees(value: Any, where: str, allow_zero: bool) -> frozenset[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, str) and ".." in value:
        lo, _, hi = value.partition("..")
        try:
            value = list(range(int(lo), int(hi) + 1))
        except ValueError:
            raise CorpusError(f"{where}: expected 'LO..HI', got {value!r}") from None
    if not isinstance(value, list) or not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise CorpusError(f"{where}: expected a non-empty list of integers or 'LO..HI', got {value!r}")
    low = 0 if allow_zero else 1
    if any(v < low or v > 64 for v in value):
        raise CorpusError(f"{where}: degrees must lie in {low}..64, got {value!r}")
    return frozenset(value)


def _param(name: str, raw: Any, where: str) -> ParamSpec:
    if isinstance(raw, list):
        raw = {"choice": raw}
    elif not isinstance(raw, dict):
        raw = {"choice": [raw]}
    keys = set(raw)
    if keys - {"choice", "weights", "range", "int"} or len(keys & {"choice", "range", "int"}) != 1:
        raise CorpusError(f"{where}: give exactly one of choice: [..], range: [lo, hi], int: [lo, hi] (optional weights with choice); got keys {sorted(keys)}")
    if "choice" in raw:
        vals = raw["choice"]
        if not isinstance(vals, list) or not vals:
            raise CorpusError(f"{where}: choice must be a non-empty list")
        weights = raw.get("weights")
        if weights is not None:
            if not isinstance(weights, list) or len(weights) != len(vals) or any(not isinstance(w, (int, float)) or w < 0 for w in weights) or sum(weights) <= 0:
                raise CorpusError(f"{where}: weights must be non-negative numbers, one per choice")
            weights = tuple(float(w) for w in weights)
        return ParamSpec(name, "choice", tuple(_freeze(v) for v in vals), weights)
    kind = "range" if "range" in raw else "int"
    bounds = raw[kind]
    if not isinstance(bounds, list) or len(bounds) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds):
        raise CorpusError(f"{where}: {kind} must be [lo, hi]")
    lo, hi = bounds
    if kind == "int" and not all(isinstance(b, int) for b in bounds):
        raise CorpusError(f"{where}: int bounds must be integers")
    if lo > hi:
        raise CorpusError(f"{where}: lower bound {lo} exceeds upper bound {hi}")
    return ParamSpec(name, kind, lo=lo, hi=hi)


def _freeze(v: Any) -> Any:
    return tuple(_freeze(x) for x in v) if isinstance(v, list) else v


def _block(raw: Any, defaults: dict[str, Any], src: str, index: int) -> Block:
    """One corpus entry, validated field by field: a single operator (op) or a subgraph (ops + edges)."""
    if not isinstance(raw, dict):
        raise CorpusError(f"{src}: block #{index}: expected a mapping with at least 'name', got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise CorpusError(f"{src}: block #{index}: field name: missing or not a string")
    where = f"{src}: block {name}"
    unknown = set(raw) - BLOCK_FIELDS
    if unknown:
        raise CorpusError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(BLOCK_FIELDS)}")
    data = {**defaults, **raw}
    is_sub = "ops" in raw
    if is_sub and "op" in raw:
        raise CorpusError(f"{where}: give either op (an operator) or ops + edges (a subgraph), not both")
    op = data.get("op") if not is_sub else None
    if not is_sub and (not isinstance(op, str) or not op):
        raise CorpusError(f"{where}: field op: missing (the ONNX operator type, e.g. Conv)")
    specs, constraints = _params_and_constraints(data, where)
    dtypes, ranks, domain = _types(data, where)
    out_degree = _degrees(data["out_degree"], f"{where}: field out_degree", True) if "out_degree" in data else DEFAULT_OUT_DEGREE
    ops: tuple[InnerOp, ...] = ()
    edges: tuple[tuple[int, int], ...] = ()
    if is_sub:
        ops, edges, in_degree = _subgraph(raw, where)
    else:
        in_degree = _degrees(data.get("in_degree", [1]), f"{where}: field in_degree", False)
    return Block(
        name=name, source=src, op=op, rule=str(data.get("rule", "unary")) if not is_sub else "subgraph",
        in_degree=in_degree, out_degree=out_degree, params=specs, constraints=tuple(constraints),
        dtypes=tuple(dtypes), ranks=tuple(ranks) if ranks else None, domain=domain, ops=ops, edges=edges,
        paper=data.get("paper") if "paper" in raw else None, doc=str(raw.get("doc", "")),
        opsets=_opsets(data.get("opsets"), where),
    )


def _params_and_constraints(data: dict[str, Any], where: str) -> tuple[tuple[ParamSpec, ...], list[str]]:
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise CorpusError(f"{where}: field params: expected a mapping name -> space")
    bad = [k for k in params if not isinstance(k, str)]
    if bad:
        raise CorpusError(f"{where}: field params: parameter name {bad[0]!r} is not a string (quote it: YAML reads on/off/yes/no as booleans)")
    specs = tuple(_param(k, v, f"{where}: field params.{k}") for k, v in params.items())
    constraints = data.get("constraints") or []
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise CorpusError(f"{where}: field constraints: expected a list of expressions")
    for c in constraints:
        try:
            compile(c, "<constraint>", "eval")
        except SyntaxError as exc:
            raise CorpusError(f"{where}: field constraints: {c!r} is not a valid expression ({exc.msg})") from None
    return specs, constraints


def _types(data: dict[str, Any], where: str) -> tuple[list[str], list[int] | None, str | None]:
    dtypes = data.get("dtypes", ["float32"])
    if not isinstance(dtypes, list) or not dtypes or any(d not in KNOWN_DTYPES for d in dtypes):
        raise CorpusError(f"{where}: field dtypes: expected a list from {list(KNOWN_DTYPES)}, got {dtypes!r}")
    ranks = data.get("ranks")
    if ranks is not None and (not isinstance(ranks, list) or not ranks or any(not isinstance(r, int) or not 1 <= r <= 6 for r in ranks)):
        raise CorpusError(f"{where}: field ranks: expected a list of ranks in 1..6, got {ranks!r}")
    domain = data.get("domain")
    if domain is not None and domain not in KNOWN_DOMAINS:
        raise CorpusError(f"{where}: field domain: expected one of {list(KNOWN_DOMAINS)}, got {domain!r}")
    return dtypes, ranks, domain


def _subgraph(raw: dict[str, Any], where: str) -> tuple[tuple[InnerOp, ...], tuple[tuple[int, int], ...], frozenset[int]]:
    """A subgraph block's inner operators, its forward edges (one output op) and the in-degree they give."""
    raw_ops = raw["ops"]
    if not isinstance(raw_ops, list) or len(raw_ops) < 2:
        raise CorpusError(f"{where}: field ops: a subgraph needs a list of at least two operator blocks")
    inner = []
    for j, o in enumerate(raw_ops):
        if isinstance(o, str):
            inner.append(InnerOp(o))
        elif isinstance(o, dict) and isinstance(o.get("block"), str) and set(o) <= {"block", "params"}:
            pins = o.get("params") or {}
            if not isinstance(pins, dict):
                raise CorpusError(f"{where}: field ops[{j}].params: expected a mapping")
            inner.append(InnerOp(o["block"], {k: tuple(_freeze(v) for v in (vs if isinstance(vs, list) else [vs])) for k, vs in pins.items()}))
        else:
            raise CorpusError(f"{where}: field ops[{j}]: expected a block name or {{block: NAME, params: {{...}}}}")
    ops = tuple(inner)
    raw_edges = raw.get("edges")
    if not isinstance(raw_edges, list) or not raw_edges:
        raise CorpusError(f"{where}: field edges: a subgraph needs its inner edges as [[src, dst], ...]")
    el = []
    for e in raw_edges:
        if not (isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) for x in e)):
            raise CorpusError(f"{where}: field edges: {e!r} is not a [src, dst] pair of indices")
        s, d = e
        if not (0 <= s < len(ops) and 0 <= d < len(ops)) or s == d:
            raise CorpusError(f"{where}: field edges: {e!r} must join two distinct ops among 0..{len(ops) - 1}")
        if s >= d:
            raise CorpusError(f"{where}: field edges: {e!r} must point forward (src < dst) so the subgraph is acyclic")
        el.append((s, d))
    edges = tuple(el)
    srcs = {s for s, _ in edges}
    sinks = [i for i in range(len(ops)) if i not in srcs]
    if len(sinks) != 1:
        raise CorpusError(f"{where}: field edges: a subgraph needs exactly one output op (an op no edge leaves), found {sinks}")
    n_in = sum(1 for i in range(len(ops)) if i not in {d for _, d in edges})
    in_degree = frozenset({n_in})
    if "in_degree" in raw and _degrees(raw["in_degree"], f"{where}: field in_degree", False) != in_degree:
        raise CorpusError(f"{where}: field in_degree: the subgraph's edges give in-degree {n_in}")
    return ops, edges, in_degree


def _opsets(raw: Any, where: str) -> tuple[int, int]:
    """`opsets: [18, 99]` (or [18]): the ONNX versions a block exists at."""
    if raw is None:
        return (1, 99)
    if isinstance(raw, int):
        raw = [raw]
    if not (isinstance(raw, list) and 1 <= len(raw) <= 2 and all(isinstance(v, int) and 1 <= v <= 99 for v in raw)):
        raise CorpusError(f"{where}: field opsets: expected [FIRST] or [FIRST, LAST] ONNX versions (for example [18] or [13, 19])")
    lo, hi = raw[0], raw[-1] if len(raw) == 2 else 99
    if lo > hi:
        raise CorpusError(f"{where}: field opsets: {raw} is empty (first > last)")
    return (lo, hi)


def load_file(path: Path) -> list[Block]:
    src = str(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise CorpusError(f"{src}: not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    except OSError as exc:
        raise CorpusError(f"{src}: cannot read corpus file ({exc.strerror})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("blocks"), list):
        raise CorpusError(f"{src}: expected a mapping with a 'blocks:' list (see opsets/README.md)")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise CorpusError(f"{src}: field defaults: expected a mapping")
    return [_block(b, defaults, src, i) for i, b in enumerate(doc["blocks"])]


def load_corpus(paths: Iterable[Path] | Path | None = None) -> Corpus:
    """Load and validate a corpus from files or folders (default: the shipped opsets/)."""
    if paths is None:
        paths = [default_corpus_dir()]
    elif isinstance(paths, (str, Path)):
        paths = [Path(paths)]
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files.extend(sorted(p.glob("*.yaml")))
        elif p.is_file():
            files.append(p)
        else:
            raise CorpusError(f"{p}: no such corpus file or folder")
    if not files:
        raise CorpusError(f"no *.yaml corpus files found in {[str(p) for p in paths]}")
    blocks: dict[str, Block] = {}
    for f in files:
        for b in load_file(f):
            if b.name in blocks:
                raise CorpusError(f"{b.source}: block {b.name}: field name: already defined in {blocks[b.name].source}")
            blocks[b.name] = b
    rng = np.random.default_rng(0)
    for b in blocks.values():
        validate_block(b, blocks)
        if b.is_subgraph:
            for j, inner in enumerate(b.ops):
                if inner.block not in blocks or blocks[inner.block].is_subgraph:
                    raise CorpusError(f"{b.source}: block {b.name}: field ops[{j}]: {inner.block!r} is not an operator block of this corpus")
                target = blocks[inner.block]
                for k in inner.params:
                    if target.spec(k) is None:
                        raise CorpusError(f"{b.source}: block {b.name}: field ops[{j}].params.{k}: block {inner.block} has no parameter {k!r}")
        else:
            try:
                b.sample_params(rng)
            except NameError as exc:
                raise CorpusError(f"{b.source}: block {b.name}: field constraints: {exc}") from None
    return Corpus(blocks, tuple(str(f) for f in files))
