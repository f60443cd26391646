"""Before/after root-cause lists of one campaign: which root causes vanished, where their findings went, what is new.

Why: a change to the triage (a merge rule, a trigger, a family) must show it lost no real defect. Triage the same saved
campaign with the old and the new code (`ofuzz bugs DIR --json > old.json`, then on a fresh copy with the new code),
and this prints every root cause that is gone with the root causes its findings are in now ("not a bug now" when a
finding left the bug list), every new root cause with how its members joined, and the change in the classes.

    python scripts/compare_roots.py old.json new.json
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer


def key_text(r: dict[str, Any]) -> str:
    k = r["key"]
    text = f"{r['engine']} {k['status']} {k['failure']} {'+'.join(k['ops']) or '-'} [{', '.join(k.get('attrs', []))}]"
    return text + (f" '{k['message'][:60]}'" if k.get("message") else "")


def load(path: Path) -> dict[str, Any]:
    """`ofuzz bugs DIR --json` output, or a one-line error naming the file and the fix."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("root_causes"), list):
            raise ValueError("no root_causes list")
        return data
    except (OSError, ValueError) as exc:
        raise SystemExit(f"compare_roots: {path} is not `ofuzz bugs DIR --json` output ({exc}); write it with that command")


def main(old_json: Path, new_json: Path) -> None:
    old, new = load(old_json), load(new_json)
    o = {r["id"]: r for r in old["root_causes"]}
    n = {r["id"]: r for r in new["root_causes"]}
    now_in = {f: r["id"] for r in new["root_causes"] for f in r.get("findings", [])}
    print(f"before {len(o)} root causes, after {len(n)}; the same id {len(set(o) & set(n))}")
    print("vanished:")
    for rid in sorted(set(o) - set(n)):
        r = o[rid]
        where = sorted({now_in.get(f, "not a bug now") for f in r.get("findings", [])})
        print(f"  {rid} {key_text(r)} findings {r.get('findings', [])} -> now in {where}")
    print("new:")
    for rid in sorted(set(n) - set(o)):
        r = n[rid]
        print(f"  {rid} {key_text(r)} findings {r['findings']} (joined by: {[m['joined_by'][:50] for m in r.get('members', [])]})")
    before, after = old.get("classes", {}), new.get("classes", {})
    for k in sorted(set(before) | set(after)):
        lost, gained = sorted(set(before.get(k, [])) - set(after.get(k, []))), sorted(set(after.get(k, [])) - set(before.get(k, [])))
        if lost or gained:
            print(f"class {k}: {len(before.get(k, []))} -> {len(after.get(k, []))}; left {lost}; came {gained}")


if __name__ == "__main__":
    typer.run(main)
