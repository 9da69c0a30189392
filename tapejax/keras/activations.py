"""``tf.keras.activations``: activation functions, looked up by name with ``get``.

Each is a recorded tapejax op (``tf.nn.*``) or a short composition of them, so
tapes differentiate it like any other op. ``softmax`` and ``sigmoid`` remember their logits, which Keras's
cross-entropy losses then use (as Keras does), avoiding saturated probabilities.

Example:
    >>> import tapejax as tf
    >>> act = tf.keras.activations.get("relu")
    >>> act(tf.constant([-1.0, 2.0])).numpy().tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from typing import Any, Callable

from .._tf import _surface as tf

from . import _nn

__all__ = [
    "elu", "exponential", "gelu", "get", "hard_sigmoid", "leaky_relu", "linear", "log_softmax", "mish",
    "relu", "relu6", "selu", "serialize", "deserialize", "sigmoid", "silu", "softmax", "softplus",
    "softsign", "swish", "tanh",
]


def relu(x: Any, negative_slope: float = 0.0, max_value: float | None = None, threshold: float = 0.0) -> Any:
    """``max(x, 0)``; Keras's options give ``negative_slope * (x - threshold)`` below ``threshold``
    and cap at ``max_value``."""
    if negative_slope == 0.0 and max_value is None and threshold == 0.0:
        return tf.nn.relu(x)
    above = tf.cast(tf.greater_equal(x, threshold), x.dtype)  # a constant mask: no gradient of its own
    y = x * above + negative_slope * (x - threshold) * (1.0 - above)
    if max_value is not None:
        y = tf.minimum(y, float(max_value))
    return y


def relu6(x: Any) -> Any:
    """``min(max(x, 0), 6)``."""
    return tf.nn.relu6(x)


def leaky_relu(x: Any, negative_slope: float = 0.2) -> Any:
    """``x`` for ``x >= 0``, ``negative_slope * x`` below."""
    return tf.nn.leaky_relu(x, alpha=negative_slope)


def sigmoid(x: Any) -> Any:
    """``1 / (1 + exp(-x))``; the output remembers ``x`` for Keras's losses."""
    return _nn.remember_logits(tf.sigmoid(x), x, "Sigmoid")


def softmax(x: Any, axis: int = -1) -> Any:
    """``exp(x) / sum(exp(x))`` along ``axis``; the output remembers ``x`` for Keras's losses."""
    return _nn.remember_logits(tf.nn.softmax(x, axis=axis), x, "Softmax")


def log_softmax(x: Any, axis: int = -1) -> Any:
    """``x - logsumexp(x)`` along ``axis``."""
    return tf.nn.log_softmax(x, axis=axis)


def tanh(x: Any) -> Any:
    return tf.tanh(x)


def linear(x: Any) -> Any:
    """The identity (Keras's ``activation=None``)."""
    return x


def exponential(x: Any) -> Any:
    return tf.exp(x)


def softplus(x: Any) -> Any:
    """``log(1 + exp(x))``."""
    return tf.math.softplus(x)


def softsign(x: Any) -> Any:
    """``x / (1 + |x|)``."""
    return tf.nn.softsign(x)


def elu(x: Any, alpha: float = 1.0) -> Any:
    """``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` below."""
    if alpha == 1.0:
        return tf.nn.elu(x)
    return tf.where(x > 0, x, alpha * tf.math.expm1(tf.minimum(x, 0.0)))


def selu(x: Any) -> Any:
    """Scaled ELU with the self-normalising constants."""
    return tf.nn.selu(x)


def gelu(x: Any, approximate: bool = False) -> Any:
    """Gaussian error linear unit (exact erf form by default, as Keras)."""
    return tf.nn.gelu(x, approximate=approximate)


def silu(x: Any) -> Any:
    """``x * sigmoid(x)`` (also called swish)."""
    return tf.nn.silu(x)


swish = silu


def hard_sigmoid(x: Any) -> Any:
    """``relu6(x + 3) / 6`` (Keras 3's definition)."""
    return relu6(x + 3.0) / 6.0


def mish(x: Any) -> Any:
    """``x * tanh(softplus(x))``."""
    return x * tf.tanh(tf.math.softplus(x))


_BY_NAME: dict[str, Callable] = {
    "relu": relu, "relu6": relu6, "leaky_relu": leaky_relu, "sigmoid": sigmoid, "softmax": softmax,
    "log_softmax": log_softmax, "tanh": tanh, "linear": linear, "exponential": exponential,
    "softplus": softplus, "softsign": softsign, "elu": elu, "selu": selu, "gelu": gelu, "silu": silu,
    "swish": swish, "hard_sigmoid": hard_sigmoid, "mish": mish,
}


def get(identifier: Any) -> Callable:
    """An activation function from a name (``"relu"``), None (linear) or a callable.

    Example:
        >>> import tapejax as tf
        >>> tf.keras.activations.get(None) is tf.keras.activations.linear
        True
    """
    if identifier is None:
        return linear
    if isinstance(identifier, str):
        fn = _BY_NAME.get(identifier)
        if fn is None:
            raise ValueError(f"Could not interpret activation function identifier: {identifier}")
        return fn
    if isinstance(identifier, dict) and "class_name" in identifier:
        return get(identifier.get("config", identifier["class_name"]))
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret activation function identifier: {identifier}")


def serialize(activation: Callable) -> Any:
    """The name Keras stores in a layer config for ``activation``."""
    for name, fn in _BY_NAME.items():
        if fn is activation:
            return "silu" if name == "swish" else name
    return getattr(activation, "__name__", repr(activation))


def deserialize(config: Any, custom_objects: Any = None) -> Callable:
    if custom_objects and isinstance(config, str) and config in custom_objects:
        return custom_objects[config]
    return get(config)
