"""``tf.keras.backend``: the few global settings Keras code reads.

Example:
    >>> import tapejax as tf
    >>> tf.keras.backend.floatx(), tf.keras.backend.epsilon()
    ('float32', 1e-07)
"""

from __future__ import annotations

from . import _naming

__all__ = ["clear_session", "epsilon", "floatx", "backend"]

_EPSILON = 1e-7


def epsilon() -> float:
    """The fuzz factor Keras's losses clip probabilities with (1e-7)."""
    return _EPSILON


def floatx() -> str:
    """The default float type of layers and variables: ``'float32'``."""
    return "float32"


def backend() -> str:
    """The name of the array backend under this Keras surface."""
    return "jax"


def clear_session(free_memory: bool = True) -> None:
    """Reset Keras's automatic names (``dense``, ``dense_1``...), as ``tf.keras.backend.clear_session``."""
    _naming.reset()
