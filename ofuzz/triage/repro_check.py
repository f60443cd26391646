"""Does an exported repro.py reproduce its finding outside ofuzz, in the engine's own Python?

One long-lived runner per engine environment executes the repro.py files in turn (`engines/repro_runner_main.py`),
so TensorFlow is imported once per triage rather than once per finding. A repro that crashes or hangs kills or stalls
the runner — that is its verdict — and the next check starts a new one. A "not reproduced" is confirmed in a truly
fresh process, so state left behind by earlier repros cannot hide a finding.
"""
from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ofuzz.core.paths import PACKAGE
from ofuzz.exec.engines.envs import python_for
from ofuzz.exec.engines.registry import EngineSpec

RUNNER = PACKAGE / "exec" / "engines" / "repro_runner_main.py"
FLAKY_TRIES = 6  # fresh runs of a repro that does not reproduce, before it is called unconfirmed


class _Runner:
    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ofuzz-repro-check-")  # the engine's temp files, removed with the runner
        self.python, self.env = python, {**env, "TMPDIR": self.tmp}
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([self.python, str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=self.env, start_new_session=True)
        return self.proc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        self.proc = None

    def check(self, folder: Path, timeout: float) -> int | str:
        """repro.py's exit status, or "timeout", or "signal N"."""
        with self.lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write((json.dumps({"folder": str(folder.resolve())}) + "\n").encode())
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            try:
                if not sel.select(timeout=timeout):
                    self.kill()
                    return "timeout"
                line = proc.stdout.readline()
            finally:
                sel.close()
            if not line:
                code = proc.wait()
                self.proc = None
                return f"signal {-code}" if code < 0 else code
            return int(json.loads(line)["code"])


_RUNNERS: dict[str, _Runner] = {}
_LOCK = threading.Lock()


def _env(spec: EngineSpec) -> dict[str, str]:
    """The engine's environment variables (QEMU_CPU, TF_* …), as its worker gets them."""
    env = {**os.environ, **spec.env_vars}
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _runner(spec: EngineSpec, python: str) -> _Runner:
    key = python + json.dumps(spec.env_vars, sort_keys=True)
    with _LOCK:
        if key not in _RUNNERS:
            _RUNNERS[key] = _Runner(python, _env(spec))
        return _RUNNERS[key]


def close_runners() -> None:
    with _LOCK:
        for r in _RUNNERS.values():
            r.kill()
            shutil.rmtree(r.tmp, ignore_errors=True)
        _RUNNERS.clear()


atexit.register(close_runners)


def _fresh(out: Path, python: str, spec: EngineSpec, timeout: float) -> int | str:
    """`python repro.py` as a user runs it (it runs the engine in a child of its own); on a timeout the whole process
    group goes, so no orphaned child keeps hanging on a core."""
    with tempfile.TemporaryDirectory(prefix="ofuzz-repro-check-") as tmp:
        p = subprocess.Popen([python, "repro.py"], cwd=out, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**_env(spec), "TMPDIR": tmp}, start_new_session=True)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            p.wait()
            return "timeout"
    return f"signal {-code}" if code < 0 else code


def check_repro(out: Path, spec: EngineSpec | None, timeout: float = 180.0, hang_after: float | None = None) -> str:
    """reproduced / not reproduced / error, as a fresh `python repro.py` in the engine's environment would say.

    `hang_after`: the finding is a hang and repro.py gives up on its child after this many seconds. Then repro.py is
    not run: the campaign and the triage's re-run have each waited the engine's whole limit, and a third wait cost
    ~2 minutes of one export pool per onnx2tf hang (a fifth of the seed-75 export's worker time). Its hang path is
    covered by the test suite (tests/test_triage.py runs a hang's repro.py to its REPRODUCED)."""
    if hang_after:
        return f"reproduced on re-run (a hang; repro.py not run here: it would wait another {hang_after:.0f} s)"
    py = python_for(spec) if spec else None
    if spec is None or py is None or not (out / "repro.py").is_file():
        return "not checked (engine environment missing)"
    t0 = time.perf_counter()
    got = _runner(spec, str(py)).check(out, timeout)
    if got == 0:  # confirm in a fresh interpreter: earlier repros must not be able to hide this one
        got = _fresh(out, str(py), spec, max(1.0, timeout - (time.perf_counter() - t0)))
    tries = 2
    while got == 0 and tries < FLAKY_TRIES and time.perf_counter() - t0 < timeout / 2:
        # an engine that reads memory it never wrote (MNN's unsupported tf_crop_and_resize path) is right on most runs
        # and wrong on some: its finding showed twice (campaign and re-run), so a few more fresh runs before it is
        # called unconfirmed; a repro right on every one of them is not reproduced
        got, tries = _fresh(out, str(py), spec, max(1.0, timeout - (time.perf_counter() - t0))), tries + 1
    verdict = _verdict(got)
    return f"{verdict} on run {tries} of repro.py (the engine is not deterministic on it)" if tries > 2 and got != 0 else verdict


def _verdict(got: int | str) -> str:
    if got == "timeout":
        return "reproduced (hang: repro.py timed out)"
    if isinstance(got, str):
        return f"reproduced (killed by {got})"
    if got == 1:
        return "reproduced"
    if got == 0:
        return "not reproduced"
    if got == 2:
        return "repro could not run (the engine or its adapter could not be loaded in its environment)"
    return f"error (exit {got})"
