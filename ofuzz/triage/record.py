"""A triaged finding's record (its folder's finding.json) as the clustering reads it: typed, loaded and dumped here.

Why a class: finding.json is written by the triage (`pipeline`, `repro`) and read by the clustering, the audits and
the report; read as a dict, each reader spelled its keys and defaults again (`info.get("reduction", {}).get(...)`),
and a key renamed on one side failed silently on the other. `FindingRecord` names the fields the clustering decides
by; everything else stays in `data`, written back unchanged by `dump`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ofuzz.core.vocab import UNCONFIRMED
from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.triage.repro_facts import ReproFacts, facts_of_folder
from ofuzz.triage.rootcause import RootKey


@dataclass
class FindingRecord:
    folder: str  # its folder under repros/: a signature's id, `<id>~k` a further model, `<id>~rN` revealed behind a rewrite
    data: dict[str, Any]  # finding.json as written
    row: dict[str, Any] = field(default_factory=dict)  # the campaign store's row of its signature
    _facts: ReproFacts | None = field(default=None, repr=False)

    @classmethod
    def load(cls, campaign_dir: Path, folder: str, row: dict[str, Any] | None = None) -> "FindingRecord | None":
        """The record of a triaged folder (None: not triaged yet)."""
        data = CampaignDir(campaign_dir).triaged(folder)
        return None if data is None else cls(folder, data, dict(row or {}))

    def dump(self, campaign_dir: Path) -> None:
        CampaignDir(campaign_dir).finding_json(self.folder).write_text(json.dumps(self.data, indent=1, default=str))

    @property
    def klass(self) -> str:
        return str(self.data.get("klass", UNCONFIRMED))

    @property
    def reduced(self) -> bool:
        """Was it reduced and keyed on its own (else it is attached to a representative's repro)?"""
        return "root" in self.data

    @property
    def root(self) -> RootKey | None:
        """The key its own reduced repro gave (before clustering)."""
        return RootKey.from_json(self.data["root"]) if self.reduced else None

    @property
    def attached_to(self) -> str:
        return str(self.data.get("attached_to") or "")

    @property
    def signature(self) -> str:
        return str(self.data["signature"])

    @property
    def nodes(self) -> int:
        """Nodes of its reduced repro (0: unknown)."""
        return int((self.data.get("reduction") or {}).get("nodes_after", 0) or 0)

    @property
    def repro_failure(self) -> dict[str, Any]:
        """How its reduced repro failed on re-run: status, category, kind, etype, failed_ops, where."""
        return dict(self.data.get("repro_failure") or {})

    @property
    def drop_fixes(self) -> list[str]:
        """Attributes whose default made the engine right on its repro (the reducer's record)."""
        return list((self.data.get("reduction") or {}).get("drop_fixes") or [])

    def version(self, engine: str) -> str | None:
        return (self.data.get("versions") or {}).get(engine)

    @property
    def family_test(self) -> dict[str, Any]:
        return dict(self.data.get("family_test") or {})

    @property
    def trigger(self) -> dict[str, list[str]]:
        return dict(self.data.get("trigger") or {})

    @property
    def revealed_behind(self) -> dict[str, Any] | None:
        return self.data.get("revealed_behind")

    @property
    def campaign_engine(self) -> str | None:
        return self.data.get("campaign_engine")

    @property
    def first(self) -> tuple[Any, Any]:
        """Its earliest model: index and id (the store row's, unless the record names its own, as a further model does)."""
        return self.data.get("first_idx", self.row.get("first_idx")), self.data.get("first_model", self.row.get("first_model"))

    def facts(self, campaign_dir: Path) -> ReproFacts | None:
        """What the clustering asks of its repro (recorded; computed once from model.onnx for an older folder)."""
        if self._facts is None:
            self._facts = facts_of_folder(CampaignDir(campaign_dir).repro(self.folder), self.data)
        return self._facts
