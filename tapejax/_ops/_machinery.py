"""The op library: tables of primitives over ``jax.numpy``/``jax.lax``, and the
TF-signature functions built from them.

Adding an op is one line in a table. Each entry becomes a ``Primitive`` (what
the tape records) and a public function with TF's signature, dtype rules and
gradient. This module holds the machinery, the elementwise ops and the
reductions; the other families are table-driven sibling modules that import
this one (never the reverse); ``tapejax._ops`` imports them all:

* ``math``: scans, arg-reductions, top_k, segments, clipping, sorting.
* ``array``: creation, shapes, indexing, gather/scatter, ``__getitem__``.
* ``linalg``: matmul, tensordot, einsum, ``tf.linalg``.
* ``nn``: ``tf.nn`` (activations, losses, convolution, pooling, dropout).
* ``operators``: the Tensor/Variable operators.

``EXPORTS`` maps every public dotted name ("math.sin", "nn.relu", "sin") to its
function; ``JAX_NAMES`` says which JAX function each maps to (for
``compat_docs/ops.md``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core import _recorder as _rec
from .._core._recorder import Primitive, Tensor, VariableBase, bind, bind_ran, bind_ran2, state
from .._engine import _kernels, _lazy
from . import _tfgrad
from ._dtypes import _WIDE, DType, as_dtype, check_width, from_np, x64_enabled
from ._tensor import convert_to_tensor

__all__ = ["EXPORTS", "JAX_NAMES", "prim", "unary", "binary", "reduction", "define"]

# Public name -> function, e.g. "math.sin" and "sin". ``tapejax.__init__`` and
# the namespace modules read this table; nothing else lists ops by hand.
EXPORTS: dict[str, Callable] = {}
# Public name -> the JAX function it maps to (documentation only).
JAX_NAMES: dict[str, str] = {}
PRIMS: dict[str, Primitive] = {}
# Internal op name -> its TF-signature function (operators and other ops look ops up here).
OPS: dict[str, Callable] = {}


_OBJECT = np.dtype(object)  # the dtype of string tensors
_Array: Any = _kernels.ArrayImpl  # (Any: a type test against it must not narrow to object)

# The op fast paths (a concrete eager Tensor of an accepted dtype, no accumulator, no lazy
# execution: the kernel is run and the result wrapped and recorded without the general
# conversion and checks). False sends every op down its general path: the tests compare the two.
FAST_PATHS = True


def fast_value(x: Any) -> Any:
    """``x``'s concrete jaxlib array where an op may take its fast path on it (``bind_ran``), else None."""
    if type(x) is Tensor and FAST_PATHS and _rec.lazy_bind is None and x._lz is None and not state.accumulators:
        v = x._value
        if type(v) is _Array:
            return v
    return None


def fast_values(x: Any, y: Any) -> tuple | None:
    """``(fast_value(x), fast_value(y))`` where both are arrays, else None (one thread-local lookup)."""
    if (type(x) is Tensor and type(y) is Tensor and FAST_PATHS and _rec.lazy_bind is None and x._lz is None
            and y._lz is None and not state.__dict__["accumulators"]):
        vx, vy = x._value, y._value
        if type(vx) is _Array and type(vy) is _Array:
            return vx, vy
    return None

def lazy_mixed(prim: Primitive, x: Any, y: Any, dts: frozenset, pkey: tuple, params: dict) -> Any:
    """Lazy mode: ``prim(x, y)`` deferred by ``_lazy.mixed`` (pending, concrete or variable
    operands), or NotImplemented (not lazy mode, or the op's general path must see it)."""
    if FAST_PATHS and _rec.lazy_bind is not None:
        return _lazy.mixed(prim, x, y, dts, pkey, params)
    return NotImplemented


# The op fast paths generated into the TF-signature functions (``define``): a concrete eager
# Tensor of an accepted dtype runs its kernel's parameter-free fast program when every input is
# small (``_engine._kernels``: the choice ``_mode`` makes), any other call goes through the kernel's
# ``call`` (the exact choice, the large-call schedule included), and the result is wrapped and
# recorded as ``bind`` does. The value's shape and dtype are read from its aval (``v.shape`` and
# ``v.dtype`` are Python properties over it), and the thread's recorder state from its dict (one
# thread-local lookup, not one per attribute). Anything else falls through to the general body.
_FAST_NS: dict[str, Any] = {
    "_T": Tensor, "_A": _Array, "_R": _rec, "_st": state, "_cfg": _kernels._config, "_oc": _kernels._on_cpu,
    "_prod": math.prod, "_bind_ran": bind_ran, "_bind_ran2": bind_ran2, "_record": _rec.record,
    "_lz_unary": _lazy.unary, "_lz_binary": _lazy.binary,
}
_FAST_NS["_M"] = sys.modules[__name__]  # (``FAST_PATHS`` is read at call time)

# ``{0}`` the tensor; the kernel's programs ``_fast`` and ``_call``, the prim ``_p``, the dtypes ``_dts``.
# A jaxlib array's aval is shared by the arrays of one signature (a program's outputs, constants),
# so the op remembers in ``_ok`` the last aval it found of an accepted dtype and small under the
# current limit (a tuple: replaced whole, as threads may race): the next call of that signature
# skips the dtype and size tests. (A lazy tensor's ``_value`` is computed on reading: eager mode
# binds its value as ``bind`` would.)
_UNARY_FAST = """\\
    if type({0}) is _T and _M.FAST_PATHS and _R.lazy_bind is None:
        st = _st.__dict__
        if not st["accumulators"]:
            v = {0}._value
            if type(v) is _A:
                av = v.aval
                c = _ok[0]
                if av is c[0] and c[1] == _cfg.kernel_fast_compile_elements:
                    try:
                        out = _fast(v)
                    except ValueError:  # (inside an outer trace: ``call`` inlines it)
                        out = _call(v)
                elif av.dtype in _dts:
                    sh = av.shape
                    lim = _cfg.kernel_fast_compile_elements if _oc and _oc[0] else 0
                    if lim > 0 and (not sh or (sh[0] if len(sh) == 1 else _prod(sh)) <= lim):
                        _ok[0] = (av, lim)
                    out = _call(v)
                else:
                    return _body({0})
                if st["recording"]:
                    return _bind_ran(_p, {0}, v, out)
                return _T(out)
    elif type({0}) is _T and {0}._lz is not None and _M.FAST_PATHS:
        # Lazy mode: a pending tensor is deferred by ``_lazy.unary`` (or takes the general path).
        out = _lz_unary(_p, {0}, _dts)
        if out is not NotImplemented:
            return out
"""

# Two tensors of one accepted dtype (``_dts``), or a tensor and a Python float or int32-range int
# beside a floating tensor (``_fdts``: the dtypes ``_other`` keeps such a scalar as it is, weakly
# typed, in either operand position).
_SMALL = "(not {0} or ({0}[0] if len({0}) == 1 else _prod({0})) <= lim)"
_BINARY_FAST = """\
    tx = type({0})
    ty = type({1})
    if (tx is _T or ty is _T) and _M.FAST_PATHS and _R.lazy_bind is None:
        st = _st.__dict__
        if not st["accumulators"]:
            lim = _cfg.kernel_fast_compile_elements if _oc and _oc[0] else 0
            if tx is ty:
                vx = {0}._value
                vy = {1}._value
                if type(vx) is _A and type(vy) is _A:
                    ax = vx.aval
                    ay = vy.aval
                    d = ax.dtype
                    if d == ay.dtype and d in _dts:
                        sx = ax.shape
                        sy = ay.shape
                        if lim > 0 and SMALLX and SMALLY:
                            try:
                                out = _fast(vx, vy)
                            except ValueError:
                                out = _call(vx, vy)
                        else:
                            out = _call(vx, vy)
                        if st["recording"]:
                            return _bind_ran2(_p, {0}, {1}, vx, vy, out, {{}})
                        return _T(out)
            elif tx is _T:
                if ty is float or (ty is int and -2147483648 <= {1} < 2147483648):
                    vx = {0}._value
                    if type(vx) is _A:
                        ax = vx.aval
                        if ax.dtype in _fdts:
                            sx = ax.shape
                            if lim > 0 and SMALLX:
                                try:
                                    out = _fast(vx, {1})
                                except ValueError:
                                    out = _call(vx, {1})
                            else:
                                out = _call(vx, {1})
                            t = _T(out)
                            if st["recording"]:
                                _record(_p, {{}}, ({0}._id, None), (vx, {1}), (t,))
                            return t
            elif tx is float or (tx is int and -2147483648 <= {0} < 2147483648):
                vy = {1}._value
                if type(vy) is _A:
                    ay = vy.aval
                    if ay.dtype in _fdts:
                        sy = ay.shape
                        if lim > 0 and SMALLY:
                            try:
                                out = _fast({0}, vy)
                            except ValueError:
                                out = _call({0}, vy)
                        else:
                            out = _call({0}, vy)
                        t = _T(out)
                        if st["recording"]:
                            _record(_p, {{}}, (None, {1}._id), ({0}, vy), (t,))
                        return t
    elif (tx is _T or ty is _T) and _M.FAST_PATHS:
        # Lazy mode: pending tensors (and a Python scalar) are deferred by ``_lazy.binary``.
        out = _lz_binary(_p, {0}, {1}, _dts, _fdts)
        if out is not NotImplemented:
            return out
""".replace("SMALLX", _SMALL.format("sx")).replace("SMALLY", _SMALL.format("sy"))

# A reduction over every axis or one int axis in range, ``keepdims`` a bool: the parameters
# ``norm_axis`` would give, and the kernel's ``run1`` for the program of that parameter set.
_REDUCE_FAST = """\
    x = {0}
    if type(x) is _T and ({2} is False or {2} is True) and _M.FAST_PATHS and _R.lazy_bind is None:
        st = _st.__dict__
        if not st["accumulators"]:
            v = x._value
            if type(v) is _A:
                av = v.aval
                if av.dtype in _dts:
                    if {1} is None:
                        ps = {{"axis": None, "keepdims": {2}}}
                        out = _run1(v, (("axis", None), ("keepdims", {2})), ps)
                    else:
                        nd = len(av.shape)
                        if type({1}) is not int or not -nd <= {1} < nd:
                            return _body({0}, {1}, {2})
                        ax = ({1} % nd,)
                        ps = {{"axis": ax, "keepdims": {2}}}
                        out = _run1(v, (("axis", ax), ("keepdims", {2})), ps)
                    if st["recording"]:
                        return _bind_ran(_p, x, v, out, ps)
                    return _T(out)
    elif type(x) is _T and x._lz is not None and ({2} is False or {2} is True) and _M.FAST_PATHS:
        # Lazy mode: a pending tensor is deferred by ``_lazy.unary`` with the parameters ``bind``
        # below would give (its keyword order: the node key's), or takes the general path.
        if {1} is None:
            out = _lz_unary(_p, x, _dts, (("axis", None), ("keepdims", {2})), {{"axis": None, "keepdims": {2}}})
        elif type({1}) is int:
            nd = len(x._lz.aval.shape)
            if -nd <= {1} < nd:
                ax = ({1} % nd,)
                out = _lz_unary(_p, x, _dts, (("axis", ax), ("keepdims", {2})), {{"axis": ax, "keepdims": {2}}})
            else:
                out = NotImplemented
        else:
            out = NotImplemented
        if out is not NotImplemented:
            return out
"""


def _export(fn: Callable, *names: str, jax_name: str | None = None) -> Callable:
    for n in names:
        EXPORTS[n] = fn
        if jax_name:
            JAX_NAMES[n] = jax_name
    return fn


def prim(name: str, impl: Callable, differentiable: bool = True, multiple_results: bool = False, jit: bool = True,
         recorded: bool = True) -> Primitive:
    """Register a primitive. ``jit=True`` compiles ``impl`` once per (static params, input shapes).

    An impl built from several jnp calls would otherwise compile and dispatch
    each of them separately when it runs eagerly; one compiled program is both
    faster to build and faster to call. Small calls compile fast
    (``_engine._kernels``); a jnp function that is itself jitted is wrapped too, for
    that. Inside a replay (already traced) the nested program is simply inlined. Use
    ``jit=False`` for an impl with Python side effects.
    """
    p = Primitive(name, _kernels.kernel(impl) if jit else impl, differentiable, multiple_results, recorded)
    PRIMS[name] = p
    return p


def _jax_name(impl: Any) -> str:
    impl = getattr(impl, "__wrapped__", impl)
    mod = getattr(impl, "__module__", "") or ""
    nm = getattr(impl, "__name__", "") or ""
    if mod.startswith("jax") and nm:
        mod = {"jax._src.numpy.ufuncs": "jax.numpy", "jax._src.nn.functions": "jax.nn"}.get(mod, mod)
        if mod.startswith("jax._src.numpy"):
            mod = "jax.numpy"
        if mod.startswith("jax._src.scipy.special"):
            mod = "jax.scipy.special"
        if mod.startswith("jax._src.lax"):
            mod = "jax.lax"
        return f"{mod}.{nm}"
    return ""


def _is_t(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


def _dt(x: Any) -> np.dtype:
    return x._aval.dtype  # never forces a lazy tensor


def _as_t(x: Any, dtype: Any = None) -> Any:
    return x if isinstance(x, Tensor | VariableBase) else convert_to_tensor(x, dtype=dtype)


def _concrete(v: Any) -> Any:
    """A NumPy view of ``v`` if it is concrete, else None (inside ``tapejax.function`` tracing)."""
    if isinstance(v, Tensor | VariableBase):
        v = v._value
    if isinstance(v, jax.core.Tracer):
        return None
    return np.asarray(v)


# ---- TF's dtype classes (the kernels' type lists, slightly simplified) ------------

_BF16 = as_dtype("bfloat16")._np
_F = frozenset(np.dtype(t) for t in ("float16", "float32", "float64")) | {_BF16}
_C = frozenset(np.dtype(t) for t in ("complex64", "complex128"))
_SI = frozenset(np.dtype(t) for t in ("int8", "int16", "int32", "int64"))
_UI = frozenset(np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64"))
_B = frozenset({np.dtype(np.bool_)})
FLOAT = _F
INEXACT = _F | _C
INT = _SI | _UI
REAL = _F | INT
SIGNED = _F | _C | _SI
NUMERIC = _F | _C | INT
REAL_SIGNED = _F | _SI
ANY = NUMERIC | _B
BOOL = _B


def check_dtype(opname: str, x: Any, allowed: frozenset) -> None:
    """Raise TF's InvalidArgumentError if ``x``'s dtype is not one ``opname`` accepts."""
    d = _dt(x)
    if d not in allowed:
        names = ", ".join(sorted(from_np(a).name for a in allowed))
        raise errors.InvalidArgumentError(
            f"Value for attr 'T' of {from_np(d).name} is not in the list of allowed values: {names}; "
            f"NodeDef: {{{{node {opname}}}}}. Cast the input first, e.g. tf.cast(x, tf.float32)."
        )


# ---- building functions with TF's signatures --------------------------------------


def define(fname: str, params: list, body: Callable, doc: str = "", fast: tuple[str, dict] | None = None) -> Callable:
    """A function ``fname(<params>, name=None)`` that calls ``body(<params>)``.

    ``params`` is a list of names or ``(name, default)`` pairs; the generated
    function has a real signature, so keyword calls (``features=x``) and
    ``help()`` work as in TF. ``fast`` is an op's fast path: source lines (indented
    one level; ``{0}``, ``{1}``... stand for the parameter names) run before ``body``,
    and the names they use (besides :data:`_FAST_NS`). In the signature itself, a
    common call pays one Python frame, not one for the signature and one for ``body``.
    """
    parts = []
    passes = []
    ns: dict[str, Any] = {"_body": body}
    for p in params:
        if isinstance(p, tuple):
            n, d = p
            ns[f"_d_{n}"] = d
            parts.append(f"{n}=_d_{n}")
        else:
            n = p
            parts.append(n)
        passes.append(n)
    if "name" not in passes:
        parts.append("name=None")
    pre = ""
    if fast is not None:
        pre = fast[0].format(*passes)
        ns.update(_FAST_NS)
        ns.update(fast[1])
    src = f"def {fname}({', '.join(parts)}):\n{pre}    return _body({', '.join(passes)})\n"
    # (the filename marks the op layer's frames for _kernels' shared MLIR context)
    exec(compile(src, _kernels.OP_FILENAME, "exec"), ns)  # noqa: S102  (a fixed template; only identifiers from the tables are spliced in)
    fn = ns[fname]
    fn.__doc__ = doc
    fn.__module__ = "tapejax"
    return fn


def _sample(dtypes: frozenset, floats: str, bools: str, ints: str) -> str:
    # The docstring example's input, of a dtype the op accepts (logical ops take bools only).
    if np.dtype(np.float32) in dtypes:
        return floats
    return bools if np.dtype(bool) in dtypes else ints


def _doc(title: str, example: str) -> str:
    return f"{title}\n\nExample:\n    >>> import tapejax as tf\n    >>> {example}\n"


# ---- unary ops ---------------------------------------------------------------


def unary(
    name: str,
    impl: Callable,
    *names: str,
    dtypes: frozenset = INEXACT,
    differentiable: bool = True,
    tf_name: str | None = None,
    arg: str = "x",
    params: tuple = (),
    jax_name: str | None = None,
    convert: Callable | None = None,
) -> Callable:
    """An elementwise op ``impl(x, **params)``; ``params`` are ``(name, default)`` static keywords."""
    p = prim(name, impl, differentiable)
    opname = tf_name or "".join(w.capitalize() for w in name.split("_"))
    keys = [k for k, _ in params]

    body: Callable[..., Tensor]
    fast: tuple[str, dict] | None = None
    if not params:
        if convert is None:
            fast = (_UNARY_FAST, {"_p": p, "_dts": dtypes, "_fast": p.impl.fast, "_call": p.impl,  # type: ignore[attr-defined]
                                  "_ok": [(None, 0)]})

        def plain(x: Any) -> Tensor:
            if type(x) is Tensor and convert is None and x._aval.dtype in dtypes:
                return bind(p, x)  # (any other tensor of an accepted dtype: no conversion or check)
            x = convert(x) if convert else _as_t(x)
            if _dt(x) not in dtypes:
                check_dtype(opname, x, dtypes)
            return bind(p, x)

        body = plain
    else:

        def with_params(x: Any, *vals: Any) -> Tensor:  # (the other variant takes no params)
            x = convert(x) if convert else _as_t(x)
            if _dt(x) not in dtypes:
                check_dtype(opname, x, dtypes)
            return bind(p, x, **{k: _static(v) for k, v in zip(keys, vals)})

        body = with_params

    public = names[0] if names else name
    sample = _sample(dtypes, "tf.constant([0.5])", "tf.constant([True])", "tf.constant([1])")
    op = define(name, [arg, *params], body, _doc(f"Elementwise ``{public}``, as ``tf.{public}`` (recorded on the tape).",
                                                  f"tf.{public}({sample}).shape\n    TensorShape([1])"), fast)
    OPS[name] = op
    return _export(op, *(names or (name,)), jax_name=jax_name or _jax_name(impl))


def _static(v: Any) -> Any:
    # Static parameters are part of the replay's cache key: they must be hashable
    # Python values, not tensors.
    if isinstance(v, Tensor | VariableBase):
        c = _concrete(v)
        if c is None:
            raise TypeError("This parameter must be a Python value, not a traced tensor.")
        return c.item() if c.ndim == 0 else tuple(c.tolist())
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list):
        return tuple(v)
    return v


def _relu6(x: Any) -> Any:
    # TF's Relu6Grad passes the gradient only where 0 < x < 6 (so 0 at both kinks).
    return jnp.where(x <= 0, jnp.zeros_like(x), jnp.where(x >= 6, jnp.full_like(x, 6), x))


def _relu(x: Any) -> Any:
    # TF's ReluGrad: gradient where x > 0 (0 at the kink).
    return jnp.where(x > 0, x, jnp.zeros_like(x))


def _leaky_relu(x: Any, alpha: float) -> Any:
    # TF's LeakyReluGrad: alpha at x == 0 (JAX's leaky_relu gives 1 there).
    return jnp.where(x > 0, x, x * jnp.asarray(alpha, x.dtype))


def _elu(x: Any) -> Any:
    # The masked branch sees x only where x <= 0, so it never overflows and its zero
    # cotangent cannot turn into 0 * inf = nan for large x. (Not min(x, 0): its
    # tie at 0 would halve TF's gradient of 1 there.)
    return jnp.where(x > 0, x, jnp.expm1(jnp.where(x > 0, jnp.zeros_like(x), x)))


_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _selu(x: Any) -> Any:
    # TF's SeluGrad takes the linear branch at 0 (its test is features < 0).
    neg = _SELU_ALPHA * jnp.expm1(jnp.where(x < 0, x, jnp.zeros_like(x)))
    return _SELU_SCALE * jnp.where(x < 0, neg, x)


def _gelu(x: Any, approximate: bool) -> Any:
    if approximate:
        c = np.sqrt(2 / np.pi).astype(np.float32)
        return 0.5 * x * (1 + jnp.tanh(c * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + jax.scipy.special.erf(x / np.sqrt(2).astype(np.float32)))


def _silu(x: Any, beta: float) -> Any:
    return x * jax.nn.sigmoid(jnp.asarray(beta, x.dtype) * x)


def _softplus(x: Any) -> Any:
    return jnp.logaddexp(x, jnp.zeros_like(x))


def _log_sigmoid(x: Any) -> Any:
    return -_softplus(-x)


def _softsign(x: Any) -> Any:
    return x / (1 + jnp.abs(x))


def _to_float_like_tf(x: Any) -> Any:
    # tf.nn.leaky_relu / gelu / silu convert integer inputs to float32 first.
    x = _as_t(x)
    if _dt(x) in INT:
        return cast(x, "float32")
    return x


def _sign(x: Any) -> Any:
    if jnp.iscomplexobj(x):
        # TF: x / |x| for complex (0 at 0).
        a = jnp.abs(x)
        return jnp.where(a == 0, jnp.zeros_like(x), x / jnp.where(a == 0, jnp.ones_like(a), a).astype(x.dtype))
    return jnp.sign(x)


def _reciprocal_no_nan(x: Any) -> Any:
    safe = jnp.where(x == 0, jnp.ones_like(x), x)
    return jnp.where(x == 0, jnp.zeros_like(x), 1 / safe)


# The op tables mix names, functions and dtype sets in one tuple: their loop variables are Any.
_name: Any
_impl: Any
_dts: Any
_tfn: Any
_names: Any

_UNARY = [
    # name, impl, dtypes, exported names
    ("negative", jnp.negative, SIGNED, "negative", "math.negative"),
    ("abs", _tfgrad.abs, SIGNED, "abs", "math.abs"),
    ("sin", jnp.sin, INEXACT, "sin", "math.sin"),
    ("cos", jnp.cos, INEXACT, "cos", "math.cos"),
    ("tan", jnp.tan, INEXACT, "tan", "math.tan"),
    ("asin", jnp.arcsin, INEXACT, "asin", "math.asin"),
    ("acos", jnp.arccos, INEXACT, "acos", "math.acos"),
    ("atan", jnp.arctan, INEXACT, "atan", "math.atan"),
    ("sinh", jnp.sinh, INEXACT, "sinh", "math.sinh"),
    ("cosh", jnp.cosh, INEXACT, "cosh", "math.cosh"),
    ("tanh", jnp.tanh, INEXACT, "tanh", "math.tanh", "nn.tanh"),
    ("asinh", jnp.arcsinh, INEXACT, "asinh", "math.asinh"),
    ("acosh", jnp.arccosh, INEXACT, "acosh", "math.acosh"),
    ("atanh", jnp.arctanh, INEXACT, "atanh", "math.atanh"),
    ("exp", jnp.exp, INEXACT, "exp", "math.exp"),
    ("expm1", jnp.expm1, INEXACT, "math.expm1"),
    ("log", jnp.log, INEXACT, "math.log"),
    ("log1p", jnp.log1p, INEXACT, "math.log1p"),
    ("square", jnp.square, NUMERIC, "square", "math.square"),
    ("sigmoid", jax.nn.sigmoid, INEXACT, "sigmoid", "math.sigmoid", "nn.sigmoid"),
    ("log_sigmoid", _log_sigmoid, FLOAT, "math.log_sigmoid"),
    ("softplus", _softplus, FLOAT, "math.softplus", "nn.softplus"),
    ("softsign", _softsign, FLOAT, "math.softsign", "nn.softsign"),
    ("relu", _relu, REAL, "nn.relu"),
    ("relu6", _relu6, REAL, "nn.relu6"),
    ("elu", _elu, FLOAT, "nn.elu"),
    ("selu", _selu, FLOAT, "nn.selu"),
    ("erf", jax.scipy.special.erf, FLOAT, "math.erf"),
    ("erfc", jax.scipy.special.erfc, FLOAT, "math.erfc"),
    ("erfinv", jax.scipy.special.erfinv, FLOAT, "math.erfinv"),
    ("ndtri", jax.scipy.special.ndtri, FLOAT, "math.ndtri"),
    ("lgamma", jax.scipy.special.gammaln, FLOAT, "math.lgamma"),
    ("digamma", jax.scipy.special.digamma, FLOAT, "math.digamma"),
    ("bessel_i0e", jax.scipy.special.i0e, FLOAT, "math.bessel_i0e"),
    ("bessel_i1e", jax.scipy.special.i1e, FLOAT, "math.bessel_i1e"),
    ("sign", _sign, SIGNED, "sign", "math.sign"),
    ("real", jnp.real, NUMERIC, "math.real"),
    ("imag", jnp.imag, NUMERIC, "math.imag"),
    ("conj", jnp.conj, NUMERIC, "math.conj"),
    ("angle", jnp.angle, INEXACT, "math.angle"),
    ("reciprocal_no_nan", _reciprocal_no_nan, INEXACT, "math.reciprocal_no_nan"),
    ("identity", lambda x: x, ANY, "identity"),
]
# TF's name for the first argument where it is not ``x``.
_ARG = {"relu": "features", "relu6": "features", "elu": "features", "selu": "features", "softplus": "features",
        "softsign": "features", "real": "input", "imag": "input", "angle": "input", "identity": "input"}
for _name, _impl, _dts, *_names in _UNARY:
    unary(_name, _impl, *_names, dtypes=_dts, arg=_ARG.get(_name, "x"))

# TF's Sqrt/Rsqrt/Reciprocal gradient kernels return 0 where the upstream
# gradient is 0 (so a masked sqrt(0) does not poison a tf.where with nan).
unary("sqrt", _tfgrad.sqrt, "sqrt", "math.sqrt", dtypes=INEXACT, jax_name="jax.numpy.sqrt (TF gradient kernel)")
unary("rsqrt", _tfgrad.rsqrt, "math.rsqrt", dtypes=INEXACT, jax_name="jax.lax.rsqrt (TF gradient kernel)")
unary("reciprocal", _tfgrad.reciprocal, "math.reciprocal", "math.inv", dtypes=NUMERIC, jax_name="jax.numpy.reciprocal (TF gradient kernel)")
unary("leaky_relu", _leaky_relu, "nn.leaky_relu", dtypes=FLOAT, arg="features", params=(("alpha", 0.2),),
      jax_name="jax.nn.leaky_relu (TF kink rule)", convert=_to_float_like_tf)
unary("gelu", _gelu, "nn.gelu", dtypes=FLOAT, arg="features", params=(("approximate", False),), jax_name="jax.nn.gelu",
      convert=_to_float_like_tf)
unary("silu", _silu, "nn.silu", "nn.swish", dtypes=FLOAT, arg="features", params=(("beta", 1.0),), jax_name="jax.nn.silu",
      convert=_to_float_like_tf)

# TF registers no gradient for these: the result is unconnected (None).
for _name, _impl, _dts, *_names in [
    ("round", jnp.round, NUMERIC, "round", "math.round"),
    ("floor", jnp.floor, FLOAT, "floor", "math.floor"),
    ("ceil", jnp.ceil, FLOAT, "math.ceil"),
    ("rint", jnp.rint, FLOAT, "math.rint"),
    ("logical_not", jnp.logical_not, BOOL, "logical_not", "math.logical_not"),
    ("is_nan", jnp.isnan, FLOAT, "math.is_nan", "debugging.is_nan"),
    ("is_finite", jnp.isfinite, FLOAT, "math.is_finite", "debugging.is_finite"),
    ("is_inf", jnp.isinf, FLOAT, "math.is_inf", "debugging.is_inf"),
    ("invert", jnp.invert, INT, "bitwise.invert"),
]:
    unary(_name, _impl, *_names, dtypes=_dts, differentiable=False)

log = OPS["log"]


# ---- binary ops with TF's dtype rules ------------------------------------------


# Dtypes a Python float (and a small Python int) joins as it is, weakly typed: the common
# case of ``x * 0.5`` answered without the checks below.
_FLOATING = frozenset(np.dtype(d) for d in ("float16", "float32", "float64", "complex64", "complex128")) | {
    np.dtype(jnp.bfloat16)}


def _other(v: Any, like: np.dtype) -> Any:
    """Convert a non-tensor operand the way TF does: to the tensor operand's dtype."""
    t = type(v)
    if (t is float or (t is int and -(2**31) <= v < 2**31)) and like in _FLOATING:
        return v
    if isinstance(v, bool | int | float | complex) and not isinstance(v, np.generic):
        d = from_np(like)
        if isinstance(v, complex) and not d.is_complex:
            raise TypeError(f"Cannot convert {v!r} to EagerTensor of dtype {d.name}")
        if isinstance(v, float) and (d.is_integer or d.is_bool):
            raise TypeError(
                f"Cannot convert {v!r} to EagerTensor of dtype {d.name}. TF does not mix Python floats into "
                f"integer ops; use an int, or tf.cast the tensor to a float dtype first."
            )
        if isinstance(v, int) and not isinstance(v, bool) and d.is_integer:
            info = np.iinfo(like)
            if not info.min <= v <= info.max:
                raise TypeError(f"Cannot convert {v!r} to EagerTensor of dtype {d.name}: out of range.")
        if isinstance(v, int) and not isinstance(v, bool) and d.is_differentiable and not -(2**31) <= v < 2**31:
            # JAX parses a Python int as int32 even beside a float tensor (an OverflowError
            # past that range); TF converts it to the tensor's dtype: pass it as a float.
            try:
                return float(v)
            except OverflowError:
                raise TypeError(f"Cannot convert {v!r} to EagerTensor of dtype {d.name}: out of range.") from None
        # A Python number stays a Python number: JAX's weak typing then keeps
        # the tensor's dtype, and the replay passes it as data, not a constant.
        return v
    return convert_to_tensor(v, dtype=from_np(like))


def graph_error(eager: type, graph: type, msg: str) -> Exception:
    """TF's exception class for a bad op: ``eager`` when run eagerly, ``graph`` while a
    compiled step is traced (TF's tf.function raises while building the graph:
    TypeError for mismatched dtypes, ValueError for a bad shape or axis)."""
    return (graph if state.tracing else eager)(msg)


def _binary_operands(opname: str, x: Any, y: Any) -> tuple:
    xt, yt = _is_t(x), _is_t(y)
    if type(y) is float and opname == "AddV2" and xt and _dt(x).kind in "iu":
        # TF's add converts the Python float with only a dtype *hint*, then AddV2 rejects it.
        raise graph_error(
            errors.InvalidArgumentError, TypeError,
            f"cannot compute AddV2 as input #1(zero-based) was expected to be a {from_np(_dt(x)).name} tensor but "
            "is a float tensor. TF does not mix Python floats into integer ops; use an int, or tf.cast first."
        )
    if xt and yt:
        if _dt(x) != _dt(y):
            raise graph_error(
                errors.InvalidArgumentError, TypeError,
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


def same_dtype(opname: str, *xs: Any) -> list:
    """TF's rule for an op whose inputs share one dtype ``T``: tensors must agree; the rest convert to it."""
    ts = [x for x in xs if _is_t(x)]
    if not ts:
        first = convert_to_tensor(xs[0])
        ts = [first]
        xs = (first,) + xs[1:]
    like = _dt(ts[0])
    out = []
    for i, x in enumerate(xs):
        if _is_t(x):
            if _dt(x) != like:
                raise errors.InvalidArgumentError(
                    f"cannot compute {opname} as input #{i}(zero-based) was expected to be a {from_np(like).name} "
                    f"tensor but is a {from_np(_dt(x)).name} tensor. tapejax, like TF, does not promote dtypes: "
                    f"use tf.cast."
                )
            out.append(x)
        else:
            v = _other(x, like)
            out.append(v if _is_t(v) else convert_to_tensor(v, dtype=from_np(like)))
    return out


def binary(
    name: str,
    impl: Callable,
    *names: str,
    tf_name: str | None = None,
    differentiable: bool = True,
    dtypes: frozenset = ANY,
    jax_name: str | None = None,
    check: Callable | None = None,
    check_dtypes: frozenset = ANY,
) -> Callable:
    """An elementwise op ``impl(x, y)`` with TF's dtype rules (``_binary_operands``); ``check(x, y)``
    is an extra test, which matters only for an operand of ``check_dtypes`` (the fast path skips it)."""
    p = prim(name, impl, differentiable)
    opname = tf_name or name.capitalize()
    fdts = dtypes if check is None else dtypes - check_dtypes

    def body(x: Any, y: Any) -> Tensor:
        if check is None and type(x) is Tensor and FAST_PATHS:
            # The common cases answered before the general checks (lazy tensors; concrete ones take
            # the signature's fast path): a tensor and a Python float (``_other`` keeps it as it is
            # beside a floating tensor), or two tensors of one dtype.
            ty = type(y)
            if ty is float:
                d = x._aval.dtype
                if d in _FLOATING and d in dtypes:
                    return bind(p, x, y)
            elif ty is Tensor:
                d = x._aval.dtype
                if d == y._aval.dtype and d in dtypes:
                    return bind(p, x, y)
        x, y = _binary_operands(opname, x, y)
        d = _dt(x) if _is_t(x) else _dt(y)
        if d not in dtypes:
            check_dtype(opname, x if _is_t(x) else y, dtypes)
        if check is not None:
            check(x, y)
        return bind(p, x, y)

    public = names[0] if names else name
    fast = (_BINARY_FAST, {"_p": p, "_dts": fdts, "_fdts": fdts & _FLOATING, "_fast": p.impl.fast,  # type: ignore[attr-defined]
                           "_call": p.impl})
    op = define(name, ["x", "y"], body, _doc(
        f"Elementwise ``{public}`` with broadcasting; both operands must share a dtype, as in TF.",
        f"tf.{public}(" + _sample(dtypes, "tf.constant([2.0]), tf.constant([3.0])", "tf.constant([True]), tf.constant([False])",
                                  "tf.constant([2]), tf.constant([3])") + ").shape\n    TensorShape([1])"), fast)
    OPS[name] = op
    return _export(op, *(names or (name,)), jax_name=jax_name or _jax_name(impl))


def _maximum(x: Any, y: Any) -> Any:
    # TF sends the whole gradient of a tie to the first argument.
    return jnp.where(x >= y, x, y)


def _minimum(x: Any, y: Any) -> Any:
    return jnp.where(x <= y, x, y)


def _pow(x: Any, y: Any) -> Any:
    if jnp.issubdtype(jnp.result_type(x, y), jnp.integer):
        return jnp.power(x, y)
    return _tfgrad.pow(x, y)


def _check_int_pow(x: Any, y: Any) -> None:
    if _is_t(x) and from_np(_dt(x)).is_integer:
        c = _concrete(y)
        if c is not None and np.any(c < 0):
            raise errors.InvalidArgumentError("Integers to negative integer powers are not allowed [Op:Pow]")


def _divide(x: Any, y: Any) -> Any:
    # TF's truediv: int8/int16 give float32, wider ints float64 (float32 without x64,
    # a documented difference); floats divide as they are.
    dt = jnp.result_type(x, y)
    if jnp.issubdtype(dt, jnp.integer):
        wide = dt.itemsize >= 4 and x64_enabled()
        ft = jnp.float64 if wide else jnp.float32
        return jnp.true_divide(jnp.asarray(x, ft), jnp.asarray(y, ft))
    return jnp.true_divide(x, y)


def _div_no_nan(x: Any, y: Any) -> Any:
    safe = jnp.where(y == 0, jnp.ones_like(y), y)
    return jnp.where(y == 0, jnp.zeros_like(x / safe), x / safe)


def _multiply_no_nan(x: Any, y: Any) -> Any:
    return _tfgrad.multiply_no_nan(x, y)


def _xlogy(x: Any, y: Any) -> Any:
    safe = jnp.where(x == 0, jnp.ones_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x * y), x * jnp.log(safe))


def _xdivy(x: Any, y: Any) -> Any:
    safe = jnp.where(x == 0, jnp.ones_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x * y), x / safe)


def _xlog1py(x: Any, y: Any) -> Any:
    safe = jnp.where(x == 0, jnp.zeros_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x * y), x * jnp.log1p(safe))


def _floormod(x: Any, y: Any) -> Any:
    return jnp.mod(x, y)


def _truncatediv(x: Any, y: Any) -> Any:
    if jnp.issubdtype(jnp.result_type(x, y), jnp.integer):
        return lax.div(jnp.asarray(x), jnp.asarray(y))
    return jnp.trunc(x / y)


_BINARY = [
    # name, impl, TF op name, dtypes, exported names
    ("add", jnp.add, "AddV2", NUMERIC, "add", "math.add"),
    ("subtract", jnp.subtract, "Sub", NUMERIC, "subtract", "math.subtract"),
    ("multiply", jnp.multiply, "Mul", NUMERIC, "multiply", "math.multiply"),
    ("divide", _divide, "RealDiv", NUMERIC, "divide", "math.divide", "math.truediv", "realdiv", "truediv"),
    ("floormod", _floormod, "FloorMod", REAL, "math.floormod", "math.mod", "mod"),
    ("maximum", _maximum, "Maximum", REAL, "maximum", "math.maximum"),
    ("minimum", _minimum, "Minimum", REAL, "minimum", "math.minimum"),
    ("squared_difference", lambda x, y: jnp.square(x - y), "SquaredDifference", NUMERIC, "math.squared_difference"),
    ("atan2", jnp.arctan2, "Atan2", FLOAT, "math.atan2", "atan2"),
    ("div_no_nan", _div_no_nan, "DivNoNan", INEXACT, "math.divide_no_nan", "div_no_nan"),
    ("multiply_no_nan", _multiply_no_nan, "MulNoNan", INEXACT, "math.multiply_no_nan"),
    ("xlogy", _xlogy, "Xlogy", INEXACT, "math.xlogy"),
    ("xdivy", _xdivy, "Xdivy", INEXACT, "math.xdivy"),
    ("xlog1py", _xlog1py, "Xlog1py", INEXACT, "math.xlog1py"),
    ("igamma", jax.scipy.special.gammainc, "Igamma", FLOAT, "math.igamma"),
    ("igammac", jax.scipy.special.gammaincc, "Igammac", FLOAT, "math.igammac"),
]
for _name, _impl, _tfn, _dts, *_names in _BINARY:
    binary(_name, _impl, *_names, tf_name=_tfn, dtypes=_dts)
binary("pow", _pow, "pow", "math.pow", tf_name="Pow", dtypes=NUMERIC, jax_name="jax.numpy.power (TF gradient formula)",
       check=_check_int_pow, check_dtypes=INT)

for _name, _impl, _tfn, _dts, *_names in [
    ("equal", jnp.equal, "Equal", ANY, "equal", "math.equal"),
    ("not_equal", jnp.not_equal, "NotEqual", ANY, "not_equal", "math.not_equal"),
    ("less", jnp.less, "Less", REAL, "less", "math.less"),
    ("less_equal", jnp.less_equal, "LessEqual", REAL, "less_equal", "math.less_equal"),
    ("greater", jnp.greater, "Greater", REAL, "greater", "math.greater"),
    ("greater_equal", jnp.greater_equal, "GreaterEqual", REAL, "greater_equal", "math.greater_equal"),
    ("logical_and", jnp.logical_and, "LogicalAnd", BOOL, "logical_and", "math.logical_and"),
    ("logical_or", jnp.logical_or, "LogicalOr", BOOL, "logical_or", "math.logical_or"),
    ("logical_xor", jnp.logical_xor, "LogicalXor", BOOL, "math.logical_xor"),
    ("bitwise_and", jnp.bitwise_and, "BitwiseAnd", INT, "bitwise.bitwise_and"),
    ("bitwise_or", jnp.bitwise_or, "BitwiseOr", INT, "bitwise.bitwise_or"),
    ("bitwise_xor", jnp.bitwise_xor, "BitwiseXor", INT, "bitwise.bitwise_xor"),
    ("left_shift", jnp.left_shift, "LeftShift", INT, "bitwise.left_shift"),
    ("right_shift", jnp.right_shift, "RightShift", INT, "bitwise.right_shift"),
    # TF registers no gradient for these (TruncateMod has none at all: TF raises LookupError).
    ("floordiv", jnp.floor_divide, "FloorDiv", REAL, "math.floordiv", "floordiv"),
    ("truncatediv", _truncatediv, "TruncateDiv", REAL, "truncatediv"),
    ("truncatemod", jnp.fmod, "TruncateMod", REAL, "truncatemod"),
]:
    binary(_name, _impl, *_names, tf_name=_tfn, dtypes=_dts, differentiable=False)


# ---- reductions --------------------------------------------------------------


def norm_axis(axis: Any, ndim: int, opname: str = "reduction") -> Any:
    """TF's axis argument (int, list, tensor, None) as a tuple of non-negative ints (None = all)."""
    if axis is None:
        return None
    if _is_t(axis):
        c = _concrete(axis)
        if c is None:
            raise TypeError(f"{opname}: the axis must be concrete, not a traced tensor.")
        axis = c.tolist()
    if isinstance(axis, np.ndarray):
        axis = axis.tolist()
    single = not isinstance(axis, list | tuple)
    axes = [axis] if single else list(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            hint = f"use an axis in [-{ndim}, {ndim})" if ndim else "a scalar has no axis: pass axis=None"
            raise graph_error(
                errors.InvalidArgumentError, ValueError,
                f"Invalid reduction dimension ({a} for input with {ndim} dimension(s)) in {opname}; {hint}."
            )
        a = a % ndim if ndim else 0
        if a not in out:
            out.append(a)
    return tuple(sorted(out))


def reduction(
    name: str,
    impl: Callable,
    *names: str,
    differentiable: bool = True,
    dtypes: frozenset = NUMERIC,
    tf_name: str | None = None,
    jax_name: str | None = None,
) -> Callable:
    """A reduction ``impl(x, axis, keepdims)`` with TF's ``(input_tensor, axis=None, keepdims=False)``."""
    p = prim(name, impl, differentiable)
    opname = tf_name or name

    def body(input_tensor: Any, axis: Any, keepdims: Any) -> Tensor:
        x = _as_t(input_tensor)
        if _dt(x) not in dtypes:
            check_dtype(opname, x, dtypes)
        return bind(p, x, axis=norm_axis(axis, len(x._aval.shape), opname), keepdims=bool(keepdims))

    op = define(name, ["input_tensor", ("axis", None), ("keepdims", False)], body,
                _doc(f"``{names[0]}`` over ``axis`` (every axis when None), as in TF.",
                     f"tf.{names[0]}({_sample(dtypes, 'tf.ones((2, 3))', 'tf.ones((2, 3), tf.bool)', 'tf.ones((2, 3), tf.int32)')}, "
                     "axis=1).shape\n    TensorShape([2])"),
                (_REDUCE_FAST, {"_p": p, "_dts": dtypes, "_run1": p.impl.run1}))  # type: ignore[attr-defined]
    OPS[name] = op
    return _export(op, *names, jax_name=jax_name or _jax_name(impl))


def _count(x: Any, axis: Any) -> int:
    return int(np.prod([x.shape[a] for a in (range(x.ndim) if axis is None else axis)], dtype=np.int64))


def _mean(x: Any, axis: Any, keepdims: bool) -> Any:
    if jnp.issubdtype(x.dtype, jnp.integer):
        # TF's integer mean truncates toward zero and keeps the dtype.
        n = _count(x, axis)
        s = jnp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
        return (jnp.sign(s) * (jnp.abs(s) // max(n, 1))).astype(x.dtype)
    return jnp.mean(x, axis=axis, keepdims=keepdims)


def _sum(x: Any, axis: Any, keepdims: bool) -> Any:
    return jnp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _prod(x: Any, axis: Any, keepdims: bool) -> Any:
    return jnp.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _lowest(dt: np.dtype) -> Any:
    return -np.inf if jnp.issubdtype(dt, jnp.inexact) else np.iinfo(dt).min


def _highest(dt: np.dtype) -> Any:
    return np.inf if jnp.issubdtype(dt, jnp.inexact) else np.iinfo(dt).max


def _max(x: Any, axis: Any, keepdims: bool) -> Any:
    # An empty reduction gives the identity (-inf), as in TF; JAX would raise.
    # Ties share the gradient equally, in TF and JAX alike.
    if x.size == 0:
        return jnp.max(x, axis=axis, keepdims=keepdims, initial=_lowest(x.dtype))
    return jnp.max(x, axis=axis, keepdims=keepdims)


def _min(x: Any, axis: Any, keepdims: bool) -> Any:
    if x.size == 0:
        return jnp.min(x, axis=axis, keepdims=keepdims, initial=_highest(x.dtype))
    return jnp.min(x, axis=axis, keepdims=keepdims)


def _variance(x: Any, axis: Any, keepdims: bool) -> Any:
    # TF: mean(|x - mean(x)|^2); real for complex input.
    m = jnp.mean(x, axis=axis, keepdims=True)
    d = x - m
    sq = jnp.real(d * jnp.conj(d)) if jnp.iscomplexobj(x) else d * d
    return jnp.mean(sq, axis=axis, keepdims=keepdims)


def _std(x: Any, axis: Any, keepdims: bool) -> Any:
    return _tfgrad.sqrt(_variance(x, axis, keepdims))


def _euclidean_norm(x: Any, axis: Any, keepdims: bool) -> Any:
    sq = jnp.real(x * jnp.conj(x)) if jnp.iscomplexobj(x) else x * x
    if jnp.issubdtype(x.dtype, jnp.integer):
        # TF's EuclideanNorm keeps an integer input's dtype (the root truncated).
        return jnp.sqrt(jnp.sum(sq, axis=axis, keepdims=keepdims).astype(jnp.float32)).astype(x.dtype)
    out = _tfgrad.sqrt(jnp.sum(sq, axis=axis, keepdims=keepdims))
    return out.astype(x.dtype)


def _logsumexp(x: Any, axis: Any, keepdims: bool) -> Any:
    return _tfgrad.logsumexp(x, axis, keepdims)


for _name, _impl, _dts, _tfn, *_names in [
    ("reduce_sum", _sum, NUMERIC, "Sum", "reduce_sum", "math.reduce_sum"),
    ("reduce_mean", _mean, NUMERIC, "Mean", "reduce_mean", "math.reduce_mean"),
    ("reduce_max", _max, REAL, "Max", "reduce_max", "math.reduce_max"),
    ("reduce_min", _min, REAL, "Min", "reduce_min", "math.reduce_min"),
    ("reduce_prod", _prod, NUMERIC, "Prod", "reduce_prod", "math.reduce_prod"),
    ("reduce_logsumexp", _logsumexp, FLOAT, "ReduceLogSumExp", "reduce_logsumexp", "math.reduce_logsumexp"),
    ("reduce_variance", _variance, INEXACT, "ReduceVariance", "math.reduce_variance"),
    ("reduce_std", _std, INEXACT, "ReduceStd", "math.reduce_std"),
    ("reduce_euclidean_norm", _euclidean_norm, NUMERIC, "EuclideanNorm", "math.reduce_euclidean_norm"),
]:
    reduction(_name, _impl, *_names, dtypes=_dts, tf_name=_tfn,
              jax_name={"_sum": "jax.numpy.sum", "_mean": "jax.numpy.mean", "_max": "jax.numpy.max", "_min": "jax.numpy.min",
                        "_prod": "jax.numpy.prod", "_logsumexp": "jax.numpy.log(sum(exp)) (TF's max shift)",
                        "_variance": "jax.numpy.var", "_std": "jax.numpy.std", "_euclidean_norm": "jax.numpy.linalg.norm"}[_impl.__name__])
for _name, _impl, _tfn, *_names in [
    ("reduce_any", jnp.any, "Any", "reduce_any", "math.reduce_any"),
    ("reduce_all", jnp.all, "All", "reduce_all", "math.reduce_all"),
]:
    reduction(_name, _impl, *_names, differentiable=False, dtypes=BOOL, tf_name=_tfn)

reduce_sum = OPS["reduce_sum"]
reduce_mean = OPS["reduce_mean"]


# ---- cast --------------------------------------------------------------------------


def _cast_impl(x: Any, dtype: Any) -> Any:
    if jnp.iscomplexobj(x) and not jnp.issubdtype(dtype, jnp.complexfloating):
        x = jnp.real(x)
    if jnp.issubdtype(dtype, jnp.bool_):
        return x != 0
    return x.astype(dtype)


_cast_p = prim("cast", _cast_impl)
_identity_p = PRIMS["identity"]
# cast's dtype argument (a DType, a NumPy dtype or type, a name) -> the NumPy dtype, for the
# fast path: filled by the general path once it has accepted the argument. Only these argument
# types (no ints or bools, which hash alike), and no 64-bit target (its check depends on x64).
_CAST_TO: dict = {}
_CAST_KEYS = frozenset({DType, str, type})


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """Cast to ``dtype`` (complex to real keeps the real part, float to int truncates), as ``tf.cast``.

    A cast to or from an integer type is not differentiable (the gradient is None), as in TF.

    Example:
        >>> import tapejax as tf
        >>> tf.cast(tf.constant([1.7]), tf.int32).numpy().tolist()
        [1]
    """
    v = fast_value(x)
    if v is not None:
        # A cast to a dtype seen before (its width checked then), of a tensor that is not a string.
        to = _CAST_TO.get(dtype) if type(dtype) in _CAST_KEYS else None
        if to is not None and v.dtype != _OBJECT:
            if v.dtype == to:
                return bind_ran(_identity_p, x, v, _identity_p.impl.run1(v))  # type: ignore[attr-defined]
            ps = {"dtype": to}
            return bind_ran(_cast_p, x, v, _cast_p.impl.run1(v, (("dtype", to),), ps), ps)  # type: ignore[attr-defined]
    d = as_dtype(dtype)
    check_width(d._np, "tf.cast to")
    if d._np != _OBJECT and d._np not in _WIDE and type(dtype) in _CAST_KEYS and len(_CAST_TO) < 256:
        _CAST_TO[dtype] = d._np
    x = _as_t(x)
    if _dt(x) == d._np:
        return bind(PRIMS["identity"], x) if d._np != _OBJECT else x
    if _dt(x) == _OBJECT or d._np == _OBJECT:
        # TF's Cast kernel has no string conversions (tf.strings.to_number / as_string do it).
        raise errors.UnimplementedError(
            f"Cast {from_np(_dt(x)).name} to {d.name} is not supported: use tf.strings.to_number or "
            "tf.strings.as_string. [Op:Cast]")
    return bind(_cast_p, x, dtype=d._np)


def saturate_cast(value: Any, dtype: Any, name: str | None = None) -> Tensor:
    """Cast, clamping to the target type's range first (``tf.dtypes.saturate_cast``).

    Example:
        >>> import tapejax as tf
        >>> tf.dtypes.saturate_cast(tf.constant([300.0, -5.0]), tf.uint8).numpy().tolist()
        [255, 0]
    """
    d = as_dtype(dtype)
    x = _as_t(value)
    src = from_np(_dt(x))
    if not d.is_complex and not d.is_bool and (d.is_integer or d.size < src.size):
        lo, hi = d.min, d.max
        if src.is_integer:
            info = np.iinfo(_dt(x))
            lo, hi = max(lo, info.min), min(hi, info.max)
        elif src.is_floating:
            finfo = np.finfo(_dt(x)) if _dt(x) != _BF16 else None
            if finfo is not None:
                lo, hi = max(float(lo), float(finfo.min)), min(float(hi), float(finfo.max))
        x = OPS["clip_by_value"](x, np.asarray(lo).astype(_dt(x)).item(), np.asarray(hi).astype(_dt(x)).item())
    return cast(x, d)


_complex_p = prim("complex", lambda re, im: lax.complex(re, im))


def complex_(real: Any, imag: Any, name: str | None = None) -> Tensor:
    """``real + 1j * imag`` (float32 parts give complex64), as ``tf.complex``.

    Example:
        >>> import tapejax as tf
        >>> tf.complex(1.0, 2.0).numpy()
        np.complex64(1+2j)
    """
    re, im = same_dtype("Complex", real, imag)
    check_dtype("Complex", re, FLOAT)
    return bind(_complex_p, re, im)


_export(cast, "cast", "dtypes.cast", jax_name="jax.Array.astype")
_export(saturate_cast, "saturate_cast", "dtypes.saturate_cast", jax_name="jax.numpy.clip + astype")
_export(complex_, "complex", "dtypes.complex", jax_name="jax.lax.complex")
