"""``tf.keras.layers``: every Keras 3 layer, each call recorded on the tape.

Each class is Keras 3's own (``isinstance(layer, keras.layers.Dense)`` holds),
running on Keras's JAX backend, with ``tapejax.keras``'s ``LayerMixin`` in
front: called on tapejax values a built-in layer's whole computation is one op
on the tape (differentiable to any order, usable in ``tapejax.function``,
``ForwardAccumulator`` and jacobians), and its variables are ``tf.Variable``
views of the Keras variables. Subclass ``Layer`` and write ``call`` with
tapejax ops to make your own; ``add_weight`` then returns a ``tf.Variable``.

Example:
    >>> import tapejax as tf
    >>> dense = tf.keras.layers.Dense(3, activation="relu")
    >>> dense.variables
    []
    >>> x = tf.ones((2, 4))
    >>> with tf.GradientTape() as tape:
    ...     y = tf.reduce_sum(dense(x))
    >>> [tuple(g.shape) for g in tape.gradient(y, dense.trainable_variables)]
    [(4, 3), (3,)]
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from . import _saving
from ._bridge import jax_level, keras, mirror, tf_keras
from ._layer import LayerMixin
from ._objects import deserializer

_generated: dict[str, type] = {}

# A built-in layer's weight attributes (``dense.kernel``): Keras's code reads them as
# keras.Variables; anyone else gets the tf.Variable view, so ``tape.gradient(loss,
# dense.kernel)`` and ``tf.matmul(x, dense.kernel)`` are on the tape as in TF.
_WEIGHT_ATTRIBUTES = ("kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance", "embeddings",
                      "depthwise_kernel", "pointwise_kernel", "recurrent_kernel", "alpha")


def _from_keras(depth: int = 2) -> bool:
    mod = sys._getframe(depth).f_globals.get("__name__", "")
    return mod == "keras" or mod.startswith("keras.")


def _view_property(name: str, kcls: type) -> property | None:
    base = None
    for c in kcls.__mro__:
        if name in c.__dict__:
            base = c.__dict__[name]
            break
    if base is not None and not isinstance(base, property):
        return None  # a method or a class constant: leave it

    if base is None:
        def fget(self: Any) -> Any:
            try:
                v = self.__dict__[name]
            except KeyError:
                raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'") from None
            return v if _from_keras() else mirror(v)

        def fset(self: Any, value: Any) -> None:
            self.__dict__[name] = value

        return property(fget, fset)
    base_fget = base.fget
    if base_fget is None:
        return None

    def fget2(self: Any) -> Any:
        v = base_fget(self)
        return v if _from_keras() else mirror(v)

    return property(fget2, base.fset, base.fdel, base.__doc__)


def _make(name: str, kcls: type, extra: dict | None = None) -> type:
    ns: dict[str, Any] = {"__module__": __name__, "__qualname__": name,
          "__doc__": f"Keras 3's ``{kcls.__module__}.{kcls.__qualname__}``, each call one op on the tape."}
    for attr in _WEIGHT_ATTRIBUTES:
        prop = _view_property(attr, kcls)
        if prop is not None:
            ns[attr] = prop
    if extra:
        ns.update(extra)
    cls = type(name, (LayerMixin, kcls), ns)
    _saving.register(cls, kcls)
    _generated[name] = cls
    return cls


class Layer(LayerMixin, keras.layers.Layer):
    """The base class of layers (Keras 3's ``keras.layers.Layer``), for a ``call`` written with tapejax ops.

    ``add_weight`` returns a ``tf.Variable`` (a view of the Keras variable), so
    ``call`` can use it in any tapejax op; built-in layers used inside ``call``
    are each one op on the tape.

    Example:
        >>> import tapejax as tf
        >>> class Scale(tf.keras.layers.Layer):
        ...     def build(self, input_shape):
        ...         self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")
        ...     def call(self, x):
        ...         return x * self.w
        >>> layer = Scale()
        >>> with tf.GradientTape() as tape:
        ...     y = tf.reduce_sum(layer(tf.constant([[1.0, 2.0]])))
        >>> tape.gradient(y, layer.w).numpy().tolist()
        [1.0, 2.0]
    """


_generated["Layer"] = Layer


def _lambda_init(self: Any, function: Any, *args: Any, **kwargs: Any) -> None:
    # The function may use tapejax ops: Keras calls it on JAX values (inside the op).
    keras.layers.Lambda.__init__(self, jax_level(function), *args, **kwargs)
    self._tapejax_function = function


def _lambda_get_config(self: Any) -> dict:
    # Saved as the user's function (Keras serialises its code), not the JAX-level wrapper.
    wrapper = self.function
    self.function = self._tapejax_function
    try:
        return keras.layers.Lambda.get_config(self)
    finally:
        self.function = wrapper


_SKIP = {"Layer"}

for _name in dir(tf_keras.layers):
    _obj = getattr(tf_keras.layers, _name)
    if _name.startswith("_") or _name in _SKIP:
        continue
    if inspect.isclass(_obj) and issubclass(_obj, keras.layers.Layer):
        if _name == "Lambda":
            _make(_name, _obj, {"__init__": _lambda_init, "get_config": _lambda_get_config})
        else:
            _make(_name, _obj)
    else:
        _generated[_name] = _obj  # Input, InputSpec, serialize, deserialize

_generated["deserialize"] = deserializer(keras.layers.deserialize, {})
globals().update(_generated)

# Computed at import (from Keras 3's names): the generated stub layers.pyi spells these names out for type checkers.
__all__ = sorted(_generated)  # pyright: ignore[reportUnsupportedDunderAll]
