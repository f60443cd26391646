"""RQ1: a long run with block counts uniform in 1..30, listing the distinct exceptions by engine and
status, each linked to its reduced repro.  Appends an RQ1 section to docs/results.md.

    python scripts/experiments/rq1.py [--models 1000] [--engines onnxruntime,tensorflow,mnn,reference] [--export-time 600]
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ofuzz.core.defaults import DEFAULT_ENGINES
from ofuzz.campaign.loop import Campaign, CampaignOptions
from ofuzz.judge.signature import finding_id
from ofuzz.triage.export_all import export_findings  # noqa: E402
from ofuzz.gen.corpus import load_corpus  # noqa: E402
from ofuzz.exec.engines.registry import resolve  # noqa: E402
from ofuzz.store.campaign_store import Store  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "rq1")
    ap.add_argument("--export-time", type=float, default=600.0)
    ap.add_argument("--docs", type=Path, default=ROOT / "docs" / "results.md")
    a = ap.parse_args()
    specs = resolve(a.engines.split(","))
    opts = CampaignOptions(engines=[s.name for s in specs], models=a.models, blocks=(1, 30), run_all=True, seed=1,
                           chooser="mcts", steer=False, opsets=(17, 17), int_inputs=0.0, step_limits=False)  # the paper's method, at opset 17
    t0 = time.perf_counter()
    resume = (a.out / "campaign.sqlite").is_file()
    c = Campaign(load_corpus(), specs, opts, a.out, resume=resume)
    c.run()
    c.close()
    export_findings(a.out, specs, 20.0, a.export_time)
    st = Store(a.out)
    rows = st.findings()
    counts = st.counts()
    st.close()
    by = collections.Counter((r["engine"], r["status"]) for r in rows)
    lines = ["", f"## RQ1: {counts['generated']} models, blocks U[1,30], every model run ({a.engines})", "",
             f"`python scripts/experiments/rq1.py --models {a.models} --engines {a.engines}` ({(time.perf_counter() - t0) / 60:.0f} min). "
             f"{len(rows)} distinct exceptions after deduplication:", "",
             "| engine | status | distinct |", "|---|---|---|", *[f"| {e} | {s} | {n} |" for (e, s), n in sorted(by.items())], "",
             "| id | engine | status | op | count | reduced repro |", "|---|---|---|---|---|---|"]
    for r in rows:
        fid = finding_id(r["signature"])
        info = a.out / "repros" / fid / "finding.json"
        rep = "—"
        if info.is_file():
            d = json.loads(info.read_text())
            rep = f"`results/rq1/repros/{fid}` ({d['reduction']['nodes_before']}→{d['reduction']['nodes_after']} nodes, {d['repro_check']})"
        lines.append(f"| {fid} | {r['engine']} | {r['status']} | {r['op'] or '?'} | {r['count']} | {rep} |")
    with open(a.docs, "a") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))


if __name__ == "__main__":
    main()
