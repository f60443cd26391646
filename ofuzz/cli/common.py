"""The CLI's shared pieces: the typer app, one-line errors, option parsers and the options several commands take."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from ofuzz.gen.corpus import CorpusError, load_corpus
from ofuzz.core.defaults import DEFAULT_ENGINES, DEFAULT_INT_INPUTS, DEFAULT_OPSETS, GRAPH_MODELS, parse_blocks, parse_duration, parse_opsets


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

def check_graph(graph: str) -> None:
    if graph not in GRAPH_MODELS:
        raise typer.BadParameter(f"--graph must be one of {', '.join(GRAPH_MODELS)}")

def corpus_from(paths: Optional[list[Path]]):
    try:
        return load_corpus(paths or None)
    except CorpusError as exc:
        fail(str(exc))

def user_model(model_path: Path, inputs: Optional[Path], workdir: Path) -> tuple[Any, Path, dict]:
    """The user's model (free dimensions fixed, with a warning) and its feeds, or one clear error line."""
    from ofuzz.gen.user_model import UserInputError, load_feeds, load_user_model

    try:
        model, path, fixed = load_user_model(model_path, workdir)
        if fixed:
            console.print(f"[yellow]warning:[/yellow] free dimensions fixed to 1: {', '.join(fixed)}")
        return model, path, load_feeds(model_path, inputs, model)
    except UserInputError as exc:
        fail(str(exc))

def resolve_engines(names: list[str]):
    from ofuzz.exec.engines.registry import EngineError, resolve

    try:
        return with_versions_installed(resolve([n.strip() for n in names if n.strip()]))
    except EngineError as exc:
        fail(str(exc))

def with_versions_installed(specs: list[Any]) -> list[Any]:
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

def degs(s: frozenset[int]) -> str:
    v = sorted(s)
    return f"{v[0]}..{v[-1]}" if len(v) > 2 and v == list(range(v[0], v[-1] + 1)) else ",".join(map(str, v))
