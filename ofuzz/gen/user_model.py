"""A model and inputs a user hands to `ofuzz run` / `ofuzz reduce`: checked, made static, fed.

Generated models never need this (they are static and carry an inputs sidecar); models from elsewhere may have free
dimensions and no inputs, and a broken file must be one clear line, not a traceback.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from ofuzz.gen.values import random_feeds


class UserInputError(ValueError):
    """The user's model or inputs cannot be used; the message names the file and the problem."""


def load_user_model(path: Path, workdir: Path) -> tuple[onnx.ModelProto, Path, list[str]]:
    """Load and check a model; free dimensions are fixed to 1 (returned, so the caller can warn) and the fixed model is
    written to `workdir`. Returns the model, the path engines should load and the dimensions fixed."""
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file") from None
    except Exception as exc:
        raise UserInputError(f"{path}: not a valid ONNX model ({str(exc).strip().splitlines()[0][:200]})") from None
    fixed = []
    for vi in model.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value") or d.dim_value <= 0:
                fixed.append(f"{vi.name}:{d.dim_param or '?'}")
                d.Clear()
                d.dim_value = 1
    if fixed:
        path = workdir / "model.fixed.onnx"
        onnx.save(model, str(path))
    return model, path, fixed


def load_feeds(model_path: Path, inputs: Path | None, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """`inputs`, else the generator's sidecar DIR/<id>.inputs.npz, else U[-1, 1] inputs."""
    sidecar = model_path.with_name(model_path.name.removesuffix(".onnx") + ".inputs.npz")
    src = inputs or (sidecar if sidecar.is_file() else None)
    if src is None:
        return random_feeds(model)
    try:
        with np.load(src) as z:
            feeds = {k: z[k] for k in z.files}
    except Exception as exc:
        raise UserInputError(f"{src}: cannot read inputs ({exc})") from None
    inits = {i.name for i in model.graph.initializer}
    missing = [vi.name for vi in model.graph.input if vi.name not in feeds and vi.name not in inits]
    if missing:
        raise UserInputError(f"{src}: no array for input(s) {missing}; name them as the model does")
    return feeds
