"""Every corpus block in its common configuration, on every engine: who agrees?

    python scripts/agreement.py [--engines onnxruntime,tensorflow,mnn,reference] [--blocks A,B]

Builds one small model per block (canonical parameters, U[-1, 1] inputs, NCHW
input 1x3x6x5 so a transposed layout is visible), runs it through the engines
and prints each engine's status per block, then the non-DCP rows with reasons.
"""
from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path


from ofuzz.core.defaults import DEFAULT_ENGINES
from ofuzz.gen.corpus import load_corpus
from ofuzz.exec.engines.registry import resolve
from ofuzz.gen.generate import single_block_model
from ofuzz.judge.judging import judge_model
from ofuzz.exec.runner import EnginePool


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    ap.add_argument("--blocks", default="")
    a = ap.parse_args()
    corpus = load_corpus()
    names = a.blocks.split(",") if a.blocks else list(corpus.blocks)
    counts: collections.Counter[str] = collections.Counter()
    bad = []
    with tempfile.TemporaryDirectory() as d, EnginePool(resolve(a.engines.split(",")), Path(d) / "pool") as pool:
        pool.start()
        for n in names:
            m = single_block_model(corpus, n)
            path = Path(d) / f"{n}.onnx"
            path.write_bytes(m.model.SerializeToString())
            j = judge_model(pool, m.model, path, m.inputs)
            row = {e: r.status for e, r in j.verdict.results.items()}
            for e, s in row.items():
                counts[f"{e}:{s}"] += 1
            print(f"{n:28s} " + " ".join(f"{e}={s}" for e, s in row.items()), flush=True)
            for f in j.findings:
                bad.append(f"{n}: {f.engine} {f.status} op={f.op} {f.summary[:200]}")
    print("\nstatus counts:", dict(sorted(counts.items())))
    print("\nnon-DCP:")
    for b in bad:
        print("  ", b)


if __name__ == "__main__":
    main()
