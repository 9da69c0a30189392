"""``tf.keras.utils``: seeding.

Example:
    >>> import tapejax as tf
    >>> tf.keras.utils.set_random_seed(0)
    >>> a = tf.keras.layers.Dense(2)
    >>> _ = a(tf.ones((1, 3)))
"""

from __future__ import annotations

import random as _py_random

import numpy as np

from .._ops.random import set_seed as _tf_set_seed

__all__ = ["set_random_seed"]


def set_random_seed(seed: int) -> None:
    """Seed Python's ``random``, NumPy and tapejax (``tf.random.set_seed``) at once, as Keras does."""
    if not isinstance(seed, int):
        raise ValueError(f"Expected `seed` argument to be an integer. Received: seed={seed} (of type {type(seed)})")
    _py_random.seed(seed)
    np.random.seed(seed)
    _tf_set_seed(seed)
