"""Hidden-merge audit: do the findings a root cause holds by a rule, not by their own repro's key, share its defect?

A finding joins a root cause by its own reduced repro landing on the root's key, or by something else: an engine
family's tested rewrite, a merge rule (a rewrite, a source line, a witness, a re-run, or structure alone), an
unknown-shape rule, or as a further model of a signature that did not reduce. Hand triage once found 5 of 16 findings
attached without evidence to be *other* real defects. This script measures, on any triaged campaign, whether those
joins hold up when each member is triaged again from scratch:

1. draw N findings at random (seeded) among those joined by anything but their own repro's key;
2. copy the campaign (models, store, repro folders) to a scratch folder, and triage each drawn finding again *alone*
   (no representative to attach to: its own re-judgement, reduction, triggers, family test and key);
3. cluster the copy as `ofuzz bugs` does and report, per finding, whether it lands in the same root cause again and by
   what it joined; one that lands elsewhere is a join the evidence does not carry (another defect, or the same one
   keyed apart). Whether a member that lands in the same root is the same *defect* is for a hand check: the script
   prints each member's repro folder and join, for one.

    python scripts/audit_attached.py CAMPAIGN_DIR --n 30 --seed 20261128 [--workers 2] [--json OUT]

The campaign must be triaged (`ofuzz bugs CAMPAIGN_DIR`); it is never modified.
"""
from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ofuzz.core.npz import load_npz  # noqa: E402
from ofuzz.exec.engines.registry import resolve  # noqa: E402
from ofuzz.exec.runner import EnginePool, for_each_in_pools  # noqa: E402
from ofuzz.judge.judging import Policy  # noqa: E402
from ofuzz.store.campaign_store import Store  # noqa: E402
from ofuzz.triage.export_all import second_opinions  # noqa: E402
from ofuzz.triage.pipeline import triage_finding  # noqa: E402
from ofuzz.triage.cluster import cluster  # noqa: E402


OWN_KEY = "its own reduced repro"


def joined_members(campaign: Path) -> list[dict[str, Any]]:
    """Findings (folder id, row, root id, how) that a root cause holds by anything but their own reduced repro's key:
    attached without a repro, a further model that did not reduce, a family or unknown-shape rule, or a merge rule
    (with its evidence kind). A member keyed alike by its own repro is not drawn: its own key is the evidence."""
    st = Store(campaign)
    rows = {r["signature"]: r for r in st.findings()}
    roots = st.root_causes()
    st.close()
    out = []
    for rc in roots:
        detail = rc["detail"]
        merged = {fid: f"merge rule {e['rule']} ({e.get('kind', 'structure')})" for e in detail.get("evidence", []) for fid in e.get("findings", [])}
        joined_by = {m["finding"]: m["joined_by"] for m in detail.get("members", [])}
        for fid in detail.get("findings", []):
            info_path = campaign / "repros" / fid / "finding.json"
            if not info_path.is_file():
                continue
            info = json.loads(info_path.read_text())
            how = merged.get(fid) or ("" if joined_by.get(fid, "").startswith(OWN_KEY) else joined_by.get(fid, ""))
            if "root" not in info:
                how = info.get("attached_to") or "unreduced variant"
            row = rows.get(info["signature"])
            if not how or row is None:
                continue
            if "~" in fid and "~r" not in fid:
                variant = int(fid.split("~")[1])
                row = {**row, "first_idx": info.get("first_idx"), "first_model": info.get("first_model"), "variant": variant}
            elif "~r" in fid:
                continue  # revealed behind a rewrite: its model is the rewritten one, triaged from its parent
            out.append({"fid": fid, "row": row, "root": rc["id"], "root_key": rc["key"], "how": how})
    return sorted(out, key=lambda a: a["fid"])


def scratch_copy(campaign: Path, into: Path) -> Path:
    """The campaign's store, models and repros, copied (the audit re-triages in the copy only)."""
    copy = into / campaign.name
    shutil.copytree(campaign, copy, ignore=shutil.ignore_patterns("work", "campaign.lock", "report.html"))
    return copy


def retriage_alone(copy: Path, picks: list[dict[str, Any]], workers: int) -> dict[str, float]:
    """Each pick triaged again with no representative to attach to; returns seconds per pick."""
    st = Store(copy)
    specs = resolve(st.get_meta("options", {}).get("engines", []))
    st.close()
    by_name, policy = {s.name: s for s in specs}, Policy.default()
    opinions = second_opinions(specs, copy / "work" / "opinions")
    seconds: dict[str, float] = {}

    def one(pool: EnginePool, pick: dict[str, Any]) -> None:
        out = copy / "repros" / pick["fid"]
        shutil.rmtree(out, ignore_errors=True)
        row, models = pick["row"], copy / "models"
        t0 = time.perf_counter()
        try:
            triage_finding(pool, by_name, row, models / f"{row['first_model']}.onnx", load_npz(models / f"{row['first_model']}.inputs.npz"),
                           out, 20.0, policy, None, opinions)
        except Exception as exc:  # noqa: BLE001  (reported, the others go on)
            print(f"{pick['fid']}: re-triage failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        seconds[pick["fid"]] = round(time.perf_counter() - t0, 1)

    try:
        for_each_in_pools(specs, copy / "work" / "audit", picks, one, workers)
    finally:
        if opinions is not None:
            opinions.close()
    return seconds


def main(campaign: Path, n: int = typer.Option(30, help="How many joined findings to draw."),
         seed: int = typer.Option(20261128, help="The draw's seed (say it with the figures)."),
         workers: int = typer.Option(2, help="Engine pools."),
         as_json: Optional[Path] = typer.Option(None, "--json", help="Also write the per-finding table here.")) -> None:
    if not (campaign / "campaign.sqlite").is_file():
        raise typer.BadParameter(f"{campaign}: no campaign.sqlite here; pass a campaign folder triaged by `ofuzz bugs`")
    joined = joined_members(campaign)
    picks = random.Random(seed).sample(joined, min(n, len(joined)))
    print(f"{len(joined)} findings joined a root cause by something other than their own repro's key; auditing {len(picks)} (seed {seed})")
    if not picks:
        return
    with tempfile.TemporaryDirectory(prefix="ofuzz-audit-") as tmp:
        copy = scratch_copy(campaign, Path(tmp))
        seconds = retriage_alone(copy, picks, workers)
        st = Store(copy)
        result = cluster(copy, st.findings())
        st.close()
        root_of = {fid: rc for rc in result["root_causes"] for fid in rc["findings"]}
        classes = {fid: k for k, fids in result["classes"].items() for fid in fids}
        table = []
        for p in picks:
            now = root_of.get(p["fid"])
            info_path = copy / "repros" / p["fid"] / "finding.json"
            info = json.loads(info_path.read_text()) if info_path.is_file() else {}
            verdict = ("same root" if now is not None and now["id"] == p["root"] else
                       "elsewhere" if now is not None else f"not a bug alone ({classes.get(p['fid'].split('~')[0], info.get('klass', '?'))})")
            table.append({"fid": p["fid"], "was": p["root"], "how": p["how"], "now": now["id"] if now else None,
                          "now_key": now["key"] if now else None, "own_root": info.get("root"), "verdict": verdict, "seconds": seconds.get(p["fid"])})
    hidden = [t for t in table if t["verdict"] == "elsewhere"]
    for t in table:
        key = t["now_key"] or t["own_root"] or {}
        print(f"{t['fid']}\twas {t['was']}\t{t['verdict']}\t{t['now'] or '-'}\t{key.get('status', '')} {key.get('failure', '')} "
              f"{'+'.join(key.get('ops', []))}\t{t['seconds']} s\tjoined by: {t['how'][:90]}")
    print(f"hidden merges: {len(hidden)} of {len(table)} audited land on another root cause; "
          f"{sum(t['verdict'].startswith('not a bug') for t in table)} are not a bug alone")
    if as_json:
        as_json.write_text(json.dumps(table, indent=1, default=str))


if __name__ == "__main__":
    typer.run(main)
