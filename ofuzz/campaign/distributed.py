"""Campaigns on a Ray cluster (`ofuzz campaign --ray ADDRESS`): each Ray actor owns one long-lived engine pool.

Ray is an optional extra (`pip install 'ofuzz[ray]'`). The driver keeps generation, coverage, the chooser, the store,
the display and the budget; actors only judge. Each actor starts an `EnginePool` on its node (the same worker processes
and per-engine environments as a local campaign, so every node needs ofuzz at the same version and the engines'
environments: `ofuzz engines --install all` on each node, or shared storage). An actor that dies with models in flight
(its node went away, it was killed) fails their futures with `JudgeLost`; the campaign judges them again on another
actor and says so in the display; engine crashes stay inside the actor's pool as they do locally.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.judge.judges import JudgeLost
from ofuzz.judge.judging import Judged, Policy

NAMESPACE = "ofuzz"
INSTALL_HINT = "Ray is not installed; install the extra: pip install 'ofuzz[ray]'"


class DistributedError(RuntimeError):
    """The cluster cannot run this campaign; the message names the node and the engine, or what to install."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise DistributedError(INSTALL_HINT) from None
    return ray


def connect(address: str) -> None:
    """'local': start a private Ray instance on this machine; 'auto' or 'ray://host:port' or 'host:port': join one."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry from ofuzz's side
    ray = _ray()
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False, "include_dashboard": False}
    try:
        if address == "local":
            # a private instance that nothing beyond this machine reaches; always a new one ("local"), never one found
            # through /tmp/ray/ray_current_cluster: a cluster killed without `ray stop` leaves that file behind, and
            # joining its dead head hung here for good (join a running instance with --ray auto)
            ray.init(address="local", _node_ip_address="127.0.0.1", **kwargs)
        else:
            kwargs.pop("include_dashboard")
            ray.init(address=address, **kwargs)
    except Exception as exc:  # noqa: BLE001  (Ray raises many types; the user needs one line)
        text, chain, seen = str(exc), exc.__cause__ or exc.__context__, 0
        while chain is not None and seen < 5:  # Ray wraps the refusal in a ConnectionError
            text, chain, seen = f"{text}\n{chain}", chain.__cause__ or chain.__context__, seen + 1
        if "AuthToken" in text or "Authentication" in text or "auth token" in text.lower():
            # `ray start --head` turns token authentication on (Ray >= 2.5x); a driver without the token is refused
            raise DistributedError(f"cannot reach Ray at {address!r}: the cluster uses token authentication; run with RAY_AUTH_MODE=token "
                                   "and the cluster's token in RAY_AUTH_TOKEN (or ~/.ray/auth_token, as on its nodes)") from None
        raise DistributedError(f"cannot reach Ray at {address!r}: {str(exc).strip().splitlines()[0][:200]}") from None


def sweep_orphans(parent: Path) -> None:
    """Remove work folders of this node's actors whose process is gone (a killed actor cannot clean up after itself)."""
    for d in parent.glob("ofuzz-actor-*"):
        try:
            host, pid = (d / "owner").read_text().split()
            os.kill(int(pid), 0) if host == socket.gethostname() else None
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (OSError, ValueError):
            continue  # not ours to judge: another host's, unreadable, or still being created


class PoolActor:
    """One engine pool on one node (wrapped by ray.remote at run time, so importing this module needs no Ray)."""

    def __init__(self, specs: list[dict[str, Any]], timeout: float | None, root: str | None = None) -> None:
        from ofuzz.exec.runner import EnginePool

        parent = Path(root or tempfile.gettempdir())
        sweep_orphans(parent)
        base = parent / f"ofuzz-actor-{uuid.uuid4().hex[:8]}"
        base.mkdir(parents=True)
        (base / "owner").write_text(f"{socket.gethostname()} {os.getpid()}")
        self.work = base
        self.specs = [EngineSpec(**s) for s in specs]
        self.pool = EnginePool(self.specs, base, timeout)
        self.pool.start()
        self.policy = Policy.default()
        self.node = socket.gethostname()

    def info(self) -> dict[str, Any]:
        import ray

        return {"node": self.node, "ray_node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(), "versions": self.pool.versions(),
                "unavailable": dict(self.pool.unavailable)}

    def judge(self, model_bytes: bytes, inputs: dict[str, np.ndarray], localise: bool, skips: dict[str, str]) -> tuple[Judged, float]:
        from ofuzz.judge.judges import judge_bytes

        return judge_bytes(self.pool, self.work, model_bytes, inputs, localise, self.policy, skips)

    def triage(self, finding: dict[str, Any], model_bytes: bytes, inputs: dict[str, np.ndarray], budget: float,
               claims: list[tuple[str, str]]) -> tuple[dict[str, bytes], dict[str, Any]]:
        """Triage one finding in this actor's pool (the export fanned out): the repro folder's files come back to the
        driver, which writes them into the campaign folder (this node may not see it).  `claims`: the pre-keys the
        driver already has representatives for, so this finding attaches instead of being reduced again."""
        from ofuzz.triage.pipeline import Representatives, triage_finding

        reps = Representatives()
        for key, fid in claims:
            reps.claim(key, fid)
        with tempfile.TemporaryDirectory(dir=self.work) as d:
            model = Path(d) / "model.onnx"
            model.write_bytes(model_bytes)
            out = Path(d) / "repro"
            info = triage_finding(self.pool, {s.name: s for s in self.specs}, finding, model, inputs, out, budget, self.policy, reps,
                                  self._opinions())
            files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
            revealed = (info.get("revealed") or {}).get("folder")
            if revealed and (Path(d) / revealed).is_dir():  # a defect found behind this one's trigger: its folder goes too
                files.update({f"../{revealed}/{p.name}": p.read_bytes() for p in (Path(d) / revealed).iterdir() if p.is_file()})
        return files, info

    def _opinions(self) -> Any:
        """The second-opinion engines, as the local export has them (their workers start on first use, on this node)."""
        if not hasattr(self, "opinions"):
            from ofuzz.triage.export_all import second_opinions

            self.opinions = second_opinions(self.specs, self.work / "opinions")
        return self.opinions

    def close(self) -> None:
        from ofuzz.triage.repro_check import close_runners

        close_runners()
        if getattr(self, "opinions", None) is not None:
            self.opinions.close()
        self.pool.close()


class RayActors:
    """The campaign's judges as Ray actors: `actors` of them, each with up to `window` models in flight."""

    def __init__(self, specs: list[EngineSpec], timeout: float | None, actors: int, window: int = 2,
                 cpus_per_actor: float = 1.0, prefix: str | None = None) -> None:
        self.specs, self.timeout, self.n, self.window, self.cpus = specs, timeout, max(1, actors), max(1, window), cpus_per_actor
        self.prefix = prefix or f"ofuzz-judge-{uuid.uuid4().hex[:6]}"
        self.actors: dict[str, Any] = {}  # name -> handle, alive only
        self.closed = False
        self.startup_timeout = 600.0  # engines start in each actor (TensorFlow: minutes on a loaded node)
        self.inflight: dict[str, int] = {}
        self.lost: dict[str, str] = {}
        self.infos: dict[str, dict[str, Any]] = {}  # name -> node, pid, versions (from each actor at start-up)
        self.lock = threading.Lock()

    def start(self) -> tuple[dict[str, str], dict[str, str]]:
        ray = _ray()
        # actors mostly wait on their engine workers (other processes): share the cluster's CPUs among them, or actors
        # beyond the CPU count would never be scheduled and the campaign would wait for them forever
        total = float(ray.cluster_resources().get("CPU", 1.0))
        remote = ray.remote(num_cpus=min(self.cpus, total / self.n), max_restarts=0, max_task_retries=0)(PoolActor)
        fields = [dict(vars(s)) for s in self.specs]
        for i in range(self.n):
            name = f"{self.prefix}-{i}"
            self.actors[name] = remote.options(name=name, namespace=NAMESPACE).remote(fields, self.timeout)
            self.inflight[name] = 0
        infos = {}
        for name, h in list(self.actors.items()):
            try:
                infos[name] = ray.get(h.info.remote(), timeout=self.startup_timeout)
            except Exception as exc:  # noqa: BLE001
                why = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else type(exc).__name__
                raise DistributedError(f"actor {name} did not start within {self.startup_timeout:.0f}s ({why}); "
                                       f"the cluster has {total:g} CPUs for {self.n} actors") from None
        return self._check(infos)

    def _check(self, infos: dict[str, dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
        """An engine unavailable on every node is skipped (as locally); on some nodes only, it is an error naming them."""
        names = [s.name for s in self.specs]
        everywhere = {e for e in names if all(e in i["unavailable"] for i in infos.values())}
        for name, i in infos.items():
            for e, why in i["unavailable"].items():
                if e not in everywhere:
                    raise DistributedError(f"node {i['node']} ({name}): engine {e} is unavailable there ({why}); "
                                           f"run `ofuzz engines --install {e}` on that node, or leave {e} out of --engines")
        self.infos = infos
        first = next(iter(infos.values()))
        return first["versions"], {e: first["unavailable"][e] for e in everywhere}

    def fan_out(self, items: list[Any], call: Any, on_result: Any, on_error: Any, stop: Any = lambda: False) -> None:
        """Run `call(actor_handle, item)` (returning an ObjectRef) for every item, one at a time per actor, from one
        thread per actor; `on_result(item, value)` as each finishes.  An actor that dies gives its item back to the
        others and leaves; if none is left, the remaining items go to `on_error`."""
        import queue

        ray = _ray()
        todo: queue.Queue[Any] = queue.Queue()
        for it in items:
            todo.put(it)

        def worker(name: str) -> None:
            while not stop():
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                with self.lock:
                    handle = self.actors.get(name)
                if handle is None:
                    todo.put(item)
                    return
                try:
                    value = ray.get(call(handle, item))
                except ray.exceptions.RayActorError as exc:  # the actor (or its node) died: ActorDiedError is one too
                    with self.lock:
                        self.actors.pop(name, None)
                        self.lost[name] = type(exc).__name__
                    todo.put(item)  # redone by another actor
                    return
                except Exception as exc:  # noqa: BLE001  (the item's own failure, raised inside the actor)
                    on_error(item, exc)
                    continue
                on_result(item, value)

        threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in list(self.actors)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        while not todo.empty():
            item = todo.get_nowait()
            on_error(item, DistributedError("every Ray actor is gone; " + "; ".join(f"{k}: {v}" for k, v in self.lost.items())))

    @property
    def capacity(self) -> int:
        return len(self.actors) * self.window

    def submit(self, model: onnx.ModelProto, path: Path, inputs: dict[str, np.ndarray], localise: bool,
               skips: dict[str, str]) -> "Future[tuple[Judged | None, float]]":
        out: Future[tuple[Judged | None, float]] = Future()
        with self.lock:
            if not self.actors:
                raise DistributedError("every Ray actor of this campaign is gone; " + "; ".join(f"{k}: {v}" for k, v in self.lost.items()))
            name = min(self.actors, key=lambda a: self.inflight[a])
            self.inflight[name] += 1
            handle = self.actors[name]
        ref = handle.judge.remote(model.SerializeToString(), inputs, localise, skips)

        def done(f: Future[Any]) -> None:
            with self.lock:
                self.inflight[name] = max(0, self.inflight.get(name, 1) - 1)
            try:
                out.set_result(f.result())
            except Exception as exc:  # noqa: BLE001  (the actor died: RayActorError, ActorDiedError, ...)
                with self.lock:
                    if name in self.actors:
                        del self.actors[name]
                        self.lost[name] = type(exc).__name__
                out.set_exception(JudgeLost(f"{name}: {type(exc).__name__}"))

        ref.future().add_done_callback(done)
        return out

    def status(self) -> str:
        if self.closed:
            return f"{self.n} Ray actors, stopped" + (f"; lost during the run: {', '.join(self.lost)}" if self.lost else "")
        alive = len(self.actors)
        return f"{alive} of {self.n} actors alive" + (f"; lost: {', '.join(self.lost)} (their models were judged again)" if self.lost else "")

    def close(self) -> float:
        ray = _ray()
        for h in list(self.actors.values()):
            try:
                ray.get(h.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001
                pass
            try:
                ray.kill(h)
            except Exception:  # noqa: BLE001
                pass
        self.actors.clear()
        self.closed = True
        return 0.0
