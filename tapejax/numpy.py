"""``tapejax.numpy``: every public function of ``jax.numpy``, ``jax.nn`` and
``jax.scipy.special``, recorded on the tape.

Write JAX-style code and differentiate it with a ``GradientTape``:

Example:
    >>> import tapejax as tf
    >>> import tapejax.numpy as tnp
    >>> x = tf.constant([1.0, 2.0])
    >>> with tf.GradientTape() as g:
    ...     g.watch(x)
    ...     y = tnp.sum(tnp.sin(x) * tnp.exp(x))
    >>> g.gradient(y, x).shape
    TensorShape([2])

The names come from ``jax.numpy`` first, then ``jax.nn`` (``relu``, ``softmax``,
``gelu``...), then ``jax.scipy.special`` (``erf``, ``gammaln``, ``logsumexp``...).
Each library is also available whole: ``tapejax.numpy.nn``,
``tapejax.numpy.special``, ``tapejax.numpy.linalg``, ``tapejax.numpy.fft``.
Every function goes through one generic wrapper (``tapejax._tf._jnp_wrap.wrap``):
Tensor and array arguments are data, everything else is static; integer and
bool results (``argsort``, ``isnan``) are never watched. Constants and dtypes
(``pi``, ``float32``) are jax.numpy's own.

The gradients are JAX's (``abs'(0) = 1``, ``maximum`` ties split); the TF-named
ops in ``tapejax`` follow TF's conventions instead.
"""

import types as _types

import jax as _jax
import jax.numpy as _jnp
import jax.scipy.special as _special

from ._tf._jnp_wrap import wrap, wrap_namespace  # noqa: F401  (wrap is public: wrap your own jnp-style function)


def _namespace(name: str, module: object, prefix: str) -> _types.ModuleType:
    m = _types.ModuleType(f"tapejax.numpy.{name}", f"``{prefix[:-1]}`` on the tape (see ``tapejax.numpy``).")
    m.__dict__.update(wrap_namespace(module, prefix))
    return m


linalg = _namespace("linalg", _jnp.linalg, "jax.numpy.linalg.")
fft = _namespace("fft", _jnp.fft, "jax.numpy.fft.")
nn = _namespace("nn", _jax.nn, "jax.nn.")
special = _namespace("special", _special, "jax.scipy.special.")

_names: dict = {}
for _src in (special.__dict__, nn.__dict__):
    _names.update({k: v for k, v in _src.items() if not k.startswith("_")})
_names.update(wrap_namespace(_jnp, "jax.numpy."))
globals().update(_names)

# Computed at import (from jax.numpy's names): the generated stub numpy.pyi spells these names out for type checkers.
__all__ = sorted(set(_names) | {"linalg", "fft", "nn", "special", "wrap"})  # pyright: ignore[reportUnsupportedDunderAll]
del _src
