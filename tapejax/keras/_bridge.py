"""Keras 3 on its JAX backend, with every Keras computation one op on the tape.

Three pieces connect the two libraries:

* ``load_keras`` imports Keras with ``KERAS_BACKEND=jax`` (one process holds one
  Keras backend: a Keras already imported with another backend is an ImportError).
* ``mirror(kv)``: the tapejax Variable of a Keras variable. Its storage *is* the
  Keras variable's ``_value``, so an optimizer step, ``set_weights`` or
  ``load_weights`` on either side is seen by the other; inside a Keras
  ``StatelessScope`` a read gives the scope's value (a layer nested in an op).
* ``stateful_call(fn, kvars, args, kwargs)``: ``fn`` (a Keras layer's
  ``__call__``, a metric's ``update_state``, a loss) run as *one* recorded
  primitive. The variables' values go in as data, Keras runs in a
  ``StatelessScope`` mapping each variable to its value, and the values the
  scope collected (BatchNormalization's moving statistics, a dropout seed, a
  metric's totals) come out and are assigned back to the mirrors. A replay
  (gradient, jacobian, compiled step) re-runs exactly that pure function.
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax._src import config as _jconfig

from .._core._recorder import Primitive, Tensor, VariableBase, _next_id, bind, suspended
from .._ops._tensor import TensorShape
from .._tf import _distribute_ctx as _dctx
from .._tf._distribute_ctx import VariableAggregation, VariableSynchronization, note_variable
from .._tf._jnp_wrap import _DATA, _freeze, _is_data, _is_leaf, _thaw
from .._tf._variable import Variable
from . import _saving

# The recorder's property for a variable's value, which the Keras variable view extends.
_BASE_VALUE: Any = VariableBase.__dict__["_value"]

__all__ = ["tf_keras", "load_keras", "mirror", "kvar", "stateful_call", "jax_level", "is_tape_value"]


def load_keras() -> Any:
    """The ``keras`` module, running on its JAX backend."""
    mod: Any = sys.modules.get("keras")
    if mod is None:
        prev = os.environ.get("KERAS_BACKEND")
        os.environ["KERAS_BACKEND"] = "jax"
        try:
            import keras as _imported

            mod = _imported
        finally:
            # Keras read the variable at import; a subprocess the program starts
            # (a real TF, say) keeps the user's setting.
            if prev is None:
                os.environ.pop("KERAS_BACKEND", None)
            else:
                os.environ["KERAS_BACKEND"] = prev
    if "tensorflow" not in sys.modules:
        # Keras asks whether TensorFlow is installed (importing it: seconds, and a
        # TF runtime in the process) only to recognise TF objects a tapejax
        # program does not have (tf.TensorShape, tf.data, gfile paths).
        from keras.src.utils import module_utils

        if module_utils.tensorflow._available is None:
            module_utils.tensorflow._available = False
    backend = mod.backend.backend()
    if backend != "jax":
        raise ImportError(
            f"tapejax.keras runs Keras 3 on its JAX backend, but keras was already imported with the "
            f"{backend!r} backend (one process holds one Keras backend). Import tapejax.keras first, or set "
            "KERAS_BACKEND=jax before anything imports keras (TensorFlow's tf.keras imports it too)."
        )
    return mod


keras: Any = load_keras()

# TensorFlow's ``tf.keras`` namespace (Keras 3 plus the legacy names TF keeps:
# ``losses.Reduction``, ``losses.mse``...), without importing TensorFlow.
from keras._tf_keras import keras as tf_keras  # noqa: E402
from keras.src.backend.common.masking import get_keras_mask as _get_keras_mask  # noqa: E402
from keras.src.backend.common.masking import set_keras_mask as _set_keras_mask  # noqa: E402
from keras.src.backend.common.stateless_scope import (  # noqa: E402
    StatelessScope,
    get_stateless_scope,
    in_stateless_scope,  # noqa: F401  (re-exported: the keras modules import it from here)
)

_KerasVariable = keras.Variable


class quiet_keras_array:
    """Context: silence NumPy 2's warning about ``keras.Variable.__array__`` (no ``copy`` keyword).

    Keras 3.15's saving converts its variables with ``np.array(variable)``;
    NumPy 2 warns (a DeprecationWarning) because Keras's ``__array__`` lacks the
    ``copy`` keyword. The conversion itself is right; the warning is Keras's.
    """

    def __enter__(self) -> None:
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy keyword",
                                category=DeprecationWarning)

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)


# ---- variables ---------------------------------------------------------------------------


class KerasVariable(Variable):
    """A Keras variable seen as a ``tf.Variable``: the same storage, read and assigned on the tape.

    ``model.trainable_variables`` returns these, so ``tape.gradient(loss,
    model.trainable_variables)`` and the optimizers work on Keras layers as on
    any ``tf.Variable``. ``.path`` and other Keras attributes are the Keras
    variable's.

    Example:
        >>> import tapejax as tf
        >>> layer = tf.keras.layers.Dense(2)
        >>> layer.build((None, 3))
        >>> k = layer.trainable_variables[0]
        >>> k.name, k.shape, k.path.endswith("/kernel")
        ('kernel', TensorShape([3, 2]), True)
    """

    __slots__ = ("_kv",)

    def __init__(self, kv: Any):
        self._kv = kv
        # Not VariableBase.__init__: a view of an existing variable is no new state, so a
        # compiled step that first sees it (a metric updated in a later trace) captures
        # it like any variable made outside the step.
        self._uid = _next_id()
        self._name = kv.name
        self._shape = TensorShape(tuple(kv.shape))
        self._constraint = kv.constraint
        # Keras's own distribution policy (a metric's totals: aggregation "sum", on read), so
        # that strategy.run combines the replicas' writes as TF's Keras does.
        agg = str(getattr(kv, "aggregation", "none") or "none").upper()
        sync = str(getattr(kv, "synchronization", "auto") or "auto").upper()
        note_variable(self, VariableSynchronization.__members__.get(sync), VariableAggregation.__members__.get(agg))

    # The storage is the Keras variable's: either side sees the other's assigns.
    @property
    def _v(self) -> Any:
        return self._kv._value

    @_v.setter
    def _v(self, value: Any) -> None:
        layout = getattr(self._kv, "_layout", None)
        if layout is not None and isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer):
            # Created under a tf.distribute scope: it stays replicated whatever assigns it, as Keras's
            # own assign keeps it (a no-op when the value already is).
            from keras.src.backend.jax.distribution_lib import distribute_tensor

            value = distribute_tensor(value, layout)
        self._kv._value = value

    @property
    def _trainable(self) -> bool:
        return bool(self._kv.trainable)

    @_trainable.setter
    def _trainable(self, value: bool) -> None:
        pass

    @property
    def _value(self) -> Any:
        # Inside an op's Keras call (a layer nested in a model) the scope holds the
        # values being differentiated, not the stored ones.
        scope = get_stateless_scope()  # (None outside a stateless scope: in_stateless_scope's test)
        if scope is not None:
            v = scope.get_current_value(self._kv)
            if v is not None:
                return v
        return _BASE_VALUE.fget(self)

    @_value.setter
    def _value(self, value: Any) -> None:
        scope = get_stateless_scope()
        if scope is not None:
            scope.add_update((self._kv, value))
            return
        _BASE_VALUE.fset(self, value)

    @property
    def path(self) -> str:
        """The Keras path (``"dense/kernel"``)."""
        return self._kv.path

    @property
    def keras_variable(self) -> Any:
        """The underlying ``keras.Variable``."""
        return self._kv

    @property
    def regularizer(self) -> Any:
        return getattr(self._kv, "regularizer", None)

    def __repr__(self) -> str:
        return (f"<KerasVariable path={self._kv.path}, shape={tuple(self._kv.shape)}, dtype={self._kv.dtype}, "
                f"numpy=\n{np.asarray(self._value)!r}>")


# ---- tf.distribute scopes place the variables Keras creates --------------------------------


class _KerasDistribution(threading.local):
    following: bool = False  # whether Keras's distribution is the one set for a tf.distribute scope
    saved: Any = None  # the distribution the user had set before the scope


_kdist = _KerasDistribution()


def _data_parallel(strategy: Any) -> Any:
    """Keras 3's ``DataParallel`` over exactly the strategy's ``('batch',)`` mesh (one per strategy)."""
    dp = strategy.__dict__.get("_keras_distribution")
    if dp is None:
        from keras.src.distribution import distribution_lib as kdl

        # auto_shard_dataset=False: tapejax's trainer splits the batches itself (the strategy's
        # batch sharding), so Keras's data adapters must not ask for a tf.data dataset per worker.
        dp = kdl.DataParallel(devices=list(strategy._devices), auto_shard_dataset=False)
        # The same Mesh object: a variable Keras places compares equal to the strategy's replicated
        # sharding, so strategy.run never copies it again.
        dp.device_mesh._backend_mesh = strategy._mesh
        strategy.__dict__["_keras_distribution"] = dp
    return dp


def _follow_strategy(strategy: Any) -> None:
    """Keep Keras's own distribution in step with the ``tf.distribute`` scope.

    Inside ``strategy.scope()`` Keras's ``DataParallel`` over the strategy's mesh is
    set, so each variable Keras creates there (layers, metrics) is replicated
    (``NamedSharding(mesh, P())``) when it is created, and stays so when
    assigned (``set_weights``); outside every scope, the distribution the user
    had (normally none) is back. TF's Keras likewise creates a model's variables
    mirrored under the scope.
    """
    from keras.src.distribution import distribution_lib as kdl

    if strategy is not None and strategy is not _dctx.default_strategy:
        if not _kdist.following:
            _kdist.saved, _kdist.following = kdl.distribution(), True
        kdl.set_distribution(_data_parallel(strategy))
    elif _kdist.following:
        kdl.set_distribution(_kdist.saved)
        _kdist.saved, _kdist.following = None, False


_dctx.scope_listeners.append(_follow_strategy)
# tf.keras is imported on first use, often inside the scope that its first model is built in.
_follow_strategy(_dctx.stacks.strategies[-1] if _dctx.stacks.strategies else None)


def mirror(v: Any) -> Any:
    """The ``KerasVariable`` of a Keras variable (anything else is returned unchanged)."""
    if not isinstance(v, _KerasVariable):
        return v
    m = v.__dict__.get("_tapejax_mirror")
    if m is None:
        m = KerasVariable(v)
        v.__dict__["_tapejax_mirror"] = m
    return m


def mirrors(vs: Any) -> list:
    out, seen = [], set()
    for v in vs:
        m = mirror(v)
        if id(m) not in seen:
            seen.add(id(m))
            out.append(m)
    return out


def kvar(v: Any) -> Any:
    """The Keras variable behind a ``KerasVariable`` (anything else unchanged)."""
    return v._kv if isinstance(v, KerasVariable) else v


# ---- one op per Keras call ---------------------------------------------------------------


class _Ref:
    """A static parameter compared by identity (a Keras variable, a layer's bound call)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Ref) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _unwrap(x: Any) -> Any:
    if isinstance(x, Tensor | VariableBase):
        return x._value
    return x


def _run(fn: _Ref, kvars: tuple, values: tuple, args: tuple, kwargs: dict) -> tuple:
    # Pure in (values, args): Keras reads its variables from the scope and writes
    # its updates into it; no tape sees the inside (a user layer nested here runs
    # tapejax ops on traced values, which must not be recorded twice).
    with suspended(), StatelessScope(state_mapping=[(r.obj, v) for r, v in zip(kvars, values)]) as scope:
        out = fn.obj(*args, **kwargs)
        out = jax.tree_util.tree_map(_unwrap, out, is_leaf=lambda x: isinstance(x, Tensor | VariableBase))
    new = tuple(scope.get_current_value(r.obj) for r in kvars)
    return out, new


class _OutTree(threading.local):
    tree: Any = None
    masked: tuple = ()


_out_tree = _OutTree()


def _impl(*data: Any, fn: _Ref, kvars: tuple, treedef: Any, layout: tuple) -> tuple:
    n = len(kvars)
    values, rest = data[:n], iter(data[n:])
    leaves = [next(rest) if s is _DATA else _thaw(s) for s in layout]
    args, kwargs = jax.tree_util.tree_unflatten(treedef, leaves)
    out, new = _run(fn, kvars, values, args, kwargs)
    out_leaves, out_tree = jax.tree_util.tree_flatten(out)
    # Keras's masks (Embedding(mask_zero=True)...) ride along as extra boolean outputs:
    # tapejax tensors carry them to the next layer, as TF's tensors carry _keras_mask.
    masks = [_get_keras_mask(o) for o in out_leaves]
    masked = tuple(i for i, m in enumerate(masks) if m is not None)
    _out_tree.tree, _out_tree.masked = out_tree, masked
    return tuple(jnp.asarray(o) for o in out_leaves) + tuple(new) + tuple(jnp.asarray(masks[i]) for i in masked)


# ---- a built-in Keras call's eager value, compiled once it repeats --------------------------
#
# Why: the op's eager value runs Keras's layers op by op on JAX, which dispatches every jnp call
# (an MLP 32-32-32-1 forward: 1.3 ms, against 36 µs for the same function compiled). Keras's own
# JAX trainer compiles the same stateless call; here it is compiled for the eager value only, and
# only where no Python of the user's runs inside (``pure_keras``): a layer the user wrote, a
# ``Lambda``, a user's activation, an activity regularizer keep running eagerly on every call, as
# in TF eager. A public attribute set on any tf.keras layer (``layer.trainable = False``,
# ``layer.activation = ...``) bumps ``version``, part of the key: a traced call never outlives a
# change the trace read. The first ``HOT`` calls of a key run eagerly; the next one traces the
# call (here, on this thread: Keras's call contexts are thread-local) and compiles it on a
# background thread while calls keep running eagerly; the compiled program takes over at the
# ``HOT + 1 + LAG``-th call, a count (it waits for the compile if needed), so values do not depend
# on how fast the machine compiled.

HOT = 2
LAG = 8
_FWD_MAX = 32  # entries per layer, loss or metric
compile_calls = os.environ.get("TAPEJAX_KERAS_COMPILE", "").strip().lower() not in ("0", "false", "no", "off")
version = [0]
fwd_stats = {"eager": 0, "compiled": 0, "compiles": 0, "failed": 0}


# Registered by ``_layer`` (layers and models) and ``_objects`` (losses, metrics), which know their
# classes: each says whether a call of that kind runs only Keras's and tapejax's own code.
pure_checks: list[Callable[[Any], bool]] = []


def pure_keras(obj: Any) -> bool:
    return any(check(obj) for check in pure_checks)


def keras_code(fn: Any) -> bool:
    """Whether an activation (or other callable a built-in layer holds) is Keras's or tapejax's own:
    the function a wrapper (``jax_level``, functools.wraps) stands for, not the wrapper's module."""
    for _ in range(16):
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            break
        fn = inner
    mod = getattr(fn, "__module__", "") or ""
    return mod in ("keras", "tapejax") or mod.startswith(("keras.", "tapejax."))  # (tf.nn.relu: "tapejax")


class Saveable:
    """Keras's serialization entry points on tapejax's layers, models, losses and metrics.

    Keras's ``__reduce__`` (``copy.deepcopy``, ``pickle``) saves an object into a ``.keras`` buffer
    and loads it back with the class's ``_unpickle_model``; a wrapper layer's or a model's
    ``from_config`` builds the objects its config names. Both load inside ``_saving.loading()``,
    so what comes back is tapejax's classes, as the object copied was.
    """

    def __reduce__(self) -> Any:
        with quiet_keras_array():  # (Keras's save of the copy, as ``Model.save``)
            return super().__reduce__()

    @classmethod
    def _unpickle_model(cls, bytesio: Any) -> Any:  # (the name pickle stores: Keras's own)
        from keras.src.saving import saving_lib

        with _saving.loading(), quiet_keras_array():
            return saving_lib._load_model_from_fileobj(bytesio, custom_objects=None, compile=True, safe_mode=False)

    @classmethod
    def from_config(cls, config: Any, *args: Any, **kwargs: Any) -> Any:
        with _saving.loading():
            return super().from_config(config, *args, **kwargs)  # type: ignore[misc]  # (Keras's class, after the mixin)


def bump_version(obj: Any, name: str, value: Any) -> None:
    """A public attribute set on a tf.keras object: a new ``version`` if its value changes."""
    if name.startswith("_"):
        return
    try:
        same = getattr(obj, name, _MISSING) is value
    except Exception:  # noqa: BLE001  (a Keras property that raises before build: counted as a change)
        same = False
    if not same:
        version[0] += 1


_MISSING = object()


class _Fwd:
    __slots__ = ("seen", "ok", "compiled", "tree", "masked", "same", "done")

    def __init__(self, ok: bool):
        self.seen = 0
        self.ok = ok
        self.compiled: Any = None
        self.tree: Any = None
        self.masked: tuple = ()
        self.same: tuple = ()  # per variable: the call leaves it as it was (its input is returned)
        self.done = threading.Event()


_fwd_lock = threading.Lock()
_in_flight: set = set()  # the entries whose compile is running


@atexit.register
def _drain() -> None:
    # XLA aborts the process if the interpreter shuts down under a compile in flight.
    with _fwd_lock:
        pending = list(_in_flight)
    for e in pending:
        e.done.wait()


def _entries(obj: Any) -> collections.OrderedDict | None:
    """The compiled-call entries of the object a call belongs to, kept on it: they live as long as
    the layer (loss, metric) does, and hold its variables no longer."""
    owner = getattr(obj, "_tapejax_layer", None) or getattr(obj, "__self__", None) or obj
    d = getattr(owner, "__dict__", None)
    if d is None:
        return None
    entries = d.get("_tapejax_fwd")
    if entries is None:
        entries = d["_tapejax_fwd"] = collections.OrderedDict()
    return entries


def _spec(d: Any) -> Any:
    if isinstance(d, jax.core.Tracer):
        return None
    if isinstance(d, jax.Array):
        sh = d.sharding if getattr(d, "_committed", False) else None
        return (d.shape, d.dtype, d.weak_type, sh)
    if isinstance(d, np.ndarray):
        return (d.shape, d.dtype, False, None)
    return None


def _keras_impl(*data: Any, fn: _Ref, kvars: tuple, treedef: Any, layout: tuple) -> tuple:
    if not compile_calls:
        return _impl(*data, fn=fn, kvars=kvars, treedef=treedef, layout=layout)
    specs = []
    for d in data:
        sp = _spec(d)
        if sp is None:  # traced (a replay, a compiled step, an accumulator) or not an array
            return _impl(*data, fn=fn, kvars=kvars, treedef=treedef, layout=layout)
        specs.append(sp)
    # (x64 and the default device: a program is traced and placed under them)
    key = (fn, kvars, treedef, layout, version[0], tuple(specs), _jconfig.enable_x64.value,
           _jconfig.default_device.value)
    entries = _entries(fn.obj)
    try:
        e = entries.get(key) if entries is not None else None
    except TypeError:  # an unhashable static leaf
        return _impl(*data, fn=fn, kvars=kvars, treedef=treedef, layout=layout)
    if e is None:
        e = _Fwd(entries is not None and pure_keras(fn.obj) and _no_distribution())
        if entries is not None:
            with _fwd_lock:
                entries[key] = e
                while len(entries) > _FWD_MAX:
                    entries.popitem(last=False)
    e.seen += 1
    if not e.ok or e.seen <= HOT:
        fwd_stats["eager"] += 1
        return _impl(*data, fn=fn, kvars=kvars, treedef=treedef, layout=layout)
    if e.seen == HOT + 1:
        _start_compile(e, data, fn, kvars, treedef, layout)
    if e.ok and e.seen > HOT + LAG:
        e.done.wait()
        if e.compiled is not None:
            try:
                outs = e.compiled(*data)
            except (TypeError, ValueError):  # (raised before running: arguments it was not compiled for)
                e.ok = False
                fwd_stats["failed"] += 1
            else:
                fwd_stats["compiled"] += 1
                _out_tree.tree, _out_tree.masked = e.tree, e.masked
                return _with_unchanged(outs, data, e)
        else:
            e.ok = False
    fwd_stats["eager"] += 1
    return _impl(*data, fn=fn, kvars=kvars, treedef=treedef, layout=layout)


def _no_distribution() -> bool:
    # Under a Keras distribution (a tf.distribute scope) Keras lays variables out over devices:
    # those calls stay eager.
    from keras.src.distribution import distribution_lib as kdl

    return kdl.distribution() is None


def _start_compile(e: _Fwd, data: tuple, fn: _Ref, kvars: tuple, treedef: Any, layout: tuple) -> None:
    n = len(kvars)

    def traced(*d: Any) -> tuple:
        outs = _impl(*d, fn=fn, kvars=kvars, treedef=treedef, layout=layout)
        n_out = _out_tree.tree.num_leaves
        new = outs[n_out:n_out + n]
        # A variable the call does not write comes back as its input: eager callers compare by
        # identity (``stateful_call`` assigns only what changed), so it is not an output here.
        e.same = tuple(new[i] is d[i] for i in range(n))
        return outs[:n_out] + tuple(v for v, s in zip(new, e.same) if not s) + outs[n_out + n:]

    try:
        lowered = jax.jit(traced).lower(*data)
        e.tree, e.masked = _out_tree.tree, _out_tree.masked
    except Exception:  # noqa: BLE001  (not traceable: this call keeps running eagerly, and raises there if it must)
        e.ok = False
        fwd_stats["failed"] += 1
        return
    fwd_stats["compiles"] += 1

    def work() -> None:
        try:
            e.compiled = lowered.compile()
        except Exception:  # noqa: BLE001  (compiled is None: eager from the switch on)
            e.compiled = None
        finally:
            e.done.set()
            with _fwd_lock:
                _in_flight.discard(e)

    with _fwd_lock:
        _in_flight.add(e)

    threading.Thread(target=work, name="tapejax-keras-compile", daemon=True).start()


def _with_unchanged(outs: Any, data: tuple, e: _Fwd) -> tuple:
    n_out = e.tree.num_leaves
    changed = iter(outs[n_out:])
    new = tuple(data[i] if s else next(changed) for i, s in enumerate(e.same))
    return tuple(outs[:n_out]) + new + tuple(changed)


_PRIM = Primitive("keras", _keras_impl, differentiable=True, multiple_results=True)


def stateful_call(fn: Callable, variables: list, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` as one recorded op over ``variables`` (Keras or mirror); state updates assigned back.

    Recorded through ``bind``: tapes, accumulators and compiled steps see it as
    any other op.
    """
    ms = [mirror(kvar(v)) for v in variables]
    kvars = tuple(_Ref(m._kv) for m in ms)
    leaves, treedef = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)), is_leaf=_is_leaf)
    layout, data = [], []
    for leaf in leaves:
        if _is_data(leaf):
            layout.append(_DATA)
            data.append(leaf)
        else:
            layout.append(_freeze(leaf))
    old = [m._value for m in ms]
    outs = bind(_PRIM, *ms, *data, fn=_Ref(fn), kvars=kvars, treedef=treedef, layout=tuple(layout))
    out_tree, masked = _out_tree.tree, _out_tree.masked
    n_out = len(outs) - len(ms) - len(masked)
    for m, o, t in zip(ms, old, outs[n_out:n_out + len(ms)]):
        if t._value is not o:
            m.assign(t)
    results = list(outs[:n_out])
    for i, mask in zip(masked, outs[n_out + len(ms):]):
        _set_keras_mask(results[i], mask)
    return jax.tree_util.tree_unflatten(out_tree, results)


def is_tape_value(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


def to_tensors(tree: Any) -> Any:
    """jax arrays (traced values inside an op) as tapejax Tensors, for code written with tapejax ops."""
    return jax.tree_util.tree_map(lambda x: Tensor(x) if isinstance(x, jax.Array) else x, tree)


def to_arrays(tree: Any) -> Any:
    return jax.tree_util.tree_map(_unwrap, tree, is_leaf=is_tape_value)


def jax_level(fn: Callable) -> Callable:
    """``fn`` written with tapejax ops, callable by Keras on JAX arrays (unrecorded)."""
    if getattr(fn, "_tapejax_jax_level", False):
        return fn

    def g(*args: Any, **kwargs: Any) -> Any:
        with suspended():
            return to_arrays(fn(*to_tensors(args), **to_tensors(kwargs)))

    g.__name__ = getattr(fn, "__name__", "function")
    g.__wrapped__ = fn  # type: ignore[attr-defined]
    g._tapejax_jax_level = True  # type: ignore[attr-defined]
    return g
