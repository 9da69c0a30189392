"""``tf.stop_gradient``, ``tf.custom_gradient`` and ``tf.recompute_grad`` on JAX.

A ``custom_gradient`` or ``recompute_grad`` call runs the user's function once,
eagerly (as TF does: its values are what the call returns), and is recorded as
ONE equation on the tapes that watch its inputs. That equation's primitive is
a pure JAX function of data inputs, so compiled replays, nested tapes, jacobians
and forward accumulators all see the rule:

* ``recompute_grad``: the eager call is recorded op by op on a private tape; the
  equation replays that program under ``jax.checkpoint``. Everything the function
  captured (tensors, variable values, random keys, Python numbers) is a leaf of
  the program, passed as data, so nothing goes stale in a cached replay.
* ``custom_gradient``: a ``jax.custom_vjp`` whose ``fwd``/``bwd`` re-run the
  function under a JAX trace (arguments wrapped as Tensors, the variables it
  read bound to traced values), so the values ``grad_fn`` captured are traced
  functions of the inputs and second order differentiates through them, as TF
  does. What such a trace would bake in (captured tensors, Python numbers in
  ops, variables named in the closure) is fingerprinted into the equation's
  static spec, so a changed capture gets a new program rather than a stale one.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core import _recorder as _core
from .._core._recorder import Primitive, Tensor, VariableBase, bind, read_variable, state
from .._engine import _interpret, _replay
from .._ops._machinery import prim as _prim
from .._ops._tensor import convert_to_tensor

__all__ = ["stop_gradient", "custom_gradient", "recompute_grad"]


# --------------------------------------------------------------------------
# stop_gradient

# TF registers no gradient for StopGradient: the op is never recorded and its
# output is not watched (so ``gradient(stop_gradient(x) * 2, ...)`` is None, not
# zero). Under a JAX trace (inside a custom_gradient or recompute_grad replay)
# lax.stop_gradient gives JAX the same cut.
_stop_gradient_p = _prim("stop_gradient", lax.stop_gradient, differentiable=False, recorded=False)


def stop_gradient(input: Any, name: str | None = None) -> Tensor:  # noqa: A002  (TF's name)
    """The value of ``input``, with no gradient flowing through it (TF's ``tf.stop_gradient``).

    A gradient whose only path runs through ``stop_gradient`` is None (zeros with
    ``unconnected_gradients='zero'``), exactly as in TF. ``tapejax.explain`` names
    the cut ("cut by stop_gradient").

    Example:
        >>> import tapejax as tf
        >>> x = tf.constant(3.0)
        >>> with tf.GradientTape() as g:
        ...     g.watch(x)
        ...     y = x * tf.stop_gradient(x)
        >>> float(g.gradient(y, x))
        3.0
    """
    x = read_variable(input) if isinstance(input, VariableBase) else convert_to_tensor(input)
    out = bind(_stop_gradient_p, x)
    rec = state.recording
    if rec:
        # Bookkeeping for explain only: which watched value was cut, and where.
        for tape in rec:
            if x._id in tape.watched:
                tape.notes.append(("stop_gradient", x._id, out._id))
    return out


# --------------------------------------------------------------------------
# Calling a user function as a pure function of arrays.


def _is_leaf(v: Any) -> bool:
    return v is None or isinstance(v, Tensor | VariableBase)


def _flatten(tree: Any) -> tuple[list, Any]:
    return jax.tree_util.tree_flatten(tree, is_leaf=_is_leaf)


class _Ref:
    """Hashes and compares by identity (variables and unhashable static values in a spec).

    Variables override ``==`` elementwise, so they must never be compared by
    value inside a cache key.
    """

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Ref) and other.obj is self.obj

    def __repr__(self) -> str:
        return f"_Ref({self.obj!r})"


class _Static:
    """A static keyword-argument value: hashed by value when it can be, else by identity."""

    __slots__ = ("value", "_key")

    def __init__(self, value: Any):
        self.value = value
        try:
            hash(value)
            self._key: Any = (type(value), value)
        except TypeError:
            self._key = _Ref(value)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, _Static) or type(other._key) is not type(self._key):
            return False
        try:
            return bool(other._key == self._key)
        except Exception:  # a value whose == is not a bool (an array): treat as different
            return False


_DATA = "data"  # marks a keyword leaf passed as data (a tensor), in a spec's kw_leaves

# Per-function caches (rules by spec, None patterns by spec and shapes) are
# dropped when they reach this size: a spec holds its variables, and a loop whose
# shapes keep changing must not grow them without bound.
_CACHE_BOUND = 256


def _is_data(v: Any) -> bool:
    return isinstance(v, Tensor | VariableBase | np.ndarray | jax.Array)


def _array(v: Any) -> Any:
    if isinstance(v, Tensor | VariableBase):
        return v._value
    return jnp.asarray(v)


class _Spec(tuple):
    """Static description of one call, hashable (part of the replay key): (args treedef,
    #args, kwargs treedef, kwargs leaves (static or _DATA), variables read (as _Ref),
    other variables the function refers to (as _Ref), fingerprint of what it captured).

    Data inputs, in order: the flattened positional arguments, the variables
    read, the tensor keyword arguments, the other variables.
    """

    __slots__ = ()

    @property
    def n_args(self) -> int:
        return self[1]

    @property
    def variables(self) -> tuple:
        return tuple(r.obj for r in self[4])

    @property
    def bound_variables(self) -> tuple:
        return tuple(r.obj for r in self[5])


def _fingerprint(eqns: list, start: int, own: set) -> tuple:
    """What a re-trace of the function would bake in as constants, by identity.

    A JAX trace turns the values a function captured (tensors from outside,
    Python numbers) into constants of the compiled program; a replay cached
    across calls must not reuse them once they change. The record of the eager
    call names them: its ops, their static parameters, their constant inputs,
    and the tensors that existed before the call (ids below ``start``) other
    than the function's own inputs. Arrays are held (so an identity is never
    reused) and compared by identity; tensors are immutable.
    """
    produced: set = set()
    fp = []
    for e in eqns:
        consts: list = []
        for i, v in zip(e.in_ids, e.in_vals):
            if i is None:
                consts.append(_Ref(v) if isinstance(v, jax.Array | np.ndarray) else _Static(v))
            elif i < start and i not in own and i not in produced:
                consts.append(_Ref(v))
            else:
                consts.append(None)
        fp.append((e.prim, _replay._freeze(e.params), tuple(consts)))
        produced.update(e.out_ids)
    return tuple(fp)


def _referred_variables(f: Callable) -> list:
    """Variables ``f`` refers to by name (closure cells and globals, one container level deep).

    A re-trace reads a variable's value at trace time; binding these to data
    inputs keeps a non-trainable variable that was assigned since current.
    """
    found: list = []
    code = getattr(f, "__code__", None)
    cands: list = []
    for c in getattr(f, "__closure__", None) or ():
        try:
            cands.append(c.cell_contents)
        except ValueError:  # an empty cell
            pass
    g = getattr(f, "__globals__", None)
    if code is not None and g:
        cands += [g[n] for n in code.co_names if n in g]
    for c in cands:
        items = c.values() if isinstance(c, dict) else c if isinstance(c, list | tuple) else (c,)
        for v in items:
            if isinstance(v, VariableBase) and not any(v is w for w in found):
                found.append(v)
    return found


class _bound:
    """Context: the call's arguments rebuilt from ``arrays`` as Tensors, variables bound to their arrays.

    Recording is suspended inside: the function is being traced as a pure
    function, and its ops must not reach any tape (they would carry tracers).
    Variables are bound on this thread only (``state.bound``, which a
    variable's value consults), so other threads keep reading real values.
    """

    def __init__(self, spec: _Spec, arrays: tuple):
        self.spec = spec
        self.arrays = arrays

    def __enter__(self) -> tuple[tuple, dict]:
        spec, arrays = self.spec, self.arrays
        n = spec.n_args
        variables = spec.variables
        nv = len(variables)
        nk = sum(1 for s in spec[3] if s == _DATA)
        args = jax.tree_util.tree_unflatten(spec[0], [Tensor(a) for a in arrays[:n]])
        it = iter(arrays[n + nv:n + nv + nk])
        kw = [Tensor(next(it)) if s == _DATA else s.value for s in spec[3]]
        kwargs = jax.tree_util.tree_unflatten(spec[2], kw)
        # A variable read inside the function must see the traced input, so that
        # the function is pure in it (and differentiable with respect to it).
        bound = dict(state.bound) if state.bound else {}
        for v, a in zip(variables + spec.bound_variables, tuple(arrays[n:n + nv]) + tuple(arrays[n + nv + nk:])):
            bound[v._uid] = a
        self.saved = state.bound
        self.quiet = _core.suspended()
        self.quiet.__enter__()
        state.bound = bound
        return args, kwargs

    def __exit__(self, *exc: Any) -> None:
        state.bound = self.saved
        self.quiet.__exit__()


class _Everything(set):
    """A watched-set that contains every id: the private tape records every op."""

    def __contains__(self, i: object) -> bool:
        return True


def _run_recording(f: Callable, args: tuple, kwargs: dict, record_all: bool,
                   outer: bool = False) -> tuple[Any, _core.Tape, int]:
    """Run ``f`` once, eagerly as TF does, with a private tape recording: it
    collects (TF's VariableWatcher) the trainable variables ``f`` reads, and with
    ``record_all`` every op, which is the program of the call. With ``outer``
    the active tapes record ``f``'s ops too, as TF's do: a ``grad_fn`` that
    computes with values ``f`` made (``e = exp(x)``) is then connected to the
    inputs at second order. Returns the result, the tape and the first id the
    call could create."""
    rec = _core.Tape(watch_accessed_variables=True)
    if record_all:
        rec.watched = _Everything()
    start = _core._next_id()
    saved = state.recording
    state.recording = (list(saved) if outer else []) + [rec]
    try:
        result = f(*args, **kwargs)
    finally:
        state.recording = saved
    return result, rec, start


def _has_tracer(vals: list) -> bool:
    return any(isinstance(v, jax.core.Tracer) for v in vals)


def _as_output(v: Any) -> Tensor:
    # TF passes every result through identity: a new tensor, never the input object.
    if isinstance(v, Tensor | VariableBase):
        return Tensor(v._value)
    return Tensor(convert_to_tensor(v)._value)


class _Call:
    """One eager call of a wrapped function: its result, its record, its inputs as data."""

    def __init__(self, f: Callable, args: tuple, kwargs: dict, record_all: bool, outer: bool = False):
        self.flat_args, self.args_def = _flatten(args)
        self.flat_kw, self.kw_def = _flatten(kwargs)
        self.result, self.rec, self.start = _run_recording(f, args, kwargs, record_all, outer)
        inputs = self.flat_args + self.flat_kw
        # The variables whose gradients the function owes: read inside, not passed in.
        self.variables = [v for v in self.rec.variables.values() if not any(v is i for i in inputs)]

    def spec(self, f: Callable) -> tuple[_Spec, list, list]:
        """The spec of a re-traced call, the tensor kwargs' values, and the other variables."""
        kw_leaves: list = []
        kw_data = []
        for v in self.flat_kw:
            if _is_data(v):
                kw_leaves.append(_DATA)
                kw_data.append(_array(v))
            else:
                kw_leaves.append(_Static(v))
        inputs = self.flat_args + self.flat_kw + self.variables
        bound = [v for v in _referred_variables(f) if not any(v is i for i in inputs)]
        own = {a._id for a in self.flat_args + self.flat_kw if isinstance(a, Tensor)}
        fp = _fingerprint(self.rec.eqns, self.start, own)
        spec = _Spec((self.args_def, len(self.flat_args), self.kw_def, tuple(kw_leaves),
                      tuple(_Ref(v) for v in self.variables), tuple(_Ref(v) for v in bound), fp))
        return spec, kw_data, bound

    def inputs(self, kw_data: list, bound: list) -> tuple[list, list]:
        """Tensors (or None for constants) and values of every data input, read under the outer tapes."""
        tensors: list = []
        for a in self.flat_args:
            if isinstance(a, Tensor):
                tensors.append(a)
            elif isinstance(a, VariableBase):
                tensors.append(read_variable(a))
            else:
                tensors.append(convert_to_tensor(a))
        tensors += [read_variable(v) for v in self.variables]
        vals = [t._value for t in tensors] + list(kw_data) + [v._value for v in bound]
        return tensors + [None] * (len(kw_data) + len(bound)), vals


def _record(p: Primitive, params: dict, tensors: list, vals: list, outs: list, cut: tuple = (), aux: Any = None) -> None:
    """Record the call on every tape that watches an input. Inputs in ``cut`` are
    recorded as constants: the call gives them no gradient (a grad_fn's None)."""
    ids = tuple(None if (t is None or k in cut) else t._id for k, t in enumerate(tensors))
    every = tuple(None if t is None else t._id for t in tensors)
    _core.record(p, params, ids, tuple(vals), outs, aux, watched_ids=every)


def _watched_by_any(tensors: list) -> bool:
    ids = [t._id for t in tensors if t is not None]
    return any(i in tape.watched for tape in state.recording for i in ids)


# --------------------------------------------------------------------------
# custom_gradient


class _CustomPrimitive(Primitive):
    """A custom_gradient's primitive.

    ``eager_vjp`` is the backward TF runs: the call's own ``grad_fn`` (kept in
    the equation's ``aux``), called on Tensors, eagerly when the gradient is
    eager. Its ops are ordinary ops, so outer tapes and accumulators see them.
    """

    __slots__ = ()

    def trace_check(self, eqn: Any) -> None:
        """Run grad_fn once on symbolic upstream gradients, as TF's pfor does for a jacobian:
        a grad_fn that needs values (``.numpy()``) raises here, with TF's exception class."""
        grad_fn, variables, n_args, out_avals = eqn.aux

        def probe(*dys: Any) -> int:
            _call_grad_fn(grad_fn, [Tensor(d) for d in dys], tuple(variables), n_args)
            return 0

        try:
            with _core.suspended():
                jax.eval_shape(probe, *[jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in out_avals])
        except jax.errors.ConcretizationTypeError as e:
            name = getattr(grad_fn, "__qualname__", repr(grad_fn))
            raise TypeError(
                f"custom_gradient's grad_fn {name!r} branches on a tensor's value, but a jacobian runs it on "
                "symbolic values (as TF's pfor does). Use tf.where instead of Python if."
            ) from e

    def eager_vjp(self, eqn: Any, cts: list) -> dict:
        grad_fn, variables, n_args, out_avals = eqn.aux
        dys = []
        for c, (shape, dtype) in zip(cts, out_avals):
            if c is None or not jnp.issubdtype(dtype, jnp.inexact):
                dys.append(Tensor(jnp.zeros(shape, dtype)))
            elif jnp.issubdtype(dtype, jnp.complexfloating):
                dys.append(bind(_interpret.CONJ, c))  # TF hands grad_fn the conjugate of JAX's cotangent
            else:
                dys.append(c)
        try:
            grads = _call_grad_fn(grad_fn, dys, tuple(variables), n_args)
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError) as e:
            name = getattr(grad_fn, "__qualname__", repr(grad_fn))
            # TF: .numpy() on a graph tensor is an AttributeError (Tensor.numpy raises that
            # itself), np.asarray or a Python bool of one a TypeError.
            cls = AttributeError if isinstance(e, jax.errors.TracerArrayConversionError) else TypeError
            raise cls(
                f"custom_gradient's grad_fn {name!r} needs concrete values (it called .numpy() or branched on a "
                f"tensor), but it runs traced here: inside a compiled tapejax.function step, or a jacobian. Compute "
                f"the gradient eagerly (outside tapejax.function), or write grad_fn with tf ops only (tf.where "
                f"instead of if). JAX said: {type(e).__name__}"
            ) from e
        out = {}
        for k, g in enumerate(grads):
            if g is None or k >= len(eqn.in_vals) or eqn.in_ids[k] is None:
                continue
            out[k] = _cotangent_tensor(g, eqn.in_vals[k], k)
        return out


def _fix_cotangent(g: Any, shape: tuple, dtype: Any, k: int) -> Any:
    """A grad_fn's gradient for input ``k`` (shape, dtype) as a JAX cotangent: broadcast,
    cast, and conjugated for complex inputs (TF's convention is the conjugate of JAX's)."""
    if tuple(g.shape) != tuple(shape):
        try:
            g = jnp.broadcast_to(g, shape)
        except ValueError:
            raise ValueError(
                f"custom_gradient grad_fn returned a gradient of shape {list(g.shape)} for input {k} of shape "
                f"{list(shape)}. Return one gradient per input, with that input's shape (TF passes a "
                "mis-shaped gradient through unchecked; JAX's custom_vjp cannot)."
            ) from None
    complex_in = jnp.issubdtype(dtype, jnp.complexfloating)
    if jnp.iscomplexobj(g) and not complex_in:
        g = jnp.real(g)
    g = g.astype(dtype)
    return jnp.conj(g) if complex_in else g


# The same conversion as an op, for the interpreted backward: outer tapes see it.
_fix_cotangent_p = Primitive("grad_fn_cotangent", _fix_cotangent)


def _cotangent(g: Any, a: Any, k: int) -> Any:
    """A grad_fn's gradient for input ``a`` as a JAX cotangent, inside the custom_vjp rule."""
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        return np.zeros(np.shape(a), jax.dtypes.float0)
    if g is None:
        return jnp.zeros(np.shape(a), a.dtype)
    return _fix_cotangent(_array(g), tuple(np.shape(a)), a.dtype, k)


def _cotangent_tensor(g: Any, a: Any, k: int) -> Tensor:
    """A grad_fn's gradient for input ``a`` as a cotangent Tensor, for the interpreted backward."""
    if isinstance(g, VariableBase):
        g = read_variable(g)
    elif not isinstance(g, Tensor):
        g = convert_to_tensor(g)
    gv = g._value
    shape, dtype = tuple(np.shape(a)), jnp.result_type(a)
    if tuple(gv.shape) == shape and gv.dtype == dtype and not jnp.issubdtype(dtype, jnp.complexfloating):
        return g
    return bind(_fix_cotangent_p, g, shape=shape, dtype=np.dtype(dtype), k=k)


def _upstream(ct: Any, y: Any) -> Tensor:
    """A JAX cotangent for output ``y`` as the upstream gradient TF hands grad_fn."""
    if getattr(ct, "dtype", None) == jax.dtypes.float0 or not jnp.issubdtype(y.dtype, jnp.inexact):
        return Tensor(jnp.zeros(np.shape(y), y.dtype))
    return Tensor(jnp.conj(ct) if jnp.issubdtype(y.dtype, jnp.complexfloating) else ct)


def _split_result(result: Any) -> tuple[Any, Callable]:
    # TF: ``result, grad_fn = f(*args, **kwargs)``; the same unpacking, the same errors.
    y, grad_fn = result
    return y, grad_fn


def _accepts_variables(grad_fn: Callable) -> bool:
    try:
        sig = inspect.signature(grad_fn)
    except (TypeError, ValueError):
        return True
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            return True
        if p.name == "variables" and p.kind is not inspect.Parameter.VAR_POSITIONAL:
            return True
    return False


def _call_grad_fn(grad_fn: Callable, dys: list, variables: tuple, n_args: int) -> list:
    """Call grad_fn as TF does; return one gradient (or None) per argument, then per variable."""
    if variables:
        input_grads, variable_grads = grad_fn(*dys, variables=list(variables))
        if len(variable_grads) != len(variables):
            raise ValueError("Must return gradient for each variable from @custom_gradient grad_fn.")
    else:
        input_grads = grad_fn(*dys)
        variable_grads = []
    flat, _ = _flatten(input_grads)
    if len(flat) != n_args:
        raise ValueError(
            f"custom_gradient function expected to return {n_args} gradients, but returned {len(flat)} instead."
        )
    return list(flat) + list(variable_grads)


class _CustomGradient:
    """One ``@custom_gradient`` function: its primitive and its per-spec JAX rules."""

    def __init__(self, f: Callable):
        self.f = f
        name = getattr(f, "__qualname__", getattr(f, "__name__", "f"))
        self.prim = _CustomPrimitive(f"custom_gradient[{name}]", self._impl, multiple_results=True)
        self._rules: dict = {}
        self._none: dict = {}  # (spec, avals) -> per input: does grad_fn return None for it?
        self._lock = threading.Lock()

    # --- the pure functions a replay runs ------------------------------------------

    def _primal(self, spec: _Spec, arrays: tuple) -> tuple:
        with _bound(spec, arrays) as (args, kwargs):
            y, _ = _split_result(self.f(*args, **kwargs))
            flat, _ = _flatten(y)
            return tuple(_array(v) for v in flat)

    def _rule(self, spec: _Spec) -> Callable:
        cached = self._rules.get(spec)
        if cached is not None:
            return cached

        @jax.custom_vjp
        def fn(*arrays: Any) -> tuple:
            return self._primal(spec, arrays)

        def fwd(*arrays: Any) -> tuple:
            # Residuals are the inputs: bwd re-runs the function so the values
            # grad_fn captured are traced functions of them (second order sees them).
            # The primal output goes through ``fn`` again so that a reverse pass
            # over this one differentiates it with the custom rule too (TF's tapes do).
            return fn(*arrays), arrays

        def bwd(arrays: tuple, cts: tuple) -> tuple:
            n = spec.n_args
            variables = spec.variables
            with _bound(spec, arrays) as (args, kwargs):
                y, grad_fn = _split_result(self.f(*args, **kwargs))
                flat_y, _ = _flatten(y)
                dys = [_upstream(c, _array(v)) for c, v in zip(cts, flat_y)]
                grads = _call_grad_fn(grad_fn, dys, variables, n)
                out = [_cotangent(g, a, k) for k, (g, a) in enumerate(zip(grads, arrays))]
            out += [_cotangent(None, a, 0) for a in arrays[len(out):]]  # tensor kwargs: no gradient
            return tuple(out)

        fn.defvjp(fwd, bwd)
        with self._lock:
            if len(self._rules) >= _CACHE_BOUND:
                self._rules.clear()
            self._rules[spec] = fn
        return fn

    def _impl(self, *arrays: Any, spec: _Spec) -> tuple:
        return self._rule(spec)(*arrays)

    # --- which inputs grad_fn leaves without a gradient -------------------------------

    def _none_pattern(self, spec: _Spec, vals: list, flat_y: list, grad_fn: Callable, n_in: int) -> tuple:
        """Per recorded input, whether grad_fn returns None for it (TF then gives a None gradient).

        Found once per (spec, shapes) by running grad_fn abstractly
        (``jax.eval_shape``); the replay is compiled before grad_fn runs for
        real, so connectivity must be known when the call is recorded.
        """
        ys = [_array(v) for v in flat_y]
        key = (spec, tuple((v.shape, v.dtype) for v in vals), tuple((y.shape, y.dtype) for y in ys))
        pat = self._none.get(key)
        if pat is not None:
            return pat
        found: list = []

        def probe(*cts: Any) -> int:
            dys = [_upstream(c, y) for c, y in zip(cts, ys)]
            grads = _call_grad_fn(grad_fn, dys, spec.variables, spec.n_args)
            found.extend(g is None for g in grads)
            return 0

        try:
            with _core.suspended():
                jax.eval_shape(probe, *[jax.ShapeDtypeStruct(y.shape, y.dtype) for y in ys])
            pat = tuple(found[:n_in]) + (False,) * max(0, n_in - len(found))
        except Exception:
            # grad_fn cannot run abstractly (or is wrong): assume every input is
            # connected; a real error resurfaces when the gradient is computed.
            pat = (False,) * n_in
        with self._lock:
            if len(self._none) >= _CACHE_BOUND:
                self._none.clear()
            self._none[key] = pat
        return pat

    # --- the call ------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        recording = bool(state.recording)
        call = _Call(self.f, args, kwargs, record_all=recording, outer=True)
        y, grad_fn = _split_result(call.result)
        if call.variables and not _accepts_variables(grad_fn):
            raise TypeError(
                "@tf.custom_gradient grad_fn must accept keyword argument 'variables', since function uses "
                f"variables: {call.variables}"
            )
        flat_y, y_def = _flatten(y)
        outs = [_as_output(v) for v in flat_y]
        if recording:
            args_t = [a if isinstance(a, Tensor) else None for a in call.flat_args]
            reads_needed = any(isinstance(a, VariableBase) for a in call.flat_args) or call.variables
            if reads_needed or _watched_by_any(args_t):
                spec, kw_data, bound = call.spec(self.f)
                tensors, vals = call.inputs(kw_data, bound)
                if _watched_by_any(tensors):
                    n_in = spec.n_args + len(call.variables)
                    pat = self._none_pattern(spec, vals, outs, grad_fn, n_in)
                    cut = tuple(k for k, none in enumerate(pat) if none)
                    aux = (grad_fn, list(call.variables), spec.n_args,
                           [(tuple(o._value.shape), o._value.dtype) for o in outs])
                    _record(self.prim, {"spec": spec}, tensors, vals, outs, cut, aux)
        elif _has_tracer([t._value for t in outs]) and not state.accumulators:
            # Inside a JAX trace with no tape (the replay of an enclosing
            # custom_gradient or recompute_grad): the custom rule must reach JAX.
            spec, kw_data, bound = call.spec(self.f)
            _, vals = call.inputs(kw_data, bound)
            outs = [Tensor(o) for o in self._impl(*vals, spec=spec)]
        if state.accumulators:
            inputs = [a if isinstance(a, Tensor) else read_variable(a) if isinstance(a, VariableBase)
                      else convert_to_tensor(a) for a in call.flat_args]
            inputs += [read_variable(v) for v in call.variables]
            inner = [v._id if isinstance(v, Tensor) else None for v in flat_y]
            for acc in reversed(list(state.accumulators)):
                acc.on_custom(grad_fn, list(call.variables), len(call.flat_args), inputs, outs, inner)
        return jax.tree_util.tree_unflatten(y_def, outs)


def custom_gradient(f: Callable | None = None) -> Callable:
    """Decorator: define a function's gradient yourself (TF's ``tf.custom_gradient``).

    ``f(*args, **kwargs)`` returns ``(y, grad_fn)``. ``grad_fn(*upstream)``
    receives one upstream gradient per flattened output of ``y`` and returns one
    gradient per flattened positional argument (None for no gradient). If ``f``
    reads trainable variables (other than its arguments), ``grad_fn`` must take
    ``variables=None`` and return ``(input_grads, variable_grads)`` with one
    gradient per variable. Keyword arguments get no gradient.

    As in TF, ``f`` runs once, eagerly, with the active tapes recording its
    ops, and ``grad_fn`` runs eagerly on Tensors whenever a gradient passes
    through the call (``upstream.numpy()`` and Python branches on values work);
    its ops are recorded by outer tapes, so higher orders differentiate them.
    A forward accumulator gives each output the tangent of ``f``'s own ops, or,
    where they leave it without one, the transpose of ``grad_fn`` (TF's rule).

    Differences from TF: inside ``jacobian``/``batch_jacobian`` and inside a
    compiled ``tapejax.function`` step, ``f`` and ``grad_fn`` are traced by JAX
    (a ``jax.custom_vjp``), so there keep them free of side effects and of
    Python branches on values. ``grad_fn`` also runs once abstractly
    (``jax.eval_shape``) per shape signature when the call is recorded, to learn
    which inputs it gives None. A gradient of the wrong shape is broadcast to
    the input's shape or refused with ValueError, and one of the wrong dtype is
    cast (TF passes both through unchecked).

    Example:
        >>> import tapejax as tf
        >>> @tf.custom_gradient
        ... def log1pexp(x):
        ...     e = tf.exp(x)
        ...     def grad(upstream):
        ...         return upstream * (1 - 1 / (1 + e))
        ...     return tf.math.log(1 + e), grad
        >>> x = tf.constant(100.0)
        >>> with tf.GradientTape() as g:
        ...     g.watch(x)
        ...     y = log1pexp(x)
        >>> float(g.gradient(y, x))
        1.0
    """
    if f is None:
        return lambda fn: custom_gradient(fn)
    cg = _CustomGradient(f)

    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        return cg(*args, **kwargs)

    decorated._tapejax_custom_gradient = cg  # type: ignore[attr-defined]
    return decorated


# --------------------------------------------------------------------------
# recompute_grad


class _RecomputePrimitive(Primitive):
    __slots__ = ()


def _contains(code: tuple, cls: type) -> bool:
    for p, params, _, _ in code:
        if isinstance(p, cls):
            return True
        inner = dict(params).get("key") if p.name == "replay" else None
        if isinstance(inner, tuple) and len(inner) > 1 and isinstance(inner[1], tuple) and _contains(inner[1], cls):
            return True
    return False


def _contains_recompute(code: tuple) -> bool:
    """Does a slice's code (nested replays included) run a recompute_grad?"""
    return _contains(code, _RecomputePrimitive)


def contains_custom_gradient(code: tuple) -> bool:
    """Does a slice's code (nested replays included) run a custom_gradient?

    Such a slice cannot go through ``jax.jvp`` (JAX refuses forward mode over
    ``custom_vjp``): the jacobians use reverse mode for it.
    """
    return _contains(code, _CustomPrimitive)


# XLA:CPU expands optimization barriers before CSE by default, which merges
# jax.checkpoint's recomputation back into the forward pass: no memory is saved.
# Keeping the barriers restores the rematerialization (measured: 64 MiB -> 14 MiB
# of temporaries on a 64-layer chain).
_KEEP_BARRIERS = {"xla_disable_hlo_passes": "cse_barrier_expander"}


def _jit_hook(key: tuple, fn: Callable) -> Callable | None:
    if not (len(key) > 1 and isinstance(key[1], tuple) and jax.default_backend() == "cpu"):
        return None
    if not _contains_recompute(key[1]):
        return None
    top = jax.jit(fn, compiler_options=_KEEP_BARRIERS)
    nested = jax.jit(fn)  # JAX takes compiler options only on a top-level jit

    def call(leaf_vals: list, extra: list) -> Any:
        traced = any(isinstance(v, jax.core.Tracer) for v in leaf_vals) or any(isinstance(v, jax.core.Tracer) for v in extra)
        return (nested if traced else top)(leaf_vals, extra)

    call.lower = top.lower  # type: ignore[attr-defined]
    return call


_replay.jit_hooks.append(_jit_hook)


class _Recompute:
    """One ``recompute_grad`` function.

    A call under a tape records the function's program (every op of the eager
    call) and records ONE equation on the outer tapes whose impl replays that
    program under ``jax.checkpoint``. The program's leaves (the inputs, and
    whatever the function captured: tensors, random keys, variable values) are
    data of that equation, so nothing is baked into the compiled replay.
    """

    def __init__(self, f: Callable):
        self.f = f
        name = getattr(f, "__qualname__", getattr(f, "__name__", "f"))
        self.prim = _RecomputePrimitive(f"recompute_grad[{name}]", self._impl, multiple_results=True)
        self._rules: dict = {}
        self._lock = threading.Lock()

    def _checkpointed(self, prog: tuple) -> Callable:
        fn = self._rules.get(prog)
        if fn is None:
            code, target_slots, layout, n_leaves = prog
            forward = _replay._forward_fn(code, (), target_slots)

            def run(*vals: Any) -> tuple:
                outs = forward(list(vals[:n_leaves]))
                consts = vals[n_leaves:]
                return tuple(outs[k] if kind == "slot" else consts[k] for kind, k in layout)

            # Only the inputs are saved for the backward pass; the activations
            # inside the function are recomputed there.
            fn = jax.checkpoint(run)
            with self._lock:
                if len(self._rules) >= _CACHE_BOUND:
                    self._rules.clear()
                self._rules[prog] = fn
        return fn

    def _impl(self, *vals: Any, prog: tuple) -> tuple:
        return self._checkpointed(prog)(*vals)

    def _traced(self, spec: _Spec, arrays: tuple) -> tuple:
        # Inside a JAX trace with no tape: the function itself, under jax.checkpoint.
        def pure(*a: Any) -> tuple:
            with _bound(spec, a) as (args, kwargs):
                flat, _ = _flatten(self.f(*args, **kwargs))
                return tuple(_array(v) for v in flat)

        return jax.checkpoint(pure)(*arrays)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        recording = bool(state.recording)
        call = _Call(self.f, args, kwargs, record_all=recording)
        flat_y, y_def = _flatten(call.result)
        outs = [_as_output(v) for v in flat_y]
        if recording:
            self._record(call, flat_y, outs)
        for acc in state.accumulators:
            # The function's own ops computed the tangents; the outputs are new tensors.
            for v, o in zip(flat_y, outs):
                if isinstance(v, Tensor) and v._id in acc.tangents:
                    acc.set(o, acc.tangents[v._id])
        if not recording and _has_tracer([t._value for t in outs]):
            spec, kw_data, bound = call.spec(self.f)
            _, vals = call.inputs(kw_data, bound)
            outs = [Tensor(o) for o in self._traced(spec, tuple(vals))]
        return jax.tree_util.tree_unflatten(y_def, outs)

    def _record(self, call: _Call, flat_y: list, outs: list) -> None:
        rec = call.rec
        groups: list = []
        owners: list = []
        known: dict = {}
        for a in call.flat_args:
            if isinstance(a, Tensor):
                groups.append((a._id,))
                owners.append(a)
                known[a._id] = a._value
            elif isinstance(a, VariableBase) and rec.var_reads.get(a._uid):
                groups.append(tuple(rec.var_reads[a._uid]))
                owners.append(read_variable(a))
        for v in call.variables:
            groups.append(tuple(rec.var_reads[v._uid]))
            owners.append(read_variable(v))
        targets = [v for v in flat_y if isinstance(v, Tensor)]
        known.update((t._id, t._value) for t in targets)
        sl = _replay.build_slice(rec.eqns, targets, groups, known)
        owner_of = {i: o._id for g, o in zip(groups, owners) for i in g}
        slot_of = iter(range(len(sl.target_slots)))
        used = iter(sl.targets_used)
        layout: list = []
        consts: list = []
        for v, out in zip(flat_y, outs):
            if isinstance(v, Tensor) and next(used):
                layout.append(("slot", next(slot_of)))
            else:
                layout.append(("const", len(consts)))
                consts.append(out._value)
        prog = (sl.code, sl.target_slots, tuple(layout), len(sl.leaf_vals))
        ids = tuple(owner_of.get(i) if i is not None else None for i in sl.leaf_ids) + (None,) * len(consts)
        _core.record(self.prim, {"prog": prog}, ids, tuple(sl.leaf_vals) + tuple(consts), outs)


def recompute_grad(f: Callable) -> Callable:
    """Trade compute for memory: ``f``'s activations are recomputed in the backward pass
    instead of stored (TF's ``tf.recompute_grad``, mapped onto ``jax.checkpoint``).

    Forward values are those of ``f``. Gradients flow to the tensor arguments
    and to the trainable variables ``f`` reads. Wrapping each block of a deep
    network lowers the peak memory of the compiled backward pass to about one
    block's activations plus the block boundaries. ``f`` is re-traced as a pure
    function of its inputs when a tape differentiates it.

    Example:
        >>> import tapejax as tf
        >>> block = tf.recompute_grad(lambda x: tf.tanh(x) * 2.0)
        >>> x = tf.constant(0.5)
        >>> with tf.GradientTape() as g:
        ...     g.watch(x)
        ...     y = block(x)
        >>> round(float(g.gradient(y, x)), 4)
        1.5729
    """
    rc = _Recompute(f)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return rc(*args, **kwargs)

    wrapped._tapejax_recompute = rc  # type: ignore[attr-defined]
    return wrapped

