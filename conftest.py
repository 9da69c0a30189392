"""Root conftest: the Markdown examples and the doctests.

Every fenced ``python`` block of README.md and compat_docs/*.md runs through Sybil (a
maintained doc-testing plugin) in the default pytest run (``testpaths`` lists the files); the
blocks of one page share a namespace in page order, as a reader would paste them, and each is
written to run on its own. Blocks in any other language (``text``, ``bash``) are not run.

The doctests of the package (``pytest --doctest-modules tapejax``, run by the
default pytest run through ``testpaths``) see Python's ``print``.

The package namespace exports ``tf.print`` as ``print`` (TF's name), and a doctest's globals
are its module's, so ``print(x)`` in ``tapejax/__init__.py``'s examples would be ``tf.print``
(writing to stderr) instead of the built-in a reader expects.
"""

import builtins

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser()],
    patterns=["README.md", "compat_docs/*.md"],
).pytest()

# Collected for doctests only (not test files), and not examples: tapejax.numpy's functions carry
# JAX's own docstrings (jnp examples, run by JAX's tests); __main__ runs the demo on import;
# the tests' helper modules and the typing program are imported by the tests that use them.
collect_ignore = ["tapejax/numpy.py", "tapejax/__main__.py"]
# Conftests are plugins, not doctest modules: collecting one as a module imports it a second time
# under the shared name "conftest", which clashes with the other test directories' conftests.
collect_ignore_glob = ["tests/*/conftest.py", "tests/**/_*.py", "tests/_*.py", "tests/typing/*", "tests/api_points.py"]


@pytest.fixture(autouse=True)
def _builtin_print_in_doctests(doctest_namespace):
    doctest_namespace["print"] = builtins.print
