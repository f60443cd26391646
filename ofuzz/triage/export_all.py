"""Triage, reduce and export every unique finding of a campaign, in parallel engine pools.

Why a module of its own: a 30-minute campaign finds ~500 unique findings, and
exporting them one pool per finding cost ~7 s each (mostly engine start-up).
Here W threads each own one long-lived EnginePool and take findings from a
shared queue, so start-up is paid W times, not once per finding; only one
representative per cluster is reduced (`triage`).  Resumable: a finding whose
folder already has finding.json is skipped.  `finish_triage` then clusters the
folders into root causes and stores them.
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ofuzz.store.campaign_dir import FINDING, CampaignDir
from ofuzz.core.vocab import IF, MCF, TIMEOUT, UNSUPPORTED
from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.core.npz import load_npz
from ofuzz.triage.repro_check import close_runners
from ofuzz.judge.judging import Policy
from ofuzz.exec.runner import EnginePool, for_each_in_pools
from ofuzz.triage.second_opinion import SecondOpinions
from ofuzz.exec.engines.client import STEP_LIMIT
from ofuzz.judge.signature import Signature, finding_id
from ofuzz.store.campaign_store import Store
from ofuzz.triage.pipeline import Representatives, triage_finding
from ofuzz.triage.cluster import cluster


@dataclass
class ExportProgress:
    """Counts a live display can show while the export runs."""
    total: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    busy: float = 0.0  # seconds the pools spent on findings (summed over pools): against pools x wall, how well they were kept busy
    first_start: float | None = None  # seconds from the export's start to its first finding (the pools' start-up)

    def cost_line(self, wall: float, pools: int, signatures: int) -> str:
        """What the export cost: per signature, and how busy the pools were kept (the rest is start-up and the tail)."""
        return (f"export: {wall:.0f} s for {self.done + self.failed} folders of {signatures} signatures, {wall / max(1, signatures):.2f} s "
                f"per signature; {pools} pools busy {self.busy / (pools * wall or 1):.0%} of the time (first finding after "
                f"{self.first_start or 0:.0f} s of start-up)")

    def starting(self, t0: float) -> float:
        """A finding starts now (the first one marks the end of the pools' start-up); returns the time."""
        now = time.monotonic()
        with self.lock:
            self.first_start = self.first_start if self.first_start is not None else now - t0
        return now

    def record(self, fid: str, exc: BaseException | None, echo: Callable[[str], None],
               on_progress: Callable[["ExportProgress"], None] | None, seconds: float = 0.0) -> None:
        """One finding done (or failed with `exc`: one broken export must not stop the others) in `seconds`."""
        with self.lock:
            self.busy += seconds
            if exc is None:
                self.done += 1
            else:
                self.failed += 1
                self.errors.append(f"{fid}: {type(exc).__name__}: {exc}")
        if exc is not None:
            echo(f"repro export of {fid} failed: {type(exc).__name__}: {str(exc)[:300]}")
        if on_progress is not None:
            on_progress(self)


EXTRA_MODELS = 1  # further models triaged per IF/MCF signature: one message can hide different defects
MAX_STEP_LIMITED = 30  # models re-judged per signature of a campaign step limit (a few per campaign are slow)


def pending_findings(campaign_dir: Path, engines: set[str]) -> tuple[list[dict[str, Any]], int]:
    """Findings without a finished repro folder (and whose model is on disk); also how many are already done.

    A failure signature (IF/MCF) seen in several models also yields up to EXTRA_MODELS variants
    (folder `<id>~k`, the k-th further model): a normalised message such as "MNN forward returned
    no outputs" hid reduced repros with different operators, and only reducing them tells.  Not when
    the signature names the failing operator (the engine named the node, or its message names it):
    then a further model fails in the same operator the same way (a third of the TensorFlow triage
    time went to such variants).  Nor for a hang: hangs are not reduced, so a further model shows no
    operators, and its triage costs two engine timeouts (re-run and repro check: 5 of the 11 minutes of a
    20-minute campaign's export went to one onnx2tf hang and its variant, when it cost three)."""
    store = Store(campaign_dir)
    rows = store.findings()
    extra = {f["signature"]: store.occurrence_models(f["signature"], EXTRA_MODELS + 1)[1:]
             for f in rows if f["status"] in (IF, MCF) and f["count"] > 1 and _unnamed_non_hang(Signature.parse(f["signature"]))}
    # every model cut at the campaign's step limit is re-judged with the engine's full limit: each is its own outcome
    # (a hang, a failure, a wrong value or nothing), not one more model of one defect
    extra.update({f["signature"]: store.occurrence_models(f["signature"], MAX_STEP_LIMITED + 1)[1:]
                  for f in rows if f["count"] > 1 and STEP_LIMIT in f["signature"]})
    store.close()
    todo, done = [], 0
    for f in rows:
        variants = [f] + [{**f, "first_idx": idx, "first_model": mid, "variant": k + 1} for k, (idx, mid) in enumerate(extra.get(f["signature"], []))]
        for v in variants:
            if (CampaignDir(campaign_dir).finding_json(folder_id(v))).is_file():
                done += "variant" not in v
            elif all(e in engines for e in v["engine"].split("+")) and (CampaignDir(campaign_dir).model(v['first_model'])).is_file():
                todo.append(v)
    return todo, done


def _unnamed_non_hang(sig: Signature) -> bool:
    return sig.op == "?" and sig.kind != TIMEOUT


def export_order(todo: list[dict[str, Any]], capped: bool) -> list[dict[str, Any]]:
    """Hangs first when every finding will be exported: each holds one pool for the re-run's engine timeout (90 s for
    onnx2tf), and taken last that is a tail the other pools cannot share (a third of a 10-minute export).  Under a time cap they keep their place: minutes of one pool on one
    hang would leave others unexported."""
    if capped:
        return list(todo)
    return sorted(todo, key=lambda f: Signature.parse(f["signature"]).kind != TIMEOUT)


def folder_id(f: dict[str, Any]) -> str:
    """repros/<id> for a finding, repros/<id>~k for its k-th further model."""
    return finding_id(f["signature"]) + (f"~{f['variant']}" if f.get("variant") else "")


def export_findings(campaign_dir: Path, specs: list[EngineSpec], per_finding: float, total: float | None = None,
                    echo: Callable[[str], None] = print, workers: int = 0,
                    on_progress: Callable[[ExportProgress], None] | None = None,
                    todo: list[dict[str, Any]] | None = None, actors: Any = None) -> int:
    """Export every pending finding (or `todo`, from pending_findings); stop taking new ones after
    `total` seconds (None = no cap). Returns how many were written.  `actors`: started Ray actors
    (distributed.RayActors) to fan the export out over, instead of local pools."""
    already = 0
    if todo is None:
        todo, already = pending_findings(campaign_dir, {s.name for s in specs})
    todo = export_order(todo, capped=total is not None)
    prog = ExportProgress(total=len(todo), skipped=already)
    if not todo:
        return 0
    by_name = {s.name: s for s in specs}
    policy = Policy.default()
    reps = Representatives()
    for f in _done_representatives(campaign_dir):
        reps.claim(*f)
    t0 = time.monotonic()
    capped = threading.Event()

    def over_time() -> bool:
        if total is not None and time.monotonic() - t0 > total:
            capped.set()
        return capped.is_set()

    opinions = second_opinions(specs, campaign_dir / "work" / "opinions")

    def one(pool: EnginePool, f: dict[str, Any]) -> None:
        fid = folder_id(f)
        models = CampaignDir(campaign_dir).models
        start, failure = prog.starting(t0), None
        try:
            triage_finding(pool, by_name, f, models / f"{f['first_model']}.onnx", load_npz(models / f"{f['first_model']}.inputs.npz"),
                           CampaignDir(campaign_dir).repro(fid), per_finding, policy, reps, opinions)
        except Exception as exc:  # noqa: BLE001  (recorded; the others go on)
            failure = exc
        prog.record(fid, failure, echo, on_progress, time.monotonic() - start)

    if actors is not None:
        _fan_out(actors, campaign_dir, todo, per_finding, reps, prog, echo, on_progress, over_time)
    else:
        pools = max(1, min(workers or (os.cpu_count() or 2), len(todo)))
        try:
            for_each_in_pools(specs, campaign_dir / "work" / "export", todo, one, pools, stop=over_time)
        finally:
            close_runners()
            if opinions is not None:
                opinions.close()
        echo(prog.cost_line(time.monotonic() - t0, pools, len({f["signature"] for f in todo})))
    if capped.is_set():
        left = prog.total - prog.done - prog.failed
        echo(f"repro export stopped at its time cap ({total:.0f}s) with {left} findings left; "
             f"finish with: ofuzz bugs {campaign_dir} (or ofuzz repro --all --campaign {campaign_dir})")
    return prog.done


def second_opinions(specs: list[EngineSpec], root: Path) -> SecondOpinions | None:
    """The engines the campaign's engines name as second opinions (not themselves in the campaign)."""
    from ofuzz.exec.engines.registry import EngineError, resolve

    names = sorted({s.second_opinion for s in specs if s.second_opinion} - {s.name for s in specs})
    if not names:
        return None
    try:
        return SecondOpinions({s.name: s for s in resolve(names)}, root)
    except EngineError:
        return None


def _fan_out(actors: Any, campaign_dir: Path, todo: list[dict[str, Any]], per_finding: float, reps: Representatives, prog: ExportProgress,
             echo: Callable[[str], None], on_progress: Callable[[ExportProgress], None] | None, stop: Callable[[], bool]) -> None:
    """The export over Ray actors: each triages in its own pool and sends the repro folder's files back; the driver
    writes them and keeps the representatives' claims, so later findings of a cluster attach instead of reducing."""
    models = CampaignDir(campaign_dir).models

    def call(handle: Any, f: dict[str, Any]) -> Any:
        claims = list(reps.by_key.items())
        return handle.triage.remote(f, (models / f"{f['first_model']}.onnx").read_bytes(), load_npz(models / f"{f['first_model']}.inputs.npz"),
                                    per_finding, claims)

    def done(f: dict[str, Any], value: tuple[dict[str, bytes], dict[str, Any]]) -> None:
        files, info = value
        out = CampaignDir(campaign_dir).repro(folder_id(f))
        out.mkdir(parents=True, exist_ok=True)
        for name, data in sorted(files.items(), key=lambda kv: kv[0].endswith(FINDING)):  # finding.json last: it marks the folder done
            (out / name).parent.mkdir(parents=True, exist_ok=True)  # a revealed defect's folder comes as ../<id>~r1/...
            (out / name).write_bytes(data)
        if "root" in info and info.get("pre_key") and (not f.get("variant") or info.get("op") not in (None, "?")):
            reps.claim(info["pre_key"], folder_id(f))
        prog.record(folder_id(f), None, echo, on_progress)

    actors.fan_out(todo, call, done, lambda f, exc: prog.record(folder_id(f), exc, echo, on_progress), stop)


def _done_representatives(campaign_dir: Path) -> list[tuple[str, str]]:
    """(pre-key, finding id) of representatives already exported, so a resumed export attaches to them."""
    import json

    out = []
    for p in sorted(CampaignDir(campaign_dir).repros.glob("*/finding.json")):
        try:
            info = json.loads(p.read_text())
        except ValueError:
            continue
        if "root" in info and info.get("pre_key") and "~" not in p.parent.name:
            out.append((info["pre_key"], p.parent.name))
    return out


def finish_triage(campaign_dir: Path) -> dict[str, Any]:
    """Cluster the triaged findings into root causes and store them (replacing the previous triage)."""
    store = Store(campaign_dir)
    try:
        rows = store.findings()
        result = cluster(campaign_dir, rows)
        by_fid = {fid: klass for klass, fids in result["classes"].items() for fid in fids}
        root_of = {fid: rc["id"] for rc in result["root_causes"] for fid in rc["findings"]}
        per_sig = []
        for r in rows:
            fid = finding_id(r["signature"])
            per_sig.append((r["signature"], by_fid.get(fid, "untriaged"), root_of.get(fid), _class_detail(campaign_dir, fid)))
        store.replace_triage(result["root_causes"], per_sig)
        result["untriaged"] = [sig for sig, klass, _, _ in per_sig if klass == "untriaged"]
        return result
    finally:
        store.close()


def _class_detail(campaign_dir: Path, fid: str) -> dict[str, Any]:
    import json

    p = CampaignDir(campaign_dir).finding_json(fid)
    if not p.is_file():
        return {}
    info = json.loads(p.read_text())
    return {k: info[k] for k in ("class_detail", "status_on_rerun", "attached_to", "excluded") if k in info}


def capability_gaps(campaign_dir: Path) -> list[dict[str, Any]]:
    """engine × operator × attribute gaps the triage found (each once, with how many signatures said so)."""
    st = Store(campaign_dir)
    rows = st.triage_rows()
    st.close()
    gaps: dict[str, dict[str, Any]] = {}
    for r in rows:
        g = (r["detail"].get("class_detail") or {}).get("gap")
        if r["klass"] == UNSUPPORTED and g:
            e = gaps.setdefault(g["key"], {**g, "signatures": 0})
            e["signatures"] += 1
    return sorted(gaps.values(), key=lambda g: g["key"])


def findings_with_repros(campaign_dir: Path) -> list[dict[str, Any]]:
    """The campaign's raw findings, each with its id and its exported folder's finding.json (None if not exported)."""
    st = Store(campaign_dir)
    rows = st.findings()
    st.close()
    for r in rows:
        r["id"] = finding_id(r["signature"])
        info_path = CampaignDir(campaign_dir).finding_json(r["id"])
        r["repro"] = json.loads(info_path.read_text()) if info_path.is_file() else None
    return rows
