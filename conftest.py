"""Root conftest: the doctests of the package (``pytest --doctest-modules tapejax``, run by the
default pytest run through ``testpaths``) see Python's ``print``.

The package namespace exports ``tf.print`` as ``print`` (TF's name), and a doctest's globals
are its module's, so ``print(x)`` in ``tapejax/__init__.py``'s examples would be ``tf.print``
(writing to stderr) instead of the built-in a reader expects.
"""

import builtins

import pytest

# Collected for doctests only (not test files), and not examples: tapejax.numpy's functions carry
# JAX's own docstrings (jnp examples, run by JAX's tests); __main__ runs the demo on import;
# the tests' helper modules and the typing program are imported by the tests that use them.
collect_ignore = ["tapejax/numpy.py", "tapejax/__main__.py"]
collect_ignore_glob = ["tests/**/_*.py", "tests/_*.py", "tests/typing/*", "tests/api_points.py"]


@pytest.fixture(autouse=True)
def _builtin_print_in_doctests(doctest_namespace):
    doctest_namespace["print"] = builtins.print
