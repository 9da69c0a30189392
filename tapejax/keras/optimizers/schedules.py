"""``tf.keras.optimizers.schedules``: learning rates as a function of the optimizer step.

A schedule is called with the optimizer's ``iterations`` (the number of updates
done so far, starting at 0) and returns a float32 tensor. The formulas are
Keras 3's, including its step boundaries (``PiecewiseConstantDecay`` switches
*after* a boundary: ``values[0]`` up to and including ``boundaries[0]``).

Example:
    >>> import tapejax as tf
    >>> lr = tf.keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    >>> round(float(lr(10)), 6)
    0.05
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from ..._core._recorder import Tensor
from .._nn import value as _value

__all__ = ["CosineDecay", "ExponentialDecay", "LearningRateSchedule", "PiecewiseConstantDecay", "deserialize", "serialize"]


def _step(step: Any, dtype: Any) -> Any:
    return jnp.asarray(_value(step)).astype(dtype)


class LearningRateSchedule:
    """Base class: ``schedule(step)`` is the learning rate for that step."""

    def __call__(self, step: Any) -> Tensor:
        raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override `__call__(self, step)`.")

    def get_config(self) -> dict:
        raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override `get_config()`.")

    @classmethod
    def from_config(cls, config: dict) -> LearningRateSchedule:
        return cls(**config)


class ExponentialDecay(LearningRateSchedule):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)`` (the exponent floored if ``staircase``).

    Example:
        >>> import tapejax as tf
        >>> s = tf.keras.optimizers.schedules.ExponentialDecay(1.0, 2, 0.5, staircase=True)
        >>> [float(s(i)) for i in range(4)]
        [1.0, 1.0, 0.5, 0.5]
    """

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool = False,
                 name: str = "ExponentialDecay"):
        if decay_steps <= 0:
            raise ValueError(f"Argument `decay_steps` must be > 0. Received: decay_steps={decay_steps}")
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = decay_steps
        self.decay_rate = decay_rate
        self.staircase = staircase
        self.name = name

    def __call__(self, step: Any) -> Tensor:
        d = jnp.float32
        p = _step(step, d) / jnp.asarray(self.decay_steps, d)
        if self.staircase:
            p = jnp.floor(p)
        return Tensor(jnp.asarray(self.initial_learning_rate, d) * jnp.power(jnp.asarray(self.decay_rate, d), p))

    def get_config(self) -> dict:
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "decay_rate": self.decay_rate, "staircase": self.staircase, "name": self.name}


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[i]`` on the step interval ``(boundaries[i-1], boundaries[i]]``.

    Example:
        >>> import tapejax as tf
        >>> s = tf.keras.optimizers.schedules.PiecewiseConstantDecay([2, 4], [1.0, 0.5, 0.1])
        >>> [round(float(s(i)), 2) for i in range(6)]
        [1.0, 1.0, 1.0, 0.5, 0.5, 0.1]
    """

    def __init__(self, boundaries: list, values: list, name: str = "PiecewiseConstant"):
        if len(boundaries) != len(values) - 1:
            raise ValueError(
                "The length of boundaries should be 1 less than the length of values. Received: "
                f"boundaries={boundaries} of length {len(boundaries)}, and values={values} of length {len(values)}."
            )
        self.boundaries = boundaries
        self.values = values
        self.name = name

    def __call__(self, step: Any) -> Tensor:
        x = jnp.asarray(_value(step))
        vals = jnp.asarray(self.values, jnp.float32)

        def past(b: Any) -> Any:
            if isinstance(b, int) and jnp.issubdtype(x.dtype, jnp.integer):
                return x > b
            return x.astype(jnp.float32) > jnp.float32(b)

        # The interval's index: how many boundaries the step is strictly past.
        idx = sum(past(b).astype(jnp.int32) for b in self.boundaries) if self.boundaries else 0
        return Tensor(vals[idx])

    def get_config(self) -> dict:
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


class CosineDecay(LearningRateSchedule):
    """Cosine decay from ``initial_learning_rate`` (or ``warmup_target`` after a linear warmup)
    down to ``alpha`` times that over ``decay_steps``, then constant.

    Example:
        >>> import tapejax as tf
        >>> s = tf.keras.optimizers.schedules.CosineDecay(1.0, decay_steps=4)
        >>> [round(float(s(i)), 4) for i in (0, 2, 4, 9)]
        [1.0, 0.5, 0.0, 0.0]
    """

    def __init__(self, initial_learning_rate: float, decay_steps: int, alpha: float = 0.0, name: str = "CosineDecay",
                 warmup_target: float | None = None, warmup_steps: int = 0):
        if decay_steps <= 0:
            raise ValueError(f"Argument `decay_steps` must be > 0. Received: decay_steps={decay_steps}")
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = decay_steps
        self.alpha = alpha
        self.name = name
        self.warmup_target = warmup_target
        self.warmup_steps = warmup_steps

    def _decay(self, step: Any, decay_from: Any) -> Any:
        frac = step / jnp.asarray(self.decay_steps, jnp.float32)
        cosine = 0.5 * (1.0 + jnp.cos(jnp.asarray(math.pi, jnp.float32) * frac))
        return decay_from * ((1 - self.alpha) * cosine + self.alpha)

    def __call__(self, step: Any) -> Tensor:
        d = jnp.float32
        lr0 = jnp.asarray(self.initial_learning_rate, d)
        s = _step(step, d)
        decay_steps = jnp.asarray(self.decay_steps, d)
        if self.warmup_target is None:
            return Tensor(self._decay(jnp.minimum(s, decay_steps), lr0).astype(d))
        target = jnp.asarray(self.warmup_target, d)
        warmup = jnp.asarray(self.warmup_steps, d)
        s = jnp.minimum(s, decay_steps + warmup)
        warm = (target - lr0) * (s / jnp.where(warmup == 0, 1.0, warmup)) + lr0
        return Tensor(jnp.where(s < warmup, warm, self._decay(s - warmup, target)).astype(d))

    def get_config(self) -> dict:
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "alpha": self.alpha, "name": self.name, "warmup_target": self.warmup_target,
                "warmup_steps": self.warmup_steps}


_CLASSES = {c.__name__: c for c in (ExponentialDecay, PiecewiseConstantDecay, CosineDecay)}


def serialize(schedule: LearningRateSchedule) -> dict:
    """Keras's config form of a schedule (what ``optimizer.get_config()["learning_rate"]`` holds)."""
    return {"module": "keras.optimizers.schedules", "class_name": type(schedule).__name__,
            "config": schedule.get_config(), "registered_name": None}


def deserialize(config: dict, custom_objects: dict | None = None) -> LearningRateSchedule:
    """The schedule a ``serialize`` dict describes."""
    name = config["class_name"]
    cls = (custom_objects or {}).get(name) or _CLASSES.get(name)
    if cls is None:
        raise ValueError(f"Unknown learning rate schedule: {name}")
    return cls.from_config(config["config"])
