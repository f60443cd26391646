"""Generate N models and judge each on the engines: statuses, signatures, examples.

    python scripts/run_batch.py --count 500 --engines onnxruntime,tensorflow,mnn,reference --out results/batch

Writes every model with a finding to OUT/models/ and prints, per engine, the
count per status, then every distinct signature with its count and one command
that reproduces it (`ofuzz run OUT/models/<id>.onnx --engines ...`).
"""
from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from ofuzz.core.defaults import DEFAULT_ENGINES, parse_blocks
from ofuzz.gen.corpus import load_corpus
from ofuzz.exec.engines.registry import resolve
from ofuzz.gen.generate import GenerateOptions, generate_one
from ofuzz.judge.judging import judge_model
from ofuzz.exec.runner import EnginePool


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--blocks", default="1..15")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    ap.add_argument("--out", type=Path, default=Path("results/batch"))
    a = ap.parse_args()
    corpus = load_corpus()
    opts = GenerateOptions(blocks=parse_blocks(a.blocks), graph="mixed", mutations=True)
    status: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    sigs: collections.Counter[str] = collections.Counter()
    example: dict[str, str] = {}
    engine_time: collections.Counter[str] = collections.Counter()
    models_dir = a.out / "models"
    t0 = time.perf_counter()
    with EnginePool(resolve(a.engines.split(",")), a.out / "pool") as pool:
        pool.start()
        print("engines:", json.dumps(pool.versions()), "unavailable:", pool.unavailable, flush=True)
        for i in range(a.count):
            m = generate_one(corpus, a.seed, i, opts)
            path = m.save(models_dir)
            j = judge_model(pool, m.model, path, m.inputs)
            for eng, r in j.verdict.results.items():
                status[eng][r.status] += 1
                engine_time[eng] += r.prepare_time + r.run_time
            keep = False
            for f in j.findings:
                sigs[f.signature] += 1
                example.setdefault(f.signature, m.id)
                keep = keep or example[f.signature] == m.id
            if not keep:
                for ext in (".onnx", ".inputs.npz", ".json"):
                    (models_dir / f"{m.id}{ext}").unlink(missing_ok=True)
            if (i + 1) % 50 == 0:
                print(f"{i + 1}/{a.count} models, {time.perf_counter() - t0:.0f}s, {len(sigs)} signatures", flush=True)
    dt = time.perf_counter() - t0
    print(f"\n{a.count} models (blocks {a.blocks}, seed {a.seed}) in {dt:.0f}s")
    print("\nstatus per engine:")
    for eng, c in status.items():
        print(f"  {eng:12s} " + "  ".join(f"{s}={c.get(s, 0)}" for s in ("DCP", "DCF", "IF", "MCF")) + f"   engine time {engine_time[eng]:.0f}s")
    print(f"\n{len(sigs)} distinct signatures:")
    for sig, n in sigs.most_common():
        print(f"  {n:4d}  {sig[:160]}")
        print(f"        ofuzz run {models_dir}/{example[sig]}.onnx --engines {a.engines}")
    (a.out / "summary.json").write_text(json.dumps({"status": status, "signatures": sigs, "examples": example}, indent=1))


if __name__ == "__main__":
    main()
