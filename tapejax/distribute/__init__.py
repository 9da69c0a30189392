"""``tf.distribute``: TF's data-parallel strategies on JAX's SPMD engine.

A strategy is a one-axis ``('batch',)`` ``jax.sharding.Mesh`` over its devices
(for ``MultiWorkerMirroredStrategy``, over every device of every process, with
``jax.distributed`` as the multi-controller runtime). Variables created in
``strategy.scope()`` are replicated (``NamedSharding(mesh, P())``);
``strategy.run(fn, args)`` is one ``jax.shard_map`` program in which ``fn``
sees its replica's block of each distributed batch; ``all_reduce`` is
``lax.psum``. See compat_docs/distribute.md for what maps to what.

Example:
    >>> import tapejax as tf
    >>> strategy = tf.distribute.get_strategy()
    >>> with strategy.scope():
    ...     v = tf.Variable(2.0)
    >>> print(strategy.run(lambda x: v * x, args=(tf.constant(3.0),)))
    tf.Tensor(6.0, shape=(), dtype=float32)
"""

from __future__ import annotations

from . import cluster_resolver, experimental
from ._strategy import (
    DistributedDataset,
    DistributedIterator,
    MirroredStrategy,
    MultiWorkerMirroredStrategy,
    OneDeviceStrategy,
    ReplicaContext,
    Strategy,
    TPUStrategy,
    get_replica_context,
    get_strategy,
    has_strategy,
    in_cross_replica_context,
)
from ._values import InputContext, PerReplica, ReduceOp

DistributedValues = PerReplica  # the only kind of distributed value tapejax makes


class InputOptions:
    """Options of ``experimental_distribute_dataset`` (``tf.distribute.InputOptions``); accepted, no effect."""

    def __init__(self, **kwargs: object):
        self.__dict__.update(kwargs)

__all__ = [
    "DistributedDataset",
    "DistributedIterator",
    "DistributedValues",
    "InputContext",
    "InputOptions",
    "MirroredStrategy",
    "MultiWorkerMirroredStrategy",
    "OneDeviceStrategy",
    "PerReplica",
    "ReduceOp",
    "ReplicaContext",
    "Strategy",
    "TPUStrategy",
    "cluster_resolver",
    "experimental",
    "get_replica_context",
    "get_strategy",
    "has_strategy",
    "in_cross_replica_context",
]
