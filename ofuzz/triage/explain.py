"""Why a root cause holds what it holds: its members (each with how it joined) and the evidence of every merge.

`ofuzz bugs DIR --explain RC` prints this; a maintainer who doubts that two findings are one defect reads here which
rule joined them and on what fact, and can rerun the named repro folders to check.
"""
from __future__ import annotations

from typing import Any

from ofuzz.triage.rootcause import SEVERITY_NAMES


def find_root(roots: list[dict[str, Any]], wanted: str) -> dict[str, Any] | None:
    """The root cause whose id is `wanted` or starts with it (rc-1a2b or 1a2b); None when none or several match."""
    wanted = wanted if wanted.startswith("rc-") else f"rc-{wanted}"
    hits = [r for r in roots if r["id"].startswith(wanted)]
    return hits[0] if len(hits) == 1 else None


def explanation(root: dict[str, Any]) -> list[str]:
    """The lines `--explain` prints for one root cause."""
    k = root["key"]
    lines = [f"{root['id']}  {root['engine']}  {SEVERITY_NAMES.get(root['severity'], root['severity'])}",
             f"  key: {k['status']} {k['failure']} {'+'.join(k['ops']) or '-'}"
             + (f"  attributes: {', '.join(k['attrs'])}" if k.get("attrs") else "")
             + (f"  traits: {', '.join(k['traits'])}" if k.get("traits") else "")
             + (f"  message: {k['message']}" if k.get("message") else ""),
             f"  smallest repro: {root.get('repro') or '-'} ({root.get('nodes')} nodes; {root.get('repro_check', '')})"]
    if root.get("family_why"):
        lines.append(f"  family: {root['family_why']}")
    lines.append(f"  members ({len(root.get('members', []))}):")
    for m in root.get("members", []):
        lines.append(f"    {m['finding']}: {m['joined_by']}")
    evidence = root.get("evidence") or []
    lines.append(f"  merges ({len(evidence)}):" if evidence else "  merges: none")
    for e in evidence:
        shared = {k: v for k, v in e.items() if k not in ("rule", "why", "kind", "merged", "merged_key", "into_key", "findings")}
        lines.append(f"    {e['rule']}: {e['merged']} ({e['merged_key']}) into {e['into_key']}; findings {', '.join(e['findings'])}")
        lines.append(f"      evidence ({e.get('kind', 'structure')}): {e['why']}" + (f"; shared: {shared}" if shared else ""))
    return lines
