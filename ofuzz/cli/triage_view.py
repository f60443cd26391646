"""What `ofuzz campaign` and `ofuzz bugs` share: the export with its progress bar (local pools or Ray actors), and root causes printed."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rich.table import Table

from ofuzz.core.vocab import FINDING_CLASSES

from ofuzz.cli.common import console, fail, out_console


def load_known(path: Optional[Path], create: bool = False):
    from ofuzz.store.known import KnownBugs, KnownError

    if path is None:
        return None
    try:
        return KnownBugs(path, create=create)
    except KnownError as exc:
        fail(str(exc))

def print_bugs(campaign_dir: Path, known_path: Optional[Path], limit: int | None = None, as_json: bool = False, remember: bool = False,
                explain: str | None = None) -> None:
    """Cluster the triaged findings into root causes, store them, and print them ranked by severity."""
    import json

    from ofuzz.triage.export_all import capability_gaps, finish_triage
    from ofuzz.triage.rootcause import SEVERITY_NAMES

    known = load_known(known_path, create=remember)
    result = finish_triage(campaign_dir)
    roots = result["root_causes"]
    known_ids = known.known_ids() if known else set()
    for r in roots:
        r["known"] = r["id"] in known_ids
    gaps = capability_gaps(campaign_dir)
    if remember and known is not None:
        added = known.remember(roots, gaps, str(campaign_dir.resolve()), campaign_dir)
        console.print(f"remembered {added} new root causes in {known_path}")
    if known is not None:
        known.close()
    if explain is not None:
        from ofuzz.triage.explain import explanation, find_root

        root = find_root(roots, explain)
        if root is None:
            fail(f"--explain {explain}: no single root cause of {campaign_dir} has that id; `ofuzz bugs {campaign_dir}` lists them")
        print(json.dumps(root, indent=1, default=str) if as_json else "\n".join(explanation(root)))
        return
    counts = {k: len(v) for k, v in result["classes"].items()}
    from ofuzz.campaign.versions import campaign_differences

    diffs = campaign_differences(campaign_dir, roots)
    if as_json:
        print(json.dumps({"root_causes": roots, "classes": result["classes"], "capabilities": gaps, "version_differences": diffs},
                         indent=1, default=str))
        return
    new = [r for r in roots if not r["known"]]
    t = Table(title=f"{len(roots)} root causes in {campaign_dir} ({len(new)} new" + (f", {len(roots) - len(new)} known" if known else "") + "), worst first")
    for col in ("id", "severity", "engine", "failure", "operator(s)", "attributes", "traits", "signatures", "occurrences", "repro"):
        t.add_column(col, overflow="fold")
    for r in (roots if limit is None else roots[:limit]):
        k = r["key"]
        t.add_row(r["id"] + (" (known)" if r["known"] else ""), SEVERITY_NAMES.get(r["severity"], str(r["severity"])), r["engine"],
                  f"{k['status']} {k['failure']}", "+".join(k["ops"] or r.get("held", [])), ", ".join(k["attrs"]), ", ".join(k["traits"]),
                  str(len(r["signatures"])), str(r["occurrences"]), r.get("repro") or "")
    out_console().print(t)
    if limit is not None and len(roots) > limit:
        out_console().print(f"… {len(roots) - limit} more: ofuzz bugs {campaign_dir}")
    for d in diffs:
        out_console().print(f"[bold]{d['kind']}[/bold] {d['id']}: {d['text']}", soft_wrap=True)
    total = sum(counts.values())
    left = len(result.get("untriaged", []))
    out_console().print(f"{total} signatures → {len(roots)} root causes; classes: "
                        + ", ".join(f"{k} {counts.get(k, 0)}" for k in FINDING_CLASSES
                                    if counts.get(k)) + f"; capability gaps: {len(gaps)}"
                        + (f"; {left} signatures not triaged yet (ofuzz bugs {campaign_dir})" if left else ""))

def ray_judges(address: str, actors: int, specs: list, timeout: Optional[float]):
    """Connect to Ray and describe the actors (they start with the campaign)."""
    from ofuzz.campaign.distributed import DistributedError, RayActors, connect

    try:
        connect(address)
        import ray

        n = actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
    except DistributedError as exc:
        fail(str(exc))
    console.print(f"judging on {n} Ray actors ({address})")
    return RayActors(specs, timeout, n)

def export_actors(address: str, actors: int, specs: list, timeout: Optional[float]):
    """Fresh Ray actors for the export phase (the campaign's judges stopped with its loop); None if none can start."""
    from ofuzz.campaign.distributed import DistributedError

    judges = ray_judges(address, actors, specs, timeout)
    try:
        judges.start()
    except DistributedError as exc:
        console.print(f"[yellow]exporting locally:[/yellow] {exc}", soft_wrap=True)
        judges.close()
        return None
    return judges

def export_with_progress(out: Path, specs: list, per_finding: float, cap: float | None, workers: int, actors: Any = None) -> None:
    """Reduce and export every pending finding of the campaign in `out`, with a progress bar (over Ray `actors` if given)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ofuzz.triage.export_all import export_findings, pending_findings

    todo, done_before = pending_findings(out, {s.name for s in specs})
    if not todo:
        console.print(f"all {done_before} findings already have a repro folder under {out}/repros/")
        if actors is not None:
            actors.close()
        return
    with Progress(TextColumn("reducing and exporting findings"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("export", total=len(todo), failed=0)
        n = export_findings(out, specs, per_finding, cap, echo=lambda m: bar.console.print(m, soft_wrap=True), workers=workers,
                            on_progress=lambda p: bar.update(task, completed=p.done + p.failed, failed=p.failed), todo=todo, actors=actors)
    if actors is not None:
        console.print(f"export on Ray: {actors.status()}")
        actors.close()
    from ofuzz.exec.engines.client import start_costs

    starts = ", ".join(f"{e} {k} ({t:.0f} s)" for e, (k, t) in start_costs().items())
    console.print(f"exported {n} repro folders under {out}/repros/ ({done_before} were already there); engine worker starts: {starts}")
