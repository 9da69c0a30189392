"""``tf.train``: ``Checkpoint``, ``CheckpointManager``, ``latest_checkpoint``, ``list_variables``, ``load_variable``
(on Orbax; see ``tapejax._tf._checkpoint``)."""

from ._tf._checkpoint import (
    Checkpoint,
    CheckpointManager,
    latest_checkpoint,
    list_variables,
    load_variable,
)

__all__ = ["Checkpoint", "CheckpointManager", "latest_checkpoint", "list_variables", "load_variable"]
