"""Lazy execution (``tapejax.config.set_execution("lazy")``): ops build a pending program.

In lazy mode ``bind`` (through the ``_recorder.lazy_bind`` hook) does not run a
primitive: it appends a node to the thread's pending ``Program`` and returns
lazy tensors (plain ``Tensor``s, ``LazyTensor``) whose shape and dtype are known at once (the primitive's
abstract evaluation, cached per op signature: the trace of the kernel its first
run calls, ``_kernels.kernel``'s ``out_info``). Recording on
tapes is unchanged: the ``Eqn`` is appended as in eager mode, with a ``_Cell``
standing for each input value that is not computed yet.

The program runs (*materializes*) when a value is needed: reading a lazy
tensor's ``_value`` (``.numpy()``, ``float()``, ``bool()``, printing, a host
callback, any eager code path lazy mode does not know), the start of a
``GradientTape`` use (``gradient``, ``jacobian``...) that is not deferred, a new tape
after a deferred gradient (``tape_starts``), the end of a ``gradient`` call whose
gradient was deferred when the process has a second core (``gradient_returns``: XLA
runs the step while Python goes on), or when the program reaches ``MAX_PENDING`` nodes.
Materializing also replaces the cells in the recorded equations by the values, so
the replay engine sees only concrete values.

A program is keyed by its structure (primitives, static parameters, wiring,
input avals). The first sightings run it op by op, exactly as eager mode would
(never slower than eager). At the ``HOT``-th sighting its whole program starts
compiling on a background thread while the runs stay op by op; ``replay_lag``
sightings later (the replay tiers' schedule: a count, so values do not depend on
the machine's speed) every sighting is one call of the compiled XLA program.

Everything lazy mode cannot defer safely runs eagerly, after materializing its
inputs (``NotImplemented`` from ``lazy_bind``): an op under a ``tapejax.function``
trace or a forward accumulator, a primitive whose implementation is not a pure
compiled JAX function (``tf.print``, ``py_function``, custom gradients), inputs
or parameters jit cannot take, and an op whose abstract evaluation raises (the
eager run then raises the same exception at the same user line).
"""

from __future__ import annotations

import atexit
import collections
import functools
import itertools
import os
import sys
import threading
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax._src import config as _jconfig
from jax._src import core as _jcore

from .. import config as _config
from .._core import _recorder
from .._core._kinds import INEXACT
from .._core._recorder import Eqn, Pending, Primitive, Tensor, VariableBase, read_variable, state
from . import _interpret as _interp_tier
from . import _kernels, _replay

__all__ = ["LazyTensor", "pending", "set_enabled", "enabled", "flush", "stats", "MAX_PENDING", "HOT"]

MAX_PENDING = 2000  # nodes; a longer program is materialized (bounded memory and compile time)
HOT = 2  # sightings of a structure after which it is compiled whole
_CACHE_SIZE = 256

_UNSET = object()
_SCALARS = (float, int, bool, complex)
_NoneType = type(None)
# A concrete jax.Array's class (never a tracer). Not ``type(jnp.zeros(()))``: creating an array at
# import would start the XLA backend, and jax.distributed.initialize() (MultiWorkerMirroredStrategy)
# must run before that.
_ArrayImpl: Any = _kernels.ArrayImpl
_VB_VALUE = VariableBase._value


class _Cell(Pending):
    """One pending value: its abstract value now, its array after materialization."""

    __slots__ = ("aval", "key", "value", "prog", "slot", "aid")

    def __init__(self, aval: Any, key: tuple, prog: Program, slot: int, aid: int = -1):
        # (``_emit`` sets these slots itself, without this frame: a new slot goes there too)
        self.aval = aval
        self.key = key  # (shape, dtype, weak_type): hashes much faster than a ShapeDtypeStruct
        self.value = _UNSET
        self.prog = prog
        self.slot = slot
        # ``key`` interned as a small int (``_aval_id``): the fast path's node keys hash ints,
        # not a shape tuple and a NumPy dtype per input.
        self.aid = aid

    def force(self) -> Any:
        v = self.value
        return self.prog.value_of(self) if v is _UNSET else v

    def peek(self) -> Any:
        v = self.value
        return self.aval if v is _UNSET else v

    # Metadata, so that code reading a recorded value's shape/dtype works on a pending one.
    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)


def LazyTensor(cell: _Cell) -> Tensor:  # noqa: N802  (it builds a Tensor; the name says which kind)
    """A tensor whose value ``cell`` computes when first read.

    It is a plain ``Tensor`` (so JAX's pytree node types, ``type(t) is Tensor`` tests and
    printed type names are those of eager mode) whose ``_value`` slot is unset: ``_aval``
    answers from the cell without running anything, and reading ``_value`` (``Tensor.__getattr__``)
    materializes the program, so every eager code path stays correct.
    """
    t = _new_tensor(Tensor)
    t._lz = cell
    t._id = _next_id()
    return t


_new_tensor = Tensor.__new__
_new_cellobj = _Cell.__new__
_new_eqn = Eqn.__new__
_next_id = _recorder._next_id


def pending(t: Any) -> bool:
    """Is ``t`` a lazy tensor whose value is not computed yet (runs nothing)?"""
    c: Any = t._lz if isinstance(t, Tensor) else None  # (a _Cell: lazy mode makes every cell)
    return c is not None and c.value is _UNSET


class Program:
    """The pending nodes of one thread, with the structure key built as they arrive."""

    __slots__ = ("nodes", "key", "inputs", "cells", "eqns", "lock", "done", "scalars", "error", "x64", "grads", "arrs")

    def __init__(self, x64: bool = False) -> None:
        # The ``jax_enable_x64`` state its ops were called under (a ``jax.enable_x64`` block): an
        # op's result dtypes depend on it (a Python float is float64 under it), so a program holds
        # ops of one state only and runs under it, wherever it is forced.
        self.x64 = x64
        self.grads = 0  # deferred gradients in it (see ``deferred_transform``)
        # Equal Python constants (``y * 1.5`` in a loop) share one input: each input is a
        # jit argument converted on every call. (type, repr) keeps 1, 1.0, True and -0.0 apart.
        self.scalars: dict = {}
        # The same array passed again (a variable's value read by the forward and again as a
        # gradient's leaf) is one input: id -> slot (``inputs`` holds the array, so the id stays its own).
        self.arrs: dict = {}
        self.nodes: list = []  # (prim, params, in_slots): slot >= 0 an input, < 0 cell ~slot
        self.key: list = []
        self.inputs: list = []
        self.cells: list[_Cell] = []
        # Recorded equations holding cells in ``in_vals``. Strong references, not weak ones (a
        # weakref per recorded op was an allocation and a dereference per op): ``_execute``
        # keeps only those something else still refers to, as a weak reference would.
        self.eqns: list[Any] = []
        self.lock = threading.Lock()
        self.done = False
        self.error: BaseException | None = None

    def run(self) -> None:
        with self.lock:
            if self.done:
                return
            self.done = True
            if getattr(_tls, "prog", None) is self:
                _tls.prog = None
            try:
                if _X64.value is not self.x64:
                    with jax.enable_x64(self.x64):
                        self._run_now()
                else:
                    self._run_now()
            except BaseException as e:
                self.error = e
                raise

    def _run_now(self) -> None:
        if type(_jcore.trace_ctx.trace) is _jcore.EvalTrace:
            _execute(self)
        else:
            # Forced while JAX traces (a tapejax.function step reads a variable assigned
            # lazily before the trace): the program holds only concrete values and its
            # results outlive the trace, so it runs now, outside it (else its cells
            # would keep the trace's tracers: UnexpectedTracerError at the next read).
            with jax.ensure_compile_time_eval():
                _execute(self)

    def value_of(self, c: _Cell) -> Any:
        """``c``'s value, running the program if needed; the program's error if it failed."""
        if c.value is _UNSET:
            self.run()
            if c.value is _UNSET:
                err = self.error
                raise RuntimeError(
                    "This lazy tensor's program failed when it ran (tapejax lazy execution); the error "
                    "was raised where it ran. Run with tapejax.config.set_execution('eager') to see it at the op."
                ) from err
        return c.value


class _TLS(threading.local):
    prog: Program | None = None


_tls = _TLS()
_X64 = _jconfig.enable_x64  # ``.value``: the flag in effect here (global setting or a jax.enable_x64 block)
_enabled = False
# Lazy handles can outlive the mode (a tape recorded lazily, read after set_execution("eager")):
# until the mode was ever on, there is nothing to resolve and no record needs scanning.
_ever_enabled = False

# (prim, frozen params, input avals) -> output avals (or an exception class marker)
_shape_cache: dict = {}
# (op signature, wiring) -> (out avals, out keys, inexact flags, a small int standing for
# the node in program keys), or False for an op that runs eagerly
_node_ids: dict = {}
_next_node = itertools.count().__next__
# structure key -> sightings (int) or compiled program
_programs: collections.OrderedDict = collections.OrderedDict()
_stats = {"deferred": 0, "fallback": 0, "runs_interpreted": 0, "runs_compiled": 0, "background_compiles": 0}


def stats() -> dict:
    """Counters: ops deferred, ops that fell back to eager, programs run op by op / compiled."""
    return dict(_stats)


def enabled() -> bool:
    return _enabled


def set_enabled(on: bool) -> None:
    """Install or remove the lazy ``bind`` hook (``tapejax.config.set_execution``)."""
    global _enabled, _ever_enabled
    flush()
    _enabled = bool(on)
    _ever_enabled = _ever_enabled or _enabled
    _recorder.lazy_bind = _lazy_bind if _enabled else None


def flush() -> None:
    """Materialize this thread's pending program (a no-op when there is none)."""
    p = _tls.prog
    if p is not None:
        p.run()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        return os.cpu_count() or 1


# Does a program started when its deferred gradient's call returns run beside Python? Only with a
# second core: XLA computes the step while Python goes on with the step's updates (mlp_step on 2
# cores: 2.2-2.4 -> 1.8-1.9 ms). On one core the two contend for it, and the step is slower than
# running the program at its first read (mlp_step pinned to one core: +0.15 ms).
RUN_AT_GRADIENT = _cores() > 1


def gradient_returns() -> None:
    """The end of a ``gradient`` call whose gradient joined the pending program: with another
    core to run it on (``RUN_AT_GRADIENT``), the program (the step's forward and its gradient)
    starts now; else it runs at its first read, or when the next tape starts (``tape_starts``)."""
    if RUN_AT_GRADIENT:
        flush()


def tape_starts() -> None:
    """A tape starts recording: a pending program holding a deferred gradient ends here. In a loop
    that reads nothing, the next gradient cut the program just before its own node: one program ran
    a step's gradient, its updates and the next forward, and the next one's vjp computed that
    forward again. Cut here, a step's forward and its gradient are one program."""
    p = _tls.prog
    if p is not None and not p.done and p.grads:
        p.run()


def _is_pure(prim: Primitive) -> bool:
    # Only a primitive whose impl is a compiled pure JAX function (``_ops.prim`` with
    # jit=True wraps it and sets ``__wrapped__``; a jitted jnp function has ``lower``)
    # can be deferred: anything else may have Python side effects that must happen now.
    r = _pure.get(prim)
    if r is None:
        impl = prim.impl
        r = hasattr(impl, "__wrapped__") or hasattr(impl, "lower") or type(impl).__name__ == "ufunc" \
            or prim.name == "replay"
        _pure[prim] = r
    return r


_pure: dict = {}


def _const_aval(v: Any) -> Any:
    t = type(v)
    if t in _SCALARS:
        return t
    if isinstance(v, jax.Array):
        if isinstance(v, jax.core.Tracer):
            return None
        return (v.shape, v.dtype, v.weak_type)
    if isinstance(v, np.ndarray | np.generic):
        if v.dtype == object or v.dtype.kind in "USO":
            return None
        return (v.shape, v.dtype, "np")
    return None


def _spec(a: Any, v: Any) -> Any:
    if a in _SCALARS or (isinstance(a, tuple) and len(a) == 3 and a[2] == "np"):
        t = jax.typeof(v)
        return jax.ShapeDtypeStruct(t.shape, t.dtype, weak_type=t.weak_type)
    return jax.ShapeDtypeStruct(a[0], a[1], weak_type=a[2])


def _aval_id(key: tuple) -> int:
    i = _aval_ids.get(key)
    if i is None:
        i = _aval_ids[key] = len(_aval_ids)
    return i


_aval_ids: dict = {}
# A program's wiring tuples, shared: a loop's programs repeat them step after step, and one object
# less per pending op keeps a 200-op step's objects under the collector's generation-0 threshold
# (700), so no collection runs in the step. Bounded: emptied past ``_SLOT_TUPLES_MAX``.
_slot_tuples: dict = {}
_SLOT_TUPLES_MAX = 100_000
# Fast path's node table: (prim, frozen params, x64, wiring...) -> node (see ``_new_node``)
_fast_nodes: dict = {}


def _array_wire(prog: Program, w: Any, n_in: int) -> tuple:
    # A concrete array operand of the fast branches, as ``_lazy_bind``'s key sees it: its key part
    # (a new-input mark, or its distance back among the inputs, then its interned aval), its slot,
    # and the new-input list to commit with the node (None: already an input).
    av = w.aval
    aid = _aval_id((av.shape, av.dtype, av.weak_type))
    j = prog.arrs.get(id(w))
    if j is None:
        return (-1, aid), n_in, [w]
    return (-2, n_in - j, aid), j, None


def _read_variables(ids: list, vals: list) -> None:
    # The variable operands' reads (a variable in ``ids``, its value, pending or concrete, in
    # ``vals``), once their op is sure to be deferred: a handle on the value, registered on the
    # recording tapes, its id in the variable's place. Registered earlier, an op that then runs
    # eagerly would read the variable twice.
    for k, i in enumerate(ids):
        if i is not None and type(i) is not int:
            v = vals[k]
            lt = LazyTensor(v) if type(v) is _Cell else Tensor(v)
            read_variable(i, lt)
            ids[k] = lt._id


def _lazy_bind(prim: Primitive, args: tuple, params: dict) -> Any:
    """The per-op hook: defer ``prim`` on ``args``, or NotImplemented (run it eagerly).

    The fast path covers the ops of a running program whose inputs are values pending in this
    thread's program, Python floats and ints, concrete arrays (tensors, computed cells) and
    variables (pending, computed or concrete). Its node key is one flat tuple of small ints and
    scalar keys (a pending input: its distance back and interned aval; a concrete array: a
    new-input mark or its distance back among the inputs, and its interned aval; a scalar: its
    type and value), looked up in one dict, and nothing is registered (a variable's read on the
    tapes, new inputs) before the op is sure to be deferred. Everything else (a new program, a
    node not seen yet, other inputs) takes ``_lazy_bind_general``, which builds the same nodes
    and registers the fast key: both paths give a program the same key.
    """
    sd = state.__dict__  # (one thread-local lookup, not one per attribute)
    if sd["tracing"] or sd["bound"] is not None or sd["accumulators"]:
        _stats["fallback"] += 1
        return NotImplemented
    prog = _tls.prog
    if prog is None or prog.done:
        # The first op after a materialization (every training step's first op): a new program
        # here, not on the general path (which keys the op's inputs twice over).
        if not _pure.get(prim, False):
            return _lazy_bind_general(prim, args, params)
        prog = _tls.prog = Program(_X64.value)
    elif prog.x64 is not _X64.value or not _pure.get(prim, False):
        return _lazy_bind_general(prim, args, params)
    cells = prog.cells
    nc = len(cells)
    # The parameters in the call's keyword order, unsorted: one call site passes them in one order,
    # and a key per order only means one more entry for the same node (``_lazy_bind_general``
    # registers this key for the node it builds with the sorted parameters).
    key = [prim, tuple(params.items()) if params else (), prog.x64]
    slots = []
    scalars = prog.scalars
    new_sc: Any = None
    new_arr: Any = None  # new inputs (arrays and scalars), in slot order
    # Recorded equations need each input's id and value (a cell while pending): collected
    # only while a tape records.
    rec = sd["recording"]
    ids: Any = [] if rec else None
    vals: Any = [] if rec else None
    a: Any
    v: Any = None
    for a in args:
        ta = type(a)
        if ta is _Cell and a.value is not _UNSET:  # a variable's value a program that ran assigned
            a = a.value
            ta = type(a)
        if ta is Tensor or ta is _ArrayImpl or (
                ta is not float and ta is not int and ta is not _Cell and issubclass(ta, VariableBase)):
            if ta is Tensor:
                c = a._lz
                if c is None:
                    v = a._value
                elif c.value is not _UNSET:  # computed by a program that ran: a concrete value now
                    v, c = c.value, None
                i = a._id
            elif ta is _ArrayImpl:  # a variable's value passed on (``update``)
                c, v, i = None, a, None
            else:
                if type(a)._value is not _VB_VALUE:  # a subclass keeping its value elsewhere
                    return _lazy_bind_general(prim, args, params)
                raw = a._raw
                if type(raw) is _Cell and raw.value is not _UNSET:
                    raw = raw.value  # assigned by a program that ran
                if type(raw) is _Cell:
                    c = raw
                    if c.prog is not prog or c.value is not _UNSET:
                        return _lazy_bind_general(prim, args, params)
                    # A variable assigned lazily: its read is a handle on the pending value (registered
                    # on the tapes below, once the op is sure to be deferred).
                    s = c.slot
                    key.append(nc - s)
                    key.append(c.aid)
                    slots.append(~s)
                    if rec:
                        ids.append(a)
                        vals.append(c)
                    continue
                c, v, i = None, raw, a  # a concrete variable: read below, once deferred
            if c is None:
                # A concrete array: a new input of the program (or one already there), keyed by its aval.
                if type(v) is not _ArrayImpl:
                    return _lazy_bind_general(prim, args, params)
                if new_arr is None:
                    new_arr = []
                j = prog.arrs.get(id(v))
                if j is None:
                    j = len(prog.inputs)
                    for q, u in enumerate(new_arr):
                        if u is v:
                            j += q
                            break
                    else:
                        j = -1
                if j >= 0:
                    # An input already there: keyed by its distance back among the inputs.
                    key.append(-2)
                    key.append(len(prog.inputs) - j)
                    slots.append(j)
                else:
                    key.append(-1)
                    slots.append(len(prog.inputs) + len(new_arr))
                    new_arr.append(v)
                av = v.aval  # (``shape``, ``dtype`` and ``weak_type`` are Python properties over it)
                key.append(_aval_id((av.shape, av.dtype, av.weak_type)))
                if rec:
                    ids.append(i)
                    vals.append(v)
                continue
            if c.prog is not prog or c.value is not _UNSET:
                return _lazy_bind_general(prim, args, params)
            s = c.slot
            key.append(nc - s)
            key.append(c.aid)
            slots.append(~s)
            if rec:
                ids.append(a._id)
                vals.append(c)
        elif ta is float or ta is int:
            # (type, value) keeps 1 and 1.0 apart; repr for 0 (-0.0 vs 0.0) and NaN (unequal to itself).
            sk = (ta, a) if a and a == a else (ta, repr(a))
            k = scalars.get(sk)
            if k is None:
                if new_sc is None:
                    new_sc = {}
                k = new_sc.get(sk)
                if k is None:
                    if new_arr is None:
                        new_arr = []
                    k = new_sc[sk] = len(prog.inputs) + len(new_arr)
                    new_arr.append(a)
            key.append(sk)
            slots.append(k)
            if rec:
                ids.append(None)
                vals.append(a)
        elif ta is _Cell:
            # A variable's pending value passed on (``update``): no tensor, no id.
            if a.prog is not prog or a.value is not _UNSET:
                return _lazy_bind_general(prim, args, params)
            s = a.slot
            key.append(nc - s)
            key.append(a.aid)
            slots.append(~s)
            if rec:
                ids.append(None)
                vals.append(a)
        else:
            return _lazy_bind_general(prim, args, params)
    try:
        node = _fast_nodes.get(tuple(key))
    except TypeError:  # an unhashable static parameter: run it eagerly
        _stats["fallback"] += 1
        return NotImplemented
    if node is None:
        return _lazy_bind_general(prim, args, params, tuple(key), prog)
    if node is False:
        _stats["fallback"] += 1
        return NotImplemented
    outs_av, out_keys, inexact, nid, out_aids = node
    if rec:
        _read_variables(ids, vals)
    # acquire/release, not ``with``: the context manager's two method calls cost more than
    # the appends it guards (another thread may be running this program: it read a value).
    lock = prog.lock
    lock.acquire()
    try:
        if prog.done:
            lock.release()
            lock = None
            return _lazy_bind(prim, args, params)
        if new_arr is not None:
            # Slots were given in order of first appearance, arrays and new scalars alike.
            n0 = len(prog.inputs)
            prog.inputs.extend(new_arr)
            arrs = prog.arrs
            for k, v in enumerate(new_arr):
                if type(v) is _ArrayImpl:
                    arrs[id(v)] = n0 + k
            if new_sc is not None:
                scalars.update(new_sc)
        sl = tuple(slots)
        sl = _slot_tuples.setdefault(sl, sl)
        prog.nodes.append((prim, params, sl, len(outs_av)))
        prog.key.append(nid)
        if len(outs_av) == 1:
            c = _Cell(outs_av[0], out_keys[0], prog, nc, out_aids[0])
            cells.append(c)
            t = _new_tensor(Tensor)
            t._lz = c
            t._id = _next_id()
            outs: Any = (t,)
        else:
            # (a deferred gradient's outputs, one per source: cells and tensors built without
            # their ``__init__`` frames, as ``_emit`` builds one)
            outs_l = []
            for oa, ok, ai in zip(outs_av, out_keys, out_aids):
                c = _new_cellobj(_Cell)
                c.aval = oa
                c.key = ok
                c.value = _UNSET
                c.prog = prog
                c.slot = len(cells)
                c.aid = ai
                cells.append(c)
                t = _new_tensor(Tensor)
                t._lz = c
                t._id = _next_id()
                outs_l.append(t)
            outs = tuple(outs_l)
    finally:
        if lock is not None:
            lock.release()
    if rec and prim.recorded:
        in_ids = tuple(ids)
        if len(outs) == 1:
            oid = outs[0]._id
            _record(prog, rec, prim, params, in_ids, tuple(vals), (oid,), (oid,) if inexact[0] else (), nid, True)
        else:
            _record(prog, rec, prim, params, in_ids, tuple(vals), tuple([t._id for t in outs]),
                    [t._id for t, f in zip(outs, inexact) if f], nid, True)
    if len(prog.nodes) >= MAX_PENDING:
        prog.run()
    if prim.multiple_results:
        return outs
    return outs[0]


def unary(prim: Primitive, x: Tensor, dts: frozenset, pkey: tuple = (), params: dict | None = None) -> Any:
    """``prim(x)`` (no static parameters) for the op layer's lazy fast path: ``x`` a lazy tensor.

    The common case of a training step, a unary op on a value pending in this thread's program,
    deferred with the node ``_lazy_bind``'s fast path keys the same way (so both give one program
    key) and nothing else: no argument list, no key list, no general checks. Anything else (a
    computed or foreign value, a dtype the op does not accept, a node not seen yet, a tracer or
    accumulator) is NotImplemented, and the op takes its general path. ``pkey``: static parameters
    as ``_lazy_bind`` keys them (``bind``'s keyword order), ``params`` their dict (a reduction's).
    """
    c: Any = x._lz
    prog: Any = _tls.prog  # (None fails the first test: a cell's program is never None)
    if c is None or c.prog is not prog or c.value is not _UNSET or prog.done or prog.x64 is not _X64.value \
            or c.key[1] not in dts:
        return NotImplemented
    sd = state.__dict__  # (one thread-local lookup, not one per attribute)
    if sd["tracing"] or sd["bound"] is not None or sd["accumulators"]:
        return NotImplemented
    s = c.slot
    node = _fast_nodes.get((prim, pkey, prog.x64, len(prog.cells) - s, c.aid))
    if not node or len(node[0]) != 1 or prim.multiple_results:  # (None: not seen yet; False: runs eagerly)
        return NotImplemented
    sl = (~s,)
    return _emit(prog, prim, _slot_tuples.setdefault(sl, sl), node, sd["recording"], (x._id,), (c,), None, params)


def binary(prim: Primitive, x: Any, y: Any, dts: frozenset, fdts: frozenset) -> Any:
    """``prim(x, y)`` (no static parameters) for the op layer's lazy fast path (see ``unary``):
    two lazy tensors pending in this thread's program, of one dtype in ``dts``, or one of them and
    a Python float or int32-range int beside a dtype in ``fdts``."""
    prog = _tls.prog
    if prog is None or prog.done or prog.x64 is not _X64.value:
        return NotImplemented
    tx = type(x)
    ty = type(y)
    if tx is Tensor and ty is Tensor:
        c = x._lz
        d = y._lz
        if c is None or d is None or c.value is not _UNSET or d.value is not _UNSET:
            return mixed(prim, x, y, dts)
        if c.prog is not prog or d.prog is not prog or c.key[1] != d.key[1] or c.key[1] not in dts:
            return NotImplemented
        nc = len(prog.cells)
        s = c.slot
        r = d.slot
        key: tuple = (prim, (), prog.x64, nc - s, c.aid, nc - r, d.aid)
        sl: tuple = (~s, ~r)
        ids: tuple = (x._id, y._id)
        vals: tuple = (c, d)
        sc: Any = None
    else:
        if tx is Tensor:
            c, a, ta = x._lz, y, ty
        elif ty is Tensor:
            c, a, ta = y._lz, x, tx
        else:
            return NotImplemented
        if not (ta is float or (ta is int and -2147483648 <= a < 2147483648)):
            return mixed(prim, x, y, dts)
        if c is None or c.prog is not prog or c.value is not _UNSET or c.key[1] not in fdts:
            return NotImplemented
        # (type, value) keeps 1 and 1.0 apart; repr for 0 (-0.0 vs 0.0) and NaN: ``_lazy_bind``'s key.
        sc = (ta, a) if a and a == a else (ta, repr(a))
        nc = len(prog.cells)
        s = c.slot
        j = prog.scalars.get(sc)
        # (a new scalar's slot, unknown until it is committed under the lock, is 0 here: ``_emit``
        # replaces the scalar's position, which ``ids`` marks with None)
        if tx is Tensor:
            key = (prim, (), prog.x64, nc - s, c.aid, sc)
            sl = (~s, j or 0)
            ids = (x._id, None)
            vals = (c, a)
        else:
            key = (prim, (), prog.x64, sc, nc - s, c.aid)
            sl = (j or 0, ~s)
            ids = (None, y._id)
            vals = (a, c)
        if j is not None:
            sc = None
    sd = state.__dict__
    if sd["tracing"] or sd["bound"] is not None or sd["accumulators"]:
        return NotImplemented
    node = _fast_nodes.get(key)
    if not node or len(node[0]) != 1 or prim.multiple_results:  # (None: not seen yet; False: runs eagerly)
        return NotImplemented
    if sc is None:
        sl = _slot_tuples.setdefault(sl, sl)
    return _emit(prog, prim, sl, node, sd["recording"], ids, vals, sc)


def mixed(prim: Primitive, x: Any, y: Any, dts: frozenset, pkey: tuple = (), params: dict | None = None) -> Any:
    """``prim(x, y)`` for the op layer's lazy fast path when an operand is not pending: a concrete
    tensor, or a plain variable (its value concrete, or pending in this thread's program), beside a
    pending tensor or another such operand: ``h + b`` and ``tf.matmul(h, W)`` of every layer.

    Deferred as ``_lazy_bind``'s fast path defers it, with the same node key (a concrete array: a
    new-input mark or its distance back among the inputs, and its interned aval), so both paths
    give a program one key. The two operands must have one dtype in ``dts``; ``pkey`` is the static
    parameters as ``_lazy_bind`` keys them (the call's keyword order) and ``params`` their dict.
    Anything else is NotImplemented, and the op takes its general path (which checks the operands
    and registers the node: a node found here passed those checks with these avals).
    """
    sd = state.__dict__
    if sd["tracing"] or sd["bound"] is not None or sd["accumulators"] or not _pure.get(prim, False):
        return NotImplemented
    prog = _tls.prog
    if prog is None or prog.done:
        # A step's first op (``tf.matmul(x, W)``): a new program here, as ``_lazy_bind``'s fast path starts one.
        prog = _tls.prog = Program(_X64.value)
    elif prog.x64 is not _X64.value:
        return NotImplemented
    nc = len(prog.cells)
    n_in = len(prog.inputs)
    rec = sd["recording"]
    xa: Any = x  # (typed Any: the checks below must not narrow ``x`` and ``y`` for the loop after them)
    ya: Any = y
    c: Any = xa._lz if type(xa) is Tensor else None
    if c is not None and c.value is _UNSET and c.prog is prog:
        # A layer's ``h @ W``, ``h + b`` and a loss's ``h - y``: a pending tensor, then a plain
        # variable or a tensor holding a concrete array, keyed without the operand loop below
        # (the same key).
        ty = type(ya)
        w: Any = None
        yid: Any = None
        if ty is Tensor:
            if ya._lz is None:
                w = ya._value
                yid = ya._id
        elif isinstance(ya, VariableBase) and ty._value is _VB_VALUE:
            w = ya._raw
            if type(w) is _Cell and w.value is not _UNSET:
                # Assigned by a program that ran (last step's update): its array from now on, as
                # the variable's own read (``VariableBase._v``) keeps it.
                w = ya._raw = w.value
        if type(w) is _ArrayImpl:
            d = w.aval.dtype
            if d != c.key[1] or d not in dts:
                return NotImplemented
            s = c.slot
            kp, j, new1 = _array_wire(prog, w, n_in)
            s1 = (~s, j)
            node = _fast_nodes.get((prim, pkey, prog.x64, nc - s, c.aid) + kp)
            if not node or len(node[0]) != 1 or prim.multiple_results:
                return NotImplemented
            if ty is not Tensor and rec:
                lt = Tensor(w)
                read_variable(ya, lt)
                yid = lt._id
            return _emit(prog, prim, _slot_tuples.setdefault(s1, s1), node, rec, (xa._id, yid), (c, w), None,
                         {} if params is None else params, new1)
    key: list = [prim, pkey, prog.x64]
    sl = []
    ids: list = []
    vals: list = []
    new_arr: Any = None
    dtype = None
    v: Any
    for a in (x, y):
        ta = type(a)
        i: Any
        if ta is Tensor:
            v = a._lz
            if v is None:
                v = a._value
            i = a._id
        elif ta is not float and ta is not int and issubclass(ta, VariableBase) and ta._value is _VB_VALUE:
            v = a._raw
            i = a  # (its read: registered once the op is sure to be deferred)
        else:
            return NotImplemented
        if type(v) is _Cell:
            if v.value is not _UNSET:  # computed by a program that ran: a concrete value now
                v = v.value
            else:
                if v.prog is not prog:
                    return NotImplemented
                s = v.slot
                key.append(nc - s)
                key.append(v.aid)
                sl.append(~s)
                ids.append(i)
                vals.append(v)
                d = v.key[1]
                if dtype is None:
                    dtype = d
                elif d != dtype:
                    return NotImplemented
                continue
        if type(v) is not _ArrayImpl:
            return NotImplemented
        av = v.aval
        d = av.dtype
        if dtype is None:
            dtype = d
        elif d != dtype:
            return NotImplemented
        # A concrete array: a new input of the program, or one already there (``_lazy_bind``'s key).
        j = prog.arrs.get(id(v))
        if j is None and new_arr is not None and new_arr[0] is v:
            j = n_in
        if j is not None:
            key.append(-2)
            key.append(n_in - j)
            sl.append(j)
        else:
            key.append(-1)
            sl.append(n_in if new_arr is None else n_in + 1)
            if new_arr is None:
                new_arr = [v]
            else:
                new_arr.append(v)
        key.append(_aval_id((av.shape, d, av.weak_type)))
        ids.append(i)
        vals.append(v)
    if dtype not in dts:
        return NotImplemented
    node = _fast_nodes.get(tuple(key))
    if not node or len(node[0]) != 1 or prim.multiple_results:  # (None: not seen yet; False: runs eagerly)
        return NotImplemented
    if rec:
        _read_variables(ids, vals)
    t = tuple(sl)
    return _emit(prog, prim, _slot_tuples.setdefault(t, t), node, rec, tuple(ids), tuple(vals), None,
                 {} if params is None else params, new_arr)


def _emit(prog: Program, prim: Primitive, sl: tuple, node: tuple, rec: Any, in_ids: tuple, in_vals: tuple,
          new_sc: Any = None, ps: dict | None = None, new_arr: list | None = None) -> Any:
    # The single-output node ``node`` on ``sl`` joins ``prog`` and is recorded where a tape watches
    # an input: ``_lazy_bind``'s fast path, for the op layer's fast branches (``unary``, ``binary``,
    # ``mixed``). ``new_arr``: concrete arrays new to the program, its next inputs in slot order.
    outs_av, out_keys, inexact, nid, out_aids = node
    lock = prog.lock
    lock.acquire()
    try:
        if prog.done:  # another thread ran it (it read a value): the general path starts a new one
            return NotImplemented
        if new_arr is not None:
            arrs = prog.arrs
            for v in new_arr:
                arrs[id(v)] = len(prog.inputs)
                prog.inputs.append(v)
        if new_sc is not None:
            # A Python scalar new to the program (at the position ``in_ids`` marks None): its input,
            # given under the lock with the node that reads it, as ``_lazy_bind`` commits new inputs.
            j = len(prog.inputs)
            prog.scalars[new_sc] = j
            if in_ids[0] is None:
                prog.inputs.append(in_vals[0])
                sl = (j, sl[1])
            else:
                prog.inputs.append(in_vals[1])
                sl = (sl[0], j)
            sl = _slot_tuples.setdefault(sl, sl)
        cells = prog.cells
        nc = len(cells)
        # One parameter dict for the node and the equation, as ``bind``'s keywords give one: a dict
        # is an object the cyclic collector counts, and a 200-op step stays under its threshold.
        if ps is None:
            ps = {}
        prog.nodes.append((prim, ps, sl, 1))
        prog.key.append(nid)
        c = _new_cellobj(_Cell)  # (``_Cell.__init__``'s stores without its frame)
        c.aval = outs_av[0]
        c.key = out_keys[0]
        c.value = _UNSET
        c.prog = prog
        c.slot = nc
        c.aid = out_aids[0]
        cells.append(c)
        t = _new_tensor(Tensor)
        t._lz = c
        t._id = oid = _next_id()
    finally:
        lock.release()
    if rec and prim.recorded:
        # ``_record``'s loop, for one output, written out here: a call with its ten arguments was
        # about a tenth of a deferred op's cost (scalar_chain's 200 ops a step).
        eqn = None
        for tape in rec:
            w = tape.watched
            for i in in_ids:
                if i in w:
                    break
            else:
                continue
            if eqn is None:
                eqn = _new_eqn(Eqn)
                eqn.prim = prim
                eqn.params = ps
                eqn.in_ids = in_ids
                eqn.in_vals = in_vals
                eqn.aux = None
                eqn.out_ids = (oid,)
                prog.eqns.append(eqn)
            if inexact[0]:
                w.add(oid)
            te = tape.eqns
            sg = tape.sig
            if sg is not None and tape.sig_n == len(te):
                b = tape.first_id
                sg.append(nid)
                sg.append(oid - b)
                for i in in_ids:
                    sg.append(None if i is None else i - b if i >= b else -i)
                tape.sig_n += 1
            te.append(eqn)
    if len(prog.nodes) >= MAX_PENDING:
        prog.run()
    return t


def _record(prog: Program, rec: Any, prim: Primitive, params: dict, in_ids: tuple, in_vals: tuple,
            out_ids: tuple, diff: Any, nid: int, held: bool) -> None:
    """A pending op on the tapes that watch one of its inputs: one equation (``held``: it holds a
    pending input, so ``prog`` keeps it and patches the values in when it runs), ``diff`` the
    differentiable outputs' ids to watch, and the equation's part of each tape's ``sig``.

    ``sig``: its node number (primitive, static parameters, input avals and Python constants: equal
    numbers, equal nodes) and its tensor ids: one made since the tape began relative to the tape's
    first id (>= 0: the wiring, wherever the step's ids start), an older one as minus its id (a
    tensor made before the loop is the same tensor every step). The node fixes how many ids follow,
    so equal lists mean equal records.
    """
    eqn = None
    for tape in rec:
        w = tape.watched
        for i in in_ids:
            if i in w:
                break
        else:
            continue
        if eqn is None:
            # Built without calling Eqn.__init__ (a Python frame per recorded op).
            eqn = _new_eqn(Eqn)
            eqn.prim = prim
            eqn.params = params
            eqn.in_ids = in_ids
            eqn.in_vals = in_vals
            eqn.aux = None
            eqn.out_ids = out_ids
            if held:
                prog.eqns.append(eqn)
        if diff:
            w.update(diff)
        te = tape.eqns
        sg = tape.sig
        if sg is not None and tape.sig_n == len(te):
            b = tape.first_id
            sg.append(nid)
            for o in out_ids:
                sg.append(o - b)
            for i in in_ids:
                sg.append(None if i is None else i - b if i >= b else -i)
            tape.sig_n += 1
        te.append(eqn)


def _new_cell(prog: Program, aval: Any, key: tuple, aid: int) -> _Cell:
    c = _Cell(aval, key, prog, len(prog.cells), aid)
    prog.cells.append(c)
    return c


def _lazy_bind_general(prim: Primitive, args: tuple, params: dict, fast_key: tuple | None = None,
                       fast_prog: Program | None = None) -> Any:
    st = state
    if st.tracing or st.bound is not None or st.accumulators or not _is_pure(prim):
        _stats["fallback"] += 1
        return NotImplemented
    fparams = tuple(sorted(params.items())) if params else ()
    prog = _tls.prog
    x64 = _X64.value
    if prog is None or prog.done or prog.x64 is not x64:  # done: another thread ran it (it read one of its values)
        if prog is not None and not prog.done:
            prog.run()  # its ops ran under the other x64 state: they run now, as eager mode ran them
        prog = _tls.prog = Program(x64)
    slots = []
    avals = []
    ids = []
    vals = []
    new_inputs: list = []
    new_scalars: dict = {}
    has_cell = False
    n_in = len(prog.inputs)
    # The wiring as the node's key sees it, independent of where the node sits in the program
    # (so a loop's repeated ops are the same nodes at any offset, and the node table stops
    # growing): a pending input by its distance back, a Python scalar by its value, a new array
    # input as None. Absolute slots follow from the sequence of keys: equal keys, equal wiring.
    nc = len(prog.cells)
    wires = []
    for a in args:
        ta = type(a)
        c = a._lz if ta is Tensor else a if ta is _Cell else None
        if c is not None:
            if c.value is _UNSET and c.prog is not prog:
                c.prog.value_of(c)  # another thread's program: run it (its error, if it failed)
            if c.value is _UNSET:
                slots.append(~c.slot)
                wires.append(nc - c.slot)
                avals.append(c.key)
                ids.append(a._id if ta is Tensor else None)
                vals.append(c)
                has_cell = True
                continue
            v = c.value
            i = a._id if ta is Tensor else None
        elif isinstance(a, Tensor):
            v = a._value
            i = a._id
        elif isinstance(a, VariableBase):
            raw = getattr(a, "_raw", None)
            if type(raw) is _Cell and raw.value is _UNSET and raw.prog is prog:
                # A variable assigned lazily: its read is a handle on the pending value (registered
                # on the tapes below, once the op is sure to be deferred, as the fast path does: an
                # op that runs eagerly reads it there, and must find no read of it here).
                slots.append(~raw.slot)
                wires.append(nc - raw.slot)
                avals.append(raw.key)
                ids.append(a)
                vals.append(raw)
                has_cell = True
                continue
            v, i = a._value, (a if st.recording else None)  # (its read: below, as above)
        else:
            v, i = a, None
        av = _const_aval(v)
        if av is None:
            _stats["fallback"] += 1
            return NotImplemented
        if av in _SCALARS:
            # (type, value) keeps 1, 1.0 and True apart; repr for a zero (-0.0 is 0.0), a NaN
            # (unequal to itself) and a complex (signed zero parts). The fast path keys alike.
            sk = (av, v) if av is not complex and v and v == v else (av, repr(v))
            k = prog.scalars.get(sk)
            if k is None:
                k = new_scalars.get(sk)
            if k is None:
                # Committed to the program only with its input (below): an op that falls back to
                # eager later in this loop must leave no slot pointing past the program's inputs.
                k = new_scalars[sk] = n_in + len(new_inputs)
                new_inputs.append(v)
            slots.append(k)
            wires.append(sk)
        else:
            j = prog.arrs.get(id(v)) if type(v) is _ArrayImpl else None
            if j is None:
                for k, u in enumerate(new_inputs):
                    if u is v:
                        j = n_in + k
                        break
            if j is not None:
                slots.append(j)  # an input already there (see ``Program.arrs``)
                wires.append(("in", n_in - j))
            else:
                slots.append(n_in + len(new_inputs))
                wires.append(None)
                new_inputs.append(v)
        avals.append(av)
        ids.append(i)
        vals.append(v)
    avals_t = tuple(avals)
    slots_t = tuple(slots)
    # One lookup on the hot path: (signature, wiring) -> (out avals, out keys, inexact flags, node id).
    nk = (prim, fparams, avals_t, tuple(wires), x64)
    try:
        node = _node_ids.get(nk)
    except TypeError:  # an unhashable static parameter: run it eagerly
        _stats["fallback"] += 1
        return NotImplemented
    if node is None:
        node = _new_node(prim, params, fparams, avals, vals, nk)
    if node is False:
        if fast_key is not None and len(_fast_nodes) < 1_000_000:
            _fast_nodes[fast_key] = node  # (an op that runs eagerly, whatever its wiring)
        _stats["fallback"] += 1
        return NotImplemented
    outs_av, out_keys, inexact, nid, out_aids = node
    if st.recording:
        _read_variables(ids, vals)
    with prog.lock:
        # Another thread that reads a value of this program runs it under the same lock:
        # a node is either in the run or in a new program, never lost between the two.
        if prog.done:
            return _lazy_bind(prim, args, params)
        if fast_key is not None and prog is fast_prog and len(_fast_nodes) < 1_000_000:
            # The fast path's key describes the wiring it saw in ``fast_prog``; the node built here
            # has that wiring only if no thread ran the program in between (a run sets ``done``,
            # which is never undone: checked under its lock). Registered otherwise, the key of a
            # pending input would name a node built for a new array input, and a compiled program
            # of one wiring would be reused for the other (wrong values).
            _fast_nodes[fast_key] = node
        for k, v in enumerate(new_inputs):
            if type(v) is _ArrayImpl:
                prog.arrs[id(v)] = n_in + k
        prog.inputs.extend(new_inputs)
        prog.scalars.update(new_scalars)
        prog.nodes.append((prim, params, slots_t, len(outs_av)))
        prog.key.append(nid)
        outs = []
        for oa, ok, ai in zip(outs_av, out_keys, out_aids):
            c = _Cell(oa, ok, prog, len(prog.cells), ai)
            prog.cells.append(c)
            outs.append(LazyTensor(c))
    rec = st.recording
    if rec and prim.recorded:
        _record(prog, rec, prim, params, tuple(ids), tuple(vals), tuple([t._id for t in outs]),
                [t._id for t, f in zip(outs, inexact) if f], nid, has_cell)
    if len(prog.nodes) >= MAX_PENDING:
        prog.run()
    if prim.multiple_results:
        return tuple(outs)
    return outs[0]


def _new_node(prim: Primitive, params: dict, fparams: tuple, avals: list, vals: list, nk: tuple) -> Any:
    skey = (prim, fparams, tuple(avals), nk[-1])  # nk[-1]: the x64 state (a Python scalar's dtype)
    info: Any = _shape_cache.get(skey)
    if info is None:
        try:
            specs = [_spec(a, v if type(v) is not _Cell else None) for a, v in zip(avals, vals)]
            oi = getattr(prim.impl, "out_info", None)  # (a kernel's: see ``_kernels.kernel``)
            if oi is not None:
                outs_av = oi(*specs, **params)
            else:
                outs_av = jax.eval_shape(functools.partial(prim.impl, **params), *specs)
            outs_av = tuple(outs_av) if prim.multiple_results else (outs_av,)
            if all(type(o) is jax.ShapeDtypeStruct for o in outs_av):
                info = (outs_av, tuple((o.shape, o.dtype, o.weak_type) for o in outs_av))
            else:
                info = False
        except Exception:  # noqa: BLE001  (the eager run raises it, at the user's line)
            info = False
        if len(_shape_cache) < 100_000:
            _shape_cache[skey] = info
    if info is False:
        return False
    outs_av, out_keys = info
    # A fresh number per cached node (never reused: equal numbers must mean equal nodes).
    node = (outs_av, out_keys, tuple(o.dtype in INEXACT for o in outs_av), _next_node(),
            tuple(_aval_id(k) for k in out_keys))
    if len(_node_ids) < 1_000_000:
        _node_ids[nk] = node
    return node


def _interpret(nodes: list, inputs: list) -> list:
    env: list = []
    for prim, params, slots, n_out in nodes:
        out = prim.impl(*[inputs[s] if s >= 0 else env[~s] for s in slots], **params)
        if n_out == 1 and not prim.multiple_results:
            env.append(out)
        else:
            env.extend(out)
    return env


def _compile(nodes: list, live: tuple) -> Any:
    nodes = list(nodes)

    def program(inputs: list) -> list:
        env = _interpret(nodes, inputs)
        return [env[k] for k in live]

    return jax.jit(program)


def _hot_without_gradient() -> int:
    # A program holding no deferred gradient starts its compile ``replay_lag`` sightings later than
    # one that does: in a training loop it is the step before the replay tiers hand the gradient to
    # lazy mode (forward only, the gradient run eagerly), and at that hand-over, ``replay_lag``
    # sightings after the gradient's slice turned hot, the step's structure changes (the deferred
    # gradient joins it). Compiled from its second sighting, that program was dropped as soon as it
    # was ready (scalar_chain's first 30 steps: 0.62 -> 0.84 s with it, on 2 cores shared with that
    # compile). A loop whose gradient is never deferred (nested tapes) or that takes none still
    # gets its program compiled, ``replay_lag`` sightings later.
    if not getattr(_config, "replay_background_compile", False):
        return HOT
    return HOT + max(0, int(getattr(_config, "replay_lag", 0)))


class _Ready:
    """A structure's compiled program: compiled ahead of its first call (in the background), or
    jit's, compiled at its first call. ``inputs`` the program does not fit (another device or
    sharding than the one it was compiled for) go to jit, which compiles for them."""

    __slots__ = ("jitted", "compiled")

    def __init__(self, jitted: Any, compiled: Any = None):
        self.jitted = jitted
        self.compiled = compiled if compiled is not None else jitted

    def __call__(self, inputs: list) -> Any:
        c = self.compiled
        if c is self.jitted:
            return c(inputs)
        try:
            return c(inputs)
        except (TypeError, ValueError):
            # (raised before running: the arguments do not match what it was compiled for)
            self.compiled = self.jitted
            return self.jitted(inputs)


class _Warming:
    """A hot structure whose program compiles on a background thread while its runs are interpreted
    (as eager mode runs them, op by op): the replay tiers' schedule (``_engine/_tiers``), so a
    training loop's second to ``HOT + replay_lag``-th steps do not wait for XLA."""

    __slots__ = ("seen", "switch", "done", "ready")

    def __init__(self, seen: int, switch: int):
        self.seen = seen
        self.switch = switch
        self.done = threading.Event()
        self.ready: Any = None


_in_flight: set = set()
_in_flight_lock = threading.Lock()


def _warm(prog: Program, live: tuple) -> Any:
    """The entry of a structure seen ``HOT`` times: compiled now (no background compile), or a
    ``_Warming`` whose compile has started."""
    jitted = _compile(prog.nodes, live)
    lag = max(0, int(getattr(_config, "replay_lag", 0)))
    if not getattr(_config, "replay_background_compile", False) or lag == 0:
        return _Ready(jitted)
    try:
        # Shapes, dtypes and shardings only: the thread must not keep this step's values alive.
        # jit's view of a Python scalar (a weak float32[] or, under x64, float64[]) is taken here,
        # under the program's x64 state.
        specs = []
        for v in prog.inputs:
            t = jax.typeof(v)
            # An uncommitted input is given no sharding: with one, the compiled program's outputs
            # come back committed where jit's (and eager mode's) do not, and every jit they later
            # reach compiles again for that placement (the lazy Euler loop: three segment pullbacks
            # recompiled, 1.5 s in one step) and refuses arrays committed to another device.
            sh = v.sharding if type(v) is _ArrayImpl and v._committed else None
            specs.append(jax.ShapeDtypeStruct(t.shape, t.dtype, weak_type=t.weak_type, sharding=sh))
    except TypeError:
        return _Ready(jitted)
    w = _Warming(HOT, HOT + lag)
    x64 = prog.x64
    # Every value of the program (the cells) and its inputs: all small (and the program short), the
    # fast pipeline's program first and the full one later (``_kernels.compile_whole``).
    shapes = [c.key[0] for c in prog.cells] + [s.shape for s in specs]

    def full() -> Any:
        with jax.enable_x64(x64):
            return jitted.lower(specs).compile()

    def build() -> None:
        compiled = None
        try:
            with jax.enable_x64(x64):
                compiled = _kernels.compile_whole(jitted.lower(specs), shapes, full)
        except Exception:  # noqa: BLE001  (jit compiles it at the switch, and raises there)
            compiled = None
        finally:
            w.ready = _Ready(jitted, compiled)
            w.done.set()
            with _in_flight_lock:
                _in_flight.discard(w)

    with _in_flight_lock:
        _in_flight.add(w)
    _stats["background_compiles"] += 1
    threading.Thread(target=build, name="tapejax-lazy-compile", daemon=True).start()
    return w


@atexit.register
def _drain() -> None:
    # XLA aborts the process if the interpreter shuts down under a compile in flight.
    with _in_flight_lock:
        pending = list(_in_flight)
    for w in pending:
        w.done.wait()


def _execute(prog: Program) -> None:
    if not prog.nodes:
        return
    _stats["deferred"] += len(prog.nodes)
    if len(_slot_tuples) > _SLOT_TUPLES_MAX:
        _slot_tuples.clear()
    cells = prog.cells
    # The equations a tape (or anything else) still holds: 2 = the list and the call's argument.
    # The others are dropped first, so the cells only they held are not kept as outputs.
    held = prog.eqns
    prog.eqns = []
    gr = sys.getrefcount
    eqns = [held[k] for k in range(len(held)) if gr(held[k]) > 2]
    del held
    # Only values something still refers to leave the program (a handle, a recorded
    # equation): the rest are intermediates XLA fuses away. 2 = the list and the call's
    # argument (indexing, not enumerate: its cached result tuple would hold one more).
    live = tuple([k for k in range(len(cells)) if gr(cells[k]) > 2])
    key = (tuple(prog.key), live)
    entry: Any = _programs.get(key)
    tw = type(entry)
    if entry is None or tw is int:
        n = (entry or 0) + 1
        if n >= (HOT if prog.grads else _hot_without_gradient()):
            entry = _warm(prog, live)
            _programs[key] = entry
        else:
            _programs[key] = n
            if len(_programs) > _CACHE_SIZE:
                _programs.popitem(last=False)
    else:
        _programs.move_to_end(key)
        if tw is _Warming:
            entry.seen += 1
            if entry.seen >= entry.switch:
                # The switch point, a count of sightings (so values do not depend on how fast the
                # machine compiled): wait for the compile if it is still running.
                entry.done.wait()
                entry = _programs[key] = entry.ready
    if type(entry) is not _Ready:
        _stats["runs_interpreted"] += 1
        pb = _kernels.past_budget
        if (tw is not _NoneType or prog.grads) and not pb.on:
            # Its compiled program replaces these kernels at the switch (or will: a structure seen
            # before is compiled at its ``HOT``-th or ``_hot_without_gradient()``-th sighting, and a
            # program holding a deferred gradient is a training step whose gradient is hot
            # already): the kernels whose host answers are spent are answered on the host again
            # rather than compiled now. (A loop's forward kernels compiled at its 9th step, when
            # their host budget ran out, to be replaced ten steps later: mlp_step_small 180 ms.)
            pb.on = pb.device = True
            try:
                env = _interpret(prog.nodes, prog.inputs)
            finally:
                pb.on = pb.device = False
        else:
            env = _interpret(prog.nodes, prog.inputs)
        outs = [env[k] for k in live]
    else:
        _stats["runs_compiled"] += 1
        outs = entry(prog.inputs)
    for k, v in zip(live, outs):
        cells[k].value = v
    for e in eqns:
        e.in_vals = tuple(v.value if type(v) is _Cell else v for v in e.in_vals)
    # Drop what the handles no longer need: cells keep their values, the program its key only.
    prog.nodes = []
    prog.inputs = []
    prog.arrs = {}
    prog.cells = []


# ---- variable updates in lazy mode ---------------------------------------------------------

# A variable update: ``value + delta`` on arrays, the jnp function the eager update runs, as a
# kernel (a small one compiled the fast way, see ``_kernels``), not ``cur - v`` or a jit of it:
# jnp's own dispatch compiles each variable shape's update with XLA's full pipeline, about 20-50 ms
# against 7 ms on CPU, in every training loop's first steps (lazy mode runs a program's first
# sightings op by op through these). The add is the interpreter's cotangent-sum kernel.
_EAGER_UPDATE = {"add": _interp_tier.ADD.impl, "sub": _kernels.kernel(jnp.subtract)}
# The pending form (lazy mode): the same kernels as primitives of the pending program.
_UPDATE = {"add": Primitive("assign_add", _EAGER_UPDATE["add"], recorded=False),
           "sub": Primitive("assign_sub", _EAGER_UPDATE["sub"], recorded=False)}


def update(var: VariableBase, op: str, v: Any) -> Any:
    """The value ``var`` holds after ``op`` ("assign", "add", "sub") with ``v`` (checked, maybe pending).

    Lazy mode: a pending value (the variable then holds a ``Pending`` cell, forced by
    any read that is not an op of the same program). Otherwise the eager update.
    """
    sd = state.__dict__
    if _enabled and not sd["tracing"] and sd["bound"] is None and type(var)._v is VariableBase._v:
        if op == "assign":
            return v
        prim = _UPDATE[op]
        raw = var._raw
        out = NotImplemented if sd["accumulators"] else _update_fast(prim, raw, v)
        if out is NotImplemented:
            out = _lazy_bind(prim, (raw, v), {})
        if out is not NotImplemented:
            return out._lz
    if type(v) is _Cell:
        v = v.force()
    if op == "assign":
        return v
    return _EAGER_UPDATE[op](var._value, v)


def _update_fast(prim: Primitive, raw: Any, v: Any) -> Any:
    # An optimizer's update of a variable by a value pending in this thread's program (the step's
    # gradient times the rate): ``_lazy_bind``'s fast path for its two operands (the variable's value,
    # concrete or pending, and the pending delta) with its node key, nothing else. Not recorded
    # (an update is no differentiable op), so no ids, no variable read. Anything else: NotImplemented.
    prog = _tls.prog
    if prog is None or prog.done or prog.x64 is not _X64.value or type(v) is not _Cell or v.prog is not prog \
            or v.value is not _UNSET:
        return NotImplemented
    nc = len(prog.cells)
    r = v.slot
    tr = type(raw)
    if tr is _Cell and raw.value is not _UNSET:  # assigned by a program that ran
        raw = raw.value
        tr = type(raw)
    new: Any = None
    if tr is _Cell:
        if raw.prog is not prog:
            return NotImplemented
        s = raw.slot
        key: tuple = (prim, (), prog.x64, nc - s, raw.aid, nc - r, v.aid)
        sl: tuple = (~s, ~r)
    elif tr is _ArrayImpl:
        kp, j, new = _array_wire(prog, raw, len(prog.inputs))
        key = (prim, (), prog.x64) + kp + (nc - r, v.aid)
        sl = (j, ~r)
    else:
        return NotImplemented
    node = _fast_nodes.get(key)
    if not node or len(node[0]) != 1:  # (None: not seen yet; False: runs eagerly)
        return NotImplemented
    return _emit(prog, prim, _slot_tuples.setdefault(sl, sl), node, (), (None, None), (raw, v), None, None, new)


# ---- the gradient in lazy mode ------------------------------------------------------------


def peek(t: Any) -> Any:
    """``t``'s value, or its pending cell (lazy mode), without running anything."""
    c: Any = t._lz if isinstance(t, Tensor) else None  # (a _Cell: lazy mode makes every cell)
    if c is not None:
        return c if c.value is _UNSET else c.value
    return t._value


def resolve_slice(sl: Any, extra: list) -> bool:
    """Materialize what ``sl`` (built lazily) still holds pending, before an eager gradient.

    Returns False (so it can sit in front of the gradient's tier test).
    """
    if not _ever_enabled:
        return False
    pend = [v for v in sl.leaf_vals if type(v) is _Cell]
    for e in sl.eqns:
        pend.extend(v for v in e.in_vals if type(v) is _Cell)
    for c in pend:
        if c.value is _UNSET:
            c.prog.value_of(c)
    if pend:
        sl.leaf_vals = [v.value if type(v) is _Cell else v for v in sl.leaf_vals]
        for e in sl.eqns:
            if any(type(v) is _Cell for v in e.in_vals):
                e.in_vals = tuple(v.value if type(v) is _Cell else v for v in e.in_vals)
    return False


def can_defer_gradient(sl: Any, extra_ids: Any) -> bool:
    """Can this gradient be a node of the pending program? Only with no tape, accumulator or
    trace active (then nothing records the gradient itself) and no Python backward in the slice."""
    if not _enabled:
        return False
    st = state
    if st.recording or st.accumulators or st.tracing or st.bound is not None:
        return False
    return not _interp_tier.interpret_needed(sl, extra_ids)


def precompile_vjp(sl: Any, key_extra: tuple, extra: list, deferred: bool = False) -> Any:
    """A hot slice's background compile (``_tiers.choose``'s thunk): its vjp as eager mode runs it
    or, in lazy mode, as ``deferred_transform``'s node runs it (no residual inputs), when the
    gradient asking (``deferred``) is deferred from the switch on. That node's first runs are op by
    op while the step's whole program compiles; without this they compiled its program in the
    foreground (mlp_step_small's hand-over step: 570 ms). Only the program the switch will run is
    built: the switch waited for both (mlp_step_small's: 90 ms), and a later gradient of the slice
    that cannot be deferred (an outer tape watching it) compiles the other at its first call."""
    if deferred and _enabled and not _interp_tier.interpret_needed(sl, []) \
            and sl.eqns and _replay._wants_residuals(sl.code):
        build_deferred = _replay.precompile(sl, key_extra, "vjp", extra, residuals=False)
        if build_deferred is not None:
            return build_deferred
    return _replay.precompile(sl, key_extra, "vjp", extra)  # (without residuals the two are one)


def deferred_transform(sl: Any, key_extra: tuple, transform: str, extra: list, extra_ids: list) -> tuple:
    """``_replay.run_transform`` as a pending node (nothing records it: ``can_defer_gradient``)."""
    p = _tls.prog
    if p is not None and not p.done and p.grads:
        # One deferred gradient per program (in a training loop ``tape_starts`` or
        # ``gradient_returns`` ended it already; this is two gradients with no new tape between,
        # a persistent tape's): a loop's programs then start at the same point every step and are
        # one structure, compiled once. Cut only by MAX_PENDING, a loop that reads nothing got
        # programs at shifting offsets: a new structure, and a compile, at each offset.
        p.run()
    if transform == "vjp":
        # Never ``vjp_res`` (the recorded forward values as extra inputs): the node runs inside
        # the program that computes that forward, compiled whole, where XLA merges the vjp's
        # forward with the program's own; residual inputs would only add jit arguments and
        # keep every forward value a live output of the program.
        ke = tuple(key_extra)
        key = _replay.structure_key(sl, ("deferred", ke), lambda: ("vjp", sl.code, sl.diff, sl.groups, sl.target_slots) + ke)
        vals = list(sl.leaf_vals) + list(extra)
        params = {"key": key, "n_leaves": len(sl.leaf_vals)}
    else:
        vals, _ids, params = _replay._prepare(sl, key_extra, transform, extra, extra_ids)
    out = _recorder.bind(_replay.REPLAY, *vals, **params)
    p = _tls.prog
    if p is not None:
        p.grads += 1
    return tuple(out)


_replay.pending_hooks.append(flush)
_config._execution_listeners.append(lambda mode: set_enabled(mode == "lazy"))
if _config.get_execution() == "lazy":
    set_enabled(True)
