"""``tf.TensorArray``: a list of tensors written one at a time, read, stacked.

Two representations. Eagerly (and inside a trace while every index is a Python
int) it is a Python list of tensors, as TF's eager TensorArray: reads return the
written tensors, so tapes see ordinary ops. Inside a lowered loop (a
``tf.while_loop``/``tf.scan``/``tf.map_fn`` body traced by ``tapejax.function``)
an index is a tracer: the array becomes a *buffer*, one tensor of shape
``(size,) + element_shape``, and ``write``/``read`` are recorded ops on it
(``dynamic_update_slice`` / ``dynamic_slice``). The loop carries the buffer.
Writes are functional there: use the returned array (``ta = ta.write(i, x)``), as TF asks.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core._recorder import Tensor, VariableBase, bind, read_variable
from .._ops._dtypes import as_dtype
from .._ops._machinery import prim as _prim
from .._ops._tensor import TensorShape, convert_to_tensor
from .._ops.array import concat as _concat
from .._ops.array import gather as _gather
from .._ops.array import reshape as _reshape
from .._ops.array import stack as _stack
from .._ops.array import unstack as _unstack

__all__ = ["TensorArray"]


def _write_impl(buf: Any, i: Any, v: Any) -> Any:
    return lax.dynamic_update_index_in_dim(buf, v.astype(buf.dtype), jnp.asarray(i, jnp.int32), 0)


def _read_impl(buf: Any, i: Any) -> Any:
    return lax.dynamic_index_in_dim(buf, jnp.asarray(i, jnp.int32), 0, keepdims=False)


def _scatter_impl(buf: Any, idx: Any, v: Any) -> Any:
    return buf.at[jnp.asarray(idx, jnp.int32)].set(v.astype(buf.dtype))


_write_p = _prim("tensor_array_write", _write_impl)
_read_p = _prim("tensor_array_read", _read_impl)
_scatter_p = _prim("tensor_array_scatter", _scatter_impl)


def _is_tracer(v: Any) -> bool:
    return isinstance(v, jax.core.Tracer)


def _index(i: Any) -> Any:
    """A Python int for a concrete index, else the (traced) Tensor."""
    v = i._value if isinstance(i, Tensor | VariableBase) else i
    if _is_tracer(v):
        return i if isinstance(i, Tensor) else Tensor(v)
    return int(np.asarray(v))


class TensorArray:
    """TF's ``tf.TensorArray``: a sized (or growing) list of same-dtype tensors.

    ``write``, ``unstack`` and ``scatter`` return the array to use next
    (``ta = ta.write(i, x)``); reads of unwritten elements give zeros, as in TF.
    Gradients flow through writes and reads. ``clear_after_read``,
    ``colocate_with_first_write_call`` and names are accepted.

    Example:
        >>> import tapejax as tf
        >>> ta = tf.TensorArray(tf.float32, size=3)
        >>> for i in range(3):
        ...     ta = ta.write(i, float(i) * 2.0)
        >>> ta.stack().numpy().tolist(), int(ta.size())
        ([0.0, 2.0, 4.0], 3)
    """

    _tapejax_tensor_array = True

    def __init__(self, dtype: Any, size: Any = None, dynamic_size: Any = None, clear_after_read: Any = None,
                 tensor_array_name: Any = None, handle: Any = None, flow: Any = None, infer_shape: bool = True,
                 element_shape: Any = None, colocate_with_first_write_call: bool = True, name: Any = None):
        self._dtype = as_dtype(dtype)
        if size is None:
            if not dynamic_size:
                raise ValueError("Size must be provided if handle is not provided")
            size = 0
        sv = size._value if isinstance(size, Tensor | VariableBase) else size
        if _is_tracer(sv):
            raise ValueError(
                "The size of a tf.TensorArray must be known when tapejax.function traces it (a Python int or a "
                "constant tensor): XLA needs static shapes."
            )
        self._dynamic = bool(dynamic_size)
        self._infer_shape = bool(infer_shape)
        self._element_shape = None if element_shape is None else TensorShape(element_shape)
        if self._element_shape is not None and not self._element_shape.is_fully_defined():
            self._element_shape = None
        self._items: Any = [None] * int(np.asarray(sv))
        self._buffer: Tensor | None = None

    # --- representation -------------------------------------------------------------------

    def _clone(self) -> TensorArray:
        ta = TensorArray.__new__(TensorArray)
        ta._dtype, ta._dynamic, ta._infer_shape = self._dtype, self._dynamic, self._infer_shape
        ta._element_shape = self._element_shape
        ta._items, ta._buffer = self._items, self._buffer
        return ta

    def _size(self) -> int:
        return len(self._items) if self._buffer is None else int(self._buffer._value.shape[0])

    def _zeros(self) -> Tensor:
        shape = tuple(self._element_shape) if self._element_shape is not None else ()
        return Tensor(jnp.zeros(shape, self._dtype._np))

    def _as_buffer(self) -> Tensor:
        """One tensor ``(size,) + element_shape`` holding every element (zeros where unwritten)."""
        if self._buffer is not None:
            return self._buffer
        if self._element_shape is None and not any(x is not None for x in self._items):
            raise ValueError(
                "A tf.TensorArray used with a traced index (inside a loop lowered by tapejax.function) needs its "
                "element shape: pass element_shape= when creating it, or write one element before the loop."
            )
        return self._stack_items()

    def _stack_items(self) -> Tensor:
        items = [x if x is not None else self._zeros() for x in self._items]
        if not items:
            shape = tuple(self._element_shape) if self._element_shape is not None else ()
            return Tensor(jnp.zeros((0,) + shape, self._dtype._np))
        return _stack(items)

    def _with_buffer(self, buf: Tensor) -> TensorArray:
        ta = self._clone()
        ta._items, ta._buffer = None, buf
        ta._element_shape = TensorShape(buf._value.shape[1:])
        return ta

    # --- properties ----------------------------------------------------------------------

    @property
    def dtype(self) -> Any:
        return self._dtype

    @property
    def element_shape(self) -> TensorShape:
        return self._element_shape if self._element_shape is not None else TensorShape(None)

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic

    @property
    def handle(self) -> None:
        return None

    @property
    def flow(self) -> None:
        return None

    def size(self, name: Any = None) -> Tensor:
        """The number of elements, as an int32 scalar tensor."""
        return convert_to_tensor(self._size(), dtype="int32")

    # --- writing ---------------------------------------------------------------------------

    def _checked_value(self, value: Any) -> Tensor:
        if isinstance(value, Tensor | VariableBase):
            t = value if isinstance(value, Tensor) else read_variable(value)
            if np.dtype(t._value.dtype) != self._dtype._np:
                raise errors.InvalidArgumentError(
                    f"TensorArray dtype is {self._dtype.name} but Op is trying to write dtype "
                    f"{np.dtype(t._value.dtype).name}"
                )
        else:
            t = convert_to_tensor(value, dtype=self._dtype)
        shape = TensorShape(t._value.shape)
        if self._element_shape is None:
            if self._infer_shape:
                self._element_shape = shape
        elif self._infer_shape and tuple(shape) != tuple(self._element_shape):
            raise ValueError(f"Incompatible shape for value ({_s(shape)}), expected ({_s(self._element_shape)})")
        return t

    def write(self, index: Any, value: Any, name: Any = None) -> TensorArray:
        """Write ``value`` at ``index``; returns the array to use from now on."""
        v = self._checked_value(value)
        i = _index(index)
        if isinstance(i, int) and self._buffer is None:
            if i < 0:
                raise errors.InvalidArgumentError(f"Tried to write to index {i} but the index must be >= 0")
            if i >= len(self._items):
                if not self._dynamic:
                    raise errors.OutOfRangeError(
                        f"Tried to write to index {i} but array is not resizeable and size is: {len(self._items)}"
                    )
                self._items.extend([None] * (i + 1 - len(self._items)))
            self._items[i] = v
            return self._clone()
        if self._dynamic and self._buffer is None:
            raise ValueError(
                "A tf.TensorArray with dynamic_size=True cannot be written at a traced index (inside a loop lowered "
                "by tapejax.function): XLA needs a static size. Create it with its final size (size=n)."
            )
        buf = self._as_buffer()
        return self._with_buffer(bind(_write_p, buf, i, v))

    def unstack(self, value: Any, name: Any = None) -> TensorArray:
        """Write the rows of ``value`` as elements ``0..n-1``."""
        t = self._value_rows(value)
        n = int(t._value.shape[0])
        if self._buffer is not None:
            if n != self._size():
                raise ValueError(f"Cannot unstack {n} tensors into a TensorArray of static size {self._size()}")
            return self._with_buffer(t)
        if n > len(self._items):
            if not self._dynamic:
                raise ValueError(f"Cannot unstack {n} tensors into a TensorArray of static size {len(self._items)}")
            self._items.extend([None] * (n - len(self._items)))
        for k, row in enumerate(_unstack(t) if n else []):
            self._items[k] = row
        return self._clone()

    def _value_rows(self, value: Any) -> Tensor:
        t = value if isinstance(value, Tensor) else convert_to_tensor(value, dtype=self._dtype)
        if np.dtype(t._value.dtype) != self._dtype._np:
            raise errors.InvalidArgumentError(
                f"TensorArray dtype is {self._dtype.name} but Op is trying to write dtype {np.dtype(t._value.dtype).name}"
            )
        if t._value.ndim == 0:
            raise ValueError("Shape must be at least rank 1 but is rank 0 (the value to unstack or scatter).")
        es = TensorShape(t._value.shape[1:])
        if self._element_shape is None:
            if self._infer_shape:
                self._element_shape = es
        elif self._infer_shape and tuple(es) != tuple(self._element_shape):
            raise ValueError(f"Incompatible shape for value ({_s(es)}), expected ({_s(self._element_shape)})")
        return t

    def scatter(self, indices: Any, value: Any, name: Any = None) -> TensorArray:
        """Write the rows of ``value`` at ``indices``."""
        t = self._value_rows(value)
        iv = indices._value if isinstance(indices, Tensor) else np.asarray(indices)
        if not _is_tracer(iv) and self._buffer is None:
            rows = _unstack(t) if int(t._value.shape[0]) else []
            ta = self
            for i, row in zip(np.asarray(iv).reshape(-1).tolist(), rows):
                ta = ta.write(int(i), row)
            return ta
        buf = self._as_buffer()
        idx = indices if isinstance(indices, Tensor) else Tensor(jnp.asarray(iv, jnp.int32))
        return self._with_buffer(bind(_scatter_p, buf, idx, t))

    # --- reading ---------------------------------------------------------------------------

    def read(self, index: Any, name: Any = None) -> Tensor:
        """The element at ``index`` (zeros if it was never written)."""
        i = _index(index)
        if isinstance(i, int) and self._buffer is None:
            if not 0 <= i < len(self._items):
                raise errors.OutOfRangeError(
                    f"Tried to read from index {i} but array size is: {len(self._items)}"
                )
            x = self._items[i]
            return x if x is not None else self._zeros()
        return bind(_read_p, self._as_buffer(), i)

    def stack(self, name: Any = None) -> Tensor:
        """Every element, stacked along a new first axis."""
        return self._buffer if self._buffer is not None else self._stack_items()

    def gather(self, indices: Any, name: Any = None) -> Tensor:
        """The elements at ``indices``, stacked."""
        return _gather(self.stack(), indices)

    def concat(self, name: Any = None) -> Tensor:
        """Every element, concatenated along its first axis."""
        if self._buffer is not None:
            b = self._buffer
            shape = tuple(b._value.shape)
            if len(shape) < 2:
                raise ValueError("Concatenating a TensorArray needs elements of rank >= 1.")
            return _reshape(b, (shape[0] * shape[1],) + shape[2:])
        items = [x if x is not None else self._zeros() for x in self._items]
        if not items:
            shape = tuple(self._element_shape)[1:] if self._element_shape is not None else ()
            return Tensor(jnp.zeros((0,) + shape, self._dtype._np))
        return _concat(items, 0)

    # --- no-ops TF offers ------------------------------------------------------------------

    def identity(self) -> TensorArray:
        return self._clone()

    def close(self, name: Any = None) -> None:
        return None

    def mark_used(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<TensorArray dtype={self._dtype.name} size={self._size()} element_shape={self.element_shape}>"


def _s(shape: Any) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def to_array(ta: TensorArray) -> Tensor:
    """The buffer a lowered loop carries for ``ta``."""
    return ta._as_buffer()


def from_array(template: TensorArray, t: Tensor) -> TensorArray:
    """A buffer-mode array like ``template`` holding ``t``."""
    return template._with_buffer(t)
