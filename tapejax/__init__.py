"""tapejax: TensorFlow 2's ``GradientTape`` on JAX.

``import tapejax as tf`` runs TF-style differentiation code: tensors, variables,
nested and persistent tapes, ``UnconnectedGradients``, with every recorded slice
replayed through ``jax.vjp`` and compiled by XLA.

Example:
    >>> import tapejax as tf
    >>> x = tf.constant(3.0)
    >>> with tf.GradientTape() as g:
    ...     g.watch(x)
    ...     y = x * x
    >>> print(g.gradient(y, x))
    tf.Tensor(6.0, shape=(), dtype=float32)
"""

from __future__ import annotations

from . import _ops  # noqa: F401  (the op library: every family registers into the tables)
from ._tf import _surface, _unsupported
from ._tf._surface import *  # noqa: F403,F401  (explicit: every name in _surface.__all__, the tf.* surface)

from . import data  # noqa: E402  (tf.data: an ext package, built on the surface above)
from . import distribute  # noqa: E402  (tf.distribute: an ext package, built on the surface above)

from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    # tf.keras loads lazily (__getattr__ below); this import lets a checker see it as a module.
    from . import keras  # noqa: F401

# The surface's names are computed at import: the generated stub __init__.pyi spells them out for type checkers.
__all__ = [*_surface.__all__, "keras", "data", "distribute"]  # pyright: ignore[reportUnsupportedDunderAll]


def __getattr__(name: str) -> object:
    """``tf.keras`` on first access; a TF name tapejax lacks (``tf.audio``): AttributeError
    saying so, pointing to the porting guide."""
    if name == "keras":
        # tf.keras imports Keras 3 (about a second): only a program that uses it pays.
        import importlib

        return importlib.import_module(".keras", __name__)
    raise _unsupported.missing(name)


__version__ = "0.1.0"

# Last: the objects the import made (JAX's and tapejax's modules, never garbage) leave the cycle
# collector's full walks, which an eager loop otherwise pays every few dozen steps (_heap: why).
from . import _heap  # noqa: E402

_heap.freeze_import_heap()
