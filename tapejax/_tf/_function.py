"""``tapejax.function``: a TF-style step (tape, gradient, variable updates) compiled into one
XLA program with ``jax.jit``.

Variables are captured the way ``tf.function`` captures them: the variables a
trace reads become inputs of the compiled program and the ones it assigns
become outputs, written back after each call. Discovery is by tracing: a trace
that touches a variable it did not know about is redone with that variable as
an input, and a trace that creates a variable (a lazy layer build, optimizer
slots) is abandoned for one eager run of that first call, after which the step
is traced with the new variables in place.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

import jax
import numpy as np

from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from .._ops._dtypes import as_dtype
from .._ops._tensor import TensorShape

__all__ = ["function", "Function", "TensorSpec"]


class TensorSpec:
    """Describes a tensor argument of a ``tapejax.function`` (TF's ``tf.TensorSpec``).

    ``None`` dimensions accept any size. XLA compiles for static shapes, so each
    distinct concrete shape still gets its own compiled program.

    Example:
        >>> import tapejax as tf
        >>> spec = tf.TensorSpec([None, 3], tf.float32)
        >>> spec.is_compatible_with(tf.ones((5, 3)))
        True
    """

    def __init__(self, shape: Any, dtype: Any = "float32", name: str | None = None):
        self.shape = TensorShape(shape)
        self.dtype = as_dtype(dtype)
        self.name = name

    def is_compatible_with(self, value: Any) -> bool:
        v = value._value if isinstance(value, Tensor | VariableBase) else np.asarray(value)
        return self.shape.is_compatible_with(v.shape) and self.dtype._np == v.dtype

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype!r}, name={self.name!r})"


class _Retrace(Exception):
    """A trace met variables it did not capture; redo it with them as inputs."""

    def __init__(self, variables: list):
        super().__init__("retrace")
        self.variables = variables


class _VariableCreated(Exception):
    """A trace created a variable: run this first call eagerly instead."""


class _Capture:
    """Pushed on ``_core.state.tracing`` while a step's Python runs; sees variable access."""

    def __init__(self, known: set, trace: bool):
        self.known = known
        self.trace = trace
        self.touched: dict[int, VariableBase] = {}
        self.saved: dict[int, tuple] = {}

    def read(self, var: VariableBase) -> None:
        if var._uid not in self.known and var._uid not in self.touched:
            self.touched[var._uid] = var

    def write(self, var: VariableBase) -> None:
        self.read(var)
        if var._uid not in self.known and var._uid not in self.saved:
            self.saved[var._uid] = (var, var._v)

    def created(self, var: VariableBase) -> None:
        if self.trace:
            raise _VariableCreated()
        # Eager first run: the new variable is state of this step from now on.
        self.known.add(var._uid)
        self.touched[var._uid] = var


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


class _Entry:
    """One trace key's compiled program and captured variables."""

    def __init__(self) -> None:
        self.variables: list[VariableBase] = []
        self.jitted: Callable | None = None
        self.assigned: tuple = ()
        self.out_spec: Any = None
        self.created_once = False


class Function:
    """A callable made by ``tapejax.function``: compiles ``python_function`` per input signature.

    Retracing follows TF: a new tensor shape or dtype, or a different Python
    value argument, traces again; a variable's value never does. Python side
    effects run at trace time (``print``), ``tf.print`` runs every call.

    Example:
        >>> import tapejax as tf
        >>> w = tf.Variable(2.0)
        >>> @tf.function
        ... def step(x):
        ...     with tf.GradientTape() as t:
        ...         loss = (w * x - 1.0) ** 2
        ...     w.assign_sub(0.1 * t.gradient(loss, w))
        ...     return loss
        >>> float(step(tf.constant(1.0))), round(float(w), 3)
        (1.0, 1.8)
    """

    def __init__(self, python_function: Callable, input_signature: Any = None, jit_compile: Any = None,
                 reduce_retracing: bool = False, name: str | None = None):
        self.python_function = python_function
        self.input_signature = None if input_signature is None else list(input_signature)
        self.jit_compile = jit_compile
        self.reduce_retracing = bool(reduce_retracing)
        self._entries: dict[Any, _Entry] = {}
        self._lock = threading.RLock()
        self._trace_count = 0
        self._bound_instance: Any = None
        functools.update_wrapper(self, python_function)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        # Methods: bind like a function, keeping one Function (and cache) per instance.
        if instance is None:
            return self
        cache = instance.__dict__.setdefault("_tapejax_functions", {})
        bound = cache.get(id(self))
        if bound is None:
            bound = Function(functools.partial(self.python_function, instance), self.input_signature,
                             self.jit_compile, self.reduce_retracing)
            cache[id(self)] = bound
        return bound

    def experimental_get_tracing_count(self) -> int:
        """How many times the Python function has been traced (TF's method of the same name)."""
        return self._trace_count

    @property
    def trace_count(self) -> int:
        return self._trace_count

    # --- calling -------------------------------------------------------------------

    def _check_signature(self, args: tuple, kwargs: dict) -> None:
        sig = self.input_signature
        if sig is None:
            return
        if kwargs or len(args) != len(sig):
            raise TypeError(
                f"{getattr(self.python_function, '__name__', 'function')} has an input_signature of "
                f"{len(sig)} positional tensors; got {len(args)} positional and {len(kwargs)} keyword arguments."
            )
        for i, (a, spec) in enumerate(zip(args, sig)):
            if not spec.is_compatible_with(a):
                v = a._value if _is_leaf(a) else np.asarray(a)
                raise TypeError(
                    f"Argument {i} ({TensorShape(v.shape)}, {v.dtype}) is not compatible with the input_signature "
                    f"{spec!r}. Pass a tensor of that dtype and a compatible shape."
                )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _core.state.tracing or _core.state.recording or _core.state.accumulators:
            # Inside another step's trace, inline. Under an eager tape that records,
            # run the Python so that tape sees every op (replays are still compiled).
            return self.python_function(*args, **kwargs)
        self._check_signature(args, kwargs)
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_leaf)
        key_parts = []
        arrays = []
        for x in leaves:
            if isinstance(x, VariableBase):
                key_parts.append(("V", x._uid))
            elif isinstance(x, Tensor | np.ndarray | jax.Array):
                v = x._value if isinstance(x, Tensor) else x
                key_parts.append(("T", tuple(v.shape), np.dtype(v.dtype)))
                arrays.append(v)
            else:
                try:
                    hash(x)
                    key_parts.append(("P", type(x), x))
                except TypeError:
                    key_parts.append(("O", id(x)))
        key = (treedef, tuple(key_parts))
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
        return self._run(entry, leaves, treedef, arrays)

    def _rebuild(self, leaves: list, treedef: Any, arrays: list) -> tuple:
        it = iter(arrays)
        out = []
        for x in leaves:
            if isinstance(x, Tensor | np.ndarray | jax.Array):
                out.append(Tensor(next(it)))
            else:
                out.append(x)
        args, kwargs = jax.tree_util.tree_unflatten(treedef, out)
        return args, kwargs

    def _make_pure(self, entry: _Entry, leaves: list, treedef: Any) -> Callable:
        variables = list(entry.variables)

        def pure(var_vals: list, arrays: list) -> tuple:
            cap = _Capture({v._uid for v in variables}, trace=True)
            # The traced values are bound on this thread only (``state.bound``), never
            # stored in the variables: another thread using them meanwhile sees real values.
            saved_bound = _core.state.bound
            bound = _core.state.bound = {v._uid: val for v, val in zip(variables, var_vals)}
            _core.state.tracing.append(cap)
            try:
                args, kwargs = self._rebuild(leaves, treedef, arrays)
                out = self.python_function(*args, **kwargs)
                new_vals = [bound[v._uid] for v in variables]
            finally:
                _core.state.tracing.pop()
                _core.state.bound = saved_bound
                for v, o in cap.saved.values():
                    v._v = o
            if cap.touched:
                raise _Retrace(list(cap.touched.values()))
            out_leaves, out_tree = jax.tree_util.tree_flatten(out, is_leaf=_is_leaf)
            dyn = []
            static = []
            for x in out_leaves:
                if isinstance(x, Tensor | VariableBase):
                    static.append(("T",))
                    dyn.append(x._v if isinstance(x, VariableBase) else x._value)
                elif isinstance(x, jax.Array):
                    static.append(("A",))
                    dyn.append(x)
                else:
                    static.append(("P", x))
            assigned = tuple(i for i, (a, b) in enumerate(zip(var_vals, new_vals)) if a is not b)
            entry.assigned = assigned
            entry.out_spec = (out_tree, static)
            # Counted once the trace completes: a trace redone to capture a newly seen
            # variable is one trace to the user (its Python may still run twice).
            self._trace_count += 1
            return dyn, [new_vals[i] for i in assigned]

        return jax.jit(pure)

    def _run(self, entry: _Entry, leaves: list, treedef: Any, arrays: list) -> Any:
        while True:
            if entry.jitted is None:
                entry.jitted = self._make_pure(entry, leaves, treedef)
            try:
                dyn, new = entry.jitted([v._v for v in entry.variables], arrays)
                break
            except _Retrace as r:
                known = {v._uid for v in entry.variables}
                entry.variables += [v for v in r.variables if v._uid not in known]
                entry.jitted = None
            except _VariableCreated:
                entry.jitted = None
                if entry.created_once:
                    raise ValueError(
                        "tapejax.function only supports variables created on the first call (like tf.function's "
                        "singleton tf.Variables). Create the variable once, outside the function or on the first "
                        "call only."
                    ) from None
                entry.created_once = True
                return self._eager_first_call(entry, leaves, treedef, arrays)
            except (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                    jax.errors.TracerArrayConversionError, jax.errors.TracerIntegerConversionError) as e:
                raise TypeError(
                    "A tapejax.function used the value of a tensor in Python control flow (if/while/bool/float) "
                    "while tracing. tapejax has no autograph: write the branch with tf.where / jnp.where, move "
                    "the check outside the function, or call the function undecorated. Original error: "
                    f"{e}"
                ) from e
        for i, val in zip(entry.assigned, new):
            entry.variables[i]._value = val
        out_tree, static = entry.out_spec
        it = iter(dyn)
        outs = [Tensor(next(it)) if s[0] == "T" else next(it) if s[0] == "A" else s[1] for s in static]
        return jax.tree_util.tree_unflatten(out_tree, outs)

    def _eager_first_call(self, entry: _Entry, leaves: list, treedef: Any, arrays: list) -> Any:
        cap = _Capture({v._uid for v in entry.variables}, trace=False)
        _core.state.tracing.append(cap)
        try:
            args, kwargs = self._rebuild(leaves, treedef, arrays)
            out = self.python_function(*args, **kwargs)
        finally:
            _core.state.tracing.pop()
        known = {v._uid for v in entry.variables}
        entry.variables += [v for v in cap.touched.values() if v._uid not in known]
        return out


def function(func: Callable | None = None, input_signature: Any = None, autograph: bool = True,
             jit_compile: Any = None, reduce_retracing: bool = False, experimental_relax_shapes: Any = None,
             name: str | None = None, **unused: Any) -> Any:
    """Compile a TF-style function (tape, gradients, variable updates) with ``jax.jit``.

    Used as ``@tapejax.function`` or ``@tapejax.function(input_signature=[...])``.
    ``autograph`` is accepted and ignored (tapejax does not rewrite Python control
    flow); ``jit_compile`` is accepted (XLA always compiles); ``reduce_retracing``
    is accepted, but XLA still compiles once per concrete shape.

    Example:
        >>> import tapejax as tf
        >>> @tf.function
        ... def square_grad(x):
        ...     with tf.GradientTape() as t:
        ...         t.watch(x)
        ...         y = x * x
        ...     return t.gradient(y, x)
        >>> print(square_grad(tf.constant(3.0)))
        tf.Tensor(6.0, shape=(), dtype=float32)
    """

    def wrap(f: Callable) -> Function:
        return Function(f, input_signature, jit_compile, reduce_retracing or bool(experimental_relax_shapes), name)

    return wrap if func is None else wrap(func)
