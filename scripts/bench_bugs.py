"""Bug-finding power: campaigns counted in root causes, not signatures.

    python scripts/bench_bugs.py --budget 10m --seeds 3 [--engines onnxruntime,tensorflow,mnn,reference] [--chooser random]
    python scripts/bench_bugs.py --campaign DIR [DIR ...]     # only count campaigns that already ran

Runs one campaign per seed (each followed by its triage: re-judging, reduction of
one representative per cluster, root-cause clustering), then prints per campaign:
signatures, root causes, per-class counts, root causes per hour of campaign, the
triage time per finding, and recall on the confirmed-bugs corpus
(tests/data/bugs: which of its genuine defects the campaign's root causes cover,
matched by engine, status and reduced operator).  Medians over the seeds close it.
Campaign folders go to a temporary directory unless --out is given.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ofuzz.core.defaults import DEFAULT_CHOOSER, DEFAULT_ENGINES
from ofuzz.store.campaign_store import Store

ROOT = Path(__file__).resolve().parents[1]
BUGS = ROOT / "tests" / "data" / "bugs"


def corpus() -> list[dict]:
    out = []
    for p in sorted(BUGS.glob("*/bug.yaml")):
        d = yaml.safe_load(p.read_text())
        d["name"] = p.parent.name
        out.append(d)
    return out


def ofuzz(*args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ofuzz.cli", *args], capture_output=True, text=True, timeout=timeout)


def covered(bug: dict, roots: list[dict], campaign: Path | None = None) -> bool:
    """A corpus bug counts as found if a root cause shows it in its own evidence. With the campaign folder: some member
    of a root of the bug's engine has a reduced repro of its own keyed with the bug's status (and a DCF's category) on
    the bug's operator: the repro shows it, whatever family or rule then merged the member. Without it (the keys
    alone): a root blames the engine with the status on the operator, or is a family (backends/<engine>/triage.yaml)
    holding the operator whose failure classes include the bug's (a family's operator list is weaker evidence)."""
    if campaign is not None:
        return any(shown_by_own_repro(bug, campaign, m["finding"]) for r in roots if r["engine"] == bug["engine"]
                   for m in r.get("members", []) if m["joined_by"].startswith("its own reduced repro"))
    for r in roots:
        k = r["key"]
        if k["engine"] != bug["engine"] or bug["op"] not in k["ops"]:
            continue
        if k["status"] == bug["status"]:
            return True
        failures = r.get("family_failures") or []
        if k["status"] == "family" and (not failures or bug.get("category", bug["status"]) in failures):
            return True
    return False


def shown_by_own_repro(bug: dict, campaign: Path, finding: str) -> bool:
    """Does this member's own reduced repro (repros/<finding>/finding.json, its key before clustering) show the bug?"""
    path = campaign / "repros" / finding / "finding.json"
    if not path.is_file():
        return False
    own = json.loads(path.read_text()).get("root") or {}
    category_ok = bug["status"] != "DCF" or "category" not in bug or own.get("failure") == bug["category"]
    return own.get("status") in (bug["status"], "MCF/IF") and bug["op"] in (own.get("ops") or []) and category_ok


def count(campaign: Path, triage_seconds: float | None, bugs: list[dict]) -> dict:
    r = ofuzz("bugs", str(campaign), "--json", "--no-triage")
    if r.returncode != 0:
        raise SystemExit(f"ofuzz bugs {campaign} failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    res = json.loads(r.stdout)
    roots = res["root_causes"]
    classes = {k: len(v) for k, v in res["classes"].items()}
    signatures = sum(classes.values())
    meta = json.loads(ofuzz("findings", str(campaign), "--json").stdout or "[]")
    store = Store(campaign)
    elapsed = (store.get_meta("last_stop") or {}).get("elapsed", 0.0)
    store.close()
    found = [b["name"] for b in bugs if covered(b, roots, campaign)]
    return {"campaign": str(campaign), "signatures": signatures or len(meta), "root_causes": len(roots), "classes": classes,
            "root_causes_per_hour": len(roots) / (elapsed / 3600) if elapsed else 0.0, "elapsed": elapsed,
            "triage_s_per_finding": (triage_seconds / signatures) if triage_seconds and signatures else None,
            "by_engine": {e: sum(1 for r in roots if r["engine"] == e) for e in sorted({r["engine"] for r in roots})},
            "recall": f"{len(found)}/{len(bugs)}", "found": found}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", default="10m")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    ap.add_argument("--chooser", default=DEFAULT_CHOOSER)
    ap.add_argument("--out", type=Path, default=None, help="where the campaign folders go (default: a temporary folder)")
    ap.add_argument("--campaign", type=Path, nargs="*", default=None, help="count these finished (and triaged) campaigns instead")
    a = ap.parse_args()
    bugs = corpus()
    rows = []
    if a.campaign:
        rows = [count(c, None, bugs) for c in a.campaign]
    else:
        base = a.out or Path(tempfile.mkdtemp(prefix="ofuzz-bench-bugs-"))
        for seed in range(a.first_seed, a.first_seed + a.seeds):
            out = base / f"seed{seed}"
            r = ofuzz("campaign", "--engines", a.engines, "--budget", a.budget, "--seed", str(seed), "--chooser", a.chooser,
                      "--out", str(out), "--no-reduce", "--no-report")
            if r.returncode != 0:
                raise SystemExit(f"campaign seed {seed} failed: {r.stderr[-500:]}")
            t0 = time.monotonic()
            t = ofuzz("bugs", str(out), "--json")
            if t.returncode != 0:
                raise SystemExit(f"triage seed {seed} failed: {t.stderr[-500:]}")
            rows.append(count(out, time.monotonic() - t0, bugs))
            print(json.dumps(rows[-1]), flush=True)
    print(f"{'campaign':<40} {'sigs':>5} {'roots':>5} {'roots/h':>8} {'triage s/finding':>16} {'recall':>7}  classes")
    for r in rows:
        tri = f"{r['triage_s_per_finding']:.2f}" if r["triage_s_per_finding"] else "-"
        print(f"{r['campaign'][-40:]:<40} {r['signatures']:>5} {r['root_causes']:>5} {r['root_causes_per_hour']:>8.0f} {tri:>16} "
              f"{r['recall']:>7}  " + ", ".join(f"{k} {v}" for k, v in sorted(r["classes"].items())))
    if len(rows) > 1:
        med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
        print(f"median over {len(rows)}: signatures {med('signatures'):.0f}, root causes {med('root_causes'):.0f}, "
              f"root causes/hour {med('root_causes_per_hour'):.0f}")


if __name__ == "__main__":
    main()
