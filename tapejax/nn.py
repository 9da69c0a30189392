"""``tf.nn``: the ops of the table exported under this namespace (see ``tapejax._ops``)."""

from ._tf._namespace import populate as _populate

# Computed at import (from the op table): the generated stub nn.pyi spells these names out for type checkers.
__all__ = _populate(globals(), "nn")  # pyright: ignore[reportUnsupportedDunderAll]

# tf.nn's two distribution loss helpers live with the distribution state (redundant aliases:
# explicit re-exports, which ruff's F401 keeps).
from ._tf._distribute_ctx import compute_average_loss as compute_average_loss  # noqa: E402
from ._tf._distribute_ctx import scale_regularization_loss as scale_regularization_loss  # noqa: E402

__all__ = sorted([*__all__, "compute_average_loss", "scale_regularization_loss"])  # pyright: ignore[reportUnsupportedDunderAll]
