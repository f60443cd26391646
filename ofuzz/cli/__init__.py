"""Command-line interface (typer): one thin command per pipeline stage."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ofuzz.core.vocab import BUG, DCF, DCP, DRIFT, FINDING_CLASSES, IF, MCF, PENDING, SPLIT, UNCONFIRMED, UNDEFINED, UNSUPPORTED
from ofuzz.gen.corpus import CorpusError, load_corpus
from ofuzz.core.defaults import CHOOSERS, DEFAULT_BLOCKS, DEFAULT_CHOOSER, DEFAULT_ENGINES, DEFAULT_INT_INPUTS, DEFAULT_OPSETS, DEFAULT_STEER, GRAPH_MODELS, default_runs_dir, parse_blocks, parse_duration, parse_opsets

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ofuzz: graph-based differential fuzzing of DL inference engines.")
console = Console(stderr=True)


def out_console() -> Console:
    """stdout console; wide when not a terminal so piped tables keep whole names."""
    return Console() if sys.stdout.isatty() else Console(width=200)


def fail(msg: str, code: int = 2) -> None:
    console.print(f"[red]error:[/red] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def blocks_range(spec: str) -> tuple[int, int]:
    try:
        return parse_blocks(spec)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def opset_range(spec: str) -> tuple[int, int]:
    try:
        return parse_opsets(spec)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


OPSET_OPTION = typer.Option(DEFAULT_OPSETS, "--opset", help="ONNX version of the models: N or LO..HI (one drawn per model; blocks of later versions, "
                            "such as Mish at 18, appear only in models of those; an engine is not sent a model above its max_opset).")

INT_INPUTS_OPTION = typer.Option(DEFAULT_INT_INPUTS, "--int-inputs", min=0.0, max=1.0,
                                 help="Share of models whose inputs are int32/int64 where the first block takes integers (0: float models only).")


def duration(spec: str, option: str = "--budget") -> float:
    try:
        return parse_duration(spec)
    except ValueError as exc:
        raise typer.BadParameter(f"{option}: {exc}") from None


# options several commands share: declared once
ENGINES_OPTION = typer.Option(",".join(DEFAULT_ENGINES), "--engines", "-e", help="Comma-separated engines (FILE.py:Class plug-ins allowed).")
PLUGIN_OPTION = typer.Option(None, "--engine", help="Extra plug-in FILE.py:Class (repeatable).")
CORPUS_OPTION = typer.Option(None, "--corpus", help="Corpus file or folder (repeatable); default: opsets/.")
GRAPH_OPTION = typer.Option("mixed", help="Graph model: " + ", ".join(GRAPH_MODELS) + " (mixed: half ws, half rn).")
TIMEOUT_OPTION = typer.Option(None, help="Per-step engine timeout in seconds (default: each engine's own).")
WORKERS_OPTION = typer.Option(0, help="Parallel engine pools (default: the machine's cores).")


def _check_graph(graph: str) -> None:
    if graph not in GRAPH_MODELS:
        raise typer.BadParameter(f"--graph must be one of {', '.join(GRAPH_MODELS)}")


def _corpus(paths: Optional[list[Path]]):
    try:
        return load_corpus(paths or None)
    except CorpusError as exc:
        fail(str(exc))


@app.command()
def generate(
    count: int = typer.Option(10, "--count", "-n", min=1, help="Number of models."),
    blocks: str = typer.Option("10", help="Blocks per model: N or LO..HI (drawn uniformly per model)."),
    graph: str = GRAPH_OPTION,
    mutations: bool = typer.Option(True, "--mutations/--no-mutations", help="Apply GEA/GER/BNA/BNR/TSM/PM."),
    seed: int = typer.Option(0, help="Campaign seed; model i uses (seed, i)."),
    out: Path = typer.Option(Path("models"), "--out", "-o", help="Output folder."),
    corpus: Optional[list[Path]] = CORPUS_OPTION,
    check: bool = typer.Option(True, "--check/--no-check", help="Run onnx.checker (full) on every model."),
    start: int = typer.Option(0, help="Index of the first model (to extend a set)."),
    opset: str = OPSET_OPTION,
    int_inputs: float = INT_INPUTS_OPTION,
) -> None:
    """Generate models: DIR/<id>.onnx, DIR/<id>.inputs.npz and DIR/<id>.json."""
    from ofuzz.gen.generate import GenerateOptions, generate_one

    _check_graph(graph)
    c = _corpus(corpus)
    opts = GenerateOptions(blocks=blocks_range(blocks), graph=graph, mutations=mutations, check=check, opsets=opset_range(opset), int_inputs=int_inputs)
    degraded = 0
    with Progress(TextColumn("generating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("gen", total=count)
        for i in range(start, start + count):
            m = generate_one(c, seed, i, opts)
            degraded += bool(m.provenance["degraded"])
            m.save(out)
            bar.advance(task)
    console.print(f"wrote {count} models to {out}/" + (f" ({degraded} with degraded blocks, see their .json)" if degraded else ""))


@app.command("corpus")
def corpus_cmd(
    corpus: Optional[list[Path]] = typer.Option(None, "--corpus", help="Corpus file or folder to validate and list."),
    paper: bool = typer.Option(False, help="Only the paper's blocks."),
) -> None:
    """List the corpus blocks (validating the files on the way)."""
    c = _corpus(corpus)
    t = Table(title=f"{len(c)} blocks, {len(c.operator_types)} ONNX operator types ({', '.join(Path(f).name for f in c.files)})")
    for col in ("block", "op / subgraph", "rule", "in-degree", "out-degree", "params", "paper"):
        t.add_column(col)
    for b in c:
        if paper and not b.paper:
            continue
        what = b.op if not b.is_subgraph else "+".join(o.block for o in b.ops) + f" {list(map(list, b.edges))}"
        t.add_row(b.name, what, b.rule, _degs(b.in_degree), _degs(b.out_degree), ", ".join(s.name for s in b.params), b.paper or "")
    out_console().print(t)


@app.command()
def engines(
    install: Optional[str] = typer.Option(None, "--install", help="Create the environment of NAME (or 'all')."),
    engine: Optional[list[str]] = PLUGIN_OPTION,
    probe: bool = typer.Option(True, "--probe/--no-probe", help="Start each available engine to read its version."),
    capabilities: Optional[Path] = typer.Option(None, "--capabilities", help="Show what engines said they do not support in this triaged campaign folder."),
) -> None:
    """List every known engine with its version, or why it is unavailable and how to install it."""
    if capabilities is not None:
        if not (capabilities / "campaign.sqlite").is_file():
            fail(f"{capabilities}: no campaign.sqlite here; pass a campaign folder (triaged by `ofuzz bugs DIR`)")
        from ofuzz.triage.export_all import capability_gaps

        gaps = capability_gaps(capabilities)
        t = Table(title=f"engine capability gaps in {capabilities} ({len(gaps)}; from messages matching noise/unsupported.yaml)")
        for col in ("engine", "operator", "attribute", "signatures", "rule"):
            t.add_column(col)
        for g in gaps:
            t.add_row(g["engine"], g.get("op") or "?", g.get("attribute") or "", str(g["signatures"]), g.get("rule", ""))
        out_console().print(t)
        return
    from ofuzz.exec.engines.client import Worker
    from ofuzz.exec.engines.envs import install as install_env, install_command, python_for
    from ofuzz.exec.engines.registry import EngineError, all_engines, installed_versions, resolve

    try:
        known = all_engines(engine)
        known.update({s.name: s for s in resolve(installed_versions())})  # NAME@VERSION engines used before
    except EngineError as exc:
        fail(str(exc))
    if install:
        names = sorted(known) if install == "all" else install.split(",")
        for n in names:
            if "@" in n and n not in known:
                known[n] = _resolve_engines([n])[0]  # NAME@VERSION: installed by resolving it
            if n not in known:
                fail(f"unknown engine {n!r}; known engines: {', '.join(sorted(known))}")
            if known[n].env == "core":
                console.print(f"{n}: uses the core environment (nothing to install)")
                continue
            with console.status(f"installing the environment of {n}"):
                try:
                    py = install_env(known[n], echo=lambda line: console.print(f"  {line}", highlight=False))
                except Exception as exc:  # pip failed: say so, keep going with the others
                    console.print(f"[red]{n}: {exc}[/red]")
                    continue
            console.print(f"{n}: ready ({py})")
        return
    t = Table(title="engines")
    for col in ("engine", "default", "status", "version / reason", "environment"):
        t.add_column(col)
    for name, spec in sorted(known.items()):
        py = python_for(spec)
        env = "core" if spec.env == "core" else spec.env_id
        if py is None:
            t.add_row(name, "yes" if spec.default else "", "[yellow]unavailable[/yellow]", f"environment not installed; run: {install_command(spec)}", env)
            continue
        if not probe:
            t.add_row(name, "yes" if spec.default else "", "installed", "", env)
            continue
        with tempfile.TemporaryDirectory(prefix="ofuzz-probe-") as work:
            w = Worker(spec, py, Path(work))
            out = w.start()
            w.close()
        if out.ok:
            t.add_row(name, "yes" if spec.default else "", "[green]available[/green]", w.version, env)
        else:
            reason = out.summary() + (f"; install: {install_command(spec)}" if out.kind == "unavailable" else "")
            t.add_row(name, "yes" if spec.default else "", "[red]unavailable[/red]", reason, env)
    out_console().print(t)


def _user_model(model_path: Path, inputs: Optional[Path], workdir: Path) -> tuple[Any, Path, dict]:
    """The user's model (free dimensions fixed, with a warning) and its feeds, or one clear error line."""
    from ofuzz.gen.user_model import UserInputError, load_feeds, load_user_model

    try:
        model, path, fixed = load_user_model(model_path, workdir)
        if fixed:
            console.print(f"[yellow]warning:[/yellow] free dimensions fixed to 1: {', '.join(fixed)}")
        return model, path, load_feeds(model_path, inputs, model)
    except UserInputError as exc:
        fail(str(exc))


def _resolve_engines(names: list[str]):
    from ofuzz.exec.engines.registry import EngineError, resolve

    try:
        return _with_versions_installed(resolve([n.strip() for n in names if n.strip()]))
    except EngineError as exc:
        fail(str(exc))


def _with_versions_installed(specs: list[Any]) -> list[Any]:
    """NAME@VERSION engines get their pinned environment on first use (once; reused after)."""
    from ofuzz.exec.engines.envs import install, python_for

    for s in specs:
        if "@" in s.name and python_for(s) is None:
            with console.status(f"installing {s.name} (first use; its environment is reused after)"):
                try:
                    install(s, echo=lambda line: console.print(f"  {line}", highlight=False))
                except Exception as exc:  # noqa: BLE001  (pip's failure, in one line)
                    fail(f"{s.name}: could not install its environment ({str(exc).splitlines()[0][:200]}); check the version exists: "
                         f"pip index versions {s.version_package}")
    return specs


@app.command()
def run(
    model_path: Path = typer.Argument(..., help="An ONNX model."),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help=".npz with the model's inputs (default: the generator's DIR/<id>.inputs.npz beside the model, else U[-1, 1])."),
    engines: str = ENGINES_OPTION,
    engine: Optional[list[str]] = PLUGIN_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
    localise_dcf: bool = typer.Option(True, "--localise/--no-localise", help="Find the first diverging operator of a DCF."),
    timeout: Optional[float] = TIMEOUT_OPTION,
) -> None:
    """Run one model on several engines and judge them; exit 1 on any finding."""
    import json
    import tempfile

    from ofuzz.judge.judging import Policy, judge_model
    from ofuzz.exec.runner import EnginePool

    specs = _resolve_engines(engines.split(",") + list(engine or []))
    with tempfile.TemporaryDirectory(prefix="ofuzz-run-") as tmp:
        model, path, feeds = _user_model(model_path, inputs, Path(tmp))
        with EnginePool(specs, Path(tmp) / "pool", timeout) as pool:
            with console.status("starting engines"):
                pool.start()
            for n, why in pool.unavailable.items():
                console.print(f"[yellow]skipped {n}:[/yellow] {why}", soft_wrap=True)
            if not pool.names:
                fail("no engine could run; see `ofuzz engines`")
            with console.status("running"):
                judged = judge_model(pool, model, path, feeds, localise_dcf, Policy.default())
            versions = pool.versions()
    if as_json:
        print(json.dumps({"model": str(model_path), "versions": versions, **judged.to_json()}, indent=1, default=str))
    else:
        v = judged.verdict
        t = Table(title=f"{model_path.name}: expected outputs from {v.expected_from or '-'}" + (" — NO MAJORITY" if v.split else ""))
        for col in ("engine", "status", "prepare s", "run s", "max abs", "max rel", "diverging op"):
            t.add_column(col, no_wrap=True)
        t.add_column("detail", overflow="fold", max_width=70)
        fmap = {f.engine: f for f in judged.findings}
        for eng, r in v.results.items():
            c = r.versus
            f = fmap.get(eng)
            colour = {DCP: "green", DCF: "red", IF: "red", MCF: "red"}[r.status]
            t.add_row(eng, f"[{colour}]{r.status}[/{colour}]", f"{r.prepare_time:.3f}", f"{r.run_time:.3f}",
                      f"{c.max_abs:.3g}" if c else "", f"{c.max_rel:.3g}" if c else "",
                      (f.op or "?") if f and f.status == DCF else (f.op or "") if f else "",
                      f.summary if f else "")
        out_console().print(t)
    raise typer.Exit(1 if judged.findings else 0)


def _progress_table(c) -> Table:
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
    step_limits: bool = typer.Option(True, "--step-limits/--no-step-limits", help="Give engines their campaign_timeout (engine.yaml: onnx2tf 10 s) per step; the export re-judges every model cut there with the engine's full timeout."),
    candidates: int = typer.Option(1, "--candidates", min=1, max=64, help="Models generated per step; the one whose constructs the engines that would run it have computed least is judged (see README)."),
) -> None:
    """Run a coverage-guided fuzzing campaign (Algorithm 1) on the engines; resumable."""
    import os
    import time as _time

    from rich.live import Live

    from ofuzz.campaign.loop import Campaign, CampaignOptions, empty_shell, saved_options, step_specs
    from ofuzz.exec.engines.registry import EngineError, resolve

    if resume is not None:
        if not (resume / "campaign.sqlite").is_file():
            fail(f"{resume}: no campaign.sqlite here; give the folder a campaign was started in")
        opts = saved_options(resume)
        if opts is None:
            fail(f"{resume}: the campaign was stopped before it started (no options, no model stored); start it again with "
                 f"`ofuzz campaign --out {resume}` and its options" if empty_shell(resume) else
                 f"{resume}: the store has no campaign options; it was not written by ofuzz campaign")
        if budget is not None:
            opts.budget = duration(budget)
        if models is not None:
            opts.models = models
        if tests is not None:
            opts.tests = tests
        out = resume
    else:
        _check_graph(graph)
        if chooser not in CHOOSERS:
            raise typer.BadParameter(f"--chooser must be one of {', '.join(CHOOSERS)}")
        names = [e.strip() for e in engines.split(",") if e.strip()]
        b = duration(budget) if budget else (None if (models or tests) else 600.0)
        opts = CampaignOptions(engines=names, budget=b, models=models, tests=tests, blocks=blocks_range(blocks), graph=graph,
                               mutations=mutations, chooser=chooser, seed=seed, workers=workers or (os.cpu_count() or 2),
                               run_all=run_all, localise=localise_dcf, timeout=timeout, opsets=opset_range(opset), steer=steer, candidates=candidates,
                               int_inputs=int_inputs, step_limits=step_limits)
        out = out or default_runs_dir() / _time.strftime("%Y%m%d-%H%M%S")
        if (out / "campaign.sqlite").exists() and not empty_shell(out):
            fail(f"{out} already holds a campaign; continue it with --resume {out} or pick another --out")
    try:
        specs = _with_versions_installed(resolve(opts.engines))
    except EngineError as exc:
        fail(str(exc))
    kb = _load_known(known, create=False)
    known_gaps = kb.known_gaps() if kb else set()
    if kb:
        kb.close()
    judges = _ray_judges(ray, actors, step_specs(specs, opts), opts.timeout) if ray else None
    c = Campaign(_corpus(None), specs, opts, out, resume=resume is not None, known_gaps=known_gaps, judges=judges)
    interrupted = False
    last = [0.0]
    with Live(_progress_table(c), console=console, refresh_per_second=2, transient=False) as live:
        def progress(camp) -> None:
            now = _time.monotonic()
            if now - last[0] > 0.5:
                last[0] = now
                live.update(_progress_table(camp))
        try:
            c.run(progress)
        except KeyboardInterrupt:
            interrupted = True
        live.update(_progress_table(c))
    c.close()
    if interrupted:
        console.print(f"stopped by Ctrl-C; everything committed is kept. Resume with: ofuzz campaign --resume {out}")
        raise typer.Exit(130)
    console.print(f"campaign stopped: {c.stop_reason or 'done'}; store: {out}/campaign.sqlite")
    if reduce:
        from ofuzz.store.campaign_store import FolderLock

        cap = duration(reduce_time, "--reduce-time") if reduce_time else None
        lock = FolderLock(out)
        try:
            _export_with_progress(out, specs, opts.reduce_budget, cap, opts.workers, _export_actors(ray, actors, specs, opts.timeout) if ray else None)
            _print_bugs(out, known, limit=15)
        finally:
            lock.release()
    if report:
        from ofuzz.campaign.report import write_report

        path = write_report(out)
        console.print(f"report: {path}")
        print(path)


def _ray_judges(address: str, actors: int, specs: list, timeout: Optional[float]):
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


def _export_actors(address: str, actors: int, specs: list, timeout: Optional[float]):
    """Fresh Ray actors for the export phase (the campaign's judges stopped with its loop); None if none can start."""
    from ofuzz.campaign.distributed import DistributedError

    judges = _ray_judges(address, actors, specs, timeout)
    try:
        judges.start()
    except DistributedError as exc:
        console.print(f"[yellow]exporting locally:[/yellow] {exc}", soft_wrap=True)
        judges.close()
        return None
    return judges


def _export_with_progress(out: Path, specs: list, per_finding: float, cap: float | None, workers: int, actors: Any = None) -> None:
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


def _load_known(path: Optional[Path], create: bool = False):
    from ofuzz.store.known import KnownBugs, KnownError

    if path is None:
        return None
    try:
        return KnownBugs(path, create=create)
    except KnownError as exc:
        fail(str(exc))


def _print_bugs(campaign_dir: Path, known_path: Optional[Path], limit: int | None = None, as_json: bool = False, remember: bool = False,
                explain: str | None = None) -> None:
    """Cluster the triaged findings into root causes, store them, and print them ranked by severity."""
    import json

    from ofuzz.triage.export_all import capability_gaps, finish_triage
    from ofuzz.triage.rootcause import SEVERITY_NAMES

    known = _load_known(known_path, create=remember)
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

    if not (campaign_dir / "campaign.sqlite").is_file():
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
                shutil.rmtree(campaign_dir / "repros", ignore_errors=True)
            _export_with_progress(campaign_dir, specs, float(opts.get("reduce_budget", 20.0)), None, workers or 2,
                                  _export_actors(ray, actors, specs, opts.get("timeout")) if ray else None)
        finally:
            lock.release()
    _print_bugs(campaign_dir, known, as_json=as_json, remember=remember, explain=explain)


@app.command()
def findings(
    campaign_dir: Path = typer.Argument(..., help="A campaign folder."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List a campaign's unique findings (one per signature, with counts)."""
    import json

    from ofuzz.triage.export_all import findings_with_repros

    if not (campaign_dir / "campaign.sqlite").is_file():
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
    out_console().print(_repro_summary([r["repro"] for r in rows]))


def _repro_summary(infos: list) -> str:
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

    if not (campaign_dir / "campaign.sqlite").is_file():
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

    if not (campaign_dir / "campaign.sqlite").is_file():
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
        _export_with_progress(campaign_dir, specs, reduce_time or 20.0, None, workers)
        return
    match = [r for r in rows if finding_id(r["signature"]).startswith(finding) or r["signature"] == finding]
    if len(match) != 1:
        fail(f"finding {finding!r}: {'no match' if not match else f'{len(match)} matches'}; see `ofuzz findings {campaign_dir}`")
    f = match[0]
    model_path = campaign_dir / "models" / f"{f['first_model']}.onnx"
    if not model_path.is_file():
        fail(f"{model_path}: the finding's model file is missing")
    inputs = load_npz(campaign_dir / "models" / f"{f['first_model']}.inputs.npz")
    dest = out or campaign_dir / "repros" / finding_id(f["signature"])
    with console.status("re-running the finding's model"):
        path = export({s.name: s for s in specs}, f, model_path, inputs, dest, reduce_budget=reduce_time or 60.0)
    console.print(f"wrote {path} (REPORT.md, repro.py, model.onnx, inputs.npz, expected.npz, <engine>.outputs.npz)")
    print(path)


@app.command()
def replay(
    source: Path = typer.Argument(..., help="A campaign folder (its root causes), a known-bugs store, or a folder of repro folders."),
    engines: str = typer.Option(..., "--engines", "-e", help="Engines to replay on (e.g. mnn,mnn@3.5.0)."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Write JUnit XML here (one test case per root cause and engine)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    timeout: Optional[float] = TIMEOUT_OPTION,
    repeat: int = typer.Option(1, "--repeat", min=1, help="Run each repro N times; an engine whose outcome differs between runs is marked flaky (not a regression)."),
) -> None:
    """Re-run every root cause's reduced repro: still failing / changed / fixed / newly failing / flaky; exit 1 on a
    regression (changed or newly failing)."""
    import json
    import tempfile
    import time

    from ofuzz.campaign import replay as rp
    from ofuzz.judge.oracle import family
    from ofuzz.exec.runner import EnginePool

    try:
        cases = rp.load_cases(source)
    except rp.ReplayError as exc:
        fail(str(exc))
    specs = _resolve_engines(engines.split(","))
    families = {s.name: s.family_name for s in specs}
    with tempfile.TemporaryDirectory(prefix="ofuzz-replay-") as tmp:
        with EnginePool(specs, Path(tmp) / "pool", timeout) as pool:
            t0 = time.perf_counter()
            with console.status("starting engines"):
                pool.start()
            started = time.perf_counter() - t0
            for n, why in pool.unavailable.items():
                console.print(f"[yellow]skipped {n}:[/yellow] {why}", soft_wrap=True)
            if not pool.names:
                fail("no engine could run; see `ofuzz engines`")
            fam = lambda e: families.get(e) or family(e.split("@")[0])  # noqa: E731  (a campaign's own engine names)
            with console.status(f"replaying {len(cases)} root causes on {', '.join(pool.names)}"):
                t1 = time.perf_counter()
                results = rp.replay(pool, cases, pool.names, fam, repeat=repeat)
                secs = time.perf_counter() - t1
    by = rp.counts(results)
    if junit is not None:
        junit.write_text(rp.junit_xml(results, secs))
    rate = len(cases) * repeat / max(secs, 1e-9)
    if as_json:
        print(json.dumps({"results": [r.to_json() for r in results], "counts": by, "seconds": round(secs, 3), "startup_seconds": round(started, 3),
                          "repros_per_second": round(rate, 2)}, indent=1))
    else:
        t = Table(title=f"replay of {len(cases)} root causes from {source}")
        for col in ("engine", *rp.OUTCOMES):
            t.add_column(col)
        for eng, c in sorted(by.items()):
            t.add_row(eng, *(str(c[o]) for o in rp.OUTCOMES))
        out_console().print(t)
        for r in results:
            if r.outcome in rp.REGRESSIONS:
                out_console().print(f"[red]{r.outcome}[/red] {r.case} on {r.engine}: {r.now.status} {r.now.failure} {r.now.detail}", soft_wrap=True)
        console.print(f"{len(cases)} repros in {secs:.1f}s ({rate:.1f} repros/s on {len(pool.names)} engines after {started:.1f}s start-up)")
    raise typer.Exit(1 if any(r.outcome in rp.REGRESSIONS for r in results) else 0)


@app.command()
def conformance(
    engines: str = ENGINES_OPTION,
    ops: Optional[str] = typer.Option(None, "--ops", help="Only the tests of these operators (comma-separated, e.g. Conv,Resize)."),
    name: Optional[str] = typer.Option(None, "--name", help="Only tests whose name contains this (e.g. test_resize)."),
    sample: int = typer.Option(0, "--sample", help="A random sample of this many tests (seeded by --seed): a quick estimate for slow engines."),
    seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
    store: Optional[Path] = typer.Option(None, "--store", help="Conformance store (default: conformance.sqlite in the runs folder)."),
    workers: int = WORKERS_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    timeout: Optional[float] = TIMEOUT_OPTION,
    resume: bool = typer.Option(False, "--resume", help="Go on with the store's latest sweep of these engines: only the tests it has not finished run."),
) -> None:
    """Run the onnx package's backend node tests through each engine: pass / wrong values / failed to convert / failed to
    run / crashed per engine and operator, what changed since the last sweep, and where ofuzz's own oracle contradicts
    the expected outputs."""
    import dataclasses
    import json
    import os
    import tempfile

    from ofuzz.campaign import conformance as cf

    specs = _resolve_engines(engines.split(","))
    if timeout is not None:
        specs = [dataclasses.replace(s, timeout=timeout) for s in specs]
    with console.status("collecting the onnx node tests"):
        tests, skipped = cf.node_tests({o.strip() for o in ops.split(",")} if ops else None, name)
    if not tests:
        fail("no node test matches --ops/--name" + (f" ({len(skipped)} left out: not numeric tensors)" if skipped else ""))
    if 0 < sample < len(tests):
        import random

        tests = sorted(random.Random(seed).sample(tests, sample), key=lambda t: t.name)
    path = store or default_runs_dir() / "conformance.sqlite"
    try:
        st = cf.ConformanceStore(path)
    except cf.ConformanceError as exc:
        fail(str(exc))
    names = [s.name for s in specs]
    going_on = st.latest(names) if resume else None
    if resume and going_on is None:
        fail(f"--resume: {path} holds no sweep of {','.join(names)}; run without --resume to start one")
    todo = len(tests) - (len({t.name for t in tests} & st.done(going_on, names)) if going_on else 0)
    with tempfile.TemporaryDirectory(prefix="ofuzz-conformance-") as tmp, Progress(
            TextColumn("conformance"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("tests", total=todo)
        sweep = cf.run_sweep(specs, tests, st, Path(tmp), workers or (os.cpu_count() or 2), lambda _t: bar.advance(task), going_on)
    results = st.results(sweep)
    counts, failing = cf.summarise(results)
    oracle = st.oracle(sweep)
    changed = cf.changes(st, sweep, [s.name for s in specs])
    versions = st.versions(sweep)
    st.close()
    if as_json:
        print(json.dumps({"sweep": sweep, "store": str(path), "tests": len(tests), "sample_seed": seed if sample else None, "left_out": len(skipped), "versions": versions, "counts": counts,
                          "failing_operators": failing, "oracle_disagreements": oracle, "changes": changed}, indent=1))
        return
    t = Table(title=f"onnx node tests: {len(tests)} run" + (f" (a random sample, seed {seed})" if sample else "")
              + f" ({len(skipped)} left out: not numeric tensors or random), sweep {sweep} in {path}")
    for col in ("engine", "version", *cf.OUTCOMES):
        t.add_column(col)
    for eng, c in sorted(counts.items()):
        t.add_row(eng, versions.get(eng, ""), *(str(c[o]) for o in cf.OUTCOMES))
    out_console().print(t)
    for eng, per in sorted(failing.items()):
        for outcome, names in per.items():
            shown = ", ".join(names[:25]) + (f" … ({len(names)} operators)" if len(names) > 25 else "")
            out_console().print(f"[bold]{eng}[/bold] {outcome}: {shown}", soft_wrap=True)
    out_console().print(f"oracle vs ground truth: {len(oracle)} disagreements"
                        + "".join(f"\n  {d['test']}: {d['kind']} ({d['engine']}; majority {', '.join(d['majority'])})" for d in oracle[:40]),
                        soft_wrap=True)
    if changed:
        out_console().print(f"{len(changed)} outcomes changed since the previous sweep:"
                            + "".join(f"\n  {c['engine']} {c['test']}: {c['was']} → {c['now']}" for c in changed[:60]), soft_wrap=True)


@app.command("reduce")
def reduce_cmd(
    model_path: Path = typer.Argument(..., help="An ONNX model that shows a finding."),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help=".npz inputs (default: the generator's sidecar, else U[-1, 1])."),
    engines: str = ENGINES_OPTION,
    signature: Optional[str] = typer.Option(None, help="Keep this finding's signature (default: the first blamed finding)."),
    budget: float = typer.Option(120.0, help="Time budget in seconds."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where to write the reduced model (default MODEL.reduced.onnx)."),
) -> None:
    """Delta-debug a model down to a 1-minimal one that keeps the finding's signature."""
    import tempfile

    import onnx

    from ofuzz.judge.judging import Policy, judge_model
    from ofuzz.judge.localise import value_source
    from ofuzz.core.npz import npz_bytes
    from ofuzz.triage.reduce import Target, reduce_model
    from ofuzz.exec.runner import EnginePool

    specs = _resolve_engines(engines.split(","))
    with tempfile.TemporaryDirectory(prefix="ofuzz-reduce-") as tmp:
        model, path, feeds = _user_model(model_path, inputs, Path(tmp))
        with EnginePool(specs, Path(tmp) / "pool") as pool:
            pool.start()
            policy = Policy.default()
            j = judge_model(pool, model, path, feeds, policy=policy)
            pick = [f for f in j.findings if (signature is None and f.blamed) or f.signature == signature]
            if not pick:
                fail("no finding to reduce on this model" + (f" with signature {signature!r}" if signature else ""))
            f = pick[0]
            v = j.verdict
            start = (v.diverging.get(f.engine) or {}).get("node")
            agree = {e for e, r in v.results.items() if r.status == DCP and e not in v.excluded}
            value_engine = value_source(agree, min(agree, default=f.engine))
            with console.status(f"reducing {f.engine} {f.status} ({f.signature[:80]})"):
                red = reduce_model(pool, model, feeds, Target.of(f), value_engine, budget=budget, start_node=start, policy=policy, must_agree=agree)
    dest = out or model_path.with_name(model_path.name.removesuffix(".onnx") + ".reduced.onnx")
    onnx.save(red.model, str(dest))
    dest.with_name(dest.name.removesuffix(".onnx") + ".inputs.npz").write_bytes(npz_bytes(red.inputs))
    console.print(f"{f.signature}: {red.nodes_before} → {red.nodes_after} nodes, {red.checks} checks, {red.seconds:.1f}s"
                  + ("" if red.one_minimal else " (budget reached before 1-minimality)"))
    print(dest)


def _degs(s: frozenset[int]) -> str:
    v = sorted(s)
    return f"{v[0]}..{v[-1]}" if len(v) > 2 and v == list(range(v[0], v[-1] + 1)) else ",".join(map(str, v))


def main() -> None:
    from ofuzz.campaign.conformance import ConformanceError
    from ofuzz.campaign.distributed import DistributedError
    from ofuzz.store.known import KnownError
    from ofuzz.judge.noise import NoiseError
    from ofuzz.judge.precision import ToleranceError
    from ofuzz.store.campaign_store import StoreError

    try:
        app()
    except BrokenPipeError:
        sys.exit(0)
    except (StoreError, KnownError, NoiseError, ToleranceError, CorpusError, DistributedError, ConformanceError) as exc:  # bad input: one line, no traceback
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
