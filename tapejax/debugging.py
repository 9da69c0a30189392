"""``tf.debugging``: numeric checks and assertions that raise TF's error types.

Every assertion runs eagerly on concrete values and raises
``tf.errors.InvalidArgumentError`` when it fails (inside a traced
``tapejax.function`` the values are unknown and the check is skipped).
``check_numerics`` passes its input through (and its gradient), as TF's.

Example:
    >>> import tapejax as tf
    >>> tf.debugging.assert_near(tf.constant(1.0), tf.constant(1.0 + 1e-7))
"""

from ._ops.debugging import (
    Assert,
    assert_all_finite,
    assert_equal,
    assert_greater,
    assert_greater_equal,
    assert_integer,
    assert_less,
    assert_less_equal,
    assert_near,
    assert_negative,
    assert_non_negative,
    assert_non_positive,
    assert_none_equal,
    assert_positive,
    assert_rank,
    assert_rank_at_least,
    assert_scalar,
    assert_shapes,
    assert_type,
    check_numerics,
    is_numeric_tensor,
)
from ._tf._namespace import populate as _populate

# Computed at import (from the op table): the generated stub debugging.pyi spells these names out for type checkers.
__all__ = [  # pyright: ignore[reportUnsupportedDunderAll]
    "Assert", "assert_all_finite", "assert_equal", "assert_greater", "assert_greater_equal", "assert_integer",
    "assert_less", "assert_less_equal", "assert_near", "assert_negative", "assert_non_negative", "assert_non_positive",
    "assert_none_equal", "assert_positive", "assert_rank", "assert_rank_at_least", "assert_scalar", "assert_shapes",
    "assert_type", "check_numerics", "is_numeric_tensor",
] + _populate(globals(), "debugging")
