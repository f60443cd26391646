"""Client side of an engine worker: spawn, talk, time out, classify, restart.

Every way an engine can fail — Python exception, signal, non-zero exit,
hang, out-of-memory — comes back as an `Outcome` with its stage, never as an
exception in ofuzz.  A dead or killed worker is restarted on the next request.
"""
from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ofuzz.exec.engines.registry import EngineSpec

WORKER = Path(__file__).with_name("worker_main.py")
OOM_MARKERS = ("bad_alloc", "MemoryError", "Failed to allocate", "out of memory", "Cannot allocate memory", "std::length_error")
_starts_lock = threading.Lock()
STARTS: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # engine -> [worker starts, seconds], for this process

# A timeout at a campaign's step limit (EngineSpec.campaign_timeout), not the engine's own: the export re-judges the model
# with the full limit, and only then is it a hang (ofuzz.triage.export_all, ofuzz.triage.pipeline)
STEP_LIMIT = "the campaign step limit"


def start_costs() -> dict[str, tuple[int, float]]:
    """How many engine workers this process started, and the seconds it waited for them, per engine: where an export's
    time goes when engines crash (each crash restarts a worker; TensorFlow takes seconds to import)."""
    with _starts_lock:
        return {k: (int(v[0]), round(v[1], 1)) for k, v in sorted(STARTS.items())}


@dataclass
class Outcome:
    """What one prepare (convert) or run step did."""

    stage: str  # "prepare" | "run"
    kind: str  # ok | exception | crash | exit | timeout | oom | unavailable
    etype: str = ""
    message: str = ""
    signal: str = ""
    exit_code: int | None = None
    log_tail: str = ""
    time: float = 0.0
    nodes: list[str] = field(default_factory=list)  # ONNX nodes the adapter says it failed on (first to last)
    where: str = ""  # the engine's source line it failed at, when its adapter can tell ("ops/Max.py:86")
    # a timeout's share of time the worker (and its children) spent runnable but waiting for a CPU: near 1, the
    # machine was busy, not the engine hung (hand triage 18 #17: a 20 s conversion ran past 90 s at load 9 on 2 cores)
    starved: float | None = None
    outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("outputs")
        return d

    def summary(self) -> str:
        if self.ok:
            return "ok"
        what = {"crash": f"killed by {self.signal}", "exit": f"exited with {self.exit_code}", "timeout": "timed out"}.get(self.kind)
        if what is None:
            what = f"{self.etype}: {self.message.splitlines()[0] if self.message else ''}".strip()
        return f"{self.stage} {self.kind}: {what}"[:300]


def _starved_share(pid: int, window: float = 0.5) -> float | None:
    """The share of `window` seconds, sampled now, that the worker and its children spent runnable but waiting for a
    CPU. Sampled only when a step times out (no cost on other steps): the load at the end of the limit stands for the
    load during it."""
    before = _runqueue_wait(pid)
    time.sleep(window)
    after = _runqueue_wait(pid)
    return None if before is None or after is None else round(max(0.0, after - before) / window, 3)


def _runqueue_wait(pid: int) -> float | None:
    """Seconds the threads of a process and of its live children have spent runnable but not running (Linux
    /proc/<pid>/task/<tid>/schedstat, second field; None where that cannot be read). A process that sleeps or
    deadlocks waits on no run queue; one that computes on a busy machine does."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            if p == pid:
                return None
            continue  # a child that ended meanwhile: its siblings still count
        for task in tasks:
            try:
                total += int((task / "schedstat").read_text().split()[1])
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended meanwhile
    return total / 1e9


def _main_thread_wait(pid: int) -> float | None:
    """Seconds the worker's main thread has spent runnable but waiting for a CPU (/proc/<pid>/schedstat; None where it
    cannot be read): one file read, cheap enough for every campaign step of an engine that has a step limit."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


STEP_EXTENSION_MIN = 0.5  # seconds of waiting for a CPU below which a step at its limit is not given more time


def _signame(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class Worker:
    """One long-lived worker process for one engine."""

    def __init__(self, spec: EngineSpec, python: str, workdir: Path | None = None) -> None:
        self.spec = spec
        self.python = python
        self.root = Path(workdir or tempfile.mkdtemp(prefix=f"ofuzz-{spec.name}-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.version = ""
        self.restarts = 0
        self.startup_time = 0.0
        self._buf = b""
        self._log_path = self.root / "worker.log"
        self._seq = 0

    # -- process management --------------------------------------------------
    def start(self) -> Outcome:
        self.close()
        env = dict(os.environ)
        env["OFUZZ_MEMORY_GB"] = str(self.spec.memory_gb)
        env.update(self.spec.env_vars)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        (self.root / "tmp").mkdir(exist_ok=True)
        env["TMPDIR"] = str((self.root / "tmp").resolve())  # engines' own temp files (TF autograph: thousands) go with the pool
        log = open(self._log_path, "ab")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [self.python, str(WORKER), self.spec.adapter, json.dumps(self.spec.options)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, cwd=str(self.root),
            start_new_session=True,  # Ctrl-C reaches ofuzz, not the engines
        )
        log.close()
        self._buf = b""
        reply, out = self._request({"cmd": "hello"}, self.spec.startup_timeout, "prepare")
        self.startup_time = time.perf_counter() - t0
        with _starts_lock:
            STARTS[self.spec.name][0] += 1
            STARTS[self.spec.name][1] += self.startup_time
        if reply is None or not reply.get("ok"):
            out = out or self._failure(reply or {}, "prepare", 0.0)
            out.kind = "unavailable" if out.kind == "exception" else out.kind
            self.close()
            return out
        self.version = str(reply.get("version", ""))
        return Outcome("prepare", "ok", time=self.startup_time)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        """Kill the worker's whole process group (it may be mid-request in another thread)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (proc.stdin, proc.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass

    def ensure(self) -> Outcome:
        if self.alive():
            return Outcome("prepare", "ok")
        if self.version:  # it ran before, so this is a restart
            self.restarts += 1
        return self.start()

    # -- protocol --------------------------------------------------------------
    def _log_tail(self, offset: int, limit: int = 3000) -> str:
        try:
            with open(self._log_path, "rb") as f:
                f.seek(max(offset, 0))
                data = f.read()
        except OSError:
            return ""
        return keep_first_error(data.decode("utf-8", "replace"), limit)

    def _log_size(self) -> int:
        try:
            return self._log_path.stat().st_size
        except OSError:
            return 0

    def _readline(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(timeout=left):
                    raise TimeoutError
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self._buf += chunk
        finally:
            sel.close()
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _readline_computing(self, proc: subprocess.Popen[bytes], timeout: float) -> bytes | None:
        """The worker's answer within `timeout`. A campaign step limit counts the time the engine could compute: when
        it is reached, the time the worker's main thread waited for a CPU meanwhile is added (up to the engine's own
        limit), as often as it waited. On a loaded machine a conversion of 6-9 s once ran past the 10 s limit, and each
        such model cost the export a re-judge at the full limit (23 models and 966 worker-seconds in a seed-30 export,
        11 in the same campaign on a quieter machine). A worker that sleeps or deadlocks waits on no run queue: it is
        cut at the limit as before."""
        start = time.monotonic()
        deadline = start + timeout
        waited = _main_thread_wait(proc.pid) if self.spec.campaign_step and self.spec.full_timeout > timeout else None
        while True:
            try:
                return self._readline(proc, deadline)
            except TimeoutError:
                now = _main_thread_wait(proc.pid) if waited is not None else None
                cap = start + self.spec.full_timeout
                if now is None or waited is None or now - waited < STEP_EXTENSION_MIN or deadline >= cap:
                    raise
                deadline, waited = min(cap, deadline + (now - waited)), now

    def _request(self, req: dict[str, Any], timeout: float, stage: str) -> tuple[dict[str, Any] | None, Outcome | None]:
        proc = self.proc
        if proc is None or proc.stdin is None:
            return None, Outcome(stage, "exit", message="worker closed")
        offset = self._log_size()
        t0 = time.perf_counter()
        try:
            proc.stdin.write((json.dumps(req) + "\n").encode())
            proc.stdin.flush()
            line = self._readline_computing(proc, timeout)
        except TimeoutError:
            why = f"no answer within {timeout:.0f}s" + (f", {STEP_LIMIT}" if self.spec.campaign_step and timeout <= self.spec.timeout else "")
            spent, starved = time.perf_counter() - t0, _starved_share(proc.pid)
            self.close()
            return None, Outcome(stage, "timeout", message=why, log_tail=self._log_tail(offset), time=spent, starved=starved)
        except (BrokenPipeError, OSError, ValueError):
            line = None
        if line is None:
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            tail = self._log_tail(offset)
            if self.proc is proc:
                self.proc = None
            if code is not None and code < 0:
                kind = "oom" if any(m in tail for m in OOM_MARKERS) else "crash"
                return None, Outcome(stage, kind, signal=_signame(-code), exit_code=code, log_tail=tail, time=time.perf_counter() - t0)
            return None, Outcome(stage, "exit", exit_code=code, log_tail=tail, time=time.perf_counter() - t0)
        reply = json.loads(line)
        if not reply.get("ok"):
            return reply, self._failure(reply, stage, time.perf_counter() - t0, self._log_tail(offset))
        return reply, None

    @staticmethod
    def _failure(reply: dict[str, Any], stage: str, dt: float, tail: str = "") -> Outcome:
        etype = str(reply.get("etype", ""))
        msg = str(reply.get("message", ""))
        kind = "oom" if etype == "MemoryError" or any(m in msg for m in OOM_MARKERS) else "exception"
        return Outcome(stage, kind, etype=etype, message=msg, log_tail=keep_first_error(tail + "\n" + str(reply.get("traceback", "")), 3000), time=dt,
                       nodes=[str(n) for n in reply.get("nodes") or []], where=str(reply.get("where") or ""))

    # -- engine steps ---------------------------------------------------------------
    def prepare(self, model_path: Path, inputs: list[str], outputs: list[str], timeout: float | None = None) -> Outcome:
        up = self.ensure()
        if not up.ok:
            return up
        shutil.rmtree(self.root / f"m{self._seq}", ignore_errors=True)
        self._seq += 1
        wd = self.root / f"m{self._seq}"
        wd.mkdir(parents=True, exist_ok=True)
        req = {"cmd": "prepare", "model": str(Path(model_path).resolve()), "workdir": str(wd.resolve()), "inputs": inputs, "outputs": outputs}
        reply, out = self._request(req, timeout or self.spec.timeout, "prepare")
        if out is not None:
            return out
        return Outcome("prepare", "ok", time=float(reply.get("time", 0.0)) if reply else 0.0)

    def run(self, inputs_npz: Path, timeout: float | None = None) -> Outcome:
        if not self.alive():
            return Outcome("run", "exit", message="worker not running (prepare first)")
        out_path = self.root / f"out{self._seq}.npz"
        reply, out = self._request({"cmd": "run", "inputs": str(Path(inputs_npz).resolve()), "outputs": str(out_path.resolve())}, timeout or self.spec.timeout, "run")
        if out is not None:
            return out
        assert reply is not None
        with np.load(out_path) as z:
            arrays = {k: z[k] for k in z.files}
        out_path.unlink(missing_ok=True)
        return Outcome("run", "ok", time=float(reply.get("time", 0.0)), outputs=arrays)


def keep_first_error(text: str, limit: int) -> str:
    """The last `limit` characters of an engine's log, plus its first ERROR line if that was cut: engines often say why
    first and dump a traceback after (onnx2tf: "ERROR: ScatterElements currently supports only reduction=['none']",
    then sys.exit), and the noise classes match on that line."""
    if len(text) <= limit:
        return text
    first = next((ln for ln in text.splitlines() if "ERROR" in ln or "Error:" in ln), "")[:300]
    if not first or first in text[-limit:]:
        return text[-limit:]
    return first + "\n...\n" + text[-(limit - len(first) - 5):]
