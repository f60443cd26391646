"""The yardstick's corpus recall (scripts/bench_bugs.py `covered`): which confirmed bugs a campaign's root causes hold."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_bugs import covered  # noqa: E402

CONV1D = {"engine": "mnn", "status": "DCF", "op": "Conv", "category": "shape"}


def root(status: str, ops: list[str], engine: str = "mnn", failures: list[str] | None = None) -> dict:
    r = {"key": {"engine": engine, "status": status, "ops": ops}}
    if failures is not None:
        r["family_failures"] = failures
    return r


def test_a_plain_root_covers_its_engine_status_and_operator():
    assert covered(CONV1D, [root("DCF", ["Conv"])])
    assert not covered(CONV1D, [root("DCF", ["Conv"], engine="tensorflow"), root("MCF", ["Conv"]), root("DCF", ["Gemm"])])


def test_a_family_covers_the_bugs_of_its_operators_and_failure_classes():
    """A family root is keyed by its name: MNN's 1-D Conv bug must still count once the family merged it."""
    fam = root("family", ["Conv", "ConvTranspose"], failures=["shape"])
    assert covered(CONV1D, [fam])
    assert not covered({**CONV1D, "category": "value"}, [fam])  # a wrong value of Conv is not this family's
    assert covered({"engine": "mnn", "status": "IF", "op": "Mean"}, [root("family", ["Sum", "Mean"], failures=[])])


def test_with_the_campaign_a_bug_counts_only_where_a_members_own_repro_shows_it(tmp_path):
    """Corpus recall counted per bug by a root whose member's own reduced repro shows it, not by a family's op list."""
    import json

    (tmp_path / "repros" / "f1").mkdir(parents=True)
    (tmp_path / "repros" / "f1" / "finding.json").write_text(json.dumps({"root": {"status": "DCF", "failure": "shape", "ops": ["Conv"]}}))
    (tmp_path / "repros" / "f2").mkdir(parents=True)
    (tmp_path / "repros" / "f2" / "finding.json").write_text(json.dumps({"root": {"status": "DCF", "failure": "value", "ops": ["ConvTranspose"]}}))
    fam = {**root("family", ["Conv", "ConvTranspose"], failures=["shape"]), "engine": "mnn"}
    fam["members"] = [{"finding": "f2", "joined_by": "its own reduced repro"}]
    assert covered(CONV1D, [fam])  # by the keys alone: the family's operator list holds Conv
    assert not covered(CONV1D, [fam], tmp_path)  # no member's own repro is a wrong Conv shape
    fam["members"].append({"finding": "f1", "joined_by": "its own reduced repro"})
    assert covered(CONV1D, [fam], tmp_path)
