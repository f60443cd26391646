"""Generation throughput: median models/s over several runs, one process, no engine.

    python scripts/bench_generate.py [--runs 5] [--models 300]

Measures generate_one (graph, mutations, solver, emission) and, separately,
with the full onnx checker on every model, at 5, 10 and 15 blocks.
"""
from __future__ import annotations

import argparse
import statistics
import time

from ofuzz.gen.corpus import load_corpus
from ofuzz.gen.generate import GenerateOptions, generate_one


def bench(corpus, blocks: int, models: int, check: bool, run: int) -> float:
    opts = GenerateOptions(blocks=(blocks, blocks), graph="mixed", mutations=True, check=check)
    t0 = time.perf_counter()
    for i in range(models):
        generate_one(corpus, 1000 + run, i, opts)
    return models / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--models", type=int, default=300)
    a = ap.parse_args()
    corpus = load_corpus()
    bench(corpus, 10, 20, False, 99)  # warm-up (imports, schema caches)
    print(f"{'blocks':>6} {'checker':>8} {'median models/s':>16} {'min':>8} {'max':>8}   ({a.runs} runs x {a.models} models)")
    for blocks in (5, 10, 15):
        for check in (False, True):
            rates = [bench(corpus, blocks, a.models, check, r) for r in range(a.runs)]
            print(f"{blocks:>6} {'yes' if check else 'no':>8} {statistics.median(rates):>16.1f} {min(rates):>8.1f} {max(rates):>8.1f}")


if __name__ == "__main__":
    main()
