"""``tf.keras.initializers``: how layer weights get their first values.

An initializer is called as ``init(shape, dtype)`` and returns a tensor. Random
initializers draw with NumPy's generator, seeded with ``seed`` (an integer seed
gives the same values on every call, Keras 3's rule for seeded initializers) or,
with ``seed=None``, from a key of tapejax's global generator (reproducible after
``tf.random.set_seed`` or ``tf.keras.utils.set_random_seed``). NumPy rather than
``jax.random``: a weight is drawn once, eagerly, and JAX would compile a new
program for every weight shape. The draws are not TF's bit-for-bit (a different
generator); their distributions are Keras's.

Example:
    >>> import tapejax as tf
    >>> init = tf.keras.initializers.get("zeros")
    >>> init((2,)).numpy().tolist()
    [0.0, 0.0]
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core._recorder import Tensor
from .._ops._dtypes import as_dtype, check_width
from .._ops.random import _next_key

__all__ = [
    "Constant", "GlorotNormal", "GlorotUniform", "HeNormal", "HeUniform", "Initializer", "LecunNormal",
    "LecunUniform", "Ones", "RandomNormal", "RandomUniform", "TruncatedNormal", "VarianceScaling", "Zeros",
    "get", "serialize",
]


def _dtype(dtype: Any) -> np.dtype:
    d = as_dtype(dtype if dtype is not None else "float32")._np
    check_width(d, "Initializer dtype")
    return d


def _shape(shape: Any) -> tuple:
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


def compute_fans(shape: tuple) -> tuple[int, int]:
    """Keras's fan-in and fan-out: a kernel ``(..., in, out)`` has a receptive field of ``prod(...)``."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    field = int(np.prod(shape[:-2]))
    return shape[-2] * field, shape[-1] * field


class Initializer:
    """Base class: ``__call__(shape, dtype=None)`` returns a tensor of that shape."""

    def __call__(self, shape: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config: dict) -> Initializer:
        return cls(**config)


class Zeros(Initializer):
    """All zeros."""

    def __call__(self, shape: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        return Tensor(jnp.zeros(_shape(shape), _dtype(dtype)))


class Ones(Initializer):
    """All ones."""

    def __call__(self, shape: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        return Tensor(jnp.ones(_shape(shape), _dtype(dtype)))


class Constant(Initializer):
    """Every element equal to ``value``."""

    def __init__(self, value: float = 0.0):
        self.value = value

    def __call__(self, shape: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        return Tensor(jnp.full(_shape(shape), self.value, _dtype(dtype)))

    def get_config(self) -> dict:
        return {"value": self.value}


class _Random(Initializer):
    def __init__(self, seed: int | None = None):
        if seed is not None and not isinstance(seed, int):
            raise ValueError(f"`seed` argument should be an instance of `keras.random.SeedGenerator()` or an integer. Received: seed={seed}")
        self.seed = seed

    def _rng(self) -> np.random.Generator:
        # A seeded initializer repeats its values (Keras 3); an unseeded one draws afresh
        # from the global generator's next key.
        if self.seed is not None:
            return np.random.default_rng(self.seed)
        return np.random.default_rng(np.asarray(jax.random.key_data(_next_key(None))).tolist())

    def get_config(self) -> dict:
        return {"seed": self.seed}


def _out(a: np.ndarray, d: np.dtype) -> Tensor:
    return Tensor(jnp.asarray(np.asarray(a).astype(d)))


def _truncated_normal(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Standard normal draws redrawn until all lie within two standard deviations."""
    z = rng.standard_normal(shape)
    bad = np.abs(z) > 2.0
    while bad.any():
        z[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(z) > 2.0
    return z


class RandomNormal(_Random):
    """Normal draws with ``mean`` and ``stddev``."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None):
        super().__init__(seed)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        return _out(self._rng().standard_normal(_shape(shape)) * self.stddev + self.mean, _dtype(dtype))

    def get_config(self) -> dict:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}


class TruncatedNormal(_Random):
    """Normal draws with ``mean`` and ``stddev``, redrawn beyond two standard deviations."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None):
        super().__init__(seed)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        return _out(_truncated_normal(self._rng(), _shape(shape)) * self.stddev + self.mean, _dtype(dtype))

    def get_config(self) -> dict:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}


class RandomUniform(_Random):
    """Uniform draws in ``[minval, maxval)``."""

    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed: int | None = None):
        super().__init__(seed)
        self.minval, self.maxval = minval, maxval

    def __call__(self, shape: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        return _out(self._rng().uniform(self.minval, self.maxval, _shape(shape)), _dtype(dtype))

    def get_config(self) -> dict:
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed}


class VarianceScaling(_Random):
    """Draws scaled to the kernel's fans: variance ``scale / n`` with ``n`` fan-in, fan-out or their mean.

    ``distribution`` is ``"truncated_normal"`` (stddev corrected for the
    truncation, as Keras), ``"untruncated_normal"`` or ``"uniform"``.
    """

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal", seed: int | None = None):
        super().__init__(seed)
        if scale <= 0.0:
            raise ValueError(f"Argument `scale` must be positive float. Received: scale={scale}")
        if mode not in {"fan_in", "fan_out", "fan_avg"}:
            raise ValueError(f"Invalid `mode` argument: expected one of {{'fan_in', 'fan_out', 'fan_avg'}}. Received: mode={mode}")
        distribution = distribution.lower()
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in {"uniform", "truncated_normal", "untruncated_normal"}:
            raise ValueError(
                "Invalid `distribution` argument: expected one of {'uniform', 'truncated_normal', 'untruncated_normal'}. "
                f"Received: distribution={distribution}"
            )
        self.scale, self.mode, self.distribution = scale, mode, distribution

    def __call__(self, shape: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        d = _dtype(dtype)
        shape = _shape(shape)
        fan_in, fan_out = compute_fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        rng = self._rng()
        if self.distribution == "truncated_normal":
            # 0.8796... is the stddev of a standard normal truncated to [-2, 2].
            return _out(_truncated_normal(rng, shape) * (math.sqrt(scale) / 0.87962566103423978), d)
        if self.distribution == "untruncated_normal":
            return _out(rng.standard_normal(shape) * math.sqrt(scale), d)
        limit = math.sqrt(3.0 * scale)
        return _out(rng.uniform(-limit, limit, shape), d)

    def get_config(self) -> dict:
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution, "seed": self.seed}


def _variance_scaling(name: str, scale: float, mode: str, distribution: str, doc: str) -> type:
    def __init__(self: Any, seed: int | None = None) -> None:
        VarianceScaling.__init__(self, scale=scale, mode=mode, distribution=distribution, seed=seed)

    def get_config(self: Any) -> dict:
        return {"seed": self.seed}

    return type(name, (VarianceScaling,), {"__init__": __init__, "get_config": get_config, "__doc__": doc, "__module__": __name__})


GlorotUniform = _variance_scaling("GlorotUniform", 1.0, "fan_avg", "uniform",
                                  "Uniform in ``[-limit, limit]``, ``limit = sqrt(6 / (fan_in + fan_out))`` (Keras's default kernel initializer).")
GlorotNormal = _variance_scaling("GlorotNormal", 1.0, "fan_avg", "truncated_normal",
                                 "Truncated normal with ``stddev = sqrt(2 / (fan_in + fan_out))``.")
HeNormal = _variance_scaling("HeNormal", 2.0, "fan_in", "truncated_normal",
                             "Truncated normal with ``stddev = sqrt(2 / fan_in)`` (for ReLU layers).")
HeUniform = _variance_scaling("HeUniform", 2.0, "fan_in", "uniform",
                              "Uniform in ``[-limit, limit]``, ``limit = sqrt(6 / fan_in)``.")
LecunNormal = _variance_scaling("LecunNormal", 1.0, "fan_in", "truncated_normal",
                                "Truncated normal with ``stddev = sqrt(1 / fan_in)``.")
LecunUniform = _variance_scaling("LecunUniform", 1.0, "fan_in", "uniform",
                                 "Uniform in ``[-limit, limit]``, ``limit = sqrt(3 / fan_in)``.")

_BY_NAME: dict[str, type] = {
    "zeros": Zeros, "ones": Ones, "constant": Constant, "random_normal": RandomNormal,
    "random_uniform": RandomUniform, "truncated_normal": TruncatedNormal, "variance_scaling": VarianceScaling,
    "glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal, "he_normal": HeNormal,
    "he_uniform": HeUniform, "lecun_normal": LecunNormal, "lecun_uniform": LecunUniform,
}
for _cls in list(_BY_NAME.values()):
    _BY_NAME[_cls.__name__] = _cls


def get(identifier: Any) -> Any:
    """An initializer from a name (``"glorot_uniform"``, ``"GlorotUniform"``), a config dict or a callable.

    Example:
        >>> import tapejax as tf
        >>> type(tf.keras.initializers.get("he_normal")).__name__
        'HeNormal'
    """
    if identifier is None:
        return None
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier)
        if cls is None:
            raise ValueError(f"Could not interpret initializer identifier: {identifier}")
        return cls()
    if isinstance(identifier, dict) and "class_name" in identifier:
        cls = _BY_NAME.get(identifier["class_name"])
        if cls is None:
            raise ValueError(f"Could not interpret initializer identifier: {identifier}")
        return cls.from_config(identifier.get("config", {}))
    if isinstance(identifier, type) and issubclass(identifier, Initializer):
        return identifier()
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret initializer identifier: {identifier}")


def serialize(initializer: Any) -> dict:
    """Keras's config form: ``{"module", "class_name", "config", "registered_name"}``."""
    return {"module": "keras.initializers", "class_name": type(initializer).__name__,
            "config": initializer.get_config(), "registered_name": None}
