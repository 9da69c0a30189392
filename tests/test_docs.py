"""Every fenced Python block in compat_docs/ runs: a doc example that breaks fails CI."""

import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "compat_docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def blocks():
    for md in sorted(DOCS.glob("*.md")):
        for i, m in enumerate(BLOCK.finditer(md.read_text())):
            yield pytest.param(m.group(1), id=f"{md.name}#{i}")


@pytest.mark.parametrize("code", list(blocks()))
def test_doc_block_runs(code, capsys):
    exec(compile(code, "<doc>", "exec"), {"__name__": "__doc_example__"})
