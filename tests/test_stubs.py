"""The type stubs of the op-filled namespaces: fresh, complete, and enough for a type checker.

``scripts/gen_stubs.py`` writes ``tapejax/__init__.pyi``, ``tapejax/math.pyi``... from the op
table. These tests fail when the stubs are stale, when a public module's ``__all__`` names
something the module lacks, and when mypy or pyright reports an error on a
typical TF-style program checked from outside the repository, as a user's project would be.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "typing" / "tf_style_program.py"
PUBLIC = ["tapejax", "tapejax.math", "tapejax.nn", "tapejax.linalg", "tapejax.image", "tapejax.strings", "tapejax.io",
          "tapejax.bitwise", "tapejax.debugging", "tapejax.dtypes", "tapejax.random", "tapejax.nest", "tapejax.train",
          "tapejax.sparse", "tapejax.saved_model", "tapejax.autodiff", "tapejax.config", "tapejax.errors",
          "tapejax.data", "tapejax.distribute", "tapejax.autograph", "tapejax.testing"]


def test_stubs_are_fresh():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_stubs.py"), "--check"], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]


@pytest.mark.parametrize("modname", PUBLIC)
def test_every_name_in_all_exists(modname):
    mod = importlib.import_module(modname)
    missing = [n for n in getattr(mod, "__all__", []) if n != "keras" and not hasattr(mod, n)]
    assert not missing, f"{modname}.__all__ names what the module lacks: {missing}"


def _run_checker(cmd: list, tmp_path: Path) -> subprocess.CompletedProcess:
    # From a directory outside the repository: tapejax resolves as the installed package (the
    # editable install's path), as in a user's project, not as local source.
    shutil.copy(PROGRAM, tmp_path / "program.py")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return subprocess.run(cmd + ["program.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def test_mypy_accepts_a_tf_style_program(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the `test` extra")
    r = _run_checker([sys.executable, "-m", "mypy", "--no-incremental", "--python-executable", sys.executable],
                     tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "Success: no issues found" in r.stdout


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # in the `test` extra for Python < 3.11
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_pyright_accepts_a_tf_style_program(tmp_path):
    # basedpyright (in the `test` extra: pyright with node bundled as a wheel) in pyright's
    # standard mode, the mode a user's project gets without configuration.
    exe = (shutil.which("basedpyright", path=os.path.dirname(sys.executable)) or shutil.which("basedpyright")
           or shutil.which("pyright", path=os.path.dirname(sys.executable)) or shutil.which("pyright"))
    assert exe is not None, "basedpyright is in the `test` extra: reinstall it (pip install -e '.[test]')"
    # The settings stated in pyproject.toml's [tool.basedpyright], less the repository's paths.
    settings = {k: v for k, v in _pyproject()["tool"]["basedpyright"].items() if k != "include"}
    assert settings["typeCheckingMode"] == "standard", settings
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(settings))
    r = _run_checker([exe, "--pythonpath", sys.executable], tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 errors" in r.stdout, r.stdout[-4000:]
