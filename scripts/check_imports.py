#!/usr/bin/env python3
"""Check tapejax's import graph: no cycles, and no import that points up a layer.

Parses every module under ``tapejax/`` with ``ast`` (imports inside functions
and classes included), builds the graph of intra-package imports and checks it
against the layers drawn in ARCHITECTURE.md::

    base    tapejax.errors, tapejax.config, tapejax._log, tapejax._heap  (import nothing from tapejax)
    core    tapejax._core.*                        the recorder
    engine  tapejax._engine.*                      record -> JAX
    ops     tapejax._ops.*                         the op library
    tf      tapejax._tf.* and the public modules   the TF-named layer
    ext     tapejax.keras.*, tapejax.testing.*,    built on the public surface
            tapejax.data.*, tapejax.distribute.*
    entry   tapejax (``__init__``), tapejax.__main__

A module may import its own layer or any layer below it; an import that
points up a layer is a violation, and so is any cycle (within a layer too).
``from pkg import name`` counts as an import of ``pkg.name`` when that is a
module, else of ``pkg``; importing a module's parent package that way is not
counted again. ``from . import NAME`` of a name a package's ``__init__`` defines
is an import of that ``__init__``.
``tapejax.testing`` may also import the entry ``tapejax`` (the public surface),
which does not import ``tapejax.testing`` back.

Usage: ``python scripts/check_imports.py`` (exit status 1 on any violation).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = "tapejax"

LAYERS = ["base", "core", "engine", "ops", "tf", "ext", "entry"]
BASE = {"tapejax.errors", "tapejax.config", "tapejax._log", "tapejax._heap"}


def layer_of(mod: str) -> str:
    if mod in BASE:
        return "base"
    if mod in (PKG, f"{PKG}.__main__"):
        return "entry"
    parts = mod.split(".")
    top = parts[1]
    return {"_core": "core", "_engine": "engine", "_ops": "ops", "keras": "ext", "testing": "ext",
            "data": "ext", "distribute": "ext"}.get(top, "tf")


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for p in sorted((root / PKG).rglob("*.py")):
        rel = p.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def imports(mod: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(imported module, line) for every intra-package import in ``path``."""
    is_pkg = path.name == "__init__.py"
    package = mod if is_pkg else mod.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PKG or a.name.startswith(PKG + "."):
                    found.append((a.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not (target == PKG or target.startswith(PKG + ".")):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in known:
                    found.append((sub, node.lineno))
                else:
                    found.append((target, node.lineno))
    # Resolve to the nearest known module (``import tapejax.x.y`` of a name inside a module).
    out = []
    for t, line in found:
        while t not in known and "." in t:
            t = t.rpartition(".")[0]
        if t != mod:
            out.append((t, line))
    return out


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []
    counter = [0]

    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def check(root: Path = ROOT) -> list[str]:
    mods = modules(root)
    known = set(mods)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    problems = []
    for m, p in mods.items():
        for t, line in sorted(set(imports(m, p, known))):
            graph[m].add(t)
            lm, lt = layer_of(m), layer_of(t)
            if t == PKG and m.startswith(f"{PKG}.testing"):
                continue  # the public surface; tapejax does not import tapejax.testing
            if LAYERS.index(lt) > LAYERS.index(lm):
                problems.append(f"upward import: {m} ({lm}) imports {t} ({lt}) at {p.relative_to(root)}:{line}")
    for comp in find_cycles(graph):
        problems.append("import cycle: " + " <-> ".join(comp))
    return problems


def main() -> int:
    problems = check()
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} import-layering problem(s)", file=sys.stderr)
        return 1
    print("imports OK: no cycles, no upward imports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
