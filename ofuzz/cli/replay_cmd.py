"""`ofuzz replay` and `ofuzz conformance`: known root causes and the ONNX backend tests on today's engines."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ofuzz.cli.common import ENGINES_OPTION, TIMEOUT_OPTION, WORKERS_OPTION, resolve_engines, app, console, fail, out_console
from ofuzz.core.defaults import default_runs_dir



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
    specs = resolve_engines(engines.split(","))
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

    specs = resolve_engines(engines.split(","))
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
    report = {"sweep": sweep, "store": str(path), "tests": len(tests), "sample_seed": seed if sample else None, "left_out": len(skipped),
              "versions": st.versions(sweep), "counts": counts, "failing_operators": failing, "oracle_disagreements": st.oracle(sweep),
              "changes": cf.changes(st, sweep, [s.name for s in specs])}
    st.close()
    if as_json:
        print(json.dumps(report, indent=1))
        return
    print_sweep(report, cf.OUTCOMES)


def print_sweep(r: dict, outcomes: tuple[str, ...]) -> None:
    """A conformance sweep's counts per engine, failing operators, oracle disagreements and changes."""
    t = Table(title=f"onnx node tests: {r['tests']} run" + (f" (a random sample, seed {r['sample_seed']})" if r["sample_seed"] is not None else "")
              + f" ({r['left_out']} left out: not numeric tensors or random), sweep {r['sweep']} in {r['store']}")
    for col in ("engine", "version", *outcomes):
        t.add_column(col)
    for eng, c in sorted(r["counts"].items()):
        t.add_row(eng, r["versions"].get(eng, ""), *(str(c[o]) for o in outcomes))
    out_console().print(t)
    for eng, per in sorted(r["failing_operators"].items()):
        for outcome, names in per.items():
            shown = ", ".join(names[:25]) + (f" … ({len(names)} operators)" if len(names) > 25 else "")
            out_console().print(f"[bold]{eng}[/bold] {outcome}: {shown}", soft_wrap=True)
    oracle, changed = r["oracle_disagreements"], r["changes"]
    out_console().print(f"oracle vs ground truth: {len(oracle)} disagreements"
                        + "".join(f"\n  {d['test']}: {d['kind']} ({d['engine']}; majority {', '.join(d['majority'])})" for d in oracle[:40]),
                        soft_wrap=True)
    if changed:
        out_console().print(f"{len(changed)} outcomes changed since the previous sweep:"
                            + "".join(f"\n  {c['engine']} {c['test']}: {c['was']} → {c['now']}" for c in changed[:60]), soft_wrap=True)
