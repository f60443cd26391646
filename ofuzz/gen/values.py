"""Value distributions for inputs and weights.

Mostly U[-1, 1] as in the paper, but engines break on the corners a uniform
draw never produces: exact zeros, ties (TopK/ArgMax ordering), all-negative
tensors (Relu/Log paths), large magnitudes (overflow in Exp, Pow, reductions)
and NaN/±Inf.  Each tensor draws one distribution; the model's provenance
records which the inputs used.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DISTRIBUTIONS = ("uniform", "zeros", "ties", "negative", "large", "special")


@dataclass(frozen=True)
class ValuePolicy:
    """Probabilities of each distribution (uniform takes the remainder)."""

    p_zeros: float = 0.03
    p_ties: float = 0.04
    p_negative: float = 0.03
    p_large: float = 0.03
    p_special: float = 0.02  # NaN/±Inf sprinkled into graph inputs only
    uniform_only: bool = False

    def _pick(self, rng: np.random.Generator, allow_special: bool) -> str:
        if self.uniform_only:
            return "uniform"
        probs = [self.p_zeros, self.p_ties, self.p_negative, self.p_large, self.p_special if allow_special else 0.0]
        u = rng.random()
        acc = 0.0
        for name, p in zip(DISTRIBUTIONS[1:], probs):
            acc += p
            if u < acc:
                return name
        return "uniform"

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...], dtype: type, dist: str) -> np.ndarray:
        if dtype == np.bool_:
            return rng.random(shape) < 0.5
        if np.issubdtype(dtype, np.integer):
            return rng.integers(-8, 9, size=shape).astype(dtype)
        if dist == "zeros":
            a = rng.uniform(-1, 1, shape)
            a[rng.random(shape) < 0.5] = 0.0
        elif dist == "ties":
            a = rng.choice(np.array([-0.5, 0.0, 0.25, 0.5]), size=shape)
        elif dist == "negative":
            a = -rng.uniform(0.0, 1.0, shape)
        elif dist == "large":
            a = rng.uniform(-1, 1, shape) * 1e4
        elif dist == "special":
            a = rng.uniform(-1, 1, shape)
            flat = a.reshape(-1)
            k = max(1, flat.size // 50)
            pos = rng.choice(flat.size, size=k, replace=False)
            flat[pos] = rng.choice(np.array([np.nan, np.inf, -np.inf]), size=k)
        else:
            a = rng.uniform(-1, 1, shape)
        return np.asarray(a, dtype=dtype)

    def input_array(self, rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        return self.draw(rng, shape, dtype, self._pick(rng, allow_special=True))

    def weight_array(self, rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        return self.draw(rng, shape, dtype, self._pick(rng, allow_special=False))


def random_feeds(model: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for a model someone else wrote (no generator sidecar): U[-1, 1] floats, small non-negative integers
    (safe as indices and shapes), fair booleans. Initializers listed as inputs keep their stored values."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    init = {i.name for i in model.graph.initializer}
    out: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dt = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if dt == np.bool_:
            out[vi.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dt, np.integer):
            out[vi.name] = rng.integers(0, 4, size=shape).astype(dt)
        else:
            out[vi.name] = rng.uniform(-1, 1, shape).astype(dt)
    return out
