"""``tf.keras.regularizers``: Keras 3's regularizers; a direct call on tapejax values is one op.

Given to a layer (``kernel_regularizer=``) the penalty is in ``layer.losses``
and in ``compute_loss`` during ``fit``.

Example:
    >>> import tapejax as tf
    >>> float(tf.keras.regularizers.L2(0.5)(tf.constant([1.0, 2.0])))
    2.5
"""

from __future__ import annotations

from ._bridge import keras
from ._objects import LossMixin, generate, getter

_names = generate(keras.regularizers, keras.regularizers.Regularizer, LossMixin, __name__)
_names["get"] = getter(keras.regularizers.get, {})
globals().update(_names)

# Computed at import (from Keras 3's names): the generated stub regularizers.pyi spells these names out for type checkers.
__all__ = sorted(_names)  # pyright: ignore[reportUnsupportedDunderAll]
