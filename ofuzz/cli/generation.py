"""`ofuzz generate` and `ofuzz corpus`: models and the block corpus."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ofuzz.cli.common import CORPUS_OPTION, GRAPH_OPTION, INT_INPUTS_OPTION, OPSET_OPTION, check_graph, corpus_from, degs, app, blocks_range, console, opset_range, out_console



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

    check_graph(graph)
    c = corpus_from(corpus)
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
    c = corpus_from(corpus)
    t = Table(title=f"{len(c)} blocks, {len(c.operator_types)} ONNX operator types ({', '.join(Path(f).name for f in c.files)})")
    for col in ("block", "op / subgraph", "rule", "in-degree", "out-degree", "params", "paper"):
        t.add_column(col)
    for b in c:
        if paper and not b.paper:
            continue
        what = b.op if not b.is_subgraph else "+".join(o.block for o in b.ops) + f" {list(map(list, b.edges))}"
        t.add_row(b.name, what, b.rule, degs(b.in_degree), degs(b.out_degree), ", ".join(s.name for s in b.params), b.paper or "")
    out_console().print(t)
