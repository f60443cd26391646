"""Campaign: store, resume after SIGKILL, hard budget, findings, report (fast engines + the test double)."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ofuzz.judge.signature import Signature

ENGINES = "onnxruntime,reference,testdouble"


def start(out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ofuzz.cli", "campaign", "--engines", ENGINES, "--blocks", "2..6",
                             "--workers", "2", "--out", str(out), "--timeout", "5", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def db_rows(out: Path, sql: str, params: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(str(out / "campaign.sqlite"))
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def committed(out: Path) -> int:
    try:
        return db_rows(out, "SELECT COUNT(*) FROM models")[0][0]
    except sqlite3.Error:
        return 0


def saved_options(out: Path) -> bool:
    """Whether a campaign got as far as saving its options (a kill may leave the store file before its tables)."""
    try:
        return (out / "campaign.sqlite").exists() and bool(db_rows(out, "SELECT COUNT(*) FROM meta WHERE key = 'options'")[0][0])
    except sqlite3.Error:
        return False


def test_kill9_then_resume_loses_nothing_and_counts_nothing_twice(tmp_path):
    out = tmp_path / "c"
    p = start(out, "--models", "400", "--run-all", "--seed", "3", "--no-reduce")
    deadline = time.time() + 120
    while committed(out) < 25 and time.time() < deadline:
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    before_models = set(db_rows(out, "SELECT idx, id FROM models"))
    before_occ = set(db_rows(out, "SELECT idx, engine, signature FROM occurrences"))
    before_sigs = {r[0] for r in db_rows(out, "SELECT signature FROM findings")}
    assert len(before_models) >= 25
    n_target = len(before_models) + 30
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--resume", str(out), "--models", str(n_target), "--no-report"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    after_models = set(db_rows(out, "SELECT idx, id FROM models"))
    assert before_models <= after_models and len(after_models) == n_target
    idx = sorted(i for i, _ in after_models)
    assert idx == list(range(n_target))  # no gaps, no duplicates
    assert before_occ <= set(db_rows(out, "SELECT idx, engine, signature FROM occurrences"))
    assert before_sigs <= {r[0] for r in db_rows(out, "SELECT signature FROM findings")}
    seq = [s for (s,) in db_rows(out, "SELECT seq FROM timeline ORDER BY seq")]
    assert seq == list(range(1, n_target + 1))
    tl_idx = [i for (i,) in db_rows(out, "SELECT idx FROM timeline")]
    assert len(tl_idx) == len(set(tl_idx)) == n_target
    gen = [g for (g,) in db_rows(out, "SELECT generated FROM timeline ORDER BY seq")]
    assert gen == sorted(gen)
    for sig, count in db_rows(out, "SELECT signature, count FROM findings"):
        assert count == db_rows(out, "SELECT COUNT(*) FROM occurrences WHERE signature = ?", (sig,))[0][0]


def test_budget_is_a_hard_limit_even_with_a_hanging_engine(tmp_path):
    out = tmp_path / "b"
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--engines", ENGINES, "--blocks", "20..30", "--budget", "6s",
                        "--out", str(out), "--run-all", "--no-report", "--no-reduce"], capture_output=True, text=True, timeout=120)
    took = time.time() - t0
    assert p.returncode == 0, p.stderr[-2000:]
    meta = dict(db_rows(out, "SELECT key, value FROM meta"))
    stop = json.loads(meta["last_stop"])
    assert stop["reason"] == "budget reached" and stop["elapsed"] < 6 + 4
    assert took < 6 + 25  # start-up of the engine workers included


def test_findings_report_and_testdouble_faults_are_recorded(tmp_path):
    out = tmp_path / "f"
    # the paper's chooser, unsteered: the model stream whose test-double findings the checks below were written for
    p = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--engines", ENGINES, "--blocks", "5..10", "--models", "60",
                        "--chooser", "mcts", "--no-steer", "--opset", "17", "--int-inputs", "0", "--out", str(out), "--seed", "1", "--reduce-time", "1s"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "ofuzz repro --all" in p.stdout + p.stderr  # the 1 s cap leaves findings for a later export and says how to finish
    report = Path(p.stdout.strip().splitlines()[-1])
    assert report.is_file() and "<svg" in report.read_text()
    f = subprocess.run([sys.executable, "-m", "ofuzz.cli", "findings", str(out), "--json"], capture_output=True, text=True)
    rows = json.loads(f.stdout)
    double = [r for r in rows if r["engine"] == "testdouble"]
    assert double, rows
    assert all(r["count"] >= 1 for r in rows)
    kinds = {Signature.parse(r["signature"]).kind for r in double if r["status"] in ("IF", "MCF")}
    assert kinds & {"crash", "exception", "timeout", "exit", "oom"}
    # the same root cause in different models folds into one finding with a count
    assert len({r["signature"] for r in rows}) == len(rows)
    exported_by_campaign = {r["id"] for r in rows if r["repro"]}
    assert exported_by_campaign and len(exported_by_campaign) < len(rows)
    # `ofuzz repro --all` finishes the triage: every unique finding gets a folder, the earlier ones are kept
    before = {i: (out / "repros" / i / "finding.json").stat().st_mtime_ns for i in exported_by_campaign}
    a = subprocess.run([sys.executable, "-m", "ofuzz.cli", "repro", "--all", "--campaign", str(out)], capture_output=True, text=True, timeout=900)
    assert a.returncode == 0, a.stderr[-2000:]
    rows = json.loads(subprocess.run([sys.executable, "-m", "ofuzz.cli", "findings", str(out), "--json"], capture_output=True, text=True).stdout)
    assert all(r["repro"] for r in rows), [r["id"] for r in rows if not r["repro"]]
    assert before == {i: (out / "repros" / i / "finding.json").stat().st_mtime_ns for i in exported_by_campaign}
    again = subprocess.run([sys.executable, "-m", "ofuzz.cli", "repro", "--all", "--campaign", str(out)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "already have a repro folder" in again.stdout + again.stderr
    # root causes: each seeded fault of the test double is one root cause whose repro is that operator alone
    b = subprocess.run([sys.executable, "-m", "ofuzz.cli", "bugs", str(out), "--json", "--no-triage"], capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr[-2000:]
    result = json.loads(b.stdout)
    roots = [r for r in result["root_causes"] if r["engine"] == "testdouble"]
    faults = {"Sigmoid", "Tanh", "Softsign", "Softplus", "Neg", "Erf", "Sin", "Cos", "Cosh", "Sinh"}
    assert roots, result
    keys = [(tuple(r["key"]["ops"]), r["key"]["failure"]) for r in roots]
    assert len(keys) == len(set(keys))  # one fault, one root cause
    # the test double runs on the reference evaluator, so it also inherits the reference's own failures (the reference
    # fails on those repros too: it has no outputs there)
    # a seeded fault's root names its operator, or (when a loaded machine cut its reduction short) its message does
    seeded = [r for r in roots if set(r["key"]["ops"]) & faults or any(f"seeded failure on {op}" in r["key"].get("message", "") for op in faults)]
    assert seeded and all(not (out / r["repro"] / "reference.outputs.npz").is_file() for r in roots if r not in seeded), \
        [(r["key"], r["repro"]) for r in roots if r not in seeded]
    for r in roots:
        assert (out / r["repro"] / "repro.py").is_file() and r["repro_check"].startswith("reproduced"), r
    single = [r for r in seeded if len(r["key"]["ops"]) == 1]
    assert len(single) >= len(seeded) - 1  # reduced to the faulty operator alone
    assert len({(r["key"]["ops"][0], r["key"]["status"]) for r in single}) == len(single)
    assert sum(len(r["signatures"]) for r in roots) >= len(roots)
    # a known-bugs store: remembered root causes come back as known, so a new campaign reports only new ones
    known = tmp_path / "known.sqlite"
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "bugs", str(out), "--no-triage", "--known", str(known), "--remember"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "remembered" in r.stderr, r.stderr[-1000:]
    again = json.loads(subprocess.run([sys.executable, "-m", "ofuzz.cli", "bugs", str(out), "--no-triage", "--known", str(known), "--json"],
                                      capture_output=True, text=True, timeout=120).stdout)
    assert again["root_causes"] and all(r["known"] for r in again["root_causes"])
    assert all(not r.get("known") for r in result["root_causes"])


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path):
    out = tmp_path / "locked"
    p = start(out, "--budget", "60s", "--no-reduce", "--no-report")
    try:
        deadline = time.time() + 60
        while time.time() < deadline and committed(out) < 1:
            time.sleep(0.2)
        assert committed(out) >= 1
        again = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--resume", str(out), "--no-reduce", "--no-report"],
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 2 and f"ofuzz pid {p.pid}" in again.stderr and "in use" in again.stderr, again.stderr[-800:]
        assert "Traceback" not in again.stderr
        triage = subprocess.run([sys.executable, "-m", "ofuzz.cli", "bugs", str(out), "--retriage"], capture_output=True, text=True, timeout=120)
        assert triage.returncode == 2 and "in use" in triage.stderr, triage.stderr[-800:]
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    # the holder is gone (even by SIGKILL): the lock went with it, and the campaign resumes
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--resume", str(out), "--models", str(committed(out) + 3),
                        "--no-reduce", "--no-report"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]


def test_chaos_sigkill_at_random_moments_then_resume_loses_and_doubles_nothing(tmp_path):
    """20 seeded SIGKILLs of the campaign (its whole process group) at random moments, a resume after each: every
    model committed before a kill is still there after it, indices have no gaps or duplicates, and each finding's
    count equals its occurrences."""
    import random

    rnd = random.Random(20261123)
    out = tmp_path / "chaos"
    seen: set[tuple] = set()
    for i in range(20):
        started = saved_options(out)
        cmd = (["--resume", str(out)] if started else  # killed before it saved its options: it starts anew in the same folder
               ["--engines", "onnxruntime,reference", "--blocks", "2..5", "--workers", "2", "--out", str(out), "--run-all", "--seed", "7"])
        p = subprocess.Popen([sys.executable, "-m", "ofuzz.cli", "campaign", *cmd, "--models", "100000", "--no-reduce", "--no-report"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        if not seen:  # on a loaded machine start-up alone can outlast every delay: let the first models commit (CI at load 9)
            deadline = time.time() + 90
            while time.time() < deadline and p.poll() is None and not ((out / "campaign.sqlite").exists() and committed(out) >= 3):
                time.sleep(0.2)
        time.sleep(rnd.uniform(1.0, 6.0))  # start-up (engines) takes 1-3 s: some kills land in it, most in the loop
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        if not (out / "campaign.sqlite").exists():
            continue
        now = set(db_rows(out, "SELECT idx, id FROM models"))
        assert seen <= now, f"kill {i}: committed models vanished"
        seen = now
    n = len(seen) + 5
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--resume", str(out), "--models", str(n), "--no-reduce", "--no-report"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    idx = sorted(i for (i,) in db_rows(out, "SELECT idx FROM models"))
    assert idx == list(range(n)) and len(seen) >= 10
    assert sorted(i for (i,) in db_rows(out, "SELECT idx FROM timeline")) == idx
    for sig, count in db_rows(out, "SELECT signature, count FROM findings"):
        assert count == db_rows(out, "SELECT COUNT(*) FROM occurrences WHERE signature = ?", (sig,))[0][0]


def test_a_finding_first_seen_in_a_model_committed_late_keeps_the_lowest_index(tmp_path):
    """Models commit as they finish; one lost with a Ray node is judged again after later models. Its finding's first
    model must still be the lowest index, as in a run where nothing was lost (the multi-node test saw 38 for 21)."""
    from ofuzz.store.campaign_store import Store

    store = Store(tmp_path)
    t = {k: 0 for k in ("elapsed", "generated", "kept", "run", "OLC", "OTC", "IDC", "ODC", "SEC", "SPC", "unique_findings", "engine_time")}
    f = {"signature": "e|IF|timeout||?|no answer within Ns", "engine": "e", "status": "IF", "summary": "s", "detail": {}}
    for idx in (38, 21, 40):
        model = {"id": f"m{idx}", "kept": 1, "run": 1, "new_coverage": 0, "blocks": [], "preferred": [], "node_count": 1,
                 "gen_time": 0.0, "judge_time": 0.0, "reward": 0.0}
        store.commit_model(idx, model, None, [("e", "IF", 0.0, 0.0)], [{**f, "summary": f"from {idx}"}], t, [])
    (row,) = [r for r in store.findings() if r["signature"] == f["signature"]]
    store.close()
    assert (row["first_idx"], row["first_model"], row["count"], row["summary"]) == (21, "m21", 3, "from 21")


def test_a_hang_gets_no_further_model_to_triage_but_an_unnamed_failure_does(tmp_path):
    """Further models of an IF/MCF signature without an operator are triaged (a normalised message can hide several
    defects); a hang's are not: hangs are not reduced, and each costs three engine timeouts (5 of 11 export minutes)."""
    from ofuzz.triage.export_all import pending_findings
    from ofuzz.store.campaign_store import Store

    store = Store(tmp_path)
    t = {k: 0 for k in ("elapsed", "generated", "kept", "run", "OLC", "OTC", "IDC", "ODC", "SEC", "SPC", "unique_findings", "engine_time")}
    hang = {"signature": "e|MCF|timeout||?|no answer within Ns", "engine": "e", "status": "MCF", "summary": "s", "detail": {}}
    vague = {"signature": "f|IF|exception|RuntimeError|?|forward returned no outputs", "engine": "f", "status": "IF", "summary": "s", "detail": {}}
    (tmp_path / "models").mkdir(exist_ok=True)
    for idx in (1, 2):
        model = {"id": f"m{idx}", "kept": 1, "run": 1, "new_coverage": 0, "blocks": [], "preferred": [], "node_count": 1,
                 "gen_time": 0.0, "judge_time": 0.0, "reward": 0.0}
        store.commit_model(idx, model, None, [("e", "MCF", 0.0, 0.0), ("f", "IF", 0.0, 0.0)], [hang, vague], t, [])
        (tmp_path / "models" / f"m{idx}.onnx").write_bytes(b"")
    store.close()
    todo, _ = pending_findings(tmp_path, {"e", "f"})
    got = sorted((f["signature"], f.get("variant", 0)) for f in todo)
    assert got == sorted([(hang["signature"], 0), (vague["signature"], 0), (vague["signature"], 1)]), got


def test_every_model_cut_at_the_campaign_step_limit_is_re_judged(tmp_path):
    """Models cut at a campaign's step limit share one signature, but each is its own outcome under the engine's full
    limit (a hang, a failure, a wrong value or nothing): the export re-judges all of them."""
    from ofuzz.exec.engines.client import STEP_LIMIT
    from ofuzz.triage.export_all import pending_findings
    from ofuzz.store.campaign_store import Store

    store = Store(tmp_path)
    t = {k: 0 for k in ("elapsed", "generated", "kept", "run", "OLC", "OTC", "IDC", "ODC", "SEC", "SPC", "unique_findings", "engine_time")}
    cut = {"signature": f"e|MCF|timeout||?|no answer within Ns, {STEP_LIMIT}", "engine": "e", "status": "MCF", "summary": "s", "detail": {}}
    (tmp_path / "models").mkdir(exist_ok=True)
    for idx in (1, 2, 3):
        model = {"id": f"m{idx}", "kept": 1, "run": 1, "new_coverage": 0, "blocks": [], "preferred": [], "node_count": 1,
                 "gen_time": 0.0, "judge_time": 0.0, "reward": 0.0}
        store.commit_model(idx, model, None, [("e", "MCF", 0.0, 0.0)], [cut], t, [])
        (tmp_path / "models" / f"m{idx}.onnx").write_bytes(b"")
    store.close()
    todo, _ = pending_findings(tmp_path, {"e"})
    assert sorted((f["first_model"], f.get("variant", 0)) for f in todo) == [("m1", 0), ("m2", 1), ("m3", 2)]


def test_an_uncapped_export_takes_hangs_first_and_a_capped_one_keeps_the_order():
    from ofuzz.triage.export_all import export_order

    todo = [{"signature": "e|DCF|value|Conv"}, {"signature": "t|MCF|timeout||?|no answer within Ns"}, {"signature": "e|IF|crash|SIGSEGV|?|"}]
    assert [f["signature"] for f in export_order(todo, capped=False)] == [todo[1]["signature"], todo[0]["signature"], todo[2]["signature"]]
    assert export_order(todo, capped=True) == todo
