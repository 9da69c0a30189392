"""``tf.image``: resize (bilinear / nearest, TF 2's half-pixel rule) and geometric ops (see ``tapejax._ops.image``)."""

from ._ops.image import ResizeMethod
from ._tf._namespace import populate as _populate

# Computed at import (from the op table): the generated stub image.pyi spells these names out for type checkers.
__all__ = [*_populate(globals(), "image"), "ResizeMethod"]  # pyright: ignore[reportUnsupportedDunderAll]
