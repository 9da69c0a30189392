"""TF's gradient functions, written with the op library's own primitives: a table for the interpreted tier.

A new tape's first gradient runs op by op (``_engine._interpret``). TF computes an
op's gradient with other ops: ``MulGrad`` is ``grad * y``, ``SinGrad`` is
``grad * cos(x)``, ``SumGrad`` broadcasts ``grad`` back. The rules below do the same
with tapejax's primitives, in two settings:

* **Nothing watches the backward pass** (a plain first gradient). ``run`` calls each
  primitive's kernel on arrays. The cotangents reuse kernels the forward pass compiled
  (``x * y``'s for ``grad * y``), where each op signature's generic pullback is a
  program of its own to trace, and for ``pow`` (a custom JVP rule) or a matmul an
  expensive one. (Not for the ops in ``WATCHED_ONLY``: see there.)
* **A tape or accumulator watches it** (a nested tape, a persistent tape asked inside
  its block). ``run`` is ``bind``: each op of the rule is recorded over the forward
  pass's tensors, exactly as TF records its gradient ops. A second derivative then
  differentiates ``cos`` and ``multiply`` with these same rules, instead of tracing
  and linearizing the pullback of a pullback through JAX (milliseconds per op
  signature, most of a first Hessian's time). Connectivity is TF's by construction:
  a later derivative reaches what the recorded ops read.

Each rule is ``rule(xs, ct, act, params, run) -> list | None``: the cotangents of the
inputs listed in ``act``, from the one output's cotangent ``ct`` (JAX's convention: no
conjugation here, as in the generic pullback), or None where the rule does not apply
(broadcasting, a weakly typed operand, a dtype whose arithmetic JAX widens): the generic
pullback runs instead. ``xs`` and ``ct`` are arrays (and Python scalars), or, watched,
Tensors. A rule applies only where each cotangent it returns has exactly its input's
shape, dtype and weak type, and computes exactly the IEEE operations of ``jax.vjp`` of
the op, so the values agree bit for bit with the generic pullback
(``tests/test_gradfns.py`` checks both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._core._recorder import Tensor
from .._engine._interpret import ADD, OUTPUT_RULES
from ._machinery import PRIMS, _count

__all__ = ["RULES", "GRAD_KERNEL_RULES", "WATCHED_ONLY"]

Rule = Callable[[tuple, Any, tuple, dict, Callable[..., Any]], "list | None"]


def _av(x: Any) -> Any:
    # Shape, dtype and weak type without computing a lazy tensor's value.
    return x._aval if isinstance(x, Tensor) else x


def _typed_like(ct: Any, x: Any) -> bool:
    # The same dtype and weak type (a cotangent has its input's).
    x, ct = _av(x), _av(ct)
    return getattr(x, "dtype", None) == ct.dtype and getattr(x, "weak_type", False) == getattr(ct, "weak_type", False)


def _like(ct: Any, x: Any) -> bool:
    return getattr(_av(x), "shape", None) == _av(ct).shape and _typed_like(ct, x)


# The nonlinear rules: float32 and float64 only. A narrower float's arithmetic may be
# widened by JAX (a mean of float16 sums in float32) and complex values follow JAX's
# cotangent convention through other formulas: the generic pullback keeps those.
_PLAIN = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _plain(ct: Any, x: Any) -> bool:
    return _like(ct, x) and _av(x).dtype in _PLAIN


P = PRIMS


def _unbroadcast(c: Any, x: Any, run: Callable) -> Any:
    # ``c`` (the cotangent of a broadcast result) summed back to x's shape (TF's
    # BroadcastGradientArgs, then ``reduce_sum`` and ``reshape``); None where x's dtype or
    # weak type is not c's, or x does not broadcast to c.
    if not _typed_like(c, x):
        return None
    cs, xs = tuple(_av(c).shape), tuple(getattr(_av(x), "shape", ()))
    if cs == xs:
        return c
    lead = len(cs) - len(xs)
    if lead < 0 or any(n != 1 and n != cs[lead + i] for i, n in enumerate(xs)):
        return None
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(xs) if n == 1 and cs[lead + i] != 1)
    r = run(P["reduce_sum"], c, axis=axes, keepdims=False)
    if tuple(n for i, n in enumerate(cs) if i not in axes) != xs:
        r = run(P["reshape"], r, shape=xs)
    return r


def _all(out: list) -> list | None:
    return None if any(o is None for o in out) else out


# (Each rule checks every input before it runs an op: a watched rule that declined after
# binding one would leave an unused op on the tapes.)


def _add(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    if all(_like(ct, xs[j]) for j in act):
        return [ct for _ in act]
    if len(xs) != 2 or not all(_typed_like(ct, xs[j]) for j in act):
        return None
    return _all([_unbroadcast(ct, xs[j], run) for j in act])


def _subtract(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    if all(_like(ct, xs[j]) for j in act):
        return [ct if j == 0 else run(P["negative"], ct) for j in act]
    if not all(_typed_like(ct, xs[j]) for j in act):
        return None
    out = [_unbroadcast(ct, xs[j], run) for j in act]
    return _all([o if j == 0 or o is None else run(P["negative"], o) for j, o in zip(act, out)])


def _multiply(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # MulGrad: grad * y and x * grad, in the forward's argument order, so each product
    # has the forward call's argument types and hits its compiled kernel; summed back
    # over the axes the input was broadcast along.
    if not all(_typed_like(ct, xs[j]) for j in act):
        return None
    x, y = xs
    return _all([_unbroadcast(run(P["multiply"], ct, y) if j == 0 else run(P["multiply"], x, ct), xs[j], run)
                 for j in act])


def _divide(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # RealDivGrad for x: grad / y. The divisor's gradient (-grad * x / y**2) is not one op.
    if act != (0,) or not _like(ct, xs[0]):
        return None
    return [run(P["divide"], ct, xs[1])]


def _negative(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    if not _like(ct, xs[0]):
        return None
    return [run(P["negative"], ct)]


def _identity(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    return [ct] if _like(ct, xs[0]) else None


def _transpose(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # TransposeGrad: the inverse permutation (a matrix transpose is its own inverse, so a
    # program that transposed forward has the kernel); conj's cotangent is conj'd too.
    if not _typed_like(ct, xs[0]):
        return None
    perm = params["perm"]
    inv = None if perm is None else tuple(sorted(range(len(perm)), key=lambda i: perm[i]))
    return [run(P["transpose"], ct, perm=inv, conj=params["conj"])]


def _reshape(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # ReshapeGrad: back to the input's shape.
    if not _typed_like(ct, xs[0]):
        return None
    return [run(P["reshape"], ct, shape=tuple(_av(xs[0]).shape))]


def _stack(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # PackGrad (unstack): each input's cotangent is ct indexed along the axis, by the
    # getitem kernel that ``x[i]`` compiles (the index is a traced argument there).
    axis = params.get("axis", 0)
    if axis < 0:
        axis += len(_av(ct).shape)
    if not all(_typed_like(ct, xs[j]) for j in act):
        return None
    spec = (("S", (None, None, None)),) * axis + ("T",)
    return [run(P["getitem"], ct, j, spec=spec) for j in act]


def _sin(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # SinGrad: grad * cos(x) (JAX's sin rule: the same product).
    if not _plain(ct, xs[0]):
        return None
    return [run(P["multiply"], ct, run(P["cos"], xs[0]))]


def _cos(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # CosGrad: -grad * sin(x). A negation is exact, so where it goes does not change a bit.
    if not _plain(ct, xs[0]):
        return None
    return [run(P["multiply"], ct, run(P["negative"], run(P["sin"], xs[0])))]


def _log(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # LogGrad: grad * reciprocal(x); JAX's rule (and so the generic pullback) divides.
    if not _plain(ct, xs[0]):
        return None
    return [run(P["divide"], ct, xs[0])]


def _square(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # SquareGrad: grad * (2 * x).
    if not _plain(ct, xs[0]):
        return None
    return [run(P["multiply"], ct, run(P["multiply"], 2.0, xs[0]))]


def _pow(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # PowGrad for a Python-number exponent: grad * (y * pow(x, y - 1)). The exponent and
    # ``y - 1`` are rounded to x's dtype first, as the op's rule computes them
    # (``_tfgrad.pow``), and passed as Python floats that hold those values exactly.
    x, y = xs
    if act != (0,) or type(y) not in (int, float) or not _plain(ct, x):
        return None
    dt = _av(x).dtype.type
    yf = dt(y)
    return [run(P["multiply"], ct, run(P["multiply"], float(yf), run(P["pow"], x, float(yf - dt(1)))))]


def _sum_back(ct: Any, x: Any, params: dict, run: Callable) -> Any:
    # The reduced axes put back (size 1), then broadcast to x's shape: the transpose of a
    # sum is a copy, so any route gives the same bits.
    shape = tuple(_av(x).shape)
    axis = params.get("axis")
    if not params.get("keepdims") and axis is not None and shape:
        kept = tuple(1 if a in axis else n for a, n in enumerate(shape))
        ct = run(P["reshape"], ct, shape=kept)
    return run(P["broadcast_to"], ct, shape=shape)


def _reduce_sum(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # SumGrad: grad broadcast back to the input's shape.
    if not _typed_like(ct, xs[0]) or _av(xs[0]).dtype not in _PLAIN:
        return None
    return [_sum_back(ct, xs[0], params, run)]


def _reduce_mean(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # MeanGrad: grad / n, then broadcast back. jnp.mean divides by the constant n, which
    # XLA compiles as a product with its reciprocal (rounded to x's dtype): the same
    # product here gives the generic pullback's bits (float16's sum is widened, hence
    # float32 and float64 only).
    x = xs[0]
    if not _typed_like(ct, x) or _av(x).dtype not in _PLAIN:
        return None
    n = _count(_av(x), params.get("axis"))
    if n == 0:
        return None
    dt = _av(x).dtype.type
    return [_sum_back(run(P["multiply"], ct, float(dt(1) / dt(n))), x, params, run)]


def _matrices(xs: tuple, ct: Any) -> bool:
    # Two matrices of the cotangent's dtype (float32 or float64).
    return _av(ct).dtype in _PLAIN and all(len(_av(x).shape) == 2 and _typed_like(ct, x) for x in xs)


def _matmul(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # MatMulGrad for two matrices: grad_a = grad @ b^T, grad_b = a^T @ grad, each by the dot
    # JAX's pullback runs (``matmul_grad_a``, ``matmul_grad_b``), so the bits are its.
    if any(params.values()) or not _matrices(xs, ct):
        return None
    a, b = xs
    return [run(P["matmul_grad_a"], ct, b) if j == 0 else run(P["matmul_grad_b"], ct, a) for j in act]


def _matmul_grad_a(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # y = c @ b^T: dc = g @ b, db = g^T @ c (``matmul_grad_b(c, g)``).
    if not _matrices(xs, ct):
        return None
    c, b = xs
    mm = P["matmul"]
    return [run(mm, ct, b, ta=False, tb=False, aa=False, ab=False) if j == 0 else run(P["matmul_grad_b"], c, ct)
            for j in act]


def _matmul_grad_b(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
    # y = a^T @ c: dc = a @ g, da = c @ g^T (``matmul_grad_a(c, g)``).
    if not _matrices(xs, ct):
        return None
    c, a = xs
    mm = P["matmul"]
    return [run(mm, a, ct, ta=False, tb=False, aa=False, ab=False) if j == 0 else run(P["matmul_grad_a"], c, ct)
            for j in act]


# The fused gradient kernels of ops whose gradient reads their output (``_engine._interpret``'s
# ``OUTPUT_RULES``: TanhGrad(y, grad) and friends) are what a nested gradient records for
# tanh, sigmoid and exp; a second derivative passes through them. Their rules follow the
# kernels' formulas term by term, as JAX's pullback of the kernel computes them.


def _output_grad(name: str, d_y: Callable) -> Rule:
    # The rule of a fused kernel K(y, c) = c * f'(y): for c, K(y, ct) itself (the kernel is
    # linear in c); for y, ``d_y(y, c, ct, run)``.
    def rule(xs: tuple, ct: Any, act: tuple, params: dict, run: Callable) -> list | None:
        if not all(_plain(ct, x) for x in xs):
            return None
        y, c = xs
        return [run(OUTPUT_RULES[name], y, ct) if j == 1 else d_y(y, c, ct, run) for j in act]

    return rule


def _tanh_d_y(y: Any, c: Any, ct: Any, run: Callable) -> Any:
    # c * (1 - y * y): -(c * ct) * y, once for each factor of y * y.
    p = run(P["multiply"], run(P["negative"], run(P["multiply"], c, ct)), y)
    return run(P["add"], p, p)


def _sigmoid_d_y(y: Any, c: Any, ct: Any, run: Callable) -> Any:
    # c * (y * (1 - y)): (c * ct) * (1 - y) - y * (c * ct).
    b = run(P["multiply"], c, ct)
    return run(P["add"], run(P["multiply"], b, run(P["subtract"], 1.0, y)), run(P["negative"], run(P["multiply"], y, b)))


GRAD_KERNEL_RULES: dict[str, Rule] = {
    "exp": _output_grad("exp", lambda y, c, ct, run: run(P["multiply"], c, ct)),  # ExpGrad(y, c) = c * y
    "tanh": _output_grad("tanh", _tanh_d_y),
    "sigmoid": _output_grad("sigmoid", _sigmoid_d_y),
}


RULES: dict[str, Rule] = {
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
    "sin": _sin,
    "cos": _cos,
    "log": _log,
    "square": _square,
    "pow": _pow,
    "reduce_sum": _reduce_sum,
    "reduce_mean": _reduce_mean,
    "matmul": _matmul,
    "matmul_grad_a": _matmul_grad_a,
    "matmul_grad_b": _matmul_grad_b,
}

# Watched only: an elementwise function whose generic pullback is one small program (cos
# and a product for sin) that a long tape calls once an op; the rule would be two or three
# kernel calls an op (chain_2000's first gradient, 500 sin ops: 5 ms more). Nested, the
# rule's recorded ops are what spare the second derivative its traces.
WATCHED_ONLY = frozenset({"sin", "cos", "log", "square"})

for _name, _rule in RULES.items():
    PRIMS[_name].vjp_rule = _rule
    PRIMS[_name].vjp_rule_on_arrays = _name not in WATCHED_ONLY
for _name, _rule in GRAD_KERNEL_RULES.items():
    OUTPUT_RULES[_name].vjp_rule = _rule

# The backward pass's own cotangent sums: a second derivative passes through them as
# through an add.
ADD.vjp_rule = _add
