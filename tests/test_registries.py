"""The extension points are declared, and their documentation is checked against them (not a hand copy)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from ofuzz.gen.solver.rules import RULES

README = Path(__file__).resolve().parents[1] / "opsets" / "README.md"
BEGIN, END = "<!-- rules: generated from ofuzz/gen/solver/registry.py; tests/test_registries.py checks it -->", "<!-- end of rules -->"


def rules_table() -> str:
    rows = ["| rule | inputs | reads | what it builds |", "|---|---|---|---|"]
    for name, r in sorted(RULES.items()):
        reads = "every parameter as an ONNX attribute" if r.passthrough else ", ".join(f"`{k}`" for k in sorted(r.known)) or "—"
        rows.append(f"| `{name}` | {r.max_in} | {reads} | {r.doc} |")
    return "\n".join(rows)


def test_corpus_readme_lists_exactly_the_registered_rules():
    text = README.read_text()
    assert BEGIN in text and END in text, f"opsets/README.md lacks the generated rules table; add between markers:\n{BEGIN}\n{rules_table()}\n{END}"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block == rules_table(), f"opsets/README.md's rules table is stale; replace it with:\n{rules_table()}"


def _params_read(fn) -> set[str]:
    """Parameter names a rule's source (and its same-module helpers') reads: a lint, so a declaration cannot drift."""
    seen, todo, src = set(), [fn], ""
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        src += inspect.getsource(f)
        todo += [g for n in f.__code__.co_names if inspect.isfunction(g := f.__globals__.get(n)) and g.__module__ == f.__module__]
    names = set(re.findall(r'p(?:\.get\(|\[)"(\w+)"', src)) | set(re.findall(r'"(\w+)" in p\b', src))
    for group in re.findall(r"for key in \(([^)]*)\)", src):
        names |= set(re.findall(r'"(\w+)"', group))
    return names


def test_every_rule_declares_what_it_reads():
    for name, r in RULES.items():
        undeclared = _params_read(r.fn) - r.known
        assert not undeclared, f"rule {name} reads {sorted(undeclared)} without declaring them in @rule(reads=...)"
        assert r.doc, f"rule {name} has no docstring (its first line is the README's description)"


def test_every_builtin_adapter_has_the_protocols_methods():
    """Checked on the source (the adapters import engine libraries that the core environment does not have)."""
    import ast

    from ofuzz.exec.engines.adapter import METHODS, EngineAdapter
    from ofuzz.exec.engines.registry import builtin_engines

    want = {m: [a.arg for a in ast.parse(inspect.getsource(getattr(EngineAdapter, m)).strip()).body[0].args.args] for m in METHODS}
    for name, spec in builtin_engines().items():
        path, _, cls = spec.adapter.rpartition(":")
        tree = ast.parse(Path(path).read_text())
        classes = {c.name: c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
        assert cls in classes, f"{name}: {path} has no class {cls}"
        c = classes[cls]
        methods = {f.name: [a.arg for a in f.args.args] for f in c.body if isinstance(f, ast.FunctionDef)}
        for base in c.bases:  # one level of inheritance inside the same file
            if isinstance(base, ast.Name) and base.id in classes:
                methods = {f.name: [a.arg for a in f.args.args] for f in classes[base.id].body if isinstance(f, ast.FunctionDef)} | methods
        for m in METHODS:
            assert m in methods, f"{name}: {cls} lacks {m}()"
            assert len(methods[m]) == len(want[m]), f"{name}: {cls}.{m}{tuple(methods[m])} does not match the protocol {tuple(want[m])}"
        assert not any(isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "name" for t in s.targets) for s in c.body), \
            f"{name}: the engine's name belongs in engine.yaml only"
