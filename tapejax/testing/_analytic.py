"""``assert_matches_analytic``: the tape gradient against the user's own derivative formula."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .._core._recorder import Tensor, VariableBase
from ._check import GradientCheckError, Mismatch, _elem, _prepare
from ._numeric import _WIDE, _kind, flatten_outputs, is_inexact
from ._tolerances import default_tolerance

__all__ = ["assert_matches_analytic"]


def _to_np(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, Tensor | VariableBase):
        return np.asarray(v._value)
    return np.asarray(v)


def _is_value(v: Any) -> bool:
    return v is None or isinstance(v, Tensor | VariableBase | np.ndarray | np.generic | jax.Array)


def _call_formula(dfn: Callable, leaves: list, treedef: Any) -> tuple[Any, str]:
    """Run ``dfn`` on float64 copies of the inputs (its own dtype if it cannot), results as NumPy.

    The formula is evaluated in float64 for the same reason as the numerical
    side of ``check_gradients``: so that the reference is not itself a float32
    approximation.
    """
    from .._ops._tensor import constant
    from .._tf._variable import Variable

    def wide_leaves() -> list:
        out = []
        for leaf in leaves:
            if isinstance(leaf, Tensor | VariableBase) and is_inexact(leaf._value.dtype):
                a = np.asarray(leaf._value).astype(_WIDE[_kind(leaf._value.dtype)])
                leaf = Variable(a, trainable=leaf._trainable) if isinstance(leaf, VariableBase) else constant(a)
            out.append(leaf)
        return out

    try:
        with jax.enable_x64(True):
            res = dfn(*jax.tree_util.tree_unflatten(treedef, wide_leaves()))
            return jax.tree_util.tree_map(_to_np, res, is_leaf=_is_value), "float64"
    except Exception:  # noqa: BLE001 - a formula pinned to 32 bits: evaluate it as written
        res = dfn(*jax.tree_util.tree_unflatten(treedef, leaves))
        return jax.tree_util.tree_map(_to_np, res, is_leaf=_is_value), "native"


def assert_matches_analytic(
    fn: Callable,
    dfn: Callable,
    args: Any,
    atol: float | None = None,
    rtol: float | None = None,
    *,
    argnums: int | tuple | None = None,
) -> None:
    """Assert that the tape gradient of ``fn(*args)`` equals ``dfn(*args)``, the user's formula.

    The gradient is TF's: of the sum of all (floating) outputs, with respect to
    every floating tensor, variable or array in ``args`` (nested structures
    allowed; restrict with ``argnums``). ``dfn`` takes the same arguments and
    returns one entry per argument in the same nested structure (a bare value
    when there is a single argument); an entry may be a tensor, an array, a
    number (broadcast to the argument's shape) or ``None``, meaning
    "unconnected": the tape must then return None. Entries for arguments that
    are not differentiated are ignored.

    ``dfn`` is evaluated on float64 copies of the inputs when it can be (in its
    own dtype otherwise). Elements must satisfy
    ``|tape - analytic| <= atol + rtol * |analytic|``, with defaults from
    ``TOLERANCES``. A mismatch raises ``GradientCheckError`` naming the
    argument, the worst element, both values and the tolerance.

    Example:
        >>> import tapejax as tf
        >>> from tapejax.testing import assert_matches_analytic
        >>> f = lambda x, y: (x ** 2 + 2 * y) ** 2
        >>> df = lambda x, y: (4 * x * (x ** 2 + 2 * y), 4 * (x ** 2 + 2 * y))
        >>> assert_matches_analytic(f, df, (tf.constant(2.0), tf.constant(3.0)))
    """
    import tapejax as tf

    leaves, names, treedef, diff = _prepare(args, argnums)
    call_args = jax.tree_util.tree_unflatten(treedef, leaves)
    n_args = len(call_args)
    sources = [leaves[p] for p in diff]
    with tf.GradientTape() as tape:
        tape.watch(sources)
        out = fn(*call_args)
    targets = [y for _, y in flatten_outputs(out) if is_inexact(y._value.dtype)]
    if not targets:
        raise ValueError("assert_matches_analytic: fn returned no floating-point tensor.")
    grads = tape.gradient(targets, sources)
    dtypes = [s._value.dtype for s in sources] + [t._value.dtype for t in targets]
    d_atol, d_rtol, dname = default_tolerance(dtypes, 1)
    atol = d_atol if atol is None else float(atol)
    rtol = d_rtol if rtol is None else float(rtol)

    expected, mode = _call_formula(dfn, leaves, treedef)
    if not (isinstance(expected, tuple | list) and len(expected) == n_args):
        if n_args != 1:
            raise ValueError(
                f"assert_matches_analytic: dfn must return one entry per argument of fn ({n_args}), as a tuple or "
                f"list, got {type(expected).__name__}."
            )
        expected = (expected,)
    exp_pairs, _ = jax.tree_util.tree_flatten_with_path(tuple(expected), is_leaf=_is_value)
    by_name = {"args" + jax.tree_util.keystr(path): v for path, v in exp_pairs}
    missing = [names[p] for p in diff if names[p] not in by_name]
    if missing:
        raise ValueError(
            f"assert_matches_analytic: dfn's result has no entry for {', '.join(missing)}; it must mirror the "
            f"structure of the arguments (entries found: {', '.join(sorted(by_name)) or 'none'})."
        )

    failures = []
    for p, g in zip(diff, grads):
        x = leaves[p]._value
        e = by_name[names[p]]
        if e is None:
            if g is not None:
                gv = np.asarray(g._value)
                failures.append(Mismatch(
                    "analytic", 1, "", names[p], "", "connectivity", complex(np.max(np.abs(gv))) if gv.size else 0j,
                    0j, 0.0, reference_name="analytic",
                    notes=["dfn returned None (unconnected) but the tape returned a gradient (tape value shown: its "
                           "largest magnitude). Return zeros from dfn for a connected zero gradient."]))
            continue
        try:
            ev = np.broadcast_to(np.asarray(e), x.shape)
        except ValueError:
            raise ValueError(
                f"assert_matches_analytic: dfn's entry for {names[p]} has shape {np.shape(e)}, which does not "
                f"broadcast to the argument's shape {tuple(x.shape)}."
            ) from None
        wide = np.complex128 if (np.iscomplexobj(ev) or np.dtype(x.dtype).kind == "c") else np.float64
        ev = ev.astype(wide)
        gv = np.zeros(x.shape, wide) if g is None else np.asarray(g._value).astype(wide)
        err = np.abs(gv - ev).reshape(-1)
        tols = (atol + rtol * np.abs(ev)).reshape(-1)
        if err.size == 0:
            continue
        bad = ~(err <= tols)  # NaN counts as bad
        if bad.any():
            ratio = np.where(np.isfinite(err), err / np.maximum(tols, 1e-300), np.inf)
            j = int(np.argmax(ratio))
            notes = [f"{int(bad.sum())} of {err.size} elements out of tolerance "
                     f"(atol={atol:g} + rtol={rtol:g} * |analytic|, dtype {dname})."]
            if g is None:
                notes.append("the tape returned None (unconnected); compared as zeros.")
            if mode == "native":
                notes.append("dfn could not run in float64 and was evaluated in the inputs' dtype.")
            failures.append(Mismatch("analytic", 1, "", names[p], "",
                                     f"worst element {_elem(names[p], tuple(x.shape), j)}",
                                     complex(gv.reshape(-1)[j]), complex(ev.reshape(-1)[j]), float(tols[j]),
                                     reference_name="analytic", notes=notes))
    if failures:
        lines = [f"assert_matches_analytic failed for {len(failures)} argument(s):"]
        lines += [m.describe() for m in failures]
        raise GradientCheckError("\n".join(lines), failures)

