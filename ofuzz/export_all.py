"""Reduce and export every unique finding of a campaign, in parallel engine pools.

Why a module of its own: a 30-minute campaign finds ~500 unique findings, and
exporting them one pool per finding cost ~7 s each (mostly engine start-up).
Here W threads each own one long-lived EnginePool and take findings from a
shared queue, so start-up is paid W times, not once per finding. Resumable: a
finding whose repro folder already has finding.json is skipped.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ofuzz.engines.registry import EngineSpec
from ofuzz.generate import load_npz
from ofuzz.repro import export
from ofuzz.runner import EnginePool, for_each_in_pools
from ofuzz.signature import finding_id
from ofuzz.store import Store


@dataclass
class ExportProgress:
    """Counts a live display can show while the export runs."""
    total: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


def pending_findings(campaign_dir: Path, engines: set[str]) -> tuple[list[dict[str, Any]], int]:
    """Findings without a finished repro folder (and whose model is on disk); also how many are already done."""
    store = Store(campaign_dir)
    rows = store.findings()
    store.close()
    todo, done = [], 0
    for f in rows:
        if (campaign_dir / "repros" / finding_id(f["signature"]) / "finding.json").is_file():
            done += 1
        elif all(e in engines for e in f["engine"].split("+")) and (campaign_dir / "models" / f"{f['first_model']}.onnx").is_file():
            todo.append(f)
    return todo, done


def export_findings(campaign_dir: Path, specs: list[EngineSpec], per_finding: float, total: float | None = None,
                    echo: Callable[[str], None] = print, workers: int = 0,
                    on_progress: Callable[[ExportProgress], None] | None = None,
                    todo: list[dict[str, Any]] | None = None) -> int:
    """Export every pending finding (or `todo`, from pending_findings); stop taking new ones after
    `total` seconds (None = no cap). Returns how many were written."""
    already = 0
    if todo is None:
        todo, already = pending_findings(campaign_dir, {s.name for s in specs})
    prog = ExportProgress(total=len(todo), skipped=already)
    if not todo:
        return 0
    by_name = {s.name: s for s in specs}
    t0 = time.monotonic()
    lock = threading.Lock()
    capped = threading.Event()

    def over_time() -> bool:
        if total is not None and time.monotonic() - t0 > total:
            capped.set()
        return capped.is_set()

    def one(pool: EnginePool, f: dict[str, Any]) -> None:
        fid = finding_id(f["signature"])
        models = campaign_dir / "models"
        try:
            export(by_name, f, models / f"{f['first_model']}.onnx", load_npz(models / f"{f['first_model']}.inputs.npz"),
                   campaign_dir / "repros" / fid, reduce_budget=per_finding, pool=pool)
            with lock:
                prog.done += 1
        except Exception as exc:  # one broken export must not stop the others
            with lock:
                prog.failed += 1
                prog.errors.append(f"{fid}: {type(exc).__name__}: {exc}")
            echo(f"repro export of {fid} failed: {type(exc).__name__}: {exc}")
        if on_progress is not None:
            on_progress(prog)

    for_each_in_pools(specs, campaign_dir / "work" / "export", todo, one, workers or (os.cpu_count() or 2), stop=over_time)
    if capped.is_set():
        left = prog.total - prog.done - prog.failed
        echo(f"repro export stopped at its time cap ({total:.0f}s) with {left} findings left; "
             f"finish with: ofuzz repro --all --campaign {campaign_dir}")
    return prog.done
