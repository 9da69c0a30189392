"""compat_docs/testing.md: its tolerance table matches the code, and its hypothesis examples pass in a
fresh project. (Its blocks run, like every page's, through Sybil: see the root conftest.py.)"""

from __future__ import annotations

import os
import re

import pytest

from tapejax.testing import TOLERANCES

GUIDE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compat_docs", "testing.md")


def _blocks() -> list:
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    out = []
    heading = "top"
    pos = 0
    for m in re.finditer(r"^```python\n(.*?)^```\s*$", text, flags=re.S | re.M):
        for h in re.findall(r"^#+ (.+)$", text[pos:m.start()], flags=re.M):
            heading = h
        pos = m.end()
        line = text.count("\n", 0, m.start()) + 2  # first line of the code
        out.append(pytest.param(m.group(1), line, id=f"L{line}-{re.sub(r'[^a-z0-9]+', '-', heading.lower())}"))
    return out


BLOCKS = _blocks()


def test_the_guide_has_python_blocks():
    assert len(BLOCKS) >= 8


def test_tolerance_table_in_the_guide_matches_the_code():
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    rows = re.findall(r"^\| (\w+) \| ([\d.e+-]+) \| ([\d.e+-]+) \| ([\d.e+-]+) \| ([\d.e+-]+) \|$", text, flags=re.M)
    table = {name: {1: (float(a1), float(r1)), 2: (float(a2), float(r2))} for name, a1, r1, a2, r2 in rows}
    assert table == {k: dict(v) for k, v in TOLERANCES.items()}


def test_hypothesis_blocks_pass_in_a_fresh_project(tmp_path):
    """The guide's hypothesis examples, copied into a project with no conftest and hypothesis's default
    settings (200 ms deadline, random examples), pass: the first example compiles, so they must not
    depend on this repository's profile."""
    import subprocess
    import sys

    hyp = [p.values[0] for p in BLOCKS if "@given" in p.values[0]]
    assert len(hyp) >= 5
    for i, code in enumerate(hyp):
        (tmp_path / f"test_guide_{i}.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAPEJAX_HYPOTHESIS", "HYPOTHESIS"))}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "--rootdir", str(tmp_path), str(tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert f"{len(hyp)} passed" in r.stdout or "passed" in r.stdout
