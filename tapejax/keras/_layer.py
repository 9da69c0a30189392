"""The Keras 3 ``Layer`` with its calls on the tape.

Every class of ``tf.keras.layers`` is the Keras 3 class with ``LayerMixin`` in
front. Calling a layer on tapejax values takes one of two paths:

* a built-in layer (its ``call`` is Keras's): the whole Keras call, with every
  variable it reads, is one recorded op (``_bridge.stateful_call``);
* a layer whose ``call`` the user wrote (a subclass of ``tf.keras.layers.Layer``
  or ``tf.keras.Model``): its ``call`` runs here with tapejax values, so each
  tapejax op in it is recorded as usual and built-in sub-layers are ops.

Symbolic calls (the functional API) and calls inside another layer's op (where
the values are JAX arrays in a Keras ``StatelessScope``) are Keras's own; a
user-written ``call`` is then run on the JAX values through tapejax tensors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
from keras.src import utils as _kutils  # noqa: E402
from keras.src.backend import compute_output_spec as _compute_output_spec  # noqa: E402
from keras.src.backend.common.masking import get_keras_mask as _get_keras_mask  # noqa: E402
from keras.src.layers.layer import CallSpec  # noqa: E402
from keras.src.layers.layer import get_shapes_dict as _get_shapes_dict  # noqa: E402

from .._core._recorder import Tensor, VariableBase
from .._tf import _distribute_ctx as _dctx
from . import _bridge
from ._bridge import (
    StatelessScope,
    in_stateless_scope,
    jax_level,
    keras,
    kvar,
    mirror,
    mirrors,
    stateful_call,
)

__all__ = ["LayerMixin", "is_native", "adapt_callable"]

_KLayer = keras.layers.Layer
_KerasTensor = keras.KerasTensor


def is_native(cls: type) -> bool:
    """Whether ``cls.call`` was written with tapejax ops (not Keras's own)."""
    c = cls.__dict__.get("_tapejax_native")
    if c is None:
        mod = getattr(getattr(cls, "call", None), "__module__", "") or ""
        c = not (mod == "keras" or mod.startswith("keras."))
        setattr(cls, "_tapejax_native", c)  # noqa: B010  # cached per class (any Keras class)
    return c


def _pure_keras(obj: Any) -> bool:
    """Whether calling ``obj`` (a layer, or its no-activation wrapper) runs only Keras's and tapejax's
    code, so its eager value may be compiled (``_bridge._keras_impl``): every sub-layer a tf.keras
    class (so attribute changes are seen) whose ``call`` is Keras's, no ``Lambda``, no activity
    regularizer, no activation of the user's."""
    layer = getattr(obj, "_tapejax_layer", obj)
    if not isinstance(layer, LayerMixin):
        return False
    try:
        layers = list(layer._flatten_layers(include_self=True, recursive=True))
    except Exception:  # noqa: BLE001  (a layer Keras cannot walk: not compiled)
        return False
    for sub in layers:
        cls = type(sub)
        if isinstance(sub, keras.layers.InputLayer):
            continue  # (a placeholder: no computation, nothing to change)
        if not isinstance(sub, LayerMixin) or is_native(cls) or isinstance(sub, keras.layers.Lambda):
            return False
        if getattr(sub, "activity_regularizer", None) is not None:
            return False
        for attr in ("activation", "recurrent_activation"):
            a = getattr(sub, attr, None)
            if a is not None and not _bridge.keras_code(a):
                return False
    return True


def _symbolic(tree: Any) -> bool:
    return any(isinstance(x, _KerasTensor) for x in jax.tree_util.tree_leaves(tree))


def _is_tape(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


def _spec(x: Any) -> Any:
    """A KerasTensor with the shape and dtype of a value (for building)."""
    if isinstance(x, Tensor | VariableBase | jax.Array) or hasattr(x, "__array__") and hasattr(x, "shape") and hasattr(x, "dtype"):
        v = x._value if isinstance(x, Tensor | VariableBase) else x
        dtype = getattr(v, "dtype", None)
        return _KerasTensor(tuple(v.shape), dtype=str(dtype) if dtype is not None else None)
    return x


def _specs(tree: Any) -> Any:
    return jax.tree_util.tree_map(_spec, tree, is_leaf=_is_tape)


def adapt_callable(fn: Any) -> Any:
    """An activation or function given to a built-in layer: Keras's as is, a tapejax one made JAX-level."""
    if not callable(fn) or isinstance(fn, str | type):
        return fn
    inner = getattr(fn, "__wrapped__", None)
    if getattr(fn, "_tapejax_keras", False) and inner is not None:
        return inner  # tf.keras.activations.relu -> keras's relu (serialises by name)
    mod = getattr(fn, "__module__", "") or ""
    if mod == "keras" or mod.startswith("keras."):
        return fn
    if isinstance(fn, _KLayer | keras.losses.Loss | keras.metrics.Metric):
        return fn
    return jax_level(fn)


_CALLABLE_KWARGS = ("activation", "recurrent_activation", "function")


def _adapt_init_args(cls: type, args: tuple, kwargs: dict) -> tuple:
    """Callables given to a built-in layer (``Dense(4, tf.nn.relu)``), by keyword or position, made JAX-level."""
    import inspect

    kwargs = dict(kwargs)
    for k in _CALLABLE_KWARGS:
        if k in kwargs:
            kwargs[k] = adapt_callable(kwargs[k])
    if not args:
        return args, kwargs
    init = next((c.__dict__["__init__"] for c in cls.__mro__ if c is not LayerMixin and "__init__" in c.__dict__
                 and not issubclass(c, LayerMixin)), None)
    try:
        names = [p.name for p in inspect.signature(init).parameters.values()][1:]  # type: ignore[arg-type]  # None: TypeError below
    except (TypeError, ValueError):
        return args, kwargs
    args = tuple(adapt_callable(a) if i < len(names) and names[i] in _CALLABLE_KWARGS else a for i, a in enumerate(args))
    return args, kwargs


def _not_in_spmd_trace() -> None:
    # A layer built lazily inside strategy.run's traced SPMD step would give its new variables
    # traced values; the strategy builds them eagerly first (TF creates them on the first run too).
    if _dctx.in_spmd_trace():
        raise _dctx.VariableCreationInReplica()


if TYPE_CHECKING:
    # The mixin is only ever combined with Keras's class (untyped, so Any): its Keras
    # attributes come from there.
    from keras.layers import Layer as _LayerMixinBase
else:
    _LayerMixinBase = object


class LayerMixin(_bridge.Saveable, _LayerMixinBase):
    """What ``tf.keras`` adds to a Keras 3 layer: calls on the tape, variables as ``tf.Variable``."""

    def __init__(self, *args: Any, **kwargs: Any):
        if not is_native(type(self)):
            args, kwargs = _adapt_init_args(type(self), args, kwargs)
        super().__init__(*args, **kwargs)

    # ---- variables: tapejax views of Keras's lists ------------------------------------

    @property
    def variables(self) -> list:
        return mirrors(super().variables)

    @property
    def trainable_variables(self) -> list:
        return mirrors(super().trainable_variables)

    @property
    def non_trainable_variables(self) -> list:
        return mirrors(super().non_trainable_variables)

    @property
    def weights(self) -> list:
        return mirrors(super().weights)

    @property
    def trainable_weights(self) -> list:
        return mirrors(super().trainable_weights)

    @property
    def non_trainable_weights(self) -> list:
        return mirrors(super().non_trainable_weights)

    def add_weight(self, *args: Any, **kwargs: Any) -> Any:
        v = super().add_weight(*args, **kwargs)
        # A call written with tapejax ops reads its weights as tf.Variables; Keras's
        # own layers keep keras.Variables (their call runs on JAX values).
        return mirror(v) if is_native(type(self)) else v

    def add_variable(self, *args: Any, **kwargs: Any) -> Any:
        return self.add_weight(*args, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        # A public attribute (trainable, activation, rate...) may change what a call computes: a
        # compiled eager call traced before it is not used again (_bridge.version). (Keras sets
        # ``built = True`` again on every call: no change, no new version.)
        _bridge.bump_version(self, name, value)
        super().__setattr__(name, value)

    # ---- calls --------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        native = is_native(type(self))
        if _symbolic((args, kwargs)):
            if native:
                self._tapejax_build(args, kwargs)
            return super().__call__(*args, **kwargs)
        if in_stateless_scope():
            # Inside an op (or Keras's shape inference): JAX values.
            if native:
                return jax_level(lambda *a, **k: self._tapejax_native_call(a, k))(*args, **kwargs)
            return super().__call__(*args, **kwargs)
        if native:
            return self._tapejax_native_call(args, kwargs)
        return self._tapejax_op_call(args, kwargs)

    def _tapejax_build(self, args: tuple, kwargs: dict) -> None:
        if self.built:  # type: ignore[has-type]  # Keras's Layer sets it
            return
        _not_in_spmd_trace()
        if native_build_needed(self):
            spec_kwargs = _specs(dict(kwargs))
            call_spec = CallSpec(self._call_signature, self._call_context_args, _specs(args), spec_kwargs)
            with self._open_name_scope():
                self._maybe_build(call_spec)
        if is_native(type(self)):
            # Sub-layers build on their first call.
            self.built = True
            if self._build_shapes_dict is None and _kutils.is_default(self.build):  # type: ignore[has-type]
                # What Keras's default ``build`` records: ``get_build_config`` saves it, so a file or a
                # copy of the layer is built (and its weights loaded) before its first call.
                shapes = _get_shapes_dict(CallSpec(self._call_signature, self._call_context_args, _specs(args),
                                                   _specs(dict(kwargs))))
                self._build_shapes_dict = {"input_shape": next(iter(shapes.values()), None)}

    def _resolve_context(self, args: tuple, kwargs: dict) -> Any:
        call_context = self._get_call_context()
        call_spec = CallSpec(self._call_signature, self._call_context_args, args, dict(kwargs))
        for name in self._call_context_args:
            if name in kwargs and name not in self._call_signature.parameters:
                kwargs.pop(name)
            self._resolve_and_populate_arg(name, call_spec, call_context, kwargs)
        return call_context

    def _tapejax_native_call(self, args: tuple, kwargs: dict) -> Any:
        kwargs = dict(kwargs)
        self._tapejax_build(args, kwargs)
        self._called = True
        try:
            self._resolve_context(args, kwargs)
            with self._open_name_scope():
                return self.call(*args, **kwargs)
        finally:
            self._maybe_reset_call_context()

    def _tapejax_op_call(self, args: tuple, kwargs: dict) -> Any:
        kwargs = dict(kwargs)
        if not self.built:
            _not_in_spmd_trace()
            spec_kwargs = _specs(dict(kwargs))
            call_spec = CallSpec(self._call_signature, self._call_context_args, _specs(args), spec_kwargs)
            with self._open_name_scope():
                self._maybe_build(call_spec)
        try:
            # The training flag is resolved now (explicit, inherited from an outer
            # call, or the default) and recorded: a replay has no caller context.
            self._resolve_context(_specs(args), kwargs)
            _pass_masks(self, args, kwargs)
            kind = _logits_kind(getattr(self, "activation", None))
            if kind is None:
                return stateful_call(self, super().variables, args, kwargs)
            # A softmax/sigmoid activation: the layer without it, then the activation,
            # whose output remembers its logits (TF's Keras scores it from them).
            logits = stateful_call(self._tapejax_without_activation(), super().variables, args, kwargs)
            from . import activations

            return getattr(activations, kind)(logits)
        finally:
            self._maybe_reset_call_context()

    def _tapejax_without_activation(self) -> Any:
        d = self.__dict__.setdefault("_tapejax_fns", {})
        fn = d.get("no_activation")
        if fn is None:
            def fn(*args: Any, **kwargs: Any) -> Any:
                act = self.activation
                object.__setattr__(self, "activation", keras.activations.linear)
                try:
                    return self(*args, **kwargs)
                finally:
                    object.__setattr__(self, "activation", act)

            fn._tapejax_layer = self  # type: ignore[attr-defined]  # (_pure_keras: the layer it calls)
            d["no_activation"] = fn
        return fn

    def stateless_call(self, trainable_variables: Any, non_trainable_variables: Any, *args: Any,
                       return_losses: bool = False, **kwargs: Any) -> Any:
        """Keras's ``stateless_call`` (JAX values in, JAX values out), keyed by the Keras variables."""
        kt = [kvar(v) for v in self.trainable_variables]
        knt = [kvar(v) for v in self.non_trainable_variables]
        if len(trainable_variables) != len(kt) or len(non_trainable_variables) != len(knt):
            raise ValueError(
                f"stateless_call takes {len(kt)} trainable and {len(knt)} non-trainable values for "
                f"{type(self).__name__}; received {len(trainable_variables)} and {len(non_trainable_variables)}."
            )
        mapping = list(zip(kt, trainable_variables)) + list(zip(knt, non_trainable_variables))
        losses = None
        with StatelessScope(state_mapping=mapping, collect_losses=return_losses) as scope:
            outputs = self.call(*args, **kwargs)
            if return_losses:
                losses = self.losses
        new = [scope.get_current_value(v) for v in knt]
        if return_losses:
            return outputs, new, losses
        return outputs, new

    def compute_output_spec(self, *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        if is_native(cls) and _kutils.is_default(self.compute_output_shape):
            return _compute_output_spec(jax_level(self.call), *args, **kwargs)
        return super().compute_output_spec(*args, **kwargs)


def _pass_masks(layer: Any, args: tuple, kwargs: dict) -> None:
    """Keras's mask of the input tensor(s), passed explicitly (inside the op, values are bare arrays)."""
    names = layer._call_signature.parameters
    if "mask" in names and kwargs.get("mask") is None and args:
        mask = jax.tree_util.tree_map(_get_keras_mask, args[0], is_leaf=_is_tape)
        if any(m is not None for m in jax.tree_util.tree_leaves(mask, is_leaf=_is_tape)):
            kwargs["mask"] = mask


def _logits_kind(act: Any) -> str | None:
    if act is keras.activations.softmax:
        return "softmax"
    if act is keras.activations.sigmoid:
        return "sigmoid"
    return None


def native_build_needed(layer: Any) -> bool:
    return not _kutils.is_default(layer.build) or not is_native(type(layer))


def keras_variables(layer: Any) -> list:
    return [kvar(v) for v in layer.variables]


_bridge.pure_checks.append(_pure_keras)
