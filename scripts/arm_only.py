"""ARM-only findings of a campaign: models where x86 MNN agrees with the reference side and an
emulated ARM build does not.  Candidates are re-judged with the reference evaluator added (engine
families vote once), confirmed ones are reduced and exported to DIR/repros-arm/<id>.

    python scripts/arm_only.py results/arm30 [--limit 40]
"""
from __future__ import annotations

import argparse
import collections
import json
import sqlite3
from pathlib import Path

import numpy as np
import onnx

from ofuzz.campaign import finding_id
from ofuzz.engines.registry import resolve
from ofuzz.judging import judge_model
from ofuzz.repro import export
from ofuzz.runner import EnginePool

ARM = ("mnn-arm:n1", "mnn-arm:a53", "mnn-arm:max", "mnn-arm:n1-fp16")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--limit", type=int, default=40)
    a = ap.parse_args()
    db = sqlite3.connect(str(a.campaign / "campaign.sqlite"))
    per: dict[int, dict[str, str]] = collections.defaultdict(dict)
    for idx, eng, st in db.execute("SELECT idx, engine, status FROM engine_runs"):
        per[idx][eng] = st
    ids = dict(db.execute("SELECT idx, id FROM models"))
    arms = sorted({e for d in per.values() for e in d if e in ARM})
    cands = [i for i, d in sorted(per.items()) if any(d.get(x) != "DCP" for x in arms)
             and not (d.get("mnn") != "DCP" and all(d.get(x) == d.get("mnn") for x in arms))]
    print(f"{len(per)} judged models; {len(cands)} where an ARM build's status differs from x86 MNN's or x86 MNN passed")
    specs = resolve(["onnxruntime", "reference", "mnn", *arms])
    found: dict[str, dict] = {}
    with EnginePool(specs, a.campaign / "work" / "arm-only") as pool:
        pool.start()
        for i in cands[: a.limit]:
            path = a.campaign / "models" / f"{ids[i]}.onnx"
            if not path.is_file():
                continue
            with np.load(a.campaign / "models" / f"{ids[i]}.inputs.npz") as z:
                feeds = {k: z[k] for k in z.files}
            j = judge_model(pool, onnx.load(str(path)), path, feeds)
            res = j.verdict.results
            if res.get("mnn") and res["mnn"].status != "DCP":
                continue
            for f in j.findings:
                if f.engine in arms and f.blamed:
                    found.setdefault(f.signature, {"finding": f, "model": path, "feeds": feeds, "models": []})["models"].append(ids[i])
    print(f"\n{len(found)} unique ARM-only findings (x86 MNN agrees with onnxruntime/reference, the ARM build does not):")
    by_name = {s.name: s for s in specs}
    for sig, d in found.items():
        f = d["finding"]
        dest = a.campaign / "repros-arm" / finding_id(sig)
        export(by_name, {"engine": f.engine, "status": f.status, "signature": sig, "op": f.op, "summary": f.summary},
               d["model"], d["feeds"], dest, reduce_budget=30)
        info = json.loads((dest / "finding.json").read_text())
        red = info["reduction"]
        print(f"  {finding_id(sig)}  {f.engine:12s} {f.status} op={f.op}  in {len(d['models'])} model(s), e.g. {d['models'][0]}; "
              f"reduced {red['nodes_before']}→{red['nodes_after']} nodes; repro: {info['repro_check']}\n      {f.summary[:160]}\n      {dest}")


if __name__ == "__main__":
    main()
