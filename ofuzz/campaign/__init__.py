"""Campaigns: the fuzzing loop and what runs over whole campaigns (report, replay, versions, conformance, Ray)."""
