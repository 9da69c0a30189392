"""``tf.distribute.experimental``: the deprecated aliases and the communication options (accepted, no effect).

JAX's runtime picks the collectives (NCCL on GPUs, gloo across CPU processes), so the options
TF uses to choose its all-reduce implementation change nothing here.
"""

from __future__ import annotations

import enum
from typing import Any

from ._strategy import MultiWorkerMirroredStrategy

__all__ = ["CommunicationImplementation", "CommunicationOptions", "MultiWorkerMirroredStrategy"]


class CommunicationImplementation(enum.Enum):
    """TF's choice of collective implementation (``AUTO``, ``RING``, ``NCCL``); accepted, no effect."""

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


class CommunicationOptions:
    """Options for the cross-replica collectives (``tf.distribute.experimental.CommunicationOptions``); accepted, no effect.

    Example:
        >>> import tapejax as tf
        >>> opts = tf.distribute.experimental.CommunicationOptions(
        ...     implementation=tf.distribute.experimental.CommunicationImplementation.NCCL)
        >>> opts.implementation.name
        'NCCL'
    """

    def __init__(self, bytes_per_pack: int = 0, timeout_seconds: float | None = None,
                 implementation: Any = CommunicationImplementation.AUTO):
        self.bytes_per_pack = bytes_per_pack
        self.timeout_seconds = timeout_seconds
        self.implementation = implementation
