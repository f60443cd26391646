"""What an engine adapter is: the three calls ofuzz makes of it, inside its own worker process.

To add an engine: write a class with these methods in `backends/<name>/adapter.py` (import the engine's library inside
the methods, so a missing library is a clear failure of that engine, not of ofuzz) and declare it in
`backends/<name>/engine.yaml` — its name (the one place the name is written), adapter, environment and `family:`.
A plug-in outside the tree is `--engine FILE.py:Class` (its `name` class attribute names it) or an entry point.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

METHODS = ("version", "prepare", "run")


@runtime_checkable
class EngineAdapter(Protocol):
    def version(self) -> str:
        """The engine's version string, recorded with every finding."""

    def prepare(self, model_path: str, workdir: str, inputs: list[str], outputs: list[str]) -> None:
        """Load or convert the model (a failure here is a model-conversion failure, MCF); `outputs` may list
        intermediate tensors the oracle wants exposed. Write scratch files only under `workdir`.
        A converter that knows which ONNX node it failed on says so by setting `failed_nodes` (node names, first to
        last) on the exception it raises: the signature then names that operator and the reducer starts there."""

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the prepared model on the feeds; return every requested output by name (a failure here is an IF)."""
