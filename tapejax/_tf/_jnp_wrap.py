"""One generic wrapper that puts any ``jax.numpy``-style function on the tape.

``wrap(fn, name)`` returns a function that takes Tensors, Variables, arrays and
Python values in any nesting. Its arguments are flattened with
``jax.tree_util``:

* Tensor and Variable leaves are *data*: their values are the inputs the tape
  records (a Variable is read, so a tape may watch it);
* array leaves (``jax.Array``, ``np.ndarray``, NumPy scalars) are data too, as
  constants;
* every other leaf (Python numbers, strings, dtypes, callables, None, ...) is
  *static*: part of the recorded primitive's parameters, so the replay
  specialises on it exactly as ``jax.jit`` specialises on a closed-over value.

Each wrapped function has one ``Primitive`` whose impl rebuilds the call from
``(treedef, static layout)`` and returns the flattened outputs. Array outputs
come back as Tensors in the function's own output structure (tuples,
namedtuples, ...); integer and bool outputs (``argsort``, ``isnan``) are never
watched, so nothing differentiates through them. Results that are not arrays
(``jnp.shape``, ``jnp.result_type``) are returned unchanged.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .._core._recorder import Primitive, Tensor, VariableBase, read_variable, record, state
from .._ops._dtypes import DType

__all__ = ["wrap", "wrap_namespace"]


class _Data:
    """The marker for a data position in a call's static layout."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<data>"


_DATA = _Data()


class _Slice:
    # slice objects are unhashable before Python 3.12; the layout must be hashable.
    __slots__ = ("v",)

    def __init__(self, s: slice):
        self.v = (s.start, s.stop, s.step)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Slice) and other.v == self.v

    def __hash__(self) -> int:
        return hash(("slice",) + self.v)

    def value(self) -> slice:
        return slice(*self.v)


class _ById:
    # Any other unhashable static value: keyed by identity (the replay cache then
    # specialises on that very object, as jit does for a closure).
    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ById) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def value(self) -> Any:
        return self.obj


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


def _is_data(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase | jax.Array | np.ndarray | np.generic)


def _freeze(x: Any) -> Any:
    if isinstance(x, DType):
        return x._np
    if isinstance(x, slice):
        return _Slice(x)
    try:
        hash(x)
    except TypeError:
        return _ById(x)
    return x


def _thaw(x: Any) -> Any:
    return x.value() if isinstance(x, _Slice | _ById) else x


def _rebuild(fn: Callable, data: tuple, treedef: Any, layout: tuple) -> tuple:
    it = iter(data)
    leaves = [next(it) if s is _DATA else _thaw(s) for s in layout]
    args, kwargs = jax.tree_util.tree_unflatten(treedef, leaves)
    return fn(*args, **kwargs)


def _is_array_out(x: Any) -> bool:
    return isinstance(x, jax.Array)


def wrap(fn: Callable, name: str) -> Callable:
    """``fn`` recorded on the tape: one primitive, the call rebuilt from its static layout."""

    def impl(*data: Any, treedef: Any, layout: tuple) -> tuple:
        out = _rebuild(fn, data, treedef, layout)
        return tuple(jax.tree_util.tree_leaves(out))

    p = Primitive(f"jnp.{name}", impl, differentiable=True, multiple_results=True)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_leaf)
        layout = []
        vals = []
        ids: list = []
        recording = bool(state.recording)
        for leaf in leaves:
            if _is_data(leaf):
                layout.append(_DATA)
                if isinstance(leaf, Tensor):
                    ids.append(leaf._id)
                    vals.append(leaf._value)
                elif isinstance(leaf, VariableBase):
                    if recording:
                        t = read_variable(leaf)
                        ids.append(t._id)
                        vals.append(t._value)
                    else:
                        ids.append(None)
                        vals.append(leaf._value)
                else:
                    ids.append(None)
                    vals.append(leaf)
            else:
                layout.append(_freeze(leaf))
        layout_t = tuple(layout)
        out = _rebuild(fn, tuple(vals), treedef, layout_t)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        if not out_leaves or not all(_is_array_out(o) for o in out_leaves):
            # Not an array result (a shape, a dtype, a bool, a callable): returned as is,
            # with any arrays in it as (unrecorded) tensors.
            if out_leaves and any(_is_array_out(o) for o in out_leaves):
                return jax.tree_util.tree_unflatten(out_tree, [Tensor(o) if _is_array_out(o) else o for o in out_leaves])
            return out
        outs = [Tensor(o) for o in out_leaves]
        if recording and any(i is not None for i in ids):
            record(p, {"treedef": treedef, "layout": layout_t}, tuple(ids), tuple(vals), outs)
        return jax.tree_util.tree_unflatten(out_tree, outs)

    wrapper.__name__ = getattr(fn, "__name__", name.rsplit(".", 1)[-1])
    wrapper.__qualname__ = wrapper.__name__
    wrapper.__doc__ = (f"``{name}`` recorded on the tape (see ``tapejax.numpy``).\n\n" + (inspect.getdoc(fn) or ""))
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    wrapper.__module__ = "tapejax.numpy"
    wrapper._tapejax_primitive = p  # type: ignore[attr-defined]
    return wrapper


class _UfuncWrapper:
    """A ``jnp.ufunc`` (``jnp.add``...) with its call and its methods each recorded on the tape."""

    def __init__(self, uf: Any, name: str):
        self._uf = uf
        self._call = wrap(uf.__call__, name)
        for m in ("reduce", "accumulate", "outer", "reduceat", "at"):
            if hasattr(uf, m):
                setattr(self, m, wrap(getattr(uf, m), f"{name}.{m}"))
        self.__name__ = name.rsplit(".", 1)[-1]
        self.__doc__ = f"``{name}`` recorded on the tape (a ufunc: also .reduce, .accumulate, .outer).\n\n" + (inspect.getdoc(uf) or "")
        for a in ("nin", "nout", "nargs", "identity"):
            if hasattr(uf, a):
                setattr(self, a, getattr(uf, a))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tapejax.numpy ufunc {self.__name__}>"


def _wrappable(obj: Any) -> bool:
    if isinstance(obj, type | types.ModuleType):
        return False
    return callable(obj)


def wrap_namespace(module: Any, prefix: str) -> dict:
    """``{name: wrapped}`` for every public callable of ``module``; other attributes pass through."""
    out: dict = {}
    for n in dir(module):
        if n.startswith("_"):
            continue
        obj = getattr(module, n)
        if isinstance(obj, types.ModuleType):
            continue
        if type(obj).__name__ == "ufunc" and hasattr(obj, "reduce"):
            out[n] = _UfuncWrapper(obj, f"{prefix}{n}")
        elif _wrappable(obj):
            out[n] = wrap(obj, f"{prefix}{n}")
        else:
            out[n] = obj
    return out
