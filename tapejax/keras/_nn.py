"""Helpers for the Keras surface: Keras's logits link, and array access for non-differentiated code.

Keras marks the output of its ``softmax`` and ``sigmoid`` activations with the
logits they came from, and its cross-entropy losses then compute from the logits
(no probability clipping, no saturation). ``remember_logits``/``logits_of`` keep
that link here: a table from the output tensor's id to its logits, emptied when
the output tensor is garbage-collected (tapejax tensors have no attribute dict).

The differentiable pieces (softmax, the cross-entropies, clipping) are tapejax's
own ``tf.nn``/``tf`` ops, so tapes record them with TF's gradients.
"""

from __future__ import annotations

import weakref
from typing import Any

import jax.numpy as jnp

from .._tf import _surface as tf

from .._core._recorder import Tensor, VariableBase

# ---- the logits link of Keras's softmax/sigmoid outputs ----------------------------------

_LOGITS: dict[int, tuple[str, Tensor]] = {}


def remember_logits(output: Tensor, logits: Tensor, kind: str) -> Tensor:
    """Record that ``output`` is ``kind`` ("Softmax" or "Sigmoid") of ``logits``."""
    if isinstance(output, Tensor):
        _LOGITS[output._id] = (kind, logits)
        weakref.finalize(output, _LOGITS.pop, output._id, None)
    return output


def logits_of(output: Any, kind: str) -> Tensor | None:
    """The logits ``output`` was computed from by a Keras ``kind`` activation, else None."""
    if not isinstance(output, Tensor):
        return None
    hit = _LOGITS.get(output._id)
    return hit[1] if hit is not None and hit[0] == kind else None


# ---- array access (not differentiated) --------------------------------------------------


def value(x: Any) -> Any:
    """The array of a tensor or variable (a tracing-aware read), or ``x`` as an array."""
    if isinstance(x, Tensor | VariableBase):
        return x._value
    return jnp.asarray(x)


def squeeze_last(x: Tensor) -> Tensor:
    return tf.squeeze(x, axis=-1)


def expand_last(x: Tensor) -> Tensor:
    return tf.expand_dims(x, -1)
