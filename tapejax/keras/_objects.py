"""Keras 3 metrics and losses with their calls recorded on the tape.

A metric's ``update_state``, ``result`` and ``reset_state`` and a loss's call
are each one op (``_bridge.stateful_call``) over the object's variables, so a
metric accumulates correctly inside a ``tapejax.function`` step (its totals
are variables the step assigns) and a loss is differentiable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._core._recorder import Tensor
from . import _bridge, _nn, _saving
from ._bridge import in_stateless_scope, keras, mirrors, stateful_call

__all__ = ["MetricMixin", "LossMixin", "tape_metric", "generate"]

_KerasTensor = keras.KerasTensor


def _cached(obj: Any, name: str) -> Any:
    # One callable per object and method: the replay cache keys ops on it.
    d = obj.__dict__.setdefault("_tapejax_fns", {})
    fn = d.get(name)
    if fn is None:
        fn = d[name] = getattr(obj, name)
    return fn


def _eager(args: Any) -> bool:
    import jax

    return not in_stateless_scope() and not any(isinstance(x, _KerasTensor) for x in jax.tree_util.tree_leaves(args))


if TYPE_CHECKING:
    # The mixin is only ever combined with Keras's class (untyped, so Any): its Keras
    # attributes come from there.
    from keras.metrics import Metric as _MetricMixinBase
else:
    _MetricMixinBase = object


class MetricMixin(_bridge.Saveable, _MetricMixinBase):
    """``update_state``/``result``/``reset_state`` as ops over the metric's variables."""

    def __setattr__(self, name: str, value: Any) -> None:
        _bridge.bump_version(self, name, value)  # (_bridge: a compiled eager call sees no later change)
        super().__setattr__(name, value)

    def update_state(self, *args: Any, **kwargs: Any) -> Any:
        if not _eager((args, kwargs)):
            return super().update_state(*args, **kwargs)
        return stateful_call(_cached(self, "update_state"), self._tapejax_state(), args, kwargs)

    def result(self) -> Any:
        if not _eager(()):
            return super().result()
        return stateful_call(_cached(self, "result"), self._tapejax_state(), (), {})

    def reset_state(self) -> None:
        if not _eager(()):
            return super().reset_state()
        stateful_call(_cached(self, "reset_state"), self._tapejax_state(), (), {})

    def _tapejax_state(self) -> list:
        return list(keras.metrics.Metric.variables.fget(self))

    @property
    def variables(self) -> list:
        return mirrors(super().variables)


if TYPE_CHECKING:
    # The mixin is only ever combined with Keras's class (untyped, so Any): its Keras
    # attributes come from there.
    from keras.losses import Loss as _LossMixinBase
else:
    _LossMixinBase = object


class LossMixin(_bridge.Saveable, _LossMixinBase):
    """A Keras loss whose call is one op on the tape."""

    def __setattr__(self, name: str, value: Any) -> None:
        _bridge.bump_version(self, name, value)  # (_bridge: a compiled eager call sees no later change)
        super().__setattr__(name, value)

    if TYPE_CHECKING:
        # Keras's LossFunctionWrapper (most built-in losses) sets these; __call__ reads them
        # through getattr, as a loss class without them takes the plain path.
        fn: Callable[..., Any]
        _fn_kwargs: dict[str, Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not _eager((args, kwargs)):
            return super().__call__(*args, **kwargs)
        kind = _CROSSENTROPY_KIND.get(getattr(getattr(self, "fn", None), "__name__", ""))
        fkw = getattr(self, "_fn_kwargs", None)
        if kind is not None and isinstance(fkw, dict):
            y_pred = args[1] if len(args) > 1 else kwargs.get("y_pred")
            lg = _nn.logits_of(y_pred, kind)
            if lg is not None:
                if fkw.get("from_logits", False):
                    _warn_logits(self.fn.__name__, kind)
                # TF's Keras scores a softmax/sigmoid output from its logits.
                args = (args[0], lg, *args[2:]) if len(args) > 1 else args
                if "y_pred" in kwargs:
                    kwargs = {**kwargs, "y_pred": lg}
                return stateful_call(self._tapejax_logits_call(), [], args, kwargs)
        return stateful_call(_cached(self, "__call__"), [], args, kwargs)

    def _tapejax_logits_call(self) -> Any:
        d = self.__dict__.setdefault("_tapejax_fns", {})
        fn = d.get("logits")
        if fn is None:
            def fn(*args: Any, **kwargs: Any) -> Any:
                saved = dict(self._fn_kwargs)
                self._fn_kwargs["from_logits"] = True
                try:
                    return self.__call__(*args, **kwargs)
                finally:
                    self._fn_kwargs.clear()
                    self._fn_kwargs.update(saved)

            fn._tapejax_layer = self  # type: ignore[attr-defined]  # (_pure_object: the loss it calls)
            d["logits"] = fn
        return fn


_swapped: dict[type, type] = {}


def tape_metric(m: Any) -> Any:
    """``m`` (a Keras metric) with its methods on the tape (its class gains ``MetricMixin``)."""
    if m is None or isinstance(m, MetricMixin):
        return m
    cls = type(m)
    new = _swapped.get(cls)
    if new is None:
        new = _swapped[cls] = type(cls.__name__, (MetricMixin, cls), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
        _saving.register(new, cls)
    m.__class__ = new
    return m


def generate(module: Any, base: type, mixin: type, modname: str) -> dict:
    """Every class of ``module`` derived from ``base`` with ``mixin`` in front; other names as they are."""
    import inspect

    out: dict = {}
    for name in dir(module):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if inspect.isclass(obj) and issubclass(obj, base):
            doc = f"Keras 3's ``{obj.__module__}.{obj.__qualname__}``, its calls recorded on the tape."
            cls = type(name, (mixin, obj), {"__module__": modname, "__qualname__": name, "__doc__": doc})
            _swapped[obj] = cls
            _saving.register(cls, obj)
            out[name] = cls
        else:
            out[name] = obj
    return out


def _warn_logits(fn_name: str, kind: str) -> None:
    import warnings

    warnings.warn(
        f'"`{fn_name}` received `from_logits=True`, but the `output` argument was produced by a '
        f"{kind.capitalize()} activation and thus does not represent logits. Was this intended?",
        stacklevel=4,
    )


_ACTIVATION_KIND = {"softmax": "softmax", "sigmoid": "sigmoid"}
# Keras's cross-entropy functions and the activation whose logits each one uses.
_CROSSENTROPY_KIND = {"binary_crossentropy": "sigmoid", "categorical_crossentropy": "softmax",
                      "sparse_categorical_crossentropy": "softmax"}


def _from_logits_call(fn: Any, kind: str, args: tuple, kwargs: dict) -> Any:
    """``fn(y_true, y_pred, ...)`` on the logits behind ``y_pred`` if it is a Keras ``kind`` output, else None."""
    import inspect

    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    a = bound.arguments
    if "y_pred" not in a:
        return None
    lg = _nn.logits_of(a["y_pred"], kind)
    if lg is None:
        return None
    if a.get("from_logits"):
        _warn_logits(fn.__name__, kind)
    a["y_pred"], a["from_logits"] = lg, True
    return stateful_call(fn, [], bound.args, bound.kwargs)


def op_function(fn: Any, modname: str) -> Any:
    """A Keras function (an activation, a loss) as one op on the tape when given tapejax values."""
    import functools

    act = _ACTIVATION_KIND.get(fn.__name__) if modname.endswith("activations") else None
    ce = _CROSSENTROPY_KIND.get(fn.__name__)

    @functools.wraps(fn)
    def f(*args: Any, **kwargs: Any) -> Any:
        if not _eager((args, kwargs)):
            return fn(*args, **kwargs)
        if ce is not None:
            out = _from_logits_call(fn, ce, args, kwargs)
            if out is not None:
                return out
        out = stateful_call(fn, [], args, kwargs)
        if act is not None and args:
            from .._tf import _surface as tf

            _nn.remember_logits(out, tf.convert_to_tensor(args[0]) if not isinstance(args[0], Tensor) else args[0], act)
        return out

    f.__module__ = modname
    f.__doc__ = f"Keras 3's ``{fn.__module__}.{fn.__name__}``, one op on the tape."
    f._tapejax_keras = True  # type: ignore[attr-defined]
    return f


def generate_functions(module: Any, modname: str, skip: tuple = ()) -> dict:
    import inspect

    out: dict = {}
    made: dict = {}  # one op per function: aliases (mse, MSE) are the same object, as in Keras
    for name in dir(module):
        if name.startswith("_") or name in skip:
            continue
        obj = getattr(module, name)
        if inspect.isfunction(obj) and name not in ("get", "serialize", "deserialize"):
            if id(obj) not in made:
                made[id(obj)] = op_function(obj, modname)
            out[name] = made[id(obj)]
    return out


def tape_object(obj: Any, functions: dict) -> Any:
    """What Keras's ``get`` returned, on the tape: a Keras function -> tapejax's op of it; an instance -> class swapped."""
    import inspect

    if inspect.isfunction(obj):
        for f in functions.values():
            if getattr(f, "__wrapped__", None) is obj:
                return f
        return obj
    cls = _swapped.get(type(obj))
    if cls is not None:
        obj.__class__ = cls
    return obj


def getter(kget: Any, functions: dict) -> Any:
    def get(identifier: Any) -> Any:
        """Keras's ``get`` (a name, a config or an object), returning tapejax's version of it."""
        with _saving.loading():
            return tape_object(kget(identifier), functions)

    return get


def deserializer(kdeserialize: Any, functions: dict) -> Any:
    def deserialize(config: Any, custom_objects: Any = None) -> Any:
        """Keras's ``deserialize`` of a config (or a name), returning tapejax's class (or op) for it."""
        with _saving.loading():
            return tape_object(kdeserialize(config, custom_objects=custom_objects), functions)

    return deserialize


def _pure_object(obj: Any) -> bool:
    """Whether ``obj`` (a loss's or metric's bound method, or its logits wrapper) runs only Keras's and
    tapejax's code (``_bridge._keras_impl`` may compile its eager value): a tf.keras class of its own
    (not a subclass the user wrote), wrapping no function of the user's."""
    target = getattr(obj, "_tapejax_layer", None) or getattr(obj, "__self__", None)
    if not isinstance(target, LossMixin | MetricMixin):
        return False
    if not (type(target).__module__ or "").startswith("tapejax.keras"):
        return False
    for attr in ("fn", "_fn"):
        f = target.__dict__.get(attr)
        if f is not None and not _bridge.keras_code(f):
            return False
    return True


_bridge.pure_checks.append(_pure_object)
