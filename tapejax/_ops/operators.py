"""Python operators on ``Tensor`` and ``Variable`` (``+``, ``@``, ``[]``, ``==``, ...).

Registration: this module looks the ops up in the op table and sets them as
methods on the core classes, so ``tapejax._core`` stays free of any op list.
It runs after every family has registered (``tapejax._ops.__init__`` imports it last).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._core._recorder import Tensor, VariableBase
from ._machinery import OPS, _dt, _is_t
from .array import getitem
from .linalg import matmul

_E = OPS


def _r(fn: Callable) -> Callable:
    return lambda self, other: fn(other, self)


def _pow_method(self: Any, other: Any) -> Tensor:
    return _E["pow"](self, other)


def _bool_or_int(bool_op: str, int_op: str) -> Callable:
    # Python's & | ^ on tensors: logical for bool, bitwise for ints (as in TF).
    def op(x: Any, y: Any) -> Tensor:
        t = x if _is_t(x) else y
        return _E[bool_op if _dt(t) == np.bool_ else int_op](x, y)

    return op


_and = _bool_or_int("logical_and", "bitwise_and")
_or = _bool_or_int("logical_or", "bitwise_or")
_xor = _bool_or_int("logical_xor", "bitwise_xor")


def _invert(x: Any) -> Tensor:
    return _E["logical_not"](x) if _dt(x) == np.bool_ else _E["invert"](x)


_OPERATORS = {
    "__add__": _E["add"],
    "__radd__": _r(_E["add"]),
    "__sub__": _E["subtract"],
    "__rsub__": _r(_E["subtract"]),
    "__mul__": _E["multiply"],
    "__rmul__": _r(_E["multiply"]),
    "__truediv__": _E["divide"],
    "__rtruediv__": _r(_E["divide"]),
    "__floordiv__": _E["floordiv"],
    "__rfloordiv__": _r(_E["floordiv"]),
    "__mod__": _E["floormod"],
    "__rmod__": _r(_E["floormod"]),
    "__pow__": _pow_method,
    "__rpow__": _r(_E["pow"]),
    "__matmul__": matmul,
    "__rmatmul__": _r(matmul),
    "__neg__": _E["negative"],
    "__pos__": lambda self: self,
    "__abs__": _E["abs"],
    "__lt__": _E["less"],
    "__le__": _E["less_equal"],
    "__gt__": _E["greater"],
    "__ge__": _E["greater_equal"],
    "__and__": _and,
    "__rand__": _r(_and),
    "__or__": _or,
    "__ror__": _r(_or),
    "__xor__": _xor,
    "__rxor__": _r(_xor),
    "__invert__": _invert,
    "__getitem__": getitem,
}


def _eq(self: Any, other: Any, op: str = "equal") -> Any:
    # TF 2's tensor_equals: None compares False; otherwise the elementwise op with its
    # dtype errors (TypeError for a Python float beside ints, InvalidArgumentError for
    # mixed tensor dtypes), and shapes that do not broadcast give a scalar False/True
    # (``incompatible_shape_error=False``).
    if other is None:
        return op != "equal"
    if _is_t(other) and _is_t(self):
        try:
            jnp.broadcast_shapes(tuple(self._aval.shape), tuple(other._aval.shape))
        except ValueError:
            if _dt(self) == _dt(other):
                return Tensor(jnp.asarray(op != "equal"))
    return _E[op](self, other)


def _ne(self: Any, other: Any) -> Any:
    return _eq(self, other, "not_equal")


_OPERATORS["__eq__"] = _eq
_OPERATORS["__ne__"] = _ne

for _cls in (Tensor, VariableBase):
    for _k, _f in _OPERATORS.items():
        setattr(_cls, _k, _f)
