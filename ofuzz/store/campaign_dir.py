"""One owner for a campaign folder's layout: every path in it is named here, nowhere else.

    <campaign>/campaign.sqlite           the store (raw findings, coverage, triage)
    <campaign>/models/<id>.onnx          a model that gave a finding, with <id>.inputs.npz
    <campaign>/repros/<finding id>/      a triaged finding: finding.json, and for a bug its reduced repro
    <campaign>/repros/<id>~k, <id>~rN    a further model of a signature; a defect revealed behind a trigger rewrite
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STORE, MODELS, REPROS, FINDING = "campaign.sqlite", "models", "repros", "finding.json"


@dataclass(frozen=True)
class CampaignDir:
    root: Path

    @property
    def store(self) -> Path:
        return self.root / STORE

    @property
    def models(self) -> Path:
        return self.root / MODELS

    @property
    def repros(self) -> Path:
        return self.root / REPROS

    def is_campaign(self) -> bool:
        return self.store.is_file()

    def model(self, model_id: str) -> Path:
        return self.models / f"{model_id}.onnx"

    def model_inputs(self, model_id: str) -> Path:
        return self.models / f"{model_id}.inputs.npz"

    def repro(self, folder: str) -> Path:
        return self.repros / folder

    def finding_json(self, folder: str) -> Path:
        return self.repros / folder / FINDING

    def triaged(self, folder: str) -> dict[str, Any] | None:
        """A repro folder's finding.json, or None when the finding is not triaged (yet)."""
        path = self.finding_json(folder)
        return json.loads(path.read_text()) if path.is_file() else None
