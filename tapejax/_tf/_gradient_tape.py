"""``GradientTape`` and ``UnconnectedGradients``: TF's API over the core recorder and replay."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp

from .. import config as _config
from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from .._engine import _interpret, _lazy, _replay, _segments, _tiers
from .._log import log_first_n as _log_first_n
from .._log import vlog as _vlog
from .._ops._dtypes import INEXACT, from_np
from .._ops._machinery import EXPORTS
from .._ops._tensor import convert_to_tensor
from .._ops.array import zeros_like
from . import _jacobian, _tape_common
from ._tape_common import UnconnectedGradients, _as_target, _check_tensors, _flatten, _unconnected, _VarTarget

__all__ = ["GradientTape", "UnconnectedGradients"]


class GradientTape:
    """Record operations for automatic differentiation (TF's ``tf.GradientTape``).

    Ops run inside ``with tape:`` on watched values (trainable variables are
    watched on first read) are recorded; ``gradient`` replays the recorded slice
    between the sources and the target through ``jax.vjp``, compiled and cached.

    Example:
        >>> import tapejax as tf
        >>> x = tf.constant(3.0)
        >>> with tf.GradientTape() as g:
        ...     g.watch(x)
        ...     y = x * x
        >>> print(g.gradient(y, x))
        tf.Tensor(6.0, shape=(), dtype=float32)
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._tape: _core.Tape | None = None
        self._persistent = bool(persistent)
        self._watch_accessed_variables = bool(watch_accessed_variables)
        self._recording = False
        self._watched_variables: tuple = ()

    # --- context ----------------------------------------------------------------

    def __enter__(self) -> GradientTape:
        _lazy.tape_starts()  # (lazy mode: a program holding a deferred gradient ends at a new tape)
        self._push_tape()
        return self

    def __exit__(self, typ: Any, value: Any, traceback: Any) -> None:
        if self._recording:
            self._pop_tape()

    def _push_tape(self) -> None:
        if self._recording:
            raise ValueError(
                "Tape is still recording, This can happen if you try to re-enter an already-active tape."
            )
        if self._tape is None:
            self._tape = _core.Tape(self._watch_accessed_variables)
        _core.push(self._tape)
        self._recording = True

    def _pop_tape(self) -> None:
        if not self._recording:
            raise ValueError("Tape is not recording.")
        _core.pop(self._tape)  # type: ignore[arg-type]
        self._recording = False

    # --- watching ---------------------------------------------------------------

    def watch(self, tensor: Any) -> None:
        """Ensure ``tensor`` (a Tensor, Variable, or nested structure of them) is traced.

        Ignored while no tape records on this thread (for instance inside
        ``stop_recording``), as in TF.
        """
        flat, _ = _flatten(tensor)
        if self._tape is None:
            # TF checks what is watched first: an ndarray gets its ValueError even on a tape never entered.
            for t in flat:
                if not isinstance(t, Tensor | VariableBase):
                    raise self._not_watchable(t)
            # TF fails here with an AttributeError from its internals; say what to do instead.
            raise RuntimeError(
                "GradientTape.watch() was called on a tape that was never entered (or is spent). Call watch() "
                "inside the tape's `with` block."
            )
        active = bool(_core.state.recording)
        # One element at a time, as TF: the tensors before a bad element are watched.
        for t in flat:
            if not isinstance(t, Tensor | VariableBase):
                raise self._not_watchable(t)
            if t._value.dtype not in INEXACT:
                _log_first_n("The dtype of the watched tensor must be floating (e.g. tf.float32), got %r", 5, from_np(t._value.dtype))
            if not active:
                continue
            if isinstance(t, VariableBase):
                self._tape.watch_variable(t)
            else:
                self._tape.watch_tensor(t)

    @staticmethod
    def _not_watchable(t: Any) -> ValueError:
        return ValueError(
            f"Passed in object {t!r} of type {type(t).__name__!r}, not tf.Tensor or tf.Variable. "
            "Only tensors and variables can be watched; convert constants with tf.constant(...)."
        )

    def watched_variables(self) -> tuple:
        """The variables watched so far, deduplicated, in the order they were created."""
        if self._tape is not None:
            return tuple(sorted(self._tape.variables.values(), key=lambda v: v._uid))
        # (kept unsorted by ``_end_use``: sorted here, if ever asked for, not at every gradient)
        return tuple(sorted(self._watched_variables, key=lambda v: v._uid))

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        """Temporarily stop recording on this tape (other tapes keep recording).

        Raises RuntimeError if the tape was never entered or is spent.
        """
        if self._tape is None:
            raise RuntimeError(
                "Trying to stop recording a tape which is not recording. Use stop_recording() inside the tape's "
                "`with` block."
            )
        self._pop_tape()
        paused, start = self._tape, _core._next_id()
        try:
            yield
        finally:
            # For tapejax.explain: values with ids in [start, end) were made while paused.
            paused.notes.append(("stop_recording", start, _core._next_id()))
            self._push_tape()

    def reset(self) -> None:
        """Clear everything recorded so far; the tape keeps recording. Use inside the block only."""
        self._pop_tape()
        self._tape = None
        self._push_tape()

    # --- gradients ----------------------------------------------------------------

    def _begin_use(self, what: str) -> _core.Tape:
        if self._tape is None:
            raise RuntimeError(
                "A non-persistent GradientTape can only be used to compute one set of gradients (or jacobians). "
                "Create the tape with tf.GradientTape(persistent=True) to call it more than once."
            )
        if self._recording:
            if not self._persistent:
                self._pop_tape()
            else:
                _log_first_n(
                    "Calling GradientTape.%s on a persistent tape inside its context is significantly less "
                    "efficient than calling it outside the context (it causes the gradient ops to be recorded on "
                    "the tape, leading to increased CPU and memory usage). Only call GradientTape.%s inside the "
                    "context if you actually want to trace the gradient in order to compute higher order "
                    "derivatives.",
                    1,
                    what,
                    what,
                )
        return self._tape

    def _end_use(self) -> None:
        if not self._persistent and self._tape is not None:
            # Keep only what watched_variables() must still answer; drop the record.
            self._watched_variables = tuple(self._tape.variables.values())
            self._tape = None

    def _source_ids(self, tape: _core.Tape, flat_sources: list, targets: list, known: dict) -> list:
        """Per source, the ids whose gradients sum to its gradient (every read for a variable)."""
        ids = []
        var_targets: dict[int, list[int]] = {}
        for t in targets:
            if isinstance(t, _VarTarget):
                var_targets.setdefault(t.var._uid, []).append(t._id)
        for s in flat_sources:
            if isinstance(s, VariableBase):
                group = tuple(tape.var_reads.get(s._uid, ())) + tuple(var_targets.get(s._uid, ()))
                ids.append(group)
            else:
                known[s._id] = _lazy.peek(s)
                # TF: only a watched source (explicitly, or as the output of a recorded op)
                # gets a gradient, even if an unwatched constant fed a recorded op; a source
                # that is itself a target still gets ones.
                if s._id in tape.watched:
                    ids.append((s._id,))
                elif any(t is s for t in targets) and not _consumed(tape, s._id, targets):
                    ids.append((s._id,))
                else:
                    # TF: an unwatched source that is also a target gets ones, unless a
                    # recorded op on the way to the targets consumed it; then None.
                    ids.append(())
        return ids

    def _cut(self, tape: _core.Tape, targets: list, flat_sources: list) -> tuple:
        """TF's dtype warnings, then the slice between ``targets`` and ``flat_sources`` (shared by
        gradient and the jacobians). Returns the slice and, per source, whether it is differentiable."""
        for t in targets:
            if t._aval.dtype not in INEXACT:
                _vlog("The dtype of the target tensor must be floating (e.g. tf.float32) when calling "
                      "GradientTape.gradient, got %r", from_np(t._aval.dtype))
        diff_sources = [s._aval.dtype in INEXACT for s in flat_sources]  # (one aval read a source)
        for s, d in zip(flat_sources, diff_sources):
            if not d:
                _vlog("The dtype of the source tensor must be floating (e.g. tf.float32) when calling "
                      "GradientTape.gradient, got %r", from_np(s._aval.dtype))
        # Lazy mode: a pending value stays pending (``_lazy.peek``); see ``gradient``.
        known: dict = {t._id: _lazy.peek(t) for t in targets}
        source_ids = self._source_ids(tape, flat_sources, targets, known)
        source_ids = [ids if d else () for ids, d in zip(source_ids, diff_sources)]
        return _replay.cut(tape, targets, source_ids, known), diff_sources

    def gradient(
        self,
        target: Any,
        sources: Any,
        output_gradients: Any = None,
        unconnected_gradients: Any = UnconnectedGradients.NONE,
    ) -> Any:
        """Gradients of ``target`` (summed if several or non-scalar) with respect to ``sources``.

        The result mirrors the structure of ``sources``. A source the target does
        not depend on gets None (or zeros with ``unconnected_gradients='zero'``).

        Example:
            >>> import tapejax as tf
            >>> x = tf.Variable(2.0); y = tf.Variable(3.0)
            >>> with tf.GradientTape() as t:
            ...     z = (x ** 2 + 2 * y) ** 2
            >>> [float(g) for g in t.gradient(z, [x, y])]
            [80.0, 40.0]
        """
        out, deferred = self._gradient(target, sources, output_gradients, unconnected_gradients)
        if deferred:
            # Lazy mode: the program holding the deferred gradient may start running now, beside
            # Python (``_lazy.gradient_returns``). Called here, after ``_gradient``'s frame is gone,
            # so the record and the slice no longer hold the forward's values: only what the caller
            # keeps leaves the program.
            _lazy.gradient_returns()
        return out

    def _gradient(self, target: Any, sources: Any, output_gradients: Any, unconnected_gradients: Any) -> tuple:
        tape = self._begin_use("gradient")
        ug = unconnected_gradients if unconnected_gradients is UnconnectedGradients.NONE else \
            _unconnected(unconnected_gradients)
        # A training step's call (one tensor, a list of variables) without the pytree walk.
        if isinstance(target, Tensor):
            flat_targets = [target]
        else:
            flat_targets, _ = _flatten(target)
            _check_tensors(flat_targets, "targets")
        sources_def = None
        if type(sources) is list and all(isinstance(s, Tensor | VariableBase) for s in sources):
            flat_sources = sources
        else:
            flat_sources, sources_def = _flatten(sources)
            _check_tensors(flat_sources, "sources")
        targets = [_as_target(t) for t in flat_targets]
        sl, diff_sources = self._cut(tape, targets, flat_sources)
        cots, cot_ids, cot_given = _output_gradients(output_gradients, targets)
        used = sl.targets_used
        given = tuple(g for g, u in zip(cot_given, used) if u)
        extra = [c for c, g, u in zip(cots, cot_given, used) if g and u]
        extra_ids = [i for i, g, u in zip(cot_ids, cot_given, used) if g and u]
        defer = sl.groups and _lazy.can_defer_gradient(sl, extra_ids)
        tier = self._tier(sl, given, extra, True) if defer else None
        try:
            if not sl.groups:
                grads: tuple = ()
            elif defer and tier == "compile":
                # Lazy mode, a hot slice: the compiled vjp joins the pending program (one fused step).
                grads = _lazy.deferred_transform(sl, (given,), "vjp", extra, extra_ids)
            elif _lazy.resolve_slice(sl, extra) or _interpret.interpret_needed(sl, extra_ids) \
                    or (tier := tier or self._tier(sl, given, extra)) in ("interpret", "pending"):
                # Watched by an outer tape or accumulator, or holding a Python grad_fn:
                # op by op, each backward op recorded where it is watched (TF's semantics).
                # Also tier 0 of an eager gradient whose slice is not hot yet (_engine/_tiers).
                used_t = [t for t, u in zip(targets, used) if u]
                given_t = [_interpret.handle(i, c) if g else None
                           for c, i, g, u in zip(cots, cot_ids, cot_given, used) if u]
                grads = _interpret.gradient(sl, used_t, given_t, pending=tier == "pending")
            elif tier == "segment":
                # A hot slice too long to compile whole: its compiled segment pullbacks (_engine/_segments).
                given_v = [c if g else None for c, g, u in zip(cots, cot_given, used) if u]
                grads = _segments.gradient(sl, _segments.plan_for_checked(sl), [t for t, u in zip(targets, used) if u], given_v)
            else:
                grads = _replay.run_transform(sl, (given,), "vjp", extra, extra_ids)
        except ValueError as e:
            # A lowered tf.while_loop with no static bound inside a tapejax.function recorded as one op:
            # JAX refuses its reverse mode when the whole function is differentiated. Say what to do, with
            # the exception class the in-step gradient raises (differences.md, "Control flow inside").
            if "Reverse-mode differentiation does not work for lax.while_loop" not in str(e):
                raise
            from ._control_flow import _unbounded_error

            raise _unbounded_error() from e
        self._end_use()

        out = []
        it = iter(grads)
        for s, c, d in zip(flat_sources, sl.connected, diff_sources):
            if c:
                out.append(next(it))
            elif not d and s._value.dtype != object and any(_same(s, t) for t in flat_targets):
                # TF: a non-float source that is itself a target still gets ones (never a string: None).
                out.append(Tensor(jnp.ones(s._value.shape, s._value.dtype)))
            elif ug is UnconnectedGradients.ZERO:
                # TF fills with zeros_like(source): an op, so a tape outside that watches the
                # source can take gradients with respect to this zero.
                # (a string source gets TF's b"" zeros: the table's zeros_like knows strings)
                out.append(zeros_like(s) if s._value.dtype != object else EXPORTS["zeros_like"](s))
            else:
                out.append(None)
        if _config.explain_none_gradients and any(g is None for g in out):
            _tape_common.warn_none_gradients(tape, targets, flat_sources, out)
        if sources_def is None:  # (a flat list: TF gives a list)
            return out, defer and tier == "compile"
        return _jacobian._like(sources, jax.tree_util.tree_unflatten(sources_def, out)), defer and tier == "compile"

    @staticmethod
    def _tier(sl: Any, given: tuple, extra: list, deferred: bool = False) -> str:
        if _interpret._is_tracer(sl.leaf_vals) or _interpret._is_tracer(extra):
            # Inside a compiled step the whole step is one program: no tiers.
            return "compile"
        return _tiers.choose(sl, (given,), lambda: _lazy.precompile_vjp(sl, (given,), extra, deferred))

    def jacobian(
        self,
        target: Any,
        sources: Any,
        unconnected_gradients: Any = UnconnectedGradients.NONE,
        parallel_iterations: Any = None,
        experimental_use_pfor: bool = True,
    ) -> Any:
        """The Jacobian of ``target`` with respect to each of ``sources``: shape ``target.shape + source.shape``.

        ``experimental_use_pfor=True`` (default) computes it as one compiled,
        vectorized program (reverse mode; forward mode when the sources are much
        smaller than the target); ``parallel_iterations=k`` then runs ``k`` rows at
        a time. ``experimental_use_pfor=False`` loops over output rows in chunks
        of ``parallel_iterations`` (bounded memory) and needs a persistent tape.
        Unconnected sources give None (zeros with ``unconnected_gradients='zero'``).
        Recorded on outer tapes: ``outer.jacobian(inner.gradient(y, x), x)`` is a Hessian.

        Example:
            >>> import tapejax as tf
            >>> x = tf.constant([1.0, 2.0])
            >>> with tf.GradientTape() as g:
            ...     g.watch(x)
            ...     y = x * x
            >>> g.jacobian(y, x).numpy().tolist()
            [[2.0, 0.0], [0.0, 4.0]]
        """
        return _jacobian.jacobian(
            self, target, sources, unconnected_gradients, parallel_iterations, experimental_use_pfor
        )

    def batch_jacobian(
        self,
        target: Any,
        source: Any,
        unconnected_gradients: Any = UnconnectedGradients.NONE,
        parallel_iterations: Any = None,
        experimental_use_pfor: bool = True,
    ) -> Any:
        """Per-example Jacobians, shape ``[b, y1, ..., x1, ...]``, for ``target[b]`` depending only on ``source[b]``.

        As in TF, row ``j`` of example ``b`` is d(sum over the batch of
        ``target[:, j]``)/d``source[b]``: a dependence across examples is not
        detected, it leaks into the result. Costs one per-example Jacobian times
        ``b``. Never None: unconnected gives zeros. ``experimental_use_pfor=False``
        needs a persistent tape.

        Example:
            >>> import tapejax as tf
            >>> x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
            >>> with tf.GradientTape() as g:
            ...     g.watch(x)
            ...     y = x * x
            >>> g.batch_jacobian(y, x).numpy().tolist()
            [[[2.0, 0.0], [0.0, 4.0]], [[6.0, 0.0], [0.0, 8.0]]]
        """
        return _jacobian.batch_jacobian(
            self, target, source, unconnected_gradients, parallel_iterations, experimental_use_pfor
        )


def _consumed(tape: _core.Tape, i: int, targets: list) -> bool:
    """Is tensor ``i`` an input of a recorded op that some target depends on?"""
    needed = {t._id for t in targets}
    for e in reversed(tape.eqns):
        if any(o in needed for o in e.out_ids):
            if i in e.in_ids:
                return True
            needed.update(j for j in e.in_ids if j is not None)
    return False


def _same(a: Any, b: Any) -> bool:
    return a is b


def _output_gradients(output_gradients: Any, targets: list) -> tuple[list, list, list]:
    """Flatten ``output_gradients`` to one weight per target, checked against TF's rules."""
    if output_gradients is None:
        return [None] * len(targets), [None] * len(targets), [False] * len(targets)
    flat, _ = _flatten(output_gradients)
    if len(flat) != len(targets):
        # TF silently zips mismatched lists (dropping or ignoring weights); tapejax refuses.
        raise ValueError(
            f"output_gradients has {len(flat)} entries but there are {len(targets)} targets; pass one output "
            "gradient per target, in the same structure as the target."
        )
    vals, ids, given = [], [], []
    for g, t in zip(flat, targets):
        if g is None:
            raise ValueError(
                "Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a Tensor: "
                "an entry of output_gradients is None. Pass tf.ones_like(target) for an unweighted target."
            )
        if isinstance(g, VariableBase):
            g = _core.read_variable(g)
        elif not isinstance(g, Tensor):
            g = convert_to_tensor(g, dtype_hint=from_np(t._value.dtype))
        if g._value.dtype != t._value.dtype:
            raise errors.InvalidArgumentError(
                f"An output gradient of dtype {from_np(g._value.dtype).name} was given for a target of dtype "
                f"{from_np(t._value.dtype).name}; they must match (use tf.cast)."
            )
        v = g._value
        if tuple(v.shape) != tuple(t._value.shape):
            try:
                ok = jnp.broadcast_shapes(v.shape, t._value.shape) == tuple(t._value.shape)
            except ValueError:
                ok = False
            if not ok:
                raise errors.InvalidArgumentError(
                    f"Incompatible shapes: output gradient {list(v.shape)} vs. target {list(t._value.shape)}. "
                    "Each output gradient must have its target's shape (or broadcast to it)."
                )
        vals.append(v)
        ids.append(g._id)
        given.append(True)
    return vals, ids, given
