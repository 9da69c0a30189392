"""``tf.strings``: string tensors' ops (join, format, as_string, to_number, length, split, ...)."""

from ._tf._namespace import populate as _populate

__all__ = _populate(globals(), "strings")
