"""A jaxpr evaluated on the host with NumPy: a kernel's first calls without an XLA compile.

XLA:CPU spends 10-30 ms lowering and compiling even a one-op program, and a new tape's
first gradient compiles one program per distinct op signature and pullback: most of its
time (``compat_docs/performance.md``). NumPy runs the same jaxpr in about ten
microseconds. So a kernel signature's first calls are evaluated here and its compile
waits until the host's extra time could have paid for it (``_kernels.host_calls``): a
long loop reaches the compiled kernel, and code run a few hundred times never compiles.

Only what NumPy computes as XLA:CPU does is evaluated; anything else raises
:class:`Unsupported` and the caller compiles as before:

- dtypes float32, float64, int32, int64, uint32 and bool, on one CPU device;
- arithmetic that IEEE rounds exactly (``+ - * /``, ``sqrt``, comparisons, selects, data
  movement, conversions between floats) agrees bit for bit. XLA's own conventions are
  kept where NumPy's differ: ``max``/``min`` of a signed zero pair, ``sign(-0.0)``,
  ``integer_pow`` by repeated squaring, truncating float-to-int conversions (an
  out-of-range or NaN value is not evaluated);
- XLA:CPU runs with subnormals flushed to zero (inputs and results): a subnormal float
  anywhere in the evaluation (an argument, a constant or a result) is not evaluated;
- transcendental functions, reductions and matmuls agree to a few ulp (NumPy's libm and
  BLAS against XLA's approximations and summation order): the same freedom XLA's fast
  and full pipelines already have between a kernel's first and later calls.

Floating-point warnings are silenced: XLA raises none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jax.extend.core import ClosedJaxpr, DropVar, Jaxpr, Literal

__all__ = ["Unsupported", "Program", "evaluate", "RULES"]


class Unsupported(Exception):
    """The jaxpr holds something this evaluator does not reproduce exactly: compile it."""


_DTYPES = frozenset(np.dtype(d) for d in ("float32", "float64", "int32", "int64", "uint32", "bool"))
_TINY = {np.dtype(np.float32): np.finfo(np.float32).tiny, np.dtype(np.float64): np.finfo(np.float64).tiny}


def _errstate_calls() -> tuple[Callable[[], Any], Callable[[Any], None]]:
    # Floating-point warnings off while a program runs, as ``np.errstate(all="ignore")``
    # but through the context variable it sets (NumPy 2): entering an ``errstate`` costs
    # about 0.9 us a call, a sizeable part of a one-op program's 5.
    try:
        import importlib

        uc: Any = importlib.import_module("numpy._core._ufunc_config")
        var, quiet = uc._extobj_contextvar, uc._make_extobj(all="ignore")
        var.reset(var.set(quiet))
    except Exception:  # noqa: BLE001 - another NumPy: its public context manager
        def enter() -> Any:
            cm = np.errstate(all="ignore")
            cm.__enter__()
            return cm

        return enter, lambda cm: cm.__exit__(None, None, None)
    return (lambda: var.set(quiet)), var.reset


_quiet, _loud = _errstate_calls()


def _check(x: np.ndarray) -> None:
    # The values XLA:CPU would see differently: a subnormal (flushed to zero there).
    tiny = _TINY.get(x.dtype)
    if tiny is not None:
        if x.ndim == 0:  # (a scalar: one Python comparison instead of three NumPy calls)
            v = abs(float(x))
            if 0.0 < v < tiny:
                raise Unsupported("subnormal")
            return
        a = np.abs(x)
        small = np.count_nonzero(a < tiny)
        # (zeros are common and subnormals rare: the second count only when the first finds any)
        if small and small != np.count_nonzero(x == 0):
            raise Unsupported("subnormal")


def _float(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "f":
        raise Unsupported("not a float")
    return x


def _zero_signs(r: np.ndarray, a: np.ndarray, b: np.ndarray, both: bool) -> np.ndarray:
    # XLA's max of (+0, -0) is +0 in either order and its min is -0; NumPy returns an
    # argument by position. ``both``: the result is -0 only when both zeros are negative.
    if r.dtype.kind != "f":
        return r
    z = (a == 0) & (b == 0)
    if not np.any(z):
        return r
    sa, sb = np.signbit(a), np.signbit(b)
    neg = (sa & sb) if both else (sa | sb)
    return np.where(z, np.where(neg, -0.0, 0.0).astype(r.dtype), r)


def _max(e: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _zero_signs(np.maximum(a, b), a, b, both=True)


def _min(e: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _zero_signs(np.minimum(a, b), a, b, both=False)


def _sign(e: Any, x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return np.where(x == 0, x, np.sign(x))  # (XLA keeps a zero's sign; NaN stays NaN in both)
    return np.sign(x)


def _div(e: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.true_divide(_float(a), b)


def _rem(e: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.fmod(_float(a), b)  # C's fmod, as XLA's remainder on floats


def _integer_pow(e: Any, x: np.ndarray) -> np.ndarray:
    # XLA multiplies by repeated squaring (lax's lowering), so the roundings are those.
    y = e.params["y"]
    if y == 0:
        return np.ones_like(x)
    n, acc, base = abs(y), None, x
    while n:
        if n & 1:
            acc = base if acc is None else acc * base
        n >>= 1
        if n:
            base = base * base
    assert acc is not None
    if y < 0:
        return np.true_divide(np.ones_like(_float(acc)), acc)
    return acc


def _pow(e: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # An integer exponent is converted to the base's type first, as lax's lowering does.
    return _POW(e, x, y.astype(x.dtype))


def _convert(e: Any, x: np.ndarray) -> np.ndarray:
    to = np.dtype(e.params["new_dtype"])
    if to not in _DTYPES:
        raise Unsupported(to)
    if x.dtype.kind == "f" and to.kind in "iu":
        # Truncation toward zero where the value fits; XLA's answer for NaN or an
        # out-of-range value is its own, so those compile.
        info = np.iinfo(to)
        if not np.all(np.isfinite(x)) or np.any(x >= float(info.max) + 1) or np.any(x <= float(info.min) - 1):
            raise Unsupported("float to int out of range")
        return np.trunc(x).astype(to)
    if x.dtype.kind == "f" and to == np.bool_:
        return x != 0
    return x.astype(to)


def _broadcast_in_dim(e: Any, x: np.ndarray, *dyn: np.ndarray) -> np.ndarray:
    if dyn:
        raise Unsupported("dynamic shape")
    shape, dims = e.params["shape"], e.params["broadcast_dimensions"]
    s = [1] * len(shape)
    for i, d in enumerate(dims):
        s[d] = x.shape[i]
    return np.broadcast_to(x.reshape(s), shape)


def _reshape(e: Any, x: np.ndarray, *dyn: np.ndarray) -> np.ndarray:
    if dyn or e.params.get("dimensions") is not None:
        raise Unsupported("reshape with dimensions")
    return x.reshape(e.params["new_sizes"])


def _reduce(fn: Callable) -> Callable:
    def rule(e: Any, x: np.ndarray) -> np.ndarray:
        return fn(x, axis=tuple(e.params["axes"]))

    return rule


def _reduce_typed(fn: Callable) -> Callable:
    # NumPy widens an int32 sum or product to int64; XLA keeps the operand's type.
    def rule(e: Any, x: np.ndarray) -> np.ndarray:
        return fn(x, axis=tuple(e.params["axes"]), dtype=x.dtype)

    return rule


def _reduce_extreme(fn: Callable) -> Callable:
    def rule(e: Any, x: np.ndarray) -> np.ndarray:
        axes = tuple(e.params["axes"])
        if x.dtype.kind == "f":
            z = np.signbit(x[x == 0])
            if z.size and z.any() != z.all():
                raise Unsupported("both signed zeros in a max/min reduction")  # (the order decides)
        return fn(x, axis=axes)

    return rule


def _dot_general(e: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    (ca, cb), (ba, bb) = e.params["dimension_numbers"]
    pref = e.params.get("preferred_element_type")
    if a.dtype != b.dtype or (pref is not None and np.dtype(pref) != a.dtype) or a.dtype == np.bool_:
        raise Unsupported("mixed-type dot")
    fa = [d for d in range(a.ndim) if d not in ca and d not in ba]
    fb = [d for d in range(b.ndim) if d not in cb and d not in bb]
    # (batch, free, contracting) @ (batch, contracting, free): BLAS's matmul, in order.
    at = a.transpose([*ba, *fa, *ca])
    bt = b.transpose([*bb, *cb, *fb])
    nb = [a.shape[d] for d in ba]
    m = int(np.prod([a.shape[d] for d in fa], dtype=np.int64))
    k = int(np.prod([a.shape[d] for d in ca], dtype=np.int64))
    n = int(np.prod([b.shape[d] for d in fb], dtype=np.int64))
    r = np.matmul(at.reshape([*nb, m, k]), bt.reshape([*nb, k, n]))
    return r.reshape([*nb, *(a.shape[d] for d in fa), *(b.shape[d] for d in fb)])


def _clamp(e: Any, lo: np.ndarray, x: np.ndarray, hi: np.ndarray) -> np.ndarray:
    # XLA's clamp is max then min, NaN-propagating, with its signed-zero conventions.
    return _min(e, _max(e, x, lo), hi)


def _arg_extreme(fn: Callable) -> Callable:
    # The first index of the extreme value, a NaN counting as the extreme (both agree).
    def rule(e: Any, x: np.ndarray) -> np.ndarray:
        (axis,) = e.params["axes"]
        return fn(x, axis=axis).astype(np.dtype(e.params["index_dtype"]))

    return rule


def _select_n(e: Any, which: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    return np.choose(which, cases)


def _slice(e: Any, x: np.ndarray) -> np.ndarray:
    st = e.params["strides"] or (1,) * x.ndim
    return x[tuple(slice(s, stop, k) for s, stop, k in zip(e.params["start_indices"], e.params["limit_indices"], st))]


def _starts(x_shape: Sequence[int], sizes: Sequence[int], idx: Sequence[np.ndarray]) -> list[int]:
    # XLA clamps a dynamic start so the window stays inside the operand.
    return [min(max(int(i), 0), d - s) for i, d, s in zip(idx, x_shape, sizes)]


def _dynamic_slice(e: Any, x: np.ndarray, *idx: np.ndarray) -> np.ndarray:
    sizes = e.params["slice_sizes"]
    if len(idx) != x.ndim:
        raise Unsupported("dynamic slice sizes")
    st = _starts(x.shape, sizes, idx)
    return x[tuple(slice(s, s + n) for s, n in zip(st, sizes))]


def _dynamic_update_slice(e: Any, x: np.ndarray, u: np.ndarray, *idx: np.ndarray) -> np.ndarray:
    st = _starts(x.shape, u.shape, idx)
    r = np.array(x, copy=True)
    r[tuple(slice(s, s + n) for s, n in zip(st, u.shape))] = u
    return r


def _iota(e: Any) -> np.ndarray:
    p = e.params
    shape, dim = p["shape"], p["dimension"]
    s = [1] * len(shape)
    s[dim] = shape[dim]
    return np.broadcast_to(np.arange(shape[dim], dtype=np.dtype(p["dtype"])).reshape(s), shape)


def _pad(e: Any, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    cfg = e.params["padding_config"]
    if any(lo < 0 or hi < 0 or inner != 0 for lo, hi, inner in cfg):
        raise Unsupported("negative or interior padding")
    return np.pad(x, [(lo, hi) for lo, hi, _ in cfg], constant_values=v)


def _split(e: Any, x: np.ndarray) -> list[np.ndarray]:
    cuts = np.cumsum(e.params["sizes"])[:-1]
    return np.split(x, cuts, axis=e.params["axis"])


def _ew(fn: Callable) -> Callable:
    return lambda e, *xs: fn(*xs)


def _ew_float(fn: Callable) -> Callable:
    return lambda e, *xs: fn(*(_float(x) for x in xs))


def _libm(fn: Callable) -> Callable:
    # float32 through float64, rounded once: the correctly rounded value but in rare
    # double-rounding cases, which is what accurate float32 implementations (XLA's
    # usually, TF's) return; NumPy's own float32 loops are off by an ulp more often
    # (``exp(1.0)``).
    def rule(e: Any, *xs: np.ndarray) -> np.ndarray:
        x0 = _float(xs[0])
        if x0.dtype == np.float32:
            return fn(*(x.astype(np.float64) for x in xs)).astype(np.float32)
        return fn(*xs)

    return rule


_POW = _libm(np.power)

RULES: dict[str, Callable[..., Any]] = {
    # exact
    "add": _ew(np.add), "sub": _ew(np.subtract), "mul": _ew(np.multiply), "div": _div,
    "neg": _ew(np.negative), "abs": _ew(np.abs), "sign": _sign, "max": _max, "min": _min,
    "sqrt": _ew_float(np.sqrt), "square": _ew(np.square), "floor": _ew_float(np.floor),
    "ceil": _ew_float(np.ceil), "rem": _rem, "integer_pow": _integer_pow,
    "eq": _ew(np.equal), "ne": _ew(np.not_equal), "lt": _ew(np.less), "le": _ew(np.less_equal),
    "gt": _ew(np.greater), "ge": _ew(np.greater_equal), "is_finite": _ew_float(np.isfinite),
    "and": _ew(np.bitwise_and), "or": _ew(np.bitwise_or), "xor": _ew(np.bitwise_xor),
    "not": _ew(np.invert), "select_n": _select_n, "convert_element_type": _convert,
    "copy": _ew(np.copy), "copy_p": _ew(np.copy), "stop_gradient": lambda e, x: x,
    "add_any": _ew(np.add), "clamp": _clamp,
    "argmax": _arg_extreme(np.argmax), "argmin": _arg_extreme(np.argmin),
    # data movement
    "broadcast_in_dim": _broadcast_in_dim, "reshape": _reshape,
    "squeeze": lambda e, x: np.squeeze(x, axis=tuple(e.params["dimensions"])),
    "expand_dims": lambda e, x: np.expand_dims(x, tuple(e.params["dimensions"])),
    "transpose": lambda e, x: np.transpose(x, e.params["permutation"]),
    "rev": lambda e, x: np.flip(x, tuple(e.params["dimensions"])),
    "concatenate": lambda e, *xs: np.concatenate(xs, axis=e.params["dimension"]),
    "stack": lambda e, *xs: np.stack(xs, axis=e.params["axis"]),
    "split": _split, "slice": _slice, "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice, "iota": _iota, "pad": _pad,
    # to a few ulp
    "exp": _libm(np.exp), "exp2": _libm(np.exp2), "log": _libm(np.log),
    "log1p": _libm(np.log1p), "expm1": _libm(np.expm1), "sin": _libm(np.sin),
    "cos": _libm(np.cos), "tan": _libm(np.tan), "tanh": _libm(np.tanh),
    "sinh": _libm(np.sinh), "cosh": _libm(np.cosh), "asin": _libm(np.arcsin),
    "acos": _libm(np.arccos), "atan": _libm(np.arctan), "atan2": _libm(np.arctan2),
    "asinh": _libm(np.arcsinh), "acosh": _libm(np.arccosh), "atanh": _libm(np.arctanh),
    "cbrt": _libm(np.cbrt), "pow": _pow,
    "rsqrt": _libm(lambda x: 1.0 / np.sqrt(x)),
    "logistic": _libm(lambda x: 1.0 / (1.0 + np.exp(-x))),
    "reduce_sum": _reduce_typed(np.sum), "reduce_prod": _reduce_typed(np.prod),
    "reduce_max": _reduce_extreme(np.max), "reduce_min": _reduce_extreme(np.min),
    "reduce_and": _reduce(np.all), "reduce_or": _reduce(np.any),
    "dot_general": _dot_general,
}
_MULTI = frozenset({"split"})
# Calls whose body is inlined into the program (the parameter holding it).
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr"}
# Results that cannot be subnormal when no input is: not checked.
_NO_NEW_SUBNORMAL = frozenset({
    "neg", "abs", "sign", "max", "min", "floor", "ceil", "eq", "ne", "lt", "le", "gt", "ge",
    "is_finite", "and", "or", "xor", "not", "select_n", "copy", "copy_p", "stop_gradient", "clamp",
    "argmax", "argmin", "broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "rev", "concatenate", "stack", "split",
    "slice", "dynamic_slice", "dynamic_update_slice", "iota", "pad", "reduce_max", "reduce_min",
    "reduce_and", "reduce_or",
    # Functions whose value at a normal input is never below the smallest normal: near 0 they
    # are about their argument (sin, tan, tanh, sqrt, atan, log1p, ...) or at least 1 (cosh),
    # and where they cross 0 away from it (sin and tan near k*pi, cos near pi/2 + k*pi, log near
    # 1, acos near 1) the nearest floats keep them above 1e-20, far above the smallest normal
    # (1.2e-38 in float32). (exp, logistic, pow and atan2 can underflow: checked.) A check
    # costs about 1.3 us, a sixth of a one-op program's run.
    "sin", "cos", "tan", "tanh", "sqrt", "rsqrt", "cbrt", "atan", "asin", "acos", "asinh", "atanh",
    "sinh", "cosh", "log", "log1p", "expm1",
})


def _value(x: Any, dtype: Any = None) -> np.ndarray:
    x = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    if x.dtype not in _DTYPES:
        raise Unsupported(x.dtype)
    _check(x)
    return x


def _type(v: Any) -> tuple[np.dtype, tuple]:
    aval: Any = v.aval
    dt = np.dtype(aval.dtype)
    if dt not in _DTYPES:
        raise Unsupported(dt)
    return dt, tuple(aval.shape)


class Program:
    """A closed jaxpr flattened for NumPy: calls inlined, each equation a rule reading and
    writing numbered slots (the arguments first, then constants and literals). Built once
    per kernel signature; :meth:`run` evaluates it.

    The flat code is cut to what the outputs read (a pullback traced by ``jax.vjp``
    recomputes its primal, which XLA would drop), and conversions to a value's own type are
    not run. (Writing each program out as straight-line Python was tried: it saved under a
    microsecond a call and cost 200-400 us a program to compile, more than a signature's
    host calls save in most first gradients.)"""

    __slots__ = ("n_args", "arg_types", "init", "code", "outs")

    def __init__(self, jaxpr: ClosedJaxpr) -> None:
        j = jaxpr.jaxpr
        self.n_args = len(j.invars)
        self.arg_types = []
        for v in j.invars:
            self.arg_types.append(_type(v))
        self.init: list[Any] = [None] * self.n_args
        self.code: list[tuple] = []
        consts = [self._slot_for(_value(c)) for c in jaxpr.consts]
        self.outs = self._emit(j, list(range(self.n_args)), consts)
        self._prune()

    def _slot_for(self, value: Any) -> int:
        self.init.append(value)
        return len(self.init) - 1

    def _emit(self, j: Jaxpr, args: list[int], consts: list[int]) -> list[int]:
        local: dict[Any, int] = dict(zip(j.constvars, consts))
        local.update(zip(j.invars, args))

        def slot(v: Any) -> int:
            if type(v) is Literal:
                return self._slot_for(_value(v.val, _type(v)[0]))
            return local[v]

        for e in j.eqns:
            name = e.primitive.name
            ins = [slot(v) for v in e.invars]
            key = _CALLS.get(name)
            if key is not None:
                sub = e.params[key]
                if not isinstance(sub, ClosedJaxpr):
                    raise Unsupported("open sub-jaxpr")
                outs = self._emit(sub.jaxpr, ins, [self._slot_for(_value(c)) for c in sub.consts])
                local.update((v, o) for v, o in zip(e.outvars, outs) if type(v) is not DropVar)
                continue
            rule = RULES.get(name)
            if rule is None:
                raise Unsupported(name)
            if _same_value(e):
                # (a conversion to the value's own dtype, a weak type made strong: the slot
                # is read as it is; values here are never written in place)
                local[e.outvars[0]] = ins[0]
                continue
            outs, types = [], []
            for v in e.outvars:
                types.append(_type(v))
                outs.append(self._slot_for(None))
                if type(v) is not DropVar:
                    local[v] = outs[-1]
            # (checked: a float result of a rule that can make a subnormal from normal inputs)
            check = name not in _NO_NEW_SUBNORMAL and any(dt in _TINY for dt, _ in types)
            self.code.append((rule, e, tuple(ins), outs, types, name in _MULTI, check))
        return [slot(v) for v in j.outvars]

    def _prune(self) -> None:
        # Equations none of whose results an output reads (no rule has an effect).
        live = set(self.outs)
        kept = []
        for ins_ in reversed(self.code):
            if any(o in live for o in ins_[3]):
                live.update(ins_[2])
                kept.append(ins_)
        self.code = kept[::-1]

    def run(self, args: Sequence[Any]) -> list[np.ndarray]:
        """The outputs on ``args`` (arrays or Python scalars, one per argument), or
        :class:`Unsupported` when a value here would differ from XLA:CPU's."""
        if len(args) != self.n_args:
            raise Unsupported("argument count")
        xs = []
        for a, (dt, shape) in zip(args, self.arg_types):
            x = np.asarray(a, dtype=dt) if type(a) in (float, int, bool) else np.asarray(a)
            if x.dtype != dt or x.shape != shape:
                raise Unsupported("argument type")
            _check(x)
            xs.append(x)
        return self.run_checked(*xs)

    def run_checked(self, *xs: np.ndarray) -> list[np.ndarray]:
        """:meth:`run` for NumPy arrays of the argument types that hold no subnormal
        (``_kernels`` converts and checks a kernel call's arguments itself: its signature key
        holds their avals, and the host's own answers were checked when made)."""
        env = self.init.copy()
        env[: self.n_args] = xs
        token = _quiet()
        try:
            for rule, e, ins, outs, types, multi, check in self.code:
                n = len(ins)
                if n == 1:
                    r = rule(e, env[ins[0]])
                elif n == 2:
                    r = rule(e, env[ins[0]], env[ins[1]])
                else:
                    r = rule(e, *[env[k] for k in ins])
                if not multi:
                    dt, shape = types[0]
                    if type(r) is not np.ndarray:
                        r = np.asarray(r)  # (NumPy gives a scalar for a 0-d result)
                    # NumPy's own promotion or shape rule where XLA's differs: not ours to guess.
                    if (r.dtype is not dt and r.dtype != dt) or r.shape != shape:
                        raise Unsupported(f"{e.primitive.name} gave {r.dtype}{r.shape}, XLA {dt}{shape}")
                    if check:
                        _check(r)
                    env[outs[0]] = r
                    continue
                rs = list(r)
                if len(rs) != len(outs):
                    raise Unsupported(f"{e.primitive.name} gave {len(rs)} results, XLA {len(outs)}")
                for o, (dt, shape), j in zip(rs, types, outs):
                    o = np.asarray(o)
                    if o.dtype != dt or o.shape != shape:
                        raise Unsupported(f"{e.primitive.name} gave {o.dtype}{o.shape}, XLA {dt}{shape}")
                    if check:
                        _check(o)
                    env[j] = o
        except Unsupported:
            raise
        except Exception as err:  # noqa: BLE001 - NumPy refused what XLA accepts: compile it
            raise Unsupported(repr(err)) from err
        finally:
            _loud(token)
        return [env[k] for k in self.outs]


def _same_value(e: Any) -> bool:
    # A conversion whose result is its operand's value: same dtype (a weak type made strong).
    if e.primitive.name != "convert_element_type" or len(e.invars) != 1:
        return False
    (x,), (y,) = e.invars, e.outvars
    if type(y) is DropVar:
        return False
    xa, ya = x.aval, y.aval
    return bool(xa.dtype == ya.dtype and xa.shape == ya.shape and np.dtype(ya.dtype) in _DTYPES)


def evaluate(jaxpr: ClosedJaxpr, args: Sequence[Any]) -> list[np.ndarray]:
    """The outputs of ``jaxpr`` on ``args`` as NumPy arrays, computed as XLA:CPU would (see
    the module doc), or :class:`Unsupported`.

    >>> import jax, jax.numpy as jnp
    >>> cj = jax.make_jaxpr(lambda x, y: jnp.maximum(x * y, 0.0))(jnp.ones(3), jnp.ones(3))
    >>> evaluate(cj, [jnp.array([1.0, -2.0, 3.0]), jnp.array([2.0, 2.0, 2.0])])[0]
    array([2., 0., 6.], dtype=float32)
    """
    return Program(jaxpr).run(args)
