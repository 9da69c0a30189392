"""Property helpers for the tape's own semantics (not the values of derivatives).

Each helper runs ``fn`` under a tape made by ``tape_factory`` (default
``tapejax.GradientTape``; pass another class to test a tape implementation)
and raises ``GradientCheckError`` (an ``AssertionError``) when a rule is broken:

* ``assert_zero_vs_none``: ``unconnected_gradients`` NONE gives None exactly
  where ZERO gives zeros of the source's shape and dtype, and both agree
  elsewhere;
* ``assert_persistent_repeatable``: a persistent tape answers the same, bit for
  bit, every time; a non-persistent one answers once, then raises RuntimeError;
* ``assert_jacobian_matches_gradients``: ``jacobian(y, x)`` equals the
  gradients of each element of ``y``, stacked;
* ``assert_batch_jacobian_matches_jacobian``: ``batch_jacobian(y, x)[b]`` equals
  the per-example jacobian of ``y[b]`` with respect to ``x[b]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .._core._recorder import Tensor, VariableBase
from ._check import GradientCheckError, Mismatch, _index, _prepare
from ._numeric import flatten_outputs, is_inexact
from ._tolerances import default_tolerance

__all__ = [
    "assert_zero_vs_none",
    "assert_persistent_repeatable",
    "assert_jacobian_matches_gradients",
    "assert_batch_jacobian_matches_jacobian",
]


def _factory(tape_factory: Any) -> Any:
    if tape_factory is not None:
        return tape_factory
    import tapejax

    return tapejax.GradientTape


def _record(fn: Callable, args: Any, argnums: Any, tape_factory: Any, persistent: bool = True) -> tuple:
    leaves, names, treedef, diff = _prepare(args, argnums)
    call_args = jax.tree_util.tree_unflatten(treedef, leaves)
    sources = [leaves[p] for p in diff]
    tape = _factory(tape_factory)(persistent=persistent)
    with tape:
        tape.watch(sources)
        out = fn(*call_args)
    outs = [(("output" + jax.tree_util.keystr(path)), y) for path, y in flatten_outputs(out)
            if is_inexact(y._value.dtype)]
    if not outs:
        raise ValueError("fn returned no floating-point tensor.")
    return tape, sources, [names[p] for p in diff], outs, call_args


def _arr(v: Any) -> np.ndarray:
    return np.asarray(v._value if isinstance(v, Tensor | VariableBase) else v)


def _fail(title: str, failures: list) -> None:
    raise GradientCheckError("\n".join([title] + [m.describe() for m in failures]), failures)


def _rule(check: str, what: str, name: str, note: str) -> Mismatch:
    return Mismatch(check, 1, "", name, "", what, 0j, 0j, 0.0, reference_name="expected", notes=[note])


def assert_zero_vs_none(
    fn: Callable, args: Any, *, argnums: Any = None, tape_factory: Any = None
) -> dict:
    """Check TF's ZERO/NONE rule for every differentiated argument; return ``{name: connected?}``.

    With ``unconnected_gradients=NONE`` (default, also the string ``'none'``) a
    source the targets do not depend on gets ``None``; with ``ZERO`` (or
    ``'zero'``) it gets zeros of the source's shape and dtype. Connected
    sources get the same gradient either way.

    Example:
        >>> import tapejax as tf
        >>> from tapejax.testing import assert_zero_vs_none
        >>> assert_zero_vs_none(lambda x, y: x * 2.0, (tf.constant(1.0), tf.constant(2.0)))
        {'args[0]': True, 'args[1]': False}
    """
    import tapejax as tf

    tape, sources, names, outs, _ = _record(fn, args, argnums, tape_factory)
    targets = [y for _, y in outs]
    g_default = tape.gradient(targets, sources)
    g_none = tape.gradient(targets, sources, unconnected_gradients="none")
    g_zero = tape.gradient(targets, sources, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    g_zero_s = tape.gradient(targets, sources, unconnected_gradients="zero")
    failures = []
    connected = {}
    for name, s, gd, gn, gz, gzs in zip(names, sources, g_default, g_none, g_zero, g_zero_s):
        x = s._value
        connected[name] = gd is not None
        if (gd is None) != (gn is None):
            failures.append(_rule("zero-vs-none", "default vs 'none'", name,
                                  f"the default gave {'None' if gd is None else 'a tensor'} but 'none' gave "
                                  f"{'None' if gn is None else 'a tensor'}."))
        for label, z in (("ZERO", gz), ("'zero'", gzs)):
            if z is None:
                failures.append(_rule("zero-vs-none", label, name, f"{label} returned None; it must return a tensor."))
                continue
            zv = _arr(z)
            if gd is None:
                if tuple(zv.shape) != tuple(x.shape) or zv.dtype != x.dtype or np.any(zv != 0):
                    failures.append(_rule(
                        "zero-vs-none", label, name,
                        f"NONE gave None (unconnected), so {label} must give zeros of shape {tuple(x.shape)} and "
                        f"dtype {x.dtype}; got shape {tuple(zv.shape)}, dtype {zv.dtype}, "
                        f"max |value| {float(np.max(np.abs(zv))) if zv.size else 0.0:g}."))
            else:
                gv = _arr(gd)
                if gv.shape != zv.shape or not np.array_equal(gv, zv, equal_nan=True):
                    failures.append(_rule("zero-vs-none", label, name,
                                          f"a connected source must get the same gradient with {label} as with NONE."))
    if failures:
        _fail("assert_zero_vs_none failed:", failures)
    return connected


def assert_persistent_repeatable(
    fn: Callable, args: Any, *, repeats: int = 3, argnums: Any = None, tape_factory: Any = None
) -> None:
    """A persistent tape returns identical gradients on every call; a non-persistent one only once.

    Every output is differentiated ``repeats`` times, interleaved, and each
    answer must equal the first bit for bit (None in the same places). A fresh
    non-persistent tape must give the same first answer and raise
    ``RuntimeError`` on a second call.

    Example:
        >>> import tapejax as tf
        >>> from tapejax.testing import assert_persistent_repeatable
        >>> assert_persistent_repeatable(lambda x: [x * x, tf.sin(x)], (tf.constant([1.0, 2.0]),))
    """
    tape, sources, names, outs, call_args = _record(fn, args, argnums, tape_factory)
    failures = []
    first = [tape.gradient(y, sources) for _, y in outs]
    for r in range(1, repeats):
        for (oname, y), ref in zip(outs, first):
            again = tape.gradient(y, sources)
            for name, a, b in zip(names, ref, again):
                if (a is None) != (b is None) or (a is not None and not np.array_equal(_arr(a), _arr(b), equal_nan=True)):
                    failures.append(_rule("persistent", f"call {r + 1} of gradient({oname})", name,
                                          "differs from the first call on the same persistent tape."))
    # The non-persistent rule, on a fresh recording of the same computation.
    leaves_tape = _factory(tape_factory)(persistent=False)
    with leaves_tape:
        leaves_tape.watch(sources)
        out = fn(*call_args)
    targets = [y for _, y in flatten_outputs(out) if is_inexact(y._value.dtype)]
    once = leaves_tape.gradient(targets, sources)
    summed = tape.gradient([y for _, y in outs], sources)
    for name, a, b in zip(names, once, summed):
        if (a is None) != (b is None) or (a is not None and not np.allclose(_arr(a), _arr(b), equal_nan=True)):
            failures.append(_rule("persistent", "non-persistent first call", name,
                                  "a non-persistent tape's gradient differs from the persistent tape's."))
    try:
        leaves_tape.gradient(targets, sources)
    except RuntimeError:
        pass
    else:
        failures.append(_rule("persistent", "non-persistent second call", "(tape)",
                              "a second gradient call on a non-persistent tape must raise RuntimeError."))
    del tape
    if failures:
        _fail("assert_persistent_repeatable failed:", failures)


def _close(check: str, name: str, got: np.ndarray, want: np.ndarray, atol: float, rtol: float, what: str) -> list:
    if got.shape != want.shape:
        return [_rule(check, "shape", name, f"{what}: shape {got.shape}, expected {want.shape}.")]
    err = np.abs(got.astype(np.complex128) - want.astype(np.complex128)).reshape(-1)
    tols = (atol + rtol * np.abs(want)).reshape(-1)
    bad = ~(err <= tols)
    if not bad.any():
        return []
    j = int(np.argmax(np.where(np.isfinite(err), err / np.maximum(tols, 1e-300), np.inf)))
    return [Mismatch(check, 1, "", name, "", f"worst element {check}{_index(got.shape, j)}", complex(got.reshape(-1)[j]),
                     complex(want.reshape(-1)[j]), float(tols[j]), reference_name="expected",
                     notes=[f"{what}; {int(bad.sum())} of {err.size} elements differ."])]


def _one_hot(y: Any, k: int) -> Tensor:
    import jax.numpy as jnp

    e = np.zeros(int(np.prod(y._value.shape, dtype=np.int64)), y._value.dtype)
    e[k] = 1
    return Tensor(jnp.asarray(e.reshape(y._value.shape)))


def _need(tape: Any, method: str) -> None:
    if not hasattr(tape, method):
        raise NotImplementedError(
            f"GradientTape.{method} is not available in this tapejax build; this property needs it."
        )


def assert_jacobian_matches_gradients(
    fn: Callable,
    args: Any,
    *,
    argnums: Any = None,
    unconnected_gradients: Any = "none",
    atol: float | None = None,
    rtol: float | None = None,
    tape_factory: Any = None,
) -> None:
    """``tape.jacobian(y, x)`` equals the gradients of every element of ``y``, stacked.

    For every floating output ``y`` and differentiated argument ``x``: the
    jacobian has shape ``y.shape + x.shape`` and row ``k`` (of ``y`` flattened)
    equals ``tape.gradient(y_flat[k], x)``; an unconnected ``x`` gives None (or
    zeros with ``unconnected_gradients='zero'``) in both.

    Example:
        >>> import tapejax as tf
        >>> from tapejax.testing import assert_jacobian_matches_gradients
        >>> if hasattr(tf.GradientTape, "jacobian"):
        ...     assert_jacobian_matches_gradients(lambda x: x * x, (tf.constant([1.0, 2.0]),))
    """
    leaves, names_all, treedef, diff = _prepare(args, argnums)
    call_args = jax.tree_util.tree_unflatten(treedef, leaves)
    sources = [leaves[p] for p in diff]
    names = [names_all[p] for p in diff]
    tape = _factory(tape_factory)(persistent=True)
    _need(tape, "jacobian")
    with tape:
        tape.watch(sources)
        out = fn(*call_args)
    outs = [("output" + jax.tree_util.keystr(path), y) for path, y in flatten_outputs(out)
            if is_inexact(y._value.dtype)]
    dtypes = [s._value.dtype for s in sources] + [y._value.dtype for _, y in outs]
    d_atol, d_rtol, _ = default_tolerance(dtypes, 1)
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    failures = []
    for oname, y in outs:
        jac = tape.jacobian(y, sources, unconnected_gradients=unconnected_gradients)
        # Row k is the gradient of y with a one-hot cotangent: the cotangent is data, so every
        # row reuses one compiled replay.
        grads = [tape.gradient(y, sources, output_gradients=_one_hot(y, k), unconnected_gradients=unconnected_gradients)
                 for k in range(int(np.prod(y._value.shape, dtype=np.int64)))]
        for i, (name, x, j) in enumerate(zip(names, sources, jac)):
            col = [g[i] for g in grads]
            label = f"jacobian({oname}, {name})"
            if all(c is None for c in col) and col:
                if j is not None:
                    failures.append(_rule("jacobian", label, name,
                                          "every stacked gradient is None (unconnected) but jacobian is not None."))
                continue
            if j is None:
                failures.append(_rule("jacobian", label, name, "jacobian is None but the stacked gradients are not."))
                continue
            xs = tuple(x._value.shape)
            stacked = np.stack([np.zeros(xs, x._value.dtype) if c is None else _arr(c) for c in col]) if col else \
                np.zeros((0,) + xs, x._value.dtype)
            want = stacked.reshape(tuple(y._value.shape) + xs)
            failures += _close("jacobian", name, _arr(j), want, atol, rtol, f"{label} vs stacked gradients")
    del tape
    if failures:
        _fail("assert_jacobian_matches_gradients failed:", failures)


def assert_batch_jacobian_matches_jacobian(
    fn: Callable,
    x: Any,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    tape_factory: Any = None,
) -> None:
    """``tape.batch_jacobian(y, x)[b]`` equals the per-example jacobian ``d y[b] / d x[b]``.

    ``fn`` maps a batch ``x`` (first axis = examples) to ``y`` with the same
    first axis and must treat examples independently (batch_jacobian is only
    meaningful then; TF does not detect a violation, so this helper checks it
    and raises ValueError). The per-example jacobian is built from stacked
    gradients (one-hot cotangents on ``y``), and also compared with the diagonal
    blocks of ``tape.jacobian`` when the tape has it.

    Example:
        >>> import tapejax as tf
        >>> from tapejax.testing import assert_batch_jacobian_matches_jacobian
        >>> if hasattr(tf.GradientTape, "batch_jacobian"):
        ...     assert_batch_jacobian_matches_jacobian(lambda x: x * x, tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    """
    import tapejax as tf

    if not isinstance(x, Tensor | VariableBase):
        x = tf.constant(np.asarray(x))
    tape = _factory(tape_factory)(persistent=True)
    _need(tape, "batch_jacobian")
    with tape:
        tape.watch(x)
        y = fn(x)
    yv = y._value
    b_count = int(yv.shape[0]) if yv.ndim else 0
    per = int(np.prod(yv.shape[1:], dtype=np.int64))
    xv = x._value
    if yv.ndim < 2 or xv.ndim < 2 or yv.shape[0] != xv.shape[0]:
        raise ValueError(
            f"batch_jacobian needs a target and a source of rank >= 2 with the same first (batch) dimension; got "
            f"shapes {tuple(yv.shape)} and {tuple(xv.shape)}."
        )
    d_atol, d_rtol, _ = default_tolerance([xv.dtype, yv.dtype], 1)
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    bj = _arr(tape.batch_jacobian(y, x))
    xs = tuple(xv.shape[1:])
    failures = []
    blocks = []
    for b in range(b_count):
        rows = []
        for k in range(per):
            g = tape.gradient(y, x, output_gradients=_one_hot(y, b * per + k))
            gv = np.zeros(xv.shape, yv.dtype) if g is None else _arr(g)
            others = np.delete(gv, b, axis=0)
            if others.size and np.any(np.abs(others) > atol):
                raise ValueError(
                    f"fn mixes examples: element {k} of y[{b}] depends on other examples of x, so batch_jacobian "
                    "(which assumes independent examples) has no per-example meaning here."
                )
            rows.append(gv[b])
        blocks.append(np.stack(rows).reshape(tuple(yv.shape[1:]) + xs) if rows else
                      np.zeros(tuple(yv.shape[1:]) + xs, yv.dtype))
    want = np.stack(blocks) if blocks else np.zeros((0,) + tuple(yv.shape[1:]) + xs, yv.dtype)
    failures += _close("batch_jacobian", "x", bj, want, atol, rtol, "batch_jacobian vs per-example stacked gradients")
    if hasattr(tape, "jacobian"):
        full = _arr(tape.jacobian(y, x, unconnected_gradients="zero"))
        diag = np.stack([full[b][(Ellipsis,) + (b,) + (slice(None),) * len(xs)] for b in range(b_count)]) \
            if b_count else want
        failures += _close("batch_jacobian", "x", bj, diag, atol, rtol, "batch_jacobian vs diagonal blocks of jacobian")
    del tape
    if failures:
        _fail("assert_batch_jacobian_matches_jacobian failed:", failures)
