"""``tf.random``: seeded sampling on ``jax.random`` keys, with TF's seed semantics (see ``tapejax._ops.random``)."""

from ._ops.random import (
    Generator,
    categorical,
    gamma,
    get_global_generator,
    get_seed,
    normal,
    poisson,
    set_global_generator,
    set_seed,
    shuffle,
    stateless_categorical,
    stateless_normal,
    stateless_truncated_normal,
    stateless_uniform,
    truncated_normal,
    uniform,
)


class experimental:  # noqa: N801  (TF's namespace name)
    """``tf.random.experimental``: the same Generator API under its older name."""

    Generator = Generator
    get_global_generator = staticmethod(get_global_generator)
    set_global_generator = staticmethod(set_global_generator)


__all__ = [
    "Generator", "categorical", "experimental", "gamma", "get_global_generator", "get_seed", "normal", "poisson",
    "set_global_generator", "set_seed", "shuffle", "stateless_categorical", "stateless_normal",
    "stateless_truncated_normal", "stateless_uniform", "truncated_normal", "uniform",
]
