"""What GradientTape, the jacobians and ``explain`` share, below all three:
the target/source checks, ``UnconnectedGradients``, variables as targets, and
the hook ``gradient`` calls to warn about None gradients (set by ``_explain``,
which sits above the tape).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import jax

from .._core._recorder import Tensor, VariableBase

# ``gradient``'s warning when ``config.explain_none_gradients`` is on; ``_explain``
# (which imports the tape) installs it: (tape, targets, flat_sources, grads) -> None.
warn_none_gradients: Callable[[Any, list, list, list], None]


class UnconnectedGradients(enum.Enum):
    """What ``gradient``/``jacobian`` (and ``ForwardAccumulator.jvp``) return for a
    source the target does not depend on.

    ``NONE`` (the default) returns None; ``ZERO`` returns zeros of the source's
    shape and dtype (for ``jvp``: of the target's). The strings ``'none'`` and
    ``'zero'`` are accepted too, lowercase only, as in TF; anything else raises
    ValueError. ``batch_jacobian`` gives zeros either way (TF's rule).
    ``tapejax.explain`` says why a source is unconnected.

    Example:
        >>> import tapejax as tf
        >>> x, y = tf.constant(1.0), tf.constant(2.0)
        >>> with tf.GradientTape() as t:
        ...     t.watch(x)
        ...     z = x * 2.0
        >>> print(t.gradient(z, y, unconnected_gradients=tf.UnconnectedGradients.ZERO))
        tf.Tensor(0.0, shape=(), dtype=float32)
    """

    NONE = "none"
    ZERO = "zero"


def _unconnected(value: Any) -> UnconnectedGradients:
    try:
        return UnconnectedGradients(value)
    except ValueError:
        raise ValueError(
            f"Unknown value for unconnected_gradients: {value!r}. Use tf.UnconnectedGradients.NONE, "
            "tf.UnconnectedGradients.ZERO, 'none' or 'zero'."
        ) from None


def _is_leaf(v: Any) -> bool:
    return v is None or isinstance(v, Tensor | VariableBase)


def _flatten(tree: Any) -> tuple[list, Any]:
    return jax.tree_util.tree_flatten(tree, is_leaf=_is_leaf)


def _describe(v: Any) -> str:
    return f"{type(v).__module__}.{type(v).__qualname__}" if type(v).__module__ != "builtins" else type(v).__name__


def _check_tensors(flat: list, role: str) -> None:
    for v in flat:
        if not isinstance(v, Tensor | VariableBase):
            raise TypeError(
                f"GradientTape.gradient {role} must be tf.Tensor or tf.Variable objects (or nested structures of "
                f"them), got {_describe(v)} {v!r}. Convert with tf.constant(...) and, for a source, watch it "
                "inside the tape's block before computing with it."
            )


class _VarTarget(Tensor):
    """A variable used as a gradient target: its current value, tied to the variable."""

    __slots__ = ("var",)

    def __init__(self, var: VariableBase):
        super().__init__(var._value)
        self.var = var


def _as_target(t: Any) -> Tensor:
    return _VarTarget(t) if isinstance(t, VariableBase) else t
