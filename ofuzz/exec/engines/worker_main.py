"""Engine worker: runs inside the engine's own Python, speaks JSON lines on a private fd.

Standalone on purpose (stdlib + numpy only): an engine's environment may pin an
old numpy and does not have ofuzz installed.  The protocol channel is a dup of
the original stdout; fd 1 is then pointed at stderr, so whatever the engine
prints (MNN writes diagnostics to stdout) lands in the log, never in replies.
Tensors travel as .npz files, which every numpy version reads.

Requests:  {"cmd": "hello"} | {"cmd": "prepare", "model": P, "workdir": D}
           | {"cmd": "run", "inputs": NPZ, "outputs": NPZ} | {"cmd": "exit"}
Replies:   {"ok": true, ...} | {"ok": false, "etype": ..., "message": ..., "traceback": ...}
"""
from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys
import time
import traceback


def _load_adapter(spec: str, options: dict):
    path, _, cls = spec.rpartition(":")
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # a plug-in split in two files imports the module beside it
    mod_spec = importlib.util.spec_from_file_location(f"ofuzz_adapter_{abs(hash(path))}", path)
    if mod_spec is None or mod_spec.loader is None:
        raise ImportError(f"cannot load adapter file {path}")
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules[mod_spec.name] = mod
    mod_spec.loader.exec_module(mod)
    adapter = getattr(mod, cls)
    missing = [m for m in ("version", "prepare", "run") if not callable(getattr(adapter, m, None))]  # ofuzz.exec.engines.adapter.METHODS
    if missing:
        raise TypeError(f"{path}:{cls} is not an engine adapter: it lacks {', '.join(missing)} (see ofuzz/exec/engines/adapter.py)")
    return adapter(**options)


def _guard_process(parent: int) -> None:
    """A memory limit (OFUZZ_MEMORY_GB), and exit when the fuzzer is gone (even killed by SIGKILL): never linger."""
    import threading

    mem_gb = float(os.environ.get("OFUZZ_MEMORY_GB", "0") or 0)
    if mem_gb > 0:
        lim = int(mem_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    def orphan_watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=orphan_watch, daemon=True).start()


def _failure(exc: BaseException, tb: str) -> dict:
    # an adapter may name the ONNX nodes it failed on (`exc.failed_nodes`): a converter's message rarely does
    nodes = [str(n) for n in getattr(exc, "failed_nodes", None) or []][:8]
    # and the engine's own source line it failed at (`exc.where`), the unit of a defect to its maintainer
    return {"ok": False, "etype": type(exc).__name__, "message": str(exc)[:4000], "traceback": tb[-4000:], "nodes": nodes,
            "where": str(getattr(exc, "where", "") or "")[:200]}


def _serve(engine, spec: str, req: dict, names: list) -> dict:
    """One request (hello, prepare, run) answered; `names` holds the outputs prepare asked for."""
    import numpy as np

    cmd = req.get("cmd")
    t0 = time.perf_counter()
    if cmd == "hello":
        return {"ok": True, "name": getattr(engine, "name", spec), "version": str(engine.version())}
    if cmd == "prepare":
        names[:] = list(req.get("outputs", []))
        engine.prepare(req["model"], req["workdir"], list(req.get("inputs", [])), list(names))
        return {"ok": True, "time": time.perf_counter() - t0}
    if cmd == "run":
        with np.load(req["inputs"]) as z:
            inputs = {k: z[k] for k in z.files}
        t1 = time.perf_counter()
        outs = engine.run(inputs)
        dt = time.perf_counter() - t1
        if not isinstance(outs, dict):
            outs = dict(zip(names, outs))
        arrays = {str(k): np.asarray(v) for k, v in outs.items()}
        np.savez(req["outputs"], **arrays)
        return {"ok": True, "time": dt, "outputs": list(arrays)}
    return {"ok": False, "etype": "ProtocolError", "message": f"unknown command {cmd!r}", "traceback": ""}


def main() -> None:
    spec = sys.argv[1]
    options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    _guard_process(os.getppid())
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the engine's prints go to the log, never into the protocol
    sys.stdout = sys.stderr
    import faulthandler

    faulthandler.enable()  # a crash leaves the Python stack in the log: where in the converter it died (onnx2tf → its onnxruntime)
    engine, load_error, load_tb = None, None, ""
    names: list = []
    try:
        engine = _load_adapter(spec, options)
    except BaseException as exc:  # reported on every request
        load_error, load_tb = exc, traceback.format_exc()

    def reply(obj: dict) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    for line in sys.stdin:
        req = json.loads(line)
        if req.get("cmd") == "exit":
            reply({"ok": True})
            break
        if load_error is not None:
            reply(_failure(load_error, load_tb) | {"stage": "load"})
            continue
        try:
            reply(_serve(engine, spec, req, names))
        except BaseException as exc:  # an engine failure is data, never a worker crash
            reply(_failure(exc, traceback.format_exc()))


if __name__ == "__main__":
    main()
