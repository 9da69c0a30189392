"""Array ops with TF's signatures: creation, shapes, joining and splitting,
gather/scatter, ``where``/``boolean_mask``, and TF's ``__getitem__``.

Shapes, axes, permutations and slice bounds are static parameters (part of the
replay's cache key); index arrays are data. Every index is range-checked
eagerly, because TF raises ``InvalidArgumentError`` where JAX would clamp; inside
a traced ``tapejax.function`` the check is skipped (the values are unknown) and
JAX's clamping/filling applies.

``tf.gather``'s gradient is dense here (TF returns ``IndexedSlices``): it is an
ordinary Tensor that every op, ``tf.convert_to_tensor`` and every optimizer
accepts.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core._recorder import Tensor, bind, bind_ran, state
from ._dtypes import as_dtype, check_width, from_np, x64_enabled
from ._machinery import (
    INT,
    OPS,
    PRIMS,
    _as_t,
    _concrete,
    _dt,
    _export,
    _is_t,
    _static,
    fast_value,
    norm_axis,
    prim,
    same_dtype,
)
from ._tensor import TensorShape, convert_to_tensor, register_stack

__all__ = ["getitem", "reshape", "transpose", "stack", "concat", "zeros", "ones", "zeros_like", "ones_like"]


def _ints(v: Any, what: str) -> tuple:
    """A shape-like argument (list, tuple, int, NumPy array, eager tensor) as a tuple of ints."""
    if _is_t(v):
        c = _concrete(v)
        if c is None:
            raise errors.needs_values(TypeError(f"{what} must be concrete (a Python list or an eager tensor), not a traced tensor."))
        v = c
    if isinstance(v, TensorShape):
        return tuple(-1 if d is None else int(d) for d in v)
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, int | np.integer):
        return (int(v),)
    return tuple(int(_concrete(d) if _is_t(d) else d) for d in v)


def _int(v: Any, what: str = "argument") -> int:
    if _is_t(v):
        c = _concrete(v)
        if c is None:
            raise errors.needs_values(TypeError(f"{what} must be concrete, not a traced tensor."))
        return int(c)
    return int(v)


def _index_t(v: Any, opname: str, allowed: frozenset = INT) -> Any:
    t = _as_t(v)
    if _dt(t) not in allowed:
        raise errors.InvalidArgumentError(
            f"Value for attr 'Tindices' of {from_np(_dt(t)).name} is not in the list of allowed values: int16, int32, "
            f"int64; NodeDef: {{{{node {opname}}}}}. Indices must be integers: tf.cast them to tf.int32."
        )
    return t


# ---- creation -------------------------------------------------------------------------


def _dtype_or(dtype: Any, default: str = "float32") -> np.dtype:
    d = as_dtype(dtype if dtype is not None else default)
    check_width(d._np, "Requested dtype")
    return d._np


def zeros(shape: Any, dtype: Any = "float32", name: str | None = None, layout: Any = None) -> Tensor:
    """A tensor of zeros (float32 by default), as ``tf.zeros``.

    Example:
        >>> import tapejax as tf
        >>> tf.zeros((2,)).numpy().tolist()
        [0.0, 0.0]
    """
    return Tensor(jnp.zeros(_ints(shape, "shape"), _dtype_or(dtype)))


def ones(shape: Any, dtype: Any = "float32", name: str | None = None, layout: Any = None) -> Tensor:
    """A tensor of ones (float32 by default), as ``tf.ones``.

    Example:
        >>> import tapejax as tf
        >>> tf.ones((2, 2)).shape
        TensorShape([2, 2])
    """
    return Tensor(jnp.ones(_ints(shape, "shape"), _dtype_or(dtype)))


# Recorded but not differentiable (TF's ZerosLike/OnesLike): the result can be a
# source of a gradient, while no gradient reaches ``input``.
_zeros_like_p = prim("zeros_like", lambda x, dtype: jnp.zeros(jnp.shape(x), dtype), differentiable=False)
_ones_like_p = prim("ones_like", lambda x, dtype: jnp.ones(jnp.shape(x), dtype), differentiable=False)


def _like(p: Any, t: Tensor, dtype: Any) -> Tensor:
    d = _dtype_or(dtype) if dtype is not None else t._aval.dtype
    if state.tracing:
        # Inside tf.function TF folds zeros_like/ones_like of a fully known shape into a
        # constant: the result is not watched, so a gradient with respect to it is None.
        return Tensor(p.impl(t._value, dtype=d))
    return bind(p, t, dtype=d)


def zeros_like(input: Any, dtype: Any = None, name: str | None = None, layout: Any = None) -> Tensor:  # noqa: A002
    """Zeros with the shape (and dtype, unless given) of ``input`` (not connected to it), as ``tf.zeros_like``.

    Example:
        >>> import tapejax as tf
        >>> tf.zeros_like(tf.constant([1, 2])).numpy().tolist()
        [0, 0]
    """
    t = _as_t(input)
    return _like(_zeros_like_p, t, dtype)


def ones_like(input: Any, dtype: Any = None, name: str | None = None, layout: Any = None) -> Tensor:  # noqa: A002
    """Ones with the shape (and dtype, unless given) of ``input``, as ``tf.ones_like``.

    Example:
        >>> import tapejax as tf
        >>> tf.ones_like(tf.constant([1.0, 2.0])).numpy().tolist()
        [1.0, 1.0]
    """
    t = _as_t(input)
    return _like(_ones_like_p, t, dtype)


_fill_p = prim("fill", lambda value, shape: jnp.broadcast_to(value, shape))


def fill(dims: Any, value: Any, name: str | None = None, layout: Any = None) -> Tensor:
    """A tensor of shape ``dims`` filled with the scalar ``value`` (its dtype inferred as TF does).

    The gradient with respect to ``value`` is the sum of the output gradient.

    Example:
        >>> import tapejax as tf
        >>> tf.fill([2], 1.5).numpy().tolist()
        [1.5, 1.5]
    """
    v = _as_t(value)
    if v._aval.ndim != 0:
        raise errors.InvalidArgumentError(f"value must represent a scalar, got shape {list(v._aval.shape)} [Op:Fill]")
    return bind(_fill_p, v, shape=_ints(dims, "dims"))


def eye(num_rows: Any, num_columns: Any = None, batch_shape: Any = None, dtype: Any = "float32", name: str | None = None) -> Tensor:
    """An identity matrix (optionally batched), as ``tf.eye``.

    Example:
        >>> import tapejax as tf
        >>> tf.eye(2, 3, dtype=tf.int32).numpy().tolist()
        [[1, 0, 0], [0, 1, 0]]
    """
    n = _int(num_rows, "num_rows")
    m = n if num_columns is None else _int(num_columns, "num_columns")
    e = jnp.eye(n, m, dtype=_dtype_or(dtype))
    if batch_shape is not None:
        bs = _ints(batch_shape, "batch_shape")
        e = jnp.broadcast_to(e, bs + (n, m))
    return Tensor(e)


def _linspace_impl(start: Any, stop: Any, num: int, axis: int, dtype: Any) -> Any:
    return jnp.linspace(jnp.asarray(start, dtype), jnp.asarray(stop, dtype), num, axis=axis).astype(dtype)


_linspace_p = prim("linspace", _linspace_impl)


def linspace(start: Any, stop: Any, num: Any, name: str | None = None, axis: int = 0) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (both included), as ``tf.linspace``.

    Differentiable with respect to ``start`` and ``stop``; array endpoints give
    a batch of ranges along ``axis``.

    TF returns float64 for integer endpoints. tapejax does that in x64 mode and
    returns float32 otherwise (a documented difference: the integer endpoints
    are exact in float32, so nothing the user supplied is truncated).

    Example:
        >>> import tapejax as tf
        >>> tf.linspace(0.0, 1.0, 3).numpy().tolist()
        [0.0, 0.5, 1.0]
    """
    if _is_t(start) or _is_t(stop):
        ref = start if _is_t(start) else stop
        dt = _dt(ref)
        if from_np(dt).is_integer:
            dt = np.dtype(np.float64) if x64_enabled() else np.dtype(np.float32)
            start = OPS["cast"](start, from_np(dt)) if _is_t(start) else start
            stop = OPS["cast"](stop, from_np(dt)) if _is_t(stop) else stop
    else:
        kinds = {np.asarray(v).dtype.kind for v in (start, stop)}
        if "f" in kinds:
            dt = np.dtype(np.float32)
        else:
            dt = np.dtype(np.float64) if x64_enabled() else np.dtype(np.float32)
    s = start if _is_t(start) else convert_to_tensor(start, dtype=from_np(dt))
    e = stop if _is_t(stop) else convert_to_tensor(stop, dtype=from_np(dt))
    s, e = same_dtype("LinSpace", s, e)
    return bind(_linspace_p, s, e, num=_int(num, "num"), axis=int(axis), dtype=dt)


def range_(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None, name: str = "range") -> Tensor:
    """``tf.range``: int32 for int arguments, float32 if any is a float (or ``dtype``).

    Example:
        >>> import tapejax as tf
        >>> tf.range(5, 0, -2).numpy().tolist()
        [5, 3, 1]
    """
    if limit is None:
        start, limit = 0, start
    vals = [np.asarray(_concrete(v)) if _is_t(v) else np.asarray(v) for v in (start, limit, delta)]
    if any(v.dtype == object for v in vals):
        # XLA needs the length statically: a traced bound (a value computed inside a compiled step) has none.
        raise TypeError("tf.range inside a compiled step needs concrete start, limit and delta (Python numbers, "
                        "eager tensors or tf.shape/tf.size values); got a traced tensor. Compute the bound from "
                        "static shapes, e.g. `x.shape[0]`, or pass it as a Python int.")
    if dtype is None:
        if any(v.dtype.kind == "f" for v in vals):
            f64 = any(v.dtype == np.float64 and isinstance(o, Tensor) for v, o in zip(vals, (start, limit, delta)))
            dt: np.dtype = np.dtype(np.float64) if f64 else np.dtype(np.float32)
        elif any(_is_t(o) and _dt(o) == np.int64 for o in (start, limit, delta)):
            dt = np.dtype(np.int64)
        else:
            dt = np.dtype(np.int32)
    else:
        dt = as_dtype(dtype)._np
    check_width(dt, "Requested dtype")
    s, l_, d = (v.item() for v in vals)
    if d == 0:
        raise errors.InvalidArgumentError(f"Requires delta != 0: {d} [Op:Range]")
    if (d > 0 and s > l_) or (d < 0 and s < l_):
        raise errors.InvalidArgumentError(f"Requires start {'<=' if d > 0 else '>='} limit when delta {'>' if d > 0 else '<'} 0: {s}/{l_} "
                                          "[Op:Range]")
    return _static_tensor(np.arange(s, l_, d, dtype=dt))


def one_hot(indices: Any, depth: Any, on_value: Any = None, off_value: Any = None, axis: Any = None, dtype: Any = None,
            name: str | None = None) -> Tensor:
    """One-hot vectors (out-of-range and negative indices give all ``off_value``), as ``tf.one_hot``.

    The dtype is ``dtype``, else that of ``on_value``/``off_value``, else float32. Not
    differentiable (TF registers no gradient for OneHot).

    Example:
        >>> import tapejax as tf
        >>> tf.one_hot([0, 2], 3).numpy().tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    idx = _index_t(indices, "OneHot", INT)
    depth = _int(depth, "depth")
    if dtype is not None:
        dt = as_dtype(dtype)._np
    else:
        kinds = []
        for v in (on_value, off_value):
            if v is not None:
                kinds.append(_dt(v) if _is_t(v) else convert_to_tensor(v)._aval.dtype)
        if len(kinds) == 2 and kinds[0] != kinds[1]:
            raise TypeError(f"dtype {from_np(kinds[0])!s} of on_value does not match dtype {from_np(kinds[1])!s} of off_value")
        dt = kinds[0] if kinds else np.dtype(np.float32)
    check_width(dt, "Requested dtype")
    on = 1 if on_value is None else _static(on_value)
    off = 0 if off_value is None else _static(off_value)
    iv = idx._value
    hot = iv[..., None] == jnp.arange(depth, dtype=iv.dtype)
    ax = -1 if axis is None else int(axis)
    if ax != -1:
        hot = jnp.moveaxis(hot, -1, ax)
    return Tensor(jnp.where(hot, jnp.asarray(on, dt), jnp.asarray(off, dt)))


_export(zeros, "zeros", jax_name="jax.numpy.zeros")
_export(ones, "ones", jax_name="jax.numpy.ones")
_export(zeros_like, "zeros_like", jax_name="jax.numpy.zeros_like")
_export(ones_like, "ones_like", jax_name="jax.numpy.ones_like")
_export(fill, "fill", jax_name="jax.numpy.broadcast_to")
_export(eye, "eye", "linalg.eye", jax_name="jax.numpy.eye")
_export(linspace, "linspace", "lin_space", jax_name="jax.numpy.linspace")
_export(range_, "range", jax_name="jax.numpy.arange")
_export(one_hot, "one_hot", jax_name="jax.nn.one_hot")


# ---- shapes ----------------------------------------------------------------------------

_reshape_p = prim("reshape", lambda x, shape: jnp.reshape(x, shape))


def reshape(tensor: Any, shape: Any, name: str | None = None) -> Tensor:
    """Reshape (one dimension may be -1), as ``tf.reshape``.

    Example:
        >>> import tapejax as tf
        >>> tf.reshape(tf.ones((2, 3)), [3, -1]).shape
        TensorShape([3, 2])
    """
    x = _as_t(tensor)
    shape = _ints(shape, "shape")
    n = x._aval.size
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise errors.InvalidArgumentError(f"Only one input size may be -1, not both {unknown[0]} and {unknown[1]} [Op:Reshape]")
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    if (unknown and (known == 0 or n % known)) or (not unknown and known != n):
        # TF's wording: with a -1 the shape "requires a multiple of" the known product.
        need = f"requires a multiple of {known}" if unknown and known != 0 else f"has {known}"
        raise errors.InvalidArgumentError(
            f"Input to reshape is a tensor with {n} values, but the requested shape {need} [Op:Reshape]")
    return bind(_reshape_p, x, shape=shape)


_transpose_p = prim("transpose", lambda x, perm, conj: jnp.conj(jnp.transpose(x, perm)) if conj else jnp.transpose(x, perm))


def transpose(a: Any, perm: Any = None, conjugate: bool = False, name: str | None = None) -> Tensor:
    """Permute axes (reverse them when ``perm`` is None), as ``tf.transpose``.

    Example:
        >>> import tapejax as tf
        >>> tf.transpose(tf.ones((2, 3))).shape
        TensorShape([3, 2])
    """
    if perm is None and conjugate is False:
        v = fast_value(a)
        if v is not None:
            # The default reversal of a concrete tensor: no permutation to check.
            nd = v.ndim
            ps = {"perm": tuple(range(nd - 1, -1, -1)), "conj": False}
            run1 = _transpose_p.impl.run1  # type: ignore[attr-defined]
            return bind_ran(_transpose_p, a, v, run1(v, tuple(sorted(ps.items())), ps), ps)
    a = _as_t(a)
    nd = a._aval.ndim
    perm = tuple(range(nd - 1, -1, -1)) if perm is None else _ints(perm, "perm")
    if sorted(p % max(nd, 1) for p in perm) != list(range(nd)) or len(perm) != nd:
        raise errors.InvalidArgumentError(f"transpose expects a permutation of 0..{nd - 1}, got {list(perm)} [Op:Transpose]")
    return bind(_transpose_p, a, perm=tuple(p % nd for p in perm), conj=bool(conjugate))


_stack_p = prim("stack", lambda *xs, axis: jnp.stack(xs, axis=axis))
_concat_p = prim("concat", lambda *xs, axis: jnp.concatenate(xs, axis=axis))


def _same_dtype(values: list, opname: str) -> list:
    ts = [v for v in values if _is_t(v)]
    like: Any = _dt(ts[0]) if ts else None
    out = []
    for i, v in enumerate(values):
        if _is_t(v):
            if _dt(v) != like:
                raise errors.InvalidArgumentError(
                    f"cannot compute {opname} as input #{i}(zero-based) was expected to be a {from_np(_dt(ts[0])).name} tensor "
                    f"but is a {from_np(_dt(v)).name} tensor [Op:{opname}]. Cast the inputs to one dtype with tf.cast.")
            out.append(v)
        else:
            out.append(convert_to_tensor(v, dtype=from_np(like) if like is not None else None))
    return out


def stack(values: Any, axis: int = 0, name: str = "stack") -> Tensor:
    """Stack tensors along a new axis, as ``tf.stack``.

    Example:
        >>> import tapejax as tf
        >>> tf.stack([tf.constant(1.0), tf.constant(2.0)]).shape
        TensorShape([2])
    """
    xs = _same_dtype(list(values), "Pack")
    if not xs:
        raise ValueError("tf.stack needs at least one value.")
    s0 = tuple(xs[0]._aval.shape)
    for i, x in enumerate(xs[1:], 1):
        if tuple(x._aval.shape) != s0:
            raise errors.InvalidArgumentError(
                f"Shapes of all inputs must match: values[0].shape = {list(s0)} != values[{i}].shape = {list(x._aval.shape)} [Op:Pack]")
    nd = len(s0) + 1
    ax = int(axis)
    if not -nd <= ax < nd:
        raise ValueError(f"Argument `axis` = {ax} not in range [{-nd}, {nd})")
    return bind(_stack_p, *xs, axis=ax % nd)


register_stack(stack)  # convert_to_tensor packs mixed nested lists with it


def concat(values: Any, axis: int, name: str = "concat") -> Tensor:
    """Join tensors along an existing axis, as ``tf.concat``.

    Example:
        >>> import tapejax as tf
        >>> tf.concat([tf.ones((1, 2)), tf.zeros((1, 2))], axis=0).shape
        TensorShape([2, 2])
    """
    if isinstance(values, Tensor):
        values = [values]
    xs = _same_dtype(list(values), "ConcatV2")
    if not xs:
        raise errors.InvalidArgumentError("ConcatV2 needs at least one input tensor.")
    nd = xs[0]._aval.ndim
    ax = _int(axis, "axis")
    if not -max(nd, 1) <= ax < max(nd, 1):
        raise errors.InvalidArgumentError(f"ConcatOp : Expected concatenating dimensions in the range [{-nd}, {nd}), but got {ax}")
    ax %= max(nd, 1)
    s0 = xs[0]._aval.shape
    for i, x in enumerate(xs[1:], 1):
        s = x._aval.shape
        if len(s) != nd or any(a != b for k, (a, b) in enumerate(zip(s0, s)) if k != ax):
            raise errors.InvalidArgumentError(
                f"ConcatOp : Dimensions of inputs should match: shape[0] = {list(s0)} vs. shape[{i}] = {list(s)} [Op:ConcatV2]")
    if len(xs) == 1:
        return bind(OPS_IDENTITY(), xs[0])
    return bind(_concat_p, *xs, axis=ax)


def OPS_IDENTITY() -> Any:  # noqa: N802
    return PRIMS["identity"]


_unstack_p = prim("unstack", lambda x, axis: tuple(jnp.moveaxis(x, axis, 0)), multiple_results=True)


def unstack(value: Any, num: Any = None, axis: int = 0, name: str = "unstack") -> list:
    """Split along ``axis`` into a list of tensors of one rank less, as ``tf.unstack``.

    Example:
        >>> import tapejax as tf
        >>> [t.numpy().tolist() for t in tf.unstack(tf.constant([[1, 2], [3, 4]]), axis=1)]
        [[1, 3], [2, 4]]
    """
    x = _as_t(value)
    nd = x._aval.ndim
    if nd == 0:
        raise ValueError("Input shape must have rank >= 1 to unstack, got a scalar.")
    ax = int(axis)
    if not -nd <= ax < nd:
        raise ValueError(f"Argument `axis` = {ax} not in range [{-nd}, {nd})")
    ax %= nd
    n = x._aval.shape[ax]
    if num is not None and int(num) != n:
        raise errors.InvalidArgumentError(f"Input shape axis {ax} must equal {int(num)}, got shape {list(x._aval.shape)} [Op:Unpack]")
    if n == 0:
        return []
    return list(bind(_unstack_p, x, axis=ax))


def _split_impl(x: Any, sizes: tuple, axis: int) -> tuple:
    cuts = np.cumsum(sizes)[:-1].tolist()
    return tuple(jnp.split(x, cuts, axis=axis))


_split_p = prim("split", _split_impl, multiple_results=True)


def split(value: Any, num_or_size_splits: Any, axis: int = 0, num: Any = None, name: str = "split") -> list:
    """Split into ``num_or_size_splits`` equal parts, or parts of the given sizes (one may be -1).

    Example:
        >>> import tapejax as tf
        >>> [t.numpy().tolist() for t in tf.split(tf.range(6), [1, -1, 2])]
        [[0], [1, 2, 3], [4, 5]]
    """
    x = _as_t(value)
    nd = x._aval.ndim
    ax = _int(axis, "axis")
    if not -max(nd, 1) <= ax < max(nd, 1):
        raise errors.InvalidArgumentError(f"-{nd} <= split_dim < {nd} must hold, got {ax}")
    ax %= max(nd, 1)
    n = x._aval.shape[ax]
    if isinstance(num_or_size_splits, int | np.integer) or (_is_t(num_or_size_splits) and num_or_size_splits._aval.ndim == 0):
        k = _int(num_or_size_splits)
        if k <= 0 or n % k:
            raise errors.InvalidArgumentError(
                f"Number of ways to split should evenly divide the split dimension, but got split_dim {ax} (size = {n}) and num_split {k} "
                "[Op:Split]")
        sizes: Any = (n // k,) * k
    else:
        sizes = list(_ints(num_or_size_splits, "num_or_size_splits"))
        if sizes.count(-1) > 1:
            raise errors.InvalidArgumentError("Only one dimensions can have a value of -1. [Op:SplitV]")
        if -1 in sizes:
            sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise errors.InvalidArgumentError(
                f"Determined shape must either match input shape along split_dim exactly if fully specified, or be less "
                f"than the size of the input along split_dim if not fully specified.  Got: {sum(sizes)} [Op:SplitV]")
        sizes = tuple(sizes)
    return list(bind(_split_p, x, sizes=tuple(sizes), axis=ax))


_squeeze_p = prim("squeeze", lambda x, axis: jnp.squeeze(x, axis=axis))


def squeeze(input: Any, axis: Any = None, name: str | None = None) -> Tensor:  # noqa: A002
    """Remove size-1 dimensions (all of them, or those in ``axis``), as ``tf.squeeze``.

    Example:
        >>> import tapejax as tf
        >>> tf.squeeze(tf.ones((1, 2, 1))).shape
        TensorShape([2])
    """
    x = _as_t(input)
    shape = x._aval.shape
    if axis is None:
        ax = tuple(i for i, s in enumerate(shape) if s == 1)
    else:
        ax = norm_axis(axis, x._aval.ndim, "Squeeze") or ()
        for a in ax:
            if shape[a] != 1:
                raise errors.InvalidArgumentError(
                    f"Can not squeeze dim[{a}], expected a dimension of 1, got {shape[a]} [Op:Squeeze]")
    return bind(_squeeze_p, x, axis=tuple(ax))


_expand_p = prim("expand_dims", lambda x, axis: jnp.expand_dims(x, axis))


def expand_dims(input: Any, axis: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Insert a size-1 axis at ``axis`` (``-1`` appends), as ``tf.expand_dims``.

    Example:
        >>> import tapejax as tf
        >>> tf.expand_dims(tf.constant([1, 2]), -1).shape
        TensorShape([2, 1])
    """
    x = _as_t(input)
    nd = x._aval.ndim
    ax = _int(axis, "axis")
    if not -nd - 1 <= ax <= nd:
        raise errors.InvalidArgumentError(f"Tried to expand dim index {ax} for tensor with {nd} dimensions. [Op:ExpandDims]")
    return bind(_expand_p, x, axis=ax % (nd + 1))


_tile_p = prim("tile", lambda x, reps: jnp.tile(x, reps))


def tile(input: Any, multiples: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Repeat the whole tensor ``multiples[i]`` times along each axis ``i``, as ``tf.tile``.

    Example:
        >>> import tapejax as tf
        >>> tf.tile(tf.constant([[1, 2]]), [2, 2]).numpy().tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    x = _as_t(input)
    reps = _ints(multiples, "multiples")
    if len(reps) != x._aval.ndim:
        raise errors.InvalidArgumentError(
            f"Expected multiples argument to be a vector of length {x._aval.ndim} but got length {len(reps)} [Op:Tile]")
    return bind(_tile_p, x, reps=reps)


_bcast_p = prim("broadcast_to", lambda x, shape: jnp.broadcast_to(x, shape))


def broadcast_to(input: Any, shape: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Broadcast to ``shape`` with NumPy's rules, as ``tf.broadcast_to``.

    Example:
        >>> import tapejax as tf
        >>> tf.broadcast_to(tf.constant([1, 2]), [2, 2]).numpy().tolist()
        [[1, 2], [1, 2]]
    """
    x = _as_t(input)
    shape = _ints(shape, "shape")
    try:
        ok = jnp.broadcast_shapes(tuple(x._aval.shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise errors.InvalidArgumentError(f"Incompatible shapes: {list(x._aval.shape)} vs. {list(shape)} [Op:BroadcastTo]")
    return bind(_bcast_p, x, shape=shape)


_reverse_p = prim("reverse", lambda x, axis: jnp.flip(x, axis))


def reverse(tensor: Any, axis: Any, name: str | None = None) -> Tensor:
    """Reverse the order along each axis in ``axis``, as ``tf.reverse``.

    Example:
        >>> import tapejax as tf
        >>> tf.reverse(tf.constant([[1, 2], [3, 4]]), [1]).numpy().tolist()
        [[2, 1], [4, 3]]
    """
    x = _as_t(tensor)
    return bind(_reverse_p, x, axis=norm_axis(list(_ints(axis, "axis")), x._aval.ndim, "ReverseV2") or ())


def _slice_impl(x: Any, begin: tuple, size: tuple) -> Any:
    return lax.slice(x, begin, tuple(b + s for b, s in zip(begin, size)))


_slice_p = prim("slice", _slice_impl)


def slice_(input_: Any, begin: Any, size: Any, name: str | None = None) -> Tensor:
    """The block starting at ``begin`` of extent ``size`` (-1: to the end), as ``tf.slice``.

    Example:
        >>> import tapejax as tf
        >>> tf.slice(tf.constant([[1, 2, 3], [4, 5, 6]]), [0, 1], [2, -1]).numpy().tolist()
        [[2, 3], [5, 6]]
    """
    x = _as_t(input_)
    shape = x._aval.shape
    b, s = _ints(begin, "begin"), _ints(size, "size")
    if len(b) != len(shape) or len(s) != len(shape):
        raise errors.InvalidArgumentError(
            f"Expected begin and size arguments to be 1-D tensors of size {len(shape)}, but got shapes [{len(b)}] and [{len(s)}] instead. "
            "[Op:Slice]")
    s = tuple(d - bi if si == -1 else si for d, bi, si in zip(shape, b, s))
    for i, (d, bi, si) in enumerate(zip(shape, b, s)):
        if not 0 <= bi <= d:
            raise errors.InvalidArgumentError(f"Expected begin[{i}] in [0, {d}], but got {bi} [Op:Slice]")
        if not 0 <= si <= d - bi:
            raise errors.InvalidArgumentError(f"Expected size[{i}] in [0, {d - bi}], but got {si} [Op:Slice]")
    return bind(_slice_p, x, begin=b, size=s)


def _pad_impl(x: Any, paddings: tuple, mode: str, value: Any) -> Any:
    if mode == "constant":
        return jnp.pad(x, paddings, mode="constant", constant_values=jnp.asarray(value, x.dtype))
    return jnp.pad(x, paddings, mode=mode)


_pad_p = prim("pad", _pad_impl)


def pad(tensor: Any, paddings: Any, mode: str = "CONSTANT", constant_values: Any = 0, name: str | None = None) -> Tensor:
    """Pad with a constant, or by reflecting (``REFLECT``/``SYMMETRIC``), as ``tf.pad``.

    Example:
        >>> import tapejax as tf
        >>> tf.pad(tf.constant([1, 2]), [[1, 0]], constant_values=9).numpy().tolist()
        [9, 1, 2]
    """
    x = _as_t(tensor)
    p = np.asarray(_concrete(paddings) if _is_t(paddings) else paddings, dtype=np.int64)
    nd = x._aval.ndim
    if p.shape != (nd, 2):
        raise errors.InvalidArgumentError(f"The first dimension of paddings must be the rank of inputs[{nd}], got paddings shape "
                                          f"{list(p.shape)} [Op:Pad]")
    if np.any(p < 0):
        raise errors.InvalidArgumentError(f"Paddings must be non-negative: {p.min()} [Op:Pad]")
    m = mode.upper()
    if m not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError("Value of argument `mode` expected to be one of \"CONSTANT\", \"REFLECT\", or \"SYMMETRIC\". Received `mode` = "
                         f"{mode}")
    if m != "CONSTANT":
        off = 0 if m == "SYMMETRIC" else 1
        for d, (a, b) in zip(x._aval.shape, p.tolist()):
            if a > d - off or b > d - off:
                raise errors.InvalidArgumentError(f"paddings must be less than{' or equal to' if off == 0 else ''} the dimension size: "
                                                  f"{a}, {b} not less than {d} [Op:MirrorPad]")
    value = _static(constant_values)
    if isinstance(value, float) and from_np(_dt(x)).is_integer:
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {from_np(_dt(x)).name}")
    modes = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}
    return bind(_pad_p, x, paddings=tuple(map(tuple, p.tolist())), mode=modes[m], value=value)


def _static_tensor(value: np.ndarray | np.generic) -> Tensor:
    # Shapes are static in XLA, so tf.shape/size/rank are constants even inside a traced step: made under
    # ensure_compile_time_eval they stay concrete arrays (not tracers), so a later reshape, tf.range or
    # split that needs a concrete value accepts them, as TF's constant folding of a static shape does.
    with jax.ensure_compile_time_eval():
        return Tensor(jnp.asarray(value))


def shape(input: Any, out_type: Any = "int32", name: str | None = None) -> Tensor:  # noqa: A002
    """The shape as a 1-D int32 tensor (``tf.shape``; ``.shape`` gives the static ``TensorShape``).

    Example:
        >>> import tapejax as tf
        >>> tf.shape(tf.ones((2, 3))).numpy().tolist()
        [2, 3]
    """
    d = as_dtype(out_type)._np
    check_width(d, "out_type")
    return _static_tensor(np.asarray(_as_t(input)._aval.shape, dtype=d))


def shape_n(input: Any, out_type: Any = "int32", name: str | None = None) -> list:  # noqa: A002
    """``[tf.shape(t) for t in input]``, as ``tf.shape_n``."""
    return [shape(t, out_type) for t in input]


def size(input: Any, out_type: Any = "int32", name: str | None = None) -> Tensor:  # noqa: A002
    """Number of elements, as a scalar int32 tensor (``tf.size``).

    Example:
        >>> import tapejax as tf
        >>> int(tf.size(tf.ones((2, 3))))
        6
    """
    d = as_dtype(out_type)._np
    check_width(d, "out_type")
    return _static_tensor(np.asarray(_as_t(input)._aval.size, dtype=d))


def rank(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Number of dimensions, as a scalar int32 tensor (``tf.rank``).

    Example:
        >>> import tapejax as tf
        >>> int(tf.rank(tf.ones((2, 3))))
        2
    """
    return _static_tensor(np.int32(_as_t(input)._aval.ndim))


def ensure_shape(x: Any, shape: Any, name: str | None = None) -> Tensor:
    """``x`` unchanged if its shape is compatible with ``shape`` (None = any), else InvalidArgumentError.

    Example:
        >>> import tapejax as tf
        >>> tf.ensure_shape(tf.ones(2), [None]).shape
        TensorShape([2])
    """
    t = _as_t(x)
    want = TensorShape(shape)
    if not want.is_compatible_with(t._aval.shape):
        raise errors.InvalidArgumentError(f"Shape of tensor input {list(t._aval.shape)} is not compatible with expected shape "
                                          f"{list(want)}")
    return bind(OPS_IDENTITY(), t)


_export(reshape, "reshape", jax_name="jax.numpy.reshape")
_export(transpose, "transpose", jax_name="jax.numpy.transpose")
_export(stack, "stack", jax_name="jax.numpy.stack")
_export(concat, "concat", jax_name="jax.numpy.concatenate")
_export(unstack, "unstack", jax_name="jax.numpy.moveaxis + unpack")
_export(split, "split", jax_name="jax.numpy.split")
_export(squeeze, "squeeze", jax_name="jax.numpy.squeeze")
_export(expand_dims, "expand_dims", jax_name="jax.numpy.expand_dims")
_export(tile, "tile", jax_name="jax.numpy.tile")
_export(broadcast_to, "broadcast_to", jax_name="jax.numpy.broadcast_to")
_export(reverse, "reverse", jax_name="jax.numpy.flip")
_export(slice_, "slice", jax_name="jax.lax.slice")
_export(pad, "pad", jax_name="jax.numpy.pad")
_export(shape, "shape", jax_name="(static shape)")
_export(shape_n, "shape_n", jax_name="(static shape)")
_export(size, "size", jax_name="(static size)")
_export(rank, "rank", jax_name="(static ndim)")
_export(ensure_shape, "ensure_shape", jax_name="(static check)")


# ---- more array ops ---------------------------------------------------------------------

_roll_p = prim("roll", lambda x, shift, axis: jnp.roll(x, shift, axis))


def roll(input: Any, shift: Any, axis: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Rotate elements by ``shift`` along ``axis`` (lists allowed), as ``tf.roll``.

    Example:
        >>> import tapejax as tf
        >>> tf.roll(tf.constant([1, 2, 3]), 1, 0).numpy().tolist()
        [3, 1, 2]
    """
    x = _as_t(input)
    sh, ax = _ints(shift, "shift"), _ints(axis, "axis")
    if len(sh) != len(ax):
        raise errors.InvalidArgumentError(f"shift and axis must have the same size, got {len(sh)} and {len(ax)} [Op:Roll]")
    return bind(_roll_p, x, shift=sh, axis=tuple(a % max(x._aval.ndim, 1) for a in ax))


_repeat_p = prim("repeat", lambda x, repeats, axis, total: jnp.repeat(x, np.asarray(repeats) if isinstance(repeats, tuple) else repeats,
                                                                  axis=axis, total_repeat_length=total))


def repeat(input: Any, repeats: Any, axis: Any = None, name: str | None = None) -> Tensor:  # noqa: A002
    """Repeat each element ``repeats`` times (per element if a list), as ``tf.repeat``.

    Example:
        >>> import tapejax as tf
        >>> tf.repeat(tf.constant([1, 2]), 2).numpy().tolist()
        [1, 1, 2, 2]
    """
    x = _as_t(input)
    r = _ints(repeats, "repeats")
    if axis is None:
        x = reshape(x, [-1])
        ax = 0
    else:
        ax = _int(axis, "axis") % max(x._aval.ndim, 1)
    n = x._aval.shape[ax]
    if len(r) == 1:
        total = r[0] * n
        r_param: Any = r[0]
    else:
        if len(r) != n:
            raise errors.InvalidArgumentError(f"repeats must have {n} entries (one per element along axis {ax}), got {len(r)}.")
        total = sum(r)
        r_param = tuple(r)
    return bind(_repeat_p, x, repeats=r_param, axis=ax, total=total)


_meshgrid_p = prim("meshgrid", lambda *xs, indexing: tuple(jnp.meshgrid(*xs, indexing=indexing)), multiple_results=True)


def meshgrid(*args: Any, **kwargs: Any) -> list:
    """Coordinate grids from 1-D tensors (``indexing='xy'`` or ``'ij'``), as ``tf.meshgrid``.

    Example:
        >>> import tapejax as tf
        >>> [t.shape for t in tf.meshgrid([1, 2], [1, 2, 3])]
        [TensorShape([3, 2]), TensorShape([3, 2])]
    """
    indexing = kwargs.pop("indexing", "xy")
    kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"Invalid keyword arguments: {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Argument `indexing` parameter must be either 'xy' or 'ij', got '{indexing}'")
    xs = _same_dtype([reshape(_as_t(a), [-1]) for a in args], "Meshgrid")
    return list(bind(_meshgrid_p, *xs, indexing=indexing))


def sequence_mask(lengths: Any, maxlen: Any = None, dtype: Any = "bool", name: str | None = None) -> Tensor:
    """``mask[..., j] = j < lengths[...]``, as ``tf.sequence_mask``.

    Example:
        >>> import tapejax as tf
        >>> tf.sequence_mask([1, 2], 3).numpy().tolist()
        [[True, False, False], [True, True, False]]
    """
    L = _as_t(lengths)
    lv = L._value
    if maxlen is None:
        c = _concrete(L)
        if c is None:
            raise TypeError("tf.sequence_mask needs maxlen inside a traced function.")
        m = int(c.max()) if c.size else 0
    else:
        m = _int(maxlen, "maxlen")
    mask = jnp.arange(m, dtype=lv.dtype) < lv[..., None]
    d = as_dtype(dtype)._np
    return Tensor(mask if d == np.bool_ else mask.astype(d))


_export(roll, "roll", jax_name="jax.numpy.roll")
_export(repeat, "repeat", jax_name="jax.numpy.repeat")
_export(meshgrid, "meshgrid", jax_name="jax.numpy.meshgrid")
_export(sequence_mask, "sequence_mask", jax_name="jax.numpy.arange < lengths")


# ---- gather / scatter ---------------------------------------------------------------------


def _check_range(idx: Any, bound: int, opname: str) -> None:
    c = _concrete(idx)
    if c is None or c.size == 0:
        return
    if c.ndim == 0:
        # A scalar index (tf.gather(params, 1)): np.nonzero refuses 0-d arrays.
        if not 0 <= int(c) < bound:
            raise errors.InvalidArgumentError(f"indices = {int(c)} is not in [0, {bound}) [Op:{opname}]")
        return
    bad = np.nonzero((c < 0) | (c >= bound))
    if bad[0].size:
        first = tuple(int(b[0]) for b in bad)
        pos = ",".join(map(str, first))  # "3" for one index, "1,3" for a tuple
        raise errors.InvalidArgumentError(f"indices[{pos}] = {int(c[first])} is not in [0, {bound}) [Op:{opname}]")


def _gather_impl(p: Any, i: Any, axis: int, batch_dims: int) -> Any:
    if batch_dims == 0:
        # Out-of-range indices (only possible inside traced code, where they cannot
        # be checked) read 0, as TF does on GPU.
        return jnp.take(p, i, axis=axis, mode="fill", fill_value=0)
    return jax.vmap(lambda pp, ii: _gather_impl(pp, ii, axis - 1, batch_dims - 1))(p, i)


_gather_p = prim("gather", _gather_impl)


def gather(params: Any, indices: Any, validate_indices: Any = None, axis: Any = None, batch_dims: int = 0,
           name: str | None = None) -> Tensor:
    """Gather slices of ``params`` along ``axis`` at ``indices``, as ``tf.gather``.

    The gradient is a dense tensor (TF returns ``IndexedSlices``; both feed
    optimizers and ``tf.convert_to_tensor`` the same way).

    Example:
        >>> import tapejax as tf
        >>> tf.gather(tf.constant([1.0, 2.0, 3.0]), [0, 0, 2]).numpy().tolist()
        [1.0, 1.0, 3.0]
    """
    p = _as_t(params)
    idx = _index_t(indices, "GatherV2")
    bd = int(batch_dims)
    ind = idx._aval.ndim
    if bd < 0:
        bd += ind
    ax = bd if axis is None else _int(axis, "axis")
    pnd = p._aval.ndim
    if not -pnd <= ax < max(pnd, 1):
        raise errors.InvalidArgumentError(f"Expected axis in the range [{-pnd}, {pnd}), but got {ax} [Op:GatherV2]")
    ax %= max(pnd, 1)
    if bd > ind or bd > ax:
        raise errors.InvalidArgumentError(f"batch_dims ({bd}) must be <= axis ({ax}) and <= rank(indices) ({ind}) [Op:GatherV2]")
    if tuple(p._aval.shape[:bd]) != tuple(idx._aval.shape[:bd]):
        raise errors.InvalidArgumentError("params.shape[:batch_dims] must equal indices.shape[:batch_dims] [Op:GatherV2]")
    _check_range(idx, p._aval.shape[ax], "GatherV2")
    return bind(_gather_p, p, idx, axis=ax, batch_dims=bd)


def _gather_nd_impl(p: Any, i: Any, batch_dims: int) -> Any:
    if batch_dims == 0:
        k = i.shape[-1]
        return p[tuple(jnp.moveaxis(i, -1, 0))] if k else jnp.broadcast_to(p, i.shape[:-1] + p.shape)
    return jax.vmap(lambda pp, ii: _gather_nd_impl(pp, ii, batch_dims - 1))(p, i)


_gather_nd_p = prim("gather_nd", _gather_nd_impl)


def gather_nd(params: Any, indices: Any, batch_dims: int = 0, name: str | None = None) -> Tensor:
    """Gather with multi-dimensional indices (the last axis of ``indices`` indexes ``params``).

    Example:
        >>> import tapejax as tf
        >>> tf.gather_nd(tf.constant([[1.0, 2.0], [3.0, 4.0]]), [[1, 0], [0, 1]]).numpy().tolist()
        [3.0, 2.0]
    """
    p = _as_t(params)
    idx = _index_t(indices, "GatherNd")
    bd = int(batch_dims)
    k = idx._aval.shape[-1] if idx._aval.ndim else 0
    if idx._aval.ndim == 0 or k > p._aval.ndim - bd:
        raise errors.InvalidArgumentError(f"index innermost dimension length must be <= params rank; saw: {k} vs. {p._aval.ndim - bd} "
                                          "[Op:GatherNd]")
    c = _concrete(idx)
    if c is not None and c.size:
        dims = np.asarray(p._aval.shape[bd:bd + k])
        flat = c.reshape(-1, k)
        bad = np.nonzero(np.any((flat < 0) | (flat >= dims), axis=1))[0]
        if bad.size:
            raise errors.InvalidArgumentError(
                f"indices[{int(bad[0])}] = {flat[bad[0]].tolist()} does not index into param shape {list(p._aval.shape)} [Op:GatherNd]")
    return bind(_gather_nd_p, p, idx, batch_dims=bd)


def _scatter_nd_impl(base: Any, idx: Any, upd: Any, mode: str) -> Any:
    loc = tuple(jnp.moveaxis(idx, -1, 0))
    ref = base.at[loc]
    return getattr(ref, mode)(upd, mode="drop")


_scatter_p = prim("tensor_scatter_nd", _scatter_nd_impl)


def _scatter_checks(base: Any, idx: Any, upd: Any, opname: str) -> None:
    k = idx._aval.shape[-1]
    dims = np.asarray(base._aval.shape[:k])
    c = _concrete(idx)
    if c is not None and c.size:
        flat = c.reshape(-1, k)
        bad = np.nonzero(np.any((flat < 0) | (flat >= dims), axis=1))[0]
        if bad.size:
            raise errors.InvalidArgumentError(
                f"indices[{int(bad[0])}] = {flat[bad[0]].tolist()} does not index into shape {list(base._aval.shape)} [Op:{opname}]")
    want = tuple(idx._aval.shape[:-1]) + tuple(base._aval.shape[k:])
    if tuple(upd._aval.shape) != want:
        raise errors.InvalidArgumentError(
            f"updates must have shape {list(want)} (indices.shape[:-1] + shape[indices.shape[-1]:]), got {list(upd._aval.shape)} "
            f"[Op:{opname}]")


def _tensor_scatter(mode: str, opname: str) -> Any:
    def fn(tensor: Any, indices: Any, updates: Any, name: str | None = None) -> Tensor:
        base, upd = same_dtype(opname, tensor, updates)
        idx = _index_t(indices, opname)
        _scatter_checks(base, idx, upd, opname)
        return bind(_scatter_p, base, idx, upd, mode=mode)

    fn.__name__ = fn.__qualname__ = f"tensor_scatter_nd_{mode if mode != 'set' else 'update'}"
    fn.__doc__ = (f"``tensor`` with ``updates`` {'written' if mode == 'set' else 'combined (' + mode + ')'} at ``indices``, "
                  f"as ``tf.{fn.__name__}``.\n\nExample:\n    >>> import tapejax as tf\n"
                  f"    >>> tf.{fn.__name__}(tf.constant([1.0, 2.0, 3.0]), [[0]], [9.0]).shape\n    TensorShape([3])\n")
    return fn


for _mode, _tfn in [("set", "TensorScatterUpdate"), ("add", "TensorScatterAdd"), ("subtract", "TensorScatterSub"),
                    ("max", "TensorScatterMax"), ("min", "TensorScatterMin")]:
    _f = _tensor_scatter(_mode, _tfn)
    _pub = {"set": "update", "subtract": "sub"}.get(_mode, _mode)
    _export(_f, f"tensor_scatter_nd_{_pub}", jax_name=f"jax.Array.at[].{_mode}")


def scatter_nd(indices: Any, updates: Any, shape: Any, name: str | None = None) -> Tensor:
    """Zeros of ``shape`` with ``updates`` summed in at ``indices`` (duplicates add), as ``tf.scatter_nd``.

    Example:
        >>> import tapejax as tf
        >>> tf.scatter_nd([[1], [1]], [5.0, 2.0], [3]).numpy().tolist()
        [0.0, 7.0, 0.0]
    """
    upd = _as_t(updates)
    base = Tensor(jnp.zeros(_ints(shape, "shape"), _dt(upd)))
    idx = _index_t(indices, "ScatterNd")
    _scatter_checks(base, idx, upd, "ScatterNd")
    return bind(_scatter_p, base, idx, upd, mode="add")


_export(gather, "gather", jax_name="jax.numpy.take")
_export(gather_nd, "gather_nd", jax_name="jax.numpy indexing")
_export(scatter_nd, "scatter_nd", jax_name="jax.Array.at[].add")


# ---- where, boolean_mask, unique, searchsorted ----------------------------------------------

_where_p = prim("where", lambda c, x, y: jnp.where(c, x, y))


def where(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """Elementwise select with broadcasting, or (``x`` and ``y`` None) the coordinates of True values.

    The unselected branch receives a zero gradient (so a masked ``sqrt(0)`` stays
    finite, as in TF). Coordinates are int64 in TF; int32 without x64.

    Example:
        >>> import tapejax as tf
        >>> tf.where([True, False], 1.0, 2.0).numpy().tolist()
        [1.0, 2.0]
    """
    if (x is None) != (y is None):
        raise ValueError("x and y must both be non-None or both be None.")
    c = condition if _is_t(condition) else convert_to_tensor(condition, dtype="bool")
    if _dt(c) != np.bool_:
        if x is None:
            c = OPS["not_equal"](c, 0)
        else:
            raise errors.InvalidArgumentError(
                f"cannot compute SelectV2 as input #0(zero-based) was expected to be a bool tensor but is a "
                f"{from_np(_dt(c)).name} tensor [Op:SelectV2]")
    if x is None:
        cv = _concrete(c)
        if cv is None:
            raise errors.needs_values(TypeError("tf.where(condition) has a data-dependent shape and needs a concrete condition."))
        d = np.int64 if x64_enabled() else np.int32
        return Tensor(jnp.asarray(np.argwhere(cv).astype(d)))
    xv, yv = same_dtype("SelectV2", x, y)
    shapes = [tuple(t._aval.shape) for t in (c, xv, yv)]
    try:
        if not shapes[0] == shapes[1] == shapes[2]:  # (equal shapes broadcast: jnp's check costs µs)
            jnp.broadcast_shapes(*shapes)
    except ValueError:
        raise errors.InvalidArgumentError(
            f"condition {list(shapes[0])}, then {list(shapes[1])}, and else {list(shapes[2])} must be broadcastable "
            "[Op:SelectV2]") from None
    return bind(_where_p, c, xv, yv)


_export(where, "where", jax_name="jax.numpy.where")


def _bmask_impl(x: Any, idx: Any, axis: int, k: int) -> Any:
    s = x.shape
    flat = x.reshape(s[:axis] + (-1,) + s[axis + k:]) if k else x
    return jnp.take(flat, idx, axis=axis)


_bmask_p = prim("boolean_mask", _bmask_impl)


def boolean_mask(tensor: Any, mask: Any, axis: Any = None, name: str = "boolean_mask") -> Tensor:
    """Keep the entries where ``mask`` is True (``mask`` covers ``tensor``'s dims from ``axis``).

    The mask must be concrete (it decides the output shape). The gradient is dense.

    Example:
        >>> import tapejax as tf
        >>> tf.boolean_mask(tf.constant([1.0, 2.0, 3.0]), [True, False, True]).numpy().tolist()
        [1.0, 3.0]
    """
    x = _as_t(tensor)
    m = mask if _is_t(mask) else convert_to_tensor(mask, dtype="bool")
    mv = _concrete(m)
    if mv is None:
        raise errors.needs_values(TypeError("tf.boolean_mask has a data-dependent shape and needs a concrete mask (not a traced tensor)."))
    if mv.dtype != np.bool_:
        raise TypeError(f"mask must be a bool tensor, got {from_np(mv.dtype).name}")
    k = mv.ndim
    if k == 0:
        raise ValueError("mask cannot be scalar.")
    ax = 0 if axis is None else _int(axis, "axis") % max(x._aval.ndim, 1)
    seg = tuple(x._aval.shape[ax:ax + k])
    if seg != mv.shape:
        raise ValueError(f"Shapes {TensorShape(seg)} and {TensorShape(mv.shape)} are incompatible")
    idx = np.nonzero(mv.reshape(-1))[0].astype(np.int32)
    return bind(_bmask_p, x, jnp.asarray(idx), axis=ax, k=k)


_export(boolean_mask, "boolean_mask", jax_name="jax.numpy.take (concrete mask)")

Unique = namedtuple("Unique", ["y", "idx"])


def unique(x: Any, out_idx: Any = "int32", name: str | None = None) -> Unique:
    """Unique values in order of first appearance, and each entry's index into them (``tf.unique``).

    Example:
        >>> import tapejax as tf
        >>> tf.unique(tf.constant([1, 1, 3])).y.numpy().tolist()
        [1, 3]
    """
    t = _as_t(x)
    c = _concrete(t)
    if c is None:
        raise errors.needs_values(TypeError("tf.unique has a data-dependent shape and needs a concrete input, not a "
                                            "traced tensor."))
    if c.ndim != 1:
        raise errors.InvalidArgumentError("unique expects a 1-D vector.")
    _, first, inv = np.unique(c, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    y = c[np.sort(first)]
    # strings stay on the host
    idx = rank_of[inv.reshape(-1)].astype(as_dtype(out_idx)._np)
    return Unique(Tensor(y if y.dtype == object else jnp.asarray(y)), Tensor(jnp.asarray(idx)))


def searchsorted(sorted_sequence: Any, values: Any, side: str = "left", out_type: Any = "int32", name: str | None = None) -> Tensor:
    """Insertion points of ``values`` in each row of ``sorted_sequence``, as ``tf.searchsorted``.

    Example:
        >>> import tapejax as tf
        >>> tf.searchsorted([1.0, 2.0, 3.0], [2.5, 2.0]).numpy().tolist()
        [2, 1]
    """
    s, v = same_dtype("SearchSorted", sorted_sequence, values)
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    sv, vv = s._value, v._value
    f = lambda a, b: jnp.searchsorted(a, b, side=side)  # noqa: E731
    for _ in range(sv.ndim - 1):
        f = jax.vmap(f)
    return Tensor(f(sv, vv).astype(as_dtype(out_type)._np))


_export(unique, "unique", jax_name="numpy.unique (eager)")
_export(searchsorted, "searchsorted", jax_name="jax.numpy.searchsorted")


# ---- TF's __getitem__ ---------------------------------------------------------------------------


def _getitem_impl(x: Any, *dyn: Any, spec: tuple) -> Any:
    it = iter(dyn)
    idx = tuple(next(it) if s == "T" else (slice(*s[1]) if isinstance(s, tuple) and s and s[0] == "S" else s) for s in spec)
    return x[idx]


_getitem_p = prim("getitem", _getitem_impl)

_BAD_INDEX = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar tf.int32/tf.int64 tensors "
              "are valid indices, got {!r}")


def _bound(v: Any) -> Any:
    if v is None:
        return None
    if _is_t(v):
        c = _concrete(v)
        if c is None:
            raise TypeError("Slice bounds inside a traced function must be Python ints (use tf.slice or tf.gather).")
        if c.ndim or c.dtype.kind not in "iu":
            raise TypeError(_BAD_INDEX.format(v))
        return int(c)
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise TypeError(_BAD_INDEX.format(v))
    return int(v)


def getitem(x: Any, key: Any) -> Tensor:
    """TF's ``tensor[key]``: ints, slices with strides, ``...``, ``tf.newaxis``, scalar int tensors, bool masks.

    Out-of-range integer indices raise ``InvalidArgumentError`` (JAX would clamp);
    a bool tensor or array as the whole key is ``tf.boolean_mask``. A Python list
    key is read as a tuple, as TF does.

    Example:
        >>> import tapejax as tf
        >>> tf.constant([[1, 2, 3], [4, 5, 6]])[:, ::-2].numpy().tolist()
        [[3, 1], [6, 4]]
    """
    t = _as_t(x)
    if (_is_t(key) and _dt(key) == np.bool_) or (isinstance(key, np.ndarray) and key.dtype == np.bool_):
        return boolean_mask(t, key)
    if isinstance(key, list):
        key = tuple(key)
    if not isinstance(key, tuple):
        key = (key,)
    shape = t._aval.shape
    consuming = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise errors.InvalidArgumentError("Multiple ellipses in slice spec not allowed [Op:StridedSlice]")
    if consuming > len(shape):
        raise errors.InvalidArgumentError(
            f"Index out of range using input dim {len(shape)}; input has only {len(shape)} dims [Op:StridedSlice]")
    spec: list = []
    dyn: list = []
    dim = 0
    for k in key:
        if k is Ellipsis:
            spec.append(k)
            dim += len(shape) - consuming
        elif k is None:
            spec.append(None)
        elif isinstance(k, slice):
            st = _bound(k.step)
            if st == 0:
                raise errors.InvalidArgumentError(f"strides[{dim}] must be non-zero [Op:StridedSlice]")
            spec.append(("S", (_bound(k.start), _bound(k.stop), st)))
            dim += 1
        elif isinstance(k, bool):
            raise TypeError(_BAD_INDEX.format(k))
        elif isinstance(k, int | np.integer):
            n = shape[dim]
            if not -n <= int(k) < n:
                raise errors.InvalidArgumentError(f"slice index {int(k)} of dimension {dim} out of bounds. [Op:StridedSlice]")
            # The index is data, not a static parameter: `x[i]` in a loop reuses one
            # compiled program for every i (bounds were checked above, so no clamping).
            spec.append("T")
            dyn.append(int(k) % n)
            dim += 1
        elif _is_t(k) and from_np(_dt(k)).is_integer and k._aval.ndim == 0:
            c = _concrete(k)
            n = shape[dim]
            if c is not None:
                if not -n <= int(c) < n:
                    raise errors.InvalidArgumentError(f"slice index {int(c)} of dimension {dim} out of bounds. [Op:StridedSlice]")
                spec.append("T")
                dyn.append(int(c) % n)
            else:
                spec.append("T")
                dyn.append(k)
            dim += 1
        else:
            raise TypeError(_BAD_INDEX.format(k))
    return bind(_getitem_p, t, *dyn, spec=tuple(spec))


def strided_slice(input_: Any, begin: Any, end: Any, strides: Any = None, begin_mask: int = 0, end_mask: int = 0,
                  ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0, var: Any = None,
                  name: str | None = None) -> Tensor:
    """TF's ``strided_slice`` with its bit masks (the op behind ``tensor[...]``).

    Example:
        >>> import tapejax as tf
        >>> tf.strided_slice(tf.constant([1, 2, 3, 4]), [1], [4], [2]).numpy().tolist()
        [2, 4]
    """
    b, e = _ints(begin, "begin"), _ints(end, "end")
    s = (1,) * len(b) if strides is None else _ints(strides, "strides")
    key: list = []
    for i in range(len(b)):
        bit = 1 << i
        if ellipsis_mask & bit:
            key.append(Ellipsis)
        elif new_axis_mask & bit:
            key.append(None)
        elif shrink_axis_mask & bit:
            key.append(b[i])
        else:
            key.append(slice(None if begin_mask & bit else b[i], None if end_mask & bit else e[i], s[i]))
    return getitem(input_, tuple(key))


_export(strided_slice, "strided_slice", jax_name="jax.numpy indexing")
