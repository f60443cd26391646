"""End-to-end campaign throughput and memory.

    python scripts/bench_campaign.py [--models 1000] [--engines onnxruntime,tensorflow,mnn,reference] [--run-all]

Runs a campaign in-process and prints models/s end to end, ofuzz's own share of
wall time, and the resident memory (RSS) of the campaign process and of every
engine worker at checkpoints, so growth that suggests a leak is visible.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from ofuzz.core.defaults import DEFAULT_BLOCKS, DEFAULT_ENGINES
from ofuzz.campaign.loop import Campaign, CampaignOptions
from ofuzz.gen.corpus import load_corpus
from ofuzz.exec.engines.registry import resolve


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    ap.add_argument("--blocks", default=DEFAULT_BLOCKS)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--run-all", action="store_true")
    a = ap.parse_args()
    lo, _, hi = a.blocks.partition("..")
    opts = CampaignOptions(engines=a.engines.split(","), models=a.models, blocks=(int(lo), int(hi or lo)), workers=a.workers, run_all=a.run_all)
    out = Path(tempfile.mkdtemp(prefix="ofuzz-bench-"))
    camp = Campaign(load_corpus(), resolve(opts.engines), opts, out)
    marks = sorted({max(1, a.models // 10), a.models // 2, a.models})
    rows: list[str] = []
    t0 = time.perf_counter()

    def progress(c: Campaign) -> None:
        while marks and c.stats.generated >= marks[0]:
            m = marks.pop(0)
            workers: dict[str, float] = {}
            for pool in getattr(c.judges, "pools", []):
                for w in pool.workers.values():
                    if w.proc is not None:
                        workers[w.spec.name] = max(workers.get(w.spec.name, 0.0), rss_mb(w.proc.pid))
            rows.append(f"{m:>7d} {time.perf_counter() - t0:8.1f} {rss_mb(os.getpid()):12.0f}  " + "  ".join(f"{k} {v:.0f}" for k, v in sorted(workers.items())))

    camp.run(progress)
    dt = time.perf_counter() - t0
    s = camp.stats
    print(f"{s.generated} models generated, {s.run} run on {a.engines} in {dt:.1f}s: {s.generated / dt:.2f} models/s, {s.run / dt:.2f} judged/s end to end")
    print(f"ofuzz's own main-thread time {s.own_time:.1f}s = {100 * s.own_time / dt:.1f}% of wall; engine time (summed over {a.workers} pools) {s.engine_time:.1f}s")
    print(f"CPU: campaign process {camp.cpu_self:.1f}s ({100 * camp.cpu_self / (dt * (os.cpu_count() or 1)):.1f}% of the machine), "
          f"engine workers alive at the end {camp.cpu_workers:.1f}s ({100 * camp.cpu_workers / (dt * (os.cpu_count() or 1)):.1f}%)")
    print(f"{'models':>7s} {'elapsed':>8s} {'campaign MB':>12s}  worker RSS MB")
    for r in rows:
        print(r)
    camp.close()


if __name__ == "__main__":
    main()
