"""The op library: a table of primitives over ``jax.numpy``/``jax.lax``, and the
TF-signature functions built from it.

Adding an op is one line in a table below. Each entry becomes a ``Primitive``
(what the tape records) and a public function with TF's signature and dtype
rules. Operators on ``Tensor`` and ``Variable`` are attached here too.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import errors
from ._core import Primitive, Tensor, VariableBase, bind
from ._dtypes import as_dtype, check_width, from_np
from ._tensor import convert_to_tensor

__all__ = ["EXPORTS", "prim", "unary", "binary", "reduction"]

# Public name -> function, e.g. "math.sin" and "sin". ``tapejax.__init__`` and
# the namespace modules read this table; nothing else lists ops by hand.
EXPORTS: dict[str, Callable] = {}
PRIMS: dict[str, Primitive] = {}
# Internal op name -> its TF-signature function (operators and other ops look ops up here).
OPS: dict[str, Callable] = {}


def _export(fn: Callable, *names: str) -> Callable:
    for n in names:
        EXPORTS[n] = fn
    return fn


def prim(name: str, impl: Callable, differentiable: bool = True, multiple_results: bool = False) -> Primitive:
    p = Primitive(name, impl, differentiable, multiple_results)
    PRIMS[name] = p
    return p


def _is_t(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


def _dt(x: Any) -> np.dtype:
    return x._value.dtype


def _as_t(x: Any, dtype: Any = None) -> Any:
    return x if isinstance(x, Tensor | VariableBase) else convert_to_tensor(x, dtype=dtype)


# ---- unary ops ---------------------------------------------------------------


def unary(name: str, impl: Callable, *names: str, differentiable: bool = True) -> Callable:
    p = prim(name, impl, differentiable)

    def op(x: Any, name: str | None = None) -> Tensor:
        return bind(p, _as_t(x))

    op.__name__ = op.__qualname__ = name
    OPS[name] = op
    op.__doc__ = f"Elementwise ``{name}`` (recorded on the tape).\n\nExample:\n    >>> import tapejax as tf\n    >>> tf.{names[0] if names else name}(tf.constant([0.5])).shape\n    TensorShape([1])\n"
    return _export(op, *(names or (name,)))


def _abs(x: Any) -> Any:
    # TF's convention: d|x|/dx = sign(x), so 0 at 0.
    return jnp.abs(x)


def _reciprocal(x: Any) -> Any:
    return 1 / x


_UNARY = [
    # name, impl, exported names
    ("negative", jnp.negative, "negative", "math.negative"),
    ("abs", _abs, "abs", "math.abs"),
    ("sin", jnp.sin, "sin", "math.sin"),
    ("cos", jnp.cos, "cos", "math.cos"),
    ("tan", jnp.tan, "tan", "math.tan"),
    ("asin", jnp.arcsin, "asin", "math.asin"),
    ("acos", jnp.arccos, "acos", "math.acos"),
    ("atan", jnp.arctan, "atan", "math.atan"),
    ("sinh", jnp.sinh, "sinh", "math.sinh"),
    ("cosh", jnp.cosh, "cosh", "math.cosh"),
    ("tanh", jnp.tanh, "tanh", "math.tanh", "nn.tanh"),
    ("asinh", jnp.arcsinh, "asinh", "math.asinh"),
    ("acosh", jnp.arccosh, "acosh", "math.acosh"),
    ("atanh", jnp.arctanh, "atanh", "math.atanh"),
    ("exp", jnp.exp, "exp", "math.exp"),
    ("expm1", jnp.expm1, "math.expm1"),
    ("log", jnp.log, "math.log"),
    ("log1p", jnp.log1p, "math.log1p"),
    ("sqrt", jnp.sqrt, "sqrt", "math.sqrt"),
    ("rsqrt", lax.rsqrt, "math.rsqrt"),
    ("square", jnp.square, "square", "math.square"),
    ("reciprocal", _reciprocal, "math.reciprocal"),
    ("sigmoid", jax.nn.sigmoid, "sigmoid", "math.sigmoid", "nn.sigmoid"),
    ("softplus", jax.nn.softplus, "math.softplus", "nn.softplus"),
    ("relu", jax.nn.relu, "nn.relu"),
    ("erf", jax.scipy.special.erf, "math.erf"),
    ("sign", jnp.sign, "sign", "math.sign"),
    ("real", jnp.real, "math.real"),
    ("imag", jnp.imag, "math.imag"),
    ("conj", jnp.conj, "math.conj"),
    ("identity", lambda x: x, "identity"),
]
for _name, _impl, *_names in _UNARY:
    unary(_name, _impl, *_names)

# TF registers no gradient for these: the result is unconnected (None).
for _name, _impl, *_names in [
    ("round", jnp.round, "round", "math.round"),
    ("floor", jnp.floor, "floor", "math.floor"),
    ("ceil", jnp.ceil, "math.ceil"),
    ("logical_not", jnp.logical_not, "logical_not", "math.logical_not"),
    ("is_nan", jnp.isnan, "math.is_nan"),
    ("is_finite", jnp.isfinite, "math.is_finite"),
    ("is_inf", jnp.isinf, "math.is_inf"),
]:
    unary(_name, _impl, *_names, differentiable=False)

log = OPS["log"]


# ---- binary ops with TF's dtype rules ------------------------------------------


def _other(v: Any, like: np.dtype) -> Any:
    """Convert a non-tensor operand the way TF does: to the tensor operand's dtype."""
    if isinstance(v, bool | int | float | complex) and not isinstance(v, np.generic):
        d = from_np(like)
        if isinstance(v, complex) and not d.is_complex:
            raise TypeError(f"Cannot convert {v!r} to EagerTensor of dtype {d.name}")
        if isinstance(v, float) and (d.is_integer or d.is_bool):
            raise TypeError(
                f"Cannot convert {v!r} to EagerTensor of dtype {d.name}. TF does not mix Python floats into "
                f"integer ops; use an int, or tf.cast the tensor to a float dtype first."
            )
        # A Python number stays a Python number: JAX's weak typing then keeps
        # the tensor's dtype, and the replay passes it as data, not a constant.
        return v
    return convert_to_tensor(v, dtype=from_np(like))


def _binary_operands(opname: str, x: Any, y: Any) -> tuple:
    xt, yt = _is_t(x), _is_t(y)
    if xt and yt:
        if _dt(x) != _dt(y):
            raise errors.InvalidArgumentError(
                f"cannot compute {opname} as input #1(zero-based) was expected to be a {from_np(_dt(x)).name} "
                f"tensor but is a {from_np(_dt(y)).name} tensor. tapejax, like TF, does not promote dtypes: "
                f"use tf.cast on one operand."
            )
        return x, y
    if xt:
        return x, _other(y, _dt(x))
    if yt:
        return _other(x, _dt(y)), y
    x = convert_to_tensor(x)
    return x, _other(y, _dt(x))


def binary(name: str, impl: Callable, *names: str, tf_name: str | None = None, differentiable: bool = True) -> Callable:
    p = prim(name, impl, differentiable)
    opname = tf_name or name.capitalize()

    def op(x: Any, y: Any, name: str | None = None) -> Tensor:
        x, y = _binary_operands(opname, x, y)
        return bind(p, x, y)

    op.__name__ = op.__qualname__ = name
    OPS[name] = op
    op.__doc__ = f"Elementwise ``{name}`` with broadcasting; both operands must share a dtype, as in TF.\n\nExample:\n    >>> import tapejax as tf\n    >>> tf.{names[0] if names else name}(tf.constant([2.0]), tf.constant([3.0])).shape\n    TensorShape([1])\n"
    return _export(op, *(names or (name,)))


def _maximum(x: Any, y: Any) -> Any:
    # TF sends the whole gradient of a tie to the first argument.
    return jnp.where(x >= y, x, y)


def _minimum(x: Any, y: Any) -> Any:
    return jnp.where(x <= y, x, y)


def _pow(x: Any, y: Any) -> Any:
    return jnp.power(x, y)


def _floordiv(x: Any, y: Any) -> Any:
    return jnp.floor_divide(x, y)


def _truediv(x: Any, y: Any) -> Any:
    return jnp.true_divide(x, y)


def _divide(x: Any, y: Any) -> Any:
    # TF's truediv: int8/int16 give float32, wider ints float64 (float32 without x64,
    # a documented difference); floats divide as they are.
    dt = jnp.result_type(x, y)
    if jnp.issubdtype(dt, jnp.integer):
        wide = dt.itemsize >= 4 and jax.config.jax_enable_x64
        ft = jnp.float64 if wide else jnp.float32
        return jnp.true_divide(jnp.asarray(x, ft), jnp.asarray(y, ft))
    return jnp.true_divide(x, y)


def _div_no_nan(x: Any, y: Any) -> Any:
    safe = jnp.where(y == 0, jnp.ones_like(y), y)
    return jnp.where(y == 0, jnp.zeros_like(x / safe), x / safe)


_BINARY = [
    ("add", jnp.add, "AddV2", "add", "math.add"),
    ("subtract", jnp.subtract, "Sub", "subtract", "math.subtract"),
    ("multiply", jnp.multiply, "Mul", "multiply", "math.multiply"),
    ("divide", _divide, "RealDiv", "divide", "math.divide", "math.truediv", "realdiv"),
    ("floordiv", _floordiv, "FloorDiv", "math.floordiv", "floordiv"),
    ("floormod", jnp.mod, "FloorMod", "math.floormod", "math.mod", "mod"),
    ("pow", _pow, "Pow", "pow", "math.pow"),
    ("maximum", _maximum, "Maximum", "maximum", "math.maximum"),
    ("minimum", _minimum, "Minimum", "minimum", "math.minimum"),
    ("squared_difference", lambda x, y: jnp.square(x - y), "SquaredDifference", "math.squared_difference"),
    ("atan2", jnp.arctan2, "Atan2", "math.atan2", "atan2"),
    ("div_no_nan", _div_no_nan, "DivNoNan", "math.divide_no_nan", "div_no_nan"),
]
for _name, _impl, _tfn, *_names in _BINARY:
    binary(_name, _impl, *_names, tf_name=_tfn)

for _name, _impl, _tfn, *_names in [
    ("equal", jnp.equal, "Equal", "equal", "math.equal"),
    ("not_equal", jnp.not_equal, "NotEqual", "not_equal", "math.not_equal"),
    ("less", jnp.less, "Less", "less", "math.less"),
    ("less_equal", jnp.less_equal, "LessEqual", "less_equal", "math.less_equal"),
    ("greater", jnp.greater, "Greater", "greater", "math.greater"),
    ("greater_equal", jnp.greater_equal, "GreaterEqual", "greater_equal", "math.greater_equal"),
    ("logical_and", jnp.logical_and, "LogicalAnd", "logical_and", "math.logical_and"),
    ("logical_or", jnp.logical_or, "LogicalOr", "logical_or", "math.logical_or"),
    ("bitwise_and", jnp.bitwise_and, "BitwiseAnd", "bitwise.bitwise_and"),
    ("bitwise_or", jnp.bitwise_or, "BitwiseOr", "bitwise.bitwise_or"),
    ("bitwise_xor", jnp.bitwise_xor, "BitwiseXor", "bitwise.bitwise_xor"),
]:
    binary(_name, _impl, *_names, tf_name=_tfn, differentiable=False)


# ---- reductions --------------------------------------------------------------


def _axis(axis: Any) -> Any:
    if axis is None:
        return None
    if _is_t(axis):
        axis = np.asarray(axis._value)
    if isinstance(axis, np.ndarray):
        axis = axis.tolist()
    if isinstance(axis, list | tuple):
        return tuple(int(a) for a in axis)
    return int(axis)


def reduction(name: str, impl: Callable, *names: str, differentiable: bool = True) -> Callable:
    p = prim(name, impl, differentiable)

    def op(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
        return bind(p, _as_t(input_tensor), axis=_axis(axis), keepdims=bool(keepdims))

    op.__name__ = op.__qualname__ = name
    OPS[name] = op
    op.__doc__ = f"``{name}`` over ``axis`` (all axes when None), as in TF.\n\nExample:\n    >>> import tapejax as tf\n    >>> float(tf.{names[0]}(tf.ones((2, 2))))  # doctest: +SKIP\n"
    return _export(op, *names)


def _mean(x: Any, axis: Any, keepdims: bool) -> Any:
    if jnp.issubdtype(x.dtype, jnp.integer):
        # TF's integer mean truncates toward zero and keeps the dtype.
        n = np.prod([x.shape[a] for a in (range(x.ndim) if axis is None else np.atleast_1d(axis))], dtype=np.int64)
        s = jnp.sum(x, axis=axis, keepdims=keepdims)
        return (jnp.sign(s) * (jnp.abs(s) // max(int(n), 1))).astype(x.dtype)
    return jnp.mean(x, axis=axis, keepdims=keepdims)


def _sum(x: Any, axis: Any, keepdims: bool) -> Any:
    return jnp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


for _name, _impl, *_names in [
    ("reduce_sum", _sum, "reduce_sum", "math.reduce_sum"),
    ("reduce_mean", _mean, "reduce_mean", "math.reduce_mean"),
    ("reduce_max", jnp.max, "reduce_max", "math.reduce_max"),
    ("reduce_min", jnp.min, "reduce_min", "math.reduce_min"),
    ("reduce_prod", jnp.prod, "reduce_prod", "math.reduce_prod"),
    ("reduce_logsumexp", jax.scipy.special.logsumexp, "reduce_logsumexp", "math.reduce_logsumexp"),
    ("reduce_variance", jnp.var, "math.reduce_variance"),
    ("reduce_std", jnp.std, "math.reduce_std"),
]:
    reduction(_name, _impl, *_names)
for _name, _impl, *_names in [
    ("reduce_any", jnp.any, "reduce_any", "math.reduce_any"),
    ("reduce_all", jnp.all, "reduce_all", "math.reduce_all"),
]:
    reduction(_name, _impl, *_names, differentiable=False)

reduce_sum = OPS["reduce_sum"]


# ---- shape and structure -------------------------------------------------------

_matmul_p = prim("matmul", lambda a, b, ta, tb, aa, ab: jnp.matmul(
    (jnp.conj(jnp.swapaxes(a, -1, -2)) if aa else jnp.swapaxes(a, -1, -2)) if (ta or aa) else a,
    (jnp.conj(jnp.swapaxes(b, -1, -2)) if ab else jnp.swapaxes(b, -1, -2)) if (tb or ab) else b,
))


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False,
           output_type: Any = None, name: str | None = None) -> Tensor:
    """Matrix product of the last two axes (batched over the rest), as ``tf.linalg.matmul``.

    Example:
        >>> import tapejax as tf
        >>> tf.matmul(tf.ones((2, 3)), tf.ones((3, 4))).shape
        TensorShape([2, 4])
    """
    a, b = _binary_operands("MatMul", a, b)
    a, b = _as_t(a), _as_t(b)
    if a._value.ndim < 2 or b._value.ndim < 2:
        raise errors.InvalidArgumentError(
            f"In[0] and In[1] must be at least rank 2 for MatMul, got shapes {list(a.shape)} and {list(b.shape)}. "
            "Use tf.linalg.matvec or tf.tensordot for vectors."
        )
    return bind(_matmul_p, a, b, ta=bool(transpose_a), tb=bool(transpose_b), aa=bool(adjoint_a), ab=bool(adjoint_b))


_export(matmul, "matmul", "linalg.matmul")

_cast_p = prim("cast", lambda x, dtype: x.astype(dtype) if not (jnp.iscomplexobj(x) and not jnp.issubdtype(dtype, jnp.complexfloating)) else jnp.real(x).astype(dtype))


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """Cast to ``dtype`` (complex to real keeps the real part, as in TF).

    Example:
        >>> import tapejax as tf
        >>> tf.cast(tf.constant([1.7]), tf.int32).numpy().tolist()
        [1]
    """
    d = as_dtype(dtype)
    check_width(d._np, "tf.cast to")
    x = _as_t(x)
    if _dt(x) == d._np:
        return bind(PRIMS["identity"], x)
    return bind(_cast_p, x, dtype=d._np)


_export(cast, "cast", "dtypes.cast")

_reshape_p = prim("reshape", lambda x, shape: jnp.reshape(x, shape))


def reshape(tensor: Any, shape: Any, name: str | None = None) -> Tensor:
    """Reshape (one dimension may be -1), as ``tf.reshape``.

    Example:
        >>> import tapejax as tf
        >>> tf.reshape(tf.ones((2, 3)), [3, -1]).shape
        TensorShape([3, 2])
    """
    shape = tuple(int(s) for s in (np.asarray(shape._value).tolist() if _is_t(shape) else shape))
    return bind(_reshape_p, _as_t(tensor), shape=shape)


_export(reshape, "reshape")

_transpose_p = prim("transpose", lambda x, perm, conj: jnp.conj(jnp.transpose(x, perm)) if conj else jnp.transpose(x, perm))


def transpose(a: Any, perm: Any = None, conjugate: bool = False, name: str | None = None) -> Tensor:
    """Permute axes (reverse them when ``perm`` is None), as ``tf.transpose``."""
    a = _as_t(a)
    perm = tuple(range(a._value.ndim - 1, -1, -1)) if perm is None else tuple(int(p) for p in perm)
    return bind(_transpose_p, a, perm=perm, conj=bool(conjugate))


_export(transpose, "transpose")

_stack_p = prim("stack", lambda *xs, axis: jnp.stack(xs, axis=axis))
_concat_p = prim("concat", lambda *xs, axis: jnp.concatenate(xs, axis=axis))


def _same_dtype(values: list, opname: str) -> list:
    ts = [v for v in values if _is_t(v)]
    like = _dt(ts[0]) if ts else None
    out = []
    for v in values:
        if _is_t(v):
            if _dt(v) != like:
                raise errors.InvalidArgumentError(f"{opname}: all inputs must have the same dtype, got {from_np(like).name} and {from_np(_dt(v)).name}.")
            out.append(v)
        else:
            out.append(convert_to_tensor(v, dtype=from_np(like) if like is not None else None))
    return out


def stack(values: Any, axis: int = 0, name: str | None = None) -> Tensor:
    """Stack tensors along a new axis, as ``tf.stack``.

    Example:
        >>> import tapejax as tf
        >>> tf.stack([tf.constant(1.0), tf.constant(2.0)]).shape
        TensorShape([2])
    """
    return bind(_stack_p, *_same_dtype(list(values), "Pack"), axis=int(axis))


def concat(values: Any, axis: int, name: str | None = None) -> Tensor:
    """Join tensors along an existing axis, as ``tf.concat``."""
    return bind(_concat_p, *_same_dtype(list(values), "ConcatV2"), axis=int(axis))


_export(stack, "stack")
_export(concat, "concat")


# ---- indexing --------------------------------------------------------------------


def _getitem_impl(x: Any, *dyn: Any, spec: tuple) -> Any:
    it = iter(dyn)
    idx = tuple(next(it) if s == "T" else (slice(*s[1]) if isinstance(s, tuple) and s and s[0] == "S" else s) for s in spec)
    return x[idx]


_getitem_p = prim("getitem", _getitem_impl)


def _static_int(v: Any) -> Any:
    return None if v is None else int(v)


def getitem(x: Any, key: Any) -> Tensor:
    """TF's ``__getitem__``: ints, slices (with strides), ``...``, ``tf.newaxis`` and scalar int tensors."""
    if not isinstance(key, tuple):
        key = (key,)
    spec = []
    dyn = []
    for k in key:
        if isinstance(k, slice):
            spec.append(("S", (_static_int(k.start), _static_int(k.stop), _static_int(k.step))))
        elif k is None or k is Ellipsis:
            spec.append(k)
        elif isinstance(k, bool):
            raise TypeError("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar tf.int32/tf.int64 tensors are valid indices, got True/False.")
        elif isinstance(k, int | np.integer):
            spec.append(int(k))
        elif _is_t(k) and from_np(_dt(k)).is_integer:
            if k._value.ndim == 0:
                spec.append("T")
                dyn.append(k)
            else:
                raise TypeError("Only scalar integer tensors are valid indices; use tf.gather for a tensor of indices.")
        else:
            raise TypeError(
                f"Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar tf.int32/tf.int64 "
                f"tensors are valid indices, got {k!r}"
            )
    return bind(_getitem_p, _as_t(x), *dyn, spec=tuple(spec))


# ---- creation ----------------------------------------------------------------------


def _shape_tuple(shape: Any) -> tuple:
    if _is_t(shape):
        shape = np.asarray(shape._value).tolist()
    if isinstance(shape, int | np.integer):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _float_dtype(dtype: Any) -> np.dtype:
    d = as_dtype(dtype if dtype is not None else "float32")
    check_width(d._np, "Requested dtype")
    return d._np


def zeros(shape: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """A tensor of zeros (float32 by default), as ``tf.zeros``.

    Example:
        >>> import tapejax as tf
        >>> tf.zeros((2,)).numpy().tolist()
        [0.0, 0.0]
    """
    return Tensor(jnp.zeros(_shape_tuple(shape), _float_dtype(dtype)))


def ones(shape: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """A tensor of ones (float32 by default), as ``tf.ones``.

    Example:
        >>> import tapejax as tf
        >>> tf.ones((2, 2)).shape
        TensorShape([2, 2])
    """
    return Tensor(jnp.ones(_shape_tuple(shape), _float_dtype(dtype)))


def zeros_like(input: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """Zeros with the shape (and dtype, unless given) of ``input``."""
    v = _as_t(input)._value
    return Tensor(jnp.zeros(v.shape, _float_dtype(dtype) if dtype is not None else v.dtype))


def ones_like(input: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """Ones with the shape (and dtype, unless given) of ``input``."""
    v = _as_t(input)._value
    return Tensor(jnp.ones(v.shape, _float_dtype(dtype) if dtype is not None else v.dtype))


def linspace(start: Any, stop: Any, num: Any, name: str | None = None, axis: int = 0) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop``, as ``tf.linspace``.

    TF returns float64 for integer endpoints. tapejax does that in x64 mode and
    returns float32 otherwise (a documented difference: the endpoints are exact
    in float32, so nothing the user supplied is truncated).

    Example:
        >>> import tapejax as tf
        >>> tf.linspace(0.0, 1.0, 3).numpy().tolist()
        [0.0, 0.5, 1.0]
    """
    s = start._value if _is_t(start) else start
    e = stop._value if _is_t(stop) else stop
    if _is_t(start):
        dt = _dt(start)
    elif isinstance(start, float) or isinstance(stop, float):
        dt = np.dtype(np.float32)
    else:
        dt = np.dtype(np.float64) if jax.config.jax_enable_x64 else np.dtype(np.float32)
    return Tensor(jnp.linspace(jnp.asarray(s, dt), jnp.asarray(e, dt), int(num), axis=axis).astype(dt))


def range_(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None, name: str = "range") -> Tensor:
    """``tf.range``: int32 for int arguments, float32 if any is a float."""
    if limit is None:
        start, limit = 0, start
    vals = [v._value if _is_t(v) else v for v in (start, limit, delta)]
    if dtype is None:
        dt = np.dtype(np.float32) if any(np.asarray(v).dtype.kind == "f" for v in vals) else np.dtype(np.int32)
    else:
        dt = as_dtype(dtype)._np
        check_width(dt, "Requested dtype")
    return Tensor(jnp.arange(*[np.asarray(v).item() for v in vals], dtype=dt))


_export(zeros, "zeros")
_export(ones, "ones")
_export(zeros_like, "zeros_like")
_export(ones_like, "ones_like")
_export(linspace, "linspace", "lin_space")
_export(range_, "range")


# ---- Tensor and Variable operators -------------------------------------------------

_E = OPS


def _r(fn: Callable) -> Callable:
    return lambda self, other: fn(other, self)


def _pow_method(self: Any, other: Any) -> Tensor:
    return _E["pow"](self, other)


_OPERATORS = {
    "__add__": _E["add"],
    "__radd__": _r(_E["add"]),
    "__sub__": _E["subtract"],
    "__rsub__": _r(_E["subtract"]),
    "__mul__": _E["multiply"],
    "__rmul__": _r(_E["multiply"]),
    "__truediv__": _E["divide"],
    "__rtruediv__": _r(_E["divide"]),
    "__floordiv__": _E["floordiv"],
    "__rfloordiv__": _r(_E["floordiv"]),
    "__mod__": _E["floormod"],
    "__rmod__": _r(_E["floormod"]),
    "__pow__": _pow_method,
    "__rpow__": _r(_E["pow"]),
    "__matmul__": matmul,
    "__rmatmul__": _r(matmul),
    "__neg__": _E["negative"],
    "__pos__": lambda self: self,
    "__abs__": _E["abs"],
    "__lt__": _E["less"],
    "__le__": _E["less_equal"],
    "__gt__": _E["greater"],
    "__ge__": _E["greater_equal"],
    "__eq__": _E["equal"],
    "__ne__": _E["not_equal"],
    "__and__": _E["logical_and"],
    "__rand__": _r(_E["logical_and"]),
    "__or__": _E["logical_or"],
    "__ror__": _r(_E["logical_or"]),
    "__invert__": _E["logical_not"],
    "__getitem__": getitem,
}


def _eq(self: Any, other: Any) -> Any:
    # TF 2: == is elementwise; comparing with None (or anything non-numeric) is False.
    if other is None or not isinstance(other, Tensor | VariableBase | int | float | bool | complex | np.ndarray | np.generic | list | tuple):
        return False
    try:
        return _E["equal"](self, other)
    except (errors.InvalidArgumentError, TypeError, ValueError):
        return False


def _ne(self: Any, other: Any) -> Any:
    r = _eq(self, other)
    return True if r is False else _E["logical_not"](r)


_OPERATORS["__eq__"] = _eq
_OPERATORS["__ne__"] = _ne

for _cls in (Tensor, VariableBase):
    for _k, _f in _OPERATORS.items():
        setattr(_cls, _k, _f)
