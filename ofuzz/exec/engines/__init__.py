"""The engine layer: adapters, their registry, their environments and their worker processes."""
