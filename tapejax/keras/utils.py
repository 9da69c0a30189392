"""``tf.keras.utils``: Keras 3's utilities; ``set_random_seed`` also seeds tapejax.

Example:
    >>> import tapejax as tf
    >>> tf.keras.utils.set_random_seed(0)
    >>> tf.keras.utils.to_categorical([0, 2], 3).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
"""

from __future__ import annotations

from .._ops.random import set_seed as _tf_set_seed
from ._bridge import keras

_names = {k: getattr(keras.utils, k) for k in dir(keras.utils) if not k.startswith("_")}
globals().update(_names)


def set_random_seed(seed: int) -> None:
    """Seed Python's ``random``, NumPy, Keras and tapejax (``tf.random.set_seed``) at once, as TF's Keras does."""
    keras.utils.set_random_seed(seed)
    _tf_set_seed(seed)


# Computed at import (from Keras 3's names): the generated stub utils.pyi spells these names out for type checkers.
__all__ = sorted({*_names, "set_random_seed"})  # pyright: ignore[reportUnsupportedDunderAll]
