"""Version-differential campaigns: which root causes exist in one version of an engine and not in another.

Why: an engine team upgrading from MNN 3.5.0 to 3.6.1 wants the bugs the new
release brought (regressions) and the ones it removed (fixes), not the union.
Versions of one engine are one family for voting (`mnn@3.5.0` and `mnn`), so
when only one of them disagrees with the other engines it alone is blamed; the
other version ran the same model and passed.  Which is newer decides the word.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from packaging.version import InvalidVersion, Version

from ofuzz.core.vocab import DCP
from ofuzz.judge.compare import RULE
from ofuzz.core.npz import load_npz

_NUMBER = re.compile(r"\d+(?:\.\d+)+")


def version_of(engine: str, versions: dict[str, str]) -> Version | None:
    """`mnn@3.5.0` → 3.5.0; a plain name → the first version number its worker reported (MNN says "3.6.1")."""
    text = engine.partition("@")[2] or versions.get(engine, "")
    m = _NUMBER.search(text)
    try:
        return Version(m.group(0)) if m else None
    except InvalidVersion:
        return None


def differences(roots: list[dict[str, Any]], families: dict[str, str], versions: dict[str, str],
                status_of: Callable[[int, str], str | None],
                passes_repro: Callable[[dict[str, Any], str], bool | None] = lambda r, e: None) -> list[dict[str, Any]]:
    """Root causes blamed on one version while another version of the same engine passed (DCP) the same model.
    `passes_repro(root, engine)`: whether that version also passes the root cause's reduced repro (None: unknown);
    a difference the reduced repro does not show is left out (the versions differed on the model, not on the defect)."""
    out = []
    for r in roots:
        fam = families.get(r["engine"])
        if fam is None or r.get("first_idx") is None:
            continue
        for other in sorted(e for e, f in families.items() if f == fam and e != r["engine"]):
            if status_of(int(r["first_idx"]), other) != DCP or passes_repro(r, other) is False:
                continue
            mine, theirs = version_of(r["engine"], versions), version_of(other, versions)
            if mine is None or theirs is None or mine == theirs:
                kind = "differs"
            else:
                kind = "regression" if mine > theirs else "fixed"
            text = {"regression": f"regression in {r['engine']} ({other} passes)", "fixed": f"fixed in {other} (only {r['engine']} fails)",
                    "differs": f"only {r['engine']} fails ({other} passes)"}[kind]
            out.append({"id": r["id"], "engine": r["engine"], "other": other, "kind": kind, "text": text})
    return out


def passes_repro(campaign_dir: Path, root: dict[str, Any], engine: str) -> bool | None:
    """Did `engine` match the expected outputs on the root cause's reduced repro (its outputs are kept there)?"""
    folder = campaign_dir / (root.get("repro") or "")
    if not root.get("repro") or not (folder / "expected.npz").is_file():
        return None
    mine = folder / f"{engine}.outputs.npz"
    if not mine.is_file():
        return False  # it failed on the repro (no outputs were written for it)
    want = load_npz(folder / "expected.npz")
    return bool(want) and RULE.compare_outputs(load_npz(mine), want, sorted(want)).ok


def campaign_differences(campaign_dir: Path, roots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`differences` for a triaged campaign folder: none unless its engines include a NAME@VERSION."""
    from ofuzz.exec.engines.registry import EngineError, resolve
    from ofuzz.store.campaign_store import Store

    st = Store(campaign_dir)
    try:
        names = st.get_meta("options", {}).get("engines", [])
        if not any("@" in n for n in names):
            return []
        try:
            families = {s.name: s.family_name for s in resolve(names)}
        except EngineError:
            return []
        return differences(roots, families, st.get_meta("versions", {}) or {}, st.status_of, lambda r, e: passes_repro(campaign_dir, r, e))
    finally:
        st.close()
