"""``tf.RaggedTensor``: rows of different lengths, as ``flat_values`` plus row partitions.

A RaggedTensor of ragged rank ``k`` is ``flat_values`` (a dense tensor, any dtype,
strings included) and ``k`` ``row_splits`` vectors (``values[splits[i]:splits[i+1]]``
is row ``i``), outermost first. It is a composite tensor (a JAX pytree and a
``tf.nest`` composite of those components), so a tape watching it watches
``flat_values``, and every elementwise op on it (the Python operators,
``tf.ragged.map_flat_values``) is an op on ``flat_values``: gradients flow as in TF.

Bounded on purpose: the row partitions are read on the host (NumPy), so building,
indexing and ``to_tensor`` need concrete partitions (inside a compiled step they are
inputs of the step; ``to_tensor`` there raises TypeError: its shape depends on them).
``tf.abs(rt)``-style dispatch of every TF op is not provided: converting a
RaggedTensor to a dense tensor raises ValueError naming ``map_flat_values`` and
``to_tensor``. Row partitions are int32 unless x64 is on (TF's are int64).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from .._core._recorder import Tensor, VariableBase
from .._ops import strings as _strings
from .._ops._dtypes import x64_enabled
from .._ops._machinery import EXPORTS
from .._ops._tensor import TensorShape, convert_to_tensor, is_string_value, register_composite
from . import _nest

__all__ = ["RaggedTensor", "constant", "map_flat_values"]


def _index_dtype() -> Any:
    return np.int64 if x64_enabled() else np.int32


def _host(t: Any, what: str) -> np.ndarray:
    v = t._value if isinstance(t, Tensor | VariableBase) else t
    if isinstance(v, jax.core.Tracer):
        raise TypeError(f"RaggedTensor.{what} needs concrete row partitions, and inside a compiled tapejax.function "
                        "they are traced: its shape would depend on them. Call it outside the function.")
    return np.asarray(v)


def _splits_tensor(x: Any) -> Tensor:
    if isinstance(x, Tensor | VariableBase):
        t = convert_to_tensor(x)
        if not t.dtype.is_integer:
            raise ValueError(f"row partitions must be integers, got {t.dtype.name}")
        return t
    return Tensor(jnp.asarray(np.asarray(x, dtype=np.int64).astype(_index_dtype())))


class RaggedTensor:
    """A tensor whose rows have different lengths (TF's ``tf.RaggedTensor``).

    Example:
        >>> import tapejax as tf
        >>> rt = tf.ragged.constant([[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]])
        >>> print(rt)
        <tf.RaggedTensor [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]>
        >>> print(rt.shape, rt[1].numpy().tolist(), (rt * 2).to_list()[3])
        (4, None) [4, 5] [18]
        >>> rt.to_tensor().numpy().tolist()[1]
        [4, 5, 0, 0]
    """

    __slots__ = ("_values", "_row_splits")

    def __init__(self, values: Any, row_splits: Any, internal: bool = False):
        if not internal:
            raise ValueError("RaggedTensor constructor is private; please use one of the factory methods instead "
                             "(e.g., RaggedTensor.from_row_lengths())")
        self._values = values
        self._row_splits = row_splits

    # --- factories ---------------------------------------------------------------------

    @classmethod
    def from_row_splits(cls, values: Any, row_splits: Any, name: str | None = None, validate: bool = True) -> RaggedTensor:
        """Rows ``values[row_splits[i]:row_splits[i+1]]``."""
        vals = values if isinstance(values, RaggedTensor) else convert_to_tensor(values)
        splits = _splits_tensor(row_splits)
        if validate and not isinstance(splits._value, jax.core.Tracer):
            s = np.asarray(splits._value)
            n = vals.nrows_static() if isinstance(vals, RaggedTensor) else vals.shape[0]
            if s.ndim != 1 or s.size == 0 or s[0] != 0 or np.any(np.diff(s) < 0) or (n is not None and s[-1] != n):
                from .. import errors
                raise errors.InvalidArgumentError(
                    f"Arguments to from_row_splits do not form a valid RaggedTensor: row_splits must start at 0, be "
                    f"non-decreasing and end at the number of values ({n}); got {s.tolist()}")
        return cls(vals, splits, internal=True)

    @classmethod
    def from_row_lengths(cls, values: Any, row_lengths: Any, name: str | None = None, validate: bool = True) -> RaggedTensor:
        """Rows of the given lengths, in order."""
        lengths = _host(_splits_tensor(row_lengths), "from_row_lengths")
        splits = np.concatenate([[0], np.cumsum(lengths)]).astype(_index_dtype())
        return cls.from_row_splits(values, splits, validate=validate)

    @classmethod
    def from_value_rowids(cls, values: Any, value_rowids: Any, nrows: Any = None, name: str | None = None,
                          validate: bool = True) -> RaggedTensor:
        """Value ``k`` in row ``value_rowids[k]`` (sorted); ``nrows`` rows (default: the last id + 1)."""
        ids = _host(_splits_tensor(value_rowids), "from_value_rowids").astype(np.int64)
        n = int(nrows) if nrows is not None else (int(ids[-1]) + 1 if ids.size else 0)
        lengths = np.bincount(ids, minlength=n)[:n] if ids.size else np.zeros(n, np.int64)
        return cls.from_row_lengths(values, lengths, validate=validate)

    @classmethod
    def from_nested_row_splits(cls, flat_values: Any, nested_row_splits: Any, name: str | None = None,
                               validate: bool = True) -> RaggedTensor:
        result = flat_values
        for splits in reversed(list(nested_row_splits)):
            result = cls.from_row_splits(result, splits, validate=validate)
        return result

    @classmethod
    def from_nested_row_lengths(cls, flat_values: Any, nested_row_lengths: Any, name: str | None = None,
                                validate: bool = True) -> RaggedTensor:
        result = flat_values
        for lengths in reversed(list(nested_row_lengths)):
            result = cls.from_row_lengths(result, lengths, validate=validate)
        return result

    @classmethod
    def from_tensor(cls, tensor: Any, lengths: Any = None, padding: Any = None, ragged_rank: int = 1,
                    name: str | None = None) -> RaggedTensor:
        """The rows of a dense tensor, cut to ``lengths`` or before trailing ``padding``."""
        t = convert_to_tensor(tensor)
        if ragged_rank != 1:
            raise NotImplementedError("tapejax's RaggedTensor.from_tensor supports ragged_rank=1: nest from_row_lengths "
                                      "for more.")
        n, m = t.shape[0], t.shape[1]
        if lengths is not None:
            ln = _host(_splits_tensor(lengths), "from_tensor").astype(np.int64)
        elif padding is not None:
            a = _host(t, "from_tensor")
            pad = np.asarray(_host(convert_to_tensor(padding, dtype=t.dtype), "from_tensor"))
            is_pad = np.all((a == pad).reshape(n, m, -1), axis=-1)
            ln = np.array([m - int(np.argmin(row[::-1])) if not row.all() else 0 for row in is_pad], np.int64)
            ln = np.where(is_pad.all(axis=1), 0, ln)
        else:
            ln = np.full(n, m, np.int64)
        idx = np.concatenate([np.arange(int(k)) + i * m for i, k in enumerate(ln)]).astype(np.int32) if n else \
            np.zeros(0, np.int32)
        flat = EXPORTS["reshape"](t, [n * m] + list(t.shape[2:]))
        return cls.from_row_lengths(EXPORTS["gather"](flat, idx), ln)

    # --- components ------------------------------------------------------------------

    @property
    def values(self) -> Any:
        """The concatenated rows (a Tensor, or a RaggedTensor for ragged rank > 1)."""
        return self._values

    @property
    def row_splits(self) -> Tensor:
        return self._row_splits

    @property
    def flat_values(self) -> Tensor:
        """The innermost dense values."""
        v = self._values
        while isinstance(v, RaggedTensor):
            v = v._values
        return v

    @property
    def nested_row_splits(self) -> tuple:
        out, v = [self._row_splits], self._values
        while isinstance(v, RaggedTensor):
            out.append(v._row_splits)
            v = v._values
        return tuple(out)

    @property
    def ragged_rank(self) -> int:
        return 1 + (self._values.ragged_rank if isinstance(self._values, RaggedTensor) else 0)

    @property
    def dtype(self) -> Any:
        return self.flat_values.dtype

    @property
    def shape(self) -> TensorShape:
        """``(nrows, None, ..., inner dims)``: the ragged dimensions are unknown."""
        inner = list(self.flat_values.shape)[1:]
        return TensorShape([self._row_splits.shape[0] - 1] + [None] * self.ragged_rank + inner)

    def get_shape(self) -> TensorShape:
        return self.shape

    @property
    def row_splits_dtype(self) -> Any:
        return self._row_splits.dtype

    def _splits(self) -> np.ndarray:
        return _host(self._row_splits, "row partitions").astype(np.int64)

    def nrows_static(self) -> int:
        return int(self._row_splits.shape[0]) - 1

    def nrows(self, out_type: Any = None, name: str | None = None) -> Tensor:
        return Tensor(jnp.asarray(self.nrows_static(), self._row_splits._value.dtype))

    def row_lengths(self, axis: int = 1, name: str | None = None) -> Any:
        """The length of each row (``axis=1``), or of each inner row (``axis > 1``, ragged)."""
        if axis == 1:
            s = self._row_splits
            return EXPORTS["subtract"](s[1:], s[:-1])
        if axis > 1 and isinstance(self._values, RaggedTensor):
            return self.with_values(self._values.row_lengths(axis - 1))
        raise ValueError(f"axis={axis} is out of bounds for row_lengths of a RaggedTensor of ragged rank "
                         f"{self.ragged_rank}")

    def row_starts(self, name: str | None = None) -> Tensor:
        return self._row_splits[:-1]

    def row_limits(self, name: str | None = None) -> Tensor:
        return self._row_splits[1:]

    def value_rowids(self, name: str | None = None) -> Tensor:
        s = self._splits()
        return Tensor(jnp.asarray(np.repeat(np.arange(s.size - 1), np.diff(s)).astype(self._row_splits._value.dtype)))

    def with_values(self, new_values: Any) -> RaggedTensor:
        nv = new_values if isinstance(new_values, RaggedTensor) else convert_to_tensor(new_values)
        return RaggedTensor(nv, self._row_splits, internal=True)

    def with_flat_values(self, new_values: Any) -> RaggedTensor:
        if isinstance(self._values, RaggedTensor):
            return self.with_values(self._values.with_flat_values(new_values))
        return self.with_values(new_values)

    # --- conversion --------------------------------------------------------------------

    def bounding_shape(self, axis: Any = None, name: str | None = None, out_type: Any = None) -> Tensor:
        dims = self._bounding()
        out = Tensor(jnp.asarray(np.asarray(dims, np.int64).astype(self._row_splits._value.dtype)))
        return out if axis is None else out[axis]

    def _bounding(self) -> list:
        s = self._splits()
        width = int(np.max(np.diff(s))) if s.size > 1 else 0
        inner = self._values._bounding()[1:] if isinstance(self._values, RaggedTensor) else \
            list(self._values.shape)[1:]
        return [s.size - 1, width] + inner

    def to_tensor(self, default_value: Any = None, name: str | None = None, shape: Any = None) -> Tensor:
        """The dense tensor, rows padded with ``default_value`` (zero, ``b""``, False) to the longest
        (or cut/padded to ``shape``). Differentiable with respect to ``flat_values``."""
        bound = self._bounding()
        target = list(bound)
        if shape is not None:
            for i, d in enumerate(TensorShape(shape).as_list() if TensorShape(shape).rank is not None else []):
                if d is not None:
                    target[i] = int(d)
        return self._dense(target, default_value)

    def _dense(self, target: list, default_value: Any) -> Tensor:
        inner_target = target[2:]
        if isinstance(self._values, RaggedTensor):
            vals = self._values._dense([self._values.nrows_static()] + inner_target, default_value)
        else:
            vals = self._values
            shp = list(vals.shape)[1:]
            if [int(d) for d in shp] != [int(d) for d in inner_target]:
                raise ValueError(f"to_tensor: shape {target} is not compatible with the inner shape {shp}")
        s = self._splits()
        n_vals = int(vals.shape[0])
        nrows, width = target[0], target[1]
        pos = np.full((nrows, width), n_vals, np.int32)
        for i in range(min(nrows, s.size - 1)):
            k = min(int(s[i + 1] - s[i]), width)
            pos[i, :k] = np.arange(int(s[i]), int(s[i]) + k)
        if default_value is None:
            fill = EXPORTS["zeros_like"](vals[:1]) if n_vals else None
            if fill is None:
                z = np.zeros([1] + list(vals.shape)[1:], dtype=object if vals.dtype.name == "string" else vals.dtype._np)
                if z.dtype == object:
                    z[...] = b""
                fill = Tensor(z if z.dtype == object else jnp.asarray(z))
        else:
            d = convert_to_tensor(default_value, dtype=vals.dtype)
            fill = EXPORTS["reshape"](EXPORTS["broadcast_to"](d, list(vals.shape)[1:]), [1] + list(vals.shape)[1:])
        table = EXPORTS["concat"]([vals, fill], 0)
        return EXPORTS["gather"](table, pos)

    def to_list(self) -> list:
        """The rows as nested Python lists."""
        flat = np.asarray(_host(self.flat_values, "to_list"))
        return self._rows(flat.tolist() if flat.ndim else [flat.item()])

    def _rows(self, flat: list) -> list:
        inner = self._values._rows(flat) if isinstance(self._values, RaggedTensor) else flat
        s = self._splits()
        return [inner[int(s[i]):int(s[i + 1])] for i in range(s.size - 1)]

    def numpy(self) -> np.ndarray:
        """The rows as a NumPy object array of arrays (TF's ``RaggedTensor.numpy``)."""
        rows = [self[i] for i in range(self.nrows_static())]
        out = np.empty(len(rows), dtype=object)
        for i, r in enumerate(rows):
            out[i] = r.numpy()
        return out

    def __repr__(self) -> str:
        return f"<tf.RaggedTensor {self.to_list()!r}>"

    __str__ = __repr__

    def __hash__(self) -> int:
        raise TypeError("RaggedTensor is unhashable.")

    def __bool__(self) -> bool:
        raise TypeError("RaggedTensor may not be used as a boolean.")

    # --- indexing ---------------------------------------------------------------------

    def _row(self, i: int) -> Any:
        n = self.nrows_static()
        if not -n <= i < n:
            # TF's eager RaggedTensor raises IndexError here (a dense tensor InvalidArgumentError)
            raise IndexError(f"index {i} is out of bounds for a RaggedTensor with {n} rows")
        i %= n
        s = self._splits()
        a, b = int(s[i]), int(s[i + 1])
        return self._values._row_range(a, b) if isinstance(self._values, RaggedTensor) else self._values[a:b]

    def _row_range(self, a: int, b: int) -> RaggedTensor:
        s = self._splits()
        new = (s[a:b + 1] - s[a]).astype(self._row_splits._value.dtype)
        va, vb = int(s[a]), int(s[b])
        vals = self._values._row_range(va, vb) if isinstance(self._values, RaggedTensor) else self._values[va:vb]
        return RaggedTensor(vals, Tensor(jnp.asarray(new)), internal=True)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, Tensor):
            key = int(_host(key, "__getitem__"))
        if isinstance(key, tuple):
            if not key:
                return self
            first, rest = key[0], key[1:]
            if isinstance(first, int | np.integer):
                out = self[int(first)]
                return out[rest] if rest else out
            raise NotImplementedError("tapejax's RaggedTensor indexes a tuple whose first entry is an int "
                                      "(rt[i, j]); for other slices use to_tensor() or map_flat_values.")
        if isinstance(key, int | np.integer):
            return self._row(int(key))
        if isinstance(key, slice):
            start, stop, step = key.indices(self.nrows_static())
            if step != 1:
                raise NotImplementedError("tapejax's RaggedTensor row slices take step 1.")
            return self._row_range(start, max(start, stop))
        raise TypeError(f"RaggedTensor indices must be ints, slices or tuples, got {type(key).__name__}")

    # --- elementwise ops: ops on flat_values ---------------------------------------------

    def _binary(self, other: Any, fn: Callable, reverse: bool = False) -> RaggedTensor:
        if isinstance(other, RaggedTensor):
            if not _same_partitions(self, other):
                raise errors_invalid("Inputs must have identical ragged splits (a RaggedTensor op on two "
                                     "RaggedTensors needs the same row partitions).")
            o = other.flat_values
        else:
            o = other
            rank = len(getattr(o, "shape", ()) or ()) if not isinstance(o, list | tuple) else np.ndim(o)
            if rank > len(self.flat_values.shape) - 1:
                raise ValueError("tapejax's RaggedTensor broadcasts a dense operand over its inner dimensions only "
                                 "(a scalar, or the flat values' trailing shape): use to_tensor(), or "
                                 "tf.ragged.map_flat_values.")
        x = self.flat_values
        return self.with_flat_values(fn(o, x) if reverse else fn(x, o))

    def __neg__(self) -> RaggedTensor:
        return self.with_flat_values(EXPORTS["negative"](self.flat_values))

    def __abs__(self) -> RaggedTensor:
        return self.with_flat_values(EXPORTS["abs"](self.flat_values))

    def __invert__(self) -> RaggedTensor:
        return self.with_flat_values(EXPORTS["logical_not"](self.flat_values))


def errors_invalid(msg: str) -> Exception:
    from .. import errors

    return errors.InvalidArgumentError(msg)


def _same_partitions(a: RaggedTensor, b: RaggedTensor) -> bool:
    sa, sb = a.nested_row_splits, b.nested_row_splits
    return len(sa) == len(sb) and all(np.array_equal(_host(x, "op"), _host(y, "op")) for x, y in zip(sa, sb))


def _def_binary(name: str, fn: Callable) -> None:
    setattr(RaggedTensor, f"__{name}__", lambda self, other: self._binary(other, fn))
    setattr(RaggedTensor, f"__r{name}__", lambda self, other: self._binary(other, fn, reverse=True))


for _n, _f in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
               ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow),
               ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor)]:
    _def_binary(_n, lambda x, y, _f=_f: _f(convert_to_tensor(x) if not isinstance(x, Tensor | VariableBase) and
                                           isinstance(y, Tensor | VariableBase) else x, y))
for _n, _op in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal"),
                ("eq", "equal"), ("ne", "not_equal")]:
    setattr(RaggedTensor, f"__{_n}__", lambda self, other, _op=_op: self._binary(other, EXPORTS[_op]))


# --- the tf.ragged functions ----------------------------------------------------------------------


def _depth(x: Any) -> int:
    return 1 + max((_depth(v) for v in x), default=0) if isinstance(x, list | tuple) else 0


def constant(pylist: Any, dtype: Any = None, ragged_rank: int | None = None, inner_shape: Any = None,
             name: str | None = None, row_splits_dtype: Any = None) -> RaggedTensor:
    """A RaggedTensor from nested Python lists (``tf.ragged.constant``); the dtype is inferred as
    ``tf.constant`` infers it (int32, float32, string).

    Example:
        >>> import tapejax as tf
        >>> rt = tf.ragged.constant([[1, 2], [], [3]])
        >>> rt.row_lengths().numpy().tolist(), rt.flat_values.numpy().tolist()
        ([2, 0, 1], [1, 2, 3])
    """
    if isinstance(pylist, RaggedTensor):
        return pylist
    if not isinstance(pylist, list | tuple):
        raise ValueError("tf.ragged.constant needs a nested list: a scalar or tensor is not ragged.")
    depth = _depth(pylist)
    inner_rank = len(inner_shape) if inner_shape is not None else 0
    rr = ragged_rank if ragged_rank is not None else max(depth - 1 - inner_rank, 1 if depth > 1 else 0)
    if rr < 1:
        raise ValueError(f"ragged_rank must be at least 1 (and less than the nesting depth {depth}), got {rr}")
    lengths: list = [[] for _ in range(rr)]
    leaves: list = []

    def walk(x: Any, d: int) -> None:
        # x: a list at nesting depth d (the rows are depth 1); its length partitions level d - 1
        if not isinstance(x, list | tuple):
            raise ValueError("all scalar values must have the same nesting depth")
        lengths[d - 1].append(len(x))
        if d < rr:
            for v in x:
                walk(v, d + 1)
        else:
            leaves.extend(x)

    for row in pylist:
        walk(row, 1)
    if leaves and any(_depth(v) != _depth(leaves[0]) for v in leaves):
        raise ValueError("all scalar values must have the same nesting depth")
    if leaves:
        flat = convert_to_tensor(leaves, dtype=dtype)
    else:
        shape = [0] + (list(inner_shape) if inner_shape is not None else [])
        flat = convert_to_tensor(np.zeros(shape, np.float32), dtype=dtype)
    if inner_shape is not None and leaves:
        flat = EXPORTS["reshape"](flat, [-1] + list(inner_shape))
    return RaggedTensor.from_nested_row_lengths(flat, lengths)


def map_flat_values(op: Callable, *args: Any, **kwargs: Any) -> Any:
    """Apply ``op`` to the ``flat_values`` of the RaggedTensor arguments (which must share row
    partitions), keeping the partitions (``tf.ragged.map_flat_values``).

    Example:
        >>> import tapejax as tf
        >>> rt = tf.ragged.constant([[1.0, -2.0], [3.0]])
        >>> tf.ragged.map_flat_values(tf.abs, rt).to_list()
        [[1.0, 2.0], [3.0]]
    """
    rts = [x for x in jax.tree_util.tree_leaves((args, kwargs), is_leaf=lambda x: isinstance(x, RaggedTensor))
           if isinstance(x, RaggedTensor)]
    if not rts:
        return op(*args, **kwargs)
    first = rts[0]
    for r in rts[1:]:
        if not _same_partitions(first, r):
            raise errors_invalid("Inputs must have identical ragged splits")
    a2, k2 = jax.tree_util.tree_map(lambda x: x.flat_values if isinstance(x, RaggedTensor) else x, (args, kwargs),
                                    is_leaf=lambda x: isinstance(x, RaggedTensor))
    out = op(*a2, **k2)
    n = int(first.flat_values.shape[0])
    if getattr(out, "shape", None) is None or not out.shape or out.shape[0] != n:
        raise ValueError("map_flat_values: the op must keep the number of flat values (its outer dimension).")
    return first.with_flat_values(out)


def _refuse_dense(rt: RaggedTensor) -> Any:
    raise ValueError(f"Attempt to convert a value ({rt!r}) with an unsupported type ({type(rt)}) to a Tensor: a "
                     "RaggedTensor has rows of different lengths. Use rt.to_tensor() for a padded dense tensor, or "
                     "tf.ragged.map_flat_values(op, rt) to apply an elementwise op to its values.")


register_composite(RaggedTensor, _refuse_dense)


def _components(rt: RaggedTensor) -> list:
    return [rt.flat_values, *rt.nested_row_splits]


def _from_components(flat: Any, *splits: Any) -> RaggedTensor:
    out = flat
    for s in reversed(splits):
        out = RaggedTensor(out, s, internal=True)
    return out


jax.tree_util.register_pytree_node(RaggedTensor, lambda r: (tuple(_components(r)), None),
                                   lambda _, c: _from_components(*c))
_nest.register_composite(RaggedTensor, _components, lambda old, c: _from_components(*c))


def _ragged_rows(values: np.ndarray, lengths: np.ndarray, outer_shape: tuple) -> RaggedTensor:
    """A batch of split strings (``tf.strings.split`` of a string tensor): the parts of each string
    as a row; a batch of rank > 1 nests uniform rows around them."""
    flat = Tensor(np.asarray(values, dtype=object)) if values.dtype == object else Tensor(jnp.asarray(values))
    rt = RaggedTensor.from_row_lengths(flat, lengths)
    for d in reversed(outer_shape[1:]):
        n = rt.nrows_static() // d
        rt = RaggedTensor.from_row_lengths(rt, np.full(n, d))
    return rt


_strings.set_ragged_builder(_ragged_rows)
del is_string_value
