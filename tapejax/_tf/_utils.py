"""Small TF utilities around the tape: ``get_static_value``, ``grad_pass_through``, ``identity_n``,
``numpy_function``/``py_function`` (host Python through ``jax.pure_callback``) and ``device``."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Primitive, Tensor, VariableBase, bind
from .._ops._dtypes import as_dtype
from .._ops._machinery import PRIMS
from .._ops._tensor import convert_to_tensor
from ._autodiff import custom_gradient
from ._gradient_tape import GradientTape

__all__ = ["device", "get_static_value", "grad_pass_through", "identity_n", "numpy_function", "py_function"]


def _traced(v: Any) -> bool:
    return isinstance(v, jax.core.Tracer)


def get_static_value(tensor: Any, partial: bool = False) -> Any:
    """The value of ``tensor`` as NumPy when known without running a graph, else None.

    Eagerly a tensor's value; a variable gives None (its value may change), as in TF;
    inside a compiled ``tapejax.function`` step a traced tensor gives None and a constant
    its value. Non-tensors are returned unchanged.

    Example:
        >>> import tapejax as tf
        >>> tf.get_static_value(tf.constant([1, 2])).tolist(), tf.get_static_value(tf.Variable(1.0))
        ([1, 2], None)
    """
    if isinstance(tensor, VariableBase):
        return None
    if not isinstance(tensor, Tensor):
        return tensor
    if _traced(tensor._value):
        return None
    a = np.asarray(tensor._value)
    return a[()] if a.ndim == 0 else a


def grad_pass_through(f: Callable) -> Callable:
    """Wrap ``f`` so that its gradient is the identity (the upstream passes straight to the inputs).

    Example:
        >>> import tapejax as tf
        >>> x = tf.constant(2.4)
        >>> with tf.GradientTape() as g:
        ...     g.watch(x)
        ...     y = tf.grad_pass_through(tf.round)(x)
        >>> float(y), float(g.gradient(y, x))
        (2.0, 1.0)
    """

    @custom_gradient
    def _grad_pass_through_op(*args: Any, **kwargs: Any) -> Any:
        def grad(*upstream: Any, **gkw: Any) -> Any:
            variables = gkw.get("variables")
            if variables is not None:
                return upstream, [None] * len(variables)
            return upstream

        return f(*args, **kwargs), grad

    return functools.wraps(f)(_grad_pass_through_op)


def identity_n(input: Any, name: str | None = None) -> list:
    """A list of identities of the given tensors (gradients pass through each).

    Example:
        >>> import tapejax as tf
        >>> [t.numpy().tolist() for t in tf.identity_n([tf.constant(1.0), tf.constant([2, 3])])]
        [1.0, [2, 3]]
    """
    return [bind(PRIMS["identity"], convert_to_tensor(t)) for t in input]


# ---- numpy_function / py_function ---------------------------------------------------------------


def _tout_list(Tout: Any) -> tuple[list, bool]:
    """(dtypes, single) from TF's Tout: one dtype or TensorSpec, or a list/tuple of them."""
    if isinstance(Tout, list | tuple):
        return [as_dtype(getattr(t, "dtype", t)) for t in Tout], False
    return [as_dtype(getattr(Tout, "dtype", Tout))], True


def _known_shapes(Tout: Any, dts: list) -> list | None:
    # A Tout of TensorSpecs with fully defined shapes gives the outputs' shapes: no probe call needed.
    specs = list(Tout) if isinstance(Tout, list | tuple) else [Tout]
    shapes = [getattr(s, "shape", None) for s in specs]
    if not shapes or any(sh is None or any(d is None for d in sh) for sh in shapes):
        return None
    return [jax.ShapeDtypeStruct(tuple(sh or ()), d._np) for sh, d in zip(shapes, dts)]


def _result_list(r: Any, n: int, single: bool) -> list:
    if single:
        return [r]
    if r is None:
        r = []
    if not isinstance(r, list | tuple):
        r = [r]
    if len(r) != n:
        raise errors.InvalidArgumentError(f"The function returned {len(r)} values, but Tout names {n}.")
    return list(r)


@contextlib.contextmanager
def _no_recording() -> Iterator[None]:
    # py_function's ops run under their own tape only (TF's EagerPyFunc): the outer tapes
    # and accumulators see one op, not the function's internals or its captured variables.
    # Host code is never part of a compiled step's trace either: its variable reads see
    # real values, and its jax ops run now (ensure_compile_time_eval), not staged.
    st = _core.state
    saved = st.recording, st.accumulators, st.order, st.tracing, st.bound
    st.recording, st.accumulators, st.order, st.tracing, st.bound = [], [], [], [], None
    try:
        with jax.ensure_compile_time_eval():
            yield
    finally:
        st.recording, st.accumulators, st.order, st.tracing, st.bound = saved


def _host_numpy(func: Callable, dts: list, single: bool, *arrays: Any) -> list:
    r = _result_list(func(*[np.asarray(a) for a in arrays]), len(dts), single)
    return [np.asarray(v, dtype=d._np) for v, d in zip(r, dts)]


def _convert_py_output(v: Any, d: Any) -> Tensor:
    try:
        return convert_to_tensor(v, dtype=d)
    except (TypeError, ValueError) as e:
        raise errors.InvalidArgumentError(f"{type(e).__name__}: {e}") from None


def _host_py(func: Callable, dts: list, single: bool, *arrays: Any) -> list:
    with _no_recording():
        try:
            r = _result_list(func(*[Tensor(jnp.asarray(a)) for a in arrays]), len(dts), single)
        except errors.OpError:
            raise
        except Exception as e:
            raise errors.UnknownError(f"{type(e).__name__}: {e}") from e
        return [np.asarray(_convert_py_output(v, d)._value) for v, d in zip(r, dts)]


def _probe_shapes(host: Callable, xs: list) -> list:
    # Inside a compiled step the output shapes are not known until the function runs:
    # run it once on zeros of the input shapes, at trace time (compat_docs/differences.md).
    with _no_recording():
        outs = host(*[np.zeros(x._value.shape, x._value.dtype) for x in xs])
    return [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in outs]


class _CallbackPrimitive(Primitive):
    __slots__ = ()


def _callback_prim(name: str, host: Callable, shapes: list, differentiable: bool, grad_host: Callable | None) -> Primitive:
    def fwd_impl(*arrays: Any) -> Any:
        return jax.pure_callback(lambda *a: tuple(host(*a)), tuple(shapes), *arrays)

    impl: Callable = fwd_impl
    if grad_host is not None:
        call = jax.custom_vjp(fwd_impl)

        def fwd(*arrays: Any) -> Any:
            return fwd_impl(*arrays), arrays

        def bwd(arrays: tuple, cts: tuple) -> tuple:
            in_shapes = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays)
            return jax.pure_callback(lambda *a: tuple(grad_host(len(arrays), *a)), in_shapes, *arrays, *cts)

        call.defvjp(fwd, bwd)
        impl = call
    return _CallbackPrimitive(name, lambda *a: tuple(impl(*a)), differentiable=differentiable, multiple_results=True)


def _py_grad_host(func: Callable, dts: list, single: bool) -> Callable:
    def grad_host(n: int, *arrays: Any) -> list:
        xs_np, cts = arrays[:n], arrays[n:]
        with _no_recording():
            xs = [Tensor(jnp.asarray(a)) for a in xs_np]
            with GradientTape(watch_accessed_variables=False) as tape:
                for x in xs:
                    tape.watch(x)
                r = _result_list(func(*xs), len(dts), single)
                ys = [_convert_py_output(v, d) for v, d in zip(r, dts)]
            gs = tape.gradient(ys, xs, output_gradients=[Tensor(jnp.asarray(c)) for c in cts])
        return [np.zeros(a.shape, a.dtype) if g is None else np.asarray(convert_to_tensor(g)._value, a.dtype)
                for g, a in zip(gs, xs_np)]

    return grad_host


def numpy_function(func: Callable, inp: Any, Tout: Any, stateful: bool = True, name: str | None = None) -> Any:
    """Run ``func`` on NumPy arrays on the host; its results become tensors. Not differentiable
    (gradients through it are None, as in TF). Inside a compiled ``tapejax.function`` step it
    runs through ``jax.pure_callback`` on every call.

    Example:
        >>> import numpy as np, tapejax as tf
        >>> tf.numpy_function(lambda a: np.sort(a), [tf.constant([3, 1, 2])], tf.int32).numpy().tolist()
        [1, 2, 3]
    """
    dts, single = _tout_list(Tout)
    xs = [convert_to_tensor(a) for a in inp]
    if not any(_traced(x._value) for x in xs):
        r = func(*[np.asarray(x._value) for x in xs])
        if single:
            return convert_to_tensor(np.asarray(r))
        if not dts and r is None:
            return None
        out = [convert_to_tensor(np.asarray(v)) for v in _result_list(r, len(dts), single)]
        # TF's eager numpy_function returns a one-element Tout's result unwrapped (a list when traced).
        return out[0] if len(out) == 1 else out
    host = functools.partial(_host_numpy, func, dts, single)
    shapes = _known_shapes(Tout, dts) or _probe_shapes(host, xs)
    prim = _callback_prim("numpy_function", host, shapes, False, None)
    outs = bind(prim, *xs)
    return outs[0] if single else list(outs)


def py_function(func: Callable | None = None, inp: Any = None, Tout: Any = None, name: str | None = None) -> Any:
    """Run ``func`` on eager tensors on the host; differentiable as in TF: the gradient comes from a
    tape over ``func``'s ops with respect to ``inp`` (variables ``func`` captures get None).
    Inside a compiled ``tapejax.function`` step it runs through ``jax.pure_callback``.

    Example:
        >>> import tapejax as tf
        >>> x = tf.constant(3.0)
        >>> with tf.GradientTape() as g:
        ...     g.watch(x)
        ...     y = tf.py_function(lambda a: a * a, [x], tf.float32)
        >>> float(y), float(g.gradient(y, x))
        (9.0, 6.0)
    """
    if Tout is None:
        raise TypeError("Missing required argument: 'Tout'\n  If using tf.py_function as a decorator, set `Tout`\n"
                        "  **by name** above the function:\n  `@tf.py_function(Tout=tout)`")
    if func is None:
        return lambda f: functools.wraps(f)(lambda *a: py_function(f, list(a), Tout, name))
    dts, single = _tout_list(Tout)
    xs = [convert_to_tensor(a) for a in inp]
    if any(_traced(x._value) for x in xs):
        host = functools.partial(_host_py, func, dts, single)
        prim = _callback_prim("py_function", host, _known_shapes(Tout, dts) or _probe_shapes(host, xs), True,
                              _py_grad_host(func, dts, single))
        outs = bind(prim, *xs)
        return outs[0] if single else list(outs)
    # Eager: run func once under its own tape (watching only the inputs), then give the
    # outputs that tape's gradient through a custom gradient, as TF's EagerPyFunc does.
    inner_xs = [Tensor(x._value) for x in xs]
    with _no_recording():
        tape = GradientTape(persistent=True, watch_accessed_variables=False)
        with tape:
            for x in inner_xs:
                tape.watch(x)
            try:
                r = _result_list(func(*inner_xs), len(dts), single)
            except errors.OpError:
                raise
            except Exception as e:
                raise errors.UnknownError(f"{type(e).__name__}: {e}") from e
            ys = [_convert_py_output(v, d) for v, d in zip(r, dts)]

    @custom_gradient
    def _eager_py_func(*args: Any) -> Any:
        def grad(*upstream: Any) -> Any:
            with _no_recording():
                gs = tape.gradient(ys, inner_xs, output_gradients=list(upstream))
            return gs if len(gs) != 1 else gs[0]

        outs = [Tensor(y._value) for y in ys]
        return (outs[0] if single else outs), grad

    if not xs:
        return ys[0] if single else ys
    out = _eager_py_func(*xs)
    return out if single else list(out)


# ---- tf.device -----------------------------------------------------------------------------------


def _resolve_device(spec: str) -> Any:
    s = spec.strip().upper()
    if not s:
        return None
    part = s.rsplit("/DEVICE:", 1)[-1].lstrip("/")
    kind, _, index = part.partition(":")
    jax_kind = {"CPU": "cpu", "GPU": "gpu", "TPU": "tpu"}.get(kind)
    if jax_kind is None:
        raise ValueError(f"Unknown device specification {spec!r}: use '/CPU:0', '/GPU:0' or '/TPU:0'.")
    try:
        devs = jax.devices(jax_kind)
    except RuntimeError:
        devs = []
    i = int(index) if index.isdigit() else 0
    if i >= len(devs):
        # TF places ops on an available device when the named one is missing (soft placement).
        return None
    return devs[i]


@contextlib.contextmanager
def device(device_name: str | None) -> Iterator[None]:
    """Run the ops inside on a device: ``"/CPU:0"``, ``"/GPU:0"`` (``jax.default_device``).

    A device that does not exist falls back to the default one, as TF's soft placement does.

    Example:
        >>> import tapejax as tf
        >>> with tf.device("/CPU:0"):
        ...     x = tf.ones(2)
        >>> "CPU" in x.device.upper() or "cpu" in x.device
        True
    """
    if device_name is None:
        yield
        return
    if callable(device_name):
        raise RuntimeError("tf.device does not support functions when eager execution is enabled.")
    dev = _resolve_device(str(device_name))
    if dev is None:
        yield
        return
    with jax.default_device(dev):
        yield
