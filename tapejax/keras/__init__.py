"""``tf.keras``: Keras 3 on its JAX backend, every Keras computation recorded on the tape.

TensorFlow 2.21's ``tf.keras`` *is* Keras 3; so is this one. Its layers,
models, losses, metrics, initializers, regularizers, constraints, callbacks
and saving are Keras 3's own classes, running on Keras's JAX backend, with a
thin layer in front that puts each call on tapejax's tape: a built-in layer's
whole computation is one recorded op (differentiable to any order, inside
``tapejax.function``, ``ForwardAccumulator`` and the jacobians), variables are
``tf.Variable`` views of Keras's variables, and ``fit`` runs TensorFlow's
``train_step`` (a ``GradientTape``) compiled with ``tapejax.function``.
Optimizers are optax transformations chosen and parameterised to give Keras
3's numbers step for step (tests/oracle/test_oracle_keras.py).

``import tapejax`` does not import Keras; the first use of ``tf.keras`` does,
with ``KERAS_BACKEND=jax`` (a process whose ``keras`` was already imported
with another backend, for example by TensorFlow's ``tf.keras``, gets an
ImportError: one process holds one Keras backend).

Differences from TF 2.21's ``tf.keras`` (compat_docs/differences.md):

- ``model.trainable_variables`` (and the other variable lists) are
  ``tf.Variable`` views of the Keras variables (``KerasVariable``, with
  ``.path``); a layer attribute such as ``layer.kernel`` is the Keras variable
  itself, which tapejax ops read as a constant: differentiate with respect to
  the lists, or ``add_weight``'s return value in a layer you write.
- Random values (initializers, dropout masks) follow Keras's JAX backend, not
  TF's random numbers.
- A cross-entropy recovers the logits of a softmax/sigmoid output (as TF's
  Keras does) when the output comes from ``tf.keras.activations`` or from a
  layer called directly; the output of a whole ``Sequential``/functional model
  (one op) is scored from its clipped probabilities, which differs near
  saturation. Use ``from_logits=True`` for identical numbers.
- Optimizer differences: see ``tf.keras.optimizers``.
- A built-in model's (layer's, loss's, metric's) eager call is compiled from its 11th call with
  the same shapes and settings (values equal up to the last bits; code of the user's runs op by op
  on every call; ``TAPEJAX_KERAS_COMPILE=0`` opts out): ``_bridge``.

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

from . import (
    activations,
    backend,
    constraints,
    initializers,
    layers,
    losses,
    metrics,
    models,
    optimizers,
    random,
    regularizers,
    utils,
)
from ._bridge import KerasVariable
from ._bridge import keras as _keras
from ._bridge import tf_keras as _tf_keras
from .layers import Input, InputSpec, Layer
from .losses import Loss
from .metrics import Metric
from .models import Model, Sequential
from .models import tape_model as _tape_model  # noqa: E402
from .optimizers import Optimizer


class _ModelFactories:
    """A Keras namespace whose functions build models (``applications``): the models they return are on the tape."""

    def __init__(self, module):
        self._module = module
        self.__doc__ = f"``tf.keras.{module.__name__.split('.')[-1]}``: Keras 3's, its models on the tape."

    def __getattr__(self, name):
        import types

        obj = getattr(self._module, name)
        if isinstance(obj, types.ModuleType):
            return _ModelFactories(obj)
        if callable(obj) and not isinstance(obj, type):
            def build(*args, **kwargs):
                return _tape_model(obj(*args, **kwargs))

            build.__name__ = getattr(obj, "__name__", name)
            build.__doc__ = getattr(obj, "__doc__", None)
            return build
        return obj

    def __dir__(self):
        return dir(self._module)


class _OpsNamespace:
    """``tf.keras.ops`` (and its submodules): each Keras op called on tapejax values is one op on the tape."""

    def __init__(self, module):
        self._module = module
        self._made = {}
        self.__doc__ = f"``tf.keras.{module.__name__.split('keras.', 1)[-1]}``: Keras 3's ops, recorded on the tape."

    def __getattr__(self, name):
        import inspect
        import types

        from ._objects import op_function

        obj = getattr(self._module, name)
        if isinstance(obj, types.ModuleType):
            return _OpsNamespace(obj)
        if inspect.isfunction(obj):
            f = self._made.get(name)
            if f is None:
                f = self._made[name] = op_function(obj, "tapejax.keras.ops")
            return f
        return obj

    def __dir__(self):
        return dir(self._module)


applications = _ModelFactories(_tf_keras.applications)
ops = _OpsNamespace(_keras.ops)
callbacks = _keras.callbacks
mixed_precision = _keras.mixed_precision
saving = _keras.saving
KerasTensor = _keras.KerasTensor


def Variable(*args, **kwargs):  # noqa: N802  (TF's name)
    """``keras.Variable(initializer, shape=None, dtype=None, trainable=True, ...)`` seen as a ``tf.Variable``."""
    from ._bridge import mirror

    return mirror(_keras.Variable(*args, **kwargs))

__version__ = _keras.__version__

# The rest of TF's tf.keras namespace, as Keras has it (no computation of their own on tensors).
_PASSTHROUGH = ("DTypePolicy", "FloatDTypePolicy", "Initializer", "Quantizer", "Regularizer", "config", "datasets",
                "dtype_policies", "export", "preprocessing", "quantizers", "tree", "version", "visualization")
globals().update({n: getattr(_tf_keras, n) for n in _PASSTHROUGH if hasattr(_tf_keras, n)})

# Computed at import (from Keras 3's names): the generated stub __init__.pyi spells these names out for type checkers.
__all__ = [  # pyright: ignore[reportUnsupportedDunderAll]
    "Input", "InputSpec", "KerasTensor", "KerasVariable", "Layer", "Loss", "Metric", "Model", "Optimizer",
    "Sequential", "Variable", "activations", "backend", "callbacks", "constraints", "initializers", "layers",
    "losses", "metrics", "mixed_precision", "models", "ops", "optimizers", "random", "regularizers", "saving",
    "utils", "applications", *[n for n in _PASSTHROUGH if hasattr(_tf_keras, n)],
]

# Last: Keras 3's import-time objects (about 120,000, never garbage) leave the cycle collector's
# full walks, as tapejax's own did at ``import tapejax`` (tapejax/_heap.py: why).
from .. import _heap  # noqa: E402

_heap.freeze_import_heap()
