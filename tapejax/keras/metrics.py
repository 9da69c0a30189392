"""``tf.keras.metrics``: running averages kept in variables (``update_state``, ``result``, ``reset_state``).

The state (``total`` and ``count``) lives in non-trainable float32 variables, so
a metric updated inside a ``tapejax.function`` step is compiled state like the
model's variables. Metric arithmetic is not differentiated and is not recorded
on tapes.

Example:
    >>> import tapejax as tf
    >>> acc = tf.keras.metrics.SparseCategoricalAccuracy()
    >>> acc.update_state(tf.constant([0, 1]), tf.constant([[0.9, 0.1], [0.8, 0.2]]))
    >>> float(acc.result())
    0.5
"""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp

from .._core._recorder import Tensor
from .._tf._distribute_ctx import VariableAggregation, VariableSynchronization
from .._tf._variable import Variable
from . import _naming
from ._nn import value as _value

__all__ = [
    "Accuracy", "BinaryAccuracy", "CategoricalAccuracy", "Mean", "MeanMetricWrapper", "Metric",
    "SparseCategoricalAccuracy", "Sum", "get",
]


class Metric:
    """Base class: subclasses keep state in ``add_variable`` variables and implement
    ``update_state`` and ``result``."""

    def __init__(self, name: str | None = None, dtype: Any = None):
        self.name = name or _naming.auto_name(type(self).__name__)
        self._dtype = jnp.dtype(dtype or "float32")
        self._variables: list[Variable] = []

    @property
    def dtype(self) -> str:
        return self._dtype.name

    def add_variable(self, shape: Any = (), initializer: Any = "zeros", dtype: Any = None, name: str | None = None) -> Variable:
        d = jnp.dtype(dtype or self._dtype)
        # Per-replica state summed on read, as Keras's metric variables (aggregation="sum", synchronization="on_read").
        v = Variable(Tensor(jnp.zeros(tuple(shape), d)), trainable=False, name=name or "variable",
                     synchronization=VariableSynchronization.ON_READ, aggregation=VariableAggregation.SUM)
        self._variables.append(v)
        return v

    @property
    def variables(self) -> list:
        return list(self._variables)

    def update_state(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def result(self) -> Tensor:
        raise NotImplementedError

    def reset_state(self) -> None:
        """Set every state variable back to zero."""
        for v in self._variables:
            v.assign(Tensor(jnp.zeros(v._value.shape, v._value.dtype)))

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        """Update with one batch and return the updated result."""
        self.update_state(*args, **kwargs)
        return self.result()

    def get_config(self) -> dict:
        return {"name": self.name, "dtype": self.dtype}

    @classmethod
    def from_config(cls, config: dict) -> Metric:
        return cls(**config)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}>"


def _same_rank(x1: Any, x2: Any) -> tuple:
    """Keras's rank fix for arrays: ``(n,)`` against ``(n, 1)`` becomes ``(n, 1)`` against ``(n, 1)``."""
    r1, r2 = x1.ndim, x2.ndim
    if r1 == r2 + 1 and x1.shape[-1] == 1:
        if r2 == 1:
            x2 = x2[..., None]
        else:
            x1 = x1[..., 0]
    elif r2 == r1 + 1 and x2.shape[-1] == 1:
        if r1 == 1:
            x1 = x1[..., None]
        else:
            x2 = x2[..., 0]
    return x1, x2


def _samplewise(values: Any, sample_weight: Any, dtype: Any) -> tuple:
    """Keras's reduction of a batch to per-sample values (and per-sample weights)."""
    values = jnp.asarray(values, dtype)
    sw = None
    if sample_weight is not None:
        sw = jnp.asarray(_value(sample_weight), dtype)
        values, sw = _same_rank(values, sw)
        if values.ndim > sw.ndim:
            values = jnp.mean(values, axis=tuple(range(sw.ndim, values.ndim)))
        sw = jnp.broadcast_to(sw, values.shape)
        values = values * sw
        if sw.ndim > 1:
            sw = jnp.mean(sw, axis=tuple(range(1, sw.ndim)))
    if values.ndim > 1:
        values = jnp.mean(values, axis=tuple(range(1, values.ndim)))
    return values, sw


class Sum(Metric):
    """The (weighted) sum of the values seen."""

    def __init__(self, name: str = "sum", dtype: Any = None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_variable(name="total")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        v, _ = _samplewise(_value(values), sample_weight, self._dtype)
        self.total.assign_add(Tensor(jnp.sum(v).astype(self._dtype)))

    def result(self) -> Tensor:
        return self.total.value()


class Mean(Metric):
    """The (weighted) mean of the values seen: ``total / count``.

    Example:
        >>> import tapejax as tf
        >>> m = tf.keras.metrics.Mean()
        >>> m.update_state([1.0, 3.0]); m.update_state(5.0)
        >>> float(m.result())
        3.0
    """

    def __init__(self, name: str = "mean", dtype: Any = None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_variable(name="total")
        self.count = self.add_variable(name="count")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        v, sw = _samplewise(_value(values), sample_weight, self._dtype)
        self.total.assign_add(Tensor(jnp.sum(v).astype(self._dtype)))
        if sw is not None:
            n = jnp.sum(sw)
        elif v.ndim >= 1:
            n = v.shape[0]
        else:
            n = 1
        self.count.assign_add(Tensor(jnp.asarray(n, self._dtype)))

    def result(self) -> Tensor:
        total, count = self.total._value, self.count._value
        return Tensor(jnp.where(count == 0, jnp.zeros_like(total), total / jnp.where(count == 0, 1, count)))


class MeanMetricWrapper(Mean):
    """The mean of a per-sample function ``fn(y_true, y_pred)`` over everything seen."""

    def __init__(self, fn: Callable, name: str | None = None, dtype: Any = None, **kwargs: Any):
        super().__init__(name=name or getattr(fn, "__name__", "mean_metric_wrapper"), dtype=dtype)
        self._fn = fn
        self._fn_kwargs = kwargs

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        values = self._fn(y_true, y_pred, **self._fn_kwargs)
        super().update_state(_value(values), sample_weight=sample_weight)


def sparse_categorical_accuracy(y_true: Any, y_pred: Any) -> Any:
    """1.0 where ``argmax(y_pred, -1)`` equals the integer label, else 0.0 (per sample)."""
    yp = jnp.asarray(_value(y_pred))
    yt = jnp.asarray(_value(y_true)).astype(yp.dtype if jnp.issubdtype(yp.dtype, jnp.floating) else jnp.float32)
    org_shape = yt.shape
    reshape = False
    if yt.ndim == yp.ndim and yt.shape[-1] == 1:
        yt = yt[..., 0]
        reshape = True
    pred = jnp.argmax(yp, axis=-1).astype(yt.dtype)
    matches = (yt == pred).astype(jnp.float32)
    if reshape:
        matches = matches.reshape(org_shape)
    if matches.ndim > 1 and matches.shape[-1] == 1:
        matches = matches[..., 0]
    return matches


def categorical_accuracy(y_true: Any, y_pred: Any) -> Any:
    """1.0 where ``argmax(y_pred, -1) == argmax(y_true, -1)``, else 0.0 (per sample)."""
    yp = jnp.asarray(_value(y_pred))
    yt = jnp.asarray(_value(y_true))
    return (jnp.argmax(yt, axis=-1) == jnp.argmax(yp, axis=-1)).astype(jnp.float32)


def binary_accuracy(y_true: Any, y_pred: Any, threshold: float = 0.5) -> Any:
    """The mean over the last axis of ``(y_pred > threshold) == y_true``."""
    yp = jnp.asarray(_value(y_pred))
    yt = jnp.asarray(_value(y_true)).astype(yp.dtype)
    if yt.ndim == yp.ndim + 1 and yt.shape[-1] == 1:
        yt = yt[..., 0]
    elif yp.ndim == yt.ndim + 1 and yp.shape[-1] == 1:
        yp = yp[..., 0]
    pred = (yp > threshold).astype(yt.dtype)
    return jnp.mean((yt == pred).astype(jnp.float32), axis=-1)


def accuracy(y_true: Any, y_pred: Any) -> Any:
    """1.0 where ``y_pred == y_true`` elementwise, averaged over the last axis."""
    yp = jnp.asarray(_value(y_pred))
    yt = jnp.asarray(_value(y_true)).astype(yp.dtype)
    if yt.ndim == yp.ndim + 1 and yt.shape[-1] == 1:
        yt = yt[..., 0]
    elif yp.ndim == yt.ndim + 1 and yp.shape[-1] == 1:
        yp = yp[..., 0]
    return jnp.mean((yt == yp).astype(jnp.float32), axis=-1)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """How often ``argmax(y_pred)`` equals the integer label (logits or probabilities alike).

    Example:
        >>> import tapejax as tf
        >>> m = tf.keras.metrics.SparseCategoricalAccuracy()
        >>> float(m([[2], [1]], [[0.1, 0.6, 0.3], [0.05, 0.95, 0.0]]))
        0.5
    """

    def __init__(self, name: str = "sparse_categorical_accuracy", dtype: Any = None):
        super().__init__(sparse_categorical_accuracy, name=name, dtype=dtype)


class CategoricalAccuracy(MeanMetricWrapper):
    """How often ``argmax(y_pred)`` equals ``argmax`` of the one-hot label."""

    def __init__(self, name: str = "categorical_accuracy", dtype: Any = None):
        super().__init__(categorical_accuracy, name=name, dtype=dtype)


class BinaryAccuracy(MeanMetricWrapper):
    """How often ``y_pred > threshold`` matches the 0/1 label."""

    def __init__(self, name: str = "binary_accuracy", dtype: Any = None, threshold: float = 0.5):
        super().__init__(binary_accuracy, name=name, dtype=dtype, threshold=threshold)
        self.threshold = threshold


class Accuracy(MeanMetricWrapper):
    """How often ``y_pred`` equals ``y_true`` exactly."""

    def __init__(self, name: str = "accuracy", dtype: Any = None):
        super().__init__(accuracy, name=name, dtype=dtype)


_BY_NAME = {
    "mean": Mean, "sum": Sum, "accuracy": Accuracy, "binary_accuracy": BinaryAccuracy,
    "categorical_accuracy": CategoricalAccuracy, "sparse_categorical_accuracy": SparseCategoricalAccuracy,
}


def get(identifier: Any) -> Any:
    """A metric object from its name (``"sparse_categorical_accuracy"``), or ``identifier`` itself."""
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier)
        if cls is None:
            raise ValueError(f"Could not interpret metric identifier: {identifier}")
        return cls()
    if isinstance(identifier, Metric) or callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret metric identifier: {identifier}")
