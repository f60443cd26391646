"""Replays the confirmed-bugs corpus (tests/data/bugs/<slug>/, format in its README.md).

Every folder holds a reduced model, its inputs and a bug.yaml naming the engine with the defect, the status
ofuzz gives it, the operator at fault and the engines to replay with.  Each folder is checked twice:
  * test_bug_folder_is_valid: the files and fields are well-formed (no engine needed);
  * test_bug_still_found: the model is judged exactly as a campaign judges it (Policy.default()) and the
    finding must still be there, classed as a bug, on the named operator.
A bug an engine has fixed therefore fails here: move its folder out (or update bug.yaml) with a note.
Engines whose environment is not installed are skipped; with OFUZZ_REQUIRE_ENGINES set they fail instead.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from google.protobuf.message import DecodeError

from ofuzz.exec.engines.envs import python_for
from ofuzz.exec.engines.registry import EngineError, resolve
from ofuzz.judge.judging import Policy, judge_model
from ofuzz.exec.runner import EnginePool

BUGS_DIR = Path(__file__).parent / "data" / "bugs"
STATUSES = ("DCF", "IF", "MCF")
CATEGORIES = ("value", "shape", "nan", "inf", "dtype")
REQUIRED = ("engine", "status", "op", "engines", "why", "found_in", "checked")
OPTIONAL = ("category",)
MAX_BYTES = 64 * 1024  # reduced repros are tiny; keep the corpus small


def _folders() -> list[str]:
    return sorted(p.name for p in BUGS_DIR.iterdir() if p.is_dir()) if BUGS_DIR.is_dir() else []


FOLDERS = _folders()


def _load(slug: str) -> tuple[dict, onnx.ModelProto, dict[str, np.ndarray]]:
    """bug.yaml, model and inputs of one folder; every problem is an assertion naming the folder."""
    d = BUGS_DIR / slug
    where = f"tests/data/bugs/{slug}"
    for f in ("model.onnx", "inputs.npz", "bug.yaml"):
        assert (d / f).is_file(), f"{where}: missing {f}"
    for f in ("model.onnx", "inputs.npz"):
        size = (d / f).stat().st_size
        assert size <= MAX_BYTES, f"{where}/{f}: {size} bytes (> {MAX_BYTES}); commit the reduced repro only"
    try:
        bug = yaml.safe_load((d / "bug.yaml").read_text())
    except yaml.YAMLError as e:
        raise AssertionError(f"{where}/bug.yaml: not valid YAML: {e}") from None
    assert isinstance(bug, dict), f"{where}/bug.yaml: expected a mapping, got {type(bug).__name__}"
    missing = [k for k in REQUIRED if k not in bug]
    assert not missing, f"{where}/bug.yaml: missing field(s) {missing}"
    unknown = sorted(set(bug) - set(REQUIRED) - set(OPTIONAL))
    assert not unknown, f"{where}/bug.yaml: unknown field(s) {unknown} (allowed: {list(REQUIRED + OPTIONAL)})"
    for k in ("engine", "op", "why", "found_in", "checked"):
        assert isinstance(bug[k], str) and bug[k].strip(), f"{where}/bug.yaml: {k} must be a non-empty string"
    assert bug["status"] in STATUSES, f"{where}/bug.yaml: status {bug['status']!r} not one of {STATUSES}"
    if "category" in bug:
        assert bug["status"] == "DCF", f"{where}/bug.yaml: category is for DCF only (status is {bug['status']})"
        assert bug["category"] in CATEGORIES, f"{where}/bug.yaml: category {bug['category']!r} not one of {CATEGORIES}"
    engines = bug["engines"]
    assert isinstance(engines, list) and all(isinstance(e, str) for e in engines), f"{where}/bug.yaml: engines must be a list of names"
    assert len(set(engines)) == len(engines), f"{where}/bug.yaml: engines listed twice in {engines}"
    need = {"onnxruntime", "reference", bug["engine"]}
    assert need <= set(engines), f"{where}/bug.yaml: engines {engines} must include {sorted(need)}"
    try:
        resolve(engines)
    except EngineError as e:  # unknown engine name
        raise AssertionError(f"{where}/bug.yaml: {e}") from None
    try:
        model = onnx.load(d / "model.onnx")
    except (OSError, DecodeError) as e:
        raise AssertionError(f"{where}/model.onnx: cannot be loaded: {e}") from None
    ops = {n.op_type for n in model.graph.node}
    assert bug["op"] in ops, f"{where}/bug.yaml: op {bug['op']!r} is not in the model (ops: {sorted(ops)})"
    with np.load(d / "inputs.npz") as z:
        feeds = {k: z[k] for k in z.files}
    inits = {i.name for i in model.graph.initializer}
    wanted = {i.name for i in model.graph.input if i.name not in inits}
    assert set(feeds) == wanted, f"{where}/inputs.npz: holds {sorted(feeds)}, the model's inputs are {sorted(wanted)}"
    return bug, model, feeds


def test_corpus_is_not_empty():
    assert FOLDERS, f"no bug folders under {BUGS_DIR}"


@pytest.mark.parametrize("slug", FOLDERS)
def test_bug_folder_is_valid(slug):
    _load(slug)


@pytest.fixture(scope="module")
def policy():
    return Policy.default()


@pytest.fixture(scope="module")
def pools(tmp_path_factory):
    """One EnginePool per distinct engine set, started on first use and shared by the module's tests."""
    started: dict[tuple[str, ...], EnginePool] = {}
    root = tmp_path_factory.mktemp("bug-pools")

    def get(engines: list[str]) -> EnginePool:
        key = tuple(sorted(engines))
        if key not in started:
            specs = resolve(list(key))
            missing = [s.name for s in specs if python_for(s) is None]
            if missing:
                if os.environ.get("OFUZZ_REQUIRE_ENGINES"):
                    pytest.fail(f"engines not installed: {missing} (run `ofuzz engines --install all`)")
                pytest.skip(f"engines not installed: {missing}")
            pool = EnginePool(specs, root / "-".join(key))
            outcomes = pool.start()
            bad = {n: o.summary() for n, o in outcomes.items() if not o.ok}
            if bad:
                pool.close()
                pytest.fail(f"engines did not start: {bad}")
            started[key] = pool
        return started[key]

    yield get
    for pool in started.values():
        pool.close()


@pytest.mark.parametrize("slug", FOLDERS)
def test_bug_still_found(slug, pools, policy, tmp_path):
    bug, model, feeds = _load(slug)
    pool = pools(bug["engines"])
    path = tmp_path / "model.onnx"  # the engines get a private copy, never the checked-in file
    shutil.copyfile(BUGS_DIR / slug / "model.onnx", path)
    judged = judge_model(pool, model, path, feeds, policy=policy)

    statuses = {e: r.status for e, r in judged.verdict.results.items()}
    seen = [(f.engine, f.status, f.op, f.klass) for f in judged.findings]
    where = f"{slug}: {bug['engine']} {bug['status']} on {bug['op']}"
    mine = [f for f in judged.findings if f.engine == bug["engine"] and f.status == bug["status"]]
    assert mine, f"{where} is no longer found (fixed, or judged differently?); statuses {statuses}, findings {seen}"
    f = mine[0]
    assert f.klass == "bug", f"{where}: classed {f.klass!r}, not 'bug' ({f.summary}; {f.detail.get('undefined') or f.detail.get('gap') or ''})"
    if bug["status"] == "DCF":
        assert f.op == bug["op"], f"{where}: the finding blames {f.op!r} ({f.summary})"
        if "category" in bug:
            cat = (f.detail.get("diverging") or {}).get("category")
            assert cat == bug["category"], f"{where}: category {cat!r}, expected {bug['category']!r} ({f.summary})"
    else:
        ops = {n.op_type for n in model.graph.node}
        assert bug["op"] in ops, f"{where}: op not in the model ({sorted(ops)})"
        if f.op is not None:  # when the failure names an operator, it must be this one
            assert f.op == bug["op"], f"{where}: the failure names {f.op!r} ({f.summary})"
