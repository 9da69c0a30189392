"""Lazy execution (``tapejax.config.set_execution("lazy")``): ops build a pending program.

In lazy mode ``bind`` (through the ``_recorder.lazy_bind`` hook) does not run a
primitive: it appends a node to the thread's pending ``Program`` and returns
``LazyTensor`` handles whose shape and dtype are known at once (the primitive's
abstract evaluation, ``jax.eval_shape`` cached per op signature). Recording on
tapes is unchanged: the ``Eqn`` is appended as in eager mode, with a ``_Cell``
standing for each input value that is not computed yet.

The program runs (*materializes*) when a value is needed: reading a lazy
tensor's ``_value`` (``.numpy()``, ``float()``, ``bool()``, printing, a host
callback, any eager code path lazy mode does not know), the start of a
``GradientTape`` use (``gradient``, ``jacobian``...), or when the program reaches
``MAX_PENDING`` nodes. Materializing also replaces the cells in the recorded
equations by the values, so the replay engine sees only concrete values.

A program is keyed by its structure (primitives, static parameters, wiring,
input avals). The first sightings run it op by op, exactly as eager mode would
(never slower than eager); once a structure has been seen ``HOT`` times it is
compiled into one XLA program and every later sighting is one call.

Everything lazy mode cannot defer safely runs eagerly, after materializing its
inputs (``NotImplemented`` from ``lazy_bind``): an op under a ``tapejax.function``
trace or a forward accumulator, a primitive whose implementation is not a pure
compiled JAX function (``tf.print``, ``py_function``, custom gradients), inputs
or parameters jit cannot take, and an op whose abstract evaluation raises (the
eager run then raises the same exception at the same user line).
"""

from __future__ import annotations

import collections
import functools
import threading
from typing import Any

import jax
import numpy as np

from .. import config as _config
from .._core import _recorder
from .._core._kinds import INEXACT
from .._core._recorder import Eqn, Primitive, Tensor, VariableBase, read_variable, state

__all__ = ["LazyTensor", "set_enabled", "enabled", "flush", "stats", "MAX_PENDING", "HOT"]

MAX_PENDING = 2000  # nodes; a longer program is materialized (bounded memory and compile time)
HOT = 2  # sightings of a structure after which it is compiled whole
_CACHE_SIZE = 256

_UNSET = object()
_SCALARS = (float, int, bool, complex)


class _Cell:
    """One pending value: its abstract value now, its array after materialization."""

    __slots__ = ("aval", "value", "prog", "slot")

    def __init__(self, aval: Any, prog: "Program", slot: int):
        self.aval = aval
        self.value = _UNSET
        self.prog = prog
        self.slot = slot


class LazyTensor(Tensor):
    """A tensor whose value is computed when first needed.

    ``_aval`` (shape, dtype) never forces; ``_value`` materializes the pending
    program that produces it, so every eager code path stays correct.
    """

    __slots__ = ("_lz",)

    def __init__(self, cell: _Cell):  # noqa: D107  (no Tensor.__init__: there is no value yet)
        self._lz = cell
        self._id = _recorder._next_id()

    @property
    def _aval(self) -> Any:
        c = self._lz
        return c.aval if c.value is _UNSET else c.value

    @property
    def _value(self) -> Any:
        c = self._lz
        if c.value is _UNSET:
            c.prog.run()
        return c.value


class Program:
    """The pending nodes of one thread, with the structure key built as they arrive."""

    __slots__ = ("nodes", "key", "inputs", "cells", "eqns", "lock", "done")

    def __init__(self) -> None:
        self.nodes: list = []  # (prim, params, in_slots): slot >= 0 an input, < 0 cell ~slot
        self.key: list = []
        self.inputs: list = []
        self.cells: list[_Cell] = []
        self.eqns: list[Eqn] = []  # recorded equations holding cells in ``in_vals``
        self.lock = threading.Lock()
        self.done = False

    def run(self) -> None:
        with self.lock:
            if self.done:
                return
            self.done = True
            if getattr(_tls, "prog", None) is self:
                _tls.prog = None
            _execute(self)


class _TLS(threading.local):
    prog: Program | None = None


_tls = _TLS()
_enabled = False

# (prim, frozen params, input avals) -> output avals (or an exception class marker)
_shape_cache: dict = {}
# structure key -> sightings (int) or compiled program
_programs: collections.OrderedDict = collections.OrderedDict()
_stats = {"deferred": 0, "fallback": 0, "runs_interpreted": 0, "runs_compiled": 0}


def stats() -> dict:
    """Counters: ops deferred, ops that fell back to eager, programs run op by op / compiled."""
    return dict(_stats)


def enabled() -> bool:
    return _enabled


def set_enabled(on: bool) -> None:
    """Install or remove the lazy ``bind`` hook (``tapejax.config.set_execution``)."""
    global _enabled
    flush()
    _enabled = bool(on)
    _recorder.lazy_bind = _lazy_bind if _enabled else None


def flush() -> None:
    """Materialize this thread's pending program (a no-op when there is none)."""
    p = _tls.prog
    if p is not None:
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
    if type(a) is jax.ShapeDtypeStruct:
        return a
    if a in _SCALARS or (isinstance(a, tuple) and len(a) == 3 and a[2] == "np"):
        t = jax.typeof(v)
        return jax.ShapeDtypeStruct(t.shape, t.dtype, weak_type=t.weak_type)
    return jax.ShapeDtypeStruct(a[0], a[1], weak_type=a[2])


def _lazy_bind(prim: Primitive, args: tuple, params: dict) -> Any:
    st = state
    if st.tracing or st.bound is not None or st.accumulators or not _is_pure(prim):
        _stats["fallback"] += 1
        return NotImplemented
    try:
        fparams = tuple(sorted(params.items())) if params else ()
        hash(fparams)
    except TypeError:
        _stats["fallback"] += 1
        return NotImplemented
    prog = _tls.prog
    if prog is None:
        prog = _tls.prog = Program()
    slots = []
    avals = []
    ids = []
    vals = []
    new_inputs = []
    n_in = len(prog.inputs)
    for a in args:
        if type(a) is LazyTensor:
            c = a._lz
            if c.value is _UNSET and c.prog is prog:
                slots.append(~c.slot)
                avals.append(c.aval)
                ids.append(a._id)
                vals.append(c)
                continue
            v = a._value  # another (or an already run) program's value
            i = a._id
        elif isinstance(a, Tensor):
            v = a._value
            i = a._id
        elif isinstance(a, VariableBase):
            if st.recording:
                t = read_variable(a)
                v, i = t._value, t._id
            else:
                v, i = a._value, None
        else:
            v, i = a, None
        av = _const_aval(v)
        if av is None:
            _stats["fallback"] += 1
            return NotImplemented
        slots.append(n_in + len(new_inputs))
        new_inputs.append(v)
        avals.append(av)
        ids.append(i)
        vals.append(v)
    avals_t = tuple(avals)
    skey = (prim, fparams, avals_t)
    outs_av = _shape_cache.get(skey)
    if outs_av is None:
        try:
            specs = [_spec(a, v if not isinstance(v, _Cell) else None) for a, v in zip(avals, vals)]
            outs_av = jax.eval_shape(functools.partial(prim.impl, **params), *specs)
            outs_av = tuple(outs_av) if prim.multiple_results else (outs_av,)
            if not all(type(o) is jax.ShapeDtypeStruct for o in outs_av):
                outs_av = False
        except Exception:  # noqa: BLE001  (the eager run raises it, at the user's line)
            outs_av = False
        if len(_shape_cache) < 100_000:
            _shape_cache[skey] = outs_av
    if outs_av is False:
        _stats["fallback"] += 1
        return NotImplemented
    _stats["deferred"] += 1
    prog.inputs.extend(new_inputs)
    slots_t = tuple(slots)
    prog.nodes.append((prim, params, slots_t, len(outs_av)))
    prog.key.append((prim, fparams, slots_t, avals_t))
    outs = []
    for oa in outs_av:
        c = _Cell(oa, prog, len(prog.cells))
        prog.cells.append(c)
        outs.append(LazyTensor(c))
    rec = st.recording
    if rec and prim.recorded:
        in_ids = tuple(ids)
        out_ids = tuple(t._id for t in outs)
        diff_out = [t._id for t, oa in zip(outs, outs_av) if oa.dtype in INEXACT]
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
                if any(isinstance(v, _Cell) for v in vals):
                    prog.eqns.append(eqn)
            tape.eqns.append(eqn)
            w.update(diff_out)
    if len(prog.nodes) >= MAX_PENDING:
        prog.run()
    if prim.multiple_results:
        return tuple(outs)
    return outs[0]


def _interpret(nodes: list, inputs: list) -> list:
    env: list = []
    for prim, params, slots, n_out in nodes:
        out = prim.impl(*[inputs[s] if s >= 0 else env[~s] for s in slots], **params)
        if n_out == 1 and not prim.multiple_results:
            env.append(out)
        else:
            env.extend(out)
    return env


def _compile(nodes: list) -> Any:
    nodes = list(nodes)

    def program(inputs: list) -> list:
        return _interpret(nodes, inputs)

    return jax.jit(program)


def _execute(prog: Program) -> None:
    if not prog.nodes:
        return
    key = tuple(prog.key)
    entry = _programs.get(key)
    if entry is None or type(entry) is int:
        n = (entry or 0) + 1
        if n >= HOT:
            entry = _compile(prog.nodes)
            _programs[key] = entry
        else:
            _programs[key] = n
            if len(_programs) > _CACHE_SIZE:
                _programs.popitem(last=False)
    else:
        _programs.move_to_end(key)
    if type(entry) is int or entry is None:
        _stats["runs_interpreted"] += 1
        env = _interpret(prog.nodes, prog.inputs)
    else:
        _stats["runs_compiled"] += 1
        env = entry(prog.inputs)
    for c, v in zip(prog.cells, env):
        c.value = v
    for e in prog.eqns:
        e.in_vals = tuple(v.value if isinstance(v, _Cell) else v for v in e.in_vals)
    # Drop what the handles no longer need: cells keep their values, the program its key only.
    prog.nodes = []
    prog.inputs = []
    prog.eqns = []
    prog.cells = []


_config._execution_listeners.append(lambda mode: set_enabled(mode == "lazy"))
if _config.get_execution() == "lazy":
    set_enabled(True)
