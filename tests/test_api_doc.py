"""compat_docs/api.md is generated from tests/api_points.py and cannot drift from the tests."""

import ast
import pathlib
import runpy

import pytest
from api_points import ROWS

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def _test_names(path: pathlib.Path) -> set:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_every_api_point_names_existing_tests(row):
    point, status, mech, tests = row
    assert status in ("same", "differs", "unsupported")
    assert tests, f"{point} names no test"
    for t in tests:
        file, func = t.split("::")
        path = HERE / file
        assert path.exists(), f"{point}: {file} does not exist"
        assert func in _test_names(path), f"{point}: {t} does not exist"


def test_api_md_is_up_to_date():
    render = runpy.run_path(str(ROOT / "scripts" / "gen_api_doc.py"))["render"]
    assert (ROOT / "compat_docs" / "api.md").read_text() == render(), "run: python scripts/gen_api_doc.py"
