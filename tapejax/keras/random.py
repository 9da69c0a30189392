"""``tf.keras.random``: Keras 3's random functions as ops; a ``SeedGenerator``'s state is a variable.

With ``seed=`` a ``SeedGenerator``, each call advances the generator's state
(an assign, so a draw inside a ``tapejax.function`` step is fresh on every
compiled call).

Example:
    >>> import tapejax as tf
    >>> gen = tf.keras.random.SeedGenerator(0)
    >>> a = tf.keras.random.normal((3,), seed=gen)
    >>> b = tf.keras.random.normal((3,), seed=gen)
    >>> bool((a.numpy() != b.numpy()).any())
    True
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import jax

from ._bridge import keras, stateful_call
from ._objects import _eager

SeedGenerator = keras.random.SeedGenerator


def _op(fn: Any) -> Any:
    @functools.wraps(fn)
    def f(*args: Any, **kwargs: Any) -> Any:
        if not _eager((args, kwargs)):
            return fn(*args, **kwargs)
        gens = [x for x in jax.tree_util.tree_leaves((args, kwargs)) if isinstance(x, SeedGenerator)]
        return stateful_call(fn, [g.state for g in gens], args, kwargs)

    f.__module__ = __name__
    f.__doc__ = f"Keras 3's ``keras.random.{fn.__name__}``, one op on the tape."
    return f


_names = {k: _op(getattr(keras.random, k)) for k in dir(keras.random)
          if not k.startswith("_") and inspect.isfunction(getattr(keras.random, k))}
globals().update(_names)

# Computed at import (from Keras 3's names): the generated stub random.pyi spells these names out for type checkers.
__all__ = sorted({*_names, "SeedGenerator"})  # pyright: ignore[reportUnsupportedDunderAll]
