"""Which root causes need an ONNX version after 17: their reduced repro holds an operator version introduced later.

Why a script: issue 13 asks which defects only models of opset 18 and later can show (Pad's `axes` input, Reduce*
`axes` as an input, the dilated pools, Col2Im, AffineGrid, DFT's axis input, GroupNormalization-21, ...). A root
cause counts when one node of its repro has a schema version above the one opset 17 gives that operator (or the
operator does not exist at 17); the others would have shown at opset 17 too.

    ofuzz bugs DIR --json > bugs.json
    python scripts/newer_opset_roots.py DIR bugs.json
"""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import typer

BASE = 17


def newer_versions(model: onnx.ModelProto) -> list[str]:
    """`Op-version` for every node whose schema at the model's opset is newer than at opset 17."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), BASE)
    out = []
    for n in model.graph.node:
        try:
            now = onnx.defs.get_schema(n.op_type, opset, n.domain).since_version
        except onnx.defs.SchemaError:
            continue
        try:
            then = onnx.defs.get_schema(n.op_type, BASE, n.domain).since_version
        except onnx.defs.SchemaError:
            then = None
        if then != now and f"{n.op_type}-{now}" not in out:
            out.append(f"{n.op_type}-{now}")
    return out


def main(campaign: Path, bugs_json: Path) -> None:
    roots = json.loads(bugs_json.read_text())["root_causes"]
    by_opset: dict[int, int] = {}
    hits = []
    for r in roots:
        path = campaign / (r.get("repro") or "") / "model.onnx"
        if not r.get("repro") or not path.is_file():
            continue
        m = onnx.load(str(path), load_external_data=False)
        opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), BASE)
        by_opset[opset] = by_opset.get(opset, 0) + 1
        if newer := newer_versions(m):
            hits.append((r, opset, newer))
    print(f"{len(roots)} root causes; repros per opset: " + ", ".join(f"{k}: {v}" for k, v in sorted(by_opset.items())))
    print(f"{len(hits)} need an operator version after {BASE}:")
    for r, opset, newer in hits:
        k = r["key"]
        print(f"  {r['id']}\t{r['engine']}\t{k['status']} {k['failure']}\topset {opset}\t{', '.join(newer)}\t{r['repro']}\t{(r.get('summary') or '')[:120]}")


if __name__ == "__main__":
    typer.run(main)
