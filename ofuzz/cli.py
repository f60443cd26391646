"""Command-line interface (typer): one thin command per pipeline stage."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ofuzz.corpus import CorpusError, load_corpus

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ofuzz: graph-based differential fuzzing of DL inference engines.")
console = Console(stderr=True)


def fail(msg: str, code: int = 2) -> None:
    console.print(f"[red]error:[/red] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def parse_blocks(spec: str) -> tuple[int, int]:
    """'10' or '1..30' → inclusive range."""
    try:
        if ".." in spec:
            lo, _, hi = spec.partition("..")
            rng = (int(lo), int(hi))
        else:
            rng = (int(spec), int(spec))
    except ValueError:
        raise typer.BadParameter(f"--blocks takes N or LO..HI, got {spec!r}") from None
    if rng[0] < 1 or rng[1] < rng[0] or rng[1] > 500:
        raise typer.BadParameter(f"--blocks range must satisfy 1 <= LO <= HI <= 500, got {spec!r}")
    return rng


def _corpus(paths: Optional[list[Path]]):
    try:
        return load_corpus(paths or None)
    except CorpusError as exc:
        fail(str(exc))


@app.command()
def generate(
    count: int = typer.Option(10, "--count", "-n", min=1, help="Number of models."),
    blocks: str = typer.Option("10", help="Blocks per model: N or LO..HI (drawn uniformly per model)."),
    graph: str = typer.Option("mixed", help="Graph model: ws, rn or mixed (half each)."),
    mutations: bool = typer.Option(True, "--mutations/--no-mutations", help="Apply GEA/GER/BNA/BNR/TSM/PM."),
    seed: int = typer.Option(0, help="Campaign seed; model i uses (seed, i)."),
    out: Path = typer.Option(Path("models"), "--out", "-o", help="Output folder."),
    corpus: Optional[list[Path]] = typer.Option(None, "--corpus", help="Corpus file or folder (repeatable); default: opsets/."),
    check: bool = typer.Option(True, "--check/--no-check", help="Run onnx.checker (full) on every model."),
    start: int = typer.Option(0, help="Index of the first model (to extend a set)."),
) -> None:
    """Generate models: DIR/<id>.onnx, DIR/<id>.inputs.npz and DIR/<id>.json."""
    from ofuzz.generate import GenerateOptions, generate_one

    if graph not in ("ws", "rn", "mixed"):
        raise typer.BadParameter("--graph must be ws, rn or mixed")
    c = _corpus(corpus)
    opts = GenerateOptions(blocks=parse_blocks(blocks), graph=graph, mutations=mutations, check=check)
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
    Console().print(t)


def _degs(s: frozenset[int]) -> str:
    v = sorted(s)
    return f"{v[0]}..{v[-1]}" if len(v) > 2 and v == list(range(v[0], v[-1] + 1)) else ",".join(map(str, v))


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
