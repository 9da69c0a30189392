"""The segmented tier: a long slice's gradient as a chain of compiled segment pullbacks.

Compiling a whole slice costs time that grows faster than linearly with its length
(800 recorded ops: 4 s on a 2-core CPU; 2,400: 40 s), so long slices used to stay in
tier 0 (one small kernel per op) forever. Here a hot long slice is cut into segments
of ``tapejax.config.replay_segment_eqns`` consecutive equations. Each segment's pullback
(cotangents of its live outputs -> cotangents of its live inputs) is one small compiled
program, keyed by the segment's *structure* alone: primitives, static parameters and
wiring relative to the segment, with its inputs numbered by first use. The segments of
a loop body recorded many times therefore share one program (a 10,000-step solver
loop compiles a handful), and no single compile is more than a fraction of a second.

Only first-order eager gradients come here (the same slices the whole-slice compiled
tier takes): no outer tape or accumulator watches, no Python backward, no
intermediate source. The pullbacks follow JAX's cotangent convention inside, with TF's
conjugate applied at both ends, exactly as the compiled tier does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from .. import config as _config
from .._core._kinds import INEXACT as _INEXACT
from .._core._recorder import Pending, Tensor
from . import _kernels, _replay

__all__ = ["plan_for", "gradient", "precompile", "precompile_slice", "segmentable", "clear"]


class _Segment:
    """One segment of a plan: what to gather, which program runs it, where results go."""

    __slots__ = ("key", "in_slots", "fetch", "active", "out_slots", "program")

    def __init__(self, key: tuple, in_slots: tuple, fetch: tuple, active: tuple, out_slots: tuple):
        self.key = key
        self.in_slots = in_slots  # per live input: its slot in the slice (leaf k >= 0, produced -1-j)
        self.fetch = fetch  # per live input: (eqn index, argument position) holding its recorded value
        self.active = active  # per live input: differentiable and reached from a source
        self.out_slots = out_slots  # per live output with a cotangent: its slot
        self.program: Any = None


class _Plan:
    __slots__ = ("segments", "n_leaves")

    def __init__(self, segments: list, n_leaves: int):
        self.segments = segments
        self.n_leaves = n_leaves


_lock = threading.Lock()
_plans: OrderedDict[Any, _Plan | None] = OrderedDict()
_PLANS_MAX = 64
# Segment programs by structure: (canonical code, active mask, output count) -> jitted pullback.
_programs: dict[Any, Any] = {}


def clear() -> None:
    with _lock:
        _plans.clear()
        _programs.clear()


_replay.clear_hooks.append(clear)


def _slice_key(sl: Any) -> tuple:
    return (sl.code, sl.diff, sl.groups, sl.target_slots, tuple(_replay._aval(v) for v in sl.leaf_vals))


def segmentable(sl: Any) -> bool:
    """Whether the segmented tier can answer for ``sl`` (only leaf sources; some equations)."""
    return bool(sl.eqns) and len(sl.eqns) == len(sl.code) and all(d[0] == "leaf" for d in sl.diff)


def plan_for(sl: Any) -> _Plan | None:
    """The cached plan of ``sl``'s structure (built on first sight), or None if not segmentable."""
    if not segmentable(sl):
        return None
    key = _slice_key(sl)
    with _lock:
        if key in _plans:
            _plans.move_to_end(key)
            return _plans[key]
    plan = _build(sl)
    with _lock:
        _plans[key] = plan
        while len(_plans) > _PLANS_MAX:
            _plans.popitem(last=False)
    return plan


def _period(code: tuple, size: int) -> int | None:
    """The period of the slice's structure in its middle (a loop body's length), if one of
    at most ``size // 2`` equations repeats: segments of a multiple of it all start at the
    same phase of the body, so they share one program."""
    producer: dict[int, tuple] = {}
    sig = []
    j = 0
    for e, (prim, params, ins, nout) in enumerate(code):
        refs = []
        for s in ins:
            src = producer.get(s)
            refs.append(("l",) if src is None else (e - src[0], src[1]))
        sig.append((prim, params, nout, tuple(refs)))
        for k in range(nout):
            producer[-1 - j] = (e, k)
            j += 1
    mid = len(code) // 2
    for p in range(1, size // 2 + 1):
        if mid + 3 * p > len(code):
            break
        if all(sig[m] == sig[m + p] for m in range(mid, mid + 2 * p)):
            return p
    return None


def _build(sl: Any) -> _Plan:
    code = sl.code
    size = max(1, int(getattr(_config, "replay_segment_eqns", 128)))
    p = _period(code, size)
    if p:
        size = p * max(1, size // p)
    # Produced slot of each equation's outputs, and the last equation reading each slot.
    out_slots: list[tuple] = []
    j = 0
    for _prim, _params, _ins, nout in code:
        out_slots.append(tuple(-1 - (j + k) for k in range(nout)))
        j += nout
    last_use: dict[int, int] = {}
    for e, (_prim, _params, ins, _n) in enumerate(code):
        for s in ins:
            last_use[s] = e
    targets = set(sl.target_slots)
    # Reached from a source, and of an inexact dtype: the values that carry cotangents.
    reach = {d[1] for d in sl.diff}
    inexact: dict[int, bool] = {}
    for e, (_prim, _params, ins, _n) in enumerate(code):
        vals = sl.eqns[e].in_vals
        for s, v in zip(ins, vals):
            if s not in inexact:
                inexact[s] = jnp.result_type(v) in _INEXACT
        if any(s in reach for s in ins):
            reach.update(out_slots[e])
    segments: list[_Segment | None] = []
    for a in range(0, len(code), size):
        b = min(a + size, len(code))
        local: dict[int, int] = {}  # produced slot -> index among the segment's own outputs
        live: dict[int, int] = {}  # outside slot -> live input index
        in_slots: list[int] = []
        fetch: list[tuple] = []
        canon = []
        n_local = 0
        for e in range(a, b):
            prim, params, ins, nout = code[e]
            refs = []
            for p, s in enumerate(ins):
                if s in local:
                    refs.append(("l", local[s]))
                    continue
                k = live.get(s)
                if k is None:
                    k = live[s] = len(in_slots)
                    in_slots.append(s)
                    fetch.append((e, p))
                refs.append(("i", k))
            canon.append((prim, params, tuple(refs), nout))
            for s in out_slots[e]:
                local[s] = n_local
                n_local += 1
        # Live outputs: read after the segment or a target, and carrying a cotangent.
        outs = tuple(s for s in local if (last_use.get(s, -1) >= b or s in targets) and s in reach
                     and inexact.get(s, True))
        active = tuple(s in reach and inexact.get(s, False) for s in in_slots)
        if not outs or not any(active):
            segments.append(None)  # nothing flows back through this segment
            continue
        key = (tuple(canon), active, tuple(local[s] for s in outs))
        segments.append(_Segment(key, tuple(in_slots), tuple(fetch), active, outs))
    return _Plan(segments, len(sl.leaf_vals))


def _forward(key: tuple, act: Sequence[Any], const: Sequence[Any]) -> tuple:
    """The segment as a pure function: live inputs -> live outputs."""
    canon, active, out_locals = key
    ia, ic = iter(act), iter(const)
    ins = [next(ia) if a else next(ic) for a in active]
    local: list = []
    for prim, params, refs, _nout in canon:
        args = [ins[k] if kind == "i" else local[k] for kind, k in refs]
        out = prim.impl(*args, **dict(params))
        local.extend(out if prim.multiple_results else (out,))
    return tuple(local[k] for k in out_locals)


def _make_program(key: tuple) -> Callable:
    def pullback(act_vals: list, const_vals: list, cts: list) -> list:
        _outs, vjp = jax.vjp(lambda *a: _forward(key, a, const_vals), *act_vals)
        return list(vjp(tuple(cts)))

    return jax.jit(pullback)


def _program(seg: _Segment) -> Callable:
    prog = seg.program
    if prog is None:
        with _lock:
            prog = _programs.get(seg.key)
            if prog is None:
                prog = _programs[seg.key] = _make_program(seg.key)
        seg.program = prog
    return prog


def _value(sl: Any, slot: int, fetch: tuple) -> Any:
    if slot >= 0:
        return sl.leaf_vals[slot]
    e, p = fetch
    return sl.eqns[e].in_vals[p]


def gradient(sl: Any, plan: _Plan, targets: Sequence[Tensor], given: Sequence[Any]) -> tuple:
    """Per connected source group of ``sl``, its gradient, through the plan's segment pullbacks.

    ``targets`` are the used targets and ``given`` their output gradients (arrays,
    or None for ones), as for the compiled tier.
    """
    ct: dict[int, Any] = {}
    for t, s, g in zip(targets, sl.target_slots, given):
        seed = _replay.seed_cotangent(t._value, g)
        ct[s] = seed if s not in ct else ct[s] + seed
    for seg in reversed(plan.segments):
        if seg is None:
            continue
        cts = [ct.pop(s, None) for s in seg.out_slots]
        if all(c is None for c in cts):
            continue
        act_vals: list = []
        const_vals: list = []
        for s, f, a in zip(seg.in_slots, seg.fetch, seg.active):
            (act_vals if a else const_vals).append(_value(sl, s, f))
        if any(c is None for c in cts):
            # A live output no later op reads with a cotangent: a zero one (rare; keeps one
            # program signature per segment structure).
            shapes = jax.eval_shape(lambda *a, k=seg.key, c=const_vals: _forward(k, a, c), *act_vals)
            cts = [jnp.zeros(o.shape, o.dtype) if c is None else c for o, c in zip(shapes, cts)]
        res = _program(seg)(act_vals, const_vals, cts)
        it = iter(res)
        for s, a in zip(seg.in_slots, seg.active):
            if a:
                c = next(it)
                prev = ct.get(s)
                ct[s] = c if prev is None else prev + c
    d_cts = []
    for d in sl.diff:
        c = ct.get(d[1])
        d_cts.append(jnp.zeros(jnp.shape(sl.leaf_vals[d[1]]), jnp.result_type(sl.leaf_vals[d[1]])) if c is None else c)
    return tuple(Tensor(g) for g in _replay.sum_groups(d_cts, sl.groups))


def _kind(v: Any) -> tuple:
    if isinstance(v, Pending):  # lazy mode: a value not computed yet, as the array it will be
        return (_kernels.ArrayImpl, _replay._aval(v))
    return (type(v), () if isinstance(v, bool | int | float | complex) else
            (tuple(jnp.shape(v)), jnp.result_type(v), jax.typeof(v).weak_type))


def precompile(sl: Any, plan: _Plan) -> Callable[[], None] | None:
    """A thunk that compiles the plan's distinct segment programs, run on stand-in zeros of
    the inputs' shapes and kinds (the thunk holds no tensor of the tape)."""
    todo: dict[Any, tuple] = {}
    for seg in plan.segments:
        if seg is None or seg.key in todo:
            continue
        try:
            kinds = [_kind(v) for v in (_value(sl, s, f) for s, f in zip(seg.in_slots, seg.fetch))]
        except TypeError:
            return None
        todo[seg.key] = (seg.active, kinds)
    if not todo:
        return None

    def make(kind: tuple) -> Any:
        typ, info = kind
        if not info:
            return typ(0)
        shape, dtype, weak = info
        if weak:
            raise TypeError("weakly typed array")
        return jnp.zeros(shape, dtype)

    def build() -> None:
        for key, (active, kinds) in todo.items():
            vals = [make(k) for k in kinds]
            act = [v for v, a in zip(vals, active) if a]
            const = [v for v, a in zip(vals, active) if not a]
            shapes = jax.eval_shape(lambda *a, k=key, c=const: _forward(k, a, c), *act)
            cts = [jnp.zeros(o.shape, o.dtype) for o in shapes]
            with _lock:
                prog = _programs.get(key)
                if prog is None:
                    prog = _programs[key] = _make_program(key)
            jax.block_until_ready(prog(act, const, cts))

    return build


def plan_for_checked(sl: Any) -> _Plan:
    """``plan_for`` of a slice the tier policy found segmentable."""
    plan = plan_for(sl)
    if plan is None:
        raise AssertionError("the segmented tier was chosen for a slice it cannot segment")
    return plan


def precompile_slice(sl: Any) -> Callable[[], None] | None:
    """``precompile`` of ``sl``'s plan (built now, in the foreground, from the slice)."""
    plan = plan_for(sl)
    return None if plan is None else precompile(sl, plan)
