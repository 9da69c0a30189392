"""``tf.image``: resize (bilinear / nearest, TF 2's half-pixel rule) and geometric ops (see ``tapejax._ops.image``)."""

from ._ops.image import ResizeMethod
from ._tf._namespace import populate as _populate

__all__ = [*_populate(globals(), "image"), "ResizeMethod"]
