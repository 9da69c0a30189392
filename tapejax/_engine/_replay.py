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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax._src import config as _jconfig

from .._core._kinds import INEXACT as _INEXACT
from .._core._recorder import Eqn, Pending, Primitive, Tensor, record, state
from . import _kernels

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
    # Eager gradients answered by each tier (``_tiers``), and background compiles started.
    interpreted: int = 0
    compiled: int = 0
    background_compiles: int = 0
    # Eager gradients of long slices answered by compiled runs of equations (``_segments``).
    segmented: int = 0
    # Kernel calls (eager ops, tier-0 pullbacks) answered on the host before their compile.
    host_first_calls: int = 0


class _Cache:
    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
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


    def put(self, key: Any, fn: Callable) -> None:
        with self.lock:
            if key in self.data:
                return  # a concurrent first use compiled it already: keep that one
            self.data[key] = fn
            while len(self.data) > self.maxsize:
                self.data.popitem(last=False)
                self.evictions += 1


def _env_cache_size() -> int:
    # Checked at import: a size < 1 would make every lookup evict from an empty
    # cache (a KeyError on each gradient), far from the setting that caused it.
    raw = os.environ.get("TAPEJAX_REPLAY_CACHE_SIZE", "512")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(
            f"TAPEJAX_REPLAY_CACHE_SIZE must be a positive integer (how many compiled replays to keep), "
            f"got {raw!r}. Unset it for the default (512)."
        )
    return n


_cache = _Cache(_env_cache_size())
_compile = os.environ.get("TAPEJAX_DISABLE_JIT", "") in ("", "0")


def cache_info() -> CacheInfo:
    """Hits, misses, evictions and size of the compiled-replay cache, and per-tier counts.

    ``interpreted`` / ``compiled`` / ``segmented`` count eager gradients answered by
    each replay tier (see ``tapejax.config.replay_tier``); ``background_compiles`` the
    hot slices compiled on the background thread; ``host_first_calls`` the kernel calls
    answered by NumPy before the kernel's compile (``tapejax.config.kernel_host_first_calls``).

    Example:
        >>> import tapejax as tf
        >>> info = tf.replay_cache_info(); info.size <= info.maxsize
        True
    """
    with _cache.lock:
        return CacheInfo(_cache.hits, _cache.misses, _cache.evictions, len(_cache.data), _cache.maxsize, _compile,
                         tier_counts["interpreted"], tier_counts["compiled"], tier_counts["background_compiles"],
                         tier_counts["segmented"], _kernels.host_counts["answered"])


# Run first by ``cache_clear``: work still pending (lazy mode's programs, ``_lazy``) belongs to
# before the clear; run later, it would refill the cache and the statistics after it.
pending_hooks: list[Callable[[], None]] = []


def cache_clear() -> None:
    """Drop every compiled replay and reset the statistics (tier sightings included)."""
    for hook in pending_hooks:
        hook()
    with _cache.lock:
        _cache.data.clear()
        _cache.hits = _cache.misses = _cache.evictions = 0
        for k in tier_counts:
            tier_counts[k] = 0
        _kernels.host_counts["answered"] = 0
    for hook in clear_hooks:
        hook()


# Per-tier counts, kept by ``_tiers`` (which imports this module) and reported here.
tier_counts = {"interpreted": 0, "compiled": 0, "background_compiles": 0, "segmented": 0}
# Called by cache_clear: ``_tiers`` forgets its sightings (a cleared cache starts cold).
clear_hooks: list[Callable[[], None]] = []


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


_ArrayImpl: Any = _kernels.ArrayImpl


def _aval(v: Any) -> Any:
    # What jit would specialise on; part of the cache key so a loop whose
    # shapes change every step evicts old programs instead of growing jit's own cache.
    if type(v) is _ArrayImpl:  # (the common case first: isinstance on jax.Array costs more)
        return (v.shape, v.dtype, v.weak_type)
    if isinstance(v, Pending):
        # Lazy mode: a recorded value not computed yet, keyed as the array it will be (a tier's
        # sightings and a background compile then share the key of the run that computes it).
        a = v.peek()
        return (a.shape, a.dtype, a.weak_type)
    if isinstance(v, jax.Array):
        return (v.shape, v.dtype, v.weak_type)
    if isinstance(v, np.ndarray | np.generic):
        return (v.shape, v.dtype)
    if type(v) in _PY_SCALARS:
        # A Python scalar as jit sees it (2.0: a weak float32[], float64[] under x64): the same
        # key as that weak array, which it becomes inside a compiled caller (a lazy program run
        # whole calls the replay with it), and a different one under x64.
        a = jax.typeof(v)
        return (a.shape, a.dtype, a.weak_type)
    return type(v)


def _freeze(params: dict) -> tuple:
    return tuple(sorted(params.items())) if params else ()


_PY_SCALARS = frozenset({float, int, complex, bool})


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
    # The recorded equations behind ``code``, in order: their input values are the
    # forward residuals a gradient can reuse instead of recomputing (``vjp_res``).
    eqns: list = field(default_factory=list)
    # Per entry of ``diff``, the tensor id it differentiates (the interpreted tier works on ids).
    diff_ids: list = field(default_factory=list)
    # A slice from the cut cache (``cut``): the keys derived from its structure, built and hashed
    # once per cached cut (``structure_key``), not once per gradient. None: not cached.
    keys: dict | None = None


def build_slice(
    eqns: Sequence[Eqn],
    targets: Sequence[Tensor],
    source_ids: Sequence[tuple],
    known: dict,
    origins: list | None = None,
) -> Slice:
    """Cut the record down to what lies between ``source_ids`` and ``targets``.

    ``source_ids[k]`` is a tuple of ids whose gradients are summed (one id for a
    tensor, every read for a variable). ``known`` maps ids to values for sources
    and targets that may not appear as equation inputs. ``origins``, when given,
    gets per leaf where it came from: ``(j, p)``, input ``p`` of the slice's
    equation ``j``, or ``(~g, m)``, id ``m`` of source ``g`` (``cut``'s template).
    """
    target_ids = [t._id if t._aval.dtype in _INEXACT else None for t in targets]
    needed = {i for i in target_ids if i is not None}
    # The three walks below run once per gradient over the whole record (the per-op cost of a
    # gradient): written for speed, with single-output equations (most ops) unrolled.
    cand: list[Eqn] = []
    for e in reversed(eqns):
        outs = e.out_ids
        if len(outs) == 1:
            if outs[0] not in needed:
                continue
        else:
            for o in outs:
                if o in needed:
                    break
            else:
                continue
        cand.append(e)
        if e.prim.differentiable:
            # A non-differentiable op (round, zeros_like) is recorded so that its
            # outputs can be sources, but no gradient flows into its inputs.
            needed.update(e.in_ids)  # (a None from a constant input is dropped below)
    needed.discard(None)
    cand.reverse()

    connected = [any(i in needed for i in ids) for ids in source_ids]
    src = {i for ids, c in zip(source_ids, connected) if c for i in ids if i in needed}
    reach = src
    sl: list[Eqn] = []
    for e in cand:
        if not e.prim.differentiable:
            continue  # its outputs are constants of the slice (leaves with their recorded values)
        for i in e.in_ids:
            if i in reach:
                break
        else:
            continue
        sl.append(e)
        reach.update(e.out_ids)

    lslot: dict[int, int] = {}
    pslot: dict[int, int] = {}
    cslot: dict[tuple, int] = {}
    leaf_ids: list = []
    leaf_vals: list = []

    def leaf(i: Any, v: Any, where: Any = None) -> int:
        if i is not None:
            k = lslot.get(i)
            if k is not None:
                return k
            lslot[i] = len(leaf_vals)
        elif type(v) in _PY_SCALARS:
            # Equal Python constants (``y * 1.5`` in a loop) share one leaf: each leaf is
            # a jit argument, and a Python scalar argument costs a conversion per call.
            # repr keeps -0.0 apart from 0.0 and 1 apart from 1.0 and True.
            ck = (type(v), repr(v))
            k = cslot.get(ck)
            if k is not None:
                return k
            cslot[ck] = len(leaf_vals)
        leaf_ids.append(i)
        leaf_vals.append(v)
        if origins is not None:
            origins.append(where)
        return len(leaf_vals) - 1

    code = []
    pget = pslot.get
    for j, e in enumerate(sl):
        ins = []
        for p, (i, v) in enumerate(zip(e.in_ids, e.in_vals)):
            k = pget(i) if i is not None else None
            ins.append(k if k is not None else leaf(i, v, (j, p)))
        outs = e.out_ids
        if len(outs) == 1:
            pslot[outs[0]] = -1 - len(pslot)
        else:
            for o in outs:
                pslot[o] = -1 - len(pslot)
        ps = e.params
        code.append((e.prim, tuple(sorted(ps.items())) if ps else (), tuple(ins), len(outs)))

    diff: list = []
    diff_ids: list = []
    dindex: dict[int, int] = {}
    groups = []
    for gi, (ids, c) in enumerate(zip(source_ids, connected)):
        if not c:
            continue
        g = []
        for m, i in enumerate(ids):
            if i not in needed:
                continue
            if i not in dindex:
                dindex[i] = len(diff)
                diff_ids.append(i)
                if i in pslot:
                    v = known[i]
                    diff.append(("eps", pslot[i], v.shape, v.dtype))
                else:
                    diff.append(("leaf", leaf(i, known[i], (~gi, m)) if i not in lslot else lslot[i]))
            g.append(dindex[i])
        groups.append(tuple(g))

    target_slots = []
    used = []
    for _t, i in zip(targets, target_ids):
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
    return Slice(tuple(code), leaf_ids, leaf_vals, tuple(diff), tuple(groups), tuple(target_slots), connected, used, sl,
                 diff_ids)


class HashedTuple(tuple):
    """A tuple hashed once: a slice's structure key (its whole code) used on every step of a
    training loop. Looked up as the same object each time, a dict finds it by identity."""

    _h: int

    def __new__(cls, items: Any) -> HashedTuple:
        self = tuple.__new__(cls, items)
        self._h = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._h

    def __eq__(self, other: object) -> bool:
        return self is other or tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


def structure_key(sl: Slice, what: tuple, make: Callable[[], tuple]) -> tuple:
    """``make()``, a key fixed by ``sl``'s structure and ``what``: built and hashed once per cached cut."""
    ks = sl.keys
    if ks is None:
        return make()
    k = ks.get(what)
    if k is None:
        k = ks[what] = HashedTuple(make())
    return k


class _Template:
    """A cut, without the step's values: what ``cut`` rebuilds a slice from on a hit."""

    __slots__ = ("code", "diff", "groups", "target_slots", "connected", "used", "eqn_idx", "leaf_org", "diff_org",
                 "keys")

    def __init__(self, sl: Slice, eqn_idx: tuple, leaf_org: tuple, diff_org: tuple):
        self.code, self.diff, self.groups, self.target_slots = sl.code, sl.diff, sl.groups, sl.target_slots
        self.connected, self.used = tuple(sl.connected), tuple(sl.targets_used)
        # Positions in the record of the slice's equations: a range when they are a run of it (a
        # training step's slice is most often the whole record), so a hit picks them with one slice
        # of the record's list rather than an index per equation (scalar_chain: 200 a gradient).
        run = range(eqn_idx[0], eqn_idx[0] + len(eqn_idx)) if eqn_idx else range(0)
        self.eqn_idx = run if tuple(run) == eqn_idx else eqn_idx
        self.leaf_org = leaf_org  # per leaf: (j, p) input p of slice equation j, or (~g, m) id m of source g
        self.diff_org = diff_org  # per differentiated id: (g, m), id m of source g
        self.keys: dict = {}


# (record signature, targets, sources, their avals, x64) -> _Template; bounded, least recently used first out.
_cuts: OrderedDict = OrderedDict()
_CUTS_MAX = 256
_cuts_lock = threading.Lock()  # (threads share the cache: an eviction must not race a move_to_end)
cut_stats = {"hits": 0, "misses": 0}
_X64 = _jconfig.enable_x64


def cut(tape: Any, targets: Sequence[Tensor], source_ids: Sequence[tuple], known: dict) -> Slice:
    """``build_slice`` over ``tape``'s record, from the cache of cuts when the record repeats.

    Lazy mode keeps ``tape.sig``, the record's structure (node numbers and ids relative to the
    tape's first id). A training step records the same structure every step, so its cut (which
    equations, the code, the leaves' positions) is the same: only the values differ, and they are
    read from the current record at the template's positions. Anything the signature does not
    cover (an equation recorded outside the lazy recorder, a rollback) misses the cache.
    """
    sig = tape.sig
    eqns = tape.eqns
    n = tape.sig_n
    if sig is None or n == 0 or n != len(eqns):
        return build_slice(eqns, targets, source_ids, known)
    b = tape.first_id
    try:
        # (list comprehensions: a generator per source cost a training step's gradient µs)
        key = (tuple(sig),
               tuple([(t._id - b if t._id >= b else -t._id, t._aval.dtype in _INEXACT) for t in targets]),
               tuple([tuple([i - b if i >= b else -i for i in ids]) for ids in source_ids]),
               tuple([_aval(v) for v in known.values()]),
               _X64.value)
        with _cuts_lock:
            t = _cuts.get(key)
            if t is not None and len(_cuts) > _CUTS_MAX // 2:
                # Recency matters only once evictions are near: below that, a hit skips hashing and
                # comparing the key (the record's whole signature) a second time.
                _cuts.move_to_end(key)
    except TypeError:  # an unhashable aval: no cache
        return build_slice(eqns, targets, source_ids, known)
    if t is not None:
        cut_stats["hits"] += 1
        ix = t.eqn_idx
        sle = eqns[ix.start:ix.stop] if type(ix) is range else [eqns[k] for k in ix]
        leaf_ids = []
        leaf_vals = []
        for j, p in t.leaf_org:
            if j >= 0:
                e = sle[j]
                leaf_ids.append(e.in_ids[p])
                leaf_vals.append(e.in_vals[p])
            else:
                i = source_ids[~j][p]
                leaf_ids.append(i)
                leaf_vals.append(known[i])
        return Slice(t.code, leaf_ids, leaf_vals, t.diff, t.groups, t.target_slots, list(t.connected), list(t.used),
                     sle, [source_ids[g][m] for g, m in t.diff_org], t.keys)
    cut_stats["misses"] += 1
    origins: list = []
    sl = build_slice(eqns, targets, source_ids, known, origins)
    pos = {id(e): k for k, e in enumerate(eqns)}
    where: dict = {}
    for g, ids in enumerate(source_ids):
        for m, i in enumerate(ids):
            where.setdefault(i, (g, m))
    t = _Template(sl, tuple(pos[id(e)] for e in sl.eqns), tuple(origins), tuple(where[i] for i in sl.diff_ids))
    sl.keys = t.keys
    with _cuts_lock:
        _cuts[key] = t
        while len(_cuts) > _CUTS_MAX:
            _cuts.popitem(last=False)
    return sl


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
        for prim, params, ins, _nout in code:
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


def seed_cotangent(out: Any, given: Any) -> Any:
    """The cotangent a target starts with: ones, or its output gradient broadcast to its shape.
    TF's convention for complex values is the conjugate of JAX's, hence the conj."""
    c = jnp.ones_like(out) if given is None else jnp.broadcast_to(given, out.shape)
    return jnp.conj(c).astype(out.dtype) if _is_complex(out) else jnp.asarray(c, out.dtype)


def sum_groups(cts: Sequence[Any], groups: tuple) -> list:
    """Per source, the sum of its differentiable inputs' cotangents (a variable read several
    times has one input per read), conjugated for complex values as TF does."""
    res = []
    for grp in groups:
        acc = cts[grp[0]]
        for k in grp[1:]:
            acc = acc + cts[k]
        res.append(jnp.conj(acc) if _is_complex(acc) else acc)
    return res


def _make_vjp(key: tuple) -> Callable:
    code, diff, groups, target_slots, cot_given = key[1:6]
    forward = _forward_fn(code, diff, target_slots)

    def grads(leaf_vals: Sequence[Any], cts: Sequence[Any]) -> tuple:
        primals = _diff_primals(diff, leaf_vals)
        outs, pullback = jax.vjp(lambda *d: forward(leaf_vals, *d), *primals)
        cts_it = iter(cts)
        full = [seed_cotangent(o, next(cts_it) if given else None) for o, given in zip(outs, cot_given)]
        g = pullback(tuple(full))
        return tuple(sum_groups(g, groups))

    return grads


# Ops whose forward is costly enough that a gradient should not recompute it: for
# a slice that has one, ``gradient`` runs ``vjp_res`` (below). Elementwise ops
# are cheap to recompute and their inputs would cost a jit argument each.
RESIDUAL_PRIMS = frozenset({"matmul", "conv", "conv_transpose", "einsum", "tensordot", "batch_matmul"})


# TAPEJAX_REUSE_RESIDUALS=0 (or ``_replay.reuse_residuals = False``) always recomputes the forward.
reuse_residuals = os.environ.get("TAPEJAX_REUSE_RESIDUALS", "") not in ("0", "false", "False")


def _wants_residuals(code: tuple) -> bool:
    if not reuse_residuals:
        return False
    for prim, _, _, _ in code:
        if prim.name in RESIDUAL_PRIMS:
            return True
    return False


def _residuals(sl: Slice) -> tuple[tuple, list, list]:
    """The produced values the slice's equations consume: (slots, tensor ids, recorded values)."""
    slots: list = []
    ids: list = []
    vals: list = []
    seen: set = set()
    for (_, _, ins, _), e in zip(sl.code, sl.eqns):
        for s, i, v in zip(ins, e.in_ids, e.in_vals):
            if s < 0 and s not in seen:
                seen.add(s)
                slots.append(s)
                ids.append(i)
                vals.append(v)
    return tuple(slots), ids, vals


def _make_vjp_res(key: tuple) -> Callable:
    """``vjp`` that reuses the recorded forward values instead of recomputing the forward.

    The eager run already computed every intermediate value; they are passed in
    (after the leaves) and each equation's pullback is taken at its recorded
    inputs, in reverse order. Inside one ``jax.jit`` XLA then drops the forward
    outputs no pullback needs (a matmul's product), so an eager step costs one
    forward (eager) plus one backward, as a compiled step does, instead of two
    forwards plus a backward. Same function of its inputs as ``vjp``: an outer
    tape differentiates it through the leaves and the intermediates alike.
    """
    code, diff, groups, target_slots, cot_given, inter_slots, n_leaves = key[1:8]
    pos = {s: n_leaves + k for k, s in enumerate(inter_slots)}
    active_leaf = {d[1] for d in diff if d[0] == "leaf"}
    out_slots = []
    n = 0
    for _, _, _, nout in code:
        out_slots.append(tuple(-1 - (n + k) for k in range(nout)))
        n += nout
    seeds_at: dict = {}
    for k, s in enumerate(target_slots):
        seeds_at.setdefault(s, []).append(k)

    def grads(vals: Sequence[Any], cts: Sequence[Any]) -> tuple:
        it = iter(cts)
        given = [next(it) if g else None for g in cot_given]

        def seed(k: int, o: Any) -> Any:
            return seed_cotangent(o, given[k])

        ct: dict = {}
        for (prim, params, ins, _), outs_s in zip(reversed(code), reversed(out_slots)):
            if not any(s in ct or s in seeds_at for s in outs_s):
                continue
            args = [vals[s] if s >= 0 else vals[pos[s]] for s in ins]
            act = [j for j, s in enumerate(ins)
                   if (s < 0 or s in active_leaf) and jnp.issubdtype(jnp.result_type(args[j]), jnp.inexact)]
            pd = dict(params)

            def f(*d: Any, args: list = args, act: list = act, prim: Primitive = prim, pd: dict = pd) -> tuple:
                a = list(args)
                for j, v in zip(act, d):
                    a[j] = v
                out = prim.impl(*a, **pd)
                return tuple(out) if prim.multiple_results else (out,)

            outs, pullback = jax.vjp(f, *[args[j] for j in act])
            out_ct = []
            for s, o in zip(outs_s, outs):
                c = ct.get(s)
                for k in seeds_at.get(s, ()):
                    c = seed(k, o) if c is None else c + seed(k, o)
                if c is not None:
                    ct[s] = c  # an intermediate source's gradient is the cotangent arriving here
                elif jnp.issubdtype(o.dtype, jnp.inexact):
                    c = jnp.zeros_like(o)
                else:
                    c = np.zeros(o.shape, jax.dtypes.float0)
                out_ct.append(c)
            for j, c in zip(act, pullback(tuple(out_ct))):
                s = ins[j]
                ct[s] = c if s not in ct else ct[s] + c
        for s, ks in seeds_at.items():
            if s >= 0:  # a source that is itself a target
                for k in ks:
                    ct[s] = seed(k, vals[s]) if s not in ct else ct[s] + seed(k, vals[s])
        g = []
        for d in diff:
            c = ct.get(d[1])
            if c is None:
                c = jnp.zeros_like(vals[d[1]]) if d[0] == "leaf" else jnp.zeros(d[2], d[3])
            g.append(c)
        return tuple(sum_groups(g, groups))

    return grads


_TRANSFORMS: dict[str, Callable[[tuple], Callable]] = {"vjp": _make_vjp, "vjp_res": _make_vjp_res}


def register_transform(name: str, make: Callable[[tuple], Callable]) -> None:
    """Register a way to turn a slice key into ``fn(leaf_vals, extra_args) -> tuple``."""
    _TRANSFORMS[name] = make


# Hooks ``(key, fn) -> compiled callable, or None``: a slice that needs special
# compilation provides it (recompute_grad on XLA:CPU); the first answer wins.
jit_hooks: list[Callable[[tuple, Callable], Callable | None]] = []


def _make(key: tuple) -> Callable:
    fn = _TRANSFORMS[key[0]](key)
    if not _compile:
        return fn
    for hook in jit_hooks:
        compiled = hook(key, fn)
        if compiled is not None:
            return compiled
    if key[0] in _STAGED:
        return _kernels.staged(fn)
    return jax.jit(fn)


# Transforms compiled whole on their first sighting (a jacobian never runs interpreted: see
# compat_docs/performance.md): their first call runs a fast-compiled program
# (_kernels.staged). Gradient slices are not here: tier 0 answers their first sightings, and
# the tier that compiles them (hot, in the background) builds a small slice's fast program
# first and its full one later, counting runs (``precompile``, ``_kernels.FastFirst``).
_STAGED = frozenset({"jacobian", "batch_jacobian"})


def _compiled(key: tuple, avals: tuple) -> Callable:
    return _cache.get((key, avals, _compile), lambda: _make(key))


def _replay_impl(*vals: Any, key: tuple, n_leaves: int) -> tuple:
    avals = tuple(_aval(v) for v in vals)
    return _compiled(key, avals)(list(vals[:n_leaves]), list(vals[n_leaves:]))


# The replay itself is a primitive: computed while an outer tape records, it is
# recorded there like any op, so ``outer.gradient(inner.gradient(y, x), x)``
# differentiates the compiled replay (nested tapes, any order).
REPLAY = Primitive("replay", _replay_impl, multiple_results=True)


def _prepare(sl: Slice, key_extra: tuple, transform: str, extra: Sequence[Any], extra_ids: Sequence[Any],
             residuals: bool = True) -> tuple:
    leaf_vals, leaf_ids = sl.leaf_vals, sl.leaf_ids
    if residuals and transform == "vjp" and _compile and sl.eqns and _wants_residuals(sl.code):
        # Reuse the recorded forward values (see _make_vjp_res): they become leaves too.
        slots, inter_ids, inter_vals = _residuals(sl)
        key_extra = tuple(key_extra) + (slots, len(leaf_vals))
        transform = "vjp_res"
        leaf_vals, leaf_ids = list(leaf_vals) + inter_vals, list(leaf_ids) + inter_ids
    ke = tuple(key_extra)
    key = structure_key(sl, ("prep", transform, ke), lambda: (transform, sl.code, sl.diff, sl.groups, sl.target_slots) + ke)
    vals = list(leaf_vals) + list(extra)
    ids = tuple(leaf_ids) + tuple(extra_ids)
    return vals, ids, {"key": key, "n_leaves": len(leaf_vals)}


class _Precompiled:
    """A program compiled ahead of its first call; a trace (which shares the cache key) gets the jit."""

    __slots__ = ("jitted", "compiled")

    def __init__(self, jitted: Callable, compiled: Callable):
        self.jitted, self.compiled = jitted, compiled

    def __call__(self, leaves: list, extra: list) -> Any:
        for v in leaves:
            if isinstance(v, jax.core.Tracer):
                return self.jitted(leaves, extra)
        for v in extra:
            if isinstance(v, jax.core.Tracer):
                return self.jitted(leaves, extra)
        return self.compiled(leaves, extra)


def precompile(sl: Slice, key_extra: tuple, transform: str, extra: Sequence[Any],
               residuals: bool = True) -> Callable[[], Any] | None:
    """A thunk that compiles the program ``run_transform`` would run and caches it, or None.

    The thunk holds only the inputs' shapes and dtypes, never their values: a
    background compile must not keep a tape's tensors alive. None when an input is
    has no abstract value jit knows, or compilation is off. ``residuals=False``: the vjp
    without the recorded forward values as inputs (lazy mode's deferred gradient).
    """
    if not _compile:
        return None
    vals, _, params = _prepare(sl, key_extra, transform, extra, [None] * len(extra), residuals)
    key, n = params["key"], params["n_leaves"]
    avals = tuple(_aval(v) for v in vals)
    try:
        # jit's own view of each argument (a Python float is a weak float32[]).
        types = [v.peek() if isinstance(v, Pending) else jax.typeof(v) for v in vals]
    except TypeError:
        return None
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in types]
    del vals

    def build() -> None:
        fn = _make(key)
        lower = getattr(fn, "lower", None)
        if lower is None:
            return  # a jit hook's special program: compiled on first use instead
        lowered = lower(specs[:n], specs[n:])
        # A small slice: the fast pipeline's program first, the full one later (``FastFirst``).
        shapes = [s.shape for s in specs] + [o.shape for o in jax.tree_util.tree_leaves(lowered.out_info)]
        compiled = _kernels.compile_whole(lowered, shapes, lambda: lower(specs[:n], specs[n:]).compile())
        _cache.put((key, avals, True), _Precompiled(fn, compiled))

    return build


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
    vals, ids, params = _prepare(sl, key_extra, transform, extra, extra_ids)
    outs_vals = _replay_impl(*vals, **params)
    outs = [Tensor(o) for o in outs_vals]
    if state.recording:
        live = _live_inputs(params["key"], vals, params["n_leaves"])
        record(REPLAY, params, tuple(i if keep else None for i, keep in zip(ids, live)), tuple(vals), outs)
    return tuple(outs)


_live_cache = _Cache(256)


def _is_var(v: Any) -> bool:
    return not hasattr(v, "val")  # a Literal carries .val; a Var does not


# JAX primitives through which no gradient flows (their outputs are piecewise constant).
_NO_GRADIENT_PRIMS = frozenset({
    "lt", "le", "gt", "ge", "eq", "ne", "floor", "ceil", "round", "stop_gradient", "and", "or", "not",
    "xor", "is_finite", "argmax", "argmin", "iota", "shift_left", "shift_right_logical", "population_count",
})


def _differentiable_deps(jaxpr: Any, needed_out: list, strict: bool = False) -> list:
    """Per input of ``jaxpr``: does a needed output depend on it at all (data dependence)?

    Nested jitted calls are followed; other higher-order primitives count all their
    inputs (conservative). Dependence through comparisons counts too: TF's graph also
    keeps relu''s and abs''s (zero) second derivatives connected. With ``strict``, only
    dependence a gradient can flow along (comparisons and the like cut it).
    """
    needed = {v for v, n in zip(jaxpr.outvars, needed_out) if n and _is_var(v)}
    for eqn in reversed(jaxpr.eqns):
        outs = [o in needed for o in eqn.outvars]
        if not any(outs):
            continue
        if strict and eqn.primitive.name in _NO_GRADIENT_PRIMS:
            continue
        inner = eqn.params.get("jaxpr")
        if eqn.primitive.name in ("pjit", "jit") and inner is not None:
            sub = _differentiable_deps(getattr(inner, "jaxpr", inner), outs, strict)
            needed.update(v for v, u in zip(eqn.invars, sub) if u and _is_var(v))
        else:
            needed.update(v for v in eqn.invars if _is_var(v))
    return [v in needed for v in jaxpr.invars]


def _live_inputs(key: tuple, vals: list, n_leaves: int) -> list:
    """Which inputs the replay's outputs really depend on (dead-code analysis of its jaxpr).

    TF connects a gradient to a source only through the ops its backward pass
    uses: d(x + x)/dx is a constant, so an outer tape sees no path back to x and
    returns None. Recording the replay with every leaf as an input would make
    it "connected" (zeros instead of None); marking dead inputs as constants
    keeps TF's answer. Cached per program and input avals, and only computed
    when an outer tape records.
    """
    avals = tuple(_aval(v) for v in vals)

    def analyse() -> Callable:
        try:
            fn = _TRANSFORMS[key[0]](key)
            closed = jax.make_jaxpr(lambda *v: fn(list(v[:n_leaves]), list(v[n_leaves:])))(*vals)
            live = _differentiable_deps(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
        except Exception:  # noqa: BLE001 - an analysis failure must only cost precision, never correctness
            live = [True] * len(vals)
        return lambda: live

    return _live_cache.get((key, avals), analyse)()
