"""Defaults every entry point shares (the CLI's commands and the scripts), declared once.

To change what a newcomer's `ofuzz campaign` runs on, edit DEFAULT_ENGINES here; nothing else spells it.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_ENGINES: tuple[str, ...] = ("onnxruntime", "tensorflow", "mnn", "reference")
# Blocks per model. Small models won the 10-minute search yardstick (docs/results.md, 2026-11-27: 1..5 against the
# earlier 5..15, under both choosers): a converter stops at the first node it cannot handle, so every further operator
# of a big model is one more chance that the engine tells nothing about the rest; small models reach a comparison more
# often, and are judged and reduced faster (a 30-minute campaign exports in 0.82 s per signature instead of 1.15-1.32).
DEFAULT_BLOCKS = "1..5"
GRAPH_MODELS: tuple[str, ...] = ("ws", "rn", "mixed")  # Watts–Strogatz, random network, or half each
CHOOSERS: tuple[str, ...] = ("mcts", "random", "bandit")
# The block chooser and engine-aware steering. The search yardstick decides (docs/results.md, 2026-11-27 afternoon,
# seeds 201-203, 10 minutes, small models): random choice with steering found the most distinct root causes on every
# seed (82.0 on average against 72.7 for the paper's MCTS, 78.0 for random alone, 73.7 for MCTS with steering), and
# random led MCTS in four of the five yardsticks run (MCTS led once, by 4 %). Steering sends an engine fewer models
# holding operators it keeps failing on, so TensorFlow reaches a comparison on 87 % of its runs instead of 79-80 %.
# `--chooser mcts --no-steer` gives the paper's method back (the paper's experiments under scripts/ pin it). The
# evening yardstick (same seeds) found steering's root-cause gain to be noise (86.3 against 87.3 for random alone;
# 1.02x over the six seeds) but kept its comparisons (TensorFlow 80 % -> 88 %): it stays on for those.
DEFAULT_CHOOSER = "random"
DEFAULT_STEER = True
# ONNX versions of the models, one drawn per model. Every default engine runs models up to opset 24 (max_opset in its
# engine.yaml, measured by scripts/opset_limits.py); 17..21 is the range the generator is checked on (onnx's full
# checker 1000/1000, onnxruntime 99.6 %: docs/results.md) and holds every newer block of the corpus (Mish, Col2Im,
# dilated pools, DFT's axis input, AffineGrid, GroupNormalization-21) and the newer forms of old operators (Reduce*
# and Pad `axes` inputs, Split's num_outputs, Resize's antialias and aspect policy), where engines apply the older
# version's rules (hand triage 15: MNN's Split-18 and Reduce* axes input, onnx2tf's Resize-18 coordinate modes).
# The evening yardstick (docs/results.md, 2026-11-27, seeds 201-203, 10 minutes): 95.3 root causes (84-104) with
# it against 86.3 (82-91) at opset 17 with the same chooser and steering, and 87.3 (87-88) for unsteered random.
DEFAULT_OPSETS = "17..21"
# Share of models whose graph inputs are integers (int32 or int64, half each), wherever the first block takes them
# (corpus `dtypes`): the paper's models are float32 end to end, so the integer kernels of Add, MatMul, ArgMax, TopK,
# Reduce*, Mod, Gather... were never reached (a hand-built probe: MNN's integer MatMul, Einsum, ArgMax and TopK and
# onnx2tf's integer Mod(fmod=1) and Pad disagree with onnxruntime and the reference). `--int-inputs 0` gives float
# models only, byte for byte as before (the draw has its own random stream).
DEFAULT_INT_INPUTS = 0.3


def parse_blocks(spec: str) -> tuple[int, int]:
    """'10' or '1..30' → an inclusive range of blocks per model (ValueError says what is allowed)."""
    try:
        if ".." in spec:
            lo, _, hi = spec.partition("..")
            rng = (int(lo), int(hi))
        else:
            rng = (int(spec), int(spec))
    except ValueError:
        raise ValueError(f"--blocks takes N or LO..HI, got {spec!r}") from None
    if rng[0] < 1 or rng[1] < rng[0] or rng[1] > 500:
        raise ValueError(f"--blocks range must satisfy 1 <= LO <= HI <= 500, got {spec!r}")
    return rng


def parse_opsets(spec: str) -> tuple[int, int]:
    """'17' or '17..20' → the ONNX versions models are generated at (one drawn per model)."""
    try:
        lo, _, hi = spec.partition("..") if ".." in spec else (spec, "", spec)
        rng = (int(lo), int(hi))
    except ValueError:
        raise ValueError(f"--opset takes N or LO..HI (for example 17 or 17..20), got {spec!r}") from None
    if not 13 <= rng[0] <= rng[1] <= 24:
        raise ValueError(f"--opset must lie within 13..24 (what the solver's rules and onnx {'1.23'} know), got {spec!r}")
    return rng


def parse_duration(spec: str) -> float:
    """'30m', '90s', '2h', '1h30m' or plain seconds → seconds (ValueError says what is allowed)."""
    spec = spec.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", spec):
        return float(spec)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", spec)
    if not parts or "".join(a + b for a, b in parts) != spec:
        raise ValueError(f"durations look like 30m, 90s, 2h or 1h30m, got {spec!r}")
    return sum(float(a) * {"h": 3600, "m": 60, "s": 1}[b] for a, b in parts)


def default_runs_dir() -> Path:
    """Campaigns go outside any checkout unless --out says otherwise ($OFUZZ_RUNS, else ~/.local/share/ofuzz/runs)."""
    return Path(os.environ.get("OFUZZ_RUNS") or Path.home() / ".local" / "share" / "ofuzz" / "runs")
