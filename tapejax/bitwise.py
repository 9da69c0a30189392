"""``tf.bitwise``: the ops of the table exported under this namespace (see ``tapejax._ops``)."""

from ._tf._namespace import populate as _populate

# Computed at import (from the op table): the generated stub bitwise.pyi spells these names out for type checkers.
__all__ = _populate(globals(), "bitwise")  # pyright: ignore[reportUnsupportedDunderAll]
