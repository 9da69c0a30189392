"""``tf.print``: print tensor values the way TF does (``6``, ``[8 8]``, ``None``)."""

from __future__ import annotations

import sys
from typing import Any

import jax
import numpy as np

from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from .._ops._strtable import StrIds, lookup
from .._ops._tensor import TensorShape

__all__ = ["print_"]


def _scalar_text(v: Any) -> str:
    if isinstance(v, np.floating) or type(v).__name__ == "bfloat16":
        # TF's DoubleToBuffer/FloatToBuffer: the short form (15 / 6 digits) when it reads
        # back to the same value, else 17 / 9 digits.
        if isinstance(v, np.float64):
            x = float(v)
            t = f"{x:.15g}"
            return t if float(t) == x else f"{x:.17g}"
        f = np.float32(v)
        t = f"{float(f):.6g}"
        return t if np.float32(float(t)) == f else f"{float(f):.9g}"
    if isinstance(v, np.bool_):
        return "1" if v else "0"
    if isinstance(v, bytes):
        return '"' + v.decode("utf-8", "replace") + '"'  # a string tensor's element, as TF prints it
    return str(v)


def _array_text(a: np.ndarray, summarize: int, indent: int = 0) -> str:
    if a.ndim == 0:
        return _scalar_text(a[()])
    n = a.shape[0]
    if summarize >= 0 and n > 2 * summarize:
        idx = list(range(summarize)) + [None] + list(range(n - summarize, n))
    else:
        idx = list(range(n))
    if a.ndim == 1:
        return "[" + " ".join("..." if i is None else _scalar_text(a[i]) for i in idx) + "]"
    sep = "\n" + " " * (indent + 1)
    return "[" + sep.join("..." if i is None else _array_text(a[i], summarize, indent + 1) for i in idx) + "]"


def format_value(v: Any, summarize: int = 3) -> str:
    if isinstance(v, Tensor | VariableBase):
        return _array_text(np.asarray(v._value), summarize)
    if isinstance(v, TensorShape):
        return repr(v)  # TF prints a shape as TensorShape([3]), not as the tuple it is
    if isinstance(v, list | tuple):
        inner = ", ".join(format_value(x, summarize) for x in v)
        if isinstance(v, list):
            return f"[{inner}]"
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {format_value(x, summarize)}" for k, x in v.items()) + "}"
    return str(v)


def print_(*inputs: Any, output_stream: Any = None, summarize: int = 3, sep: str = " ", end: str = "\n", name: Any = None) -> None:
    """Print values as TF's ``tf.print`` does: tensors by value, to stderr by default.

    Example:
        >>> import sys, tapejax as tf
        >>> tf.print(tf.constant([8.0, 8.0]), output_stream=sys.stdout)
        [8 8]
    """
    if _core.state.tracing:
        # Inside a tf.function trace: print on every call, with the runtime values,
        # whatever the arguments are (Python values print every call too, as in TF).
        flat, tree = jax.tree_util.tree_flatten(list(inputs), is_leaf=lambda x: isinstance(x, Tensor | VariableBase))
        # A constant string tensor prints as it is; a traced one goes in as its ids (_ops/_strtable).
        is_t = [isinstance(v, Tensor | VariableBase) and not isinstance(v._value, np.ndarray) for v in flat]
        is_s = [t and type(v._value) is StrIds for v, t in zip(flat, is_t)]

        def emit(*vals: Any) -> None:
            it = iter(vals)
            concrete = [Tensor(lookup(next(it)) if s else next(it)) if t else v for v, t, s in zip(flat, is_t, is_s)]
            print_(*jax.tree_util.tree_unflatten(tree, concrete), output_stream=output_stream, summarize=summarize,
                   sep=sep, end=end)

        jax.debug.callback(emit, *[v._value.ids if s else v._value for v, t, s in zip(flat, is_t, is_s) if t],
                           ordered=True)
        return
    stream = sys.stderr if output_stream is None else output_stream
    text = sep.join(format_value(v, summarize) for v in inputs) + end
    if isinstance(stream, str):
        # TF accepts "file://path" and the names of the standard streams.
        if stream.startswith("file://"):
            with open(stream[7:], "a") as f:
                f.write(text)
            return
        stream = {"stdout": sys.stdout, "stderr": sys.stderr}.get(stream, sys.stderr)
    stream.write(text)
