"""Replay: turn the slice of a record between sources and targets into a pure
JAX function, differentiate it with ``jax.vjp`` (or a Jacobian transform), and
compile it with ``jax.jit``, cached by the slice's structure.

A slice is encoded as a hashable *key* that holds only structure (primitives,
static parameters, wiring, leaf avals); the data (leaf values, cotangents) is
passed as arguments, so a training loop that records the same ops every step
reuses one compiled program.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._core import Eqn, Primitive, Tensor, record, state
from ._dtypes import INEXACT as _INEXACT

__all__ = ["Slice", "build_slice", "run_transform", "cache_info", "cache_clear", "set_cache_size", "set_compile"]


# --------------------------------------------------------------------------
# The compiled-program cache: a bounded LRU, safe under threads.


@dataclass
class CacheInfo:
    """Statistics of the compiled-replay cache (``tapejax.replay_cache_info()``)."""

    hits: int
    misses: int
    evictions: int
    size: int
    maxsize: int
    compile: bool


class _Cache:
    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.data: OrderedDict[Any, Callable] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def get(self, key: Any, make: Callable[[], Callable]) -> Callable:
        with self.lock:
            fn = self.data.get(key)
            if fn is not None:
                self.data.move_to_end(key)
                self.hits += 1
                return fn
            self.misses += 1
        # Build outside the lock: making a jitted function is cheap, but the
        # lock must never be held across user-visible work.
        fn = make()
        with self.lock:
            self.data[key] = fn
            self.data.move_to_end(key)
            while len(self.data) > self.maxsize:
                self.data.popitem(last=False)
                self.evictions += 1
        return fn


_cache = _Cache(int(os.environ.get("TAPEJAX_REPLAY_CACHE_SIZE", "512")))
_compile = os.environ.get("TAPEJAX_DISABLE_JIT", "") in ("", "0")


def cache_info() -> CacheInfo:
    """Hits, misses, evictions and size of the compiled-replay cache.

    Example:
        >>> import tapejax as tf
        >>> info = tf.replay_cache_info(); info.size <= info.maxsize
        True
    """
    with _cache.lock:
        return CacheInfo(_cache.hits, _cache.misses, _cache.evictions, len(_cache.data), _cache.maxsize, _compile)


def cache_clear() -> None:
    """Drop every compiled replay and reset the statistics."""
    with _cache.lock:
        _cache.data.clear()
        _cache.hits = _cache.misses = _cache.evictions = 0


def set_cache_size(maxsize: int) -> None:
    """Bound the compiled-replay cache to ``maxsize`` programs (least recently used go first).

    Also settable with the environment variable ``TAPEJAX_REPLAY_CACHE_SIZE``.
    """
    if not isinstance(maxsize, int) or maxsize < 1:
        raise ValueError(f"The replay cache size must be a positive int, got {maxsize!r}.")
    with _cache.lock:
        _cache.maxsize = maxsize
        while len(_cache.data) > maxsize:
            _cache.data.popitem(last=False)
            _cache.evictions += 1


def set_compile(enabled: bool) -> None:
    """Turn compilation of replays on (default) or off.

    Off, a replay runs ``jax.vjp`` op by op, which is slower but easy to debug
    (``print`` inside custom ops runs every time). Also set by ``TAPEJAX_DISABLE_JIT=1``.
    """
    global _compile
    _compile = bool(enabled)


# --------------------------------------------------------------------------
# Slicing.


def _aval(v: Any) -> Any:
    # What jit would specialise on; part of the cache key so a loop whose
    # shapes change every step evicts old programs instead of growing jit's own cache.
    if isinstance(v, jax.Array):
        return (v.shape, v.dtype, v.weak_type)
    if isinstance(v, np.ndarray | np.generic):
        return (v.shape, v.dtype)
    return type(v)


def _freeze(params: dict) -> tuple:
    return tuple(sorted(params.items())) if params else ()


@dataclass
class Slice:
    """The replayable part of a record, between some sources and some targets.

    ``code`` is a tuple of ``(prim, params, input_slots, n_outputs)``; slot
    ``k >= 0`` names leaf ``k`` and slot ``-1 - j`` the j-th value produced.
    """

    code: tuple
    leaf_ids: list
    leaf_vals: list
    diff: tuple  # per differentiable input: ("leaf", slot) or ("eps", slot, shape, dtype)
    groups: tuple  # per connected source: indices into ``diff`` to sum
    target_slots: tuple  # per connected target
    connected: list  # per source: bool
    targets_used: list  # per target: bool (connected and inexact)


def build_slice(
    eqns: Sequence[Eqn],
    targets: Sequence[Tensor],
    source_ids: Sequence[tuple],
    known: dict,
) -> Slice:
    """Cut the record down to what lies between ``source_ids`` and ``targets``.

    ``source_ids[k]`` is a tuple of ids whose gradients are summed (one id for a
    tensor, every read for a variable). ``known`` maps ids to values for sources
    and targets that may not appear as equation inputs.
    """
    target_ids = [t._id if t._value.dtype in _INEXACT else None for t in targets]
    needed = {i for i in target_ids if i is not None}
    cand: list[Eqn] = []
    for e in reversed(eqns):
        for o in e.out_ids:
            if o in needed:
                break
        else:
            continue
        cand.append(e)
        needed.update(i for i in e.in_ids if i is not None)
    cand.reverse()

    connected = [any(i in needed for i in ids) for ids in source_ids]
    src = {i for ids, c in zip(source_ids, connected) if c for i in ids if i in needed}
    reach = set(src)
    sl: list[Eqn] = []
    for e in cand:
        for i in e.in_ids:
            if i in reach:
                break
        else:
            continue
        sl.append(e)
        reach.update(e.out_ids)

    lslot: dict[int, int] = {}
    pslot: dict[int, int] = {}
    leaf_ids: list = []
    leaf_vals: list = []

    def leaf(i: Any, v: Any) -> int:
        if i is not None:
            k = lslot.get(i)
            if k is not None:
                return k
            lslot[i] = len(leaf_vals)
        leaf_ids.append(i)
        leaf_vals.append(v)
        return len(leaf_vals) - 1

    code = []
    for e in sl:
        ins = []
        for i, v in zip(e.in_ids, e.in_vals):
            if i is not None and i in pslot:
                ins.append(pslot[i])
            else:
                ins.append(leaf(i, v))
        for o in e.out_ids:
            pslot[o] = -1 - len(pslot)
        code.append((e.prim, _freeze(e.params), tuple(ins), len(e.out_ids)))

    diff: list = []
    dindex: dict[int, int] = {}
    groups = []
    for ids, c in zip(source_ids, connected):
        if not c:
            continue
        g = []
        for i in ids:
            if i not in needed:
                continue
            if i not in dindex:
                dindex[i] = len(diff)
                if i in pslot:
                    v = known[i]
                    diff.append(("eps", pslot[i], v.shape, v.dtype))
                else:
                    diff.append(("leaf", leaf(i, known[i]) if i not in lslot else lslot[i]))
            g.append(dindex[i])
        groups.append(tuple(g))

    target_slots = []
    used = []
    for t, i in zip(targets, target_ids):
        if i is None:
            used.append(False)
        elif i in pslot:
            target_slots.append(pslot[i])
            used.append(True)
        elif i in lslot and any(d[0] == "leaf" and d[1] == lslot[i] for d in diff):
            target_slots.append(lslot[i])
            used.append(True)
        else:
            used.append(False)  # a constant with respect to every source
    return Slice(tuple(code), leaf_ids, leaf_vals, tuple(diff), tuple(groups), tuple(target_slots), connected, used)


# --------------------------------------------------------------------------
# The pure function a slice stands for, and the transforms over it.


def _forward_fn(code: tuple, diff: tuple, target_slots: tuple) -> Callable:
    """``forward(leaf_vals, *diff_vals) -> target values``: the slice as a pure function."""

    def forward(leaf_vals: Sequence[Any], *dvals: Any) -> tuple:
        env_l = list(leaf_vals)
        eps = {}
        for d, dv in zip(diff, dvals):
            if d[0] == "leaf":
                env_l[d[1]] = dv
            else:
                eps[d[1]] = dv
        env_p: list = []
        for prim, params, ins, nout in code:
            args = [env_l[s] if s >= 0 else env_p[-1 - s] for s in ins]
            out = prim.impl(*args, **dict(params))
            outs = out if prim.multiple_results else (out,)
            for o in outs:
                # An intermediate source gets a zero perturbation added where it is
                # produced: its cotangent is dz/dy while sources upstream still
                # receive the total derivative through it.
                e = eps.get(-1 - len(env_p))
                env_p.append(o if e is None else o + e)
        return tuple(env_l[s] if s >= 0 else env_p[-1 - s] for s in target_slots)

    return forward


def _diff_primals(diff: tuple, leaf_vals: Sequence[Any]) -> list:
    return [leaf_vals[d[1]] if d[0] == "leaf" else jnp.zeros(d[2], d[3]) for d in diff]


def _is_complex(x: Any) -> bool:
    return jnp.iscomplexobj(x)


def _make_vjp(key: tuple) -> Callable:
    code, diff, groups, target_slots, cot_given = key[1:6]
    forward = _forward_fn(code, diff, target_slots)

    def grads(leaf_vals: Sequence[Any], cts: Sequence[Any]) -> tuple:
        primals = _diff_primals(diff, leaf_vals)
        outs, pullback = jax.vjp(lambda *d: forward(leaf_vals, *d), *primals)
        cts_it = iter(cts)
        full = []
        for o, given in zip(outs, cot_given):
            c = jnp.broadcast_to(next(cts_it), o.shape) if given else jnp.ones_like(o)
            # TF's convention for complex values is the conjugate of JAX's.
            full.append(jnp.conj(c).astype(o.dtype) if _is_complex(o) else jnp.asarray(c, o.dtype))
        g = pullback(tuple(full))
        res = []
        for grp in groups:
            acc = g[grp[0]]
            for k in grp[1:]:
                acc = acc + g[k]
            res.append(jnp.conj(acc) if _is_complex(acc) else acc)
        return tuple(res)

    return grads


_TRANSFORMS: dict[str, Callable[[tuple], Callable]] = {"vjp": _make_vjp}


def register_transform(name: str, make: Callable[[tuple], Callable]) -> None:
    """Register a way to turn a slice key into ``fn(leaf_vals, extra_args) -> tuple``."""
    _TRANSFORMS[name] = make


def _make(key: tuple) -> Callable:
    fn = _TRANSFORMS[key[0]](key)
    return jax.jit(fn) if _compile else fn


def _compiled(key: tuple, avals: tuple) -> Callable:
    return _cache.get((key, avals, _compile), lambda: _make(key))


def _replay_impl(*vals: Any, key: tuple, n_leaves: int) -> tuple:
    avals = tuple(_aval(v) for v in vals)
    return _compiled(key, avals)(list(vals[:n_leaves]), list(vals[n_leaves:]))


# The replay itself is a primitive: computed while an outer tape records, it is
# recorded there like any op, so ``outer.gradient(inner.gradient(y, x), x)``
# differentiates the compiled replay (nested tapes, any order).
REPLAY = Primitive("replay", _replay_impl, multiple_results=True)


def run_transform(
    sl: Slice,
    key_extra: tuple,
    transform: str,
    extra: Sequence[Any],
    extra_ids: Sequence[Any],
) -> tuple:
    """Run ``transform`` over the slice; record it on outer tapes that watch its inputs.

    ``extra`` are further data arguments (cotangents) with their tensor ids
    (None for constants), so that they too can be differentiated by an outer tape.
    """
    key = (transform, sl.code, sl.diff, sl.groups, sl.target_slots) + tuple(key_extra)
    vals = list(sl.leaf_vals) + list(extra)
    ids = tuple(sl.leaf_ids) + tuple(extra_ids)
    params = {"key": key, "n_leaves": len(sl.leaf_vals)}
    outs_vals = _replay_impl(*vals, **params)
    outs = [Tensor(o) for o in outs_vals]
    if state.recording:
        record(REPLAY, params, ids, tuple(vals), outs)
    return tuple(outs)
