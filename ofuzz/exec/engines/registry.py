"""Which engines exist: built-in backends, entry-point plug-ins and file plug-ins.

Each built-in backend folder holds an `engine.yaml` naming its adapter class,
its environment (the core one, or a pinned requirements file that gets its own
venv) and its variants.  Plug-ins: an entry point in the group `ofuzz.engines`
whose value is "path/to/file.py:Class" or "module:Class", or `--engine FILE.py:Class`.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Iterable

import yaml

from ofuzz.core.defaults import DEFAULT_ENGINES
from ofuzz.core.paths import shipped_dir


DEFAULT_COST = 5  # an engine.yaml without `cost`, and every plug-in: after the built-in cheap engines


@functools.cache
def engine_roles() -> dict[str, tuple[int, bool]]:
    """Built-in engine name -> (cost, spec_close), as their engine.yaml files say."""
    return {n: (s.cost, s.spec_close) for n, s in builtin_engines().items()}


def cost_of(engine: str) -> int:
    return engine_roles().get(engine, (DEFAULT_COST, False))[0]


def spec_close_first(engines: Iterable[str]) -> list[str]:
    """The spec-close engines among `engines`, cheapest first."""
    roles = engine_roles()
    return sorted((e for e in engines if roles.get(e, (0, False))[1]), key=lambda e: (cost_of(e), e))


class EngineError(ValueError):
    """An engine name or plug-in cannot be resolved; the message says how to fix it."""


@dataclass(frozen=True)
class EngineSpec:
    name: str
    adapter: str  # "/abs/path/adapter.py:Class"
    env: str = "core"  # "core" or an absolute path to a requirements file
    options: dict[str, Any] = field(default_factory=dict)
    memory_gb: float = 8.0
    timeout: float = 60.0
    startup_timeout: float = 180.0
    install: str = ""
    default: bool = False
    env_vars: dict[str, str] = field(default_factory=dict)
    doc: str = ""
    env_kind: str = "venv"  # "venv" (pip into a virtualenv) or "arm64" (emulated aarch64 rootfs)
    # Native engines can corrupt their own worker (heap damage shows up later as nonsense errors on
    # healthy models), so such a worker is replaced after any failure except these clean ones.
    fresh_after_error: bool = False
    clean_errors: tuple[str, ...] = ()
    family: str = ""  # engines of one family (builds or modes of one implementation) vote once; default: the name
    # `name@VERSION` engines: the package whose pin the version replaces, and what else a core-env engine's own venv needs
    max_opset: int = 0  # the highest ONNX version the engine runs (0: no known limit); models above it are not sent
    version_package: str = ""
    second_opinion: str = ""  # an engine asked whether this one's reduced findings show there too (ofuzz.triage.second_opinion)
    version_requires: tuple[str, ...] = ()
    version_max_opset: tuple[tuple[str, int], ...] = ()  # (release prefix, its max_opset) where it differs from max_opset
    # the engine tells an input's layout from its shape (onnx2tf's default mode): a repro must not hand it an input whose
    # layouts look alike where the model had none, or the repro may show another defect than the model (ofuzz.triage.reduce)
    layout_from_shape: bool = False
    # seconds a campaign gives one step (0: `timeout`): onnx2tf takes 20-90 s on a few models (a permutation search in
    # its Concat handler), which cost campaigns up to 280 of their 600 s; the export re-judges with `timeout`, so a
    # conversion that is merely slow comes out unconfirmed there and a real hang is still reported
    campaign_timeout: float = 0.0
    campaign_step: bool = False  # this spec's timeout is a campaign's step limit (a timeout then is not yet a hang)
    full_timeout: float = 0.0  # with campaign_step: the engine's own limit, which a step starved of CPU may run up to
    # roles in the oracle, from engine.yaml: `cost` orders the voters a check asks first (cheapest first), `spec_close`
    # marks an implementation written from the spec's text (the reference evaluator, onnxruntime) whose outputs stand
    # for a majority it is in and whose intermediate values feed localisation and reduction
    cost: int = DEFAULT_COST
    spec_close: bool = False
    python: str = ""  # the Python its environment needs ("3.12"; empty: the one ofuzz runs on)

    def for_campaign(self) -> "EngineSpec":
        """This spec with the campaign's step limit as its timeout (unchanged when it has none)."""
        if not self.campaign_timeout or self.campaign_timeout >= self.timeout:
            return self
        return replace(self, timeout=self.campaign_timeout, campaign_step=True, full_timeout=self.timeout)

    @property
    def family_name(self) -> str:
        return self.family or self.name

    @property
    def env_id(self) -> str:
        if self.env == "core":
            return "core"
        digest = hashlib.sha256(Path(self.env).read_bytes()).hexdigest()[:12]
        return f"{Path(self.env).parent.name}-{digest}"


def backends_dir() -> Path:
    found = shipped_dir("backends")
    if found:
        return found
    raise EngineError("backends/ folder not found beside the ofuzz package; reinstall with `pip install -e .` from a checkout")


def _spec_from(raw: dict[str, Any], base: Path, src: str) -> EngineSpec:
    try:
        name = str(raw["name"])
        file, _, cls = str(raw["adapter"]).partition(":")
    except KeyError as exc:
        raise EngineError(f"{src}: engine entry lacks field {exc}") from None
    env = raw.get("env", "core")
    if env != "core":
        env = str((base / env).resolve())
    return EngineSpec(
        name=name, adapter=f"{(base / file).resolve()}:{cls}", env=env, options=dict(raw.get("options") or {}),
        memory_gb=float(raw.get("memory_gb", 8)), timeout=float(raw.get("timeout", 60)),
        startup_timeout=float(raw.get("startup_timeout", 180)), install=str(raw.get("install", "")),
        default=name in DEFAULT_ENGINES, env_vars={k: str(v) for k, v in (raw.get("env_vars") or {}).items()},
        doc=str(raw.get("doc", "")), env_kind=str(raw.get("env_kind", "venv")),
        fresh_after_error=bool(raw.get("fresh_after_error", False)), clean_errors=tuple(str(e) for e in raw.get("clean_errors") or ()),
        family=str(raw.get("family") or ""),
        max_opset=int(raw.get("max_opset", 0)), second_opinion=str(raw.get("second_opinion") or ""),
        version_package=str((raw.get("versions") or {}).get("package", "")),
        version_requires=tuple(str(r) for r in (raw.get("versions") or {}).get("requires") or ()),
        version_max_opset=tuple((str(k), int(v)) for k, v in ((raw.get("versions") or {}).get("max_opset") or {}).items()),
        layout_from_shape=bool(raw.get("layout_from_shape", False)),
        campaign_timeout=float(raw.get("campaign_timeout", 0)),
        cost=int(raw.get("cost", DEFAULT_COST)), spec_close=bool(raw.get("spec_close", False)),
        python=str(raw.get("python", "") or ""),
    )


def builtin_engines() -> dict[str, EngineSpec]:
    out: dict[str, EngineSpec] = {}
    for f in sorted(backends_dir().glob("*/engine.yaml")):
        doc = yaml.safe_load(f.read_text()) or {}
        for raw in doc.get("engines", []):
            spec = _spec_from(raw, f.parent, str(f))
            out[spec.name] = spec
    return out


def plugin_from_file(ref: str) -> EngineSpec:
    """`path/to/my_engine.py:MyEngine[:name]` → a core-env engine spec."""
    parts = ref.split(":")
    if len(parts) < 2 or not parts[0].endswith(".py"):
        raise EngineError(f"--engine {ref!r}: expected FILE.py:Class (for example my_engine.py:MyEngine)")
    path = Path(parts[0]).resolve()
    if not path.is_file():
        raise EngineError(f"--engine {ref!r}: no such file {path}")
    name = parts[2] if len(parts) > 2 else _class_attr(path, parts[1], "name") or parts[1].lower()
    return EngineSpec(name=name, adapter=f"{path}:{parts[1]}", install=f"fix or install what {path.name} imports")


def _class_attr(path: Path, cls: str, attr: str) -> str | None:
    """Read a plug-in's `name` without importing its engine (a cheap source scan)."""
    import re

    src = path.read_text(errors="replace")
    m = re.search(rf"class {cls}\b[^\n]*:\n((?:[ \t]+[^\n]*\n|\n)*)", src)
    if m:
        n = re.search(rf'^\s+{attr}\s*(?::\s*str)?\s*=\s*["\']([\w.:-]+)["\']', m.group(1), re.M)
        if n:
            return n.group(1)
    return None


def entry_point_engines() -> dict[str, EngineSpec]:
    out: dict[str, EngineSpec] = {}
    for ep in entry_points(group="ofuzz.engines"):
        value = ep.value
        if ".py:" in value:
            spec = plugin_from_file(value)
        else:
            mod, _, cls = value.partition(":")
            found = importlib.util.find_spec(mod)
            if found is None or not found.origin:
                continue
            spec = EngineSpec(name=ep.name, adapter=f"{found.origin}:{cls}", install=f"pip install {ep.dist.name if ep.dist else mod}")
        out[ep.name] = EngineSpec(**{**spec.__dict__, "name": ep.name})
    return out


def all_engines(extra: list[str] | None = None) -> dict[str, EngineSpec]:
    engines = {**builtin_engines(), **entry_point_engines()}
    for ref in extra or []:
        spec = plugin_from_file(ref)
        engines[spec.name] = spec
    return engines


_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!-]{0,40}")


def versioned(base: EngineSpec, version: str) -> EngineSpec:
    """`mnn@3.5.0`: the base engine with its package pinned to `version`, in an environment of its own (made from a
    requirements file written under the cache, so its hash names the venv), voting in the base engine's family."""
    name = f"{base.name}@{version}"
    if not base.version_package:
        raise EngineError(f"engine {base.name!r} has no versions (its engine.yaml has no `versions:`); use {base.name} itself")
    if not _VERSION.fullmatch(version):
        raise EngineError(f"{name!r}: {version!r} is not a version number (for example {base.name}@3.5.0)")
    pkg = base.version_package
    pin = f"{pkg}=={version}"
    if base.env == "core":
        lines = [pin, *base.version_requires]
    else:
        same = re.compile(rf"^\s*{re.escape(pkg)}\s*(==|>=|<=|~=|$)", re.I)
        lines = [pin if same.match(line) else line for line in Path(base.env).read_text().splitlines()]
        if pin not in lines:
            lines.append(pin)
    folder = cache_dir() / "versions" / name
    folder.mkdir(parents=True, exist_ok=True)
    req = folder / "requirements.txt"
    text = f"# {name}: {base.name}'s environment with {pin} (written by ofuzz)\n" + "\n".join(lines) + "\n"
    if not req.is_file() or req.read_text() != text:
        req.write_text(text)
    limit = next((v for prefix, v in base.version_max_opset if version == prefix or version.startswith(prefix + ".")), base.max_opset)
    return EngineSpec(**{**base.__dict__, "name": name, "env": str(req), "family": base.family_name, "default": False, "max_opset": limit,
                         "second_opinion": "",  # the other mode is not pinned to this version
                         "install": f"ofuzz engines --install {name}", "doc": f"{base.doc} — pinned to {pin}"})


def installed_versions() -> list[str]:
    """NAME@VERSION engines whose requirements ofuzz has written before (listed by `ofuzz engines`)."""
    folder = cache_dir() / "versions"
    return sorted(d.name for d in folder.glob("*@*") if (d / "requirements.txt").is_file()) if folder.is_dir() else []


def resolve(names: list[str], extra: list[str] | None = None) -> list[EngineSpec]:
    """Engine names (and FILE.py:Class plug-ins, and NAME@VERSION) → specs, with a clear error for typos."""
    known = all_engines(extra)
    out = []
    for n in names:
        if ".py:" in n:
            spec = plugin_from_file(n)
            known[spec.name] = spec
            out.append(spec)
            continue
        base, at, version = n.partition("@")
        if at and base in known:
            out.append(versioned(known[base], version))
            continue
        if n not in known:
            raise EngineError(f"unknown engine {n!r}; known engines: {', '.join(sorted(known))} (or give FILE.py:Class)")
        out.append(known[n])
    return out


def core_python() -> str:
    return sys.executable


def cache_dir() -> Path:
    return Path(os.environ.get("OFUZZ_CACHE", Path.home() / ".cache" / "ofuzz"))
