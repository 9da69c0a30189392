"""Derivatives computed op by op, as TF computes them: the exact tier.

A gradient that some tape or accumulator is watching (a nested tape, a
persistent tape asked inside its own block, a gradient inside a
ForwardAccumulator), or whose slice holds an op with a Python backward (a
custom_gradient's grad_fn), is not run as one compiled program. It is
*interpreted*: the slice is walked in reverse and each op's pullback is bound
over the very tensors (ids) the forward pass used: TF's gradient function of the
op where the op library has one (``Primitive.vjp_rule``: SinGrad's ``cos`` and
``multiply``, bound as ordinary ops), else the generic pullback as an op of its
own (``VJP``). The tapes outside record those ops, the accumulators compute their
tangents, so a derivative of the gradient reaches every forward value the
backward pass used (TF's recorded gradient ops), not only the leaves.

Forward mode works the same way: ``JVP`` binds an op's tangent rule over its
primals and tangents, as the op runs.

Connectivity follows TF's: an input a derived op does not read (the primal
inputs of an add's pullback) is passed as a constant, so a derivative through
it is None, not zero. Which inputs are read is found once per op signature
from the derived function's jaxpr.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from .. import config as _config
from .._core._kinds import INEXACT
from .._core._recorder import Primitive, Tensor, bind, state
from .._core._recorder import notify_accumulators as _notify
from .._core._recorder import record as _record
from . import _kernels
from ._replay import _NO_GRADIENT_PRIMS, Slice, _Cache, _differentiable_deps

__all__ = ["VJP", "JVP", "handle", "interpret_needed", "gradient", "jvp_op"]


def handle(i: int | None, v: Any) -> Any:
    """The tensor with id ``i`` and value ``v`` (a new handle to a recorded tensor), or ``v`` for a constant."""
    if i is None:
        return v
    t = Tensor.__new__(Tensor)
    t._value = v
    t._id = i
    t._lz = None
    return t


# Concrete arrays and Python scalars: never tracers, told apart by type alone (every eager
# gradient asks this of its slice's leaves; ``isinstance`` on the Tracer class is the slow test).
_CONCRETE_TYPES = frozenset({_kernels.ArrayImpl, np.ndarray, float, int, bool, complex, type(None)})


def _is_tracer(vals: Sequence[Any]) -> bool:
    for v in vals:
        if type(v) not in _CONCRETE_TYPES and isinstance(v, jax.core.Tracer):
            return True
    return False


def _aval(v: Any) -> Any:
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return (tuple(v.shape), np.dtype(v.dtype), bool(getattr(v, "weak_type", False)))
    return (type(v), v) if type(v) in (int, float, bool, complex) else type(v)


def _avals(vals: Sequence[Any]) -> tuple:
    return tuple(_aval(v) for v in vals)


# One bounded LRU for every per-signature jaxpr analysis below (connectivity facts).
_analyses = _Cache(8192)


def _analysis(key: tuple, compute: Callable[[], list], fallback: list) -> list:
    def make() -> list:
        try:
            return compute()
        except Exception:  # noqa: BLE001 - an unknown answer is the conservative one (connected)
            return fallback

    return _analyses.get(key, make)


class _Derived:
    """Functions derived from a primitive (its pullback, its tangent rule), per signature.

    Compiled once per signature (``jax.jit``; shapes are jit's own cache): measured on
    a first nested gradient, one compile per derived op beats an eager ``jax.vjp`` of
    the op's compiled impl, which compiles its forward and its transposed programs
    (0.38 s against 0.53 s for a 16-element Hessian-vector product). Inside a trace
    the function is inlined.
    """

    def __init__(self, build: Callable[[tuple], Callable], zeros_connect: Callable[[tuple], tuple] | None = None):
        self.build = build
        self.zeros_connect = zeros_connect
        self.fns = _Cache(2048)

    def _entry(self, sig: tuple) -> tuple:
        def make() -> tuple:
            fn = self.build(sig)
            return fn, _kernels.jit(fn)

        return self.fns.get(sig, make)

    def __call__(self, sig: tuple, vals: Sequence[Any]) -> tuple:
        e = self._entry(sig)
        return e[0](*vals) if _is_tracer(vals) else e[1](*vals)

    def on_host(self, sig: tuple, vals: Sequence[Any]) -> tuple:
        """``self(sig, vals)`` for concrete values, host values among them (``_gradient_host``)."""
        return self._entry(sig)[1].on_host(*vals)

    def live_inputs(self, sig: tuple, vals: Sequence[Any]) -> list:
        """Per input: does any output read it (data dependence, comparisons included)?"""

        def compute() -> list:
            closed = jax.make_jaxpr(self._entry(sig)[0])(*vals)
            # TF's gradient of a masked op (maximum: select on x >= y) reaches x only
            # through a bool, so it is not recorded there: a derivative through it is
            # None. Its fused kernels (ReluGrad(dy, y)) take the float input: connected.
            live = _differentiable_deps(closed.jaxpr, [True] * len(closed.jaxpr.outvars), strict=not _fused(sig))
            if self.zeros_connect is not None:
                # A cotangent that is a constant zero (JAX's symbolic zero: relu's
                # second derivative) is, in TF's gradient functions, zeros_like(x):
                # an op on that input, which keeps it connected (zeros, not None).
                const = [not d for d in _forward_deps(closed.jaxpr, [True] * len(vals))]
                for j, c in zip(self.zeros_connect(sig), const):
                    if c:
                        live[j] = True
            return live

        # An analysis failure costs precision (zeros for None), never values.
        return _analysis(("live", sig, _avals(vals)), compute, [True] * len(vals))


def _op_fn(prim: Primitive, params: tuple, args: list, act: tuple) -> Callable:
    pd = dict(params)

    def f(*d: Any) -> tuple:
        a = list(args)
        for j, v in zip(act, d):
            a[j] = v
        out = prim.impl(*a, **pd)
        return tuple(out) if prim.multiple_results else (out,)

    return f


def _zero_ct(o: Any) -> Any:
    if jnp.issubdtype(o.dtype, jnp.inexact):
        return jnp.zeros(o.shape, o.dtype)
    return np.zeros(o.shape, jax.dtypes.float0)


def _build_vjp(sig: tuple) -> Callable:
    prim, params, n_in, act, ctmask, batched = sig

    def pullback(*vals: Any) -> tuple:
        args = list(vals[:n_in])
        outs, pb = jax.vjp(_op_fn(prim, params, args, act), *[args[j] for j in act])
        given = dict(zip(ctmask, vals[n_in:]))
        cts = tuple(given[k] if k in given else _zero_ct(o) for k, o in enumerate(outs))
        return tuple(pb(cts))

    if not batched:
        return pullback
    # A jacobian: a leading axis of cotangents (one row per target element), the
    # primals shared: one pullback, vectorized (TF's pfor over its gradient ops).
    return jax.vmap(pullback, in_axes=(None,) * n_in + (0,) * len(ctmask))


def _build_jvp(sig: tuple) -> Callable:
    prim, params, n_in, tmask, omask = sig

    def tangent(*vals: Any) -> tuple:
        args = list(vals[:n_in])
        _, tans = jax.jvp(_op_fn(prim, params, args, tmask), tuple(args[j] for j in tmask), tuple(vals[n_in:]))
        return tuple(tans[k] for k in omask)

    return tangent


# Ops whose TF gradient is one fused kernel taking the op's float input or output
# (ReluGrad, Relu6Grad, LeakyReluGrad, EluGrad, SeluGrad): a later derivative stays
# connected to it even where the kernel only compares it.
_FUSED_KERNELS = frozenset({"relu", "relu6", "leaky_relu", "elu", "selu"})


def _fused(sig: tuple) -> bool:
    prim, params = sig[0], sig[1]
    while prim is VJP or prim is JVP:
        pd = dict(params)
        prim, params = pd.get("op"), pd.get("params", ())
    return getattr(prim, "name", None) in _FUSED_KERNELS


# Ops whose TF second-order gradient builds its zero with ``zeros(shape(x))`` (a Shape op:
# no gradient path) rather than ``zeros_like(x)``: LeakyReluGradGrad. Their structural
# zeros stay unconnected (None), as in TF.
_ZEROS_BY_SHAPE = frozenset({"leaky_relu"})


def _zeros_connect(sig: tuple) -> tuple:
    # Output k of a VJP is the cotangent of input act[k]. Only the fused kernels' gradients
    # write their zero as zeros_like(x) (ReluGradGrad); the rest (SignGrad, LeakyReluGradGrad)
    # as zeros(shape(x)), which is unconnected.
    prim, params = sig[0], dict(sig[1])
    if prim is VJP and getattr(params.get("op"), "name", None) in _ZEROS_BY_SHAPE:
        return ()
    if not _fused(sig):
        return ()
    return sig[3]


_vjps = _Derived(_build_vjp, zeros_connect=_zeros_connect)


_RULE_NAMES = frozenset({"ExpGrad", "TanhGrad", "SigmoidGrad", "ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad",
                         "SqrtGrad", "RsqrtGrad", "ReciprocalGrad"})


# Ops whose TF gradient kernel reads the op's *output* (ExpGrad, TanhGrad, ReluGrad, ...):
# their backward op takes ``y``, not ``x``, so a derivative with respect to ``y`` of a
# gradient sees that use, as in TF. ``rule(y, ct) -> ct_x``. Cotangents here follow JAX's
# convention (the seed is conjugated once, the result conjugated back), so a complex
# rule is ``ct * f'(x)`` without TF's conj: TF's ``ct * conj(y)`` is that, conjugated.
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _nonan(ct: Any, d: Any) -> Any:
    # TF's "dy == 0 gives 0" kernels (SqrtGrad, RsqrtGrad, ReciprocalGrad).
    prod = ct * d
    return jnp.where(ct == 0, jnp.zeros_like(prod), prod)


def _rule(name: str, fn: Callable) -> Primitive:
    # One small compiled kernel per rule signature: run as separate jnp calls, ``ct * (1 - y * y)``
    # would compile (and dispatch) three programs on a new tape's first gradient.
    return Primitive(name, _kernels.jit(fn))


OUTPUT_RULES: dict[str, Primitive] = {
    "exp": _rule("ExpGrad", lambda y, ct: ct * y),
    "tanh": _rule("TanhGrad", lambda y, ct: ct * (1 - y * y)),
    "sigmoid": _rule("SigmoidGrad", lambda y, ct: ct * (y * (1 - y))),
    "relu": _rule("ReluGrad", lambda y, ct: jnp.where(y > 0, ct, jnp.zeros_like(ct))),
    "relu6": _rule("Relu6Grad", lambda y, ct: jnp.where((y > 0) & (y < 6), ct, jnp.zeros_like(ct))),
    "elu": _rule("EluGrad", lambda y, ct: jnp.where(y < 0, ct * (y + 1), ct)),
    "selu": _rule("SeluGrad", lambda y, ct: jnp.where(y < 0, ct * (y + _SELU_SCALE * _SELU_ALPHA),
                                                          ct * _SELU_SCALE)),
    "sqrt": _rule("SqrtGrad", lambda y, ct: _nonan(ct, 0.5 / y)),
    "rsqrt": _rule("RsqrtGrad", lambda y, ct: _nonan(ct, -0.5 * y ** 3)),
    "reciprocal": _rule("ReciprocalGrad", lambda y, ct: _nonan(ct, -(y ** 2))),
}
_jvps = _Derived(_build_jvp)


def _vjp_impl(*vals: Any, op: Primitive, params: tuple, n_in: int, act: tuple, ctmask: tuple,
              batched: bool = False) -> tuple:
    return _vjps((op, params, n_in, act, ctmask, batched), vals)


def _jvp_impl(*vals: Any, op: Primitive, params: tuple, n_in: int, tmask: tuple, omask: tuple) -> tuple:
    return _jvps((op, params, n_in, tmask, omask), vals)


# An op's pullback and its tangent rule, as ops: recorded where their inputs are
# watched, so they can be differentiated again (any order, any nesting).
VJP = Primitive("vjp", _vjp_impl, multiple_results=True)
JVP = Primitive("jvp", _jvp_impl, multiple_results=True)
# Cotangent sums: ``jnp.add`` as the op library's ``add`` compiles it (one kernel object per
# function, and jit's compile cache is keyed by the function), so a backward pass adding
# cotangents of the shapes the forward pass added compiles nothing new.
ADD = Primitive("add_any", _kernels.kernel(jnp.add))
CONJ = Primitive("conj", _kernels.jit(jnp.conj))


def _seed_impl(g: Any, shape: tuple, dtype: Any) -> Any:
    c = jnp.broadcast_to(g, shape)
    if jnp.issubdtype(np.dtype(dtype), jnp.complexfloating):
        return jnp.conj(c).astype(dtype)
    return jnp.asarray(c, dtype)


SEED = Primitive("seed_cotangent", _kernels.kernel(_seed_impl))


def _watched(vals: Sequence[Any]) -> bool:
    # Would binding an op over these inputs reach any tape or accumulator?
    return _watched_ids([v._id for v in vals if isinstance(v, Tensor)])


def _watched_ids(ids: Sequence[Any]) -> bool:
    # The same question over tensor ids (``None`` for a constant).
    for tape in state.recording:
        w = tape.watched
        if any(i in w for i in ids):
            return True
    for acc in state.accumulators:
        t = acc.tangents
        if any(i in t for i in ids):
            return True
    return False


def _bind_derived(prim: Primitive, derived: _Derived, sig: tuple, inputs: list, params: dict) -> tuple:
    vals = [v._value if isinstance(v, Tensor) else v for v in inputs]
    if _watched(inputs):
        live = derived.live_inputs(sig, vals)
        inputs = [v if keep else val for v, val, keep in zip(inputs, vals, live)]
        return bind(prim, *inputs, **params)
    return tuple(Tensor(o) for o in derived(sig, vals))


def vjp_op(prim: Primitive, params: tuple, inputs: list, cts: list, act: tuple, ctmask: tuple,
           batched: bool = False) -> tuple:
    """Input cotangents (for ``act``) of one op, as a bound ``VJP`` op over ``inputs`` and ``cts``
    (``batched``: every cotangent has a leading axis of rows)."""
    sig = (prim, params, len(inputs), act, ctmask, batched)
    kw = {"op": prim, "params": params, "n_in": len(inputs), "act": act, "ctmask": ctmask}
    if batched:
        kw["batched"] = True
    return _bind_derived(VJP, _vjps, sig, list(inputs) + list(cts), kw)


def jvp_op(prim: Primitive, params: tuple, inputs: list, tangents: list, tmask: tuple, omask: tuple) -> list:
    """Output tangents (for ``omask``) of one op, as a bound ``JVP`` op; None where the tangent
    does not depend on the input tangents (TF: a None tangent, as for sign or a constant)."""
    sig = (prim, params, len(inputs), tmask, omask)
    kw = {"op": prim, "params": params, "n_in": len(inputs), "tmask": tmask, "omask": omask}
    vals = [v._value if isinstance(v, Tensor) else v for v in list(inputs) + list(tangents)]
    if prim is VJP and not _fused(tuple(dict(params).get(k) for k in ("op", "params"))):
        # A pullback is, in TF, a graph of ops over the original op's inputs; a tangent
        # crosses it wherever a float op reads a tangent-bearing input, but not through
        # a sign or a comparison (their forward rules give None).
        connected = _pullback_tangent_connected(prim, params, vals, tmask, len(omask))
    elif prim is JVP or prim is VJP or prim.name in _RULE_NAMES:
        # A tangent op (TF's double-vjp graph over the op's inputs) or a fused gradient
        # kernel: its tangent is connected (zeros, not None) even where its value does
        # not change.
        connected = [True] * len(omask)
    else:
        connected = _tangent_connected(sig, vals)
    if not any(connected):
        return [None] * len(omask)
    # TF derives a tangent from the op's gradient function (a double vjp): the tangent
    # is connected to the primal inputs that gradient function reads (Mul's reads both,
    # even for a constant factor; Add's and Maximum's, through a bool mask, none).
    all_in = list(inputs) + list(tangents)
    if _watched(all_in):
        n = len(inputs)
        if prim is JVP or prim is VJP or prim.name in _RULE_NAMES:
            reads = [True] * n
        else:
            reads = _gradient_reads(prim, params, vals[:n])
        # Tapes see the tangent op over the inputs its gradient function reads; the
        # accumulators outside (forward over forward) over all of them, as TF's
        # double-vjp function call takes every input.
        outs = tuple(Tensor(o) for o in _jvps(sig, vals))
        all_ids = tuple(v._id if isinstance(v, Tensor) else None for v in all_in)
        tape_ids = tuple(i if (k >= n or reads[k]) else None for k, i in enumerate(all_ids))
        if state.recording:
            _record(JVP, kw, tape_ids, tuple(vals), list(outs))
        if state.accumulators:
            _notify(JVP, kw, all_ids, list(vals), outs)
    else:
        outs = tuple(Tensor(o) for o in _jvps(sig, vals))
    return [o if c else None for o, c in zip(outs, connected)]


_FORWARD_CUT = frozenset({"sign"}) | _NO_GRADIENT_PRIMS


def _forward_deps(jaxpr: Any, live_in: list, cut: frozenset = frozenset()) -> list:
    """Per output of ``jaxpr``: does it depend on an input marked in ``live_in``, along a
    path through no primitive in ``cut``? Nested jitted calls are followed."""
    live = {v for v, is_live in zip(jaxpr.invars, live_in) if is_live}
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in cut:
            continue
        ins = [(not hasattr(v, "val")) and v in live for v in eqn.invars]
        if not any(ins):
            continue
        inner = eqn.params.get("jaxpr")
        if eqn.primitive.name in ("pjit", "jit") and inner is not None:
            sub = _forward_deps(getattr(inner, "jaxpr", inner), ins, cut)
            live.update(o for o, d in zip(eqn.outvars, sub) if d)
        else:
            live.update(eqn.outvars)
    return [(not hasattr(v, "val")) and v in live for v in jaxpr.outvars]


def _tangent_connected(sig: tuple, vals: list) -> list:
    """Per output tangent of an op: does it depend on the input tangents at all?"""
    n_in = sig[2]

    def compute() -> list:
        closed = jax.make_jaxpr(_jvps._entry(sig)[0])(*vals)
        return _forward_deps(closed.jaxpr, [k >= n_in for k in range(len(vals))])

    return _analysis(("tangent", sig, _avals(vals)), compute, [True] * len(sig[4]))


def _pullback_tangent_connected(prim: Primitive, params: tuple, vals: list, tmask: tuple, n_out: int) -> list:
    """Per output of a recorded pullback: can a tangent cross it from the inputs in ``tmask``
    (not through a sign or a comparison, whose forward rules give None)?"""
    n_in = len(vals) - len(tmask)

    def compute() -> list:
        closed = jax.make_jaxpr(lambda *a: prim.impl(*a, **dict(params)))(*vals[:n_in])
        outs = _forward_deps(closed.jaxpr, [k in tmask for k in range(n_in)], _FORWARD_CUT)
        return outs[:n_out] if len(outs) >= n_out else [True] * n_out

    return _analysis(("pullback", prim, params, tmask, _avals(vals[:n_in])), compute, [True] * n_out)


def _gradient_reads(prim: Primitive, params: tuple, primals: list) -> list:
    """Per input of ``prim``: does its gradient function (pullback for every floating input,
    constants included, as TF computes them) read it? Comparisons do not count, except in
    fused kernels (ReluGrad)."""

    def compute() -> list:
        # TF turns a Python number beside a float tensor into a float constant, whose
        # gradient its gradient function computes too (Mul's ``grad * x`` for ``x * 2``).
        ps = [float(v) if type(v) is int else v for v in primals]
        act = tuple(j for j, v in enumerate(ps) if jnp.result_type(v) in INEXACT)
        outs = jax.eval_shape(lambda *a: prim.impl(*a, **dict(params)), *ps)
        outs = tuple(outs) if prim.multiple_results else (outs,)
        ctmask = tuple(k for k, o in enumerate(outs) if np.dtype(o.dtype) in INEXACT)
        vsig = (prim, params, len(ps), act, ctmask, False)
        cts = [jnp.zeros(outs[k].shape, outs[k].dtype) for k in ctmask]
        closed = jax.make_jaxpr(_vjps._entry(vsig)[0])(*ps, *cts)
        deps = _differentiable_deps(closed.jaxpr, [True] * len(closed.jaxpr.outvars), strict=not _fused(vsig))
        return deps[:len(ps)]

    return _analysis(("reads", prim, params, _avals(primals)), compute, [True] * len(primals))


# --------------------------------------------------------------------------
# The interpreted gradient.


def gradient_inputs(eqn: Any) -> list:
    """Per input of a recorded op: can a gradient flow into it (not only through a comparison)?

    Only derived ops (a recorded VJP or JVP) are analysed: TF's gradient of a gradient
    reaches an input a pullback reads only inside a mask (maximum's ``x >= y``) with None.
    Every other op passes gradients to all of its recorded inputs."""
    prim = eqn.prim
    if prim is not VJP and prim is not JVP:
        return [True] * len(eqn.in_ids)

    def compute() -> list:
        closed = jax.make_jaxpr(lambda *v: prim.impl(*v, **eqn.params))(*eqn.in_vals)
        return _differentiable_deps(closed.jaxpr, [True] * len(closed.jaxpr.outvars), strict=True)

    return _analysis(("edges", prim, _freeze(eqn.params), _avals(eqn.in_vals)), compute, [True] * len(eqn.in_ids))


def has_python_backward(sl: Slice) -> bool:
    """Does the slice hold an op whose backward is Python code to run on Tensors (a grad_fn)?"""
    if sl.keys is not None:
        # A cut from lazy mode's cut cache (``_replay.cut``): the lazy recorder recorded every
        # equation of that record, and it records no grad_fn (such an op runs eagerly, recorded by
        # ``record``, and its record is never cached). Saves a walk of the slice per gradient.
        return False
    for e in sl.eqns:
        if e.aux is not None and getattr(e.prim, "eager_vjp", None) is not None:
            return True
    return False


def interpret_needed(sl: Slice, extra_ids: Sequence[Any]) -> bool:
    """Must this gradient be interpreted op by op (see the module docstring)?"""
    return has_python_backward(sl) or watched_outside(sl, extra_ids)


def watched_outside(sl: Slice, extra_ids: Sequence[Any]) -> bool:
    """Does an active tape or accumulator watch a tensor this slice's derivative would read?"""
    rec, accs = state.recording, state.accumulators
    if not rec and not accs:
        return False
    ids = [i for i in sl.leaf_ids if i is not None]
    for e in sl.eqns:
        ids.extend(e.out_ids)
    ids.extend(i for i in extra_ids if i is not None)
    for tape in rec:
        w = tape.watched
        for i in ids:
            if i in w:
                return True
    for acc in accs:
        t = acc.tangents
        for i in ids:
            if i in t:
                return True
    return False


def _inexact(v: Any) -> bool:
    dt = getattr(v, "dtype", None)
    if dt is not None:
        return dt in INEXACT
    return isinstance(v, float | complex)  # a weakly typed Python scalar


def _add(a: Tensor | None, b: Tensor) -> Tensor:
    return b if a is None else bind(ADD, a, b)


def _complex(v: Any) -> bool:
    return jnp.issubdtype(jnp.result_type(v), jnp.complexfloating)


def _atomic(run: Callable[[], tuple]) -> tuple:
    # If any op of the backward pass raises, the ops it already recorded on the tapes
    # outside are removed: no tape is left half-updated.
    marks = [(t, len(t.eqns)) for t in state.recording]
    try:
        return run()
    except BaseException:
        for t, n in marks:
            del t.eqns[n:]
            t.sig = None  # its structure signature covered the removed equations: no cached cut now
        raise


def gradient(sl: Slice, targets: Sequence[Tensor], given: Sequence[Any], pending: bool = False) -> tuple:
    """See ``_gradient``; atomic on the tapes outside. ``pending``: the slice's compiled
    program is on its way (``_tiers.choose``), so on the host route a kernel whose host calls
    are spent but which is not compiled yet is answered on the host again, not compiled:
    the compiled program replaces these kernels within a few gradients."""
    if pending and not _kernels.past_budget.on:
        _kernels.past_budget.on = True
        try:
            return _atomic(lambda: _gradient(sl, targets, given))
        finally:
            _kernels.past_budget.on = False
    return _atomic(lambda: _gradient(sl, targets, given))


def _ones(v: Any) -> Any:
    # A small seed is made on the host and transferred (to the default device,
    # uncommitted, as jnp.ones's would be): no program to compile on a new tape's first
    # gradient (jnp.ones and jnp.asarray each compile one per new shape).
    if isinstance(v, jax.core.Tracer) or v.size > max(0, _config.kernel_fast_compile_elements):
        return jnp.ones(v.shape, v.dtype)
    return jax.device_put(np.ones(v.shape, v.dtype))


def _run_kernel(prim: Primitive, *args: Any, **params: Any) -> Any:
    # A gradient rule's op, on arrays (nothing to record).
    return prim.impl(*args, **params)


def _host_call(prim: Primitive, *args: Any, **params: Any) -> Any:
    # A rule's op in the host-resident backward pass: its kernel, whose host answer stays
    # a host value (an impl that is no kernel gets device arrays).
    f = getattr(prim.impl, "on_host", None)
    if f is not None:
        return f(*args, **params)
    return prim.impl(*_kernels._device_args(args), **params)


def _host_sum(a: Any, b: Any) -> Any:
    return b if a is None else _host_call(ADD, a, b)


def _host_route(sl: Slice, given: Sequence[Any]) -> bool:
    # The host-resident backward pass applies where nothing records it (no tape or
    # accumulator watches a value it reads), no op has a Python backward, and the host
    # answers kernels at all (on CPU, concrete values).
    if _config.kernel_host_first_calls <= 0 or not _kernels._cpu() or _is_tracer(sl.leaf_vals):
        return False
    if has_python_backward(sl):
        return False
    return not watched_outside(sl, [g._id for g in given if isinstance(g, Tensor)])


def _gradient_host(sl: Slice, targets: Sequence[Tensor], given: Sequence[Any]) -> tuple:
    """``_gradient`` (unbatched) where nothing watches the backward pass, on CPU.

    The same rules, pullbacks and kernels in the same order, so the same values and the
    same host and compile counts; but a cotangent the host computed stays a
    ``_kernels.HostValue`` (NumPy) until a kernel must run compiled or the sources'
    gradients are made, and no Tensor is made per op. Why: a new tape's first gradient is
    mostly kernel calls the host answers, and through jit each one paid jit's cache miss,
    a transfer to a device array, freeing it, and the transfer back at the next op (about
    15 of a call's 22 us): chain_2000's 1,250 backward calls took 40 ms of its 70.
    """
    ct: dict[int, Any] = {}
    for t, g in zip(targets, given):
        v = t._value
        if g is None:
            seed = _ones(v)
        else:
            seed = _host_call(SEED, g._value, shape=tuple(v.shape), dtype=np.dtype(v.dtype))
        ct[t._id] = _host_sum(ct.get(t._id), seed)
    reach, values = _reach_and_values(sl, targets)
    for e in reversed(sl.eqns):
        outs = e.out_ids
        c0 = None
        if len(outs) == 1:
            c0 = ct.get(outs[0])
            if c0 is None:
                continue
            rule = OUTPUT_RULES.get(e.prim.name) if outs[0] in values else None
            if rule is not None:
                i = e.in_ids[0]
                if i is not None and i in reach:
                    ct[i] = _host_sum(ct.get(i), _host_call(rule, values[outs[0]], c0))
                continue
        elif not any(o in ct for o in outs):
            continue
        act = tuple(j for j, (i, v) in enumerate(zip(e.in_ids, e.in_vals))
                    if i is not None and i in reach and _inexact(v))
        if not act:
            continue
        r = None
        if c0 is not None and e.prim.vjp_rule is not None and e.prim.vjp_rule_on_arrays:
            r = e.prim.vjp_rule(e.in_vals, c0, act, e.params, _host_call)
        if r is None:
            ctmask = tuple(k for k, o in enumerate(outs) if o in ct)
            vals = list(e.in_vals) + [ct[outs[k]] for k in ctmask]
            r = _vjps.on_host((e.prim, _freeze(e.params), len(e.in_ids), act, ctmask, False), vals)
        for j, c in zip(act, r):
            i = e.in_ids[j]
            if c is not None and i is not None and i in reach:
                ct[i] = _host_sum(ct.get(i), c)
    grads = []
    for grp, acc in zip(sl.groups, _group_sums(sl, ct, _host_sum)):
        if acc is None:
            grads.append(_unconnected_zeros(sl, grp, ()))
            continue
        if type(acc) is _kernels.HostValue:
            acc = acc.device()
        grads.append(Tensor(CONJ.impl(acc) if _complex(acc) else acc))
    return tuple(grads)


def _reach_and_values(sl: Slice, targets: Sequence[Tensor]) -> tuple[set, dict[int, Any]]:
    # The ids a cotangent can flow into, and every recorded value by id (an output's value
    # for the rules that read it: TanhGrad reads y).
    reach = set(sl.diff_ids)
    values: dict[int, Any] = {t._id: t._value for t in targets}
    for e in sl.eqns:
        reach.update(e.out_ids)
        for i, v in zip(e.in_ids, e.in_vals):
            if i is not None:
                values[i] = v
    return reach, values


def _group_sums(sl: Slice, ct: dict, add: Callable[[Any, Any], Any]) -> list:
    # Per connected source group, the sum of its ids' cotangents (None: none reached it).
    out = []
    for grp in sl.groups:
        acc = None
        for k in grp:
            c = ct.get(sl.diff_ids[k])
            if c is not None:
                acc = add(acc, c)
        out.append(acc)
    return out


def _unconnected_zeros(sl: Slice, grp: tuple, lead: tuple) -> Tensor:
    # A group no cotangent reached (its path ran only through integer values): zeros.
    d = sl.diff[grp[0]]
    v = sl.leaf_vals[d[1]] if d[0] == "leaf" else jnp.zeros(d[2], d[3])
    return Tensor(jnp.zeros(lead + jnp.shape(v), jnp.result_type(v)))


def _gradient(sl: Slice, targets: Sequence[Tensor], given: Sequence[Any], rows: Any = None) -> tuple:
    """Per connected source group of ``sl``, its gradient, computed op by op.

    ``targets`` are the used targets (``sl.targets_used``) and ``given`` their
    output gradients (Tensors, or None for ones). JAX's cotangent convention
    inside; TF's conjugate for complex values at both ends, as in the compiled tier.
    With ``rows`` (an array of shape ``(n,) + target.shape``, one target), every
    cotangent carries a leading axis of n rows: the n vector-Jacobian products of a
    jacobian in one pass.
    """
    batched = rows is not None
    if not batched and _host_route(sl, given):
        return _gradient_host(sl, targets, given)
    ct: dict[int, Tensor] = {}
    for t, g in zip(targets, given):
        v = t._value
        if batched:
            seed = Tensor(jnp.asarray(rows, v.dtype))
        elif g is None:
            seed = Tensor(_ones(v))
        else:
            seed = bind(SEED, g, shape=tuple(v.shape), dtype=np.dtype(v.dtype))
        ct[t._id] = _add(ct.get(t._id), seed)
    reach, values = _reach_and_values(sl, targets)
    for e in reversed(sl.eqns):
        outs = e.out_ids
        if not any(o in ct for o in outs):
            continue
        eager = getattr(e.prim, "eager_vjp", None) if e.aux is not None else None
        rule = OUTPUT_RULES.get(e.prim.name) if len(outs) == 1 and outs[0] in values else None
        in_cts: dict | None
        if eager is not None:
            in_cts = eager(e, [ct.get(o) for o in outs]) if not batched else _rows_eager(eager, e, outs, ct)
        elif rule is not None:
            if e.in_ids[0] is None or e.in_ids[0] not in reach:
                continue
            in_cts = {0: bind(rule, handle(outs[0], values[outs[0]]), ct[outs[0]])}
        else:
            act = tuple(j for j, (i, v) in enumerate(zip(e.in_ids, e.in_vals))
                        if i is not None and i in reach and _inexact(v))
            if not act:
                continue
            in_cts = None
            grad_rule = e.prim.vjp_rule
            if grad_rule is not None and not batched and len(outs) == 1:
                # The op library's gradient function (TF's, e.g. Mul's ``grad * y``).
                c0 = ct[outs[0]]
                if not _watched_ids((*e.in_ids, c0._id)):
                    # Nothing watches this backward op: the rule runs kernels on arrays, most
                    # of which the forward pass compiled, where the generic pullback would
                    # be a program of its own to trace on a new tape.
                    if e.prim.vjp_rule_on_arrays:
                        r = grad_rule(e.in_vals, c0._value, act, e.params, _run_kernel)
                        if r is not None:
                            for j, c in zip(act, r):
                                i = e.in_ids[j]
                                ct[i] = _add(ct.get(i), Tensor(c))
                            continue
                else:
                    # Watched: the rule's ops are bound over the forward pass's tensors and
                    # recorded as TF records its gradient ops, so a second derivative runs
                    # these same rules instead of tracing a pullback of a pullback.
                    r = grad_rule(tuple(handle(i, v) for i, v in zip(e.in_ids, e.in_vals)), c0, act, e.params, bind)
                    if r is not None:
                        in_cts = dict(zip(act, r))
            if in_cts is None:
                ctmask = tuple(k for k, o in enumerate(outs) if o in ct)
                inputs = [handle(i, v) for i, v in zip(e.in_ids, e.in_vals)]
                cts_in = [ct[outs[k]] for k in ctmask]
                if len(act) > 1 and _watched(inputs + cts_in):
                    # TF's gradient function makes one op per input gradient (MatMulGrad: each
                    # product reads only the other operand): one VJP op per input, so a later
                    # derivative of one input's gradient is connected only to what it reads.
                    res = [vjp_op(e.prim, _freeze(e.params), inputs, cts_in, (j,), ctmask, batched)[0] for j in act]
                else:
                    res = list(vjp_op(e.prim, _freeze(e.params), inputs, cts_in, act, ctmask, batched))
                in_cts = dict(zip(act, res))
        assert in_cts is not None  # (every branch above sets it or continues)
        for j, c in in_cts.items():
            i = e.in_ids[j]
            if c is not None and i is not None and i in reach:
                ct[i] = _add(ct.get(i), c)
    grads = []
    for grp, acc in zip(sl.groups, _group_sums(sl, ct, _add)):
        if acc is None:
            acc = _unconnected_zeros(sl, grp, (len(rows),) if batched else ())
        elif _complex(acc._value):
            acc = bind(CONJ, acc)
        grads.append(acc)
    return tuple(grads)


ROW = Primitive("row", lambda c, r: c[r])
STACK = Primitive("stack_rows", lambda *cs: jnp.stack(cs))


def _rows_eager(eager: Callable, e: Any, outs: tuple, ct: dict) -> dict:
    # A Python backward (grad_fn) takes one cotangent at a time: run it per row and stack.
    # TF's jacobian (pfor) runs it on symbolic values: the op checks it can, first.
    check = getattr(e.prim, "trace_check", None)
    if check is not None:
        check(e)
    n = next(c for c in (ct.get(o) for o in outs) if c is not None)._value.shape[0]
    per_row = [eager(e, [bind(ROW, ct[o], r=r) if o in ct else None for o in outs]) for r in range(n)]
    out = {}
    for j in set().union(*per_row):
        parts = [p.get(j) for p in per_row]
        if all(p is None for p in parts):
            continue
        like = next(p for p in parts if p is not None)
        zero = Tensor(jnp.zeros(like._value.shape, like._value.dtype))
        out[j] = bind(STACK, *[zero if p is None else p for p in parts])
    return out


def jacobian(sl: Slice, target: Tensor, rows: Any) -> tuple:
    """Per connected source group, the stacked vector-Jacobian products of ``rows``
    (shape ``(n,) + target.shape``), interpreted op by op like ``gradient``: shape
    ``(n,) + source.shape``. Used when a tape or accumulator outside watches the result."""
    return _atomic(lambda: _gradient(sl, [target], [None], rows))


def _freeze(params: dict) -> tuple:
    return tuple(sorted(params.items())) if params else ()

