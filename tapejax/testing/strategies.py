"""``tapejax.testing.strategies``: hypothesis strategies for derivative tests (needs ``hypothesis``).

Built on ``hypothesis.extra.numpy``: tensors and variables of given or drawn
shapes and dtypes, mutually broadcastable argument tuples, bounded elements and
domain-safe values (``DOMAINS``: log, sqrt, division, inverse trig, ...), and
``assume``-based helpers that skip points too close to a kink or a tie.

Example:
    >>> from hypothesis import given, settings
    >>> import tapejax as tf
    >>> from tapejax.testing import assert_matches_analytic, strategies as tst
    >>> @settings(max_examples=5, deadline=None)
    ... @given(tst.tensors(shape=(3,), domain="log"))
    ... def test_log(x):
    ...     assert_matches_analytic(tf.math.log, lambda x: 1 / x, (x,))
    >>> test_log()
"""

from ._strategies import (
    DOMAINS,
    arrays,
    assume_apart,
    assume_away_from_kinks,
    broadcastable_shapes,
    broadcastable_tensors,
    domain_intervals,
    dtypes,
    elements,
    shapes,
    tensors,
    variables,
)

__all__ = [
    "DOMAINS",
    "domain_intervals",
    "dtypes",
    "elements",
    "shapes",
    "arrays",
    "tensors",
    "variables",
    "broadcastable_shapes",
    "broadcastable_tensors",
    "assume_away_from_kinks",
    "assume_apart",
]
