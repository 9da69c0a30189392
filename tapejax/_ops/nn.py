"""``tf.nn`` with TF's signatures: softmax family, cross-entropies, ``l2_loss``,
``moments``, ``dropout``, convolutions and pooling (NHWC by default).

The elementwise activations (relu, relu6, elu, selu, gelu, leaky_relu, silu,
softplus, softsign, sigmoid, tanh) are in ``_ops``'s unary table.

TF conventions kept here:

* ``softmax_cross_entropy_with_logits``' gradient with respect to the logits is
  TF's kernel's ``softmax(logits) - labels``, even when the labels do not sum to 1
  (the analytic derivative would scale the softmax by ``sum(labels)``).
* ``sigmoid_cross_entropy_with_logits`` is TF's stable formula, and also
  differentiates with respect to the labels.
* Pooling with ``SAME`` padding averages only the real (unpadded) inputs, and the
  max-pool gradient goes to the first maximum of a window, as TF's.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core._recorder import Tensor, bind
from . import random as _random
from ._dtypes import from_np
from ._machinery import (
    FLOAT,
    INEXACT,
    INT,
    NUMERIC,
    OPS,
    _as_t,
    _concrete,
    _dt,
    _export,
    _is_t,
    check_dtype,
    norm_axis,
    prim,
    same_dtype,
)
from .array import _ints, gather, reshape

# ---- softmax ------------------------------------------------------------------------


def _softmax_axis(x: Any, axis: Any, opname: str) -> int:
    nd = x._aval.ndim
    ax = -1 if axis is None else int(axis)
    if not -nd <= ax < nd:
        raise errors.InvalidArgumentError(
            f"`dim` must be in the range [{-nd}, {nd}) where {nd} is the number of dimensions in the input. Received: dim={ax}")
    return ax % nd


_softmax_p = prim("softmax", lambda x, axis: jax.nn.softmax(x, axis=axis))
_log_softmax_p = prim("log_softmax", lambda x, axis: jax.nn.log_softmax(x, axis=axis))


def softmax(logits: Any, axis: Any = None, name: str | None = None) -> Tensor:
    """``exp(logits) / sum(exp(logits), axis)`` (last axis by default), as ``tf.nn.softmax``.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.softmax(tf.constant([0.0, 0.0])).numpy().tolist()
        [0.5, 0.5]
    """
    x = _as_t(logits)
    if _dt(x) not in FLOAT:
        check_dtype("Softmax", x, FLOAT)
    return bind(_softmax_p, x, axis=_softmax_axis(x, axis, "Softmax"))


def log_softmax(logits: Any, axis: Any = None, name: str | None = None) -> Tensor:
    """``logits - log(sum(exp(logits), axis))``, as ``tf.nn.log_softmax``.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.log_softmax(tf.constant([0.0, 0.0])).numpy().round(4).tolist()
        [-0.6931, -0.6931]
    """
    x = _as_t(logits)
    if _dt(x) not in FLOAT:
        check_dtype("LogSoftmax", x, FLOAT)
    return bind(_log_softmax_p, x, axis=_softmax_axis(x, axis, "LogSoftmax"))


_export(softmax, "nn.softmax", "math.softmax", jax_name="jax.nn.softmax")
_export(log_softmax, "nn.log_softmax", "math.log_softmax", jax_name="jax.nn.log_softmax")


# ---- cross-entropies ------------------------------------------------------------------------


def _sigmoid_xent(z: Any, x: Any) -> Any:
    # TF's formula: max(x, 0) - x * z + log(1 + exp(-|x|)), written with selects
    # exactly as TF does so the gradient at x == 0 matches.
    cond = x >= 0
    relu_logits = jnp.where(cond, x, jnp.zeros_like(x))
    neg_abs = jnp.where(cond, -x, x)
    return relu_logits - x * z + jnp.log1p(jnp.exp(neg_abs))


_sigmoid_xent_p = prim("sigmoid_cross_entropy_with_logits", _sigmoid_xent)


def sigmoid_cross_entropy_with_logits(labels: Any = None, logits: Any = None, name: str | None = None) -> Tensor:
    """Elementwise logistic loss, TF's numerically stable formula (``tf.nn.sigmoid_cross_entropy_with_logits``).

    Example:
        >>> import tapejax as tf
        >>> tf.nn.sigmoid_cross_entropy_with_logits(labels=[1.0], logits=[0.0]).numpy().round(4).tolist()
        [0.6931]
    """
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    x = _as_t(logits)
    z = _as_t(labels) if _is_t(labels) else _as_t(labels, dtype=from_np(_dt(x)))
    if tuple(z._aval.shape) != tuple(x._aval.shape):
        raise ValueError(f"`logits` and `labels` must have the same shape, received ({tuple(x._aval.shape)} vs {tuple(z._aval.shape)}).")
    z, x = same_dtype("SigmoidCrossEntropyWithLogits", z, x)
    check_dtype("SigmoidCrossEntropyWithLogits", x, FLOAT) if _dt(x) not in FLOAT else None
    return bind(_sigmoid_xent_p, z, x)


def _weighted_xent(z: Any, x: Any, q: Any) -> Any:
    # TF: (1 - z) * x + (1 + (q - 1) * z) * (log1p(exp(-|x|)) + max(-x, 0))
    lw = 1 + (q - 1) * z
    return (1 - z) * x + lw * (jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(-x, jnp.zeros_like(x)))


_weighted_xent_p = prim("weighted_cross_entropy_with_logits", _weighted_xent)


def weighted_cross_entropy_with_logits(labels: Any, logits: Any, pos_weight: Any, name: str | None = None) -> Tensor:
    """Logistic loss with positives weighted by ``pos_weight``, as ``tf.nn.weighted_cross_entropy_with_logits``.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.weighted_cross_entropy_with_logits([1.0], [0.0], 2.0).numpy().round(4).tolist()
        [1.3863]
    """
    x = _as_t(logits)
    z, x, q = same_dtype("WeightedCrossEntropy", labels if _is_t(labels) else _as_t(labels, from_np(_dt(x))), x, pos_weight)
    if tuple(z._aval.shape) != tuple(x._aval.shape):
        raise ValueError(f"`logits` and `labels` must have the same shape, received ({tuple(x._aval.shape)} vs {tuple(z._aval.shape)}).")
    return bind(_weighted_xent_p, z, x, q)


@jax.custom_jvp
def _softmax_xent_core(labels: Any, logits: Any) -> Any:
    # Over the last axis. The loss is sum(labels * (logsumexp(logits) - logits)).
    return -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)


@_softmax_xent_core.defjvp
def _softmax_xent_jvp(primals: tuple, tangents: tuple) -> tuple:
    z, x = primals
    tz, tx = tangents
    logp = jax.nn.log_softmax(x, axis=-1)
    loss = -jnp.sum(z * logp, axis=-1)
    # TF's kernel: d loss / d logits = softmax(logits) - labels (labels assumed to sum to 1),
    # d loss / d labels = -log_softmax(logits).
    back = jnp.exp(logp) - z
    return loss, jnp.sum(back * tx, axis=-1) - jnp.sum(logp * tz, axis=-1)


def _softmax_xent(z: Any, x: Any, axis: int) -> Any:
    return _softmax_xent_core(jnp.moveaxis(z, axis, -1), jnp.moveaxis(x, axis, -1))


_softmax_xent_p = prim("softmax_cross_entropy_with_logits", _softmax_xent)


def softmax_cross_entropy_with_logits(labels: Any, logits: Any, axis: int = -1, name: str | None = None) -> Tensor:
    """Cross-entropy between ``labels`` (a distribution) and ``softmax(logits)`` along ``axis``.

    Differentiable in both; the logits' gradient is TF's ``softmax - labels``.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.softmax_cross_entropy_with_logits([[0.0, 1.0]], [[0.0, 0.0]]).numpy().round(4).tolist()
        [0.6931]
    """
    x = _as_t(logits)
    z = labels if _is_t(labels) else _as_t(labels, from_np(_dt(x)))
    z, x = same_dtype("SoftmaxCrossEntropyWithLogits", z, x)
    check_dtype("SoftmaxCrossEntropyWithLogits", x, FLOAT) if _dt(x) not in FLOAT else None
    if tuple(z._aval.shape) != tuple(x._aval.shape):
        raise errors.InvalidArgumentError(
            f"logits and labels must be broadcastable: logits_size={list(x._aval.shape)} labels_size={list(z._aval.shape)} "
            "[Op:SoftmaxCrossEntropyWithLogits]")
    nd = len(x._aval.shape)
    ax = int(axis)
    if not -nd <= ax < nd:
        raise errors.InvalidArgumentError(f"axis {ax} is out of range for logits of rank {nd}")
    return bind(_softmax_xent_p, z, x, axis=ax % nd)


def _sparse_xent(labels: Any, x: Any) -> Any:
    logp = jax.nn.log_softmax(x, axis=-1)
    return -jnp.take_along_axis(logp, labels[..., None].astype(jnp.int32), axis=-1)[..., 0]


_sparse_xent_p = prim("sparse_softmax_cross_entropy_with_logits", _sparse_xent)


def sparse_softmax_cross_entropy_with_logits(labels: Any, logits: Any, name: str | None = None) -> Tensor:
    """Cross-entropy with integer class ``labels`` (shape ``logits.shape[:-1]``); a label out of range raises.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.sparse_softmax_cross_entropy_with_logits([1], [[0.0, 0.0]]).numpy().round(4).tolist()
        [0.6931]
    """
    x = _as_t(logits)
    check_dtype("SparseSoftmaxCrossEntropyWithLogits", x, FLOAT) if _dt(x) not in FLOAT else None
    lab = _as_t(labels)
    if _dt(lab) not in INT:
        raise errors.InvalidArgumentError(f"labels must be int32 or int64, got {from_np(_dt(lab)).name}")
    if tuple(lab._aval.shape) != tuple(x._aval.shape[:-1]):
        raise ValueError(f"Shape mismatch: The shape of labels (received {tuple(lab._aval.shape)}) should equal the shape of "
                         f"logits except for the last dimension (received {tuple(x._aval.shape)}).")
    c = _concrete(lab)
    n = x._aval.shape[-1]
    if c is not None and c.size and (c.min() < 0 or c.max() >= n):
        bad = int(c[(c < 0) | (c >= n)].reshape(-1)[0])
        raise errors.InvalidArgumentError(
            f"Received a label value of {bad} which is outside the valid range of [0, {n}). [Op:SparseSoftmaxCrossEntropyWithLogits]")
    return bind(_sparse_xent_p, lab, x)


_export(sigmoid_cross_entropy_with_logits, "nn.sigmoid_cross_entropy_with_logits", jax_name="jax.numpy (TF's stable formula)")
_export(weighted_cross_entropy_with_logits, "nn.weighted_cross_entropy_with_logits", jax_name="jax.numpy (TF's formula)")
_export(softmax_cross_entropy_with_logits, "nn.softmax_cross_entropy_with_logits", jax_name="jax.nn.log_softmax (TF kernel gradient)")
_export(sparse_softmax_cross_entropy_with_logits, "nn.sparse_softmax_cross_entropy_with_logits", jax_name="jax.nn.log_softmax")


# ---- l2_loss, moments, bias_add, batch_normalization --------------------------------------------

_l2_loss_p = prim("l2_loss", lambda x: jnp.sum(x * x) / 2)


def l2_loss(t: Any, name: str | None = None) -> Tensor:
    """``sum(t ** 2) / 2``, as ``tf.nn.l2_loss``.

    Example:
        >>> import tapejax as tf
        >>> float(tf.nn.l2_loss(tf.constant([1.0, 2.0])))
        2.5
    """
    x = _as_t(t)
    check_dtype("L2Loss", x, FLOAT) if _dt(x) not in FLOAT else None
    return bind(_l2_loss_p, x)


def _moments(x: Any, axes: Any, keepdims: bool) -> tuple:
    # TF: the variance is taken around a stop-gradient mean (the same value, and
    # the same gradient since sum(x - mean) = 0; written as TF writes it).
    y = x.astype(jnp.float32) if x.dtype == jnp.float16 else x
    mean = jnp.mean(y, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(y - lax.stop_gradient(mean)), axis=axes, keepdims=True)
    if not keepdims:
        mean, var = jnp.squeeze(mean, axes), jnp.squeeze(var, axes)
    return mean.astype(x.dtype), var.astype(x.dtype)


_moments_p = prim("moments", _moments, multiple_results=True)


def moments(x: Any, axes: Any, shift: Any = None, keepdims: bool = False, name: str | None = None) -> tuple:
    """``(mean, variance)`` over ``axes``, as ``tf.nn.moments``.

    Example:
        >>> import tapejax as tf
        >>> m, v = tf.nn.moments(tf.constant([1.0, 2.0, 3.0]), axes=[0])
        >>> float(m), round(float(v), 4)
        (2.0, 0.6667)
    """
    t = _as_t(x)
    check_dtype("Mean", t, INEXACT) if _dt(t) not in INEXACT else None
    return tuple(bind(_moments_p, t, axes=norm_axis(axes, t._aval.ndim, "moments"), keepdims=bool(keepdims)))


def _bias_add(x: Any, b: Any, channel_axis: int) -> Any:
    shape = [1] * x.ndim
    shape[channel_axis] = b.shape[0]
    return x + b.reshape(shape)


_bias_add_p = prim("bias_add", _bias_add)


def bias_add(value: Any, bias: Any, data_format: Any = None, name: str | None = None) -> Tensor:
    """Add a 1-D ``bias`` along the channel axis (last for NHWC, 1 for NC...), as ``tf.nn.bias_add``.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.bias_add(tf.ones((2, 3)), tf.constant([1.0, 2.0, 3.0])).numpy()[0].tolist()
        [2.0, 3.0, 4.0]
    """
    x, b = same_dtype("BiasAdd", value, bias)
    if b._aval.ndim != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {b._aval.ndim} for bias.")
    ax = 1 if data_format is not None and data_format.startswith("NC") else x._aval.ndim - 1
    if x._aval.shape[ax] != b._aval.shape[0]:
        raise errors.InvalidArgumentError(
            f"Must provide as many biases as the channel dimension of the input tensor: {list(b._aval.shape)} vs. {list(x._aval.shape)} "
            "[Op:BiasAdd]")
    return bind(_bias_add_p, x, b, channel_axis=ax)


def batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any, variance_epsilon: float,
                        name: str | None = None) -> Tensor:
    """``(x - mean) * scale / sqrt(variance + eps) + offset`` (offset/scale may be None), as TF.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.batch_normalization(tf.constant([1.0, 3.0]), 2.0, 1.0, None, None, 0.0).numpy().tolist()
        [-1.0, 1.0]
    """
    E = OPS
    xt = _as_t(x)
    dt = from_np(_dt(xt))

    def conv(v: Any) -> Any:
        return v if _is_t(v) else _as_t(v, dt)

    inv = E["rsqrt"](E["add"](conv(variance), variance_epsilon))
    if scale is not None:
        inv = E["multiply"](inv, conv(scale))
    shift = E["multiply"](conv(mean), inv)
    shift = E["negative"](shift) if offset is None else E["subtract"](conv(offset), shift)
    return E["add"](E["multiply"](xt, inv), shift)


def embedding_lookup(params: Any, ids: Any, max_norm: Any = None, name: str | None = None) -> Tensor:
    """Rows of ``params`` at ``ids`` (``tf.gather`` on axis 0; dense gradient).

    Example:
        >>> import tapejax as tf
        >>> tf.nn.embedding_lookup(tf.constant([[1.0, 2.0], [3.0, 4.0]]), [1]).numpy().tolist()
        [[3.0, 4.0]]
    """
    if isinstance(params, list | tuple) and len(params) == 1:
        params = params[0]
    if max_norm is not None:
        raise NotImplementedError("tapejax's embedding_lookup does not support max_norm; clip the rows with tf.clip_by_norm.")
    return gather(params, ids)


_export(l2_loss, "nn.l2_loss", jax_name="jax.numpy.sum(x**2)/2")
_export(moments, "nn.moments", jax_name="jax.numpy.mean/var")
_export(bias_add, "nn.bias_add", jax_name="jax.numpy.add")
_export(batch_normalization, "nn.batch_normalization", jax_name="jax.numpy (TF's formula)")
_export(embedding_lookup, "nn.embedding_lookup", jax_name="jax.numpy.take")


# ---- dropout ------------------------------------------------------------------------------------


def dropout(x: Any, rate: Any, noise_shape: Any = None, seed: Any = None, name: str | None = None) -> Tensor:
    """Zero each entry with probability ``rate`` and scale the rest by ``1 / (1 - rate)`` (``tf.nn.dropout``).

    ``seed`` follows TF's op-seed rules (see ``tf.random.set_seed``); the gradient
    is the same mask times the scale.

    Example:
        >>> import tapejax as tf
        >>> y = tf.nn.dropout(tf.ones(1000), rate=0.5, seed=1)
        >>> sorted(set(y.numpy().tolist()))
        [0.0, 2.0]
    """
    t = _as_t(x)
    if not from_np(_dt(t)).is_floating:
        raise ValueError(f"`x.dtype` must be a floating point tensor as `x` will be scaled. Received: x_dtype={from_np(_dt(t))!s}")
    r = _concrete(rate) if _is_t(rate) else np.asarray(rate)
    if r is None or r.ndim != 0 or not 0 <= float(r) < 1:
        raise ValueError(f"`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate={rate}")
    r = float(r)
    if r == 0:
        return t
    shape = tuple(t._aval.shape) if noise_shape is None else tuple(
        d if n is None else int(n) for d, n in zip(t._aval.shape, list(noise_shape)))
    key = _random.next_key(seed, "dropout")
    keep = jax.random.uniform(key, shape, dtype=_dt(t)) >= r
    scale = np.asarray(1.0 / (1.0 - r), dtype=_dt(t)).item()
    mask = Tensor(jnp.where(keep, jnp.asarray(scale, _dt(t)), jnp.zeros((), _dt(t))))
    return OPS["multiply"](t, mask)


_export(dropout, "nn.dropout", jax_name="jax.random.uniform mask")


# ---- convolution ------------------------------------------------------------------------------


def _tuple_n(v: Any, n: int, what: str, full: int | None = None) -> tuple:
    """TF's int-or-list argument (strides, dilations, ksize) as ``n`` spatial values."""
    if v is None:
        return (1,) * n
    if isinstance(v, int | np.integer):
        return (int(v),) * n
    v = [int(a) for a in v]
    if len(v) == 1:
        return (v[0],) * n
    if len(v) == n:
        return tuple(v)
    if full is not None and len(v) == n + 2:
        if v[0] != 1 or v[-1] != 1:
            raise errors.InvalidArgumentError(f"{what} in the batch and depth dimensions must be 1, got {v}.")
        return tuple(v[1:-1])
    raise ValueError(f"{what} should be of length 1, {n} or {n + 2}, got {len(v)}.")


def _padding(padding: Any, n: int) -> Any:
    if isinstance(padding, str):
        p = padding.upper()
        if p not in ("SAME", "VALID"):
            raise ValueError(f"`padding` must be 'SAME', 'VALID' or explicit, got {padding!r}")
        return p
    pads = [tuple(int(a) for a in pr) for pr in padding]
    if len(pads) == n + 2:
        pads = pads[1:-1]
    if len(pads) != n:
        raise ValueError(f"explicit padding must have {n + 2} pairs (one per dimension of the NHWC input), got {len(pads)}.")
    return tuple(pads)


def _spatial_fmt(n: int) -> str:
    return {1: "W", 2: "HW", 3: "DHW"}[n]


def _conv_impl(x: Any, w: Any, strides: tuple, padding: Any, dilations: tuple, channels_last: bool, groups: int) -> Any:
    s = _spatial_fmt(len(strides))
    lhs = "N" + s + "C" if channels_last else "NC" + s
    dn = lax.conv_dimension_numbers(x.shape, w.shape, (lhs, s + "IO", lhs))
    return lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=dilations, dimension_numbers=dn,
                                    feature_group_count=groups)


_conv_p = prim("conv", _conv_impl)


def _conv(n: int, input: Any, filters: Any, strides: Any, padding: Any, data_format: Any, dilations: Any,  # noqa: A002
          opname: str, depthwise: bool = False) -> Tensor:
    x, w = same_dtype(opname, input, filters)
    check_dtype(opname, x, FLOAT | INEXACT) if _dt(x) not in INEXACT else None
    if x._aval.ndim != n + 2 or w._aval.ndim != n + 2:
        raise ValueError(f"{opname}: input and filters must have rank {n + 2}, got {x._aval.ndim} and {w._aval.ndim}.")
    channels_last = data_format is None or not str(data_format).startswith("NC")
    st = _tuple_n(strides, n, "strides", full=n)
    dl = _tuple_n(dilations, n, "dilations", full=n)
    pad = _padding(padding, n)
    cin = x._aval.shape[-1] if channels_last else x._aval.shape[1]
    groups = 1
    if depthwise:
        kshape = w._aval.shape
        if kshape[-2] != cin:
            raise errors.InvalidArgumentError(f"depthwise filter in_channels {kshape[-2]} must match input depth {cin}")
        w = reshape(w, kshape[:-2] + (1, kshape[-2] * kshape[-1]))
        groups = cin
    else:
        if cin % w._aval.shape[-2]:
            raise errors.InvalidArgumentError(
                f"input depth must be evenly divisible by filter depth: {cin} vs {w._aval.shape[-2]} [Op:{opname}]")
        groups = cin // w._aval.shape[-2]
    return bind(_conv_p, x, w, strides=st, padding=pad, dilations=dl, channels_last=channels_last, groups=groups)


def conv2d(input: Any, filters: Any, strides: Any, padding: Any, data_format: str = "NHWC", dilations: Any = None,  # noqa: A002
           name: str | None = None) -> Tensor:
    """2-D convolution, NHWC input and HWIO filters (TF's cross-correlation), as ``tf.nn.conv2d``.

    ``padding``: 'SAME', 'VALID' or explicit ``[[0, 0], [top, bottom], [left, right], [0, 0]]``.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.conv2d(tf.ones((1, 4, 4, 3)), tf.ones((3, 3, 3, 2)), 1, "SAME").shape
        TensorShape([1, 4, 4, 2])
    """
    return _conv(2, input, filters, strides, padding, data_format, dilations, "Conv2D")


def conv1d(input: Any, filters: Any, stride: Any, padding: Any, data_format: str = "NWC", dilations: Any = None,  # noqa: A002
           name: str | None = None) -> Tensor:
    """1-D convolution, NWC input and WIO filters, as ``tf.nn.conv1d``."""
    return _conv(1, input, filters, stride, padding, data_format, dilations, "Conv1D")


def conv3d(input: Any, filters: Any, strides: Any, padding: Any, data_format: str = "NDHWC", dilations: Any = None,  # noqa: A002
           name: str | None = None) -> Tensor:
    """3-D convolution, NDHWC input and DHWIO filters, as ``tf.nn.conv3d``."""
    return _conv(3, input, filters, strides, padding, data_format, dilations, "Conv3D")


def convolution(input: Any, filters: Any, strides: Any = None, padding: str = "VALID", data_format: Any = None,  # noqa: A002
                dilations: Any = None, name: str | None = None) -> Tensor:
    """N-D convolution (N from the input's rank), as ``tf.nn.convolution``."""
    n = _as_t(input)._aval.ndim - 2
    return _conv(n, input, filters, strides, padding, data_format, dilations, "Conv")


def depthwise_conv2d(input: Any, filter: Any, strides: Any, padding: Any, data_format: Any = None, dilations: Any = None,  # noqa: A002
                     name: str | None = None) -> Tensor:
    """Depthwise 2-D convolution (filter ``[h, w, in, multiplier]``), as ``tf.nn.depthwise_conv2d``."""
    return _conv(2, input, filter, strides, padding, data_format, dilations, "DepthwiseConv2dNative", depthwise=True)


def _conv_transpose_impl(x: Any, w: Any, out_shape: tuple, strides: tuple, padding: Any, dilations: tuple, channels_last: bool) -> Any:
    # TF's conv2d_transpose is the gradient of conv2d with respect to its input.
    # The filters [h, w, out, in] are, read as HWIO, exactly the forward conv from the
    # transposed conv's output (out channels) to its input (in channels).
    def fwd(z: Any) -> Any:
        return _conv_impl(z, w, strides, padding, dilations, channels_last, 1)

    _, vjp = jax.vjp(fwd, jnp.zeros(out_shape, x.dtype))
    return vjp(x)[0]


_conv_t_p = prim("conv_transpose", _conv_transpose_impl)


def conv2d_transpose(input: Any, filters: Any, output_shape: Any, strides: Any, padding: str = "SAME",  # noqa: A002
                     data_format: str = "NHWC", dilations: Any = None, name: str | None = None) -> Tensor:
    """Transposed 2-D convolution (the gradient of ``conv2d``), filters ``[h, w, out, in]``, as TF.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.conv2d_transpose(tf.ones((1, 2, 2, 3)), tf.ones((3, 3, 5, 3)), [1, 4, 4, 5], 2).shape
        TensorShape([1, 4, 4, 5])
    """
    x, w = same_dtype("Conv2DBackpropInput", input, filters)
    channels_last = not str(data_format).startswith("NC")
    return bind(_conv_t_p, x, w, out_shape=_ints(output_shape, "output_shape"), strides=_tuple_n(strides, 2, "strides", full=2),
                padding=_padding(padding, 2), dilations=_tuple_n(dilations, 2, "dilations", full=2), channels_last=channels_last)


_export(conv2d, "nn.conv2d", jax_name="jax.lax.conv_general_dilated")
_export(conv1d, "nn.conv1d", jax_name="jax.lax.conv_general_dilated")
_export(conv3d, "nn.conv3d", jax_name="jax.lax.conv_general_dilated")
_export(convolution, "nn.convolution", jax_name="jax.lax.conv_general_dilated")
_export(depthwise_conv2d, "nn.depthwise_conv2d", jax_name="jax.lax.conv_general_dilated (feature groups)")
_export(conv2d_transpose, "nn.conv2d_transpose", jax_name="jax.vjp of jax.lax.conv_general_dilated")


# ---- pooling --------------------------------------------------------------------------------------


def _window(n: int, ksize: tuple, strides: tuple, channels_last: bool) -> tuple:
    if channels_last:
        return (1,) + ksize + (1,), (1,) + strides + (1,)
    return (1, 1) + ksize, (1, 1) + strides


def _pads(shape: tuple, win: tuple, st: tuple, padding: Any) -> Any:
    if isinstance(padding, str):
        return lax.padtype_to_pads(shape, win, st, padding)
    return padding


def _max_pool_impl(x: Any, win: tuple, st: tuple, padding: Any) -> Any:
    # A Python scalar init lets JAX recognise the max monoid (differentiable reduce_window_max).
    init = -np.inf if jnp.issubdtype(x.dtype, jnp.inexact) else int(jnp.iinfo(x.dtype).min)
    return lax.reduce_window(x, init, lax.max, win, st, _pads(x.shape, win, st, padding))


def _avg_pool_impl(x: Any, win: tuple, st: tuple, padding: Any) -> Any:
    pads = _pads(x.shape, win, st, padding)
    s = lax.reduce_window(x, 0.0, lax.add, win, st, pads)
    # TF averages over the real inputs only: count them with the same window.
    n = lax.reduce_window(jnp.ones(x.shape, x.dtype), 0.0, lax.add, win, st, pads)
    return s / n


_max_pool_p = prim("max_pool", _max_pool_impl)
_avg_pool_p = prim("avg_pool", _avg_pool_impl)


def _pool(p: Any, n: int | None, input: Any, ksize: Any, strides: Any, padding: Any, data_format: Any, opname: str) -> Tensor:  # noqa: A002
    x = _as_t(input)
    if n is None:
        n = int(x._aval.ndim) - 2  # (int(): the value's ndim is untyped; n is an int from here)
    if x._aval.ndim != n + 2:
        raise ValueError(f"{opname}: input must have rank {n + 2}, got {x._aval.ndim}.")
    dts = NUMERIC if p is _max_pool_p else FLOAT
    check_dtype(opname, x, dts) if _dt(x) not in dts else None
    channels_last = data_format is None or not str(data_format).startswith("NC")
    k = _tuple_n(ksize, n, "ksize", full=n)
    st = _tuple_n(strides, n, "strides", full=n)
    win, wst = _window(n, k, st, channels_last)
    pad = _padding(padding, n)
    if not isinstance(pad, str):
        pad = ((0, 0),) + pad + ((0, 0),) if channels_last else ((0, 0), (0, 0)) + pad
    return bind(p, x, win=win, st=wst, padding=pad)


def max_pool2d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NHWC", name: str | None = None) -> Tensor:  # noqa: A002
    """2-D max pooling (NHWC), as ``tf.nn.max_pool2d``; the gradient goes to the first maximum of a window.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.max_pool2d(tf.ones((1, 4, 4, 3)), 2, 2, "VALID").shape
        TensorShape([1, 2, 2, 3])
    """
    return _pool(_max_pool_p, 2, input, ksize, strides, padding, data_format, "MaxPool")


def avg_pool2d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NHWC", name: str | None = None) -> Tensor:  # noqa: A002
    """2-D average pooling (NHWC; with SAME padding only real inputs are averaged), as ``tf.nn.avg_pool2d``.

    Example:
        >>> import tapejax as tf
        >>> tf.nn.avg_pool2d(tf.ones((1, 4, 4, 3)), 2, 2, "SAME").shape
        TensorShape([1, 2, 2, 3])
    """
    return _pool(_avg_pool_p, 2, input, ksize, strides, padding, data_format, "AvgPool")


def max_pool(input: Any, ksize: Any, strides: Any, padding: Any, data_format: Any = None, name: str | None = None) -> Tensor:  # noqa: A002
    """N-D max pooling (N from the input's rank), as ``tf.nn.max_pool``."""
    return _pool(_max_pool_p, None, input, ksize, strides, padding, data_format, "MaxPool")


def avg_pool(input: Any, ksize: Any, strides: Any, padding: Any, data_format: Any = None, name: str | None = None) -> Tensor:  # noqa: A002
    """N-D average pooling (N from the input's rank), as ``tf.nn.avg_pool``."""
    return _pool(_avg_pool_p, None, input, ksize, strides, padding, data_format, "AvgPool")


def max_pool1d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NWC", name: str | None = None) -> Tensor:  # noqa: A002
    """1-D max pooling (NWC), as ``tf.nn.max_pool1d``."""
    return _pool(_max_pool_p, 1, input, ksize, strides, padding, data_format, "MaxPool")


def avg_pool1d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NWC", name: str | None = None) -> Tensor:  # noqa: A002
    """1-D average pooling (NWC), as ``tf.nn.avg_pool1d``."""
    return _pool(_avg_pool_p, 1, input, ksize, strides, padding, data_format, "AvgPool")


def max_pool3d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NDHWC", name: str | None = None) -> Tensor:  # noqa: A002
    """3-D max pooling (NDHWC), as ``tf.nn.max_pool3d``."""
    return _pool(_max_pool_p, 3, input, ksize, strides, padding, data_format, "MaxPool3D")


def avg_pool3d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NDHWC", name: str | None = None) -> Tensor:  # noqa: A002
    """3-D average pooling (NDHWC), as ``tf.nn.avg_pool3d``."""
    return _pool(_avg_pool_p, 3, input, ksize, strides, padding, data_format, "AvgPool3D")


for _f, _n in [(max_pool2d, "nn.max_pool2d"), (avg_pool2d, "nn.avg_pool2d"), (max_pool, "nn.max_pool"), (avg_pool, "nn.avg_pool"),
               (max_pool1d, "nn.max_pool1d"), (avg_pool1d, "nn.avg_pool1d"), (max_pool3d, "nn.max_pool3d"), (avg_pool3d, "nn.avg_pool3d")]:
    _export(_f, _n, jax_name="jax.lax.reduce_window")
