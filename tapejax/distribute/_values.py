"""``PerReplica``, ``ReduceOp``, ``InputContext``: the values a strategy hands around."""

from __future__ import annotations

import enum
from typing import Any

import jax
import jax.core
import jax.numpy as jnp

from .._core._recorder import Tensor

__all__ = ["InputContext", "PerReplica", "ReduceOp"]


class ReduceOp(enum.Enum):
    """How ``strategy.reduce`` and ``all_reduce`` combine the replicas' values (``tf.distribute.ReduceOp``)."""

    SUM = "SUM"
    MEAN = "MEAN"


class PerReplica:
    """One value per replica (``tf.distribute.DistributedValues``), stored as ONE global ``jax.Array``.

    The array's leading axis is split over the strategy's ``('batch',)`` mesh:
    replica ``r`` owns block ``r``. ``stacked=True`` (the outputs of
    ``strategy.run``) means each block is one row holding that replica's whole
    value; otherwise (a distributed input batch) each block is that replica's
    slice of the global batch.

    Example:
        >>> import tapejax as tf
        >>> s = tf.distribute.OneDeviceStrategy("/cpu:0")
        >>> [float(t) for t in s.experimental_local_results(tf.constant(2.0))]
        [2.0]
    """

    __slots__ = ("_n", "_stacked", "_tensor")

    def __init__(self, tensor: Any, num_replicas: int, stacked: bool):
        self._tensor = tensor if isinstance(tensor, Tensor) else Tensor(tensor)
        self._n = int(num_replicas)
        self._stacked = bool(stacked)

    def _blocks(self, arr: Any) -> list:
        if self._stacked:
            return [arr[i] for i in range(self._n)]
        k = arr.shape[0] // self._n
        return [arr[i * k:(i + 1) * k] for i in range(self._n)]

    @property
    def values(self) -> tuple:
        """This process's replicas' values, in replica order."""
        arr = self._tensor._value
        if isinstance(arr, jax.Array) and not isinstance(arr, jax.core.Tracer) and not arr.is_fully_addressable:
            shards = sorted(arr.addressable_shards, key=lambda s: s.index[0].start or 0)
            return tuple(Tensor(s.data[0] if self._stacked else s.data) for s in shards)
        return tuple(Tensor(b) for b in self._blocks(arr))

    def _local_concat(self) -> Any:
        """The local replicas' values concatenated (stacked: along a new leading axis)."""
        vals = [v._value for v in self.values]
        return jnp.stack(vals) if self._stacked else jnp.concatenate(vals)

    def __repr__(self) -> str:
        body = ",\n".join(f"  {i}: {v!r}" for i, v in enumerate(self.values))
        return f"PerReplica:{{\n{body}\n}}"


def _pr_flatten(p: PerReplica) -> tuple:
    return (p._tensor,), (p._n, p._stacked)


def _pr_unflatten(aux: Any, children: Any) -> PerReplica:
    p = object.__new__(PerReplica)
    p._tensor, (p._n, p._stacked) = children[0], aux
    return p


jax.tree_util.register_pytree_node(PerReplica, _pr_flatten, _pr_unflatten)


class InputContext:
    """What ``distribute_datasets_from_function``'s ``dataset_fn`` is told (``tf.distribute.InputContext``).

    Example:
        >>> import tapejax as tf
        >>> ctx = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=4)
        >>> ctx.get_per_replica_batch_size(64)
        16
    """

    def __init__(self, num_input_pipelines: int = 1, input_pipeline_id: int = 0, num_replicas_in_sync: int = 1):
        self._num_input_pipelines = num_input_pipelines
        self._input_pipeline_id = input_pipeline_id
        self._num_replicas_in_sync = num_replicas_in_sync

    @property
    def num_input_pipelines(self) -> int:
        return self._num_input_pipelines

    @property
    def input_pipeline_id(self) -> int:
        return self._input_pipeline_id

    @property
    def num_replicas_in_sync(self) -> int:
        return self._num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        if global_batch_size % self._num_replicas_in_sync != 0:
            raise ValueError(
                f"The `global_batch_size` {global_batch_size} is not divisible by `num_replicas_in_sync` "
                f"{self._num_replicas_in_sync}"
            )
        return global_batch_size // self._num_replicas_in_sync

    def __repr__(self) -> str:
        return (f"tf.distribute.InputContext(input pipeline id {self._input_pipeline_id}, total: "
                f"{self._num_input_pipelines})")
