"""``tf.keras.Model`` (subclassing) and ``tf.keras.Sequential``.

A subclassed model is a layer whose sub-layers and variables are found from its
attributes (lists and dicts of layers included), so ``model.trainable_variables``
is ready for ``tape.gradient`` and ``optimizer.apply_gradients`` once the model
has been called. tapejax has no functional API (``Model(inputs, outputs)``) and
no ``compile``/``fit``: training is the custom loop with a ``GradientTape``.

Example:
    >>> import tapejax as tf
    >>> class MLP(tf.keras.Model):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.hidden = [tf.keras.layers.Dense(8, activation="relu") for _ in range(2)]
    ...         self.out = tf.keras.layers.Dense(1)
    ...     def call(self, x, training=False):
    ...         for layer in self.hidden:
    ...             x = layer(x)
    ...         return self.out(x)
    >>> model = MLP()
    >>> _ = model(tf.ones((4, 3)))
    >>> len(model.trainable_variables)
    6
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .._core._recorder import Tensor
from ._layer import InputLayer, KerasTensor, Layer

__all__ = ["Model", "Sequential"]


class Model(Layer):
    """A layer made of layers, trained with a custom loop (``tf.keras.Model``).

    Subclass it, create layers in ``__init__`` and use them in ``call``.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        if args or "inputs" in kwargs or "outputs" in kwargs:
            raise NotImplementedError(
                "tapejax.keras implements Model subclassing and Sequential, not the functional API "
                "(Model(inputs, outputs)). Subclass tf.keras.Model and write `call`, or use tf.keras.Sequential."
            )
        super().__init__(**kwargs)

    @property
    def layers(self) -> list:
        """The model's direct sub-layers, in the order they were assigned."""
        return self._layers

    def build(self, input_shape: Any = None) -> None:
        """Create the weights for inputs of ``input_shape`` by calling the model once on zeros.

        ``None`` dimensions (the batch) become 1. A list of shapes builds a model
        whose ``call`` takes a list of inputs.
        """
        if input_shape is not None:
            def zeros(shape: Any) -> Tensor:
                return Tensor(jnp.zeros(tuple(1 if s is None else int(s) for s in shape), self.compute_dtype))

            multi = isinstance(input_shape, list | tuple) and input_shape and isinstance(input_shape[0], list | tuple)
            self(([zeros(s) for s in input_shape]) if multi else zeros(input_shape), training=False)
        object.__setattr__(self, "built", True)

    def _build_from(self, first: Any) -> None:
        # A model builds by running: its layers build on their first call.
        object.__setattr__(self, "built", True)

    def summary(self, print_fn: Any = None, **kwargs: Any) -> None:
        """Print each sub-layer with its parameter count, and the totals."""
        pf = print_fn or print
        rows = [(f"{layer.name} ({type(layer).__name__})", sum(int(jnp.size(v._value)) for v in layer.weights))
                for layer in self.layers]
        width = max([len(r[0]) for r in rows] + [20]) + 2
        pf(f'Model: "{self.name}"')
        pf("-" * (width + 12))
        pf(f"{'Layer (type)':<{width}}{'Param #':>12}")
        pf("=" * (width + 12))
        for name, n in rows:
            pf(f"{name:<{width}}{n:>12,}")
        pf("=" * (width + 12))
        total = sum(int(jnp.size(v._value)) for v in self.weights)
        trainable = sum(int(jnp.size(v._value)) for v in self.trainable_weights)
        pf(f"Total params: {total:,}")
        pf(f"Trainable params: {trainable:,}")
        pf(f"Non-trainable params: {total - trainable:,}")


class Sequential(Model):
    """A stack of layers, each feeding the next (``tf.keras.Sequential``).

    With ``tf.keras.Input(shape)`` first (or ``input_shape=`` on the first
    layer) the model builds at once; otherwise on its first call.

    Example:
        >>> import tapejax as tf
        >>> tf.keras.backend.clear_session()  # restart the automatic names
        >>> model = tf.keras.Sequential([
        ...     tf.keras.layers.Flatten(),
        ...     tf.keras.layers.Dense(16, activation="relu"),
        ...     tf.keras.layers.Dropout(0.2),
        ...     tf.keras.layers.Dense(10),
        ... ])
        >>> model(tf.ones((2, 4, 4))).shape
        TensorShape([2, 10])
        >>> [layer.name for layer in model.layers][:2]
        ['flatten', 'dense']
    """

    def __init__(self, layers: Any = None, trainable: bool = True, name: str | None = None, **kwargs: Any):
        super().__init__(trainable=trainable, name=name, **kwargs)
        self._tj_stack: list = []
        self._tj_input_shape: tuple | None = None
        for layer in layers or ():
            self.add(layer, rebuild=False)
        self._maybe_build()

    def add(self, layer: Any, rebuild: bool = True) -> None:
        """Append a layer (or a ``tf.keras.Input`` as the first entry)."""
        if isinstance(layer, KerasTensor):
            if self._tj_stack or self._tj_input_shape is not None:
                raise ValueError("An Input can only be the first entry of a Sequential model.")
            self._tj_input_shape = tuple(layer.shape)[1:]
        elif isinstance(layer, InputLayer):
            if self._tj_stack or self._tj_input_shape is not None:
                raise ValueError("An InputLayer can only be the first entry of a Sequential model.")
            self._tj_input_shape = tuple(layer.input_shape)
        elif isinstance(layer, Layer):
            if not self._tj_stack and self._tj_input_shape is None and layer._tj_input_shape_arg is not None:
                self._tj_input_shape = layer._tj_input_shape_arg
            self._tj_stack.append(layer)
        else:
            raise ValueError(
                f"Only instances of `keras.Layer` can be added to a Sequential model. Received: {layer!r} (of type {type(layer)})"
            )
        if rebuild:
            self._maybe_build()

    def pop(self) -> Layer:
        """Remove and return the last layer."""
        if not self._tj_stack:
            raise TypeError("There are no layers in the model.")
        return self._tj_stack.pop()

    @property
    def layers(self) -> list:
        return list(self._tj_stack)

    def _maybe_build(self) -> None:
        # With a known input shape, build every layer now by running a batch of one zeros
        # through the stack (eagerly, outside any tape): variables exist before training.
        if self._tj_input_shape is not None and self._tj_stack and not all(layer.built for layer in self._tj_stack):
            self.build((None,) + self._tj_input_shape)

    def build(self, input_shape: Any = None) -> None:
        if input_shape is None:
            return
        shape = tuple(1 if s is None else int(s) for s in input_shape)
        x: Any = Tensor(jnp.zeros(shape, self.compute_dtype))
        for layer in self._tj_stack:
            x = layer(x, training=False)
        self.built = True

    def call(self, inputs: Any, training: Any = None, mask: Any = None) -> Any:
        x = inputs
        for layer in self._tj_stack:
            x = layer(x)
        return x

    def get_config(self) -> dict:
        config = super().get_config()
        config["layers"] = [{"class_name": type(layer).__name__, "config": layer.get_config()} for layer in self._tj_stack]
        return config
