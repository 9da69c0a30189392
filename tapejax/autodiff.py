"""``tf.autodiff``: ``GradientTape`` (reverse mode) and ``ForwardAccumulator`` (forward mode)."""

from ._forward import ForwardAccumulator
from ._gradient_tape import GradientTape

__all__ = ["ForwardAccumulator", "GradientTape"]
