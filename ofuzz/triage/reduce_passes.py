"""The reduction passes that shrink what a model holds rather than its nodes: attributes back to their defaults, input
values without the traits the finding does not need, input shapes halved (or cut to 1 outright). Each takes the
Reducer and the current (model, feeds) and returns the smaller state it accepted (see `reduce.py`)."""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np
import onnx

from ofuzz.triage.reduce_checks import digest, layout_ambiguous, redeclared, retyped

State = tuple[onnx.ModelProto, dict[str, np.ndarray]]


class Reducer(Protocol):
    """What these passes ask of `reduce.Reducer` (the one choke point every candidate goes through)."""

    log: list[str]
    right: dict[str, bool]
    drop_fixes: tuple[str, list[str]]
    layout_from_shape: bool

    def consider(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> bool: ...

    def well_formed(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray], key: str | None = None) -> bool: ...

    def out_of_time(self) -> bool: ...


def drop_attributes(r: Reducer, cur: State) -> State:
    """Each attribute back to its default, where the finding stays (so the root cause keeps only those that matter).
    The attributes whose default made the blamed engine right are recorded (`Reducer.drop_fixes`, for the model this
    pass leaves): that rewrite is evidence the clustering compares across repros (merge rule `same-attribute-drop`)."""
    model, feeds = cur
    fixes: list[str] = []
    for ni in range(len(model.graph.node)):
        for attr in [a.name for a in model.graph.node[ni].attribute]:
            cand = onnx.ModelProto()
            cand.CopyFrom(model)
            node = cand.graph.node[ni]
            keep = [a for a in node.attribute if a.name != attr]
            del node.attribute[:]
            node.attribute.extend(keep)
            if not r.well_formed(cand, feeds):  # an attribute that shapes an output (axes, output_width): declared anew
                cand = redeclared(cand) or cand
            if r.consider(cand, feeds):
                model = cand
                r.log.append(f"dropped attribute {attr} of {node.name}")
            elif r.right.get(digest(cand, feeds)):
                fixes.append(f"{cand.graph.node[ni].op_type}.{attr}")
    r.drop_fixes = (digest(model, feeds), sorted(set(fixes)))
    return model, feeds


_NEUTRALISE: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = [
    ("nan", lambda a: np.where(np.isnan(a), np.asarray(0.5, a.dtype), a)),
    ("inf", lambda a: np.where(np.isinf(a), np.sign(a).astype(a.dtype), a)),
    ("negative", lambda a: np.abs(a)),
    ("zero", lambda a: np.where(a == 0, np.asarray(0.5, a.dtype), a)),
    ("large", lambda a: np.where(np.abs(a) > 1e4, np.sign(a).astype(a.dtype), a)),
]


def simplify_values(r: Reducer, cur: State) -> State:
    """Replace NaN, Inf, negatives, zeros and large values in float inputs wherever the finding does not need them."""
    model, feeds = cur
    for trait, fn in _NEUTRALISE:
        floats = [k for k, v in feeds.items() if np.issubdtype(v.dtype, np.floating) and v.size]
        cand = {k: (fn(v) if k in floats else v) for k, v in feeds.items()}
        if all(np.array_equal(cand[k], feeds[k], equal_nan=True) for k in floats):
            continue
        if r.consider(model, cand):
            feeds = cand
            r.log.append(f"inputs without {trait} values")
    return model, feeds


def halve_shapes(r: Reducer, cur: State) -> State:
    """Halve a dim of every input that has it (together, so broadcasts still line up), then of each input alone. Each
    dim is first tried at size 1 outright: most findings stay there, and halving a dim of 20 to 1 took five checks (a
    third of a 30-minute export's reduction time went to this pass); where 1 loses the finding, it is halved as before."""
    model, feeds = cur
    ones = getattr(r, "layout_from_shape", False)  # an engine that reads layouts off shapes: [1,1,1,1] is ambiguous too
    groups = [list(feeds)] + [[n] for n in feeds] if len(feeds) > 1 else [list(feeds)]
    for group in groups:
        rank = max((feeds[n].ndim for n in group), default=0)
        for axis in range(rank):
            outright = True
            while not r.out_of_time():
                size = max((feeds[n].shape[axis] for n in group if feeds[n].ndim > axis), default=1)
                members = [n for n in group if feeds[n].ndim > axis and feeds[n].shape[axis] == size]
                if size <= 1 or not members:
                    break
                jump = outright and size > 2  # to 1 outright, first
                new = 1 if jump else (size + 1) // 2
                ins = dict(feeds)
                for n in members:
                    ins[n] = np.take(ins[n], np.arange(new), axis=axis)
                cand = retyped(model, ins)
                ok = cand is not None and not (layout_ambiguous(cand, ones) and not layout_ambiguous(model, ones)) and r.consider(cand, ins)
                if not ok and jump:
                    outright = False  # size 1 loses it: halve step by step
                    continue
                if not ok:
                    break
                outright = False
                model, feeds = cand, ins
    return model, feeds


