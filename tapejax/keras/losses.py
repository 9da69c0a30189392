"""``tf.keras.losses``: Keras 3's losses, each call one op on the tape.

Example:
    >>> import tapejax as tf
    >>> y, p = tf.constant([[0.0, 1.0]]), tf.Variable([[0.5, 0.5]])
    >>> with tf.GradientTape() as tape:
    ...     loss = tf.keras.losses.Huber(delta=1.0)(y, p)
    >>> round(float(loss), 4), tape.gradient(loss, p).numpy().tolist()
    (0.125, [[0.25, -0.25]])
"""

from __future__ import annotations

from ._bridge import keras, tf_keras
from ._objects import LossMixin, deserializer, generate, generate_functions, getter

_names = generate(tf_keras.losses, keras.losses.Loss, LossMixin, __name__)
_names.update(generate_functions(tf_keras.losses, __name__))
_names["get"] = getter(keras.losses.get, _names)
_names["deserialize"] = deserializer(keras.losses.deserialize, _names)
globals().update(_names)

# Computed at import (from Keras 3's names): the generated stub losses.pyi spells these names out for type checkers.
__all__ = sorted(_names)  # pyright: ignore[reportUnsupportedDunderAll]
