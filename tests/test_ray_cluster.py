"""A real two-node Ray cluster on this machine (`ray start --head` and two `ray start --address` nodes on 127.0.0.1, with
token authentication as `ray start` sets it up): the campaign's two actors land on different nodes, one node is killed
mid-campaign (SIGKILL to all its processes, as a machine that goes away), and nothing is lost or counted twice."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'ofuzz[ray]')")

from tests.test_ray import COMMON, committed, outcome, rows  # noqa: E402

RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive_cpu_nodes(address: str, env: dict[str, str]) -> int:
    probe = "import ray; ray.init(address=%r, log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive'] and n['Resources'].get('CPU')))"
    r = subprocess.run([sys.executable, "-c", probe % address], capture_output=True, text=True, env=env, timeout=120)
    return int(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else -1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Head (no CPUs: it only hosts the driver's side) and two one-CPU worker nodes, each in its own session to kill."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "HOME": str(tmp_path / "home")}  # the token comes from the environment: ~/.ray is left alone
    common = ["--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--block"]
    nodes: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"node{len(nodes)}.log", "wb")
        p = subprocess.Popen([RAY, "start", *args, *common], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        nodes.append(p)
        return p

    try:
        start("--head", "--port", str(port), "--num-cpus", "0", "--include-dashboard=false")
        address = f"127.0.0.1:{port}"
        for want in (1, 2):  # one at a time: two nodes joining at once on one machine left one half-started
            time.sleep(3)
            start("--address", address, "--num-cpus", "1")
            deadline = time.time() + 180
            while _alive_cpu_nodes(address, env) < want:
                assert time.time() < deadline, (tmp_path / f"node{want}.log").read_text()[-2000:]
                time.sleep(2)
        yield address, env, nodes
    finally:
        for p in reversed(nodes):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in nodes:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def test_a_driver_without_the_clusters_token_gets_one_line_naming_the_fix(cluster):
    """Runs first: the next test kills a node of the (module-wide) cluster."""
    address, env, _ = cluster
    probe = "from ofuzz.campaign import distributed\ntry:\n    distributed.connect(%r)\nexcept distributed.DistributedError as e:\n    print(e)"
    r = subprocess.run([sys.executable, "-c", probe % address], capture_output=True, text=True, timeout=180,
                       env={**env, "RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": ""})
    assert "RAY_AUTH_MODE=token" in r.stdout and len(r.stdout.strip().splitlines()) == 1, (r.stdout, r.stderr[-1500:])


def test_a_node_of_a_two_node_cluster_dies_mid_campaign_and_nothing_is_lost(tmp_path, cluster):
    address, env, nodes = cluster
    local = subprocess.run([sys.executable, "-m", "ofuzz.cli", "campaign", *COMMON, "--models", "40", "--out", str(tmp_path / "local"),
                            "--workers", "2"], capture_output=True, text=True, env=env, timeout=600)
    assert local.returncode == 0, local.stderr[-2000:]
    out = tmp_path / "ray"
    p = subprocess.Popen([sys.executable, "-m", "ofuzz.cli", "campaign", *COMMON, "--models", "40", "--out", str(out), "--ray", address,
                          "--actors", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 300
    while committed(out) < 6:
        assert time.time() < deadline and p.poll() is None, p.stderr.read()[-2000:] if p.poll() is not None else "no model committed"
        time.sleep(0.2)
    judges = json.loads(dict(rows(out, "SELECT key, value FROM meta"))["judges"])
    assert len({j["ray_node"] for j in judges.values()}) == 2, judges  # one actor per worker node
    os.killpg(nodes[-1].pid, signal.SIGKILL)  # the second worker node goes away: raylet, its workers and its actor
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-2000:]
    assert "lost" in err or "1 of 2 actors alive" in err, err[-1500:]
    got, want = outcome(out), outcome(tmp_path / "local")
    for part in want:  # same models, same verdicts, nothing lost or counted twice
        assert got[part] == want[part], (part, sorted(set(got[part]) ^ set(want[part]))[:10])
    assert len({r[0] for r in got["models"]}) == len(got["models"]) == 40
