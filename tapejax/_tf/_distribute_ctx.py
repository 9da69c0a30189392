"""The distribution state the TF layer needs: which strategy's scope is active, which replica runs.

``tapejax.distribute`` (an ext package) owns the strategies; the layer below it
only keeps the per-thread stacks they push, the hook that places a new variable
(``Variable.__init__`` calls ``place_variable``), and the two loss helpers of
``tf.nn`` that read the replica count. The default strategy object is
registered by ``tapejax.distribute`` at import (injection, not an upward import).
"""

from __future__ import annotations

import enum
import threading
import weakref
from typing import Any

import jax
import jax.core
import numpy as np

from .._core._recorder import Tensor, VariableBase
from .._ops._dtypes import from_np
from .._ops._machinery import OPS, cast
from .._ops._tensor import convert_to_tensor

__all__ = ["VariableAggregation", "VariableSynchronization", "compute_average_loss", "scale_regularization_loss"]


class VariableAggregation(enum.Enum):
    """How the replicas' updates of a variable combine inside ``strategy.run`` (``tf.VariableAggregation``).

    Example:
        >>> import tapejax as tf
        >>> tf.VariableAggregation.SUM.value
        1
    """

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3


class VariableSynchronization(enum.Enum):
    """When a distributed variable is synchronized (``tf.VariableSynchronization``); ``ON_READ`` marks per-replica state.

    Example:
        >>> import tapejax as tf
        >>> tf.VariableSynchronization.ON_READ.value
        3
    """

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


def _enum(cls: type[enum.Enum], x: Any, default: Any) -> Any:
    if x is None:
        return default
    if isinstance(x, cls):
        return x
    what = "aggregation" if cls is VariableAggregation else "synchronization"
    raise ValueError(
        f"Invalid variable {what} mode: {x} for variable: None. Pass a tf.{cls.__name__} member, e.g. "
        f"tf.{cls.__name__}.{list(cls.__members__)[1]}."
    )


# Variables created with a synchronization or aggregation other than the default: uid -> (sync, agg),
# dropped with the variable (variables are unhashable, as in TF).
_policies: dict[int, tuple] = {}


def note_variable(var: Any, synchronization: Any, aggregation: Any) -> None:
    """Remember how ``strategy.run`` must combine the replicas' writes of ``var`` (bad values raise here)."""
    sync = _enum(VariableSynchronization, synchronization, VariableSynchronization.AUTO)
    agg = _enum(VariableAggregation, aggregation, VariableAggregation.NONE)
    if sync is not VariableSynchronization.AUTO or agg is not VariableAggregation.NONE:
        _policies[var._uid] = (sync, agg)
        weakref.finalize(var, _policies.pop, var._uid, None)


def write_policy(var: Any) -> tuple:
    return _policies.get(var._uid, (VariableSynchronization.AUTO, VariableAggregation.NONE))


class _Stacks(threading.local):
    def __init__(self) -> None:
        # Strategies whose scope() is entered, innermost last.
        self.strategies: list[Any] = []
        # Replica contexts of the strategy.run calls running on this thread, innermost last.
        self.replicas: list[Any] = []


stacks = _Stacks()

# Set by tapejax.distribute: the strategy get_strategy() returns outside every scope.
default_strategy: Any = None

# Called with the innermost strategy in scope (None outside every scope) each time a scope is
# entered or left. tapejax.keras registers one that keeps Keras's own distribution (which places
# the variables Keras creates) in step with the tf.distribute scope; injected, not imported.
scope_listeners: list = []


def notify_scope() -> None:
    s = stacks.strategies[-1] if stacks.strategies else None
    for listener in scope_listeners:
        listener(s)


class VariableCreationInReplica(Exception):
    """Raised by a Keras layer about to create its variables inside the traced SPMD step.

    ``strategy.run`` catches it and builds the step's variables eagerly first
    (its build pass), as it does for ``tf.Variable``s created in the step: a
    variable created inside the trace would hold a traced value.
    """


def in_spmd_trace() -> bool:
    """Whether ``strategy.run`` is tracing its SPMD step (replica context, not its eager build pass)."""
    return bool(stacks.replicas) and bool(getattr(stacks.replicas[-1], "_spmd", False))


def current_strategy() -> Any:
    """The innermost strategy in scope (or of the running replica), else the default strategy."""
    if stacks.replicas:
        return stacks.replicas[-1].strategy
    if stacks.strategies:
        return stacks.strategies[-1]
    return default_strategy


def has_strategy() -> bool:
    return bool(stacks.strategies or stacks.replicas)


def in_cross_replica_context() -> bool:
    """TF's rule: inside a (non-default) strategy's scope but not inside its ``run``."""
    return bool(stacks.strategies) and not stacks.replicas


def place_variable(value: Any) -> Any:
    """A new variable's value, placed by the strategy in scope (replicated over its mesh)."""
    if not stacks.strategies and not stacks.replicas:
        return value
    return current_strategy()._place_variable(value)


def host_value(value: Any) -> Any:
    """A replicated array spanning several processes as this process's copy (NumPy can read it)."""
    if (isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer) and not value.is_fully_addressable
            and value.sharding.is_fully_replicated):
        return value.addressable_data(0)
    return value


def _num_replicas() -> int:
    s = current_strategy()
    return 1 if s is None else int(s.num_replicas_in_sync)


def compute_average_loss(per_example_loss: Any, sample_weight: Any = None, global_batch_size: Any = None) -> Tensor:
    """Scale per-example losses by ``sample_weight`` and average them over the global batch (``tf.nn.compute_average_loss``).

    ``sum(per_example_loss * sample_weight) / global_batch_size``; without
    ``global_batch_size`` it is this replica's batch size times
    ``num_replicas_in_sync``, so that summing the gradients of all replicas (as
    ``strategy.run`` + ``apply_gradients`` does) gives the gradient of the mean
    loss over the global batch.

    Example:
        >>> import tapejax as tf
        >>> print(tf.nn.compute_average_loss([1.0, 2.0, 3.0], global_batch_size=6))
        tf.Tensor(1.0, shape=(), dtype=float32)
    """
    loss = convert_to_tensor(per_example_loss)
    dt = loss._value.dtype
    if loss._value.ndim == 0:
        raise ValueError(
            "Invalid value passed for `per_example_loss`. Expected a tensor with at least rank 1. Received: "
            f"{per_example_loss}. Pass the unreduced per-example losses (e.g. a loss with reduction='none')."
        )
    lv = loss._value
    if sample_weight is not None:
        w = convert_to_tensor(sample_weight)._value.astype(dt)
        lv = lv * w
    if global_batch_size is None:
        if in_cross_replica_context():
            raise RuntimeError(
                "You are calling `compute_average_loss` in cross replica context, while it was expected to be called "
                "in replica context. Call it inside the function given to strategy.run, or pass global_batch_size."
            )
        global_batch_size = lv.shape[0] * _num_replicas()
    gbs = convert_to_tensor(global_batch_size)
    if gbs._value.ndim != 0:
        raise ValueError(f"global_batch_size must be scalar. Received: {global_batch_size}.")
    if not np.issubdtype(np.dtype(gbs._value.dtype), np.integer):
        raise TypeError(f"global_batch_size must be an integer. Received dtype {from_np(gbs._value.dtype).name}.")
    if not isinstance(gbs._value, jax.core.Tracer) and int(gbs._value) <= 0:
        raise ValueError(f"global_batch_size must be positive. Received: {int(gbs._value)}.")
    total = OPS["reduce_sum"](Tensor(lv) if sample_weight is not None else loss)
    return total / cast(gbs, from_np(dt))


def scale_regularization_loss(regularization_loss: Any) -> Tensor:
    """Divide a regularization loss by the number of replicas (``tf.nn.scale_regularization_loss``).

    Each replica adds it to its loss; the gradients of all replicas are summed,
    so the total applies the regularization once.

    Example:
        >>> import tapejax as tf
        >>> print(tf.nn.scale_regularization_loss([1.0, 2.0]))
        tf.Tensor(3.0, shape=(), dtype=float32)
    """
    if in_cross_replica_context():
        raise RuntimeError(
            "You are calling `scale_regularization_loss` in cross replica context, while it was expected to be called "
            "in replica context. Call it inside the function given to strategy.run."
        )
    return OPS["reduce_sum"](regularization_loss) / float(_num_replicas())


def is_variable(x: Any) -> bool:
    return isinstance(x, VariableBase)
