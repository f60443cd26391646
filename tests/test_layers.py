"""The package's layers point one way: no import cycle inside ofuzz/, each stage package imports only the stages below
it (core → gen → exec → judge → store → triage → campaign → cli), and nothing imports the CLI."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import ofuzz

ROOT = Path(ofuzz.__file__).parent
GENERATOR = {"ofuzz.gen"}
# The stage packages, lowest first: a module may import its own package and the packages before it, never one after.
# The store sits below triage because triage writes its records through it; the campaign package orchestrates all.
LAYERS = ["core", "gen", "exec", "judge", "store", "triage", "campaign", "cli"]


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
    for start in [n for n in g if n.startswith(("ofuzz.exec", "ofuzz.judge"))]:
        reached = nx.descendants(g, start)
        bad = {r for r in reached if any(r == m or r.startswith(m + ".") for m in GENERATOR)}
        assert not bad, f"{start} reaches the generator through {sorted(bad)}"


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_lives_in_a_stage_package():
    loose = [n for n in import_graph() if n != "ofuzz" and layer_of(n) is None]
    assert not loose, f"modules outside the stage packages {LAYERS}: {loose}"


def test_stage_packages_import_only_the_stages_below_them():
    g = import_graph()
    upward = [(a, b) for a, b in g.edges if layer_of(a) is not None and layer_of(b) is not None and layer_of(b) > layer_of(a)]
    assert not upward, "imports against the data flow: " + "; ".join(f"{a} → {b}" for a, b in upward)


def test_nothing_imports_the_cli():
    g = import_graph()
    callers = [a for a, b in g.edges if b.startswith("ofuzz.cli") and not a.startswith("ofuzz.cli")]
    assert not callers, f"the CLI is a leaf: {callers} import it"


def test_graph_sees_the_modules():
    g = import_graph()
    assert "ofuzz.gen.solver.rules" in g and g.has_edge("ofuzz.campaign.loop", "ofuzz.store.campaign_store")


def test_no_module_over_500_lines_and_no_function_over_60():
    """Small modules with one job each (scripts/check_sizes.py prints the largest)."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "scripts" / "check_sizes.py"
    spec = importlib.util.spec_from_file_location("check_sizes", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    modules, functions = mod.sizes()
    assert not [m for m in modules if m[0] > mod.MAX_MODULE], modules[:3]
    assert not [f for f in functions if f[0] > mod.MAX_FUNCTION], functions[:3]
