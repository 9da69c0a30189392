"""``tf.debugging`` assertions and ``check_numerics`` (see ``tapejax.debugging``).

Checks run on concrete values and raise TF's exception types: a failed value
condition is ``InvalidArgumentError``, a static shape or rank mismatch is
``ValueError``, a wrong dtype is ``TypeError``. Inside a traced
``tapejax.function`` the values are unknown at trace time: a value check becomes
part of the program (a host callback under ``lax.cond``, run only when the check
fails), and the function raises TF's ``InvalidArgumentError`` when the call
returns, as TF's graph does when the call runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Tensor, bind
from ._dtypes import as_dtype, from_np
from ._machinery import FLOAT, INT, NUMERIC, PRIMS, _as_t, _concrete, _dt, _export, _is_t, check_dtype, same_dtype
from ._tensor import TensorShape

# Checks that failed inside compiled programs, by the trace token of the tapejax.function whose
# program ran them (``tracing[0].check_token``); the function takes them after each call.
_FAILURES: dict = {}
_FAIL_LOCK = threading.Lock()


def _check_traced(bad: Any, message: Callable[..., str], *data: Any) -> bool:
    """Inside a ``tapejax.function`` trace: make the program report ``message(*data)`` when
    ``bad`` (a traced bool scalar) holds at run time. False where no function is traced (a
    ``jax.jit`` of tapejax code): nobody would read the report, so there is no check."""
    tracing = _core.state.tracing
    token = getattr(tracing[0], "check_token", None) if tracing else None
    if token is None:
        return False

    def report(flag: Any, *vals: Any) -> None:
        # ``flag`` again: under vmap the cond becomes a select and this runs either way.
        if bool(np.any(np.asarray(flag))):
            text = message(*[np.asarray(v) for v in vals])
            with _FAIL_LOCK:
                _FAILURES.setdefault(token, []).append(text)

    def fire(flag: Any, *d: Any) -> None:
        jax.debug.callback(report, flag, *d)

    lax.cond(jnp.reshape(bad, ()), fire, lambda *d: None, bad, *data)
    return True


def take_failures(token: Any) -> list:
    """The messages of the checks that failed in the calls of the trace ``token`` (and forget them)."""
    with _FAIL_LOCK:
        return _FAILURES.pop(token, [])


def _tf_show(a: np.ndarray, n: int = 3) -> str:
    # TF's Assert prints the first ``summarize`` (3) values, floats in shortest form: [1 -2.5].
    def one(v: Any) -> str:
        if a.dtype.kind == "f":
            return np.format_float_positional(v, trim="-")
        return str(v.item() if hasattr(v, "item") else v)

    if not a.ndim:
        return one(a)
    flat = a.reshape(-1)[:n]
    return "[" + " ".join(one(v) for v in flat) + ("..." if a.size > n else "") + "]"


def check_numerics(tensor: Any, message: str, name: str | None = None) -> Tensor:
    """``tensor`` unchanged if it has no NaN or Inf; else InvalidArgumentError ``"<message> : Tensor had NaN values"``.

    The gradient passes through (TF checks the gradient too; tapejax does not).

    Example:
        >>> import tapejax as tf
        >>> tf.debugging.check_numerics(tf.constant([1.0]), "bad").numpy().tolist()
        [1.0]
    """
    t = _as_t(tensor)
    if _dt(t) not in FLOAT:
        check_dtype("CheckNumerics", t, FLOAT)
    c = _concrete(t)
    if c is not None:
        a = c.astype(np.float32) if c.dtype.kind == "V" or str(c.dtype) == "bfloat16" else c
        if np.isnan(a).any():
            raise errors.InvalidArgumentError(f"{message} : Tensor had NaN values [Op:CheckNumerics]")
        if np.isinf(a).any():
            raise errors.InvalidArgumentError(f"{message} : Tensor had Inf values [Op:CheckNumerics]")
    else:
        v = t._value
        has_nan, has_inf = jnp.any(jnp.isnan(v)), jnp.any(jnp.isinf(v))
        _check_traced(has_nan | has_inf,
                      lambda nan, inf: f"{message} : Tensor had {'NaN' if nan else 'Inf'} values",
                      has_nan, has_inf)
    return bind(PRIMS["identity"], t)


def assert_all_finite(x: Any, message: str, name: str | None = None) -> Tensor:
    """``check_numerics`` under its other name (``tf.debugging.assert_all_finite``)."""
    return check_numerics(x, message)


def _pair(x: Any, y: Any, opname: str) -> tuple:
    xt = _as_t(x)
    if _is_t(y):
        yt = y
    else:
        yt = _as_t(y, from_np(_dt(xt)))
    if _dt(xt) != _dt(yt):
        raise ValueError(f"y: Tensor conversion requested dtype {from_np(_dt(xt)).name} for Tensor with dtype {from_np(_dt(yt)).name}")
    return xt, yt


def _fail(message: Any, text: str) -> None:
    prefix = f"{message}\n" if message else ""
    raise errors.InvalidArgumentError(prefix + text)


def assert_near(x: Any, y: Any, rtol: Any = None, atol: Any = None, message: Any = None, summarize: Any = None,
                name: str | None = None) -> None:
    """Raise InvalidArgumentError unless ``|x - y| <= atol + rtol * |y|`` everywhere.

    The default tolerances are TF's: ``10 * eps`` of the dtype (1.19e-6 for float32).

    Example:
        >>> import tapejax as tf
        >>> tf.debugging.assert_near(tf.constant([1.0]), tf.constant([1.000001]))
    """
    xt, yt = _pair(x, y, "assert_near")
    d = _dt(xt)
    if not from_np(d).is_floating and not from_np(d).is_complex:
        raise ValueError(f"data type {d.type} not inexact")
    eps = float(np.finfo(np.float32 if str(d) == "bfloat16" else d).eps)
    rt = 10 * eps if rtol is None else float(np.asarray(_concrete(rtol) if _is_t(rtol) else rtol))
    at = 10 * eps if atol is None else float(np.asarray(_concrete(atol) if _is_t(atol) else atol))
    a, b = _concrete(xt), _concrete(yt)
    if a is None or b is None:
        return None
    diff = np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) - b)
    if not np.all(diff <= at + rt * np.abs(b)):
        i = int(np.argmax(np.asarray(diff).reshape(-1)))
        _fail(message, f"x and y not equal to tolerance rtol = {rt:g}, atol = {at:g}\n"
                       f"x (shape={a.shape} dtype={from_np(d).name}) = {a.reshape(-1)[:3].tolist()}, "
                       f"y = {b.reshape(-1)[:3].tolist()}; largest difference {float(np.asarray(diff).reshape(-1)[i]):g} at flat index {i}")
    return None


def _compare(opname: str, sym: str, fn: Any) -> Any:
    def check(x: Any, y: Any, message: Any = None, summarize: Any = None, name: str | None = None) -> None:
        xt, yt = same_dtype(opname, x, y)
        a, b = _concrete(xt), _concrete(yt)
        if a is None or b is None:
            n = 3 if summarize is None else int(summarize)
            xv, yv = xt._value, yt._value
            np.broadcast_shapes(xv.shape, yv.shape)
            _check_traced(~jnp.all(getattr(jnp, fn.__name__)(xv, yv)), lambda av, bv: (
                f"assertion failed: [{message or ''}] [Condition x {sym} y did not hold element-wise:] "
                f"[x = ] {_tf_show(av, n)} [y = ] {_tf_show(bv, n)}"), xv, yv)
            return None
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise errors.InvalidArgumentError(f"Incompatible shapes: {list(a.shape)} vs. {list(b.shape)} [Op:{opname}]") from None
        if not np.all(fn(a, b)):
            n = 3 if summarize is None else int(summarize)
            _fail(message, f"Condition x {sym} y did not hold.\nFirst {min(n, a.size)} elements of x:\n{a.reshape(-1)[:n]}\n"
                           f"First {min(n, b.size)} elements of y:\n{b.reshape(-1)[:n]}")
        return None

    check.__name__ = check.__qualname__ = f"assert_{opname}"
    check.__doc__ = (f"Raise InvalidArgumentError unless ``x {sym} y`` holds elementwise (with broadcasting).\n\n"
                     f"Example:\n    >>> import tapejax as tf\n    >>> tf.debugging.assert_{opname}(tf.constant(1), tf.constant(1))\n"
                     if sym in ("==", "<=", ">=") else
                     f"Raise InvalidArgumentError unless ``x {sym} y`` holds elementwise (with broadcasting).\n")
    return check


assert_equal = _compare("equal", "==", np.equal)
assert_none_equal = _compare("none_equal", "!=", np.not_equal)
assert_less = _compare("less", "<", np.less)
assert_less_equal = _compare("less_equal", "<=", np.less_equal)
assert_greater = _compare("greater", ">", np.greater)
assert_greater_equal = _compare("greater_equal", ">=", np.greater_equal)


def _sign_check(sym: str, fn: Any) -> Any:
    def check(x: Any, message: Any = None, summarize: Any = None, name: str | None = None) -> None:
        t = _as_t(x)
        a = _concrete(t)
        if a is None:
            n = 3 if summarize is None else int(summarize)
            _check_traced(~jnp.all(fn(t._value)), lambda av: (
                f"assertion failed: [{message or ''}] [Condition x {sym} 0 did not hold element-wise:] "
                f"[x = ] {_tf_show(av, n)}"), t._value)
            return None
        if not np.all(fn(a)):
            _fail(message, f"Condition x {sym} 0 did not hold element-wise:\nx (shape={a.shape} dtype={from_np(_dt(t)).name}) = \n"
                           f"{[str(v) for v in a.reshape(-1)[:3]]}")
        return None

    check.__doc__ = f"Raise InvalidArgumentError unless ``x {sym} 0`` everywhere."
    return check


assert_positive = _sign_check(">", lambda a: a > 0)
assert_negative = _sign_check("<", lambda a: a < 0)
assert_non_negative = _sign_check(">=", lambda a: a >= 0)
assert_non_positive = _sign_check("<=", lambda a: a <= 0)


def assert_rank(x: Any, rank: Any, message: Any = None, name: str | None = None) -> None:
    """Raise ValueError unless ``x`` has rank ``rank`` (a static check, as TF's)."""
    t = _as_t(x)
    r = int(np.asarray(_concrete(rank) if _is_t(rank) else rank))
    if t._aval.ndim != r:
        raise ValueError(f"{message + '.  ' if message else ''}Tensor  must have rank {r}.  Received rank {t._aval.ndim}, "
                         f"shape {TensorShape(t._aval.shape)}")


def assert_rank_at_least(x: Any, rank: Any, message: Any = None, name: str | None = None) -> None:
    """Raise ValueError unless ``x`` has rank >= ``rank``."""
    t = _as_t(x)
    r = int(np.asarray(_concrete(rank) if _is_t(rank) else rank))
    if t._aval.ndim < r:
        raise ValueError(f"{message + '.  ' if message else ''}Tensor  must have rank at least {r}.  Received rank "
                         f"{t._aval.ndim}, shape {TensorShape(t._aval.shape)}")


def assert_scalar(tensor: Any, message: Any = None, name: str | None = None) -> None:
    """Raise ValueError unless ``tensor`` is a scalar."""
    t = _as_t(tensor)
    if t._aval.ndim != 0:
        raise ValueError(f"{message + '  ' if message else ''}Expected scalar shape, saw shape: {TensorShape(t._aval.shape)}.")


def assert_type(tensor: Any, tf_type: Any, message: Any = None, name: str | None = None) -> None:
    """Raise TypeError unless ``tensor``'s dtype is ``tf_type``."""
    t = _as_t(tensor)
    want = as_dtype(tf_type)
    if from_np(_dt(t)) != want:
        raise TypeError(f"{message + ' ' if message else ''}tensor must be of type {want!r}; got {from_np(_dt(t))!r}")


def assert_integer(x: Any, message: Any = None, name: str | None = None) -> None:
    """Raise TypeError unless ``x`` has an integer dtype."""
    t = _as_t(x)
    if _dt(t) not in INT:
        raise TypeError(f"{message + ' ' if message else ''}Expected integer type, got {from_np(_dt(t))!r}")


def assert_shapes(shapes: Any, data: Any = None, summarize: Any = None, message: Any = None, name: str | None = None) -> None:
    """Check that dimension symbols (``"N"``) or sizes agree across tensors; ValueError otherwise.

    Example:
        >>> import tapejax as tf
        >>> tf.debugging.assert_shapes([(tf.ones((2, 3)), ("N", "Q")), (tf.ones((2,)), ("N",))])
    """
    items = list(shapes.items()) if isinstance(shapes, dict) else list(shapes)
    seen: dict = {}
    for t, spec in items:
        tt = _as_t(t)
        shp = tt._aval.shape
        spec = (spec,) if isinstance(spec, str | int) else tuple(spec)
        if spec and spec[0] == "...":
            spec, shp = spec[1:], shp[len(shp) - len(spec) + 1:]
        if len(spec) != len(shp):
            raise ValueError(f"Tensor shape={TensorShape(tt._aval.shape)} dtype={from_np(_dt(tt)).name} must have rank {len(spec)}. "
                             f"Received rank {len(tt._aval.shape)}, shape {TensorShape(tt._aval.shape)}")
        for i, (sym, n) in enumerate(zip(spec, shp)):
            if isinstance(sym, int):
                if sym != n:
                    raise ValueError(f"dimension {i} must have size {sym}. Received size {n}, shape {TensorShape(tt._aval.shape)}")
                continue
            if sym in seen and seen[sym][0] != n:
                ref = seen[sym][1]
                raise ValueError(f"Specified by tensor shape={TensorShape(ref._aval.shape)} dtype={from_np(_dt(ref)).name} dimension "
                                 f"{seen[sym][2]}.  Tensor shape={TensorShape(tt._aval.shape)} dtype={from_np(_dt(tt)).name} dimension "
                                 f"{i} must have size {seen[sym][0]}.  Received size {n}, shape {TensorShape(tt._aval.shape)}")
            seen.setdefault(sym, (n, tt, i))


def Assert(condition: Any, data: Any, summarize: Any = None, name: str | None = None) -> None:  # noqa: N802  (TF's name)
    """Raise InvalidArgumentError with ``data`` in the message when ``condition`` is False.

    Example:
        >>> import tapejax as tf
        >>> tf.debugging.Assert(tf.constant(True), ["never shown"])
    """
    c = _concrete(condition) if _is_t(condition) else np.asarray(condition)
    if c is None:
        n = 3 if summarize is None else int(summarize)
        shown = [d._value if _is_t(d) else d for d in data]
        arrays = [v for v in shown if isinstance(v, jax.Array)]
        texts = [None if isinstance(v, jax.Array) else str(v) for v in shown]

        def msg(*vals: Any) -> str:
            it = iter(vals)
            return "assertion failed: " + " ".join(f"[{t}]" if t is not None else _tf_show(next(it), n) for t in texts)

        _check_traced(~jnp.all(condition._value), msg, *arrays)
        return None
    if not bool(np.all(c)):
        shown_text = ", ".join(str(_concrete(d) if _is_t(d) else d) for d in data)
        raise errors.InvalidArgumentError(f"Expected '{bool(np.all(c))}' to be true. Summarized data: {shown_text}")
    return None


def is_numeric_tensor(tensor: Any) -> bool:
    """True for a tensor of a numeric (not bool) dtype."""
    return _is_t(tensor) and _dt(tensor) in NUMERIC


for _fn, _names in [
    (check_numerics, ("debugging.check_numerics",)),
    (assert_all_finite, ("debugging.assert_all_finite",)),
    (assert_near, ("debugging.assert_near",)),
    (assert_equal, ("debugging.assert_equal", "assert_equal")),
    (assert_none_equal, ("debugging.assert_none_equal",)),
    (assert_less, ("debugging.assert_less", "assert_less")),
    (assert_less_equal, ("debugging.assert_less_equal",)),
    (assert_greater, ("debugging.assert_greater", "assert_greater")),
    (assert_greater_equal, ("debugging.assert_greater_equal",)),
    (assert_positive, ("debugging.assert_positive",)),
    (assert_negative, ("debugging.assert_negative",)),
    (assert_non_negative, ("debugging.assert_non_negative",)),
    (assert_non_positive, ("debugging.assert_non_positive",)),
    (assert_rank, ("debugging.assert_rank", "assert_rank")),
    (assert_rank_at_least, ("debugging.assert_rank_at_least",)),
    (assert_scalar, ("debugging.assert_scalar",)),
    (assert_type, ("debugging.assert_type",)),
    (assert_integer, ("debugging.assert_integer",)),
    (assert_shapes, ("debugging.assert_shapes",)),
    (Assert, ("debugging.Assert", "Assert")),
    (is_numeric_tensor, ("debugging.is_numeric_tensor",)),
]:
    _export(_fn, *_names, jax_name="(eager check)")
