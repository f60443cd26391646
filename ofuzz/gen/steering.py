"""Engine-aware steering: prefer models every engine under test can run, so the comparison actually happens.

An engine that fails to convert or run a model says nothing about its kernels, and once a converter defect is known
every further model that trips it is a wasted run: in a 30-minute default campaign TensorFlow failed to convert 38%
of its models, most of them repeats of a dozen known converter defects (tf.add_n on Sum, tf.reverse on ArgMax/ArgMin,
tf.stack on Mean, ...).  Capability gaps are not sent at all (`Campaign._skips`); this handles the defects.

Each failure an engine attributes to an operator (the failing node it names, or the operator its message names)
counts against that (engine, operator).  A new model is sent to engine e with probability

    max(floor, prod over operators o in the model of (1 - fail_rate(e, o)) ** strength)

and the other engines still run it: steering only stops sending an engine what it would most likely fail to
convert (the first version skipped the whole model, which also starved the other engines of those operators —
MNN's N-ary Sum defects live in exactly the models TensorFlow fails on).

where fail_rate is a smoothed share of the models holding `o` that `e` failed on because of `o`, among those that
either ran on `e` or failed there in `o` (a model that failed in another operator says nothing about `o`).  Operators
that never fail cost nothing; one that fails half the time makes its models rare but never impossible (`floor`), so
a defect that is fixed mid-campaign, or a new failure of the same operator, can still be seen.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from ofuzz.core.vocab import IF, MCF

FAILURES = (MCF, IF)


class Steering:
    def __init__(self, strength: float = 2.0, floor: float = 0.1, prior_fail: float = 0.0, prior_runs: float = 4.0) -> None:
        self.strength, self.floor = strength, floor
        self.prior_fail, self.prior_runs = prior_fail, prior_runs
        self.sent: Counter[tuple[str, str]] = Counter()  # (engine, op) -> models holding op that the engine ran
        self.failed: Counter[tuple[str, str]] = Counter()  # (engine, op) -> failures the engine attributed to op
        self.steered = 0  # (model, engine) pairs not sent because of steering

    def fail_rate(self, engine: str, op: str) -> float:
        return (self.failed[(engine, op)] + self.prior_fail) / (self.sent[(engine, op)] + self.prior_runs)

    def run_probability(self, ops: Iterable[str], engines: Iterable[str]) -> float:
        p = 1.0
        ops = set(ops)
        for e in engines:
            for o in ops:
                if self.failed[(e, o)]:
                    p *= (1.0 - min(self.fail_rate(e, o), 0.99)) ** self.strength
        return max(self.floor, p)

    def run_chance(self, ops: Iterable[str], engine: str) -> float:
        """The estimated chance that `engine` runs a model holding `ops` (no floor, no strength: ofuzz.gen.novelty ranks
        candidates by it and sends every one it picks)."""
        p = 1.0
        for o in set(ops):
            if self.failed[(engine, o)]:
                p *= 1.0 - min(self.fail_rate(engine, o), 1.0)
        return p

    def skip_reason(self, ops: Iterable[str], engine: str, rng: np.random.Generator) -> str:
        """Why this model is not sent to `engine` ('' to send it): it holds operators the engine keeps failing on."""
        ops = set(ops)
        if rng.random() < self.run_probability(ops, [engine]):
            return ""
        self.steered += 1
        worst = max((o for o in ops if self.failed[(engine, o)]), key=lambda o: self.fail_rate(engine, o))
        return f"steered: it keeps failing on {worst} ({self.failed[(engine, worst)]} of {self.sent[(engine, worst)]} models)"

    def observe(self, ops: Iterable[str], ran: dict[str, str], failed_op: dict[str, str | None]) -> None:
        """`ran`: engine -> status of a model holding `ops`; `failed_op`: engine -> the operator it failed on, if named."""
        ops = set(ops)
        for e, status in ran.items():
            op = failed_op.get(e)
            if status not in FAILURES:
                for o in ops:
                    self.sent[(e, o)] += 1
            elif op in ops:  # a converter stops at the node it fails on: the model says nothing of its other operators
                self.sent[(e, op)] += 1
                self.failed[(e, op)] += 1
