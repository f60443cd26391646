"""Reduction: shrink a model while its finding keeps the same signature.

One run of the model with every intermediate tensor exposed (on the engine the
oracle trusted) gives the value of every tensor.  Any subset of nodes then forms
a valid model: tensors that cross the cut become graph inputs fed with those
values.  We try the diverging (or failing) node alone first, then delta
debugging (ddmin) over the nodes, and finish with a 1-minimality pass (no
single node can be removed).  Each candidate is judged by the real engines in
their isolated workers; it counts only if the finding reproduces with the same
engine, status and failure kind (and, for a DCF, the same diverging operator).
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from ofuzz import onnx_guard
from ofuzz.judging import Finding, judge_model
from ofuzz.cut import submodel
from ofuzz.localise import expose_intermediates
from ofuzz.runner import EnginePool


@dataclass
class Target:
    engine: str
    status: str
    key: str  # kind|etype (IF/MCF) or category|op (DCF)

    @staticmethod
    def of(f: Finding) -> "Target":
        parts = f.signature.split("|")
        if f.status == "DCF":
            return Target(f.engine, f.status, f"{f.op or '?'}")
        return Target(f.engine, f.status, "|".join(parts[2:4]))

    def matches(self, f: Finding) -> bool:
        return f.engine == self.engine and f.status == self.status and Target.of(f).key == self.key


@dataclass
class Reduced:
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    nodes_before: int
    nodes_after: int
    checks: int
    seconds: float
    one_minimal: bool
    log: list[str] = field(default_factory=list)


def reduce_model(
    pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], target: Target, value_engine: str,
    budget: float = 120.0, start_node: str | None = None, echo: Callable[[str], None] | None = None,
) -> Reduced:
    t0 = time.perf_counter()
    log: list[str] = []
    say = echo or (lambda s: None)
    exposed, names = expose_intermediates(model)
    with tempfile.TemporaryDirectory(dir=pool.root) as d:
        p = Path(d) / "exposed.onnx"
        onnx.save(exposed, str(p))
        res = pool.execute(p, feeds, names, engines=[value_engine])
    prep, run = res[value_engine]
    values: dict[str, np.ndarray] = dict(run.outputs) if run is not None and run.ok else {}
    n0 = len(model.graph.node)
    checks = 0
    cache: dict[tuple[int, ...], bool] = {}

    def test(keep: list[int]) -> bool:
        nonlocal checks
        key = tuple(sorted(keep))
        if key in cache:
            return cache[key]
        if time.perf_counter() - t0 > budget:
            return False
        built = submodel(model, list(key), values, feeds)
        if built is None:
            cache[key] = False
            return False
        m, ins = built
        checks += 1
        with tempfile.TemporaryDirectory(dir=pool.root) as d:
            path = Path(d) / "cand.onnx"
            onnx.save(m, str(path))
            j = judge_model(pool, m, path, ins)
        ok = any(target.matches(f) for f in j.findings)
        cache[key] = ok
        return ok

    items = list(range(n0))
    if not values:
        log.append(f"no intermediate values from {value_engine}; reducing by removal only")
    # 1. the diverging / failing node alone, then it with its producers
    if start_node and values:
        idx = [i for i, n in enumerate(model.graph.node) if n.name == start_node]
        if idx and test(idx):
            items = idx
            log.append(f"cut to the single node {start_node}")
    # 2. ddmin over the nodes
    n = 2
    while len(items) >= 2 and time.perf_counter() - t0 < budget:
        size = -(-len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        for c in chunks:
            comp = [x for x in items if x not in c]
            if comp and test(comp):
                items, n = comp, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    # 3. 1-minimality: no single node can go
    one_min = True
    changed = True
    while changed and len(items) > 1:
        changed = False
        for x in list(items):
            if time.perf_counter() - t0 > budget:
                one_min = False
                break
            rest = [y for y in items if y != x]
            if test(rest):
                items, changed = rest, True
                break
    built = submodel(model, items, values, feeds) if values else None
    if built is None:
        built = (model, feeds)
        items = list(range(n0))
    cur_model, cur_feeds = built

    def check(m: onnx.ModelProto, ins: dict[str, np.ndarray]) -> bool:
        nonlocal checks
        if time.perf_counter() - t0 > budget:
            return False
        checks += 1
        with tempfile.TemporaryDirectory(dir=pool.root) as d:
            path = Path(d) / "cand.onnx"
            onnx.save(m, str(path))
            j = judge_model(pool, m, path, ins)
        return any(target.matches(f) for f in j.findings)

    # 4. simplify attributes: drop each one (back to its default) if the finding stays
    for ni in range(len(cur_model.graph.node)):
        for attr in [a.name for a in cur_model.graph.node[ni].attribute]:
            cand = onnx.ModelProto()
            cand.CopyFrom(cur_model)
            node = cand.graph.node[ni]
            keep = [a for a in node.attribute if a.name != attr]
            del node.attribute[:]
            node.attribute.extend(keep)
            if onnx_guard.valid(cand) and check(cand, cur_feeds):
                cur_model = cand
                log.append(f"dropped attribute {attr} of {node.name}")
    # 5. shrink tensor shapes: halve a dim of every input that has it (together, so broadcasts
    #    still line up), then of each input alone, while the finding stays
    groups = [list(cur_feeds)] + [[n] for n in cur_feeds] if len(cur_feeds) > 1 else [list(cur_feeds)]
    for group in groups:
        rank = max((cur_feeds[n].ndim for n in group), default=0)
        for axis in range(rank):
            while time.perf_counter() - t0 < budget:
                size = max((cur_feeds[n].shape[axis] for n in group if cur_feeds[n].ndim > axis), default=1)
                members = [n for n in group if cur_feeds[n].ndim > axis and cur_feeds[n].shape[axis] == size]
                if size <= 1 or not members:
                    break
                ins = dict(cur_feeds)
                for n in members:
                    ins[n] = np.take(ins[n], np.arange((size + 1) // 2), axis=axis)
                cand = _retyped(cur_model, ins)
                if cand is None or not check(cand, ins):
                    break
                cur_model, cur_feeds = cand, ins
    say(f"reduced {n0} → {len(items)} nodes in {checks} checks")
    return Reduced(cur_model, cur_feeds, n0, len(cur_model.graph.node), checks, time.perf_counter() - t0,
                   one_min and time.perf_counter() - t0 <= budget, log)


def _retyped(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> onnx.ModelProto | None:
    """The model with new input shapes; output shapes re-inferred (None when they do not fit)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in feeds:
            vi.type.tensor_type.shape.Clear()
            for d in feeds[vi.name].shape:
                vi.type.tensor_type.shape.dim.add().dim_value = int(d)
    for vo in m.graph.output:
        vo.type.tensor_type.ClearField("shape")
    del m.graph.value_info[:]
    inferred = onnx_guard.inferred(m, strict=True, check=True)  # out of process: onnx can abort on such candidates
    if inferred is None:
        return None
    for vo in inferred.graph.output:
        dims = vo.type.tensor_type.shape.dim
        if not vo.type.tensor_type.HasField("shape") or any(not d.HasField("dim_value") or d.dim_value < 1 for d in dims):
            return None
    del inferred.graph.value_info[:]
    return inferred


