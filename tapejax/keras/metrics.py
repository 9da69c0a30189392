"""``tf.keras.metrics``: Keras 3's metrics, their updates recorded as ops on the tape.

Each class is Keras 3's (so ``Accuracy`` averages over elements, as TF 2.21
does); ``update_state``, ``result`` and ``reset_state`` are ops over the
metric's variables, so a metric updated inside a ``tapejax.function`` step
accumulates across calls. The metric functions (``binary_accuracy``...) are
ops too.

Example:
    >>> import tapejax as tf
    >>> m = tf.keras.metrics.Accuracy()
    >>> m.update_state([1, 2, 3, 4], [0, 2, 3, 4])
    >>> m.update_state([1, 2], [1, 2])
    >>> round(float(m.result()), 4)
    0.8333
"""

from __future__ import annotations

from ._bridge import keras, tf_keras
from ._objects import MetricMixin, deserializer, generate, generate_functions, getter

_names = generate(tf_keras.metrics, keras.metrics.Metric, MetricMixin, __name__)
_names.update(generate_functions(tf_keras.metrics, __name__))
_names["get"] = getter(keras.metrics.get, _names)
_names["deserialize"] = deserializer(keras.metrics.deserialize, _names)
globals().update(_names)

# Computed at import (from Keras 3's names): the generated stub metrics.pyi spells these names out for type checkers.
__all__ = sorted(_names)  # pyright: ignore[reportUnsupportedDunderAll]
