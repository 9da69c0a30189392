"""``tf.strings``: string tensors' ops (join, format, as_string, to_number, length, split, ...)."""

from ._tf._namespace import populate as _populate

# Computed at import (from the op table): the generated stub strings.pyi spells these names out for type checkers.
__all__ = _populate(globals(), "strings")  # pyright: ignore[reportUnsupportedDunderAll]
