"""Jacobian transforms over a replayed slice: ``GradientTape.jacobian`` and ``batch_jacobian``.

Both are registered with ``_replay.register_transform`` so they run as one
compiled program, are cached like ``gradient``'s replay, and record themselves
as the REPLAY primitive on outer tapes (so a Hessian is
``outer.jacobian(inner.gradient(y, x), x)`` and a jacobian of a jacobian works).

Key layout: ``(name, code, diff, groups, target_slots, direction, chunk)``.

* ``direction`` is ``"rev"`` (one vjp per output element, the cotangent basis
  vmapped: ``jax.jacrev``'s recipe) or ``"fwd"`` (one jvp per input element:
  ``jax.jacfwd``'s recipe). ``choose_direction`` picks it.
* ``chunk`` is None (every basis vector at once: one vectorized program) or an
  int ``k``: ``lax.map`` over the basis in chunks of ``k``, so only ``k`` rows of
  residual cotangents / tangents are alive at once (bounded peak memory).

TF's conventions are kept exactly: a row of TF's Jacobian is TF's gradient of
one output element, so for complex values it is ``conj(JAX vjp(e_i))`` (as in
``_replay._make_vjp``), and the forward direction is used only when every
value involved is real (where both directions give the same numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core import _recorder as _core
from .._core._recorder import Primitive, Tensor, VariableBase, bind
from .._engine import _interpret, _lazy, _replay
from .._engine._replay import _diff_primals, _forward_fn, _is_complex
from .._engine._replay import sum_groups as _sum_groups
from .._ops._tensor import TensorShape, convert_to_tensor
from ._autodiff import contains_custom_gradient
from ._tape_common import UnconnectedGradients, _check_tensors, _flatten, _unconnected

__all__ = ["choose_direction", "DEFAULT_LOOP_CHUNK", "FWD_RATIO"]

# The forward direction costs one jvp per *input* element, the reverse one vjp
# per *output* element; a jvp is a little cheaper than a vjp (no residuals to
# keep), but only by a constant factor. ``benchmarks/bench_jacobian.py --only
# switch`` measures the crossover (near n_out = n_in; forward is about 2x faster
# at n_out = 2 n_in): forward is used once the output has at least FWD_RATIO
# times more elements than the inputs (see compat_docs/performance.md).
FWD_RATIO = 2

# Chunk size of the sequential loop (experimental_use_pfor=False) when
# parallel_iterations is None: peak memory is bounded by 32 rows of cotangents
# while the per-iteration loop overhead is amortised over 32 rows.
DEFAULT_LOOP_CHUNK = 32


def choose_direction(n_out: int, n_in: int, all_real: bool) -> str:
    """``"fwd"`` when the target has at least ``FWD_RATIO`` times more elements than the sources."""
    if all_real and n_in * FWD_RATIO <= n_out:
        return "fwd"
    return "rev"


def _basis_map(row: Callable[[Any], tuple], n: int, dtype: Any, chunk: int | None) -> tuple:
    """``row(e_i)`` for every one-hot vector ``e_i`` of length ``n``, stacked on a leading axis.

    chunk None: vmap over the identity (one vectorized program). chunk k: the
    one-hot vectors are made inside a ``lax.map`` body from their index, so the
    n x n identity is never materialised and only k rows run at a time.
    """
    if chunk is None:
        return jax.vmap(row)(jnp.eye(n, dtype=dtype))

    def one(i: Any) -> tuple:
        return row((jnp.arange(n) == i).astype(dtype))

    return jax.lax.map(one, jnp.arange(n), batch_size=min(chunk, n))


def _make_jacobian(key: tuple) -> Callable:
    code, diff, groups, target_slots, direction, chunk = key[1:7]
    forward = _forward_fn(code, diff, target_slots)

    def jac(leaf_vals: Sequence[Any], extra: Sequence[Any]) -> tuple:
        primals = _diff_primals(diff, leaf_vals)
        src_shapes = [tuple(primals[g[0]].shape) for g in groups]
        src_dtypes = [primals[g[0]].dtype for g in groups]

        def f(*d: Any) -> Any:
            return forward(leaf_vals, *d)[0]

        if direction == "fwd":
            return _jac_fwd(f, primals, groups, src_shapes, src_dtypes, chunk)
        y, pullback = jax.vjp(f, *primals)
        n = math.prod(y.shape)
        if n == 0:
            return tuple(jnp.zeros(y.shape + s, d) for s, d in zip(src_shapes, src_dtypes))

        def row(e: Any) -> tuple:
            return tuple(_sum_groups(pullback(e.reshape(y.shape)), groups))

        rows = _basis_map(row, n, y.dtype, chunk)
        return tuple(r.reshape(y.shape + s) for r, s in zip(rows, src_shapes))

    return jac


def _jac_fwd(f: Callable, primals: list, groups: tuple, src_shapes: list, src_dtypes: list, chunk: Any) -> tuple:
    """Forward direction: one jvp per source element; every source in one vmap.

    The tangent basis runs over the concatenation of all sources: basis index
    ``o_g + k`` perturbs element ``k`` of every diff input of group ``g`` (all
    the reads of a variable move together, which sums their contributions).
    """
    sizes = [math.prod(s) for s in src_shapes]
    offsets = [sum(sizes[:g]) for g in range(len(sizes))]
    m = sum(sizes)
    y_shape = jax.eval_shape(f, *primals).shape
    n = math.prod(y_shape)
    if m == 0 or n == 0:
        return tuple(jnp.zeros(tuple(y_shape) + s, d) for s, d in zip(src_shapes, src_dtypes))
    member: list[list] = [[] for _ in primals]
    for g, grp in enumerate(groups):
        for k in grp:
            member[k].append(g)

    def col(e: Any) -> tuple:
        # e: one-hot over the m concatenated source elements.
        tangents = []
        for k, p in enumerate(primals):
            t = jnp.zeros(p.shape, p.dtype)
            for g in member[k]:
                t = t + e[offsets[g] : offsets[g] + sizes[g]].reshape(p.shape).astype(p.dtype)
            tangents.append(t)
        return (jax.jvp(f, tuple(primals), tuple(tangents))[1],)

    (cols,) = _basis_map(col, m, primals[0].dtype, chunk)  # (m,) + y.shape
    cols = cols.reshape(m, n)
    out = []
    for s, d, o, size in zip(src_shapes, src_dtypes, offsets, sizes):
        # A jvp carries the target's dtype; TF's Jacobian has the source's.
        out.append(cols[o : o + size].T.reshape(tuple(y_shape) + s).astype(d))
    return tuple(out)


def _make_batch_jacobian(key: tuple) -> Callable:
    code, diff, groups, target_slots, _direction, chunk = key[1:7]
    forward = _forward_fn(code, diff, target_slots)

    def bjac(leaf_vals: Sequence[Any], extra: Sequence[Any]) -> tuple:
        # TF's definition: row j of example b is d(sum_b' y[b', j]) / dx[b]. One
        # vjp of the batch-summed target per per-example output element j (the
        # cotangent is e_j broadcast over the batch), so the cost is
        # rows x (one batched vjp) = b x (one per-example Jacobian), never the
        # full [b*rows, b*cols] Jacobian. Cross-example dependence leaks in
        # exactly as in TF.
        primals = _diff_primals(diff, leaf_vals)
        (grp,) = groups
        x_shape = tuple(primals[grp[0]].shape)
        x_dtype = primals[grp[0]].dtype
        y, pullback = jax.vjp(lambda *d: forward(leaf_vals, *d)[0], *primals)
        b = y.shape[0]
        rows = math.prod(y.shape[1:])
        out_shape = tuple(y.shape) + x_shape[1:]
        if b == 0 or rows == 0:
            return (jnp.zeros(out_shape, x_dtype),)

        def row(e: Any) -> tuple:
            ct = jnp.broadcast_to(e, (b, rows)).reshape(y.shape)
            return tuple(_sum_groups(pullback(ct), groups))

        (r,) = _basis_map(row, rows, y.dtype, chunk)  # (rows, b) + x.shape[1:]
        return (jnp.moveaxis(r, 0, 1).reshape(out_shape),)

    return bjac


_replay.register_transform("jacobian", _make_jacobian)
_replay.register_transform("batch_jacobian", _make_batch_jacobian)


# --------------------------------------------------------------------------
# The GradientTape methods (thin wrappers in _gradient_tape call these).

_SPENT = (
    "A non-persistent GradientTape can only be used to compute one set of gradients (or jacobians). "
    "Create the tape with tf.GradientTape(persistent=True) to call it more than once."
)


def _is_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _chunk(parallel_iterations: Any, pfor: bool, what: str, g: Any) -> int | None:
    """Validate ``parallel_iterations`` as TF does; return the lax.map chunk (None: all at once)."""
    p = parallel_iterations
    if pfor:
        if p is None:
            return None
        if not _is_int(p):
            raise TypeError(
                f"parallel_iterations must be None or an int greater than 1, got {p!r} of type {type(p).__name__}."
            )
        if p <= 1:
            # TF's pfor has already run (and so used up a non-persistent tape) when it rejects this.
            g._end_use()
            raise ValueError(
                f"Encountered an exception while vectorizing the {what} computation: parallel_iterations must be "
                f"None or an int greater than 1, got {p}. For one row at a time use experimental_use_pfor=False "
                "with parallel_iterations=1."
            )
        return int(p)
    if p is None:
        return DEFAULT_LOOP_CHUNK
    if not _is_int(p) or p < 1:
        raise TypeError(f"'parallel_iterations' must be a positive integer, got {p!r}.")
    return int(p)


def _unconnected_arg(value: Any, pfor: bool, what: str) -> Any:
    try:
        return _unconnected(value)
    except ValueError as err:
        if not pfor:
            raise
        # TF raises this from inside pfor, which re-wraps every ValueError.
        raise ValueError(f"Encountered an exception while vectorizing the {what} computation: {err}") from err


def _no_shape(v: Any, what: str, role: str) -> AttributeError:
    return AttributeError(
        f"'{type(v).__name__}' object has no attribute 'shape': GradientTape.{what} takes a single tf.Tensor or "
        f"tf.Variable as its {role}. Stack several targets with tf.stack, or call {what} once per tensor."
    )


def _target(g: Any, t: Any) -> Tensor:
    """TF reshapes the target with this tape pushed: a variable target is read like any variable
    (auto-watched if trainable), so ``jacobian(v, v)`` is the identity."""
    if not isinstance(t, VariableBase):
        return t
    if g._recording:
        return _core.read_variable(t)
    g._push_tape()
    try:
        return _core.read_variable(t)
    finally:
        g._pop_tape()


def _nopfor_error(what: str) -> RuntimeError:
    return RuntimeError(
        f"GradientTape must be created with persistent=True to compute the {what} with eager execution enabled "
        "and with experimental_use_pfor set to False. Create it with tf.GradientTape(persistent=True), or keep "
        "experimental_use_pfor=True."
    )


def _trace_grad_fns(tape: Any, target: Tensor) -> None:
    """TF computes a jacobian with pfor, which traces the gradient function of every op
    its backward pass visits (every recorded op the target depends on), so a
    custom_gradient whose grad_fn needs values (``.numpy()``) raises there, whatever the
    sources. The same check, before the jacobian is computed."""
    needed = {target._id}
    for e in reversed(tape.eqns):
        if not any(o in needed for o in e.out_ids) or not e.prim.differentiable:
            continue  # TF calls no gradient function where no gradient arrives
        needed.update(i for i, g in zip(e.in_ids, _interpret.gradient_inputs(e)) if i is not None and g)
        check = getattr(e.prim, "trace_check", None) if e.aux is not None else None
        if check is not None:
            check(e)


# Stacked rows of vector-Jacobian products laid out as TF's results; ops, so that
# the tapes outside record them.
_ROWS_TO_JACOBIAN = Primitive("rows_to_jacobian", lambda r, shape: jnp.reshape(r, shape))
_ROWS_TO_BATCH_JACOBIAN = Primitive(
    "rows_to_batch_jacobian", lambda r, rest: jnp.moveaxis(jnp.reshape(r, rest + r.shape[1:]), len(rest), 0))


def jacobian(
    g: Any, target: Any, sources: Any, unconnected_gradients: Any, parallel_iterations: Any, pfor: bool
) -> Any:
    if g._tape is None:
        raise RuntimeError(_SPENT)
    if not isinstance(target, Tensor | VariableBase):
        if not hasattr(target, "shape") or isinstance(target, list | tuple | dict):
            raise _no_shape(target, "jacobian", "target")
        target = convert_to_tensor(target)  # a constant: unconnected to every source, as in TF
    pfor = bool(pfor)
    if not pfor and not g._persistent:
        raise _nopfor_error("jacobian")
    target = _target(g, target)
    tape = g._begin_use("gradient")  # TF's jacobian calls gradient: same pop / warning
    ug = _unconnected_arg(unconnected_gradients, pfor, "jacobian")
    chunk = _chunk(parallel_iterations, pfor, "jacobian", g)
    flat_sources, sources_def = _flatten(sources)
    _check_tensors(flat_sources, "sources")
    _trace_grad_fns(tape, target)
    sl, _ = g._cut(tape, [target], flat_sources)
    _lazy.resolve_slice(sl, [])  # lazy mode: the recorded values a gradient left pending (persistent tape)
    # TF differentiates reshape(target), recorded only if this tape watches the
    # target: an unwatched target is unconnected even to itself (gradient(x, x)
    # would give ones, jacobian(x, x) gives None).
    connected = sl.connected if target._id in tape.watched else [False] * len(flat_sources)
    jacs: tuple = ()
    if any(connected):
        y = target._value
        if pfor:
            srcs = [s._value for s, c in zip(flat_sources, connected) if c]
            real = not _is_complex(y) and not any(_is_complex(s) for s in srcs)
            direction = choose_direction(y.size, sum(s.size for s in srcs), real)
            if direction == "fwd" and contains_custom_gradient(sl.code):
                direction = "rev"  # JAX has no forward mode through a custom_vjp
        else:
            direction = "rev"  # the sequential loop runs over output rows, as TF's for_loop
        if _interpret.watched_outside(sl, ()):
            # A tape or accumulator outside watches the result: the jacobian must reach
            # every forward value its backward reads (an inner intermediate too), as TF's
            # pfor over recorded gradient ops does. One interpreted pass over all rows.
            n = int(y.size)
            rows = jnp.eye(n, dtype=y.dtype).reshape((n,) + tuple(y.shape))
            jacs = tuple(bind(_ROWS_TO_JACOBIAN, r, shape=tuple(y.shape) + tuple(r._value.shape[1:]))
                         for r in _interpret.jacobian(sl, target, rows))
        else:
            jacs = _replay.run_transform(sl, (direction, chunk), "jacobian", (), ())
    g._end_use()

    tshape = tuple(target._value.shape)
    out = []
    it = iter(jacs)
    for s, c in zip(flat_sources, connected):
        if c:
            out.append(next(it))
        elif ug is UnconnectedGradients.ZERO:
            out.append(Tensor(jnp.zeros(tshape + tuple(s._value.shape), s._value.dtype)))
        else:
            out.append(None)
    return _like(sources, jax.tree_util.tree_unflatten(sources_def, out))


def _like(orig: Any, new: Any) -> Any:
    """TF packs results into the sources' structure, keeping each dict's own key order
    (JAX's unflatten sorts dict keys)."""
    if type(orig) is dict:
        return {k: _like(orig[k], new[k]) for k in orig}
    if isinstance(orig, list | tuple) and any(isinstance(o, dict | list | tuple) for o in orig):
        items = [_like(o, n) for o, n in zip(orig, new)]
        return type(new)(*items) if hasattr(type(new), "_fields") else type(new)(items)
    return new


def batch_jacobian(
    g: Any, target: Any, source: Any, unconnected_gradients: Any, parallel_iterations: Any, pfor: bool
) -> Tensor:
    if g._tape is None:
        raise RuntimeError(_SPENT)
    if not isinstance(target, Tensor | VariableBase):
        raise _no_shape(target, "batch_jacobian", "target")
    if not isinstance(source, Tensor | VariableBase):
        raise _no_shape(source, "batch_jacobian", "source")
    tshape, sshape = TensorShape(target._value.shape), TensorShape(source._value.shape)
    if len(tshape) == 0:
        # TF reads target.shape[0] before checking ranks: IndexError for a scalar target.
        raise IndexError(
            "list index out of range: batch_jacobian needs a target of shape [batch, ...] (rank >= 2), got a scalar."
        )
    for s in (tshape, sshape):
        if len(s) < 2:
            raise ValueError(
                f"Shape {s} must have rank at least 2: batch_jacobian takes a target and a source of shape "
                "[batch, ...]; add a trailing axis (tf.reshape(x, [-1, 1])) or use jacobian."
            )
    if tshape[0] != sshape[0]:
        raise ValueError(
            f"Need first dimension of target shape ({tshape}) and source shape ({sshape}) to match."
        )
    pfor = bool(pfor)
    if not pfor and not g._persistent:
        raise _nopfor_error("batch_jacobian")
    target = _target(g, target)
    tape = g._begin_use("gradient")
    ug = _unconnected_arg(unconnected_gradients, pfor, "batch_jacobian")
    chunk = _chunk(parallel_iterations, pfor, "batch_jacobian", g)
    _trace_grad_fns(tape, target)
    sl, _ = g._cut(tape, [target], [source])
    _lazy.resolve_slice(sl, [])  # lazy mode: the recorded values a gradient left pending (persistent tape)
    connected = sl.connected[0] and target._id in tape.watched
    res = None
    if connected and _interpret.watched_outside(sl, ()):
        # Watched from outside: interpreted, as jacobian. Row j seeds target[:, j] for
        # every example (TF's batch_jacobian is the gradient of the batch sum of a column).
        y = target._value
        rest = tuple(y.shape[1:])
        m = int(np.prod(rest)) if rest else 1
        rows = jnp.broadcast_to(jnp.eye(m, dtype=y.dtype).reshape((m, 1) + rest), (m,) + tuple(y.shape))
        (r,) = _interpret.jacobian(sl, target, rows)
        res = bind(_ROWS_TO_BATCH_JACOBIAN, r, rest=rest)
    elif connected:
        res = _replay.run_transform(sl, ("rev", chunk), "batch_jacobian", (), ())[0]
    g._end_use()
    if res is not None:
        return res
    # Never None (TF keeps zeros for backward compatibility): the target's dtype
    # by default, the source's under ZERO (TF stacks per-row zero gradients).
    dtype = source._value.dtype if ug is UnconnectedGradients.ZERO else target._value.dtype
    return Tensor(jnp.zeros(tuple(tshape) + tuple(sshape[1:]), dtype))
