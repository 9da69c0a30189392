"""Keras's logits link: a softmax/sigmoid output remembers the logits it came from.

TF's Keras marks the output of its ``softmax`` and ``sigmoid`` activations with
their logits (``_keras_logits``), and its cross-entropy losses then compute
from the logits (no probability clipping, no saturation). Keras's JAX backend
cannot attach attributes to arrays, so the link lives here: a table from the
output tensor's id to its logits, emptied when the output is garbage-collected.
A built-in layer with such an activation is recorded as two ops (the layer
without its activation, then the activation), and the cross-entropies look
their ``y_pred`` up (``_objects``).
"""

from __future__ import annotations

import weakref
from typing import Any

import jax.numpy as jnp

from .._core._recorder import Tensor, VariableBase

_LOGITS: dict[int, tuple[str, Tensor]] = {}


def remember_logits(output: Any, logits: Any, kind: str) -> Any:
    """Record that ``output`` is ``kind`` ("softmax" or "sigmoid") of ``logits``."""
    if isinstance(output, Tensor) and isinstance(logits, Tensor):
        _LOGITS[output._id] = (kind, logits)
        weakref.finalize(output, _LOGITS.pop, output._id, None)
    return output


def logits_of(output: Any, kind: str) -> Tensor | None:
    """The logits ``output`` was computed from by a Keras ``kind`` activation, else None."""
    if not isinstance(output, Tensor):
        return None
    hit = _LOGITS.get(output._id)
    return hit[1] if hit is not None and hit[0] == kind else None


def value(x: Any) -> Any:
    """The array of a tensor or variable (a tracing-aware read), or ``x`` as an array."""
    if isinstance(x, Tensor | VariableBase):
        return x._value
    return jnp.asarray(x)
