"""Where a campaign's models are judged: engine pools in threads of this process, or Ray actors on a cluster.

The campaign loop only asks a backend for `capacity` (how many models may be in flight), `submit` (a future of the
verdict) and `close`; everything that must stay central (generation, coverage, the chooser, the store) stays in the
campaign. A backend that loses a model in flight (a Ray actor or node died) fails its future with `JudgeLost`; the
campaign then judges the same model again elsewhere, so nothing is lost and nothing is counted twice.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from queue import Queue
from typing import Any, Protocol

import numpy as np
import onnx

from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.judge.judging import Judged, Policy, judge_model
from ofuzz.exec.runner import EnginePool


class JudgeLost(RuntimeError):
    """The model was in flight on a judge that died; judge it again elsewhere."""


class Judges(Protocol):
    infos: dict[str, dict[str, Any]]  # judge name -> where it runs (node, pid), for the store and the display

    def start(self) -> tuple[dict[str, str], dict[str, str]]:
        """Start the judges; return (engine versions, engines unavailable with why)."""

    @property
    def capacity(self) -> int:
        """Models that may be in flight at once."""

    def submit(self, model: onnx.ModelProto, path: Path, inputs: dict[str, np.ndarray], localise: bool,
               skips: dict[str, str]) -> "Future[tuple[Judged | None, float]]":
        """Judge one model (saved at `path` on this machine); the future gives (verdict, seconds)."""

    def status(self) -> str:
        """One line for the live display ('' when there is nothing to say)."""

    def close(self) -> float:
        """Stop everything; return the CPU seconds the engine workers used, where known."""


class LocalPools:
    """W engine pools in threads of this process (the default)."""

    def __init__(self, specs: list[EngineSpec], root: Path, timeout: float | None, workers: int, policy: Policy) -> None:
        self.specs, self.root, self.timeout, self.workers, self.policy = specs, root, timeout, max(1, workers), policy
        self.pools: list[EnginePool] = []
        self._idle: Queue[EnginePool] = Queue()
        self._stopping = threading.Event()
        self._exec: ThreadPoolExecutor | None = None
        self.infos: dict[str, dict[str, Any]] = {}  # pools live in this process

    def start(self) -> tuple[dict[str, str], dict[str, str]]:
        self.pools = [EnginePool(self.specs, self.root / f"pool{i}", self.timeout) for i in range(self.workers)]
        for p in self.pools:
            p.start()
            self._idle.put(p)
        self._exec = ThreadPoolExecutor(max_workers=self.workers)
        return self.pools[0].versions(), dict(self.pools[0].unavailable)

    @property
    def capacity(self) -> int:
        return len(self.pools)

    def submit(self, model: onnx.ModelProto, path: Path, inputs: dict[str, np.ndarray], localise: bool,
               skips: dict[str, str]) -> "Future[tuple[Judged | None, float]]":
        assert self._exec is not None
        return self._exec.submit(self._judge, model, path, inputs, localise, skips)

    def _judge(self, model: onnx.ModelProto, path: Path, inputs: dict[str, np.ndarray], localise: bool,
               skips: dict[str, str]) -> tuple[Judged | None, float]:
        pool = self._idle.get()
        t0 = time.perf_counter()
        try:
            if self._stopping.is_set():
                return None, 0.0
            return judge_model(pool, model, path, inputs, localise, self.policy, skips), time.perf_counter() - t0
        finally:
            self._idle.put(pool)

    def status(self) -> str:
        return ""

    def close(self) -> float:
        self._stopping.set()
        cpu = sum(_cpu_seconds(w.proc.pid) for p in self.pools for w in p.workers.values() if w.proc is not None)
        for p in self.pools:
            p.close()
        if self._exec is not None:
            self._exec.shutdown(wait=False, cancel_futures=True)
        return cpu


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process and its waited-for children (from /proc), 0 if it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def judge_bytes(pool: EnginePool, workdir: Path, model_bytes: bytes, inputs: dict[str, np.ndarray], localise: bool,
                policy: Policy, skips: dict[str, str]) -> tuple[Judged, float]:
    """Judge a serialized model on a pool of another machine (the model file is written where the engines are)."""
    t0 = time.perf_counter()
    path = workdir / "model.onnx"
    path.write_bytes(model_bytes)
    model = onnx.load_from_string(model_bytes)
    return judge_model(pool, model, path, inputs, localise, policy, skips), time.perf_counter() - t0
