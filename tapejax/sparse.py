"""``tf.sparse``: ``SparseTensor`` and the ops that build, convert and combine it.

Dense conversions are differentiable with respect to ``values`` (scatter / gather ops on
the tape). Index checks (order, duplicates, bounds) run eagerly, as TF's kernels do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from . import errors
from ._core._recorder import Tensor
from ._ops._machinery import EXPORTS
from ._ops._tensor import convert_to_tensor
from ._tf._composite import SparseTensor, _index_dtype

__all__ = [
    "SparseTensor",
    "add",
    "expand_dims",
    "from_dense",
    "map_values",
    "reduce_sum",
    "reorder",
    "reshape",
    "sparse_dense_matmul",
    "to_dense",
    "transpose",
]


def _np_indices(sp: SparseTensor) -> np.ndarray:
    return np.asarray(sp.indices._value).astype(np.int64)


def _np_shape(sp: SparseTensor) -> list:
    return [int(d) for d in np.asarray(sp.dense_shape._value)]


def _check(sp: SparseTensor, op: str) -> None:
    ind, shape = _np_indices(sp), _np_shape(sp)
    for i in range(ind.shape[0]):
        row = ind[i]
        if np.any(row < 0) or np.any(row >= shape):
            raise errors.InvalidArgumentError(
                f"indices[{i}] = [{','.join(map(str, row))}] is out of bounds: need 0 <= index < [{','.join(map(str, shape))}] [Op:{op}]")
        if i:
            prev = tuple(ind[i - 1])
            if tuple(row) == prev:
                raise errors.InvalidArgumentError(f"indices[{i}] = [{','.join(map(str, row))}] is repeated [Op:{op}]")
            if tuple(row) < prev:
                raise errors.InvalidArgumentError(
                    f"indices[{i}] = [{','.join(map(str, row))}] is out of order. Many sparse ops require sorted indices.\n"
                    f"    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n [Op:{op}]")


def to_dense(sp_input: SparseTensor, default_value: Any = None, validate_indices: bool = True,
             name: str | None = None) -> Tensor:
    """The dense tensor (``default_value``, 0 by default, where nothing is stored).

    Example:
        >>> import tapejax as tf
        >>> tf.sparse.to_dense(tf.sparse.SparseTensor([[1]], [5.0], [3])).numpy().tolist()
        [0.0, 5.0, 0.0]
    """
    if not isinstance(sp_input, SparseTensor):
        raise TypeError(f"Input must be a SparseTensor, got {type(sp_input).__name__}.")
    if validate_indices:
        _check(sp_input, "SparseToDense")
    shape = _np_shape(sp_input)
    v = sp_input.values
    dv = 0 if default_value is None else default_value
    base = EXPORTS["fill"](shape, convert_to_tensor(dv, dtype=v.dtype))
    if sp_input.indices.shape[0] == 0:
        return base
    return EXPORTS["tensor_scatter_nd_update"](base, sp_input.indices, v)


def from_dense(tensor: Any, name: str | None = None) -> SparseTensor:
    """The non-zero entries of a dense tensor, in row-major order.

    Example:
        >>> import tapejax as tf
        >>> tf.sparse.from_dense(tf.constant([[0.0, 1.0], [2.0, 0.0]])).indices.numpy().tolist()
        [[0, 1], [1, 0]]
    """
    t = convert_to_tensor(tensor)
    a = np.asarray(t._value)
    nz = np.argwhere(a != (b"" if a.dtype == object else 0))
    idx = Tensor(jnp.asarray(nz.reshape(-1, a.ndim), _index_dtype()))
    values = EXPORTS["gather_nd"](t, idx) if nz.size else Tensor(jnp.zeros((0,), t._value.dtype))
    return SparseTensor(idx, values, Tensor(jnp.asarray(a.shape, _index_dtype())))


def reorder(sp_input: SparseTensor, name: str | None = None) -> SparseTensor:
    """The same sparse tensor with indices in row-major order.

    Example:
        >>> import tapejax as tf
        >>> tf.sparse.reorder(tf.sparse.SparseTensor([[1], [0]], [1.0, 2.0], [2])).values.numpy().tolist()
        [2.0, 1.0]
    """
    ind = _np_indices(sp_input)
    order = np.lexsort(ind.T[::-1]) if ind.size else np.arange(ind.shape[0])
    new_ind = Tensor(jnp.asarray(ind[order], sp_input.indices._value.dtype))
    values = EXPORTS["gather"](sp_input.values, Tensor(jnp.asarray(order, jnp.int32)))
    return SparseTensor(new_ind, values, sp_input.dense_shape)


def reduce_sum(sp_input: SparseTensor, axis: Any = None, keepdims: bool = False, output_is_sparse: bool = False,
               name: str | None = None) -> Any:
    """Sum over ``axis`` (all by default), as ``tf.sparse.reduce_sum``; a dense result.

    Example:
        >>> import tapejax as tf
        >>> float(tf.sparse.reduce_sum(tf.sparse.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [3, 4])))
        3.0
    """
    dense = EXPORTS["reduce_sum"](to_dense(sp_input, validate_indices=False), axis=axis, keepdims=keepdims)
    return from_dense(dense) if output_is_sparse else dense


def sparse_dense_matmul(sp_a: Any, b: Any, adjoint_a: bool = False, adjoint_b: bool = False,
                        name: str | None = None) -> Tensor:
    """``sp_a @ b`` with a sparse ``sp_a`` (or a sparse ``b``), as ``tf.sparse.sparse_dense_matmul``.

    Example:
        >>> import tapejax as tf
        >>> st = tf.sparse.SparseTensor([[0, 1]], [2.0], [2, 2])
        >>> tf.sparse.sparse_dense_matmul(st, tf.ones([2, 1])).numpy().tolist()
        [[2.0], [0.0]]
    """
    a = to_dense(sp_a, validate_indices=False) if isinstance(sp_a, SparseTensor) else sp_a
    bb = to_dense(b, validate_indices=False) if isinstance(b, SparseTensor) else b
    return EXPORTS["matmul"](a, bb, adjoint_a=adjoint_a, adjoint_b=adjoint_b)


def add(a: Any, b: Any, threshold: Any = 0, name: str | None = None) -> Any:
    """``a + b``: sparse if both are sparse, else dense, as ``tf.sparse.add``.

    Example:
        >>> import tapejax as tf
        >>> st = tf.sparse.SparseTensor([[0]], [1.0], [2])
        >>> tf.sparse.add(st, st).values.numpy().tolist()
        [2.0]
    """
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        ia, ib = _np_indices(a), _np_indices(b)
        keys = sorted({tuple(r) for r in ia} | {tuple(r) for r in ib})
        pos = {k: i for i, k in enumerate(keys)}
        seg_a = Tensor(jnp.asarray([pos[tuple(r)] for r in ia], jnp.int32))
        seg_b = Tensor(jnp.asarray([pos[tuple(r)] for r in ib], jnp.int32))
        seg = EXPORTS["math.unsorted_segment_sum"]
        vals = seg(a.values, seg_a, len(keys)) + seg(b.values, seg_b, len(keys))
        idx = Tensor(jnp.asarray(np.asarray(keys, np.int64).reshape(len(keys), -1), a.indices._value.dtype))
        return SparseTensor(idx, vals, a.dense_shape)
    da = to_dense(a, validate_indices=False) if isinstance(a, SparseTensor) else a
    db = to_dense(b, validate_indices=False) if isinstance(b, SparseTensor) else b
    return EXPORTS["add"](da, db)


def transpose(sp_input: SparseTensor, perm: Any = None, name: str | None = None) -> SparseTensor:
    """Permute the dimensions (reverse them by default), as ``tf.sparse.transpose``.

    Example:
        >>> import tapejax as tf
        >>> tf.sparse.transpose(tf.sparse.SparseTensor([[0, 1]], [1.0], [2, 3])).dense_shape.numpy().tolist()
        [3, 2]
    """
    ind, shape = _np_indices(sp_input), _np_shape(sp_input)
    p = list(range(len(shape)))[::-1] if perm is None else [int(x) for x in np.asarray(perm).reshape(-1)]
    new = SparseTensor(Tensor(jnp.asarray(ind[:, p], sp_input.indices._value.dtype)), sp_input.values,
                       Tensor(jnp.asarray([shape[i] for i in p], sp_input.dense_shape._value.dtype)))
    return reorder(new)


def map_values(op: Callable, *args: Any, **kwargs: Any) -> SparseTensor:
    """Apply ``op`` to the values of the sparse arguments (same indices), as ``tf.sparse.map_values``.

    Example:
        >>> import tapejax as tf
        >>> st = tf.sparse.SparseTensor([[0]], [3.0], [2])
        >>> tf.sparse.map_values(tf.square, st).values.numpy().tolist()
        [9.0]
    """
    sps = [a for a in args if isinstance(a, SparseTensor)]
    if not sps:
        raise ValueError("No SparseTensor in argument list of map_values")
    vals = [a.values if isinstance(a, SparseTensor) else a for a in args]
    return sps[0].with_values(op(*vals, **kwargs))


def expand_dims(sp_input: SparseTensor, axis: int | None = None, name: str | None = None) -> SparseTensor:
    """Insert a dimension of size 1 at ``axis``, as ``tf.sparse.expand_dims``.

    Example:
        >>> import tapejax as tf
        >>> tf.sparse.expand_dims(tf.sparse.SparseTensor([[1]], [1.0], [3]), 0).shape
        TensorShape([1, 3])
    """
    ind, shape = _np_indices(sp_input), _np_shape(sp_input)
    ax = int(axis if axis is not None else -1)
    ax = ax if ax >= 0 else len(shape) + 1 + ax
    new_ind = np.insert(ind, ax, 0, axis=1)
    return SparseTensor(Tensor(jnp.asarray(new_ind, sp_input.indices._value.dtype)), sp_input.values,
                        Tensor(jnp.asarray(shape[:ax] + [1] + shape[ax:], sp_input.dense_shape._value.dtype)))


def reshape(sp_input: SparseTensor, shape: Any, name: str | None = None) -> SparseTensor:
    """The same entries in a new dense shape (one dimension may be -1), as ``tf.sparse.reshape``.

    Example:
        >>> import tapejax as tf
        >>> tf.sparse.reshape(tf.sparse.SparseTensor([[1, 0]], [1.0], [2, 2]), [4]).indices.numpy().tolist()
        [[2]]
    """
    ind, old = _np_indices(sp_input), _np_shape(sp_input)
    new = [int(d) for d in np.asarray(shape).reshape(-1)]
    total = int(np.prod(old))
    if -1 in new:
        known = int(np.prod([d for d in new if d != -1]))
        new[new.index(-1)] = total // known if known else 0
    if int(np.prod(new)) != total:
        raise errors.InvalidArgumentError(f"Input to reshape is a SparseTensor with {total} dense values, but the "
                                          f"requested shape has {int(np.prod(new))}.")
    flat = np.ravel_multi_index(ind.T, old) if ind.size else np.zeros((0,), np.int64)
    new_ind = np.stack(np.unravel_index(flat, new), axis=1) if ind.size else np.zeros((0, len(new)), np.int64)
    return SparseTensor(Tensor(jnp.asarray(new_ind, sp_input.indices._value.dtype)), sp_input.values,
                        Tensor(jnp.asarray(new, sp_input.dense_shape._value.dtype)))


def _from_parts(ind: np.ndarray, values: Tensor, shape: list, like: SparseTensor) -> SparseTensor:
    it = like.indices._value.dtype
    return SparseTensor(Tensor(jnp.asarray(ind.reshape(-1, len(shape)), it)), values,
                        Tensor(jnp.asarray(shape, like.dense_shape._value.dtype)))


def _take(values: Tensor, keep: np.ndarray) -> Tensor:
    return EXPORTS["gather"](values, Tensor(jnp.asarray(keep, jnp.int32)))


def concat(axis: int, sp_inputs: list, expand_nonconcat_dims: bool = False, name: str | None = None) -> SparseTensor:
    """Concatenate sparse tensors along ``axis`` (the others must match), as ``tf.sparse.concat``.

    Example:
        >>> import tapejax as tf
        >>> a = tf.sparse.SparseTensor([[0, 0]], [1.0], [1, 2])
        >>> tf.sparse.concat(1, [a, a]).indices.numpy().tolist()
        [[0, 0], [0, 2]]
    """
    shapes = [_np_shape(s) for s in sp_inputs]
    rank = len(shapes[0])
    ax = int(axis) % rank
    if expand_nonconcat_dims:
        base = [max(s[d] for s in shapes) for d in range(rank)]
    else:
        base = list(shapes[0])
        for i, s in enumerate(shapes[1:], 1):
            for d in range(rank):
                if d != ax and s[d] != base[d]:
                    raise errors.InvalidArgumentError(
                        f"Input shapes must match: expected {base[d]} for dimension {d} but got {s[d]} at position {i}")
    parts, off = [], 0
    for s, shp in zip(sp_inputs, shapes):
        ind = _np_indices(s).copy()
        ind[:, ax] += off
        parts.append(ind)
        off += shp[ax]
    base[ax] = off
    ind = np.concatenate(parts) if parts else np.zeros((0, rank), np.int64)
    # TF registers no gradient for SparseConcat: the result's values are new constants (a None gradient).
    values = jnp.concatenate([s.values._value for s in sp_inputs], 0)
    order = np.lexsort(ind.T[::-1]) if ind.size else np.arange(ind.shape[0])
    return _from_parts(ind[order], Tensor(values[jnp.asarray(order, jnp.int32)]), base, sp_inputs[0])


def retain(sp_input: SparseTensor, to_retain: Any) -> SparseTensor:
    """Keep the entries where ``to_retain`` (one bool per entry) is True, as ``tf.sparse.retain``.

    Example:
        >>> import tapejax as tf
        >>> st = tf.sparse.SparseTensor([[0], [2]], [1.0, 2.0], [3])
        >>> tf.sparse.retain(st, [False, True]).values.numpy().tolist()
        [2.0]
    """
    keep = np.nonzero(np.asarray(convert_to_tensor(to_retain)._value).reshape(-1))[0]
    return _from_parts(_np_indices(sp_input)[keep], _take(sp_input.values, keep), _np_shape(sp_input), sp_input)


def slice(sp_input: SparseTensor, start: Any, size: Any, name: str | None = None) -> SparseTensor:
    """The entries inside the box ``[start, start + size)``, shifted to it, as ``tf.sparse.slice``.

    Example:
        >>> import tapejax as tf
        >>> st = tf.sparse.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [2, 3])
        >>> tf.sparse.slice(st, [1, 1], [5, 5]).indices.numpy().tolist()
        [[0, 1]]
    """
    ind, shape = _np_indices(sp_input), _np_shape(sp_input)
    st = np.asarray(start, np.int64).reshape(-1)
    sz = np.asarray(size, np.int64).reshape(-1)
    end = np.minimum(st + sz, shape)
    inside = np.all((ind >= st) & (ind < end), axis=1) if ind.size else np.zeros((0,), bool)
    keep = np.nonzero(inside)[0]
    return _from_parts(ind[keep] - st, _take(sp_input.values, keep), [int(x) for x in np.maximum(end - st, 0)], sp_input)


def eye(num_rows: int, num_columns: int | None = None, dtype: Any = "float32", name: str | None = None) -> SparseTensor:
    """A sparse identity matrix, as ``tf.sparse.eye``.

    Example:
        >>> import tapejax as tf
        >>> tf.sparse.to_dense(tf.sparse.eye(2)).numpy().tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    rows = int(num_rows)
    cols = rows if num_columns is None else int(num_columns)
    n = min(rows, cols)
    idx = np.stack([np.arange(n), np.arange(n)], axis=1)
    values = convert_to_tensor(np.ones(n), dtype=dtype)
    return SparseTensor(idx, values, [rows, cols])


__all__ += ["concat", "eye", "retain", "slice"]
