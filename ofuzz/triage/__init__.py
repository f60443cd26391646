"""Triage: reduction, witnesses, root-cause clustering and exported repros of a campaign's findings."""
