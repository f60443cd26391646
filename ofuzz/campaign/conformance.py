"""ONNX conformance sweep: the onnx package's own backend node tests, run through each engine.

Why: a fuzzer says where engines disagree; the node tests say where an engine
stands against the spec itself (model + inputs + expected outputs for every
operator version).  They also check ofuzz's own oracle against ground truth:
each test's outcomes are judged by the same triangulation a campaign uses, and
any engine it blames although it matched the expected outputs (or any majority
that agreed on a wrong answer) is reported.

The tests come from `onnx.backend.test.case.node` (the generators the onnx
project builds its test data from, shipped in the wheel), so no download is
needed.  Results go to a small SQLite store; a later sweep lists what changed.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx

from ofuzz.core.vocab import PROCESS_DIED
from ofuzz.core.vocab import TIMEOUT as HANG_KIND
from ofuzz.exec.runner import EnginePool
from ofuzz.judge.compare import dtype_kind

RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
PASS, WRONG, CONVERT, RUN, CRASH, TIMEOUT = "pass", "wrong values", "failed to convert", "failed to run", "crashed", "timed out"
OUTCOMES = (PASS, WRONG, CONVERT, RUN, CRASH, TIMEOUT)  # timed out: not a crash (onnx2tf converting the 200-node expanded
# attention tests for longer than TensorFlow's 90 s step limit), but not a verdict on correctness either


class ConformanceError(ValueError):
    """The conformance store is unusable; one line naming it and the fix."""


@dataclass
class NodeTest:
    name: str
    op: str
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    rtol: float
    atol: float


def _op_of(name: str, model: onnx.ModelProto) -> str:
    """The operator a test is about: its only node, else the node its name starts with (test_reduce_max_... → ReduceMax)."""
    ops = [n.op_type for n in model.graph.node]
    if len(set(ops)) == 1:
        return ops[0]
    flat = name.removeprefix("test_").replace("_", "").lower()
    return max((o for o in set(ops) if flat.startswith(o.lower())), key=len, default="(several)")


def _tensor(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind in "biufc" and x.dtype.itemsize > 0


def node_tests(ops: set[str] | None = None, names: str | None = None) -> tuple[list[NodeTest], dict[str, str]]:
    """The node tests with tensor inputs and outputs (optionally only of `ops` or whose name contains `names`), and why
    the others were left out."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = collect_testcases(None)
    tests, skipped = [], {}
    for tc in cases:
        op = _op_of(tc.name, tc.model)
        if (ops and op not in ops) or (names and names not in tc.name):
            continue
        if not tc.data_sets:
            skipped[tc.name] = "no data set"
            continue
        ins, outs = tc.data_sets[0]
        init = {t.name for t in tc.model.graph.initializer}
        in_names = [i.name for i in tc.model.graph.input if i.name not in init]
        out_names = [o.name for o in tc.model.graph.output]
        if RANDOM_OPS & {n.op_type for n in tc.model.graph.node} or tc.name.startswith("test_training_dropout"):
            skipped[tc.name] = "random outputs (the expected ones are one draw)"
            continue
        if len(ins) != len(in_names) or len(outs) != len(out_names) or not all(_tensor(x) for x in [*ins, *outs]):
            skipped[tc.name] = "inputs or outputs are not numeric tensors (sequences, optionals, strings)"
            continue
        tests.append(NodeTest(tc.name, op, tc.model, dict(zip(in_names, ins)), dict(zip(out_names, outs)), float(tc.rtol), float(tc.atol)))
    return tests, skipped


def grade(prep: Any, run: Any, test: NodeTest) -> tuple[str, str]:
    """One engine's outcome against the test's expected outputs, with the test's own tolerances.  Dtypes are judged as
    ofuzz's comparison rule judges them: the kind (float, signed, unsigned, bool) must match, the width may differ
    (MNN computes integers in int32); a changed width with equal values passes."""
    for step, failed in ((prep, CONVERT), (run, RUN)):
        if step is None:
            return failed, "not run"
        if not step.ok:
            if step.kind == HANG_KIND:
                return TIMEOUT, step.summary()[:300]
            return (CRASH if step.kind in PROCESS_DIED else failed), step.summary()[:300]
    for name, want in test.expected.items():
        got = run.outputs.get(name)
        if got is None:
            return WRONG, f"{name}: not produced"
        got = np.asarray(got)
        if got.shape != want.shape:
            return WRONG, f"{name}: shape {got.shape} instead of {want.shape}"
        if dtype_kind(got) != dtype_kind(want):  # as the fuzzer's own rule: kinds must match, widths may differ
            return WRONG, f"{name}: dtype {got.dtype} instead of {want.dtype}"
        if want.dtype.kind in "fc":
            ok = np.allclose(got, want, rtol=test.rtol, atol=test.atol, equal_nan=True)
        else:
            ok = np.array_equal(got, want)
        if not ok:
            with np.errstate(all="ignore"):
                diff = np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))) if got.size else 0.0
            return WRONG, f"{name}: max abs diff {diff:.3g} (rtol {test.rtol:g}, atol {test.atol:g})"
    return PASS, ""


def oracle_check(outcomes: dict[str, tuple[Any, Any]], graded: dict[str, str], test: NodeTest, excluded: dict[str, str],
                 families: dict[str, str]) -> list[dict[str, Any]]:
    """Where ofuzz's triangulation contradicts the ground truth: it blamed a value of an engine that matched the expected
    outputs, or the engine whose values it would call expected was wrong."""
    from ofuzz.judge.judging import declared_shapes
    from ofuzz.judge.oracle import DCF, judge_outcomes

    v = judge_outcomes(outcomes, list(test.expected), declared_shapes(test.model), excluded, families)
    out = []
    for eng, r in v.results.items():
        if r.status == DCF and r.blamed and graded.get(eng) == PASS:
            out.append({"test": test.name, "op": test.op, "kind": "blamed a correct engine", "engine": eng, "majority": v.majority})
    # the values it would call expected are wrong; a lone engine that ran (ImageDecoder: only TensorFlow) is not a
    # majority and the oracle blames nobody's values on it, so that is no claim to contradict
    agreeing = {families.get(e, e) for e in v.majority}
    if v.expected_from and not v.split and len(agreeing) >= 2 and graded.get(v.expected_from) == WRONG:
        out.append({"test": test.name, "op": test.op, "kind": "expected values were wrong", "engine": v.expected_from, "majority": v.majority})
    return out


SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (id INTEGER PRIMARY KEY, started REAL NOT NULL, engines TEXT NOT NULL, versions TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (sweep INTEGER NOT NULL, engine TEXT NOT NULL, test TEXT NOT NULL, op TEXT NOT NULL,
  outcome TEXT NOT NULL, detail TEXT NOT NULL, PRIMARY KEY (sweep, engine, test));
CREATE TABLE IF NOT EXISTS oracle (sweep INTEGER NOT NULL, test TEXT NOT NULL, op TEXT NOT NULL, kind TEXT NOT NULL, engine TEXT NOT NULL,
  majority TEXT NOT NULL);
"""


class ConformanceStore:
    """Every sweep's results, so the next sweep can say what changed per engine and test."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            self.lock = threading.Lock()  # one connection, written by every pool's thread
            self.db.executescript(SCHEMA)
            have = {r[1] for r in self.db.execute("PRAGMA table_info(results)")}
            if not {"sweep", "engine", "test", "outcome"} <= have:
                raise ConformanceError(f"{self.path}: not an ofuzz conformance store (table results lacks columns); pass another --store")
        except sqlite3.DatabaseError as exc:
            raise ConformanceError(f"{self.path}: not an ofuzz conformance store ({exc}); move it away or pass another --store") from None

    def begin(self, engines: list[str], versions: dict[str, str]) -> int:
        cur = self.db.execute("INSERT INTO sweeps (started, engines, versions) VALUES (?,?,?)", (time.time(), json.dumps(engines), json.dumps(versions)))
        return int(cur.lastrowid)

    def latest(self, engines: list[str]) -> int | None:
        """The newest sweep of exactly these engines (to go on with it)."""
        row = self.db.execute("SELECT MAX(id) FROM sweeps WHERE engines = ?", (json.dumps(engines),)).fetchone()
        return row[0] if row and row[0] is not None else None

    def done(self, sweep: int, engines: list[str]) -> set[str]:
        """Tests of `sweep` with a result for every one of `engines`."""
        rows = self.db.execute("SELECT test, COUNT(DISTINCT engine) FROM results WHERE sweep = ? GROUP BY test", (sweep,))
        return {t for t, n in rows if n >= len(engines)}

    def set_versions(self, sweep: int, versions: dict[str, str]) -> None:
        with self.lock:
            self.db.execute("UPDATE sweeps SET versions = ? WHERE id = ? AND versions = '{}'", (json.dumps(versions), sweep))

    def versions(self, sweep: int) -> dict[str, str]:
        row = self.db.execute("SELECT versions FROM sweeps WHERE id = ?", (sweep,)).fetchone()
        return json.loads(row[0]) if row else {}

    def add(self, sweep: int, test: NodeTest, graded: dict[str, tuple[str, str]], disagreements: list[dict[str, Any]]) -> None:
        with self.lock:
            self._add(sweep, test, graded, disagreements)

    def _add(self, sweep: int, test: NodeTest, graded: dict[str, tuple[str, str]], disagreements: list[dict[str, Any]]) -> None:
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.executemany("INSERT OR REPLACE INTO results VALUES (?,?,?,?,?,?)",
                            [(sweep, e, test.name, test.op, o, d) for e, (o, d) in graded.items()])
            cur.executemany("INSERT INTO oracle VALUES (?,?,?,?,?,?)",
                            [(sweep, d["test"], d["op"], d["kind"], d["engine"], json.dumps(d["majority"])) for d in disagreements])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    def results(self, sweep: int) -> dict[tuple[str, str], tuple[str, str, str]]:
        """(engine, test) -> (op, outcome, detail)."""
        return {(e, t): (op, o, d) for e, t, op, o, d in
                self.db.execute("SELECT engine, test, op, outcome, detail FROM results WHERE sweep = ?", (sweep,))}

    def oracle(self, sweep: int) -> list[dict[str, Any]]:
        return [{"test": t, "op": op, "kind": k, "engine": e, "majority": json.loads(m)}
                for t, op, k, e, m in self.db.execute("SELECT test, op, kind, engine, majority FROM oracle WHERE sweep = ? ORDER BY test", (sweep,))]

    def previous(self, sweep: int, engine: str) -> int | None:
        """The latest earlier sweep that ran `engine`."""
        row = self.db.execute("SELECT MAX(sweep) FROM results WHERE sweep < ? AND engine = ?", (sweep, engine)).fetchone()
        return row[0] if row and row[0] is not None else None

    def close(self) -> None:
        self.db.close()


def changes(store: ConformanceStore, sweep: int, engines: list[str]) -> list[dict[str, str]]:
    """Per engine, the tests whose outcome differs from that engine's previous sweep."""
    now = store.results(sweep)
    out = []
    for eng in engines:
        prev_id = store.previous(sweep, eng)
        if prev_id is None:
            continue
        prev = store.results(prev_id)
        for (e, t), (op, o, _) in sorted(now.items()):
            if e == eng and (e, t) in prev and prev[(e, t)][1] != o:
                out.append({"engine": e, "test": t, "op": op, "was": prev[(e, t)][1], "now": o})
    return out


def summarise(results: dict[tuple[str, str], tuple[str, str, str]]) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, list[str]]]]:
    """Counts per engine and outcome, and per engine the operators with each failing outcome."""
    counts: dict[str, dict[str, int]] = {}
    failing: dict[str, dict[str, list[str]]] = {}
    for (eng, _), (op, o, _) in results.items():
        counts.setdefault(eng, {k: 0 for k in OUTCOMES})[o] += 1
        if o != PASS:
            ops = failing.setdefault(eng, {}).setdefault(o, [])
            if op not in ops:
                ops.append(op)
    for per in failing.values():
        for ops in per.values():
            ops.sort()
    return counts, failing


def sweep_one(pool: EnginePool, test: NodeTest, policy: Any) -> tuple[dict[str, tuple[str, str]], list[dict[str, Any]]]:
    """Run one node test on every engine of `pool`; grade each, then check the oracle's blame against the truth."""
    from ofuzz.judge.judging import excluded_voters

    path_dir = Path(pool.root) / "conformance"
    path_dir.mkdir(parents=True, exist_ok=True)
    path = path_dir / f"{test.name}.onnx"
    onnx.save(test.model, str(path))
    try:
        res = pool.execute(path, test.inputs, list(test.expected), pool.names)
    finally:
        path.unlink(missing_ok=True)
    graded = {e: grade(prep, run, test) for e, (prep, run) in res.items()}
    excluded = excluded_voters(pool, test.model, test.inputs, policy)
    return graded, oracle_check(res, {e: g[0] for e, g in graded.items()}, test, excluded, pool.families)


def run_sweep(specs: list[Any], tests: list[NodeTest], store: ConformanceStore, workdir: Path, workers: int,
              on_done: Callable[[NodeTest], None] | None = None, sweep: int | None = None) -> int:
    """Sweep `tests` over the engines in `workers` pools; returns the sweep's id in `store`.  With `sweep`, go on with
    that one: its finished tests are not run again (each test is committed as it finishes, so a sweep that was
    stopped, or died with a crashing engine, loses at most the tests in flight)."""
    from ofuzz.judge.judging import Policy
    from ofuzz.exec.runner import for_each_in_pools

    policy = Policy.default()
    names = [s.name for s in specs]
    if sweep is None:
        sweep = store.begin(names, {})
    else:
        finished = store.done(sweep, names)
        tests = [t for t in tests if t.name not in finished]

    def one(pool: EnginePool, test: NodeTest) -> None:
        store.set_versions(sweep, pool.versions())
        try:
            graded, dis = sweep_one(pool, test, policy)
        except Exception as exc:  # noqa: BLE001  (a model the engines' harness cannot even save: recorded, the sweep goes on)
            graded, dis = {s.name: (CRASH, f"ofuzz could not run it: {type(exc).__name__}: {exc}"[:300]) for s in specs}, []
        store.add(sweep, test, graded, dis)
        if on_done:
            on_done(test)

    for_each_in_pools(specs, workdir, tests, one, workers)
    return sweep
