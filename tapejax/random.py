"""``tf.random``: seeded sampling on ``jax.random`` (see ``tapejax._random``)."""

from ._random import normal, set_seed, uniform

__all__ = ["normal", "set_seed", "uniform"]
