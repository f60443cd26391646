"""ARM-only findings of a campaign run with x86 MNN and emulated ARM builds side by side.

An ARM-only finding is blamed on an `mnn-arm:*` build in a model where x86 MNN passed (agreed with the
majority, which holds onnxruntime and/or the reference). They are read from the campaign's store and triaged by the
campaign's own export (re-judged, reduced, keyed, repro folder under DIR/repros/<id>, as `ofuzz bugs` does); then x86
MNN's status on each reduced model is checked again, to tell ARM-only defects from ones x86 shares once reduced.

    python scripts/arm_only.py results/arm30c [--reduce-time 30] [--workers 2]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import onnx

from ofuzz.exec.engines.registry import resolve
from ofuzz.core.npz import load_npz
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.judging import judge_model
from ofuzz.judge.signature import finding_id
from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.store.campaign_store import Store
from ofuzz.triage.export_all import export_findings, pending_findings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--reduce-time", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=2, help="parallel engine pools")
    ap.add_argument("--limit", type=int, default=0, help="only the first N signatures (0 = all)")
    a = ap.parse_args()
    store = Store(a.campaign)
    engines = store.get_meta("options")["engines"]
    cands = store.blamed_where_passed("mnn-arm", "mnn")
    n_models = sum(v for k, v in store.engine_stats().get("mnn", {}).items() if k != "time")
    store.close()
    print(f"{n_models} judged models; {len(cands)} ARM-blamed signatures in models where x86 MNN passed "
          f"({sum(len(v) for v in cands.values())} occurrences)")
    specs = resolve(engines)
    chosen = set(sorted(cands)[: a.limit or None])
    todo, _ = pending_findings(a.campaign, {s.name for s in specs})
    export_findings(a.campaign, specs, a.reduce_time, todo=[f for f in todo if f["signature"] in chosen], workers=a.workers)
    summary = []
    with EnginePool(specs, a.campaign / "work" / "arm-only") as pool:
        pool.start()
        for sig in sorted(chosen):
            summary.append(row_of(pool, CampaignDir(a.campaign).repro(finding_id(sig)), sig, len(cands[sig])))
    (a.campaign / "arm_only.json").write_text(json.dumps(summary, indent=1))
    confirmed = [r for r in summary if r["klass"] == "bug"]
    only = [r for r in confirmed if r["x86_mnn_on_reduced"] == "DCP" and str(r["repro_check"]).startswith("reproduced")]
    print(f"\n{len(summary)} ARM-only signatures; {len(confirmed)} confirmed bugs on re-run; {len(only)} stay ARM-only after reduction "
          f"with a repro.py that reproduces; nodes after reduction median "
          f"{statistics.median([r['nodes_after'] for r in summary]) if summary else 0}; written to {a.campaign}/arm_only.json")


def row_of(pool: EnginePool, folder: Path, sig: str, models: int) -> dict:
    """One ARM-only signature's line: what the export made of it, and x86 MNN on its reduced model."""
    if not (folder / "finding.json").is_file():
        return {"id": folder.name, "signature": sig, "klass": "not exported", "models": models, "nodes_after": 0, "repro_check": "",
                "x86_mnn_on_reduced": "?"}
    info = json.loads((folder / "finding.json").read_text())
    x86 = None
    if (folder / "model.onnx").is_file():
        x86 = judge_model(pool, onnx.load(str(folder / "model.onnx")), folder / "model.onnx", load_npz(folder / "inputs.npz"),
                          do_localise=False).verdict.results.get("mnn")
    row = {"id": folder.name, "engine": info["engine"], "status": info["status"], "klass": info.get("klass"), "models": models,
           "nodes_after": (info.get("reduction") or {}).get("nodes_after", 0), "reduced_ops": info.get("reduced_ops", []),
           "x86_mnn_on_reduced": x86.status if x86 else "?", "repro_check": info.get("repro_check"), "summary": info["summary"],
           "dir": str(folder)}
    print(f"  {row['id']}  {row['engine']:12s} {row['status']} {row['klass']}; {models} model(s); reduced to {row['nodes_after']} "
          f"({'+'.join(row['reduced_ops'])}); x86 MNN on reduced: {row['x86_mnn_on_reduced']}; repro.py: {row['repro_check']}", flush=True)
    return row


if __name__ == "__main__":
    main()
