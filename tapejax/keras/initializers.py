"""``tf.keras.initializers``: Keras 3's initializers; called directly they return a ``tf.Tensor``.

Example:
    >>> import tapejax as tf
    >>> tf.keras.initializers.Constant(2.0)((2,)).numpy().tolist()
    [2.0, 2.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax

from .._core._recorder import Tensor
from ._bridge import in_stateless_scope, keras
from ._objects import generate, getter

if TYPE_CHECKING:
    # The mixin is only ever combined with Keras's Initializer: its __call__ comes from there.
    from keras.initializers import Initializer as _InitializerMixinBase
else:
    _InitializerMixinBase = object


class InitializerMixin(_InitializerMixinBase):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = super().__call__(*args, **kwargs)
        if isinstance(out, jax.Array) and not in_stateless_scope():
            return Tensor(out)
        return out


_names = generate(keras.initializers, keras.initializers.Initializer, InitializerMixin, __name__)
_names["get"] = getter(keras.initializers.get, {})
globals().update(_names)

# Computed at import (from Keras 3's names): the generated stub initializers.pyi spells these names out for type checkers.
__all__ = sorted(_names)  # pyright: ignore[reportUnsupportedDunderAll]
