"""`ofuzz engines`, `ofuzz run`, `ofuzz reduce`: the engines, and one model through them."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.cli.common import ENGINES_OPTION, PLUGIN_OPTION, TIMEOUT_OPTION, resolve_engines, user_model, app, console, fail, out_console
from ofuzz.core.vocab import DCF, DCP, IF, MCF



@app.command()
def engines(
    install: Optional[str] = typer.Option(None, "--install", help="Create the environment of NAME (or 'all')."),
    engine: Optional[list[str]] = PLUGIN_OPTION,
    probe: bool = typer.Option(True, "--probe/--no-probe", help="Start each available engine to read its version."),
    capabilities: Optional[Path] = typer.Option(None, "--capabilities", help="Show what engines said they do not support in this triaged campaign folder."),
) -> None:
    """List every known engine with its version, or why it is unavailable and how to install it."""
    if capabilities is not None:
        print_capabilities(capabilities)
        return
    from ofuzz.exec.engines.registry import EngineError, all_engines, installed_versions, resolve

    try:
        known = all_engines(engine)
        known.update({s.name: s for s in resolve(installed_versions())})  # NAME@VERSION engines used before
    except EngineError as exc:
        fail(str(exc))
    if install:
        install_engines(known, sorted(known) if install == "all" else install.split(","))
        return
    print_engines(known, probe)


def print_capabilities(folder: Path) -> None:
    """The engine x operator x attribute gaps a triaged campaign found."""
    if not CampaignDir(folder).is_campaign():
        fail(f"{folder}: no campaign.sqlite here; pass a campaign folder (triaged by `ofuzz bugs DIR`)")
    from ofuzz.triage.export_all import capability_gaps

    gaps = capability_gaps(folder)
    t = Table(title=f"engine capability gaps in {folder} ({len(gaps)}; from messages matching noise/unsupported.yaml)")
    for col in ("engine", "operator", "attribute", "signatures", "rule"):
        t.add_column(col)
    for g in gaps:
        t.add_row(g["engine"], g.get("op") or "?", g.get("attribute") or "", str(g["signatures"]), g.get("rule", ""))
    out_console().print(t)


def install_engines(known: dict, names: list[str]) -> None:
    """Create each named engine's environment (a failed pip says so and the others go on)."""
    from ofuzz.exec.engines.envs import install as install_env

    for n in names:
        if "@" in n and n not in known:
            known[n] = resolve_engines([n])[0]  # NAME@VERSION: installed by resolving it
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


def print_engines(known: dict, probe: bool) -> None:
    """One row per engine: default or not, available (its version, read from a started worker) or why not."""
    from ofuzz.exec.engines.client import Worker
    from ofuzz.exec.engines.envs import install_command, python_for

    t = Table(title="engines")
    for col in ("engine", "default", "status", "version / reason", "environment"):
        t.add_column(col)
    for name, spec in sorted(known.items()):
        py = python_for(spec)
        env = "core" if spec.env == "core" else spec.env_id
        default = "yes" if spec.default else ""
        if py is None:
            t.add_row(name, default, "[yellow]unavailable[/yellow]", f"environment not installed; run: {install_command(spec)}", env)
            continue
        if not probe:
            t.add_row(name, default, "installed", "", env)
            continue
        with tempfile.TemporaryDirectory(prefix="ofuzz-probe-") as work:
            w = Worker(spec, py, Path(work))
            out = w.start()
            w.close()
        if out.ok:
            t.add_row(name, default, "[green]available[/green]", w.version, env)
        else:
            reason = out.summary() + (f"; install: {install_command(spec)}" if out.kind == "unavailable" else "")
            t.add_row(name, default, "[red]unavailable[/red]", reason, env)
    out_console().print(t)


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

    specs = resolve_engines(engines.split(",") + list(engine or []))
    with tempfile.TemporaryDirectory(prefix="ofuzz-run-") as tmp:
        model, path, feeds = user_model(model_path, inputs, Path(tmp))
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

    specs = resolve_engines(engines.split(","))
    with tempfile.TemporaryDirectory(prefix="ofuzz-reduce-") as tmp:
        model, path, feeds = user_model(model_path, inputs, Path(tmp))
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
