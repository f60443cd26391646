"""Version-differential campaigns: which root causes exist in one version of an engine and not in another.

Why: an engine team upgrading from MNN 3.5.0 to 3.6.1 wants the bugs the new
release brought (regressions) and the ones it removed (fixes), not the union.
Versions of one engine are one family for voting (`mnn@3.5.0` and `mnn`), so
when only one of them disagrees with the other engines it alone is blamed; the
other version ran the same model and passed.  Which is newer decides the word.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from packaging.version import InvalidVersion, Version

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
            if status_of(int(r["first_idx"]), other) != "DCP" or passes_repro(r, other) is False:
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
