"""Draw root causes at random for a hand triage, stratified by engine, and print one line per pick.

Why a script: a hand triage is only worth quoting if the sample was not chosen, so the draw is seeded and
repeatable (`ofuzz bugs DIR --json > bugs.json`, then this). Each engine gets a share of the picks proportional to
its root causes (largest remainders), at least one if it has any.

    python scripts/sample_roots.py bugs.json --n 30 --seed 20261124 > sample.txt
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import typer


def shares(counts: dict[str, int], n: int) -> dict[str, int]:
    """Picks per engine: proportional, largest remainders, at least one each, never more than it has."""
    total = sum(counts.values())
    n = min(n, total)
    exact = {e: n * c / total for e, c in counts.items()}
    got = {e: min(counts[e], max(1, int(x))) for e, x in exact.items()}
    for e in sorted(exact, key=lambda e: exact[e] - int(exact[e]), reverse=True):
        if sum(got.values()) >= n:
            break
        if got[e] < counts[e]:
            got[e] += 1
    while sum(got.values()) > n:  # the at-least-one floor overshot: take from the largest share
        e = max(got, key=lambda e: got[e])
        got[e] -= 1
    return got


def main(bugs_json: Path, n: int = typer.Option(30, help="How many root causes."),
         seed: int = typer.Option(20261124, help="The draw's seed (say it in the triage).")) -> None:
    roots = [r for r in json.loads(bugs_json.read_text())["root_causes"] if not r.get("known")]
    by_engine: dict[str, list[dict]] = {}
    for r in roots:
        by_engine.setdefault(r["engine"], []).append(r)
    rng = random.Random(seed)
    picks = []
    for engine, k in sorted(shares({e: len(v) for e, v in by_engine.items()}, n).items()):
        picks += rng.sample(sorted(by_engine[engine], key=lambda r: r["id"]), k)
    for i, r in enumerate(picks, 1):
        key = r["key"]
        print(f"{i}\t{r['id']}\t{r['engine']}\t{key['status']} {key['failure']}\t{'+'.join(key['ops'] or r.get('held', []))}\t{r['repro']}\t"
              f"signatures={len(r['signatures'])}\tnodes={r['nodes']}")


if __name__ == "__main__":
    typer.run(main)
