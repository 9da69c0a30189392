"""``tf.keras.layers``: ``Dense``, ``Flatten``, ``Dropout``, ``Activation`` and the ``Layer`` base.

Layers build lazily, as in Keras: a ``Dense`` layer has no variables until its
first call (so a tape that watches ``layer.variables`` before that call
watches nothing, the pitfall TF's docs warn about).

Example:
    >>> import tapejax as tf
    >>> dense = tf.keras.layers.Dense(3, activation="relu")
    >>> dense.variables
    []
    >>> y = dense(tf.ones((2, 4)))
    >>> [tuple(v.shape) for v in dense.variables]
    [(4, 3), (3,)]
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._tf import _surface as tf

from .._core._recorder import Tensor
from . import activations as _activations
from . import initializers as _initializers
from ._layer import Input, InputLayer, KerasTensor, Layer, SeedGenerator

__all__ = ["Activation", "Dense", "Dropout", "Flatten", "Input", "InputLayer", "Layer", "SeedGenerator"]


class Dense(Layer):
    """A fully connected layer: ``activation(inputs @ kernel + bias)``.

    ``kernel`` has shape ``(input_dim, units)`` and is created on the first call
    from the input's last dimension. Inputs of rank > 2 are multiplied along
    their last axis.

    Example:
        >>> import tapejax as tf
        >>> layer = tf.keras.layers.Dense(2, kernel_initializer="ones")
        >>> layer(tf.ones((1, 3))).numpy().tolist()
        [[3.0, 3.0]]
    """

    def __init__(self, units: int, activation: Any = None, use_bias: bool = True, kernel_initializer: Any = "glorot_uniform",
                 bias_initializer: Any = "zeros", kernel_regularizer: Any = None, bias_regularizer: Any = None,
                 activity_regularizer: Any = None, kernel_constraint: Any = None, bias_constraint: Any = None,
                 lora_rank: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        if kernel_regularizer is not None or bias_regularizer is not None or activity_regularizer is not None:
            raise NotImplementedError("tapejax.keras does not implement regularizers; add the penalty to your loss.")
        if not isinstance(units, int | np.integer) or units <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive integer. Received: units={units}")
        self.units = int(units)
        self.activation = _activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _initializers.get(kernel_initializer)
        self.bias_initializer = _initializers.get(bias_initializer)
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self._input_dim: int | None = None

    def build(self, input_shape: Any) -> None:
        if input_shape is None or len(input_shape) < 2:
            raise ValueError(
                f"Input 0 of layer '{self.name}' is incompatible with the layer: expected min_ndim=2, "
                f"found ndim={0 if input_shape is None else len(input_shape)}. Full shape received: {input_shape}"
            )
        input_dim = int(input_shape[-1])
        kernel = self.add_weight(name="kernel", shape=(input_dim, self.units), initializer=self.kernel_initializer,
                                 constraint=self.kernel_constraint)
        bias = None
        if self.use_bias:
            bias = self.add_weight(name="bias", shape=(self.units,), initializer=self.bias_initializer,
                                   constraint=self.bias_constraint)
        # Assigned only once every weight exists (a refused creation leaves the layer unbuilt).
        self.kernel = kernel
        self.bias = bias
        self._input_dim = input_dim

    def call(self, inputs: Any) -> Any:
        shape = tuple(inputs.shape)
        if len(shape) < 2:
            raise ValueError(
                f"Input 0 of layer '{self.name}' is incompatible with the layer: expected min_ndim=2, "
                f"found ndim={len(shape)}. Full shape received: {shape}"
            )
        if shape[-1] != self._input_dim:
            raise ValueError(
                f"Input 0 of layer '{self.name}' is incompatible with the layer: expected axis -1 of input shape "
                f"to have value {self._input_dim}, but received input with shape {shape}"
            )
        x = inputs
        if not isinstance(x, Tensor):
            x = tf.convert_to_tensor(x)
        if x.dtype.name != self.compute_dtype:
            x = tf.cast(x, self.compute_dtype)  # integer inputs (Keras casts them too)
        y = tf.matmul(x, self.kernel)
        if self.bias is not None:
            y = y + self.bias
        return self.activation(y)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "units": self.units,
            "activation": _activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": _initializers.serialize(self.kernel_initializer),
            "bias_initializer": _initializers.serialize(self.bias_initializer),
            "kernel_regularizer": None,
            "bias_regularizer": None,
            "kernel_constraint": None,
            "bias_constraint": None,
        })
        return config


class Flatten(Layer):
    """Flattens all but the batch axis: ``(batch, d1, d2, ...)`` -> ``(batch, d1*d2*...)``.

    Example:
        >>> import tapejax as tf
        >>> tf.keras.layers.Flatten()(tf.ones((2, 3, 4))).shape
        TensorShape([2, 12])
    """

    def __init__(self, data_format: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.data_format = data_format or "channels_last"

    def call(self, inputs: Any) -> Any:
        x = inputs if isinstance(inputs, Tensor) else tf.convert_to_tensor(inputs)
        shape = tuple(x.shape)
        if self.data_format == "channels_first" and len(shape) > 2:
            x = tf.transpose(x, [0] + list(range(2, len(shape))) + [1])
        return tf.reshape(x, (shape[0], -1) if shape else (1, 1))

    def get_config(self) -> dict:
        config = super().get_config()
        config["data_format"] = self.data_format
        return config


class Dropout(Layer):
    """Zeroes a fraction ``rate`` of the inputs while training and scales the rest by ``1 / (1 - rate)``.

    Only active when called with ``training=True`` (directly or through an outer
    model call); otherwise it returns its input. Its random state is a variable,
    so compiled steps draw a new mask on every call.

    Example:
        >>> import tapejax as tf
        >>> drop = tf.keras.layers.Dropout(0.5)
        >>> drop(tf.ones((4,))).numpy().tolist()
        [1.0, 1.0, 1.0, 1.0]
        >>> sorted(set(drop(tf.ones((100,)), training=True).numpy().tolist()))
        [0.0, 2.0]
    """

    def __init__(self, rate: float, noise_shape: Any = None, seed: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0 <= rate <= 1:
            raise ValueError(f"Invalid value received for argument `rate`. Expected a float value between 0 and 1. Received: rate={rate}")
        self.rate = float(rate)
        self.noise_shape = None if noise_shape is None else tuple(noise_shape)
        self.seed = seed
        if self.rate > 0:
            self.seed_generator = SeedGenerator(seed)
        self.built = True

    def call(self, inputs: Any, training: Any = False) -> Any:
        if training and self.rate > 0:
            x = inputs if isinstance(inputs, Tensor) else tf.convert_to_tensor(inputs)
            shape = tuple(x.shape)
            if self.noise_shape is not None:
                shape = tuple(s if n is None else n for s, n in zip(shape, self.noise_shape))
            keep = jax.random.bernoulli(self.seed_generator.next(), 1.0 - self.rate, shape)
            scale = jnp.asarray(1.0 / (1.0 - self.rate), x._value.dtype) if self.rate < 1 else jnp.zeros((), x._value.dtype)
            # The mask is a constant; the product is recorded, so gradients flow through kept units.
            return x * Tensor(jnp.where(keep, scale, jnp.zeros((), x._value.dtype)))
        return inputs

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed, "noise_shape": self.noise_shape})
        return config


class Activation(Layer):
    """Applies an activation function (by name or callable) to its input.

    Example:
        >>> import tapejax as tf
        >>> tf.keras.layers.Activation("relu")(tf.constant([-1.0, 1.0])).numpy().tolist()
        [0.0, 1.0]
    """

    def __init__(self, activation: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.activation = _activations.get(activation)
        self.built = True

    def call(self, inputs: Any) -> Any:
        return self.activation(inputs)

    def get_config(self) -> dict:
        config = super().get_config()
        config["activation"] = _activations.serialize(self.activation)
        return config


del KerasTensor
