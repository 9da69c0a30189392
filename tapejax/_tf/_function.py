"""``tapejax.function``: TF's ``tf.function`` — a Python step traced once per input
signature into one XLA program, with TF's state semantics.

State is handled the way ``tf.function`` handles resource variables:

* The Python body runs only while tracing (``print`` and other Python side
  effects happen then); the traced program runs on every call.
* Every variable the trace reads or assigns becomes an input of the program the
  moment it is first touched (a new argument of the JAX trace being built, so
  the Python body never has to run twice to discover it), and every variable
  it assigns is an output, written back after each call, in program order.
* A trace that creates variables (a lazy layer build, optimizer slots) is TF's
  first "initialisation" trace: the program computing only the initial values
  is run once, then the function is traced again with the variables as inputs
  (TF traces twice in this case, and counts two traces). Creating a variable in
  any later trace raises TF's ``ValueError``.
* Returned variables come back as their value after the call; returned Python
  numbers and NumPy values come back as tensors.
* Called while a tape records (or an accumulator is active), the traced program
  is one recorded op over the tensor arguments and the variables it reads (TF's
  call op): tapes differentiate through it and the Python does not run again.
* Where autograph could not convert the code that failed (no source), the call
  signature runs eagerly, with one ``tf.autograph.AutoGraphWarning``.

With ``autograph=True`` (the default, as in TF) the Python function is first
rewritten by ``tapejax._tf._autograph`` so that ``if``/``while``/``for`` on
tensors become ``tf.cond``/``tf.while_loop``.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import threading
import traceback
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.extend.core
import numpy as np
from jax._src import core as _jcore
from jax._src import source_info_util as _siu
from jax._src.interpreters import partial_eval as _pe

from .. import config as _config
from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from .._engine import _lazy
from .._ops import debugging as _debugging
from .._ops import random as _random_ops
from .._ops._dtypes import as_dtype
from .._ops._strtable import StrIds, intern, lookup
from .._ops._tensor import TensorShape, convert_to_tensor, forget_symbolic, is_string_value, name_symbolic
from . import _autograph, _graph

__all__ = ["function", "Function", "TensorSpec", "ConcreteFunction"]

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__))


class TensorSpec:
    """Describes a tensor argument of a ``tapejax.function`` (TF's ``tf.TensorSpec``).

    ``None`` dimensions accept any size. XLA compiles for static shapes, so each
    distinct concrete shape still gets its own compiled program.

    Example:
        >>> import tapejax as tf
        >>> spec = tf.TensorSpec([None, 3], tf.float32)
        >>> spec.is_compatible_with(tf.ones((5, 3)))
        True
    """

    def __init__(self, shape: Any, dtype: Any = "float32", name: str | None = None):
        self.shape = TensorShape(shape)
        self.dtype = as_dtype(dtype)
        self.name = name

    def is_compatible_with(self, value: Any) -> bool:
        if isinstance(value, TensorSpec):
            return self.shape.is_compatible_with(value.shape) and self.dtype == value.dtype
        v = value._value if isinstance(value, Tensor | VariableBase) else np.asarray(value)
        return self.shape.is_compatible_with(v.shape) and self.dtype._np == v.dtype

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, TensorSpec) and self.dtype == other.dtype
                and _dims(self.shape) == _dims(other.shape))

    def __hash__(self) -> int:
        return hash((_dims(self.shape), self.dtype._np))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype!r}, name={self.name!r})"


def _dims(shape: TensorShape) -> Any:
    try:
        return tuple(shape.as_list())
    except ValueError:
        return None


# --- where the user's code is (messages point there, not at tapejax or jax) -------------------------


def _is_internal(filename: str) -> bool:
    f = os.path.abspath(filename)
    return f.startswith(_PKG_DIR) or f.startswith(_JAX_DIR) or f.startswith(os.path.dirname(os.__file__))


def user_frame(tb: Any = None) -> traceback.FrameSummary | None:
    """The innermost stack frame (of ``tb``, else of the current stack) in user code."""
    frames = traceback.extract_tb(tb) if tb is not None else traceback.extract_stack()
    for fr in reversed(frames):
        if not _is_internal(fr.filename) and not fr.filename.startswith("<frozen"):
            return fr
    return None


def _where(fr: traceback.FrameSummary | None) -> str:
    if fr is None:
        return ""
    line = f"\n        {fr.line}" if fr.line else ""
    return f'in user code:\n\n    File "{fr.filename}", line {fr.lineno}, in {fr.name}{line}\n\n    '


_SINGLETON = (
    "tf.function only supports singleton tf.Variables created on the first call. Make sure the tf.Variable is "
    "only created once or created outside tf.function. See https://www.tensorflow.org/guide/function#"
    "creating_tfvariables for more information."
)


# --- capturing variables while a trace runs ---------------------------------------------------------


_LEAKED = (
    "tf.function {name!r}: a tensor defined inside a tf.while_loop or tf.cond body (which AutoGraph makes of a "
    "loop or `if` on tensors) is used outside that body, where it cannot be accessed: it was kept in a Python "
    "object (a list appended to in the loop, an attribute). Carry it as a loop variable, or collect "
    "per-iteration values in a tf.TensorArray."
)


def _leaked(x: Any) -> bool:
    # A tracer of a finished trace (a loop or branch body's), not of one still running (an
    # enclosing jax.jit's, which a closed-over tensor may legitimately belong to).
    if not isinstance(x, _jcore.Tracer):
        return False
    t = getattr(x, "_trace", None)
    live = _jcore.trace_ctx.trace
    while live is not None:
        if live is t:
            return False
        live = getattr(live, "parent_trace", None)
    return True


# The traces of tf.function bodies (weakly): a tracer of one of them used by another trace
# leaked out of a function, not out of a loop or branch body.
_FUNCTION_TRACES: weakref.WeakSet = weakref.WeakSet()


class InaccessibleTensorError(ValueError):
    """TF's error for a tensor used outside the graph (loop or branch body) that made it."""


_CHECK_TOKENS = itertools.count(1)


# Called with (function, entry) after each new trace (tf.summary.trace_on collects graphs).
TRACE_LISTENERS: list = []


class _CreatedInBody(Exception):
    """A variable was created inside a control-flow body during the first trace."""


class _Capture:
    """Pushed on ``_core.state.tracing`` while a step's Python runs; sees variable access.

    A variable touched for the first time becomes a new input of the JAX trace
    being built (``trace.new_arg``): the program takes it as an argument, so the
    Python body runs once however late the variable is discovered.
    """

    def __init__(self, allow_create: bool):
        self.allow_create = allow_create
        self.trace: Any = None
        self.out_order: Any = None
        self.bound: dict[int, Any] = {}
        self.inputs: list[VariableBase] = []
        self.input_vals: list[Any] = []
        self.new_vars: list[VariableBase] = []
        self.created_init: list[Any] = []
        self._seen: set[int] = set()
        # Names this trace's reports of failed tf.debugging checks (_ops/debugging.py).
        self.check_token = next(_CHECK_TOKENS)

    def read(self, var: VariableBase) -> None:
        uid = var._uid
        if uid in self._seen:
            return
        self._seen.add(uid)
        v = var._v
        if is_string_value(v):
            raise TypeError(
                f"The string variable {getattr(var, '_name', 'Variable')!r} is read or assigned inside a compiled "
                "tapejax.function, which carries string tensors but not string variables: pass its value as an "
                "argument and assign the result outside the function.")
        tracer = self.trace.new_arg(_jcore.typeof(v), _siu.current())
        self.inputs.append(var)
        self.input_vals.append(tracer)
        self.bound[uid] = tracer
        cur = _core.state.bound
        if cur is not None and cur is not self.bound and uid not in cur:
            # An inner replay (custom_gradient) bound its own copy: it sees the input too.
            cur[uid] = tracer

    write = read

    def created(self, var: VariableBase) -> None:
        if not self.allow_create:
            where = _where(user_frame())
            raise ValueError(where + ("ValueError: " if where else "") + _SINGLETON)
        if _core.state.tracing and _core.state.tracing[-1] is not self and not self.new_vars:
            # Created inside a tf.cond branch or loop body being traced (a lazy build in a
            # loop): its initial value would live in that body. This first call runs eagerly
            # instead (creating it for real), and the function is traced from the next call.
            raise _CreatedInBody()
        self._seen.add(var._uid)
        self.new_vars.append(var)
        self.created_init.append(var._v)
        self.bound[var._uid] = var._v


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


class _Entry:
    """One trace key's traced program: captured variables, output structure, the compiled call."""

    def __init__(self) -> None:
        self.variables: list[VariableBase] = []
        self.jitted: Any = None
        self.assigned: tuple = ()
        self.out_spec: Any = None
        self.has_effects = False
        self.concrete: ConcreteFunction | None = None
        self.eager = False
        self.closed: Any = None
        self.flat: Any = None
        self.flat_pure: Any = None
        self.arg_slots: list = []
        self.eager_once = False
        # The call's arguments as TensorSpecs and Python values (never the tensors themselves):
        # what pretty_printed_concrete_signatures describes.
        self.spec_args: tuple | None = None
        self.out_order: Any = None
        self.plain_out = False
        self.rng_lock: Any = None
        self.check_token: Any = None


_TRACER_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                  jax.errors.TracerArrayConversionError, jax.errors.TracerIntegerConversionError)


_JAX_NOTE = "For simplicity, JAX has removed its internal frames"


def _in_user_code(e: BaseException) -> None:
    """As TF: an error raised while tracing says where in the user's code it happened
    (and not JAX's note about its own frames)."""
    notes = getattr(e, "__notes__", None)
    if notes:
        ex: Any = e  # __notes__ exists once a note was added (3.11's add_note)
        ex.__notes__ = [n for n in notes if _JAX_NOTE not in n]
        if not ex.__notes__:
            del ex.__notes__
    if type(e) in (ValueError, TypeError, NotImplementedError, errors.OperatorNotAllowedInGraphError) \
            and len(e.args) == 1 and isinstance(e.args[0], str) and not e.args[0].startswith("in user code"):
        where = _where(user_frame(e.__traceback__))
        if where:
            e.args = (where + f"{type(e).__name__}: " + e.args[0],)


def _graph_error(e: BaseException) -> Exception:
    """TF's exception for a traced tensor used as a Python value, by what Python wanted of it:
    a ``bool`` is TF's OperatorNotAllowedInGraphError; an ``int``/``float``/index is Python's own
    TypeError (a graph tensor has no ``__index__``/``__float__``); a NumPy array is TF's
    NotImplementedError (``Cannot convert a symbolic tf.Tensor ... to a numpy array``)."""
    kinds: dict[type, str] = {jax.errors.TracerBoolConversionError: "bool",
                              jax.errors.TracerIntegerConversionError: "int",
                              jax.errors.TracerArrayConversionError: "array"}
    what = kinds.get(type(e), "value")
    for fr in traceback.extract_tb(e.__traceback__):
        if fr.name in ("_t_bool", "__bool__"):
            what = "bool"
        elif fr.name in ("_t_index", "__index__", "__int__", "<lambda>") and what in ("array", "value"):
            what = "int"
    where = _where(user_frame(e.__traceback__))
    later = ("inside a tf.function its value is not known while the function is traced. AutoGraph converts "
             "`if`/`while`/`for` on tensors in the decorated function (and in functions it calls); write other "
             "uses with tf.cond / tf.where / tf.cast, or compute the Python value outside the function.")
    if what == "int":
        cls: type = TypeError
        text = f"Using a symbolic `tf.Tensor` as a Python `int`, `float` or index is not allowed (TF: '... not SymbolicTensor'): {later}"
    elif what == "array":
        cls = NotImplementedError
        text = ("Cannot convert a symbolic tf.Tensor to a numpy array. This error may indicate that you're trying to "
                f"pass a Tensor to a NumPy call, which is not supported: {later}")
    else:
        cls = errors.OperatorNotAllowedInGraphError
        text = f"Using a symbolic `tf.Tensor` as a Python `{what}` is not allowed: {later}"
    return cls(where + (f"{cls.__name__}: " if where else "") + text)


class Function:
    """A callable made by ``tapejax.function``: traces ``python_function`` per input signature.

    Retracing follows TF: a new tensor shape or dtype, or a different Python
    value argument, traces again; a variable's value never does. Python side
    effects run at trace time (``print``), ``tf.print`` and every variable
    read and assign the trace saw run on every call.

    Example:
        >>> import tapejax as tf
        >>> w = tf.Variable(2.0)
        >>> @tf.function
        ... def step(x):
        ...     with tf.GradientTape() as t:
        ...         loss = (w * x - 1.0) ** 2
        ...     w.assign_sub(0.1 * t.gradient(loss, w))
        ...     return loss
        >>> float(step(tf.constant(1.0))), round(float(w), 3)
        (1.0, 1.8)
    """

    def __init__(self, python_function: Callable, input_signature: Any = None, jit_compile: Any = None,
                 reduce_retracing: bool = False, name: str | None = None, autograph: bool = True,
                 _owner: Function | None = None):
        self._python_function = python_function
        self.input_signature = None if input_signature is None else list(input_signature)
        self.jit_compile = jit_compile
        self.reduce_retracing = bool(reduce_retracing)
        self.autograph = bool(autograph)
        self._name: str = str(name or getattr(python_function, "__name__", "function"))
        self._entries: dict[Any, _Entry] = {}
        self._lock = threading.RLock()
        self._trace_count = 0
        self._tf_keys: set = set()
        self._converted: Callable | None = None
        # Variables may be created only in the first trace of this Function (TF's rule).
        self._traced_once = False
        self._warned = False
        self._fast: dict = {}
        functools.update_wrapper(self, python_function)

    @property
    def python_function(self) -> Callable:
        """The Python function this Function wraps (TF's ``Function.python_function``)."""
        return self._python_function

    @property
    def name(self) -> str:
        return self._name

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        # Methods: bind like a function, keeping one Function (and cache) per instance.
        if instance is None:
            return self
        try:
            cache = instance.__dict__.setdefault("_tapejax_functions", {})
        except AttributeError:
            return functools.partial(self.__call__, instance)
        bound = cache.get(id(self))
        if bound is None:
            bound = Function(functools.partial(self._python_function, instance), self.input_signature,
                             self.jit_compile, self.reduce_retracing, self._name, self.autograph)
            cache[id(self)] = bound
        return bound

    def experimental_get_tracing_count(self) -> int:
        """How many times TF would have traced the Python function (TF's method of the same name).

        With an ``input_signature``, shapes that differ only in ``None`` dimensions are one
        trace to TF; tapejax compiles (and runs the Python) once per concrete shape, but counts
        them as one trace, as TF does.
        """
        return self._trace_count

    @property
    def trace_count(self) -> int:
        return self._trace_count

    # --- autograph ---------------------------------------------------------------------

    def _traced_callable(self) -> Callable:
        if not self.autograph:
            return self._python_function
        if self._converted is None:
            self._converted = _autograph.convert_for_trace(self._python_function)
        return self._converted

    # --- calling -----------------------------------------------------------------------

    def _check_signature(self, args: tuple, kwargs: dict) -> None:
        sig = self.input_signature
        if sig is None:
            return
        if kwargs or len(args) != len(sig):
            raise TypeError(
                f"{self._name} has an input_signature of {len(sig)} positional tensors; got {len(args)} "
                f"positional and {len(kwargs)} keyword arguments."
            )
        for i, (a, spec) in enumerate(zip(args, sig)):
            if not spec.is_compatible_with(a):
                v = a._value if _is_leaf(a) else np.asarray(a)
                raise TypeError(
                    f"Argument {i} ({TensorShape(v.shape)}, {v.dtype}) is not compatible with the input_signature "
                    f"{spec!r}. Pass a tensor of that dtype and a compatible shape."
                )

    def _key(self, leaves: list, treedef: Any) -> tuple:
        key_parts: list[tuple] = []
        arrays = []
        var_args: list = []
        for x in leaves:
            if isinstance(x, VariableBase):
                # TF traces a variable argument by its shape and dtype (and which arguments are
                # the same variable), not by identity: another variable reuses the program.
                alias = next(k for k, v in enumerate(var_args + [x]) if v._uid == x._uid)
                key_parts.append(("V", tuple(x._v.shape), np.dtype(x._v.dtype), alias))
                var_args.append(x)
            elif isinstance(x, Tensor | np.ndarray | jax.Array):
                v = x._value if isinstance(x, Tensor) else x
                key_parts.append(("T", tuple(v.shape), np.dtype(v.dtype)))
                # A string tensor goes in as ids of the host string table (_strtable): traced by
                # shape and dtype, as TF traces it, never by value.
                arrays.append(intern(v, False) if is_string_value(v) else v)
            elif isinstance(x, TensorSpec):
                dims = _dims(x.shape)
                if dims is None or any(d is None for d in dims):
                    raise ValueError(
                        f"{x!r} has unknown dimensions: XLA compiles for static shapes, so tapejax traces a "
                        "concrete function for concrete shapes only. Pass a TensorSpec with every dimension known "
                        "(or a tensor); calls with any shape compatible with the input_signature still work."
                    )
                key_parts.append(("T", tuple(dims), x.dtype._np))
                arrays.append(jax.ShapeDtypeStruct(tuple(dims), np.int32 if x.dtype._np is np.dtype(object) else x.dtype._np))
            elif hasattr(type(x), "__tf_tracing_type__"):
                # TF's tracing protocol (tf.types.experimental.TraceType): traced by the type it gives.
                key_parts.append(("P", "TraceType", x.__tf_tracing_type__(None)))
            else:
                try:
                    hash(x)
                    key_parts.append(("P", type(x), x))
                except TypeError:
                    key_parts.append(("O", id(x)))
        return (treedef, tuple(key_parts)), arrays, var_args

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        if fast and not kwargs:
            # Fast path: a call like one already compiled, with only tensors, positionally (a
            # training step's usual call), outside any trace or tape. Every test below is what
            # the general path would decide; they are ordered cheapest first.
            st = _core.state
            if not (st.tracing or st.recording or st.accumulators or st.bound is not None):
                try:
                    arrays = [a._value for a in args if type(a) is Tensor]
                    entry = fast.get(tuple([(x.shape, x.dtype) for x in arrays]))
                except AttributeError:
                    pass
                else:
                    if entry is not None and len(arrays) == len(args) and not _config.functions_run_eagerly():
                        return self._run_fast(entry, arrays)
        if _config.functions_run_eagerly():
            return self._python_function(*args, **kwargs)
        if _core.state.tracing:
            # Inside another function's trace: inline (converted, as TF's autograph
            # converts the functions a converted function calls).
            return self._traced_callable()(*args, **kwargs)
        if _core.state.recording or _core.state.accumulators:
            return self._call_as_op(args, kwargs)
        self._check_signature(args, kwargs)
        entry, arrays, var_args = self._entry_for(args, kwargs)
        if entry.eager:
            return self._python_function(*args, **kwargs)
        if entry.eager_once:
            # A variable is created inside a control-flow body: this first call runs eagerly
            # (TF's initialisation), then the function is traced again at once with creation
            # refused, as TF's second trace (a variable created on every call raises here).
            with self._lock:
                self._entries = {k: e for k, e in self._entries.items() if e is not entry}
            out = self._python_function(*args, **kwargs)
            self._entry_for(args, kwargs)
            return out
        if (not kwargs and self.input_signature is None and entry.jitted is not None
                and all(type(a) is Tensor and not is_string_value(a._value) for a in args)):
            self._fast[tuple((a._value.shape, a._value.dtype) for a in args)] = entry
        return self._run(entry, arrays, var_args)

    def _call_as_op(self, args: tuple, kwargs: dict) -> Any:
        """Under a recording tape (or accumulator): TF records the call as one op. The traced
        program is bound as one primitive over the tensor arguments and the variables it
        reads, so the tape differentiates through it (jax.vjp of the program) and the
        Python body does not run again."""
        self._check_signature(args, kwargs)
        with _core.suspended():
            entry, arrays, var_args = self._entry_for(args, kwargs)
        if entry.eager:
            return self._python_function(*args, **kwargs)
        leaves = jax.tree_util.tree_leaves((args, kwargs), is_leaf=_is_leaf)
        data = [x for x in leaves if isinstance(x, Tensor | np.ndarray | jax.Array)]
        data = [Tensor(a) if is_string_value(x._value if isinstance(x, Tensor) else x) else x for x, a in zip(data, arrays)]
        variables = _vars_for(entry, var_args)
        with _state_lock(variables):
            outs = _core.bind(_CALL, *data, *variables, entry=entry)
            n_dyn = len(outs) - len(entry.assigned)
            for i, t in zip(entry.assigned, outs[n_dyn:]):
                var = variables[i]
                _core.touch_variable(var)
                var._value = t._value
        if entry.has_effects:
            _after_effects(entry)
        out_tree, static = entry.out_spec
        it = iter(outs[:n_dyn])
        res = [next(it) if s[0] == "T" else next(it)._value if s[0] == "A" else
               Tensor(lookup(np.asarray(next(it)._value))) if s[0] == "S" else s[1] for s in static]
        return _reorder(jax.tree_util.tree_unflatten(out_tree, res), getattr(entry, "out_order", None))

    def _entry_for(self, args: tuple, kwargs: dict) -> tuple:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_leaf)
        key, arrays, var_args = self._key(leaves, treedef)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or (entry.jitted is None and not entry.eager and not entry.eager_once):
                entry = self._entries[key] = _Entry()
                entry.spec_args = (tuple(_spec_of(a) for a in args), {k: _spec_of(v) for k, v in kwargs.items()})
                try:
                    self._trace(entry, key, leaves, treedef, arrays)
                except Exception as e:
                    if not self._eager_answers(e, arrays):
                        raise
                    self._fall_back(entry, e)
                else:
                    # Which captured variable each variable argument of the traced call is.
                    pos = {v._uid: i for i, v in enumerate(entry.variables)}
                    entry.arg_slots = [pos.get(v._uid) for v in var_args]
        return entry, arrays, var_args

    def _eager_answers(self, e: BaseException, arrays: list) -> bool:
        """Whether a trace that raised ``e`` should run eagerly instead: where TF's graph gives an
        answer that one XLA program cannot (and never for a traced ``get_concrete_function``)."""
        if any(isinstance(a, jax.ShapeDtypeStruct) for a in arrays):
            return False
        if getattr(e, "tapejax_needs_values", False):
            # An op whose output shape depends on values (tf.boolean_mask, tf.unique, a shape
            # computed by the step): TF's graphs have dynamic shapes, XLA's programs do not.
            return True
        # A tensor used as a Python value where autograph could not convert the code (no source,
        # code built by exec); in converted code TF raises the same error, and so does tapejax.
        tb = getattr(e, "_tapejax_tb", None)
        return bool(self.autograph and tb is not None and _autograph.unconverted_in(tb))

    def _fall_back(self, entry: _Entry, e: BaseException) -> None:
        # This call signature runs eagerly, op by op, which gives TF's numbers.
        entry.eager = True
        if self._warned:
            return
        self._warned = True
        fr = user_frame(getattr(e, "_tapejax_tb", None) or e.__traceback__)
        first = str(e).strip().splitlines()[-1].strip() if str(e).strip() else type(e).__name__
        where = f"line {fr.lineno} of {fr.filename} ({fr.line}): " if fr is not None else ""
        msg = (f"tf.function {self._name!r} could not be traced into one XLA program ({where}{first}), so it "
               "runs eagerly, op by op, from now on: TF's numbers, slower, and Python side effects (print, "
               "appends) run on every call instead of once at trace time.")
        category = _autograph.AutoGraphWarning
        if fr is not None:
            # Reported at the user's line, as Python reports a warning raised there.
            warnings.warn_explicit(msg, category, fr.filename, fr.lineno or 0)
        else:
            warnings.warn(msg, category, stacklevel=4)

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> ConcreteFunction:
        """The traced program for these arguments (tensors or ``TensorSpec``s), TF's method.

        With no arguments, the ``input_signature`` is used. The result is callable with
        tensors of that signature and describes its inputs and outputs.

        Example:
            >>> import tapejax as tf
            >>> @tf.function
            ... def f(x):
            ...     return {"y": x * 2.0}
            >>> cf = f.get_concrete_function(tf.TensorSpec([3], tf.float32))
            >>> cf.structured_outputs
            {'y': TensorSpec(shape=(3,), dtype=tf.float32, name=None)}
            >>> cf(tf.constant([1.0, 2.0, 3.0]))["y"].numpy().tolist()
            [2.0, 4.0, 6.0]
        """
        if not args and not kwargs and self.input_signature is not None:
            args = tuple(self.input_signature)
        if self.input_signature is not None and not kwargs:
            for a, spec in zip(args, self.input_signature):
                if isinstance(a, TensorSpec) and not spec.is_compatible_with(a):
                    raise TypeError(f"{a!r} is not compatible with the input_signature {spec!r}.")
        entry, _, _ = self._entry_for(args, kwargs)
        if entry.concrete is None:
            entry.concrete = ConcreteFunction(self, entry, args, kwargs)
        return entry.concrete

    def pretty_printed_concrete_signatures(self, verbose: bool = True) -> str:
        """Every traced signature, as TF prints them: parameters, output type, captures.

        Example:
            >>> import tapejax as tf
            >>> @tf.function
            ... def double(a):
            ...     return a + a
            >>> _ = double(tf.constant(1))
            >>> print(double.pretty_printed_concrete_signatures())
            Input Parameters:
              a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tf.int32, name=None)
            Output Type:
              TensorSpec(shape=(), dtype=tf.int32, name=None)
            Captures:
              None
        """
        out = []
        for entry in list(self._entries.values()):
            if entry.closed is None or entry.spec_args is None:
                continue
            if entry.concrete is None:
                entry.concrete = ConcreteFunction(self, entry, *entry.spec_args)
            out.append(entry.concrete.pretty_printed_signature(verbose))
        return "\n\n".join(out)

    def _tf_key(self, key: Any) -> Any:
        # The key TF traces by: with an input_signature, one trace per signature.
        return "signature" if self.input_signature is not None else key

    def _rebuild(self, leaves: list, treedef: Any, arrays: list) -> tuple:
        it = iter(arrays)
        out = []
        for x in leaves:
            if isinstance(x, Tensor | np.ndarray | jax.Array | TensorSpec):
                string = (x.dtype._np is np.dtype(object) if isinstance(x, TensorSpec)
                          else is_string_value(x._value if isinstance(x, Tensor) else x))
                out.append(Tensor(StrIds(next(it)) if string else next(it)))
            else:
                out.append(x)
        args, kwargs = jax.tree_util.tree_unflatten(treedef, out)
        return args, kwargs

    def _placeholder_names(self, args: tuple, kwargs: dict) -> list:
        """(tensor, TF's placeholder name) for each tensor argument: a traced argument prints as
        ``Tensor("x:0", ...)``, as in TF."""
        names = _graph.leaf_names(self._python_function, args, kwargs, _is_leaf)
        leaves = jax.tree_util.tree_leaves((args, kwargs), is_leaf=_is_leaf)
        return [(t, f"{n}:0") for t, n in zip(leaves, names) if type(t) is Tensor]

    def _trace_once(self, entry: _Entry, leaves: list, treedef: Any, avals: list, allow_create: bool,
                    arrays: list | None = None) -> tuple:
        cap = _Capture(allow_create)
        fn = self._traced_callable()
        side: dict[str, Any] = {}

        def traced(arrays: list) -> tuple:
            cap.trace = _jcore.trace_ctx.trace
            _FUNCTION_TRACES.add(cap.trace)
            saved_bound = _core.state.bound
            _core.state.bound = cap.bound
            _core.state.tracing.append(cap)
            named: list = []
            try:
                args, kwargs = self._rebuild(leaves, treedef, arrays)
                named = self._placeholder_names(args, kwargs)
                name_symbolic(named)
                out = fn(*args, **kwargs)
                out_leaves, out_tree = jax.tree_util.tree_flatten(out, is_leaf=_is_leaf)
                dyn: list = []
                static: list[tuple] = []
                for x in out_leaves:
                    v = x._value if isinstance(x, Tensor) else None
                    if type(v) is StrIds or (v is not None and is_string_value(v)):
                        # A string output leaves the program as ids (a constant one as ids of the program).
                        static.append(("S",))
                        dyn.append(v.ids if type(v) is StrIds else jax.numpy.asarray(intern(v, True)))
                    elif isinstance(x, Tensor | VariableBase):
                        # A variable returns its value after the call (its last assign).
                        static.append(("T",))
                        dyn.append(x._value)
                    elif isinstance(x, jax.Array):
                        static.append(("A",))
                        dyn.append(x)
                    elif isinstance(x, bool | int | float | complex | np.ndarray | np.generic):
                        # TF returns Python numbers as tensors (int32 for an int, float32 for a float).
                        static.append(("T",))
                        dyn.append(convert_to_tensor(x)._value)
                    else:
                        static.append(("P", x))
                finals = [cap.bound[v._uid] for v in cap.inputs]
                created_finals = [cap.bound[v._uid] for v in cap.new_vars]
            except BaseException:
                # The trace fails (the call may then run eagerly): variables it created hold
                # traced initial values. Keep the program computing them, run after the trace.
                side["init"] = _initial_program(cap)
                raise
            finally:
                forget_symbolic(named)
                _core.state.tracing.pop()
                _core.state.bound = saved_bound
            side["out"] = (out_tree, static)
            cap.out_order = _dict_order(out)
            return dyn, finals, created_finals, list(cap.created_init)

        try:
            try:
                closed = jax.make_jaxpr(traced)(avals)
            except BaseException:
                if side.get("init") is not None and arrays is not None:
                    _initialize_created(cap, side["init"], arrays)
                raise
        except _TRACER_ERRORS as e:
            err: Any = _graph_error(e)
            err._tapejax_tb = e.__traceback__  # read by _eager_answers
            raise err from None
        except jax.errors.UnexpectedTracerError as e:
            # A tensor made inside a converted loop or branch body, kept in a Python object (a
            # list appended to in a tf.while_loop) and used outside it: TF's graph error.
            where = _where(user_frame(e.__traceback__))
            raise InaccessibleTensorError(where + ("InaccessibleTensorError: " if where else "")
                                          + _LEAKED.format(name=self._name)) from None
        except Exception as e:
            _in_user_code(e)
            raise
        leaked = [c for c in closed.consts if _leaked(c)]
        if leaked:
            other = [c for c in leaked if getattr(c, "_trace", None) in _FUNCTION_TRACES]
            if other:
                # A tensor of another tf.function's finished trace (kept in a global or an
                # attribute): TF's TypeError, not the loop-body error.
                aval = other[0].aval
                raise TypeError(
                    f"<tf.Tensor shape={TensorShape(aval.shape)} dtype={as_dtype(aval.dtype).name}> (a tensor made while "
                    "another tf.function was traced) is out of scope and cannot be used here. Use return values, "
                    "explicit Python locals or TensorFlow collections to access it.\nPlease see "
                    "https://www.tensorflow.org/guide/function#all_outputs_of_a_tffunction_must_be_return_values for "
                    "more information."
                )
            raise InaccessibleTensorError(_LEAKED.format(name=self._name))
        return closed, cap, side["out"]

    def _trace(self, entry: _Entry, key: Any, leaves: list, treedef: Any, arrays: list) -> None:
        avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
        try:
            concrete = None if any(isinstance(a, jax.ShapeDtypeStruct) for a in arrays) else arrays
            closed, cap, out_spec = self._trace_once(entry, leaves, treedef, avals, not self._traced_once, concrete)
        except _CreatedInBody:
            if any(isinstance(a, jax.ShapeDtypeStruct) for a in arrays):
                raise ValueError("get_concrete_function: the function creates a variable inside a tf.cond or "
                                 "loop body; call it once with tensors first.") from None
            self._traced_once = True
            self._trace_count += 1
            entry.eager_once = True
            return
        self._traced_once = True
        if cap.new_vars:
            # TF's initialisation trace: run only what computes the new variables' initial
            # values (no tf.print, no assigns), then trace again with them as inputs.
            self._trace_count += 1
            self._initialize(closed, cap, arrays)
            closed, cap, out_spec = self._trace_once(entry, leaves, treedef, avals, False)
        self._finish(entry, closed, cap, out_spec)
        self._count_trace(key)

    def _initialize(self, closed: Any, cap: _Capture, arrays: list) -> None:
        jaxpr = closed.jaxpr.replace(debug_info=closed.jaxpr.debug_info._replace(arg_names=None, result_paths=None))
        jaxpr = _pe.convert_constvars_jaxpr(jaxpr)
        # Drop top-level effects (tf.print) so that they do not run for the initial values.
        eqns = [e for e in jaxpr.eqns if not e.effects]
        jaxpr = jaxpr.replace(eqns=eqns, effects=_jcore.join_effects(*(e.effects for e in eqns)))
        n_out = len(jaxpr.outvars)
        n_init = len(cap.new_vars)
        used = [False] * (n_out - n_init) + [True] * n_init
        pruned, used_in = _pe.dce_jaxpr(jaxpr, used, instantiate=True)
        ins = list(closed.consts) + list(arrays) + [v._v for v in cap.inputs]
        ins = [x for x, u in zip(ins, used_in) if u]
        vals = jax.jit(lambda xs: _jcore.eval_jaxpr(pruned, (), *xs))(ins)
        for var, val in zip(cap.new_vars, vals):
            var._v = val

    def _finish(self, entry: _Entry, closed: Any, cap: _Capture, out_spec: Any) -> None:
        n_dyn = len(out_spec[1]) - sum(1 for s in out_spec[1] if s[0] == "P")
        n_in = len(cap.inputs)
        outvars = closed.jaxpr.outvars
        invars = closed.jaxpr.invars
        in_vars_of_vars = invars[len(invars) - n_in:]
        finals = outvars[n_dyn:n_dyn + n_in]
        assigned = tuple(i for i, (a, b) in enumerate(zip(in_vars_of_vars, finals)) if a is not b)
        keep = list(range(n_dyn)) + [n_dyn + i for i in assigned]
        fun = jax.extend.core.jaxpr_as_fun(closed)

        def run(arrays: list, var_vals: list) -> tuple:
            outs = fun(*arrays, *var_vals)
            return [outs[k] for k in keep[:n_dyn]], [outs[k] for k in keep[n_dyn:]]

        entry.variables = list(cap.inputs)
        entry.assigned = assigned
        entry.out_spec = out_spec
        entry.out_order = getattr(cap, "out_order", None)
        entry.has_effects = bool(closed.jaxpr.effects)
        entry.check_token = cap.check_token
        # For the fast call path: every output a tensor, no dict order to restore; the lock a
        # call holds when it advances the random-key state (see _state_lock).
        entry.plain_out = entry.out_order is None and all(s[0] == "T" for s in out_spec[1])
        entry.rng_lock = _RNG_LOCK if any(v is _random_ops._traced_key for v in cap.inputs) else None
        entry.jitted = jax.jit(run)
        entry.closed = closed

        def flat(*xs: Any) -> list:
            outs = fun(*xs)
            return [outs[k] for k in keep]

        entry.flat = jax.jit(flat)
        pure_fun = jax.extend.core.jaxpr_as_fun(_without_prints(closed))

        def flat_pure(*xs: Any) -> list:
            outs = pure_fun(*xs)
            return [outs[k] for k in keep]

        entry.flat_pure = flat_pure
        for listener in TRACE_LISTENERS:
            listener(self, entry)

    def _count_trace(self, key: Any) -> None:
        tf_key = self._tf_key(key)
        if self.reduce_retracing and self.input_signature is None and self._tf_keys and key not in self._tf_keys:
            # TF's reduce_retracing: after the first trace, a new shape is traced with every
            # dimension unknown, which later shapes of the same rank reuse.
            treedef, parts = key
            tf_key = (treedef, tuple(("T", (None,) * len(p[1]), p[2]) if p[0] == "T" else p for p in parts))
        if tf_key not in self._tf_keys:
            self._tf_keys.add(tf_key)
            self._trace_count += 1

    def _run_fast(self, entry: _Entry, arrays: list) -> Any:
        # _run for a call with no variable arguments, outside every trace (``state.bound`` is
        # None, so a variable's stored value is what a read sees and what an assign sets).
        variables = entry.variables
        if entry.rng_lock is not None:
            with entry.rng_lock:
                dyn, new = entry.jitted(arrays, [v._v for v in variables])
                for i, val in zip(entry.assigned, new):
                    variables[i]._v = val
        else:
            dyn, new = entry.jitted(arrays, [v._v for v in variables])
            for i, val in zip(entry.assigned, new):
                variables[i]._v = val
        if entry.has_effects:
            _after_effects(entry)
        if entry.plain_out:
            return jax.tree_util.tree_unflatten(entry.out_spec[0], [Tensor(a) for a in dyn])
        out_tree, static = entry.out_spec
        it = iter(dyn)
        outs = [Tensor(next(it)) if s[0] == "T" else next(it) if s[0] == "A" else
                Tensor(lookup(np.asarray(next(it)))) if s[0] == "S" else s[1] for s in static]
        return _reorder(jax.tree_util.tree_unflatten(out_tree, outs), entry.out_order)

    def _run(self, entry: _Entry, arrays: list, var_args: Any) -> Any:
        variables = _vars_for(entry, var_args) if var_args else entry.variables
        with _state_lock(variables):
            dyn, new = entry.jitted(arrays, [v._v for v in variables])
            for i, val in zip(entry.assigned, new):
                variables[i]._value = val
        if entry.has_effects:
            _after_effects(entry)
        out_tree, static = entry.out_spec
        it = iter(dyn)
        outs = [Tensor(next(it)) if s[0] == "T" else next(it) if s[0] == "A" else
                Tensor(lookup(np.asarray(next(it)))) if s[0] == "S" else s[1] for s in static]
        return _reorder(jax.tree_util.tree_unflatten(out_tree, outs), getattr(entry, "out_order", None))


def _after_effects(entry: _Entry) -> None:
    # tf.print is synchronous in TF: its lines are out before the call returns. A tf.debugging
    # check that failed in the program raises now, as TF's call raises when the graph runs it
    # (TF's assigns around the check have run: the variables keep the program's new values).
    jax.effects_barrier()
    failed = _debugging.take_failures(entry.check_token)
    if failed:
        raise errors.InvalidArgumentError(f"{failed[0]}\n\t [[in a tf.function]]")


# A compiled call reads its variables, runs, and writes the new values back. For the random-key
# holder that read-run-write must not interleave between threads: two first calls on two threads
# would read the same key and draw the same numbers (TF's stateful random kernels lock their state).
_RNG_LOCK = threading.RLock()


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_LOCK = _NoLock()


def _state_lock(variables: list) -> Any:
    key = _random_ops._traced_key
    return _RNG_LOCK if any(v is key for v in variables) else _NO_LOCK


class init_scope:
    """Run the enclosed code outside every function being traced, with gradient tapes paused (``tf.init_scope``).

    Inside a ``tapejax.function`` the block runs eagerly, once, while the function is traced:
    variables it creates or assigns get real values (TF's one-time initialisation idiom), and
    nothing of it becomes part of the compiled program. Tapes and forward accumulators do not
    record inside it.

    Example:
        >>> import tapejax as tf
        >>> v = tf.Variable(0)
        >>> @tf.function
        ... def f():
        ...     with tf.init_scope():
        ...         v.assign_add(1)   # runs once, at trace time
        ...     return v + 0
        >>> [int(f()) for _ in range(3)], int(v.numpy())
        ([1, 1, 1], 1)
    """

    def __enter__(self) -> None:
        st = _core.state
        self._saved = (st.tracing, st.bound, st.recording, st.accumulators, st.order)
        st.tracing, st.bound, st.recording, st.accumulators, st.order = [], None, [], [], []
        # Lazy mode: the block runs now, op by op (a pending program would run after the trace,
        # holding the trace's values).
        self._lazy_on = _lazy.enabled()
        if self._lazy_on:
            _lazy.set_enabled(False)
        # Under a JAX trace every jnp op is staged into it, concrete inputs or not; this makes
        # ops on concrete values run now instead (a traced value used here still raises).
        self._eval = jax.ensure_compile_time_eval()
        self._eval.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._eval.__exit__(*exc)
        if self._lazy_on:
            _lazy.set_enabled(True)
        st = _core.state
        st.tracing, st.bound, st.recording, st.accumulators, st.order = self._saved


def _initial_program(cap: _Capture) -> Any:
    """Inside a trace that is failing: the jaxpr (and its constants) computing the traced initial
    values of the variables it created so far, or None when they are all concrete already."""
    if not any(isinstance(v, _jcore.Tracer) for v in cap.created_init):
        return None
    trace = cap.trace
    outs = [v if isinstance(v, _jcore.Tracer) else trace.to_jaxpr_tracer(v, _siu.current())
            for v in cap.created_init]
    try:
        dbg = trace.frame.debug_info._replace(result_paths=None)
        return trace.to_jaxpr(outs, dbg, _siu.current())
    except Exception:  # noqa: BLE001  (a JAX internal that moved: the variables then stay unusable)
        return None


def _initialize_created(cap: _Capture, program: tuple, arrays: list) -> None:
    """Give the variables a failed trace created their initial values (so that the eager
    fallback, or the user's next try, finds them initialised, as TF's first call leaves them)."""
    jaxpr, consts = program
    jaxpr = _pe.convert_constvars_jaxpr(jaxpr.replace(debug_info=jaxpr.debug_info._replace(
        arg_names=None, result_paths=None)))
    pruned, used_in = _pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
    ins = list(consts) + list(arrays) + [v._v for v in cap.inputs]
    if len(ins) != len(used_in):
        return
    ins = [x for x, u in zip(ins, used_in) if u]
    vals = _jcore.eval_jaxpr(pruned, (), *ins)
    for var, val in zip(cap.new_vars, vals):
        var._v = val


def _dict_order(x: Any) -> Any:
    """The key order of every dict in a traced function's output (None when it holds no dict).

    JAX's pytrees rebuild a dict with its keys sorted; TF returns them in the order the function
    built them, which this records so that ``_reorder`` can restore it on every call.
    """
    if type(x) is dict:
        return ("d", [(k, _dict_order(v)) for k, v in x.items()])
    if type(x) in (list, tuple) or (isinstance(x, tuple) and hasattr(x, "_fields")):
        subs = [_dict_order(v) for v in x]
        return ("s", subs) if any(s is not None for s in subs) else None
    return None


def _reorder(x: Any, order: Any) -> Any:
    if order is None:
        return x
    kind, subs = order
    if kind == "d":
        return {k: _reorder(x[k], sub) for k, sub in subs}
    items = [_reorder(v, sub) for v, sub in zip(x, subs)]
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*items)
    return type(x)(items)


def _spec_of(x: Any, name: str | None = None) -> Any:
    if isinstance(x, TensorSpec):
        return x if x.name is not None or name is None else TensorSpec(x.shape, x.dtype, name)
    if isinstance(x, Tensor | VariableBase | np.ndarray | jax.Array | jax.ShapeDtypeStruct):
        v = x._value if isinstance(x, Tensor | VariableBase) else x
        return TensorSpec(tuple(v.shape), np.dtype(v.dtype), name)
    return x


def _vars_for(entry: _Entry, var_args: list) -> list:
    """The entry's captured variables with this call's variable arguments in their places."""
    if not var_args or not entry.arg_slots:
        return entry.variables
    out = list(entry.variables)
    for slot, v in zip(entry.arg_slots, var_args):
        if slot is not None:
            out[slot] = v
    return out


def _call_impl(*xs: Any, entry: _Entry) -> list:
    if any(isinstance(x, jax.core.Tracer) for x in xs):
        # A tape's replay (jax.vjp of the recorded call): tf.print ran with the call, not again.
        return entry.flat_pure(*xs)
    return entry.flat(*xs)


def _without_prints(closed: Any) -> Any:
    """The program without its tf.print callbacks (nested in cond/while bodies too)."""
    def strip(j: Any) -> Any:
        eqns = []
        for e in j.eqns:
            if e.primitive.name == "debug_callback":
                continue
            new = {k: _map_jaxprs(v, strip) for k, v in e.params.items()}
            eqns.append(e.replace(params=new) if any(new[k] is not e.params[k] for k in new) else e)
        return j.replace(eqns=eqns)

    return closed.replace(jaxpr=strip(closed.jaxpr))


def _map_jaxprs(v: Any, f: Callable) -> Any:
    if isinstance(v, jax.extend.core.ClosedJaxpr):
        return v.replace(jaxpr=f(v.jaxpr))
    if isinstance(v, jax.extend.core.Jaxpr):
        return f(v)
    if isinstance(v, tuple) and any(isinstance(x, jax.extend.core.ClosedJaxpr | jax.extend.core.Jaxpr) for x in v):
        return tuple(_map_jaxprs(x, f) for x in v)
    return v


# A traced Function called under a recording tape: one op (TF's PartitionedCall).
_CALL = _core.Primitive("function_call", _call_impl, multiple_results=True)


class ConcreteFunction:
    """One traced program of a ``Function`` (TF's ``ConcreteFunction``), from ``get_concrete_function``.

    Calling it runs the program (it accepts tensors of its input signature only).
    ``structured_input_signature`` is ``(args, kwargs)`` with ``TensorSpec`` leaves;
    ``structured_outputs`` is the output structure with ``TensorSpec`` leaves;
    ``inputs``/``outputs`` are the flat lists.

    Example:
        >>> import tapejax as tf
        >>> f = tf.function(lambda x: x + 1)
        >>> cf = f.get_concrete_function(tf.constant([1, 2]))
        >>> cf.inputs
        [TensorSpec(shape=(2,), dtype=tf.int32, name='x')]
    """

    def __init__(self, function: Function, entry: _Entry, args: tuple, kwargs: dict):
        self._function = function
        self._entry = entry
        params = _param_names(function._python_function, len(args))
        self._args = tuple(_spec_of(a, params[i] if i < len(params) else None) for i, a in enumerate(args))
        self._kwargs = {k: _spec_of(v, k) for k, v in kwargs.items()}
        out_tree, static = entry.out_spec
        avals = entry.closed.out_avals[:sum(1 for s in static if s[0] != "P")] if entry.closed is not None else []
        it = iter(avals)
        leaves = []
        for s_ in static:
            if s_[0] == "P":
                leaves.append(s_[1])
            else:
                a = next(it)
                leaves.append(TensorSpec(tuple(a.shape), np.dtype(object) if s_[0] == "S" else np.dtype(a.dtype)))
        self._outputs = jax.tree_util.tree_unflatten(out_tree, leaves)
        self.name = function._name

    @property
    def structured_input_signature(self) -> tuple:
        return self._args, self._kwargs

    @property
    def structured_outputs(self) -> Any:
        return self._outputs

    @property
    def output_dtypes(self) -> Any:
        """The dtype of each output, in ``structured_outputs``' structure (None stays None), as TF."""
        return jax.tree_util.tree_map(lambda s: s.dtype if isinstance(s, TensorSpec) else s, self._outputs,
                                      is_leaf=lambda s: isinstance(s, TensorSpec))

    @property
    def output_shapes(self) -> Any:
        """The ``TensorShape`` of each output, in ``structured_outputs``' structure; a None output has
        ``TensorShape(None)``, as TF."""
        return jax.tree_util.tree_map(
            lambda s: s.shape if isinstance(s, TensorSpec) else TensorShape(None) if s is None else s, self._outputs,
            is_leaf=lambda s: s is None or isinstance(s, TensorSpec))

    @property
    def inputs(self) -> list:
        return [x for x in jax.tree_util.tree_leaves((self._args, self._kwargs)) if isinstance(x, TensorSpec)]

    @property
    def outputs(self) -> list:
        return [x for x in jax.tree_util.tree_leaves(self._outputs) if isinstance(x, TensorSpec)]

    @property
    def function_type(self) -> Any:
        """The signature with TF's type constraints: ``(a: TensorSpec(...)) -> TensorSpec(...)``."""
        return _graph.function_type(self._function._python_function, self._args, self._kwargs, self._outputs,
                                    TensorSpec)

    @property
    def graph(self) -> _graph.Graph:
        """The traced program as TF's ``FuncGraph`` (``get_operations``, ``as_graph_def``); see ``_tf/_graph.py``."""
        g = getattr(self, "_graph", None)
        if g is None:
            names = _graph.leaf_names(self._function._python_function, self._args, self._kwargs,
                                      lambda x: isinstance(x, TensorSpec))
            leaves = jax.tree_util.tree_leaves((self._args, self._kwargs), is_leaf=lambda x: isinstance(x, TensorSpec))
            specs = [(n, x) for n, x in zip(names, leaves) if isinstance(x, TensorSpec)]
            out_strings = [s_[0] == "S" for s_ in self._entry.out_spec[1] if s_[0] != "P"]
            g = self._graph = _graph.Graph(
                self._entry.closed, [n for n, _ in specs], [x.dtype._np is np.dtype(object) for _, x in specs],
                len(out_strings), out_strings, self._entry.variables, self._entry.assigned, self.name)
        return g

    @property
    def inference_fn(self) -> _graph.AtomicFunction:
        """The compiled program, called with the flat tensor inputs (TF's ``AtomicFunction``)."""
        return _graph.AtomicFunction(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) < len(self._args):
            # Keyword arguments for parameters this trace took positionally, and the Python values
            # it was traced with, are bound as TF binds them.
            # (TF's concrete function takes only the tensor arguments, positionally or by name.)
            params = _param_names(self._function._python_function, len(self._args))
            kwargs = dict(kwargs)
            given = iter(args)
            full: list = []
            for i, spec in enumerate(self._args):
                name = params[i] if i < len(params) else None
                if not any(isinstance(x, TensorSpec) for x in jax.tree_util.tree_leaves(spec)):
                    full.append(spec)
                elif name in kwargs:
                    full.append(kwargs.pop(name))
                else:
                    nxt = next(given, given)
                    if nxt is given:
                        break
                    full.append(nxt)
            args = tuple(full) + tuple(given)
        for k, v in self._kwargs.items():
            if k not in kwargs and not any(isinstance(x, TensorSpec) for x in jax.tree_util.tree_leaves(v)):
                kwargs[k] = v
        flat_specs = jax.tree_util.tree_leaves((self._args, self._kwargs))
        flat_args = jax.tree_util.tree_leaves((args, kwargs), is_leaf=_is_leaf)
        if len(flat_args) != len(flat_specs):
            raise TypeError(f"{self.name} takes {len(flat_specs)} arguments (its structured_input_signature is "
                            f"{self.structured_input_signature}); got {len(flat_args)}.")
        for k, (a, spec) in enumerate(zip(flat_args, flat_specs)):
            if isinstance(spec, TensorSpec):
                t = a if isinstance(a, Tensor | VariableBase) else convert_to_tensor(a, dtype=spec.dtype)
                if t.dtype != spec.dtype:
                    raise errors.InvalidArgumentError(
                        f"cannot compute {self.name} as input #{k}(zero-based) was expected to be a "
                        f"{spec.dtype.name} tensor but is a {t.dtype.name} tensor")
        return self._function(*args, **kwargs)

    def pretty_printed_signature(self, verbose: bool = True) -> str:
        """This trace's signature as TF prints it (``Input Parameters``, ``Output Type``, ``Captures``)."""

        def spec(x: Any) -> str:
            return _graph.type_text(x, TensorSpec)  # TF prints the type, without a name

        try:
            params = list(inspect.signature(self._function._python_function).parameters.values())
        except (TypeError, ValueError):
            params = []
        lines = ["Input Parameters:"]
        for i, a in enumerate(self._args):
            p = params[i] if i < len(params) else None
            text = spec(a)
            lines.append(f"  {p.name if p else f'arg_{i}'} ({p.kind.name if p else 'POSITIONAL_ONLY'}): {text}")
        by_name = {p.name: p for p in params}
        for k, v in self._kwargs.items():
            p = by_name.get(k)
            kind = p.kind.name if p is not None and p.kind.name in ("KEYWORD_ONLY", "POSITIONAL_OR_KEYWORD") \
                else "KEYWORD_ONLY"
            lines.append(f"  {k} ({kind}): {spec(v)}")
        lines += ["Output Type:", f"  {spec(self._outputs)}"]
        lines.append("Captures:")
        variables = self._entry.variables
        if not variables:
            lines.append("  None")
        for v in variables:
            lines.append(f"  {v._uid}: TensorSpec(shape=(), dtype=tf.resource, name=None)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ConcreteFunction {self.function_type} at 0x{id(self):X}>"

    def __str__(self) -> str:
        return "ConcreteFunction " + self.pretty_printed_signature()


def _param_names(fn: Any, n: int) -> list:
    import inspect

    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []
    return params[:n]


def function(func: Callable | None = None, input_signature: Any = None, autograph: bool = True,
             jit_compile: Any = None, reduce_retracing: bool = False, experimental_relax_shapes: Any = None,
             name: str | None = None, **unused: Any) -> Any:
    """Compile a TF-style function (tape, gradients, variable updates) with ``jax.jit``.

    Used as ``@tapejax.function`` or ``@tapejax.function(input_signature=[...])``.
    ``autograph=True`` (TF's default) converts ``if``/``while``/``for`` on tensors
    into ``tf.cond``/``tf.while_loop`` (``tapejax._tf._autograph``); ``jit_compile``
    is accepted (XLA always compiles); ``reduce_retracing`` and ``None`` dimensions
    in an ``input_signature`` change the trace count as in TF, but XLA still
    compiles once per concrete shape. ``tf.config.run_functions_eagerly(True)``
    runs the Python as it is, every call.

    Example:
        >>> import tapejax as tf
        >>> @tf.function
        ... def square_grad(x):
        ...     with tf.GradientTape() as t:
        ...         t.watch(x)
        ...         y = x * x
        ...     return t.gradient(y, x)
        >>> print(square_grad(tf.constant(3.0)))
        tf.Tensor(6.0, shape=(), dtype=float32)
    """

    def wrap(f: Callable) -> Function:
        return Function(f, input_signature, jit_compile, reduce_retracing or bool(experimental_relax_shapes), name,
                        autograph)

    return wrap if func is None else wrap(func)
