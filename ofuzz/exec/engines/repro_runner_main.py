"""Runs exported repro.py files one after another in one interpreter of an engine's own Python.

Started by ofuzz (`ofuzz.triage.repro_check`), never imported by it; needs nothing but the standard library. Importing an
engine (TensorFlow: ~4 s) once per check used to cost more than the whole rest of a finding's triage. Each request is
one folder; the reply is the exit status repro.py would have had. A repro that crashes or hangs takes this process with
it, which is exactly what the fresh-process check reported: ofuzz reads the signal or the timeout and starts another.
Protocol: one JSON line per request on stdin ({"folder": PATH}) and per reply on the original stdout ({"code": N}).
"""
from __future__ import annotations

import json
import os
import runpy
import sys


def run_one(folder: str) -> int:
    for mod in ("engine_adapter", "compare_rule"):  # each folder has its own copies
        sys.modules.pop(mod, None)
    saved_path, saved_cwd = list(sys.path), os.getcwd()
    try:
        os.chdir(folder)
        sys.argv = [os.path.join(folder, "repro.py"), "--in-process"]  # no child per repro: a crash kills this runner, its verdict
        runpy.run_path(sys.argv[0], run_name="__main__")
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001  (an uncaught error in repro.py: python would exit 1 with a traceback)
        import traceback

        traceback.print_exc()
        return 1
    finally:
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        for name, mod in list(sys.modules.items()):  # a plug-in's sibling modules, copied into this folder, go with it
            if os.path.dirname(os.path.abspath(getattr(mod, "__file__", None) or "/")).startswith(os.path.abspath(folder)):
                sys.modules.pop(name, None)


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # engines print freely (native code too); replies go only to the duplicated stdout
    sys.stdout = sys.stderr
    for line in sys.stdin:
        req = json.loads(line)
        proto.write(json.dumps({"code": run_one(req["folder"])}) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
