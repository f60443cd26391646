"""Scaling out: models judged per second with 1, 2, 4, 8 Ray actors, and how much of it the driver costs.

    python scripts/bench_ray.py [--actors 1,2,4,8] [--models 200] [--engines testdouble-slow] [--repeats 3]
    python scripts/bench_ray.py --engines onnxruntime,tensorflow,mnn,reference --actors 1,2 --models 60

Each point is one campaign on a fresh local Ray instance (`--ray local`). Throughput is measured between the first and
the last committed model (actor start-up excluded); the driver's CPU share is the campaign process's own CPU time over
that wall time. With the latency-bound test double (it sleeps 0.25 s per run and uses no core), the actors are not
limited by this machine's 2 cores, so the curve shows how far one driver can feed them. Medians over --repeats.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ofuzz.store.campaign_store import Store


def one(actors: int, models: int, engines: str, seed: int, base: Path) -> dict[str, float]:
    out = base / f"a{actors}-s{seed}"
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--engines", engines, "--models", str(models),
                        "--seed", str(seed), "--chooser", "random", "--no-reduce", "--no-report", "--run-all",
                        "--ray", "local", "--actors", str(actors), "--out", str(out)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"campaign with {actors} actors failed: {r.stderr[-800:]}")
    st = Store(out)
    tl = st.timeline()
    last = st.get_meta("last_stop", {})
    st.close()
    runs = [row for row in tl if row["run"]]
    span = max(runs[-1]["elapsed"] - runs[0]["elapsed"], 1e-9)
    n = runs[-1]["run"] - runs[0]["run"]
    return {"models_per_s": n / span, "driver_cpu_share": last.get("cpu_self", 0.0) / max(last.get("elapsed", span), 1e-9),
            "driver_own_ms_per_model": 1000 * last.get("own_time", 0.0) / max(runs[-1]["run"], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", default="1,2,4,8")
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--engines", default="testdouble-slow")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ofuzz-bench-ray-"))
    counts = [int(x) for x in a.actors.split(",")]
    res: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
    for rep in range(a.repeats):
        for n in counts:  # interleaved: machine noise hits every point alike
            res[n].append(one(n, a.models, a.engines, 100 + rep, base))
            print(f"actors {n} repeat {rep}: {res[n][-1]}", flush=True)
    base1 = statistics.median(r["models_per_s"] for r in res[counts[0]])
    print(f"\nengines {a.engines}, {a.models} models per campaign, medians of {a.repeats}:")
    print(f"{'actors':>6} {'models/s':>9} {'vs ' + str(counts[0]):>7} {'driver CPU':>11} {'driver ms/model':>16}")
    for n in counts:
        mps = statistics.median(r["models_per_s"] for r in res[n])
        print(f"{n:>6} {mps:>9.2f} {mps / base1:>6.2f}x {100 * statistics.median(r['driver_cpu_share'] for r in res[n]):>10.0f}% "
              f"{statistics.median(r['driver_own_ms_per_model'] for r in res[n]):>16.1f}")
    own = statistics.median(r["driver_own_ms_per_model"] for n in counts for r in res[n])
    print(f"the driver's own work is ~{own:.1f} ms per model, so one driver can feed about {1000 / max(own, 1e-9):.0f} models/s")


if __name__ == "__main__":
    main()
