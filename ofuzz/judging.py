"""Judge one model end to end: run the engines, apply the oracle, localise DCFs, sign findings."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ofuzz.localise import localise
from ofuzz.oracle import DCF, DCP, Verdict
from ofuzz.runner import EnginePool, output_names
from ofuzz.signature import failing_op, signature


@dataclass
class Finding:
    engine: str
    status: str
    signature: str
    op: str | None
    summary: str
    blamed: bool
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class Judged:
    verdict: Verdict
    findings: list[Finding]

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.to_json(), "findings": [f.to_json() for f in self.findings]}


def judge_model(pool: EnginePool, model: onnx.ModelProto, model_path: Path, inputs: dict[str, np.ndarray], do_localise: bool = True) -> Judged:
    names = output_names(model)
    v = pool.judge(model_path, inputs, names)
    findings: list[Finding] = []
    for eng, r in v.results.items():
        if r.status == DCP:
            continue
        if r.status == DCF:
            div: dict[str, Any] = {}
            if do_localise and r.blamed and v.expected_from and v.expected_from != eng:
                div = localise(pool, model, inputs, eng, v.expected_from)
                v.diverging[eng] = div
            c = r.versus
            cat = c.category if c else ""
            summary = f"{cat} mismatch on {c.output}: max abs {c.max_abs:.3g}, max rel {c.max_rel:.3g}, {100 * c.bad_fraction:.2f}% elements" if c else "mismatch"
            if c and c.detail:
                summary += f" ({c.detail})"
            if v.split:
                continue  # reported once below
            findings.append(Finding(eng, DCF, signature(eng, DCF, r.outcome, div, cat), div.get("op"), summary, r.blamed, {"diverging": div}))
        else:
            o = r.outcome
            op = failing_op(o.message, o.log_tail) if o is not None else None
            findings.append(Finding(eng, r.status, signature(eng, r.status, o), op, o.summary() if o else r.status, True,
                                    {"log_tail": o.log_tail[-1500:] if o else ""}))
    if v.split:
        ran = sorted(e for e, r in v.results.items() if r.status == DCF)
        worst = max((v.results[e].versus for e in ran if v.results[e].versus and not v.results[e].versus.ok),
                    key=lambda c: c.max_rel, default=None)
        cat = worst.category if worst else "value"
        summary = f"no majority among {', '.join(ran)}" + (f": {cat} mismatch on {worst.output}, max rel {worst.max_rel:.3g}" if worst else "")
        findings.append(Finding("+".join(ran), DCF, f"split|{'+'.join(ran)}|DCF|{cat}", None, summary, False, {}))
    return Judged(v, findings)
