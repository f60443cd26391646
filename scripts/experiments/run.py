"""Reproduce the paper's evaluation design (Table III, RQ2–RQ4; RQ5) and write docs/results.md.

    python scripts/experiments/run.py --scale 0.1 [--engines onnxruntime,mnn,reference] [--out results/experiments]

Table III rows: (1) WS+RN, mutations, random; (2) WS, no mutations, MCTS; (3) RN, no mutations,
MCTS; (4) WS+RN, no mutations, MCTS; (5) WS+RN, mutations, MCTS — each at N = 5, 10, 15 blocks.
The paper uses 400 test inputs per cell and 10 repetitions; --scale shrinks both (tests =
400·scale, at least 10; repetitions = 10·scale, at least 2).  Every cell is a campaign stored
under OUT/<row>-n<N>-r<rep> (a campaign's seed is derived from its cell, so runs are
reproducible and a re-run resumes or reuses finished cells).  RQ5 runs mutated subgraph blocks
alone on each engine and reports success ratios (DCP / runs).
Outputs: OUT/cells.csv, OUT/table3.md, OUT/olc_mcts_vs_random.svg, OUT/rq5.csv and docs/results.md.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ofuzz.campaign.loop import Campaign, CampaignOptions  # noqa: E402
from ofuzz.gen.corpus import load_corpus  # noqa: E402
from ofuzz.exec.engines.registry import resolve  # noqa: E402
from ofuzz.store.campaign_store import Store  # noqa: E402

ROWS = [
    ("1", "WS and RN", "mixed", True, "random"),
    ("2", "WS", "ws", False, "mcts"),
    ("3", "RN", "rn", False, "mcts"),
    ("4", "WS and RN", "mixed", False, "mcts"),
    ("5", "WS and RN", "mixed", True, "mcts"),
]
NS = (5, 10, 15)
PREFER = 1.0  # set by --prefer
PAPER = {  # Table III: (OLC %, exceptions dedup, exceptions total, hours) per (row, N)
    ("1", 5): (60.2, 12, 103, 1.6), ("1", 10): (69.9, 20.1, 161, 2.7), ("1", 15): (71.8, 21.7, 201, 3.4),
    ("2", 5): (57.2, 10.9, 75.3, 2.7), ("2", 10): (62.9, 13.7, 95.4, 4.1), ("2", 15): (64.8, 14.2, 91.8, 4.4),
    ("3", 5): (57.7, 14.4, 77.2, 2.6), ("3", 10): (65.3, 19.5, 92.8, 4.1), ("3", 15): (67.3, 17.9, 113.4, 4.5),
    ("4", 5): (59.2, 16.7, 81.2, 2.8), ("4", 10): (65.8, 20.2, 93.1, 4.1), ("4", 15): (69.7, 19.5, 118.9, 4.5),
    ("5", 5): (61.5, 20.1, 84.5, 2.7), ("5", 10): (76.4, 31.9, 89.6, 4.1), ("5", 15): (81.7, 31.2, 120.3, 4.5),
}


def run_cell(corpus, specs, out: Path, row, n: int, rep: int, tests: int, seed: int, workers: int) -> dict:
    rid, _, graph, mutations, chooser = row
    d = out / f"row{rid}-n{n}-r{rep}"
    resume = (d / "campaign.sqlite").is_file()
    if resume:
        st = Store(d)
        kept = st.counts()["kept"]
        st.close()
    opts = CampaignOptions(engines=[s.name for s in specs], tests=tests, blocks=(n, n), graph=graph, mutations=mutations,
                           chooser=chooser, seed=seed, workers=workers, localise=True, prefer=PREFER,
                           steer=False, opsets=(17, 17), int_inputs=0.0, step_limits=False)  # the paper's method: no steering, opset 17
    t0 = time.perf_counter()
    if not resume or kept < tests:
        c = Campaign(corpus, specs, opts, d, resume=resume)
        c.run()
        c.close()
    st = Store(d)
    tl = st.timeline()
    counts = st.counts()
    uniq = len(st.findings())
    total = st.db.execute("SELECT COUNT(*) FROM occurrences").fetchone()[0]
    last = st.get_meta("last_stop", {})
    st.close()
    return {"row": rid, "n": n, "rep": rep, "olc": 100 * (tl[-1]["olc"] if tl else 0.0), "unique": uniq, "total": total,
            "seconds": last.get("elapsed", time.perf_counter() - t0), "generated": counts["generated"], "kept": counts["kept"],
            "timeline": [(r["kept"], 100 * r["olc"]) for r in tl]}


def rq5(corpus, specs, out: Path, count: int) -> list[dict]:
    """Mutated subgraph blocks, alone in a model, on each engine: success ratio = DCP / runs."""
    from ofuzz.gen.generate import GenerateOptions, build
    from ofuzz.gen.genome import single_block_genome
    from ofuzz.judge.judging import judge_model
    from ofuzz.gen.mutations import bna, bnr
    from ofuzz.exec.runner import EnginePool

    subs = [b.name for b in corpus if b.is_subgraph]
    stats: dict[str, dict[str, int]] = {}
    with EnginePool(specs, out / "rq5-pool") as pool:
        pool.start()
        for i in range(count):
            rng = np.random.default_rng([5, i])
            name = subs[i % len(subs)]
            genome = single_block_genome(corpus, name, (1, 3, 8, 8), canonical=False)
            node = max(genome.graph.nodes)
            (bna if rng.random() < 0.5 else bnr)(genome, 1.0, rng)
            m = build(genome, corpus, f"rq5-{i}", 5, i, GenerateOptions(), rng)
            p = out / "rq5" / f"{i}.onnx"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(m.model.SerializeToString())
            j = judge_model(pool, m.model, p, m.inputs, do_localise=False)
            for eng, r in j.verdict.results.items():
                s = stats.setdefault(eng, {"runs": 0, "DCP": 0, "DCF": 0, "IF": 0, "MCF": 0})
                s["runs"] += 1
                s[r.status] += 1
            _ = node
    return [{"engine": e, **s, "success": s["DCP"] / s["runs"] if s["runs"] else 0.0} for e, s in sorted(stats.items())]


def band_plot(cells: list[dict], path: Path) -> None:
    """OLC against kept tests, mean and min–max band over repetitions: row 1 (random) vs row 5 (MCTS)."""
    w, h, L, B, T, R = 720, 300, 50, 30, 25, 150
    series = {}
    for rid, label, col in (("1", "random (row 1)", "#d62728"), ("5", "MCTS (row 5)", "#1f77b4")):
        for n in NS:
            runs = [c["timeline"] for c in cells if c["row"] == rid and c["n"] == n and c["timeline"]]
            if not runs:
                continue
            m = min(max(k for k, _ in r) for r in runs)
            xs = list(range(1, m + 1))
            ys = []
            for r in runs:
                best = {}
                for k, v in r:
                    best[k] = v
                last, vals = 0.0, []
                for x in xs:
                    last = best.get(x, last)
                    vals.append(last)
                ys.append(vals)
            arr = np.array(ys)
            series[f"{label}, N={n}"] = (xs, arr.mean(0), arr.min(0), arr.max(0), col, n)
    if not series:
        return
    xmax = max(max(s[0]) for s in series.values())
    X = lambda x: L + x / xmax * (w - L - R)  # noqa: E731
    Y = lambda y: h - B - y / 100 * (h - B - T)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<text x="{L}" y="15" font-weight="bold">OLC (%) against kept tests: MCTS vs random, mean and min–max over repetitions</text>',
           f'<line x1="{L}" y1="{h - B}" x2="{w - R}" y2="{h - B}" stroke="#888"/><line x1="{L}" y1="{T}" x2="{L}" y2="{h - B}" stroke="#888"/>',
           f'<text x="{L}" y="{h - 8}">0</text><text x="{w - R - 30}" y="{h - 8}">{xmax} tests</text><text x="5" y="{T + 5}">100</text>']
    for k, (name, (xs, mean, lo, hi, col, n)) in enumerate(series.items()):
        dash = {5: "", 10: "5,3", 15: "2,2"}[n]
        band = " ".join(f"{X(x):.1f},{Y(v):.1f}" for x, v in zip(xs, hi)) + " " + " ".join(f"{X(x):.1f},{Y(v):.1f}" for x, v in zip(xs[::-1], lo[::-1]))
        out.append(f'<polygon points="{band}" fill="{col}" fill-opacity="0.12" stroke="none"/>')
        out.append(f'<polyline fill="none" stroke="{col}" stroke-dasharray="{dash}" points="' + " ".join(f"{X(x):.1f},{Y(v):.1f}" for x, v in zip(xs, mean)) + '"/>')
        out.append(f'<text x="{w - R + 6}" y="{T + 14 * k + 10}" fill="{col}">{name}: {mean[-1]:.1f}</text>')
    out.append("</svg>")
    path.write_text("".join(out))


def fmt(vals: list[float], nd: int = 1) -> str:
    if not vals:
        return "–"
    m = statistics.mean(vals)
    s = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return f"{m:.{nd}f} ± {s:.{nd}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--engines", default="onnxruntime,mnn,reference")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "experiments")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rq5", type=int, default=100, help="mutated subgraphs for RQ5 (0 to skip)")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs" / "results.md")
    ap.add_argument("--prefer", type=float, default=1.0, help="probability a node takes a chosen block when one fits (1 = the paper)")
    a = ap.parse_args()
    global PREFER
    PREFER = a.prefer
    tests = max(10, round(400 * a.scale))
    reps = max(2, round(10 * a.scale))
    a.out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus()
    specs = resolve(a.engines.split(","))
    t0 = time.perf_counter()
    cells = []
    for row in ROWS:
        for n in NS:
            for rep in range(reps):
                seed = 1000 * int(row[0]) + 10 * n + rep
                c = run_cell(corpus, specs, a.out, row, n, rep, tests, seed, a.workers)
                cells.append(c)
                print(f"row {row[0]} N={n} rep {rep}: OLC {c['olc']:.1f}%  findings {c['unique']}/{c['total']}  {c['seconds']:.0f}s", flush=True)
    with open(a.out / "cells.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["row", "graph", "mutations", "search", "N", "rep", "OLC%", "unique_findings", "total_findings", "seconds", "generated", "kept"])
        for c in cells:
            r = next(x for x in ROWS if x[0] == c["row"])
            wr.writerow([c["row"], r[1], r[3], r[4], c["n"], c["rep"], f"{c['olc']:.2f}", c["unique"], c["total"], f"{c['seconds']:.1f}", c["generated"], c["kept"]])
    band_plot(cells, a.out / "olc_mcts_vs_random.svg")
    lines = ["| # | graph | mutations | search | " + " | ".join(f"N={n} OLC ours (paper) | N={n} exceptions d/t ours (paper) | N={n} s ours (paper h)" for n in NS) + " |",
             "|---|---|---|---|" + "---|---|---|" * len(NS)]
    for row in ROWS:
        cols = []
        for n in NS:
            cs = [c for c in cells if c["row"] == row[0] and c["n"] == n]
            p = PAPER[(row[0], n)]
            cols += [f"{fmt([c['olc'] for c in cs])} ({p[0]})", f"{fmt([c['unique'] for c in cs])}/{fmt([c['total'] for c in cs])} ({p[1]}/{p[2]})",
                     f"{fmt([c['seconds'] for c in cs], 0)} ({p[3]})"]
        lines.append(f"| {row[0]} | {row[1]} | {'yes' if row[3] else 'no'} | {row[4]} | " + " | ".join(cols) + " |")
    table = "\n".join(lines)
    (a.out / "table3.md").write_text(table + "\n")
    rq5_rows = rq5(corpus, specs, a.out, a.rq5) if a.rq5 else []
    if rq5_rows:
        with open(a.out / "rq5.csv", "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rq5_rows[0]))
            wr.writeheader()
            wr.writerows(rq5_rows)

    def mean_of(rid: str, key: str) -> float:
        return statistics.mean(c[key] for c in cells if c["row"] == rid)

    claims = {
        "MCTS vs random, OLC (row 5 − row 1)": mean_of("5", "olc") - mean_of("1", "olc"),
        "MCTS vs random, unique findings (row 5 − row 1)": mean_of("5", "unique") - mean_of("1", "unique"),
        "WS+RN vs WS only, OLC (row 4 − row 2)": mean_of("4", "olc") - mean_of("2", "olc"),
        "WS+RN vs RN only, OLC (row 4 − row 3)": mean_of("4", "olc") - mean_of("3", "olc"),
        "WS+RN vs WS only, unique findings (row 4 − row 2)": mean_of("4", "unique") - mean_of("2", "unique"),
        "mutations vs none, OLC (row 5 − row 4)": mean_of("5", "olc") - mean_of("4", "olc"),
        "mutations vs none, unique findings (row 5 − row 4)": mean_of("5", "unique") - mean_of("4", "unique"),
    }
    paper_claims = {"MCTS vs random, OLC (row 5 − row 1)": 6.7, "MCTS vs random, unique findings (row 5 − row 1)": 9.7,
                    "WS+RN vs WS only, OLC (row 4 − row 2)": 3.6, "WS+RN vs RN only, OLC (row 4 − row 3)": 1.47,
                    "WS+RN vs WS only, unique findings (row 4 − row 2)": 5.9, "mutations vs none, OLC (row 5 − row 4)": 8.2,
                    "mutations vs none, unique findings (row 5 − row 4)": 8.6}
    st = Store(a.out / "row1-n5-r0")
    versions = st.get_meta("versions", {})
    st.close()
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    cmd = f"python scripts/experiments/run.py --scale {a.scale} --engines {a.engines} --rq5 {a.rq5}" + (f" --prefer {a.prefer}" if a.prefer != 1.0 else "")
    doc = [
        "# Results: the paper's Table III on today's engines",
        "",
        f"Produced by `{cmd}` (ofuzz {commit}), {tests} kept tests per cell, {reps} repetitions, "
        f"{(time.perf_counter() - t0) / 60:.0f} minutes on a 2-core machine. Engines: {json.dumps(versions)}.",
        "Each cell: mean ± standard deviation over repetitions; the paper's figure in parentheses (its cells used",
        "400 tests, 10 repetitions, MNN 1.0.2 against TensorFlow 1.12, and hours, not seconds). 'Exceptions d/t' is",
        "unique findings after deduplication / all finding occurrences. Raw data: `results/experiments/cells.csv`.",
        "",
        table,
        "",
        "## Claims",
        "",
        "| claim | ours (mean difference) | paper |",
        "|---|---|---|",
        *[f"| {k} | {v:+.2f} | {paper_claims[k]:+.2f} |" for k, v in claims.items()],
        "",
        "A claim holds here when our difference has the paper's sign; with this few repetitions, a difference",
        "smaller than the spread in the table above is not a result either way.",
    ]
    if rq5_rows:
        doc += ["", f"## RQ5: {a.rq5} mutated subgraph blocks (BNA or BNR applied), alone in a model", "",
                "| engine | runs | DCP | DCF | IF | MCF | success ratio |", "|---|---|---|---|---|---|---|",
                *[f"| {r['engine']} | {r['runs']} | {r['DCP']} | {r['DCF']} | {r['IF']} | {r['MCF']} | {100 * r['success']:.1f}% |" for r in rq5_rows]]
    doc += ["", "Plot: `results/experiments/olc_mcts_vs_random.svg` (OLC against kept tests, MCTS vs random, min–max bands)."]
    a.docs.parent.mkdir(parents=True, exist_ok=True)
    a.docs.write_text("\n".join(doc) + "\n")
    print(table)
    print("\n".join(f"{k}: {v:+.2f} (paper {paper_claims[k]:+.2f})" for k, v in claims.items()))
    print(f"wrote {a.docs}")


if __name__ == "__main__":
    main()
