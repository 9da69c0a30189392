"""Data types: TF-style ``DType`` objects over NumPy/JAX dtypes, and the x64 rule.

JAX runs with 32-bit types unless x64 is switched on. tapejax never narrows a
64-bit request silently: asking for float64 (or int64, complex128) without x64
raises with instructions instead.
"""

from __future__ import annotations

from typing import Any

import jax
import ml_dtypes
import numpy as np

from .._core._kinds import INEXACT

__all__ = ["DType", "as_dtype", "x64_enabled", "enable_x64"]


class DType:
    """A tensor element type with TF's names and predicates.

    Example:
        >>> import tapejax as tf
        >>> tf.float32.name, tf.float32.is_floating, tf.int32.is_integer
        ('float32', True, True)
    """

    __slots__ = ("_np", "name")

    def __init__(self, np_dtype: np.dtype, name: str):
        self._np = np.dtype(np_dtype)
        self.name = name

    @property
    def as_numpy_dtype(self) -> type:
        return self._np.type

    @property
    def base_dtype(self) -> DType:
        return self

    @property
    def is_floating(self) -> bool:
        return self._np.kind == "f" or self._np == _BF16

    @property
    def is_integer(self) -> bool:
        return self._np.kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        return self._np.kind == "u"

    @property
    def is_complex(self) -> bool:
        return self._np.kind == "c"

    @property
    def is_bool(self) -> bool:
        return self._np.kind == "b"

    @property
    def is_differentiable(self) -> bool:
        """True for the dtypes a gradient can flow through (floating and complex)."""
        return self.is_floating or self.is_complex

    @property
    def size(self) -> int:
        return self._np.itemsize

    @property
    def real_dtype(self) -> DType:
        if self.is_complex:
            return _BY_NP[np.dtype(np.float32 if self._np == np.complex64 else np.float64)]
        return self

    @property
    def is_numpy_compatible(self) -> bool:
        return True

    @property
    def min(self) -> Any:
        return (np.finfo if (self.is_floating) else np.iinfo)(self._np).min

    @property
    def max(self) -> Any:
        return (np.finfo if (self.is_floating) else np.iinfo)(self._np).max

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self._np == other._np
        try:
            return self._np == as_dtype(other)._np
        except TypeError:
            return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._np)

    def __repr__(self) -> str:
        return f"tf.{self.name}"

    def __str__(self) -> str:
        return f"<dtype: '{self.name}'>"

    def __reduce__(self):
        return (as_dtype, (self.name,))


_BF16 = np.dtype(ml_dtypes.bfloat16)

_ALL = [
    (np.float16, "float16"),
    (np.float32, "float32"),
    (np.float64, "float64"),
    (_BF16, "bfloat16"),
    (np.int8, "int8"),
    (np.int16, "int16"),
    (np.int32, "int32"),
    (np.int64, "int64"),
    (np.uint8, "uint8"),
    (np.uint16, "uint16"),
    (np.uint32, "uint32"),
    (np.uint64, "uint64"),
    (np.bool_, "bool"),
    (np.complex64, "complex64"),
    (np.complex128, "complex128"),
    # TF's string: tensors of bytes, held as NumPy object arrays on the host.
    (np.object_, "string"),
]
_BY_NP: dict[np.dtype, DType] = {}
_BY_NAME: dict[str, DType] = {}
for _np_dt, _name in _ALL:
    _d = DType(np.dtype(_np_dt), _name)
    _BY_NP[_d._np] = _d
    _BY_NAME[_name] = _d
_BY_NAME["half"] = _BY_NAME["float16"]
_BY_NAME["float"] = _BY_NAME["float32"]
_BY_NAME["double"] = _BY_NAME["float64"]

float16 = _BY_NAME["float16"]
float32 = _BY_NAME["float32"]
float64 = _BY_NAME["float64"]
bfloat16 = _BY_NAME["bfloat16"]
int8 = _BY_NAME["int8"]
int16 = _BY_NAME["int16"]
int32 = _BY_NAME["int32"]
int64 = _BY_NAME["int64"]
uint8 = _BY_NAME["uint8"]
uint16 = _BY_NAME["uint16"]
uint32 = _BY_NAME["uint32"]
uint64 = _BY_NAME["uint64"]
bool_ = _BY_NAME["bool"]
complex64 = _BY_NAME["complex64"]
complex128 = _BY_NAME["complex128"]
string = _BY_NAME["string"]

# The set a gradient can flow through (owned by the recorder, which needs it too).
assert INEXACT == frozenset(d._np for d in _BY_NP.values() if d.is_differentiable)
_WIDE = frozenset(np.dtype(t) for t in (np.float64, np.int64, np.uint64, np.complex128))


def as_dtype(x: Any) -> DType:
    """Convert a DType, NumPy dtype, Python type or name to a tapejax ``DType``.

    Example:
        >>> import tapejax as tf
        >>> tf.as_dtype("float32") == tf.float32
        True
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        d = _BY_NAME.get(x)
        if d is None:
            raise TypeError(f"Cannot convert {x!r} to a tapejax DType; known names: {sorted(_BY_NAME)}.")
        return d
    if x is float:
        return float32
    if x is int:
        return int32
    if x is bool:
        return bool_
    if x is complex:
        return complex64
    if x is bytes or x is str:
        return string
    try:
        npd = np.dtype(x)
    except TypeError:
        raise TypeError(f"Cannot convert {x!r} to a tapejax DType.") from None
    if npd.kind in "SU":
        return string
    d = _BY_NP.get(npd)
    if d is None:
        raise TypeError(f"tapejax has no dtype for NumPy dtype {npd}.")
    return d


def from_np(npd: np.dtype) -> DType:
    return _BY_NP[npd]


# JAX's options are attributes its Config object makes at run time: typed Any here.
_JAX_CONFIG: Any = jax.config


def x64_enabled() -> bool:
    """Whether 64-bit types are available (JAX x64 mode, globally or in ``jax.enable_x64()``)."""
    return bool(_JAX_CONFIG.jax_enable_x64)


def enable_x64(enabled: bool = True) -> None:
    """Opt in to float64/int64/complex128 (sets JAX's ``jax_enable_x64``).

    tapejax never does this on import; call it once at program start, or set
    ``JAX_ENABLE_X64=1`` in the environment, or use ``with jax.enable_x64():``.

    Example:
        >>> import tapejax as tf
        >>> tf.enable_x64(); tf.constant(1.0, dtype=tf.float64).dtype
        tf.float64
        >>> tf.enable_x64(False)
    """
    jax.config.update("jax_enable_x64", bool(enabled))


X64_HINT = (
    "JAX runs in 32-bit mode, and tapejax will not narrow it silently. To use 64-bit types, "
    "set JAX_ENABLE_X64=1 before starting Python, call tapejax.enable_x64() at program start, "
    "or run the code inside `with jax.enable_x64():`. To stay in 32 bits, pass dtype=tf.float32 "
    "(or tf.int32) explicitly."
)


def check_width(npd: np.dtype, what: str = "dtype") -> None:
    """Raise if ``npd`` is a 64-bit type and x64 is off (the no-silent-truncation rule)."""
    if npd in _WIDE and not _JAX_CONFIG.jax_enable_x64:
        raise TypeError(f"{what} {npd} needs 64-bit mode. {X64_HINT}")

