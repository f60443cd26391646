"""`ofuzz campaign`: the fuzzing loop with its live display, then triage and the report."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.cli.triage_view import export_actors, export_with_progress, load_known, print_bugs, ray_judges
from ofuzz.cli.common import ENGINES_OPTION, GRAPH_OPTION, INT_INPUTS_OPTION, OPSET_OPTION, TIMEOUT_OPTION, WORKERS_OPTION, check_graph, corpus_from, with_versions_installed, app, blocks_range, console, duration, fail, opset_range
from ofuzz.core.vocab import DCF, DCP, IF, MCF
from ofuzz.core.defaults import CHOOSERS, DEFAULT_BLOCKS, DEFAULT_CHOOSER, DEFAULT_STEER, default_runs_dir



def progress_table(c) -> Table:
    from ofuzz.gen.coverage import METRICS

    s = c.stats
    cov = c.coverage.metrics()
    budget = f" / {c.opts.budget:.0f}s" if c.opts.budget else ""
    dt = max(s.elapsed - s.elapsed_before, 1e-9)
    t = Table(title=f"ofuzz campaign → {c.out}", show_header=False, expand=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("elapsed", f"{s.elapsed:.0f}s{budget}")
    t.add_row("models", f"generated {s.generated}, kept {s.kept}, run {s.run}")
    t.add_row("per second", f"this session: {c.session_generated / dt:.1f} generated, {c.session_kept / dt:.1f} kept, {c.session_run / dt:.1f} run")
    t.add_row("coverage", f"OLC {100 * cov['OLC']:.1f}%  (" + ", ".join(f"{m} {100 * cov[m]:.1f}%" for m in METRICS) + ")")
    for eng, d in sorted(s.by_engine.items()):
        total = sum(d.get(k, 0) for k in (DCP, DCF, IF, MCF, "SKIP"))
        compared = d.get(DCP, 0) + d.get(DCF, 0)
        t.add_row(eng, "  ".join(f"{k} {d.get(k, 0)}" for k in (DCP, DCF, IF, MCF, "SKIP"))
                  + f"   compared {100 * compared / max(total, 1):.0f}% of models, {100 * compared / max(total - d.get('SKIP', 0), 1):.0f}% of runs")
    if c.steering is not None:
        t.add_row("steering", f"{c.steering.steered} engine runs not made: the model holds an operator that engine keeps failing on (SKIP)")
    t.add_row("unique signatures", f"{s.unique}  (" + ", ".join(f"{k} {n}" for k, n in sorted(s.classes.items())) + "; triage after the budget clusters them into root causes)")
    if c.unavailable:
        t.add_row("skipped engines", "; ".join(f"{k}: {v}" for k, v in c.unavailable.items()))
    if c.fine_seen:
        t.add_row("fine coverage", f"{len(c.fine_seen)} engine × operator × construct keys compared (the bandit's second reward)")
    if c.judges.status():
        t.add_row("judges", c.judges.status())
    return t

@app.command()
def campaign(
    engines: str = ENGINES_OPTION,
    budget: Optional[str] = typer.Option(None, help="Wall-time budget, e.g. 30m (hard limit; default 10m unless --models/--tests)."),
    models: Optional[int] = typer.Option(None, help="Stop after N generated models."),
    tests: Optional[int] = typer.Option(None, help="Stop after N kept tests (models that added coverage)."),
    blocks: str = typer.Option(DEFAULT_BLOCKS, help="Blocks per model: N or LO..HI."),
    graph: str = GRAPH_OPTION,
    mutations: bool = typer.Option(True, "--mutations/--no-mutations"),
    chooser: str = typer.Option(DEFAULT_CHOOSER, help="Block chooser: " + " or ".join(CHOOSERS) + "."),
    seed: int = typer.Option(0),
    workers: int = WORKERS_OPTION,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Campaign folder (default: $OFUZZ_RUNS/<timestamp>, else ~/.local/share/ofuzz/runs/<timestamp>)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue the campaign stored in this folder."),
    run_all: bool = typer.Option(False, "--run-all", help="Run every model, not only those adding coverage."),
    localise_dcf: bool = typer.Option(True, "--localise/--no-localise", help="Find the diverging operator of each DCF."),
    timeout: Optional[float] = TIMEOUT_OPTION,
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html at the end."),
    reduce: bool = typer.Option(True, "--reduce/--no-reduce", help="After the budget, reduce and export each unique finding (repros/<id>)."),
    reduce_time: Optional[str] = typer.Option(None, help="Time cap for that export phase (default: none, every finding is exported; `ofuzz repro --all` finishes a capped one)."),
    known: Optional[Path] = typer.Option(None, "--known", help="Known-bugs store: root causes found there are reported as known, not new."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Judge on Ray actors: 'local' (a private Ray instance on this machine), 'auto' or ray://HOST:PORT (a cluster). Needs the extra: pip install 'ofuzz\\[ray]'."),
    actors: int = typer.Option(0, "--actors", help="With --ray: engine-pool actors (default: the cluster's CPUs)."),
    opset: str = OPSET_OPTION,
    steer: bool = typer.Option(DEFAULT_STEER, "--steer/--no-steer", help="Engine-aware steering: a model holding an operator an engine keeps failing on is sent to that engine less often (see README)."),
    int_inputs: float = INT_INPUTS_OPTION,
    step_limits: bool = typer.Option(False, "--step-limits/--no-step-limits", help="Give engines their campaign_timeout (engine.yaml: onnx2tf 10 s) per step; the export re-judges every model cut there with the engine's full timeout (off: each model is judged once, with the full timeout, inside the campaign's budget)."),
    candidates: int = typer.Option(1, "--candidates", min=1, max=64, help="Models generated per step; the one whose constructs the engines that would run it have computed least is judged (see README)."),
) -> None:
    """Run a coverage-guided fuzzing campaign (Algorithm 1) on the engines; resumable."""
    import os
    import time as _time

    from ofuzz.campaign.loop import CampaignOptions, empty_shell

    if resume is not None:
        opts, out = resumed_options(resume, budget, models, tests), resume
    else:
        check_graph(graph)
        if chooser not in CHOOSERS:
            raise typer.BadParameter(f"--chooser must be one of {', '.join(CHOOSERS)}")
        names = [e.strip() for e in engines.split(",") if e.strip()]
        b = duration(budget) if budget else (None if (models or tests) else 600.0)
        opts = CampaignOptions(engines=names, budget=b, models=models, tests=tests, blocks=blocks_range(blocks), graph=graph,
                               mutations=mutations, chooser=chooser, seed=seed, workers=workers or (os.cpu_count() or 2),
                               run_all=run_all, localise=localise_dcf, timeout=timeout, opsets=opset_range(opset), steer=steer, candidates=candidates,
                               int_inputs=int_inputs, step_limits=step_limits)
        out = out or default_runs_dir() / _time.strftime("%Y%m%d-%H%M%S")
        if CampaignDir(out).is_campaign() and not empty_shell(out):
            fail(f"{out} already holds a campaign; continue it with --resume {out} or pick another --out")
    specs = run_loop(out, opts, known, ray, actors, resumed=resume is not None)
    if reduce:
        triage_all(out, specs, opts, duration(reduce_time, "--reduce-time") if reduce_time else None, known, ray, actors)
    if report:
        from ofuzz.campaign.report import write_report

        path = write_report(out)
        console.print(f"report: {path}")
        print(path)


def resumed_options(folder: Path, budget: Optional[str], models: Optional[int], tests: Optional[int]):
    """The options a stored campaign was started with, with a new budget or model/test count if given."""
    from ofuzz.campaign.loop import empty_shell, saved_options

    if not CampaignDir(folder).is_campaign():
        fail(f"{folder}: no campaign.sqlite here; give the folder a campaign was started in")
    opts = saved_options(folder)
    if opts is None:
        fail(f"{folder}: the campaign was stopped before it started (no options, no model stored); start it again with "
             f"`ofuzz campaign --out {folder}` and its options" if empty_shell(folder) else
             f"{folder}: the store has no campaign options; it was not written by ofuzz campaign")
    if budget is not None:
        opts.budget = duration(budget)
    if models is not None:
        opts.models = models
    if tests is not None:
        opts.tests = tests
    return opts


def run_loop(out: Path, opts, known: Optional[Path], ray: Optional[str], actors: int, resumed: bool) -> list:
    """The fuzzing loop with its live table, to its budget or Ctrl-C (exit 130, everything committed kept); the specs."""
    import time as _time

    from rich.live import Live

    from ofuzz.campaign.loop import Campaign, step_specs
    from ofuzz.exec.engines.registry import EngineError, resolve

    try:
        specs = with_versions_installed(resolve(opts.engines))
    except EngineError as exc:
        fail(str(exc))
    kb = load_known(known, create=False)
    known_gaps = kb.known_gaps() if kb else set()
    if kb:
        kb.close()
    judges = ray_judges(ray, actors, step_specs(specs, opts), opts.timeout) if ray else None
    c = Campaign(corpus_from(None), specs, opts, out, resume=resumed, known_gaps=known_gaps, judges=judges)
    interrupted = False
    last = [0.0]
    with Live(progress_table(c), console=console, refresh_per_second=2, transient=False) as live:
        def progress(camp) -> None:
            now = _time.monotonic()
            if now - last[0] > 0.5:
                last[0] = now
                live.update(progress_table(camp))
        try:
            c.run(progress)
        except KeyboardInterrupt:
            interrupted = True
        live.update(progress_table(c))
    c.close()
    if interrupted:
        console.print(f"stopped by Ctrl-C; everything committed is kept. Resume with: ofuzz campaign --resume {out}")
        raise typer.Exit(130)
    console.print(f"campaign stopped: {c.stop_reason or 'done'}; store: {out}/campaign.sqlite")
    return specs


def triage_all(out: Path, specs: list, opts, cap: Optional[float], known: Optional[Path], ray: Optional[str], actors: int) -> None:
    """After the budget: every finding re-judged, reduced and exported (up to `cap` seconds), then the root causes."""
    from ofuzz.store.campaign_store import FolderLock

    lock = FolderLock(out)
    try:
        export_with_progress(out, specs, opts.reduce_budget, cap, opts.workers, export_actors(ray, actors, specs, opts.timeout) if ray else None)
        print_bugs(out, known, limit=15)
    finally:
        lock.release()
