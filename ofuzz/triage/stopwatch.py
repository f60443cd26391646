"""Where a finding's export time goes after its reduction (finding.json's `timing.write_parts`).

Why: the export's cost per signature is an acceptance figure, and `write` alone (repro check, keying rewrites, class,
family test, what a trigger reveals) was 17 % of a 30-minute export with no way to tell which step paid it.
"""
from __future__ import annotations

import time


class Laps:
    """Seconds spent in each named step, each measured from the end of the one before."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._last, 2)
        self._last = now
