"""``tf.keras.constraints``: Keras 3's constraints; a direct call on tapejax values is one op.

Example:
    >>> import tapejax as tf
    >>> tf.keras.constraints.NonNeg()(tf.constant([-1.0, 2.0])).numpy().tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from ._bridge import keras
from ._objects import LossMixin, generate, getter

_names = generate(keras.constraints, keras.constraints.Constraint, LossMixin, __name__)
_names["get"] = getter(keras.constraints.get, {})
globals().update(_names)

# Computed at import (from Keras 3's names): the generated stub constraints.pyi spells these names out for type checkers.
__all__ = sorted(_names)  # pyright: ignore[reportUnsupportedDunderAll]
