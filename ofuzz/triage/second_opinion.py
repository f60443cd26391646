"""Second opinions: does a finding of one mode of an engine show in the mode its users run?

ofuzz runs onnx2tf with the inputs kept in ONNX layout (`-kat`), because its default NCHW→NHWC transposition makes
outputs ambiguous to compare; most users convert in the default mode.  Two hand triages found wrong values that only
the keep-shape mode gives (BatchNormalization and InstanceNormalization normalised over the last axis when C equals
W): defects of an option few use, which a maintainer ranks far below the ones every user hits.  An engine's spec may
name a `second_opinion` engine (the same converter in its other mode, `tensorflow-nhwc`); a reduced repro of a wrong
value or a failure to run that the second opinion gets right is classed `mode-only`: shown apart, not counted as a bug.

The second-opinion engine never votes in the campaign.  It is asked once per reduced repro of a wrong value, in a pool
of its own per export thread (TensorFlow takes seconds to start, so the pool is kept).  A failure to convert is reduced
on it (`pool_with`, beside the campaign's cheap voters): the keep-shape engine only fails when both modes fail, so its
reducer had to keep two unrelated converter bugs — one per mode — and its repros held both (hand triage 6: four of
four such MCFs); the users' mode alone fails on one, and one conversion per check instead of two halves the cost.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnx

from ofuzz.core.vocab import MODE_ONLY  # noqa: F401  (re-exported)
from ofuzz.judge.compare import RULE
from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.exec.runner import EnginePool



def readings(y: np.ndarray) -> list[np.ndarray]:
    """An output as the users' mode gave it, and, where its shape is its own channel-last permutation ([1, 16, 16]), also
    read as channel-last: the adapter cannot tell from the shape whether to transpose it back (hand triage 10 #16: a
    keep-shape-only BatchNormalization on [1, 16, 16] stayed a bug because the default mode's right answer came back
    NWC). A transposed reading matching the expected values by chance is not a worry: they are a model's whole output."""
    y = np.asarray(y)
    if not 3 <= y.ndim <= 5:
        return [y]
    perm = (0, *range(2, y.ndim), 1)
    if tuple(y.shape[p] for p in perm) != y.shape or len(set(y.shape[1:])) == 1 and y.shape[1] == 1:
        return [y]
    return [y, np.transpose(y, np.argsort(perm))]


class SecondOpinions:
    def __init__(self, specs: dict[str, EngineSpec], root: Path, timeout: float | None = None) -> None:
        self.specs, self.root, self.timeout = specs, Path(root), timeout
        self.local = threading.local()
        self.lock = threading.Lock()
        self.pools: list[EnginePool] = []

    def _pool(self, name: str) -> EnginePool:
        pools = getattr(self.local, "pools", None)
        if pools is None:
            pools = self.local.pools = {}
        if name not in pools:
            pool = EnginePool([self.specs[name]], self.root / f"{name}-{threading.get_ident()}", self.timeout)
            pool.start()
            pools[name] = pool
            with self.lock:
                self.pools.append(pool)
        return pools[name]

    def pool_with(self, name: str, voters: list[EngineSpec]) -> EnginePool | None:
        """A kept pool of engine `name` and `voters` (their agreement shows a reduced candidate is still a valid model);
        None when `name` is not available here."""
        if name not in self.specs:
            return None
        key = "+".join([name, *sorted(v.name for v in voters)])
        pools = getattr(self.local, "pools", None)
        if pools is None:
            pools = self.local.pools = {}
        if key not in pools:
            pool = EnginePool([self.specs[name], *voters], self.root / f"{key}-{threading.get_ident()}", self.timeout)
            pool.start()
            pools[key] = pool
            with self.lock:
                self.pools.append(pool)
        pool = pools[key]
        return None if name in pool.unavailable else pool

    def agrees(self, name: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> bool | None:
        """True when engine `name` runs the model and matches `expected` (None: it is not available here)."""
        if not expected:
            return None
        wrong = self.wrong_outputs(name, model, feeds, expected)
        return None if wrong is None else any(o.name in expected for o in model.graph.output) and not wrong

    def wrong_outputs(self, name: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> set[str] | None:
        """The graph outputs engine `name` gets wrong (every one, when it fails to convert or run); None when it is not
        available here."""
        outs = self._outputs(name, model, feeds)
        if outs is None:
            return None
        names = [o.name for o in model.graph.output if o.name in expected]
        if outs is False:
            return set(names)
        return {n for n in names if n not in outs or not any(RULE.compare_outputs({n: y}, expected, [n]).ok for y in readings(outs[n]))}

    def runs(self, name: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> bool | None:
        """True when engine `name` converts and runs the model (None: it is not available here)."""
        outs = self._outputs(name, model, feeds)
        return outs if outs is None else outs is not False

    def _outputs(self, name: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray] | bool | None:
        """Engine `name`'s outputs on the model; False when it fails to convert or run it, None when it is not here."""
        if name not in self.specs:
            return None
        pool = self._pool(name)
        if name in pool.unavailable:
            return None
        prep, run = pool.execute_model(model, feeds, [name]).get(name, (None, None))
        failed = next((o for o in (prep, run) if o is not None and not o.ok), None)
        self.local.failure = (getattr(failed, "where", ""), list(getattr(failed, "nodes", []) or [])) if failed is not None else None
        return run.outputs if prep is not None and prep.ok and run is not None and run.ok else False

    def last_failure(self) -> tuple[str, list[str]] | None:
        """Where in its source (`where`, when its adapter can tell) and at which nodes this thread's last asked engine
        failed; None when it ran."""
        return getattr(self.local, "failure", None)

    def close(self) -> None:
        with self.lock:
            for p in self.pools:
                p.close()
            self.pools.clear()
