"""`ofuzz campaign`: the paper's Algorithm 1 with engines, a durable store and a live display.

Loop: choose blocks (MCTS or random) → mutate and generate → measure coverage →
discard the model if it adds none (unless --run-all) → judge it on the engines
(W engine pools in parallel) → store the verdict → back-propagate the reward.
Generation runs in the main thread; each judging thread only waits on engine
worker pipes, so the engines keep the machine's cores busy.
"""
from __future__ import annotations

import resource
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.core.vocab import BUG, DCF, DCP, UNSUPPORTED
from ofuzz.gen.chooser import make_chooser, reward
from ofuzz.gen.blocks import Corpus
from ofuzz.gen.coverage import Coverage, OpRecord
from ofuzz.core.defaults import DEFAULT_BLOCKS, DEFAULT_CHOOSER, DEFAULT_INT_INPUTS, DEFAULT_OPSETS, DEFAULT_STEER, parse_blocks, parse_opsets
from ofuzz.gen.fine_coverage import fine_keys
from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.gen.solver.rules import OPSET
from ofuzz.gen.generate import GeneratedModel, GenerateOptions, generate_one
from ofuzz.judge.judging import Judged, Policy
from ofuzz.judge.judges import JudgeLost, Judges, LocalPools
from ofuzz.judge.noise import Gap
from ofuzz.gen.novelty import most_novel
from ofuzz.judge.signature import Signature
from ofuzz.store.campaign_store import FolderLock, Store
from ofuzz.gen.steering import FAILURES, Steering


@dataclass
class CampaignOptions:
    engines: list[str]
    budget: float | None = None  # seconds (total, across resumes)
    models: int | None = None  # stop after this many generated models
    tests: int | None = None  # stop after this many kept tests
    blocks: tuple[int, int] = parse_blocks(DEFAULT_BLOCKS)
    graph: str = "mixed"
    mutations: bool = True
    chooser: str = DEFAULT_CHOOSER
    seed: int = 0
    workers: int = 2
    run_all: bool = False
    n_maxspc: int = 200
    localise: bool = True
    timeout: float | None = None
    prefer: float = 1.0  # see GenerateOptions.prefer
    reduce: bool = True
    reduce_budget: float = 20.0  # seconds per finding
    opsets: tuple[int, int] = parse_opsets(DEFAULT_OPSETS)  # ONNX versions of the models (one drawn per model)
    steer: bool = DEFAULT_STEER  # prefer models every engine can run (ofuzz.gen.steering)
    candidates: int = 1  # models generated per step; the most novel is judged (ofuzz.gen.novelty)
    int_inputs: float = DEFAULT_INT_INPUTS  # share of models with integer inputs (GenerateOptions.int_inputs)
    # engines' campaign_timeout (engine.yaml) as their step limits, the export re-judging every model cut there with the
    # full timeout. Off by default: a cut model is paid twice (the limit, then its whole re-judge), and its re-judges made
    # the export's cost depend on how many slow conversions a campaign met (half of a 30-minute export's work)
    step_limits: bool = False


@dataclass
class Stats:
    generated: int = 0
    kept: int = 0
    run: int = 0
    unique: int = 0
    classes: dict[str, int] = field(default_factory=dict)  # class of each new signature when first seen (triage recomputes)
    by_engine: dict[str, dict[str, int]] = field(default_factory=dict)
    engine_time: float = 0.0
    own_time: float = 0.0  # ofuzz's own busy time in the main thread (generate, coverage, store)
    started: float = field(default_factory=time.monotonic)
    elapsed_before: float = 0.0

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started


@dataclass
class Pending:
    """A generated model on its way through an engine pool (what the loop must remember until its verdict)."""

    idx: int
    model: GeneratedModel
    preferred: list[str]
    node: int | None  # the chooser's node that picked the blocks
    kept: bool  # it added coverage
    gen_time: float
    path: Path | None = None  # where its files were saved for the engines


def step_specs(specs: list[EngineSpec], opts: CampaignOptions) -> list[EngineSpec]:
    """The specs a campaign judges with: each engine's campaign step limit as its timeout (`--step-limits`), or as given."""
    return [s.for_campaign() for s in specs] if opts.step_limits else list(specs)


class Campaign:
    def __init__(self, corpus: Corpus, specs: list[EngineSpec], opts: CampaignOptions, out: Path, resume: bool = False,
                 known_gaps: set[str] | None = None, judges: Judges | None = None) -> None:
        corpus = corpus.within(*opts.opsets)  # the chooser and coverage see only blocks the models' versions can hold
        self.corpus, self.specs, self.opts = corpus, specs, opts
        self.lock = FolderLock(Path(out))  # one writer per campaign folder
        self.store = Store(out)
        self.out = Path(out)
        self.coverage = Coverage.for_corpus(corpus, n_maxspc=opts.n_maxspc)
        self.stats = Stats()
        done = self.store.committed_indices()
        self.rng = np.random.default_rng([opts.seed, len(done), 7])
        self.chooser = make_chooser(opts.chooser, corpus, self.coverage, self.rng)
        self.gen_opts = GenerateOptions(blocks=opts.blocks, graph=opts.graph, mutations=opts.mutations, prefer=opts.prefer,
                                        opsets=None if opts.opsets[0] == opts.opsets[1] == OPSET else tuple(opts.opsets),
                                        int_inputs=opts.int_inputs)
        self.max_opset = {s.name: s.max_opset for s in specs if s.max_opset}
        self.signatures = self.store.signatures()
        self.policy = Policy.default()
        # engine -> the gaps it showed (what it said it does not support): models holding them are not sent to it again
        self.gaps: dict[str, set[Gap]] = {}
        for key in known_gaps or ():
            self._learn_gap(*(key.split("|") + ["", ""])[:3])  # the known-bugs store keeps no rule: the default test
        if resume:
            for recs in self.store.all_records():
                self.coverage.add(OpRecord.from_json(r) for r in recs)
            self.chooser.load(self.store.chooser_nodes())
            c = self.store.counts()
            self.stats.generated, self.stats.kept, self.stats.run = c["generated"], c["kept"], c["run"]
            self.stats.unique = len(self.signatures)
            for f in self.store.findings():
                k = f["detail"].get("klass", BUG)
                self.stats.classes[k] = self.stats.classes.get(k, 0) + 1
                g = f["detail"].get("gap")
                if k == UNSUPPORTED and g:
                    self._learn_gap(g["engine"], g.get("op") or "", g.get("attribute") or "", g.get("rule") or "")
            self.stats.elapsed_before = self.store.last_elapsed()
            for eng, d in self.store.engine_stats().items():
                self.stats.by_engine[eng] = {k: v for k, v in d.items() if k != "time"}
                self.stats.engine_time += d["time"]
        else:
            self.store.set_meta("options", asdict(opts))
            self.store.set_meta("corpus", sorted(corpus.blocks))
        self.todo = self._indices(done)
        self.stop_reason = ""
        # where models are judged: engine pools in threads here (default) or Ray actors (ofuzz.campaign.distributed)
        # the campaign's step limits (EngineSpec.campaign_timeout); the export re-judges every finding with the full ones
        self.judges: Judges = judges or LocalPools(step_specs(specs, opts), self.out / "work", opts.timeout, opts.workers, self.policy)
        self.redone = 0  # models judged again because their judge died in flight
        self.fine_seen: set[str] = set()  # fine-grained coverage keys (engine|op|construct) compared so far (bandit reward)
        self.versions: dict[str, Any] = {}  # engine -> version, known once the pools have started
        self.unavailable: dict[str, str] = {}  # engine -> why it could not start
        self.cpu_self = self.cpu_workers = 0.0  # CPU seconds of this process and of the engine workers, at the stop
        self.session_generated = self.session_kept = self.session_run = 0
        self.steering = Steering() if opts.steer else None  # learnt afresh on resume (it adapts within minutes)
        # what each engine fails on, learnt whether or not it steers: ofuzz.gen.novelty weighs a candidate's constructs
        # for an engine by the chance that engine runs it
        self.estimates = self.steering or Steering()
        self.roots_seen: set[str] = set()  # online stand-ins for root causes (see rootish), the bandit's reward

    @staticmethod
    def _indices(done: set[int]):
        """Redo any index below the highest committed one (in flight at a kill), then go on."""
        top = max(done) if done else -1
        for i in range(top + 1):
            if i not in done:
                yield i
        i = top + 1
        while True:
            yield i
            i += 1

    def _budget_left(self) -> bool:
        o, s = self.opts, self.stats
        if o.budget is not None and s.elapsed >= o.budget:
            self.stop_reason = "budget reached"
            return False
        if o.models is not None and s.generated >= o.models:
            self.stop_reason = f"{o.models} models generated"
            return False
        if o.tests is not None and s.kept >= o.tests:
            self.stop_reason = f"{o.tests} tests kept"
            return False
        return True

    def _learn_gap(self, engine: str, op: str, attribute: str, rule: str = "") -> None:
        if engine and op:
            self.gaps.setdefault(engine, set()).add(Gap(engine, op, attribute or None, rule))

    def _skips(self, m: GeneratedModel) -> dict[str, str]:
        """Engines this model is not sent to: it holds a construct the engine already said it does not support."""
        out = self._static_skips(m)
        if self.steering is not None:
            ops = {n.op_type for n in m.model.graph.node}
            rng = np.random.default_rng([self.opts.seed, int(m.provenance.get("index", 0)), 29])
            for eng in [s.name for s in self.specs if s.name not in out]:
                why = self.steering.skip_reason(ops, eng, rng)
                if why:
                    out[eng] = why
        return out

    def _static_skips(self, m: GeneratedModel) -> dict[str, str]:
        """The skips that follow from what engines said (capability gaps, opset limits), without steering's draw."""
        out: dict[str, str] = {}
        opset = int(m.provenance.get("opset", OPSET))
        for eng, limit in self.max_opset.items():
            if opset > limit:
                out[eng] = f"opset {opset} is above its max_opset {limit}"
        for eng, gaps in self.gaps.items():
            hit = self.policy.noise.gap_in(m.model, gaps) if self.policy.noise is not None else None
            if hit is not None:
                out[eng] = f"{hit.op}{'.' + hit.attribute if hit.attribute else ''} is unsupported"
        return out

    def _save_files(self, m: GeneratedModel) -> Path:
        return m.save(CampaignDir(self.out).models)

    def _commit(self, p: "Pending", judged: Judged | None, judge_time: float) -> list[str]:
        """Record one model in one transaction: its engine runs, findings, coverage, chooser update and reward."""
        m = p.model
        runs: list[tuple[str, str, float, float]] = []
        findings: list[dict[str, Any]] = []
        if judged is not None:
            for eng, r in judged.verdict.results.items():
                runs.append((eng, r.status, r.prepare_time, r.run_time))
                d = self.stats.by_engine.setdefault(eng, {})
                d[r.status] = d.get(r.status, 0) + 1
                self.stats.engine_time += r.prepare_time + r.run_time
            for eng in judged.verdict.skipped:
                runs.append((eng, "SKIP", 0.0, 0.0))
                d = self.stats.by_engine.setdefault(eng, {})
                d["SKIP"] = d.get("SKIP", 0) + 1
            failed_op = {f.engine: f.op for f in judged.findings if f.status in FAILURES}
            self.estimates.observe({n.op_type for n in m.model.graph.node}, {e: r.status for e, r in judged.verdict.results.items()}, failed_op)
            for f in judged.findings:
                g = f.detail.get("gap")
                if f.klass == UNSUPPORTED and g:
                    self._learn_gap(g["engine"], g.get("op") or "", g.get("attribute") or "", g.get("rule") or "")
            findings = [f.to_json() for f in judged.findings if f.blamed or judged.verdict.split]
            for f in findings:
                f["detail"] = {**f.get("detail", {}), "model": m.id, "versions": self.versions, "klass": f.get("klass", BUG)}
        cov = self.coverage.metrics()
        fresh = {f["signature"] for f in findings if f["detail"]["klass"] == BUG} - self.signatures  # drift or gaps are no reward
        new_fine = False
        if judged is not None and (self.opts.chooser == "bandit" or self.opts.candidates > 1):  # MCTS keeps the paper's reward
            compared = [e for e, res in judged.verdict.results.items() if res.status in (DCP, DCF)]
            keys = fine_keys(m.model, m.inputs, compared)
            new_fine = not keys <= self.fine_seen
            self.fine_seen |= keys
        if self.opts.chooser == "bandit":  # a new signature that only rewords a known defect is no new bug
            roots = {rootish(f["signature"], f["detail"]) for f in findings if f["detail"]["klass"] == BUG}
            fresh, self.roots_seen = roots - self.roots_seen, self.roots_seen | roots
        r = reward(bool(fresh), p.kept, new_fine)
        self.chooser.backprop(p.node, r)  # the tree's change is committed with this model
        new = self.store.commit_model(
            p.idx,
            {"id": m.id, "kept": p.kept, "run": judged is not None, "new_coverage": p.kept, "blocks": m.provenance["blocks"],
             "preferred": p.preferred, "node_count": m.provenance["node_count"], "gen_time": p.gen_time,
             "judge_time": judge_time, "reward": r},
            m.provenance["coverage_records"] if p.kept else None, runs, findings,
            {"elapsed": self.stats.elapsed, "generated": self.stats.generated, "kept": self.stats.kept, "run": self.stats.run,
             **cov, "unique_findings": self.stats.unique, "engine_time": self.stats.engine_time},
            self.chooser.state_delta(),
        )
        self.signatures.update(new)
        self.stats.unique += len(new)
        for f in findings:
            if f["signature"] in new:
                self.stats.classes[f["detail"]["klass"]] = self.stats.classes.get(f["detail"]["klass"], 0) + 1
        return new

    # -- the loop, as steps: start judges → (next model → dispatch)* → collect → stop judges ---------------------------

    def run(self, on_progress: Callable[["Campaign"], None] | None = None) -> None:
        """Keep every judge busy with new models until the budget is spent; commit each verdict as it arrives."""
        self._start_judges()
        pending: dict[Future[Any], Pending] = {}
        try:
            while True:
                busy = time.perf_counter()
                while len(pending) < self.judges.capacity and self._budget_left():
                    p = self._next_model()
                    if p is not None:
                        pending[self._dispatch(p)] = p
                self.stats.own_time += time.perf_counter() - busy
                if not pending:
                    break
                done, _ = wait(list(pending), timeout=0.25, return_when=FIRST_COMPLETED)
                busy = time.perf_counter()
                for fut in done:
                    p = pending.pop(fut)
                    if not self._collect(p, fut):
                        pending[self._dispatch(p)] = p  # its judge died: the same model, judged again elsewhere
                self.stats.own_time += time.perf_counter() - busy
                if on_progress:
                    on_progress(self)
                if self._past_hard_budget(pending):
                    break  # hard budget: do not wait for a slow engine
        finally:
            self._stop_judges()
            if on_progress:
                on_progress(self)

    def _start_judges(self) -> None:
        self.versions, self.unavailable = self.judges.start()
        if self.judges.infos:
            self.store.set_meta("judges", {k: {"node": v["node"], "ray_node": v.get("ray_node", ""), "pid": v["pid"]}
                                            for k, v in self.judges.infos.items()})
        self.store.set_meta("versions", self.versions)
        self.store.set_meta("unavailable", self.unavailable)

    def _next_model(self) -> "Pending | None":
        """Generate the next model; a model that adds no coverage is committed at once and not run (unless --run-all)."""
        idx = next(self.todo)
        t0 = time.perf_counter()
        preferred, node = self.chooser.choose()
        m = self._most_novel([generate_one(self.corpus, self.opts.seed, idx, self.gen_opts, preferred=preferred, candidate=c)
                              for c in range(max(1, self.opts.candidates))])
        recs = m.records
        kept = self.coverage.is_new(recs)
        if kept:
            self.coverage.add(recs)
        p = Pending(idx, m, preferred, node, kept, time.perf_counter() - t0)
        self.stats.generated += 1
        self.stats.kept += int(kept)
        self.session_generated += 1
        self.session_kept += int(kept)
        if not kept and not self.opts.run_all:
            self._commit(p, None, 0.0)
            return None
        return p

    def _most_novel(self, models: list[GeneratedModel]) -> GeneratedModel:
        if len(models) == 1:
            return models[0]
        names = [s.name for s in self.specs]
        cands = [(m.model, m.inputs, [e for e in names if e not in self._static_skips(m)]) for m in models]
        return models[most_novel(cands, self.fine_seen, self.estimates)]

    def _dispatch(self, p: "Pending") -> Future[Any]:
        if p.path is None:
            p.path = self._save_files(p.model)
        return self.judges.submit(p.model.model, p.path, p.model.inputs, self.opts.localise, self._skips(p.model))

    def _collect(self, p: "Pending", fut: Future[Any]) -> bool:
        """Commit a verdict; False when the model must be judged again (its judge died with it in flight)."""
        try:
            judged, judge_time = fut.result()
        except JudgeLost:
            self.redone += 1
            return False
        if judged is None:
            return True
        self.stats.run += 1
        self.session_run += 1
        self._commit(p, judged, judge_time)
        if not p.kept and not self._is_finding_model(p.model.id):  # keep files only of tests and findings
            for ext in (".onnx", ".inputs.npz", ".json"):
                (CampaignDir(self.out).models / f"{p.model.id}{ext}").unlink(missing_ok=True)
        return True

    def _past_hard_budget(self, pending: dict[Future[Any], "Pending"]) -> bool:
        return (not self._budget_left() and bool(pending) and self.opts.budget is not None
                and self.stats.elapsed > self.opts.budget + 2)

    def _stop_judges(self) -> None:
        self.cpu_workers = self.judges.close()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu_self = ru.ru_utime + ru.ru_stime
        self.store.set_meta("last_stop", {"reason": self.stop_reason, "at": time.time(), "elapsed": self.stats.elapsed,
                                          "own_time": self.stats.own_time, "cpu_self": self.cpu_self,
                                          "steered": self.steering.steered if self.steering is not None else None,
                                          "cpu_workers_alive": self.cpu_workers, "redone": self.redone})

    def _is_finding_model(self, model_id: str) -> bool:
        return self.store.is_finding_model(model_id)

    def close(self) -> None:
        self.store.close()
        self.lock.release()


def saved_options(out: Path) -> CampaignOptions | None:
    """The options a campaign folder was started with (None if it holds none)."""
    st = Store(out)
    try:
        saved = st.get_meta("options")
    finally:
        st.close()
    # a campaign started before an option existed resumes as it ran: opset 17, float inputs only
    return CampaignOptions(**{**saved, "blocks": tuple(saved["blocks"]), "opsets": tuple(saved.get("opsets", (OPSET, OPSET))),
                              "int_inputs": saved.get("int_inputs", 0.0)}) if saved else None


def empty_shell(out: Path) -> bool:
    """A store created by a campaign killed before it saved its options: nothing in it to keep, so it may start anew."""
    st = Store(out)
    try:
        return not st.get_meta("options") and not st.committed_indices()
    finally:
        st.close()


def rootish(signature: str, detail: dict[str, Any]) -> str:
    """A campaign-time stand-in for a root cause (the export's clustering needs reduced repros): the engine, failure
    and operator, without the message, whose wording splits one defect into many signatures (a converter's message
    names the layer it failed in); the source line for a failure the engine placed, the message for an unnamed one."""
    sig = Signature.parse(signature)
    if sig.status == DCF:
        return f"{sig.engine}|DCF|{sig.kind}|{sig.op}"
    place = detail.get("where") or (sig.text if sig.op in ("", "?") else "")
    return f"{sig.engine}|{sig.status}|{sig.kind}|{sig.op}|{place}"
