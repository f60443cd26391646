"""Execution: engines in isolated worker processes (engines/) and running one model on several of them (runner)."""
