"""The ``tf.*`` surface: every public name of ``tapejax`` except ``keras``.

``tapejax/__init__.py`` re-exports ``__all__`` from here; ``tapejax.keras``
(which ``tapejax`` imports) uses this module as its ``tf``, so that nothing
imports the package root back.
"""

from __future__ import annotations

from .. import autodiff, autograph, bitwise, config, debugging, dtypes, errors, linalg, math, nn, random, saved_model
from .._core._recorder import Tensor
from .._engine._replay import cache_clear as replay_cache_clear
from .._engine._replay import cache_info as replay_cache_info
from .._engine._replay import set_cache_size as set_replay_cache_size
from .._engine._replay import set_compile as set_replay_compile
from .._ops._dtypes import (
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
from .._ops._tensor import TensorShape, constant, convert_to_tensor, is_tensor
from ._autodiff import custom_gradient, recompute_grad, stop_gradient
from ._distribute_ctx import VariableAggregation, VariableSynchronization
from ._explain import Explanation, NoneGradientCause, NoneGradientWarning, explain
from ._function import Function, TensorSpec, function, init_scope
from ._gradient_tape import GradientTape, UnconnectedGradients
from ._namespace import populate as _populate
from ._print import print_ as print  # noqa: A001  (TF's name)
from ._variable import Variable
from ._interop import from_jax, to_jax
from ._interop import install as _install_interop

_install_interop()

# Control flow (tf.cond, tf.while_loop, tf.map_fn, ...): _tf/_control_flow.py.
from ._control_flow import TensorArray, case, cond, foldl, foldr, map_fn, scan, switch_case, vectorized_map  # noqa: I001
from ._control_flow import while_loop  # noqa: I001

newaxis = None
half = float16
double = float64

# ---- module branch (issue 17): tf.Module, name scopes, nest, utilities ----
from .. import image, io, nest, sparse, strings, train  # noqa: E402
from ._composite import IndexedSlices, SparseTensor  # noqa: E402
from .._ops._dtypes import string  # noqa: E402
from ._module import Module  # noqa: E402
from ._name_scope import name_scope  # noqa: E402
from ._utils import device, get_static_value, grad_pass_through, identity_n, numpy_function, py_function  # noqa: E402

_MODULE_BRANCH = ["image", "io", "nest", "sparse", "strings", "train", "string", "IndexedSlices", "SparseTensor", "Module",
                  "name_scope", "device", "get_static_value", "grad_pass_through", "identity_n", "numpy_function", "py_function"]
# ---- end module branch ----

_OPS = _populate(globals(), "")  # top-level ops from the table: tf.sin, tf.reduce_sum, ...

# Computed at import (the op table adds names): the generated stub tapejax/__init__.pyi spells the tf.* surface
# out for type checkers.
__all__ = sorted(  # pyright: ignore[reportUnsupportedDunderAll]
    {
        "autodiff", "autograph", "bitwise", "config", "debugging", "dtypes", "errors", "linalg", "math", "nn", "random", "saved_model",
        "Tensor", "replay_cache_clear", "replay_cache_info", "set_replay_cache_size", "set_replay_compile",
        "DType", "as_dtype", "bfloat16", "bool", "complex64", "complex128", "enable_x64", "float16", "float32",
        "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "x64_enabled",
        "TensorShape", "constant", "convert_to_tensor", "is_tensor",
        "custom_gradient", "recompute_grad", "stop_gradient",
        "Explanation", "NoneGradientCause", "NoneGradientWarning", "explain",
        "Function", "TensorSpec", "function", "init_scope", "GradientTape", "UnconnectedGradients", "print", "Variable",
        "VariableAggregation", "VariableSynchronization",
        "from_jax", "to_jax",
        "newaxis", "half", "double",
        # control flow
        "TensorArray", "case", "cond", "foldl", "foldr", "map_fn", "scan", "switch_case", "vectorized_map", "while_loop",
        *_OPS,
        *_MODULE_BRANCH,
    }
)

# ---- guides branch (issue 17): tf.types, tf.ragged, tf.summary, tf.profiler ----
from .. import profiler, ragged, summary, types  # noqa: E402
from ._ragged import RaggedTensor  # noqa: E402

__all__ = sorted({*__all__, "types", "ragged", "RaggedTensor", "summary", "profiler"})  # pyright: ignore[reportUnsupportedDunderAll]
# ---- end guides branch ----
