"""The Keras ``Layer`` protocol: lazy build, training-flag propagation and variable tracking.

Tracking is by inspection, not registration: a layer's variables are the ones
it created with ``add_weight``, then every ``tf.Variable``, layer and seed
generator reachable from its attributes (through lists, tuples and dicts, in
attribute order), so ``self.blocks = [Dense(4), Dense(4)]`` and later
``self.blocks.append(...)`` are both seen. Order follows Keras 3: a layer's own
trainable, then non-trainable variables, then its seed-generator states, then
each sub-layer's variables, without duplicates.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from .._tf import _surface as tf

from .._core._recorder import Tensor, VariableBase
from .._ops._dtypes import as_dtype
from .._ops.random import _next_key
from .._tf._variable import Variable
from . import _naming, initializers

__all__ = ["Layer", "SeedGenerator", "KerasTensor", "InputLayer", "Input"]


class SeedGenerator:
    """Random state kept in a (non-trainable) variable, as Keras 3's ``keras.random.SeedGenerator``.

    Because the state is a variable, a ``tapejax.function`` step captures it and
    advances it on every compiled call: dropout draws a fresh mask each step
    instead of a mask frozen into the program at trace time.

    Example:
        >>> import tapejax as tf
        >>> g = tf.keras.random.SeedGenerator(1)
        >>> g.state.dtype
        tf.uint32
    """

    def __init__(self, seed: int | None = None, name: str | None = None, **kwargs: Any):
        key = jax.random.key(int(seed)) if seed is not None else _next_key(None)
        self.name = name or _naming.auto_name("seed_generator")
        self.state = Variable(jax.random.key_data(key), trainable=False, name="seed_generator_state")

    def next(self) -> jax.Array:
        """A fresh ``jax.random`` key; the state moves on (an assign, captured by compiled steps)."""
        key = jax.random.wrap_key_data(self.state._value)
        new_state, sub = jax.random.split(key)
        self.state.assign(Tensor(jax.random.key_data(new_state)))
        return sub


# ---- call context: how training=... reaches nested layers --------------------------------

class _CallContext(threading.local):
    def __init__(self) -> None:
        self.training: list[Any] = []


_context = _CallContext()


def _sig_info(cls: type) -> tuple:
    """(position of `training` among call's positional parameters or None, has training, its default)."""
    cache = cls.__dict__.get("_tj_sig")
    if cache is not None:
        return cache
    try:
        params = list(inspect.signature(cls.call).parameters.values())[1:]  # drop self
    except (TypeError, ValueError):
        params = []
    has = False
    default = None
    pos = None
    positional = 0
    for p in params:
        if p.name == "training":
            has = True
            default = None if p.default is inspect.Parameter.empty else p.default
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                pos = positional
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    info = (pos, has, default)
    cls._tj_sig = info
    return info


# ---- symbolic inputs (only what Sequential needs) ----------------------------------------

class KerasTensor:
    """The placeholder ``tf.keras.Input(shape=...)`` returns: a shape and dtype, no value.

    tapejax runs eagerly and has no functional-model graph: a ``KerasTensor``
    only tells a ``Sequential`` model its input shape (so it builds at once).
    """

    def __init__(self, shape: tuple, dtype: str = "float32", name: str | None = None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.name = name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"<KerasTensor shape={self.shape}, dtype={self.dtype}, name={self.name}>"


# Attribute names of a layer's own bookkeeping: never scanned for tracked objects.
_INTERNAL = frozenset({"_tj_ready", "_tj_own", "_tj_orig_trainable", "_tj_input_shape_arg"})


def _walk(value: Any, depth: int = 0) -> Iterator[Any]:
    """The variables, layers and seed generators inside one attribute value, in order."""
    if isinstance(value, VariableBase | Layer | SeedGenerator):
        yield value
    elif depth < 8 and isinstance(value, list | tuple):
        for v in value:
            yield from _walk(v, depth + 1)
    elif depth < 8 and isinstance(value, dict):
        for v in value.values():
            yield from _walk(v, depth + 1)


class Layer:
    """Base class of Keras layers (``tf.keras.layers.Layer``).

    Subclasses create weights in ``build(input_shape)`` (called once, on the
    first call, with the input's shape) and compute in ``call(inputs, ...)``.
    ``training`` flows from an outer call to nested layers that do not get one
    explicitly.

    Example:
        >>> import tapejax as tf
        >>> class Scale(tf.keras.layers.Layer):
        ...     def build(self, input_shape):
        ...         self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")
        ...     def call(self, x):
        ...         return x * self.w
        >>> layer = Scale()
        >>> layer(tf.ones((2, 3))).shape, len(layer.trainable_variables)
        (TensorShape([2, 3]), 1)
    """

    def __init__(self, trainable: bool = True, name: str | None = None, dtype: Any = None, autocast: bool = True, **kwargs: Any):
        object.__setattr__(self, "_tj_ready", True)
        input_shape = kwargs.pop("input_shape", None)
        input_dim = kwargs.pop("input_dim", None)
        batch_input_shape = kwargs.pop("batch_input_shape", None)
        kwargs.pop("batch_size", None)
        if kwargs:
            raise ValueError(f"Unrecognized keyword arguments passed to {type(self).__name__}: {kwargs}")
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        if batch_input_shape is not None and input_shape is None:
            input_shape = tuple(batch_input_shape)[1:]
        if input_shape is not None:
            warnings.warn(
                f"Do not pass an `input_shape`/`input_dim` argument to a layer. When using Sequential models, "
                f"prefer using an `Input(shape)` object as the first layer in the model instead.",
                UserWarning,
                stacklevel=2,
            )
        self._tj_input_shape_arg = None if input_shape is None else tuple(input_shape)
        self.name = name or _naming.auto_name(type(self).__name__)
        d = as_dtype(dtype if dtype is not None else "float32")
        self._dtype = d.name
        self._trainable = bool(trainable)
        self.autocast = autocast
        self.built = False
        self._tj_own: list[VariableBase] = []
        self._tj_orig_trainable: dict[int, bool] = {}

    def __setattr__(self, name: str, value: Any) -> None:
        if "_tj_ready" not in self.__dict__:
            raise RuntimeError(
                f"It looks like you are subclassing `{type(self).__name__}` and you forgot to call "
                "`super().__init__()`. Always start with this line."
            )
        object.__setattr__(self, name, value)

    # ---- dtype --------------------------------------------------------------------------

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def compute_dtype(self) -> str:
        return self._dtype

    @property
    def variable_dtype(self) -> str:
        return self._dtype

    # ---- weights --------------------------------------------------------------------------

    def add_weight(self, shape: Any = None, initializer: Any = None, dtype: Any = None, trainable: bool = True,
                   autocast: bool = True, regularizer: Any = None, constraint: Any = None, aggregation: str = "none",
                   overwrite_with_gradient: bool = False, name: str | None = None) -> Variable:
        """Create a variable owned by this layer (``tf.keras.layers.Layer.add_weight``)."""
        if regularizer is not None:
            raise NotImplementedError("tapejax.keras does not implement weight regularizers; add the penalty to your loss.")
        shape = () if shape is None else tuple(int(s) for s in shape)
        d = as_dtype(dtype if dtype is not None else self._dtype)
        if initializer is None:
            initializer = "glorot_uniform" if d.is_floating else "zeros"
        init = initializers.get(initializer)
        # Create first, draw second: a tapejax.function trace refuses the creation (and
        # replays the call eagerly) before any random key is consumed, so a layer built
        # inside a compiled step gets the same weights as one built eagerly.
        v = Variable(Tensor(jnp.zeros(shape, d._np)), trainable=trainable, name=name or "variable", dtype=d,
                     constraint=constraint)
        v._value = init(shape, dtype=d)._value
        if not self._trainable:
            v._trainable = False  # created inside a frozen layer: frozen until the layer is unfrozen
        self._tj_own.append(v)
        self._tj_orig_trainable[v._uid] = bool(trainable)
        return v

    def _children(self) -> tuple[list, list, list]:
        """(own variables, seed generators, sub-layers) found from this layer's attributes."""
        own: list = []
        seeds: list = []
        layers: list = []
        seen: set[int] = set()
        for v in self.__dict__.get("_tj_own", ()):
            seen.add(id(v))
            own.append(v)
        for k, val in self.__dict__.items():
            if k in _INTERNAL:
                continue
            for obj in _walk(val):
                if id(obj) in seen or obj is self:
                    continue
                seen.add(id(obj))
                if isinstance(obj, VariableBase):
                    own.append(obj)
                    self._tj_orig_trainable.setdefault(obj._uid, obj._trainable)
                elif isinstance(obj, SeedGenerator):
                    seeds.append(obj)
                else:
                    layers.append(obj)
        own = [v for v in own if v._trainable] + [v for v in own if not v._trainable]
        return own, seeds, layers

    def _collect(self, with_seeds: bool, seen: set[int], out: list, visiting: set[int]) -> None:
        if id(self) in visiting:
            return
        visiting.add(id(self))
        own, seeds, layers = self._children()
        for v in own:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        if with_seeds:
            for g in seeds:
                if id(g.state) not in seen:
                    seen.add(id(g.state))
                    out.append(g.state)
        for layer in layers:
            layer._collect(with_seeds, seen, out, visiting)

    @property
    def variables(self) -> list:
        """Every variable of this layer and its sub-layers, including random-seed state."""
        out: list = []
        self._collect(True, set(), out, set())
        return out

    @property
    def weights(self) -> list:
        """The layer's weights (its variables without random-seed state)."""
        out: list = []
        self._collect(False, set(), out, set())
        return out

    @property
    def trainable_variables(self) -> list:
        """The variables an optimizer should update: [] when the layer is frozen."""
        if not self.trainable:
            return []
        return [v for v in self.variables if v._trainable]

    @property
    def non_trainable_variables(self) -> list:
        if not self.trainable:
            return self.variables
        return [v for v in self.variables if not v._trainable]

    @property
    def trainable_weights(self) -> list:
        if not self.trainable:
            return []
        return [v for v in self.weights if v._trainable]

    @property
    def non_trainable_weights(self) -> list:
        if not self.trainable:
            return self.weights
        return [v for v in self.weights if not v._trainable]

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        # Freezing a layer freezes its weights, so a tape no longer watches them and a
        # parent's trainable_variables skips them (Keras 3 does the same).
        value = bool(value)
        object.__setattr__(self, "_trainable", value)
        own, _, layers = self._children()
        for v in own:
            if self._tj_orig_trainable.get(v._uid, True):
                v._trainable = value
        for layer in layers:
            layer.trainable = value

    @property
    def _layers(self) -> list:
        return self._children()[2]

    def get_weights(self) -> list[np.ndarray]:
        """The weights' values as NumPy arrays."""
        return [np.asarray(v._value) for v in self.weights]

    def set_weights(self, weights: list) -> None:
        """Assign values to the weights, in ``weights`` order."""
        ws = self.weights
        if len(ws) != len(weights):
            raise ValueError(
                f"You called `set_weights(weights)` on layer '{self.name}' with a weight list of length "
                f"{len(weights)}, but the layer was expecting {len(ws)} weights."
            )
        for v, w in zip(ws, weights):
            if tuple(np.shape(w)) != tuple(v.shape):
                raise ValueError(f"Layer {self.name} weight shape {tuple(v.shape)} is not compatible with provided weight shape {tuple(np.shape(w))}.")
            v.assign(Tensor(jnp.asarray(w, dtype=v._value.dtype)))

    def count_params(self) -> int:
        """The number of scalars in the layer's weights."""
        if not self.built:
            raise ValueError(
                f"You tried to call `count_params` on layer '{self.name}', but the layer isn't built. "
                "You can build it manually via: `layer.build(input_shape)`."
            )
        return int(sum(int(np.prod(v.shape)) for v in self.weights))

    # ---- calling --------------------------------------------------------------------------

    def build(self, input_shape: Any = None) -> None:
        """Create the layer's weights for inputs of ``input_shape`` (called once, on the first call)."""
        self.built = True

    def call(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"Layer {type(self).__name__} does not have a `call()` method implemented.")

    def _convert(self, x: Any) -> Any:
        # Keras 3: NumPy inputs become tensors; floating inputs are cast to the layer's
        # compute dtype (autocast). Integer inputs stay integer.
        if isinstance(x, VariableBase):
            x = x.value()
        if isinstance(x, np.ndarray | np.generic | jax.Array) and not isinstance(x, Tensor):
            a = jnp.asarray(x)
            if jnp.issubdtype(a.dtype, jnp.floating) and self.autocast:
                a = a.astype(self._dtype)
            return Tensor(a)
        if isinstance(x, Tensor) and self.autocast:
            if jnp.issubdtype(x._value.dtype, jnp.floating) and x._value.dtype != np.dtype(self._dtype):
                return tf.cast(x, self._dtype)
        return x

    def _convert_tree(self, x: Any) -> Any:
        if isinstance(x, list | tuple) and not isinstance(x, KerasTensor):
            return type(x)(self._convert_tree(v) for v in x)
        if isinstance(x, dict):
            return {k: self._convert_tree(v) for k, v in x.items()}
        return self._convert(x)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "_tj_ready" not in self.__dict__:
            raise RuntimeError(
                f"It looks like you are subclassing `{type(self).__name__}` and you forgot to call "
                "`super().__init__()`. Always start with this line."
            )
        if args and isinstance(args[0], KerasTensor):
            raise NotImplementedError(
                "tapejax.keras has no functional API: calling a layer on a tf.keras.Input builds no graph. "
                "Subclass tf.keras.Model, or use tf.keras.Sequential([tf.keras.Input(shape), ...])."
            )
        pos, has_training, default = _sig_info(type(self))
        args = list(args)
        explicit = kwargs.get("training", None)
        if explicit is None and pos is not None and len(args) > pos:
            explicit = args[pos]
        training = explicit
        if training is None and _context.training:
            training = _context.training[-1]
        if training is None:
            training = default
        if has_training:
            if pos is not None and len(args) > pos:
                args[pos] = training
            elif training is not None:
                kwargs["training"] = training
        else:
            kwargs.pop("training", None)
        args = [self._convert_tree(a) for a in args]
        if not self.built:
            self._build_from(args[0] if args else next(iter(kwargs.values()), None))
        _context.training.append(training)
        try:
            return self.call(*args, **kwargs)
        finally:
            _context.training.pop()

    def _build_from(self, first: Any) -> None:
        shape = None
        if first is not None and hasattr(first, "shape"):
            shape = tuple(first.shape)
        # Build is transactional: if creating a weight is refused (a tapejax.function
        # trace replays the first call eagerly), the layer stays unbuilt.
        self.build(shape)
        object.__setattr__(self, "built", True)

    def get_config(self) -> dict:
        return {"name": self.name, "trainable": self.trainable, "dtype": self._dtype}

    @classmethod
    def from_config(cls, config: dict) -> Layer:
        return cls(**config)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"


class InputLayer(Layer):
    """Marks a ``Sequential`` model's input shape (``tf.keras.layers.InputLayer``)."""

    def __init__(self, shape: Any = None, batch_size: int | None = None, dtype: Any = None, name: str | None = None,
                 input_tensor: Any = None, **kwargs: Any):
        if shape is None:
            shape = kwargs.pop("input_shape", None)
        kwargs.pop("batch_shape", None)
        super().__init__(name=name, dtype=dtype)
        if shape is None:
            raise ValueError("You must pass a `shape` argument.")
        self.input_shape = tuple(shape)
        self.batch_size = batch_size
        self.built = True

    def call(self, inputs: Any) -> Any:
        return inputs


def Input(shape: Any = None, batch_size: int | None = None, dtype: Any = None, name: str | None = None, **kwargs: Any) -> KerasTensor:  # noqa: N802  (Keras's name)
    """A placeholder for a ``Sequential`` model's input (``tf.keras.Input``).

    Example:
        >>> import tapejax as tf
        >>> model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(2)])
        >>> [tuple(v.shape) for v in model.weights]
        [(4, 2), (2,)]
    """
    if shape is None:
        raise ValueError("You must pass a `shape` argument.")
    d = as_dtype(dtype if dtype is not None else "float32").name
    return KerasTensor((batch_size,) + tuple(shape), d, name or _naming.auto_name("input_layer"))
