"""Which replay tier answers an eager gradient: the policy, in one place.

Tier 0 (*interpret*) walks the slice in reverse and runs each op's pullback as a
small kernel compiled once per op signature (``_interpret``). A slice seen for the
first time costs only the kernels of its distinct op signatures, so a 1,000-step
loop or a notebook's new tape answers in a fraction of a second instead of
waiting for XLA to compile the whole slice (a compile that grows faster than
linearly with the slice's length).

Tier 1 (*compile*) runs the whole slice as one compiled, cached program
(``_replay.run_transform``): the fastest steady state for a training loop. A
slice structure becomes *hot* when it has been seen ``hot`` times; its program is
then compiled on a background thread while tier 0 keeps answering, and the
switch happens exactly ``lag`` sightings later (waiting for the compile if it is
still running). The switch point is a count, not a timing, so a program's
numbers do not depend on how fast the machine compiled (the two tiers agree to
float rounding, not bit for bit).

Slices longer than ``max_compile_eqns`` equations are never compiled whole (that
compile would cost seconds to minutes): once hot they go to the *segmented* tier
(``_segments``), runs of ``replay_segment_eqns`` equations each compiled once per run
structure, on the same background-then-switch schedule.

Settings (``tapejax.config``): ``replay_tier`` ("auto", "interpret" or "compile";
env ``TAPEJAX_REPLAY_TIER``), ``replay_hot``, ``replay_lag``,
``replay_max_compile_eqns``, ``replay_segment_eqns``, ``replay_background_compile``.
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .. import config as _config
from . import _replay, _segments

__all__ = ["choose", "reset", "MODES"]

MODES = ("auto", "interpret", "compile")


_lock = threading.Lock()
# Sightings per slice signature: a bounded LRU (a program whose shapes change every
# step must not grow it without bound).
_seen: OrderedDict[Any, int] = OrderedDict()
_SEEN_MAX = 4096
# Background compiles: signature -> threading.Event set when the program is ready.
_pending: dict[Any, threading.Event] = {}
_counts = _replay.tier_counts
_COUNTER = {"compile": "compiled", "segment": "segmented"}


def reset() -> None:
    """Forget every sighting (each slice starts cold again)."""
    with _lock:
        _seen.clear()
        _pending.clear()


_replay.clear_hooks.append(reset)


def _mode() -> str:
    m = getattr(_config, "replay_tier", "auto")
    if m not in MODES:
        raise ValueError(f"tapejax.config.replay_tier must be one of {', '.join(MODES)}, got {m!r}.")
    return m


def _count(tier: str) -> None:
    with _lock:
        _counts[tier] += 1


def choose(sl: Any, key_extra: tuple, compile_now: Callable[[], Callable[[], Any] | None]) -> str:
    """``"interpret"``, ``"pending"``, ``"compile"`` or ``"segment"`` for an eager gradient over ``sl``.

    ``"pending"`` is tier 0 while the slice's compiled program is on its way (from its
    background compile's start to the switch, ``lag`` sightings later): interpreted, with
    kernels its interpreter alone would compile answered on the host instead
    (``_interpret.gradient(..., pending=True)``), since the compiled program takes over.

    ``compile_now()`` gives the thunk that compiles the compiled tier's program into
    the compile cache (or None); the background thread runs it when the slice turns hot.
    A slice too long to compile whole gets ``"segment"`` instead of ``"compile"``, with
    its segment programs compiled by the background thread.
    """
    mode = _mode()
    if mode == "compile" or not _replay._compile:
        _count("compiled")
        return "compile"
    if mode == "interpret":
        _count("interpreted")
        return "interpret"
    hot_tier = "compile"
    if len(sl.code) > _config.replay_max_compile_eqns:
        # Too long to compile whole: once hot, the segmented tier (compiled runs of equations).
        if int(getattr(_config, "replay_segment_eqns", 0)) <= 0 or not _segments.segmentable(sl):
            _count("interpreted")
            return "interpret"
        hot_tier = "segment"
        compile_now = lambda: _segments.precompile_slice(sl)  # noqa: E731
    ks = sl.keys
    key = ks.get(("tier", key_extra)) if ks is not None else None
    if key is None:
        # A cached cut (``_replay.cut``) fixes the leaves' avals too (its key holds the record's
        # avals): its signature is hashed once, not once per gradient.
        key = _Key((sl.code, sl.diff, sl.groups, sl.target_slots, key_extra, tuple(_replay._aval(v) for v in sl.leaf_vals)))
        if ks is not None:
            ks[("tier", key_extra)] = key
    hot, lag = max(1, int(_config.replay_hot)), max(0, int(_config.replay_lag))
    with _lock:
        # pop + insert: one comparison with the stored signature (a get, a set and a
        # move_to_end would compare the whole slice code three times); the insert lands last.
        n = _seen.pop(key, 0) + 1
        _seen[key] = n
        while len(_seen) > _SEEN_MAX:
            _seen.popitem(last=False)
        ready = _pending.get(key)
    if n < hot:
        _count("interpreted")
        return "interpret"
    background = bool(_config.replay_background_compile) and lag > 0
    if n == hot and background:
        build = compile_now()
        if build is not None:
            _start(key, build)
            _count("interpreted")
            return "pending"
        # Nothing to compile in the background (a Python scalar leaf, a jit hook):
        # switch now; the compile happens in the foreground.
        _count(_COUNTER[hot_tier])
        return hot_tier
    if background and n < hot + lag and ready is not None:
        # (a background compile is on its way; without one the hot tier took over at ``hot``)
        _count("interpreted")
        return "pending"
    if ready is not None:
        # The switch point: wait for the background compile (usually long done).
        ready.wait()
        with _lock:
            _pending.pop(key, None)
    _count(_COUNTER[hot_tier])
    return hot_tier


class _Key:
    """A slice signature hashed once: ``choose`` looks it up in ``_seen`` and ``_pending``
    several times per gradient, and a tuple re-hashes the whole slice code (every equation)
    at each lookup."""

    __slots__ = ("k", "h")

    def __init__(self, k: tuple):
        self.k = k
        self.h = hash(k)

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is _Key and self.h == other.h and self.k == other.k)


def _start(key: Any, build: Callable[[], Any]) -> None:
    done = threading.Event()
    with _lock:
        _pending[key] = done
        _counts["background_compiles"] += 1

    def work() -> None:
        try:
            build()
        except Exception:  # noqa: BLE001 - the switch point recompiles in the foreground and raises there
            pass
        finally:
            done.set()

    threading.Thread(target=work, name="tapejax-compile", daemon=True).start()


@atexit.register
def _drain() -> None:
    # XLA aborts the process if the interpreter shuts down under a compile in flight
    # ("terminate called ..."): let the background compiles finish first.
    with _lock:
        pending = list(_pending.values())
    for done in pending:
        done.wait()
