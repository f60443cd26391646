"""Fault benchmark: does triage give back every seeded defect it reaches as exactly one root cause, and nothing else?

The TEST DOUBLE engine `faultbench` (backends/faultbench/) is onnxruntime with 21 independent faults seeded (single
operators' values, attribute corners, crashes/raises/hangs at conversion and inference, NaN propagation, four multi-node
patterns) and a decoy below every tolerance. A campaign runs it beside onnxruntime and the reference; then:

- reached: a fault whose trigger is the only fault in the model of some finding on faultbench (it showed, alone);
- a root cause on faultbench *holds* the faults its smallest reduced repro triggers (faults.active_faults, the same
  code that seeded them); every member with a repro of its own adds the faults its repro triggers;
- the benchmark wants: every reached fault held by exactly one root cause, no root cause holding two faults, no root
  cause holding none (a false report), and the decoy never held.

    python scripts/fault_benchmark.py --budget 10m --seed 1 [--out DIR] [--faults id,id,...] [--json FILE]
    python scripts/fault_benchmark.py --score DIR      # score a campaign already run (and triaged)
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import onnx
import typer

ROOT = Path(__file__).resolve().parents[1]
ENGINE = "faultbench"


@functools.cache
def catalogue() -> Any:
    """backends/faultbench/faults.py, the module the engine seeds its faults from."""
    spec = importlib.util.spec_from_file_location("faultbench_faults", ROOT / "backends" / "faultbench" / "faults.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = mod  # type: ignore[union-attr]  # dataclasses look their module up there
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def faults_in(path: Path, enabled: tuple[str, ...] | None, key: dict[str, Any] | None = None) -> set[str]:
    """The faults a model triggers; with a root key, only those of the kind the key reports (a hang's repro is not
    reduced, so it holds whatever its model held: it reports the hang fault in it, not the wrong values beside it)."""
    if not path.is_file():
        return set()
    found = catalogue().active_faults(onnx.load(str(path)), enabled)
    return {f.id for f, _ in found if key is None or f.kind in kinds_reported(key)}


def kinds_reported(key: dict[str, Any]) -> set[str]:
    """The fault kinds a root key can be the report of."""
    failure, status = key.get("failure", ""), key.get("status", "")
    if failure == "timeout":
        return {"hang"}
    if failure.split(":")[0] in ("crash", "exit", "oom") or status == "MCF/IF":
        return {"segfault", "abort"}
    if status == "DCF":
        return {"offset", "scale", "nanflush", "decoy"}
    return {"raise", "segfault", "abort", "hang", "offset", "scale", "nanflush", "decoy"} if failure == "upstream" else {"raise"}


def run_campaign(out: Path, budget: str, seed: int, enabled: tuple[str, ...] | None, workers: int) -> None:
    """A campaign on faultbench, onnxruntime and the reference, triaged to the end (every finding exported)."""
    engines = f"{ENGINE},onnxruntime,reference"
    cmd = [sys.executable, "-m", "ofuzz.cli", "campaign", "--engines", engines, "--budget", budget, "--seed", str(seed),
           "--out", str(out), "--workers", str(workers), "--no-report"]
    env = {**os.environ, "OFUZZ_FAULTBENCH_FAULTS": ",".join(enabled or ())}  # the engine's workers inherit it
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "ofuzz.cli", "bugs", str(out), "--json"], check=True, env=env, stdout=subprocess.DEVNULL)


def score(campaign: Path, enabled: tuple[str, ...] | None) -> dict[str, Any]:
    """The benchmark's figures for a triaged campaign."""
    bugs = json.loads(subprocess.run([sys.executable, "-m", "ofuzz.cli", "bugs", str(campaign), "--json", "--no-triage"],
                                     check=True, capture_output=True, text=True).stdout)
    findings = json.loads(subprocess.run([sys.executable, "-m", "ofuzz.cli", "findings", str(campaign), "--json"],
                                         check=True, capture_output=True, text=True).stdout)
    cat = catalogue()
    ids = [f.id for f in cat.FAULTS if enabled is None or f.id in enabled]
    reached, seen = set(), set()
    for f in findings:
        if f["engine"] != ENGINE:
            continue
        held = faults_in(campaign / "models" / f"{f['first_model']}.onnx", enabled)
        seen |= held
        if len(held) == 1:
            reached |= held
    roots = [r for r in bugs["root_causes"] if r["engine"] == ENGINE]
    held_by: dict[str, list[str]] = {i: [] for i in ids}
    rows = []
    for r in roots:
        held = faults_in(campaign / (r.get("repro") or "-") / "model.onnx", enabled, r["key"])
        for m in r.get("members", []):  # every member reduced on its own adds what its repro holds
            held |= faults_in(campaign / "repros" / m["finding"] / "model.onnx", enabled, r["key"]) if "own reduced repro" in m["joined_by"] else set()
        for i in held:
            held_by[i].append(r["id"])
        rows.append({"root": r["id"], "key": r["key"], "faults": sorted(held), "members": len(r.get("members", []))})
    decoy = [i for i in ids if cat.BY_ID[i].family == "decoy"]
    real = [i for i in reached if i not in decoy]
    seen_real = [i for i in seen if i not in decoy]  # in some finding's model, alone or beside other faults
    return {"faults": len(ids), "reached": sorted(real), "seen_in_findings": sorted(seen),
            "seen_one_root_each": sorted(i for i in seen_real if len(held_by[i]) == 1), "seen_missed": sorted(i for i in seen_real if not held_by[i]),
            "one_root_each": sorted(i for i in real if len(held_by[i]) == 1),
            "missed": sorted(i for i in real if not held_by[i]), "split": {i: held_by[i] for i in real if len(held_by[i]) > 1},
            "roots_with_two_faults": [x for x in rows if len(x["faults"]) > 1], "roots_without_fault": [x for x in rows if not x["faults"]],
            "decoy_reported": {i: held_by[i] for i in decoy if held_by[i]}, "roots": rows}


def cat_family(fault_id: str) -> str:
    return catalogue().BY_ID[fault_id].family


def main(budget: str = typer.Option("10m", help="Campaign budget."), seed: int = typer.Option(1, help="Campaign seed."),
         out: Optional[Path] = typer.Option(None, help="Campaign folder (default: a temporary one)."),
         faults: str = typer.Option("", help="Only these fault ids (comma-separated); default: all."),
         workers: int = typer.Option(2, help="Campaign workers."),
         score_only: Optional[Path] = typer.Option(None, "--score", help="Score this triaged campaign instead of running one."),
         as_json: Optional[Path] = typer.Option(None, "--json", help="Write the figures here too.")) -> None:
    enabled = tuple(x for x in faults.split(",") if x) or None
    if score_only is None:
        tmp = None if out else tempfile.mkdtemp(prefix="ofuzz-faultbench-")
        out = out or Path(tmp) / "campaign"  # type: ignore[arg-type]
        run_campaign(out, budget, seed, enabled, workers)
    s = score(score_only or out, enabled)  # type: ignore[arg-type]
    real = s["reached"]
    print(f"faults seeded {s['faults']} (decoy included); reached alone {len(real)}: {', '.join(real)}")
    print(f"one root cause each: {len(s['one_root_each'])} of {len(real)} ({100 * len(s['one_root_each']) / max(len(real), 1):.0f}%)")
    print(f"missed: {s['missed'] or 'none'}; split over several roots: {s['split'] or 'none'}")
    seen = [i for i in s["seen_in_findings"] if i not in s["decoy_reported"] and cat_family(i) != "decoy"]
    print(f"in any finding's model (alone or beside others) {len(seen)}: one root cause each {len(s['seen_one_root_each'])}; "
          f"never a root {s['seen_missed'] or 'none'}")
    print(f"roots holding two faults: {len(s['roots_with_two_faults'])}; roots holding none (false): {len(s['roots_without_fault'])}; "
          f"decoy reported: {s['decoy_reported'] or 'never'}")
    for x in s["roots_with_two_faults"] + s["roots_without_fault"]:
        print(f"  {x['root']}: {x['key']['status']} {x['key']['failure']} {'+'.join(x['key']['ops'])} holds {x['faults'] or 'no fault'}")
    if as_json:
        as_json.write_text(json.dumps(s, indent=1, default=str))


if __name__ == "__main__":
    typer.run(main)
