"""``tf.autodiff``: ``GradientTape`` (reverse mode) and ``ForwardAccumulator`` (forward mode)."""

from ._tf._forward import ForwardAccumulator
from ._tf._gradient_tape import GradientTape

__all__ = ["ForwardAccumulator", "GradientTape"]
