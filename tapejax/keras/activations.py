"""``tf.keras.activations``: Keras 3's activations, each call one op on the tape.

Given to a layer (``Dense(4, activation=tf.keras.activations.relu)``) they are
Keras's own functions (the layer saves and reloads them by name).

Example:
    >>> import tapejax as tf
    >>> tf.keras.activations.relu(tf.constant([-1.0, 2.0])).numpy().tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from ._bridge import keras
from ._objects import generate_functions, getter

_names = generate_functions(keras.activations, __name__)
get = getter(keras.activations.get, _names)
serialize = keras.activations.serialize
deserialize = keras.activations.deserialize
globals().update(_names)

# Computed at import (from Keras 3's names): the generated stub activations.pyi spells these names out for type checkers.
__all__ = sorted([*_names, "get", "serialize", "deserialize"])  # pyright: ignore[reportUnsupportedDunderAll]
