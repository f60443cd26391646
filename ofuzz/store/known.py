"""The known-bugs store: root causes a team has already seen, kept next to its campaigns.

Why: a nightly campaign that re-reports last week's bugs gets ignored; peers keep
hand-written ignore lists.  This is a small SQLite file (`--known PATH`): a
campaign's triage marks the root causes found there as known and reports only
the new ones; `ofuzz bugs DIR --known PATH --remember` adds a campaign's root
causes (and its capability gaps) to it.
"""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS known_root_causes (
  id TEXT PRIMARY KEY, engine TEXT NOT NULL, key TEXT NOT NULL, summary TEXT, campaign TEXT, added_at REAL NOT NULL, note TEXT
);
CREATE TABLE IF NOT EXISTS known_repros (id TEXT NOT NULL, file TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (id, file));
CREATE TABLE IF NOT EXISTS known_gaps (key TEXT PRIMARY KEY, engine TEXT NOT NULL, op TEXT, attribute TEXT, campaign TEXT, added_at REAL NOT NULL);
"""
REPRO_FILES = ("model.onnx", "inputs.npz", "expected.npz", "finding.json")  # what `ofuzz replay` needs, with every *.outputs.npz
COLUMNS = {"known_root_causes": {"id", "engine", "key", "summary", "campaign", "added_at", "note"},
           "known_gaps": {"key", "engine", "op", "attribute", "campaign", "added_at"}}


class KnownError(RuntimeError):
    """The known-bugs store is unusable; one line naming the file and the fix."""


class KnownBugs:
    def __init__(self, path: Path, create: bool = True) -> None:
        self.path = Path(path)
        if not self.path.exists() and not create:
            raise KnownError(f"{self.path}: no known-bugs store here; create one with `ofuzz bugs DIR --known {self.path} --remember`")
        try:
            self.db = sqlite3.connect(str(self.path), isolation_level=None)
            self.db.executescript(SCHEMA)
            for table, cols in COLUMNS.items():
                have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
                if not cols <= have:
                    raise KnownError(f"{self.path}: table {table} lacks columns {sorted(cols - have)}; this is not an ofuzz known-bugs store "
                                     "(restore it or pass another --known)")
            bad = self.db.execute("SELECT id FROM known_root_causes WHERE json_valid(key) = 0 LIMIT 1").fetchone()
            if bad:
                raise KnownError(f"{self.path}: entry {bad[0]} has a malformed key; delete that row or restore the file")
        except sqlite3.DatabaseError as exc:
            raise KnownError(f"{self.path}: not a known-bugs store ({exc}); restore it from a copy or pass another --known") from None

    def known_ids(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT id FROM known_root_causes")}

    def known_gaps(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM known_gaps")}

    def remember(self, roots: list[dict[str, Any]], gaps: list[dict[str, Any]], campaign: str, folder: Path | None = None) -> int:
        """Add root causes and capability gaps; returns how many root causes were new.  With the campaign `folder`, each
        root cause's repro files are kept too, so `ofuzz replay STORE` works after the campaign folder is gone."""
        before = len(self.known_ids())
        now = time.time()
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for r in roots:
                cur.execute("INSERT OR IGNORE INTO known_root_causes VALUES (?,?,?,?,?,?,?)",
                            (r["id"], r["engine"], json.dumps(r["key"]), r.get("summary", ""), campaign, now, ""))
                repro = (folder / r["repro"]) if folder is not None and r.get("repro") else None
                if repro is not None and repro.is_dir() and not self._has_repro(cur, r["id"]):
                    for f in [*REPRO_FILES, *sorted(p.name for p in repro.glob("*.outputs.npz"))]:
                        if (repro / f).is_file():
                            cur.execute("INSERT INTO known_repros VALUES (?,?,?)", (r["id"], f, (repro / f).read_bytes()))
            for g in gaps:
                cur.execute("INSERT OR IGNORE INTO known_gaps VALUES (?,?,?,?,?,?)", (g["key"], g["engine"], g.get("op"), g.get("attribute"), campaign, now))
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return len(self.known_ids()) - before

    @staticmethod
    def _has_repro(cur: sqlite3.Cursor, rc_id: str) -> bool:
        return cur.execute("SELECT 1 FROM known_repros WHERE id = ? LIMIT 1", (rc_id,)).fetchone() is not None

    def repros(self) -> list[tuple[str, dict[str, bytes]]]:
        """Each remembered root cause's repro files (id, {file name: bytes}), in id order."""
        out: dict[str, dict[str, bytes]] = {}
        for rc_id, f, data in self.db.execute("SELECT id, file, data FROM known_repros ORDER BY id, file"):
            out.setdefault(rc_id, {})[f] = bytes(data)
        return list(out.items())

    def close(self) -> None:
        self.db.close()
