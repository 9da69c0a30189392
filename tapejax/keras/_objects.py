"""Keras 3 metrics and losses with their calls recorded on the tape.

A metric's ``update_state``, ``result`` and ``reset_state`` and a loss's call
are each one op (``_bridge.stateful_call``) over the object's variables, so a
metric accumulates correctly inside a ``tapejax.function`` step (its totals
are variables the step assigns) and a loss is differentiable.
"""

from __future__ import annotations

from typing import Any

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


class MetricMixin:
    """``update_state``/``result``/``reset_state`` as ops over the metric's variables."""

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


class LossMixin:
    """A Keras loss whose call is one op on the tape."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not _eager((args, kwargs)):
            return super().__call__(*args, **kwargs)
        return stateful_call(_cached(self, "__call__"), [], args, kwargs)


_swapped: dict[type, type] = {}


def tape_metric(m: Any) -> Any:
    """``m`` (a Keras metric) with its methods on the tape (its class gains ``MetricMixin``)."""
    if m is None or isinstance(m, MetricMixin):
        return m
    cls = type(m)
    new = _swapped.get(cls)
    if new is None:
        new = _swapped[cls] = type(cls.__name__, (MetricMixin, cls), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
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
            cls = type(name, (mixin, obj), {"__module__": modname, "__qualname__": name, "__doc__": obj.__doc__})
            _swapped[obj] = cls
            out[name] = cls
        else:
            out[name] = obj
    return out


def op_function(fn: Any, modname: str) -> Any:
    """A Keras function (an activation, a loss) as one op on the tape when given tapejax values."""
    import functools

    @functools.wraps(fn)
    def f(*args: Any, **kwargs: Any) -> Any:
        if not _eager((args, kwargs)):
            return fn(*args, **kwargs)
        return stateful_call(fn, [], args, kwargs)

    f.__module__ = modname
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
        return tape_object(kget(identifier), functions)

    return get
