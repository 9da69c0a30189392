"""TF's gradient conventions where JAX's differ, as JAX-differentiable functions.

Every rule here is a ``jax.custom_jvp`` (never ``custom_vjp``), so it holds in
reverse mode (``GradientTape.gradient``), in forward mode (``jacobian``'s
forward direction, forward accumulators) and under ``vmap``/``jit`` alike.

The one new JAX primitive is ``mul_nonan(t, d)``: the product ``t * d`` that is
0 wherever ``t`` is 0, even when ``d`` is inf or nan. TF's gradient kernels for
Sqrt, Rsqrt and Reciprocal have exactly that behaviour (``dy == 0`` gives 0), which
is why ``tf.where(x > 0, tf.sqrt(x), 0)`` has gradient 0, not nan, at ``x = 0``:
the masked branch receives a zero cotangent, and 0 * inf stays 0. The primitive is
linear in each argument, so JAX can transpose it (reverse mode) and differentiate
it again (higher orders).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jex_core
from jax.interpreters import ad, batching, mlir

from .._engine import _host

__all__ = ["mul_nonan", "sqrt", "rsqrt", "reciprocal", "abs", "pow", "logsumexp"]


def _mul_nonan_impl(t: Any, d: Any) -> Any:
    prod = t * d
    return jnp.where(t == 0, jnp.zeros_like(prod), prod)


mul_nonan_p = jex_core.Primitive("tf_mul_nonan")
mul_nonan_p.def_impl(_mul_nonan_impl)
mul_nonan_p.def_abstract_eval(lambda t, d: jax.core.ShapedArray(jnp.broadcast_shapes(t.shape, d.shape), jnp.result_type(t, d)))
mlir.register_lowering(mul_nonan_p, mlir.lower_fun(_mul_nonan_impl, multiple_results=False))


def _mul_nonan_host(eqn: Any, t: np.ndarray, d: np.ndarray) -> np.ndarray:
    # The host evaluator's rule (``_engine._host``): the same IEEE product and select.
    prod = np.multiply(t, d)
    return np.where(t == 0, np.zeros_like(prod), prod)


_host.RULES[mul_nonan_p.name] = _mul_nonan_host


def mul_nonan(t: Any, d: Any) -> Any:
    """``t * d``, but exactly 0 where ``t == 0`` (TF's ``dy == 0 -> 0`` gradient kernels)."""
    t, d = jnp.asarray(t), jnp.asarray(d)
    return mul_nonan_p.bind(t, d)


def _mul_nonan_jvp(primals: tuple, tangents: tuple) -> tuple:
    t, d = primals
    dt, dd = tangents
    out = mul_nonan(t, d)
    # Bilinear: d(t*d) = dt*d + t*dd, each part keeping the zero-annihilation of t.
    parts = []
    if type(dt) is not ad.Zero:
        parts.append(mul_nonan(dt, d))
    if type(dd) is not ad.Zero:
        parts.append(mul_nonan(t, dd))
    if not parts:
        return out, ad.Zero.from_primal_value(out)  # type: ignore[attr-defined]  # JAX's internal class has it
    tan = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    return out, jnp.broadcast_to(tan, out.shape)


def _unbroadcast(x: Any, shape: tuple) -> Any:
    # The transpose of an implicit broadcast is a sum over the broadcast axes.
    if x.shape == tuple(shape):
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    return jnp.sum(x, axis=axes, keepdims=False).reshape(shape) if axes else x.reshape(shape)


def _mul_nonan_transpose(ct: Any, t: Any, d: Any) -> list:
    if type(ct) is ad.Zero:
        return [None, None]
    if ad.is_undefined_primal(t) and not ad.is_undefined_primal(d):
        # Linear in t: ct_t = ct * d, 0 where the cotangent is 0 (TF's dy == 0 rule).
        return [_unbroadcast(mul_nonan(ct, d), t.aval.shape), None]
    if ad.is_undefined_primal(d) and not ad.is_undefined_primal(t):
        # Linear in d: every element of d is multiplied by t, so the cotangent is ct * t,
        # still 0 where t is 0.
        return [None, _unbroadcast(mul_nonan(t, ct), d.aval.shape)]
    raise NotImplementedError("mul_nonan is bilinear: it cannot be transposed in both arguments at once")


def _mul_nonan_batch(args: tuple, dims: tuple) -> tuple:
    # Elementwise with broadcasting: move each batch axis to the front and give the
    # unbatched operand (and any lower-rank one) leading unit axes so the core
    # dims still line up from the right.
    t, d = args
    bt, bd = dims  # None means "not batched"
    if bt is not None:
        t = jnp.moveaxis(t, bt, 0)
    if bd is not None:
        d = jnp.moveaxis(d, bd, 0)
    nd = max(t.ndim - (bt is not None), d.ndim - (bd is not None))

    def lift(x: Any, mapped: bool) -> Any:
        core = x.ndim - mapped
        if mapped:
            return x.reshape(x.shape[:1] + (1,) * (nd - core) + x.shape[1:])
        return x.reshape((1,) * (nd - core + 1) + x.shape)

    return mul_nonan(lift(t, bt is not None), lift(d, bd is not None)), 0


ad.primitive_jvps[mul_nonan_p] = _mul_nonan_jvp
ad.primitive_transposes[mul_nonan_p] = _mul_nonan_transpose
batching.primitive_batchers[mul_nonan_p] = _mul_nonan_batch


# ---- elementwise ops whose TF gradient kernel is "0 where dy == 0" ----------------


@jax.custom_jvp
def sqrt(x: Any) -> Any:
    return jnp.sqrt(x)


@sqrt.defjvp
def _sqrt_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    # The rule calls ``sqrt`` itself (not jnp.sqrt): a higher-order derivative
    # then differentiates the primal output with TF's rule too, as TF's graph does.
    y = sqrt(x)
    # TF's SqrtGrad (dy * 0.5 / conj(y), 0 where dy is 0) is the vjp of this
    # holomorphic tangent rule; the replay adds TF's complex conjugation.
    return y, mul_nonan(t, 0.5 / y)


@jax.custom_jvp
def rsqrt(x: Any) -> Any:
    return lax.rsqrt(x)


@rsqrt.defjvp
def _rsqrt_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    y = rsqrt(x)
    # TF's RsqrtGrad: dy * -0.5 * conj(y)^3, with 0 where dy is 0.
    return y, mul_nonan(t, -0.5 * y * y * y)


@jax.custom_jvp
def reciprocal(x: Any) -> Any:
    x = jnp.asarray(x)
    # lax.div keeps integer reciprocals integral (TF's Reciprocal of an int32 truncates).
    return lax.div(jnp.ones_like(x), x)


@reciprocal.defjvp
def _reciprocal_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    y = reciprocal(x)
    # TF's ReciprocalGrad: -dy * conj(y)^2, with 0 where dy is 0.
    return y, mul_nonan(t, -(y * y))


@jax.custom_jvp
def _real_abs(x: Any) -> Any:
    return jnp.abs(x)


@_real_abs.defjvp
def _real_abs_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    # TF's AbsGrad: dy * sign(x), so 0 at 0 (JAX's abs has derivative 1 at 0).
    # The primal output is ``_real_abs`` again so that second order keeps the rule
    # (d/dx of abs(x) inside a first derivative is sign(x), 0 at 0, as in TF).
    return _real_abs(x), t * jnp.sign(x)


def abs(x: Any) -> Any:  # noqa: A001  (TF's name)
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return _real_abs(x)
    return jnp.abs(x)


@jax.custom_jvp
def multiply_no_nan(x: Any, y: Any) -> Any:
    prod = x * y
    return jnp.where(y == 0, jnp.zeros_like(prod), prod)


@multiply_no_nan.defjvp
def _multiply_no_nan_jvp(primals: tuple, tangents: tuple) -> tuple:
    x, y = primals
    tx, ty = tangents
    # TF's MulNoNan gradient: dx = mul_no_nan(dy, y) (0 where y == 0),
    # dy = mul_no_nan(x, dy) (0 where the upstream gradient is 0).
    tan = mul_nonan(y, tx) + mul_nonan(ty, x)
    return multiply_no_nan(x, y), jnp.broadcast_to(tan, jnp.broadcast_shapes(jnp.shape(x), jnp.shape(y)))


# ---- pow: TF's formula, not JAX's --------------------------------------------------


@jax.custom_jvp
def pow(x: Any, y: Any) -> Any:  # noqa: A001  (TF's name)
    return jnp.power(x, y)


@functools.partial(pow.defjvp, symbolic_zeros=True)
def _pow_jvp(primals: tuple, tangents: tuple) -> tuple:
    x, y = (jnp.asarray(v) for v in primals)
    tx, ty = tangents
    z = pow(x, y)
    # TF's _PowGrad: dz/dx = y * x^(y-1) (so 0^0 gives nan, as in TF; JAX gives 0),
    # dz/dy = z * log(x) where x > 0 and 0 elsewhere (TF masks negative bases and 0;
    # for complex x it masks x == 0 only). Each is built only for a tangent that is not
    # zero: an integer exponent's log term, never read, was traced (and linearized again)
    # at every order of a nested gradient.
    tan = None
    if not _no_tangent(tx):
        yf = y.astype(z.dtype) if not jnp.iscomplexobj(y) or jnp.iscomplexobj(z) else y
        tan = tx * (yf * pow(x, yf - jnp.ones_like(yf)))
    if not _no_tangent(ty):
        pos = x != 0 if jnp.iscomplexobj(x) else x > 0
        safe_x = jnp.where(pos, x, jnp.ones_like(x))
        dy = z * jnp.where(pos, jnp.log(safe_x), jnp.zeros_like(x))
        tan = ty * dy if tan is None else tan + ty * dy
    if tan is None:
        return z, jnp.zeros(z.shape, z.dtype)
    return z, jnp.broadcast_to(tan, z.shape).astype(z.dtype)


def _no_tangent(t: Any) -> bool:
    # A symbolic zero, or the float0 tangent of an integer input (an int exponent).
    return type(t) in _ZEROS or getattr(t, "dtype", None) == jax.dtypes.float0


_ZEROS = (ad.Zero, jax.custom_derivatives.SymbolicZero)


# ---- reduce_logsumexp: TF's formula ------------------------------------------------


def logsumexp(x: Any, axis: Any, keepdims: bool) -> Any:
    """TF's ``reduce_logsumexp``: the max is a constant, and a non-finite max is replaced by 0.

    That is why TF's gradient at an all ``-inf`` input is nan (JAX's logsumexp gives 0).
    """
    raw_max = jnp.max(x, axis=axis, keepdims=True)
    my_max = lax.stop_gradient(jnp.where(jnp.isfinite(raw_max), raw_max, jnp.zeros_like(raw_max)))
    s = jnp.sum(jnp.exp(x - my_max), axis=axis, keepdims=True)
    out = jnp.log(s) + my_max
    if not keepdims:
        out = jnp.squeeze(out, axis=tuple(range(x.ndim)) if axis is None else axis)
    return out
