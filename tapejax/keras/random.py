"""``tf.keras.random``: random draws whose state is a variable (``SeedGenerator``).

With ``seed=`` a ``SeedGenerator``, each call advances the generator's state
variable, so a draw inside a ``tapejax.function`` step is fresh on every
compiled call (the state is captured like any other variable). With an integer
seed the draw is the same every time; with ``seed=None`` it comes from
tapejax's global generator (``tf.random.set_seed``).

Example:
    >>> import tapejax as tf
    >>> gen = tf.keras.random.SeedGenerator(0)
    >>> a = tf.keras.random.normal((3,), seed=gen)
    >>> b = tf.keras.random.normal((3,), seed=gen)
    >>> bool((a.numpy() != b.numpy()).any())
    True
"""

from __future__ import annotations

from typing import Any

import jax

from .._core._recorder import Tensor
from .._ops._dtypes import as_dtype, check_width
from .._ops.random import _next_key
from ._layer import SeedGenerator

__all__ = ["SeedGenerator", "normal", "uniform"]


def _key(seed: Any) -> jax.Array:
    if isinstance(seed, SeedGenerator):
        return seed.next()
    if seed is None:
        return _next_key(None)
    return jax.random.key(int(seed))


def _shape(shape: Any) -> tuple:
    return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)


def normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = None, seed: Any = None) -> Tensor:
    """Normal draws (``keras.random.normal``)."""
    d = as_dtype(dtype or "float32")._np
    check_width(d, "Requested dtype")
    return Tensor((jax.random.normal(_key(seed), _shape(shape), d) * stddev + mean).astype(d))


def uniform(shape: Any, minval: float = 0.0, maxval: float = 1.0, dtype: Any = None, seed: Any = None) -> Tensor:
    """Uniform draws in ``[minval, maxval)`` (``keras.random.uniform``)."""
    d = as_dtype(dtype or "float32")._np
    check_width(d, "Requested dtype")
    return Tensor(jax.random.uniform(_key(seed), _shape(shape), d, minval, maxval))
