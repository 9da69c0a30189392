"""The recorder: tensors, variables, tapes and the recorded program.

This module knows nothing of TensorFlow's names or of NumPy's function list.
An op is a ``Primitive`` (a pure function over arrays); ``bind`` runs it on
concrete values and, when a recording tape watches one of its inputs, appends
an ``Eqn`` to that tape. ``_replay`` turns a slice of the record back into a
pure JAX function.

Rule (TF's): an op is recorded on a tape iff at least one input is watched by
that tape. Outputs of recorded ops become watched, so watchedness flows forward.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._kinds import INEXACT

__all__ = ["attach", "Tensor", "Pending", "VariableBase", "Primitive", "Eqn", "Tape", "bind", "bind_ran", "bind_ran2",
           "record", "state"]

# Identity, not value, decides what a tape tracks: every Tensor gets a fresh id.
# A counter (not id()) so that ids are never reused after garbage collection.
_next_id = itertools.count(1).__next__


if TYPE_CHECKING:
    import numpy as _np

    class _TensorLike:
        """What the op library attaches to Tensor and VariableBase at import, spelled out for
        type checkers (mypy, pyright, IDEs); at run time this base is empty."""

        @property
        def shape(self) -> Any: ...
        @property
        def dtype(self) -> Any: ...
        @property
        def ndim(self) -> int: ...
        @property
        def device(self) -> str: ...
        def numpy(self) -> Any: ...
        def get_shape(self) -> Any: ...
        def set_shape(self, shape: Any) -> None: ...
        def ref(self) -> Any: ...
        def experimental_ref(self) -> Any: ...
        def __array__(self, dtype: Any = None, copy: Any = None) -> _np.ndarray: ...
        def __jax_array__(self) -> Any: ...
        def __float__(self) -> float: ...
        def __int__(self) -> int: ...
        def __complex__(self) -> complex: ...
        def __index__(self) -> int: ...
        def __bool__(self) -> bool: ...
        def __len__(self) -> int: ...
        def __iter__(self) -> Any: ...
        def __getitem__(self, key: Any) -> Tensor: ...
        def __add__(self, other: Any) -> Tensor: ...
        def __radd__(self, other: Any) -> Tensor: ...
        def __sub__(self, other: Any) -> Tensor: ...
        def __rsub__(self, other: Any) -> Tensor: ...
        def __mul__(self, other: Any) -> Tensor: ...
        def __rmul__(self, other: Any) -> Tensor: ...
        def __truediv__(self, other: Any) -> Tensor: ...
        def __rtruediv__(self, other: Any) -> Tensor: ...
        def __floordiv__(self, other: Any) -> Tensor: ...
        def __rfloordiv__(self, other: Any) -> Tensor: ...
        def __mod__(self, other: Any) -> Tensor: ...
        def __rmod__(self, other: Any) -> Tensor: ...
        def __pow__(self, other: Any) -> Tensor: ...
        def __rpow__(self, other: Any) -> Tensor: ...
        def __matmul__(self, other: Any) -> Tensor: ...
        def __rmatmul__(self, other: Any) -> Tensor: ...
        def __and__(self, other: Any) -> Tensor: ...
        def __rand__(self, other: Any) -> Tensor: ...
        def __or__(self, other: Any) -> Tensor: ...
        def __ror__(self, other: Any) -> Tensor: ...
        def __xor__(self, other: Any) -> Tensor: ...
        def __rxor__(self, other: Any) -> Tensor: ...
        def __lt__(self, other: Any) -> Tensor: ...
        def __le__(self, other: Any) -> Tensor: ...
        def __gt__(self, other: Any) -> Tensor: ...
        def __ge__(self, other: Any) -> Tensor: ...
        def __eq__(self, other: Any) -> Any: ...
        def __ne__(self, other: Any) -> Any: ...
        def __neg__(self) -> Tensor: ...
        def __pos__(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __invert__(self) -> Tensor: ...
else:
    class _TensorLike:
        __slots__ = ()


def attach(cls: type, **members: Any) -> None:
    """Give a core class members at import. The op library attaches Tensor's operators and
    methods (the core knows no op names); type checkers read their declarations from
    ``_TensorLike`` above, not from these assignments."""
    for name, value in members.items():
        setattr(cls, name, value)


class Tensor(_TensorLike):
    """An immutable value: a ``jax.Array`` plus the identity the tape tracks.

    Operators and methods are attached by the op table (``_ops``), so this
    class stays independent of any op namespace.
    """

    # ``_lz``: None, or (lazy execution, ``_engine/_lazy``) the ``Pending`` cell computing this
    # tensor's value; ``_value`` stays unset until it is read. A lazy tensor is a Tensor, not a
    # subclass: JAX compares pytree node types exactly, and a tree of lazy tensors must match the
    # same tree of concrete ones (optax's state against the tape's gradients).
    __slots__ = ("_value", "_id", "_lz", "__weakref__")

    def __init__(self, value: Any):
        self._value = value
        self._id = _next_id()
        self._lz: Pending | None = None

    @property
    def _aval(self) -> Any:
        # Shape/dtype without forcing a value: a lazy tensor answers from its abstract value,
        # a concrete one from its array.
        lz = self._lz
        return self._value if lz is None else lz.peek()

    if not TYPE_CHECKING:  # (type checkers must not read it as "any attribute exists")
        def __getattr__(self, name: str) -> Any:
            # Reached only when normal lookup fails, e.g. ``_value`` of a lazy tensor whose value
            # is not computed yet: computing it here keeps every reader of ``_value`` correct.
            if name == "_value":
                lz = self._lz
                if lz is None:
                    # Another thread computed it since this lookup failed (or it was never set:
                    # object.__getattribute__ raises then, without coming back here).
                    return object.__getattribute__(self, "_value")
                v = lz.force()
                self._value = v
                self._lz = None
                return v
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __getstate__(self) -> Any:
        # copy, deepcopy and pickle: the value (a lazy tensor's computed now) and the identity.
        return None, {"_value": self._value, "_id": self._id, "_lz": None}


class Pending:
    """Base of a value not computed yet (lazy execution's cells, ``_engine/_lazy``).

    A variable may hold one after an assign in lazy mode; reading the variable's
    value forces it.
    """

    __slots__ = ()

    def force(self) -> Any:
        """The value, computed now if it is not yet."""
        raise NotImplementedError

    def peek(self) -> Any:
        """The value if it is computed, else its abstract value (shape and dtype); runs nothing."""
        raise NotImplementedError


class VariableBase(_TensorLike):
    """The part of a variable the recorder needs: a mutable value and an identity.

    ``_value`` is a property so that a compiled step (``tapejax.function``) can
    see which variables a traced function reads and assigns, and substitute
    traced values for them; with no trace active it costs one flag test.
    ``_v`` is the stored value; in lazy mode it may be ``Pending`` in ``_raw``, and
    reading ``_v`` or ``_value`` computes it.
    """

    __slots__ = ("_raw", "_uid", "_trainable", "__weakref__")

    if TYPE_CHECKING:
        # tf.Variable (tapejax/_tf/_variable.py) defines these on its subclass.
        def assign(self, value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any: ...
        def read_value(self) -> Any: ...

    def __init__(self, value: Any, trainable: bool):
        self._uid = _next_id()
        self._trainable = trainable
        self._raw = value
        if state.tracing:
            state.tracing[-1].created(self)

    @property
    def _v(self) -> Any:
        v = self._raw
        if isinstance(v, Pending):
            v = self._raw = v.force()
        return v

    @_v.setter
    def _v(self, value: Any) -> None:
        self._raw = value

    @property
    def _aval(self) -> Any:
        # Shape and dtype without forcing a pending value (lazy mode).
        if state.tracing or state.bound is not None:
            return self._value
        try:
            return self._raw
        except AttributeError:  # a subclass storing its value elsewhere (keras's variable view)
            return self._value

    @property
    def _value(self) -> Any:
        if state.tracing:
            state.tracing[-1].read(self)
        # A trace on this thread (a tapejax.function step, a custom_gradient replay)
        # binds variables to traced values in ``state.bound``, never in ``_v``:
        # another thread reading the same variable meanwhile keeps its real value.
        b = state.bound
        if b is not None and self._uid in b:
            return b[self._uid]
        return self._v  # a subclass (keras's variable view) keeps its storage elsewhere

    @_value.setter
    def _value(self, value: Any) -> None:
        if state.tracing:
            state.tracing[-1].write(self)
        b = state.bound
        if b is not None and (state.tracing or self._uid in b):
            b[self._uid] = value
            return
        self._v = value


class Primitive:
    """A recordable op: ``impl(*arrays, **static_params)`` must be a pure JAX function.

    ``differentiable=False`` marks ops that pass no gradient to their inputs
    (TF's round, floor, zeros_like, argmax): as in TF they are still recorded
    and their floating outputs are watched, so a tape can differentiate *with
    respect to* them; only the edge into the op is cut. ``recorded=False``
    (stop_gradient) is never recorded at all: its output is a new constant.

    ``eager_vjp(eqn, cotangents) -> input cotangents`` (optional, defined by a
    subclass) lets an op run its own backward eagerly on Tensors (a
    custom_gradient's Python grad_fn); the interpreted backward pass calls it.

    ``vjp_rule(xs, ct, act, params, run) -> list | None`` (optional, set by the op
    library's table of gradient functions, ``_ops/_gradfns``) computes the cotangents
    of the inputs in ``act`` from the one output's cotangent ``ct`` by running other
    primitives through ``run``, as TF's gradient functions do (Mul's ``grad * y``):
    on arrays (``run`` calls kernels) where nothing watches the backward pass, on
    Tensors (``run`` is ``bind``, so the ops are recorded) where something does. It
    returns None where it does not apply (broadcasting, say); the generic pullback runs
    then. ``vjp_rule_on_arrays`` False keeps a rule for the watched case only (an op whose
    generic pullback is one cheap program where the rule would be several kernel calls).
    """

    __slots__ = ("name", "impl", "differentiable", "multiple_results", "recorded", "vjp_rule", "vjp_rule_on_arrays")

    def __init__(
        self,
        name: str,
        impl: Callable[..., Any],
        differentiable: bool = True,
        multiple_results: bool = False,
        recorded: bool = True,
    ):
        self.name = name
        self.impl = impl
        self.differentiable = differentiable
        self.multiple_results = multiple_results
        self.recorded = recorded
        self.vjp_rule: Callable[[tuple, Any, tuple, dict, Callable[..., Any]], list | None] | None = None
        self.vjp_rule_on_arrays = True

    def __repr__(self) -> str:
        return self.name


class Eqn:
    """One recorded op: ``out_ids = prim(*inputs, **params)``.

    ``in_vals`` keeps the concrete inputs so a replay can feed leaves (inputs not
    produced inside the replayed slice) as arguments. ``in_ids[k]`` is None for a
    non-tensor input (a Python scalar or array constant).

    ``aux`` holds per-call data that is not part of the op's structure (a
    custom_gradient's grad_fn closure): never part of a replay's cache key.
    """

    # __weakref__: lazy execution (``_engine/_lazy``) tracks the equations holding pending values weakly.
    __slots__ = ("prim", "params", "in_ids", "in_vals", "out_ids", "aux", "__weakref__")

    def __init__(self, prim: Primitive, params: dict, in_ids: tuple, in_vals: tuple, out_ids: tuple, aux: Any = None):
        self.prim = prim
        self.params = params
        self.in_ids = in_ids
        self.in_vals = in_vals
        self.out_ids = out_ids
        self.aux = aux

    def __repr__(self) -> str:
        ins = ", ".join(f"%{i}" if i is not None else repr(v) for i, v in zip(self.in_ids, self.in_vals))
        outs = ", ".join(f"%{o}" for o in self.out_ids)
        ps = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"{outs} = {self.prim.name}({ins}{ps})"


# How many tapes this process has made: the engine's clock for "a loop's next step"
# (``_engine._kernels``: how long a kernel signature's calls stay on the host).
tapes_made: list[int] = [0]


class Tape:
    """A record: the equations, the watched ids and the variables seen.

    ``var_reads[uid]`` lists the ids of the read-tensors of one variable: the
    gradient with respect to a variable sums over all of its reads.
    """

    __slots__ = ("eqns", "watched", "variables", "var_reads", "watch_accessed_variables", "first_id", "notes", "sig",
                 "sig_n", "__weakref__")

    def __init__(self, watch_accessed_variables: bool = True):
        self.eqns: list[Eqn] = []
        self.watched: set[int] = set()
        self.variables: dict[int, VariableBase] = {}
        self.var_reads: dict[int, list[int]] = {}
        self.watch_accessed_variables = watch_accessed_variables
        # Bookkeeping for tapejax.explain, off the hot path: ids below ``first_id``
        # existed before this tape; ``notes`` gets ("stop_gradient", in_id, out_id)
        # and ("stop_recording", start_id, end_id) windows, appended rarely.
        self.first_id = _next_id()
        self.notes: list[tuple] = []
        # The record's structure, for lazy mode's cache of cut slices (``_engine/_replay.cached_slice``):
        # per equation a node number and its tensor ids relative to ``first_id``, appended by the
        # lazy recorder. ``sig_n`` counts the equations it covers; an equation appended another way
        # leaves it behind (that record then misses the cache), and removing equations sets it to None.
        self.sig: list | None = []
        self.sig_n = 0
        live_tapes.add(self)
        tapes_made[0] += 1

    def watch_tensor(self, t: Tensor) -> None:
        self.watched.add(t._id)

    def watch_variable(self, v: VariableBase) -> None:
        if v._uid not in self.variables:
            self.variables[v._uid] = v
            self.var_reads[v._uid] = []

    def program(self) -> list[Eqn]:
        """The recorded equations, in order (a copy, for inspection)."""
        return list(self.eqns)


# Every core tape still alive, so that explain can say a value was "recorded on
# another tape".
live_tapes: weakref.WeakSet = weakref.WeakSet()


class _State(threading.local):
    # Tape stacks are per thread, as in TF: an op on another thread is not
    # recorded here. ``recording`` holds the tapes that currently record.
    def __init__(self) -> None:
        self.recording: list[Tape] = []
        # Active variable-capturing traces (tapejax.function), innermost last.
        self.tracing: list[Any] = []
        # While a trace runs: variable uid -> the traced value it stands for (per thread).
        self.bound: dict[int, Any] | None = None
        # Active forward-mode accumulators, outermost first. Each has ``tangents``
        # (tensor id -> tangent), ``on_op`` and ``on_read``; tangents are computed
        # as ops run, as TF's ForwardAccumulator does.
        self.accumulators: list[Any] = []
        # Push order of tapes and accumulators together: a derivative computed for
        # one of them is seen only by those pushed before it (TF's nesting rule).
        self.order: list[Any] = []


state = _State()


def push(tape: Tape) -> None:
    state.recording.append(tape)
    state.order.append(tape)


def _remove_last(lst: list, obj: Any) -> None:
    # By identity (tapes compare by identity; a list's remove() would use ==).
    for k in range(len(lst) - 1, -1, -1):
        if lst[k] is obj:
            del lst[k]
            return


def pop(tape: Tape) -> None:
    _remove_last(state.recording, tape)
    _remove_last(state.order, tape)


def push_accumulator(acc: Any) -> None:
    state.accumulators.append(acc)
    state.order.append(acc)


def pop_accumulator(acc: Any) -> None:
    _remove_last(state.accumulators, acc)
    _remove_last(state.order, acc)


class outside:
    """Context: only the tapes and accumulators pushed before ``owner`` stay active.

    A derivative computed for ``owner`` (an accumulator's tangent) is recorded by
    those outside it and by nothing inside, as in TF.
    """

    __slots__ = ("owner", "saved")

    def __init__(self, owner: Any):
        self.owner = owner

    def __enter__(self) -> None:
        st = state
        self.saved = (st.recording, st.accumulators, st.order)
        order = st.order
        k = next((j for j in range(len(order) - 1, -1, -1) if order[j] is self.owner), len(order))
        before = order[:k]
        st.order = before
        # From the push order, not from ``recording``: a tape hidden while a
        # custom_gradient's function runs eagerly still records the tangents
        # computed inside it (TF runs that function with every tape active).
        st.recording = [t for t in before if isinstance(t, Tape)]
        st.accumulators = [a for a in before if not isinstance(a, Tape)]

    def __exit__(self, *exc: Any) -> None:
        state.recording, state.accumulators, state.order = self.saved


class suspended:
    """Context: no tape and no accumulator is active (a function traced as a pure JAX function)."""

    __slots__ = ("saved",)

    def __enter__(self) -> None:
        st = state
        self.saved = (st.recording, st.accumulators, st.order)
        st.recording, st.accumulators, st.order = [], [], []

    def __exit__(self, *exc: Any) -> None:
        state.recording, state.accumulators, state.order = self.saved


def is_recording(tape: Tape) -> bool:
    return any(t is tape for t in state.recording)


def read_variable(var: VariableBase, t: Tensor | None = None) -> Tensor:
    """A read of ``var``: a fresh tensor, watched by every recording tape that watches ``var``.

    ``t`` is that tensor when the caller made it (lazy mode: a handle on a pending value)."""
    if t is None:
        t = Tensor(var._value)
    for tape in state.recording:
        reads = tape.var_reads.get(var._uid)
        if reads is None:
            if not (tape.watch_accessed_variables and var._trainable):
                continue
            tape.watch_variable(var)
            reads = tape.var_reads[var._uid]
        tape.watched.add(t._id)
        reads.append(t._id)
    for acc in state.accumulators:
        acc.on_read(var, t)
    return t


def touch_variable(var: VariableBase) -> None:
    """An access that is not a differentiable read (assign): TF still auto-watches the variable."""
    for tape in state.recording:
        if tape.watch_accessed_variables and var._trainable:
            tape.watch_variable(var)


def record(prim: Primitive, params: dict, in_ids: tuple, in_vals: tuple, outs: list[Tensor], aux: Any = None,
           watched_ids: tuple | None = None) -> None:
    """Append one equation to every recording tape that watches one of ``in_ids``
    (or of ``watched_ids``: an op whose inputs get no gradient, stored as constants,
    is still recorded where they are watched, so its outputs can be sources)."""
    eqn = None
    diff_out: list[int] = []
    for tape in state.recording:
        w = tape.watched
        for i in (in_ids if watched_ids is None else watched_ids):
            if i in w:
                break
        else:
            continue
        if eqn is None:
            eqn = Eqn(prim, params, in_ids, in_vals, tuple(t._id for t in outs), aux)
            diff_out = [t._id for t in outs if t._value.dtype in INEXACT]
        tape.eqns.append(eqn)
        w.update(diff_out)


# Lazy execution (``_engine/_lazy``) installs ``(prim, args, params) -> outputs or
# NotImplemented`` here; None (eager, the default) costs one global test per op.
lazy_bind: Callable[..., Any] | None = None
# Tensor or variable, in one class test (their common base; typed Any so checkers do not
# narrow to the empty base).
_UNWRAP: Any = _TensorLike


def bind(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Run ``prim`` on ``args`` (Tensors, variables or constants) and record it where watched.

    Positional arguments are data; keyword arguments are static (hashable) parameters.
    """
    if lazy_bind is not None:
        out = lazy_bind(prim, args, params)
        if out is not NotImplemented:
            return out
    st = state
    rec = st.recording
    accs = st.accumulators
    if not rec and not accs:
        # The fast path: no tape anywhere on this thread, so only unwrap and run (one and
        # two operands unrolled: this is the eager per-op cost).
        n = len(args)
        if n == 1:
            a = args[0]
            out = prim.impl(a._value if isinstance(a, _UNWRAP) else a, **params)
        elif n == 2:
            a, b = args
            out = prim.impl(a._value if isinstance(a, _UNWRAP) else a,
                            b._value if isinstance(b, _UNWRAP) else b, **params)
        else:
            out = prim.impl(*[a._value if isinstance(a, _UNWRAP) else a for a in args], **params)
        if prim.multiple_results:
            return tuple(Tensor(o) for o in out)
        return Tensor(out)
    ids: list = []
    vals = []
    for a in args:
        if isinstance(a, Tensor):
            ids.append(a._id)
            vals.append(a._value)
        elif isinstance(a, VariableBase):
            t = read_variable(a)
            ids.append(t._id)
            vals.append(t._value)
        else:
            ids.append(None)
            vals.append(a)
    out = prim.impl(*vals, **params)
    if not prim.recorded:
        return tuple(Tensor(o) for o in out) if prim.multiple_results else Tensor(out)
    # ``record`` inlined, with the single-result case unrolled: this is the
    # per-op cost of recording (benchmarks/run.py record_overhead).
    in_ids = tuple(ids)
    if prim.multiple_results:
        outs: Any = tuple(Tensor(o) for o in out)
        out_ids = tuple(t._id for t in outs)
        diff_out: Any = [t._id for t in outs if t._value.dtype in INEXACT]
    else:
        outs = Tensor(out)
        out_ids = (outs._id,)
        diff_out = out_ids if out.dtype in INEXACT else ()
    eqn = None
    for tape in rec:
        w = tape.watched
        for i in in_ids:
            if i in w:
                break
        else:
            continue
        if eqn is None:
            eqn = Eqn(prim, params, in_ids, tuple(vals), out_ids)
        tape.eqns.append(eqn)
        w.update(diff_out)
    if accs:
        notify_accumulators(prim, params, in_ids, vals, outs)
    return outs


def bind_ran(prim: Primitive, x: Tensor, v: Any, out: Any, params: dict | None = None) -> Tensor:
    """The end of ``bind(prim, x, **params)`` for one concrete Tensor ``x`` (value ``v``), whose
    kernel the caller has run already (``out``): wrap and record, exactly as ``bind`` does.

    Only for a recorded single-result primitive, eager (no lazy execution) and with no forward
    accumulator active (``_ops._machinery.fast_value``): the op layer's fast
    paths call this once they have answered its conversions and checks for the common case."""
    t = Tensor(out)
    rec = state.recording
    if rec:
        i = x._id
        eqn = None
        for tape in rec:
            w = tape.watched
            if i in w:
                if eqn is None:
                    eqn = Eqn(prim, {} if params is None else params, (i,), (v,), (t._id,))
                tape.eqns.append(eqn)
                if out.dtype in INEXACT:
                    w.add(t._id)
    return t


def bind_ran2(prim: Primitive, x: Tensor, y: Tensor, vx: Any, vy: Any, out: Any, params: dict) -> Tensor:
    """``bind_ran`` for two concrete Tensor operands."""
    t = Tensor(out)
    rec = state.recording
    if rec:
        ids = (x._id, y._id)
        eqn = None
        for tape in rec:
            w = tape.watched
            if ids[0] in w or ids[1] in w:
                if eqn is None:
                    eqn = Eqn(prim, params, ids, (vx, vy), (t._id,))
                tape.eqns.append(eqn)
                if out.dtype in INEXACT:
                    w.add(t._id)
    return t


def notify_accumulators(prim: Primitive, params: dict, in_ids: tuple, vals: list, outs: Any) -> None:
    """Let each active accumulator with a tangent for an input compute the outputs' tangents.

    Innermost first: the tangent ops an inner accumulator runs are then seen by
    the outer ones (second-order forward terms), never the other way round.
    """
    if not prim.differentiable:
        return
    outs_t = outs if prim.multiple_results else (outs,)
    for acc in reversed(state.accumulators):
        tans = acc.tangents
        for i in in_ids:
            if i is not None and i in tans:
                acc.on_op(prim, params, in_ids, vals, outs_t)
                break
