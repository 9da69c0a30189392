"""The op test registry: one ``Case`` per (TF symbol, configuration).

A case is written once against a framework module ``tf`` (``fn(tf, *tensors)``)
and runs three ways:

* ``tests/test_ops.py``: tapejax's value and tape gradient against ``ref`` (the
  plain ``jax.numpy`` equivalent) and ``jax.vjp`` of it, on random inputs;
* ``tests/oracle/test_oracle_ops.py``: tapejax against real TensorFlow on the
  same inputs (hypothesis-drawn shapes and values for elementwise cases);
* ``scripts/gen_ops_doc.py`` reads ``covered()`` to mark a TF symbol "tested" in
  ``compat_docs/ops.md``: only names some case checks for value and gradient.

``grad=False`` marks ops TF does not differentiate (the test then asserts the
gradient is None, TF's convention) or whose outputs are integers.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@dataclasses.dataclass
class Arg:
    """An input: its shape, dtype and value range (``kind``: 'uniform', 'int', 'bool', 'spd', 'prob', 'nonzero')."""

    shape: tuple = (2, 3)
    lo: float = -2.0
    hi: float = 2.0
    dtype: str = "float32"
    kind: str = "uniform"


@dataclasses.dataclass
class Case:
    name: str  # the TF symbol, e.g. "math.sin" (resolved as tf.math.sin)
    fn: Callable  # fn(tf, *tensors) -> tensor or tuple of tensors
    ref: Callable | None  # ref(*arrays) -> the same structure, with jax.numpy
    args: list
    grad: bool = True  # False: no gradient (TF's None); only the value is compared
    covers: tuple = ()  # other public names this case exercises (aliases)
    oracle: bool = True  # also compare with real TF
    elementwise: int = 0  # 1 or 2: the oracle test may draw (broadcastable) shapes with hypothesis
    rtol: float = 2e-5
    atol: float = 1e-5
    label: str = ""
    slow: bool = False  # an expensive compile: test_ops runs it only with `-m slow` (the oracle test always)

    @property
    def id(self) -> str:
        return self.name + (f"[{self.label}]" if self.label else "")

    def seed(self) -> int:
        return zlib.crc32(self.id.encode())


def resolve(tf: Any, name: str) -> Callable:
    obj = tf
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def make_inputs(args: list, rng: np.random.Generator, shapes: list | None = None) -> list:
    """NumPy inputs for ``args`` (optionally with other shapes), deterministic for a given ``rng``."""
    out = []
    for k, a in enumerate(args):
        shape = tuple(shapes[k]) if shapes is not None else a.shape
        if a.kind == "int":
            v = rng.integers(int(a.lo), int(a.hi), size=shape).astype(a.dtype)
        elif a.kind == "bool":
            v = rng.random(shape) < 0.5
        elif a.kind == "spd":
            n = shape[-1]
            m = rng.normal(size=shape)
            v = (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(a.dtype)
        elif a.kind == "prob":
            p = rng.random(shape) + 0.1
            v = (p / p.sum(axis=-1, keepdims=True)).astype(a.dtype)
        elif a.kind == "nonzero":
            mag = rng.uniform(0.3, a.hi, size=shape)
            v = (mag * np.where(rng.random(shape) < 0.5, -1, 1)).astype(a.dtype)
        elif a.kind == "complex":
            v = (rng.uniform(a.lo, a.hi, size=shape) + 1j * rng.uniform(a.lo, a.hi, size=shape)).astype(a.dtype)
        elif a.kind == "distinct":
            # Well-separated values (no near-ties: sorting, top_k, max and their gradients are stable).
            n = int(np.prod(shape))
            v = (rng.permutation(n).reshape(shape) * 0.37 + rng.uniform(0, 0.05, size=shape) + a.lo).astype(a.dtype)
        else:
            v = rng.uniform(a.lo, a.hi, size=shape).astype(a.dtype)
        out.append(np.asarray(v))
    return out


CASES: list[Case] = []


def add(name: str, fn: Callable, ref: Callable | None, args: list, **kw: Any) -> None:
    CASES.append(Case(name, fn, ref, args, **kw))


def unary(name: str, ref: Callable, lo: float = -2.0, hi: float = 2.0, shape: tuple = (2, 3), kind: str = "uniform",
          dtype: str = "float32", **kw: Any) -> None:
    add(name, lambda tf, x: resolve(tf, name)(x), ref, [Arg(shape, lo, hi, dtype, kind)], elementwise=1, **kw)


def binary(name: str, ref: Callable, lo: float = -2.0, hi: float = 2.0, shapes: tuple = ((2, 3), (3,)), kind: str = "uniform",
           lo2: float | None = None, hi2: float | None = None, kind2: str | None = None, dtype: str = "float32", **kw: Any) -> None:
    a = Arg(shapes[0], lo, hi, dtype, kind)
    b = Arg(shapes[1], lo if lo2 is None else lo2, hi if hi2 is None else hi2, dtype, kind2 or kind)
    add(name, lambda tf, x, y: resolve(tf, name)(x, y), ref, [a, b], elementwise=2, **kw)


def tril_sym(a: Any) -> Any:
    """The Hermitian matrix TF's eigh/cholesky kernels read: the lower triangle, mirrored."""
    return jnp.tril(a) + jnp.swapaxes(jnp.tril(a, -1), -1, -2).conj()


# ---- elementwise unary --------------------------------------------------------------------------

for _n, _r, _lo, _hi, _cov in [
    ("negative", jnp.negative, -2, 2, ("math.negative",)),
    ("abs", jnp.abs, -2, 2, ("math.abs",)),
    ("sin", jnp.sin, -2, 2, ("math.sin",)),
    ("cos", jnp.cos, -2, 2, ("math.cos",)),
    ("tan", jnp.tan, -1, 1, ("math.tan",)),
    ("asin", jnp.arcsin, -0.9, 0.9, ("math.asin",)),
    ("acos", jnp.arccos, -0.9, 0.9, ("math.acos",)),
    ("atan", jnp.arctan, -2, 2, ("math.atan",)),
    ("sinh", jnp.sinh, -2, 2, ("math.sinh",)),
    ("cosh", jnp.cosh, -2, 2, ("math.cosh",)),
    ("tanh", jnp.tanh, -2, 2, ("math.tanh", "nn.tanh")),
    ("asinh", jnp.arcsinh, -2, 2, ("math.asinh",)),
    ("acosh", jnp.arccosh, 1.2, 3, ("math.acosh",)),
    ("atanh", jnp.arctanh, -0.9, 0.9, ("math.atanh",)),
    ("exp", jnp.exp, -2, 2, ("math.exp",)),
    ("math.expm1", jnp.expm1, -2, 2, ()),
    ("math.log", jnp.log, 0.2, 3, ()),
    ("math.log1p", jnp.log1p, -0.5, 2, ()),
    ("sqrt", jnp.sqrt, 0.2, 3, ("math.sqrt",)),
    ("math.rsqrt", lax.rsqrt, 0.2, 3, ()),
    ("square", jnp.square, -2, 2, ("math.square",)),
    ("math.reciprocal", jnp.reciprocal, 0.3, 3, ("math.inv",)),
    ("sigmoid", jax.nn.sigmoid, -3, 3, ("math.sigmoid", "nn.sigmoid")),
    ("math.log_sigmoid", jax.nn.log_sigmoid, -3, 3, ()),
    ("math.softplus", jax.nn.softplus, -3, 3, ("nn.softplus",)),
    ("math.softsign", jax.nn.soft_sign, -3, 3, ("nn.softsign",)),
    ("nn.relu", jax.nn.relu, -2, 2, ()),
    ("nn.relu6", lambda x: jnp.clip(x, 0, 6), -2, 8, ()),
    ("nn.elu", jax.nn.elu, -2, 2, ()),
    ("nn.selu", jax.nn.selu, -2, 2, ()),
    ("nn.leaky_relu", lambda x: jax.nn.leaky_relu(x, 0.2), -2, 2, ()),
    ("nn.silu", jax.nn.silu, -3, 3, ("nn.swish",)),
    ("nn.gelu", lambda x: jax.nn.gelu(x, approximate=False), -3, 3, ()),
    ("math.erf", jax.scipy.special.erf, -2, 2, ()),
    ("math.erfc", jax.scipy.special.erfc, -2, 2, ()),
    ("math.erfinv", jax.scipy.special.erfinv, -0.8, 0.8, ()),
    ("math.ndtri", jax.scipy.special.ndtri, 0.1, 0.9, ()),
    ("math.lgamma", jax.scipy.special.gammaln, 0.5, 4, ()),
    ("math.digamma", jax.scipy.special.digamma, 0.5, 4, ()),
    ("math.bessel_i0e", jax.scipy.special.i0e, -2, 2, ()),
    ("math.bessel_i1e", jax.scipy.special.i1e, -2, 2, ()),
    ("sign", jnp.sign, -2, 2, ("math.sign",)),
    ("math.reciprocal_no_nan", jnp.reciprocal, 0.3, 3, ()),
    ("identity", lambda x: x, -2, 2, ()),
]:
    unary(_n, _r, _lo, _hi, covers=_cov)

add("nn.leaky_relu", lambda tf, x: tf.nn.leaky_relu(x, alpha=0.1), lambda x: jax.nn.leaky_relu(x, 0.1), [Arg((2, 3))], label="alpha=0.1")
add("nn.gelu", lambda tf, x: tf.nn.gelu(x, approximate=True), lambda x: jax.nn.gelu(x, approximate=True), [Arg((2, 3), -3, 3)],
    label="approximate")
add("nn.silu", lambda tf, x: tf.nn.silu(x, beta=2.0), lambda x: x * jax.nn.sigmoid(2.0 * x), [Arg((2, 3), -3, 3)], label="beta=2",
    oracle=True)

# complex inputs: TF's gradient is the conjugate of JAX's (the tests conjugate the reference)
for _n, _r in [("square", jnp.square), ("exp", jnp.exp), ("sqrt", jnp.sqrt), ("abs", jnp.abs), ("math.real", jnp.real),
               ("math.imag", jnp.imag), ("math.conj", jnp.conj), ("math.angle", jnp.angle)]:
    unary(_n, _r, 0.3, 2.0, kind="complex", dtype="complex64", label="complex64")

# TF registers no gradient for these (the tape gradient is None)
for _n, _r, _lo, _hi, _kind, _dt in [
    ("round", jnp.round, -3, 3, "uniform", "float32"),
    ("floor", jnp.floor, -3, 3, "uniform", "float32"),
    ("math.ceil", jnp.ceil, -3, 3, "uniform", "float32"),
    ("math.rint", jnp.rint, -3, 3, "uniform", "float32"),
    ("math.is_nan", jnp.isnan, -3, 3, "uniform", "float32"),
    ("math.is_finite", jnp.isfinite, -3, 3, "uniform", "float32"),
    ("math.is_inf", jnp.isinf, -3, 3, "uniform", "float32"),
    ("logical_not", jnp.logical_not, 0, 1, "bool", "bool"),
]:
    unary(_n, _r, _lo, _hi, kind=_kind, dtype=_dt, grad=False)
for _n, _r in [("abs", jnp.abs), ("square", jnp.square), ("sign", jnp.sign)]:
    unary(_n, _r, -5, 5, kind="int", dtype="int32", grad=False, label="int32")


# ---- elementwise binary -----------------------------------------------------------------------------

for _n, _r, _lo, _hi, _kw, _cov in [
    ("add", jnp.add, -2, 2, {}, ("math.add",)),
    ("subtract", jnp.subtract, -2, 2, {}, ("math.subtract",)),
    ("multiply", jnp.multiply, -2, 2, {}, ("math.multiply",)),
    ("divide", jnp.divide, -2, 2, {"kind2": "nonzero"}, ("math.divide", "math.truediv", "truediv", "realdiv")),
    ("maximum", jnp.maximum, -2, 2, {}, ("math.maximum",)),
    ("minimum", jnp.minimum, -2, 2, {}, ("math.minimum",)),
    ("pow", jnp.power, 0.3, 2, {"lo2": -2, "hi2": 2}, ("math.pow",)),
    ("math.squared_difference", lambda x, y: jnp.square(x - y), -2, 2, {}, ()),
    ("math.atan2", jnp.arctan2, -2, 2, {"kind": "nonzero"}, ("atan2",)),
    ("math.divide_no_nan", jnp.divide, -2, 2, {"kind2": "nonzero"}, ()),
    ("math.multiply_no_nan", jnp.multiply, -2, 2, {}, ()),
    ("math.xlogy", lambda x, y: x * jnp.log(y), -2, 2, {"lo2": 0.3, "hi2": 3}, ()),
    ("math.xdivy", lambda x, y: x / y, -2, 2, {"kind2": "nonzero"}, ()),
    ("math.xlog1py", lambda x, y: x * jnp.log1p(y), -2, 2, {"lo2": -0.5, "hi2": 2}, ()),
    ("math.floormod", jnp.mod, -3, 3, {"kind2": "nonzero"}, ("math.mod", "mod")),
]:
    binary(_n, _r, _lo, _hi, covers=_cov, **_kw)
# Their derivative in a is a long series: seconds of XLA compile time each.
binary("math.igamma", jax.scipy.special.gammainc, 0.5, 3, slow=True)
binary("math.igammac", jax.scipy.special.gammaincc, 0.5, 3, slow=True)

for _n, _r, _kind, _dt in [
    ("equal", jnp.equal, "int", "int32"), ("not_equal", jnp.not_equal, "int", "int32"), ("less", jnp.less, "uniform", "float32"),
    ("less_equal", jnp.less_equal, "int", "int32"), ("greater", jnp.greater, "uniform", "float32"),
    ("greater_equal", jnp.greater_equal, "int", "int32"), ("logical_and", jnp.logical_and, "bool", "bool"),
    ("logical_or", jnp.logical_or, "bool", "bool"), ("math.logical_xor", jnp.logical_xor, "bool", "bool"),
    ("bitwise.bitwise_and", jnp.bitwise_and, "int", "int32"), ("bitwise.bitwise_or", jnp.bitwise_or, "int", "int32"),
    ("bitwise.bitwise_xor", jnp.bitwise_xor, "int", "int32"), ("math.floordiv", jnp.floor_divide, "nonzero", "float32"),
    ("truncatediv", lambda x, y: jnp.trunc(x / y), "nonzero", "float32"), ("truncatemod", jnp.fmod, "nonzero", "float32"),
]:
    # TF has no gradient at all for TruncateMod (its tape raises LookupError); tapejax gives None.
    binary(_n, _r, -3, 3, kind=_kind, dtype=_dt, grad=False, oracle=_n != "truncatemod")
binary("pow", jnp.power, 0, 4, kind="int", dtype="int32", grad=False, label="int32")
unary("bitwise.invert", jnp.invert, -5, 5, kind="int", dtype="int32", grad=False)
binary("bitwise.left_shift", jnp.left_shift, 0, 4, kind="int", dtype="int32", grad=False)
binary("bitwise.right_shift", jnp.right_shift, 0, 4, kind="int", dtype="int32", grad=False)
binary("math.floordiv", jnp.floor_divide, 1, 5, kind="int", dtype="int32", grad=False, label="int32", covers=("floordiv",))


# ---- reductions --------------------------------------------------------------------------------------

for _n, _r, _kind, _cov in [
    ("reduce_sum", jnp.sum, "uniform", ("math.reduce_sum",)),
    ("reduce_mean", jnp.mean, "uniform", ("math.reduce_mean",)),
    ("reduce_max", jnp.max, "distinct", ("math.reduce_max",)),
    ("reduce_min", jnp.min, "distinct", ("math.reduce_min",)),
    ("reduce_prod", jnp.prod, "uniform", ("math.reduce_prod",)),
    ("reduce_logsumexp", jax.scipy.special.logsumexp, "uniform", ("math.reduce_logsumexp",)),
    ("math.reduce_variance", jnp.var, "uniform", ()),
    ("math.reduce_std", jnp.std, "uniform", ()),
    ("math.reduce_euclidean_norm", lambda x, axis=None, keepdims=False: jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=keepdims)), "uniform", ()),
]:
    for _axis, _keep in [(None, False), ((0, -1), True)]:
        add(_n, (lambda n, a, k: lambda tf, x: resolve(tf, n)(x, axis=a, keepdims=k))(_n, _axis, _keep),
            (lambda r, a, k: lambda x: r(x, axis=a, keepdims=k))(_r, _axis, _keep),
            [Arg((2, 3, 2), -2, 2, "float32", _kind)], label=f"axis={_axis},keepdims={_keep}", covers=_cov)
for _n, _r in [("reduce_all", jnp.all), ("reduce_any", jnp.any)]:
    add(_n, (lambda n: lambda tf, x: resolve(tf, n)(x, axis=1))(_n), (lambda r: lambda x: r(x, axis=1))(_r),
        [Arg((2, 3), kind="bool", dtype="bool")], grad=False, covers=("math." + _n,))
add("reduce_sum", lambda tf, x: tf.reduce_sum(x, axis=0), lambda x: jnp.sum(x, axis=0), [Arg((3, 2), 0, 9, "int32", "int")],
    grad=False, label="int32")
add("reduce_mean", lambda tf, x: tf.reduce_mean(x, axis=1), lambda x: (jnp.sign(jnp.sum(x, 1)) * (jnp.abs(jnp.sum(x, 1)) // 3)).astype(jnp.int32),
    [Arg((2, 3), -9, 9, "int32", "int")], grad=False, label="int32 truncates")
add("math.count_nonzero", lambda tf, x: tf.math.count_nonzero(tf.round(x), axis=1, dtype=tf.int32),
    lambda x: jnp.sum(jnp.round(x) != 0, axis=1).astype(jnp.int32), [Arg((2, 4), -1, 1)], grad=False)


# ---- scans, arg-reductions, top_k, sorting, segments -------------------------------------------------

for _ex, _rev in [(False, False), (True, True), (False, True)]:
    _lab = f"exclusive={_ex},reverse={_rev}"
    add("cumsum", (lambda e, r: lambda tf, x: tf.math.cumsum(x, axis=1, exclusive=e, reverse=r))(_ex, _rev),
        (lambda e, r: lambda x: _cum(jnp.cumsum, x, 1, e, r, 0.0))(_ex, _rev), [Arg((2, 4))], label=_lab, covers=("math.cumsum",))
    add("math.cumprod", (lambda e, r: lambda tf, x: tf.math.cumprod(x, axis=1, exclusive=e, reverse=r))(_ex, _rev),
        (lambda e, r: lambda x: _cum(jnp.cumprod, x, 1, e, r, 1.0))(_ex, _rev), [Arg((2, 4), kind="nonzero")], label=_lab)
add("math.cumulative_logsumexp", lambda tf, x: tf.math.cumulative_logsumexp(x, axis=0),
    lambda x: lax.cumlogsumexp(x, axis=0), [Arg((4, 2))])


def _np_unique(x: Any) -> tuple:
    # Values in order of first appearance and each entry's index into them (TF's tf.unique).
    a = np.asarray(x)
    y, first, inv = np.unique(a, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return jnp.asarray(a[np.sort(first)]), jnp.asarray(rank[inv.reshape(-1)].astype(np.int32))


def _cum(f: Callable, x: Any, axis: int, exclusive: bool, reverse: bool, fill: float) -> Any:
    if reverse:
        x = jnp.flip(x, axis)
    y = f(x, axis=axis)
    if exclusive:
        pad = jnp.full_like(lax.slice_in_dim(y, 0, 1, axis=axis), fill)
        y = jnp.concatenate([pad, lax.slice_in_dim(y, 0, y.shape[axis] - 1, axis=axis)], axis=axis)
    return jnp.flip(y, axis) if reverse else y


add("argmax", lambda tf, x: tf.argmax(x, axis=1, output_type=tf.int32), lambda x: jnp.argmax(x, axis=1).astype(jnp.int32),
    [Arg((3, 4), kind="distinct")], grad=False, covers=("math.argmax",))
add("argmin", lambda tf, x: tf.argmin(x, axis=0, output_type=tf.int32), lambda x: jnp.argmin(x, axis=0).astype(jnp.int32),
    [Arg((3, 4), kind="distinct")], grad=False, covers=("math.argmin",))
add("math.top_k", lambda tf, x: tuple(tf.math.top_k(x, k=2)), lambda x: lax.top_k(x, 2), [Arg((3, 5), kind="distinct")],
    covers=("nn.top_k",))
add("sort", lambda tf, x: tf.sort(x, axis=-1), lambda x: jnp.sort(x, axis=-1), [Arg((2, 5), kind="distinct")])
add("sort", lambda tf, x: tf.sort(x, axis=0, direction="DESCENDING"), lambda x: -jnp.sort(-x, axis=0), [Arg((4, 3), kind="distinct")],
    label="descending")
add("argsort", lambda tf, x: tf.argsort(x), lambda x: jnp.argsort(x).astype(jnp.int32), [Arg((2, 5), kind="distinct")], grad=False)
_SEG = np.array([0, 0, 1, 3, 3, 3])
for _k, _jf in [("sum", jax.ops.segment_sum), ("max", jax.ops.segment_max), ("min", jax.ops.segment_min), ("prod", jax.ops.segment_prod)]:
    _kind = "distinct" if _k in ("max", "min") else "uniform"
    if _k in ("max", "min"):
        _ref = (lambda jf: lambda x: jnp.where(jnp.asarray([1, 1, 0, 1])[:, None] > 0, jf(x, _SEG, 4), 0.0))(_jf)
    else:
        _ref = (lambda jf: lambda x: jf(x, _SEG, 4))(_jf)
    _uref = (lambda jf: lambda x: jf(x, jnp.array([1, 0, 1, 2, 0, 2]), 3))(_jf)
    if _k == "prod":
        # JAX cannot differentiate segment_prod with repeated ids: a per-segment product instead.
        _ref = lambda x: jnp.stack([jnp.prod(x[np.nonzero(_SEG == s)[0]], axis=0) for s in range(4)])  # noqa: E731
        _uref = lambda x: jnp.stack([jnp.prod(x[np.nonzero(np.array([1, 0, 1, 2, 0, 2]) == s)[0]], axis=0) for s in range(3)])  # noqa: E731
    add(f"math.segment_{_k}", (lambda k: lambda tf, x: resolve(tf, f"math.segment_{k}")(x, _SEG))(_k), _ref,
        [Arg((6, 2), kind=_kind)])
    add(f"math.unsorted_segment_{_k}", (lambda k: lambda tf, x: resolve(tf, f"math.unsorted_segment_{k}")(x, [1, 0, 1, 2, 0, 2], 3))(_k),
        _uref, [Arg((6, 2), kind=_kind)])
add("math.segment_mean", lambda tf, x: tf.math.segment_mean(x, _SEG),
    lambda x: jnp.nan_to_num(jax.ops.segment_sum(x, _SEG, 4) / jnp.maximum(jax.ops.segment_sum(jnp.ones(6), _SEG, 4), 1)[:, None]),
    [Arg((6, 2))])
add("math.unsorted_segment_mean", lambda tf, x: tf.math.unsorted_segment_mean(x, [1, 0, 1, 2, 0, 2], 3),
    lambda x: jax.ops.segment_sum(x, jnp.array([1, 0, 1, 2, 0, 2]), 3) / 2.0, [Arg((6, 2))])
add("math.unsorted_segment_sqrt_n", lambda tf, x: tf.math.unsorted_segment_sqrt_n(x, [1, 0, 1, 2, 0, 2], 3),
    lambda x: jax.ops.segment_sum(x, jnp.array([1, 0, 1, 2, 0, 2]), 3) / jnp.sqrt(2.0), [Arg((6, 2))])


# ---- clipping, norms, misc math -------------------------------------------------------------------------

add("clip_by_value", lambda tf, x: tf.clip_by_value(x, -0.5, 1.0), lambda x: jnp.clip(x, -0.5, 1.0), [Arg((3, 4))])
add("clip_by_value", lambda tf, x, lo, hi: tf.clip_by_value(x, lo, hi), lambda x, lo, hi: jnp.minimum(jnp.maximum(x, lo), hi),
    [Arg((3, 4)), Arg((4,), -1.5, -0.5), Arg((), 0.5, 1.5)], label="tensor bounds")
add("clip_by_norm", lambda tf, x: tf.clip_by_norm(x, 1.0), lambda x: x / jnp.maximum(jnp.linalg.norm(x), 1.0), [Arg((2, 3))])
add("clip_by_norm", lambda tf, x: tf.clip_by_norm(x, 0.5, axes=[1]),
    lambda x: x * 0.5 / jnp.maximum(jnp.linalg.norm(x, axis=1, keepdims=True), 0.5), [Arg((3, 4))], label="axes=[1]")
add("clip_by_global_norm", lambda tf, a, b: tuple(tf.clip_by_global_norm([a, b], 1.0)[0]),
    lambda a, b: tuple(t / jnp.maximum(jnp.sqrt(jnp.sum(a * a) + jnp.sum(b * b)), 1.0) for t in (a, b)), [Arg((2, 2)), Arg((3,))])
add("linalg.global_norm", lambda tf, a, b: tf.linalg.global_norm([a, b]), lambda a, b: jnp.sqrt(jnp.sum(a * a) + jnp.sum(b * b)),
    [Arg((2, 2)), Arg((3,))])
add("add_n", lambda tf, a, b, c: tf.math.add_n([a, b, c]), lambda a, b, c: a + b + c, [Arg((2, 3))] * 3, covers=("math.add_n",))
add("math.l2_normalize", lambda tf, x: tf.math.l2_normalize(x, axis=1), lambda x: x / jnp.linalg.norm(x, axis=1, keepdims=True),
    [Arg((2, 3))], covers=("nn.l2_normalize", "linalg.l2_normalize"))
add("math.scalar_mul", lambda tf, x: tf.math.scalar_mul(3.0, x), lambda x: 3.0 * x, [Arg((2, 3))], covers=("scalar_mul",))
add("math.polyval", lambda tf, x: tf.math.polyval([1.0, -2.0, 3.0], x), lambda x: jnp.polyval(jnp.array([1.0, -2.0, 3.0]), x), [Arg((4,))])
add("norm", lambda tf, x: tf.norm(x), lambda x: jnp.linalg.norm(x), [Arg((2, 3))], covers=("linalg.norm",))
add("norm", lambda tf, x: tf.norm(x, ord=1, axis=1), lambda x: jnp.sum(jnp.abs(x), axis=1), [Arg((2, 3))], label="ord=1,axis=1")
add("norm", lambda tf, x: tf.norm(x, ord=np.inf, axis=0, keepdims=True), lambda x: jnp.max(jnp.abs(x), axis=0, keepdims=True),
    [Arg((3, 2), kind="distinct")], label="ord=inf")
add("norm", lambda tf, x: tf.norm(x, ord=3, axis=-1), lambda x: jnp.sum(jnp.abs(x) ** 3, axis=-1) ** (1 / 3), [Arg((2, 3))], label="ord=3")
add("norm", lambda tf, x: tf.norm(x, ord="fro", axis=[0, 1]), lambda x: jnp.linalg.norm(x, "fro"), [Arg((3, 2))], label="fro")
add("norm", lambda tf, x: tf.norm(x, ord=1, axis=[-2, -1]), lambda x: jnp.linalg.norm(x, 1), [Arg((3, 3), kind="distinct")], label="matrix ord=1")
add("norm", lambda tf, x: tf.norm(x, ord=2, axis=[-2, -1]), lambda x: jnp.linalg.norm(x, 2), [Arg((3, 2))], label="matrix ord=2",
    rtol=1e-4, atol=1e-4)


# ---- creation ------------------------------------------------------------------------------------------------

add("fill", lambda tf, v: tf.fill([2, 3], v), lambda v: jnp.full((2, 3), v), [Arg(())])
add("linspace", lambda tf, a, b: tf.linspace(a, b, 5), lambda a, b: jnp.linspace(a, b, 5), [Arg((), -1, 0), Arg((), 1, 2)],
    covers=())
add("linspace", lambda tf, a, b: tf.linspace(a, b, 4, axis=1), lambda a, b: jnp.linspace(a, b, 4, axis=1), [Arg((2,), -1, 0), Arg((2,), 1, 2)],
    label="batched")
add("one_hot", lambda tf, i: tf.one_hot(i, 4), lambda i: jax.nn.one_hot(i, 4), [Arg((3,), -1, 5, "int32", "int")], grad=False)
add("one_hot", lambda tf, i: tf.one_hot(i, 3, on_value=5, off_value=-1, axis=0),
    lambda i: jnp.where(jnp.arange(3)[:, None] == i[None, :], 5, -1).astype(jnp.int32), [Arg((4,), 0, 3, "int32", "int")], grad=False,
    label="on/off axis=0")
add("eye", lambda tf: tf.eye(2, 3, batch_shape=[2]), lambda: jnp.broadcast_to(jnp.eye(2, 3), (2, 2, 3)), [], grad=False, covers=("linalg.eye",))
add("range", lambda tf: tf.range(5, 0, -2), lambda: jnp.arange(5, 0, -2, dtype=jnp.int32), [], grad=False)
add("range", lambda tf: tf.range(0.0, 1.0, 0.25), lambda: jnp.arange(0.0, 1.0, 0.25, dtype=jnp.float32), [], grad=False, label="float")
add("zeros", lambda tf: tf.zeros([2, 3], tf.int32), lambda: jnp.zeros((2, 3), jnp.int32), [], grad=False)
add("ones", lambda tf: tf.ones([2]), lambda: jnp.ones(2), [], grad=False)
add("zeros_like", lambda tf, x: tf.zeros_like(x), jnp.zeros_like, [Arg((2, 3))], grad=False)
add("ones_like", lambda tf, x: tf.ones_like(x), jnp.ones_like, [Arg((2, 3))], grad=False)
add("cast", lambda tf, x: tf.cast(x, tf.float16), lambda x: x.astype(jnp.float16), [Arg((2, 3))], rtol=1e-3, atol=1e-3,
    covers=("dtypes.cast",))
add("cast", lambda tf, x: tf.cast(x, tf.int32), lambda x: x.astype(jnp.int32), [Arg((2, 3), -3, 3)], grad=False, label="to int32")
add("saturate_cast", lambda tf, x: tf.dtypes.saturate_cast(x, tf.uint8), lambda x: jnp.clip(x, 0, 255).astype(jnp.uint8),
    [Arg((5,), -300, 600)], grad=False, covers=("dtypes.saturate_cast",))
add("complex", lambda tf, a, b: tf.complex(a, b), lambda a, b: a + 1j * b, [Arg((3,)), Arg((3,))], covers=("dtypes.complex",))


# ---- shapes, joins, indexing -------------------------------------------------------------------------------------

add("reshape", lambda tf, x: tf.reshape(x, [3, -1]), lambda x: x.reshape(3, -1), [Arg((2, 3))])
add("transpose", lambda tf, x: tf.transpose(x, [2, 0, 1]), lambda x: jnp.transpose(x, (2, 0, 1)), [Arg((2, 3, 4))])
add("transpose", lambda tf, x: tf.transpose(x), lambda x: x.T, [Arg((2, 3))], label="default perm")
add("concat", lambda tf, a, b: tf.concat([a, b], axis=-1), lambda a, b: jnp.concatenate([a, b], -1), [Arg((2, 3)), Arg((2, 1))])
add("stack", lambda tf, a, b: tf.stack([a, b], axis=1), lambda a, b: jnp.stack([a, b], 1), [Arg((2, 3)), Arg((2, 3))])
add("unstack", lambda tf, x: tuple(tf.unstack(x, axis=1)), lambda x: tuple(jnp.moveaxis(x, 1, 0)), [Arg((2, 3))])
add("split", lambda tf, x: tuple(tf.split(x, 3, axis=1)), lambda x: tuple(jnp.split(x, 3, axis=1)), [Arg((2, 6))])
add("split", lambda tf, x: tuple(tf.split(x, [1, -1, 2], axis=0)), lambda x: tuple(jnp.split(x, [1, 3])), [Arg((5, 2))], label="sizes")
add("squeeze", lambda tf, x: tf.squeeze(x), jnp.squeeze, [Arg((1, 3, 1))])
add("squeeze", lambda tf, x: tf.squeeze(x, axis=[-1]), lambda x: jnp.squeeze(x, -1), [Arg((1, 3, 1))], label="axis")
add("expand_dims", lambda tf, x: tf.expand_dims(x, -1), lambda x: x[..., None], [Arg((2, 3))])
add("tile", lambda tf, x: tf.tile(x, [2, 3]), lambda x: jnp.tile(x, (2, 3)), [Arg((2, 2))])
add("broadcast_to", lambda tf, x: tf.broadcast_to(x, [4, 2, 3]), lambda x: jnp.broadcast_to(x, (4, 2, 3)), [Arg((2, 1))])
add("reverse", lambda tf, x: tf.reverse(x, [0, -1]), lambda x: jnp.flip(x, (0, 1)), [Arg((2, 3))])
add("slice", lambda tf, x: tf.slice(x, [0, 1], [2, -1]), lambda x: x[0:2, 1:], [Arg((3, 4))])
add("strided_slice", lambda tf, x: tf.strided_slice(x, [1, 0], [3, 4], [1, 2]), lambda x: x[1:3, 0:4:2], [Arg((3, 4))])
add("pad", lambda tf, x: tf.pad(x, [[1, 0], [2, 1]]), lambda x: jnp.pad(x, ((1, 0), (2, 1))), [Arg((2, 3))])
add("pad", lambda tf, x: tf.pad(x, [[1, 1], [2, 1]], mode="REFLECT"), lambda x: jnp.pad(x, ((1, 1), (2, 1)), mode="reflect"),
    [Arg((3, 4))], label="REFLECT")
add("pad", lambda tf, x: tf.pad(x, [[2, 2]], mode="SYMMETRIC"), lambda x: jnp.pad(x, ((2, 2),), mode="symmetric"), [Arg((3,))],
    label="SYMMETRIC")
add("pad", lambda tf, x: tf.pad(x, [[0, 1], [1, 0]], constant_values=3.0), lambda x: jnp.pad(x, ((0, 1), (1, 0)), constant_values=3.0),
    [Arg((2, 2))], label="constant_values")
add("roll", lambda tf, x: tf.roll(x, [1, -1], [0, 1]), lambda x: jnp.roll(x, (1, -1), (0, 1)), [Arg((3, 4))])
add("repeat", lambda tf, x: tf.repeat(x, [1, 2], axis=0), lambda x: jnp.repeat(x, jnp.array([1, 2]), axis=0, total_repeat_length=3),
    [Arg((2, 3))])
add("repeat", lambda tf, x: tf.repeat(x, 2), lambda x: jnp.repeat(x.reshape(-1), 2), [Arg((2, 2))], label="flat")
add("meshgrid", lambda tf, a, b: tuple(tf.meshgrid(a, b)), lambda a, b: tuple(jnp.meshgrid(a, b)), [Arg((2,)), Arg((3,))])
add("gather", lambda tf, x: tf.gather(x, [2, 0, 2]), lambda x: x[jnp.array([2, 0, 2])], [Arg((3, 2))])
add("gather", lambda tf, x: tf.gather(x, [[1, 0], [2, 2]], axis=1), lambda x: jnp.take(x, jnp.array([[1, 0], [2, 2]]), axis=1),
    [Arg((2, 3))], label="axis=1, 2-D indices")
add("gather", lambda tf, x: tf.gather(x, [[1], [0]], axis=1, batch_dims=1),
    lambda x: jnp.take_along_axis(x, jnp.array([[1], [0]]), axis=1), [Arg((2, 3))], label="batch_dims=1")
add("nn.embedding_lookup", lambda tf, x: tf.nn.embedding_lookup(x, [1, 1, 0]), lambda x: x[jnp.array([1, 1, 0])], [Arg((3, 2))])
add("gather_nd", lambda tf, x: tf.gather_nd(x, [[1, 0], [0, 2], [1, 0]]), lambda x: x[jnp.array([1, 0, 1]), jnp.array([0, 2, 0])],
    [Arg((2, 3))])
add("gather_nd", lambda tf, x: tf.gather_nd(x, [[1], [0]]), lambda x: x[jnp.array([1, 0])], [Arg((2, 3))], label="slices")
add("gather_nd", lambda tf, x: tf.gather_nd(x, [[1], [0]], batch_dims=1), lambda x: x[jnp.arange(2), jnp.array([1, 0])],
    [Arg((2, 3))], label="batch_dims=1")
add("scatter_nd", lambda tf, u: tf.scatter_nd([[1], [3], [1]], u, [4, 2]),
    lambda u: jnp.zeros((4, 2)).at[jnp.array([1, 3, 1])].add(u), [Arg((3, 2))])
add("tensor_scatter_nd_update", lambda tf, t, u: tf.tensor_scatter_nd_update(t, [[0], [2]], u),
    lambda t, u: t.at[jnp.array([0, 2])].set(u), [Arg((3, 2)), Arg((2, 2))])
add("tensor_scatter_nd_add", lambda tf, t, u: tf.tensor_scatter_nd_add(t, [[0, 1], [2, 0]], u),
    lambda t, u: t.at[jnp.array([0, 2]), jnp.array([1, 0])].add(u), [Arg((3, 2)), Arg((2,))])
add("tensor_scatter_nd_max", lambda tf, t, u: tf.tensor_scatter_nd_max(t, [[0], [2]], u),
    lambda t, u: t.at[jnp.array([0, 2])].max(u), [Arg((3, 2), kind="distinct"), Arg((2, 2), kind="distinct")])
add("tensor_scatter_nd_min", lambda tf, t, u: tf.tensor_scatter_nd_min(t, [[1]], u),
    lambda t, u: t.at[jnp.array([1])].min(u), [Arg((3, 2), kind="distinct"), Arg((1, 2), kind="distinct")])
add("tensor_scatter_nd_sub", lambda tf, t, u: tf.tensor_scatter_nd_sub(t, [[1]], u), lambda t, u: t.at[jnp.array([1])].add(-u),
    [Arg((3, 2)), Arg((1, 2))])
add("where", lambda tf, c, x, y: tf.where(c, x, y), jnp.where, [Arg((2, 3), kind="bool", dtype="bool"), Arg((2, 3)), Arg((3,))])
add("where", lambda tf, x: tf.where(x > 0, x, 0.5), lambda x: jnp.where(x > 0, x, 0.5), [Arg((2, 3))], label="scalar branch")
add("where", lambda tf, c: tf.where(c), lambda c: jnp.argwhere(c).astype(jnp.int32), [Arg((2, 3), kind="bool", dtype="bool")],
    grad=False, label="coordinates")
add("boolean_mask", lambda tf, x: tf.boolean_mask(x, [True, False, True]), lambda x: x[jnp.array([0, 2])], [Arg((3, 2))])
add("boolean_mask", lambda tf, x: tf.boolean_mask(x, [[True, False], [False, True], [True, True]], axis=1),
    lambda x: x.reshape(2, 6)[:, jnp.array([0, 3, 4, 5])],
    [Arg((2, 3, 2))], label="2-D mask axis=1")
add("shape", lambda tf, x: tf.shape(x), lambda x: jnp.array(x.shape, jnp.int32), [Arg((2, 3))], grad=False)
add("shape_n", lambda tf, x, y: tuple(tf.shape_n([x, y])), lambda x, y: (jnp.array(x.shape, jnp.int32), jnp.array(y.shape, jnp.int32)),
    [Arg((2, 3)), Arg((4,))], grad=False)
add("unique", lambda tf, x: tuple(tf.unique(x)), lambda x: _np_unique(x), [Arg((6,), 0, 3, "int32", "int")], grad=False)
add("size", lambda tf, x: tf.size(x), lambda x: jnp.array(x.size, jnp.int32), [Arg((2, 3))], grad=False)
add("rank", lambda tf, x: tf.rank(x), lambda x: jnp.array(x.ndim, jnp.int32), [Arg((2, 3))], grad=False)
add("sequence_mask", lambda tf: tf.sequence_mask([1, 3], 4), lambda: jnp.arange(4) < jnp.array([1, 3])[:, None], [], grad=False)
add("searchsorted", lambda tf: tf.searchsorted([1.0, 2.0, 3.0], [2.5, 2.0, 0.0]), lambda: jnp.array([2, 1, 0], jnp.int32), [], grad=False)
add("ensure_shape", lambda tf, x: tf.ensure_shape(x, [None, 3]), lambda x: x, [Arg((2, 3))])

# TF's __getitem__ (recorded as one strided-slice op)
for _lab, _k in [("int", (1,)), ("neg int", (-1, slice(None, None, 2))), ("slice step", (slice(None), slice(None, None, -2))),
                 ("ellipsis newaxis", (Ellipsis, None, 1)), ("newaxis mid", (0, None, slice(1, 3))), ("list key", [1, 2])]:
    add("__getitem__", (lambda k: lambda tf, x: x[k])(_k), (lambda k: lambda x: x[tuple(k) if isinstance(k, list) else k])(_k),
        [Arg((3, 4))], label=_lab)
add("__getitem__", lambda tf, x: x[tf.constant(1), 1:], lambda x: x[1, 1:], [Arg((3, 4))], label="tensor index")
_MASK = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, False]])
add("__getitem__", lambda tf, x: x[tf.constant(_MASK)], lambda x: x[np.nonzero(_MASK)], [Arg((3, 4))], label="bool mask")


# ---- linear algebra ------------------------------------------------------------------------------------------------

add("matmul", lambda tf, a, b: tf.matmul(a, b), jnp.matmul, [Arg((2, 3)), Arg((3, 4))], covers=("linalg.matmul", "__matmul__"))
add("matmul", lambda tf, a, b: tf.matmul(a, b, transpose_a=True, transpose_b=True), lambda a, b: jnp.swapaxes(a, -1, -2) @ jnp.swapaxes(b, -1, -2),
    [Arg((2, 3, 2)), Arg((4, 3))], label="transposes, batch")
add("matmul", lambda tf, a, b: tf.matmul(a, b, adjoint_a=True), lambda a, b: jnp.conj(a).T @ b,
    [Arg((2, 2), 0.3, 1, "complex64", "complex"), Arg((2, 3), 0.3, 1, "complex64", "complex")], label="adjoint complex")
add("linalg.matvec", lambda tf, a, b: tf.linalg.matvec(a, b), lambda a, b: a @ b, [Arg((2, 3)), Arg((3,))])
add("tensordot", lambda tf, a, b: tf.tensordot(a, b, axes=1), lambda a, b: jnp.tensordot(a, b, 1), [Arg((2, 3)), Arg((3, 2))],
    covers=("linalg.tensordot",))
add("tensordot", lambda tf, a, b: tf.tensordot(a, b, axes=[[0, 2], [1, 0]]), lambda a, b: jnp.tensordot(a, b, ((0, 2), (1, 0))),
    [Arg((2, 3, 4)), Arg((4, 2))], label="axes pairs")
add("tensordot", lambda tf, a, b: tf.tensordot(a, b, axes=0), lambda a, b: jnp.tensordot(a, b, 0), [Arg((2,)), Arg((3,))], label="outer")
add("einsum", lambda tf, a, b: tf.einsum("bij,jk->bik", a, b), lambda a, b: jnp.einsum("bij,jk->bik", a, b), [Arg((2, 2, 3)), Arg((3, 2))],
    covers=("linalg.einsum",))
add("einsum", lambda tf, a: tf.einsum("ii->", a), jnp.trace, [Arg((3, 3))], label="trace")
add("linalg.inv", lambda tf, a: tf.linalg.inv(a), jnp.linalg.inv, [Arg((3, 3), kind="spd")], rtol=1e-4, atol=1e-5)
add("linalg.det", lambda tf, a: tf.linalg.det(a), jnp.linalg.det, [Arg((2, 3, 3))], rtol=1e-4, atol=1e-5)
add("linalg.slogdet", lambda tf, a: tuple(tf.linalg.slogdet(a)), lambda a: tuple(jnp.linalg.slogdet(a)), [Arg((2, 3, 3))], rtol=1e-4,
    atol=1e-5)
add("linalg.logdet", lambda tf, a: tf.linalg.logdet(a), lambda a: jnp.linalg.slogdet(a)[1], [Arg((3, 3), kind="spd")], rtol=1e-4)
add("linalg.cholesky", lambda tf, a: tf.linalg.cholesky(a), lambda a: jnp.linalg.cholesky(a), [Arg((3, 3), kind="spd")], rtol=1e-4,
    atol=1e-5)
add("linalg.cholesky_solve", lambda tf, l, b: tf.linalg.cholesky_solve(l, b),
    lambda l, b: jax.scipy.linalg.cho_solve((jnp.tril(l), True), b), [Arg((3, 3), kind="spd"), Arg((3, 2))], rtol=1e-4, atol=1e-4)
add("linalg.solve", lambda tf, a, b: tf.linalg.solve(a, b), jnp.linalg.solve, [Arg((3, 3), kind="spd"), Arg((3, 2))], rtol=1e-4, atol=1e-5)
add("linalg.solve", lambda tf, a, b: tf.linalg.solve(a, b, adjoint=True), lambda a, b: jnp.linalg.solve(a.T, b),
    [Arg((3, 3), kind="spd"), Arg((3, 2))], rtol=1e-4, atol=1e-5, label="adjoint")
add("linalg.triangular_solve", lambda tf, a, b: tf.linalg.triangular_solve(a, b),
    lambda a, b: jax.scipy.linalg.solve_triangular(jnp.tril(a), b, lower=True), [Arg((3, 3), kind="spd"), Arg((3, 2))], rtol=1e-4, atol=1e-5)
add("linalg.triangular_solve", lambda tf, a, b: tf.linalg.triangular_solve(a, b, lower=False, adjoint=True),
    lambda a, b: jax.scipy.linalg.solve_triangular(jnp.triu(a).T, b, lower=True), [Arg((3, 3), kind="spd"), Arg((3, 2))],
    rtol=1e-4, atol=1e-5, label="upper adjoint")
add("linalg.eigh", lambda tf, a: (tf.linalg.eigh(a)[0], tf.linalg.eigh(a)[1] ** 2),
    lambda a: (jnp.linalg.eigh(tril_sym(a), symmetrize_input=False)[0], jnp.linalg.eigh(tril_sym(a), symmetrize_input=False)[1] ** 2),
    [Arg((3, 3), kind="distinct")], rtol=1e-3, atol=1e-4)
add("linalg.eigvalsh", lambda tf, a: tf.linalg.eigvalsh(a), lambda a: jnp.linalg.eigvalsh(tril_sym(a)), [Arg((3, 3), kind="distinct")],
    rtol=1e-3, atol=1e-4)
add("linalg.svd", lambda tf, a: tf.linalg.svd(a, compute_uv=False), lambda a: jnp.linalg.svd(a, compute_uv=False), [Arg((4, 3))],
    rtol=1e-4, atol=1e-5)
add("linalg.svd", lambda tf, a: (lambda s, u, v: (s, u * u, v * v))(*tf.linalg.svd(a)),
    lambda a: (lambda u, s, vh: (s, u * u, vh.T * vh.T))(*jnp.linalg.svd(a, full_matrices=False)), [Arg((4, 3))], rtol=1e-3, atol=1e-4,
    label="u, v")
add("linalg.qr", lambda tf, a: (lambda q, r: (q * q, r * r))(*tf.linalg.qr(a)), lambda a: (lambda q, r: (q * q, r * r))(*jnp.linalg.qr(a)),
    [Arg((4, 3))], rtol=1e-3, atol=1e-4)
add("linalg.diag", lambda tf, d: tf.linalg.diag(d), lambda d: jax.vmap(jnp.diag)(d), [Arg((2, 3))])
add("linalg.diag", lambda tf, d: tf.linalg.diag(d, k=1), lambda d: jnp.diag(d, 1), [Arg((3,))], label="k=1")
add("linalg.diag", lambda tf, d: tf.linalg.diag(d, k=-1, num_rows=4, num_cols=3), lambda d: jnp.diag(d, -1)[:, :3], [Arg((3,))],
    label="k=-1 rows/cols")
add("linalg.diag_part", lambda tf, x: tf.linalg.diag_part(x), lambda x: jnp.diagonal(x, axis1=-2, axis2=-1), [Arg((2, 3, 3))])
add("linalg.set_diag", lambda tf, x, d: tf.linalg.set_diag(x, d), lambda x, d: x.at[jnp.arange(3), jnp.arange(3)].set(d),
    [Arg((3, 3)), Arg((3,))])
add("linalg.trace", lambda tf, x: tf.linalg.trace(x), lambda x: jnp.trace(x, axis1=-2, axis2=-1), [Arg((2, 3, 3))])
add("linalg.matrix_transpose", lambda tf, x: tf.linalg.matrix_transpose(x), lambda x: jnp.swapaxes(x, -1, -2), [Arg((2, 3, 4))])
add("linalg.adjoint", lambda tf, x: tf.linalg.adjoint(x), lambda x: jnp.conj(x).T, [Arg((2, 3), 0.3, 1, "complex64", "complex")])
add("linalg.band_part", lambda tf, x: tf.linalg.band_part(x, 1, 0), lambda x: jnp.tril(x) - jnp.tril(x, -2), [Arg((3, 3))])
add("linalg.cross", lambda tf, a, b: tf.linalg.cross(a, b), jnp.cross, [Arg((2, 3)), Arg((2, 3))])
add("linalg.pinv", lambda tf, a: tf.linalg.pinv(a), jnp.linalg.pinv, [Arg((3, 2))], rtol=1e-3, atol=1e-4)
add("linalg.expm", lambda tf, a: tf.linalg.expm(a), jax.scipy.linalg.expm, [Arg((3, 3), -0.5, 0.5)], rtol=1e-4, atol=1e-5, slow=True)
add("linalg.lstsq", lambda tf, a, b: tf.linalg.lstsq(a, b), lambda a, b: jnp.linalg.lstsq(a, b)[0], [Arg((4, 2)), Arg((4, 1))],
    rtol=1e-3, atol=1e-4)


# ---- nn ---------------------------------------------------------------------------------------------------------------

add("nn.softmax", lambda tf, x: tf.nn.softmax(x), jax.nn.softmax, [Arg((2, 4))], covers=("math.softmax",))
add("nn.softmax", lambda tf, x: tf.nn.softmax(x, axis=0), lambda x: jax.nn.softmax(x, axis=0), [Arg((3, 2))], label="axis=0")
add("nn.log_softmax", lambda tf, x: tf.nn.log_softmax(x, axis=-1), jax.nn.log_softmax, [Arg((2, 4))], covers=("math.log_softmax",))
add("nn.sigmoid_cross_entropy_with_logits", lambda tf, z, x: tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x),
    lambda z, x: -(z * jax.nn.log_sigmoid(x) + (1 - z) * jax.nn.log_sigmoid(-x)), [Arg((2, 3), 0, 1), Arg((2, 3), -3, 3)])
add("nn.weighted_cross_entropy_with_logits", lambda tf, z, x: tf.nn.weighted_cross_entropy_with_logits(z, x, 2.0),
    lambda z, x: -(2.0 * z * jax.nn.log_sigmoid(x) + (1 - z) * jax.nn.log_sigmoid(-x)), [Arg((2, 3), 0, 1), Arg((2, 3), -3, 3)])
add("nn.softmax_cross_entropy_with_logits", lambda tf, z, x: tf.nn.softmax_cross_entropy_with_logits(z, x),
    lambda z, x: -jnp.sum(z * jax.nn.log_softmax(x), -1), [Arg((2, 4), kind="prob"), Arg((2, 4), -3, 3)])
add("nn.softmax_cross_entropy_with_logits", lambda tf, z, x: tf.nn.softmax_cross_entropy_with_logits(tf.transpose(z), x, axis=0),
    lambda z, x: -jnp.sum(z.T * jax.nn.log_softmax(x, axis=0), 0), [Arg((2, 4), kind="prob"), Arg((4, 2), -3, 3)], label="axis=0")
add("nn.sparse_softmax_cross_entropy_with_logits", lambda tf, x: tf.nn.sparse_softmax_cross_entropy_with_logits([2, 0, 3], x),
    lambda x: -jax.nn.log_softmax(x)[jnp.arange(3), jnp.array([2, 0, 3])], [Arg((3, 4), -3, 3)])
add("nn.l2_loss", lambda tf, x: tf.nn.l2_loss(x), lambda x: jnp.sum(x * x) / 2, [Arg((2, 3))])
add("nn.moments", lambda tf, x: tuple(tf.nn.moments(x, axes=[0, 2])), lambda x: (jnp.mean(x, (0, 2)), jnp.var(x, (0, 2))), [Arg((2, 3, 4))])
add("nn.moments", lambda tf, x: tuple(tf.nn.moments(x, axes=[1], keepdims=True)),
    lambda x: (jnp.mean(x, 1, keepdims=True), jnp.var(x, 1, keepdims=True)), [Arg((2, 3))], label="keepdims")
add("nn.bias_add", lambda tf, x, b: tf.nn.bias_add(x, b), lambda x, b: x + b, [Arg((2, 2, 3)), Arg((3,))])
add("nn.batch_normalization", lambda tf, x, m, v, o, s: tf.nn.batch_normalization(x, m, v, o, s, 1e-3),
    lambda x, m, v, o, s: (x - m) * s / jnp.sqrt(v + 1e-3) + o, [Arg((2, 3)), Arg((3,)), Arg((3,), 0.5, 2), Arg((3,)), Arg((3,))])


def _conv_ref(strides: Any, padding: Any, dil: Any = (1, 1), dn: tuple = ("NHWC", "HWIO", "NHWC")) -> Callable:
    return lambda x, w: lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=dil,
                                                 dimension_numbers=lax.conv_dimension_numbers(x.shape, w.shape, dn))


add("nn.conv2d", lambda tf, x, w: tf.nn.conv2d(x, w, 1, "SAME"), _conv_ref((1, 1), "SAME"), [Arg((2, 5, 5, 3)), Arg((3, 3, 3, 2))],
    rtol=1e-4, atol=1e-4)
add("nn.conv2d", lambda tf, x, w: tf.nn.conv2d(x, w, [1, 2, 2, 1], "VALID"), _conv_ref((2, 2), "VALID"),
    [Arg((1, 6, 5, 2)), Arg((2, 3, 2, 3))], rtol=1e-4, atol=1e-4, label="VALID stride 2")
add("nn.conv2d", lambda tf, x, w: tf.nn.conv2d(x, w, 2, "SAME"), _conv_ref((2, 2), "SAME"),
    [Arg((1, 6, 5, 2)), Arg((3, 3, 2, 3))], rtol=1e-4, atol=1e-4, label="SAME stride 2")
def _dilated_conv2d(tf: Any, x: Any, w: Any) -> Any:
    # TF's CPU Conv2DBackpropInput refuses dilations > 1 unless oneDNN's AVX-512 kernels run
    # ("Current CPU implementations do not yet support dilation rates larger than 1", seen on
    # an AVX2-only CI machine). Real TF then computes the same convolution as
    # atrous_conv2d (space_to_batch around an undilated conv; equal forward values), whose
    # gradient every CPU has; tapejax runs the conv2d call under test.
    if tf.__name__.startswith("tensorflow"):
        return tf.nn.atrous_conv2d(x, w, 2, "SAME")
    return tf.nn.conv2d(x, w, 1, "SAME", dilations=2)


add("nn.conv2d", _dilated_conv2d, _conv_ref((1, 1), "SAME", (2, 2)),
    [Arg((1, 6, 6, 2)), Arg((2, 2, 2, 3))], rtol=1e-4, atol=1e-4, label="dilations=2")
add("nn.conv2d", lambda tf, x, w: tf.nn.conv2d(x, w, 1, [[0, 0], [1, 0], [2, 1], [0, 0]]), _conv_ref((1, 1), ((1, 0), (2, 1))),
    [Arg((1, 4, 4, 2)), Arg((2, 3, 2, 2))], rtol=1e-4, atol=1e-4, label="explicit padding")
add("nn.conv3d", lambda tf, x, w: tf.nn.conv3d(x, w, [1, 1, 1, 1, 1], "SAME"),
    _conv_ref((1, 1, 1), "SAME", (1, 1, 1), ("NDHWC", "DHWIO", "NDHWC")), [Arg((1, 3, 4, 3, 2)), Arg((2, 2, 2, 2, 3))],
    rtol=1e-4, atol=1e-4)
add("nn.convolution", lambda tf, x, w: tf.nn.convolution(x, w, padding="SAME"), _conv_ref((1, 1), "SAME"),
    [Arg((1, 4, 4, 2)), Arg((3, 3, 2, 2))], rtol=1e-4, atol=1e-4)
add("nn.conv1d", lambda tf, x, w: tf.nn.conv1d(x, w, 1, "SAME"), _conv_ref((1,), "SAME", (1,), ("NWC", "WIO", "NWC")),
    [Arg((2, 6, 3)), Arg((3, 3, 2))], rtol=1e-4, atol=1e-4)
add("nn.depthwise_conv2d", lambda tf, x, w: tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME"),
    lambda x, w: lax.conv_general_dilated(x, w.reshape(3, 3, 1, 4), (1, 1), "SAME", feature_group_count=2,
                                          dimension_numbers=lax.conv_dimension_numbers(x.shape, (3, 3, 1, 4), ("NHWC", "HWIO", "NHWC"))),
    [Arg((1, 4, 4, 2)), Arg((3, 3, 2, 2))], rtol=1e-4, atol=1e-4)
add("nn.conv2d_transpose", lambda tf, x, w: tf.nn.conv2d_transpose(x, w, [1, 6, 6, 2], 2, "SAME"),
    lambda x, w: jax.vjp(lambda z: _conv_ref((2, 2), "SAME")(z, w), jnp.zeros((1, 6, 6, 2)))[1](x)[0],
    [Arg((1, 3, 3, 4)), Arg((3, 3, 2, 4))], rtol=1e-4, atol=1e-4)


def _pool_ref(op: str, k: int, s: int, pad: str) -> Callable:
    def f(x: Any) -> Any:
        win, st = (1, k, k, 1), (1, s, s, 1)
        if op == "max":
            return lax.reduce_window(x, -jnp.inf, lax.max, win, st, pad)
        tot = lax.reduce_window(x, 0.0, lax.add, win, st, pad)
        return tot / lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, win, st, pad)

    return f


for _op in ("max", "avg"):
    for _k, _s, _pad in [(2, 2, "VALID"), (3, 2, "SAME")]:
        add(f"nn.{_op}_pool2d", (lambda o, k, s, p: lambda tf, x: resolve(tf, f"nn.{o}_pool2d")(x, k, s, p))(_op, _k, _s, _pad),
            _pool_ref(_op, _k, _s, _pad), [Arg((2, 5, 5, 2), kind="distinct" if _op == "max" else "uniform")],
            label=f"k={_k},s={_s},{_pad}", covers=(f"nn.{_op}_pool",))
add("nn.max_pool1d", lambda tf, x: tf.nn.max_pool1d(x, 2, 2, "VALID"),
    lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 1), (1, 2, 1), "VALID"), [Arg((2, 6, 2), kind="distinct")])
add("nn.max_pool3d", lambda tf, x: tf.nn.max_pool3d(x, 2, 2, "VALID"),
    lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 2, 1), (1, 2, 2, 2, 1), "VALID"), [Arg((1, 4, 4, 4, 1), kind="distinct")])
add("nn.avg_pool3d", lambda tf, x: tf.nn.avg_pool3d(x, 2, 2, "VALID"),
    lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 2, 1), (1, 2, 2, 2, 1), "VALID") / 8, [Arg((1, 4, 4, 4, 1))])
add("nn.avg_pool1d", lambda tf, x: tf.nn.avg_pool1d(x, 2, 2, "VALID"),
    lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 1), (1, 2, 1), "VALID") / 2, [Arg((2, 6, 2))])


def covered() -> dict:
    """Public name -> "value and gradient" or "value; gradient None (as TF)", from the cases above."""
    out: dict = {}
    for c in CASES:
        status = "value and gradient" if c.grad else "value (no gradient, as TF)"
        for n in (c.name,) + tuple(c.covers):
            if out.get(n) != "value and gradient":
                out[n] = status
    return out
