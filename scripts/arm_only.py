"""ARM-only findings of a campaign run with x86 MNN and emulated ARM builds side by side.

An ARM-only finding is blamed on an `mnn-arm:*` build in a model where x86 MNN passed (agreed with the
majority, which holds onnxruntime and/or the reference). They are read from the campaign's store; each
one's first model is re-run RERUNS times to tell deterministic ARM kernel bugs from flaky results, then
reduced and exported to DIR/repros-arm/<id> (x86 MNN's status on the reduced model is checked again).

    python scripts/arm_only.py results/arm30c [--reruns 3] [--reduce-time 30] [--workers 2]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import onnx

from ofuzz.exec.engines.registry import resolve
from ofuzz.core.npz import load_npz
from ofuzz.judge.judging import judge_model
from ofuzz.triage.pipeline import export
from ofuzz.exec.runner import EnginePool, for_each_in_pools
from ofuzz.judge.signature import finding_id
from ofuzz.store.campaign_store import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--reruns", type=int, default=3)
    ap.add_argument("--reduce-time", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=2, help="parallel engine pools")
    ap.add_argument("--limit", type=int, default=0, help="only the first N signatures (0 = all)")
    a = ap.parse_args()
    store = Store(a.campaign)
    engines = store.get_meta("options")["engines"]
    cands = store.blamed_where_passed("mnn-arm", "mnn")
    findings = {f["signature"]: f for f in store.findings()}
    n_models = sum(v for k, v in store.engine_stats().get("mnn", {}).items() if k != "time")
    print(f"{n_models} judged models; {len(cands)} ARM-blamed signatures in models where x86 MNN passed "
          f"({sum(len(v) for v in cands.values())} occurrences)")
    specs = resolve(engines)
    by_name = {s.name: s for s in specs}
    summary: list[dict] = []
    items = sorted(cands.items(), key=lambda kv: (findings[kv[0]]["engine"], kv[0]))[: a.limit or None]

    def one(pool: EnginePool, sig: str, models: list[tuple[int, str]]) -> dict:
        f = {"signature": sig, **findings[sig]}
        idx, mid = models[0]
        path = a.campaign / "models" / f"{mid}.onnx"
        feeds = load_npz(a.campaign / "models" / f"{mid}.inputs.npz")
        model = onnx.load(str(path))
        again = 0
        for _ in range(a.reruns):
            j = judge_model(pool, model, path, feeds, do_localise=f["status"] == "DCF")
            again += any(x.signature == sig for x in j.findings)
        dest = a.campaign / "repros-arm" / finding_id(sig)
        t0 = time.monotonic()
        export(by_name, f, path, feeds, dest, reduce_budget=a.reduce_time if again else 0, pool=pool)
        info = json.loads((dest / "finding.json").read_text())
        reduced = onnx.load(str(dest / "model.onnx"))
        x86 = judge_model(pool, reduced, dest / "model.onnx", load_npz(dest / "inputs.npz"), do_localise=False).verdict.results.get("mnn")
        x86_detail = x86.outcome.summary() if x86 is not None and x86.outcome is not None and x86.status in ("MCF", "IF") else ""
        row = {"id": finding_id(sig), "engine": f["engine"], "status": f["status"], "op": f["op"], "models": len(models),
               "first_model": mid, "reruns_reproduced": f"{again}/{a.reruns}", "nodes_before": info["reduction"]["nodes_before"],
               "nodes_after": info["reduction"]["nodes_after"], "reduced_ops": info["reduced_ops"],
               "x86_mnn_on_reduced": x86.status if x86 else "?", "x86_mnn_detail": x86_detail, "repro_check": info.get("repro_check"),
               "seconds": round(time.monotonic() - t0, 1), "summary": f["summary"], "dir": str(dest)}
        print(f"  {row['id']}  {f['engine']:12s} {f['status']} op={f['op']}  {len(models)} model(s), e.g. {mid}; reruns "
              f"{row['reruns_reproduced']}; reduced {row['nodes_before']}→{row['nodes_after']} ({'+'.join(row['reduced_ops'])}); "
              f"x86 MNN on reduced: {row['x86_mnn_on_reduced']} {x86_detail[:80]}; repro.py: {row['repro_check']}\n      {f['summary'][:150]}",
              flush=True)
        return row

    def safely(pool: EnginePool, item: tuple[str, list[tuple[int, str]]]) -> None:
        try:
            summary.append(one(pool, *item))
        except Exception as exc:  # report and go on with the others
            print(f"  {finding_id(item[0])} failed: {type(exc).__name__}: {exc}", flush=True)

    for_each_in_pools(specs, a.campaign / "work" / "arm-only", items, safely, a.workers)
    (a.campaign / "arm_only.json").write_text(json.dumps(summary, indent=1))
    det = [r for r in summary if r["reruns_reproduced"] == f"{a.reruns}/{a.reruns}"]
    only = [r for r in det if r["x86_mnn_on_reduced"] == "DCP" and str(r["repro_check"]).startswith("reproduced")]
    print(f"\n{len(summary)} ARM-only signatures; {len(det)} reproduce on every re-run; {len(only)} stay ARM-only after reduction "
          f"with a repro.py that reproduces; nodes after reduction median "
          f"{statistics.median([r['nodes_after'] for r in summary]) if summary else 0}; written to {a.campaign}/arm_only.json")


if __name__ == "__main__":
    main()
