"""Explained ``None`` gradients: why a source gets no gradient from a tape.

``tapejax.explain(tape, target, sources)`` reads the tape's record (it does not
consume the tape) and, per source, names the cause. The record shows recorded
ops only, so a cause that concerns computation the tape did NOT record
(``stop_recording``, "created before the tape", "recorded on another tape") is
inferred from cheap bookkeeping: each tape notes the id counter when it was
created and around its ``stop_recording`` windows, ``stop_gradient`` notes the
watched value it cut, and every live tape can be searched for the path this
one lacks. Causes are checked in a fixed order, most specific evidence first;
see ``explain``.
"""

from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass
from typing import Any

import jax

from .._core import _recorder as _core
from .._core._recorder import VariableBase
from .._engine import _replay
from .._ops._dtypes import INEXACT, from_np
from . import _tape_common
from ._gradient_tape import GradientTape
from ._tape_common import _as_target, _check_tensors, _is_leaf, _VarTarget

__all__ = ["NoneGradientCause", "Explanation", "NoneGradientWarning", "explain"]


class NoneGradientCause(enum.Enum):
    """Why a gradient is None (or zeros with ``unconnected_gradients='zero'``); see ``tapejax.explain``."""

    CONNECTED = "connected"  #: not None: the target depends on the source through recorded ops
    NEVER_WATCHED = "never watched"
    INTEGER_DTYPE = "integer or bool dtype"
    STOP_GRADIENT = "cut by stop_gradient"
    STOP_RECORDING = "cut by stop_recording"
    OTHER_TAPE = "recorded on another tape"
    NO_PATH = "no path from source to target"
    CREATED_BEFORE_TAPE = "created before the tape"


@dataclass(frozen=True)
class Explanation:
    """The cause of one source's None gradient, and a sentence saying what to do."""

    cause: NoneGradientCause
    message: str

    def __str__(self) -> str:
        return self.message


Cause = NoneGradientCause


class NoneGradientWarning(UserWarning):
    """Issued when ``tapejax.config.explain_none_gradients`` is on and ``gradient`` returns None."""


# --------------------------------------------------------------------------
# Graph walks over a record (only when explaining: never on the hot path).


def _forward_reach(eqns: list, start: set) -> set:
    """Every id computed, through recorded ops, from ``start`` (``start`` included)."""
    reach = set(start)
    for e in eqns:
        for i in e.in_ids:
            if i is not None and i in reach:
                reach.update(e.out_ids)
                break
    return reach


def _ancestors(eqns: list, targets: list) -> tuple[set, set]:
    """The ids the targets depend on through recorded ops, and those produced by an op."""
    need = {t._id for t in targets}
    produced: set = set()
    for e in reversed(eqns):
        if any(o in need for o in e.out_ids):
            produced.update(e.out_ids)
            need.update(i for i in e.in_ids if i is not None)
    return need, produced


def _source_ids(tape: _core.Tape, s: Any, targets: list) -> set:
    if isinstance(s, VariableBase):
        ids = set(tape.var_reads.get(s._uid, ()))
        ids.update(t._id for t in targets if isinstance(t, _VarTarget) and t.var is s)
        return ids
    return {s._id}


def _describe(k: int, s: Any) -> str:
    if isinstance(s, VariableBase):
        name = getattr(s, "_name", None) or "Variable"
        return f"source #{k} (tf.Variable {name!r})"
    return f"source #{k} (tf.Tensor shape={list(s._value.shape)} dtype={from_np(s._value.dtype).name})"


def _connected(tape: _core.Tape, targets: list, flat_sources: list) -> list:
    """Exactly what ``gradient`` decides (the same code): per source, is it connected?"""
    known = {t._id: t._value for t in targets}
    ids = GradientTape._source_ids(None, tape, flat_sources, targets, known)  # type: ignore[arg-type]
    ids = [i if s._value.dtype in INEXACT else () for i, s in zip(ids, flat_sources)]
    sl = _replay.build_slice(tape.eqns, targets, ids, known)
    return list(sl.connected)


def _explain_source(tape: _core.Tape, targets: list, k: int, s: Any, connected: bool) -> Explanation:
    what = _describe(k, s)
    if connected:
        return Explanation(Cause.CONNECTED, f"{what} is connected to the target: its gradient is not None.")
    if s._value.dtype not in INEXACT:
        return Explanation(
            Cause.INTEGER_DTYPE,
            f"{what} has dtype {from_np(s._value.dtype).name}: TF never differentiates integer or bool values. "
            "Make the source floating point (tf.cast it before computing with it, not after).",
        )
    float_targets = [t for t in targets if t._value.dtype in INEXACT]
    if not float_targets:
        names = ", ".join(sorted({from_np(t._value.dtype).name for t in targets})) or "none"
        return Explanation(
            Cause.INTEGER_DTYPE,
            f"{what}: the target has dtype {names}; an integer or bool target has no gradient. "
            "Keep the computation in floating point up to the target.",
        )

    S = _source_ids(tape, s, targets)
    born = s._uid if isinstance(s, VariableBase) else s._id
    reach = _forward_reach(tape.eqns, S)
    anc, produced = _ancestors(tape.eqns, float_targets)
    leaves = sorted(i for i in anc if i not in produced and i not in S)
    cuts = [(i, o) for kind, i, o in tape.notes if kind == "stop_gradient" and i in reach]

    # 1. A stop_gradient applied to a value computed from the source feeds the target.
    for _i, o in cuts:
        if o in anc:
            return Explanation(
                Cause.STOP_GRADIENT,
                f"{what}: the path to the target is cut by tf.stop_gradient (applied to a value computed from "
                "the source). Remove the stop_gradient if the gradient should flow.",
            )
    # 2. The target depends on a value computed during this tape's life whose
    # dependence on the source another live tape recorded (and this one did not).
    recent = [leaf for leaf in leaves if leaf >= tape.first_id]
    for other in list(_core.live_tapes) if recent else ():
        if other is tape:
            continue
        reach2 = _forward_reach(other.eqns, _source_ids(other, s, targets))
        if any(leaf in reach2 for leaf in recent):
            return Explanation(
                Cause.OTHER_TAPE,
                f"{what}: the target was computed from the source on another tape (or forward accumulator), "
                "not on this one. Watch the source on this tape, or ask the tape that recorded the computation.",
            )
    unwatched_leaves = [i for i in leaves if i not in tape.watched and i > born]
    # 3. The target depends on a value created while this tape was paused.
    windows = [(a, b) for kind, a, b in tape.notes if kind == "stop_recording"]
    for leaf in unwatched_leaves:
        if any(a <= leaf < b for a, b in windows):
            return Explanation(
                Cause.STOP_RECORDING,
                f"{what}: the target depends on a value computed inside tape.stop_recording(), which this tape "
                "did not record. Compute it outside the stop_recording block.",
            )
    # 4. ... or before this tape existed (or was last reset).
    for leaf in unwatched_leaves:
        if leaf < tape.first_id:
            return Explanation(
                Cause.CREATED_BEFORE_TAPE,
                f"{what}: the target depends on a value computed before this tape started recording (or before "
                "its last reset()), so the tape has no record of how it depends on the source. Compute it inside "
                "the tape's `with` block.",
            )
    # 5. The source itself is not watched by this tape.
    watched = (s._uid in tape.variables) if isinstance(s, VariableBase) else (s._id in tape.watched)
    if not watched:
        for other in list(_core.live_tapes):
            if other is tape:
                continue
            # Another tape that used the source while this one was alive (not a stale one).
            S2 = _source_ids(other, s, targets)
            if any(o >= tape.first_id for e in other.eqns if any(i in S2 for i in e.in_ids) for o in e.out_ids):
                return Explanation(
                    Cause.OTHER_TAPE,
                    f"{what} is watched by another tape (or forward accumulator), not by this one. Call "
                    "tape.watch(source) on this tape too.",
                )
        if isinstance(s, VariableBase):
            if not s._trainable:
                hint = "it is not trainable (tf.Variable(..., trainable=False)): call tape.watch(variable)."
            elif not tape.watch_accessed_variables:
                hint = "the tape was made with watch_accessed_variables=False: call tape.watch(variable)."
            else:
                hint = (
                    "it was not read while the tape was recording (values computed from it before the tape "
                    "started, or inside stop_recording(), do not count). Read it inside the `with` block."
                )
            return Explanation(Cause.NEVER_WATCHED, f"{what} was never watched by this tape: {hint}")
        return Explanation(
            Cause.NEVER_WATCHED,
            f"{what} was never watched by this tape: a tensor is watched only after tape.watch(tensor) (trainable "
            "variables are watched when read). Call tape.watch on it before computing the target from it.",
        )
    if isinstance(s, VariableBase) and not S:
        return Explanation(
            Cause.NO_PATH,
            f"{what} is watched but was never read while the tape was recording, so the target does not depend "
            "on it in this tape's record.",
        )
    # 6. The target itself is not in this tape's record (no recorded op made it), so the
    # values it was computed from are unknown. The latest event between the source's
    # creation and the target's that cut recording is the likely cause.
    latest = max((t._id for t in float_targets if t._id not in tape.watched), default=None)
    if latest is not None:
        likely: list = []  # (id of the evidence, explanation)
        for _, o in cuts:
            if o < latest:
                likely.append((o, Explanation(
                    Cause.STOP_GRADIENT,
                    f"{what}: the target was computed after tf.stop_gradient was applied to a value computed from "
                    "the source, and no recorded op links them otherwise: most likely the stop_gradient cut the "
                    "path. Remove it if the gradient should flow.",
                )))
        for a, b in windows:
            if b > born and a < latest:
                likely.append((min(b, latest) - 1, Explanation(
                    Cause.STOP_RECORDING,
                    f"{what}: the target was computed from values this tape did not record, after a "
                    "tape.stop_recording() block that ran after the source existed: most likely the path went "
                    "through that block. Compute those values outside stop_recording().",
                )))
        for other in list(_core.live_tapes):
            if other is tape:
                continue
            reach2 = _forward_reach(other.eqns, _source_ids(other, s, targets))
            ev = [i for i in reach2 if tape.first_id <= i < latest and i not in S]
            if ev:
                likely.append((max(ev), Explanation(
                    Cause.OTHER_TAPE,
                    f"{what}: another tape (or forward accumulator) recorded values computed from the source "
                    "while this tape was not recording them, and the target was computed afterwards: most likely "
                    "the path went through those values. Record the whole computation on this tape.",
                )))
        if likely:
            return max(likely, key=lambda p: p[0])[1]
    # 7. A value computed from the source became an integer (a cast): TF's gradient stops there.
    for e in tape.eqns:
        if any(i is not None and i in reach for i in e.in_ids) and any(o not in tape.watched for o in e.out_ids):
            return Explanation(
                Cause.INTEGER_DTYPE,
                f"{what}: a value computed from the source became integer or bool (op {e.prim.name!r}); TF does "
                "not differentiate through integer values. Keep the path in floating point.",
            )
    return Explanation(
        Cause.NO_PATH,
        f"{what}: no recorded op leads from the source to the target. The target does not depend on it, or "
        "depends on it only through values this tape did not record (computed before tape.watch(source), or "
        "before the tape started).",
    )


def explain_flat(tape: _core.Tape, targets: list, flat_sources: list) -> list:
    """One Explanation per flat source (targets already converted with ``_as_target``)."""
    connected = _connected(tape, targets, flat_sources)
    return [_explain_source(tape, targets, k, s, c) for k, (s, c) in enumerate(zip(flat_sources, connected))]


def explain(tape: GradientTape, target: Any, sources: Any) -> Any:
    """Say, per source, why ``tape.gradient(target, sources)`` is None (or zero), or that it is connected.

    Returns the structure of ``sources`` with an ``Explanation`` per source:
    ``.cause`` is a ``tapejax.NoneGradientCause`` and ``.message`` says what to
    do. The tape is only read, not consumed: call it before ``gradient`` on a
    non-persistent tape (or turn on ``tapejax.config.explain_none_gradients``
    to have ``gradient`` warn with these explanations whenever it returns None).

    Causes, checked in this order (the first that applies is reported):

    * ``CONNECTED``: not None.
    * ``INTEGER_DTYPE``: the source, or every target, is integer or bool.
    * ``STOP_GRADIENT``: ``stop_gradient`` of a value computed from the source feeds the target.
    * ``OTHER_TAPE``: another live tape recorded the path from the source to the
      target (or watches the source) and this one did not.
    * ``STOP_RECORDING``: the target depends on a value computed in this tape's ``stop_recording()``.
    * ``CREATED_BEFORE_TAPE``: the target depends on a value computed before the tape started.
    * ``NEVER_WATCHED`` (or ``OTHER_TAPE`` if another tape watched it): the tape never watched the source.
    * When no recorded op produced the target, the latest event after the source
      was created and before the target was: a ``stop_gradient`` of a value
      computed from the source (``STOP_GRADIENT``), a ``stop_recording()`` block
      (``STOP_RECORDING``), or values computed from the source on another tape (``OTHER_TAPE``).
    * ``INTEGER_DTYPE`` (again): a value computed from the source became integer (a cast).
    * ``NO_PATH``: no recorded op leads from the source to the target.

    Causes about computation the tape did not record are inferred from the
    ids of the values involved (see the module docstring), so they are the
    most likely cause, not a proof.

    Example:
        >>> import tapejax as tf
        >>> x = tf.constant(3.0)
        >>> with tf.GradientTape(persistent=True) as g:
        ...     y = x * x
        >>> tf.explain(g, y, x).cause
        <NoneGradientCause.NEVER_WATCHED: 'never watched'>
    """
    if not isinstance(tape, GradientTape):
        raise TypeError(f"explain needs a tf.GradientTape as its first argument, got {type(tape).__name__}.")
    core = tape._tape
    if core is None:
        raise RuntimeError(
            "This GradientTape holds no record: it was never entered, or it is a non-persistent tape whose "
            "gradient was already computed. Call tapejax.explain before tape.gradient, make the tape with "
            "persistent=True, or set tapejax.config.explain_none_gradients = True to have gradient() warn "
            "with the explanation."
        )
    flat_targets, _ = jax.tree_util.tree_flatten(target, is_leaf=_is_leaf)
    _check_tensors(flat_targets, "targets")
    flat_sources, sdef = jax.tree_util.tree_flatten(sources, is_leaf=_is_leaf)
    _check_tensors(flat_sources, "sources")
    targets = [_as_target(t) for t in flat_targets]
    return jax.tree_util.tree_unflatten(sdef, explain_flat(core, targets, flat_sources))


def warn_none_gradients(tape: _core.Tape, targets: list, flat_sources: list, grads: list) -> None:
    """``gradient``'s hook when ``config.explain_none_gradients`` is on: one warning naming each None's cause."""
    expl = explain_flat(tape, targets, flat_sources)
    lines = [f"  {e.cause.value}: {e.message}" for e, g in zip(expl, grads) if g is None]
    if lines:
        warnings.warn(
            f"GradientTape.gradient returned None for {len(lines)} of {len(grads)} source(s):\n" + "\n".join(lines),
            NoneGradientWarning,
            stacklevel=4,  # (this hook, GradientTape._gradient, gradient: the user's call is the fourth frame)
        )


_tape_common.warn_none_gradients = warn_none_gradients  # installed into gradient (injection: the tape is below)
