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
from typing import Any, TypedDict

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


class RootCause(TypedDict, total=False):
    """A root cause as the clustering builds it, `ofuzz bugs --json` prints it and the store keeps it (its `detail`): the
    fields and what each holds, in one place. Built by `cluster._join`, merged by `merge_rules._merge`."""
    id: str  # "rc-" + the key's hash
    key: dict[str, Any]  # RootKey.to_json(): engine, status, failure, ops, attrs, traits, message
    severity: int  # rootcause.SEVERITY_NAMES: crash/hang 0 ... conversion failure 5
    engine: str  # the blamed engine (a converter's users' mode when a failure was moved there)
    converted_as: str  # the campaign's engine of that converter
    signatures: list[str]  # the campaign signatures it holds
    findings: list[str]  # their repro folders (repros/<id>, <id>~k, <id>~rN)
    members: list[dict[str, Any]]  # per finding: how it joined (its own key, a family, a rule)
    occurrences: int  # models that showed it in the campaign
    first_idx: int | None  # the earliest model's index and id
    first_model: str | None
    repro: str | None  # the smallest reduced repro folder, its node count, summary and repro check
    nodes: int | None
    summary: str
    repro_check: str
    held: Any  # operators its repros hold (a set while clustering, a sorted list after)
    where: Any  # converter source lines its repros failed at (set, then sorted list)
    users_where: Any  # converter source lines its repros fail at in the converter's users' mode (set, then sorted list)
    reran_as: Any  # how its repros re-ran ("IF exception:InvalidArgumentError")
    drop_fixes: list[str]  # attributes whose default made the engine right on the repro shown
    culprits_failing_alone: list[str] | None  # of an upstream repro shown: culprits that fail cut out alone (None: untested)
    culprit_where: str  # the source line the one culprit failing alone fails at ("": none, or the engine cannot tell)
    absorbed: list[str]  # root ids merged into it
    evidence: list[dict[str, Any]]  # per merge: rule, why, kind, merged, keys, findings, the shared fact
    family_why: str  # the family or unknown-shape rule that keyed it, and the failures a family covers
    family_failures: list[str]
    known: Any  # set by the known-bugs store
