"""``tf.autodiff.ForwardAccumulator``: forward-mode autodiff over the recorder.

An accumulator is a core ``Tape`` that watches its primals, pushed on the same
stack as the GradientTapes: it records exactly the ops a tape would. ``jvp``
replays the recorded slice from the primals to the target through ``jax.jvp``
(compiled and cached like every replay). TF computes tangents eagerly, op by
op; the values are the same, computed when asked.

Nesting follows from the recorder: ``jvp`` runs as a replay primitive, which
the tapes outside it record (a tape over an accumulator: reverse over forward),
and a ``tape.gradient`` computed inside an accumulator is a replay primitive the
accumulator records like any op (forward over reverse). Either order gives a
Hessian-vector product.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from . import _core, _replay
from ._autodiff import _CustomPrimitive, forward_mode
from ._core import Primitive, Tensor, VariableBase
from ._dtypes import INEXACT
from ._gradient_tape import UnconnectedGradients, _log_first_n
from ._tensor import convert_to_tensor

__all__ = ["ForwardAccumulator"]


def _is_leaf(v: Any) -> bool:
    return v is None or isinstance(v, Tensor | VariableBase)


def _flatten(tree: Any) -> tuple[list, Any]:
    return jax.tree_util.tree_flatten(tree, is_leaf=_is_leaf)


def _structure_text(tree: Any) -> str:
    flat, tdef = _flatten(tree)
    return str(jax.tree_util.tree_unflatten(tdef, ["."] * len(flat))).replace("'.'", ".")


def _assert_same_structure(primals: Any, tangents: Any) -> None:
    fp, dp = _flatten(primals)
    ft, dt = _flatten(tangents)
    if dp == dt:
        return
    if len(fp) != len(ft):
        detail = (
            f"The two structures don't have the same number of elements. First structure: "
            f"type={type(primals).__name__} str={primals!r}. Second structure: type={type(tangents).__name__} "
            f"str={tangents!r}"
        )
    else:
        detail = "The two structures don't have the same sequence type or keys."
    raise ValueError(
        "The two structures don't have the same nested structure.\n\n"
        f"First structure: type={type(primals).__name__} str={primals!r}\n\n"
        f"Second structure: type={type(tangents).__name__} str={tangents!r}\n\n"
        f"More specifically: {detail}\n"
        f"Entire first structure:\n{_structure_text(primals)}\n"
        f"Entire second structure:\n{_structure_text(tangents)}"
    )


# --------------------------------------------------------------------------
# The jvp transform over a slice.

_primal_prims: dict = {}


def _plain(p: Primitive) -> Primitive:
    """The primitive a forward-mode replay runs for ``p``.

    A custom_gradient runs its function's own ops (TF's accumulators ignore the
    custom rule); a nested replay (a ``tape.gradient`` recorded inside the
    accumulator) is re-derived from its key, uncompiled, so that its custom
    gradients are traced in forward mode too.
    """
    if isinstance(p, _CustomPrimitive):
        q = _primal_prims.get(p)
        if q is None:
            q = _primal_prims[p] = Primitive(p.name, p.primal_impl, multiple_results=p.multiple_results)
        return q
    if p is _replay.REPLAY:
        return _INLINE_REPLAY
    return p


def _inline_replay(*vals: Any, key: tuple, n_leaves: int) -> tuple:
    return _replay._TRANSFORMS[key[0]](key)(list(vals[:n_leaves]), list(vals[n_leaves:]))


_INLINE_REPLAY = Primitive("replay", _inline_replay, multiple_results=True)


def _make_jvp(key: tuple) -> Callable:
    code, diff, groups, target_slots = key[1:5]
    code = tuple((_plain(p), params, ins, n) for p, params, ins, n in code)
    forward = _replay._forward_fn(code, diff, target_slots)

    def jvp(leaf_vals: Sequence[Any], tangents: Sequence[Any]) -> tuple:
        primals = _replay._diff_primals(diff, leaf_vals)
        tans: list = [None] * len(diff)
        for grp, t in zip(groups, tangents):
            for k in grp:
                tans[k] = t if tans[k] is None else tans[k] + t
        tans = [
            jnp.zeros_like(p) if t is None else jnp.broadcast_to(jnp.asarray(t, p.dtype), jnp.shape(p))
            for p, t in zip(primals, tans)
        ]
        with forward_mode():
            _, out = jax.jvp(lambda *d: forward(leaf_vals, *d), tuple(primals), tuple(tans))
        return tuple(out)

    return jvp


_replay.register_transform("jvp", _make_jvp)


# --------------------------------------------------------------------------


class ForwardAccumulator:
    """Forward-mode autodiff: Jacobian-vector products of everything computed from
    the ``primals`` inside the ``with`` block (TF's ``tf.autodiff.ForwardAccumulator``).

    ``tangents`` has the structure of ``primals`` (one tangent per primal, of
    its dtype; a scalar tangent broadcasts). ``acc.jvp(y)`` is d y / d primals
    applied to the tangents: None (or zeros with
    ``unconnected_gradients='zero'``) when ``y`` does not depend on them.
    Nested with a ``GradientTape`` in either order it gives Hessian-vector
    products; nested accumulators give higher-order forward derivatives.

    Difference from TF: a tangent whose shape does not broadcast to its
    primal's raises ValueError here, at construction (TF raises at the first
    op); a tangent that would broadcast the primal to a larger shape is refused
    too (TF then returns jvps of the larger shape).

    Example (a Hessian-vector product, forward over backward):
        >>> import tapejax as tf
        >>> v = tf.Variable([1.0, 2.0])
        >>> with tf.autodiff.ForwardAccumulator(v, tf.constant([1.0, 0.0])) as acc:
        ...     with tf.GradientTape() as tape:
        ...         y = tf.reduce_sum(v ** 3.0)
        ...     backward = tape.gradient(y, v)
        >>> backward.numpy().tolist(), acc.jvp(backward).numpy().tolist()
        ([3.0, 12.0], [6.0, 0.0])
    """

    def __init__(self, primals: Any, tangents: Any):
        self._tape = _core.Tape(watch_accessed_variables=False)
        self._recording = False
        self._tensor_tangents: dict[int, Tensor] = {}  # primal id -> tangent
        self._variable_tangents: dict[int, Tensor] = {}  # variable uid -> tangent
        self._sources: list = []  # (primal, tangent) of the floating primals
        flat_p, _ = _flatten(primals)
        seen: set = set()
        for p in flat_p:
            if id(p) in seen:
                # (sic: TF's message has the literal "{}")
                raise ValueError(
                    "Tensor {} was specified as a primal multiple times. This may indicate an error. If it was "
                    "intended, please sum the corresponding tangents."
                )
            seen.add(id(p))
        _assert_same_structure(primals, tangents)
        flat_t, _ = _flatten(tangents)
        for p, t in zip(flat_p, flat_t):
            self._watch(p, t)

    def _watch(self, primal: Any, tangent: Any) -> None:
        dtype = primal.dtype  # a non-tensor primal fails here, as in TF (AttributeError)
        if not dtype.is_floating:
            _log_first_n("The dtype of the watched primal must be floating (e.g. tf.float32), got %r", 5, dtype)
        if isinstance(tangent, VariableBase):
            tangent = Tensor(tangent._value)
        tangent = convert_to_tensor(tangent, dtype=dtype)
        pshape, tshape = tuple(primal._value.shape), tuple(tangent._value.shape)
        try:
            ok = jnp.broadcast_shapes(tshape, pshape) == pshape
        except ValueError:
            ok = False
        if not ok:
            # TF raises this when the first op runs; tapejax checks here.
            raise ValueError(
                f"Dimensions must be equal, but are {list(tshape)} and {list(pshape)}: a tangent of shape "
                f"{list(tshape)} was given for a primal of shape {list(pshape)}. Pass tangents with the shapes of "
                "their primals (a scalar broadcasts)."
            )
        if isinstance(primal, VariableBase):
            self._variable_tangents[primal._uid] = tangent
            if primal._value.dtype in INEXACT:
                self._tape.watch_variable(primal)
        else:
            self._tensor_tangents[primal._id] = tangent
            if primal._value.dtype in INEXACT:
                self._tape.watch_tensor(primal)
        if primal._value.dtype in INEXACT:
            self._sources.append((primal, tangent))

    # --- context ----------------------------------------------------------------

    def __enter__(self) -> ForwardAccumulator:
        self._push_accumulator()
        return self

    def __exit__(self, typ: Any, value: Any, traceback: Any) -> None:
        if self._recording:
            self._pop_accumulator()

    def _push_accumulator(self) -> None:
        if self._recording:
            raise ValueError("Accumulator is already recording.")
        _core.push(self._tape)
        self._recording = True

    def _pop_accumulator(self) -> None:
        if not self._recording:
            raise ValueError("Accumulator is not recording.")
        _core.pop(self._tape)
        self._recording = False

    # --- jvp ------------------------------------------------------------------------

    def jvp(self, primals: Any, unconnected_gradients: Any = UnconnectedGradients.NONE) -> Any:
        """The Jacobian-vector product of ``primals`` (a tensor or nested structure of them).

        Returns the same structure: for each tensor, its tangent given the
        accumulator's tangents; None where it does not depend on them (zeros of
        its shape and dtype with ``unconnected_gradients='zero'``).

        Example:
            >>> import tapejax as tf
            >>> x = tf.constant([1.0, 2.0])
            >>> with tf.autodiff.ForwardAccumulator(x, tf.constant([1.0, 0.5])) as acc:
            ...     y = x * x
            >>> acc.jvp(y).numpy().tolist()
            [2.0, 2.0]
        """
        ug = UnconnectedGradients(unconnected_gradients)  # TF's enum error for a bad value
        flat, tdef = _flatten(primals)
        for v in flat:
            if not isinstance(v, Tensor | VariableBase):
                raise AttributeError(f"'{type(v).__name__}' object has no attribute '_id'")
        out: list = [None] * len(flat)
        targets: list = []
        where: list = []
        for k, v in enumerate(flat):
            if isinstance(v, VariableBase):
                out[k] = self._variable_tangents.get(v._uid)
            elif v._id in self._tensor_tangents:
                out[k] = self._tensor_tangents[v._id]
            else:
                targets.append(v)
                where.append(k)
        if targets and self._sources and self._tape.eqns:
            for k, t in zip(where, self._replay(targets)):
                out[k] = t
        if ug is UnconnectedGradients.ZERO:
            out = [Tensor(jnp.zeros(v._value.shape, v._value.dtype)) if o is None else o for o, v in zip(out, flat)]
        return jax.tree_util.tree_unflatten(tdef, out)

    def _replay(self, targets: list) -> list:
        tape = self._tape
        known: dict = {}
        source_ids = []
        for p, _ in self._sources:
            if isinstance(p, VariableBase):
                source_ids.append(tuple(tape.var_reads.get(p._uid, ())))
            else:
                known[p._id] = p._value
                source_ids.append((p._id,))
        for t in targets:
            known[t._id] = t._value
        sl = _replay.build_slice(tape.eqns, targets, source_ids, known)
        if not sl.groups or not any(sl.targets_used):
            return [None] * len(targets)
        tangents = [t for (_, t), c in zip(self._sources, sl.connected) if c]
        # Tapes outside record this jvp (reverse over forward); this accumulator
        # does not: TF's jvp of a jvp taken inside the block is None.
        rec = _core.state.recording
        mine = [k for k, t in enumerate(rec) if t is tape]
        for k in reversed(mine):
            del rec[k]
        try:
            outs = _replay.run_transform(sl, (), "jvp", [t._value for t in tangents], [t._id for t in tangents])
        finally:
            for k in mine:
                rec.insert(k, tape)
        it = iter(outs)
        return [next(it) if u else None for u in sl.targets_used]
