"""Of several candidate models for one campaign step, pick the one the engines would learn most from.

Past OLC's saturation (about five minutes into a default campaign) every model covers operators already covered;
what still tells two candidates apart is the constructs they hold (attribute values, input-value classes, dtypes,
ranks: ofuzz.gen.fine_coverage) that an engine has not computed yet. A construct teaches an engine something only if the
engine gets to compute it: a model that TensorFlow will fail to convert on a converter defect it has already shown
teaches TensorFlow nothing, however new its constructs. So a candidate's score is

    sum over the engines e it would be sent to of  P(e runs it) * (1 + |constructs e has not computed yet|)

with P from ofuzz.gen.steering's failure estimates (the product over the model's operators of 1 - fail rate): a run that
reaches a comparison is worth one new construct, so once the constructs run out (late in a campaign every candidate
has none) the candidate the most engines can run wins. The
estimate never stops a model from being sent (that is `--steer`): it only prefers, among equally random candidates,
one every engine can run, so the differential comparison happens. Candidates are cheap next to a judgement
(generating one takes ~4 ms and keying it ~2 ms; judging it takes ~0.3-0.7 s), so looking at a few costs little.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import onnx

from ofuzz.gen.fine_coverage import fine_keys
from ofuzz.gen.steering import Steering


def score(model: onnx.ModelProto, inputs: dict[str, np.ndarray], engines: Iterable[str], seen: set[str],
          estimates: Steering) -> float:
    """Expected comparisons plus (engine, construct) pairs shown to an engine for the first time."""
    ops = {n.op_type for n in model.graph.node}
    keys = fine_keys(model, inputs, [""])  # "|op|construct": the same for every engine, prefixed below
    return sum(estimates.run_chance(ops, e) * (1 + sum(1 for k in keys if e + k not in seen)) for e in engines)


def most_novel(candidates: Sequence[tuple[onnx.ModelProto, dict[str, np.ndarray], list[str]]], seen: set[str],
               estimates: Steering) -> int:
    """Index of the best candidate (model, inputs, engines it would be sent to); the first on a tie, so one
    candidate gives the campaign's usual model."""
    if len(candidates) <= 1:
        return 0
    scores = [score(m, i, engines, seen, estimates) for m, i, engines in candidates]
    return int(np.argmax(scores))
