"""TF's gradient functions of the linear ops, on arrays: a table for the interpreted tier.

A new tape's first gradient runs op by op (``_engine._interpret``), and each op
signature's generic pullback is a program XLA compiles once. For the ops below the
pullback is the op itself, or another op the forward pass already ran on the same
shapes: TF's ``MulGrad`` is ``grad * y``, its ``NegGrad`` is ``-grad``, ``PackGrad``
indexes the cotangent. Computed with those ops' own kernels, the backward pass of a
short tape compiles almost nothing new (the forward pass compiled them), which is
most of the time to a first gradient.

Each rule is ``rule(in_vals, ct, act, params) -> list | None``: the cotangents of the
inputs listed in ``act`` (JAX's convention: no conjugation here, as in the generic
pullback), or None where the rule does not apply (broadcasting, a weakly typed
operand): the generic pullback runs instead. A rule applies only where each
cotangent it returns has exactly its input's shape, dtype and weak type, so the
values agree with ``jax.vjp`` of the op (the same IEEE operations).

The interpreter uses them only where no tape or accumulator watches the backward
pass; a watched backward pass binds the generic pullback as a recorded op, whose
connectivity the interpreter analyses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._machinery import PRIMS

__all__ = ["RULES"]


def _typed_like(ct: Any, x: Any) -> bool:
    # The same dtype and weak type (a cotangent has its input's).
    return getattr(x, "dtype", None) == ct.dtype and getattr(x, "weak_type", False) == getattr(ct, "weak_type", False)


def _like(ct: Any, x: Any) -> bool:
    return getattr(x, "shape", None) == ct.shape and _typed_like(ct, x)


def _add(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    if not all(_like(ct, vals[j]) for j in act):
        return None
    return [ct for _ in act]


def _subtract(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    if not all(_like(ct, vals[j]) for j in act):
        return None
    neg = PRIMS["negative"].impl
    return [ct if j == 0 else neg(ct) for j in act]


def _multiply(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    # MulGrad: grad * y and x * grad, in the forward's argument order, so each product
    # has the forward call's argument types and hits its compiled kernel.
    if not all(_like(ct, vals[j]) for j in act):
        return None
    mul = PRIMS["multiply"].impl
    x, y = vals
    return [mul(ct, y) if j == 0 else mul(x, ct) for j in act]


def _divide(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    # RealDivGrad for x: grad / y. The divisor's gradient (-grad * x / y**2) is not one op.
    if act != (0,) or not _like(ct, vals[0]):
        return None
    return [PRIMS["divide"].impl(ct, vals[1])]


def _negative(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    if not _like(ct, vals[0]):
        return None
    return [PRIMS["negative"].impl(ct)]


def _identity(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    return [ct] if _like(ct, vals[0]) else None


def _transpose(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    # TransposeGrad: the inverse permutation (a matrix transpose is its own inverse, so a
    # program that transposed forward has the kernel); conj's cotangent is conj'd too.
    if not _typed_like(ct, vals[0]):
        return None
    perm = params["perm"]
    inv = None if perm is None else tuple(sorted(range(len(perm)), key=lambda i: perm[i]))
    return [PRIMS["transpose"].impl(ct, perm=inv, conj=params["conj"])]


def _reshape(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    # ReshapeGrad: back to the input's shape.
    if not _typed_like(ct, vals[0]):
        return None
    return [PRIMS["reshape"].impl(ct, shape=tuple(vals[0].shape))]


def _stack(vals: tuple, ct: Any, act: tuple, params: dict) -> list | None:
    # PackGrad (unstack): each input's cotangent is ct indexed along the axis, by the
    # getitem kernel that ``x[i]`` compiles (the index is a traced argument there).
    axis = params.get("axis", 0)
    if axis < 0:
        axis += ct.ndim
    if not all(_typed_like(ct, vals[j]) for j in act):
        return None
    spec = (("S", (None, None, None)),) * axis + ("T",)
    get = PRIMS["getitem"].impl
    return [get(ct, j, spec=spec) for j in act]


RULES: dict[str, Callable[[tuple, Any, tuple, dict], list | None]] = {
    "add": _add,
    "add_n": _add,
    "subtract": _subtract,
    "multiply": _multiply,
    "divide": _divide,
    "negative": _negative,
    "identity": _identity,
    "stack": _stack,
    "transpose": _transpose,
    "reshape": _reshape,
}

for _name, _rule in RULES.items():
    PRIMS[_name].vjp_values = _rule
