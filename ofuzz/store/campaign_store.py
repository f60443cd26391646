"""The campaign store: one SQLite file plus model files, committed one model at a time.

Each judged (or discarded) model is committed in a single transaction — its
row, coverage records, engine timings, finding occurrences, the timeline row
and the chooser's state — so a campaign killed at any instant (SIGKILL
included) resumes from the last commit with nothing lost or counted twice.
Files are written before the commit and simply rewritten if a model is redone.
"""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

from ofuzz.core.vocab import DCP
from ofuzz.store.campaign_dir import MODELS, STORE

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS models (
  idx INTEGER PRIMARY KEY, id TEXT NOT NULL, kept INTEGER NOT NULL, run INTEGER NOT NULL,
  new_coverage INTEGER NOT NULL, blocks TEXT NOT NULL, preferred TEXT NOT NULL, node_count INTEGER NOT NULL,
  gen_time REAL NOT NULL, judge_time REAL NOT NULL, reward REAL NOT NULL, committed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS records (idx INTEGER PRIMARY KEY, records TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS engine_runs (
  idx INTEGER NOT NULL, engine TEXT NOT NULL, status TEXT NOT NULL, prepare_time REAL, run_time REAL,
  PRIMARY KEY (idx, engine)
);
CREATE TABLE IF NOT EXISTS findings (
  signature TEXT PRIMARY KEY, engine TEXT NOT NULL, status TEXT NOT NULL, op TEXT, summary TEXT NOT NULL,
  first_idx INTEGER NOT NULL, first_model TEXT NOT NULL, count INTEGER NOT NULL, blamed INTEGER NOT NULL, detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS occurrences (
  idx INTEGER NOT NULL, engine TEXT NOT NULL, signature TEXT NOT NULL, PRIMARY KEY (idx, engine)
);
CREATE TABLE IF NOT EXISTS timeline (
  seq INTEGER PRIMARY KEY, idx INTEGER NOT NULL UNIQUE, elapsed REAL NOT NULL, generated INTEGER NOT NULL,
  kept INTEGER NOT NULL, run INTEGER NOT NULL, olc REAL, otc REAL, idc REAL, odc REAL, sec REAL, spc REAL,
  unique_findings INTEGER NOT NULL, engine_time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chooser_nodes (id INTEGER PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS root_causes (
  id TEXT PRIMARY KEY, severity INTEGER NOT NULL, engine TEXT NOT NULL, key TEXT NOT NULL, signatures TEXT NOT NULL,
  occurrences INTEGER NOT NULL, first_model TEXT, repro TEXT, nodes INTEGER, summary TEXT, detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS triage (signature TEXT PRIMARY KEY, klass TEXT NOT NULL, root TEXT, detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS models_by_id ON models (id);
CREATE INDEX IF NOT EXISTS occurrences_by_signature ON occurrences (signature);
"""


class StoreError(RuntimeError):
    """The campaign store cannot be used; the message says why and what to do (one line)."""


class FolderLock:
    """An exclusive lock on a campaign folder for the process that writes it (a campaign, a triage): a second writer is
    refused with the holder's pid and host instead of both crashing on the shared work folder and store."""

    def __init__(self, root: Path) -> None:
        import fcntl
        import os
        import socket

        root.mkdir(parents=True, exist_ok=True)
        self.path = root / "campaign.lock"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self.fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(self.fd)
            raise StoreError(f"{root} is in use by {holder}; wait for it to finish or stop it, or use another folder") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"ofuzz pid {os.getpid()} on {socket.gethostname()}".encode(), 0)

    def release(self) -> None:
        import os

        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


class Store:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / MODELS).mkdir(exist_ok=True)
        path = self.root / STORE
        try:
            self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a usable campaign store ({exc}); it was left untouched — restore it from a copy, "
                             f"or start a new campaign with another --out") from None

    # -- meta -------------------------------------------------------------------
    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_meta(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    # -- reading ------------------------------------------------------------------
    def committed_indices(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT idx FROM models")}

    def counts(self) -> dict[str, int]:
        g, k, r = self.db.execute("SELECT COUNT(*), COALESCE(SUM(kept),0), COALESCE(SUM(run),0) FROM models").fetchone()
        return {"generated": g, "kept": k, "run": r}

    def all_records(self) -> Iterable[list[Any]]:
        for (recs,) in self.db.execute("SELECT r.records FROM records r JOIN models m ON m.idx = r.idx WHERE m.kept = 1 ORDER BY r.idx"):
            yield json.loads(recs)

    def signatures(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT signature FROM findings")}

    def chooser_nodes(self) -> list[dict[str, Any]]:
        return [json.loads(r[0]) for r in self.db.execute("SELECT state FROM chooser_nodes ORDER BY id")]

    def last_elapsed(self) -> float:
        row = self.db.execute("SELECT MAX(elapsed) FROM timeline").fetchone()
        return float(row[0] or 0.0)

    def findings(self) -> list[dict[str, Any]]:
        cols = [d[1] for d in self.db.execute("PRAGMA table_info(findings)")]
        rows = self.db.execute("SELECT * FROM findings ORDER BY engine, status, count DESC").fetchall()
        out = []
        for r in rows:
            d = dict(zip(cols, r))
            d["detail"] = json.loads(d["detail"])
            out.append(d)
        return out

    def timeline(self) -> list[dict[str, Any]]:
        cols = [d[1] for d in self.db.execute("PRAGMA table_info(timeline)")]
        return [dict(zip(cols, r)) for r in self.db.execute("SELECT * FROM timeline ORDER BY seq")]

    def engine_stats(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for eng, st, n, t in self.db.execute("SELECT engine, status, COUNT(*), SUM(prepare_time + run_time) FROM engine_runs GROUP BY engine, status"):
            d = out.setdefault(eng, {"time": 0.0})
            d[st] = n
            d["time"] += t or 0.0
        return out

    def root_causes(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT id, severity, engine, key, signatures, occurrences, first_model, repro, nodes, summary, detail "
                               "FROM root_causes ORDER BY severity, engine, occurrences DESC, id").fetchall()
        out = []
        for r in rows:
            d = dict(zip(("id", "severity", "engine", "key", "signatures", "occurrences", "first_model", "repro", "nodes", "summary", "detail"), r))
            for k in ("key", "signatures", "detail"):
                d[k] = json.loads(d[k])
            out.append(d)
        return out

    def triage_rows(self) -> list[dict[str, Any]]:
        return [{"signature": s, "klass": k, "root": r, "detail": json.loads(d)}
                for s, k, r, d in self.db.execute("SELECT signature, klass, root, detail FROM triage ORDER BY signature")]

    def occurrence_models(self, signature: str, limit: int) -> list[tuple[int, str]]:
        """(idx, model id) of the first `limit` models that showed this signature."""
        return self.db.execute("SELECT o.idx, m.id FROM occurrences o JOIN models m ON m.idx = o.idx WHERE o.signature = ? "
                               "ORDER BY o.idx LIMIT ?", (signature, limit)).fetchall()

    def blamed_where_passed(self, blamed_prefix: str, passed_engine: str) -> dict[str, list[tuple[int, str]]]:
        """signature -> [(idx, model id)] of findings blamed on engines named `blamed_prefix`* in models where
        `passed_engine` passed (DCP): e.g. ARM-only MNN defects, where x86 MNN ran the same model correctly."""
        out: dict[str, list[tuple[int, str]]] = {}
        for sig, idx, mid in self.db.execute(
                "SELECT o.signature, o.idx, m.id FROM occurrences o JOIN engine_runs r ON r.idx = o.idx AND r.engine = ? "
                "JOIN models m ON m.idx = o.idx JOIN findings f ON f.signature = o.signature "
                "WHERE o.engine LIKE ? AND r.status = ? AND f.blamed = 1 ORDER BY o.idx", (passed_engine, DCP, blamed_prefix + "%")):
            out.setdefault(sig, []).append((idx, mid))
        return out

    def status_of(self, idx: int, engine: str) -> str | None:
        """An engine's status (DCP, DCF, IF, MCF, SKIP) on model `idx`, or None if it did not run it."""
        row = self.db.execute("SELECT status FROM engine_runs WHERE idx = ? AND engine = ?", (idx, engine)).fetchone()
        return row[0] if row else None

    def is_finding_model(self, model_id: str) -> bool:
        row = self.db.execute("SELECT 1 FROM occurrences o JOIN models m ON m.idx = o.idx WHERE m.id=? LIMIT 1", (model_id,)).fetchone()
        return row is not None

    # -- writing ------------------------------------------------------------------
    def replace_triage(self, roots: list[dict[str, Any]], per_signature: list[tuple[str, str, str | None, dict[str, Any]]]) -> None:
        """Replace the derived tables in one transaction (classes are recomputed; raw findings are never touched)."""
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.execute("DELETE FROM root_causes")
            cur.execute("DELETE FROM triage")
            for r in roots:
                cur.execute("INSERT INTO root_causes VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                            (r["id"], r["severity"], r["engine"], json.dumps(r["key"]), json.dumps(r["signatures"]), r["occurrences"],
                             r.get("first_model"), r.get("repro"), r.get("nodes"), r.get("summary", ""),
                             json.dumps({k: v for k, v in r.items() if k not in ("key", "signatures")}, default=str)))
            cur.executemany("INSERT INTO triage VALUES (?,?,?,?)", [(s, k, root, json.dumps(d, default=str)) for s, k, root, d in per_signature])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    # -- writing models -------------------------------------------------------------
    def commit_model(
        self, idx: int, model: dict[str, Any], records: list[list[Any]] | None, engine_runs: list[tuple[str, str, float, float]],
        findings: list[dict[str, Any]], timeline: dict[str, Any], chooser_rows: list[dict[str, Any]],
    ) -> list[str]:
        """Commit one model atomically; returns the signatures that are new to the campaign."""
        new: list[str] = []
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.execute(
                "INSERT INTO models VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (idx, model["id"], int(model["kept"]), int(model["run"]), int(model["new_coverage"]), json.dumps(model["blocks"]),
                 json.dumps(model["preferred"]), model["node_count"], model["gen_time"], model["judge_time"], model["reward"], time.time()),
            )
            if records is not None:
                cur.execute("INSERT INTO records VALUES (?, ?)", (idx, json.dumps(records)))
            for eng, status, pt, rt in engine_runs:
                cur.execute("INSERT INTO engine_runs VALUES (?,?,?,?,?)", (idx, eng, status, pt, rt))
            for f in findings:
                row = cur.execute("SELECT count FROM findings WHERE signature=?", (f["signature"],)).fetchone()
                if row is None:
                    cur.execute("INSERT INTO findings VALUES (?,?,?,?,?,?,?,?,?,?)",
                                (f["signature"], f["engine"], f["status"], f.get("op"), f["summary"], idx, model["id"], 1,
                                 int(f.get("blamed", True)), json.dumps(f.get("detail", {}), default=str)))
                    new.append(f["signature"])
                else:
                    cur.execute("UPDATE findings SET count = count + 1 WHERE signature=?", (f["signature"],))
                    # models commit as they finish (a model lost with a Ray node is judged again later): the first
                    # model is the lowest index, as in a run where nothing was lost
                    cur.execute("UPDATE findings SET first_idx=?, first_model=?, op=?, summary=?, blamed=?, detail=? WHERE signature=? AND first_idx > ?",
                                (idx, model["id"], f.get("op"), f["summary"], int(f.get("blamed", True)),
                                 json.dumps(f.get("detail", {}), default=str), f["signature"], idx))
                cur.execute("INSERT INTO occurrences VALUES (?,?,?)", (idx, f["engine"], f["signature"]))
            seq = cur.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM timeline").fetchone()[0]
            t = timeline
            cur.execute("INSERT INTO timeline VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (seq, idx, t["elapsed"], t["generated"], t["kept"], t["run"], t["OLC"], t["OTC"], t["IDC"], t["ODC"],
                         t["SEC"], t["SPC"], t["unique_findings"] + len(new), t["engine_time"]))
            cur.executemany("INSERT OR REPLACE INTO chooser_nodes VALUES (?, ?)", [(r["id"], json.dumps(r)) for r in chooser_rows])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return new

    def close(self) -> None:
        self.db.close()
