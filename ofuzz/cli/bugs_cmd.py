"""`ofuzz bugs`, `findings`, `repro`, `report`: what a campaign found, triaged into root causes."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.cli.triage_view import export_actors, export_with_progress, print_bugs
from ofuzz.cli.common import WORKERS_OPTION, app, console, fail, out_console





@app.command()
def bugs(
    campaign_dir: Path = typer.Argument(..., help="A campaign folder."),
    known: Optional[Path] = typer.Option(None, "--known", help="Known-bugs store: mark root causes seen before as known."),
    remember: bool = typer.Option(False, "--remember", help="Add this campaign's root causes and capability gaps to --known."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    triage: bool = typer.Option(True, "--triage/--no-triage", help="First triage findings that have no folder yet (re-runs engines)."),
    retriage: bool = typer.Option(False, "--retriage", help="Triage every finding again (after a change of noise classes, tolerances or engines); "
                                  "the raw findings are kept, only repros/ is rebuilt."),
    workers: int = WORKERS_OPTION,
    ray: Optional[str] = typer.Option(None, "--ray", help="Triage on Ray actors: 'local', 'auto' or ray://host:port (needs the ray extra)."),
    actors: int = typer.Option(0, "--actors", help="Ray actors (default: one per CPU of the cluster)."),
    explain: Optional[str] = typer.Option(None, "--explain", help="Print one root cause's members, how each joined, and the evidence of "
                                          "every merge (RC: its id, or the start of it)."),
) -> None:
    """List root causes (distinct defects, worst first); drift, unsupported and undefined findings are counted apart."""
    from ofuzz.exec.engines.registry import EngineError, resolve
    from ofuzz.store.campaign_store import Store, StoreError

    if not CampaignDir(campaign_dir).is_campaign():
        fail(f"{campaign_dir}: no campaign.sqlite here")
    if remember and known is None:
        fail("--remember needs --known PATH (the known-bugs store to add to)")
    try:
        st = Store(campaign_dir)
    except StoreError as exc:
        fail(str(exc))
    opts = st.get_meta("options", {})
    st.close()
    if retriage or triage:
        import shutil

        from ofuzz.store.campaign_store import FolderLock

        try:
            specs = resolve(opts.get("engines", []))
        except EngineError as exc:
            fail(str(exc))
        lock = FolderLock(campaign_dir)  # triage writes the folder: not while a campaign or another triage does
        try:
            if retriage:
                shutil.rmtree(CampaignDir(campaign_dir).repros, ignore_errors=True)
            export_with_progress(campaign_dir, specs, float(opts.get("reduce_budget", 20.0)), None, workers or 2,
                                  export_actors(ray, actors, specs, opts.get("timeout")) if ray else None)
        finally:
            lock.release()
    print_bugs(campaign_dir, known, as_json=as_json, remember=remember, explain=explain)

@app.command()
def findings(
    campaign_dir: Path = typer.Argument(..., help="A campaign folder."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List a campaign's unique findings (one per signature, with counts)."""
    import json

    from ofuzz.triage.export_all import findings_with_repros

    if not CampaignDir(campaign_dir).is_campaign():
        fail(f"{campaign_dir}: no campaign.sqlite here")
    rows = findings_with_repros(campaign_dir)
    if as_json:
        print(json.dumps(rows, indent=1, default=str))
        return
    t = Table(title=f"{len(rows)} unique findings in {campaign_dir}")
    for col in ("id", "engine", "status", "op", "count", "first model", "nodes", "repro", "summary"):
        t.add_column(col, overflow="fold", max_width=70 if col == "summary" else None)
    for r in rows:
        info = r["repro"] or {}
        red = info.get("reduction", {})
        nodes = f"{red.get('nodes_before', '?')} → {red.get('nodes_after', '?')}" if info else ""
        op = r["op"] or ("+".join(info["reduced_ops"]) + " (reduced)" if info.get("reduced_ops") else "?")
        t.add_row(r["id"], r["engine"], r["status"], op, str(r["count"]), r["first_model"], nodes,
                  info.get("repro_check", "?") if info else "not exported", r["summary"])
    out_console().print(t)
    out_console().print(repro_summary([r["repro"] for r in rows]))

def repro_summary(infos: list) -> str:
    """One line over the exported repros: how many, how small, how fast, how many reproduce."""
    import statistics as st

    done = [i for i in infos if i]
    if not done:
        return f"0 of {len(infos)} findings exported; run `ofuzz repro --all --campaign DIR`"
    before = [i["reduction"]["nodes_before"] for i in done]
    after = [i["reduction"]["nodes_after"] for i in done]
    secs = [i["reduction"]["seconds"] for i in done if i["reduction"].get("checks")]
    repro = sum(str(i.get("repro_check", "")).startswith("reproduced") for i in done)
    return (f"{len(done)} of {len(infos)} findings exported; nodes median {st.median(before):g} → {st.median(after):g} "
            f"(max after {max(after)}); reduction median {st.median(secs) if secs else 0:.2f} s (max {max(secs) if secs else 0:.1f} s); "
            f"repro.py reproduced {repro}/{len(done)} in a fresh process")

@app.command()
def report(campaign_dir: Path = typer.Argument(..., help="A campaign folder.")) -> None:
    """Write DIR/report.html: coverage over time, findings per engine, one card per finding."""
    from ofuzz.campaign.report import write_report

    if not CampaignDir(campaign_dir).is_campaign():
        fail(f"{campaign_dir}: no campaign.sqlite here")
    print(write_report(campaign_dir))

@app.command()
def repro(
    finding: Optional[str] = typer.Argument(None, help="A finding id (from `ofuzz findings`) or a full signature."),
    campaign_dir: Path = typer.Option(Path("."), "--campaign", "-c", help="The campaign folder holding the finding."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Repro folder (default CAMPAIGN/repros/<id>)."),
    all_findings: bool = typer.Option(False, "--all", help="Export every finding that has no repro folder yet (parallel pools)."),
    workers: int = typer.Option(0, help="With --all: parallel engine pools (default: the machine's cores)."),
    reduce_time: Optional[float] = typer.Option(None, help="Reduction budget per finding in seconds (default 60, with --all 20)."),
) -> None:
    """Export a finding: model, inputs, expected and actual outputs, repro.py, REPORT.md."""
    from ofuzz.judge.signature import finding_id
    from ofuzz.exec.engines.registry import EngineError, resolve
    from ofuzz.core.npz import load_npz
    from ofuzz.triage.pipeline import export
    from ofuzz.store.campaign_store import Store

    if not CampaignDir(campaign_dir).is_campaign():
        fail(f"{campaign_dir}: no campaign.sqlite here; pass --campaign DIR")
    st = Store(campaign_dir)
    rows = st.findings()
    opts = st.get_meta("options", {})
    st.close()
    if finding is None and not all_findings:
        fail("give a finding id (see `ofuzz findings DIR`) or --all")
    try:
        specs = resolve(opts.get("engines", []))
    except EngineError as exc:
        fail(str(exc))
    if all_findings:
        export_with_progress(campaign_dir, specs, reduce_time or 20.0, None, workers)
        return
    match = [r for r in rows if finding_id(r["signature"]).startswith(finding) or r["signature"] == finding]
    if len(match) != 1:
        fail(f"finding {finding!r}: {'no match' if not match else f'{len(match)} matches'}; see `ofuzz findings {campaign_dir}`")
    f = match[0]
    model_path = CampaignDir(campaign_dir).model(f['first_model'])
    if not model_path.is_file():
        fail(f"{model_path}: the finding's model file is missing")
    inputs = load_npz(CampaignDir(campaign_dir).model_inputs(f['first_model']))
    dest = out or CampaignDir(campaign_dir).repro(finding_id(f["signature"]))
    with console.status("re-running the finding's model"):
        path = export({s.name: s for s in specs}, f, model_path, inputs, dest, reduce_budget=reduce_time or 60.0)
    console.print(f"wrote {path} (REPORT.md, repro.py, model.onnx, inputs.npz, expected.npz, <engine>.outputs.npz)")
    print(path)
