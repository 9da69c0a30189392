"""``tf.dtypes``: the dtype objects, ``DType``, ``as_dtype`` and the casts.

Example:
    >>> import tapejax as tf
    >>> tf.dtypes.float32.is_floating, tf.dtypes.as_dtype("int32").as_numpy_dtype
    (True, <class 'numpy.int32'>)
"""

from ._ops._dtypes import (
    DType,
    as_dtype,
    bfloat16,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    string,  # noqa: E402  (module branch: tf.string)
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._ops._dtypes import (
    bool_ as bool,  # noqa: A001  (TF's name)
)
from ._tf._namespace import populate as _populate

half = float16
double = float64
float = float32  # noqa: A001  (TF's alias)

# Computed at import (from the op table): the generated stub dtypes.pyi spells these names out for type checkers.
__all__ = [  # pyright: ignore[reportUnsupportedDunderAll]
    "DType", "as_dtype", "bfloat16", "bool", "complex64", "complex128", "double", "float", "float16", "float32",
    "float64", "half", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
] + ["string"] + _populate(globals(), "dtypes")
