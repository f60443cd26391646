"""Run every engine family's test (backends/<engine>/triage.yaml `test:`) on the one-node repros of saved campaigns that
the family holds by its operators, and print which the engine then gets right.

A family is a hypothesis ("these operators share one code path, and this is its defect"); its test is a rewrite that
takes the blamed trigger away. A member the rewrite does not fix is another defect that the family would have hidden.

    python scripts/family_tests.py CAMPAIGN_DIR [CAMPAIGN_DIR ...]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ofuzz.core.npz import load_npz  # noqa: E402
from ofuzz.exec.engines.registry import resolve  # noqa: E402
from ofuzz.exec.runner import EnginePool  # noqa: E402
from ofuzz.judge.judging import Policy  # noqa: E402
from ofuzz.triage.family_test import families_for, run_family_test  # noqa: E402
from ofuzz.triage.repro_facts import facts_of  # noqa: E402
from ofuzz.triage.rootcause import RootKey  # noqa: E402


def members(dirs: list[Path], policy: Policy) -> list[tuple[Path, dict, RootKey, str]]:
    """(repro folder, finding.json, root key, family name) of every one-node bug repro a tested family holds."""
    out = []
    for d in dirs:
        for fj in sorted((d / "repros").glob("*/finding.json")):
            info = json.loads(fj.read_text())
            if info.get("klass") != "bug" or "root" not in info or not (fj.parent / "model.onnx").is_file():
                continue
            key = RootKey.from_json(info["root"])
            fams = [f for f in families_for(policy.noise, key, facts_of(onnx.load(str(fj.parent / "model.onnx"))).one_node,
                                            (info.get("versions") or {}).get(key.engine)) if f.tested]
            if fams:
                out.append((fj.parent, info, key, "|".join(f.name for f in fams)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("campaigns", nargs="+", type=Path)
    args = ap.parse_args()
    policy = Policy.default()
    found = members(args.campaigns, policy)
    engines = sorted({e for _, info, _, _ in found for e in (info.get("versions") or {})})
    tally: Counter[tuple[str, bool]] = Counter()
    with tempfile.TemporaryDirectory() as tmp, EnginePool(resolve(engines), Path(tmp)) as pool:
        pool.start()
        for folder, info, key, name in found:
            got = run_family_test(pool, onnx.load(str(folder / "model.onnx")), load_npz(folder / "inputs.npz"), key.engine, policy,
                                info["status"], key, (info.get("versions") or {}).get(key.engine))
            fixed = bool(got and got.get("fixed"))
            name = got["family"] if fixed and got else name  # which of its candidate families the test showed
            tally[(name, fixed)] += 1
            print(f"{name:36} {folder.parent.parent.name}/{folder.name:14} {key.status} {key.failure:10} {'+'.join(key.ops):18} "
                  f"{'fixed' if fixed else 'STILL WRONG'}{' (' + got['note'] + ')' if got and got.get('note') else ''}", flush=True)
    print("\nfamily                               fixed  still wrong")
    for name in sorted({n for n, _ in tally}):
        print(f"{name:36} {tally[(name, True)]:5}  {tally[(name, False)]:5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
