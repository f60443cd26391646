"""Where the project's shipped data folders (opsets/, noise/, backends/) are: one owner, so moving a module never
breaks a path."""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # the ofuzz package folder
CHECKOUT = PACKAGE.parent  # a source checkout (or site-packages when installed)


def shipped_dir(name: str) -> Path | None:
    """`name/` beside the package (source checkout) or inside it (installed); None when neither exists."""
    for cand in (CHECKOUT / name, PACKAGE / name):
        if cand.is_dir():
            return cand
    return None
