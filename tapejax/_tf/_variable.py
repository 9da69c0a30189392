"""``Variable``: mutable state that tapes watch when it is read."""

from __future__ import annotations

from typing import Any

import jax
import jax.core
import numpy as np

from .. import errors
from .._core._recorder import Tensor, VariableBase, read_variable, touch_variable
from .._engine import _lazy
from .._ops._dtypes import DType, as_dtype, from_np
from .._ops._machinery import cast
from .._ops._tensor import Reference, TensorShape, _numpy_text, convert_to_tensor
from ._distribute_ctx import host_value, note_variable, place_variable
from ._name_scope import current_scope

__all__ = ["Variable"]


class Variable(VariableBase):
    """A mutable tensor: TF's ``tf.Variable`` on a ``jax.Array``.

    Reading a trainable variable inside a recording ``GradientTape`` watches it
    (unless the tape was made with ``watch_accessed_variables=False``). The
    gradient with respect to a variable sums over every read in the recorded
    window; a read after an ``assign`` carries the value current at that time,
    and an assign itself is not differentiable.

    Example:
        >>> import tapejax as tf
        >>> v = tf.Variable(3.0)
        >>> with tf.GradientTape() as tape:
        ...     y = v * v
        >>> print(tape.gradient(y, v))
        tf.Tensor(6.0, shape=(), dtype=float32)
    """

    __slots__ = ("_name", "_shape", "_constraint")

    def __init__(
        self,
        initial_value: Any = None,
        trainable: bool | None = None,
        validate_shape: bool = True,
        caching_device: Any = None,
        name: str | None = None,
        variable_def: Any = None,
        dtype: Any = None,
        import_scope: Any = None,
        constraint: Any = None,
        synchronization: Any = None,
        aggregation: Any = None,
        shape: Any = None,
        experimental_enable_variable_lifting: Any = None,
    ):
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        if callable(initial_value) and not isinstance(initial_value, Tensor | VariableBase):
            initial_value = initial_value()
        if isinstance(initial_value, Tensor | VariableBase):
            value = initial_value._value
            if dtype is not None and as_dtype(dtype)._np != value.dtype:
                value = cast(Tensor(value), dtype)._value
        else:
            value = convert_to_tensor(initial_value, dtype=dtype)._value
        # Under a tf.distribute strategy's scope the value is replicated over its devices.
        value = place_variable(value)
        if trainable is None:  # TF: trainable unless synchronized on read
            trainable = getattr(synchronization, "name", None) != "ON_READ"
        super().__init__(value, bool(trainable))
        # TF prefixes the active tf.name_scope (eagerly never uniquified: two 'w' are both 'w:0').
        self._name = name if name is not None and ":" in name else current_scope() + (name or "Variable") + ":0"
        if shape is not None:
            s = TensorShape(shape)
            if not s.is_compatible_with(value.shape):
                raise ValueError(f"The initial value's shape ({list(value.shape)}) is not compatible with the explicitly supplied `shape` "
                                 f"argument ({list(s)}).")
            self._shape: TensorShape | None = s
        else:
            self._shape = TensorShape(value.shape) if validate_shape else None
        self._constraint = constraint
        if synchronization is not None or aggregation is not None:
            note_variable(self, synchronization, aggregation)

    # --- reading ---------------------------------------------------------------

    def value(self) -> Tensor:
        """The current value as a Tensor (a read, which a recording tape may watch)."""
        return read_variable(self)

    def read_value(self) -> Tensor:
        """The current value as a Tensor (a read, which a recording tape may watch)."""
        return read_variable(self)

    def numpy(self) -> np.ndarray:
        v = self._value
        if isinstance(v, jax.core.Tracer):
            # TF's ResourceVariable.numpy outside eager execution.
            raise NotImplementedError(
                "numpy() is only available when eager execution is enabled: inside a compiled tapejax.function "
                "step the variable's value is symbolic. Return it from the step, or use tf.print."
            )
        a = np.asarray(host_value(v))
        # A scalar string variable gives bytes, as TF (numbers keep their 0-d array form here).
        return a[()] if a.dtype == object and a.ndim == 0 else a

    @property
    def dtype(self) -> DType:
        return from_np(self._value.dtype)

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._value.shape)

    def get_shape(self) -> TensorShape:
        return self.shape

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def name(self) -> str:
        return self._name

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def constraint(self) -> Any:
        return self._constraint

    @property
    def device(self) -> str:
        return str(next(iter(self._value.devices())))

    @property
    def handle(self) -> Variable:
        return self

    # --- writing ---------------------------------------------------------------

    def _checked(self, value: Any, op: str) -> Any:
        if isinstance(value, Tensor | VariableBase):
            v = _lazy.peek(value)  # lazy mode: a pending value stays pending (shape/dtype known)
            if v.dtype != self._aval.dtype:
                raise ValueError(
                    f"Tensor conversion requested dtype {self.dtype.name} for Tensor with dtype "
                    f"{from_np(v.dtype).name}: cannot {op} it to variable '{self._name}'. Cast it first: "
                    f"v.{op}(tf.cast(value, v.dtype))."
                )
        else:
            try:
                v = convert_to_tensor(value, dtype=self.dtype)._value
            except TypeError as e:
                raise TypeError(f"Cannot {op} {value!r} to variable '{self._name}' of dtype {self.dtype.name}: {e}") from None
        if op != "assign" and tuple(v.shape) != tuple(self._aval.shape):
            # TF's AssignAdd/AssignSub kernels need equal shapes (no broadcasting) and
            # fail with InvalidArgumentError; assign's check runs first, a ValueError.
            shapes = [f"[{','.join(map(str, s))}]" for s in (self._aval.shape, v.shape)]
            raise errors.InvalidArgumentError(
                f"Cannot update variable with shape {shapes[0]} using a Tensor with shape {shapes[1]}, shapes must "
                f"be equal. Give {op} a value of the variable's shape (tf.broadcast_to or tf.reshape it first)."
            )
        # (An update's shape equals the value's, which the declared shape already admits.)
        elif op == "assign" and self._shape is not None and not self._shape.is_compatible_with(v.shape):
            raise ValueError(
                f"Cannot {op} value to variable '{self._name}': Shape mismatch. The variable shape {self._shape}, "
                f"and the assigned value shape {TensorShape(v.shape)} are incompatible."
            )
        return v

    def assign(self, value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        """Set the value (same dtype and shape). Not differentiable, as in TF."""
        v = self._checked(value, "assign")
        touch_variable(self)
        self._value = _lazy.update(self, "assign", v)
        return _unread(self) if read_value else None

    def assign_add(self, delta: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        """Add ``delta`` in place."""
        v = self._checked(delta, "assign_add")
        touch_variable(self)
        self._value = _lazy.update(self, "add", v)
        return _unread(self) if read_value else None

    def assign_sub(self, delta: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        """Subtract ``delta`` in place."""
        v = self._checked(delta, "assign_sub")
        touch_variable(self)
        self._value = _lazy.update(self, "sub", v)
        return _unread(self) if read_value else None

    # --- Python protocol -----------------------------------------------------------

    def __repr__(self) -> str:
        return (f"<tf.Variable '{self._name}' shape={TensorShape(self._value.shape)} dtype={self.dtype.name}, "
                f"numpy={_numpy_text(self._value, True)}>")

    def __hash__(self) -> int:
        raise TypeError(f"Variable is unhashable. Instead, use variable.ref() as the key. (Variable: {self!r})")

    def ref(self) -> Reference:
        return Reference(self)

    experimental_ref = ref

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = np.asarray(host_value(self._value))
        return a.astype(dtype) if dtype is not None else a

    def __jax_array__(self) -> Any:
        return self._value

    def __float__(self) -> float:
        return float(np.asarray(self._value))

    def __int__(self) -> int:
        return int(np.asarray(self._value))

    def __bool__(self) -> bool:
        return bool(np.asarray(self._value))

    def __index__(self) -> int:
        return Tensor(self._value).__index__()

    def __len__(self) -> int:
        return Tensor(self._value).__len__()

    def __iter__(self) -> Any:
        return iter(read_variable(self))

    def __format__(self, spec: str) -> str:
        return format(Tensor(self._value), spec)


def _flatten(v: Variable) -> tuple:
    return (v._value,), None


def _unflatten(aux: Any, children: Any) -> Tensor:
    # A JAX transformation rebuilds a Variable as its *value*, a Tensor: a rebuilt Variable would
    # be a detached copy whose ``assign`` reached nothing (a silent no-op), and optax's state built
    # from Variable params (``opt.init(params)``) must have the tape gradients' node type (Tensor),
    # or ``opt.update(grads, state, params)`` stops on a pytree node-type mismatch.
    return Tensor(children[0])


jax.tree_util.register_pytree_node(Variable, _flatten, _unflatten)  # type: ignore[arg-type]  # rebuilt as a Tensor on purpose


class _UnreadVariable(Variable):
    """What ``assign``/``assign_add``/``assign_sub`` return, as TF's ``UnreadVariable``: the same
    variable (its storage, identity on tapes and in compiled steps, and every method), printed with
    the name ``'UnreadVariable'``."""

    __slots__ = ("_parent",)

    def __init__(self, parent: Variable):  # noqa: D107 - no Variable.__init__: nothing new is created
        self._parent = parent
        self._name = "UnreadVariable"

    # The state is the parent's (these shadow the slots of VariableBase and Variable).
    _raw = property(lambda self: self._parent._raw, lambda self, v: setattr(self._parent, "_raw", v))

    @property
    def _v(self) -> Any:  # (VariableBase's property, typed: a lambda property() is not its override to a checker)
        return self._parent._v

    @_v.setter
    def _v(self, value: Any) -> None:
        self._parent._v = value

    _uid = property(lambda self: self._parent._uid)
    _trainable = property(lambda self: self._parent._trainable)
    # A property where Variable declares a TensorShape slot: the intended shadowing above.
    _shape = property(lambda self: self._parent._shape)  # pyright: ignore[reportAssignmentType]
    _constraint = property(lambda self: self._parent._constraint)

    def __getattr__(self, name: str) -> Any:
        # Attributes a subclass of Variable added (a Keras view's storage) are the parent's.
        if name == "_parent":
            raise AttributeError(name)
        return getattr(self._parent, name)


def _unread(var: Variable) -> Variable:
    parent = var._parent if type(var) is _UnreadVariable else var
    return _UnreadVariable(parent) if type(parent) is Variable else parent
