"""Run one model on several engines (each in its worker) and judge the results.

Engines of one model run concurrently from threads: each thread only waits on
its worker's pipe, so a 2-core machine keeps both cores busy with engine work.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, Queue
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np
import onnx

from ofuzz.exec.engines.client import Outcome, Worker
from ofuzz.exec.engines.envs import install_command, python_for
from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.core.npz import npz_bytes


class EnginePool:
    """One worker per engine, started lazily, restarted when it dies."""

    def __init__(self, specs: list[EngineSpec], workdir: Path | None = None, timeout: float | None = None) -> None:
        self.specs = {s.name: s for s in specs}
        self.families = {s.name: s.family_name for s in specs}  # the oracle's voting groups
        self.root = Path(workdir or tempfile.mkdtemp(prefix="ofuzz-pool-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.workers: dict[str, Worker] = {}
        self.unavailable: dict[str, str] = {}
        self._exec = ThreadPoolExecutor(max_workers=max(1, len(specs)))
        self._lock = threading.Lock()
        for s in specs:
            py = python_for(s)
            if py is None:
                self.unavailable[s.name] = f"environment not installed; run: {install_command(s)}"
            else:
                self.workers[s.name] = Worker(s, py, self.root / s.name)

    def start(self) -> dict[str, Outcome]:
        """Start every worker now (pays start-up once); drop the ones that cannot start."""
        futs = {n: self._exec.submit(w.ensure) for n, w in self.workers.items()}
        res = {n: f.result() for n, f in futs.items()}
        for n, out in res.items():
            if not out.ok:
                self.unavailable[n] = out.summary() + (f" — {out.log_tail.strip().splitlines()[-1]}" if out.log_tail.strip() else "")
                self.workers.pop(n).close()
        return res

    @property
    def names(self) -> list[str]:
        return list(self.workers)

    def versions(self) -> dict[str, str]:
        return {n: w.version for n, w in self.workers.items()}

    def _one(self, w: Worker, model: Path, inputs_npz: Path, in_names: list[str], out_names: list[str]) -> tuple[Outcome, Outcome | None]:
        prep = w.prepare(model, in_names, out_names, self.timeout)
        if not prep.ok:
            self._recycle_if_tainted(w, prep)
            return prep, None
        run = w.run(inputs_npz, self.timeout)
        self._recycle_if_tainted(w, run)
        return prep, run

    @staticmethod
    def _recycle_if_tainted(w: Worker, o: Outcome) -> None:
        """Replace a worker whose native engine raised: its process may be corrupted (seen with MNN:
        after one bad model every later prepare failed with `TypeError: code expected at least 16
        arguments`). Crashes and timeouts restart the worker anyway; clean errors keep it."""
        if w.spec.fresh_after_error and o.kind in ("exception", "oom") and o.etype not in w.spec.clean_errors:
            w.close()  # the next prepare starts a fresh one

    def execute(self, model_path: Path, inputs: dict[str, np.ndarray], out_names: list[str], engines: list[str] | None = None) -> dict[str, tuple[Outcome, Outcome | None]]:
        engines = engines or self.names
        with tempfile.NamedTemporaryFile(suffix=".npz", dir=self.root, delete=False) as f:
            f.write(npz_bytes(inputs))
            npz = Path(f.name)
        try:
            in_names = list(inputs)
            futs = {n: self._exec.submit(self._one, self.workers[n], model_path, npz, in_names, out_names) for n in engines if n in self.workers}
            return {n: f.result() for n, f in futs.items()}
        finally:
            npz.unlink(missing_ok=True)

    def execute_model(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray], engines: list[str] | None = None) -> dict[str, tuple[Outcome, Outcome | None]]:
        """`execute` for a model held in memory (localisation, isolation and reduction build many): saved to a temp file first."""
        with tempfile.TemporaryDirectory(dir=self.root) as d:
            path = Path(d) / "model.onnx"
            onnx.save(model, str(path))
            return self.execute(path, inputs, output_names(model), engines)

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self._exec.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "EnginePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


T = TypeVar("T")


def for_each_in_pools(specs: list[EngineSpec], workdir: Path, items: list[T], fn: Callable[[EnginePool, T], None],
                      workers: int, stop: Callable[[], bool] = lambda: False) -> None:
    """Call fn(pool, item) for every item from W threads, each owning one long-lived started pool,
    so engine start-up is paid W times, not once per item. fn handles its own errors; once
    `stop()` is true no new item is taken, except that each pool takes one: a time cap that ran out
    while the engines were starting (a loaded machine) must not leave the phase with nothing done."""
    queue: Queue[T] = Queue()
    for item in items:
        queue.put(item)

    def one_pool(i: int) -> None:
        with EnginePool(specs, workdir / f"pool{i}") as pool:
            pool.start()
            first = True
            while first or not stop():
                first = False
                try:
                    item = queue.get_nowait()
                except Empty:
                    return
                fn(pool, item)

    threads = [threading.Thread(target=one_pool, args=(i,), daemon=True) for i in range(max(1, min(workers, len(items))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def output_names(model: onnx.ModelProto) -> list[str]:
    return [o.name for o in model.graph.output]
