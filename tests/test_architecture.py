"""The import layering of ARCHITECTURE.md: no cycles, no import that points up a layer."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_imports.py"


def _checker():
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_import_cycles_and_no_upward_imports():
    problems = _checker().check(ROOT)
    assert problems == [], "\n".join(problems)


def test_script_exits_zero():
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_checker_catches_a_cycle_and_an_upward_import(tmp_path):
    pkg = tmp_path / "tapejax"
    (pkg / "_core").mkdir(parents=True)
    (pkg / "_ops").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_core" / "__init__.py").write_text("")
    (pkg / "_ops" / "__init__.py").write_text("")
    (pkg / "_core" / "_a.py").write_text("def f():\n    from .._ops import _m\n")  # lazy and upward
    (pkg / "_ops" / "_m.py").write_text("from .._core import _a\n")
    problems = _checker().check(tmp_path)
    assert any(p.startswith("upward import: tapejax._core._a") for p in problems), problems
    assert any(p.startswith("import cycle:") and "tapejax._ops._m" in p for p in problems), problems


def test_import_does_not_start_the_xla_backend():
    # jax.distributed.initialize() (MultiWorkerMirroredStrategy, multi-host programs) must run
    # before anything starts a backend; so must a platform choice made after the import.
    code = ("import tapejax, tapejax.keras, tapejax.data, tapejax.distribute, tapejax.testing\n"
            "from jax._src import xla_bridge\n"
            "assert not xla_bridge.backends_are_initialized(), 'importing tapejax started a backend'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
