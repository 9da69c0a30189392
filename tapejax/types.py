"""``tf.types``: the abstract types of TF's public API (``tf.types.experimental``).

``tapejax.function`` objects are ``PolymorphicFunction``s (``GenericFunction`` is the same
class, as in TF 2.21), their traces ``ConcreteFunction``s, ``inference_fn`` an
``AtomicFunction``; all are ``Callable``s. An object whose class defines
``__tf_tracing_type__(context)`` (``SupportsTracingProtocol``) is traced by the
``TraceType`` it returns, as in TF: equal trace types share a trace.

Example:
    >>> import tapejax as tf
    >>> f = tf.function(lambda x: x + 1)
    >>> isinstance(f, tf.types.experimental.PolymorphicFunction)
    True
    >>> isinstance(f.get_concrete_function(tf.constant(1)), tf.types.experimental.ConcreteFunction)
    True
"""

from __future__ import annotations

import abc
import types as _pytypes
import typing
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ._core._recorder import Tensor, VariableBase
from ._tf._function import ConcreteFunction as _ConcreteFunction
from ._tf._function import Function as _Function
from ._tf._graph import AtomicFunction as _AtomicFunction
from ._tf._graph import FunctionType

__all__ = ["experimental"]


class TraceType(abc.ABC):
    """The type of an argument for ``tf.function`` tracing (TF's ``tf.types.experimental.TraceType``).

    Returned by ``__tf_tracing_type__``; arguments with equal trace types share a trace.
    """

    @abc.abstractmethod
    def is_subtype_of(self, other: TraceType) -> bool:
        """Whether this type is a subtype of ``other``."""

    @abc.abstractmethod
    def most_specific_common_supertype(self, others: typing.Sequence[TraceType]) -> TraceType | None:
        """The most specific supertype of this and ``others``, or None."""

    @abc.abstractmethod
    def placeholder_value(self, placeholder_context: Any = None) -> Any:
        """The value a trace of this type is made with."""

    @abc.abstractmethod
    def __eq__(self, other: object) -> bool: ...

    @abc.abstractmethod
    def __hash__(self) -> int: ...


@runtime_checkable
class SupportsTracingProtocol(Protocol):
    """An object that gives its own ``TraceType`` (``__tf_tracing_type__(context)``)."""

    def __tf_tracing_type__(self, context: Any) -> TraceType: ...


class Callable(abc.ABC):  # noqa: A001 - TF's name
    """Base of the callables ``tf.function`` makes (TF's ``tf.types.experimental.Callable``)."""

    @property
    @abc.abstractmethod
    def function_type(self) -> Any:
        """The signature (a ``FunctionType``)."""


class ConcreteFunction(Callable):
    """One traced program (``Function.get_concrete_function``)."""


class PolymorphicFunction(Callable):
    """A function traced per input signature (``tf.function``'s result)."""


class AtomicFunction(Callable):
    """The compiled program of a ``ConcreteFunction`` (``inference_fn``)."""


GenericFunction = PolymorphicFunction

ConcreteFunction.register(_ConcreteFunction)
PolymorphicFunction.register(_Function)
AtomicFunction.register(_AtomicFunction)

TensorLike = typing.Union[Tensor, VariableBase, int, float, bool, str, bytes, complex, tuple, list, np.ndarray,  # noqa: UP007
                          np.generic]

experimental = _pytypes.ModuleType("tapejax.types.experimental", "TF's tf.types.experimental: the abstract types.")
for _name, _obj in {
    "AtomicFunction": AtomicFunction, "Callable": Callable, "ConcreteFunction": ConcreteFunction,
    "FunctionType": FunctionType, "GenericFunction": GenericFunction, "PolymorphicFunction": PolymorphicFunction,
    "SupportsTracingProtocol": SupportsTracingProtocol, "TensorLike": TensorLike, "TraceType": TraceType,
}.items():
    setattr(experimental, _name, _obj)
experimental.__all__ = sorted(k for k in vars(experimental) if not k.startswith("_"))  # type: ignore[attr-defined]
