"""``tf.autodiff.ForwardAccumulator``: forward-mode autodiff, tangents computed as ops run.

As in TF, an active accumulator computes the tangent of every op that has an
input with a tangent, when the op runs: the tangent is a bound ``JVP`` op over
the op's primals and tangents (``_interpret``). Being ops, tangents are
recorded by the tapes and tracked by the accumulators pushed *before* this one
(never by those pushed after it, TF's rule), so accumulators nest (``outer.jvp(
inner.jvp(y))`` is a second derivative), a tape over an accumulator gives
reverse-over-forward, and a gradient computed inside an accumulator is a chain
of ops whose tangents give forward-over-reverse. A custom_gradient's output
takes the tangent of its function's own ops, or TF's transpose of its grad_fn
where those leave it without one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from .._core import _recorder as _core
from .._core._recorder import Primitive, Tensor, VariableBase, bind
from .._engine import _interpret, _replay
from .._log import log_first_n as _log_first_n
from .._ops._dtypes import INEXACT
from .._ops._tensor import convert_to_tensor
from .._ops.array import zeros_like
from ._autodiff import _call_grad_fn, _cotangent_tensor
from ._tape_common import UnconnectedGradients

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
# Tangents as ops run.


class _Tangents:
    """The accumulator the recorder sees (``state.accumulators``): tensor id -> tangent.

    Keyed by id, never holding a primal: ``del x`` frees ``x`` (TF's rule). The
    tangents themselves live as long as the accumulator, since a gradient taken
    later inside it may replay ops over intermediates nobody else still holds.
    """

    def __init__(self) -> None:
        self.tangents: dict[int, Tensor] = {}
        self.variables: dict[int, Tensor] = {}  # variable uid -> tangent

    def set(self, primal: Tensor, tangent: Tensor) -> None:
        # TF keeps the first tangent a tensor got (a custom_gradient's inner ops win).
        self.tangents.setdefault(primal._id, tangent)

    def on_read(self, var: VariableBase, t: Tensor) -> None:
        tg = self.variables.get(var._uid)
        if tg is not None:
            self.set(t, tg)

    def on_op(self, prim: Primitive, params: dict, in_ids: tuple, vals: list, outs: tuple) -> None:
        tans = self.tangents
        tmask = tuple(j for j, i in enumerate(in_ids)
                      if i is not None and i in tans and jnp.result_type(vals[j]) in INEXACT)
        if not tmask:
            return
        omask = tuple(k for k, o in enumerate(outs) if o._value.dtype in INEXACT)
        if not omask:
            return
        inputs = [_interpret.handle(i, v) for i, v in zip(in_ids, vals)]
        with _core.outside(self):
            res = _interpret.jvp_op(prim, _interpret._freeze(params), inputs, [tans[in_ids[j]] for j in tmask],
                                    tmask, omask)
        for k, t in zip(omask, res):
            if t is not None:
                self.set(outs[k], t)

    def on_custom(self, grad_fn: Callable, variables: list, n_args: int, inputs: list, outs: list, inner: list) -> None:
        """A custom_gradient call: TF's rule. Each output keeps the tangent its own
        inner ops gave it; an output they left without one gets the tangent TF
        derives from ``grad_fn`` (the transpose of the backward, by a second vjp).
        grad_fn always runs, so its exceptions surface here, as in TF."""
        tans = self.tangents
        tin = [tans.get(t._id) if isinstance(t, Tensor) else None for t in inputs]
        if not any(t is not None for t in tin):
            return
        with _core.outside(self):
            derived = _transpose_grad_fn(grad_fn, variables, n_args, inputs, tin, outs)
            if _core.state.tracing:
                # Inside a compiled step TF is in graph mode, where the output's tangent is
                # its inner ops' (zeros where they give none, still an op on the input
                # tangent); grad_fn still runs, so its errors surface.
                k0 = next(k for k, t in enumerate(tin) if t is not None)
                derived = [bind(_ZERO_TANGENT, inputs[k0], tin[k0], shape=tuple(o._value.shape), dtype=o._value.dtype)
                           if o._value.dtype in INEXACT else None for o in outs]
        for o, i, d in zip(outs, inner, derived):
            t = tans.get(i) if i is not None else None
            if t is None:
                t = d
            if t is not None:
                self.set(o, t)


# Zeros of a given shape that still depend (by a product with 0) on a primal and its
# tangent, as TF's graph-mode tangent ops do: connected, so outer accumulators see them.
_ZERO_TANGENT = Primitive(
    "zero_tangent", lambda x, t, shape, dtype: jnp.zeros(shape, dtype) + 0 * (jnp.sum(x) + jnp.sum(t)).astype(dtype))


def _transpose_grad_fn(grad_fn: Callable, variables: list, n_args: int, inputs: list, tin: list, outs: list) -> list:
    # jvp = d/d(dy) <grad_fn(dy), t_in>: a gradient on a private tape, eagerly (grad_fn may need values).
    tape = _core.Tape(watch_accessed_variables=False)
    dys = [Tensor(jnp.zeros(o._value.shape, o._value.dtype)) for o in outs]
    for d in dys:
        if d._value.dtype in INEXACT:
            tape.watch_tensor(d)
    _core.push(tape)
    try:
        grads = _call_grad_fn(grad_fn, dys, tuple(variables), n_args)
        terms = []
        for k, (g, t) in enumerate(zip(grads, tin)):
            if g is None or t is None:
                continue
            g = _cotangent_tensor(g, inputs[k]._value, k)
            terms.append((g, t))
    finally:
        _core.pop(tape)
    if not terms:
        return [None] * len(outs)
    targets = [g for g, _ in terms]
    known = {g._id: g._value for g in targets}
    source_ids = [(d._id,) for d in dys]
    for d in dys:
        known[d._id] = d._value
    sl = _replay.build_slice(tape.eqns, targets, source_ids, known)
    if not sl.groups:
        return [None] * len(outs)
    used = [t for (g, t), u in zip(terms, sl.targets_used) if u]
    grads_out = _interpret.gradient(sl, [g for (g, _), u in zip(terms, sl.targets_used) if u],
                                    [_interpret.handle(t._id, t._value) for t in used])
    it = iter(grads_out)
    return [next(it) if c else None for c in sl.connected]


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
        self._acc = _Tangents()
        self._recording = False
        self._primal_tangents: dict[int, Tensor] = {}  # primal id -> its tangent (jvp of a primal)
        self._variable_tangents: dict[int, Tensor] = {}  # variable uid -> its tangent, as given
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
        full = tangent
        if tshape != pshape:
            # A scalar tangent broadcasts; the tangent rules need the primal's shape.
            full = Tensor(jnp.broadcast_to(tangent._value, pshape))
        if isinstance(primal, VariableBase):
            self._variable_tangents[primal._uid] = tangent
            if primal._value.dtype in INEXACT:
                self._acc.variables[primal._uid] = full
        else:
            self._primal_tangents[primal._id] = tangent
            if primal._value.dtype in INEXACT:
                self._acc.set(primal, full)

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
        _core.push_accumulator(self._acc)
        self._recording = True

    def _pop_accumulator(self) -> None:
        if not self._recording:
            raise ValueError("Accumulator is not recording.")
        _core.pop_accumulator(self._acc)
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
        out: list = []
        for v in flat:
            if isinstance(v, VariableBase):
                out.append(self._variable_tangents.get(v._uid))
            elif v._id in self._primal_tangents:
                out.append(self._primal_tangents[v._id])
            else:
                out.append(self._acc.tangents.get(v._id))
        if ug is UnconnectedGradients.ZERO:
            out = [zeros_like(v) if o is None else o for o, v in zip(out, flat)]
        return jax.tree_util.tree_unflatten(tdef, out)
