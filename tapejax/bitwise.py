"""``tf.bitwise``: the ops of the table exported under this namespace (see ``tapejax._ops``)."""

from ._tf._namespace import populate as _populate

__all__ = _populate(globals(), "bitwise")
