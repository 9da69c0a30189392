"""Composite tensors: ``tf.sparse.SparseTensor`` and ``tf.IndexedSlices``.

Both are containers of component tensors (and JAX pytrees of them, so ``watch``,
``tf.nest(expand_composites=True)`` and compiled steps see the components, as TF
does). Index components are int32 unless x64 is on (TF uses int64; the x64 rule).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core._recorder import Tensor, VariableBase
from .._ops._dtypes import x64_enabled
from .._ops._machinery import EXPORTS
from .._ops._tensor import (
    TensorShape,
    _concrete_or_none,
    convert_to_tensor,
    register_composite,
)
from . import _nest

__all__ = ["IndexedSlices", "SparseTensor"]


def _index_dtype() -> Any:
    return jnp.int64 if x64_enabled() else jnp.int32


def _as_index(x: Any, what: str) -> Tensor:
    if isinstance(x, Tensor | VariableBase):
        t = convert_to_tensor(x)
        if t.dtype.is_integer:
            return t
        raise ValueError(f"{what}: expected an integer tensor, got {t.dtype.name}")
    return Tensor(jnp.asarray(np.asarray(x), _index_dtype()))


def _text(t: Tensor) -> str:
    return str(t)


class SparseTensor:
    """A sparse tensor: ``values`` at ``indices`` of a dense tensor of ``dense_shape``.

    Example:
        >>> import tapejax as tf
        >>> st = tf.sparse.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.0, 2.0], dense_shape=[3, 4])
        >>> tf.sparse.to_dense(st).numpy().tolist()
        [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    """

    __slots__ = ("_dense_shape", "_indices", "_values")

    def __init__(self, indices: Any, values: Any, dense_shape: Any):
        ind = _as_index(indices, "indices")
        val = convert_to_tensor(values)
        shp = _as_index(dense_shape, "dense_shape")
        if ind._value.ndim != 2 or val._value.ndim != 1 or shp._value.ndim != 1:
            raise ValueError(f"SparseTensor needs indices of rank 2, values of rank 1 and dense_shape of rank 1, got "
                             f"{list(ind.shape)}, {list(val.shape)}, {list(shp.shape)}")
        if ind.shape[1] != shp.shape[0]:
            raise ValueError(f"Dimensions {ind.shape[1]} and {shp.shape[0]} are not compatible")
        if ind.shape[0] != val.shape[0]:
            raise ValueError(f"Dimensions {ind.shape[0]} and {val.shape[0]} are not compatible")
        self._indices, self._values, self._dense_shape = ind, val, shp

    @property
    def indices(self) -> Tensor:
        return self._indices

    @property
    def values(self) -> Tensor:
        return self._values

    @property
    def dense_shape(self) -> Tensor:
        return self._dense_shape

    @property
    def dtype(self) -> Any:
        return self._values.dtype

    @property
    def shape(self) -> TensorShape:
        c = _concrete_or_none(self._dense_shape._value)
        return TensorShape(None if c is None else [int(d) for d in c])

    def get_shape(self) -> TensorShape:
        return self.shape

    def with_values(self, new_values: Any) -> SparseTensor:
        return SparseTensor(self._indices, new_values, self._dense_shape)

    def __repr__(self) -> str:
        return (f"SparseTensor(indices={_text(self._indices)}, values={_text(self._values)}, "
                f"dense_shape={_text(self._dense_shape)})")

    __str__ = __repr__

    def __mul__(self, other: Any) -> SparseTensor:
        # TF: a sparse times a dense (or scalar) multiplies the stored values only.
        o = convert_to_tensor(other, dtype=self.dtype)
        if o._value.ndim:
            o = EXPORTS["gather_nd"](EXPORTS["broadcast_to"](o, self.shape.as_list()), self._indices)
        return self.with_values(self._values * o)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> SparseTensor:
        return self.with_values(self._values / convert_to_tensor(other, dtype=self.dtype))

    def __neg__(self) -> SparseTensor:
        return self.with_values(-self._values)

    def __hash__(self) -> int:
        return id(self)


class IndexedSlices:
    """Rows ``values`` at ``indices`` of a dense tensor (TF's sparse gradient form).

    ``tf.convert_to_tensor`` sums rows that share an index into a dense tensor.

    Example:
        >>> import tapejax as tf
        >>> s = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([0, 2]), tf.constant([3, 2]))
        >>> tf.convert_to_tensor(s).numpy().tolist()
        [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]
    """

    __slots__ = ("_dense_shape", "_indices", "_values")

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None):
        self._values = convert_to_tensor(values)
        self._indices = convert_to_tensor(indices)
        self._dense_shape = None if dense_shape is None else convert_to_tensor(dense_shape)

    @property
    def values(self) -> Tensor:
        return self._values

    @property
    def indices(self) -> Tensor:
        return self._indices

    @property
    def dense_shape(self) -> Tensor | None:
        return self._dense_shape

    @property
    def dtype(self) -> Any:
        return self._values.dtype

    @property
    def shape(self) -> TensorShape:
        if self._dense_shape is None:
            return TensorShape([None] + list(self._values.shape[1:]))
        c = _concrete_or_none(self._dense_shape._value)
        return TensorShape(None if c is None else [int(d) for d in c])

    def __str__(self) -> str:
        return (f"IndexedSlices(indices={_text(self._indices)}, values={_text(self._values)}"
                + (f", dense_shape={_text(self._dense_shape)})" if self._dense_shape is not None else ")"))

    def __neg__(self) -> IndexedSlices:
        return IndexedSlices(-self._values, self._indices, self._dense_shape)

    def __hash__(self) -> int:
        return id(self)


def _indexed_slices_to_dense(s: IndexedSlices) -> Tensor:
    if s._dense_shape is None:
        raise ValueError(f"Tensor conversion requested for IndexedSlices for argument `value` without dense_shape: {s!r}")
    c = _concrete_or_none(s._dense_shape._value)
    if c is None:
        raise ValueError("IndexedSlices with a traced dense_shape cannot be converted inside a compiled step.")
    return EXPORTS["math.unsorted_segment_sum"](s._values, s._indices, int(c[0]))


register_composite(SparseTensor, None)
register_composite(IndexedSlices, _indexed_slices_to_dense)

jax.tree_util.register_pytree_node(
    SparseTensor, lambda s: ((s._indices, s._values, s._dense_shape), None),
    lambda _, c: _sparse_from_components(*c))
jax.tree_util.register_pytree_node(
    IndexedSlices, lambda s: ((s._values, s._indices, s._dense_shape), None),
    lambda _, c: _slices_from_components(*c))


def _sparse_from_components(ind: Any, val: Any, shp: Any) -> SparseTensor:
    s = object.__new__(SparseTensor)
    s._indices, s._values, s._dense_shape = ind, val, shp
    return s


def _slices_from_components(val: Any, ind: Any, shp: Any) -> IndexedSlices:
    s = object.__new__(IndexedSlices)
    s._values, s._indices, s._dense_shape = val, ind, shp
    return s


_nest.register_composite(
    SparseTensor, lambda s: [s._indices, s._values, s._dense_shape],
    lambda s, c: _checked_sparse(s, *c))
_nest.register_composite(
    IndexedSlices, lambda s: [s._values, s._indices] + ([s._dense_shape] if s._dense_shape is not None else []),
    lambda s, c: _slices_from_components(c[0], c[1], c[2] if len(c) > 2 else None))


def _checked_sparse(old: SparseTensor, ind: Any, val: Any, shp: Any) -> SparseTensor:
    # TF checks the rebuilt components against the old TypeSpec's static shapes.
    for a, b in ((old._indices, ind), (old._values, val), (old._dense_shape, shp)):
        bs = getattr(b, "shape", None)
        if bs is not None and not TensorShape(a.shape).is_compatible_with(bs):
            raise ValueError(f"Shapes {TensorShape(bs)} and {a.shape} are not compatible")
    new_shape = _concrete_or_none(getattr(shp, "_value", shp))
    if new_shape is not None and not old.shape.is_compatible_with([int(d) for d in np.asarray(new_shape).reshape(-1)]):
        raise ValueError(f"Shapes {TensorShape([int(d) for d in np.asarray(new_shape).reshape(-1)])} and {old.shape} "
                         "are not compatible")
    return _sparse_from_components(ind, val, shp)
