"""Persistence: the campaign store (SQLite + model files) and the known-bugs store."""
