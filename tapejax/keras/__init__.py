"""``tf.keras`` for custom training loops: optax-backed optimizers, layers, losses and metrics.

The part of Keras a ``GradientTape`` training loop uses::

    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))

runs unchanged under ``import tapejax as tf``, eagerly or inside
``tapejax.function``. Optimizer update rules are optax transformations chosen
and parameterised to give Keras 3's numbers (tests/oracle/test_oracle_keras.py
runs both for 20 steps per optimizer).

Not provided: the functional API (``Model(inputs, outputs)``), ``compile``/``fit``,
saving, regularizers, ``use_ema``/``gradient_accumulation_steps``, and layers
beyond ``Dense``, ``Flatten``, ``Dropout``, ``Activation`` and ``InputLayer``.

Differences from Keras 3 (TF 2.21):

- A ``tf.Variable`` assigned as a layer or model attribute is tracked (as
  ``tf.Module`` and Keras 2 did). Keras 3 tracks only ``keras.Variable`` and
  silently leaves a ``tf.Variable`` attribute out of ``trainable_variables``.
- Layer weights are ``tf.Variable`` objects named TF-style (``"kernel:0"``);
  Keras 3 names them ``"kernel"`` and adds ``.path`` (``"dense/kernel"``).
- ``optimizer.iterations`` is int32 unless 64-bit mode is on (TF: int64).
- An integer variable given to any optimizer raises ``InvalidArgumentError``.
  Keras's ``Adam`` raises the same; Keras's ``SGD`` casts the learning rate to
  the integer dtype (0) and silently leaves the variable unchanged.
- ``Adam(amsgrad=True)`` is optax's AMSGrad, which keeps the maximum of the
  bias-corrected second moments; Keras keeps the maximum of the raw moments and
  corrects it at the current step, so the two differ after the first steps.
- Optimizer state variables are optax's state leaves, named after their fields
  (``kernel_mu``, ``kernel_nu``, ``kernel_count``); Keras has ``m``/``v`` slots.
- ``optimizer.minimize(loss, var_list, tape=None)`` exists (Keras 3 dropped it).
- Random values (initializers, dropout masks) have Keras's distributions but
  are not TF's numbers bit for bit.

Example:
    >>> import tapejax as tf
    >>> model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu"), tf.keras.layers.Dense(1)])
    >>> opt = tf.keras.optimizers.Adam(0.01)
    >>> x, y = tf.ones((8, 3)), tf.zeros((8, 1))
    >>> with tf.GradientTape() as tape:
    ...     loss = tf.keras.losses.MeanSquaredError()(y, model(x))
    >>> grads = tape.gradient(loss, model.trainable_variables)
    >>> _ = opt.apply_gradients(zip(grads, model.trainable_variables))
    >>> int(opt.iterations)
    1
"""

from __future__ import annotations

from .._tf._variable import Variable
from . import activations, backend, initializers, layers, losses, metrics, models, optimizers, random, utils
from ._layer import Input, KerasTensor
from .layers import Layer
from .losses import Loss
from .metrics import Metric
from .models import Model, Sequential
from .optimizers import Optimizer

__all__ = [
    "Input", "KerasTensor", "Layer", "Loss", "Metric", "Model", "Optimizer", "Sequential", "Variable", "activations",
    "backend", "initializers", "layers", "losses", "metrics", "models", "optimizers", "random", "utils",
]
