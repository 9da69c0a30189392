"""``tf.nn``: the ops of the table exported under this namespace (see ``tapejax._ops``)."""

from ._tf._namespace import populate as _populate

__all__ = _populate(globals(), "nn")


__all__ = sorted([*__all__, "compute_average_loss", "scale_regularization_loss"])
