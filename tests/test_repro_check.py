"""The repro check runs repro.py files in one long-lived interpreter per engine and still says what a fresh
`python repro.py` would: exit 1 reproduced, 0 not, a crash or a hang reproduced — real processes, tiny scripts."""
from __future__ import annotations

from pathlib import Path

import pytest

from ofuzz.exec.engines.registry import resolve
from ofuzz.triage.repro_check import check_repro, close_runners

SCRIPTS = {
    "reproduces": "import sys\nsys.exit(1)\n",
    "passes": "import sys\nsys.exit(0)\n",
    "segfaults": "import ctypes\nctypes.string_at(0)\n",
    "hangs": "import time\ntime.sleep(60)\n",
    "state": "import sys\nimport engine_adapter\nsys.exit(engine_adapter.CODE)\n",
    # wrong on its fourth run only, as an engine reading memory it never wrote is wrong on some runs
    "flaky": "import pathlib, sys\nc = pathlib.Path(__file__).with_name('runs')\nn = int(c.read_text()) + 1 if c.exists() else 1\n"
             "c.write_text(str(n))\nsys.exit(1 if n == 4 else 0)\n",
}


@pytest.fixture()
def spec():
    yield resolve(["reference"])[0]  # the core environment's Python
    close_runners()


def folder(tmp: Path, name: str, body: str, adapter: str = "") -> Path:
    d = tmp / name
    d.mkdir()
    (d / "repro.py").write_text("import os, sys\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n" + body)
    if adapter:
        (d / "engine_adapter.py").write_text(adapter)
    return d


def test_verdicts_match_a_fresh_process(tmp_path, spec):
    assert check_repro(folder(tmp_path, "a", SCRIPTS["reproduces"]), spec) == "reproduced"
    assert check_repro(folder(tmp_path, "b", SCRIPTS["passes"]), spec) == "not reproduced"
    assert check_repro(folder(tmp_path, "c", SCRIPTS["segfaults"]), spec).startswith("reproduced (killed by signal")
    assert check_repro(folder(tmp_path, "d", SCRIPTS["reproduces"]), spec) == "reproduced"  # a new runner after the crash
    assert check_repro(folder(tmp_path, "e", SCRIPTS["hangs"]), spec, timeout=2) == "reproduced (hang: repro.py timed out)"


def test_each_folder_gets_its_own_adapter_module(tmp_path, spec):
    # repro.py imports `engine_adapter` from its own folder: a cached module from the previous folder must not leak
    assert check_repro(folder(tmp_path, "x", SCRIPTS["state"], "CODE = 1\n"), spec) == "reproduced"
    assert check_repro(folder(tmp_path, "y", SCRIPTS["state"], "CODE = 0\n"), spec) == "not reproduced"
    assert check_repro(folder(tmp_path, "z", SCRIPTS["state"], "CODE = 1\n"), spec) == "reproduced"


def test_a_repro_that_reproduces_on_some_runs_only_is_reproduced_and_says_so(tmp_path, spec):
    """MNN's Resize on its unsupported tf_crop_and_resize path was wrong on 1 of 6 runs of its repro.py: two runs right
    had made a finding the campaign and its re-run both showed `unconfirmed`. A few more fresh runs find it, and the
    verdict says the engine is not deterministic there; a repro right on every run stays not reproduced."""
    flaky = folder(tmp_path, "f", SCRIPTS["flaky"])
    assert check_repro(flaky, spec) == "reproduced on run 4 of repro.py (the engine is not deterministic on it)"
    assert (flaky / "runs").read_text() == "4"
    assert check_repro(folder(tmp_path, "g", SCRIPTS["passes"]), spec) == "not reproduced"
