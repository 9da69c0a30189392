"""``tf.random``: TF's seed semantics over ``jax.random`` keys that tapejax manages.

A global seed (``set_seed``) and an optional op seed decide the key, as in TF:
with neither, draws come from a process-wide key that advances on every call;
with a global seed, the sequence of draws is reproducible after ``set_seed``.
"""

from __future__ import annotations

import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._core import Tensor
from ._dtypes import as_dtype, check_width

__all__ = ["set_seed", "normal", "uniform"]

_lock = threading.Lock()
_state: dict[str, Any] = {"key": None, "global_seed": None, "counter": 0, "op_counts": {}}


def set_seed(seed: int) -> None:
    """Set the global random seed: the draws that follow become reproducible.

    Example:
        >>> import tapejax as tf
        >>> tf.random.set_seed(1); a = tf.random.normal((2,))
        >>> tf.random.set_seed(1); b = tf.random.normal((2,))
        >>> bool((a == b).numpy().all())
        True
    """
    with _lock:
        _state["global_seed"] = None if seed is None else int(seed)
        _state["key"] = None
        _state["counter"] = 0
        _state["op_counts"] = {}


def _next_key(seed: int | None) -> jax.Array:
    with _lock:
        g = _state["global_seed"]
        if seed is not None:
            # TF: an op seed repeats its sequence per (global seed, op seed) pair.
            n = _state["op_counts"].get(seed, 0)
            _state["op_counts"][seed] = n + 1
            base = jax.random.key(np.uint32(((g or 87654321) * 1000003 + int(seed)) & 0xFFFFFFFF))
            return jax.random.fold_in(base, n)
        if _state["key"] is None:
            s = g if g is not None else int(np.random.SeedSequence().entropy % (2**31))
            _state["key"] = jax.random.key(s)
        _state["key"], k = jax.random.split(_state["key"])
        return k


def _shape(shape: Any) -> tuple:
    if isinstance(shape, Tensor):
        shape = np.asarray(shape._value).tolist()
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


def _float(dtype: Any) -> Any:
    d = as_dtype(dtype)
    check_width(d._np, "Requested dtype")
    return d._np


def normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = "float32", seed: int | None = None, name: Any = None) -> Tensor:
    """Normal samples, as ``tf.random.normal``.

    Example:
        >>> import tapejax as tf
        >>> tf.random.normal((3,), seed=1).shape
        TensorShape([3])
    """
    d = _float(dtype)
    x = jax.random.normal(_next_key(seed), _shape(shape), d)
    return Tensor((x * jnp.asarray(stddev, d) + jnp.asarray(mean, d)).astype(d))


def uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = "float32", seed: int | None = None, name: Any = None) -> Tensor:
    """Uniform samples in ``[minval, maxval)``, as ``tf.random.uniform``."""
    d = as_dtype(dtype)
    check_width(d._np, "Requested dtype")
    k = _next_key(seed)
    if d.is_integer:
        if maxval is None:
            raise ValueError("Must specify maxval for integer dtype")
        return Tensor(jax.random.randint(k, _shape(shape), int(minval), int(maxval), d._np))
    hi = 1.0 if maxval is None else maxval
    return Tensor(jax.random.uniform(k, _shape(shape), d._np, float(minval), float(hi)))
