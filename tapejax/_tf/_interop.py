"""JAX interop: TF-style functions as pure JAX functions (``to_jax``), JAX functions as tape ops (``from_jax``).

The two directions of the boundary between the tape and JAX's own transformations:

* ``to_jax(fn)``: ``fn`` written with tapejax ops, called with arrays, returns arrays. Its
  arguments become Tensors (so ``x.shape``, ``tf.reduce_sum(x)``, ``x @ w`` read as in TF),
  its Tensor/Variable results become arrays. JAX sees only arrays, so ``jax.jit``,
  ``jax.grad``, ``jax.vmap`` and shardings compose with it.
* ``from_jax(fn)``: a function of JAX arrays (a flax/equinox model's apply, a
  hand-written ``jnp`` function) becomes one recorded op, differentiable on the tape.

Without ``to_jax``, JAX meets a tapejax Tensor as a function's *result* (``jax.grad(f)``
where ``f`` returns ``tf.reduce_sum(...)``) or as a ``jax.lax`` argument, and cannot
abstract it; ``install_abstractify_error`` replaces JAX's generic message with one that
names ``to_jax``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import numpy as np

from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase, attach
from ._jnp_wrap import wrap

__all__ = ["from_jax", "to_jax"]


def _is_array(x: Any) -> bool:
    return isinstance(x, jax.Array | np.ndarray | np.generic)


class _NoAssign:
    """Variable hooks while a ``to_jax`` function runs under a JAX transformation.

    Reads pass through to an enclosing ``tapejax.function`` capture (if any); an assign would
    store a JAX tracer in the variable, which outlives the transformation, so it raises.
    """

    def __init__(self, outer: Any):
        self.outer = outer

    def read(self, var: VariableBase) -> None:
        if self.outer is not None:
            self.outer.read(var)

    def created(self, var: VariableBase) -> None:
        if self.outer is not None:
            self.outer.created(var)

    def write(self, var: VariableBase) -> None:
        raise ValueError(
            f"A function given to tapejax.to_jax assigned the variable {getattr(var, 'name', '?')!r} while running "
            "under a JAX transformation (jax.jit, jax.grad, jax.vmap...): the new value would be a JAX tracer that "
            "outlives the transformation. Return the new value from the function and assign it outside, or compile "
            "the stateful step with tapejax.function instead."
        )


def to_jax(fn: Callable) -> Callable:
    """``fn`` (written with tapejax ops) as a pure JAX function of arrays.

    Array arguments (at any nesting) arrive in ``fn`` as ``tf.Tensor``; Tensor and
    Variable results leave as ``jax.Array``. The result composes with ``jax.jit``,
    ``jax.grad``, ``jax.vmap`` and shardings. Variables that ``fn`` reads are
    closed over: their value at call (or trace) time is used, as for any Python
    global in JAX; pass a value as an argument to differentiate with respect to it.
    Assigning a variable while a JAX transformation traces ``fn`` raises
    ``ValueError`` (use ``tapejax.function`` for stateful steps).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import tapejax as tf
        >>> def loss(w, x):
        ...     return tf.reduce_sum(tf.square(tf.matmul(x, w)))
        >>> g = jax.grad(tf.to_jax(loss))(jnp.ones((2, 1)), jnp.ones((3, 2)))
        >>> g.shape, float(g[0, 0])
        ((2, 1), 12.0)
    """

    @functools.wraps(fn)
    def pure(*args: Any, **kwargs: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs), is_leaf=lambda x: isinstance(x, Tensor | VariableBase))
        traced = any(isinstance(x, jax.core.Tracer) for x in leaves)
        leaves = [Tensor(x) if _is_array(x) else x for x in leaves]
        args2, kwargs2 = jax.tree_util.tree_unflatten(treedef, leaves)
        st = _core.state
        guard = _NoAssign(st.tracing[-1] if st.tracing else None) if traced else None
        if guard is not None:
            st.tracing.append(guard)
        try:
            out = fn(*args2, **kwargs2)
        finally:
            if guard is not None:
                st.tracing.remove(guard)
        return jax.tree_util.tree_map(lambda t: t._value if isinstance(t, Tensor | VariableBase) else t, out,
                                      is_leaf=lambda x: isinstance(x, Tensor | VariableBase))

    pure.__wrapped__ = fn
    return pure


def from_jax(fn: Callable, name: str | None = None) -> Callable:
    """A JAX function (of arrays) as one op on the tape.

    Tensors and Variables among the arguments (at any nesting) are the op's data
    inputs, recorded where watched; arrays are constants; every other argument is
    static. Array results come back as Tensors in ``fn``'s output structure. The
    gradient is JAX's (``jax.vjp`` of ``fn``), so a flax/equinox model's apply, or
    any ``jnp`` code, is differentiable by ``tf.GradientTape``, nested tapes and
    jacobians.

    Example:
        >>> import jax.numpy as jnp
        >>> import tapejax as tf
        >>> softplus = tf.from_jax(lambda x: jnp.logaddexp(x, 0.0))
        >>> x = tf.constant([0.0, 1.0])
        >>> with tf.GradientTape() as g:
        ...     g.watch(x)
        ...     y = tf.reduce_sum(softplus(x))
        >>> print(g.gradient(y, x))
        tf.Tensor([0.5       0.7310586], shape=(2,), dtype=float32)
    """
    if not callable(fn):
        raise TypeError(f"tapejax.from_jax expects a function of JAX arrays; got {type(fn).__name__}.")
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    w = wrap(fn, label)
    w.__module__ = getattr(fn, "__module__", None) or "tapejax"
    w.__doc__ = f"``{label}`` (a JAX function) recorded on the tape by ``tapejax.from_jax``."
    return w


# ---- messages where JAX meets a Tensor it cannot use -------------------------------------------


def _abstractify_error(x: Any) -> Any:
    kind = "Variable" if isinstance(x, VariableBase) else "Tensor"
    raise ValueError(
        f"JAX received a tapejax {kind} where it needs a JAX array (a function transformed by jax.grad/jax.vjp "
        f"returned it, or it was passed to a jax.lax function). Wrap the TF-style function with tapejax.to_jax(fn) "
        f"(arrays in, arrays out: composes with jax.jit/grad/vmap), or pass the array: jnp.asarray(x) or x.numpy(). "
        f"To run JAX code on the tape instead, wrap it with tapejax.from_jax. Got: {x!r}"
    )


def _jax_array_with_warning(self: Tensor) -> Any:
    if _core.state.recording and not _warned_unrecorded:
        warn_unrecorded_conversion(self)
    return self._value


def install() -> None:
    """Called once by the tf surface: the messages below, and the tape warning on ``__jax_array__``."""
    install_abstractify_error()
    attach(Tensor, __jax_array__=_jax_array_with_warning)


def install_abstractify_error() -> None:
    """Make JAX's abstractification of a Tensor/Variable raise a ValueError that names ``to_jax``.

    JAX raises ``ValueError`` there anyway (objects with ``__jax_array__`` are no longer
    abstracted); the registration only changes the message. Skipped silently if a future
    JAX moves the table.
    """
    try:
        from jax._src import core as _jcore

        table = _jcore.pytype_aval_mappings
    except (ImportError, AttributeError):  # pragma: no cover - depends on JAX internals
        return
    table.setdefault(Tensor, _abstractify_error)
    table.setdefault(VariableBase, _abstractify_error)


_warned_unrecorded = False


def warn_unrecorded_conversion(t: Tensor) -> None:
    """Once per process: a watched Tensor turned into a JAX array (by jnp or a JAX library) inside a tape."""
    global _warned_unrecorded
    if _warned_unrecorded:
        return
    # JAX rebuilds a Tensor argument from its pytree leaves before converting it (a new
    # identity), so whether it was watched cannot be known here: any floating tensor
    # converted while a tape records is reported.
    if not _core.state.recording or not jax.numpy.issubdtype(t._value.dtype, jax.numpy.inexact):
        return
    _warned_unrecorded = True
    warnings.warn(
        "A tf.Tensor was converted to a JAX array while a GradientTape records (by jax.numpy or a JAX library "
        "such as flax or equinox): operations on the array are not recorded, so gradients through them will be "
        "None. Wrap the JAX function with tapejax.from_jax(fn) to record it as one op (or use tapejax.numpy).",
        UserWarning,
        stacklevel=_user_stacklevel(),
    )


def _user_stacklevel() -> int:
    """The stacklevel of the first frame outside JAX and tapejax (the user's line)."""
    import os
    import sys

    skip = (os.path.dirname(jax.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    f: Any = sys._getframe(1)
    level = 1
    while f is not None and f.f_code.co_filename.startswith(skip):
        f, level = f.f_back, level + 1
    return level
