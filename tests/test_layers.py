"""The package's layers point one way: no import cycle inside ofuzz/, and the engine layer and the oracle never reach
the generator (corpus → generator → solver → emitter → engines → oracle → triage → store → report)."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import ofuzz

ROOT = Path(ofuzz.__file__).parent
GENERATOR = {"ofuzz.generate", "ofuzz.genome", "ofuzz.graphs", "ofuzz.mutations", "ofuzz.chooser", "ofuzz.solver"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> nx.DiGraph:
    """Every ofuzz module → the ofuzz modules it imports, anywhere in its body (late imports count too)."""
    mods = {module_name(p): p for p in ROOT.rglob("*.py")}
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                if t in mods and t != name and t != "ofuzz":
                    g.add_edge(name, t)
    return g


def test_no_import_cycle_inside_ofuzz():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, "import cycles: " + "; ".join(" → ".join(c + [c[0]]) for c in cycles)


def test_engine_layer_and_oracle_never_reach_the_generator():
    g = import_graph()
    for start in [n for n in g if n.startswith("ofuzz.engines")] + ["ofuzz.oracle", "ofuzz.runner", "ofuzz.compare"]:
        reached = nx.descendants(g, start)
        bad = {r for r in reached if any(r == m or r.startswith(m + ".") for m in GENERATOR)}
        assert not bad, f"{start} reaches the generator through {sorted(bad)}"


def test_graph_sees_the_modules():
    g = import_graph()
    assert "ofuzz.solver.rules" in g and g.has_edge("ofuzz.campaign", "ofuzz.store")
