"""The yardstick for search strategies: chooser A vs chooser B, counted in distinct root causes over time.

    python scripts/experiments/search.py --choosers mcts,random --seeds 3 --budget 10m [--engines ...] [--out DIR]
    python scripts/experiments/search.py --out DIR --count-only      # re-count campaigns that already ran there

Every (chooser, seed) runs one campaign of the same wall-clock budget on the same engines, then its triage (`ofuzz
bugs`: re-judging, reduction, root-cause clustering). A root cause counts at the campaign time of the first model that
showed any of its signatures. Prints a table (root causes, OLC, confirmed-bugs corpus recall; mean, min, max over
seeds) and writes DIR/search.md and DIR/search.svg (root causes against time, mean line with a min–max band per chooser).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_bugs import corpus, covered, ofuzz  # noqa: E402  (the confirmed-bugs corpus and its matching rule)

from ofuzz.core.defaults import CHOOSERS, DEFAULT_ENGINES, parse_blocks, parse_duration, parse_opsets  # noqa: E402
from ofuzz.campaign.svg_plot import line_plot  # noqa: E402
from ofuzz.store.campaign_store import Store  # noqa: E402


def run_one(out: Path, variant: str, seed: int, budget: str, engines: str, workers: int = 1) -> None:
    """`variant`: a chooser, optionally with `+steer` (engine-aware steering, `ofuzz campaign --steer`; without it the
    campaign runs `--no-steer`, so `random` is the unsteered baseline whatever the default), `+pickK`
    (K candidates per step, the most novel judged: `ofuzz campaign --candidates K`) and `+blocksLO-HI` (blocks per
    model: `ofuzz campaign --blocks LO..HI`) and `+opsetLO-HI` (ONNX versions of the models, `ofuzz campaign --opset
    LO..HI`; without it the models are opset 17, the paper's generation space, whatever the campaign's default) and
    `+intP` (share P of models with integer inputs, `--int-inputs P`; without it float models only, as the paper's) and
    `+cap` (engines' campaign step limits, `--step-limits`; without it every step has the engine's full timeout)."""
    chooser, *extras = variant.split("+")
    flags = [f for x in extras for f in _flags(x)]
    if "steer" not in extras:  # a variant is steered only when it says so, whatever the campaign's default
        flags.append("--no-steer")
    if not any(x.startswith("opset") for x in extras):
        flags += ["--opset", "17"]
    if not any(x.startswith("int") for x in extras):  # float models, the paper's, unless the variant says otherwise
        flags += ["--int-inputs", "0"]
    if "cap" not in extras:  # engines' full timeouts at every step, as before campaign step limits existed
        flags.append("--no-step-limits")
    if not (out / "campaign.sqlite").is_file():
        r = ofuzz("campaign", "--engines", engines, "--budget", budget, "--seed", str(seed), "--chooser", chooser,
                  "--out", str(out), "--no-reduce", "--no-report", "--workers", str(workers), *flags)
        if r.returncode != 0:
            raise SystemExit(f"campaign {chooser} seed {seed} failed: {r.stderr[-800:]}")


def _flags(extra: str) -> list[str]:
    """The campaign flags of one `+extra` of a variant ([] for an unknown one, which `main` rejects first)."""
    if extra == "steer":
        return ["--steer"]
    if extra == "cap":
        return ["--step-limits"]
    if extra.startswith("pick") and extra[4:].isdigit():
        return ["--candidates", extra[4:]]
    if extra.startswith("int"):  # +int0.3: that share of models with integer inputs
        try:
            share = float(extra[3:])
        except ValueError:
            return []
        return ["--int-inputs", extra[3:]] if 0 <= share <= 1 else []
    for prefix, flag, check in (("blocks", "--blocks", parse_blocks), ("opset", "--opset", parse_opsets)):
        if extra.startswith(prefix):
            spec = extra[len(prefix):].replace("-", "..")
            try:
                check(spec)  # the campaign's own check of the range
            except ValueError:
                return []
            return [flag, spec]
    return []


def triage(out: Path) -> None:
    """`ofuzz bugs`: every campaign's triage runs after all campaigns, so no campaign shares the machine with one."""
    t = ofuzz("bugs", str(out), "--json")
    if t.returncode != 0:
        raise SystemExit(f"triage of {out} failed: {t.stderr[-800:]}")


def measure(out: Path, bugs: list[dict]) -> dict:
    """Root causes with the campaign time each was first seen, final OLC, corpus recall."""
    r = ofuzz("bugs", str(out), "--json", "--no-triage")
    roots = json.loads(r.stdout)["root_causes"]
    st = Store(out)
    timeline = st.timeline()
    stats = st.engine_stats()
    st.close()
    reach = {e: round(100 * (d.get("DCP", 0) + d.get("DCF", 0)) / max(sum(d.get(k, 0) for k in ("DCP", "DCF", "IF", "MCF")), 1), 1)
             for e, d in stats.items()}  # share of the runs (models sent, not skipped) that reached a comparison
    at = {row["idx"]: row["elapsed"] for row in timeline}
    times = sorted(at.get(rc.get("first_idx"), timeline[-1]["elapsed"] if timeline else 0.0) for rc in roots)
    return {"roots": len(roots), "times": times, "olc": 100 * (timeline[-1]["olc"] or 0) if timeline else 0.0,
            "elapsed": timeline[-1]["elapsed"] if timeline else 0.0, "found": [b["name"] for b in bugs if covered(b, roots, out)],
            "by_engine": {e: sum(1 for rc in roots if rc["engine"] == e) for e in sorted({rc["engine"] for rc in roots})}, "reach": reach}


def curve(times: list[float], grid: list[float]) -> list[int]:
    return [sum(1 for t in times if t <= g) for g in grid]


def plot(results: dict[str, list[dict]], budget: float, path: Path) -> None:
    """Root causes against campaign minutes: each chooser's mean over seeds, with its min–max band."""
    grid = [budget * i / 60 for i in range(61)]
    curves = {c: [curve(r["times"], grid) for r in rs] for c, rs in results.items() if rs}
    minutes = [t / 60 for t in grid]
    at = lambda f, cs: [(m, f(v[k] for v in cs)) for k, m in enumerate(minutes)]  # noqa: E731
    series = {f"{c} (n={len(cs)})": at(statistics.mean, cs) for c, cs in curves.items()}
    bands = {f"{c} (n={len(cs)})": (at(min, cs), at(max, cs)) for c, cs in curves.items()}
    path.write_text(line_plot(series, "distinct root causes against campaign time (mean, min–max over seeds)", "roots",
                              bands=bands, xunit="min"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--choosers", default="mcts,random",
                    help=f"comma-separated, from {', '.join(CHOOSERS)}; CHOOSER+steer adds --steer, CHOOSER+pickK --candidates K, "
                         "CHOOSER+blocksLO-HI --blocks LO..HI, CHOOSER+opsetLO-HI --opset LO..HI (else 17), "
                         "CHOOSER+intP --int-inputs P (else 0), CHOOSER+cap --step-limits (else --no-step-limits)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=101)
    ap.add_argument("--budget", default="10m")
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--count-only", action="store_true", help="do not run anything; count what DIR holds")
    ap.add_argument("--workers", type=int, default=1, help="engine pools per campaign")
    ap.add_argument("--parallel", type=int, default=1, help="campaigns run at a time (each with --workers pools)")
    a = ap.parse_args()
    choosers = [c.strip() for c in a.choosers.split(",") if c.strip()]
    bad = [c for c in choosers if c.split("+")[0] not in CHOOSERS
           or not all(_flags(x) for x in c.split("+")[1:])]
    if bad:
        raise SystemExit(f"unknown chooser(s) {bad}; known: {', '.join(CHOOSERS)}, each optionally with +steer, +pickK, +blocksLO-HI, +opsetLO-HI, +intP and +cap")
    budget = parse_duration(a.budget)
    base = a.out or Path(tempfile.mkdtemp(prefix="ofuzz-search-"))
    bugs = corpus()
    results: dict[str, list[dict]] = {c: [] for c in choosers}
    jobs = [(c, seed) for seed in range(a.first_seed, a.first_seed + a.seeds) for c in choosers]  # interleaved, so
    if not a.count_only:  # machine noise hits every chooser alike
        with ThreadPoolExecutor(max(1, a.parallel)) as ex:
            list(ex.map(lambda j: run_one(base / f"{j[0]}-s{j[1]}", j[0], j[1], a.budget, a.engines, a.workers), jobs))
        for c, seed in jobs:
            triage(base / f"{c}-s{seed}")
    for c, seed in jobs:
        out = base / f"{c}-s{seed}"
        if (out / "campaign.sqlite").is_file():
            m = measure(out, bugs)
            results[c].append(m)
            print(json.dumps({"chooser": c, "seed": seed, **{k: v for k, v in m.items() if k != "times"}}), flush=True)
    lines = [f"| chooser | seeds | root causes (mean, min–max) | OLC % (mean) | corpus recall (mean of {len(bugs)}) | runs compared % (mean) |",
             "|---|---|---|---|---|---|"]
    for c, rs in results.items():
        if not rs:
            continue
        n = [r["roots"] for r in rs]
        lines.append(f"| {c} | {len(rs)} | {statistics.mean(n):.1f} ({min(n)}–{max(n)}) | {statistics.mean(r['olc'] for r in rs):.1f} | "
                     f"{statistics.mean(len(r['found']) for r in rs):.1f} | "
                     + ", ".join(f"{e} {statistics.mean(r['reach'].get(e, 0) for r in rs):.0f}" for e in sorted(rs[0]["reach"])) + " |")
    if len(choosers) >= 2 and all(results[c] for c in choosers[:2]):
        a0, b0 = (statistics.mean(r["roots"] for r in results[c]) for c in choosers[:2])
        lines.append(f"\n{choosers[0]} / {choosers[1]} root causes: {a0 / b0 if b0 else float('nan'):.2f}×")
    table = "\n".join(lines)
    print(table)
    plot(results, budget, base / "search.svg")
    (base / "search.md").write_text(f"# Search yardstick: {', '.join(choosers)}, {a.seeds} seeds × {a.budget}, engines {a.engines}\n\n"
                                    f"{table}\n\n![root causes over time](search.svg)\n")
    print(f"wrote {base / 'search.md'} and {base / 'search.svg'}")


if __name__ == "__main__":
    main()
