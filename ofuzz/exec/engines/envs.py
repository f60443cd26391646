"""Per-engine Python environments, created once under the cache dir and reused.

An engine with a pinned requirements file gets a venv named after the file's
hash, so editing the pins (say MNN 3.5 instead of 3.6) makes a new environment
and two pinned copies of a backend are two engines a campaign can compare.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from ofuzz.exec.engines.registry import EngineError, EngineSpec, cache_dir, core_python


def env_path(spec: EngineSpec) -> Path:
    return cache_dir() / "envs" / spec.env_id


def python_for(spec: EngineSpec) -> str | None:
    """The interpreter that runs this engine's worker, or None if its env is not installed."""
    if spec.env == "core":
        return core_python()
    p = env_path(spec)
    if (p / ".ready").is_file() and (p / "bin" / "python").exists():
        return str(p / "bin" / "python")
    return None


def install_command(spec: EngineSpec) -> str:
    if spec.env == "core":
        return spec.install or "pip install -e .  (core environment)"
    return f"ofuzz engines --install {spec.name}"


def install(spec: EngineSpec, echo: Callable[[str], None] = print) -> str:
    """Create the engine's venv and pip-install its pinned requirements (no-op when done)."""
    have = python_for(spec)
    if have:
        return have
    p = env_path(spec)
    if p.exists():
        shutil.rmtree(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    if spec.env_kind == "arm64":
        return _install_arm64(spec, p, echo)
    base = interpreter(spec)
    echo(f"creating {p}")
    subprocess.run([base, "-m", "venv", str(p)], check=True)
    py = str(p / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    echo(f"installing {Path(spec.env).name} of {Path(spec.env).parent.name} (pinned; this can take minutes)")
    proc = subprocess.Popen([py, "-m", "pip", "install", "--progress-bar", "off", "-r", spec.env],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line.startswith(("Collecting", "Installing", "Successfully", "ERROR")):
            echo(line[:160])
    if proc.wait() != 0:
        raise RuntimeError(f"pip install -r {spec.env} failed (exit {proc.returncode}); see the lines above")
    (p / ".ready").write_text(spec.env_id + "\n")
    return py


def interpreter(spec: EngineSpec) -> str:
    """The Python an engine's venv is made from: the one ofuzz runs on, or the version its engine.yaml names, found on
    PATH (python3.12) or under pyenv's versions; a clear error naming the version and how to get it otherwise."""
    if not spec.python:
        return getattr(sys, "_base_executable", sys.executable)
    ver = spec.python
    if f"{sys.version_info.major}.{sys.version_info.minor}" == ver:
        return getattr(sys, "_base_executable", sys.executable)
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for cand in sorted(pyenv_root.glob(f"versions/{ver}*/bin/python{ver}"), reverse=True):
        return str(cand)
    found = shutil.which(f"python{ver}")
    if found and "/shims/" not in found:  # a pyenv shim answers only when that version is selected
        return found
    raise EngineError(f"engine {spec.name} needs Python {ver}, which is not on this machine: install it (`pyenv install {ver}` "
                      f"or `apt install python{ver} python{ver}-venv`), then `ofuzz engines --install {spec.name}`")


def _install_arm64(spec: EngineSpec, p: Path, echo: Callable[[str], None]) -> str:
    """Emulated aarch64 env; models are converted by the x86 MNN engine's converter (same version)."""
    from ofuzz.exec.engines.arm64 import build
    from ofuzz.exec.engines.registry import builtin_engines

    x86 = builtin_engines().get("mnn")
    converter = install(x86, echo) if x86 is not None else None
    py = build(p, spec.env, converter, echo)
    (p / ".ready").write_text(spec.env_id + "\n")
    return py
