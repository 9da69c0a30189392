"""Nested elements: tuples (namedtuples too), dicts and leaves, as TF's ``tf.nest`` sees them.

A dataset element is kept as a structure of NumPy arrays: slicing, stacking and
shuffling on the host cost microseconds, where a jax array would cost a dispatch
per element. It becomes tapejax tensors only where the user sees it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from .. import errors
from .._core._recorder import Tensor, VariableBase, state
from .._tf import _surface as tf


def _is_tuple(x: Any) -> bool:
    # A TensorShape is a tuple subclass but a leaf of a structure of shapes.
    return isinstance(x, tuple) and not isinstance(x, tf.TensorShape)


def flatten(s: Any) -> list:
    if isinstance(s, dict):
        # TF's nest orders dict entries by sorted key.
        return [x for k in sorted(s) for x in flatten(s[k])]
    if _is_tuple(s):
        return [x for v in s for x in flatten(v)]
    return [s]


def pack_as(s: Any, flat: list) -> Any:
    it = iter(flat)

    def go(t: Any) -> Any:
        if isinstance(t, dict):
            vals = {k: go(t[k]) for k in sorted(t)}
            return type(t)((k, vals[k]) for k in t) if type(t) is not dict else {k: vals[k] for k in t}
        if _is_tuple(t):
            items = [go(v) for v in t]
            return type(t)(*items) if hasattr(t, "_fields") else tuple(items)
        return next(it)

    return go(s)


def map_structure(fn: Callable, s: Any, *rest: Any) -> Any:
    return pack_as(s, [fn(*xs) for xs in zip(flatten(s), *(flatten(r) for r in rest))])


def same_structure(a: Any, b: Any) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and sorted(a) == sorted(b) and all(
            same_structure(a[k], b[k]) for k in a)
    if _is_tuple(a) or _is_tuple(b):
        return _is_tuple(a) and _is_tuple(b) and len(a) == len(b) and all(
            same_structure(x, y) for x, y in zip(a, b))
    return True


def normalize(value: Any) -> Any:
    """A user function's result as TF reads it: a top-level list becomes a tuple, tensors and
    NumPy values stay leaves."""
    if isinstance(value, list):
        value = tuple(value)
    return value


def is_dataset(value: Any) -> bool:
    # A dataset as an element (``window``'s): carried as it is, never converted.
    return hasattr(value, "_elements") and hasattr(value, "element_spec")


def to_numpy(value: Any, dtype: Any = None) -> np.ndarray:
    """One leaf as a NumPy array under tapejax's dtype rules (the x64 rule included)."""
    if isinstance(value, np.ndarray) and dtype is None and value.dtype.kind in "biuf" and value.dtype.itemsize <= 4:
        return value
    if is_dataset(value):
        return value
    if isinstance(value, Tensor | VariableBase):
        v = value._value if isinstance(value, Tensor) else value._v
        if isinstance(v, jax.core.Tracer):
            raise TypeError(
                "tf.data builds datasets from concrete values, and this tensor is symbolic (traced inside a "
                "tapejax.function). Build the dataset outside the function and pass its elements or batches in "
                "as arguments."
            )
        if dtype is not None and tf.as_dtype(dtype)._np != v.dtype:
            raise TypeError(f"Expected a value of dtype {tf.as_dtype(dtype).name}, got {v.dtype}: cast it with tf.cast.")
        return np.asarray(v)
    if isinstance(value, str | bytes) or (isinstance(value, list | np.ndarray) and _has_strings(value)):
        raise TypeError(
            "tapejax has no string tensors yet (tf.string): a dataset of strings is not supported. "
            "Encode them as integer ids (for example with a vocabulary dict) before building the dataset."
        )
    return np.asarray(tf.convert_to_tensor(value, dtype=dtype)._value)


def _has_strings(v: Any) -> bool:
    a = np.asarray(v, dtype=object) if isinstance(v, list) else v
    return a.dtype.kind in "USO" and a.size > 0 and isinstance(a.flat[0], str | bytes)


def spec_of(arr: Any) -> Any:
    if is_dataset(arr):
        return DATASET_SPEC[0](arr.element_spec)
    return tf.TensorSpec(arr.shape, tf.as_dtype(arr.dtype))


# ``DatasetSpec``, set by ``_dataset`` (which imports this module).
DATASET_SPEC: list = []


def most_specific_compatible(a: Any, b: Any) -> Any:
    """The TensorSpec both ``a`` and ``b`` satisfy (None where their dims differ)."""
    if a.shape.rank is None or b.shape.rank is None or a.shape.rank != b.shape.rank:
        return tf.TensorSpec(None, a.dtype)
    dims = [x if x == y else None for x, y in zip(a.shape.as_list(), b.shape.as_list())]
    return tf.TensorSpec(dims, a.dtype)


def to_tensors(element: Any) -> Any:
    return map_structure(lambda a: Tensor(jnp.asarray(a)) if isinstance(a, np.ndarray) else a, element)


def to_numpy_out(element: Any) -> Any:
    # as_numpy_iterator gives NumPy scalars for scalar components, as TF does.
    def leaf(a: Any) -> Any:
        if not isinstance(a, np.ndarray):
            raise TypeError(f"`tf.data.Dataset.as_numpy_iterator()` is not supported for datasets that produce "
                            f"values of type {type(a)}")
        return a[()] if a.ndim == 0 else a

    return map_structure(leaf, element)


def from_user(value: Any) -> Any:
    """The result of a user function (map, interleave's element, reduce) as a structure of arrays."""
    value = normalize(value)
    if isinstance(value, tuple | dict):
        return map_structure(to_numpy, value)
    return to_numpy(value)


class isolated:
    """Context: the user's function runs as if in TF's dataset graph: no tape or accumulator
    records it, no ``tapejax.function`` trace captures its variables, and inside such a trace
    (a dataset iterated in a compiled step) it computes concrete values, not traced ones."""

    __slots__ = ("concrete", "saved")

    def __enter__(self) -> None:
        st = state
        self.saved = (st.recording, st.accumulators, st.order, st.tracing, st.bound)
        # Only under a trace: the context costs a few microseconds per element.
        self.concrete = jax.ensure_compile_time_eval() if st.tracing else None
        st.recording, st.accumulators, st.order, st.tracing, st.bound = [], [], [], [], None
        if self.concrete is not None:
            self.concrete.__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.concrete is not None:
                self.concrete.__exit__(*exc)
        finally:
            state.recording, state.accumulators, state.order, state.tracing, state.bound = self.saved


def call(fn: Callable, element: Any) -> Any:
    """``fn`` on an element as TF's ``map`` calls it: a tuple unpacks into arguments."""
    args = to_tensors(element)
    with isolated():
        out = fn(*args) if isinstance(args, tuple) and not hasattr(args, "_fields") else fn(args)
    return out


class Applier:
    """A user's element function as TF runs it: traced once and compiled (``tapejax.function``,
    so a variable it reads is read on every call and its Python side effects happen at trace
    time), or run eagerly per element when it needs concrete values or its input has unknown
    dimensions (a compile per shape would cost more than it saves)."""

    def __init__(self, fn: Callable, compiled: bool, like: Any = None):
        self.fn = fn
        self.compiled = tf.function(fn) if compiled else None
        # The traced result's structure: a compiled call returns dicts in jax's (sorted) key
        # order, TF keeps the order the function built them in.
        self.like = like
        # One compiled call at a time: concurrent calls of one tapejax.function race on the state
        # it carries between calls (tf.random's key: two threads would draw the same numbers).
        self.lock = threading.Lock()

    def __call__(self, element: Any) -> Any:
        compiled = self.compiled
        if compiled is None:
            return call(self.fn, element)
        try:
            with self.lock, isolated():
                # NumPy arrays go straight in: jit moves them to the device itself.
                if isinstance(element, tuple) and not hasattr(element, "_fields"):
                    out = compiled(*element)
                else:
                    out = compiled(element)
        except (TypeError, AttributeError, jax.errors.JAXTypeError):
            # The function needs concrete values (``.numpy()``, ``if x > 0``): run it eagerly
            # from now on. If it fails eagerly too, that error is the user's.
            out = call(self.fn, element)
            self.compiled = None
            return out
        out = normalize(out)
        if self.like is not None and isinstance(out, dict | tuple) and same_structure(self.like, out):
            out = pack_as(self.like, flatten(out))
        return out


def trace_spec(fn: Callable, spec: Any) -> Any:
    """The element_spec of ``fn``'s result, found abstractly (``jax.eval_shape``) as TF traces a
    ``map`` function once. Unknown dimensions are tried at two sizes; a dimension whose result
    differs is unknown. Returns None when the function cannot be traced abstractly."""

    returned: list = []

    def shapes(fill: int) -> Any:
        def pure(*arrays: Any) -> Any:
            element = pack_as(spec, [Tensor(a) for a in arrays])
            with isolated():
                out = fn(*element) if isinstance(element, tuple) and not hasattr(element, "_fields") else fn(element)
            out = normalize(out)
            returned[:] = [out]
            return map_structure(lambda t: t._value if isinstance(t, Tensor) else jnp.asarray(t), out)

        args = [jax.ShapeDtypeStruct(tuple(fill if d is None else d for d in s.shape.as_list()), s.dtype._np)
                for s in flatten(spec)]
        return jax.eval_shape(pure, *args)

    leaves = flatten(spec)
    if any(not isinstance(s, tf.TensorSpec) or s.shape.rank is None for s in leaves):
        return None
    try:
        a = shapes(2)
        unknown = any(d is None for s in leaves for d in s.shape.as_list())
        b = shapes(3) if unknown else a
    except (TypeError, ValueError, errors.OpError) as e:
        # A Python-level mistake (wrong arity) is the user's error, raised where TF raises it.
        if isinstance(e, TypeError) and "positional argument" in str(e):
            raise
        return None
    except Exception:  # noqa: BLE001  (the function needs concrete values: find its spec when it runs)
        return None
    def merge(x: Any, y: Any) -> Any:
        if len(x.shape) != len(y.shape):
            return tf.TensorSpec(None, tf.as_dtype(x.dtype))
        return tf.TensorSpec([p if p == q else None for p, q in zip(x.shape, y.shape)], tf.as_dtype(x.dtype))

    # jax orders dict keys; TF keeps the order the function returned them in.
    return pack_as(returned[0], flatten(map_structure(merge, a, b)))



__all__ = [
    "call",
    "flatten",
    "from_user",
    "isolated",
    "map_structure",
    "pack_as",
    "same_structure",
    "spec_of",
    "to_numpy",
    "to_tensors",
    "trace_spec",
]
