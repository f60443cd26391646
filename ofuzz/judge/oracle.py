"""The differential oracle: statuses and triangulation (the comparison rule lives in `compare`).

Who is blamed: engines outside the largest clique of mutually agreeing engines,
counted in engine families.  Two guards keep the vote honest (hand triage found
both wrong blames):
- the reference evaluator breaks a tie only between cliques of >= 2 families:
  alone against one other engine it is just one more implementation, and it is
  wrong in places (`noise/reference_gaps.yaml` takes it out of the vote there);
- an output whose shape contradicts the shape ONNX inference declares never
  votes and never becomes the expected output, as long as some engine matches
  the declaration (if none does, the declaration is what is suspect).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import networkx as nx
import numpy as np

from ofuzz.core.vocab import DCF, DCP, IF, MCF, REFERENCE  # noqa: F401  (re-exported for the oracle's users)
from ofuzz.exec.engines.registry import spec_close_first
from ofuzz.judge.compare import RULE, Comparison  # noqa: F401  (Comparison re-exported for the oracle's users)



REL_TOL, MAX_BAD_FRACTION, FLOOR = RULE.rel_tol, RULE.max_bad_fraction, RULE.floor
compare_tensor = RULE.compare
compare_outputs = RULE.compare_outputs


@dataclass
class EngineResult:
    engine: str
    status: str  # MCF | IF | DCF | DCP
    outcome: Any  # client.Outcome of the failing (or last) step
    prepare_time: float = 0.0
    run_time: float = 0.0
    versus: Comparison | None = None  # against the majority representative
    blamed: bool = False


@dataclass
class Verdict:
    results: dict[str, EngineResult]
    majority: list[str] = field(default_factory=list)
    split: bool = False
    expected_from: str = ""
    diverging: dict[str, Any] = field(default_factory=dict)  # engine -> localisation
    excluded: dict[str, str] = field(default_factory=dict)  # engine -> why it did not vote
    skipped: dict[str, str] = field(default_factory=dict)  # engine -> why the model was not sent to it

    def to_json(self) -> dict[str, Any]:
        return {
            "majority": self.majority, "split": self.split, "expected_from": self.expected_from,
            "diverging": self.diverging, "excluded": self.excluded, "skipped": self.skipped,
            "engines": {
                k: {"status": r.status, "blamed": r.blamed, "prepare_time": r.prepare_time, "run_time": r.run_time,
                    "outcome": r.outcome.to_json() if r.outcome is not None else None,
                    "versus": r.versus.to_json() if r.versus else None}
                for k, r in self.results.items()
            },
        }


Families = Mapping[str, str]  # engine -> its family, as each engine.yaml declares (`family:`)


def family(engine: str, families: Families | None = None) -> str:
    """Variants of one implementation vote once (mnn-arm:n1 and mnn are both 'mnn'; they share converters and most
    kernels). The grouping is data: each engine.yaml's `family:`; an engine not listed is a family of its own."""
    return (families or {}).get(engine, engine)


def triangulate(outputs: dict[str, dict[str, np.ndarray]], names: list[str], families: Families | None = None) -> tuple[list[str], bool]:
    """Cluster engines by agreement; return (majority engines, split?).

    The majority is the largest clique of mutually agreeing engines, counted in
    engine families (variants of one engine share most code, so three MNN builds
    must not outvote one independent engine), when it holds more than half of the
    families.  Otherwise the reference evaluator may break the tie, but only for a
    clique of at least two families: the reference alone against another engine
    is one implementation against another, and it is wrong in places.  Else: split.
    """
    engines = sorted(outputs)
    if len(engines) <= 1:
        return engines, False
    n_fam = len({family(e, families) for e in engines})
    g = nx.Graph()
    g.add_nodes_from(engines)
    for i, a in enumerate(engines):
        for b in engines[i + 1 :]:
            if compare_outputs(outputs[a], outputs[b], names).ok and compare_outputs(outputs[b], outputs[a], names).ok:
                g.add_edge(a, b)
    size = lambda c: len({family(e, families) for e in c})  # noqa: E731
    cliques = sorted((sorted(c) for c in nx.find_cliques(g)), key=lambda c: (-size(c), -len(c), c))
    top = [c for c in cliques if size(c) == size(cliques[0])]
    if len(top) > 1:  # same number of families: more engines is no better, unless only one clique is largest outright
        most = max(len(c) for c in top)
        if sum(1 for c in top if len(c) == most) == 1 and size(top[0]) * 2 > n_fam:
            top = [c for c in top if len(c) == most]
    if len(top) == 1 and 2 * size(top[0]) > n_fam:
        return top[0], False
    with_ref = [c for c in top if REFERENCE in c and size(c) >= 2]
    if len(with_ref) == 1:
        return with_ref[0], False
    return [], True


def shape_contradictions(outputs: dict[str, dict[str, np.ndarray]], declared: dict[str, tuple[int, ...]],
                         families: Families | None = None) -> dict[str, str]:
    """Engines whose output shape contradicts the declared (ONNX-inferred) shape, when another engine matches it."""
    bad: dict[str, str] = {}
    for name, shape in declared.items():
        have = {e: tuple(np.shape(o[name])) for e, o in outputs.items() if name in o}
        if not any(s == tuple(shape) for s in have.values()):
            continue  # nobody matches: the declaration, not the engines, is suspect
        others = {s for s in have.values() if s != tuple(shape)}
        if any(len({family(e, families) for e, s2 in have.items() if s2 == s}) >= 2 for s in others):
            continue  # two engine families agree against ONNX inference (seen: ConvTranspose SAME_UPPER): inference is suspect
        for e, s in have.items():
            if s != tuple(shape) and e not in bad:
                bad[e] = f"{name}: {s} vs {tuple(shape)} declared by ONNX shape inference"
    return bad


def _unblame_clean_failures_without_witness(results: dict[str, EngineResult], ran: dict[str, Any], excluded: dict[str, str],
                                            families: Families | None = None) -> None:
    """A clean refusal (an exception) is a defect only if the model is shown to be runnable: at least two engine
    families ran it, or one did and only one family refused.  When every engine fails, the model is what is wrong
    (seen: out-of-range GatherND indices from the generator blamed on TensorFlow).  Crashes, hangs and exits are
    defects whatever the others did, and so is a converter that crashed in a child process: MNN's adapter reports it
    as an exception of type ConverterCrash, and counting it as a refusal made the same model's blame flip with the
    crash's signal (SIGSEGV: unblamed, beside onnx2tf's refusal; std::bad_alloc: blamed), so re-runs said
    `unconfirmed` (seed 76)."""
    ok_fams = {family(e, families) for e in ran if e not in excluded}
    refused = {e for e, r in results.items() if r.status in (MCF, IF) and r.blamed and _clean_refusal(r.outcome)}
    if len(ok_fams) >= 2 or (ok_fams and len({family(e, families) for e in refused}) <= 1):
        return
    for e in refused:
        results[e].blamed = False


def _clean_refusal(outcome: Any) -> bool:
    """An exception the engine raised itself, not a crash an adapter reports as one (etype ...Crash)."""
    return getattr(outcome, "kind", "") == "exception" and not str(getattr(outcome, "etype", "") or "").endswith("Crash")


def judge_outcomes(outcomes: dict[str, tuple[Any, Any]], names: list[str], declared: dict[str, tuple[int, ...]] | None = None,
          excluded: dict[str, str] | None = None, families: Families | None = None) -> Verdict:
    """outcomes: engine -> (prepare Outcome, run Outcome or None).

    `declared`: output name -> static shape the model declares; `excluded`: engine
    -> why it may not vote on this model (a known reference-evaluator gap).  An
    excluded engine is still run and shown, but neither votes nor is blamed.
    """
    results: dict[str, EngineResult] = {}
    ran: dict[str, dict[str, np.ndarray]] = {}
    excluded = dict(excluded or {})
    for eng, (prep, run) in outcomes.items():
        if not prep.ok:
            results[eng] = EngineResult(eng, MCF, prep, prep.time, 0.0, blamed=eng not in excluded)
        elif run is None or not run.ok:
            results[eng] = EngineResult(eng, IF, run, prep.time, run.time if run else 0.0, blamed=eng not in excluded)
        else:
            results[eng] = EngineResult(eng, DCP, run, prep.time, run.time)
            ran[eng] = run.outputs
    _unblame_clean_failures_without_witness(results, ran, excluded, families)
    wrong_shape = shape_contradictions(ran, declared or {}, families)
    voters = {e: o for e, o in ran.items() if e not in excluded and e not in wrong_shape}
    majority, split = triangulate(voters, names, families)
    v = Verdict(results, majority, split, excluded=excluded)
    if not ran:
        return v
    pool = voters or ran
    # the expected outputs: the reference, else onnxruntime, else any majority member (hand triage 7: MNN's uninitialised
    # ConstantOfShape, 1e-14 where the others gave 0, agreed within tolerance and became the repro's expected output)
    rep = next(iter(spec_close_first(majority)), majority[0]) if majority else (REFERENCE if REFERENCE in pool else sorted(pool)[0])
    v.expected_from = rep
    for eng in ran:
        r = results[eng]
        if eng in wrong_shape:
            r.versus = Comparison(False, "shape", detail=wrong_shape[eng])
            r.status, r.blamed = DCF, eng not in excluded
            continue
        r.versus = compare_outputs(ran[eng], ran[rep], names) if eng != rep else Comparison(True)
        if eng in excluded:
            r.status = DCP if r.versus.ok else DCF
            continue
        if split:
            r.status, r.blamed = DCF, False
        elif eng not in majority:
            r.status, r.blamed = DCF, True
    return v
