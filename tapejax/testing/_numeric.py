"""The numerical side of the gradient checks: re-run the user's function at
perturbed inputs, in float64, and take finite differences.

Why re-run ``fn`` instead of replaying the tape: the tape is what is under test.
A function that escapes the tape (``.numpy()`` round trips, a wrong custom rule,
an op recorded with the wrong primitive) replays consistently with its own
mistake; only a fresh evaluation of the user's code is an independent oracle.

Why float64: a float32 function differenced in float32 loses about half of its
digits to cancellation, which would force tolerances too loose to catch small
mistakes. Inputs are widened to float64 (complex128) inside
``jax.enable_x64()`` and the TF-style code runs unchanged on them. Code that
pins a 32-bit dtype (``tf.constant(2.0) * x``) cannot run on float64 inputs;
then the evaluation falls back to the inputs' own dtype with a larger step, and
the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from .._core._recorder import Tensor, VariableBase

__all__ = ["Evaluator", "directional", "mixed_second", "real_dot"]

_WIDE = {"f": np.float64, "c": np.complex128}


def real_dot(a: np.ndarray, b: np.ndarray) -> float:
    """The real inner product ``Re(sum(conj(a) * b))``: complex values as pairs of reals.

    It is the pairing under which TF's complex gradients (the conjugate of JAX's
    convention) are gradients: ``d/dt L(x + t v) = real_dot(grad, v)``.
    """
    return float(np.real(np.sum(np.conj(a) * b)))


class Evaluator:
    """Evaluate ``fn`` at ``base + delta`` for the differentiated leaves; return flat outputs.

    ``leaves``/``treedef`` describe ``args`` (already converted to tensors);
    ``diff`` lists the positions of the differentiated leaves; ``keep`` the
    positions of the outputs that are compared. Outputs come back as float64 or
    complex128 NumPy arrays.
    """

    def __init__(self, fn: Callable, leaves: list, treedef: Any, diff: Sequence[int], keep: Sequence[int],
                 n_out: int, step: float):
        self.fn = fn
        self.leaves = leaves
        self.treedef = treedef
        self.diff = list(diff)
        self.keep = list(keep)
        self.n_out = n_out
        self.base = {p: np.asarray(leaves[p]._value) for p in self.diff}
        self.mode = "float64"
        self.fallback_reason = ""
        self.step = step
        try:
            self._eval({}, wide=True)
        except Exception as e:  # noqa: BLE001 - any failure of the user's code in float64
            if not all(np.dtype(self.base[p].dtype) in (np.float32, np.complex64, np.float64, np.complex128)
                       for p in self.diff):
                raise TypeError(
                    "tapejax.testing: fn could not run on float64 inputs and its inputs are too narrow "
                    f"(float16/bfloat16) for finite differences in their own dtype. The float64 run failed with "
                    f"{type(e).__name__}: {e}. Make fn dtype-generic (derive constants from the inputs, e.g. "
                    "tf.cast(2.0, x.dtype) or a Python float) so it can be evaluated in float64."
                ) from e
            self.mode = "native"
            self.fallback_reason = f"{type(e).__name__}: {e}"
            # A float32 evaluation needs a larger step: the rounding error of a
            # difference quotient grows like eps / h.
            self.step = step * 10.0
            self._eval({}, wide=False)

    def scale(self, p: int) -> np.ndarray:
        """Per-element step scale: relative for large values, absolute (0.1) near zero."""
        return np.maximum(np.abs(self.base[p]), 0.1).astype(np.float64)

    def __call__(self, deltas: dict) -> list:
        return self._eval(deltas, wide=self.mode == "float64")

    def _eval(self, deltas: dict, wide: bool) -> list:
        from .._ops._tensor import constant
        from .._tf._variable import Variable

        def build() -> list:
            new = list(self.leaves)
            for p, leaf in enumerate(self.leaves):
                if not (isinstance(leaf, Tensor | VariableBase) and is_inexact(leaf._value.dtype)):
                    continue
                native = np.dtype(leaf._value.dtype)
                wide_dt = _WIDE[_kind(native)]
                if p in self.base:
                    val = self.base[p].astype(wide_dt) + deltas.get(p, 0.0)
                    val = np.asarray(val, wide_dt if wide else native)
                elif wide:
                    # Every floating input goes to float64, not only the
                    # differentiated ones: TF-style ops refuse mixed dtypes.
                    val = np.asarray(leaf._value).astype(wide_dt)
                else:
                    continue
                if isinstance(leaf, VariableBase):
                    new[p] = Variable(val, trainable=leaf._trainable)
                else:
                    new[p] = constant(val)
            return new

        if wide:
            with jax.enable_x64(True):
                out = self.fn(*jax.tree_util.tree_unflatten(self.treedef, build()))
                return self._collect(out)
        out = self.fn(*jax.tree_util.tree_unflatten(self.treedef, build()))
        return self._collect(out)

    def _collect(self, out: Any) -> list:
        flat = flatten_outputs(out)
        if len(flat) != self.n_out:
            raise ValueError(
                f"fn returned {len(flat)} tensors on the numerical side but {self.n_out} under the tape; "
                "the output structure must not depend on the input values."
            )
        res = []
        for k in self.keep:
            v = np.asarray(flat[k][1]._value)
            res.append(v.astype(_WIDE[_kind(v.dtype)]))
        return res


def is_inexact(dt: Any) -> bool:
    """Floating or complex (bfloat16 included): the dtypes a gradient flows through."""
    d = np.dtype(dt)
    return d.kind in "fc" or d.name == "bfloat16"


def _kind(dt: np.dtype) -> str:
    return "c" if np.dtype(dt).kind == "c" else "f"


def flatten_outputs(out: Any) -> list:
    """``[(path, tensor)]`` for every Tensor/Variable in ``fn``'s (possibly nested) result."""
    pairs, _ = jax.tree_util.tree_flatten_with_path(out, is_leaf=lambda v: isinstance(v, Tensor | VariableBase))
    return [(path, v) for path, v in pairs if isinstance(v, Tensor | VariableBase)]


def directional(ev: Evaluator, p: int, v: np.ndarray) -> list:
    """``d/dt fn(x + t v)`` at 0 for every kept output: the five-point central stencil.

    Its truncation error is O(h^4) (h = ``ev.step``), so in float64 it is
    accurate to about 10 digits for smooth functions.
    """
    h = ev.step
    f = {t: ev({p: t * h * v}) for t in (-2, -1, 1, 2)}
    return [(f[-2][k] - 8.0 * f[-1][k] + 8.0 * f[1][k] - f[2][k]) / (12.0 * h) for k in range(len(f[1]))]


def mixed_second(ev: Evaluator, scalar: Callable[[list], float], dv: dict, dw: dict) -> float:
    """``d2/ds dt L(x + s dv + t dw)`` at 0, ``L = scalar(outputs)``; ``dv``/``dw`` map leaf positions to directions.

    The four-point mixed stencil is O(h^2); one Richardson step (steps h and
    2h) cancels that term, leaving O(h^4).
    """

    def at(s: float, t: float) -> float:
        deltas: dict = {}
        for p, v in dv.items():
            deltas[p] = deltas.get(p, 0.0) + s * v
        for q, w in dw.items():
            deltas[q] = deltas.get(q, 0.0) + t * w
        return scalar(ev(deltas))

    def m(h: float) -> float:
        return (at(h, h) - at(h, -h) - at(-h, h) + at(-h, -h)) / (4.0 * h * h)

    h = ev.step
    return (4.0 * m(h) - m(2.0 * h)) / 3.0
