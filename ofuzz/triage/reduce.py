"""Reduction: shrink a model while its finding stays the same finding, as Hypothesis shrinks.

Every candidate goes through one choke point, `Reducer.consider(model, feeds)`:
budget, cache, onnx's checker (out of process), judging on the real engines,
the target match, and the validity check that keeps reduction honest — every
engine that ran the original model and agreed must still run the candidate and
agree.  (Without it, dropping Mod's `fmod=1` on floats or halving a Conv input
to one channel produced models that were invalid or showed another problem,
and onnx's checker accepted them.)

Named passes run to a fixed point, each with statistics:
`cut_to_node` (the diverging node alone, fed the majority's values),
`ddmin_nodes` (delta debugging over nodes), `one_minimal` (no single node can
go), `drop_attributes` (back to defaults), `simplify_values` (NaN/Inf/zeros/
negatives replaced where the finding does not need them, so a root cause's
input traits are the ones that matter) and `halve_shapes`.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import onnx

from ofuzz.triage.reduce_checks import digest, looks_alike, well_formed
from ofuzz.triage.reduce_passes import drop_attributes, halve_shapes, simplify_values
from ofuzz.core.vocab import DCF
from ofuzz.judge.cut import submodel
from ofuzz.judge.judging import BUG, Finding, Judged, Policy, declared_shapes, judge_in_memory
from ofuzz.judge.localise import expose_intermediates
from ofuzz.judge.oracle import DCP
from ofuzz.triage.rootcause import crash_like
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.signature import Signature


@dataclass
class Target:
    """What must stay: engine, status, failure (kind|etype, or the divergence's category and op; '?' matches any op)
    and class."""

    engine: str
    status: str
    key: str
    klass: str = BUG

    @staticmethod
    def of(f: Finding) -> "Target":
        """DCF: the diverging op.  IF/MCF: kind, type and normalised message — matching on kind and type alone let
        the reducer slip from one converter bug to another (or to an invalid model) on the way down.  A crash: any crash
        at that stage — its signal and last log line vary between runs of one defect (MNN's LSTM converter died with
        SIGABRT, SIGSEGV or SIGBUS; hand triage 11: such a repro stayed at 40 nodes, keyed by a GRU that converts)."""
        sig = Signature.parse(f.signature)
        if f.status == DCF:  # and how it diverges: hand triage 13 saw an unlocalised `value` divergence of MNN reduced
            # to a 1-D Conv's wrong output rank, another defect that the 16-node original did not show
            return Target(f.engine, f.status, f"{sig.kind}|{f.op or '?'}", f.klass)
        if crash_like(f"{sig.kind}:{sig.etype}"):
            return Target(f.engine, f.status, "crash", f.klass)
        return Target(f.engine, f.status, f"{sig.failure}|{sig.text}", f.klass)

    def matches(self, f: Finding) -> bool:
        if f.engine != self.engine or f.status != self.status or f.klass != self.klass:
            return False
        if self.status == DCF:  # "category|op"; '?' matches any op, a bare op (no category) any category
            want_kind, _, want_op = self.key.rpartition("|")
            got_kind, _, got_op = Target.of(f).key.rpartition("|")
            return (not want_kind or want_kind == got_kind) and (want_op == "?" or want_op == got_op)
        return self.key == "?" or Target.of(f).key == self.key


@dataclass
class PassStats:
    tried: int = 0
    accepted: int = 0
    seconds: float = 0.0


@dataclass
class Reduced:
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    nodes_before: int
    nodes_after: int
    checks: int
    seconds: float
    one_minimal: bool
    log: list[str] = field(default_factory=list)
    passes: dict[str, PassStats] = field(default_factory=dict)
    judged: Judged | None = None  # the final model's verdict on every engine, when a check already produced it
    drop_fixes: list[str] = field(default_factory=list)  # attributes ("Op.attr") whose default made the engine right (see drop_attributes)


class Reducer:
    """Holds the current (model, feeds) and accepts a candidate only through `consider`."""

    def __init__(self, pool: EnginePool, target: Target, budget: float, policy: Policy | None = None, must_agree: set[str] | None = None,
                 only: set[str] | None = None) -> None:
        self.pool, self.target, self.budget, self.policy = pool, target, budget, policy or Policy()
        self.must_agree = set(must_agree or ()) - {target.engine}
        # engines candidates run on (None: all); the others are skipped while shrinking and checked once at the end
        self.skip = {e: "not needed while shrinking" for e in pool.names if only is not None and e not in only and e != target.engine}
        self.must_agree -= set(self.skip)
        self.t0 = time.perf_counter()
        self.checks = 0
        self.cache: dict[str, bool] = {}
        self.formed: dict[str, bool] = {}  # digest -> the candidate passed the checker and strict inference
        self.stats: dict[str, PassStats] = {}
        self.current_pass = ""
        self.proven_one_minimal = False  # set by ddmin_nodes when its last round refused every single-node removal
        self.log: list[str] = []
        self.accepted: dict[str, Judged] = {}  # digest -> verdict of accepted candidates judged on every engine (the repro reuses it)
        self.right: dict[str, bool] = {}  # digest -> the blamed engine agreed on the candidate (a rewrite that fixed it)
        self.drop_fixes: tuple[str, list[str]] = ("", [])  # (digest of the model, its attributes whose default fixed the engine)
        self._judging = ""
        spec = getattr(pool, "specs", {}).get(target.engine)
        # the blamed engine, or the mode its users run (asked of the reduced repro: mode-only), reads layouts off shapes
        self.layout_from_shape = bool(getattr(spec, "layout_from_shape", False)) or _reads_layouts(getattr(spec, "second_opinion", ""))

    def out_of_time(self) -> bool:
        return time.perf_counter() - self.t0 > self.budget

    def consider(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> bool:
        """True if the candidate is valid and still shows the target finding."""
        if self.out_of_time():
            return False
        key = digest(model, feeds)
        if key in self.cache:
            return self.cache[key]
        st = self.stats.setdefault(self.current_pass, PassStats())
        st.tried += 1
        t = time.perf_counter()
        self._judging = key
        ok = self.well_formed(model, feeds, key) and self._judge(model, feeds)
        st.seconds += time.perf_counter() - t
        st.accepted += int(ok)
        self.cache[key] = ok
        return ok

    def well_formed(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray], key: str | None = None) -> bool:
        """reduce_checks.well_formed, once per candidate (a pass that asks before `consider` does not pay twice)."""
        key = key or digest(model, feeds)
        if key not in self.formed:
            self.formed[key] = well_formed(model)
        return self.formed[key]

    def _still_valid(self, j: Judged) -> bool:
        """The candidate is a valid model that shows only the target: the engines that agreed on the original still run
        it and agree — at least two of their families (or all, if fewer). Requiring every one of them rejected reductions
        where a third engine has a defect of its own on the smaller model (MNN's negative GatherElements indices kept a
        TensorFlow repro at 29 nodes); two independent implementations agreeing is the witness that the model is valid."""
        fams = self.pool.families
        wanted = {fams.get(e, e) for e in self.must_agree if e not in j.verdict.excluded}
        return len(_families_agreeing(j, self.must_agree, fams)) >= min(2, len(wanted))

    def _judge(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> bool:
        self.checks += 1
        j = judge_in_memory(self.pool, model, feeds, policy=self.policy, skip=self.skip)
        now = j.verdict.results.get(self.target.engine)
        self.right[self._judging] = now is not None and now.status == DCP
        if not any(self.target.matches(f) for f in j.findings):
            return False
        ok = self._still_valid(j) and some_engine_matches_declared(j, declared_shapes(model))
        if ok and not self.skip:
            self.accepted = {digest(model, feeds): j}  # only the latest: it is the current model
        return ok


def some_engine_matches_declared(j: Judged, declared: dict[str, tuple[int, ...]]) -> bool:
    """False when every engine that ran the candidate disagrees with an output shape the model declares (ONNX
    inference): shape inference passed a model the operators cannot compute as declared (halving PRelu's input to [1]
    while its slope stays [2]), so the candidate is not a valid model, whatever the engines then do."""
    ran = [r.outcome.outputs for r in j.verdict.results.values() if r.outcome is not None and r.outcome.ok and r.outcome.outputs]
    if not ran:
        return True
    return all(any(tuple(np.shape(o[name])) == shape for o in ran if name in o) for name, shape in declared.items()
               if any(name in o for o in ran))


def _families_agreeing(j: Judged, engines: set[str], families: dict[str, str]) -> set[str]:
    res = j.verdict.results
    return {families.get(e, e) for e in engines if e in res and res[e].status == DCP and e not in j.verdict.excluded}


def reduce_model(
    pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], target: Target, value_engine: str,
    budget: float = 120.0, start_node: str | None = None, echo: Callable[[str], None] | None = None,
    policy: Policy | None = None, must_agree: set[str] | None = None, cheap: set[str] | None = None,
    focus: list[str] | None = None,
) -> Reduced:
    """Reduce to a fixed point of all passes (or until the budget runs out).

    With `cheap`, candidates run only on the target engine and those engines (a TensorFlow
    conversion per candidate dominated the cost); the result is then checked once on every
    engine, and if it fails there the reduction is redone on all engines.
    `focus`: the nodes the engine said it failed on (see `cone`).
    """
    if cheap and set(pool.names) - set(cheap) - {target.engine} and _cheap_can_blame(pool, target, cheap):
        t0 = time.perf_counter()
        fast = _shrink(pool, model, feeds, target, value_engine, budget, start_node, policy, must_agree, only=set(cheap), focus=focus)
        full = Reducer(pool, target, budget, policy, must_agree)
        if full.consider(fast.model, fast.inputs):
            fast.checks += full.checks
            fast.seconds = time.perf_counter() - t0
            fast.judged = full.accepted.get(digest(fast.model, fast.inputs))
            return fast
        again = _shrink(pool, model, feeds, target, value_engine, max(1.0, budget - (time.perf_counter() - t0)), start_node, policy, must_agree,
                        focus=focus)
        again.log.insert(0, "the cheaply reduced model failed on another engine; reduced again on all engines")
        again.checks += fast.checks + full.checks
        again.seconds = time.perf_counter() - t0
        return again
    return _shrink(pool, model, feeds, target, value_engine, budget, start_node, policy, must_agree, echo=echo, focus=focus)


@functools.cache
def _reads_layouts(engine: str) -> bool:
    """Does this engine (a second opinion, maybe outside the pool) read layouts off shapes? A repro shrunk to [1,1,1,1]
    then misleads it: onnx2tf's default mode failed on such a keep-shape repro, which was called a defect of both modes
    instead of mode-only."""
    if not engine:
        return False
    from ofuzz.exec.engines.registry import EngineError, resolve

    try:
        return any(s.layout_from_shape for s in resolve([engine]))
    except EngineError:
        return False


def _cheap_can_blame(pool: EnginePool, target: Target, cheap: set[str]) -> bool:
    """Whether the target engine and the cheap voters alone can blame it.  A divergence needs a majority: one voter
    against the blamed engine is a split, so with one voter family every candidate failed and nothing was reduced (hand
    triage 30: an MNN QuantizeLinear kept an explicit default axis and negative inputs in its key, and was counted
    twice).  A failure is blamed once another engine runs the model."""
    if target.status != DCF:
        return bool(cheap - {target.engine})
    families = getattr(pool, "families", {})
    return len({families.get(e, e) for e in cheap if e != target.engine}) >= 2


def _shrink(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], target: Target, value_engine: str, budget: float,
            start_node: str | None, policy: Policy | None, must_agree: set[str] | None, only: set[str] | None = None,
            echo: Callable[[str], None] | None = None, focus: list[str] | None = None) -> Reduced:
    r = Reducer(pool, target, budget, policy, must_agree, only)
    cur = (model, dict(feeds))
    n0 = len(model.graph.node)
    one_min = True
    for round_ in range(3):
        values = _values(pool, cur[0], cur[1], value_engine)
        if not values:
            one_min = False
            r.log.append(f"no intermediate values from {value_engine}; node passes skipped")
        before = digest(*cur)
        if values:
            cur = _run_pass(r, "cut_to_node", cut_to_node, cur, values, start_node if round_ == 0 else None)
            cur = _run_pass(r, "cone", cone, cur, values, focus if round_ == 0 else None)
            cur = _run_pass(r, "ddmin_nodes", ddmin_nodes, cur, values)
            cur, one_min = _run_pass(r, "one_minimal", one_minimal, cur, values)
            cur = _run_pass(r, "bypass_nodes", bypass_nodes, cur, values)
        for name, fn in (("drop_attributes", drop_attributes), ("simplify_values", simplify_values), ("halve_shapes", halve_shapes)):
            cur = _run_pass(r, name, fn, cur)
        if digest(*cur) == before or r.out_of_time():
            break
    m, f = cur
    if echo:
        echo(f"reduced {n0} → {len(m.graph.node)} nodes in {r.checks} checks")
    fixed_on, fixes = r.drop_fixes
    return Reduced(m, f, n0, len(m.graph.node), r.checks, time.perf_counter() - r.t0, one_min and not r.out_of_time(), r.log, r.stats,
                   r.accepted.get(digest(m, f)), fixes if fixed_on == digest(m, f) else [])


def _run_pass(r: Reducer, name: str, fn: Callable[..., Any], cur: Any, *args: Any) -> Any:
    r.current_pass = name
    r.stats.setdefault(name, PassStats())
    return fn(r, cur, *args)


State = tuple[onnx.ModelProto, dict[str, np.ndarray]]


def _values(pool: EnginePool, model: onnx.ModelProto, feeds: dict[str, np.ndarray], engine: str) -> dict[str, np.ndarray]:
    """Every tensor's value on `engine` (one run with intermediates exposed)."""
    # shapeless too: GroupNormalization-21's output has no inferred shape, and without its value no cut could take
    # the nodes before it away (hand triage 20 #24 stayed at 6 nodes)
    exposed, _ = expose_intermediates(model, shapeless=True)
    prep, run = pool.execute_model(exposed, feeds, [engine]).get(engine, (None, None))
    return dict(run.outputs) if run is not None and run.ok else {}


def _sub(r: Reducer, cur: State, values: dict[str, np.ndarray], keep: list[int]) -> State | None:
    built = submodel(cur[0], keep, values, cur[1])
    if built is None or _hides_layout(r, cur[0], built[0]) or not r.consider(*built):
        return None
    return built


def _hides_layout(r: Reducer, before: onnx.ModelProto, after: onnx.ModelProto) -> bool:
    """A cut that makes an inner tensor such as [1,1,1,1] an input, for an engine that reads an input's layout off its
    shape: onnx2tf's default mode takes it as not transposed and then fails another way than the model did (hand
    triage 14 #29: a GlobalMaxPool output cut into an input moved an Add layout defect onto Pad)."""
    if not getattr(r, "layout_from_shape", False):
        return False
    had = {vi.name for vi in before.graph.input}
    return any(looks_alike(vi, ones=True) for vi in after.graph.input if vi.name not in had)


def cut_to_node(r: Reducer, cur: State, values: dict[str, np.ndarray], start_node: str | None) -> State:
    """The diverging (or failing) node alone, fed the majority's values."""
    if not start_node:
        return cur
    idx = [i for i, n in enumerate(cur[0].graph.node) if n.name == start_node]
    got = _sub(r, cur, values, idx) if idx else None
    if got is not None:
        r.log.append(f"cut to the single node {start_node}")
        return got
    return cur


def cone(r: Reducer, cur: State, values: dict[str, np.ndarray], focus: list[str] | None) -> State:
    """Only the failing nodes and what they depend on, in one check.

    A converter works through the graph in order and stops at the node it fails on; when the engine names that node
    (and, for onnx2tf's two layout modes, the node each mode failed on), nothing downstream of or beside them can
    matter.  Cutting a failing node alone loses the dynamic shapes its producers give it (a Hardmax after
    Expand(Shape) fails, the same Hardmax fed a constant does not), so the cone keeps its ancestors as they are.
    """
    if not focus:
        return cur
    nodes = cur[0].graph.node
    index = {n.name: i for i, n in enumerate(nodes) if n.name}
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    depth: dict[int, int] = {}
    frontier = [index[f] for f in focus if f in index]
    d = 0
    while frontier:  # breadth first: each node's distance (in producer hops) from the nearest failing node
        nxt = []
        for i in frontier:
            if i not in depth:
                depth[i] = d
                nxt.extend(producer[t] for t in nodes[i].input if t in producer)
        frontier, d = nxt, d + 1
    keep = set(depth)
    if not keep or len(keep) == len(nodes):
        return cur
    # the producer that hands the failing node a bad layout or shape is usually one or two hops up: try those
    # first (one check each) rather than leaving a long chain of ancestors to ddmin (330 s of 716 s of TensorFlow
    # MCF triage in the 5-minute campaign went to ddmin after the cone)
    tried: set[int] = set()
    for hops in (1, 2):
        near = {i for i, k in depth.items() if k <= hops}
        if len(near) == len(keep) or len(near) == len(tried):
            break
        tried = near
        got = _sub(r, cur, values, sorted(near))
        if got is not None:
            r.log.append(f"cut to {', '.join(focus)} and its producers up to {hops} hop(s) ({len(near)} of {len(nodes)} nodes)")
            return got
    got = _sub(r, cur, values, sorted(keep))
    if got is not None:
        r.log.append(f"cut to the cone of {', '.join(focus)} ({len(keep)} of {len(nodes)} nodes)")
        return got
    return cur


def ddmin_nodes(r: Reducer, cur: State, values: dict[str, np.ndarray]) -> State:
    items = list(range(len(cur[0].graph.node)))
    best: State = cur
    n = 2
    r.proven_one_minimal = False
    while len(items) >= 2 and not r.out_of_time():
        size = -(-len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        for c in chunks:
            comp = [x for x in items if x not in c]
            got = _sub(r, cur, values, comp) if comp else None
            if got is not None:
                items, n, best = comp, max(n - 1, 2), got
                break
        else:
            if n >= len(items):  # every single node's removal was just refused: 1-minimal, one_minimal need not ask again
                r.proven_one_minimal = not r.out_of_time()
                break
            n = min(len(items), 2 * n)
    if len(items) < 2:
        r.proven_one_minimal = True
    return best


def one_minimal(r: Reducer, cur: State, values: dict[str, np.ndarray]) -> tuple[State, bool]:
    """No single node can be removed (or the budget ran out: then say so)."""
    if r.proven_one_minimal:  # ddmin's last round tried exactly these removals (TensorFlow MCFs: 159 checks, 0 accepted)
        return cur, True
    items = list(range(len(cur[0].graph.node)))
    best = cur
    changed = True
    while changed and len(items) > 1:
        changed = False
        for x in list(items):
            if r.out_of_time():
                return best, False
            rest = [y for y in items if y != x]
            got = _sub(r, cur, values, rest)
            if got is not None:
                items, best, changed = rest, got, True
                break
    return best, True


def bypass_nodes(r: Reducer, cur: State, values: dict[str, np.ndarray]) -> State:
    """Remove a node inside a chain by wiring its input straight to its consumers, where the shapes and types match.
    Cutting a node feeds its consumers the node's own output values; bypassing feeds them its input's, which is what a
    repro without that node would see (hand triage #3: a Celu between the input and an Expand→Equal that alone fails)."""
    model, feeds = cur
    outputs = {o.name for o in model.graph.output}
    i = len(model.graph.node) - 1
    while i >= 0 and len(model.graph.node) > 1 and not r.out_of_time():
        node = model.graph.node[i]
        out = node.output[0] if node.output else ""
        src = next((t for t in node.input if t and out in values and t in values and values[t].shape == values[out].shape
                    and values[t].dtype == values[out].dtype), None)
        if src is not None and out not in outputs and len(node.output) == 1:
            cand = onnx.ModelProto()
            cand.CopyFrom(model)
            del cand.graph.node[i]
            for n in cand.graph.node:
                for k, name in enumerate(n.input):
                    if name == out:
                        n.input[k] = src
            used = {t for n in cand.graph.node for t in n.input}
            keep_inits = [t for t in cand.graph.initializer if t.name in used]
            del cand.graph.initializer[:]
            cand.graph.initializer.extend(keep_inits)
            kept_inputs = [vi for vi in cand.graph.input if vi.name in used or vi.name in outputs]
            del cand.graph.input[:]
            cand.graph.input.extend(kept_inputs)
            cand_feeds = {k: v for k, v in feeds.items() if any(vi.name == k for vi in kept_inputs)}
            if r.consider(cand, cand_feeds):
                r.log.append(f"bypassed {node.name} ({node.op_type})")
                model, feeds = cand, cand_feeds
        i -= 1
    return model, feeds
