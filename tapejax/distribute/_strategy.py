"""The strategies: TF's ``tf.distribute`` API mapped onto one SPMD program over a ``('batch',)`` mesh.

``strategy.run(fn, args)`` is ``jax.jit(jax.shard_map(body))`` over the
strategy's mesh: ``body`` runs ``fn`` once per replica on that replica's block
of each distributed input, with every variable the step touches passed in
replicated (``P()``) and its new value returned replicated. Variables are found
the way ``tapejax.function`` finds them (a trace that meets a variable it did
not capture is redone with it), so an enclosing ``tapejax.function`` step
inlines the whole SPMD program into its own: one XLA program per step, no host
round trip. Gradients need no code here: inside ``shard_map`` a replicated
variable used with per-replica data is implicitly broadcast, and the transpose
of that broadcast is a ``psum`` — so each replica's ``tape.gradient`` already
is TF's all-reduced (summed) gradient, and ``apply_gradients`` computes the
same update on every replica.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from .._ops._tensor import convert_to_tensor
from .._tf import _distribute_ctx as _ctx
from .._tf._function import _Capture as _FunctionCapture
from .._tf._function import _CreatedInBody
from ._values import InputContext, PerReplica, ReduceOp

__all__ = [
    "MirroredStrategy", "MultiWorkerMirroredStrategy", "OneDeviceStrategy", "ReplicaContext", "Strategy",
    "TPUStrategy", "get_replica_context", "get_strategy", "has_strategy", "in_cross_replica_context",
]

_AXIS = "batch"


def _op(reduce_op: Any) -> ReduceOp:
    if isinstance(reduce_op, ReduceOp):
        return reduce_op
    if isinstance(reduce_op, str) and reduce_op.upper() in ("SUM", "MEAN"):
        return ReduceOp[reduce_op.upper()]
    raise ValueError(f"reduce_op must be tf.distribute.ReduceOp.SUM or ReduceOp.MEAN (or 'SUM'/'MEAN'); got {reduce_op!r}.")


def _mixing(new: Any, old: Any) -> RuntimeError:
    # TF raises RuntimeError("Mixing different tf.distribute.Strategy objects: ...") for a scope
    # entered inside another strategy's, a variable of one strategy written under another, and a
    # Keras model of one strategy trained under another's scope.
    return RuntimeError(
        f"Mixing different tf.distribute.Strategy objects: {new} is not {old}. Use one strategy at a time: "
        "create the variables, the model and the optimizer under the scope of the strategy that runs them."
    )


def _pmean(x: Any) -> Any:
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jax.lax.pmean(x, _AXIS)
    return jax.lax.psum(x, _AXIS) // jax.lax.psum(1, _AXIS)


def _mean(x: Any, axis: int) -> Any:
    return jnp.mean(x, axis).astype(x.dtype) if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.sum(x, axis) // x.shape[axis]


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase | PerReplica)


def _varying(x: Any) -> bool:
    """Whether a value traced inside shard_map differs between replicas."""
    t = jax.typeof(x)
    vma = getattr(t, "vma", None)
    if vma is None:
        mat = getattr(t, "manual_axis_type", None)
        vma = getattr(mat, "varying", ()) if mat is not None else ()
    return _AXIS in vma


# (jax.Device is jaxlib's compiled class: pyright cannot resolve it, mypy reads it.)
def _parse_device(d: Any) -> jax.Device:  # pyright: ignore[reportInvalidTypeForm]
    if isinstance(d, jax.Device):
        return d
    m = re.search(r"(?:device:)?([A-Za-z_]+):(\d+)\s*$", str(d))
    if not m:
        raise ValueError(f"Cannot parse device {d!r}: give a name like '/gpu:0', 'GPU:1', '/cpu:0', or a jax.Device.")
    kind, idx = m.group(1).lower(), int(m.group(2))
    platform = {"gpu": "gpu", "cpu": "cpu", "tpu": "tpu"}.get(kind)
    if platform is None:
        raise ValueError(f"Unknown device type {m.group(1)!r} in {d!r}: use CPU, GPU or TPU.")
    try:
        devs = jax.local_devices(backend=platform)
    except RuntimeError:
        devs = []
    if idx >= len(devs):
        raise ValueError(f"Device {d!r} does not exist: this host has {len(devs)} {platform.upper()} device(s) visible to JAX.")
    return devs[idx]


def _combine(var: VariableBase, old: Any, new: Any) -> Any:
    """The one value of a variable that every replica of the SPMD step wrote, as TF aggregates replica writes.

    ``aggregation=SUM`` (and sync-on-read state such as Keras metrics, which TF sums on read): the old
    value plus the sum of the replicas' changes; ``MEAN``: the mean of the replicas' values;
    ``ONLY_FIRST_REPLICA``: replica 0's. With no aggregation the replicas must agree (the optimizer's
    update of summed gradients does); a write that differs between replicas is TF's ValueError.
    """
    _, agg = _ctx.write_policy(var)
    if agg is _ctx.VariableAggregation.SUM:
        return old + jax.lax.psum(new - old, _AXIS)
    if agg is _ctx.VariableAggregation.MEAN:
        return jax.lax.pmean(new, _AXIS) if jnp.issubdtype(new.dtype, jnp.inexact) else jax.lax.psum(new, _AXIS) // jax.lax.psum(1, _AXIS)
    if agg is _ctx.VariableAggregation.ONLY_FIRST_REPLICA:
        first = jax.lax.axis_index(_AXIS) == 0
        return jax.lax.psum(jnp.where(first, new, jnp.zeros_like(new)), _AXIS)
    if _varying(new):
        raise ValueError(
            f"You must specify an aggregation method to update a variable ('{getattr(var, 'name', '?')}') in replica "
            "context: the replicas of strategy.run wrote different values to it. Pass aggregation= (e.g. "
            "tf.VariableAggregation.SUM or MEAN) to tf.Variable(...), or update it from summed values "
            "(get_replica_context().all_reduce)."
        )
    return new



class _Retrace(Exception):
    """A replicated step's trace met variables it did not capture; redo it with them as inputs."""

    def __init__(self, variables: list):
        super().__init__("retrace")
        self.variables = variables


class _VariableCreated(Exception):
    """A replicated step's trace created a variable: build the variables first (``_build_pass``)."""


class _Capture:
    """Pushed on ``_core.state.tracing`` while the SPMD body traces; sees variable access.

    The body is traced inside ``shard_map``: a variable it meets for the first time
    must become an explicit (replicated) input of the mapped function, so the trace
    is redone with it (``_Retrace``) rather than extended in place.
    """

    def __init__(self, known: set):
        self.known = known
        self.touched: dict[int, VariableBase] = {}
        self.saved: dict[int, tuple] = {}

    def read(self, var: VariableBase) -> None:
        if var._uid not in self.known and var._uid not in self.touched:
            self.touched[var._uid] = var

    def write(self, var: VariableBase) -> None:
        self.read(var)
        if var._uid not in self.known and var._uid not in self.saved:
            self.saved[var._uid] = (var, var._v)

    def created(self, var: VariableBase) -> None:
        raise _VariableCreated()


class _Entry:
    def __init__(self) -> None:
        self.variables: list[VariableBase] = []
        self.jitted: Callable | None = None
        self.assigned: tuple = ()
        self.out_spec: Any = None


class _BuildCapture:
    """Runs one replica's step eagerly to create its variables; every write is kept off the variables."""

    trace = False

    def __init__(self, local: Callable) -> None:
        self.local = local
        self.bound: dict[int, Any] = {}
        self.new: list[VariableBase] = []

    def read(self, var: VariableBase) -> None:
        if var._uid not in self.bound:
            self.bound[var._uid] = self.local(var._v)

    def write(self, var: VariableBase) -> None:
        self.read(var)

    def created(self, var: VariableBase) -> None:
        self.new.append(var)


class _MergeValue(PerReplica):
    """A tensor handed to ``merge_fn`` inside the SPMD step: TF's ``PerReplica`` of every replica's value.

    It holds this replica's traced value; the other replicas' values are reached
    with collectives over the mesh axis (``psum``/``pmean`` to reduce,
    ``all_gather`` to list or concatenate them).
    """

    __slots__ = ()

    def __init__(self, tensor: Any, num_replicas: int):
        super().__init__(tensor, num_replicas, stacked=True)

    @property
    def values(self) -> tuple:
        everyone = jax.lax.all_gather(self._tensor._value, _AXIS)
        return tuple(Tensor(everyone[i]) for i in range(self._n))


class ReplicaContext:
    """The context of one replica inside ``strategy.run`` (``tf.distribute.ReplicaContext``).

    Example:
        >>> import tapejax as tf
        >>> ctx = tf.distribute.get_replica_context()
        >>> ctx.num_replicas_in_sync, int(ctx.replica_id_in_sync_group)
        (1, 0)
    """

    def __init__(self, strategy: Any, replica_id: int | None, spmd: bool):
        self._strategy = strategy
        self._replica_id = replica_id
        self._spmd = spmd

    @property
    def strategy(self) -> Any:
        return self._strategy

    @property
    def num_replicas_in_sync(self) -> int:
        return self._strategy.num_replicas_in_sync

    @property
    def replica_id_in_sync_group(self) -> Tensor:
        """This replica's index, an int32 tensor (inside the SPMD step: ``lax.axis_index``)."""
        if self._spmd:
            return Tensor(jax.lax.axis_index(_AXIS).astype(jnp.int32))
        return Tensor(jnp.asarray(self._replica_id or 0, jnp.int32))

    def all_reduce(self, reduce_op: Any, value: Any, options: Any = None) -> Any:
        """Combine ``value`` (a tensor or a nest of them) over the replicas: ``lax.psum``/``pmean``."""
        op = _op(reduce_op)

        def one(x: Any) -> Any:
            v = convert_to_tensor(x)._value
            if self._spmd:
                return Tensor(jax.lax.psum(v, _AXIS) if op is ReduceOp.SUM else jax.lax.pmean(v, _AXIS))
            n = self.num_replicas_in_sync
            return Tensor(v * n if op is ReduceOp.SUM and n > 1 else v)

        return jax.tree_util.tree_map(one, value, is_leaf=_is_leaf)

    def merge_call(self, merge_fn: Callable, args: tuple = (), kwargs: dict | None = None) -> Any:
        """Call ``merge_fn(strategy, *args, **kwargs)`` in cross-replica context (TF's optimizer pattern).

        As in TF, each tensor in ``args``/``kwargs`` reaches ``merge_fn`` as a
        distributed value holding every replica's tensor: ``strategy.reduce``,
        ``strategy.extended.reduce_to``/``batch_reduce_to``,
        ``experimental_local_results`` and ``gather`` combine them, and
        ``strategy.extended.update(var, fn, args)`` applies an update to a
        replicated variable. Variables and Python values pass through
        unchanged; a distributed value ``merge_fn`` returns comes back to each
        replica as its own value. In the SPMD step every replica runs
        ``merge_fn`` (there is no separate cross-replica thread), on all-reduced
        or all-gathered values, so each computes the same result.

        Example:
            >>> import tapejax as tf
            >>> s = tf.distribute.OneDeviceStrategy("/cpu:0")
            >>> def step():
            ...     ctx = tf.distribute.get_replica_context()
            ...     return ctx.merge_call(lambda strategy, x: strategy.reduce("SUM", x, axis=None), args=(tf.constant(2.0),))
            >>> print(s.run(step))
            tf.Tensor(2.0, shape=(), dtype=float32)
        """
        kw: dict[str, Any] = dict(kwargs or {})
        if self._spmd:
            n = self.num_replicas_in_sync
            args, kw = jax.tree_util.tree_map(
                lambda x: _MergeValue(x, n) if isinstance(x, Tensor) else x, (tuple(args), kw), is_leaf=_is_leaf)
        rep = _ctx.stacks.replicas.pop()
        _ctx.stacks.strategies.append(self._strategy)
        try:
            out = merge_fn(self._strategy, *args, **kw)
        finally:
            _ctx.stacks.strategies.pop()
            _ctx.stacks.replicas.append(rep)
        # TF's select_replica: a replica receives its own value of a distributed result.
        return jax.tree_util.tree_map(lambda x: x._tensor if isinstance(x, _MergeValue) else x, out, is_leaf=_is_leaf)

    def __repr__(self) -> str:
        return f"<tf.distribute.ReplicaContext num_replicas_in_sync={self.num_replicas_in_sync}>"


class Strategy:
    """Base of the strategies: a ``('batch',)`` mesh over ``devices`` (``tf.distribute.Strategy``)."""

    def __init__(self, devices: Any = None):
        self._device_list = None if devices is None else list(devices)
        self._mesh_cache: Mesh | None = None
        self._steps: dict[Any, _Entry] = {}
        self._placing = True

    # --- devices --------------------------------------------------------------------------

    @property
    def _devices(self) -> list:
        if self._device_list is None:
            self._device_list = [jax.devices()[0]]
        return self._device_list

    @property
    def _mesh(self) -> Mesh:
        if self._mesh_cache is None:
            self._mesh_cache = Mesh(np.array(self._devices), (_AXIS,))
        return self._mesh_cache

    @property
    def num_replicas_in_sync(self) -> int:
        return len(self._devices)

    @property
    def extended(self) -> Strategy:
        return self

    @property
    def _multi_process(self) -> bool:
        return jax.process_count() > 1

    def _local_devices(self) -> list:
        me = jax.process_index()
        return [d for d in self._devices if d.process_index == me]

    def _put(self, x: Any, spec: P) -> Any:
        """A concrete array laid out as ``spec`` over the mesh (tracers are left to the enclosing trace)."""
        if isinstance(x, jax.core.Tracer):
            return x
        sharding = NamedSharding(self._mesh, spec)
        if isinstance(x, jax.Array) and x.sharding == sharding:
            return x
        if self._multi_process:
            host = np.asarray(_ctx.host_value(x))
            return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])
        return jax.device_put(x, sharding)

    def _place_variable(self, value: Any) -> Any:
        if not self._placing or isinstance(value, jax.core.Tracer):
            return value
        return self._put(value, P())

    # --- scope ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def scope(self) -> Any:
        """Variables created inside are replicated over the strategy's devices (``NamedSharding(mesh, P())``).

        Example:
            >>> import tapejax as tf
            >>> strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
            >>> with strategy.scope():
            ...     v = tf.Variable(1.0)
            ...     print(tf.distribute.get_strategy() is strategy)
            True
        """
        cur = _ctx.stacks.strategies[-1] if _ctx.stacks.strategies else None
        if cur is not None and cur is not self:
            raise _mixing(self, cur)
        _ctx.stacks.strategies.append(self)
        _ctx.notify_scope()
        try:
            yield self
        finally:
            _ctx.stacks.strategies.pop()
            _ctx.notify_scope()

    # --- run ------------------------------------------------------------------------------

    def run(self, fn: Callable, args: tuple = (), kwargs: dict | None = None, options: Any = None) -> Any:
        """Run ``fn`` on every replica; per-replica results come back as ``PerReplica`` values.

        Example:
            >>> import tapejax as tf
            >>> strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
            >>> print(strategy.run(lambda x: x * 2.0, args=(tf.constant(3.0),)))
            tf.Tensor(6.0, shape=(), dtype=float32)
        """
        kwargs = dict(kwargs or {})
        if _ctx.stacks.strategies and _ctx.stacks.strategies[-1] is not self:
            raise _mixing(self, _ctx.stacks.strategies[-1])
        if self.num_replicas_in_sync == 1:
            return self._run_single(fn, args, kwargs)
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_leaf)
        parts: list[tuple] = []
        for x in leaves:
            if isinstance(x, PerReplica):
                v = x._tensor._value
                parts.append(("R", tuple(v.shape), np.dtype(v.dtype), x._stacked))
            elif isinstance(x, VariableBase):
                parts.append(("V", x._uid))
            elif isinstance(x, Tensor | np.ndarray | jax.Array):
                v = x._value if isinstance(x, Tensor) else x
                parts.append(("T", tuple(v.shape), np.dtype(v.dtype)))
            else:
                try:
                    hash(x)
                    parts.append(("P", type(x), x))
                except TypeError:
                    parts.append(("O", id(x)))
        try:
            hash(fn)
            fkey: Any = fn
        except TypeError:
            fkey = id(fn)
        key = (fkey, treedef, tuple(parts))
        entry = self._steps.get(key)
        if entry is None:
            entry = self._steps[key] = _Entry()
        with self.scope() if not _ctx.stacks.strategies else contextlib.nullcontext():
            return self._run_spmd(entry, fn, leaves, treedef)

    def _run_single(self, fn: Callable, args: tuple, kwargs: dict) -> Any:
        def unwrap(x: Any) -> Any:
            if isinstance(x, PerReplica):
                return Tensor(x._tensor._value[0]) if x._stacked else x._tensor
            return x

        args, kwargs = jax.tree_util.tree_map(unwrap, (args, kwargs), is_leaf=_is_leaf)
        scope = self.scope() if not _ctx.stacks.strategies and self is not _ctx.default_strategy else contextlib.nullcontext()
        with scope:
            _ctx.stacks.replicas.append(ReplicaContext(self, 0, spmd=False))
            try:
                return fn(*args, **kwargs)
            finally:
                _ctx.stacks.replicas.pop()

    def _dynamic(self, leaves: list) -> tuple[list, list]:
        arrays, specs = [], []
        for x in leaves:
            if isinstance(x, PerReplica):
                arrays.append(x._tensor._value)
                specs.append(P(_AXIS))
            elif isinstance(x, Tensor | np.ndarray | jax.Array):
                arrays.append(x._value if isinstance(x, Tensor) else x)
                specs.append(P())
        return arrays, specs

    def _rebuild(self, leaves: list, treedef: Any, arrays: list, local: Callable | None = None) -> tuple:
        it = iter(arrays)
        out = []
        for x in leaves:
            if isinstance(x, PerReplica):
                a = next(it)
                if local is not None:
                    a = local(x.values[0]._value)
                    out.append(Tensor(a))
                else:
                    out.append(Tensor(a[0] if x._stacked else a))
            elif isinstance(x, Tensor | np.ndarray | jax.Array):
                a = next(it)
                out.append(Tensor(local(a) if local is not None else a))
            else:
                out.append(x)
        return jax.tree_util.tree_unflatten(treedef, out)

    def _make_step(self, entry: _Entry, fn: Callable, leaves: list, treedef: Any, specs: list) -> Callable:
        variables = list(entry.variables)
        n = self.num_replicas_in_sync

        def body(var_vals: list, arrays: list) -> tuple:
            cap = _Capture({v._uid for v in variables})
            saved_bound = _core.state.bound
            bound = _core.state.bound = {v._uid: val for v, val in zip(variables, var_vals)}
            _core.state.tracing.append(cap)
            _ctx.stacks.replicas.append(ReplicaContext(self, None, spmd=True))
            try:
                args, kwargs = self._rebuild(leaves, treedef, arrays)
                out = fn(*args, **kwargs)
                new_vals = [bound[v._uid] for v in variables]
            finally:
                _ctx.stacks.replicas.pop()
                _core.state.tracing.pop()
                _core.state.bound = saved_bound
                for v, o in cap.saved.values():
                    v._v = o
            if cap.touched:
                raise _Retrace(list(cap.touched.values()))
            out_leaves, out_tree = jax.tree_util.tree_flatten(out, is_leaf=_is_leaf)
            dyn: list = []
            static: list[tuple] = []
            for x in out_leaves:
                if isinstance(x, PerReplica):
                    raise TypeError("strategy.run's function returned a PerReplica value; return tensors.")
                if isinstance(x, Tensor | VariableBase | jax.Array):
                    v = x._value if isinstance(x, Tensor | VariableBase) else x
                    static.append(("T",))
                    dyn.append(jnp.asarray(v)[None])
                else:
                    static.append(("P", x))
            assigned = tuple(i for i, (a, b) in enumerate(zip(var_vals, new_vals)) if a is not b)
            news = [_combine(variables[i], var_vals[i], new_vals[i]) for i in assigned]
            entry.assigned = assigned
            entry.out_spec = (out_tree, static)
            return dyn, news

        sm = jax.shard_map(body, mesh=self._mesh, in_specs=([P()] * len(variables), specs), out_specs=(P(_AXIS), P()))
        del n
        return jax.jit(sm)

    def _run_spmd(self, entry: _Entry, fn: Callable, leaves: list, treedef: Any) -> Any:
        arrays, specs = self._dynamic(leaves)
        arrays = [self._put(a, s) for a, s in zip(arrays, specs)]
        outer = [c for c in _core.state.tracing if isinstance(c, _FunctionCapture)]
        while True:
            if entry.jitted is None:
                entry.jitted = self._make_step(entry, fn, leaves, treedef, specs)
            # Under an enclosing tapejax.function these reads give its traced values (and tell it
            # which variables this step needs); eagerly, the variables' own arrays.
            var_vals = [self._put(v._value, P()) for v in entry.variables]
            try:
                dyn, new = entry.jitted(var_vals, arrays)
                break
            except _Retrace as r:
                known = {v._uid for v in entry.variables}
                entry.variables += [v for v in r.variables if v._uid not in known]
                entry.jitted = None
            except (_VariableCreated, _ctx.VariableCreationInReplica):
                entry.jitted = None
                if outer:
                    if not outer[-1].allow_create:
                        raise ValueError(
                            "tf.function only supports singleton tf.Variables created on the first call: a variable "
                            "was created inside strategy.run in a later trace. Create it once, on the first call."
                        ) from None
                    # The enclosing tapejax.function runs this first call eagerly (TF's
                    # initialisation run), where the build pass below creates the variables.
                    raise _CreatedInBody() from None
                self._build_pass(fn, leaves, treedef, arrays)
            except (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                    jax.errors.TracerArrayConversionError, jax.errors.TracerIntegerConversionError) as e:
                raise TypeError(
                    "strategy.run's function used the value of a tensor in Python control flow (if/while/bool/float): "
                    "every replica runs as one traced SPMD program. Write the branch with tf.where, or move the check "
                    f"outside. Original error: {e}"
                ) from e
        for i in entry.assigned:
            self._check_owner(entry.variables[i])
        for i, val in zip(entry.assigned, new):
            entry.variables[i]._value = val
        out_tree, static = entry.out_spec
        it = iter(dyn)
        n = self.num_replicas_in_sync
        outs = [PerReplica(next(it), n, stacked=True) if s[0] == "T" else s[1] for s in static]
        return jax.tree_util.tree_unflatten(out_tree, outs)

    def _check_owner(self, var: VariableBase) -> None:
        """A variable replicated by another strategy (other devices) cannot be written here (TF's RuntimeError)."""
        sharding = getattr(var._v, "sharding", None)
        if isinstance(sharding, NamedSharding) and sharding.device_set != self._mesh_device_set():
            raise _mixing(self, f"the strategy that created variable {getattr(var, 'name', '?')!r} (replicated over "
                                f"{len(sharding.device_set)} other device(s))")

    def _mesh_device_set(self) -> set:
        return set(self._mesh.devices.flat)

    def _build_pass(self, fn: Callable, leaves: list, treedef: Any, arrays: list) -> None:
        """Create the step's variables (optimizer slots, lazily built layers) by running replica 0 eagerly.

        Its updates go into a throwaway binding, so no existing variable changes and
        new ones keep their initial values; the SPMD step then runs for real.
        """
        dev = self._local_devices()[0]

        def local(x: Any) -> Any:
            return jax.device_put(np.asarray(_ctx.host_value(x)), dev)

        cap = _BuildCapture(local)
        saved_bound = _core.state.bound
        _core.state.bound = cap.bound
        _core.state.tracing.append(cap)
        _ctx.stacks.replicas.append(ReplicaContext(self, 0, spmd=False))
        self._placing = False
        try:
            args, kwargs = self._rebuild(leaves, treedef, arrays, local=local)
            fn(*args, **kwargs)
        finally:
            self._placing = True
            _ctx.stacks.replicas.pop()
            _core.state.tracing.pop()
            _core.state.bound = saved_bound
        for v in cap.new:
            v._v = self._place_variable(_ctx.host_value(v._v))

    # --- cross-replica ---------------------------------------------------------------------

    def reduce(self, reduce_op: Any, value: Any, axis: int | None) -> Tensor:
        """Reduce a per-replica value to one tensor: over replicas, and along ``axis`` of each value.

        Example:
            >>> import tapejax as tf
            >>> s = tf.distribute.OneDeviceStrategy("/cpu:0")
            >>> print(s.reduce("SUM", tf.constant([1.0, 2.0]), axis=0))
            tf.Tensor(3.0, shape=(), dtype=float32)
        """
        op = _op(reduce_op)
        if isinstance(value, _MergeValue):  # inside merge_call in the SPMD step: a collective
            x = value._tensor._value
            x = jax.lax.psum(x, _AXIS) if op is ReduceOp.SUM else _pmean(x)
            if axis is not None:
                x = jnp.sum(x, axis) if op is ReduceOp.SUM else _mean(x, axis)
            return Tensor(x)
        if isinstance(value, PerReplica):
            arr = value._tensor._value
            n = value._n
            if not value._stacked:
                arr = arr.reshape((n, arr.shape[0] // n) + tuple(arr.shape[1:]))
            axes: tuple = (0,) if axis is None else (0, (axis % (arr.ndim - 1)) + 1)
        else:
            arr = convert_to_tensor(value)._value
            if op is ReduceOp.SUM and self.num_replicas_in_sync > 1:
                raise ValueError(
                    f"A non-DistributedValues value {value} cannot be reduced with the given reduce op {op}. "
                    "Reduce the PerReplica values returned by strategy.run."
                )
            arr = arr[None]
            axes = (0,) if axis is None else (0, (axis % (arr.ndim - 1)) + 1)
        total = jnp.sum(arr, axes)
        if op is ReduceOp.MEAN:
            count = int(np.prod([arr.shape[a] for a in axes]))
            total = (total / count).astype(arr.dtype) if jnp.issubdtype(arr.dtype, jnp.inexact) else total // count
        return Tensor(_ctx.host_value(total))

    # --- strategy.extended (the strategy itself): what an optimizer's merge_fn calls -----------

    def reduce_to(self, reduce_op: Any, value: Any, destinations: Any = None, options: Any = None) -> Tensor:
        """Combine the replicas' values of ``value`` (``strategy.extended.reduce_to``); ``destinations`` is ignored.

        Example:
            >>> import tapejax as tf
            >>> s = tf.distribute.OneDeviceStrategy("/cpu:0")
            >>> print(s.extended.reduce_to("MEAN", tf.constant(4.0), destinations=None))
            tf.Tensor(4.0, shape=(), dtype=float32)
        """
        return self.reduce(reduce_op, value, axis=None)

    def batch_reduce_to(self, reduce_op: Any, value_destination_pairs: Any, options: Any = None) -> list:
        """``reduce_to`` of each ``(value, destinations)`` pair (``strategy.extended.batch_reduce_to``)."""
        return [self.reduce_to(reduce_op, v, d, options) for v, d in value_destination_pairs]

    def update(self, var: Any, fn: Callable, args: tuple = (), kwargs: dict | None = None, group: bool = True) -> Any:
        """Run ``fn(var, *args, **kwargs)`` to update a replicated variable (``strategy.extended.update``).

        The variable has one (replicated) value, so the update runs once on it;
        distributed arguments give this replica's value (TF's per-device
        component). Inside the SPMD step every replica computes the same update
        from reduced values; an update that differs between replicas raises as
        any such write does.

        Example:
            >>> import tapejax as tf
            >>> s = tf.distribute.OneDeviceStrategy("/cpu:0")
            >>> with s.scope():
            ...     v = tf.Variable(1.0)
            >>> _ = s.extended.update(v, lambda var, d: var.assign_sub(d), args=(tf.constant(0.25),))
            >>> float(v.numpy())
            0.75
        """
        kw: dict[str, Any]
        args, kw = jax.tree_util.tree_map(lambda x: x._tensor if isinstance(x, _MergeValue) else x,
                                          (tuple(args), dict(kwargs or {})), is_leaf=_is_leaf)
        return fn(var, *args, **kw)

    def value_container(self, value: Any) -> Any:
        return value

    @property
    def worker_devices(self) -> tuple:
        """The replicas' devices, as TF names them (``/job:localhost/replica:0/task:0/device:CPU:0``)."""
        return tuple(f"/job:localhost/replica:0/task:{d.process_index}/device:{d.platform.upper()}:{d.id}"
                     for d in self._devices)

    def experimental_local_results(self, value: Any) -> tuple:
        """This process's replicas' values of ``value`` as a tuple (a plain value: ``(value,)``)."""
        if isinstance(value, PerReplica):
            return value.values
        return (value,)

    def gather(self, value: Any, axis: int) -> Tensor:
        """Concatenate the replicas' values along ``axis`` (``strategy.gather``)."""
        if isinstance(value, _MergeValue):
            return Tensor(jax.lax.all_gather(value._tensor._value, _AXIS, axis=axis, tiled=True))
        if not isinstance(value, PerReplica):
            return convert_to_tensor(value)
        arr = value._tensor._value
        if value._stacked:
            arr = jnp.concatenate([arr[i] for i in range(value._n)], axis=axis)
        elif axis != 0:
            n = value._n
            arr = jnp.concatenate(jnp.split(arr, n, axis=0), axis=axis)
        if self._multi_process:
            arr = jax.jit(lambda a: a, out_shardings=NamedSharding(self._mesh, P()))(arr)
        return Tensor(_ctx.host_value(arr))

    # --- input ----------------------------------------------------------------------------

    def _distribute_global(self, element: Any) -> Any:
        """A global batch as per-replica slices placed with the batch sharding."""
        n = self.num_replicas_in_sync
        pc, pi = jax.process_count(), jax.process_index()

        def one(x: Any) -> Any:
            a = np.asarray(x._value if isinstance(x, Tensor) else x)
            if n == 1:
                return Tensor(jax.device_put(a, self._devices[0]))
            if a.ndim == 0 or a.shape[0] % n:
                raise errors.InvalidArgumentError(
                    f"A global batch of {a.shape[0] if a.ndim else 'a scalar'} elements cannot be split evenly over "
                    f"{n} replicas: tapejax runs all replicas as one SPMD program, which needs equal per-replica "
                    "batches. Batch the dataset with drop_remainder=True and a global batch size divisible by "
                    "num_replicas_in_sync."
                )
            sharding = NamedSharding(self._mesh, P(_AXIS))
            if pc > 1:
                k = a.shape[0] // pc
                return PerReplica(jax.make_array_from_process_local_data(sharding, a[pi * k:(pi + 1) * k], a.shape), n, False)
            return PerReplica(jax.device_put(a, sharding), n, False)

        return jax.tree_util.tree_map(one, element, is_leaf=_is_leaf)

    def _distribute_local(self, elements: list) -> Any:
        """One per-replica batch for each local replica (from ``dataset_fn``'s dataset) as a distributed batch."""
        n = self.num_replicas_in_sync
        pc = jax.process_count()

        def cat(*xs: Any) -> Any:
            arrs = [np.asarray(x._value if isinstance(x, Tensor) else x) for x in xs]
            if n == 1:
                return Tensor(jax.device_put(arrs[0], self._devices[0]))
            if len({a.shape for a in arrs}) != 1:
                raise errors.InvalidArgumentError(
                    "The per-replica batches of one step differ in shape "
                    f"({[a.shape for a in arrs]}): tapejax runs all replicas as one SPMD program. Batch with "
                    "drop_remainder=True."
                )
            local = np.concatenate(arrs)
            sharding = NamedSharding(self._mesh, P(_AXIS))
            gshape = (local.shape[0] * pc,) + local.shape[1:]
            if pc > 1:
                return PerReplica(jax.make_array_from_process_local_data(sharding, local, gshape), n, False)
            return PerReplica(jax.device_put(local, sharding), n, False)

        return jax.tree_util.tree_map(cat, *elements, is_leaf=_is_leaf)

    def experimental_distribute_dataset(self, dataset: Any, options: Any = None) -> DistributedDataset:
        """Split each global batch of ``dataset`` across the replicas (each process reads its share).

        Example:
            >>> import tapejax as tf
            >>> s = tf.distribute.OneDeviceStrategy("/cpu:0")
            >>> ds = tf.data.Dataset.range(4).batch(2)
            >>> [x.numpy().tolist() for x in s.experimental_distribute_dataset(ds)]
            [[0, 1], [2, 3]]
        """
        return DistributedDataset(self, dataset, from_function=False)

    def distribute_datasets_from_function(self, dataset_fn: Callable, options: Any = None) -> DistributedDataset:
        """Call ``dataset_fn(InputContext)`` once per process; its per-replica batches go to the local replicas in turn."""
        ctx = InputContext(num_input_pipelines=jax.process_count(), input_pipeline_id=jax.process_index(),
                           num_replicas_in_sync=self.num_replicas_in_sync)
        return DistributedDataset(self, dataset_fn(ctx), from_function=True)

    def experimental_distribute_values_from_function(self, value_fn: Callable) -> Any:
        """A ``PerReplica`` of ``value_fn(ValueContext)`` for each replica."""
        n = self.num_replicas_in_sync
        vals = [convert_to_tensor(value_fn(_ValueContext(i, n)))._value for i in range(n)]
        if n == 1:
            return Tensor(vals[0])
        return PerReplica(self._put(jnp.stack([np.asarray(v) for v in vals]), P(_AXIS)), n, True)

    def __repr__(self) -> str:
        return f"<tf.distribute.{type(self).__name__} num_replicas_in_sync={self.num_replicas_in_sync}>"


class _ValueContext:
    def __init__(self, replica_id: int, n: int):
        self.replica_id_in_sync_group = replica_id
        self.num_replicas_in_sync = n


class DistributedDataset:
    """A dataset whose elements are distributed batches (``tf.distribute.DistributedDataset``)."""

    def __init__(self, strategy: Strategy, dataset: Any, from_function: bool):
        self._strategy = strategy
        self._dataset = dataset
        self._from_function = from_function

    def __iter__(self) -> DistributedIterator:
        return DistributedIterator(self._strategy, iter(self._dataset), self._from_function)

    @property
    def element_spec(self) -> Any:
        return self._dataset.element_spec


class DistributedIterator:
    """Iterator over a ``DistributedDataset``: each ``next`` is one step's distributed batch."""

    def __init__(self, strategy: Strategy, it: Any, from_function: bool):
        self._strategy = strategy
        self._it = it
        self._from_function = from_function

    def __iter__(self) -> DistributedIterator:
        return self

    def __next__(self) -> Any:
        s = self._strategy
        if not self._from_function:
            return s._distribute_global(next(self._it))
        k = max(1, s.num_replicas_in_sync // jax.process_count())
        elements = [next(self._it) for _ in range(k)]
        return s._distribute_local(elements)

    def get_next(self) -> Any:
        try:
            return next(self)
        except StopIteration:
            raise errors.OutOfRangeError("End of sequence") from None


class _DefaultStrategy(Strategy):
    """The strategy in effect outside every scope: one replica, variables left where they are."""

    def _place_variable(self, value: Any) -> Any:
        return value


class OneDeviceStrategy(Strategy):
    """All computation on one device (``tf.distribute.OneDeviceStrategy``)."""

    def __init__(self, device: Any):
        super().__init__([_parse_device(device)])


class MirroredStrategy(Strategy):
    """Synchronous data parallelism over one host's devices (``tf.distribute.MirroredStrategy``).

    ``devices=None`` takes every local device of JAX's default backend (all
    GPUs, or all virtual CPU devices).

    Example:
        >>> import tapejax as tf
        >>> strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
        >>> strategy.num_replicas_in_sync
        1
    """

    def __init__(self, devices: Any = None, cross_device_ops: Any = None):
        super().__init__(None if devices is None else [_parse_device(d) for d in devices])
        if devices is None:
            self._device_list = list(jax.local_devices())
        if len({d.id for d in self._devices}) != len(self._devices):
            raise ValueError(f"No duplicates allowed in `devices` argument: {devices}.")


def _tf_config() -> dict:
    raw = os.environ.get("TF_CONFIG", "")
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON ({e}): {raw!r}.") from None


class MultiWorkerMirroredStrategy(Strategy):
    """Synchronous data parallelism over several processes (``tf.distribute.MultiWorkerMirroredStrategy``).

    Reads ``TF_CONFIG`` (``cluster``: ``chief``/``worker`` address lists,
    ``task``: this process's ``type`` and ``index``) and starts JAX's
    multi-controller runtime with ``jax.distributed.initialize``, the chief (or
    worker 0) as coordinator. Create it before any other JAX computation, as TF
    requires it to be created first. Replicas are all devices of all processes.
    """

    def __init__(self, cluster_resolver: Any = None, communication_options: Any = None):
        resolver = cluster_resolver if cluster_resolver is not None else TFConfigClusterResolver()
        cluster = resolver.cluster_spec().as_dict()
        chief = list(cluster.get("chief", []))
        workers = list(cluster.get("worker", []))
        tasks = chief + workers
        if len(tasks) > 1:
            ttype, tindex = resolver.task_type, int(resolver.task_id or 0)
            if ttype not in ("chief", "worker"):
                raise ValueError(f"TF_CONFIG task type must be 'chief' or 'worker' for MultiWorkerMirroredStrategy; got {ttype!r}.")
            pid = tindex if ttype == "chief" else len(chief) + tindex
            if not jax.distributed.is_initialized():
                jax.distributed.initialize(coordinator_address=tasks[0], num_processes=len(tasks), process_id=pid)
        self._resolver = resolver
        super().__init__(list(jax.devices()))

    @property
    def cluster_resolver(self) -> TFConfigClusterResolver:
        return self._resolver


class ClusterSpec:
    """The cluster's jobs and task addresses (``tf.train.ClusterSpec``, as the resolver returns it)."""

    def __init__(self, cluster: dict):
        self._cluster = {k: list(v) for k, v in cluster.items()}

    def as_dict(self) -> dict:
        return {k: list(v) for k, v in self._cluster.items()}

    def jobs(self) -> list:
        return list(self._cluster)

    def num_tasks(self, job_name: str) -> int:
        return len(self._cluster.get(job_name, []))

    def __bool__(self) -> bool:
        return bool(self._cluster)


class TFConfigClusterResolver:
    """Reads the cluster and this task from ``TF_CONFIG`` (``tf.distribute.cluster_resolver.TFConfigClusterResolver``).

    Example:
        >>> import json, os, tapejax as tf
        >>> os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}})
        >>> r = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        >>> r.task_type, r.task_id, r.cluster_spec().num_tasks("worker")
        ('worker', 1, 2)
        >>> del os.environ["TF_CONFIG"]
    """

    def __init__(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None,
                 environment: str | None = None):
        cfg = _tf_config()
        task = cfg.get("task", {})
        self._cluster = cfg.get("cluster", {})
        self.task_type = task_type if task_type is not None else task.get("type")
        self.task_id = task_id if task_id is not None else (int(task["index"]) if "index" in task else None)
        self.rpc_layer = rpc_layer if rpc_layer is not None else cfg.get("rpc_layer")
        self.environment = environment if environment is not None else cfg.get("environment", "")

    def cluster_spec(self) -> ClusterSpec:
        return ClusterSpec(self._cluster)

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        t = task_type if task_type is not None else self.task_type
        i = task_id if task_id is not None else self.task_id
        if t is None or i is None:
            return ""
        addr = self._cluster.get(t, [])[i]
        layer = rpc_layer or self.rpc_layer
        return f"{layer}://{addr}" if layer else addr

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None, config_proto: Any = None) -> dict:
        counts: dict = {}
        for d in jax.local_devices():
            if d.platform != "cpu":
                counts[d.platform.upper()] = counts.get(d.platform.upper(), 0) + 1
        return counts


class TPUStrategy(MirroredStrategy):
    """Data parallelism over the TPU cores JAX sees (``tf.distribute.TPUStrategy``): a ``MirroredStrategy`` over them."""

    def __init__(self, tpu_cluster_resolver: Any = None, experimental_device_assignment: Any = None,
                 experimental_spmd_xla_partitioning: bool = False):
        try:
            devs = jax.devices("tpu")
        except RuntimeError:
            devs = []
        if not devs:
            raise ValueError(
                f"TPUStrategy needs TPU devices, but JAX's backend here is {jax.default_backend()!r} with no TPU. "
                "Use MirroredStrategy (GPUs or CPUs) or run on a TPU host."
            )
        super().__init__(devs)


def get_strategy() -> Strategy:
    """The strategy of the innermost ``scope()`` (or of the running replica), else the default strategy.

    Example:
        >>> import tapejax as tf
        >>> tf.distribute.get_strategy().num_replicas_in_sync
        1
    """
    return _ctx.current_strategy()


def has_strategy() -> bool:
    """Whether a (non-default) strategy's scope is active."""
    return _ctx.has_strategy()


def in_cross_replica_context() -> bool:
    """Inside a strategy's scope but outside its ``run`` (TF's cross-replica context)."""
    return _ctx.in_cross_replica_context()


def get_replica_context() -> ReplicaContext | None:
    """The running replica's context; ``None`` in cross-replica context; the default one outside every strategy."""
    if _ctx.stacks.replicas:
        return _ctx.stacks.replicas[-1]
    if _ctx.stacks.strategies:
        return None
    return ReplicaContext(_ctx.default_strategy, 0, spmd=False)


_ctx.default_strategy = _DefaultStrategy()
