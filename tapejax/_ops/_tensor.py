"""The user-facing surface of ``Tensor``: properties, conversions, printing,
and TF's rules for turning Python and NumPy values into tensors.

Operators (``+``, ``@``, ``[]``, ...) are attached by ``tapejax._ops.operators`` from the op table.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax._src import core as _jcore

from .._core._recorder import Tensor, VariableBase, attach, read_variable
from ._dtypes import DType, as_dtype, check_width, from_np, x64_enabled
from ._strtable import StrIds

__all__ = ["Tensor", "TensorShape", "constant", "convert_to_tensor", "is_tensor", "Reference"]


class TensorShape(tuple):
    """A tensor's shape: a tuple of ints (None for unknown dims) with TF's helpers.

    ``TensorShape(None)`` has unknown rank: it is compatible with every shape, its
    ``rank`` is None and ``as_list()`` raises ValueError, as in TF.

    Example:
        >>> import tapejax as tf
        >>> s = tf.ones((2, 3)).shape
        >>> s == (2, 3), s.as_list(), s.rank
        (True, [2, 3], 2)
        >>> tf.TensorShape([None, 3]).merge_with([2, None])
        TensorShape([2, 3])
    """

    _unknown_rank = False

    def __new__(cls, dims: Any = ()) -> TensorShape:
        if dims is None:
            s = super().__new__(cls, ())
            s._unknown_rank = True
            return s
        if isinstance(dims, TensorShape) and dims._unknown_rank:
            return dims
        if isinstance(dims, int):
            dims = (dims,)
        return super().__new__(cls, (None if d is None else int(d) for d in dims))

    @property
    def rank(self) -> int | None:
        return None if self._unknown_rank else len(self)

    ndims = rank

    @property
    def dims(self) -> list | None:
        return None if self._unknown_rank else list(self)

    def as_list(self) -> list:
        if self._unknown_rank:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self)

    def num_elements(self) -> int | None:
        if self._unknown_rank or any(d is None for d in self):
            return None
        return int(np.prod(self, dtype=np.int64))

    def is_fully_defined(self) -> bool:
        return not self._unknown_rank and all(d is not None for d in self)

    def assert_is_fully_defined(self) -> None:
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def is_compatible_with(self, other: Any) -> bool:
        other = TensorShape(other)
        if self._unknown_rank or other._unknown_rank:
            return True
        return len(self) == len(other) and all(a is None or b is None or a == b for a, b in zip(self, other))

    def assert_is_compatible_with(self, other: Any) -> None:
        """ValueError unless ``other`` is compatible (same rank, equal known dims)."""
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are incompatible")

    def merge_with(self, other: Any) -> TensorShape:
        """The most specific shape compatible with both (ValueError if they are incompatible)."""
        other = TensorShape(other)
        if self._unknown_rank:
            return other
        if other._unknown_rank:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a if a is not None else b for a, b in zip(self, other)])

    def most_specific_compatible_shape(self, other: Any) -> TensorShape:
        other = TensorShape(other)
        if self._unknown_rank or other._unknown_rank or len(self) != len(other):
            return TensorShape(None)
        return TensorShape([a if a == b else None for a, b in zip(self, other)])

    def concatenate(self, other: Any) -> TensorShape:
        other = TensorShape(other)
        if self._unknown_rank or other._unknown_rank:
            return TensorShape(None)
        return TensorShape(tuple(self) + tuple(other))

    def __add__(self, other: Any) -> TensorShape:
        return self.concatenate(other)

    def assert_has_rank(self, rank: int) -> None:
        if self.rank not in (None, rank):
            raise ValueError(f"Shape {self} must have rank {rank}")

    def with_rank(self, rank: int) -> TensorShape:
        try:
            return self.merge_with(TensorShape([None] * rank))
        except ValueError:
            raise ValueError(f"Shape {self} must have rank {rank}") from None

    def assert_same_rank(self, other: Any) -> None:
        other = TensorShape(other)
        if self.rank is not None and other.rank is not None and self.rank != other.rank:
            raise ValueError(f"Shapes {self} and {other} must have the same rank")

    def __len__(self) -> int:
        if self._unknown_rank:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return tuple.__len__(self)

    def __iter__(self) -> Iterator:
        if self._unknown_rank:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return tuple.__iter__(self)

    def __getitem__(self, k: Any) -> Any:
        if self._unknown_rank:
            return TensorShape(None) if isinstance(k, slice) else None
        r = tuple.__getitem__(self, k)
        return TensorShape(r) if isinstance(k, slice) else r

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorShape) and (self._unknown_rank or other._unknown_rank):
            return self._unknown_rank and other._unknown_rank
        if self._unknown_rank:
            return other is None
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(None) if self._unknown_rank else tuple.__hash__(self)

    def __repr__(self) -> str:
        return "TensorShape(None)" if self._unknown_rank else f"TensorShape({list(self)})"

    def __str__(self) -> str:
        if self._unknown_rank:
            return "<unknown>"
        return "(" + ", ".join("None" if d is None else str(d) for d in self) + ("," if len(self) == 1 else "") + ")"


class Reference:
    """A hashable handle to a tensor or variable, compared by identity (``x.ref()``)."""

    __slots__ = ("_obj",)

    def __init__(self, obj: Any):
        self._obj = obj

    def deref(self) -> Any:
        return self._obj

    def __hash__(self) -> int:
        return id(self._obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reference) and other._obj is self._obj

    def __repr__(self) -> str:
        return f"<Reference wrapping {self._obj!r}>"


def _concrete_or_none(v: Any) -> Any:
    """A NumPy copy of a concrete array, None for a traced one."""
    return None if isinstance(v, jax.core.Tracer) else np.asarray(v)


def _numpy_text(value: Any, is_repr: bool) -> str:
    if isinstance(value, jax.core.Tracer | StrIds):
        return "<traced>"  # inside a tapejax.function trace there is no value yet
    a = np.asarray(value)
    text = (repr(a) if a.ndim else repr(a.item())) if is_repr else str(a)
    return "\n" + text if "\n" in text else text


# ---- properties and conversions, attached to the core Tensor ---------------


def symbolic_numpy_error(what: str = "Tensor") -> AttributeError:
    """TF's error for ``.numpy()`` on a symbolic tensor (inside tf.function or pfor), with
    what to do instead."""
    return AttributeError(
        f"'SymbolicTensor' object has no attribute 'numpy': this {what} is a traced (symbolic) value, inside "
        "a compiled tapejax.function step, a jacobian, a traced custom_gradient, or a JAX transformation "
        "(jax.jit/jax.grad of a function using tapejax ops: wrap it with tapejax.to_jax). .numpy() works only on "
        "eager values: compute with tf ops (tf.where instead of Python if), or call it outside the compiled step."
    )


def _t_numpy(self: Tensor) -> Any:
    """The value as a NumPy array (a NumPy scalar for rank 0, as in TF)."""
    if isinstance(self._value, jax.core.Tracer | StrIds):
        raise symbolic_numpy_error()
    a = np.asarray(self._value)
    return a[()] if a.ndim == 0 else a


# The names of a traced function's argument tensors while it is traced (TF's placeholder
# names, "x:0"), by id of the Tensor: a traced tensor prints as TF prints a symbolic one.
_SYMBOLIC_NAMES: dict[int, tuple[Any, str]] = {}


def name_symbolic(named: list) -> None:
    """Name the argument tensors of the trace being built (``[(tensor, "x:0"), ...]``)."""
    for t, name in named:
        _SYMBOLIC_NAMES[id(t)] = (weakref.ref(t), name)


def forget_symbolic(named: list) -> None:
    """Forget the names ``name_symbolic`` gave (the trace ended)."""
    for t, _ in named:
        hit = _SYMBOLIC_NAMES.get(id(t))
        if hit is not None and hit[0]() is t:
            del _SYMBOLIC_NAMES[id(t)]


def _symbolic_name(t: Tensor) -> str | None:
    hit = _SYMBOLIC_NAMES.get(id(t))
    return hit[1] if hit is not None and hit[0]() is t else None


def _t_repr(self: Tensor) -> str:
    name = _symbolic_name(self) if _SYMBOLIC_NAMES else None
    if name is not None:
        return f"<tf.Tensor '{name}' shape={TensorShape(self._aval.shape)} dtype={self.dtype.name}>"
    return f"<tf.Tensor: shape={TensorShape(self._aval.shape)}, dtype={self.dtype.name}, numpy={_numpy_text(self._value, True)}>"


def _t_str(self: Tensor) -> str:
    name = _symbolic_name(self) if _SYMBOLIC_NAMES else None
    if name is not None:
        return f'Tensor("{name}", shape={TensorShape(self._aval.shape)}, dtype={self.dtype.name})'
    return f"tf.Tensor({_numpy_text(self._value, False)}, shape={TensorShape(self._aval.shape)}, dtype={self.dtype.name})"


def _t_hash(self: Tensor) -> int:
    raise TypeError("Tensor is unhashable. Instead, use tensor.ref() as the key.")


def _t_len(self: Tensor) -> int:
    if not self._aval.shape:
        raise TypeError("Scalar tensor has no `len()`")
    return self._aval.shape[0]


def _t_iter(self: Tensor) -> Iterator[Tensor]:
    if not self._aval.shape:
        raise TypeError("Cannot iterate over a scalar tensor.")
    for i in range(self._aval.shape[0]):
        yield self[i]


def _t_bool(self: Tensor) -> bool:
    return bool(np.asarray(self._value))


def _t_index(self: Tensor) -> int:
    a = np.asarray(self._value)
    if a.dtype.kind not in "iub" or a.ndim:
        raise TypeError(f"Only scalar integer tensors can be used as an index, got shape {a.shape} dtype {a.dtype}.")
    return int(a)


def _t_array(self: Tensor, dtype: Any = None, copy: Any = None) -> np.ndarray:
    a = np.asarray(self._value)
    return a.astype(dtype) if dtype is not None else a


def _t_format(self: Tensor, spec: str) -> str:
    if not self._aval.shape:
        return format(np.asarray(self._value).item(), spec)
    return format(str(self), spec)


attach(Tensor, numpy=_t_numpy)
# Metadata reads go through ``_aval`` so that a lazy tensor answers without running its program.
attach(Tensor, shape=property(lambda self: TensorShape(self._aval.shape), doc="The static shape, a TensorShape."))
attach(Tensor, get_shape=lambda self: TensorShape(self._aval.shape))
attach(Tensor, dtype=property(lambda self: from_np(self._aval.dtype), doc="The element type, a tapejax DType."))
attach(Tensor, ndim=property(lambda self: len(self._aval.shape)))
attach(Tensor, device=property(
    lambda self: "/job:localhost/replica:0/task:0/device:CPU:0" if is_string_value(self._value)
    else str(next(iter(self._value.devices())))
))
attach(Tensor, __repr__=_t_repr)
attach(Tensor, __str__=_t_str)
attach(Tensor, __format__=_t_format)
attach(Tensor, __hash__=_t_hash)
attach(Tensor, __len__=_t_len)
attach(Tensor, __iter__=_t_iter)
attach(Tensor, __bool__=_t_bool)
attach(Tensor, __float__=lambda self: float(np.asarray(self._value)))
attach(Tensor, __int__=lambda self: int(np.asarray(self._value)))
attach(Tensor, __complex__=lambda self: complex(np.asarray(self._value)))
attach(Tensor, __index__=_t_index)
attach(Tensor, __array__=_t_array)
attach(Tensor, __array_priority__=100)
attach(Tensor, __jax_array__=lambda self: self._value)
def _t_set_shape(self: Tensor, shape: Any) -> None:
    """TF's ``Tensor.set_shape``: an eager tensor's shape is known, so only check it."""
    want = TensorShape(shape)
    if not want.is_compatible_with(self._aval.shape):
        raise ValueError(f"Tensor's shape {TensorShape(self._aval.shape)} is not compatible with supplied shape {want}.")


attach(Tensor, set_shape=_t_set_shape)
attach(Tensor, ref=lambda self: Reference(self))
attach(Tensor, experimental_ref=Tensor.ref)


def _flatten_tensor(t: Tensor) -> tuple:
    return (t._value,), None


def _unflatten_tensor(aux: Any, children: Any) -> Tensor:
    return Tensor(children[0])


jax.tree_util.register_pytree_node(Tensor, _flatten_tensor, _unflatten_tensor)


# ---- conversion --------------------------------------------------------------


def _infer_dtype(value: Any) -> np.dtype:
    """TF's inference for Python values: bool -> bool, int -> int32, float -> float32, complex -> complex128."""
    try:
        a = np.asarray(value)
    except ValueError as e:
        if isinstance(value, list | tuple) and ("inhomogeneous" in str(e) or "sequence" in str(e)):
            raise ValueError("Can't convert non-rectangular Python sequence to Tensor.") from None
        raise
    if a.dtype.kind in "SU":
        return np.dtype(object)
    if isinstance(value, np.ndarray | np.generic):
        return a.dtype
    k = a.dtype.kind
    if k == "b":
        return np.dtype(np.bool_)
    if k in "iu":
        if a.size and (a.max() > np.iinfo(np.int32).max or a.min() < np.iinfo(np.int32).min):
            return np.dtype(np.int64)
        return np.dtype(np.int32)
    if k == "f":
        return np.dtype(np.float32)
    if k == "c":
        return np.dtype(np.complex128)
    if k in "SU" or (k == "O" and _all_text(a)):
        return np.dtype(object)
    raise TypeError(f"Cannot convert {value!r} to a tensor: unsupported element type {a.dtype}.")


def _all_text(a: np.ndarray) -> bool:
    return all(isinstance(x, str | bytes | np.str_ | np.bytes_) for x in a.reshape(-1))


def to_bytes_array(value: Any) -> np.ndarray:
    """A string tensor's storage: a NumPy object array of ``bytes`` (str is UTF-8 encoded, as in TF)."""
    a = np.asarray(value, dtype=object)
    flat = a.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    for i, x in enumerate(flat):
        if isinstance(x, str | np.str_):
            out[i] = str(x).encode("utf-8")
        elif isinstance(x, bytes | np.bytes_):
            out[i] = bytes(x)
        else:
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype string")
    return out.reshape(a.shape)


def is_string_value(v: Any) -> bool:
    """A string tensor's value: a NumPy ``bytes`` array, or its ids inside a trace (``StrIds``)."""
    return (isinstance(v, np.ndarray) and v.dtype == object) or type(v) is StrIds


def _check_cast(value: Any, src: np.dtype, dst: np.dtype) -> None:
    # TF refuses to convert a Python/NumPy value into a dtype that cannot hold
    # it (1.5 into int32); a lossless conversion (2 into float32) is fine.
    if dst.kind in "iub" and src.kind in "fc":
        a = np.asarray(value)
        if not np.all(np.isfinite(a)) or not np.all(np.real(a) == np.round(np.real(a))) or src.kind == "c":
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {from_np(dst).name}")
    if dst.kind == "b" and src.kind != "b":
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype bool")


# Device arrays of Python scalars, by (type, value, dtype). A fresh array is a host-to-device
# transfer that the next compiled call waits on (on CPU about 60 us for `step(tf.constant(n))`,
# half the call); JAX arrays are immutable, so one array per scalar can serve every call.
# Filled outside JAX traces only (a traced conversion is staged into its trace).
_SCALARS: dict = {}
_SCALARS_MAX = 1024
_SCALAR_TYPES = (bool, int, float)


def _scalar_key(value: Any, dtype: DType | None) -> Any:
    t = type(value)
    if t not in _SCALAR_TYPES or not _jcore.trace_ctx.is_top_level():
        return None
    # float.hex tells -0.0 from 0.0 and keeps NaN equal to itself.
    # The x64 flag too: it decides what a large int or a float64 request converts to.
    return (t, value.hex() if t is float else value, None if dtype is None else dtype._np,
            x64_enabled())


def _to_array(value: Any, dtype: DType | None) -> jax.Array:
    key = _scalar_key(value, dtype)
    if key is not None:
        hit = _SCALARS.get(key)
        if hit is not None:
            return hit
        arr = _to_array_uncached(value, dtype)
        if isinstance(arr, jax.Array) and not isinstance(arr, jax.core.Tracer):
            if len(_SCALARS) >= _SCALARS_MAX:
                _SCALARS.clear()
            _SCALARS[key] = arr
        return arr
    return _to_array_uncached(value, dtype)


def _put(a: np.ndarray) -> jax.Array:
    # ``a`` is a fresh copy nothing else holds, so the transfer may alias it. jnp.asarray
    # would compile (and run) a copy program per new shape (JAX 0.10's "stage"): about
    # 10 ms for every constant of a new shape in a new program; a transfer compiles
    # nothing. It goes to the default device, uncommitted, as jnp.asarray's would.
    return jax.device_put(a)


def _to_array_uncached(value: Any, dtype: DType | None) -> jax.Array:
    if dtype is not None and dtype._np == np.dtype(object):
        if isinstance(value, jax.Array):
            raise ValueError(f"Tensor conversion requested dtype string for Tensor with dtype {from_np(value.dtype).name}")
        return to_bytes_array(value)  # type: ignore[return-value]
    if is_string_value(value):
        if dtype is not None:
            raise ValueError(f"Tensor conversion requested dtype {dtype.name} for Tensor with dtype string")
        return value
    if isinstance(value, jax.Array):
        src = value.dtype
    else:
        if isinstance(value, list | tuple) and any(isinstance(v, Tensor | VariableBase) for v in _iter_nested(value)):
            value = _pack_nested(value)
            src = value.dtype
        else:
            src = _infer_dtype(value)
    if src == np.dtype(object):
        if dtype is not None:
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {dtype.name}")
        return to_bytes_array(value)  # type: ignore[return-value]
    if dtype is None:
        src = _narrow_ints(value, src)
        check_width(src, "Converting a value of dtype")
        if isinstance(value, jax.Array):
            return value
        return _put(np.array(value, dtype=src))
    dst = dtype._np
    check_width(dst, "Requested dtype")
    if not isinstance(value, jax.Array):
        _check_cast(value, src, dst)
        # TF turns an out-of-range number into inf (float16 1e6) without a warning.
        with np.errstate(over="ignore"):
            return _put(np.array(value, dtype=dst))
    if src != dst:
        raise ValueError(
            f"Tensor conversion requested dtype {dtype.name} for Tensor with dtype {from_np(src).name}. "
            f"Use tf.cast(x, tf.{dtype.name}) to change a tensor's dtype."
        )
    return value


def _narrow_ints(value: Any, src: np.dtype) -> np.dtype:
    # NumPy defaults to int64; without x64 tapejax stores such data as int32 when
    # every value fits (nothing is lost), and raises otherwise.
    if src.kind in "iu" and src.itemsize == 8 and not x64_enabled():
        a = np.asarray(value)
        if a.size == 0 or (a.min() >= np.iinfo(np.int32).min and a.max() <= np.iinfo(np.int32).max):
            return np.dtype(np.int32)
    return src


def _iter_nested(v: Any) -> Iterator[Any]:
    for x in v:
        if isinstance(x, list | tuple):
            yield from _iter_nested(x)
        else:
            yield x


# ``tf.stack``, registered by the array family (which is above this module):
# convert_to_tensor packs a list that mixes tensors and numbers with it.
_STACK: list[Callable] = []


def register_stack(fn: Callable) -> None:
    _STACK[:] = [fn]


def _pack_nested(v: Any) -> jax.Array:
    # A list that mixes tensors and numbers: pack it (TF's auto-packing).
    stack = _STACK[0]

    def conv(x: Any) -> Any:
        if isinstance(x, list | tuple):
            return stack([conv(y) for y in x])
        return convert_to_tensor(x)

    return conv(v)._value


def convert_to_tensor(value: Any, dtype: Any = None, dtype_hint: Any = None, name: str | None = None) -> Tensor:
    """Convert a Tensor, Variable, NumPy array, Python number or nested list to a Tensor.

    A Tensor is returned as is (so identity, and therefore tape tracking, is
    kept); a Variable is read (which a recording tape may watch).

    Example:
        >>> import tapejax as tf
        >>> tf.convert_to_tensor([1.0, 2.0]).dtype
        tf.float32
    """
    if isinstance(value, Tensor):
        if dtype is not None and as_dtype(dtype)._np != value._aval.dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {as_dtype(dtype).name} for Tensor with dtype "
                f"{value.dtype.name}: {value!r}. Use tf.cast to change a tensor's dtype."
            )
        return value
    if isinstance(value, VariableBase):
        t = read_variable(value)
        if dtype is not None and as_dtype(dtype)._np != t._aval.dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {as_dtype(dtype).name} for variable of dtype "
                f"{t.dtype.name}. Use tf.cast to change a tensor's dtype."
            )
        return t
    conv = _COMPOSITES.get(type(value), False)
    if conv is not False:
        if conv is None:
            raise ValueError(f"Attempt to convert a value ({value!r}) with an unsupported type ({type(value)}) to a "
                             "Tensor. Use tf.sparse.to_dense to make a dense tensor of it.")
        return convert_to_tensor(conv(value), dtype=dtype, name=name)
    if value is None:
        raise ValueError("Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a Tensor.")
    d = as_dtype(dtype) if dtype is not None else None
    if d is None and dtype_hint is not None:
        hint = as_dtype(dtype_hint)
        try:
            return Tensor(_to_array(value, hint))
        except (TypeError, ValueError):
            pass
    return Tensor(_to_array(value, d))


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str | None = None) -> Tensor:
    """Create a constant tensor from a Python value, NumPy array or tensor.

    Python floats give float32 and ints int32, as in TF. A NumPy float64 array
    (or ``dtype=tf.float64``) needs 64-bit mode; see ``tapejax.enable_x64``.

    Example:
        >>> import tapejax as tf
        >>> print(tf.constant(3.0))
        tf.Tensor(3.0, shape=(), dtype=float32)
    """
    if isinstance(value, Tensor | VariableBase):
        arr = value._value
        if dtype is not None and as_dtype(dtype)._np != arr.dtype and (is_string_value(arr) or as_dtype(dtype)._np == np.dtype(object)):
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {as_dtype(dtype).name}")
        if dtype is not None and as_dtype(dtype)._np != arr.dtype:
            check_width(as_dtype(dtype)._np, "Requested dtype")
            arr = arr.astype(as_dtype(dtype)._np)
    else:
        arr = _to_array(value, as_dtype(dtype) if dtype is not None else None)
    if shape is not None:
        shape = tuple(shape)
        if is_string_value(arr):
            arr = np.broadcast_to(arr.reshape(()), shape).copy() if arr.size == 1 else arr.reshape(shape)
        elif arr.size == 1:
            arr = jnp.broadcast_to(arr.reshape(()), shape)
        elif int(np.prod(shape)) == arr.size:
            arr = arr.reshape(shape)
        else:
            raise TypeError(f"Eager execution of tf.constant with unsupported shape. Tensor {value!r} (converted from "
                            f"{arr.size} elements) can't be reshaped to {list(shape)}.")
    return Tensor(arr)


# Composite tensors (SparseTensor, IndexedSlices; defined in the tf layer) register here:
# class -> its dense conversion (None: TF refuses to convert it, as for SparseTensor).
_COMPOSITES: dict[type, Any] = {}


def register_composite(cls: type, to_dense: Any) -> None:
    _COMPOSITES[cls] = to_dense


def is_tensor(x: Any) -> bool:
    """True for tapejax Tensors, Variables and composite tensors (``tf.is_tensor``)."""
    return isinstance(x, Tensor | VariableBase) or type(x) in _COMPOSITES

