"""Regression replay: re-run every known root cause's reduced repro on given engines.

Why: an engine team's question after a release is not "what does a new campaign
find" but "which of the bugs we know are fixed, which still fail, and did
anything that worked break".  The repros are tiny (mostly one node), so
replaying all of them is seconds, cheap enough for every CI run.

A case is one root cause's repro folder (model.onnx, inputs.npz, expected.npz,
finding.json), taken from a campaign folder, a known-bugs store (which keeps
the repro files) or a folder of repro folders.  Each engine's outcome is read
against the case: for the blamed engine's family (the engine itself or another
version of it) the bug is *still failing* (same failure class), *changed*
(fails another way) or *fixed*; any other engine that now fails a repro the
campaign saw it run is *newly failing* when it now fails or its outputs changed
(it is held to its own outputs then, not to the expected ones: a converter
failure's expected outputs come from whichever engine ran it); an engine the
campaign did not have is newly failing when it disagrees with the expected
outputs; otherwise it *passes*.  With `repeat` > 1 each case runs that many
times: an engine whose outcome differs between runs is *flaky* on it (MNN gave
different values to one repro between runs), which is reported, not taken for
a regression or a fix.
"""
from __future__ import annotations

import json
import sqlite3
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.core.vocab import DCF, DCP, IF, MCF
from ofuzz.judge.compare import RULE
from ofuzz.exec.engines.client import Outcome
from ofuzz.exec.runner import EnginePool
from ofuzz.core.npz import load_npz

STILL, CHANGED, FIXED, NEW, PASSES, FLAKY = "still failing", "changed", "fixed", "newly failing", "passes", "flaky"
OUTCOMES = (STILL, CHANGED, FIXED, NEW, PASSES, FLAKY)
REGRESSIONS = (CHANGED, NEW)  # what makes `ofuzz replay` exit non-zero


class ReplayError(ValueError):
    """The replay source is unusable; one line naming it and the fix."""


@dataclass
class Case:
    """One root cause's repro, ready to run."""

    id: str
    engine: str  # the blamed engine (its name as the campaign knew it)
    status: str  # MCF | IF | DCF, as the repro showed it
    failure: str  # DCF category, or outcome kind (crash, exception, timeout ...)
    model: bytes
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    outputs: list[str]
    summary: str = ""
    recorded: dict[str, dict[str, np.ndarray] | None] = field(default_factory=dict)  # engine -> its outputs then (None: it failed)


@dataclass
class Observed:
    status: str  # DCP | DCF | MCF | IF
    failure: str = ""
    detail: str = ""


@dataclass
class Result:
    case: str
    engine: str
    outcome: str
    now: Observed
    was: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"root_cause": self.case, "engine": self.engine, "outcome": self.outcome, "now": asdict(self.now), "was": self.was}


def case_from_folder(folder: Path, rc_id: str | None = None) -> Case:
    info = json.loads((folder / "finding.json").read_text())
    failure = info.get("repro_failure") or {}
    status = failure.get("status") or info.get("status", "")
    what = failure.get("category") if status == DCF else failure.get("kind")
    return Case(rc_id or (info.get("root") or {}).get("id") or folder.name, info.get("repro_engine") or info["engine"], status, what or "",
                (folder / "model.onnx").read_bytes(), load_npz(folder / "inputs.npz"),
                load_npz(folder / "expected.npz") if (folder / "expected.npz").is_file() else {},
                list(info.get("outputs") or []), info.get("summary", ""),
                {e: (load_npz(folder / f"{e}.outputs.npz") if (folder / f"{e}.outputs.npz").is_file() else None) for e in info.get("versions") or {}})


def _is_repro(folder: Path) -> bool:
    return all((folder / f).is_file() for f in ("model.onnx", "inputs.npz", "finding.json"))


def load_cases(source: Path) -> list[Case]:
    """The cases of a campaign folder (its root causes), a known-bugs store or a folder of repro folders."""
    source = Path(source)
    if not source.exists():
        raise ReplayError(f"{source}: no such file or folder; give a campaign folder, a known-bugs store or a folder of repros")
    if source.is_file():
        from ofuzz.store.known import KnownBugs, KnownError

        try:
            known = KnownBugs(source, create=False)
        except KnownError as exc:
            raise ReplayError(str(exc)) from None
        try:
            return [case_from_folder_files(rc_id, files) for rc_id, files in known.repros()]
        finally:
            known.close()
    if CampaignDir(source).is_campaign():
        return _campaign_cases(source)
    if _is_repro(source):
        return [case_from_folder(source)]
    folders = sorted(d for d in source.iterdir() if d.is_dir() and _is_repro(d))
    if not folders:
        raise ReplayError(f"{source}: no repro folders here (each needs model.onnx, inputs.npz and finding.json); "
                          "give a campaign folder, a known-bugs store or a folder of repros")
    return [case_from_folder(d) for d in folders]


def _campaign_cases(campaign: Path) -> list[Case]:
    try:
        con = sqlite3.connect(f"file:{campaign / 'campaign.sqlite'}?mode=ro", uri=True)
        rows = con.execute("SELECT id, repro FROM root_causes ORDER BY severity, engine, id").fetchall()
        con.close()
    except sqlite3.DatabaseError as exc:
        raise ReplayError(f"{campaign}: campaign store unreadable ({exc}); run `ofuzz bugs {campaign}` first") from None
    if not rows:
        raise ReplayError(f"{campaign}: no root causes yet; run `ofuzz bugs {campaign}` to triage the campaign first")
    return [case_from_folder(campaign / repro, rc_id) for rc_id, repro in rows if repro and _is_repro(campaign / repro)]


def case_from_folder_files(rc_id: str, files: dict[str, bytes]) -> Case:
    """A case from the repro files a known-bugs store keeps (the campaign folder may be long gone)."""
    with tempfile.TemporaryDirectory(prefix="ofuzz-replay-") as d:
        for name, data in files.items():
            (Path(d) / name).write_bytes(data)
        return case_from_folder(Path(d), rc_id)


def observe(prep: Outcome | None, run: Outcome | None, case: Case, against: dict[str, np.ndarray] | None = None) -> Observed:
    """What the engine does now; values are compared with `against` (default: the repro's expected outputs)."""
    if prep is None:
        return Observed(MCF, "unavailable", "not run")
    if not prep.ok:
        return Observed(MCF, prep.kind, prep.summary()[:200])
    if run is None or not run.ok:
        return Observed(IF, run.kind if run else "unavailable", run.summary()[:200] if run else "not run")
    want = case.expected if against is None else against
    if not want:
        return Observed(DCP)
    c = RULE.compare_outputs(run.outputs, want, case.outputs or sorted(want))
    return Observed(DCP) if c.ok else Observed(DCF, c.category, c.describe()[:200])


def verdict(case: Case, engine: str, now: Observed, family: Callable[[str], str]) -> str:
    """The outcome of one engine on one case (module docstring).  An engine outside the blamed family that ran in the
    campaign is held to what it did then (its own outputs, or its failure), not to the expected outputs: a repro of a
    converter failure has expected outputs from whichever engine ran it, and other engines may differ there by policy."""
    if family(engine) != family(case.engine):
        seen, outputs = recorded_for(case, engine, family)
        if seen and outputs is None:
            return PASSES  # it (or its version in the campaign) failed this repro then too: nothing new
        return PASSES if now.status == DCP else NEW
    if now.status == DCP:
        return FIXED
    same = now.status == case.status and (now.failure == case.failure or not case.failure)
    return STILL if same else CHANGED


def recorded_for(case: Case, engine: str, family: Callable[[str], str]) -> tuple[bool, dict[str, np.ndarray] | None]:
    """What the campaign saw this engine do: its own record, else that of another version of it (mnn for mnn@3.5.0)."""
    if engine in case.recorded:
        return True, case.recorded[engine]
    sibling = next((e for e in sorted(case.recorded) if family(e) == family(engine)), None)
    return (True, case.recorded[sibling]) if sibling is not None else (False, None)


def baseline(case: Case, engine: str, family: Callable[[str], str]) -> dict[str, np.ndarray] | None:
    """What an engine's outputs are compared with: outside the blamed family, what it (or another version of it) gave
    then; else the expected outputs."""
    if family(engine) != family(case.engine):
        seen, outputs = recorded_for(case, engine, family)
        if seen and outputs is not None:
            return outputs
    return None


def replay(pool: EnginePool, cases: Iterable[Case], engines: list[str], family: Callable[[str], str],
           on_result: Callable[[Result], None] | None = None, repeat: int = 1) -> list[Result]:
    """Run every case on `engines` (one pool, fresh isolated workers) and read each outcome against its case; with
    `repeat` > 1, an engine whose outcome differs between the runs of a case is `flaky` on it."""
    out: list[Result] = []
    with tempfile.TemporaryDirectory(dir=pool.root) as d:
        path = Path(d) / "model.onnx"
        for case in cases:
            path.write_bytes(case.model)
            names = case.outputs or sorted(case.expected)
            runs = [pool.execute(path, case.inputs, names, engines) for _ in range(max(1, repeat))]
            for eng in engines:
                seen = []
                for res in runs:
                    prep, run = res.get(eng, (None, None))
                    now = observe(prep, run, case, baseline(case, eng, family))
                    seen.append((verdict(case, eng, now, family), now))
                outcome, now = seen[0]
                if len({v for v, _ in seen}) > 1:
                    outcome = FLAKY
                    now = Observed(now.status, now.failure, "outcomes by run: " + ", ".join(v for v, _ in seen) + (f"; {now.detail}" if now.detail else ""))
                r = Result(case.id, eng, outcome, now, {"engine": case.engine, "status": case.status, "failure": case.failure})
                out.append(r)
                if on_result:
                    on_result(r)
    return out


def counts(results: list[Result]) -> dict[str, dict[str, int]]:
    by: dict[str, dict[str, int]] = {}
    for r in results:
        by.setdefault(r.engine, {o: 0 for o in OUTCOMES})[r.outcome] += 1
    return by


def junit_xml(results: list[Result], seconds: float) -> str:
    """JUnit XML: one test case per root cause and engine; a case fails when the engine gets the repro wrong now
    (still failing, changed, newly failing), passes when it is fixed or passes, and is skipped when it is flaky."""
    from xml.etree import ElementTree as ET

    suites = ET.Element("testsuites", name="ofuzz replay", time=f"{seconds:.3f}")
    for engine in sorted({r.engine for r in results}):
        mine = [r for r in results if r.engine == engine]
        bad = [r for r in mine if r.outcome in (STILL, CHANGED, NEW)]
        flaky = sum(r.outcome == FLAKY for r in mine)
        suite = ET.SubElement(suites, "testsuite", name=engine, tests=str(len(mine)), failures=str(len(bad)), errors="0", skipped=str(flaky))
        for r in mine:
            tc = ET.SubElement(suite, "testcase", classname=f"ofuzz.replay.{engine}", name=r.case)
            if r.outcome in (STILL, CHANGED, NEW):
                f = ET.SubElement(tc, "failure", type=r.outcome, message=f"{r.outcome}: {r.now.status} {r.now.failure}".strip())
                f.text = f"was: {r.was}\nnow: {r.now.detail}"
            elif r.outcome == FLAKY:
                ET.SubElement(tc, "skipped", message=f"flaky: {r.now.detail}"[:500])
            else:
                ET.SubElement(tc, "system-out").text = r.outcome
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)

