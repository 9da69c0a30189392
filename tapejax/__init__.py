"""tapejax: TensorFlow 2's ``GradientTape`` on JAX.

``import tapejax as tf`` runs TF-style differentiation code: tensors, variables,
nested and persistent tapes, ``UnconnectedGradients``, with every recorded slice
replayed through ``jax.vjp`` and compiled by XLA.

Example:
    >>> import tapejax as tf
    >>> x = tf.constant(3.0)
    >>> with tf.GradientTape() as g:
    ...     g.watch(x)
    ...     y = x * x
    >>> print(g.gradient(y, x))
    tf.Tensor(6.0, shape=(), dtype=float32)
"""

from __future__ import annotations

from . import _ops as _ops_module
from . import bitwise, debugging, dtypes, errors, linalg, math, nn, random
from . import autodiff, config
from ._autodiff import custom_gradient, recompute_grad, stop_gradient
from ._core import Tensor
from ._dtypes import (
    DType,
    as_dtype,
    bfloat16,
    bool_ as bool,  # noqa: A001  (TF's name)
    complex64,
    complex128,
    enable_x64,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
    x64_enabled,
)
from ._explain import Explanation, NoneGradientCause, NoneGradientWarning, explain
from ._function import Function, TensorSpec, function
from ._gradient_tape import GradientTape, UnconnectedGradients
from ._namespace import populate as _populate
from ._print import print_ as print  # noqa: A001  (TF's name)
from ._replay import cache_clear as replay_cache_clear
from ._replay import cache_info as replay_cache_info
from ._replay import set_cache_size as set_replay_cache_size
from ._replay import set_compile as set_replay_compile
from ._tensor import TensorShape, constant, convert_to_tensor, is_tensor
from ._variable import Variable

newaxis = None
half = float16
double = float64

_populate(globals(), "")  # top-level ops from the table: tf.sin, tf.reduce_sum, ...

from . import keras  # noqa: E402  (last: tf.keras is written with the public ops above)

__version__ = "0.1.0"
del _ops_module
