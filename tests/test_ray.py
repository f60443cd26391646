"""Campaigns on a real local Ray instance (ray.init on 127.0.0.1, started by `--ray local`): ≥ 2 actors, one killed mid-campaign; nothing lost, nothing
counted twice, resume works, and the findings equal a local run's with the same seed and --models."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'ofuzz[ray]')")

ENGINES = "onnxruntime,reference,testdouble"
COMMON = ["--engines", ENGINES, "--seed", "5", "--chooser", "random", "--no-steer", "--blocks", "3..8", "--no-reduce", "--no-report",
          "--timeout", "5"]
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


def rows(out: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(str(out / "campaign.sqlite"))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def committed(out: Path) -> int:
    """Models committed so far; 0 while the store is still being created (the file exists before its tables do)."""
    if not (out / "campaign.sqlite").exists():
        return 0
    try:
        return rows(out, "SELECT COUNT(*) FROM models")[0][0]
    except sqlite3.OperationalError:
        return 0


def outcome(out: Path) -> dict[str, list[tuple]]:
    return {"models": rows(out, "SELECT idx, id, kept, run, blocks FROM models ORDER BY idx"),
            "runs": rows(out, "SELECT idx, engine, status FROM engine_runs ORDER BY idx, engine"),
            "findings": rows(out, "SELECT signature, count, first_idx FROM findings ORDER BY signature")}


def campaign(out: Path, *args: str, on_ray: bool = False) -> subprocess.Popen[str]:
    extra = ["--ray", "local", "--actors", "2"] if on_ray else ["--workers", "2"]  # local: a real Ray instance on 127.0.0.1
    return subprocess.Popen([sys.executable, "-m", "ofuzz.cli", "campaign", *COMMON, "--out", str(out), *args, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def test_actor_killed_mid_campaign_loses_nothing_and_matches_a_local_run(tmp_path):
    local = campaign(tmp_path / "local", "--models", "30")
    assert local.wait(timeout=600) == 0, local.stderr.read()[-2000:]
    out = tmp_path / "ray"
    p = campaign(out, "--models", "30", on_ray=True)
    deadline = time.time() + 300
    while time.time() < deadline:  # wait for a few committed models, then kill one actor (SIGKILL: as if its node died)
        if committed(out) >= 6:
            break
        time.sleep(0.2)
    judges = json.loads(dict(rows(out, "SELECT key, value FROM meta"))["judges"])
    assert len(judges) == 2, judges
    os.kill(next(iter(judges.values()))["pid"], signal.SIGKILL)
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-2000:]
    assert "1 of 2 actors alive" in err or "lost" in err, err[-1500:]
    got = outcome(out)
    assert got == outcome(tmp_path / "local")  # same models, same verdicts, nothing lost or counted twice
    assert len({r[0] for r in got["models"]}) == len(got["models"]) == 30
    # resume on Ray goes on from where it stopped exactly as a local resume does (a resumed campaign reseeds its
    # chooser from the count done, so it is compared with a resumed local campaign, not an uninterrupted one)
    r = campaign(out, "--models", "40", "--resume", str(out), on_ray=True)
    assert r.wait(timeout=600) == 0, r.stderr.read()[-2000:]
    again = campaign(tmp_path / "local", "--models", "40", "--resume", str(tmp_path / "local"))
    assert again.wait(timeout=600) == 0
    resumed = outcome(out)
    assert resumed == outcome(tmp_path / "local") and len(resumed["models"]) == 40


def test_without_ray_installed_the_option_says_how_to_install(tmp_path, monkeypatch):
    from ofuzz.campaign import distributed

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without the extra sees
    with pytest.raises(distributed.DistributedError, match=r"pip install 'ofuzz\[ray\]'"):
        distributed.connect("local")


def test_the_export_fans_out_over_actors_and_matches_a_local_export(tmp_path):
    """The campaign's export phase on 2 actors writes the same repro folders with the same classes as a local export."""
    def klasses(out: Path) -> dict[str, str]:
        return {p.parent.name: json.loads(p.read_text())["klass"] for p in (out / "repros").glob("*/finding.json")}

    args = ["--engines", ENGINES, "--seed", "5", "--chooser", "random", "--no-steer", "--blocks", "3..8", "--no-report", "--timeout", "5",
            "--models", "10"]
    local = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", *args, "--out", str(tmp_path / "local"), "--workers", "2"],
                           capture_output=True, text=True, env=ENV, timeout=900)
    assert local.returncode == 0, local.stderr[-2000:]
    on_ray = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", *args, "--out", str(tmp_path / "ray"), "--ray", "local", "--actors", "2"],
                            capture_output=True, text=True, env=ENV, timeout=900)
    assert on_ray.returncode == 0, on_ray.stderr[-2000:]
    assert "export on Ray: 2 of 2 actors alive" in on_ray.stdout + on_ray.stderr, (on_ray.stdout + on_ray.stderr)[-1500:]
    want = klasses(tmp_path / "local")
    assert want and klasses(tmp_path / "ray") == want
    for d in (tmp_path / "ray" / "repros").iterdir():
        if json.loads((d / "finding.json").read_text()).get("klass") == "bug" and "attached_to" not in json.loads((d / "finding.json").read_text()):
            assert (d / "model.onnx").is_file() and (d / "repro.py").is_file() and (d / "REPORT.md").is_file(), d
