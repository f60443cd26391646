"""The largest modules and functions of ofuzz/: where the house needs splitting next.

The layout's targets (issue "The house in layers"): no module over 500 lines, no function over 60. This prints the
offenders, largest first, and exits 1 while any is left, so it can gate a change once they are gone.

    python scripts/check_sizes.py [--top 15]
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import typer

PACKAGE = Path(__file__).resolve().parents[1] / "ofuzz"
MAX_MODULE, MAX_FUNCTION = 500, 60


def sizes() -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    modules, functions = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(PACKAGE.parent).as_posix()
        modules.append((len(text.splitlines()), rel))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.lineno} {node.name}"))  # type: ignore[operator]
    return sorted(modules, reverse=True), sorted(functions, reverse=True)


def main(top: int = typer.Option(15, help="How many of each to print.")) -> None:
    modules, functions = sizes()
    big_m = [m for m in modules if m[0] > MAX_MODULE]
    big_f = [f for f in functions if f[0] > MAX_FUNCTION]
    print(f"modules over {MAX_MODULE} lines: {len(big_m)}; functions over {MAX_FUNCTION} lines: {len(big_f)}")
    for n, name in modules[:top]:
        print(f"  {n:5d}  {name}")
    print("largest functions:")
    for n, name in functions[:top]:
        print(f"  {n:5d}  {name}")
    sys.exit(1 if big_m or big_f else 0)


if __name__ == "__main__":
    typer.run(main)
