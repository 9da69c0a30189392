"""``tf.keras.backend``: Keras 3's backend settings (``floatx``, ``set_floatx``, ``epsilon``, ``clear_session``...).

``backend()`` is ``"jax"``: tapejax runs Keras 3 on its JAX backend.

Example:
    >>> import tapejax as tf
    >>> tf.keras.backend.floatx(), tf.keras.backend.epsilon()
    ('float32', 1e-07)
"""

from __future__ import annotations

from typing import Any

from . import _naming
from ._bridge import keras

_names = {k: getattr(keras.backend, k) for k in dir(keras.backend) if not k.startswith("_")}
globals().update(_names)


def clear_session(free_memory: bool = True) -> None:
    """Reset Keras's automatic names (``dense``, ``dense_1``...) and the optimizers' names."""
    keras.backend.clear_session(free_memory=free_memory)
    _naming.reset()


def set_floatx(value: Any) -> None:
    """The default float type of layers and variables created from now on (``'float16'``, ``'float32'``, ``'float64'``).

    ``'float64'`` needs JAX's 64-bit mode (``tapejax.enable_x64()``); without it
    this raises instead of letting JAX narrow every float64 to float32.
    """
    import numpy as np

    from .._ops._dtypes import check_width

    if str(value) == "float64":
        check_width(np.dtype("float64"), "floatx")
    keras.backend.set_floatx(value)


# Computed at import (from Keras 3's names): the generated stub backend.pyi spells these names out for type checkers.
__all__ = sorted({*_names, "clear_session", "set_floatx"})  # pyright: ignore[reportUnsupportedDunderAll]
