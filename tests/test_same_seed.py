"""Same seed → byte-identical models and identical findings: a guard for refactors that must not change behaviour.

The digest of a 50-model campaign (one engine pool, so commit order is fixed) is stored in
tests/data/same_seed_50.json. A change that is *meant* to alter generation or verdicts regenerates it with
`OFUZZ_UPDATE_GOLDEN=1 pytest tests/test_same_seed.py` and says so in its commit message.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "data" / "same_seed_50.json"


def campaign_digest(out: Path) -> dict[str, object]:
    """What must not move: every model file's bytes, every model row, every engine status, every finding."""
    con = sqlite3.connect(str(out / "campaign.sqlite"))
    try:
        models = con.execute("SELECT idx, id, kept, run, new_coverage, blocks, preferred, node_count FROM models ORDER BY idx").fetchall()
        runs = con.execute("SELECT idx, engine, status FROM engine_runs ORDER BY idx, engine").fetchall()
        findings = con.execute("SELECT signature, engine, status, op, first_idx, count, blamed FROM findings ORDER BY signature").fetchall()
        occurrences = con.execute("SELECT idx, engine, signature FROM occurrences ORDER BY idx, engine").fetchall()
    finally:
        con.close()
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted((out / "models").iterdir())
             if p.name.endswith((".onnx", ".inputs.npz"))}

    def h(rows: object) -> str:
        return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]

    return {"models": h(models), "engine_runs": h(runs), "findings": h(findings), "occurrences": h(occurrences),
            "files": files, "counts": {"models": len(models), "findings": len(findings)}}


def test_same_seed_same_models_and_findings(tmp_path):
    out = tmp_path / "c"
    p = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", "--engines", "onnxruntime,reference,testdouble",
                        "--models", "50", "--seed", "3", "--workers", "1", "--blocks", "3..8", "--chooser", "mcts", "--no-steer", "--opset", "17", "--int-inputs", "0",
                        "--no-reduce", "--no-report",
                        "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    got = campaign_digest(out)
    if os.environ.get("OFUZZ_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert got["counts"] == want["counts"]
    assert got["files"] == want["files"], "generated model bytes changed"
    assert {k: got[k] for k in ("models", "engine_runs", "findings", "occurrences")} == \
           {k: want[k] for k in ("models", "engine_runs", "findings", "occurrences")}
