"""``tf.keras.losses``: mean squared error and the cross-entropies, with Keras 3's conventions.

Conventions reproduced from Keras 3 (TF 2.21):

- Loss objects convert ``y_true`` and ``y_pred`` to float32, compute one value
  per sample (the mean over the last axis for MSE and binary cross-entropy),
  then reduce: ``"sum_over_batch_size"`` (default; the sum of the weighted
  per-sample values divided by their number), ``"sum"``, ``"mean"``,
  ``"mean_with_sample_weight"`` or ``"none"``/None.
- A ``y_true``/``y_pred`` pair whose ranks differ by one with a trailing 1 is
  squeezed (or expanded) to the same rank first, so ``(n,)`` vs ``(n, 1)`` does
  not broadcast to ``(n, n)``.
- Probabilities are clipped to ``[1e-7, 1 - 1e-7]`` before the log; categorical
  probabilities are first renormalised to sum to 1.
- An output of Keras's ``softmax``/``sigmoid`` activation is recognised and its
  logits are used instead (no clipping, no saturation), as Keras does.

Example:
    >>> import tapejax as tf
    >>> loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    >>> round(float(loss(tf.constant([0, 1]), tf.constant([[2.0, 0.0], [0.0, 2.0]]))), 4)
    0.1269
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

from .._tf import _surface as tf

from .._core._recorder import Tensor, VariableBase
from . import _naming, _nn
from .backend import epsilon

__all__ = [
    "BinaryCrossentropy", "CategoricalCrossentropy", "Loss", "MeanSquaredError", "SparseCategoricalCrossentropy",
    "binary_crossentropy", "categorical_crossentropy", "get", "mean_squared_error", "mse", "MSE",
    "sparse_categorical_crossentropy",
]

_REDUCTIONS = ("sum_over_batch_size", "sum", None, "none", "mean", "mean_with_sample_weight")


def _t(x: Any, dtype: Any = None) -> Tensor:
    if isinstance(x, Tensor):
        return x if dtype is None or x.dtype.name == tf.as_dtype(dtype).name else tf.cast(x, dtype)
    if isinstance(x, VariableBase):
        return _t(x.value(), dtype)
    t = tf.convert_to_tensor(x, dtype_hint=dtype)
    return t if dtype is None or t.dtype.name == tf.as_dtype(dtype).name else tf.cast(t, dtype)


def squeeze_or_expand_to_same_rank(x1: Tensor, x2: Tensor, expand_rank_1: bool = True) -> tuple:
    """Keras's rank fix: when ranks differ by one and the longer ends in 1, squeeze (or expand a rank-1 one)."""
    r1, r2 = len(x1.shape), len(x2.shape)
    if r1 == r2:
        return x1, x2
    if r1 == r2 + 1 and x1.shape[-1] == 1:
        if r2 == 1 and expand_rank_1:
            x2 = _nn.expand_last(x2)
        else:
            x1 = _nn.squeeze_last(x1)
    if r2 == r1 + 1 and x2.shape[-1] == 1:
        if r1 == 1 and expand_rank_1:
            x1 = _nn.expand_last(x1)
        else:
            x2 = _nn.squeeze_last(x2)
    return x1, x2


def _reduce(values: Tensor, sample_weight: Any, reduction: Any) -> Tensor:
    if sample_weight is not None:
        sw = _t(sample_weight, values.dtype)
        values, sw = squeeze_or_expand_to_same_rank(values, sw)
        values = values * sw
    if reduction is None or reduction == "none" or tuple(values.shape) in ((), (0,)):
        return values
    loss = tf.reduce_sum(values)
    if reduction == "sum":
        return loss
    if reduction == "mean_with_sample_weight" and sample_weight is not None:
        divisor = tf.reduce_sum(sw)
    else:
        n = 1
        for d in values.shape:
            n *= int(d)
        divisor = float(n)
    return tf.math.divide_no_nan(loss, divisor if isinstance(divisor, Tensor) else tf.constant(divisor, loss.dtype))


# ---- per-sample loss functions ------------------------------------------------------------


def mean_squared_error(y_true: Any, y_pred: Any) -> Tensor:
    """``mean(square(y_true - y_pred), axis=-1)``: one value per sample.

    Example:
        >>> import tapejax as tf
        >>> tf.keras.losses.mean_squared_error(tf.constant([[0.0, 1.0]]), tf.constant([[1.0, 1.0]])).numpy().tolist()
        [0.5]
    """
    y_pred = _t(y_pred)
    y_true = _t(y_true, y_pred.dtype)
    y_true, y_pred = squeeze_or_expand_to_same_rank(y_true, y_pred)
    return tf.reduce_mean(tf.square(y_true - y_pred), axis=-1)


mse = MSE = mean_squared_error


def _logits_warning(fn_name: str, kind: str) -> None:
    warnings.warn(
        f'"`{fn_name}` received `from_logits=True`, but the `output` argument was produced by a {kind} '
        "activation and thus does not represent logits. Was this intended?",
        stacklevel=3,
    )


def _check_same_shape(target: Tensor, output: Tensor) -> None:
    if len(target.shape) != len(output.shape):
        raise ValueError(
            "Arguments `target` and `output` must have the same rank (ndim). Received: "
            f"target.shape={tuple(target.shape)}, output.shape={tuple(output.shape)}"
        )
    for a, b in zip(target.shape, output.shape):
        if a != b:
            raise ValueError(
                "Arguments `target` and `output` must have the same shape. Received: "
                f"target.shape={tuple(target.shape)}, output.shape={tuple(output.shape)}"
            )


def binary_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1) -> Tensor:
    """Binary cross-entropy, averaged over ``axis``: one value per sample.

    Example:
        >>> import tapejax as tf
        >>> round(float(tf.keras.losses.binary_crossentropy(tf.constant([1.0]), tf.constant([0.9]))), 5)
        0.10536
    """
    y_pred = _t(y_pred)
    y_true = _t(y_true, y_pred.dtype)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    _check_same_shape(y_true, y_pred)
    logits = _nn.logits_of(y_pred, "Sigmoid")
    if logits is not None:
        if from_logits:
            _logits_warning("binary_crossentropy", "Sigmoid")
        elementwise = tf.nn.sigmoid_cross_entropy_with_logits(labels=y_true, logits=logits)
    elif from_logits:
        elementwise = tf.nn.sigmoid_cross_entropy_with_logits(labels=y_true, logits=y_pred)
    else:
        eps = epsilon()
        p = tf.clip_by_value(y_pred, eps, 1.0 - eps)
        elementwise = -(y_true * tf.math.log(p) + (1.0 - y_true) * tf.math.log(1.0 - p))
    return tf.reduce_mean(elementwise, axis=axis)


def categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1) -> Tensor:
    """Cross-entropy between one-hot (or soft) labels and class probabilities or logits.

    Example:
        >>> import tapejax as tf
        >>> round(float(tf.keras.losses.categorical_crossentropy(tf.constant([[0.0, 1.0]]), tf.constant([[0.1, 0.9]]))[0]), 5)
        0.10536
    """
    if isinstance(axis, bool):
        raise ValueError(f"`axis` must be of type `int`. Received: axis={axis} of type {type(axis)}")
    y_pred = _t(y_pred)
    y_true = _t(y_true, y_pred.dtype)
    if y_pred.shape and y_pred.shape[-1] == 1:
        warnings.warn(
            "In loss categorical_crossentropy, expected y_pred.shape to be (batch_size, num_classes) with "
            f"num_classes > 1. Received: y_pred.shape={tuple(y_pred.shape)}. Consider using 'binary_crossentropy' "
            "if you only have 2 classes.",
            SyntaxWarning,
            stacklevel=2,
        )
    if label_smoothing:
        n = float(y_true.shape[-1])
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / n
    if len(y_true.shape) < 1:
        raise ValueError(
            f"Arguments `target` and `output` must be at least rank 1. Received: target.shape={tuple(y_true.shape)}, "
            f"output.shape={tuple(y_pred.shape)}"
        )
    _check_same_shape(y_true, y_pred)
    logits = _nn.logits_of(y_pred, "Softmax")
    if logits is not None:
        if from_logits:
            _logits_warning("categorical_crossentropy", "Softmax")
        return tf.nn.softmax_cross_entropy_with_logits(labels=y_true, logits=logits, axis=axis)
    if from_logits:
        return tf.nn.softmax_cross_entropy_with_logits(labels=y_true, logits=y_pred, axis=axis)
    p = y_pred / tf.reduce_sum(y_pred, axis=axis, keepdims=True)
    eps = epsilon()
    p = tf.clip_by_value(p, eps, 1.0 - eps)
    return -tf.reduce_sum(y_true * tf.math.log(p), axis=axis)


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, ignore_class: int | None = None, axis: int = -1) -> Tensor:
    """Cross-entropy between integer class labels and class probabilities or logits.

    Example:
        >>> import tapejax as tf
        >>> round(float(tf.keras.losses.sparse_categorical_crossentropy(tf.constant([1]), tf.constant([[0.1, 0.9]]))[0]), 5)
        0.10536
    """
    y_pred = _t(y_pred)
    y_true = _t(y_true)
    if axis != -1 and axis != len(y_pred.shape) - 1:
        raise ValueError(f"Only axis=-1 is currently supported. Received: axis={axis}")
    if len(y_true.shape) == len(y_pred.shape) and y_true.shape[-1] == 1:
        y_true = _nn.squeeze_last(y_true)
    if len(y_pred.shape) < 1:
        raise ValueError(f"Argument `output` must be at least rank 1. Received: output.shape={tuple(y_pred.shape)}")
    if len(y_true.shape) != len(y_pred.shape) - 1:
        raise ValueError(
            "Argument `output` must have rank (ndim) `target.ndim - 1`. Received: "
            f"target.shape={tuple(y_true.shape)}, output.shape={tuple(y_pred.shape)}"
        )
    for a, b in zip(y_true.shape, y_pred.shape[:-1]):
        if a != b:
            raise ValueError(
                "Arguments `target` and `output` must have the same shape up until the last dimension: "
                f"target.shape={tuple(y_true.shape)}, output.shape={tuple(y_pred.shape)}"
            )
    labels = tf.cast(y_true, "int32")
    valid = None
    if ignore_class is not None:
        valid = tf.not_equal(labels, int(ignore_class))
        labels = tf.where(valid, labels, tf.zeros_like(labels))
    logits = _nn.logits_of(y_pred, "Softmax")
    if logits is not None:
        if from_logits:
            _logits_warning("sparse_categorical_crossentropy", "Softmax")
        out = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    elif from_logits:
        out = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=y_pred)
    else:
        # Keras's TF backend: clip the probabilities, take logs, then a sparse softmax
        # cross-entropy of those logs (which renormalises the clipped probabilities).
        eps = epsilon()
        log_p = tf.math.log(tf.clip_by_value(y_pred, eps, 1.0 - eps))
        out = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=log_p)
    if valid is not None:
        out = tf.where(valid, out, tf.zeros_like(out))
    return out


# ---- loss objects -----------------------------------------------------------------------


class Loss:
    """Base class of loss objects: ``loss(y_true, y_pred, sample_weight=None)`` is a reduced tensor.

    Subclasses implement ``call(y_true, y_pred)`` returning per-sample values.
    """

    def __init__(self, name: str | None = None, reduction: Any = "sum_over_batch_size", dtype: Any = None):
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"Invalid value for argument `reduction`. Expected one of {set(_REDUCTIONS)}. Received: reduction={reduction}"
            )
        self.name = name or _naming.auto_name(type(self).__name__)
        self.reduction = reduction
        self._dtype = tf.as_dtype(dtype if dtype is not None else "float32").name

    @property
    def dtype(self) -> str:
        return self._dtype

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Tensor:
        y_pred = _keep_logits(y_pred, _t(y_pred, self._dtype))
        y_true = _t(y_true, self._dtype)
        losses = self.call(y_true, y_pred)
        return _reduce(losses, sample_weight, self.reduction)

    def call(self, y_true: Any, y_pred: Any) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"name": self.name, "reduction": self.reduction}

    @classmethod
    def from_config(cls, config: dict) -> Loss:
        return cls(**config)


def _keep_logits(original: Any, converted: Tensor) -> Tensor:
    # A dtype cast makes a new tensor: carry Keras's logits link over to it.
    if converted is not original:
        for kind in ("Softmax", "Sigmoid"):
            lg = _nn.logits_of(original, kind)
            if lg is not None:
                _nn.remember_logits(converted, _t(lg, converted.dtype), kind)
    return converted


class LossFunctionWrapper(Loss):
    """A loss object around a per-sample function ``fn(y_true, y_pred, **kwargs)``."""

    def __init__(self, fn: Callable, reduction: Any = "sum_over_batch_size", name: str | None = None, dtype: Any = None, **kwargs: Any):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.fn = fn
        self._fn_kwargs = kwargs

    def call(self, y_true: Any, y_pred: Any) -> Tensor:
        y_true, y_pred2 = squeeze_or_expand_to_same_rank(y_true, y_pred)
        return self.fn(y_true, _keep_logits(y_pred, y_pred2), **self._fn_kwargs)


class MeanSquaredError(LossFunctionWrapper):
    """Mean of squared errors (``tf.keras.losses.MeanSquaredError``).

    Example:
        >>> import tapejax as tf
        >>> float(tf.keras.losses.MeanSquaredError()(tf.constant([0.0, 1.0]), tf.constant([1.0, 1.0])))
        0.5
    """

    def __init__(self, reduction: Any = "sum_over_batch_size", name: str = "mean_squared_error", dtype: Any = None):
        super().__init__(mean_squared_error, name=name, reduction=reduction, dtype=dtype)


class BinaryCrossentropy(LossFunctionWrapper):
    """Binary cross-entropy for 0/1 labels and probabilities (or logits with ``from_logits=True``).

    Example:
        >>> import tapejax as tf
        >>> bce = tf.keras.losses.BinaryCrossentropy(from_logits=True)
        >>> round(float(bce(tf.constant([[1.0]]), tf.constant([[0.0]]))), 5)
        0.69315
    """

    def __init__(self, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1,
                 reduction: Any = "sum_over_batch_size", name: str = "binary_crossentropy", dtype: Any = None):
        super().__init__(binary_crossentropy, name=name, reduction=reduction, dtype=dtype,
                         from_logits=from_logits, label_smoothing=label_smoothing, axis=axis)
        self.from_logits, self.label_smoothing, self.axis = from_logits, label_smoothing, axis

    def get_config(self) -> dict:
        return {**super().get_config(), "from_logits": self.from_logits, "label_smoothing": self.label_smoothing, "axis": self.axis}


class CategoricalCrossentropy(LossFunctionWrapper):
    """Cross-entropy for one-hot labels and class probabilities (or logits with ``from_logits=True``)."""

    def __init__(self, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1,
                 reduction: Any = "sum_over_batch_size", name: str = "categorical_crossentropy", dtype: Any = None):
        super().__init__(categorical_crossentropy, name=name, reduction=reduction, dtype=dtype,
                         from_logits=from_logits, label_smoothing=label_smoothing, axis=axis)
        self.from_logits, self.label_smoothing, self.axis = from_logits, label_smoothing, axis

    def get_config(self) -> dict:
        return {**super().get_config(), "from_logits": self.from_logits, "label_smoothing": self.label_smoothing, "axis": self.axis}


class SparseCategoricalCrossentropy(LossFunctionWrapper):
    """Cross-entropy for integer class labels and class probabilities (or logits with ``from_logits=True``)."""

    def __init__(self, from_logits: bool = False, ignore_class: int | None = None, reduction: Any = "sum_over_batch_size",
                 axis: int = -1, name: str = "sparse_categorical_crossentropy", dtype: Any = None):
        super().__init__(sparse_categorical_crossentropy, name=name, reduction=reduction, dtype=dtype,
                         from_logits=from_logits, ignore_class=ignore_class, axis=axis)
        self.from_logits, self.ignore_class, self.axis = from_logits, ignore_class, axis

    def get_config(self) -> dict:
        return {**super().get_config(), "from_logits": self.from_logits, "ignore_class": self.ignore_class, "axis": self.axis}


_BY_NAME: dict[str, Any] = {
    "mean_squared_error": mean_squared_error, "mse": mean_squared_error, "MSE": mean_squared_error,
    "binary_crossentropy": binary_crossentropy, "categorical_crossentropy": categorical_crossentropy,
    "sparse_categorical_crossentropy": sparse_categorical_crossentropy,
    "MeanSquaredError": MeanSquaredError, "BinaryCrossentropy": BinaryCrossentropy,
    "CategoricalCrossentropy": CategoricalCrossentropy, "SparseCategoricalCrossentropy": SparseCategoricalCrossentropy,
}


def get(identifier: Any) -> Any:
    """A loss function or object from its name, or ``identifier`` itself if callable."""
    if identifier is None:
        return None
    if isinstance(identifier, str):
        obj = _BY_NAME.get(identifier)
        if obj is None:
            raise ValueError(f"Could not interpret loss identifier: {identifier}")
        return obj() if isinstance(obj, type) else obj
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret loss identifier: {identifier}")
