"""What the judging stages ask of an engine pool: run a model held in memory on some of its engines.

Localisation, isolation, witnesses and the undefined path take any `Pool`: the local `EnginePool`, or a Ray actor's
pool. Typing them by this protocol (not `Any`) keeps the import graph honest about who depends on the engine layer.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np
import onnx

from ofuzz.exec.engines.client import Outcome


class Pool(Protocol):
    root: Path  # a folder the pool owns, for temporary model files

    @property
    def names(self) -> list[str]: ...

    def execute_model(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray],
                      engines: list[str] | None = None) -> dict[str, tuple[Outcome, Outcome | None]]: ...
