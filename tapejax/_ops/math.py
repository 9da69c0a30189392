"""``tf.math`` beyond elementwise ops and reductions: scans, arg-reductions,
``top_k``, segment reductions, clipping, sorting and friends.

Each op is a primitive (what the tape records) plus a TF-signature function; the
tables at the end of each section export them. Static arguments (axes, flags,
segment counts) are keyword parameters of ``bind`` so they are part of the
replay's cache key.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core._recorder import Tensor, bind
from . import _tfgrad
from ._dtypes import as_dtype, check_width, from_np, x64_enabled
from ._machinery import (
    BOOL,
    EXPORTS,
    FLOAT,
    INEXACT,
    INT,
    NUMERIC,
    OPS,
    REAL,
    _as_t,
    _concrete,
    _dt,
    _export,
    _is_t,
    cast,
    check_dtype,
    define,
    norm_axis,
    prim,
    same_dtype,
)
from ._tensor import convert_to_tensor

# ---- scans -------------------------------------------------------------------------


def _shift(y: Any, axis: int, reverse: bool, fill: Any) -> Any:
    # exclusive=True: the scan shifted one step along the scan direction.
    n = y.shape[axis]
    pad = jnp.full_like(lax.slice_in_dim(y, 0, 1, axis=axis), fill)
    if reverse:
        return jnp.concatenate([lax.slice_in_dim(y, 1, n, axis=axis), pad], axis=axis)
    return jnp.concatenate([pad, lax.slice_in_dim(y, 0, n - 1, axis=axis)], axis=axis)


def _cumsum(x: Any, axis: int, exclusive: bool, reverse: bool) -> Any:
    if x.shape[axis] == 0:
        return x
    y = lax.cumsum(x, axis=axis, reverse=reverse)
    return _shift(y, axis, reverse, 0) if exclusive else y


def _cumprod_plain(x: Any, axis: int, exclusive: bool, reverse: bool) -> Any:
    if x.shape[axis] == 0:
        return x
    y = lax.cumprod(x, axis=axis, reverse=reverse)
    return _shift(y, axis, reverse, 1) if exclusive else y


_cumprod_tf = jax.custom_jvp(_cumprod_plain, nondiff_argnums=(1, 2, 3))


@_cumprod_tf.defjvp
def _cumprod_jvp(axis: int, exclusive: bool, reverse: bool, primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    y = _cumprod_plain(x, axis, exclusive, reverse)
    # TF's _CumprodGrad is div_no_nan(cumsum(y * g, reverse=not reverse), x): 0 where x == 0
    # (not the analytic derivative there). Its transpose, as a tangent map, is this.
    r = jnp.where(x == 0, jnp.zeros_like(x), 1 / jnp.where(x == 0, jnp.ones_like(x), x))
    return y, y * _cumsum(t * r, axis, exclusive, reverse)


def _cumprod(x: Any, axis: int, exclusive: bool, reverse: bool) -> Any:
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return _cumprod_tf(x, axis, exclusive, reverse)
    return _cumprod_plain(x, axis, exclusive, reverse)


def _cumlogsumexp(x: Any, axis: int, exclusive: bool, reverse: bool) -> Any:
    if x.shape[axis] == 0:
        return x
    y = lax.cumlogsumexp(x, axis=axis, reverse=reverse)
    return _shift(y, axis, reverse, -jnp.inf) if exclusive else y


def _scan_op(name: str, impl: Any, dtypes: frozenset, tf_name: str, *names: str, jax_name: str) -> None:
    p = prim(name, impl)

    def body(x: Any, axis: Any, exclusive: Any, reverse: Any) -> Tensor:
        x = _as_t(x)
        if _dt(x) not in dtypes:
            check_dtype(tf_name, x, dtypes)
        nd = max(x._aval.ndim, 1)
        if x._aval.ndim == 0:
            raise errors.InvalidArgumentError(f"{tf_name}: the input must have rank >= 1, got a scalar.")
        ax = norm_axis(int(_static_int(axis)), nd, tf_name)[0]
        return bind(p, x, axis=ax, exclusive=bool(exclusive), reverse=bool(reverse))

    fn = define(name, ["x", ("axis", 0), ("exclusive", False), ("reverse", False)], body,
                f"``{names[0]}`` along ``axis`` (``exclusive`` shifts by one, ``reverse`` scans backwards), as in TF.\n\n"
                f"Example:\n    >>> import tapejax as tf\n    >>> tf.{names[0]}(tf.constant([1.0, 2.0, 3.0])).numpy().tolist()\n"
                f"    {[1.0, 3.0, 6.0] if 'sum' in name else [1.0, 2.0, 6.0] if 'prod' in name else '...'}\n")
    OPS[name] = fn
    _export(fn, *names, jax_name=jax_name)


def _static_int(v: Any) -> int:
    if _is_t(v):
        c = _concrete(v)
        if c is None:
            raise errors.needs_values(TypeError("This argument must be concrete (a Python int or an eager tensor)."))
        return int(c)
    return int(v)


_args: Any  # a table row: name, function, dtypes, TF names
for _args in [
    ("cumsum", _cumsum, NUMERIC, "Cumsum", "cumsum", "math.cumsum"),
    ("cumprod", _cumprod, NUMERIC, "Cumprod", "math.cumprod"),
    ("cumulative_logsumexp", _cumlogsumexp, FLOAT, "CumulativeLogsumexp", "math.cumulative_logsumexp"),
]:
    _scan_op(*_args, jax_name={"cumsum": "jax.lax.cumsum", "cumprod": "jax.lax.cumprod (TF gradient formula)",
                               "cumulative_logsumexp": "jax.lax.cumlogsumexp"}[_args[0]])


# ---- arg-reductions, top_k, sorting ---------------------------------------------------


def _index_dtype(output_type: Any, default64: bool = True) -> np.dtype:
    # TF's default index type for argmax/argmin/where is int64. Without x64 tapejax
    # returns int32 for the default (documented); an explicit int64 needs x64.
    if output_type is None:
        return np.dtype(np.int64) if (default64 and x64_enabled()) else np.dtype(np.int32)
    d = as_dtype(output_type)._np
    check_width(d, "output_type")
    return d


_argmax_p = prim("argmax", lambda x, axis, dtype: jnp.argmax(x, axis=axis).astype(dtype), differentiable=False)
_argmin_p = prim("argmin", lambda x, axis, dtype: jnp.argmin(x, axis=axis).astype(dtype), differentiable=False)


def _arg(p: Any, opname: str) -> Any:
    def body(input: Any, axis: Any, output_type: Any) -> Tensor:
        x = _as_t(input)
        if _dt(x) not in REAL | BOOL:
            check_dtype(opname, x, REAL | BOOL)
        nd = x._aval.ndim
        ax = 0 if axis is None else _static_int(axis)
        if not -max(nd, 1) <= ax < max(nd, 1):
            raise errors.InvalidArgumentError(f"Expected dimension in the range [{-nd}, {nd}), but got {ax} [Op:{opname}]")
        return bind(p, x, axis=ax % max(nd, 1), dtype=_index_dtype(output_type))

    return body


argmax = define("argmax", ["input", ("axis", None), ("output_type", None)], _arg(_argmax_p, "ArgMax"),
                "Index of the largest value along ``axis`` (0 by default); ties pick the first.\n\n"
                "TF's default ``output_type`` is int64; without x64 tapejax returns int32.\n\n"
                "Example:\n    >>> import tapejax as tf\n    >>> int(tf.argmax([1.0, 3.0, 2.0]))\n    1\n")
argmin = define("argmin", ["input", ("axis", None), ("output_type", None)], _arg(_argmin_p, "ArgMin"),
                "Index of the smallest value along ``axis`` (0 by default); see ``argmax``.\n\n"
                "Example:\n    >>> import tapejax as tf\n    >>> int(tf.argmin([1.0, 3.0, 2.0]))\n    0\n")
_export(argmax, "argmax", "math.argmax", jax_name="jax.numpy.argmax")
_export(argmin, "argmin", "math.argmin", jax_name="jax.numpy.argmin")

TopKV2 = namedtuple("TopKV2", ["values", "indices"])


def _top_k_impl(x: Any, k: int, index_dtype: Any) -> tuple:
    v, i = lax.top_k(x, k)
    return v, i.astype(index_dtype)


_top_k_p = prim("top_k", _top_k_impl, multiple_results=True)


def top_k(input: Any, k: int = 1, sorted: bool = True, index_type: Any = "int32", name: str | None = None) -> TopKV2:  # noqa: A002
    """The ``k`` largest entries of the last axis and their indices (``TopKV2(values, indices)``).

    Ties go to the lower index, as in TF. ``sorted=False`` still returns them
    sorted (TF leaves the order unspecified). The gradient flows to the chosen
    positions.

    Example:
        >>> import tapejax as tf
        >>> tf.math.top_k(tf.constant([1.0, 3.0, 2.0]), k=2).indices.numpy().tolist()
        [1, 2]
    """
    x = _as_t(input)
    if _dt(x) not in REAL:
        check_dtype("TopKV2", x, REAL)
    k = _static_int(k)
    n = x._aval.shape[-1] if x._aval.ndim else 0
    if x._aval.ndim == 0:
        raise errors.InvalidArgumentError("input must be at least 1-D for top_k")
    if k < 0 or k > n:
        raise errors.InvalidArgumentError(f"input must have at least k columns. Had {n}, needed {k} [Op:TopKV2]")
    return TopKV2(*bind(_top_k_p, x, k=k, index_dtype=as_dtype(index_type)._np))


_export(top_k, "math.top_k", "nn.top_k", jax_name="jax.lax.top_k")


def _sort_impl(x: Any, axis: int, descending: bool) -> Any:
    if descending:
        # TF sorts with top_k: ties keep the lower index first (a stable descending sort).
        m = jnp.moveaxis(x, axis, -1)
        return jnp.moveaxis(lax.top_k(m, m.shape[-1])[0], -1, axis)
    return jnp.sort(x, axis=axis, stable=True)


def _argsort_impl(x: Any, axis: int, descending: bool) -> Any:
    if descending:
        m = jnp.moveaxis(x, axis, -1)
        return jnp.moveaxis(lax.top_k(m, m.shape[-1])[1], -1, axis).astype(jnp.int32)
    return jnp.argsort(x, axis=axis, stable=True).astype(jnp.int32)


_sort_p = prim("sort", _sort_impl)
_argsort_p = prim("argsort", _argsort_impl, differentiable=False)


def _direction(direction: str) -> bool:
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"Unknown direction {direction!r}: use 'ASCENDING' or 'DESCENDING'.")
    return direction == "DESCENDING"


def sort(values: Any, axis: int = -1, direction: str = "ASCENDING", name: str | None = None) -> Tensor:
    """Sorted copy of ``values`` along ``axis``, as ``tf.sort`` (differentiable: the gradient is permuted back).

    Example:
        >>> import tapejax as tf
        >>> tf.sort([3.0, 1.0, 2.0], direction="DESCENDING").numpy().tolist()
        [3.0, 2.0, 1.0]
    """
    x = _as_t(values)
    check_dtype("Sort", x, REAL) if _dt(x) not in REAL else None
    ax = norm_axis(axis, x._aval.ndim, "sort")[0]
    return bind(_sort_p, x, axis=ax, descending=_direction(direction))


def argsort(values: Any, axis: int = -1, direction: str = "ASCENDING", stable: bool = False, name: str | None = None) -> Tensor:
    """Indices (int32) that sort ``values`` along ``axis``, as ``tf.argsort`` (always stable here).

    Example:
        >>> import tapejax as tf
        >>> tf.argsort([3.0, 1.0, 2.0]).numpy().tolist()
        [1, 2, 0]
    """
    x = _as_t(values)
    check_dtype("Sort", x, REAL) if _dt(x) not in REAL else None
    ax = norm_axis(axis, x._aval.ndim, "argsort")[0]
    return bind(_argsort_p, x, axis=ax, descending=_direction(direction))


_export(sort, "sort", jax_name="jax.numpy.sort")
_export(argsort, "argsort", jax_name="jax.numpy.argsort")

_count_nonzero_p = prim("count_nonzero", lambda x, axis, keepdims, dtype: jnp.sum(x != 0, axis=axis, keepdims=keepdims).astype(dtype),
                        differentiable=False)


def count_nonzero(input: Any, axis: Any = None, keepdims: Any = None, dtype: Any = None, name: str | None = None) -> Tensor:  # noqa: A002
    """Number of non-zero entries (int64 in TF; int32 without x64 for the default dtype).

    Example:
        >>> import tapejax as tf
        >>> int(tf.math.count_nonzero([0.0, 1.0, 2.0]))
        2
    """
    x = _as_t(input)
    return bind(_count_nonzero_p, x, axis=norm_axis(axis, x._aval.ndim, "count_nonzero"), keepdims=bool(keepdims),
                dtype=_index_dtype(dtype))


_export(count_nonzero, "math.count_nonzero", jax_name="jax.numpy.count_nonzero")


# ---- segment reductions -----------------------------------------------------------------


def _segment_prod(data: Any, ids: Any, num: int, indices_are_sorted: bool = False) -> Any:
    # JAX cannot differentiate a scatter-multiply with repeated indices; a dense
    # [segments, n] selection keeps the exact gradient (zeros included), at
    # O(segments * n) memory.
    sel = ids[None, :] == jnp.arange(num, dtype=ids.dtype)[:, None]
    sel = sel.reshape(sel.shape + (1,) * (data.ndim - 1))
    return jnp.prod(jnp.where(sel, data[None], jnp.ones_like(data[None])), axis=1)


def _segment_impl(data: Any, ids: Any, num: int, kind: str, empty_zero: bool, sorted_ids: bool) -> Any:
    fn: Any = {"sum": jax.ops.segment_sum, "prod": _segment_prod, "max": jax.ops.segment_max, "min": jax.ops.segment_min}.get(kind)
    if kind == "mean" or kind == "sqrt_n":
        s = jax.ops.segment_sum(data, ids, num, indices_are_sorted=sorted_ids)
        n = jax.ops.segment_sum(jnp.ones(ids.shape, data.dtype), ids, num, indices_are_sorted=sorted_ids)
        n = n.reshape(n.shape + (1,) * (s.ndim - 1))
        denom = n if kind == "mean" else jnp.sqrt(n)
        return jnp.where(n > 0, s / jnp.where(n > 0, denom, jnp.ones_like(denom)), jnp.zeros_like(s))
    out = fn(data, ids, num, indices_are_sorted=sorted_ids)
    if kind in ("max", "min"):
        cnt = jax.ops.segment_sum(jnp.ones(ids.shape, jnp.int32), ids, num, indices_are_sorted=sorted_ids)
        cnt = cnt.reshape(cnt.shape + (1,) * (out.ndim - 1))
        if empty_zero:
            fill = jnp.zeros_like(out)
        elif jnp.issubdtype(data.dtype, jnp.floating):
            # TF's unsorted max/min of an empty segment: the dtype's lowest/highest finite value.
            fi = jnp.finfo(data.dtype)
            fill = jnp.full_like(out, fi.min if kind == "max" else fi.max)
        else:
            ii = jnp.iinfo(data.dtype)
            fill = jnp.full_like(out, ii.min if kind == "max" else ii.max)
        out = jnp.where(cnt > 0, out, fill)
    return out


_segment_p = prim("segment", _segment_impl)


def _segment(kind: str, sorted_ids: bool) -> Any:
    opname = ("Segment" if sorted_ids else "UnsortedSegment") + kind.capitalize()

    def body(data: Any, segment_ids: Any, num_segments: Any = None) -> Tensor:
        x = _as_t(data)
        allowed = NUMERIC if kind in ("sum", "prod") else (REAL if kind in ("max", "min") else INEXACT)
        if _dt(x) not in allowed:
            check_dtype(opname, x, allowed)
        ids = _as_t(segment_ids)
        if _dt(ids) not in INT:
            check_dtype(opname, ids, INT)
        idv = _concrete(ids)
        ish = tuple(ids._aval.shape)
        if tuple(x._aval.shape[: len(ish)]) != ish:
            raise errors.InvalidArgumentError(
                f"{opname}: segment_ids shape {list(ish)} must be a prefix of data shape {list(x._aval.shape)}.")
        if sorted_ids:
            if len(ish) != 1:
                raise errors.InvalidArgumentError(f"{opname}: segment_ids should be a vector.")
            if idv is None:
                raise errors.needs_values(TypeError(
                    f"tf.math.segment_{kind} needs concrete segment_ids (it derives the number of segments from them); "
                    f"use tf.math.unsorted_segment_{kind} with num_segments inside a traced function."))
            if idv.size and (np.any(np.diff(idv) < 0) or idv[0] < 0):
                raise errors.InvalidArgumentError("segment ids are not increasing" if np.any(np.diff(idv) < 0)
                                                  else f"segment id {idv[0]} out of range [Op:{opname}]")
            num = int(idv[-1]) + 1 if idv.size else 0
        else:
            num = _static_int(num_segments)
        if len(ish) > 1:
            # TF allows a multi-dimensional id tensor: flatten it together with the data's prefix.
            reshape = EXPORTS["reshape"]  # the array family's (registered after this one)
            x = reshape(x, (-1,) + tuple(x._aval.shape[len(ish):]))
            ids = reshape(ids, (-1,))
        return bind(_segment_p, x, ids, num=num, kind=kind, empty_zero=sorted_ids, sorted_ids=sorted_ids)

    return body


for _kind in ("sum", "mean", "max", "min", "prod"):
    _f = define(f"segment_{_kind}", ["data", "segment_ids"], _segment(_kind, True),
                f"Segment {_kind} over sorted ``segment_ids``, as ``tf.math.segment_{_kind}``.\n\n"
                f"Example:\n    >>> import tapejax as tf\n    >>> tf.math.segment_{_kind}(tf.constant([1.0, 2.0, 4.0]), [0, 0, 1]).shape\n"
                f"    TensorShape([2])\n")
    _export(_f, f"math.segment_{_kind}", jax_name=f"jax.ops.segment_{'sum' if _kind == 'mean' else _kind}")
    _u = define(f"unsorted_segment_{_kind}", ["data", "segment_ids", "num_segments"], _segment(_kind, False),
                f"Segment {_kind} over any ``segment_ids`` into ``num_segments`` rows (negative ids are dropped).\n\n"
                f"Example:\n    >>> import tapejax as tf\n    >>> tf.math.unsorted_segment_{_kind}(tf.constant([1.0, 2.0]), [1, 0], "
                "2).shape\n"
                f"    TensorShape([2])\n")
    _export(_u, f"math.unsorted_segment_{_kind}", jax_name=f"jax.ops.segment_{'sum' if _kind == 'mean' else _kind}")
_usn = define("unsorted_segment_sqrt_n", ["data", "segment_ids", "num_segments"], _segment("sqrt_n", False),
              "Segment sum divided by sqrt(count), as ``tf.math.unsorted_segment_sqrt_n``.\n\n"
              "Example:\n    >>> import tapejax as tf\n    >>> tf.math.unsorted_segment_sqrt_n(tf.constant([1.0, 3.0]), [0, 0], "
              "1).numpy().round(3).tolist()\n"
              "    [2.828]\n")
_export(_usn, "math.unsorted_segment_sqrt_n", jax_name="jax.ops.segment_sum")


# ---- clipping ---------------------------------------------------------------------------


def _clip_value(x: Any, lo: Any, hi: Any) -> Any:
    # TF's ClipByValue gradient: x's where lo <= x <= hi (both bounds inclusive), the
    # bounds' where x is outside; nested selects give exactly that.
    return jnp.where(x < lo, jnp.broadcast_to(lo, jnp.shape(x)).astype(x.dtype),
                     jnp.where(x > hi, jnp.broadcast_to(hi, jnp.shape(x)).astype(x.dtype), x))


_clip_value_p = prim("clip_by_value", _clip_value)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: str | None = None) -> Tensor:
    """Clamp ``t`` to ``[clip_value_min, clip_value_max]``; the bounds broadcast to ``t``'s shape.

    At a bound, the gradient goes to ``t`` (TF's inclusive rule).

    Example:
        >>> import tapejax as tf
        >>> tf.clip_by_value(tf.constant([-1.0, 0.5, 2.0]), 0.0, 1.0).numpy().tolist()
        [0.0, 0.5, 1.0]
    """
    x, lo, hi = same_dtype("ClipByValue", t, clip_value_min, clip_value_max)
    check_dtype("ClipByValue", x, REAL) if _dt(x) not in REAL else None
    xs = tuple(x._aval.shape)
    for b in (lo, hi):
        bs = tuple(b._aval.shape) if _is_t(b) else ()
        try:
            ok = jnp.broadcast_shapes(bs, xs) == xs
        except ValueError:
            ok = False
        if not ok:
            raise errors.InvalidArgumentError(f"Incompatible shapes: clip bound shape {list(bs)} does not broadcast to {list(xs)}.")
    return bind(_clip_value_p, x, lo, hi)


_export(clip_by_value, "clip_by_value", jax_name="jax.numpy.clip (TF tie rule)")
OPS["clip_by_value"] = clip_by_value


def _clip_norm_impl(t: Any, clip: Any, axes: Any) -> Any:
    # TF's formula, including the guard that makes the gradient finite at t == 0.
    l2sum = jnp.sum(t * t, axis=axes, keepdims=True)
    pred = l2sum > 0
    safe = jnp.where(pred, l2sum, jnp.ones_like(l2sum))
    l2norm = jnp.where(pred, jnp.sqrt(safe), l2sum)
    return t * clip / jnp.maximum(l2norm, clip)


_clip_norm_p = prim("clip_by_norm", _clip_norm_impl)


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: str | None = None) -> Tensor:
    """Rescale ``t`` so its L2 norm (over ``axes``) is at most ``clip_norm``, as ``tf.clip_by_norm``.

    Example:
        >>> import tapejax as tf
        >>> tf.clip_by_norm(tf.constant([3.0, 4.0]), 1.0).numpy().round(2).tolist()
        [0.6, 0.8]
    """
    x, c = same_dtype("ClipByNorm", t, clip_norm)
    check_dtype("Sqrt", x, INEXACT) if _dt(x) not in INEXACT else None
    return bind(_clip_norm_p, x, c, axes=norm_axis(axes, x._aval.ndim, "clip_by_norm"))


_export(clip_by_norm, "clip_by_norm", jax_name="jax.numpy (TF's clip_by_norm formula)")

_global_norm_p = prim("global_norm", lambda *ts: jnp.sqrt(sum(jnp.sum(jnp.square(t)) for t in ts)))


def global_norm(t_list: Any, name: str | None = None) -> Tensor:
    """``sqrt(sum(||t||^2))`` over a list of tensors (None entries skipped), as ``tf.linalg.global_norm``.

    Example:
        >>> import tapejax as tf
        >>> float(tf.linalg.global_norm([tf.constant([3.0]), tf.constant([4.0])]))
        5.0
    """
    ts = [_as_t(t) for t in t_list if t is not None]
    if not ts:
        return Tensor(jnp.zeros((), jnp.float32))
    ts = same_dtype("GlobalNorm", *ts)
    return bind(_global_norm_p, *ts)


def clip_by_global_norm(t_list: Any, clip_norm: Any, use_norm: Any = None, name: str | None = None) -> tuple:
    """Scale every tensor by ``clip_norm / max(global_norm, clip_norm)``; returns ``(list, global_norm)``.

    Example:
        >>> import tapejax as tf
        >>> clipped, norm = tf.clip_by_global_norm([tf.constant([3.0, 4.0])], 1.0)
        >>> float(norm), clipped[0].numpy().round(2).tolist()
        (5.0, [0.6, 0.8])
    """
    if isinstance(t_list, Tensor) or not hasattr(t_list, "__iter__"):
        raise TypeError("`t_list` should be a sequence of tensors (a list or tuple), not a single tensor.")
    t_list = list(t_list)
    gn = global_norm(t_list) if use_norm is None else _as_t(use_norm)
    c = convert_to_tensor(clip_norm, dtype=from_np(_dt(gn))) if not _is_t(clip_norm) else clip_norm
    div, mul, mn = OPS["divide"], OPS["multiply"], OPS["minimum"]
    # TF: scale = clip_norm * min(1 / use_norm, 1 / clip_norm) (an inf norm gives nan, as in TF).
    scale = mul(c, mn(div(1.0, gn), div(1.0, c)))
    out = [None if t is None else mul(t, cast(scale, _as_t(t).dtype)) for t in t_list]
    return out, gn


_export(global_norm, "linalg.global_norm", "global_norm", jax_name="jax.numpy.sqrt(sum of squares)")
_export(clip_by_global_norm, "clip_by_global_norm", jax_name="jax.numpy (TF's formula)")

_add_n_p = prim("add_n", lambda *xs: sum(xs[1:], xs[0]))


def add_n(inputs: Any, name: str | None = None) -> Tensor:
    """Sum of a list of same-shape, same-dtype tensors, as ``tf.math.add_n``.

    Example:
        >>> import tapejax as tf
        >>> tf.math.add_n([tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])]).numpy().tolist()
        [4.0, 6.0]
    """
    if isinstance(inputs, Tensor) or not inputs:
        raise ValueError("inputs must be a non-empty list of tensors with the same shape and dtype.")
    xs = same_dtype("AddN", *list(inputs))
    shapes = {tuple(x._aval.shape) for x in xs}
    if len(shapes) > 1:
        raise ValueError(f"inputs must all have the same shape, got {sorted(shapes)}.")
    return bind(_add_n_p, *xs)


_export(add_n, "add_n", "math.add_n", jax_name="jax.numpy.add")


def _l2_normalize_impl(x: Any, axis: Any, eps: float) -> Any:
    sq = jnp.real(x * jnp.conj(x)) if jnp.iscomplexobj(x) else x * x
    s = jnp.sum(sq, axis=axis, keepdims=True)
    return x * _tfgrad.rsqrt(jnp.maximum(s, jnp.asarray(eps, s.dtype))).astype(x.dtype)


_l2n_p = prim("l2_normalize", _l2_normalize_impl)


def l2_normalize(x: Any, axis: Any = None, epsilon: float = 1e-12, name: str | None = None, dim: Any = None) -> Tensor:
    """``x / sqrt(max(sum(x**2, axis), epsilon))``, as ``tf.math.l2_normalize``.

    Example:
        >>> import tapejax as tf
        >>> tf.math.l2_normalize(tf.constant([3.0, 4.0])).numpy().round(2).tolist()
        [0.6, 0.8]
    """
    x = _as_t(x)
    check_dtype("L2Normalize", x, INEXACT) if _dt(x) not in INEXACT else None
    axis = dim if axis is None else axis
    return bind(_l2n_p, x, axis=norm_axis(axis, x._aval.ndim, "l2_normalize"), eps=float(epsilon))


_export(l2_normalize, "math.l2_normalize", "nn.l2_normalize", "linalg.l2_normalize", jax_name="jax.lax.rsqrt (TF formula)")


def scalar_mul(scalar: Any, x: Any, name: str | None = None) -> Tensor:
    """``scalar * x`` for a scalar, as ``tf.math.scalar_mul``.

    Example:
        >>> import tapejax as tf
        >>> tf.math.scalar_mul(2.0, tf.constant([1.0, 2.0])).numpy().tolist()
        [2.0, 4.0]
    """
    s = scalar._value if _is_t(scalar) else np.asarray(scalar)
    if np.ndim(s) != 0:
        raise ValueError(f"Only scalar multiply works, got shape {list(np.shape(s))}.")
    return OPS["multiply"](scalar, x)


_export(scalar_mul, "math.scalar_mul", "scalar_mul", jax_name="jax.numpy.multiply")


def polyval(coeffs: Any, x: Any, name: str | None = None) -> Tensor:
    """``coeffs[0] * x**(n-1) + ... + coeffs[n-1]`` by Horner's rule, as ``tf.math.polyval``.

    Example:
        >>> import tapejax as tf
        >>> float(tf.math.polyval([1.0, 2.0], 3.0))
        5.0
    """
    x = _as_t(x)
    if not coeffs:
        return OPS["multiply"](x, 0)
    mul, add = OPS["multiply"], OPS["add"]
    acc = coeffs[0] if _is_t(coeffs[0]) else convert_to_tensor(coeffs[0], dtype=x.dtype)
    acc = OPS["add"](OPS["multiply"](x, 0), acc)
    for c in coeffs[1:]:
        acc = add(mul(acc, x), c)
    return acc


_export(polyval, "math.polyval", jax_name="jax.numpy.polyval")

