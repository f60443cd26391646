"""Named readings of an engine's output: the tests of family hypotheses that no rewrite of the model can take away.

Some defects show on every model of an operator (MNN 3.6.1 writes every QuantizeLinear in the uint8 encoding into an
int8 tensor; it returns every 1-D convolution with a trailing unit axis), so no rewrite makes the engine right. Their
hypothesis is still testable: it says exactly *how* the output is wrong. A reading undoes that and no more; when the
engine's output, so read, equals the expected one, the finding is that defect; when it is still wrong (MNN's
per-channel zero points ignored besides the encoding, hand triage 23), it is another defect and keeps its own key.
Each reading returns the output read the hypothesis's way, or None when it does not apply.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

Reading = Callable[[np.ndarray, np.ndarray], "np.ndarray | None"]
READINGS: dict[str, Reading] = {}


def reading(name: str) -> Callable[[Reading], Reading]:
    def register(fn: Reading) -> Reading:
        READINGS[name] = fn
        return fn
    return register


@reading("other_8bit_encoding")
def other_8bit_encoding(got: np.ndarray, want: np.ndarray) -> np.ndarray | None:
    """An 8-bit quantised output in the other encoding: int8 bits that are the uint8 answer, or int8 values 128 off
    (the uint8 encoding of an int8 zero point)."""
    if got.dtype == np.int8 and want.dtype == np.uint8:
        return got.view(np.uint8)
    if got.dtype == np.uint8 and want.dtype == np.int8:
        return got.view(np.int8)
    if got.dtype == np.int8 and want.dtype == np.int8:
        return ((got.astype(np.int16) % 256) - 128).astype(np.int8)
    return None


@reading("without_unit_axes")
def without_unit_axes(got: np.ndarray, want: np.ndarray) -> np.ndarray | None:
    """An output whose shape differs from the expected one only by axes of size 1, reshaped to it (values in order)."""
    if got.shape == want.shape or got.size != want.size or [d for d in got.shape if d != 1] != [d for d in want.shape if d != 1]:
        return None
    return got.reshape(want.shape)


@reading("non_finite_clamped")
def non_finite_clamped(got: np.ndarray, want: np.ndarray) -> np.ndarray | None:
    """A float output clamped to the type's finite range: where the engine gave ±max of the type and the expected value
    is an infinity of that sign, or NaN (a clamp made of comparisons sends NaN to either bound), the expected value is
    taken; everything else is read as it came."""
    if got.shape != want.shape or got.dtype.kind != "f" or want.dtype.kind != "f":
        return None
    top = np.finfo(got.dtype).max
    clamped = (np.abs(got) == top) & (np.isnan(want) | (np.isinf(want) & (np.sign(want) == np.sign(got))))
    if not clamped.any():
        return None
    read = got.copy()
    read[clamped] = want[clamped]
    return read
